//! Tiny calls (group `tiny`): host µs per call of an add, an expression, run-time dispatch and
//! a graph's ops, and the driver's own launch.

use super::data::{rand_f32, random};
use super::harness::Bench;
use super::timing::burst_us;
#[cfg(feature = "dispatch")]
use super::timing::median_ms;
use std::time::Instant;
use strided_apply::{api, gpu_kernels, ops, DeviceTensor, Gpu, Kernels3, Result};

pub(super) fn cpu_sum(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// Tiny tensor: host time per call, planning and launch included.
pub(super) fn tiny(bench: &Bench) -> Result<()> {
    let gpu = &bench.gpu;
    let n = 1024;
    let a = DeviceTensor::from_slice(gpu, &random(n, 15, rand_f32), &[n])?;
    let b = DeviceTensor::from_slice(gpu, &random(n, 16, rand_f32), &[n])?;
    let mut c = DeviceTensor::<f32>::zeros(gpu, &[n])?;
    for _ in 0..1000 {
        api::apply3(gpu, ops::Add, &mut c, &a, &b)?;
    }
    gpu.synchronize()?;
    let calls = 20_000;
    let t = Instant::now();
    for _ in 0..calls {
        api::apply3(gpu, ops::Add, &mut c, &a, &b)?;
    }
    let host_us = t.elapsed().as_secs_f64() * 1e6 / calls as f64;
    gpu.synchronize()?;
    let us = t.elapsed().as_secs_f64() * 1e6 / calls as f64;
    // Short bursts from an idle queue: host time alone, never throttled by a full
    // launch queue waiting on the GPU. Median over bursts of 200 calls.
    let typed_burst_us = burst_us(gpu, || api::apply3(gpu, ops::Add, &mut c, &a, &b))?;
    // The driver's share (see `driver_launch_us`).
    let raw_us = driver_launch_us(gpu, &c, &a, &b)?;
    gpu.synchronize()?;
    if c.to_vec(gpu)? != cpu_sum(&a.to_vec(gpu)?, &b.to_vec(gpu)?) {
        eprintln!("bench: raw launches gave a wrong sum");
    }
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_add_host_us\",\"dtype\":\"f32\",\"elements\":{n},\"host_us\":{host_us:.3},\"us_incl_sync\":{us:.3},\"burst_host_us\":{typed_burst_us:.3},\"driver_launch_us\":{raw_us:.3}}}"
    );
    tiny_expr(gpu, &mut c, &a, &b)?;
    #[cfg(feature = "dispatch")]
    tiny_dispatch_and_graph(gpu, &mut c, &a, &b, typed_burst_us)?;
    Ok(())
}

/// The same 1024-element add as a kept expression (`Expr::parse("a + b")` compiled once,
/// `Compiled::run` per call) against the typed `apply3`: issue #38's host time per call.
/// Bursts of `calls` from an idle queue, the two alternating burst by burst (the host's
/// drift falls on both), medians of 40 bursts each, for bursts of 200 and of 20 calls; and
/// the device time per call of each (CUDA events around 100 calls, median of 25: a host
/// that submits faster than the device runs them is bounded by the latter). Case
/// `tiny_expr_host_us`.
pub(super) fn tiny_expr(
    gpu: &Gpu,
    c: &mut DeviceTensor<f32>,
    a: &DeviceTensor<f32>,
    b: &DeviceTensor<f32>,
) -> Result<()> {
    use strided_apply::expr::{Arg, DeviceArg, Expr};
    use strided_apply::ElemType::F32;
    let n = c.numel();
    let f =
        Expr::parse("a + b")?.compile(&[("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32))], None)?;
    *c = DeviceTensor::zeros(gpu, &[n])?;
    let expr =
        |c: &mut DeviceTensor<f32>| f.run(gpu, c, &[DeviceArg::from(a), DeviceArg::from(b)], &[]);
    let typed = |c: &mut DeviceTensor<f32>| api::apply3(gpu, ops::Add, c, a, b);
    expr(c)?;
    gpu.synchronize()?;
    if c.to_vec(gpu)? != cpu_sum(&a.to_vec(gpu)?, &b.to_vec(gpu)?) {
        eprintln!("bench: kept-expression adds gave a wrong sum");
    }
    let burst = |calls: usize, c: &mut DeviceTensor<f32>| -> Result<(f64, f64)> {
        let (mut e, mut t) = (Vec::new(), Vec::new());
        for round in 0..40 {
            for which in [round % 2, 1 - round % 2] {
                gpu.synchronize()?;
                let start = Instant::now();
                for _ in 0..calls {
                    if which == 0 {
                        expr(c)?;
                    } else {
                        typed(c)?;
                    }
                }
                let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
                if which == 0 {
                    e.push(us)
                } else {
                    t.push(us)
                }
            }
        }
        e.sort_by(f64::total_cmp);
        t.sort_by(f64::total_cmp);
        Ok((e[e.len() / 2], t[t.len() / 2]))
    };
    let (expr_us, typed_us) = burst(200, c)?;
    let (expr20_us, typed20_us) = burst(20, c)?;
    let per_call = |which: usize, c: &mut DeviceTensor<f32>| -> Result<f64> {
        let mut v: Vec<f64> = (0..25)
            .map(|_| -> Result<f64> {
                gpu.synchronize()?;
                let ms = gpu.time_ms(|| {
                    for _ in 0..100 {
                        if which == 0 {
                            expr(c)?
                        } else {
                            typed(c)?
                        }
                    }
                    Ok(())
                })?;
                Ok(ms as f64 * 10.0)
            })
            .collect::<Result<_>>()?;
        v.sort_by(f64::total_cmp);
        Ok(v[v.len() / 2])
    };
    let expr_dev_us = per_call(0, c)?;
    let typed_dev_us = per_call(1, c)?;
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_expr_host_us\",\"dtype\":\"f32\",\"elements\":{n},\"burst_host_us\":{expr_us:.3},\"typed_burst_host_us\":{typed_us:.3},\"burst20_host_us\":{expr20_us:.3},\"typed_burst20_host_us\":{typed20_us:.3},\"device_us_per_call\":{expr_dev_us:.3},\"typed_device_us_per_call\":{typed_dev_us:.3}}}"
    );
    Ok(())
}

/// The driver's share of a tiny add: host µs per call of the kernel `api::apply3` launches for
/// `c = a + b` (dense, 1024 elements), through `cuLaunchKernel` directly with the same
/// parameters, in the same bursts as [`burst_us`] (no planning, no checks, no cache lookups).
pub(super) fn driver_launch_us(
    gpu: &Gpu,
    c: &DeviceTensor<f32>,
    a: &DeviceTensor<f32>,
    b: &DeviceTensor<f32>,
) -> Result<f64> {
    let n = c.numel();
    let names = <ops::Add as Kernels3<f32, f32, f32>>::NAMES;
    let f = gpu.kernel(names.module, names.vec)?;
    let op = gpu_kernels::apply::OpArg::new(ops::Add);
    // The kernel's second parameter is a `VecArg` (24 bytes): the driver copies that
    // many bytes from its pointer, so it gets the whole struct, as `api::apply3` passes.
    let count = gpu_kernels::apply::VecArg {
        n: n as u64,
        row: strided_apply::api::DIV_ONE,
    };
    let g = gpu_kernels::Geometry::<u32, 2, 3>::empty();
    let ptrs = [c.buffer().addr(), a.buffer().addr(), b.buffer().addr()];
    let mut args: [*mut std::ffi::c_void; 6] = [
        &op as *const _ as *mut _,
        &count as *const _ as *mut _,
        &g as *const _ as *mut _,
        &ptrs[0] as *const _ as *mut _,
        &ptrs[1] as *const _ as *mut _,
        &ptrs[2] as *const _ as *mut _,
    ];
    let stream = gpu.stream().cu_stream();
    burst_us(gpu, || {
        // SAFETY: the parameters are those `api::apply3` passes to `add_f32_v` for these
        // dense 1024-element tensors (16-byte aligned allocations).
        unsafe {
            strided_apply::cudarc::driver::result::launch_kernel(
                f.cu_function(),
                (1, 1, 1),
                (256, 1, 1),
                0,
                stream,
                &mut args,
            )
        }
        .map_err(|source| strided_apply::Error::Launch {
            kernel: names.vec,
            source,
        })
    })
}

#[cfg(feature = "dispatch")]
/// The same 1024-element add through run-time dispatch (a `DynOp` found and built on every
/// call, and one kept), in the same bursts as `tiny_add_host_us`; and the per-op device time
/// of 100 adds replayed from a CUDA graph against the same 100 launched eagerly (CUDA
/// events, median of 25). Cases `tiny_dispatch_host_us` and `tiny_graph_per_op_us`.
pub(super) fn tiny_dispatch_and_graph(
    gpu: &Gpu,
    c: &mut DeviceTensor<f32>,
    a: &DeviceTensor<f32>,
    b: &DeviceTensor<f32>,
    typed_burst_us: f64,
) -> Result<()> {
    use strided_apply::cudarc::driver::sys;
    use strided_apply::dispatch::DynOp;
    use strided_apply::raw::RawTensor;
    use strided_apply::ElemType::F32;
    let n = c.numel();
    let (shape, strides) = ([n], [1isize]);
    let t = |ptr| RawTensor {
        ptr,
        elem: F32,
        shape: &shape,
        strides: &strides,
    };
    let (pc, pa, pb) = (c.buffer().addr(), a.buffer().addr(), b.buffer().addr());
    // SAFETY (both closures): three live 1024-element f32 buffers of this Gpu, kept until
    // the synchronisation after the bursts.
    let lookup_us = burst_us(gpu, || unsafe {
        strided_apply::dispatch::apply(gpu, None, "add", &[], t(pc), &[t(pa), t(pb)])
    })?;
    let op = DynOp::new("add", &[F32, F32, F32], &[])?;
    let kept_us = burst_us(gpu, || unsafe {
        op.launch(gpu, None, t(pc), &[t(pa), t(pb)])
    })?;
    gpu.synchronize()?;
    if c.to_vec(gpu)? != cpu_sum(&a.to_vec(gpu)?, &b.to_vec(gpu)?) {
        eprintln!("bench: run-time dispatched adds gave a wrong sum");
    }
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_dispatch_host_us\",\"dtype\":\"f32\",\"elements\":{n},\"burst_host_us\":{lookup_us:.3},\"kept_op_burst_host_us\":{kept_us:.3},\"typed_burst_host_us\":{typed_burst_us:.3}}}"
    );

    // 100 adds: eager against a replayed graph, device time per op.
    const OPS: usize = 100;
    gpu.preload_kernels(&<ops::Add as Kernels3<f32, f32, f32>>::NAMES)?;
    let hundred = |c: &mut DeviceTensor<f32>| -> Result<()> {
        for _ in 0..OPS {
            api::apply3(gpu, ops::Add, c, a, b)?;
        }
        Ok(())
    };
    let eager_ms = median_ms(gpu, |_| hundred(c))?;
    let stream = gpu.stream().clone();
    let driver = |what| move |source| strided_apply::Error::Driver { what, source };
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        .map_err(driver("beginning a capture"))?;
    let captured = hundred(c);
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        .map_err(driver("ending a capture"))?;
    captured?;
    let Some(graph) = graph else {
        eprintln!("bench: the capture recorded no graph");
        return Ok(());
    };
    graph.upload().map_err(driver("uploading a graph"))?;
    let graph_ms = median_ms(gpu, |_| graph.launch().map_err(driver("launching a graph")))?;
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_graph_per_op_us\",\"dtype\":\"f32\",\"elements\":{n},\"ops\":{OPS},\"graph_per_op_us\":{:.3},\"eager_per_op_us\":{:.3}}}",
        graph_ms * 1e3 / OPS as f64,
        eager_ms * 1e3 / OPS as f64
    );
    Ok(())
}
