//! Timing: the median of timed runs (CUDA events), host µs per call in bursts, the buffer
//! rotation's size, and the spin kernel that queued timing waits behind.

use std::time::Instant;
use strided_apply::cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use strided_apply::{Gpu, Result};

pub(super) const REPS: usize = 25;
/// Rotate among enough buffer sets to move at least this many bytes per round.
pub(super) const ROTATE_BYTES: usize = 512 << 20;

/// Host µs per call of `f`: the median over 50 bursts of 200 calls, each burst started from
/// an idle queue (host time alone, never throttled by a full launch queue).
pub(super) fn burst_us(gpu: &Gpu, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut v: Vec<f64> = (0..50)
        .map(|_| -> Result<f64> {
            gpu.synchronize()?;
            let t = Instant::now();
            for _ in 0..200 {
                f()?;
            }
            Ok(t.elapsed().as_secs_f64() * 1e6 / 200.0)
        })
        .collect::<Result<_>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

pub(super) fn median_ms(gpu: &Gpu, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    for i in 0..3 {
        f(i)?;
    }
    let mut t: Vec<f64> = (0..REPS)
        .map(|i| {
            queue_behind_spin(gpu)?;
            gpu.time_ms(|| f(i)).map(|x| x as f64)
        })
        .collect::<Result<_>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[REPS / 2])
}

/// A kernel that spins for `ns` nanoseconds of the global timer (one thread).
pub(super) const SPIN_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 ns)
{
    .reg .u64 %t0, %t, %d, %n;
    .reg .pred %p;
    ld.param.u64 %n, [ns];
    mov.u64 %t0, %globaltimer;
WAIT:
    mov.u64 %t, %globaltimer;
    sub.u64 %d, %t, %t0;
    setp.lt.u64 %p, %d, %n;
    @%p bra WAIT;
    ret;
}
"#;

/// How long the spin before each timed call lasts: longer than any call's submission.
pub(super) const SPIN_NS: u64 = 50_000;

/// The spin kernel, when `STRIDED_APPLY_BENCH_QUEUED` asks for queued timing.
pub(super) static SPIN: std::sync::OnceLock<CudaFunction> = std::sync::OnceLock::new();

/// `STRIDED_APPLY_BENCH_QUEUED=1`: every timed call waits in the stream behind a 50 µs spin,
/// so that its events time the GPU's work, not the host's submission of the call (the
/// PyTorch peer does the same with `torch.cuda._sleep`). Default: events around the call
/// with the stream idle, the submission included.
pub(super) fn load_spin(gpu: &Gpu) -> Result<bool> {
    let queued =
        std::env::var("STRIDED_APPLY_BENCH_QUEUED").is_ok_and(|v| !v.is_empty() && v != "0");
    if !queued {
        return Ok(false);
    }
    let f = gpu
        .context()
        .load_module(strided_apply::cudarc::nvrtc::Ptx::from_src(SPIN_PTX))
        .and_then(|module| module.load_function("spin"))
        .map_err(spin_error)?;
    let _ = SPIN.set(f);
    Ok(true)
}

pub(super) fn spin_error(
    source: strided_apply::cudarc::driver::DriverError,
) -> strided_apply::Error {
    strided_apply::Error::Launch {
        kernel: "spin",
        source,
    }
}

pub(super) fn queue_behind_spin(gpu: &Gpu) -> Result<()> {
    let Some(f) = SPIN.get() else {
        return Ok(());
    };
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `spin` takes one u64 and touches no memory.
    unsafe { gpu.stream().launch_builder(f).arg(&SPIN_NS).launch(cfg) }.map_err(spin_error)?;
    Ok(())
}
