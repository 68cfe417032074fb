//! Stencils (group `stencil`).

use super::data::{dense, rand_f32};
use super::harness::Bench;
use super::report::{check_label, report};
use super::timing::median_ms;
use strided_apply::{gpu_kernels, stencil, DeviceTensor, Gpu, Result};

/// Times `out = op(neighbours of input)` over a dense random f32 tensor of `shape` and
/// checks the result against the CPU twin (bytes: input read once + output written once).
pub(super) fn bench_stencil<S: gpu_kernels::stencil::StencilKernels<f32>>(
    gpu: &Gpu,
    case: &str,
    op: S,
    shape: &[usize],
    axes: &[usize],
) -> Result<()> {
    let n: usize = shape.iter().product();
    let x = dense(shape, 22, rand_f32)?;
    let d_x = DeviceTensor::from_slice(gpu, &x.host, shape)?;
    let mut out = DeviceTensor::from_slice(gpu, &vec![f32::NAN; n], shape)?;
    stencil::apply(gpu, op, &mut out, &d_x, axes)?;
    let got = out.to_vec(gpu)?;
    let mut want = vec![f32::NAN; n];
    stencil::apply_cpu(op, (&mut want, &x.layout), (&x.host, &x.layout), axes)?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, |_| stencil::apply(gpu, op, &mut out, &d_x, axes))?;
    report(case, "f32", n, 2 * n * 4, ms, &check);
    Ok(())
}

/// Stencils: the 2-D Laplacian of a big × big f32 image and the 3-D one of a cube, x
/// along the unit-stride axis (bytes: input read once + output written once).
pub(super) fn stencils(bench: &Bench) -> Result<()> {
    let (gpu, quick, big) = (&bench.gpu, bench.quick, bench.big);
    let op = gpu_kernels::stencil::Laplacian2;
    bench_stencil(gpu, "stencil_laplacian2", op, &[big, big], &[1, 0])?;
    let side = if quick { 128 } else { 512 };
    let op = gpu_kernels::stencil::Laplacian3;
    bench_stencil(gpu, "stencil_laplacian3", op, &[side; 3], &[2, 1, 0])?;
    Ok(())
}
