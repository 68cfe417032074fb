//! Compiled expressions (group `tier1`): a 12-op chain of cheap ops over three dense `f32`
//! inputs and the seed expression in `f64` over a row, a column and a full input, each
//! checked against the CPU twin and timed as the other groups are. Run the group with
//! `STRIDED_APPLY_EXPR_TIER=0` and `=1` for the two tiers; `benches/peers/tier1_peers.py`
//! times the same computations with torch.compile and CuPy.

use super::data::{dense, rand_f32, Operand};
use super::harness::Bench;
use super::report::report;
use super::timing::median_ms;
use strided_apply::expr::{Arg, DeviceArg, Expr, HostTensor, HostTensorMut};
use strided_apply::verify::{first_mismatch, Distance};
use strided_apply::Result;
use strided_apply::{ops, DeviceTensor, Elem, Layout};

/// The 12-op chain (`* + - * minimum maximum * fma / + - *`).
pub(super) const CHAIN: &str =
    "((a*b + c) * (b - c) + minimum(a, b) * maximum(b, c) / fma(a, c, 2.0) - 0.25) * a";
/// The seed expression.
pub(super) const SEED: &str = "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)";

/// `text` over three inputs into a poisoned output of layout `out`: GPU against the CPU
/// twin (exact, or within `tol`), then the median time; bytes: each input read once (a
/// broadcast one once per element it holds), the output written once.
fn three<T: Elem + Distance>(
    bench: &Bench,
    case: &str,
    text: &str,
    out: &Layout,
    ins: [&Operand<T>; 3],
    poison: T,
    tol: ops::Tolerance,
) -> Result<()> {
    let gpu = &bench.gpu;
    let args = [
        ("a", Arg::Tensor(T::TYPE)),
        ("b", Arg::Tensor(T::TYPE)),
        ("c", Arg::Tensor(T::TYPE)),
    ];
    let f = Expr::parse(text)?.compile(&args, None)?;
    let n = out.numel();
    let bytes = (n + ins.iter().map(|o| o.host.len().min(n)).sum::<usize>()) * size_of::<T>();
    let dev = ins
        .iter()
        .map(|o| {
            DeviceTensor::from_slice(gpu, &o.host, &[o.host.len()])?.with_layout(o.layout.clone())
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let mut dc = DeviceTensor::from_slice(gpu, &vec![poison; n], &[n])?.with_layout(out.clone())?;
    let args: Vec<DeviceArg> = dev.iter().map(DeviceArg::from).collect();
    f.run(gpu, &mut dc, &args, &[])?;
    let got = dc.buffer_to_vec(gpu)?;
    let mut want = vec![poison; n];
    let hosts: Vec<HostTensor> = ins
        .iter()
        .map(|o| HostTensor::new(bytemuck::cast_slice(&o.host), T::TYPE, &o.layout))
        .collect();
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), T::TYPE, out),
        &hosts,
        &[],
    )?;
    let check = match first_mismatch(&got, &want, tol) {
        None if tol == ops::Tolerance::Exact => "gpu=twin".to_string(),
        None => "gpu~twin".to_string(),
        Some(m) => format!("MISMATCH {m}"),
    };
    let ms = median_ms(gpu, |_| f.run(gpu, &mut dc, &args, &[]))?;
    report(case, T::NAME, n, bytes, ms, &check);
    Ok(())
}

pub(super) fn tier1(bench: &Bench) -> Result<()> {
    let (big, sq) = (bench.big, &bench.sq);
    let a = dense(&[big, big], 51, rand_f32)?;
    let b = dense(&[big, big], 52, rand_f32)?;
    let c = dense(&[big, big], 53, rand_f32)?;
    three(
        bench,
        "t1_chain12",
        CHAIN,
        sq,
        [&a, &b, &c],
        f32::NAN,
        ops::Tolerance::Exact,
    )?;
    drop((a, b, c));
    // The seed expression in f64 over `big × big/2`: `a` a row, `b` a column, `c` full.
    let (rows, cols) = (big, big / 2);
    let f64s = |seed: u64, n: usize| -> Vec<f64> {
        super::data::random(n, seed, |x| rand_f32(x).abs() as f64 + 0.25)
    };
    let out = Layout::contiguous(&[rows, cols])?;
    let a = Operand {
        host: f64s(54, cols),
        layout: Layout::contiguous(&[1, cols])?.broadcast_to(&[rows, cols])?,
    };
    let b = Operand {
        host: f64s(55, rows),
        layout: Layout::contiguous(&[rows, 1])?.broadcast_to(&[rows, cols])?,
    };
    let c = Operand {
        host: f64s(56, rows * cols),
        layout: out.clone(),
    };
    three(
        bench,
        "t1_seed_f64_broadcast",
        SEED,
        &out,
        [&a, &b, &c],
        f64::NAN,
        ops::Tolerance::Ulp(4),
    )?;
    Ok(())
}
