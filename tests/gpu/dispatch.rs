//! The framework paths: the raw pointer API, run-time dispatch of every family and of the
//! stencils by id, CUDA graph capture, DLPack and ndarray round trips.

use crate::common::{self, cases, Rng};
use crate::harness::TestResult;
use strided_apply::{DeviceTensor, Error, Gpu, Kernels2, Kernels3};

pub fn raw_api_matches_typed(gpu: &Gpu) -> TestResult {
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
fn dispatch_close(t: strided_apply::ElemType, tol: Tol, a: &[u8], b: &[u8]) -> bool {
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
    // The type's smallest normal: below it the spacing stays `eps * tiny` (subnormals), so
    // 4 ulp there is `tol * tiny` (a `pow` whose result is subnormal).
    let tiny = match t {
        ElemType::F32 => f32::MIN_POSITIVE as f64,
        ElemType::F64 => f64::MIN_POSITIVE,
        ElemType::F16 => f16::MIN_POSITIVE.to_f64(),
        _ => bf16::MIN_POSITIVE.to_f64(),
    };
    let (inexact, tol, floor) = match tol {
        Tol::Exact => (false, 0.0, tiny),
        Tol::Ulps(u) => (true, u * eps, tiny),
        Tol::UlpsOfOne(u) => (true, u * eps, 1.0),
    };
    va.iter().zip(vb).all(|(&x, y)| {
        (x.is_nan() && y.is_nan())
            || x.to_bits() == y.to_bits()
            || (inexact && (x - y).abs() <= tol * x.abs().max(y.abs()).max(floor))
    })
}

/// How close the GPU's and the CPU twin's outputs must be.
#[derive(Clone, Copy, Debug)]
enum Tol {
    /// The same bits (any NaN matching any NaN).
    Exact,
    /// Within this many units of the output type's epsilon, relative.
    Ulps(f64),
    /// Within this many units of epsilon relative to the larger of the values and 1: for
    /// compositions of transcendental functions, whose results near 0 come from
    /// cancellation (`logit` near 0.5, `logaddexp`).
    UlpsOfOne(f64),
}

/// Every instantiated family, named at run time (`dispatch::DynOp`), over the layout
/// classes of the conformance table: the GPU launch and the CPU twin of the same `DynOp`
/// over random bytes, bit-identical (within 4 ulp where the op's tolerance is in ulps:
/// transcendentals, fused expressions). Every scalar an op takes is 3 (0.5 for floats,
/// `true` for bool).
pub fn dispatch_all_instances(gpu: &Gpu) -> TestResult {
    use strided_apply::dispatch::{self, DynOp, Scalar};
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
        launches += gpu_against_twin(
            gpu,
            &op,
            inst.types,
            if inexact { Tol::Ulps(4.0) } else { Tol::Exact },
            &format!("{inst:?}"),
            &mut rng,
        )?;
        families += 1;
    }
    Ok(format!("{families} families, {launches} launches"))
}

/// `op` over `types` (output first) on the GPU against the same `DynOp` on the CPU twin,
/// from random bytes, on every layout case of its input count; the launches made.
fn gpu_against_twin(
    gpu: &Gpu,
    op: &strided_apply::dispatch::DynOp,
    types: &[strided_apply::ElemType],
    tol: Tol,
    what: &str,
    rng: &mut Rng,
) -> Result<usize, String> {
    use strided_apply::dispatch::{HostTensor, HostTensorMut};
    use strided_apply::raw::RawTensor;
    let e = |e: Error| e.to_string();
    let mut launches = 0;
    for case in cases(types.len() - 1) {
        let ops: Vec<&common::Operand> = std::iter::once(&case.out).chain(&case.inputs).collect();
        let host: Vec<Vec<u8>> = ops
            .iter()
            .zip(types)
            .map(|(o, &t)| random_bytes(t, o.len, rng))
            .collect();
        let dev: Vec<DeviceTensor<u8>> = host
            .iter()
            .map(|h| DeviceTensor::from_slice(gpu, h, &[h.len()]))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        let raw: Vec<RawTensor> = ops
            .iter()
            .zip(&dev)
            .zip(types)
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
            .map_err(|x| format!("{what} / {}: {x}", case.name))?;
        let got = dev[0].to_vec(gpu).map_err(e)?;
        let mut want = host[0].clone();
        let inputs: Vec<HostTensor> = ops[1..]
            .iter()
            .zip(&host[1..])
            .zip(&types[1..])
            .map(|((o, h), &t)| HostTensor::new(h, t, &o.layout))
            .collect();
        op.run_cpu(
            HostTensorMut::new(&mut want, types[0], &case.out.layout),
            &inputs,
        )
        .map_err(|x| format!("{what} / {}: CPU: {x}", case.name))?;
        if !dispatch_close(types[0], tol, &got, &want) {
            let size = types[0].size();
            let first = got
                .chunks(size)
                .zip(want.chunks(size))
                .position(|(g, w)| !dispatch_close(types[0], tol, g, w))
                .unwrap_or(0);
            let at = |v: &[u8]| v[first * size..(first + 1) * size].to_vec();
            return Err(format!(
                "{what} / {}: GPU and CPU twin differ: element {first}, GPU bytes {:?}, CPU {:?}",
                case.name,
                at(&got),
                at(&want)
            ));
        }
        launches += 1;
    }
    Ok(launches)
}

/// Every op id with a program (`dispatch::program_ops`) over random element types that no
/// kernel is instantiated for (each input any of the fifteen types, the output the promoted
/// type or another): the program on the GPU against the CPU twin, bit for bit where every
/// op of the program is exact (any NaN matching any NaN); within the op's kernels'
/// tolerance for `pow`, and within 16 ulp of the larger of the values and 1 for the programs
/// of transcendental functions (libdevice against `std` and `libm`); on every layout case
/// of its input count. The op ids with no kernel (the op set's `erf`, `gelu`,
/// `bitwise_and`, …) run over the same random types.
pub fn dispatch_programs(gpu: &Gpu) -> TestResult {
    use strided_apply::dispatch::{self, DynOp, Scalar};
    use strided_apply::ElemType as E;
    const TYPES: [E; 15] = strided_apply::expr::ELEMS;
    let pick = |rng: &mut Rng| TYPES[(rng.next() % TYPES.len() as u64) as usize];
    let mut rng = Rng(0x9e37);
    let (mut combos, mut refused, mut launches, mut ops) = (0usize, 0usize, 0usize, 0usize);
    for op in dispatch::program_ops() {
        let (n_in, scalar_names) =
            dispatch::program_signature(op).ok_or_else(|| format!("{op}: no signature"))?;
        // The op's kernels' tolerance where it has kernels (the GPU's and the twin's `pow`
        // differ in the last bits, as the library's `pow` kernels do).
        let kernel_inexact = dispatch::instances()
            .find(|i| i.op() == op)
            .is_some_and(|i| (i.tolerance)() != Some(strided_apply::ops::Tolerance::Exact));
        let mut made = 0;
        let mut tries = 0;
        while made < 4 && tries < 200 {
            tries += 1;
            let inputs: Vec<E> = (0..n_in).map(|_| pick(&mut rng)).collect();
            let scalars: Vec<Scalar> = scalar_names
                .iter()
                .map(|_| match rng.next() % 3 {
                    0 => Scalar::F64(0.75),
                    1 => Scalar::I64(2),
                    _ => Scalar::Bool(true),
                })
                .collect();
            let out = if rng.next().is_multiple_of(2) {
                match dispatch::output_type(op, &inputs, &scalars) {
                    Ok(t) => t,
                    Err(_) => {
                        refused += 1;
                        continue;
                    }
                }
            } else {
                pick(&mut rng)
            };
            let types: Vec<E> = std::iter::once(out).chain(inputs).collect();
            if dispatch::find(op, &types).is_ok() {
                continue;
            }
            let dyn_op = match DynOp::new(op, &types, &scalars) {
                Ok(d) => d,
                // Combinations the expression language refuses (a bool `neg`, a float
                // `bitwise_and`, arithmetic of 8-bit floats, …): typed errors, as on the CPU.
                Err(_) => {
                    refused += 1;
                    continue;
                }
            };
            if dyn_op.instance().is_some() {
                return Err(format!("{op} {types:?}: a kernel, not a program"));
            }
            let exact = dyn_op.program().is_some_and(|c| {
                c.program().code().iter().all(|i| {
                    strided_apply::expr::Opcode::from_code(i.op).is_some_and(|o| o.is_exact())
                })
            });
            // An inexact op into integers, bools or 8-bit floats: a last-bit difference
            // may move a value across a rounding boundary, which no tolerance of the output
            // covers.
            let float_out = matches!(out, E::F32 | E::F64 | E::F16 | E::BF16);
            if (kernel_inexact || !exact) && !float_out {
                continue;
            }
            // The ulps of the program's math type, in units of the output's epsilon (an
            // `f32` result of `log` stored as `f64` differs in `f32`'s last bits).
            let scale = match (dyn_op.program().map(|c| c.program().result), out) {
                (Some(r), E::F64) if r == strided_apply::expr::Class::F32 as u8 => {
                    f32::EPSILON as f64 / f64::EPSILON
                }
                _ => 1.0,
            };
            let tol = if kernel_inexact {
                Tol::Ulps(4.0 * scale)
            } else if !exact {
                Tol::UlpsOfOne(16.0 * scale)
            } else {
                Tol::Exact
            };
            let what = format!("{op} {types:?} {scalars:?}");
            launches += gpu_against_twin(gpu, &dyn_op, &types, tol, &what, &mut rng)?;
            made += 1;
            combos += 1;
        }
        ops += (made > 0) as usize;
    }
    if ops < 120 {
        return Err(format!("only {ops} op ids ran"));
    }
    Ok(format!(
        "{ops} op ids, {combos} (op, types) combinations without a kernel run as programs, \
         {launches} launches, GPU = CPU twin ({refused} refused alike by the type rules)"
    ))
}

/// Every registered stencil family by id (`stencil::DynStencil`) on the GPU against the same
/// `DynStencil` on the CPU twin over raw host addresses, from random bytes, on each input
/// layout of the stencil table (contiguous, transposed, sliced, reversed, broadcast) and a
/// dense and a transposed output: bit for bit (any NaN matching any NaN).
pub fn dispatch_stencils(gpu: &Gpu) -> TestResult {
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
                    if !dispatch_close(t, Tol::Exact, &got, &want) {
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
pub fn graph_capture_replays(gpu: &Gpu) -> TestResult {
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
    let add_s_family = add_s
        .instance()
        .ok_or_else(|| format!("add_s over f32 runs as a program: {add_s:?}"))?;
    gpu.preload_kernels(&add_s_family.names).map_err(e)?;
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
        acc.buffer()
            .copy_from(gpu, fresh.buffer(), rows * cols * 4)
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
pub fn dlpack_and_ndarray_round_trips(gpu: &Gpu) -> TestResult {
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
