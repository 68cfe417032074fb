//! The op set's bench cases (group `opset`): ops that run only as programs on the
//! interpreter's kernels (`erf`, `where(isnan(a), 0, a)`, `gelu` in its tanh form), a new
//! element type (`i8`) and a promoted pair (`bf16 + f32`), each checked against the CPU
//! twin and timed as the other groups are. `benches/peers/torch_bench.py` times the same
//! computations in PyTorch eager.

use super::data::{dense, rand_bf16, rand_f16, rand_f32, random, Operand};
use super::harness::Bench;
use super::report::report;
use super::timing::{median_ms, ROTATE_BYTES};
use strided_apply::expr::{Arg, DeviceArg, Expr, HostTensor, HostTensorMut};
use strided_apply::verify::{first_mismatch, Distance};
use strided_apply::Result;
use strided_apply::{bf16, f16, ops, DeviceTensor, Elem, Layout};

/// `text` over `a` (and `b`) into a poisoned output of layout `out`: the GPU result against
/// the CPU twin (bit for bit, or within `tol`), then the median time over rotating operand
/// sets; bytes are every input element read once (a broadcast one once per element it
/// holds) and the output written once.
#[allow(clippy::too_many_arguments)]
fn program<O: Elem + Distance, A: Elem, B: Elem>(
    bench: &Bench,
    case: &str,
    text: &str,
    out: &Layout,
    a: &Operand<A>,
    b: Option<&Operand<B>>,
    poison: O,
    tol: ops::Tolerance,
) -> Result<()> {
    let gpu = &bench.gpu;
    let mut args = vec![("a", Arg::Tensor(A::TYPE))];
    if b.is_some() {
        args.push(("b", Arg::Tensor(B::TYPE)));
    }
    let f = Expr::parse(text)?.compile(&args, Some(O::TYPE))?;
    let n = out.numel();
    let bytes = n * size_of::<O>()
        + a.host.len().min(n) * size_of::<A>()
        + b.map_or(0, |b| b.host.len().min(n) * size_of::<B>());
    let sets = ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64);
    type Set<O, A, B> = (DeviceTensor<A>, Option<DeviceTensor<B>>, DeviceTensor<O>);
    let mut tensors: Vec<Set<O, A, B>> = Vec::new();
    for _ in 0..sets {
        let da = DeviceTensor::from_slice(gpu, &a.host, &[a.host.len()])?
            .with_layout(a.layout.clone())?;
        let db = match b {
            Some(b) => Some(
                DeviceTensor::from_slice(gpu, &b.host, &[b.host.len()])?
                    .with_layout(b.layout.clone())?,
            ),
            None => None,
        };
        let dc = DeviceTensor::from_slice(gpu, &vec![poison; n], &[n])?.with_layout(out.clone())?;
        tensors.push((da, db, dc));
    }
    let run = |set: &mut Set<O, A, B>| -> Result<()> {
        let (da, db, dc) = set;
        let mut ins = vec![DeviceArg::from(&*da)];
        if let Some(db) = db {
            ins.push(DeviceArg::from(&*db));
        }
        f.run(gpu, dc, &ins, &[])?;
        Ok(())
    };
    run(&mut tensors[0])?;
    let got = tensors[0].2.buffer_to_vec(gpu)?;
    let mut want = vec![poison; n];
    let mut hosts = vec![HostTensor::new(
        bytemuck::cast_slice(&a.host),
        A::TYPE,
        &a.layout,
    )];
    if let Some(b) = b {
        hosts.push(HostTensor::new(
            bytemuck::cast_slice(&b.host),
            B::TYPE,
            &b.layout,
        ));
    }
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), O::TYPE, out),
        &hosts,
        &[],
    )?;
    let check = match first_mismatch(&got, &want, tol) {
        None if tol == ops::Tolerance::Exact => "gpu=twin".to_string(),
        None => "gpu~twin".to_string(),
        Some(m) => format!("MISMATCH {m}"),
    };
    let ms = median_ms(gpu, |i| run(&mut tensors[i % sets]))?;
    report(case, O::NAME, n, bytes, ms, &check);
    Ok(())
}

pub(super) fn opset(bench: &Bench) -> Result<()> {
    let (big, sq) = (bench.big, &bench.sq);
    let ulp4 = ops::Tolerance::Ulp(4);
    // erf over a broadcast row: every output element computes it (the op is the root, so
    // nothing is hoisted).
    let row = Operand {
        host: random(big, 41, rand_f32),
        layout: Layout::contiguous(&[1, big])?.broadcast_to(&[big, big])?,
    };
    program::<f32, f32, f32>(
        bench,
        "opset_erf_broadcast_row",
        "erf(a)",
        sq,
        &row,
        None,
        f32::NAN,
        ulp4,
    )?;
    // where(isnan(a), 0, a) over a transposed f16 view, a tenth of its values NaN.
    let nan_f16 = |x: u64| {
        if x.is_multiple_of(10) {
            f16::NAN
        } else {
            rand_f16(x)
        }
    };
    let at = Operand {
        host: random(big * big, 42, nan_f16),
        layout: sq.transpose(0, 1)?,
    };
    program::<f16, f16, f16>(
        bench,
        "opset_where_isnan_f16_transposed",
        "where(isnan(a), 0, a)",
        sq,
        &at,
        None,
        f16::from_bits(0x7e00),
        ops::Tolerance::Exact,
    )?;
    // int8 a + b, contiguous (wrapping).
    let a8 = dense(&[big, big], 43, |x| (x >> 32) as u8 as i8)?;
    let b8 = dense(&[big, big], 44, |x| (x >> 24) as u8 as i8)?;
    program::<i8, i8, i8>(
        bench,
        "opset_add_i8_contiguous",
        "a + b",
        sq,
        &a8,
        Some(&b8),
        0x5a,
        ops::Tolerance::Exact,
    )?;
    // bf16 + an f32 row, promoted to f32.
    let a16 = dense(&[big, big], 45, rand_bf16)?;
    let row32 = Operand {
        host: random(big, 46, rand_f32),
        layout: Layout::contiguous(&[1, big])?.broadcast_to(&[big, big])?,
    };
    program::<f32, bf16, f32>(
        bench,
        "opset_add_bf16_f32_broadcast_row",
        "a + b",
        sq,
        &a16,
        Some(&row32),
        f32::NAN,
        ops::Tolerance::Exact,
    )?;
    // gelu, tanh form (PyTorch's formula), bf16 contiguous and transposed.
    // `gelu_tanh`'s program (host/src/dispatch/programs.rs).
    let gelu = "(tanh((a * a * a * 0.044715 + a) * 0.7978845608028654) + 1) * (a * 0.5)";
    let g = dense(&[big, big], 47, rand_bf16)?;
    program::<bf16, bf16, bf16>(
        bench,
        "opset_gelu_tanh_bf16_contiguous",
        gelu,
        sq,
        &g,
        None,
        bf16::NAN,
        ulp4,
    )?;
    let gt = Operand {
        host: g.host,
        layout: sq.transpose(0, 1)?,
    };
    program::<bf16, bf16, bf16>(
        bench,
        "opset_gelu_tanh_bf16_transposed",
        gelu,
        sq,
        &gt,
        None,
        bf16::NAN,
        ulp4,
    )?;
    Ok(())
}
