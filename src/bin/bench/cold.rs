//! Cold starts in a fresh process: the library's (driver, context, first module load, first
//! launch; `--cold`) and the expression engine's (`--cold-expr`).

use super::data::{rand_f32, random};
use super::report::check_label;
use std::time::Instant;
use strided_apply::verify::Distance;
use strided_apply::{api, gpu_kernels, ops, DeviceTensor, Gpu, Layout, Result};

/// One cold start, in this (fresh) process: `open` (driver and context), the first f32
/// `apply3(Add)` with its family's decode and module load, and a second launch.
pub(super) fn cold_start(label: &str) -> Result<()> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let gpu = strided_apply::open(0)?;
    let open_ms = ms(t);
    let n = 1 << 20;
    let a = DeviceTensor::from_slice(&gpu, &random(n, 1, rand_f32), &[n])?;
    let mut out = DeviceTensor::from_slice(&gpu, &vec![f32::NAN; n], &[n])?;
    gpu.synchronize()?;
    let t = Instant::now();
    api::apply3(&gpu, ops::Add, &mut out, &a, &a)?;
    gpu.synchronize()?;
    let first_ms = ms(t);
    let t = Instant::now();
    api::apply3(&gpu, ops::Add, &mut out, &a, &a)?;
    gpu.synchronize()?;
    let second_ms = ms(t);
    let want: Vec<f32> = a.to_vec(&gpu)?.iter().map(|x| x + x).collect();
    let check = check_label(&out.to_vec(&gpu)?, &want);
    let (target, loaded, decode_ms, load_ms) = module_loads(&gpu, "gpu-kernels");
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"cold_start\",\"label\":\"{label}\",\"target\":\"{target}\",\"open_ms\":{open_ms:.2},\"first_apply3_ms\":{first_ms:.3},\"decode_ms\":{decode_ms:.3},\"load_ms\":{load_ms:.3},\"second_apply3_ms\":{second_ms:.3},\"families_loaded\":{loaded:?},\"check\":\"{check}\"}}"
    );
    Ok(())
}

/// What `gpu` has loaded of `module` so far: the chosen target, the families in load order,
/// and their decoding and module-load milliseconds, summed.
pub(super) fn module_loads(gpu: &Gpu, module: &str) -> (String, Vec<&'static str>, f64, f64) {
    let info = gpu.module_info();
    let Some(m) = info.iter().find(|m| m.module == module) else {
        return ("none".into(), Vec::new(), 0.0, 0.0);
    };
    let target = m.chosen.map_or("none".into(), |t| t.to_string());
    let families = m.loaded.iter().map(|l| l.family).collect();
    let (decode, load) = m
        .loaded
        .iter()
        .fold((0.0, 0.0), |(d, l), x| (d + x.decode_ms, l + x.load_ms));
    (target, families, decode, load)
}

/// One cold start of the expression engine, in this (fresh) process, after `open`: the
/// first expression of the process from its text to the end of a synchronisation (parse,
/// compile, the interpreter family's decode and module load, the launch), `first` being
/// `dense` (the seed expression over three dense f32 inputs of 2^20) or `broadcast` (the
/// same over a row, a column and a full 1024² input, hoisted: its first call also makes
/// the temporaries); then a second call of it, and the first call of a second, new
/// expression (`a*b + c`) on the same inputs. The interpreter module's decode and load
/// times and its families loaded; the first result against the CPU twin.
pub(super) fn cold_expr(first: &str) -> Result<()> {
    use strided_apply::expr::{Arg, DeviceArg, Expr, HostTensor, HostTensorMut};
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let gpu = strided_apply::open(0)?;
    let open_ms = ms(t);
    let side = 1024;
    let shapes: [&[usize]; 3] = match first {
        "dense" => [&[side, side], &[side, side], &[side, side]],
        "broadcast" => [&[1, side], &[side, 1], &[side, side]],
        _ => {
            eprintln!("bench: --cold-expr takes dense or broadcast, not `{first}`");
            std::process::exit(2);
        }
    };
    let hosts: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| random(s.iter().product(), 40 + i as u64, |x| rand_f32(x).abs()))
        .collect();
    let dev = hosts
        .iter()
        .zip(shapes)
        .map(|(h, s)| DeviceTensor::from_slice(&gpu, h, s))
        .collect::<Result<Vec<_>, _>>()?;
    let n = side * side;
    let mut out = DeviceTensor::from_slice(&gpu, &vec![f32::NAN; n], &[side, side])?;
    let args = [
        ("a", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
        ("b", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
        ("c", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
    ];
    let ins: Vec<DeviceArg> = dev.iter().map(DeviceArg::from).collect();
    gpu.synchronize()?;
    let text = "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)";
    let t = Instant::now();
    let f = Expr::parse(text)?.compile(&args, None)?;
    f.run(&gpu, &mut out, &ins, &[])?;
    gpu.synchronize()?;
    let first_ms = ms(t);
    let got = out.buffer_to_vec(&gpu)?;
    let t = Instant::now();
    f.run(&gpu, &mut out, &ins, &[])?;
    gpu.synchronize()?;
    let second_ms = ms(t);
    let t = Instant::now();
    let g = Expr::parse("a*b + c")?.compile(&args, None)?;
    g.run(&gpu, &mut out, &ins, &[])?;
    gpu.synchronize()?;
    let new_expr_ms = ms(t);
    // The CPU twin of the first call.
    let layouts = shapes
        .iter()
        .map(|s| Layout::contiguous(s))
        .collect::<Result<Vec<_>, _>>()?;
    let out_layout = Layout::contiguous(&[side, side])?;
    let mut want = vec![f32::NAN; n];
    let f32t = gpu_kernels::elem::ElemType::F32;
    let host_ins: Vec<HostTensor> = hosts
        .iter()
        .zip(&layouts)
        .map(|(h, l)| HostTensor::new(bytemuck::cast_slice(h), f32t, l))
        .collect();
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), f32t, &out_layout),
        &host_ins,
        &[],
    )?;
    // Transcendentals: within the library's ulp bounds of the CPU twin, not bit-identical.
    let max_ulp = got
        .iter()
        .zip(&want)
        .map(|(&g, &c)| f32::distance(g, c))
        .max()
        .unwrap_or(0);
    let check = if max_ulp <= 4 {
        format!("GPU~CPU (max {max_ulp} ulp)")
    } else {
        format!("MISMATCH (max {max_ulp} ulp)")
    };
    let (_, loaded, decode_ms, load_ms) = module_loads(&gpu, "strided-apply-expr");
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"cold_expr\",\"first\":\"{first}\",\"open_ms\":{open_ms:.2},\"first_call_ms\":{first_ms:.3},\"decode_ms\":{decode_ms:.3},\"load_ms\":{load_ms:.3},\"second_call_ms\":{second_ms:.3},\"new_expression_ms\":{new_expr_ms:.3},\"families_loaded\":{loaded:?},\"check\":\"{check}\"}}"
    );
    Ok(())
}
