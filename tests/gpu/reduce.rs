//! Reductions against the CPU twin: every source and type over the layouts that reach each
//! kernel path, and the checks the device itself needs (overlap, min of nothing).

use crate::common::{Rng, TestElem};
use crate::errors::expect_err;
use crate::harness::TestResult;
use strided_apply::gpu_kernels::reduce::{OutOf, Reduce};
use strided_apply::{DeviceTensor, Error, Gpu};

/// Values for the reduction cases: floats uniform in [-4, 4) (no NaN or infinity, so every
/// sum shows its order), or ±[0.875, 1.125) for products (long products stay finite);
/// integers as [`TestElem::random`] (small and huge: sums and products wrap).
trait ReduceValue: TestElem {
    fn reduce_value(rng: &mut Rng, near_one: bool) -> Self;
    /// A NaN, for float types.
    fn nan() -> Option<Self> {
        None
    }
}
fn reduce_float(rng: &mut Rng, near_one: bool) -> f64 {
    if near_one {
        let sign = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
        sign * (0.875 + rng.unit() * 0.25)
    } else {
        rng.unit() * 8.0 - 4.0
    }
}
macro_rules! reduce_value {
    (wide $($t:ty),*) => {$( impl ReduceValue for $t {
        fn reduce_value(rng: &mut Rng, near_one: bool) -> Self { reduce_float(rng, near_one) as $t }
        fn nan() -> Option<Self> { Some(<$t>::NAN) }
    } )*};
    (narrow $($t:ident),*) => {$( impl ReduceValue for strided_apply::$t {
        fn reduce_value(rng: &mut Rng, near_one: bool) -> Self {
            strided_apply::$t::from_f64(reduce_float(rng, near_one))
        }
        fn nan() -> Option<Self> { Some(strided_apply::$t::NAN) }
    } )*};
    (int $($t:ty),*) => {$( impl ReduceValue for $t {
        fn reduce_value(rng: &mut Rng, _: bool) -> Self { <$t as TestElem>::random(rng) }
    } )*};
}
reduce_value!(wide f32, f64);
reduce_value!(narrow f16, bf16);
reduce_value!(int i32, i64, u32, u8);
impl ReduceValue for strided_apply::Bool {
    fn reduce_value(_: &mut Rng, _: bool) -> Self {
        strided_apply::Bool::TRUE
    }
}

/// One reduction case: the input view (buffer length, layout), the axes, the output view
/// and the kernel the planner must choose (`None`: not checked).
struct ReduceCase {
    name: &'static str,
    in_len: usize,
    input: strided_apply::Layout,
    axes: Vec<usize>,
    out_len: usize,
    out: strided_apply::Layout,
    variant: Option<strided_apply::reduce::ReduceVariant>,
}

/// The layouts that reach each reduction kernel path: the row kernel with 16-byte vectors
/// (with and without a partial last chunk), without them (misaligned start, strided rows,
/// reversed rows), the column kernel (partial column blocks, keepdim output, reversed
/// reduced axis, a broadcast reduced axis; 16-byte vectors of 4 columns for 4-byte types
/// where aligned, their element reads in a misaligned view), permuted 4-D views over axes
/// (1, 3) (two reduced dimensions: columns into a transposed output when the inner one holds
/// whole chunks, else strided rows into a keepdim output), several groups and the final kernel
/// (1-D n = 2^20 + 3: 16 groups; columns, vector columns and multi-dimensional rows of 2
/// groups), short rows that share the row kernel's blocks (with a partial last block), the
/// order-free column kernel of one-byte accumulators (below), and a reduction of nothing.
fn reduce_cases() -> Vec<ReduceCase> {
    use strided_apply::reduce::ReduceVariant::{Cols, Rows};
    use strided_apply::Layout;
    let c = |s: &[usize]| Layout::contiguous(s).unwrap();
    let case = |name, buffer: &[usize], input: Layout, axes: &[usize], out: Layout, variant| {
        let in_len = buffer.iter().product();
        let out_len = c(out.shape()).numel().max(1) + out.offset() + 64;
        ReduceCase {
            name,
            in_len,
            input,
            axes: axes.to_vec(),
            out_len,
            out,
            variant,
        }
    };
    // [10, 6, 12, 16], strides [192, 1920, 1, 12]: the reduced axes 1 and 3 do not merge;
    // the inner one (16) holds whole chunks of every type, so the column kernel takes it.
    let perm4 = c(&[6, 10, 16, 12]).permute(&[1, 0, 3, 2]).unwrap();
    // [10, 6, 12, 7]: an inner reduced axis of 7 splits chunks: the row kernel (strided).
    let perm4_odd = c(&[6, 10, 7, 12]).permute(&[1, 0, 3, 2]).unwrap();
    vec![
        case(
            "rows-vec",
            &[48, 1024],
            c(&[48, 1024]),
            &[1],
            c(&[48]),
            Some(Rows),
        ),
        case(
            "rows-vec-partial-chunk",
            &[16, 1024],
            c(&[16, 1024]).slice(1, None, Some(1001), 1).unwrap(),
            &[1],
            c(&[16, 1]),
            Some(Rows),
        ),
        case(
            "rows-misaligned-offset-1",
            &[48, 1025],
            c(&[48, 1025]).slice(1, Some(1), None, 1).unwrap(),
            &[1],
            c(&[48]),
            Some(Rows),
        ),
        case(
            "rows-step2",
            &[40, 140],
            c(&[40, 140]).slice(1, None, None, 2).unwrap(),
            &[1],
            c(&[40]),
            Some(Rows),
        ),
        case(
            "rows-flipped",
            &[40, 700],
            c(&[40, 700]).flip(1).unwrap(),
            &[1],
            c(&[40]),
            Some(Rows),
        ),
        // Short rows share the row kernel's blocks (`SLOTS >> row_threads` outputs each, a
        // thread holding up to `ROW_SLOTS` slots):
        // rows of 24 (f32: 6 chunks, 8 slots each, 32 rows a block; 1000 rows leave the
        // last block partial), 4 and 3 elements (f32: one slot each, 256 rows a block;
        // aligned vectors and element reads), 5 elements at stride 2, misaligned rows of 37, and rows of 33 under two kept axes into a
        // transposed output.
        case(
            "short-rows-vec",
            &[1000, 24],
            c(&[1000, 24]),
            &[1],
            c(&[1000]),
            Some(Rows),
        ),
        case(
            "short-rows-of-4",
            &[300, 4],
            c(&[300, 4]),
            &[1],
            c(&[300]),
            Some(Rows),
        ),
        case(
            "short-rows-of-3",
            &[300, 3],
            c(&[300, 3]),
            &[1],
            c(&[300]),
            Some(Rows),
        ),
        case(
            "short-rows-step2",
            &[333, 10],
            c(&[333, 10]).slice(1, None, None, 2).unwrap(),
            &[1],
            c(&[333, 1]),
            Some(Rows),
        ),
        case(
            "short-rows-misaligned",
            &[500, 38],
            c(&[500, 38]).slice(1, Some(1), None, 1).unwrap(),
            &[1],
            c(&[500]),
            Some(Rows),
        ),
        // Rows of up to 128 chunks (f32: 512 elements) pair slots `l` and `l + 64` and run
        // the tree's 32-pair level across warps; the second one ends in a partial chunk.
        case(
            "short-rows-wide",
            &[40, 512],
            c(&[40, 512]),
            &[1],
            c(&[40]),
            Some(Rows),
        ),
        case(
            "short-rows-wide-partial",
            &[33, 257],
            c(&[33, 257]),
            &[1],
            c(&[33]),
            Some(Rows),
        ),
        // Many short rows: f32 rows of 100 (25 chunks, 32 slots, 8 threads a row at four
        // slots each, 94 blocks); rows of 4103 (f32: four whole passes of the 256 slots
        // on 64 threads, then a partial chunk; u8: one whole pass, then a partial one);
        // rows of 3.5 passes (f32: three whole passes, then half the slots); rows past
        // `LONG_ROW_CHUNKS` (f32: two slots a thread, four batches of two passes, a pass
        // of 202 chunks and a partial chunk), and such rows reversed and with a stride of 2
        // (element reads, two slots a thread).
        case(
            "short-rows-many-blocks",
            &[3000, 100],
            c(&[3000, 100]),
            &[1],
            c(&[3000]),
            Some(Rows),
        ),
        case(
            "rows-passes-partial-chunk",
            &[24, 4103],
            c(&[24, 4103]),
            &[1],
            c(&[24]),
            Some(Rows),
        ),
        case(
            "rows-3.5-passes",
            &[20, 3584],
            c(&[20, 3584]),
            &[1],
            c(&[20]),
            Some(Rows),
        ),
        case(
            "rows-long-batches",
            &[4, 9003],
            c(&[4, 9003]),
            &[1],
            c(&[4]),
            Some(Rows),
        ),
        case(
            "rows-long-flipped",
            &[3, 9003],
            c(&[3, 9003]).flip(1).unwrap(),
            &[1],
            c(&[3]),
            Some(Rows),
        ),
        case(
            "rows-long-step-2",
            &[2, 36010],
            c(&[2, 36010]).slice(1, None, None, 2).unwrap(),
            &[1],
            c(&[2]),
            Some(Rows),
        ),
        case(
            "short-rows-2-kept-axes",
            &[7, 45, 33],
            c(&[7, 45, 33]),
            &[2],
            c(&[45, 7]).transpose(0, 1).unwrap(),
            Some(Rows),
        ),
        case(
            "cols",
            &[1000, 96],
            c(&[1000, 96]),
            &[0],
            c(&[96]),
            Some(Cols),
        ),
        case(
            "cols-partial-block-keepdim",
            &[1000, 70],
            c(&[1000, 70]),
            &[0],
            c(&[1, 70]),
            Some(Cols),
        ),
        case(
            "cols-misaligned-offset-1",
            &[600, 97],
            c(&[600, 97]).slice(1, Some(1), None, 1).unwrap(),
            &[0],
            c(&[96]),
            Some(Cols),
        ),
        case(
            "cols-flipped",
            &[700, 40],
            c(&[700, 40]).flip(0).unwrap(),
            &[0],
            c(&[40]),
            Some(Cols),
        ),
        case(
            "cols-broadcast-reduced",
            &[1, 600],
            c(&[1, 600]).broadcast_to(&[8, 600]).unwrap(),
            &[0],
            c(&[600]),
            Some(Cols),
        ),
        case(
            "rows-broadcast-kept",
            &[1, 600],
            c(&[1, 600]).broadcast_to(&[8, 600]).unwrap(),
            &[1],
            c(&[8]),
            Some(Rows),
        ),
        case(
            "permuted-4d-axes-1-3-cols",
            &[6, 10, 16, 12],
            perm4,
            &[1, 3],
            c(&[12, 10]).transpose(0, 1).unwrap(),
            Some(Cols),
        ),
        case(
            "permuted-4d-axes-1-3-rows",
            &[6, 10, 7, 12],
            perm4_odd,
            &[1, 3],
            c(&[10, 1, 12, 1]),
            Some(Rows),
        ),
        case(
            "1d-2^20+3-16-groups",
            &[(1 << 20) + 3],
            c(&[(1 << 20) + 3]),
            &[0],
            c(&[]),
            Some(Rows),
        ),
        // Two groups per output, three outputs: (output, group) pairs share row blocks.
        case(
            "rows-2-groups-3-outputs",
            &[3, (1 << 17) + 9],
            c(&[3, (1 << 17) + 9]),
            &[1],
            c(&[3]),
            Some(Rows),
        ),
        case(
            "cols-2-groups",
            &[(1 << 17) + 5, 3],
            c(&[(1 << 17) + 5, 3]),
            &[0],
            c(&[3]),
            Some(Cols),
        ),
        // The order-free column kernel (any of 1- and 2-byte types, all of 2-byte types,
        // u8 sum/prod/amin/amax) under 16-byte vectors of 16 / size columns: 1040 columns
        // (u8: 8 blocks of 128 and one of 16, threads past the last column) over 300 rows
        // (pieces of 8: a partial last piece, threads without rows); two groups; two
        // reduced dimensions into a transposed output (u8: the inner one of 32 rows,
        // pieces inside it); where vectors would be misaligned, its element reads of 4
        // consecutive columns a thread for `all` of bf16 (rows of an odd width: each starts
        // at another 2 bytes; 1041 columns: a thread past the last 4 reads the last 4; 3
        // columns in `cols-2-groups`: fewer than 4 in all), and the slot kernel's element
        // reads for the others (there, and in a view 8 bytes into the rows, where f16 and
        // bf16 read vectors).
        case(
            "cols-exact-wide",
            &[300, 1040],
            c(&[300, 1040]),
            &[0],
            c(&[1040]),
            Some(Cols),
        ),
        case(
            "cols-exact-2-groups",
            &[(1 << 17) + 5, 32],
            c(&[(1 << 17) + 5, 32]),
            &[0],
            c(&[32]),
            Some(Cols),
        ),
        case(
            "permuted-4d-exact",
            &[6, 4, 32, 32],
            c(&[6, 4, 32, 32]).permute(&[1, 0, 3, 2]).unwrap(),
            &[1, 3],
            c(&[32, 4]).transpose(0, 1).unwrap(),
            Some(Cols),
        ),
        case(
            "cols-exact-fallback",
            &[300, 1040],
            c(&[300, 1040]).slice(1, Some(8), None, 1).unwrap(),
            &[0],
            c(&[1032]),
            Some(Cols),
        ),
        case(
            "cols-exact-odd-width",
            &[301, 1041],
            c(&[301, 1041]),
            &[0],
            c(&[1041]),
            Some(Cols),
        ),
        case(
            "cols-vec-2-groups",
            &[(1 << 17) + 5, 8],
            c(&[(1 << 17) + 5, 8]),
            &[0],
            c(&[8]),
            Some(Cols),
        ),
        case(
            "permuted-3d-2-groups",
            &[520, 2, 260],
            c(&[520, 2, 260]).permute(&[1, 0, 2]).unwrap(),
            &[1, 2],
            c(&[2]),
            Some(Rows),
        ),
        case(
            "n=0",
            &[4],
            Layout::new(&[5, 0], &[1, 1], 0).unwrap(),
            &[1],
            c(&[5]),
            None,
        ),
    ]
}

/// Every [`reduce_cases`] case for one (source, type): GPU against the CPU twin, exact.
/// With two inputs, both have the case's layout (separate buffers). Sources without a
/// column kernel must plan rows where the case expects columns. The values: near one for
/// products; for arg reductions a NaN in about one element of 4096 (floats); for all/any a
/// zero in about one of 1000.
fn reduce_on_gpu<S, T, const K: usize>(
    gpu: &Gpu,
    op: S,
    name: &str,
    rng: &mut Rng,
) -> Result<usize, String>
where
    S: strided_apply::gpu_kernels::reduce::ReduceKernels<T, K>,
    T: ReduceValue,
    OutOf<S, T, K>: TestElem,
{
    use strided_apply::reduce::ReduceVariant::{Cols, Rows};
    use strided_apply::reduce::{plan_reduce, verify_n};
    let has_empty = op.reduction().empty().is_some();
    let near_one = name.starts_with("prod");
    let arg = name.starts_with("arg");
    let truth = name == "all" || name == "any";
    let mut count = 0;
    for case in reduce_cases() {
        let what = format!("{name} {} / {}", T::NAME, case.name);
        let n: usize = case.axes.iter().map(|&a| case.input.shape()[a]).product();
        if let Some(v) = case.variant {
            let inputs = [&case.input; K];
            let plan = plan_reduce(
                &case.out,
                &inputs,
                &case.axes,
                size_of::<T>(),
                has_empty,
                S::COLUMNS,
            )
            .map_err(|e| format!("{what}: plan: {e}"))?
            .ok_or_else(|| format!("{what}: no plan"))?;
            let want = if v == Cols && !S::COLUMNS { Rows } else { v };
            if plan.variant != want {
                return Err(format!(
                    "{what}: planned {:?}, the case is for {want:?}",
                    plan.variant
                ));
            }
        }
        let mut value = || {
            let x = T::reduce_value(rng, near_one);
            match (T::nan(), rng.next() % 4096) {
                (Some(nan), 0) if arg => nan,
                _ if truth && rng.next().is_multiple_of(1000) => T::small(0),
                _ => x,
            }
        };
        let inputs: Vec<Vec<T>> = (0..K)
            .map(|_| (0..case.in_len).map(|_| value()).collect())
            .collect();
        let init = vec![<OutOf<S, T, K>>::poison(); case.out_len];
        let host = std::array::from_fn(|k| (&inputs[k][..], &case.input));
        let r = verify_n(gpu, op, (&init, &case.out), host, &case.axes);
        match r {
            Ok(None) => count += 1,
            Ok(Some(m)) => return Err(format!("{what}: {m}")),
            Err(Error::EmptyReduction { .. }) if n == 0 && !has_empty => count += 1,
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
    Ok(count)
}

pub fn reductions(gpu: &Gpu) -> TestResult {
    use strided_apply::gpu_kernels::ops::{Mul, Sub};
    use strided_apply::gpu_kernels::reduce::{
        All, Amax, Amin, Any, Argmax, Argmin, MapReduce, Mean, Norm2, Prod, Sum, SumSq,
    };
    use strided_apply::{bf16, f16, Bool};
    let e = |e: Error| e.to_string();
    let mut rng = Rng(0x7ed0c3);
    let mut count = 0usize;
    let mut families = 0usize;
    macro_rules! ops {
        ($name:literal, $op:expr, [$($t:ty),*]) => { ops!(1, $name, $op, [$($t),*]) };
        ($k:literal, $name:literal, $op:expr, [$($t:ty),*]) => {$(
            count += reduce_on_gpu::<_, $t, $k>(gpu, $op, $name, &mut rng)?;
            families += 1;
        )*};
    }
    ops!("sum", Sum, [f32, f64, i32, i64, u32, u8, f16, bf16]);
    ops!("prod", Prod, [f32, f64, i32, i64, u32, u8, f16, bf16]);
    ops!("amin", Amin, [f32, f64, i32, i64, u32, u8, f16, bf16]);
    ops!("amax", Amax, [f32, f64, i32, i64, u32, u8, f16, bf16]);
    ops!("mean", Mean, [f32, f64, f16, bf16]);
    ops!("sumsq", SumSq, [f32, f64, f16, bf16]);
    ops!("norm2", Norm2, [f32, f64, f16, bf16]);
    ops!("argmin", Argmin, [f32, f64, i32, i64, u32, u8, f16, bf16]);
    ops!("argmax", Argmax, [f32, f64, i32, i64, u32, u8, f16, bf16]);
    ops!("all", All, [f32, f64, i32, i64, u32, u8, Bool, f16, bf16]);
    ops!("any", Any, [f32, f64, i32, i64, u32, u8, Bool, f16, bf16]);
    let sqdiff = MapReduce {
        reduce: SumSq,
        map: Sub,
    };
    let dot = MapReduce {
        reduce: Sum,
        map: Mul,
    };
    ops!(2, "sqdiff", sqdiff, [f32, f64, f16, bf16]);
    ops!(2, "dot", dot, [f32, f64, f16, bf16]);
    // On the device itself: min of nothing and an output sharing memory with its input are
    // refused before any launch, the buffer untouched; disjoint views of one buffer work.
    let buf = DeviceTensor::from_slice(gpu, &[1.0f32; 13], &[13]).map_err(e)?;
    let mut out = buf.slice(0, Some(5), Some(6), 1).map_err(e)?;
    expect_err(
        strided_apply::reduce::reduce(gpu, Sum, &mut out, &buf, &[0]),
        "reduce: output inside the input",
        |e| matches!(e, Error::ReduceOverlap { operand: "input" }),
    )?;
    let empty = buf
        .slice(0, Some(0), Some(0), 1)
        .map_err(e)?
        .unsqueeze(0)
        .map_err(e)?; // [1, 0]
    let mut out = buf.slice(0, Some(12), None, 1).map_err(e)?;
    expect_err(
        strided_apply::reduce::reduce(gpu, Amin, &mut out, &empty, &[1]),
        "reduce: min of nothing",
        |e| matches!(e, Error::EmptyReduction { operand: "input" }),
    )?;
    if buf.to_vec(gpu).map_err(e)? != [1.0f32; 13] {
        return Err("a refused reduction wrote its output".into());
    }
    let first12 = buf.slice(0, Some(0), Some(12), 1).map_err(e)?;
    strided_apply::reduce::reduce(gpu, Sum, &mut out, &first12, &[0]).map_err(e)?;
    let got = buf.to_vec(gpu).map_err(e)?;
    if got[12] != 12.0 || got[..12] != [1.0f32; 12] {
        return Err(format!(
            "sum of 12 ones into element 12 of the same buffer: {got:?}"
        ));
    }
    // Signed zeros: `amax` is +0 and `amin` -0 whenever both zeros are in a row, wherever
    // they are (the GPU's `max.NaN`/`min.NaN` and the twin's software agree, and neither
    // depends on the order; the twin comparison above counts -0 equal to +0). Rows of
    // 1000 (the row kernel's tree) and one row of 2^20 + 3 (16 groups and the final
    // kernel); a NaN anywhere wins.
    for (rows, len) in [(64usize, 1000usize), (1, (1 << 20) + 3)] {
        let mut x = vec![0.0f32; rows * len];
        let mut want = Vec::new();
        for r in 0..rows {
            let row = &mut x[r * len..(r + 1) * len];
            let zeros = r % 4; // 0: both signs, 1: only +0, 2: only -0, 3: both and a NaN
            for v in row.iter_mut() {
                let neg = match zeros {
                    1 => false,
                    2 => true,
                    _ => rng.next() & 1 == 1,
                };
                *v = if neg { -0.0 } else { 0.0 };
            }
            if zeros == 3 {
                row[(rng.next() as usize) % len] = f32::NAN;
            }
            // (amax bits, amin bits); NaN: any NaN.
            want.push(match zeros {
                1 => (0, 0),
                2 => (0x8000_0000, 0x8000_0000),
                3 => (u32::MAX, u32::MAX),
                _ => (0, 0x8000_0000),
            });
        }
        let input = DeviceTensor::from_slice(gpu, &x, &[rows, len]).map_err(e)?;
        let mut hi = DeviceTensor::from_slice(gpu, &vec![1.0f32; rows], &[rows]).map_err(e)?;
        let mut lo = DeviceTensor::from_slice(gpu, &vec![1.0f32; rows], &[rows]).map_err(e)?;
        strided_apply::reduce::reduce(gpu, Amax, &mut hi, &input, &[1]).map_err(e)?;
        strided_apply::reduce::reduce(gpu, Amin, &mut lo, &input, &[1]).map_err(e)?;
        let (hi, lo) = (hi.to_vec(gpu).map_err(e)?, lo.to_vec(gpu).map_err(e)?);
        for (r, &(h, l)) in want.iter().enumerate() {
            let same = |got: f32, bits: u32| {
                if bits == u32::MAX {
                    got.is_nan()
                } else {
                    got.to_bits() == bits
                }
            };
            if !same(hi[r], h) || !same(lo[r], l) {
                return Err(format!(
                    "signed zeros, rows of {len}, row {r}: amax {:#x} amin {:#x}, want {h:#x} {l:#x}",
                    hi[r].to_bits(),
                    lo[r].to_bits()
                ));
            }
        }
    }
    Ok(format!(
        "{count} (op, type, layout) cases over {families} (op, type) families, GPU = CPU twin; 4 device-side checks"
    ))
}
