//! Demo: `c = a + b` on contiguous, broadcast-row and transposed operands. Runs on the GPU
//! when one is present (checking it against the CPU twin), else on the CPU twin alone.

use std::time::Instant;
use strided_apply::verify::first_mismatch;
use strided_apply::{apply3, cpu, ops, DeviceTensor, Gpu, Layout};

const N: usize = 4096;

fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

struct Case {
    name: &'static str,
    a: Layout,
    b: Layout,
    b_len: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = Layout::contiguous(&[N, N])?;
    let cases = [
        Case {
            name: "contiguous",
            a: out.clone(),
            b: out.clone(),
            b_len: N * N,
        },
        Case {
            name: "broadcast row",
            a: out.clone(),
            b: Layout::contiguous(&[1, N])?,
            b_len: N,
        },
        Case {
            name: "transposed b",
            a: out.clone(),
            b: out.transpose(0, 1)?,
            b_len: N * N,
        },
    ];
    let a = random(N * N, 1);
    let b = random(N * N, 2);
    let t = Instant::now();
    let gpu = match strided_apply::open(0) {
        Ok(g) => {
            let open_ms = t.elapsed().as_secs_f64() * 1e3;
            println!(
                "GPU: {} (compute capability {:?}), kernel image from {}",
                g.name(),
                g.compute_capability(),
                strided_apply::PTX_SOURCE
            );
            cold_start(&g, open_ms)?;
            Some(g)
        }
        Err(e) => {
            println!(
                "no GPU ({e}); running the CPU twin only (kernel image from {})",
                strided_apply::PTX_SOURCE
            );
            None
        }
    };
    println!(
        "{:<16} {:>10} {:>12} {:>12} {:>10}",
        "case (f32 add)", "elements", "CPU ms", "GPU GB/s", "GPU = CPU"
    );
    for case in &cases {
        let mut c_cpu = vec![f32::NAN; N * N];
        let t = Instant::now();
        cpu::apply3(
            ops::Add,
            (&mut c_cpu, &out),
            (&a, &case.a),
            (&b[..case.b_len], &case.b),
        )?;
        let cpu_ms = t.elapsed().as_secs_f64() * 1e3;
        let (gbs, same) = match &gpu {
            Some(g) => run_gpu(g, case, &out, &a, &b, &c_cpu)?,
            None => ("-".to_string(), "no GPU".to_string()),
        };
        println!(
            "{:<16} {:>10} {:>12.2} {:>12} {:>10}",
            case.name,
            N * N,
            cpu_ms,
            gbs,
            same
        );
    }
    if let Some(g) = &gpu {
        let bytes = N * N * 4;
        let src = DeviceTensor::from_slice(g, &a, &[N * N])?;
        let dst = DeviceTensor::<f32>::zeros(g, &[N * N])?;
        let ms = median_ms(g, || dst.buffer().copy_from(g, src.buffer(), bytes))?;
        println!(
            "{:<16} {:>10} {:>12} {:>12.0} {:>10}",
            "d2d copy",
            N * N,
            "-",
            2.0 * bytes as f64 / ms / 1e6,
            "-"
        );
    }
    Ok(())
}

/// Prints the cold start in one line (the first launch decodes and loads only its own
/// family: the best cubin for the device, or PTX) and which code each module runs.
fn cold_start(gpu: &Gpu, open_ms: f64) -> Result<(), Box<dyn std::error::Error>> {
    let x = DeviceTensor::from_slice(gpu, &[1.0f32, 2.0], &[2])?;
    let mut y = DeviceTensor::<f32>::zeros(gpu, &[2])?;
    let t = Instant::now();
    apply3(gpu, ops::Add, &mut y, &x, &x)?;
    gpu.synchronize()?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    let modules = gpu.module_info();
    let load = modules
        .iter()
        .flat_map(|m| m.loaded.first())
        .next()
        .map_or(String::new(), |l| {
            format!(
                " (decode {:.2} ms, module load {:.2} ms)",
                l.decode_ms, l.load_ms
            )
        });
    println!("cold start: open {open_ms:.0} ms, first apply3(Add) {first_ms:.2} ms{load}");
    for m in &modules {
        println!("module {m}");
    }
    Ok(())
}

fn median_ms(
    gpu: &Gpu,
    mut f: impl FnMut() -> strided_apply::Result<()>,
) -> strided_apply::Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    let mut times = Vec::new();
    for _ in 0..21 {
        times.push(gpu.time_ms(&mut f)? as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn run_gpu(
    gpu: &Gpu,
    case: &Case,
    out: &Layout,
    a: &[f32],
    b: &[f32],
    c_cpu: &[f32],
) -> Result<(String, String), Box<dyn std::error::Error>> {
    let da = DeviceTensor::from_slice(gpu, a, &[N * N])?.with_layout(case.a.clone())?;
    let db = DeviceTensor::from_slice(gpu, &b[..case.b_len], &[case.b_len])?
        .with_layout(case.b.clone())?;
    let mut dc = DeviceTensor::from_slice(gpu, &vec![f32::NAN; N * N], &[N * N])?
        .with_layout(out.clone())?;
    apply3(gpu, ops::Add, &mut dc, &da, &db)?;
    let got = dc.buffer_to_vec(gpu)?;
    let same = match first_mismatch(&got, c_cpu, ops::Tolerance::Exact) {
        None => "yes".to_string(),
        Some(m) => format!("NO: {m}"),
    };
    let ms = median_ms(gpu, || apply3(gpu, ops::Add, &mut dc, &da, &db))?;
    let bytes = (2 * N * N + case.b_len.min(N * N)) * 4;
    Ok((format!("{:.0}", bytes as f64 / ms / 1e6), same))
}
