//! Stencils: planning, checks and launch on the GPU, and the CPU twin, in one place.
//!
//! A stencil reads each output element's input neighbours at compile-time offsets with
//! clamp-to-edge borders ([`gpu_kernels::stencil`]). `axes` names the tensor axes that
//! are the stencil's `x`, `y` and `z` (one to three of them); every other axis is a batch
//! axis. A forward difference along axis 0 of a matrix is
//! `stencil::apply(&gpu, ForwardDiff, &mut d, &m, &[0])`, a 2-D Laplacian of an image
//! with rows along axis 0 is `stencil::apply(&gpu, Laplacian2, &mut l, &img, &[1, 0])`.
//!
//! ```
//! # use host as strided_apply; // the examples name the root crate, which re-exports this one
//! use strided_apply::{stencil, Layout};
//! use strided_apply::gpu_kernels::stencil::ForwardDiff;
//! // Forward difference along the columns of a transposed view, on the CPU twin.
//! let m: Vec<f32> = vec![0.0, 1.0, 4.0, 9.0, 16.0, 25.0]; // [[0, 1, 4], [9, 16, 25]]
//! let mt = Layout::new(&[3, 2], &[1, 3], 0)?; // its transpose: [[0, 9], [1, 16], [4, 25]]
//! let mut d = vec![0.0f32; 6];
//! stencil::apply_cpu(ForwardDiff, (&mut d, &Layout::contiguous(&[3, 2])?), (&m, &mt), &[0])?;
//! assert_eq!(d, [1.0, 7.0, 3.0, 9.0, 0.0, 0.0]);
//! # Ok::<(), strided_apply::Error>(())
//! ```
//!
//! The output must not share memory with the input, even exactly in place: a stencil
//! reads neighbours that other threads write (`a = shift(a) - a` would read values already
//! overwritten). Such calls fail with [`Error::StencilOverlap`]; write into a new tensor.

use crate::alias::{check_aliasing, Region};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, LaunchShape};
use crate::launch::params;
use crate::layout::Layout;
use crate::plan::MAX_GRID_THREADS;
use crate::tensor::DeviceTensor;
use crate::twin::{region, SendPtr};
use cudarc::driver::sys::CUstream;
use gpu_kernels::apply::OpArg;
use gpu_kernels::stencil::StencilNames;
use gpu_kernels::stencil::{self as body, Stencil, StencilGeometry, StencilKernels, STENCIL_DIMS};
use gpu_kernels::{Elem, Index};
use rayon::prelude::*;
use std::ffi::c_void;

/// Frame axes a stencil can shift along (x, y, z).
pub const FRAME_AXES: usize = 3;
/// Batch axes left after merging the non-frame axes that merge.
pub const BATCH_AXES: usize = STENCIL_DIMS - FRAME_AXES;

/// A checked stencil launch: sizes and strides (relative to each operand's base element)
/// of the frame axes then the batch axes, as [`StencilGeometry`] takes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StencilPlan {
    pub numel: u64,
    pub sizes: [u64; STENCIL_DIMS],
    /// `strides[0]`: output, `strides[1]`: input.
    pub strides: [[i64; STENCIL_DIMS]; 2],
    /// Base element of each operand (the layouts' offsets).
    pub base: [usize; 2],
    /// Whether 32-bit index arithmetic covers the launch.
    pub index32: bool,
    /// Whether the launch takes the tiled body
    /// ([`stencil_tiled`](gpu_kernels::stencil::stencil_tiled)): a 32-bit launch whose x
    /// axis has at least [`TILED_MIN_X`] positions (a warp's worth). The generic body
    /// (a division walk per element) takes the rest.
    pub tiled: bool,
}

/// Fewest x positions for the tiled body: below a warp, most of its lanes would idle.
pub const TILED_MIN_X: u64 = body::TILE_LANES as u64;

impl StencilPlan {
    pub fn geometry<I: Index>(&self) -> StencilGeometry<I> {
        StencilGeometry {
            sizes: self.sizes.map(I::from_u64),
            strides: self.strides.map(|s| s.map(|v| I::from_isize(v as isize))),
        }
    }
}

fn bad_axes(reason: String) -> Error {
    Error::InvalidView {
        operand: "axes",
        reason,
    }
}

/// Plans a stencil over `out` (whose shape it keeps) and `input` (broadcast to it): checks
/// the axes, merges batch axes that merge, and proves every offset in bounds (the layouts
/// are checked against their buffers by the callers).
pub fn plan_stencil(out: &Layout, input: &Layout, axes: &[usize]) -> Result<StencilPlan> {
    let rank = out.ndim();
    if axes.is_empty() || axes.len() > FRAME_AXES {
        return Err(bad_axes(format!(
            "a stencil needs 1 to {FRAME_AXES} frame axes (x, y, z), {} given",
            axes.len()
        )));
    }
    for (i, &a) in axes.iter().enumerate() {
        if a >= rank {
            return Err(bad_axes(format!(
                "axis {a} is out of range for a {rank}-dimensional output"
            )));
        }
        if axes[..i].contains(&a) {
            return Err(bad_axes(format!("axis {a} is named twice")));
        }
    }
    let input = input.broadcast_as(out.shape(), "input")?;
    let numel = out.numel() as u64;
    let mut sizes = [1u64; STENCIL_DIMS];
    let mut strides = [[0i64; STENCIL_DIMS]; 2];
    let layouts = [out, &input];
    for (d, &a) in axes.iter().enumerate() {
        sizes[d] = out.shape()[a] as u64;
        for k in 0..2 {
            strides[k][d] = layouts[k].strides()[a] as i64;
        }
    }
    // Batch axes, innermost first, size-1 axes dropped, adjacent axes merged when both
    // operands step over them as over one axis.
    let mut batch: Vec<(u64, [i64; 2])> = Vec::new();
    for a in (0..rank).rev().filter(|a| !axes.contains(a)) {
        let n = out.shape()[a] as u64;
        let s = [out.strides()[a] as i64, input.strides()[a] as i64];
        if n == 1 {
            continue;
        }
        match batch.last_mut() {
            Some((m, t)) if (0..2).all(|k| s[k] as i128 == t[k] as i128 * *m as i128) => *m *= n,
            _ => batch.push((n, s)),
        }
    }
    if batch.len() > BATCH_AXES {
        return Err(Error::RankTooHigh {
            operand: "out",
            ndim: FRAME_AXES + batch.len(),
            max: STENCIL_DIMS,
        });
    }
    for (j, (n, s)) in batch.iter().enumerate() {
        sizes[FRAME_AXES + j] = *n;
        strides[0][FRAME_AXES + j] = s[0];
        strides[1][FRAME_AXES + j] = s[1];
    }
    // 32-bit index: the linear index plus a grid's worth of threads, and every offset from
    // a base element, fit in 31 bits.
    let mut index32 = numel + MAX_GRID_THREADS <= i32::MAX as u64;
    for (k, l) in layouts.iter().enumerate() {
        if let Some(span) = l.span(if k == 0 { "out" } else { "input" })? {
            let off = l.offset() as i128;
            let (lo, hi) = (span.min as i128 - off, span.max as i128 - off);
            index32 &= lo >= i32::MIN as i128 && hi <= i32::MAX as i128;
        }
    }
    Ok(StencilPlan {
        numel,
        sizes,
        strides,
        base: [out.offset(), input.offset()],
        index32,
        tiled: index32 && sizes[0] >= TILED_MIN_X,
    })
}

/// Refuses any memory shared by the output and the input, and an output that maps two
/// indices to one element.
fn check_stencil_aliasing(out: &Region, input: &Region) -> Result<()> {
    check_aliasing(out, &[])?;
    let (Some(o), Some(i)) = (out.byte_span()?, input.byte_span()?) else {
        return Ok(());
    };
    if o.1 <= i.0 || i.1 <= o.0 {
        Ok(())
    } else {
        Err(Error::StencilOverlap {
            operand: input.operand,
        })
    }
}

/// `out = op(neighbours of input)` on the GPU; `axes` are the tensor axes of the stencil's
/// x, y, z. `input` is broadcast to `out`'s shape.
pub fn apply<S: StencilKernels<T>, T: Elem>(
    gpu: &Gpu,
    op: S,
    out: &mut DeviceTensor<T>,
    input: &DeviceTensor<T>,
    axes: &[usize],
) -> Result<()> {
    let plan = plan_stencil(out.layout(), input.layout(), axes)?;
    check_stencil_aliasing(&out.region(gpu, "out")?, &input.region(gpu, "input")?)?;
    let ptrs = [out.base_addr(), input.base_addr()];
    let op = OpArg::new(op);
    // SAFETY: both layouts were checked against their buffers when the views were made,
    // `plan_stencil` broadcast the input and chose the index width, and
    // `check_stencil_aliasing` proved the output distinct and apart from the input; `op`
    // is the `OpArg` of the stencil whose kernels `S::NAMES` names.
    unsafe {
        launch_planned(
            gpu,
            &S::NAMES,
            (&op as *const OpArg<S>).cast(),
            &plan,
            size_of::<T>(),
            ptrs,
            gpu.stream().cu_stream(),
        )
    }
}

/// The tiled kernel's y positions per line and lines per block:
/// `STRIDED_APPLY_STENCIL_TILE=walk,lines` (a tuning knob, read once; walk 1 to 4096, lines
/// 1 to 32), by default [`TILE_WALK`](body::TILE_WALK), [`TILE_LINES`](body::TILE_LINES).
fn tile_shape() -> (u32, u32) {
    static V: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("STRIDED_APPLY_STENCIL_TILE")
            .ok()
            .and_then(|v| {
                let (w, l) = v.split_once(',')?;
                Some((w.trim().parse().ok()?, l.trim().parse().ok()?))
            })
            .filter(|&(w, l)| (1..=4096).contains(&w) && (1..=32).contains(&l))
            .unwrap_or((body::TILE_WALK, body::TILE_LINES))
    })
}

/// Launches a checked stencil plan (nothing for an empty one) over elements of
/// `elem_size` bytes.
///
/// # Safety
/// `ptrs` are the device addresses of the output's and the input's elements at
/// `plan.base`, in buffers for which every offset of `plan` is in bounds; the output maps
/// distinct indices to distinct elements and shares no memory with the input; `op` points
/// to the `OpArg` of the stencil whose kernels `names` names; `stream` is a live stream of
/// `gpu`'s context.
unsafe fn launch_planned(
    gpu: &Gpu,
    names: &StencilNames,
    op: *const c_void,
    plan: &StencilPlan,
    elem_size: usize,
    ptrs: [u64; 2],
    stream: CUstream,
) -> Result<()> {
    if plan.numel == 0 {
        return Ok(());
    }
    if !plan.index32 {
        let (n, g) = (plan.numel, plan.geometry::<u64>());
        // SAFETY: the 64-bit entry takes (OpArg<S>, u64, StencilGeometry<u64>, *mut T,
        // *const T) as `kernels!` declares; the caller's contract covers the rest.
        return unsafe {
            gpu.launch_named(
                names.module,
                names.s64,
                gpu.shape_1d(plan.numel),
                stream,
                params(op, &n, &g, &ptrs).as_mut(),
            )
        };
    }
    // 32-bit: the tiled and the generic entry take the same parameter types, a u32 (the
    // line length, or the element count) and a StencilGeometry<u32>.
    let (kernel, scalar, shape) = if plan.tiled {
        let (walk, lines) = tile_shape();
        let tasks = body::tiled_tasks(&plan.sizes, elem_size, walk, lines);
        let shape = LaunchShape {
            grid: tasks.min(i32::MAX as u64) as u32,
            block: (body::TILE_LANES, lines),
            shared_bytes: 0,
        };
        (names.tiled, walk, shape)
    } else {
        (names.s32, plan.numel as u32, gpu.shape_1d(plan.numel))
    };
    let g = plan.geometry::<u32>();
    // SAFETY: both entries take (OpArg<S>, u32, StencilGeometry<u32>, *mut T, *const T) as
    // `kernels!` declares; the plan is 32-bit; the tiled one gets walk >= 1 in blocks of
    // TILE_LANES × lines threads (any grid: it loops over its tasks), the generic one any
    // 1-D grid; the caller's contract covers the rest.
    unsafe {
        gpu.launch_named(
            names.module,
            kernel,
            shape,
            stream,
            params(op, &scalar, &g, &ptrs).as_mut(),
        )
    }
}

/// Elements per rayon task of the CPU twin.
const CHUNK: u64 = 1 << 14;

/// The CPU twin of [`apply`]: the same plan and the same stencil body, over host slices.
pub fn apply_cpu<S: Stencil<T>, T: Elem>(
    op: S,
    out: (&mut [T], &Layout),
    input: (&[T], &Layout),
    axes: &[usize],
) -> Result<()> {
    out.1.check_in(out.0.len(), "out")?;
    input.1.check_in(input.0.len(), "input")?;
    let plan = plan_stencil(out.1, input.1, axes)?;
    check_stencil_aliasing(
        &region("out", out.0, out.1),
        &region("input", input.0, input.1),
    )?;
    let po = SendPtr(out.0.as_mut_ptr().wrapping_add(plan.base[0]));
    let pi = SendPtr(input.0.as_ptr().wrapping_add(plan.base[1]).cast_mut());
    // SAFETY: `check_in` proved every offset of both layouts inside their slices and the
    // plan keeps those offsets; the input shares no memory with the output.
    unsafe {
        run_planned(&plan, &|n, g, first| {
            body::stencil(op, n, g, po.get(), pi.get().cast_const(), first, 1)
        })
    };
    Ok(())
}

/// Runs `body(n, geometry, first)` over the plan's indices in rayon tasks of [`CHUNK`]
/// indices each (`first..n` per task).
///
/// # Safety
/// `body` runs the stencil over `first..n` with the plan's geometry on memory for which
/// the plan's offsets are in bounds, the output distinct per index and apart from the input.
unsafe fn run_planned(plan: &StencilPlan, body: &(dyn Fn(u64, &StencilGeometry<u64>, u64) + Sync)) {
    let g = plan.geometry::<u64>();
    let chunks = plan.numel.div_ceil(CHUNK);
    (0..chunks).into_par_iter().for_each(|c| {
        let (lo, hi) = (c * CHUNK, ((c + 1) * CHUNK).min(plan.numel));
        // Chunks cover disjoint index ranges, whose output elements are distinct.
        body(hi, &g, lo);
    });
}

#[cfg(feature = "dispatch")]
pub use dynamic::{stencil_instances, DynStencil};

/// Stencils chosen at run time (feature `dispatch`): by id (`"lap2"`, `"fdiff"`, `"shift_xp"`,
/// … the first name part of the `kernels!` stencil line) and element type.
#[cfg(feature = "dispatch")]
mod dynamic {
    use super::*;
    use crate::operand::{find_one_type, RawTensor};
    use gpu_kernels::dispatch::{OpValue, StencilInstance, STENCILS};
    use gpu_kernels::elem::ElemType;

    /// Every instantiated stencil family of every kernel crate linked into the program.
    pub fn stencil_instances() -> impl Iterator<Item = &'static StencilInstance> {
        STENCILS.iter()
    }

    /// A stencil chosen at run time: its family and its op value.
    #[derive(Clone, Copy, Debug)]
    pub struct DynStencil {
        instance: &'static StencilInstance,
        value: OpValue,
    }

    impl DynStencil {
        /// Stencil `op` over `elem` (the output's and the input's element type).
        pub fn new(op: &str, elem: ElemType) -> Result<DynStencil> {
            let instance = find_one_type(STENCILS.iter(), op, elem, |s| (s.op, s.elem))?;
            let value =
                (instance.builder)()
                    .and_then(|b| (b.build)(&[]))
                    .ok_or(Error::OpNotBuildable {
                        op: instance.op,
                        family: instance.family(),
                    })?;
            Ok(DynStencil { instance, value })
        }

        /// The family this stencil launches.
        pub fn instance(&self) -> &'static StencilInstance {
            self.instance
        }

        /// The checked plan of `out = op(neighbours of input)` over raw tensors.
        fn plan(
            &self,
            out: &RawTensor<'_>,
            input: &RawTensor<'_>,
            axes: &[usize],
        ) -> Result<StencilPlan> {
            let elem = self.instance.elem;
            let lo = out.check("out", elem)?;
            let li = input.check("input", elem)?;
            let plan = plan_stencil(&lo, &li, axes)?;
            let region = |operand, t: &RawTensor<'_>, layout| Region {
                operand,
                buffer: t.ptr,
                elem_size: elem.size(),
                layout,
            };
            check_stencil_aliasing(&region("out", out, &lo), &region("input", input, &li))?;
            Ok(plan)
        }

        /// Launches the stencil on `stream` (the `gpu`'s own when `None`) with the checks
        /// and plan of [`apply`](super::apply).
        ///
        /// # Safety
        /// As for [`raw::apply3`](crate::raw::apply3): both tensors' memory is one live
        /// allocation of this `gpu`'s context each, holding values of the element type and
        /// kept until the queued work completes; `stream` is a live stream of that context.
        pub unsafe fn launch(
            &self,
            gpu: &Gpu,
            stream: Option<CUstream>,
            out: RawTensor<'_>,
            input: RawTensor<'_>,
            axes: &[usize],
        ) -> Result<()> {
            let plan = self.plan(&out, &input, axes)?;
            let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
            let size = self.instance.elem.size() as u64;
            let ptrs = [
                out.ptr + plan.base[0] as u64 * size,
                input.ptr + plan.base[1] as u64 * size,
            ];
            // SAFETY: the caller vouches for the memory; the plan and the aliasing check
            // hold; the op value was built by this family's builder.
            unsafe {
                launch_planned(
                    gpu,
                    &self.instance.names,
                    self.value.as_ptr().cast(),
                    &plan,
                    size as usize,
                    ptrs,
                    stream,
                )
            }
        }

        /// The CPU twin over host addresses, with the checks and plan of
        /// [`launch`](Self::launch).
        ///
        /// # Safety
        /// Both tensors' `ptr` are host addresses; every element their shapes and strides
        /// reach is in one live allocation holding values of the element type, and nothing
        /// else accesses the output's elements during the call.
        pub unsafe fn run_cpu_raw(
            &self,
            out: RawTensor<'_>,
            input: RawTensor<'_>,
            axes: &[usize],
        ) -> Result<()> {
            let plan = self.plan(&out, &input, axes)?;
            let size = self.instance.elem.size();
            let po = SendPtr((out.ptr as *mut u8).wrapping_add(plan.base[0] * size));
            let pi = SendPtr((input.ptr as *mut u8).wrapping_add(plan.base[1] * size));
            let (run, value) = (self.instance.run, &self.value);
            // SAFETY: the caller's contract for the memory; the plan and the aliasing check
            // hold; `run` is this family's body for the op value its builder made.
            unsafe {
                run_planned(&plan, &|n, g, first| {
                    run(value, n, g, po.get(), pi.get().cast_const(), first)
                })
            };
            Ok(())
        }
    }
}

/// Runs a stencil on the GPU and on the CPU twin from the same buffer contents and returns
/// the first element (of the whole output buffer) where they disagree.
pub fn verify<S: StencilKernels<T>, T: crate::compare::Distance>(
    gpu: &Gpu,
    op: S,
    out: (&[T], &Layout),
    input: (&[T], &Layout),
    axes: &[usize],
) -> Result<Option<crate::compare::Mismatch<T>>> {
    crate::compare::with_inputs(
        gpu,
        out,
        [input],
        |on_cpu| apply_cpu(op, (on_cpu, out.1), input, axes),
        |d_out, [d_in]| apply(gpu, op, d_out, d_in, axes),
    )
}
