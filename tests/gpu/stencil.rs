//! The stencil table on the GPU against the CPU twin, tiled and generic bodies, and
//! in-place use.

use crate::common::stencil::{input_layouts, output_layouts};
use strided_apply::gpu_kernels::stencil::{
    BackwardDiff, ForwardDiff, Laplacian2, Laplacian3, Shift, StencilKernels,
};
use strided_apply::verify::Distance;
use strided_apply::{bf16, f16, stencil, DeviceTensor, Elem, Error, Gpu, Layout};

fn data<T: Elem>(len: usize, seed: &mut u64, f: impl Fn(i64) -> T) -> Vec<T> {
    (0..len)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            f(((*seed >> 33) % 2001) as i64 - 1000)
        })
        .collect()
}

/// Cases run and how many of them took the tiled body.
#[derive(Default)]
struct Count {
    cases: usize,
    tiled: usize,
}

/// Every layout pair of `shape` for one op and axes: GPU against the CPU twin.
#[allow(clippy::too_many_arguments)]
fn gpu_case<S: StencilKernels<T>, T: Elem + Distance>(
    count: &mut Count,
    gpu: &Gpu,
    name: &str,
    op: S,
    shape: &[usize],
    axes: &[usize],
    poison: T,
    f: impl Fn(i64) -> T + Copy,
) -> Result<(), String> {
    let mut seed = 0xabcd_u64;
    for (in_name, li, in_len) in input_layouts(shape) {
        let input = data(in_len, &mut seed, f);
        for (out_name, lo) in output_layouts(shape) {
            let init = vec![poison; shape.iter().product()];
            let tiled = stencil::plan_stencil(&lo, &li, axes)
                .map_err(|e| e.to_string())?
                .tiled;
            match stencil::verify(gpu, op, (&init, &lo), (&input, &li), axes) {
                Ok(None) => {
                    count.cases += 1;
                    count.tiled += tiled as usize;
                }
                Ok(Some(m)) => {
                    return Err(format!(
                        "{name} {shape:?} axes {axes:?}, {in_name}, {out_name}: {m}"
                    ))
                }
                Err(e) => {
                    return Err(format!(
                        "{name} {shape:?} axes {axes:?}, {in_name}, {out_name}: {e}"
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The stencil table on the GPU (f32, f64, f16 and bf16, shapes of rank 1 to 4 with borders on every
/// side), in-place refusal on device tensors, and the temporary that makes it correct.
pub fn gpu_stencils(gpu: &Gpu) -> Result<String, String> {
    let mut n = Count::default();
    // Shapes whose x axis is shorter than a warp take the generic body, the others the
    // tiled one ([70, 131] and [5, 34, 19, 40]: several lines per block, partial x tiles
    // and y segments, batch axes).
    let shapes = [
        &[1000usize][..],
        &[37, 45],
        &[9, 17, 33],
        &[3, 8, 9, 10],
        &[70, 131],
        &[5, 34, 19, 40],
    ];
    for shape in shapes {
        let r = shape.len();
        for axis in 0..r {
            gpu_case(
                &mut n,
                gpu,
                "ForwardDiff f32",
                ForwardDiff,
                shape,
                &[axis],
                f32::NAN,
                |v| v as f32 / 8.0,
            )?;
            gpu_case(
                &mut n,
                gpu,
                "BackwardDiff f64",
                BackwardDiff,
                shape,
                &[axis],
                f64::NAN,
                |v| v as f64 / 8.0,
            )?;
        }
        gpu_case(
            &mut n,
            gpu,
            "Shift<1,0,0> f32",
            Shift::<1, 0, 0>,
            shape,
            &[r - 1],
            f32::NAN,
            |v| v as f32,
        )?;
        gpu_case(
            &mut n,
            gpu,
            "Shift<-1,0,0> f64",
            Shift::<-1, 0, 0>,
            shape,
            &[0],
            f64::NAN,
            |v| v as f64,
        )?;
        if r >= 2 {
            gpu_case(
                &mut n,
                gpu,
                "Laplacian2 f32",
                Laplacian2,
                shape,
                &[r - 1, r - 2],
                f32::NAN,
                |v| v as f32 / 4.0,
            )?;
            gpu_case(
                &mut n,
                gpu,
                "Laplacian2 f64",
                Laplacian2,
                shape,
                &[0, r - 1],
                f64::NAN,
                |v| v as f64 / 4.0,
            )?;
            gpu_case(
                &mut n,
                gpu,
                "Shift<0,-1,0> f32",
                Shift::<0, -1, 0>,
                shape,
                &[r - 1, 0],
                f32::NAN,
                |v| v as f32,
            )?;
        }
        // 16-bit floats: computed in f32, rounded once (bit-identical to the twin).
        gpu_case(
            &mut n,
            gpu,
            "ForwardDiff bf16",
            ForwardDiff,
            shape,
            &[r - 1],
            bf16::NAN,
            |v| bf16::from_f32(v as f32 / 8.0),
        )?;
        if r >= 2 {
            gpu_case(
                &mut n,
                gpu,
                "Laplacian2 f16",
                Laplacian2,
                shape,
                &[r - 1, r - 2],
                f16::NAN,
                |v| f16::from_f32(v as f32 / 16.0),
            )?;
            gpu_case(
                &mut n,
                gpu,
                "Shift<0,1,0> bf16",
                Shift::<0, 1, 0>,
                shape,
                &[0, r - 1],
                bf16::NAN,
                |v| bf16::from_f32(v as f32),
            )?;
        }
        if r >= 3 {
            gpu_case(
                &mut n,
                gpu,
                "Laplacian3 bf16",
                Laplacian3,
                shape,
                &[r - 1, r - 2, r - 3],
                bf16::NAN,
                |v| bf16::from_f32(v as f32 / 4.0),
            )?;
            gpu_case(
                &mut n,
                gpu,
                "Laplacian3 f32",
                Laplacian3,
                shape,
                &[r - 1, r - 2, r - 3],
                f32::NAN,
                |v| v as f32 / 4.0,
            )?;
            gpu_case(
                &mut n,
                gpu,
                "Laplacian3 f64",
                Laplacian3,
                shape,
                &[0, 2, 1],
                f64::NAN,
                |v| v as f64 / 4.0,
            )?;
            gpu_case(
                &mut n,
                gpu,
                "Shift<0,0,1> f64",
                Shift::<0, 0, 1>,
                shape,
                &[2, 1, 0],
                f64::NAN,
                |v| v as f64,
            )?;
        }
    }
    // `a = shift(a) - a`-style in-place use: refused, and correct through a temporary.
    let e = |e: Error| e.to_string();
    let host: Vec<f32> = (0..64).map(|i| (i * i) as f32).collect();
    let mut a = DeviceTensor::from_slice(gpu, &host, &[8, 8]).map_err(e)?;
    let alias = a.clone();
    match stencil::apply(gpu, Laplacian2, &mut a, &alias, &[1, 0]) {
        Err(Error::StencilOverlap { operand: "input" }) => {}
        other => {
            return Err(format!(
                "in-place stencil: expected StencilOverlap, got {other:?}"
            ))
        }
    }
    let shifted_view = alias.slice(1, Some(1), None, 1).map_err(e)?;
    let mut left = a.slice(1, None, Some(7), 1).map_err(e)?;
    match stencil::apply(gpu, ForwardDiff, &mut left, &shifted_view, &[1]) {
        Err(Error::StencilOverlap { .. }) => {}
        other => {
            return Err(format!(
                "overlapping stencil views: expected StencilOverlap, got {other:?}"
            ))
        }
    }
    if a.to_vec(gpu).map_err(e)? != host {
        return Err("a refused stencil call wrote its output".into());
    }
    let tmp = a.contiguous(gpu).map_err(e)?;
    stencil::apply(gpu, Laplacian2, &mut a, &tmp, &[1, 0]).map_err(e)?;
    let mut want = vec![0.0f32; 64];
    let l = Layout::contiguous(&[8, 8]).map_err(e)?;
    stencil::apply_cpu(Laplacian2, (&mut want, &l), (&host, &l), &[1, 0]).map_err(e)?;
    if a.to_vec(gpu).map_err(e)? != want {
        return Err("in place through a temporary: wrong result".into());
    }
    if n.tiled == 0 || n.tiled == n.cases {
        return Err(format!(
            "{} of {} stencil cases took the tiled body: both bodies must be covered",
            n.tiled, n.cases
        ));
    }
    Ok(format!(
        "{} stencil cases GPU = CPU twin ({} tiled, {} generic); in-place use refused, \
         temporary correct",
        n.cases,
        n.tiled,
        n.cases - n.tiled
    ))
}
