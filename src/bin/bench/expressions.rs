//! Expressions (group `expr`): adds and the seed expression written as expressions, against
//! the kernels and the CPU twin.

use super::apply3::{bench3, operand_sets};
use super::data::{dense, rand_bf16, rand_f32, random, Operand};
use super::harness::Bench;
use super::report::report;
use super::timing::median_ms;
use strided_apply::verify::{first_mismatch, Distance};
use strided_apply::{
    api, bf16, gpu_kernels, ops, DeviceTensor, Elem, Gpu, Kernels3, Layout, Result,
};

/// `out = a + b` as a one-op expression on the interpreter's kernels (tier 0), after the
/// library's specialised kernel for the same operands in the same process (reported as
/// `<case>_specialised`); the expression's result is checked against the specialised
/// kernel's, bit for bit.
pub(super) fn bench_expr_add<T: Elem + Distance>(
    gpu: &Gpu,
    case: &str,
    out: &Layout,
    a: &Operand<T>,
    b: &Operand<T>,
    poison: T,
) -> Result<()>
where
    ops::Add: Kernels3<T, T, T>,
{
    use strided_apply::expr::{Arg, DeviceArg, Expr};
    bench3(
        gpu,
        &format!("{case}_specialised"),
        ops::Add,
        out,
        a,
        b,
        poison,
    )?;
    let f = Expr::parse("a + b")?.compile(
        &[("a", Arg::Tensor(T::TYPE)), ("b", Arg::Tensor(T::TYPE))],
        None,
    )?;
    let n = out.numel();
    let (bytes, mut tensors) = operand_sets(gpu, out, a, b, poison)?;
    let sets = tensors.len();
    let (da, db, dc) = &mut tensors[0];
    f.run(
        gpu,
        dc,
        &[DeviceArg::from(&*da), DeviceArg::from(&*db)],
        &[],
    )?;
    let got = dc.buffer_to_vec(gpu)?;
    let mut want =
        DeviceTensor::from_slice(gpu, &vec![poison; n], &[n])?.with_layout(out.clone())?;
    api::apply3(gpu, ops::Add, &mut want, da, db)?;
    let check = match first_mismatch(&got, &want.buffer_to_vec(gpu)?, ops::Tolerance::Exact) {
        None => "expr=specialised".to_string(),
        Some(m) => format!("MISMATCH {m}"),
    };
    let ms = median_ms(gpu, |i| {
        let (da, db, dc) = &mut tensors[i % sets];
        f.run(
            gpu,
            dc,
            &[DeviceArg::from(&*da), DeviceArg::from(&*db)],
            &[],
        )
    })?;
    report(case, T::NAME, n, bytes, ms, &check);
    Ok(())
}

/// Expressions on the interpreter's kernels (tier 0) against the specialised kernels of the
/// same op in the same process, and the seed expression over three dense f32 inputs.
pub(super) fn expressions(bench: &Bench) -> Result<()> {
    use strided_apply::expr::{Arg, DeviceArg, Expr};
    let (gpu, big, sq) = (&bench.gpu, bench.big, &bench.sq);
    let a = dense(&[big, big], 8, rand_f32)?;
    let b = dense(&[big, big], 14, rand_f32)?;
    bench_expr_add(gpu, "expr_contiguous_add", sq, &a, &b, f32::NAN)?;
    let bt = Operand {
        host: random(big * big, 12, rand_f32),
        layout: sq.transpose(0, 1)?,
    };
    bench_expr_add(gpu, "expr_transposed", sq, &a, &bt, f32::NAN)?;
    let a16 = dense(&[big, big], 34, rand_bf16)?;
    let row16 = dense(&[1, big], 35, rand_bf16)?;
    bench_expr_add(gpu, "expr_broadcast_row", sq, &a16, &row16, bf16::NAN)?;
    let a8 = dense(&[big, big], 10, |x| x as u8)?;
    let b8 = dense(&[big, big], 11, |x| (x >> 8) as u8)?;
    bench_expr_add(gpu, "expr_contiguous_add_u8", sq, &a8, &b8, 0x5a)?;
    // The seed expression, three dense f32 inputs (`big × big` each).
    let f = Expr::parse("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)")?.compile(
        &[
            ("a", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
            ("b", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
            ("c", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
        ],
        None,
    )?;
    let n = big * big;
    let c = dense(&[big, big], 15, |x| rand_f32(x).abs())?;
    let up = |o: &Operand<f32>| DeviceTensor::from_slice(gpu, &o.host, &[big, big]);
    let (da, db, dc) = (up(&a)?, up(&b)?, up(&c)?);
    let mut out = DeviceTensor::from_slice(gpu, &vec![f32::NAN; n], &[big, big])?;
    let ins = [
        DeviceArg::from(&da),
        DeviceArg::from(&db),
        DeviceArg::from(&dc),
    ];
    let ms = median_ms(gpu, |_| f.run(gpu, &mut out, &ins, &[]))?;
    report("expr_seed_dense", "f32", n, 4 * n * 4, ms, "-");
    // The same over a row `a`, a column `b` and a full `c`: `cos(a)` and `log(cos(b) + 2)`
    // hoisted (once per column and row) and not; bytes: the inputs once and the output.
    let (dr, dcol) = (
        DeviceTensor::from_slice(gpu, &a.host[..big], &[1, big])?,
        DeviceTensor::from_slice(gpu, &b.host[..big], &[big, 1])?,
    );
    let ins = [
        DeviceArg::from(&dr),
        DeviceArg::from(&dcol),
        DeviceArg::from(&dc),
    ];
    let bytes = (2 * n + 2 * big) * 4;
    let mut first: Option<Vec<f32>> = None;
    for (case, hoist) in [
        ("expr_seed_broadcast", true),
        ("expr_seed_broadcast_unhoisted", false),
    ] {
        let f = f.clone().with_hoisting(hoist);
        f.run(gpu, &mut out, &ins, &[])?;
        let got = out.buffer_to_vec(gpu)?;
        let check = match &first {
            None => "-".to_string(),
            Some(w) => match first_mismatch(&got, w, ops::Tolerance::Exact) {
                None => "hoisted=unhoisted".to_string(),
                Some(m) => format!("MISMATCH {m}"),
            },
        };
        first.get_or_insert(got);
        let ms = median_ms(gpu, |_| f.run(gpu, &mut out, &ins, &[]))?;
        report(case, "f32", n, bytes, ms, &check);
    }
    Ok(())
}
