//! Runs the example's own ops (Huber loss, a fused soft clip, a central-difference
//! stencil) on a transposed and a broadcast operand: on the GPU when there is one,
//! checked against the CPU twin; otherwise on the CPU twin alone.

use custom_op::kernels::{CentralDiff, Huber, SoftClip};
use strided_apply::{stencil, verify, Layout};

fn main() -> strided_apply::Result<()> {
    let (rows, cols) = (300usize, 500usize);
    let a: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 10.0)
        .collect();
    let b: Vec<f32> = (0..rows).map(|j| (j % 7) as f32 - 3.0).collect();
    // `a` viewed transposed, `b` broadcast along the rows of the result.
    let at = Layout::contiguous(&[rows, cols])?.transpose(0, 1)?;
    let lb = Layout::contiguous(&[1, rows])?;
    let lo = Layout::contiguous(&[cols, rows])?;
    let init = vec![f32::NAN; rows * cols];
    match custom_op::open(0) {
        Ok(gpu) => {
            println!("GPU: {}", gpu.name());
            let huber = verify::apply3(
                &gpu,
                Huber { delta: 1.0f32 },
                (&init, &lo),
                (&a, &at),
                (&b, &lb),
            )?;
            let clip = verify::apply2(&gpu, SoftClip::new(2.0f32), (&init, &lo), (&a, &at))?;
            let diff = stencil::verify(&gpu, CentralDiff, (&init, &lo), (&a, &at), &[0])?;
            for (name, m) in [
                ("huber", huber),
                ("soft_clip", clip),
                ("central_diff", diff),
            ] {
                match m {
                    None => println!("{name}: GPU = CPU twin on {} elements", rows * cols),
                    Some(m) => {
                        eprintln!("{name}: GPU and CPU twin differ: {m}");
                        std::process::exit(1);
                    }
                }
            }
        }
        Err(e) => {
            println!("no GPU ({e}); running the CPU twin only");
            let mut out = init.clone();
            strided_apply::cpu::apply3(
                Huber { delta: 1.0f32 },
                (&mut out, &lo),
                (&a, &at),
                (&b, &lb),
            )?;
            println!(
                "huber: mean loss {:.4}",
                out.iter().sum::<f32>() / out.len() as f32
            );
            stencil::apply_cpu(CentralDiff, (&mut out, &lo), (&a, &at), &[0])?;
            println!("central_diff: first row {:?}", &out[..4]);
        }
    }
    Ok(())
}
