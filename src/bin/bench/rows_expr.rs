//! Expression reductions over short rows (group `reduce_rows_expr`): one pass against the
//! two steps it fuses and the CPU twin.

use super::data::{dense, rand_bf16, rand_f32, Operand};
use super::harness::Bench;
use super::report::{check_label_ulp, report};
use super::timing::{median_ms, ROTATE_BYTES};
use strided_apply::verify::Distance;
use strided_apply::{bf16, DeviceTensor, Elem, Gpu, Layout, Result};

/// Each column's maximum of a row-major matrix with rows of `cols` elements (no NaN in it).
pub(super) fn col_max<T: Copy + PartialOrd>(host: &[T], cols: usize) -> Vec<T> {
    let mut m = host[..cols].to_vec();
    for r in host.chunks(cols).skip(1) {
        for (a, &b) in m.iter_mut().zip(r) {
            if b > *a {
                *a = b;
            }
        }
    }
    m
}

/// Each row's maximum of a row-major matrix with rows of `len` elements (no NaN in it).
pub(super) fn row_max<T: Copy + PartialOrd>(host: &[T], len: usize) -> Vec<T> {
    host.chunks(len)
        .map(|r| {
            r.iter()
                .copied()
                .fold(r[0], |a, b| if b > a { b } else { a })
        })
        .collect()
}

/// Times the expression `f` over `x` (`[rows, len]`) and `m` (`[rows, 1]`, broadcast along
/// each row) reduced by `op` over axis 1 (`Compiled::reduce`, one pass, no temporary) into a
/// NaN-poisoned `[rows]` output of `T` (or, with `axis` 0, `x` `[len, cols]` and `m` `[1,
/// cols]` reduced over axis 0 into `[cols]`), and checks one result against the CPU twin
/// (`Compiled::reduce_cpu`: both fold in the library's order, so bit for bit where the
/// expression's ops are exact; within `max_ulp` where it has transcendentals, whose values
/// differ in the last bits on the two sides). Bytes: `x` and
/// `m` read once each (`(rows * len + rows) * size_of::<T>()`, the output not counted, as
/// [`bench_reduce`]); elements: `x`'s. Operand sets that fit in L2 are rotated.
///
/// [`bench_reduce`]: super::reductions::bench_reduce
#[allow(clippy::too_many_arguments)]
pub(super) fn bench_expr_rows<T: Elem + Distance>(
    gpu: &Gpu,
    case: &str,
    f: &strided_apply::expr::Compiled,
    op: strided_apply::expr::ReduceOp,
    x: &Operand<T>,
    m: &Operand<T>,
    poison: T,
    max_ulp: u64,
    axis: usize,
) -> Result<()> {
    use strided_apply::expr::{DeviceArg, HostTensor, HostTensorMut};
    let rows = m.layout.numel();
    let out = Layout::contiguous(&[rows])?;
    let n = x.layout.numel();
    let bytes = (n + rows) * size_of::<T>();
    let sets = ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64);
    let up = |o: &Operand<T>| {
        DeviceTensor::from_slice(gpu, &o.host, &[o.host.len()])?.with_layout(o.layout.clone())
    };
    let mut tensors = Vec::with_capacity(sets);
    for _ in 0..sets {
        let dout = DeviceTensor::from_slice(gpu, &vec![poison; rows], &[rows])?;
        tensors.push((up(x)?, up(m)?, dout));
    }
    let run = |dx: &DeviceTensor<T>, dm: &DeviceTensor<T>, dout: &mut DeviceTensor<T>| {
        f.reduce(
            gpu,
            op,
            dout,
            &[DeviceArg::from(dx), DeviceArg::from(dm)],
            &[],
            &[axis],
        )
    };
    let (dx, dm, dout) = &mut tensors[0];
    run(dx, dm, dout)?;
    let got = dout.buffer_to_vec(gpu)?;
    let mut want = vec![poison; rows];
    f.reduce_cpu(
        op,
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), T::TYPE, &out),
        &[
            HostTensor::new(bytemuck::cast_slice(&x.host), T::TYPE, &x.layout),
            HostTensor::new(bytemuck::cast_slice(&m.host), T::TYPE, &m.layout),
        ],
        &[],
        &[axis],
    )?;
    let check = check_label_ulp(&got, &want, max_ulp);
    let ms = median_ms(gpu, |i| {
        let (dx, dm, dout) = &mut tensors[i % sets];
        run(dx, dm, dout)
    })?;
    report(case, T::NAME, n, bytes, ms, &check);
    Ok(())
}

/// The two expression reductions of one random `[rows, len]` matrix `x` of `T` (built here,
/// dropped at the end) with `m` its row maxima (`[rows, 1]`, computed on the host):
/// `sumexp_rows{len}_{T}`, the sum over each row of `exp(x - m)` (softmax's denominator),
/// and `sqdev_rows{len}_{T}`, the mean over each row of `(x - m) * (x - m)`. Both compile
/// for `x` and `m` of `T`, so the output is `T` (a bf16 expression computes in f32 and
/// rounds each value once to bf16 before it is folded in f32).
pub(super) fn expr_rows<T: Elem + Distance + PartialOrd>(
    gpu: &Gpu,
    rows: usize,
    len: usize,
    seed: u64,
    rand: impl Fn(u64) -> T,
    poison: T,
    cols: bool,
) -> Result<()> {
    use strided_apply::expr::{Arg, Expr, ReduceOp};
    let (x, m) = if cols {
        let x = dense(&[len, rows], seed, rand)?;
        let m = Operand {
            host: col_max(&x.host, rows),
            layout: Layout::contiguous(&[1, rows])?,
        };
        (x, m)
    } else {
        let x = dense(&[rows, len], seed, rand)?;
        let m = Operand {
            host: row_max(&x.host, len),
            layout: Layout::contiguous(&[rows, 1])?,
        };
        (x, m)
    };
    let args = [("x", Arg::Tensor(T::TYPE)), ("m", Arg::Tensor(T::TYPE))];
    // `exp`: each side within 2 ulp of an f64 reference (`ops::Tolerance`), so a sum of
    // them differs by a few ulp of the sum at most; the squares are exact.
    for (name, text, op, max_ulp) in [
        ("sumexp", "exp(x - m)", ReduceOp::Sum, 8),
        ("sqdev", "(x - m) * (x - m)", ReduceOp::Mean, 0),
    ] {
        let f = Expr::parse(text)?.compile(&args, None)?;
        let (kind, axis) = if cols { ("cols", 0) } else { ("rows", 1) };
        let case = format!("{name}_{kind}{len}_{}", T::NAME);
        bench_expr_rows(gpu, &case, &f, op, &x, &m, poison, max_ulp, axis)?;
    }
    Ok(())
}

/// Expression reductions over short rows (issue #41): dim 1 of a contiguous `[total / len,
/// len]` matrix `x`, `total` 2^28 elements (2^24 quick), rows of 128 to 32768 elements, with
/// a `[rows, 1]` operand `m` broadcast along each row (see [`expr_rows`]); then columns of
/// 1024 and 32768 elements (dim 0 of `[len, total / len]`, `m` `[1, total / len]`). For each
/// length, one f32 and then one bf16 matrix, each built once and dropped before the next;
/// cases `{sumexp,sqdev}_{rows,cols}{len}_{dtype}`, in the order of [`GROUPS`].
///
/// [`GROUPS`]: super::groups::GROUPS
pub(super) fn short_rows_expr(bench: &Bench) -> Result<()> {
    let (gpu, quick) = (&bench.gpu, bench.quick);
    let total = if quick { 1 << 24 } else { 1 << 28 };
    for len in [128, 1024, 4096, 32768] {
        let rows = total / len;
        expr_rows(gpu, rows, len, 57, rand_f32, f32::NAN, false)?;
        expr_rows(gpu, rows, len, 58, rand_bf16, bf16::NAN, false)?;
    }
    // Columns: `x` `[len, total / len]`, `m` its column maxima `[1, total / len]`, reduced
    // over axis 0 (the reduced axis strided, the kept one unit-stride).
    for len in [1024, 32768] {
        let cols = total / len;
        expr_rows(gpu, cols, len, 59, rand_f32, f32::NAN, true)?;
        expr_rows(gpu, cols, len, 60, rand_bf16, bf16::NAN, true)?;
    }
    Ok(())
}
