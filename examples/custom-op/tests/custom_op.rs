//! The custom-op example end to end: the user's ops on the CPU twin against naive
//! formulas (always), and on the GPU against the CPU twin (reported SKIPPED by name when
//! there is no GPU; a failure with `STRIDED_APPLY_REQUIRE_GPU=1`).

use custom_op::kernels::{CentralDiff, Huber, SoftClip};
use strided_apply::{apply3, cpu, stencil, verify, DeviceTensor, Layout};

const ROWS: usize = 37;
const COLS: usize = 53;

fn data() -> (Vec<f64>, Vec<f64>) {
    let a = (0..ROWS * COLS)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 10.0)
        .collect();
    let b = (0..ROWS).map(|j| (j % 7) as f64 - 3.0).collect();
    (a, b)
}

/// `a` transposed to `[COLS, ROWS]`, `b` broadcast along its rows, a dense output.
fn layouts() -> (Layout, Layout, Layout) {
    let at = Layout::contiguous(&[ROWS, COLS])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    (
        at,
        Layout::contiguous(&[1, ROWS]).unwrap(),
        Layout::contiguous(&[COLS, ROWS]).unwrap(),
    )
}

fn huber(a: f64, b: f64, delta: f64) -> f64 {
    let d = (a - b).abs();
    if d <= delta {
        0.5 * d * d
    } else {
        delta * (d - 0.5 * delta)
    }
}

fn cpu_matches_naive() -> Result<String, String> {
    let (a, b) = data();
    let (at, lb, lo) = layouts();
    let mut out = vec![f64::NAN; ROWS * COLS];
    cpu::apply3(Huber { delta: 1.5 }, (&mut out, &lo), (&a, &at), (&b, &lb))
        .map_err(|e| e.to_string())?;
    for i in 0..COLS {
        for j in 0..ROWS {
            let expect = huber(a[j * COLS + i], b[j], 1.5);
            if out[i * ROWS + j] != expect {
                return Err(format!(
                    "huber ({i}, {j}): {} vs {expect}",
                    out[i * ROWS + j]
                ));
            }
        }
    }
    let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
    let mut clip = vec![f32::NAN; ROWS * COLS];
    cpu::apply2(SoftClip::new(2.0f32), (&mut clip, &lo), (&a32, &at)).map_err(|e| e.to_string())?;
    for i in 0..COLS {
        for j in 0..ROWS {
            let x = a32[j * COLS + i];
            let expect = 2.0 * (x / 2.0).tanh();
            if clip[i * ROWS + j] != expect {
                return Err(format!(
                    "soft_clip ({i}, {j}): {} vs {expect}",
                    clip[i * ROWS + j]
                ));
            }
        }
    }
    let mut diff = vec![f32::NAN; ROWS * COLS];
    stencil::apply_cpu(CentralDiff, (&mut diff, &lo), (&a32, &at), &[0])
        .map_err(|e| e.to_string())?;
    for i in 0..COLS {
        for j in 0..ROWS {
            let x = |i: usize| a32[j * COLS + i];
            let expect = (x((i + 1).min(COLS - 1)) - x(i.saturating_sub(1))) / 2.0;
            if diff[i * ROWS + j] != expect {
                return Err(format!(
                    "central_diff ({i}, {j}): {} vs {expect}",
                    diff[i * ROWS + j]
                ));
            }
        }
    }
    Ok(format!("{} elements per op", ROWS * COLS))
}

fn gpu_matches_cpu(gpu: &strided_apply::Gpu) -> Result<String, String> {
    let e = |e: strided_apply::Error| e.to_string();
    let (a, b) = data();
    let (at, lb, lo) = layouts();
    let init = vec![f64::NAN; ROWS * COLS];
    if let Some(m) = verify::apply3(
        gpu,
        Huber { delta: 1.5 },
        (&init, &lo),
        (&a, &at),
        (&b, &lb),
    )
    .map_err(e)?
    {
        return Err(format!("huber f64: {m}"));
    }
    let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
    let b32: Vec<f32> = b.iter().map(|&x| x as f32).collect();
    let init32 = vec![f32::NAN; ROWS * COLS];
    if let Some(m) = verify::apply3(
        gpu,
        Huber { delta: 1.5f32 },
        (&init32, &lo),
        (&a32, &at),
        (&b32, &lb),
    )
    .map_err(e)?
    {
        return Err(format!("huber f32: {m}"));
    }
    if let Some(m) =
        verify::apply2(gpu, SoftClip::new(2.0f32), (&init32, &lo), (&a32, &at)).map_err(e)?
    {
        return Err(format!("soft_clip: {m}"));
    }
    if let Some(m) =
        stencil::verify(gpu, CentralDiff, (&init32, &lo), (&a32, &at), &[0]).map_err(e)?
    {
        return Err(format!("central_diff: {m}"));
    }
    // The built-in module keeps working beside the user's.
    let x = DeviceTensor::from_slice(gpu, &a32, &[ROWS, COLS]).map_err(e)?;
    let mut y = DeviceTensor::<f32>::zeros(gpu, &[ROWS, COLS]).map_err(e)?;
    apply3(gpu, strided_apply::ops::Add, &mut y, &x, &x).map_err(e)?;
    let got = y.to_vec(gpu).map_err(e)?;
    if got.iter().zip(&a32).any(|(g, x)| *g != 2.0 * x) {
        return Err("built-in Add after the custom module: wrong result".into());
    }
    Ok("huber f32/f64, soft_clip, central_diff: GPU = CPU twin; built-in Add still right".into())
}

fn main() {
    let require = std::env::var("STRIDED_APPLY_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut report = |name: &str, r: Result<String, String>| match r {
        Ok(m) => {
            println!("test {name} ... ok ({m})");
            passed += 1;
        }
        Err(m) => {
            println!("test {name} ... FAILED: {m}");
            failed += 1;
        }
    };
    report("custom_ops_cpu_twin_match_naive", cpu_matches_naive());
    match custom_op::open(0) {
        Ok(gpu) => report("custom_ops_gpu_match_cpu_twin", gpu_matches_cpu(&gpu)),
        Err(e) => {
            println!("test custom_ops_gpu_match_cpu_twin ... SKIPPED (no GPU: {e})");
            skipped += 1;
            if require {
                println!("STRIDED_APPLY_REQUIRE_GPU=1 and no GPU: failing");
                failed += 1;
            }
        }
    }
    println!("\ncustom_op: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
