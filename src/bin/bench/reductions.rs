//! Reductions (groups `reduce`, `reduce_rows`, `reduce_cols_1b`, `reduce_cols_slot`): each
//! checked against the CPU twin and timed.

use super::data::{dense, rand_bf16, rand_f16, rand_f32, Operand};
use super::harness::Bench;
use super::report::{check_label, report};
use super::timing::{median_ms, ROTATE_BYTES};
use strided_apply::gpu_kernels::ops::Sub;
use strided_apply::gpu_kernels::reduce::{
    Amax, Argmax, MapReduce, Mean, OutOf, ReduceKernels, Sum, SumSq,
};
use strided_apply::verify::Distance;
use strided_apply::{bf16, f16, reduce, DeviceTensor, Elem, Gpu, Layout, Result};

/// Times `out = op(inputs over axes)` through `reduce::reduce` (one input) or
/// `reduce::map_reduce` (two) into a poisoned output of shape `out_shape` and checks one
/// result against the CPU twin (exact: both reduce in one order). Bytes: the inputs read
/// once (the output is not counted); elements: one input's. Inputs that fit in L2 are
/// rotated.
#[allow(clippy::too_many_arguments)]
pub(super) fn bench_reduce<S, T, const K: usize>(
    gpu: &Gpu,
    case: &str,
    op: S,
    out_shape: &[usize],
    inputs: [&Operand<T>; K],
    axes: &[usize],
    poison: OutOf<S, T, K>,
) -> Result<()>
where
    S: ReduceKernels<T, K>,
    T: Elem,
    OutOf<S, T, K>: Elem + Distance,
{
    let out = Layout::contiguous(out_shape)?;
    let m = out.numel();
    let n = inputs[0].layout.numel();
    let bytes = n * size_of::<T>() * K;
    let sets = ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64);
    let mut tensors = Vec::with_capacity(sets);
    for _ in 0..sets {
        let di = inputs
            .iter()
            .map(|x| {
                DeviceTensor::from_slice(gpu, &x.host, &[x.host.len()])?
                    .with_layout(x.layout.clone())
            })
            .collect::<Result<Vec<_>>>()?;
        let dout =
            DeviceTensor::from_slice(gpu, &vec![poison; m], &[m])?.with_layout(out.clone())?;
        tensors.push((di, dout));
    }
    let run = |di: &[DeviceTensor<T>], dout: &mut DeviceTensor<OutOf<S, T, K>>| {
        let di: [&DeviceTensor<T>; K] = std::array::from_fn(|k| &di[k]);
        reduce::reduce_n(gpu, op, dout, di, axes)
    };
    let (di, dout) = &mut tensors[0];
    run(di, dout)?;
    let got = dout.buffer_to_vec(gpu)?;
    let mut want = vec![poison; m];
    let host = inputs.map(|x| (&x.host[..], &x.layout));
    reduce::reduce_n_cpu(op, (&mut want, &out), host, axes)?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, |i| {
        let (di, dout) = &mut tensors[i % sets];
        run(di, dout)
    })?;
    report(case, T::NAME, n, bytes, ms, &check);
    Ok(())
}

/// Reductions (bytes: the input read once). Rows and columns of a big × big matrix, a
/// whole 2^28-element vector into a 0-d output, and a permuted view reduced over two
/// non-adjacent axes.
pub(super) fn reductions(bench: &Bench) -> Result<()> {
    let (gpu, quick, big) = (&bench.gpu, bench.quick, bench.big);
    let m = dense(&[big, big], 50, rand_f32)?;
    bench_reduce(gpu, "sum_dim1_f32", Sum, &[big], [&m], &[1], f32::NAN)?;
    bench_reduce(gpu, "sum_dim0_f32", Sum, &[big], [&m], &[0], f32::NAN)?;
    bench_reduce(gpu, "amax_dim1_f32", Amax, &[big], [&m], &[1], f32::NAN)?;
    bench_reduce(gpu, "argmax_dim1_f32", Argmax, &[big], [&m], &[1], -1i64)?;
    drop(m);
    let n = if quick { 1 << 24 } else { 1 << 28 };
    let v = dense(&[n], 51, rand_f32)?;
    bench_reduce(gpu, "sum_all_f32", Sum, &[], [&v], &[0], f32::NAN)?;
    bench_reduce(gpu, "sumsq_all_f32", SumSq, &[], [&v], &[0], f32::NAN)?;
    let w = dense(&[n], 54, rand_f32)?;
    let sqdiff = MapReduce {
        reduce: SumSq,
        map: Sub,
    };
    bench_reduce(gpu, "sqdiff_all_f32", sqdiff, &[], [&v, &w], &[0], f32::NAN)?;
    drop((v, w));
    // (64,64,128,256) permuted (3,1,0,2) to (256,64,64,128), summed over axes 1 and 3.
    let shape = if quick {
        [16, 16, 32, 64]
    } else {
        [64, 64, 128, 256]
    };
    let src = dense(&shape, 52, rand_f32)?;
    let perm = Operand {
        layout: src.layout.permute(&[3, 1, 0, 2])?,
        host: src.host,
    };
    let ps = perm.layout.shape();
    let out = [ps[0], ps[2]];
    bench_reduce(gpu, "sum_perm13_f32", Sum, &out, [&perm], &[1, 3], f32::NAN)?;
    drop(perm);
    let m16 = dense(&[big, big], 53, rand_bf16)?;
    bench_reduce(gpu, "sum_dim1_bf16", Sum, &[big], [&m16], &[1], bf16::NAN)?;
    Ok(())
}

/// Short rows (issue #41): dim 1 of a contiguous `[total / len, len]` matrix, `total` 2^28
/// elements (2^24 quick), rows of 16 to 32768 elements (a normalisation's statistics, a
/// classifier's argmax). For each length, one f32 and then one bf16 matrix, each built once,
/// reduced by sum, amax, mean, argmax and sumsq (the sum of squares, layer norm's statistic),
/// and dropped before the next; cases `{op}_rows{len}_{dtype}`, in the order of [`GROUPS`].
///
/// [`GROUPS`]: super::groups::GROUPS
pub(super) fn short_rows(bench: &Bench) -> Result<()> {
    let (gpu, quick) = (&bench.gpu, bench.quick);
    let total = if quick { 1 << 24 } else { 1 << 28 };
    for len in [16, 64, 128, 512, 1024, 4096, 32768] {
        let rows = total / len;
        // The five reductions of one random `[rows, len]` matrix of `$t` (NaN-poisoned
        // outputs, -1 for the argmax's indices); the matrix drops at the block's end.
        macro_rules! five {
            ($t:ident, $seed:expr, $rand:expr) => {{
                let m = dense(&[rows, len], $seed, $rand)?;
                let case = |op: &str| format!("{op}_rows{len}_{}", stringify!($t));
                let nan = $t::NAN;
                bench_reduce(gpu, &case("sum"), Sum, &[rows], [&m], &[1], nan)?;
                bench_reduce(gpu, &case("amax"), Amax, &[rows], [&m], &[1], nan)?;
                bench_reduce(gpu, &case("mean"), Mean, &[rows], [&m], &[1], nan)?;
                bench_reduce(gpu, &case("argmax"), Argmax, &[rows], [&m], &[1], -1i64)?;
                bench_reduce(gpu, &case("sumsq"), SumSq, &[rows], [&m], &[1], nan)?;
            }};
        }
        five!(f32, 55, rand_f32);
        five!(bf16, 56, rand_bf16);
    }
    Ok(())
}

/// Column reductions (over axis 0 of a dense `big × big` matrix) whose column kernel folds
/// one-byte values: `all` and `any` of every element type (boolean accumulators) and
/// `sum`, `amax`, `amin`, `prod` of `u8`. Outputs poisoned with a value no reduction
/// writes (`Bool(7)`) or a random-looking byte.
pub(super) fn cols_1b(bench: &Bench) -> Result<()> {
    use strided_apply::gpu_kernels::elem::Bool;
    use strided_apply::gpu_kernels::reduce::{All, Any};
    let (gpu, big) = (&bench.gpu, bench.big);
    // `all` and `any` of one random `big × big` matrix of `$t` (as `short_rows`' `five!`).
    macro_rules! truth {
        ($t:ident, $seed:expr, $rand:expr) => {{
            let m = dense(&[big, big], $seed, $rand)?;
            let case = |op: &str| format!("{op}_dim0_{}", stringify!($t));
            bench_reduce(gpu, &case("all"), All, &[big], [&m], &[0], Bool(7))?;
            bench_reduce(gpu, &case("any"), Any, &[big], [&m], &[0], Bool(7))?;
        }};
    }
    // Mostly true values, a zero now and then (so `all` is false in some columns).
    truth!(Bool, 61, |x| Bool(((x >> 40) % 64 != 0) as u8));
    truth!(u8, 62, |x| (x >> 40) as u8);
    truth!(i32, 63, |x| (x >> 40) as i32 % 4096);
    truth!(u32, 64, |x| (x >> 40) as u32 % 4096);
    truth!(i64, 65, |x| (x >> 40) as i64 % 4096);
    truth!(f32, 66, rand_f32);
    truth!(f64, 67, |x| rand_f32(x) as f64);
    truth!(f16, 68, rand_f16);
    truth!(bf16, 69, rand_bf16);
    u8_col_folds(gpu, &dense(&[big, big], 70, |x| (x >> 40) as u8)?, "dim0")
}

/// `sum`, `amax`, `amin` and `prod` over dim 0 of the `u8` matrix `m` into `u8` (cases
/// `{op}_{shape}_u8`).
pub(super) fn u8_col_folds(gpu: &Gpu, m: &Operand<u8>, shape: &str) -> Result<()> {
    use strided_apply::gpu_kernels::reduce::{Amin, Prod};
    let cols = m.layout.shape()[1];
    let case = |op: &str| format!("{op}_{shape}_u8");
    bench_reduce(gpu, &case("sum"), Sum, &[cols], [m], &[0], 0xa5u8)?;
    bench_reduce(gpu, &case("amax"), Amax, &[cols], [m], &[0], 0xa5u8)?;
    bench_reduce(gpu, &case("amin"), Amin, &[cols], [m], &[0], 0xa5u8)?;
    bench_reduce(gpu, &case("prod"), Prod, &[cols], [m], &[0], 0xa5u8)
}

/// Column reductions that the slot column kernel serves and `reduce_cols_1b` does not time:
/// float `amax` and `amin`, dim 0 of a random `big × big` matrix (whole vectors) and of a
/// `big × (big - 1)` one (element reads), per type; then the `big × (big - 1)` matrices of
/// the one-byte folds that take the order-free kernel where their vectors are whole (`any`
/// and `all` of 1- and 2-byte types, the folds of `u8`).
pub(super) fn cols_slot(bench: &Bench) -> Result<()> {
    use strided_apply::gpu_kernels::elem::Bool;
    use strided_apply::gpu_kernels::reduce::{All, Amin, Any};
    let (gpu, big) = (&bench.gpu, bench.big);
    macro_rules! minmax {
        ($t:ident, $seed:expr, $rand:expr, $poison:expr) => {{
            for (shape, cols) in [("dim0", big), ("dim0odd", big - 1)] {
                let m = dense(&[big, cols], $seed, $rand)?;
                let case = |op: &str| format!("{op}_{shape}_{}", stringify!($t));
                bench_reduce(gpu, &case("amax"), Amax, &[cols], [&m], &[0], $poison)?;
                bench_reduce(gpu, &case("amin"), Amin, &[cols], [&m], &[0], $poison)?;
            }
        }};
    }
    minmax!(f32, 71, rand_f32, f32::NAN);
    minmax!(f64, 72, |x| rand_f32(x) as f64, f64::NAN);
    minmax!(f16, 73, rand_f16, f16::NAN);
    minmax!(bf16, 74, rand_bf16, bf16::NAN);
    let odd = big - 1;
    let case = |op: &str, t: &str| format!("{op}_dim0odd_{t}");
    let m = dense(&[big, odd], 75, |x| Bool(((x >> 40) % 64 != 0) as u8))?;
    bench_reduce(gpu, &case("any", "Bool"), Any, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("all", "Bool"), All, &[odd], [&m], &[0], Bool(7))?;
    let m = dense(&[big, odd], 76, |x| (x >> 40) as u8)?;
    bench_reduce(gpu, &case("any", "u8"), Any, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("all", "u8"), All, &[odd], [&m], &[0], Bool(7))?;
    let m = dense(&[big, odd], 77, rand_f16)?;
    bench_reduce(gpu, &case("all", "f16"), All, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("any", "f16"), Any, &[odd], [&m], &[0], Bool(7))?;
    let m = dense(&[big, odd], 78, rand_bf16)?;
    bench_reduce(gpu, &case("all", "bf16"), All, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("any", "bf16"), Any, &[odd], [&m], &[0], Bool(7))?;
    u8_col_folds(
        gpu,
        &dense(&[big, odd], 79, |x| (x >> 40) as u8)?,
        "dim0odd",
    )
}
