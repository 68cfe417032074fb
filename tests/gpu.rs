//! GPU tests: the conformance table (GPU against the CPU twin), accuracy against f64,
//! typed errors that need a device, and the demo's cases. Without a GPU every test is
//! reported as skipped by name; with `STRIDED_APPLY_REQUIRE_GPU=1` that is a failure.

mod common;

use common::random::{random_case, Limits};
use common::{cases, random_vec, Rng, TestElem};
use strided_apply::gpu_kernels::reduce::{OutOf, Reduce};
use strided_apply::ops::{self, Accuracy};
use strided_apply::verify::{self, Distance};
use strided_apply::{
    api, image, DeviceTensor, Error, Gpu, Kernels1, Kernels2, Kernels3, Kernels4, Layout,
    ModuleImage, Target,
};

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

/// `n` random elements of type `t` as bytes: floats in [-8, 8) on a 1/64 grid (so that
/// `exp` and friends stay finite), integers of every bit pattern, bools 0 or 1.
fn random_bytes(t: strided_apply::ElemType, n: usize, rng: &mut Rng) -> Vec<u8> {
    use strided_apply::{bf16, f16, ElemType};
    let mut out = Vec::with_capacity(n * t.size());
    for _ in 0..n {
        let r = rng.next();
        let x = (r % 1024) as f32 / 64.0 - 8.0;
        match t {
            ElemType::F32 => out.extend_from_slice(&x.to_le_bytes()),
            ElemType::F64 => out.extend_from_slice(&(x as f64).to_le_bytes()),
            ElemType::F16 => out.extend_from_slice(&f16::from_f32(x).to_le_bytes()),
            ElemType::BF16 => out.extend_from_slice(&bf16::from_f32(x).to_le_bytes()),
            ElemType::Bool => out.push((r & 1) as u8),
            _ => out.extend_from_slice(&r.to_le_bytes()[..t.size()]),
        }
    }
    out
}

/// GPU and CPU-twin outputs (bytes of `t` elements) agree: bit for bit, any NaN matching any
/// NaN (x86 and the GPU make different NaN bits for `sqrt(-1)`); with `inexact` (an op
/// whose tolerance is in ulps) within 4 units of the type's epsilon, relative.
fn dispatch_close(t: strided_apply::ElemType, inexact: bool, a: &[u8], b: &[u8]) -> bool {
    use strided_apply::{bf16, f16, ElemType};
    if a == b {
        return true;
    }
    // The values as f64 and the type's epsilon; integer and bool outputs must be equal bytes.
    let floats = |x: &[u8]| -> Option<(Vec<f64>, f64)> {
        Some(match t {
            ElemType::F32 => (
                x.chunks(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                    .collect(),
                f32::EPSILON as f64,
            ),
            ElemType::F64 => (
                x.chunks(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
                f64::EPSILON,
            ),
            ElemType::F16 => (
                x.chunks(2)
                    .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f64())
                    .collect(),
                f16::EPSILON.to_f64(),
            ),
            ElemType::BF16 => (
                x.chunks(2)
                    .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f64())
                    .collect(),
                bf16::EPSILON.to_f64(),
            ),
            _ => return None,
        })
    };
    let (Some((va, eps)), Some((vb, _))) = (floats(a), floats(b)) else {
        return false;
    };
    let tol = if inexact { 4.0 * eps } else { 0.0 };
    va.iter().zip(vb).all(|(&x, y)| {
        (x.is_nan() && y.is_nan())
            || x.to_bits() == y.to_bits()
            || (inexact && (x - y).abs() <= tol * x.abs().max(y.abs()))
    })
}

/// Every instantiated family, named at run time (`dispatch::DynOp`), over the layout
/// classes of the conformance table: the GPU launch and the CPU twin of the same `DynOp`
/// over random bytes, bit-identical (within 4 ulp where the op's tolerance is in ulps:
/// transcendentals, fused expressions). Every scalar an op takes is 3 (0.5 for floats,
/// `true` for bool).
fn dispatch_all_instances(gpu: &Gpu) -> TestResult {
    use strided_apply::dispatch::{self, DynOp, HostTensor, HostTensorMut, Scalar};
    use strided_apply::raw::RawTensor;
    let e = |e: Error| e.to_string();
    let mut rng = Rng(0xd15);
    let (mut families, mut launches) = (0usize, 0usize);
    for inst in dispatch::instances() {
        use strided_apply::ElemType as E;
        let scalar = match inst.types[0] {
            E::F32 | E::F64 | E::F16 | E::BF16 => Scalar::F64(0.5),
            E::Bool => Scalar::Bool(true),
            _ => Scalar::I64(3),
        };
        let builder = (inst.builder)().ok_or_else(|| format!("{inst:?}: no builder"))?;
        let scalars = vec![scalar; builder.scalars.len()];
        let op = DynOp::new(inst.op(), inst.types, &scalars).map_err(e)?;
        let inexact = (inst.tolerance)() != Some(strided_apply::ops::Tolerance::Exact);
        for case in cases(inst.inputs()) {
            let ops: Vec<&common::Operand> =
                std::iter::once(&case.out).chain(&case.inputs).collect();
            let host: Vec<Vec<u8>> = ops
                .iter()
                .zip(inst.types)
                .map(|(o, &t)| random_bytes(t, o.len, &mut rng))
                .collect();
            let dev: Vec<DeviceTensor<u8>> = host
                .iter()
                .map(|h| DeviceTensor::from_slice(gpu, h, &[h.len()]))
                .collect::<Result<_, _>>()
                .map_err(e)?;
            let raw: Vec<RawTensor> = ops
                .iter()
                .zip(&dev)
                .zip(inst.types)
                .map(|((o, d), &t)| RawTensor {
                    ptr: d.buffer().addr() + (o.layout.offset() * t.size()) as u64,
                    elem: t,
                    shape: o.layout.shape(),
                    strides: o.layout.strides(),
                })
                .collect();
            // SAFETY: every view was checked against its buffer's length by `cases`, and the
            // buffers live until `to_vec` below synchronises.
            unsafe { op.launch(gpu, None, raw[0], &raw[1..]) }
                .map_err(|x| format!("{inst:?} / {}: {x}", case.name))?;
            let got = dev[0].to_vec(gpu).map_err(e)?;
            let mut want = host[0].clone();
            let inputs: Vec<HostTensor> = ops[1..]
                .iter()
                .zip(&host[1..])
                .zip(&inst.types[1..])
                .map(|((o, h), &t)| HostTensor::new(h, t, &o.layout))
                .collect();
            op.run_cpu(
                HostTensorMut::new(&mut want, inst.types[0], &case.out.layout),
                &inputs,
            )
            .map_err(|x| format!("{inst:?} / {}: CPU: {x}", case.name))?;
            if !dispatch_close(inst.types[0], inexact, &got, &want) {
                return Err(format!("{inst:?} / {}: GPU and CPU twin differ", case.name));
            }
            launches += 1;
        }
        families += 1;
    }
    Ok(format!("{families} families, {launches} launches"))
}

/// Every registered stencil family by id (`stencil::DynStencil`) on the GPU against the same
/// `DynStencil` on the CPU twin over raw host addresses, from random bytes, on each input
/// layout of the stencil table (contiguous, transposed, sliced, reversed, broadcast) and a
/// dense and a transposed output: bit for bit (any NaN matching any NaN).
fn dispatch_stencils(gpu: &Gpu) -> TestResult {
    use strided_apply::raw::RawTensor;
    use strided_apply::stencil::{stencil_instances, DynStencil};
    let e = |e: Error| e.to_string();
    let mut rng = Rng(0x57e);
    fn raw(addr: u64, t: strided_apply::ElemType, l: &strided_apply::Layout) -> RawTensor<'_> {
        RawTensor {
            ptr: addr + (l.offset() * t.size()) as u64,
            elem: t,
            shape: l.shape(),
            strides: l.strides(),
        }
    }
    // x along the 33-long axis takes the tiled kernel, along the 9-long one the generic.
    let shape = [9usize, 17, 33];
    let (mut families, mut launches) = (0usize, 0usize);
    for inst in stencil_instances() {
        let t = inst.elem;
        let op = DynStencil::new(inst.op, t).map_err(e)?;
        for axes in [[2usize, 0, 1], [0, 2, 1]] {
            for (in_name, li, in_len) in common::stencil::input_layouts(&shape) {
                for (out_name, lo) in common::stencil::output_layouts(&shape) {
                    let what = format!(
                        "{} {}, axes {axes:?}, {in_name}, {out_name}",
                        inst.op,
                        t.name()
                    );
                    let n: usize = shape.iter().product();
                    let input = random_bytes(t, in_len, &mut rng);
                    let init = random_bytes(t, n, &mut rng);
                    let d_in = DeviceTensor::from_slice(gpu, &input, &[input.len()]).map_err(e)?;
                    let d_out = DeviceTensor::from_slice(gpu, &init, &[init.len()]).map_err(e)?;
                    // SAFETY: the layouts lie inside their buffers (the stencil table's), which
                    // live until `to_vec` below synchronises.
                    unsafe {
                        op.launch(
                            gpu,
                            None,
                            raw(d_out.buffer().addr(), t, &lo),
                            raw(d_in.buffer().addr(), t, &li),
                            &axes,
                        )
                    }
                    .map_err(|x| format!("{what}: {x}"))?;
                    let got = d_out.to_vec(gpu).map_err(e)?;
                    let mut want = init.clone();
                    // SAFETY: host vectors covering the same layouts.
                    unsafe {
                        op.run_cpu_raw(
                            raw(want.as_mut_ptr() as u64, t, &lo),
                            raw(input.as_ptr() as u64, t, &li),
                            &axes,
                        )
                    }
                    .map_err(|x| format!("{what}: CPU: {x}"))?;
                    if !dispatch_close(t, false, &got, &want) {
                        return Err(format!("{what}: GPU and CPU twin differ"));
                    }
                    launches += 1;
                }
            }
        }
        families += 1;
    }
    Ok(format!(
        "{families} stencil families by id (tiled and generic kernels), {launches} launches, \
         GPU = CPU twin"
    ))
}

/// 100 launches of four kinds (typed `apply3` with a transposed input, a run-time
/// dispatched `add_s`, a stencil, a typed op with a scalar) captured into a CUDA graph on
/// the Gpu's stream after `preload_kernels`, replayed twice from fresh inputs, and checked
/// against the same 100 steps on the CPU twin (bit-identical: every op here is exact).
fn graph_capture_replays(gpu: &Gpu) -> TestResult {
    use strided_apply::cudarc::driver::sys;
    use strided_apply::dispatch::{DynOp, HostTensor, HostTensorMut, Scalar};
    use strided_apply::gpu_kernels::stencil::{Shift, StencilKernels};
    use strided_apply::ops::{Add, Mul, Rhs};
    use strided_apply::raw::RawTensor;
    use strided_apply::{cpu, stencil, ElemType, Layout};
    let e = |e: Error| e.to_string();
    let d = |e: strided_apply::cudarc::driver::DriverError| e.to_string();
    let (rows, cols) = (48usize, 64usize);
    let mut rng = Rng(0x6a4);
    let x0: Vec<f32> = (0..rows * cols)
        .map(|_| (rng.next() % 1024) as f32 / 64.0)
        .collect();
    let b: Vec<f32> = (0..rows * cols)
        .map(|_| (rng.next() % 256) as f32 / 32.0)
        .collect();
    // Typed ops and a run-time one, every family loaded before the capture.
    let add_s = DynOp::new(
        "add_s",
        &[ElemType::F32, ElemType::F32],
        &[Scalar::F64(0.5)],
    )
    .map_err(e)?;
    let scale = Rhs {
        op: Mul,
        s: 0.75f32,
    };
    gpu.preload_kernels(&<Add as Kernels3<f32, f32, f32>>::NAMES)
        .map_err(e)?;
    gpu.preload_kernels(&<Rhs<Mul, f32> as Kernels2<f32, f32>>::NAMES)
        .map_err(e)?;
    gpu.preload_kernels(&add_s.instance().names).map_err(e)?;
    let sn = <Shift<1, 0, 0> as StencilKernels<f32>>::NAMES;
    gpu.preload_stencil(&sn).map_err(e)?;

    let mut acc = DeviceTensor::from_slice(gpu, &x0, &[rows, cols]).map_err(e)?;
    let mut tmp = DeviceTensor::<f32>::zeros(gpu, &[rows, cols]).map_err(e)?;
    let bt = DeviceTensor::from_slice(gpu, &b, &[cols, rows])
        .map_err(e)?
        .transpose(0, 1)
        .map_err(e)?;
    gpu.synchronize().map_err(e)?;
    let shape = [rows, cols];
    let strides = [cols as isize, 1];
    let raw = |t: &DeviceTensor<f32>| RawTensor {
        ptr: t.buffer().addr(),
        elem: ElemType::F32,
        shape: &shape,
        strides: &strides,
    };
    let stream = gpu.stream().clone();
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        .map_err(d)?;
    let mut launched = 0;
    let queued: Result<(), Error> = (|| {
        for i in 0..25 {
            let _ = i;
            let cur = acc.clone(); // the same buffer and layout: element-wise in place
            strided_apply::apply3(gpu, Add, &mut acc, &cur, &bt)?;
            // SAFETY: `acc` is a live buffer of this Gpu holding rows × cols f32, in place.
            unsafe { add_s.launch(gpu, None, raw(&acc), &[raw(&acc)])? };
            stencil::apply(gpu, Shift::<1, 0, 0>, &mut tmp, &acc, &[1])?;
            strided_apply::apply2(gpu, scale, &mut acc, &tmp)?;
            launched += 4;
        }
        Ok(())
    })();
    // End the capture whatever happened, so the stream is usable again.
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        .map_err(d)?;
    queued.map_err(|x| format!("while capturing (after {launched} launches): {x}"))?;
    let graph = graph.ok_or("the capture recorded no graph")?;

    // The CPU twin of the same 100 steps.
    let l = Layout::contiguous(&shape).map_err(e)?;
    let lbt = Layout::contiguous(&[cols, rows])
        .map_err(e)?
        .transpose(0, 1)
        .map_err(e)?;
    let mut want = x0.clone();
    let mut t = vec![0.0f32; rows * cols];
    for _ in 0..25 {
        let cur = want.clone();
        cpu::apply3(Add, (&mut want, &l), (&cur, &l), (&b, &lbt)).map_err(e)?;
        let cur: Vec<u8> = bytemuck::cast_slice(&want).to_vec();
        add_s
            .run_cpu(
                HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), ElemType::F32, &l),
                &[HostTensor::new(&cur, ElemType::F32, &l)],
            )
            .map_err(e)?;
        stencil::apply_cpu(Shift::<1, 0, 0>, (&mut t, &l), (&want, &l), &[1]).map_err(e)?;
        cpu::apply2(scale, (&mut want, &l), (&t, &l)).map_err(e)?;
    }
    // Replay twice, each from the initial values (copied in outside the graph).
    for replay in 0..2 {
        let fresh = DeviceTensor::from_slice(gpu, &x0, &[rows, cols]).map_err(e)?;
        gpu.copy_buffer(acc.buffer(), fresh.buffer(), rows * cols * 4)
            .map_err(e)?;
        graph.launch().map_err(d)?;
        gpu.synchronize().map_err(e)?;
        let got = acc.to_vec(gpu).map_err(e)?;
        if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
            return Err(format!(
                "replay {replay}: element {i}: {} on the GPU, {} on the CPU twin",
                got[i], want[i]
            ));
        }
    }
    Ok(format!(
        "{launched} launches captured, 2 replays bit-identical to the CPU twin"
    ))
}

/// DLPack out and back in (a `DeviceTensor` exported without a copy, imported, launched
/// through run-time dispatch; the deleter releases the buffer), and `from_ndarray` /
/// `to_ndarray` keeping a transposed layout.
fn dlpack_and_ndarray_round_trips(gpu: &Gpu) -> TestResult {
    use strided_apply::dispatch::DynOp;
    use strided_apply::dlpack::Dlpack;
    let e = |e: Error| e.to_string();
    let a: Vec<f32> = (0..24).map(|x| x as f32).collect();
    let da = DeviceTensor::from_slice(gpu, &a, &[4, 6]).map_err(e)?;
    let view = da
        .slice(1, Some(5), None, -2)
        .map_err(e)?
        .transpose(0, 1)
        .map_err(e)?; // 3×4
    let out = DeviceTensor::<f32>::zeros(gpu, &[3, 4]).map_err(e)?;
    let refs = std::sync::Arc::strong_count(da.buffer());
    // SAFETY: `to_dlpack` gives owned managed tensors, handed over at once.
    let (dv, dout) = unsafe {
        (
            Dlpack::from_versioned(view.to_dlpack(gpu).map_err(e)?).map_err(e)?,
            Dlpack::from_legacy(out.to_dlpack_legacy(gpu).map_err(e)?).map_err(e)?,
        )
    };
    if std::sync::Arc::strong_count(da.buffer()) != refs + 1 {
        return Err("the export does not hold the buffer".into());
    }
    let op = DynOp::new(
        "mul_s",
        &[dout.elem(), dv.elem()],
        &[strided_apply::dispatch::Scalar::F64(2.0)],
    )
    .map_err(e)?;
    // SAFETY: both tensors are this Gpu's live buffers, held until the sync below.
    unsafe {
        op.launch(
            gpu,
            None,
            dout.raw_on(gpu, "out").map_err(e)?,
            &[dv.raw_on(gpu, "a").map_err(e)?],
        )
    }
    .map_err(e)?;
    let got = out.to_vec(gpu).map_err(e)?;
    let want: Vec<f32> = view
        .to_vec(gpu)
        .map_err(e)?
        .iter()
        .map(|x| 2.0 * x)
        .collect();
    if got != want {
        return Err(format!("DLPack launch: got {got:?}, want {want:?}"));
    }
    drop((dv, dout));
    if std::sync::Arc::strong_count(da.buffer()) != refs {
        return Err("the deleter did not release the buffer".into());
    }
    // ndarray: a transposed array uploads as it lies and comes back with its strides.
    let arr = ndarray::Array2::from_shape_vec((4, 6), a.clone()).map_err(|x| x.to_string())?;
    let t = DeviceTensor::from_ndarray(gpu, &arr.t()).map_err(e)?;
    if t.layout().strides() != [1, 6] {
        return Err(format!("from_ndarray strides {:?}", t.layout().strides()));
    }
    let back = t.to_ndarray(gpu).map_err(e)?;
    if back != arr.t().into_dyn() || back.strides() != [1, 6] {
        return Err(format!("to_ndarray gave strides {:?}", back.strides()));
    }
    let rev = DeviceTensor::from_ndarray(gpu, &arr.slice(ndarray::s![..;-1, 1..;2])).map_err(e)?;
    if rev.to_ndarray(gpu).map_err(e)? != arr.slice(ndarray::s![..;-1, 1..;2]).into_dyn() {
        return Err("strided ndarray round trip".into());
    }
    Ok("DLPack versioned and legacy, ndarray transposed and strided".into())
}

/// Step-2 views whose last element is the last element of their buffer (no slack after
/// it), 1-D and in rows, f32 and f64, with and without a tail: the vectorised variant's
/// whole-vector loads must not read past the view (compute-sanitizer's memcheck would
/// report it), and every result equals the CPU twin.
fn step2_views_ending_at_buffer_end(gpu: &Gpu) -> TestResult {
    use strided_apply::{cpu, ops, Layout};
    fn one<T: TestElem + PartialEq + std::fmt::Debug>(
        gpu: &Gpu,
        rng: &mut Rng,
        shape: &[usize],
        row_stride: usize,
    ) -> Result<(), String>
    where
        ops::Add: Kernels3<T, T, T> + strided_apply::ops::Op3<T, T, T>,
        ops::Cast: Kernels2<T, T>,
    {
        let e = |e: Error| e.to_string();
        let (rows, cols) = match shape {
            [n] => (1, *n),
            [r, c] => (*r, *c),
            _ => return Err("shape must have 1 or 2 axes".into()),
        };
        let strides: Vec<isize> = match shape.len() {
            1 => vec![2],
            _ => vec![row_stride as isize, 2],
        };
        let len = (rows - 1) * row_stride + 2 * cols - 1;
        let view = Layout::new(shape, &strides, 0).map_err(e)?;
        let dense = Layout::contiguous(shape).map_err(e)?;
        let a_host: Vec<T> = random_vec(rng, len);
        let b_host: Vec<T> = random_vec(rng, rows * cols);
        let a = DeviceTensor::from_slice(gpu, &a_host, &[len])
            .and_then(|t| t.with_layout(view.clone()))
            .map_err(e)?;
        let b = DeviceTensor::from_slice(gpu, &b_host, shape).map_err(e)?;
        let poison = vec![T::poison(); rows * cols];
        let mut out = DeviceTensor::from_slice(gpu, &poison, shape).map_err(e)?;
        api::apply3(gpu, ops::Add, &mut out, &a, &b).map_err(e)?;
        let got = out.to_vec(gpu).map_err(e)?;
        let mut want = vec![T::poison(); rows * cols];
        cpu::apply3(
            ops::Add,
            (&mut want, &dense),
            (&a_host, &view),
            (&b_host, &dense),
        )
        .map_err(e)?;
        match got.iter().zip(&want).position(|(g, w)| g != w) {
            None => Ok(()),
            Some(i) => Err(format!(
                "{} shape {shape:?} row stride {row_stride}: element {i}: GPU {:?}, CPU {:?}",
                T::NAME,
                got[i],
                want[i]
            )),
        }
    }
    let mut rng = Rng(0x5732);
    let mut cases = 0;
    for n in [1, 3, 4, 8, 12, 1000, 1001, 4096, 65536 + 5] {
        one::<f32>(gpu, &mut rng, &[n], 0)?;
        one::<f64>(gpu, &mut rng, &[n], 0)?;
        cases += 2;
    }
    // Rows: the row stride keeps rows 16-byte aligned (a multiple of 4 elements).
    for (rows, cols, rs) in [(3, 4, 8), (5, 8, 20), (64, 256, 516), (7, 12, 24)] {
        one::<f32>(gpu, &mut rng, &[rows, cols], rs)?;
        one::<f64>(gpu, &mut rng, &[rows, cols], rs)?;
        cases += 2;
    }
    Ok(format!(
        "{cases} step-2 views ending at their buffer's end, GPU = CPU twin"
    ))
}

/// `Ok` where `got` equals `want` bit for bit, else the first mismatch, named by `what`.
fn check_exact<T: TestElem>(what: &str, got: &[T], want: &[T]) -> Result<(), String> {
    match verify::first_mismatch(got, want, strided_apply::ops::Tolerance::Exact) {
        None => Ok(()),
        Some(m) => Err(format!("{} {what}: {m}", T::NAME)),
    }
}

/// `out = a + b` and `out = b * a`, `b` a view of a buffer of `len` elements and `a` the
/// view `a` of its own buffer (dense like `out` where `None`); then `out += b` (apply2,
/// reads its output) and `out = b` (a copy).
#[allow(clippy::too_many_arguments)]
fn tiled_case<T: TestElem>(
    gpu: &Gpu,
    rng: &mut Rng,
    what: &str,
    out: &Layout,
    view: &Layout,
    len: usize,
    a: Option<(&Layout, usize)>,
) -> Result<(), String>
where
    ops::Add: Kernels3<T, T, T> + ops::Op3<T, T, T>,
    ops::Mul: Kernels3<T, T, T> + ops::Op3<T, T, T>,
    ops::Update<ops::Add>: Kernels2<T, T> + ops::Op2<T, T>,
    ops::Cast: Kernels2<T, T> + ops::Op2<T, T>,
{
    use strided_apply::cpu;
    use strided_apply::ops::{Add, Cast, Mul, Update};
    let e = |e: Error| format!("{} {what}: {e}", T::NAME);
    let n = out.numel();
    let (a_host, a_view): (Vec<T>, Layout) = match a {
        Some((l, len)) => (random_vec(rng, len), l.clone()),
        None => (random_vec(rng, n), out.clone()),
    };
    let b_host: Vec<T> = random_vec(rng, len);
    let a = DeviceTensor::from_slice(gpu, &a_host, &[a_host.len()])
        .and_then(|t| t.with_layout(a_view.clone()))
        .map_err(e)?;
    let b = DeviceTensor::from_slice(gpu, &b_host, &[len])
        .and_then(|t| t.with_layout(view.clone()))
        .map_err(e)?;
    let start: Vec<T> = random_vec(rng, n);
    let mut o = DeviceTensor::from_slice(gpu, &start, &[n])
        .and_then(|t| t.with_layout(out.clone()))
        .map_err(e)?;
    let mut want = start.clone();
    api::apply3(gpu, Add, &mut o, &a, &b).map_err(e)?;
    cpu::apply3(Add, (&mut want, out), (&a_host, &a_view), (&b_host, view)).map_err(e)?;
    check_exact(
        &format!("{what}: a + b"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )?;
    api::apply3(gpu, Mul, &mut o, &b, &a).map_err(e)?;
    cpu::apply3(Mul, (&mut want, out), (&b_host, view), (&a_host, &a_view)).map_err(e)?;
    check_exact(
        &format!("{what}: b * a"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )?;
    api::apply2(gpu, Update(Add), &mut o, &b).map_err(e)?;
    cpu::apply2(Update(Add), (&mut want, out), (&b_host, view)).map_err(e)?;
    check_exact(
        &format!("{what}: out += b"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )?;
    api::apply2(gpu, Cast, &mut o, &b).map_err(e)?;
    cpu::apply2(Cast, (&mut want, out), (&b_host, view)).map_err(e)?;
    check_exact(
        &format!("{what}: out = b"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )
}

/// The tiled variant with 2-byte operands: transposes and permutations of f16 and bf16 with
/// one and two staged inputs, broadcast inputs, an op that reads its output (`out += bᵀ`),
/// whole tiles (apply2's 128 × 128, apply3's 64 × 64) beside edge tiles (sizes not
/// multiples of 64, odd sizes; apply2's element form runs in quarters), and the layouts a
/// paired form (two elements per 4-byte access, `benches/NOTES.md` step 15) must take
/// element by element: a view starting at an odd element, an odd stride, a reversed
/// unit-stride axis, a column broadcast. Every result equals the CPU twin bit for bit.
fn two_byte_tiles(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Cast, Mul, Update};
    use strided_apply::{bf16, f16, Layout};
    fn all<T: TestElem>(gpu: &Gpu, rng: &mut Rng) -> Result<usize, String>
    where
        Add: Kernels3<T, T, T> + strided_apply::ops::Op3<T, T, T>,
        Mul: Kernels3<T, T, T> + strided_apply::ops::Op3<T, T, T>,
        Update<Add>: Kernels2<T, T> + strided_apply::ops::Op2<T, T>,
        Cast: Kernels2<T, T> + strided_apply::ops::Op2<T, T>,
    {
        let e = |e: Error| e.to_string();
        let dense = |shape: &[usize]| Layout::contiguous(shape).map_err(e);
        let mut cases = 0;
        let mut run =
            |what: String, out: &Layout, b: &Layout, len: usize, a: Option<(&Layout, usize)>| {
                cases += 1;
                tiled_case::<T>(gpu, rng, &what, out, b, len, a)
            };
        // Transposes: out [r, c], b = B[c, r]ᵀ (odd sizes: a pair cut by the tile's edge).
        let sizes = [
            (64, 64),
            (128, 96),
            (130, 66),
            (2, 200),
            (66, 2),
            (2, 2),
            (100, 37),
        ];
        // Several whole tiles, and whole ones beside edge tiles (apply2's 128 × 128 tiles of
        // which only some quarters are inside).
        let whole = [(128, 128), (256, 200), (300, 260)];
        for (r, c) in sizes.into_iter().chain([(37, 100), (63, 64)]).chain(whole) {
            let (out, n) = (dense(&[r, c])?, r * c);
            let bt = dense(&[c, r])?.permute(&[1, 0]).map_err(e)?;
            run(format!("[{r}, {c}] + bT"), &out, &bt, n, None)?;
            run(format!("[{r}, {c}] aT + bT"), &out, &bt, n, Some((&bt, n)))?;
            // Broadcasts: a column (stride 0 along the output's unit axis), a row.
            let col = dense(&[r, 1])?;
            run(
                format!("[{r}, {c}] column + bT"),
                &out,
                &bt,
                n,
                Some((&col, r)),
            )?;
            let row = dense(&[1, c])?;
            run(
                format!("[{r}, {c}] row + bT"),
                &out,
                &bt,
                n,
                Some((&row, c)),
            )?;
            // Reversed along its slow axis (still words), along its unit axis (elements).
            for d in 0..2 {
                let rev = bt.flip(d).map_err(e)?;
                run(format!("[{r}, {c}] + bT flip({d})"), &out, &rev, n, None)?;
            }
        }
        // A view starting at an odd element (every pair misaligned), one with an odd row
        // stride (elements), one aligned.
        for (start, pitch) in [(1usize, 130usize), (2, 129), (2, 130)] {
            let (r, c) = (96, 64);
            let len = start + (r - 1) + (c - 1) * pitch + 1;
            let bt = Layout::new(&[r, c], &[1, pitch as isize], start).map_err(e)?;
            let what = format!("offset {start}, pitch {pitch}");
            run(what, &dense(&[r, c])?, &bt, len, None)?;
        }
        // Permuted copies (and adds) of 4-D views, batch axes beyond the tile.
        for (shape, perm) in [
            ([8usize, 6, 10, 12], [3usize, 1, 0, 2]),
            ([4, 66, 3, 70], [3, 1, 0, 2]),
            ([2, 3, 64, 130], [0, 1, 3, 2]),
            ([5, 7, 9, 11], [3, 1, 0, 2]),
            // The bench's permutation, small: whole 128 × 128 tiles of apply2, both rounds
            // of phase 2, batch axes in the input's order.
            ([2, 3, 128, 256], [3, 1, 0, 2]),
        ] {
            let src = dense(&shape)?.permute(&perm).map_err(e)?;
            let len = shape.iter().product();
            run(
                format!("{shape:?} permuted {perm:?}"),
                &dense(src.shape())?,
                &src,
                len,
                None,
            )?;
        }
        Ok(cases)
    }
    let mut rng = Rng(0x9a17);
    let cases = all::<f16>(gpu, &mut rng)? + all::<bf16>(gpu, &mut rng)?;
    Ok(format!(
        "{cases} layouts × 4 ops (a + b, b * a, out += b, out = b), f16 and bf16, GPU = CPU twin"
    ))
}

/// The tiled variant over batch axes for every element size a tile stages (1, 2, 4, 8
/// bytes): permuted 3-D and 4-D views through apply2 (64 × 64 tiles) and apply3 (32 × 32),
/// the staged input's unit axis a whole number of tiles for both, for one, for neither; that
/// axis reversed; a second input broadcast over the batch. Every result equals the CPU twin
/// bit for bit.
fn tiled_batches(gpu: &Gpu) -> TestResult {
    use strided_apply::{bf16, ops::*};
    fn all<T: TestElem>(gpu: &Gpu, rng: &mut Rng) -> Result<usize, String>
    where
        Add: Kernels3<T, T, T> + Op3<T, T, T>,
        Mul: Kernels3<T, T, T> + Op3<T, T, T>,
        Update<Add>: Kernels2<T, T> + Op2<T, T>,
        Cast: Kernels2<T, T> + Op2<T, T>,
    {
        let e = |e: Error| e.to_string();
        let dense = |shape: &[usize]| Layout::contiguous(shape).map_err(e);
        let mut cases = 0;
        for (shape, perm) in [
            // The bench's permutation, small: axis p = 256 (4 tiles of 64, 8 of 32).
            (vec![2usize, 3, 128, 256], vec![3usize, 1, 0, 2]),
            // 3-D: the input's unit axis 128 (whole tiles), one batch axis.
            (vec![5, 192, 128], vec![2, 0, 1]),
            // 96: whole tiles for apply3's 32-wide tiles, not for apply2's 64.
            (vec![3, 70, 96], vec![2, 0, 1]),
            // 200: no whole number of tiles for either.
            (vec![4, 66, 200], vec![2, 0, 1]),
        ] {
            let len = shape.iter().product();
            let src = dense(&shape)?.permute(&perm).map_err(e)?;
            let out = dense(src.shape())?;
            let flipped = src.flip(0).map_err(e)?;
            for (what, view) in [("", &src), (" flip(0)", &flipped)] {
                let what = format!("{shape:?} permuted {perm:?}{what}");
                cases += 1;
                tiled_case::<T>(gpu, rng, &what, &out, view, len, None)?;
            }
            // `a` broadcast over every axis but the output's unit axis and the next.
            let mut bshape = src.shape().to_vec();
            let nd = bshape.len();
            bshape[..nd - 2].iter_mut().for_each(|s| *s = 1);
            let row = dense(&bshape)?;
            let row = row.broadcast_to(src.shape()).map_err(e)?;
            cases += 1;
            tiled_case::<T>(
                gpu,
                rng,
                &format!("{shape:?} permuted {perm:?}, a broadcast"),
                &out,
                &src,
                len,
                Some((&row, bshape.iter().product())),
            )?;
        }
        Ok(cases)
    }
    let mut rng = Rng(0x7c17);
    let cases = all::<u8>(gpu, &mut rng)?
        + all::<bf16>(gpu, &mut rng)?
        + all::<f32>(gpu, &mut rng)?
        + all::<f64>(gpu, &mut rng)?;
    Ok(format!(
        "{cases} layouts × 4 ops (a + b, b * a, out += b, out = b), u8, bf16, f32, f64, GPU = CPU twin"
    ))
}

// ------------------------------------------------------------------ knobs

/// A count from the environment (`name`), else `default`: the sanitizer run
/// (`scripts/sanitize`) makes the random, load and size tests smaller with these.
fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn estr(e: Error) -> String {
    e.to_string()
}

// ------------------------------------------------------------------ random GPU vs CPU

macro_rules! gpu_random {
    ($fn:ident, $trait:ident, $verify:path, $k:literal, [$($x:ident: $t:ident),*]) => {
        /// One random case (common::random) of an op, GPU against the CPU twin.
        fn $fn<Op, O: TestElem $(, $t: TestElem)*>(gpu: &Gpu, op: Op, name: &str, rng: &mut Rng) -> Result<(), String>
        where Op: strided_apply::ops::Accuracy + $trait<O $(, $t)*> {
            let case = random_case(rng, $k, GPU_LIMITS);
            let mut _i = 0;
            $(
                let $x: Vec<$t> = random_vec(rng, case.inputs[_i].len);
                let $x = (&$x[..], &case.inputs[_i].layout);
                _i += 1;
            )*
            let init: Vec<O> = if $k == 0 { random_vec(rng, case.out.len) } else { vec![O::poison(); case.out.len] };
            match $verify(gpu, op, (&init, &case.out.layout) $(, $x)*) {
                Ok(None) => Ok(()),
                Ok(Some(m)) => Err(format!("{name}: {m}; case {case:?}")),
                Err(e) => Err(format!("{name}: {e}; case {case:?}")),
            }
        }
    };
}
gpu_random!(random1, Kernels1, verify::apply1, 0, []);
gpu_random!(random2, Kernels2, verify::apply2, 1, [a: A]);
gpu_random!(random3, Kernels3, verify::apply3, 2, [a: A, b: B]);
gpu_random!(random4, Kernels4, verify::apply4, 3, [a: A, b: B, c: C]);

const GPU_LIMITS: Limits = Limits { max_numel: 1 << 13 };

/// Rows of the op table.
fn op_rows() -> usize {
    let mut rows = 0;
    macro_rules! count {
        ($($t:tt)*) => {
            rows += 1
        };
    }
    #[allow(unused_imports, unused_variables)] // the table's `use`s and bindings
    {
        op_table!(count);
    }
    rows
}

/// One random (layout, op, types) case from `seed`: a random row of the op table on a
/// random case of `common::random`.
fn random_case_on_gpu(gpu: &Gpu, seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed | 1);
    let pick = rng.below(op_rows() as u64) as usize;
    let mut row = 0usize;
    let mut result: Option<Result<(), String>> = None;
    macro_rules! run {
        (1, $name:expr, $op:expr, $t:ty) => { run!(@row random1::<_, $t>(gpu, $op, $name, &mut rng)) };
        (2, $name:expr, $op:expr, $o:ty, $a:ty) => { run!(@row random2::<_, $o, $a>(gpu, $op, $name, &mut rng)) };
        (3, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty) => {
            run!(@row random3::<_, $o, $a, $b>(gpu, $op, $name, &mut rng))
        };
        (4, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty, $c:ty) => {
            run!(@row random4::<_, $o, $a, $b, $c>(gpu, $op, $name, &mut rng))
        };
        (@row $call:expr) => {{
            if row == pick {
                result = Some($call);
            }
            row += 1;
        }};
    }
    op_table!(run);
    let _ = row;
    result.unwrap_or_else(|| Err(format!("row {pick} not in the table")))
}

/// ≥ 100k random (layout, op, type) cases, GPU against the CPU twin. The seed is printed;
/// `STRIDED_APPLY_SEED` replays a run, `STRIDED_APPLY_GPU_CASES` sets the count.
fn random_layouts(gpu: &Gpu) -> TestResult {
    let seed = std::env::var("STRIDED_APPLY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let cases = knob("STRIDED_APPLY_GPU_CASES", 100_000);
    println!("  random_layouts: STRIDED_APPLY_SEED={seed} STRIDED_APPLY_GPU_CASES={cases}");
    let mut master = Rng(seed | 1);
    for i in 0..cases {
        let case_seed = master.next();
        random_case_on_gpu(gpu, case_seed).map_err(|e| {
            format!("case {i} (seed {case_seed}; run seed STRIDED_APPLY_SEED={seed}): {e}")
        })?;
    }
    Ok(format!("{cases} random cases, GPU = CPU twin, seed {seed}"))
}

// ------------------------------------------------------------------ bad inputs on the GPU

/// An image for the built-in module's name, built from stored (uncompressed) frames:
/// `(target, PTX header, [(family, code)])`.
/// `(family, code)` pairs of one target.
type Families<'a> = &'a [(&'a str, &'a [u8])];

fn leak_image(targets: &[(Target, &str, Families)]) -> ModuleImage {
    let mut w = image::Writer::new("module gpu-kernels (test image)");
    for (target, header, families) in targets {
        let t = w.add_target(*target, header, None);
        for (family, code) in *families {
            w.add_frame(family, t, image::store_frame(code), code.len() as u32);
        }
    }
    ModuleImage {
        name: "gpu-kernels",
        bytes: Box::leak(w.finish().into_boxed_slice()),
    }
}

/// The built-in image with one byte of family `family`'s frame for the device's target
/// flipped (or, with `cut`, the image cut off inside that frame).
fn damaged_builtin(gpu: &Gpu, family: &str, cut: bool) -> Result<ModuleImage, String> {
    let bytes = strided_apply::BUILTIN.bytes;
    let img = image::Image::parse(bytes).map_err(|e| e.to_string())?;
    let (major, minor) = gpu.compute_capability();
    let t = img
        .choose((major as u32, minor as u32), force_ptx())
        .ok_or("no target for this device")?;
    let f = img
        .family(family)
        .ok_or("family missing from the built-in image")?;
    let range = img.frame_range(img.frame(f, t));
    let mut copy = bytes.to_vec();
    let mid = (range.start + range.end) / 2;
    if cut {
        copy.truncate(mid);
    } else {
        copy[mid] ^= 0x55;
    }
    Ok(ModuleImage {
        name: "gpu-kernels",
        bytes: Box::leak(copy.into_boxed_slice()),
    })
}

fn force_ptx() -> bool {
    std::env::var("STRIDED_APPLY_FORCE_PTX").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// An image with one family of sm_70 PTX.
fn ptx70_image(header: &str, family: &str, body: &[u8]) -> ModuleImage {
    leak_image(&[(Target::ptx(70), header, &[(family, body)])])
}

const PTX_HEADER: &str = ".version 7.0\n.target sm_70\n.address_size 64\n";
/// A valid PTX body with one kernel that none of the library's names match.
const DUMMY_BODY: &[u8] = b"\n.visible .entry neg_f32_dummy()\n{\n\tret;\n}\n";

/// Module-level failures, each on a fresh handle with one bad image registered under the
/// built-in module's name: every error names the module, the device's compute capability
/// and the targets built; the handle keeps working for other families, and so does the
/// original handle.
fn module_errors(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Neg};
    let mut lines = Vec::new();
    let neg = |g: &Gpu| -> Result<Result<(), Error>, String> {
        let a = DeviceTensor::from_slice(g, &[1.0f32, 2.0], &[2]).map_err(estr)?;
        let mut out = DeviceTensor::<f32>::zeros(g, &[2]).map_err(estr)?;
        Ok(api::apply2(g, Neg, &mut out, &a))
    };
    let add_works = |g: &Gpu| -> Result<(), String> {
        let a = DeviceTensor::from_slice(g, &[1.0f32, -2.0], &[2]).map_err(estr)?;
        let mut out = DeviceTensor::<f32>::zeros(g, &[2]).map_err(estr)?;
        api::apply3(g, Add, &mut out, &a, &a).map_err(estr)?;
        match out.to_vec(g).map_err(estr)? {
            v if v == [2.0, -4.0] => Ok(()),
            v => Err(format!("add after a module error gave {v:?}")),
        }
    };
    let fresh = |image: Option<ModuleImage>| -> Result<(Gpu, Result<(), Error>), String> {
        let g = Gpu::new(0).map_err(estr)?;
        if let Some(image) = image {
            g.register(image);
        }
        let r = neg(&g)?;
        Ok((g, r))
    };
    let (major, minor) = gpu.compute_capability();
    let cc = format!("compute capability {major}.{minor}");
    let names_all = |e: &Error, built: &str| {
        let t = e.to_string();
        t.contains("gpu-kernels") && t.contains(&cc) && t.contains(built)
    };
    let (_g, r) = fresh(None)?;
    lines.push(expect_err(r, "module not registered", |e| {
        matches!(
            e,
            Error::ModuleNotRegistered {
                module: "gpu-kernels"
            }
        ) && e.to_string().contains("not registered")
    })?);
    // Only targets newer than the device (as an sm_60 device sees an sm_70+ image).
    let newer = (major as u32 + 1) * 10;
    let (_g, r) = fresh(Some(leak_image(&[
        (Target::cubin(newer), "", &[("neg_f32", b"x")]),
        (Target::ptx(newer), PTX_HEADER, &[("neg_f32", DUMMY_BODY)]),
    ])))?;
    lines.push(expect_err(r, "no code for this device", |e| {
        matches!(e, Error::NoCodeForDevice { .. })
            && names_all(e, &format!("sm_{newer} cubin, sm_{newer} PTX"))
    })?);
    // A corrupt frame and a truncated image: the family fails with a typed error, the
    // same handle still launches other families.
    for (what, cut) in [("corrupt frame", false), ("truncated image", true)] {
        let (g, r) = fresh(Some(damaged_builtin(gpu, "neg_f32", cut)?))?;
        lines.push(expect_err(r, what, |e| {
            matches!(e, Error::ImageCorrupt { .. }) && names_all(e, "sm_90 PTX")
        })?);
        if !cut {
            add_works(&g).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    // An unreadable index: the targets are unknown, the error says so.
    let garbage = ModuleImage {
        name: "gpu-kernels",
        bytes: b"SAIMAGE1 but nothing else",
    };
    let (_g, r) = fresh(Some(garbage))?;
    lines.push(expect_err(r, "unreadable image", |e| {
        matches!(e, Error::ImageCorrupt { .. }) && names_all(e, "unknown")
    })?);
    // The family is not in the image.
    let (_g, r) = fresh(Some(ptx70_image(PTX_HEADER, "add_f32", DUMMY_BODY)))?;
    lines.push(expect_err(r, "family missing", |e| {
        matches!(
            e,
            Error::FamilyMissing {
                family: "neg_f32",
                ..
            }
        ) && names_all(e, "sm_70 PTX")
    })?);
    // The driver refuses the code: garbage PTX, PTX newer than the driver.
    let (_g, r) = fresh(Some(ptx70_image(
        PTX_HEADER,
        "neg_f32",
        b"this is not PTX\n",
    )))?;
    lines.push(expect_err(r, "garbage PTX", |e| {
        matches!(
            e,
            Error::ModuleLoad {
                family: "neg_f32",
                ..
            }
        ) && names_all(e, "sm_70 PTX")
    })?);
    let (_g, r) = fresh(Some(ptx70_image(
        ".version 99.9\n.target sm_70\n.address_size 64\n",
        "neg_f32",
        DUMMY_BODY,
    )))?;
    lines.push(expect_err(r, "PTX too new for the driver", |e| {
        matches!(e, Error::ModuleLoad { .. }) && e.to_string().contains("older than the PTX")
    })?);
    // The family loads but lacks the kernel.
    let (g, r) = fresh(Some(ptx70_image(PTX_HEADER, "neg_f32", DUMMY_BODY)))?;
    lines.push(expect_err(r, "kernel missing", |e| {
        matches!(e, Error::KernelMissing { module: "gpu-kernels", kernel, .. } if kernel.contains("neg"))
    })?);
    // Registering the real image again on the failing handle makes it whole.
    g.register(strided_apply::BUILTIN);
    neg(&g)?.map_err(|e| format!("after re-registering: {e}"))?;
    add_works(gpu)?;
    Ok(lines.join("; "))
}

/// The module each launch uses comes from the best target for the device: a cubin unless
/// `STRIDED_APPLY_FORCE_PTX=1` (then PTX), visible in `module_info`; only the launched
/// families are loaded.
fn module_choice(_gpu: &Gpu) -> TestResult {
    use strided_apply::ops::Add;
    let g = strided_apply::open(0).map_err(estr)?;
    let forced = force_ptx();
    let info = g.module_info();
    let builtin = info
        .iter()
        .find(|i| i.module == "gpu-kernels")
        .ok_or("built-in module not listed")?;
    let chosen = builtin.chosen.ok_or("no target chosen")?;
    let want = if forced {
        image::Kind::Ptx
    } else {
        image::Kind::Cubin
    };
    if chosen.kind != want || builtin.forced_ptx != forced {
        return Err(format!("chose {chosen} (forced {forced}): {builtin}"));
    }
    if !builtin.loaded.is_empty() {
        return Err(format!("families loaded before any launch: {builtin}"));
    }
    let a = DeviceTensor::from_slice(&g, &[1.0f32, 2.0], &[2]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(&g, &[2]).map_err(estr)?;
    api::apply3(&g, Add, &mut out, &a, &a).map_err(estr)?;
    let one = DeviceTensor::from_slice(&g, &[5.0f32], &[1]).map_err(estr)?;
    api::apply3(&g, Add, &mut out, &a, &one).map_err(estr)?;
    if out.to_vec(&g).map_err(estr)? != [6.0, 7.0] {
        return Err("wrong sums".into());
    }
    let after = g.module_info();
    let loaded: Vec<&str> = after
        .iter()
        .find(|i| i.module == "gpu-kernels")
        .map(|i| i.loaded.iter().map(|l| l.family).collect())
        .unwrap_or_default();
    if loaded != ["add_f32"] {
        return Err(format!("loaded {loaded:?} for two f32 adds"));
    }
    Ok(after
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; "))
}

/// Empty tensors are valid and launch nothing: on a handle with no module registered, an
/// empty op succeeds (a launch would fail with ModuleNotRegistered), of any rank, typed and
/// raw (a null pointer is fine when nothing is reached).
fn empty_tensors(_gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Neg};
    use strided_apply::raw::{self, RawTensor};
    use strided_apply::ElemType;
    let bare = Gpu::new(0).map_err(estr)?;
    let mut shapes: Vec<Vec<usize>> = vec![vec![0], vec![3, 0], vec![0, 5, 7]];
    // Rank above the maximum with no mergeable axes, empty.
    shapes.push((0..30).map(|d| if d == 7 { 0 } else { 2 }).collect());
    for shape in &shapes {
        let a = DeviceTensor::<f32>::zeros(&bare, shape).map_err(estr)?;
        let mut out = DeviceTensor::<f32>::zeros(&bare, shape).map_err(estr)?;
        api::apply3(&bare, Add, &mut out, &a, &a).map_err(|e| format!("empty {shape:?}: {e}"))?;
    }
    let (shape, strides) = ([4usize, 0], [1isize, 1]);
    let t = |ptr| RawTensor {
        ptr,
        elem: ElemType::F32,
        shape: &shape,
        strides: &strides,
    };
    // SAFETY: nothing is reached (0 elements).
    unsafe { raw::apply2::<_, f32, f32>(&bare, None, Neg, t(0), t(0)) }.map_err(estr)?;
    // A non-empty op on the same handle does try to launch.
    let a = DeviceTensor::<f32>::zeros(&bare, &[2]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(&bare, &[2]).map_err(estr)?;
    expect_err(api::apply2(&bare, Neg, &mut out, &a), "non-empty", |e| {
        matches!(e, Error::ModuleNotRegistered { .. })
    })?;
    Ok(format!(
        "{} empty shapes, typed and raw, no launch",
        shapes.len()
    ))
}

/// The raw API's checks: everything the library can see is a typed error naming the
/// operand, before any launch.
fn raw_api_catalogue(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Neg};
    use strided_apply::raw::{self, RawTensor};
    use strided_apply::{ElemType, MAX_DIMS};
    let buf = DeviceTensor::<f32>::zeros(gpu, &[64]).map_err(estr)?;
    let base = buf.buffer().addr();
    let t = |ptr: u64, shape: &'static [usize], strides: &'static [isize]| RawTensor {
        ptr,
        elem: ElemType::F32,
        shape,
        strides,
    };
    let mut lines = Vec::new();
    let n = MAX_DIMS + 1;
    let deep_shape: &'static [usize] = Box::leak(vec![2usize; n].into_boxed_slice());
    let deep_strides: &'static [isize] = Box::leak(
        (0..n)
            .rev()
            .map(|d| 3isize.pow(d as u32))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    // SAFETY: every call below is refused by the checks before any launch.
    unsafe {
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[8], &[1]),
                t(base + 4, &[8], &[1]),
            ),
            "raw partial overlap",
            |e| {
                matches!(e, Error::PartialOverlap { operand: "a" })
                    && e.to_string().starts_with("a ")
            },
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[4, 4], &[0, 1]),
                t(base + 256, &[4, 4], &[4, 1]),
            ),
            "raw overlapping output",
            |e| matches!(e, Error::OverlappingOutput { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply3::<_, f32, f32, f32>(
                gpu,
                None,
                Add,
                t(base, &[4, 4], &[4, 1]),
                t(base + 128, &[4, 4], &[4, 1]),
                t(base + 128, &[3], &[1]),
            ),
            "raw broadcast",
            |e| matches!(e, Error::Broadcast { operand: "b", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[4, 2], &[isize::MAX / 2, 1]),
                t(base + 128, &[2], &[1]),
            ),
            "raw stride overflow",
            |e| matches!(e, Error::Overflow { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply1::<_, f32>(
                gpu,
                None,
                strided_apply::ops::Fill(1.0f32),
                t(base, deep_shape, deep_strides),
            ),
            "raw rank above the maximum",
            |e| matches!(e, Error::RankTooHigh { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(gpu, None, Neg, t(base, &[2], &[1]), t(base, &[2, 2], &[2])),
            "raw strides/shape length",
            |e| matches!(e, Error::InvalidView { operand: "a", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[2], &[1]),
                RawTensor {
                    ptr: base + 128,
                    elem: ElemType::U8,
                    shape: &[2],
                    strides: &[1],
                },
            ),
            "raw element type",
            |e| {
                matches!(e, Error::TypeMismatch { operand: "a", .. })
                    && e.to_string().contains("u8")
            },
        )?);
    }
    // The buffer is untouched and the context works.
    if buf.to_vec(gpu).map_err(estr)? != vec![0.0f32; 64] {
        return Err("a refused raw call wrote memory".into());
    }
    Ok(lines.join("; "))
}

/// Allocates until the device is out of memory, checks the typed error, frees, and runs
/// an op successfully.
/// The device's memory pool keeps freed tensors mapped (the library's default), gives them
/// back on `release_cached_memory`, and at every synchronisation under a cache limit of 0.
fn memory_pool_keeps_then_releases(gpu: &Gpu) -> TestResult {
    const MIB256: u64 = 256 << 20;
    if !gpu.context().has_async_alloc() {
        let r = gpu.reserved_memory().map_err(estr)?;
        return match r {
            0 => Ok("device without memory pools: nothing reserved".into()),
            _ => Err(format!("no pool, yet {r} bytes reserved")),
        };
    }
    let alloc_drop = || -> Result<(), String> {
        let t = DeviceTensor::<u8>::zeros(gpu, &[MIB256 as usize]).map_err(estr)?;
        drop(t);
        gpu.synchronize().map_err(estr)
    };
    gpu.release_cached_memory().map_err(estr)?;
    let base = gpu.reserved_memory().map_err(estr)?;
    alloc_drop()?;
    let kept = gpu.reserved_memory().map_err(estr)?;
    if kept < base + MIB256 {
        return Err(format!("freed 256 MiB not kept: {base} -> {kept} bytes"));
    }
    gpu.release_cached_memory().map_err(estr)?;
    let released = gpu.reserved_memory().map_err(estr)?;
    if released > base {
        return Err(format!("not released: {kept} -> {released} (base {base})"));
    }
    gpu.set_memory_cache_limit(0).map_err(estr)?;
    let limited = alloc_drop().and_then(|()| gpu.reserved_memory().map_err(estr));
    gpu.set_memory_cache_limit(u64::MAX).map_err(estr)?;
    let limited = limited?;
    if limited > base {
        return Err(format!("cache limit 0 kept {limited} bytes (base {base})"));
    }
    Ok(format!(
        "reserved {} MiB, 256 MiB freed: {} MiB kept, {} MiB after release, {} MiB with limit 0",
        base >> 20,
        kept >> 20,
        released >> 20,
        limited >> 20
    ))
}

fn out_of_memory_then_recover(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::Neg;
    gpu.synchronize().map_err(estr)?;
    let mut held: Vec<DeviceTensor<u8>> = Vec::new();
    let mut err = None;
    let mut total = 0usize;
    'outer: for chunk in [8usize << 30, 1 << 30, 64 << 20] {
        for _ in 0..256 {
            match DeviceTensor::<u8>::zeros(gpu, &[chunk]) {
                Ok(t) => {
                    total += chunk;
                    held.push(t);
                }
                Err(e @ Error::OutOfMemory { .. }) => {
                    err = Some(e);
                    continue 'outer;
                }
                Err(e) => return Err(format!("allocating: {e:?}")),
            }
        }
        return Err(format!("no OutOfMemory after {total} bytes"));
    }
    let Some(e) = err else {
        return Err("no OutOfMemory".into());
    };
    if !e.to_string().contains("out of memory") {
        return Err(format!("message: {e}"));
    }
    let msg = e.to_string();
    drop(held);
    gpu.synchronize().map_err(estr)?;
    // The pool now caches what was freed, in chunks of 8 GiB, 1 GiB and 64 MiB; one tensor
    // of all but 1 GiB of it must still fit: the driver serves it from the cached chunks
    // (580.159 does), or the allocation gives the cache back and retries.
    let cached = gpu.reserved_memory().map_err(estr)?;
    let whole = total.saturating_sub(1 << 30).max(1);
    let t = DeviceTensor::<u8>::zeros(gpu, &[whole])
        .map_err(|e| format!("{whole} bytes after freeing {total} ({cached} cached): {e}"))?;
    drop(t);
    gpu.synchronize().map_err(estr)?;
    let a = DeviceTensor::from_slice(gpu, &[1.0f32, -2.0, 3.0], &[3]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(gpu, &[3]).map_err(estr)?;
    api::apply2(gpu, Neg, &mut out, &a).map_err(estr)?;
    if out.to_vec(gpu).map_err(estr)? != [-1.0, 2.0, -3.0] {
        return Err("wrong result after recovering from OOM".into());
    }
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    Ok(format!(
        "{:.1} GiB allocated, then `{msg}`; freed ({:.1} GiB cached), one tensor of {:.1} GiB, op ok",
        gib(total),
        gib(cached as usize),
        gib(whole)
    ))
}

// ------------------------------------------------------------------ 64-bit indexing

/// `f(i)` for `i` in `0..n`, filled on all cores.
fn par_fill<T: Copy + Default + Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut v = vec![T::default(); n];
    let threads = std::thread::available_parallelism().map_or(8, |p| p.get());
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (c, part) in v.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (j, x) in part.iter_mut().enumerate() {
                    *x = f(c * chunk + j);
                }
            });
        }
    });
    v
}

/// The first `i` in `0..got.len()` where `got[i] != f(i)`, checked on all cores.
fn par_first_wrong<T: Copy + PartialEq + Sync>(
    got: &[T],
    f: impl Fn(usize) -> T + Sync,
) -> Option<usize> {
    let threads = std::thread::available_parallelism().map_or(8, |p| p.get());
    let chunk = got.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = got
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                let f = &f;
                s.spawn(move || {
                    part.iter()
                        .enumerate()
                        .find(|(j, &x)| x != f(c * chunk + j))
                        .map(|(j, _)| c * chunk + j)
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .min()
    })
}

fn variant_of<const N: usize>(layouts: [&strided_apply::Layout; N]) -> String {
    let names = ["out", "a", "b", "c"];
    strided_apply::plan::plan(layouts, std::array::from_fn(|k| names[k]))
        .map_or_else(|e| e.to_string(), |p| format!("{:?}", p.variant))
}

fn check_all<T: Copy + PartialEq + Sync + std::fmt::Debug>(
    what: &str,
    got: &[T],
    f: impl Fn(usize) -> T + Sync,
) -> Result<(), String> {
    match par_first_wrong(got, &f) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: element {i} is {:?}, expected {:?}",
            got[i],
            f(i)
        )),
    }
}

fn big_enabled() -> bool {
    std::env::var("STRIDED_APPLY_BIG").is_ok_and(|v| v == "1")
}

/// A 3 GiB u8 tensor (3 * 2^30 elements): contiguous (aligned, and from element 1),
/// transposed and broadcast, each element checked against its closed form.
fn index64_u8_3gib(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Rhs};
    let (m, k) = (3usize << 14, 1usize << 16);
    let n = m * k;
    let a = DeviceTensor::from_slice(gpu, &par_fill(n, |i| (i % 251) as u8), &[n]).map_err(estr)?;
    let mut out = DeviceTensor::<u8>::zeros(gpu, &[n]).map_err(estr)?;
    let plus1 = Rhs { op: Add, s: 1u8 };
    let mut report = Vec::new();
    api::apply2(gpu, plus1, &mut out, &a).map_err(estr)?;
    report.push(format!(
        "contiguous {}",
        variant_of([out.layout(), a.layout()])
    ));
    check_all("contiguous", &out.to_vec(gpu).map_err(estr)?, |i| {
        (i % 251) as u8 + 1
    })?;
    // Dense but not 16-byte aligned (both views start at element 1): one unit-stride axis
    // through `d1`, in 32-bit pieces.
    let (a1, mut o1) = (
        a.slice(0, Some(1), None, 1).map_err(estr)?,
        out.slice(0, Some(1), None, 1).map_err(estr)?,
    );
    api::apply2(gpu, Rhs { op: Add, s: 2u8 }, &mut o1, &a1).map_err(estr)?;
    report.push(format!(
        "unaligned {}",
        variant_of([o1.layout(), a1.layout()])
    ));
    check_all("unaligned", &out.to_vec(gpu).map_err(estr)?, |i| {
        (i % 251) as u8 + if i == 0 { 1 } else { 2 }
    })?;
    let at = a
        .reshape(&[m, k])
        .map_err(estr)?
        .transpose(0, 1)
        .map_err(estr)?;
    let mut ot = out.reshape(&[k, m]).map_err(estr)?;
    api::apply2(gpu, plus1, &mut ot, &at).map_err(estr)?;
    report.push(format!(
        "transposed {}",
        variant_of([ot.layout(), at.layout()])
    ));
    check_all("transposed", &ot.to_vec(gpu).map_err(estr)?, |x| {
        let (j, i) = (x / m, x % m);
        ((i * k + j) % 251) as u8 + 1
    })?;
    let row =
        DeviceTensor::from_slice(gpu, &par_fill(k, |j| (j % 13) as u8), &[k]).map_err(estr)?;
    let col = DeviceTensor::from_slice(gpu, &par_fill(m, |i| (i % 7) as u8 * 16), &[m, 1])
        .map_err(estr)?;
    let mut ob = out.reshape(&[m, k]).map_err(estr)?;
    api::apply3(gpu, Add, &mut ob, &row, &col).map_err(estr)?;
    report.push(format!(
        "broadcast {}",
        variant_of([ob.layout(), row.layout(), col.layout()])
    ));
    check_all("broadcast", &ob.to_vec(gpu).map_err(estr)?, |x| {
        let (i, j) = (x / k, x % k);
        (j % 13) as u8 + (i % 7) as u8 * 16
    })?;
    Ok(format!(
        "u8 [{m}, {k}] = {n} elements: {}",
        report.join(", ")
    ))
}

/// An f32 tensor of 2^31 + 7 elements: contiguous, transposed ([45, 47721859]ᵀ) and
/// broadcast, against closed forms (exact in f32).
fn index64_f32_2pow31_plus_7(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Mul, Rhs};
    let (p, q) = (45usize, 47_721_859usize);
    let n = p * q;
    debug_assert_eq!(n, (1 << 31) + 7);
    let a =
        DeviceTensor::from_slice(gpu, &par_fill(n, |i| (i % 4093) as f32), &[n]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(estr)?;
    let twice = Rhs { op: Mul, s: 2.0f32 };
    let mut report = Vec::new();
    api::apply2(gpu, twice, &mut out, &a).map_err(estr)?;
    report.push(format!(
        "contiguous {}",
        variant_of([out.layout(), a.layout()])
    ));
    check_all("contiguous", &out.to_vec(gpu).map_err(estr)?, |i| {
        2.0 * (i % 4093) as f32
    })?;
    let at = a
        .reshape(&[p, q])
        .map_err(estr)?
        .transpose(0, 1)
        .map_err(estr)?;
    let mut ot = out.reshape(&[q, p]).map_err(estr)?;
    api::apply2(gpu, twice, &mut ot, &at).map_err(estr)?;
    report.push(format!(
        "transposed {}",
        variant_of([ot.layout(), at.layout()])
    ));
    check_all("transposed", &ot.to_vec(gpu).map_err(estr)?, |x| {
        let (j, i) = (x / p, x % p);
        2.0 * ((i * q + j) % 4093) as f32
    })?;
    let row =
        DeviceTensor::from_slice(gpu, &par_fill(q, |j| (j % 1000) as f32), &[q]).map_err(estr)?;
    let col = DeviceTensor::from_slice(gpu, &par_fill(p, |i| (i * 1000) as f32), &[p, 1])
        .map_err(estr)?;
    let mut ob = out.reshape(&[p, q]).map_err(estr)?;
    api::apply3(gpu, Add, &mut ob, &row, &col).map_err(estr)?;
    report.push(format!(
        "broadcast {}",
        variant_of([ob.layout(), row.layout(), col.layout()])
    ));
    check_all("broadcast", &ob.to_vec(gpu).map_err(estr)?, |x| {
        let (i, j) = (x / q, x % q);
        (j % 1000) as f32 + (i * 1000) as f32
    })?;
    Ok(format!("f32 {n} elements: {}", report.join(", ")))
}

/// Reversed 1-D u8 views of 2^31 - 1, 2^31 and 2^31 + 1 elements (not contiguous, so a
/// `D` variant): the planner picks 32-bit D1 below the boundary and Dn64 from it on, and
/// every result is right; the element after the view is untouched.
fn index_width_boundary(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Rhs};
    let top = (1usize << 31) + 2;
    let a =
        DeviceTensor::from_slice(gpu, &par_fill(top, |i| (i % 253) as u8), &[top]).map_err(estr)?;
    let out = DeviceTensor::<u8>::zeros(gpu, &[top]).map_err(estr)?;
    let mut report = Vec::new();
    for n in [(1usize << 31) - 1, 1 << 31, (1 << 31) + 1] {
        let av = a
            .slice(0, Some(0), Some(n as isize), 1)
            .map_err(estr)?
            .flip(0)
            .map_err(estr)?;
        let mut ov = out.slice(0, Some(0), Some(n as isize), 1).map_err(estr)?;
        let v = variant_of([ov.layout(), av.layout()]);
        let want = if n <= i32::MAX as usize { "D1" } else { "Dn64" };
        if v != want {
            return Err(format!("{n} elements: planner chose {v}, expected {want}"));
        }
        api::apply2(gpu, Rhs { op: Add, s: 1u8 }, &mut ov, &av).map_err(estr)?;
        let got = out.buffer_to_vec(gpu).map_err(estr)?;
        check_all(&format!("{n} elements"), &got[..n], |i| {
            ((n - 1 - i) % 253) as u8 + 1
        })?;
        if got[n] != 0 {
            return Err(format!(
                "{n} elements: element {n} after the view was written"
            ));
        }
        report.push(format!("{n}: {v}"));
    }
    Ok(report.join(", "))
}

// ------------------------------------------------------------------ under load

/// One worker: `ops` mixed ops (i32, f32, u8; transposed, broadcast, reversed views; in
/// place) on its own tensors through `gpu`, replayed on the CPU twin, compared exactly
/// every 1000 ops and at the end.
fn load_worker(gpu: &Gpu, seed: u64, ops: usize) -> Result<(), String> {
    use strided_apply::ops::{Add, Cast, Fma, InPlace, Max, Mul, Rhs};
    use strided_apply::{cpu, Layout};
    let s = 48usize;
    let mut rng = Rng(seed | 1);
    let sq = Layout::contiguous(&[s, s]).map_err(estr)?;
    let sq_t = sq.transpose(0, 1).map_err(estr)?;
    let row = Layout::contiguous(&[s]).map_err(estr)?;
    let flip = sq.flip(0).map_err(estr)?;
    let mut hx: Vec<i32> = random_vec(&mut rng, s * s);
    let ha: Vec<i32> = random_vec(&mut rng, s * s);
    let mut hy: Vec<f32> = random_vec(&mut rng, s * s);
    let hb: Vec<f32> = random_vec(&mut rng, s);
    let hc: Vec<f32> = random_vec(&mut rng, s * s);
    let mut hz = vec![0u8; s * s];
    let up = |e: Error| e.to_string();
    let mut dx = DeviceTensor::from_slice(gpu, &hx, &[s, s]).map_err(up)?;
    let da = DeviceTensor::from_slice(gpu, &ha, &[s, s]).map_err(up)?;
    let mut dy = DeviceTensor::from_slice(gpu, &hy, &[s, s]).map_err(up)?;
    let db = DeviceTensor::from_slice(gpu, &hb, &[s]).map_err(up)?;
    let dc = DeviceTensor::from_slice(gpu, &hc, &[s, s]).map_err(up)?;
    let half = DeviceTensor::from_slice(gpu, &[0.5f32], &[]).map_err(up)?;
    let mut dz = DeviceTensor::<u8>::zeros(gpu, &[s, s]).map_err(up)?;
    let scalar = Layout::contiguous(&[]).map_err(estr)?;
    let a_t = da.transpose(0, 1).map_err(up)?;
    let c_flip = dc.flip(0).map_err(up)?;
    for step in 0..ops {
        let what = rng.below(5);
        match what {
            0 => {
                // x = x + aᵀ, in place
                let x_in = dx.clone();
                api::apply3(gpu, Add, &mut dx, &x_in, &a_t).map_err(up)?;
                let x0 = hx.clone();
                cpu::apply3(Add, (&mut hx, &sq), (&x0, &sq), (&ha, &sq_t)).map_err(up)?;
            }
            1 => {
                // x *= 3
                let op = InPlace(Rhs { op: Mul, s: 3i32 });
                api::apply1(gpu, op, &mut dx).map_err(up)?;
                cpu::apply1(op, (&mut hx, &sq)).map_err(up)?;
            }
            2 => {
                // y = max(y, b) with b broadcast along rows
                let y_in = dy.clone();
                api::apply3(gpu, Max, &mut dy, &y_in, &db).map_err(up)?;
                let y0 = hy.clone();
                cpu::apply3(Max, (&mut hy, &sq), (&y0, &sq), (&hb, &row)).map_err(up)?;
            }
            3 => {
                // y = y * 0.5 + c reversed
                let y_in = dy.clone();
                api::apply4(gpu, Fma, &mut dy, &y_in, &half, &c_flip).map_err(up)?;
                let y0 = hy.clone();
                cpu::apply4(
                    Fma,
                    (&mut hy, &sq),
                    (&y0, &sq),
                    (&[0.5f32], &scalar),
                    (&hc, &flip),
                )
                .map_err(up)?;
            }
            _ => {
                // z = u8(xᵀ)
                let x_t = dx.transpose(0, 1).map_err(up)?;
                api::apply2(gpu, Cast, &mut dz, &x_t).map_err(up)?;
                cpu::apply2(Cast, (&mut hz, &sq), (&hx, &sq_t)).map_err(up)?;
            }
        }
        if step % 1000 == 999 || step + 1 == ops {
            let bad = |what: &str| format!("after op {step}: {what} differs from the CPU twin");
            if dx.to_vec(gpu).map_err(up)? != hx {
                return Err(bad("x (i32)"));
            }
            let gy = dy.to_vec(gpu).map_err(up)?;
            if verify::first_mismatch(&gy, &hy, strided_apply::ops::Tolerance::Exact).is_some() {
                return Err(bad("y (f32)"));
            }
            if dz.to_vec(gpu).map_err(up)? != hz {
                return Err(bad("z (u8)"));
            }
        }
    }
    Ok(())
}

fn load_threads(gpu: &Gpu, own_stream: bool) -> TestResult {
    let threads = 8;
    let ops = knob("STRIDED_APPLY_LOAD_OPS", 10_000);
    let t = std::time::Instant::now();
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || {
                    if own_stream {
                        let g = gpu.new_stream().map_err(estr)?;
                        load_worker(&g, 1000 + k as u64, ops)
                    } else {
                        load_worker(gpu, 2000 + k as u64, ops)
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect()
    });
    for (k, r) in results.into_iter().enumerate() {
        r.map_err(|e| format!("thread {k}: {e}"))?;
    }
    Ok(format!(
        "{threads} threads x {ops} ops ({}), {:.0} ops/s, = CPU twin",
        if own_stream {
            "one stream each"
        } else {
            "one shared Gpu"
        },
        (threads * ops) as f64 / t.elapsed().as_secs_f64()
    ))
}

fn load_shared_gpu(gpu: &Gpu) -> TestResult {
    load_threads(gpu, false)
}

fn load_own_streams(gpu: &Gpu) -> TestResult {
    load_threads(gpu, true)
}

/// Every 16-bit pattern (NaNs, infinities, subnormals included) of `f16` and `bf16` through
/// the exact ops and casts on the GPU, against the CPU twin **bit for bit** where the result
/// is a 16-bit float (NaNs too: both sides give the canonical NaN, and a cast to the same
/// type keeps every bit), an integer or a bool;
/// equal values (any NaN payload) where it is an f32 or f64; the transcendentals within one
/// 16-bit ulp.
fn narrow_exhaustive(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::*;
    use strided_apply::{bf16, f16, Bool, Layout};
    let n = 1 << 16;
    let l = Layout::contiguous(&[n]).map_err(estr)?;
    let mut lines = Vec::new();
    // `out` on the GPU and the CPU twin: (bit mismatches, worst ulp) over all n elements.
    macro_rules! both {
        ($api:ident, $cpu:ident, $op:expr, $o:ty, [$($x:ident),*]) => {{
            let mut want = vec![<$o as TestElem>::poison(); n];
            strided_apply::cpu::$cpu($op, (&mut want, &l) $(, (&$x[..], &l))*).map_err(estr)?;
            let mut d = DeviceTensor::from_slice(gpu, &vec![<$o as TestElem>::poison(); n], &[n]).map_err(estr)?;
            $( let $x = DeviceTensor::from_slice(gpu, &$x, &[n]).map_err(estr)?; )*
            api::$api(gpu, $op, &mut d $(, &$x)*).map_err(estr)?;
            let got = d.to_vec(gpu).map_err(estr)?;
            let bits = got.iter().zip(&want).filter(|(g, w)| bytemuck::bytes_of(*g) != bytemuck::bytes_of(*w)).count();
            let ulp = got.iter().zip(&want).map(|(&g, &w)| <$o as Distance>::distance(g, w)).max().unwrap_or(0);
            (bits, ulp)
        }};
    }
    macro_rules! exact {
        ($what:expr, $r:expr) => {{
            let (bits, _) = $r;
            if bits != 0 {
                return Err(format!("{}: {bits} of {n} results differ in bits", $what));
            }
        }};
    }
    // Casts to f32 and f64: a NaN stays a NaN, its payload is the hardware's (the GPU's
    // `cvt` gives the canonical NaN, the host keeps the payload); every other value exact.
    macro_rules! same_value {
        ($what:expr, $r:expr) => {{
            let (_, ulp) = $r;
            if ulp != 0 {
                return Err(format!("{}: results differ ({ulp} ulp)", $what));
            }
        }};
    }
    macro_rules! for_type {
        ($t:ident) => {{
            let x: Vec<$t> = (0..n).map(|i| $t::from_bits(i as u16)).collect();
            // y: the same patterns in another order (every pair class meets).
            let y: Vec<$t> = (0..n)
                .map(|i| $t::from_bits((i as u32).wrapping_mul(40503) as u16))
                .collect();
            let t = stringify!($t);
            exact!(format!("add {t}"), both!(apply3, apply3, Add, $t, [x, y]));
            exact!(format!("sub {t}"), both!(apply3, apply3, Sub, $t, [x, y]));
            exact!(format!("mul {t}"), both!(apply3, apply3, Mul, $t, [x, y]));
            exact!(format!("div {t}"), both!(apply3, apply3, Div, $t, [x, y]));
            exact!(format!("min {t}"), both!(apply3, apply3, Min, $t, [x, y]));
            exact!(format!("max {t}"), both!(apply3, apply3, Max, $t, [x, y]));
            exact!(format!("fma {t}"), {
                let z = x.clone();
                both!(apply4, apply4, Fma, $t, [x, y, z])
            });
            exact!(format!("lt {t}"), both!(apply3, apply3, Lt, Bool, [x, y]));
            exact!(format!("eq {t}"), both!(apply3, apply3, Eq, Bool, [x, y]));
            exact!(format!("neg {t}"), both!(apply2, apply2, Neg, $t, [x]));
            exact!(format!("abs {t}"), both!(apply2, apply2, Abs, $t, [x]));
            exact!(format!("relu {t}"), both!(apply2, apply2, Relu, $t, [x]));
            exact!(format!("sqrt {t}"), both!(apply2, apply2, Sqrt, $t, [x]));
            exact!(format!("rsqrt {t}"), both!(apply2, apply2, Rsqrt, $t, [x]));
            same_value!(format!("{t} -> f32"), both!(apply2, apply2, Cast, f32, [x]));
            same_value!(format!("{t} -> f64"), both!(apply2, apply2, Cast, f64, [x]));
            // To the same type: every bit kept on both sides (NaN payloads too).
            exact!(format!("{t} -> {t}"), both!(apply2, apply2, Cast, $t, [x]));
            exact!(format!("{t} -> i32"), both!(apply2, apply2, Cast, i32, [x]));
            exact!(format!("{t} -> i64"), both!(apply2, apply2, Cast, i64, [x]));
            exact!(format!("{t} -> u8"), both!(apply2, apply2, Cast, u8, [x]));
            exact!(
                format!("{t} -> bool"),
                both!(apply2, apply2, Cast, Bool, [x])
            );
            same_value!(format!("add f32 = {t} + f32"), {
                let b: Vec<f32> = y.iter().map(|v| v.to_f32() * 0.37).collect();
                both!(apply3, apply3, Add, f32, [x, b])
            });
            exact!(format!("mul {t} = {t} * f32"), {
                let b: Vec<f32> = y.iter().map(|v| v.to_f32() * 0.37).collect();
                both!(apply3, apply3, Mul, $t, [x, b])
            });
            // Into the type: f32 and f64 of every exponent, integers of every size.
            let mut rng = Rng(0x16);
            let f: Vec<f32> = (0..n).map(|_| f32::from_bits(rng.next() as u32)).collect();
            let d: Vec<f64> = (0..n)
                .map(|_| f64::from_bits(rng.next() >> (rng.next() % 3)))
                .collect();
            let i: Vec<i64> = (0..n)
                .map(|_| (rng.next() as i64) >> (rng.next() % 64))
                .collect();
            let u: Vec<u32> = (0..n)
                .map(|_| (rng.next() as u32) >> (rng.next() % 32))
                .collect();
            exact!(format!("f32 -> {t}"), both!(apply2, apply2, Cast, $t, [f]));
            exact!(format!("f64 -> {t}"), both!(apply2, apply2, Cast, $t, [d]));
            exact!(format!("i64 -> {t}"), both!(apply2, apply2, Cast, $t, [i]));
            exact!(format!("u32 -> {t}"), both!(apply2, apply2, Cast, $t, [u]));
            let mut worst = 0;
            for (name, r) in [
                ("exp", both!(apply2, apply2, Exp, $t, [x])),
                ("log", both!(apply2, apply2, Log, $t, [x])),
                ("sin", both!(apply2, apply2, Sin, $t, [x])),
                ("tanh", both!(apply2, apply2, Tanh, $t, [x])),
                ("sigmoid", both!(apply2, apply2, Sigmoid, $t, [x])),
                ("pow", both!(apply3, apply3, Pow, $t, [x, y])),
            ] {
                if r.1 > 1 {
                    return Err(format!(
                        "{name} {t}: GPU and CPU {} ulp apart (bound 1)",
                        r.1
                    ));
                }
                worst = worst.max(r.1);
            }
            lines.push(format!(
                "{t}: 25 exact ops bit-identical, transcendentals within {worst} ulp"
            ));
        }};
    }
    for_type!(f16);
    for_type!(bf16);
    Ok(lines.join("; "))
}

// ------------------------------------------------------------------ reductions

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
/// groups), short rows that share the row kernel's blocks (with a partial last block), and
/// a reduction of nothing.
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
        // Short rows share the row kernel's blocks (`SLOTS >> row_shift` outputs each):
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
        case(
            "cols-2-groups",
            &[(1 << 17) + 5, 3],
            c(&[(1 << 17) + 5, 3]),
            &[0],
            c(&[3]),
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

fn reductions(gpu: &Gpu) -> TestResult {
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
    Ok(format!(
        "{count} (op, type, layout) cases over {families} (op, type) families, GPU = CPU twin; 3 device-side checks"
    ))
}

/// Tests that need `STRIDED_APPLY_BIG=1` (tensors of 2^31 elements and more, ~30 GiB of
/// device memory, ~1 minute).
const BIG: [&str; 3] = [
    "gpu_64bit_index_u8_3gib",
    "gpu_64bit_index_f32_2pow31_plus_7",
    "gpu_index_width_boundary_2pow31",
];

fn main() {
    let tests: [GpuTest; 26] = [
        ("gpu_conformance_table_matches_cpu_twin", conformance),
        ("gpu_stencils_by_id_match_cpu_twin", dispatch_stencils),
        (
            "gpu_run_time_dispatch_every_family_matches_cpu_twin",
            dispatch_all_instances,
        ),
        (
            "gpu_graph_capture_of_100_launches_replays",
            graph_capture_replays,
        ),
        (
            "gpu_dlpack_and_ndarray_round_trips",
            dlpack_and_ndarray_round_trips,
        ),
        ("gpu_two_byte_tiles_match_cpu_twin", two_byte_tiles),
        ("gpu_tiled_batches_match_cpu_twin", tiled_batches),
        (
            "gpu_16bit_floats_exhaustive_bit_identical",
            narrow_exhaustive,
        ),
        ("gpu_stencils_match_cpu_twin", common::stencil::gpu_stencils),
        ("gpu_reductions_match_cpu_twin", reductions),
        ("gpu_transcendentals_within_ulp_bound_of_f64", accuracy),
        ("gpu_typed_errors_and_context_survives", typed_errors),
        ("gpu_raw_api_matches_expected", raw_api_matches_typed),
        (
            "gpu_step2_views_ending_at_buffer_end",
            step2_views_ending_at_buffer_end,
        ),
        ("gpu_raw_api_bad_inputs_are_typed_errors", raw_api_catalogue),
        ("gpu_empty_tensors_launch_nothing", empty_tensors),
        ("gpu_module_errors_are_typed", module_errors),
        ("gpu_module_choice_and_lazy_families", module_choice),
        ("gpu_random_layouts_match_cpu_twin", random_layouts),
        ("gpu_load_8_threads_shared_gpu", load_shared_gpu),
        ("gpu_load_8_threads_own_streams", load_own_streams),
        ("gpu_64bit_index_u8_3gib", index64_u8_3gib),
        (
            "gpu_64bit_index_f32_2pow31_plus_7",
            index64_f32_2pow31_plus_7,
        ),
        ("gpu_index_width_boundary_2pow31", index_width_boundary),
        (
            "gpu_memory_pool_keeps_then_releases",
            memory_pool_keeps_then_releases,
        ),
        ("gpu_out_of_memory_then_recover", out_of_memory_then_recover),
    ];
    // Arguments that are not flags select tests by substring (as the default harness).
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let selected =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
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
                "GPU: {} (cc {:?}), {} SMs, kernel image from {}",
                g.name(),
                g.compute_capability(),
                g.sm_count(),
                strided_apply::PTX_SOURCE
            );
            for (name, f) in &tests {
                if !selected(name) {
                    println!("test {name} ... SKIPPED (not selected by the filter)");
                    skipped += 1;
                    continue;
                }
                if BIG.contains(name) && !big_enabled() {
                    println!("test {name} ... SKIPPED (set STRIDED_APPLY_BIG=1: needs ~30 GiB of device memory)");
                    skipped += 1;
                    continue;
                }
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
    if let Ok(g) = &gpu {
        for m in g.module_info() {
            println!("module {m}");
        }
    }
    println!("\ngpu: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
