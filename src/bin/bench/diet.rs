//! `bench --diet`: every instantiated elementwise family whose op has an expression program
//! (`dispatch::program_ops`), its kernel against its program (`DynOp::new_program`: the
//! expression interpreter's kernels) on the same operands in the same process, on three
//! layouts of a square of `side²` elements: `contiguous` (every operand dense), `row` (the
//! first input dense, the others a broadcast row; a one-input op's input a row) and
//! `transposed` (the last input the transpose of a dense square). The figures the op-set
//! issue's image diet needs: a specialised kernel stays only where it is more than 2 %
//! faster than the program.
//!
//! One JSON line per (family, layout): `kernel_ms`, `program_ms` (CUDA events, median of 25
//! after 3 warm-ups), `program_over_kernel` (the program's time over the kernel's: above
//! 1.02, the kernel wins by more than 2 %) and `check`: the two outputs compared on a
//! 256 × 256 square first, bit for bit (NaN matching NaN; within 4 ulp for inexact ops).

use strided_apply::dispatch::{self, DynOp, Instance, Scalar};
use strided_apply::ops::Tolerance;
use strided_apply::raw::RawTensor;
use strided_apply::verify::{first_mismatch, Distance};
use strided_apply::{bf16, f16, Bool, DeviceTensor, ElemType, Gpu, Result};

/// Every element type, with the bytes of `n` values of the bench's distribution: floats in
/// [0.25, 2) (no NaN domain of `log`, `sqrt`, `pow`), integers 1..=100, bools at random.
fn values(t: ElemType, n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n * t.size());
    for _ in 0..n {
        let r = next();
        let f = 0.25 + (r >> 11) as f64 / (1u64 << 53) as f64 * 1.75;
        let i = 1 + (r >> 33) % 100;
        match t {
            ElemType::F32 => out.extend((f as f32).to_le_bytes()),
            ElemType::F64 => out.extend(f.to_le_bytes()),
            ElemType::F16 => out.extend(f16::from_f64(f).to_le_bytes()),
            ElemType::BF16 => out.extend(bf16::from_f64(f).to_le_bytes()),
            ElemType::I32 => out.extend((i as i32).to_le_bytes()),
            ElemType::I64 => out.extend((i as i64).to_le_bytes()),
            ElemType::U32 => out.extend((i as u32).to_le_bytes()),
            ElemType::U8 => out.push(i as u8),
            ElemType::Bool => out.push((r >> 7) as u8 & 1),
            other => out.extend(std::iter::repeat_n(0, other.size())),
        }
    }
    out
}

/// The layouts, by name (see [`view`]).
const LAYOUTS: [&str; 3] = ["contiguous", "row", "transposed"];

/// Shape and strides of operand `k` (0 the output) of `inputs` inputs on `layout`.
fn view(layout: &str, side: usize, k: usize, inputs: usize) -> (Vec<usize>, Vec<isize>) {
    let dense = (vec![side, side], vec![side as isize, 1]);
    match layout {
        "row" if k >= 1 && (k >= 2 || inputs == 1) => (vec![side], vec![1]),
        "transposed" if k == inputs && k >= 1 => (vec![side, side], vec![1, side as isize]),
        _ => dense,
    }
}

/// Operand `k` of views `v` (from [`view`]) at `ptr`, of element type `t`.
fn raw(v: &[(Vec<usize>, Vec<isize>)], t: ElemType, k: usize, ptr: u64) -> RawTensor<'_> {
    RawTensor {
        ptr,
        elem: t,
        shape: &v[k].0,
        strides: &v[k].1,
    }
}

/// One scalar per scalar of the op: 0.5 for a float output, 3 for an integer one, `true`
/// for bool (as the GPU tests).
fn scalars(inst: &Instance) -> Vec<Scalar> {
    let s = match inst.types[0] {
        ElemType::F32 | ElemType::F64 | ElemType::F16 | ElemType::BF16 => Scalar::F64(0.5),
        ElemType::Bool => Scalar::Bool(true),
        _ => Scalar::I64(3),
    };
    vec![s; (inst.builder)().map_or(0, |b| b.scalars.len())]
}

/// Whether `a` and `b` (outputs of element type `t`) agree: the library's comparison
/// ([`first_mismatch`]: NaN equals NaN), exact, or within 4 ulp for an inexact op.
fn agree(t: ElemType, inexact: bool, a: &[u8], b: &[u8]) -> bool {
    let tol = if inexact {
        Tolerance::Ulp(4)
    } else {
        Tolerance::Exact
    };
    fn typed<T: Distance>(a: &[u8], b: &[u8], tol: Tolerance) -> bool {
        // Copies: the byte vectors need not be aligned for `T`.
        let (a, b): (Vec<T>, Vec<T>) = (
            bytemuck::pod_collect_to_vec(a),
            bytemuck::pod_collect_to_vec(b),
        );
        first_mismatch(&a, &b, tol).is_none()
    }
    match t {
        ElemType::F32 => typed::<f32>(a, b, tol),
        ElemType::F64 => typed::<f64>(a, b, tol),
        ElemType::F16 => typed::<f16>(a, b, tol),
        ElemType::BF16 => typed::<bf16>(a, b, tol),
        ElemType::I32 => typed::<i32>(a, b, tol),
        ElemType::I64 => typed::<i64>(a, b, tol),
        ElemType::U32 => typed::<u32>(a, b, tol),
        ElemType::U8 => typed::<u8>(a, b, tol),
        ElemType::Bool => typed::<Bool>(a, b, tol),
        _ => a == b,
    }
}

/// The diet rows on `gpu` for squares of `side²` elements; `only`: families whose name
/// contains it.
pub fn run(gpu: &Gpu, side: usize, only: Option<&str>) -> Result<()> {
    let n = side * side;
    const CHECK_SIDE: usize = 256;
    // Per element type, one buffer for each input position (the same values: two inputs of
    // one type are different memory, so neither reads the other's lines from cache), and
    // one output buffer of the widest type, for the timed and the checked squares.
    let mut inputs = Vec::new();
    let mut small = Vec::new();
    for (i, t) in strided_apply::expr::ELEMS.into_iter().enumerate() {
        let host = values(t, n, 17 + i as u64);
        let small_host = values(t, CHECK_SIDE * CHECK_SIDE, 71 + i as u64);
        for k in 1..=3 {
            inputs.push((t, k, DeviceTensor::from_slice(gpu, &host, &[host.len()])?));
            let d = DeviceTensor::from_slice(gpu, &small_host, &[small_host.len()])?;
            small.push((t, k, d));
        }
    }
    let out = DeviceTensor::<u8>::zeros(gpu, &[n * 8])?;
    let outs = [
        DeviceTensor::<u8>::zeros(gpu, &[CHECK_SIDE * CHECK_SIDE * 8])?,
        DeviceTensor::<u8>::zeros(gpu, &[CHECK_SIDE * CHECK_SIDE * 8])?,
    ];
    let buffer = |set: &[(ElemType, usize, DeviceTensor<u8>)], t: ElemType, k: usize| -> u64 {
        set.iter()
            .find(|(u, j, _)| (*u, *j) == (t, k))
            .map_or(0, |(_, _, d)| d.buffer().addr())
    };
    let mut programs = dispatch::program_ops().collect::<Vec<_>>();
    programs.sort_unstable();
    for inst in dispatch::instances() {
        if programs.binary_search(&inst.op()).is_err()
            || only.is_some_and(|o| !inst.family().contains(o))
        {
            continue;
        }
        let s = scalars(inst);
        let kernel = DynOp::new(inst.op(), inst.types, &s)?;
        let program = DynOp::new_program(inst.op(), inst.types, &s)?;
        let n_in = inst.types.len() - 1;
        let inexact = (inst.tolerance)() != Some(Tolerance::Exact);
        for layout in LAYOUTS {
            // `side`'s views of every operand; the output's buffer is `out`.
            let views = |side: usize| -> Vec<(Vec<usize>, Vec<isize>)> {
                (0..=n_in).map(|k| view(layout, side, k, n_in)).collect()
            };
            // The check on the small square: both into their own output, compared.
            let vs = views(CHECK_SIDE);
            let mut got = Vec::new();
            for (op, o) in [(&kernel, &outs[0]), (&program, &outs[1])] {
                let ins: Vec<RawTensor> = (1..=n_in)
                    .map(|k| raw(&vs, inst.types[k], k, buffer(&small, inst.types[k], k)))
                    .collect();
                // SAFETY: every view reaches at most CHECK_SIDE² elements of its type from a
                // buffer holding that many (the output's holds 8 bytes per element); the
                // buffers live until `to_vec` synchronises.
                unsafe {
                    op.launch(
                        gpu,
                        None,
                        raw(&vs, inst.types[0], 0, o.buffer().addr()),
                        &ins,
                    )?
                };
                let bytes = o.to_vec(gpu)?;
                got.push(bytes[..CHECK_SIDE * CHECK_SIDE * inst.types[0].size()].to_vec());
            }
            let check = if agree(inst.types[0], inexact, &got[0], &got[1]) {
                "program=kernel"
            } else {
                "MISMATCH"
            };
            let v = views(side);
            let ins: Vec<RawTensor> = (1..=n_in)
                .map(|k| raw(&v, inst.types[k], k, buffer(&inputs, inst.types[k], k)))
                .collect();
            let o = raw(&v, inst.types[0], 0, out.buffer().addr());
            let time = |op: &DynOp| {
                // SAFETY: as above, for `side²` elements; the buffers live until the end of
                // this function, after `median_ms` synchronised.
                super::timing::median_ms(gpu, |_| unsafe { op.launch(gpu, None, o, &ins) })
            };
            let kernel_ms = time(&kernel)?;
            let program_ms = time(&program)?;
            let bytes: usize = (0..=n_in)
                .map(|k| v[k].0.iter().product::<usize>() * inst.types[k].size())
                .sum();
            let types: Vec<&str> = inst.types.iter().map(|t| t.name()).collect();
            println!(
                "{{\"impl\":\"strided-apply\",\"case\":\"diet_{layout}\",\"family\":\"{}\",\"types\":\"{}\",\"elements\":{n},\"bytes\":{bytes},\"kernel_ms\":{kernel_ms:.5},\"program_ms\":{program_ms:.5},\"program_over_kernel\":{:.4},\"check\":\"{check}\"}}",
                inst.family(),
                types.join(" "),
                program_ms / kernel_ms,
            );
        }
    }
    Ok(())
}
