//! Eight threads of mixed ops at once, on one shared handle or a stream each, against the
//! CPU twin.

use crate::common::{random_vec, Rng};
use crate::errors::estr;
use crate::harness::{knob, TestResult};
use strided_apply::verify;
use strided_apply::{api, DeviceTensor, Error, Gpu};

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

pub fn load_shared_gpu(gpu: &Gpu) -> TestResult {
    load_threads(gpu, false)
}

pub fn load_own_streams(gpu: &Gpu) -> TestResult {
    load_threads(gpu, true)
}
