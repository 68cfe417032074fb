//! GPU tests: the conformance table (GPU against the CPU twin), accuracy against f64,
//! typed errors that need a device, and the demo's cases. Without a GPU every test is
//! reported as skipped by name; with `STRIDED_APPLY_REQUIRE_GPU=1` that is a failure.

mod common;

use common::{cases, random_vec, Rng, TestElem};
use strided_apply::ops::Accuracy;
use strided_apply::verify::{self, Distance};
use strided_apply::{api, DeviceTensor, Error, Gpu, Kernels1, Kernels2, Kernels3, Kernels4};

type TestResult = Result<String, String>;
type GpuTest = (&'static str, fn(&Gpu) -> TestResult);

macro_rules! gpu_check {
    ($fn:ident, $trait:ident, $verify:path, $k:literal, [$($x:ident: $t:ident),*]) => {
        fn $fn<Op, O: TestElem $(, $t: TestElem)*>(gpu: &Gpu, op: Op, name: &str, rng: &mut Rng) -> Result<usize, String>
        where Op: $trait<O $(, $t)*> + Accuracy {
            let all = cases($k);
            for case in &all {
                let mut _i = 0;
                $(
                    let $x: Vec<$t> = random_vec(rng, case.inputs[_i].len);
                    let $x = (&$x[..], &case.inputs[_i].layout);
                    _i += 1;
                )*
                // apply1 updates its operand: start from random values, not poison.
                let init: Vec<O> = if $k == 0 { random_vec(rng, case.out.len) } else { vec![O::poison(); case.out.len] };
                match $verify(gpu, op, (&init, &case.out.layout) $(, $x)*) {
                    Ok(None) => {}
                    Ok(Some(m)) => return Err(format!("{name} / {}: {m}", case.name)),
                    Err(e) => return Err(format!("{name} / {}: {e}", case.name)),
                }
            }
            Ok(all.len())
        }
    };
}
gpu_check!(gpu1, Kernels1, verify::apply1, 0, []);
gpu_check!(gpu2, Kernels2, verify::apply2, 1, [a: A]);
gpu_check!(gpu3, Kernels3, verify::apply3, 2, [a: A, b: B]);
gpu_check!(gpu4, Kernels4, verify::apply4, 3, [a: A, b: B, c: C]);

fn conformance(gpu: &Gpu) -> TestResult {
    let mut rng = Rng(0xc0ffee);
    let mut count = 0usize;
    let mut failures = Vec::new();
    macro_rules! run {
        ($k:tt, $name:expr, $op:expr, $($t:ty),+) => {{
            let r = match $k {
                1 => run!(@call gpu1, $op, $name, $($t),+),
                2 => run!(@call gpu2, $op, $name, $($t),+),
                3 => run!(@call gpu3, $op, $name, $($t),+),
                _ => run!(@call gpu4, $op, $name, $($t),+),
            };
            match r {
                Ok(n) => count += n,
                Err(e) => failures.push(e),
            }
        }};
        (@call $f:ident, $op:expr, $name:expr, $($t:ty),+) => { run!(@arity $f, $op, $name; $($t),+) };
        (@arity gpu1, $op:expr, $name:expr; $o:ty) => { gpu1::<_, $o>(gpu, $op, $name, &mut rng) };
        (@arity gpu2, $op:expr, $name:expr; $o:ty, $a:ty) => { gpu2::<_, $o, $a>(gpu, $op, $name, &mut rng) };
        (@arity gpu3, $op:expr, $name:expr; $o:ty, $a:ty, $b:ty) => { gpu3::<_, $o, $a, $b>(gpu, $op, $name, &mut rng) };
        (@arity gpu4, $op:expr, $name:expr; $o:ty, $a:ty, $b:ty, $c:ty) => {
            gpu4::<_, $o, $a, $b, $c>(gpu, $op, $name, &mut rng)
        };
        (@arity $f:ident, $op:expr, $name:expr; $($t:ty),+) => { unreachable!() };
    }
    op_table!(run);
    if failures.is_empty() {
        Ok(format!("{count} (op, type, layout) cases, GPU = CPU twin"))
    } else {
        Err(format!(
            "{} of the (op, types) rows failed; first: {}",
            failures.len(),
            failures[0]
        ))
    }
}

fn accuracy(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::*;
    let mut rng = Rng(11);
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|_| (rng.unit() * 20.0 - 10.0) as f32).collect();
    let y: Vec<f32> = (0..n).map(|_| (rng.unit() * 6.0 - 3.0) as f32).collect();
    let dx = DeviceTensor::from_slice(gpu, &x, &[n]).map_err(|e| e.to_string())?;
    let dy = DeviceTensor::from_slice(gpu, &y, &[n]).map_err(|e| e.to_string())?;
    let mut report = Vec::new();
    macro_rules! unary {
        ($op:expr, $name:literal, $bound:expr, $f:expr) => {{
            let mut out = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(|e| e.to_string())?;
            api::apply2(gpu, $op, &mut out, &dx).map_err(|e| e.to_string())?;
            let got = out.to_vec(gpu).map_err(|e| e.to_string())?;
            let worst = x
                .iter()
                .zip(&got)
                .map(|(&a, &g)| f32::distance(g, ($f)(a as f64) as f32))
                .max()
                .unwrap_or(0);
            report.push(format!("{} {worst} ulp", $name));
            if worst > $bound {
                return Err(format!(
                    "{}: {worst} ulp from f64 (bound {})",
                    $name, $bound
                ));
            }
        }};
    }
    unary!(Exp, "exp", 2, f64::exp);
    unary!(Log, "log", 2, f64::ln);
    unary!(Sin, "sin", 2, f64::sin);
    unary!(Cos, "cos", 2, f64::cos);
    unary!(Tanh, "tanh", 2, f64::tanh);
    unary!(Sigmoid, "sigmoid", 3, |a: f64| 1.0 / (1.0 + (-a).exp()));
    unary!(Sqrt, "sqrt", 0, f64::sqrt);
    unary!(Rsqrt, "rsqrt", 1, |a: f64| 1.0 / a.sqrt());
    let mut out = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(|e| e.to_string())?;
    api::apply3(gpu, Pow, &mut out, &dx, &dy).map_err(|e| e.to_string())?;
    let got = out.to_vec(gpu).map_err(|e| e.to_string())?;
    let worst = (0..n)
        .map(|i| f32::distance(got[i], (x[i] as f64).powf(y[i] as f64) as f32))
        .max()
        .unwrap_or(0);
    report.push(format!("pow {worst} ulp"));
    if worst > 2 {
        return Err(format!("pow: {worst} ulp from f64 (bound 2)"));
    }
    Ok(format!("f32 vs f64 reference, max: {}", report.join(", ")))
}

fn expect_err<T>(
    r: strided_apply::Result<T>,
    what: &str,
    ok: impl Fn(&Error) -> bool,
) -> Result<String, String> {
    match r {
        Err(e) if ok(&e) => Ok(format!("{what}: {e}")),
        Err(e) => Err(format!("{what}: wrong error {e:?}")),
        Ok(_) => Err(format!("{what}: no error")),
    }
}

fn typed_errors(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::*;
    use strided_apply::raw::{self, RawTensor};
    use strided_apply::ElemType;
    let e = |e: Error| e.to_string();
    let a = DeviceTensor::from_slice(gpu, &[1.0f32; 12], &[3, 4]).map_err(e)?;
    let mut lines = Vec::new();
    // Output with a stride-0 axis.
    let mut bcast_out = a
        .slice(0, Some(0), Some(1), 1)
        .map_err(e)?
        .broadcast_to(&[3, 4])
        .map_err(e)?;
    lines.push(expect_err(
        api::apply2(gpu, Neg, &mut bcast_out, &a),
        "overlapping output",
        |e| matches!(e, Error::OverlappingOutput { .. }),
    )?);
    // Input shifted by one element against the output in the same buffer.
    let buf = DeviceTensor::from_slice(gpu, &[1.0f32; 13], &[13]).map_err(e)?;
    let mut out = buf.slice(0, Some(0), Some(12), 1).map_err(e)?;
    let shifted = buf.slice(0, Some(1), None, 1).map_err(e)?;
    lines.push(expect_err(
        api::apply2(gpu, Neg, &mut out, &shifted),
        "partial overlap",
        |e| matches!(e, Error::PartialOverlap { operand: "a" }),
    )?);
    // Exactly in place is fine: a = -a.
    let mut x = DeviceTensor::from_slice(gpu, &[1.0f32, -2.0, 3.0], &[3]).map_err(e)?;
    let x_in = x.clone();
    api::apply2(gpu, Neg, &mut x, &x_in).map_err(e)?;
    if x.to_vec(gpu).map_err(e)? != [-1.0, 2.0, -3.0] {
        return Err("in-place neg gave wrong values".into());
    }
    lines.push("in place a = -a: ok".into());
    lines.push(expect_err(
        a.with_layout(strided_apply::Layout::new(&[3, 4], &[4, 1], 1).map_err(e)?),
        "out of bounds",
        |e| matches!(e, Error::OutOfBounds { .. }),
    )?);
    lines.push(expect_err(strided_apply::open(4096), "no device", |e| {
        matches!(e, Error::NoDevice { .. })
    })?);
    lines.push(expect_err(
        DeviceTensor::from_slice(gpu, &[1.0f32; 5], &[2, 3]),
        "length",
        |e| matches!(e, Error::LengthMismatch { .. }),
    )?);
    // Raw API: type, alignment, null.
    let base = a.buffer().addr();
    let (shape, strides) = ([12usize], [1isize]);
    let t = |ptr, elem| RawTensor {
        ptr,
        elem,
        shape: &shape,
        strides: &strides,
    };
    // SAFETY: every call below is refused by the checks before any launch.
    unsafe {
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, ElemType::F32),
                t(base, ElemType::I32),
            ),
            "raw type",
            |e| matches!(e, Error::TypeMismatch { operand: "a", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base + 2, ElemType::F32),
                t(base, ElemType::F32),
            ),
            "raw misaligned",
            |e| matches!(e, Error::Misaligned { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(gpu, None, Neg, t(base, ElemType::F32), t(0, ElemType::F32)),
            "raw null",
            |e| matches!(e, Error::NullPointer { operand: "a" }),
        )?);
    }
    // A tensor of another Gpu handle (another stream) is refused.
    let other = gpu.new_stream().map_err(e)?;
    let mut z = DeviceTensor::<f32>::zeros(gpu, &[3, 4]).map_err(e)?;
    lines.push(expect_err(
        api::apply2(&other, Neg, &mut z, &a),
        "wrong handle",
        |e| matches!(e, Error::WrongDevice { operand: "out" }),
    )?);
    // The context still works afterwards.
    let mut y = DeviceTensor::<f32>::zeros(gpu, &[3, 4]).map_err(e)?;
    api::apply2(gpu, Neg, &mut y, &a).map_err(e)?;
    if y.to_vec(gpu).map_err(e)? != vec![-1.0f32; 12] {
        return Err("context unusable after errors".into());
    }
    Ok(format!("{} errors checked", lines.len()))
}

fn raw_api_matches_typed(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::Add;
    use strided_apply::raw::{self, RawTensor};
    use strided_apply::ElemType;
    let e = |e: Error| e.to_string();
    let a: Vec<f32> = (0..12).map(|x| x as f32).collect();
    let da = DeviceTensor::from_slice(gpu, &a, &[3, 4]).map_err(e)?;
    let out = DeviceTensor::<f32>::zeros(gpu, &[4, 3]).map_err(e)?;
    // out = a^T + a^T through raw pointers with a transposed, reversed view.
    let (s_out, st_out) = ([4usize, 3], [3isize, 1]);
    let (s_a, st_a) = ([4usize, 3], [-1isize, 4]);
    let a_last_col = da.buffer().addr() + 3 * 4; // element (0, 3)
                                                 // SAFETY: both views stay inside their 12-element buffers.
    unsafe {
        raw::apply3::<_, f32, f32, f32>(
            gpu,
            None,
            Add,
            RawTensor {
                ptr: out.buffer().addr(),
                elem: ElemType::F32,
                shape: &s_out,
                strides: &st_out,
            },
            RawTensor {
                ptr: a_last_col,
                elem: ElemType::F32,
                shape: &s_a,
                strides: &st_a,
            },
            RawTensor {
                ptr: a_last_col,
                elem: ElemType::F32,
                shape: &s_a,
                strides: &st_a,
            },
        )
        .map_err(e)?;
    }
    let got = out.to_vec(gpu).map_err(e)?;
    let expect: Vec<f32> = (0..4)
        .flat_map(|i| (0..3).map(move |j| 2.0 * (j * 4 + 3 - i) as f32))
        .collect();
    if got == expect {
        Ok("raw pointers, negative strides".into())
    } else {
        Err(format!("got {got:?}, expected {expect:?}"))
    }
}

fn main() {
    let tests: [GpuTest; 4] = [
        ("gpu_conformance_table_matches_cpu_twin", conformance),
        ("gpu_transcendentals_within_ulp_bound_of_f64", accuracy),
        ("gpu_typed_errors_and_context_survives", typed_errors),
        ("gpu_raw_api_matches_expected", raw_api_matches_typed),
    ];
    let require = std::env::var("STRIDED_APPLY_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let gpu = strided_apply::open(0);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    match &gpu {
        Err(e) => {
            for (name, _) in &tests {
                println!("test {name} ... SKIPPED (no GPU: {e})");
                skipped += 1;
            }
            if require {
                println!("STRIDED_APPLY_REQUIRE_GPU=1 and no GPU: failing");
                failed += 1;
            }
        }
        Ok(g) => {
            println!(
                "GPU: {} (cc {:?}), {} SMs, PTX from {}",
                g.name(),
                g.compute_capability(),
                g.sm_count(),
                strided_apply::PTX_SOURCE
            );
            let t = std::time::Instant::now();
            if let Err(e) = g.preload() {
                println!("loading the kernels failed: {e}");
            }
            println!("module load: {:.2} s", t.elapsed().as_secs_f64());
            for (name, f) in &tests {
                let t = std::time::Instant::now();
                match f(g) {
                    Ok(msg) => {
                        println!(
                            "test {name} ... ok ({msg}; {:.1} s)",
                            t.elapsed().as_secs_f64()
                        );
                        passed += 1;
                    }
                    Err(msg) => {
                        println!("test {name} ... FAILED: {msg}");
                        failed += 1;
                    }
                }
            }
        }
    }
    println!("\ngpu: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
