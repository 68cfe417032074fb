//! Reductions: planning, checks, launch and the CPU twin, in one place.
//!
//! `reduce(&gpu, Sum, &mut out, &input, &axes)` reduces `input` over `axes` into `out`.
//! The output's shape says whether the reduced axes are kept: the input's shape with each
//! reduced axis set to 1 keeps them (PyTorch's `keepdim=True`), the input's shape without
//! them drops them. Any layout of the input is taken: strided, reversed, permuted,
//! broadcast.
//!
//! GPU and CPU twin reduce in one order, a fixed function of the reduction length
//! ([`gpu_kernels::reduce`]), so they agree bit for bit on every layout, every run.
//!
//! ```
//! use strided_apply::{reduce, Layout};
//! use strided_apply::gpu_kernels::reduce::{Amax, Sum};
//! let x: Vec<f32> = (0..6).map(|v| v as f32).collect(); // [[0, 1, 2], [3, 4, 5]]
//! let lx = Layout::contiguous(&[2, 3])?;
//! let mut rows = vec![0.0f32; 2];
//! reduce::reduce_cpu(Sum, (&mut rows, &Layout::contiguous(&[2])?), (&x, &lx), &[1])?;
//! assert_eq!(rows, [3.0, 12.0]);
//! let mut cols = vec![0.0f32; 3]; // keeps the reduced axis: shape [1, 3]
//! reduce::reduce_cpu(Amax, (&mut cols, &Layout::contiguous(&[1, 3])?), (&x, &lx), &[0])?;
//! assert_eq!(cols, [3.0, 4.0, 5.0]);
//! # Ok::<(), strided_apply::Error>(())
//! ```

use crate::api::Region;
use crate::cpu::{region, SendPtr};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, LaunchShape};
use crate::layout::Layout;
use crate::tensor::{oom_or, DeviceTensor};
use cudarc::driver::sys::CUstream;
use gpu_kernels::apply::OpArg;
use gpu_kernels::reduce::{
    self as body, Reduce, ReduceGeometry, ReduceKernels, ReduceNames, COL_X, COL_Y, FINAL_BLOCK,
    KEPT_DIMS, RED_DIMS, SLOTS, VEC_ROWS,
};
use gpu_kernels::{Elem, FastDiv};
use rayon::prelude::*;
use std::ffi::c_void;

/// Which kernel reduces each group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceVariant {
    /// A block per output and group: the reduced elements are unit-stride (read as 16-byte
    /// vectors when aligned), or no kept axis is.
    Rows,
    /// Threads along a kept axis of unit stride in the input (coalesced reads of a
    /// strided reduced axis).
    Cols,
}

/// A checked reduction launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReducePlan {
    /// The kernels' geometry (`flags` still empty: alignment is the launcher's to check).
    pub geometry: ReduceGeometry,
    pub variant: ReduceVariant,
    /// Base element of the output and the input (the layouts' offsets).
    pub base: [usize; 2],
}

fn bad_axes(reason: String) -> Error {
    Error::InvalidView {
        operand: "axes",
        reason,
    }
}

fn too_large(reason: String) -> Error {
    Error::ReduceTooLarge { reason }
}

fn fast_div(d: u64) -> Result<FastDiv> {
    u32::try_from(d)
        .ok()
        .and_then(FastDiv::new)
        .ok_or_else(|| too_large(format!("an axis of {d} elements")))
}

/// Collapses `(size, strides…)` dimensions listed outermost first: drops size-1 ones,
/// merges a dimension into the one outside it when every operand steps over both as over
/// one. Returns them innermost first.
fn collapse<const K: usize>(dims: impl Iterator<Item = (u64, [i64; K])>) -> Vec<(u64, [i64; K])> {
    let mut out: Vec<(u64, [i64; K])> = Vec::new();
    for (n, s) in dims {
        if n == 1 {
            continue;
        }
        match out.last_mut() {
            Some((m, t)) if (0..K).all(|k| t[k] as i128 == s[k] as i128 * n as i128) => {
                *m *= n;
                t.copy_from_slice(&s);
            }
            _ => out.push((n, s)),
        }
    }
    out.reverse();
    out
}

/// Plans `out = reduce(input over axes)` for elements of `elem_size` bytes: checks the
/// axes, the output's shape and the index range, collapses the kept and the reduced axes,
/// chooses the kernel. `None` when the output has no elements. `has_empty`: whether the
/// op has a value for a reduction of nothing.
pub fn plan_reduce(
    out: &Layout,
    input: &Layout,
    axes: &[usize],
    elem_size: usize,
    has_empty: bool,
) -> Result<Option<ReducePlan>> {
    let rank = input.ndim();
    for (i, &a) in axes.iter().enumerate() {
        if a >= rank {
            return Err(bad_axes(format!(
                "axis {a} is out of range for a {rank}-dimensional input"
            )));
        }
        if axes[..i].contains(&a) {
            return Err(bad_axes(format!("axis {a} is named twice")));
        }
    }
    let shape = input.shape();
    let kept_axes: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    let dropped: Vec<usize> = kept_axes.iter().map(|&a| shape[a]).collect();
    let keepdim: Vec<usize> = (0..rank)
        .map(|a| if axes.contains(&a) { 1 } else { shape[a] })
        .collect();
    // Output axis of each kept input axis.
    let out_axis: Vec<usize> = if out.shape() == keepdim.as_slice() {
        kept_axes.clone()
    } else if out.shape() == dropped.as_slice() {
        (0..kept_axes.len()).collect()
    } else {
        return Err(Error::ReducedShape {
            operand: "out",
            found: out.shape().to_vec(),
            dropped,
            keepdim,
        });
    };
    if out.numel() == 0 {
        return Ok(None);
    }
    let n: u64 = axes.iter().map(|&a| shape[a] as u64).product();
    if n == 0 && !has_empty {
        return Err(Error::EmptyReduction { operand: "input" });
    }
    let n32 = u32::try_from(n)
        .ok()
        .filter(|&n| n <= i32::MAX as u32)
        .ok_or_else(|| too_large(format!("{n} elements per output, more than 2^31 - 1")))?;
    let kept = collapse(kept_axes.iter().zip(&out_axis).map(|(&a, &oa)| {
        (
            shape[a] as u64,
            [out.strides()[oa] as i64, input.strides()[a] as i64],
        )
    }));
    let mut red = collapse(
        (0..rank)
            .filter(|a| axes.contains(a))
            .map(|a| (shape[a] as u64, [input.strides()[a] as i64])),
    );
    if n == 0 {
        red.clear();
    }
    if kept.len() > KEPT_DIMS || red.len() > RED_DIMS {
        return Err(Error::RankTooHigh {
            operand: "input",
            ndim: kept.len().max(red.len()),
            max: KEPT_DIMS.min(RED_DIMS),
        });
    }
    // Rows when the reduced elements are unit-stride, else columns along a kept axis of
    // unit stride in the input (when slot chunks stay inside the innermost reduced
    // dimension: invariant 6 of `ReduceGeometry`), else rows (strided reads).
    let w = body::chunk(elem_size);
    let mut kept = kept;
    let unit_red = red.first().is_some_and(|d| d.1[0] == 1);
    let unit_kept = kept.iter().position(|d| d.1[1] == 1);
    let chunks_inside = red.len() <= 1 || (red.len() == 2 && red[0].0 % w as u64 == 0);
    let variant = match unit_kept {
        Some(k) if !unit_red && chunks_inside => {
            let d = kept.remove(k);
            kept.insert(0, d);
            ReduceVariant::Cols
        }
        _ => ReduceVariant::Rows,
    };
    let groups = body::groups_used(n32, w);
    let outputs = out.numel() as u64;
    let mut g = ReduceGeometry {
        n: n32,
        group_len: body::group_len(n32, w),
        groups,
        outputs: 0,
        col_blocks: 1,
        flags: 0,
        nkept: kept.len().max(1) as u32,
        nred: red.len().max(1) as u32,
        kept: [FastDiv::new(1).expect("1 divides"); KEPT_DIMS],
        kept_strides: [[0; KEPT_DIMS]; 2],
        red: [FastDiv::new(1).expect("1 divides"); RED_DIMS],
        red_strides: [0; RED_DIMS],
    };
    for (d, (size, s)) in kept.iter().enumerate() {
        g.kept[d] = fast_div(*size)?;
        g.kept_strides[0][d] = s[0] as i32 as u32;
        g.kept_strides[1][d] = s[1] as i32 as u32;
    }
    for (d, (size, s)) in red.iter().enumerate() {
        g.red[d] = fast_div(*size)?;
        g.red_strides[d] = s[0] as i32 as u32;
    }
    let blocks = match variant {
        ReduceVariant::Rows => outputs * groups as u64,
        ReduceVariant::Cols => {
            let k0 = kept[0].0;
            g.col_blocks = k0.div_ceil(COL_X as u64) as u32;
            g.col_blocks as u64 * (outputs / k0) * groups as u64
        }
    };
    if blocks > i32::MAX as u64 || outputs * groups as u64 > i32::MAX as u64 {
        return Err(too_large(format!(
            "{outputs} outputs of {groups} groups each, more than 2^31 - 1 blocks"
        )));
    }
    g.outputs = outputs as u32;
    // Offsets from each base element fit in 31 bits (strides were truncated above only
    // where this holds).
    for (layout, operand) in [(out, "out"), (input, "input")] {
        if let Some(span) = layout.span(operand)? {
            let off = layout.offset() as i128;
            let (lo, hi) = (span.min as i128 - off, span.max as i128 - off);
            if lo < i32::MIN as i128 || hi > i32::MAX as i128 {
                return Err(too_large(format!(
                    "{operand} reaches offsets {lo}..={hi} from its first element, beyond 31 bits"
                )));
            }
        }
    }
    Ok(Some(ReducePlan {
        geometry: g,
        variant,
        base: [out.offset(), input.offset()],
    }))
}

/// Refuses an output that maps two outputs to one element or shares memory with the input.
fn check_reduce_aliasing(out: &Region, input: &Region) -> Result<()> {
    crate::api::check_aliasing(out, &[])?;
    let (Some(o), Some(i)) = (out.byte_span()?, input.byte_span()?) else {
        return Ok(());
    };
    if o.1 <= i.0 || i.1 <= o.0 {
        Ok(())
    } else {
        Err(Error::ReduceOverlap {
            operand: input.operand,
        })
    }
}

/// `out = op(input over axes)` on the GPU (see the module documentation for the shapes).
pub fn reduce<R: ReduceKernels<T>, T: Elem>(
    gpu: &Gpu,
    op: R,
    out: &mut DeviceTensor<T>,
    input: &DeviceTensor<T>,
    axes: &[usize],
) -> Result<()> {
    let has_empty = op.empty().is_some();
    let Some(plan) = plan_reduce(
        out.layout(),
        input.layout(),
        axes,
        T::TYPE.size(),
        has_empty,
    )?
    else {
        return Ok(());
    };
    check_reduce_aliasing(&out.region(gpu, "out")?, &input.region(gpu, "input")?)?;
    let stream = gpu.stream().cu_stream();
    // SAFETY: the Gpu's own stream lives as long as `gpu`.
    let scratch = unsafe { Scratch::new(gpu, &plan, size_of::<R::Acc>(), stream)? };
    let ptrs = [out.base_addr(), input.base_addr()];
    let op = OpArg::new(op);
    // SAFETY: both layouts were checked against their buffers when the views were made;
    // `plan_reduce` proved the geometry's ranges and `check_reduce_aliasing` kept the
    // output apart from the input; the scratch holds `outputs * groups` accumulators of
    // `R::Acc`; `op` is the `OpArg` of the reduction whose kernels `R::NAMES` names.
    unsafe {
        launch_planned(
            gpu,
            &R::NAMES,
            (&op as *const OpArg<R>).cast(),
            &plan,
            ptrs,
            scratch.addr(),
            (T::TYPE.size(), size_of::<R::Acc>()),
            stream,
        )
    }
}

/// The GPU's per-group accumulators when an output has more than one group: allocated
/// and freed in the order of the launch's stream (`cuMemAllocAsync` / `cuMemFreeAsync`),
/// so the memory outlives the queued kernels on that stream whatever the caller does next,
/// and a graph capture records the allocation with the kernels.
pub(crate) struct Scratch {
    ptr: u64,
    stream: CUstream,
}

impl Scratch {
    /// Scratch for `plan` on `stream` (none for one group).
    ///
    /// # Safety
    /// `stream` is a live stream of `gpu`'s context and outlives the returned value.
    pub(crate) unsafe fn new(
        gpu: &Gpu,
        plan: &ReducePlan,
        acc_size: usize,
        stream: CUstream,
    ) -> Result<Scratch> {
        let g = &plan.geometry;
        if g.groups <= 1 {
            return Ok(Scratch { ptr: 0, stream });
        }
        let bytes = g.outputs as usize * g.groups as usize * acc_size;
        gpu.context()
            .bind_to_thread()
            .map_err(|source| Error::Driver {
                what: "binding the context",
                source,
            })?;
        // SAFETY: the caller's contract for the stream; uninitialised device memory, of
        // which the group kernel writes every accumulator the final kernel reads
        // (invariant 4 of `ReduceGeometry`).
        let ptr = unsafe { cudarc::driver::result::malloc_async(stream, bytes) }
            .map_err(oom_or(bytes, "allocating reduction scratch"))?;
        Ok(Scratch { ptr, stream })
    }

    pub(crate) fn addr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // SAFETY: allocated on this stream by `new`; the free is ordered after the
            // kernels queued on it. A failure leaves the memory to the pool (nothing to
            // report from a destructor).
            let _ = unsafe { cudarc::driver::result::free_async(self.ptr, self.stream) };
        }
    }
}

/// Launches a checked reduction plan: the group kernel, then (more than one group) the
/// final tree.
///
/// # Safety
/// `ptrs` are the device addresses of the output's and the input's elements at
/// `plan.base`, in buffers for which every offset of the plan is in bounds, holding
/// elements of `elem_size` bytes; the output is distinct per output index and apart from
/// the input; with more than one group, `scratch` holds `outputs * groups` accumulators of
/// `acc_size` bytes and is not freed before the queued kernels complete; `op` points to
/// the `OpArg` of the reduction whose kernels `names` names; `stream` is a live stream of
/// `gpu`'s context.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch_planned(
    gpu: &Gpu,
    names: &ReduceNames,
    op: *const c_void,
    plan: &ReducePlan,
    ptrs: [u64; 2],
    scratch: u64,
    (elem_size, acc_size): (usize, usize),
    stream: CUstream,
) -> Result<()> {
    let mut g = plan.geometry;
    let (kernel, shape) = match plan.variant {
        ReduceVariant::Rows => {
            if vec_rows(&g, ptrs[1], elem_size) {
                g.flags |= VEC_ROWS;
            }
            (
                names.rows,
                LaunchShape {
                    grid: g.outputs * g.groups,
                    block: (SLOTS, 1),
                    shared_bytes: SLOTS * acc_size as u32,
                },
            )
        }
        ReduceVariant::Cols => (
            names.cols,
            LaunchShape {
                grid: g.col_blocks * (g.outputs / g.kept[0].d) * g.groups,
                block: (COL_X, COL_Y),
                shared_bytes: COL_X * COL_Y * acc_size as u32,
            },
        ),
    };
    let (out, inp) = (ptrs[0], ptrs[1]);
    let mut args: [*mut c_void; 5] = [
        op as *mut c_void,
        &g as *const ReduceGeometry as *mut c_void,
        &out as *const u64 as *mut c_void,
        &inp as *const u64 as *mut c_void,
        &scratch as *const u64 as *mut c_void,
    ];
    // SAFETY: the parameter list is (OpArg<R>, ReduceGeometry, *mut T, *const T,
    // *mut Acc) as `kernels!` declares for every reduction kernel; the shapes are the ones
    // `gpu_kernels::reduce`'s kernels document (VEC_ROWS only where `vec_rows` proved its
    // invariant); the caller's contract covers the rest.
    unsafe {
        gpu.launch_named(names.module, kernel, shape, stream, &mut args)?;
        if g.groups > 1 {
            let fin = LaunchShape {
                grid: g.outputs,
                block: (FINAL_BLOCK, 1),
                shared_bytes: g.groups * acc_size as u32,
            };
            gpu.launch_named(names.module, names.fin, fin, stream, &mut args)?;
        }
    }
    Ok(())
}

/// Whether the row kernel may read 16-byte vectors: one reduced dimension of stride 1 and
/// every output's row start 16-byte aligned (the input's base and every kept stride).
fn vec_rows(g: &ReduceGeometry, inp: u64, elem_size: usize) -> bool {
    g.nred == 1
        && g.red_strides[0] == 1
        && inp.is_multiple_of(16)
        && (0..g.nkept as usize)
            .all(|d| (g.kept_strides[1][d] as i32 as i64 * elem_size as i64).rem_euclid(16) == 0)
}

/// The CPU twin of [`reduce`]: the same plan, the same order and the same op code, over
/// host slices.
pub fn reduce_cpu<R: Reduce<T>, T: Elem>(
    op: R,
    out: (&mut [T], &Layout),
    input: (&[T], &Layout),
    axes: &[usize],
) -> Result<()> {
    out.1.check_in(out.0.len(), "out")?;
    input.1.check_in(input.0.len(), "input")?;
    let has_empty = op.empty().is_some();
    let Some(plan) = plan_reduce(out.1, input.1, axes, T::TYPE.size(), has_empty)? else {
        return Ok(());
    };
    check_reduce_aliasing(
        &region("out", out.0, out.1),
        &region("input", input.0, input.1),
    )?;
    let po = SendPtr(out.0.as_mut_ptr().wrapping_add(plan.base[0]));
    let pi = SendPtr(input.0.as_ptr().wrapping_add(plan.base[1]).cast_mut());
    // SAFETY: `check_in` proved every offset of both layouts inside their slices and the
    // plan keeps those offsets; the output is distinct per output and apart from the input.
    unsafe {
        run_planned(
            &plan,
            size_of::<R::Acc>(),
            |g, o, grp, acc| match body::group_value(&op, g, pi.get().cast_const(), o, grp) {
                Some(a) => {
                    acc.cast::<R::Acc>().write(a);
                    true
                }
                None => false,
            },
            |g, o, accs| {
                let count = if g.n == 0 { 0 } else { g.groups as usize };
                let accs = std::slice::from_raw_parts_mut(accs.cast::<R::Acc>(), count);
                body::write_output(&op, g, po.get(), o, accs)
            },
        )
    };
    Ok(())
}

/// Runs a plan on the CPU: every (output, group) value in parallel into one buffer, then
/// every output from its groups' values.
///
/// # Safety
/// `group(g, o, grp, acc)` writes group `grp` of output `o` as one accumulator of
/// `acc_size` bytes at `acc` (aligned to its size, at most 8) and says whether the group
/// had elements; `write(g, o, accs)` writes output `o` from its `g.groups` accumulators;
/// both are sound for every output and group of the plan.
pub(crate) unsafe fn run_planned(
    plan: &ReducePlan,
    acc_size: usize,
    group: impl Fn(&ReduceGeometry, u32, u32, *mut u8) -> bool + Sync,
    write: impl Fn(&ReduceGeometry, u32, *mut u8) + Sync,
) {
    assert!(acc_size <= 8, "accumulators of at most 8 bytes");
    let g = &plan.geometry;
    let (outputs, groups) = (g.outputs as usize, g.groups as usize);
    let mut buf = vec![0u64; (outputs * groups * acc_size).div_ceil(8)];
    let p = SendPtr(buf.as_mut_ptr().cast::<u8>());
    // Enough (output, group) items per task to amortise the task.
    let per_task = (1usize << 14).div_ceil(g.group_len.max(1) as usize).max(1);
    (0..outputs * groups)
        .into_par_iter()
        .with_min_len(per_task)
        .for_each(|i| {
            // Items own disjoint accumulators of the buffer.
            group(
                g,
                (i / groups) as u32,
                (i % groups) as u32,
                p.get().wrapping_add(i * acc_size),
            );
        });
    (0..outputs)
        .into_par_iter()
        .with_min_len(per_task)
        .for_each(|o| write(g, o as u32, p.get().wrapping_add(o * groups * acc_size)));
}

#[cfg(feature = "dispatch")]
pub use dynamic::{reduce_instances, DynReduce};

/// Reductions chosen at run time (feature `dispatch`): by id (`"sum"`, `"amax"`, `"mean"`,
/// … the first name part of the `kernels!` reduce line) and element type.
#[cfg(feature = "dispatch")]
mod dynamic {
    use super::*;
    use crate::dispatch::find_one_type;
    use crate::raw::RawTensor;
    use gpu_kernels::dispatch::{ReduceInstance, REDUCTIONS};
    use gpu_kernels::elem::ElemType;

    /// Every instantiated reduction family of every kernel crate linked into the program.
    pub fn reduce_instances() -> impl Iterator<Item = &'static ReduceInstance> {
        REDUCTIONS.iter()
    }

    /// A reduction chosen at run time (a zero-sized op: its kernel parameter is padding).
    #[derive(Clone, Copy, Debug)]
    pub struct DynReduce {
        instance: &'static ReduceInstance,
    }

    impl DynReduce {
        /// Reduction `op` over `elem` (the output's and the input's element type).
        pub fn new(op: &str, elem: ElemType) -> Result<DynReduce> {
            let instance = find_one_type(REDUCTIONS.iter(), op, elem, |r| (r.op, r.elem))?;
            Ok(DynReduce { instance })
        }

        /// The family this reduction launches.
        pub fn instance(&self) -> &'static ReduceInstance {
            self.instance
        }

        /// The checked plan over raw tensors (`None`: an output without elements).
        fn plan(
            &self,
            out: &RawTensor<'_>,
            input: &RawTensor<'_>,
            axes: &[usize],
        ) -> Result<Option<ReducePlan>> {
            let elem = self.instance.elem;
            let lo = out.check("out", elem)?;
            let li = input.check("input", elem)?;
            let plan = plan_reduce(&lo, &li, axes, elem.size(), (self.instance.has_empty)())?;
            let region = |operand, t: &RawTensor<'_>, layout| Region {
                operand,
                buffer: t.ptr,
                elem_size: elem.size(),
                layout,
            };
            check_reduce_aliasing(&region("out", out, &lo), &region("input", input, &li))?;
            Ok(plan)
        }

        /// Launches the reduction on `stream` (the `gpu`'s own when `None`) with the checks
        /// and plan of [`reduce`](super::reduce); its scratch memory, when it needs any,
        /// is allocated and freed in that stream's order.
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
            let Some(plan) = self.plan(&out, &input, axes)? else {
                return Ok(());
            };
            let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
            let inst = self.instance;
            let size = inst.elem.size() as u64;
            let ptrs = [
                out.ptr + plan.base[0] as u64 * size,
                input.ptr + plan.base[1] as u64 * size,
            ];
            // SAFETY: the caller's contract for the stream.
            let scratch = unsafe { Scratch::new(gpu, &plan, inst.acc_size, stream)? };
            // A zero-sized op's kernel parameter: its padding, zero.
            let op = gpu_kernels::apply::OpArg::new(());
            // SAFETY: the caller vouches for the memory; the plan and the aliasing check
            // hold; the scratch is sized for the plan; registered reductions are zero-sized,
            // so `OpArg<()>` has their parameter's layout.
            unsafe {
                launch_planned(
                    gpu,
                    &inst.names,
                    (&op as *const gpu_kernels::apply::OpArg<()>).cast(),
                    &plan,
                    ptrs,
                    scratch.addr(),
                    (inst.elem.size(), inst.acc_size),
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
            let Some(plan) = self.plan(&out, &input, axes)? else {
                return Ok(());
            };
            let size = self.instance.elem.size();
            let po = SendPtr((out.ptr as *mut u8).wrapping_add(plan.base[0] * size));
            let pi = SendPtr((input.ptr as *mut u8).wrapping_add(plan.base[1] * size));
            let inst = self.instance;
            // SAFETY: the caller's contract for the memory; the plan and the aliasing check
            // hold; `group` and `write` are this family's typed functions.
            unsafe {
                run_planned(
                    &plan,
                    inst.acc_size,
                    |g, o, grp, acc| (inst.group)(g, pi.get().cast_const(), o, grp, acc),
                    |g, o, accs| (inst.write)(g, po.get(), o, accs),
                )
            };
            Ok(())
        }
    }
}

/// Runs a reduction on the GPU and on the CPU twin from the same buffer contents and
/// returns the first element (of the whole output buffer) where they disagree: exact, the
/// order is the same on both sides.
pub fn verify<R: ReduceKernels<T>, T: crate::verify::Distance>(
    gpu: &Gpu,
    op: R,
    out: (&[T], &Layout),
    input: (&[T], &Layout),
    axes: &[usize],
) -> Result<Option<crate::verify::Mismatch<T>>> {
    crate::verify::one_input(
        gpu,
        out,
        input,
        |on_cpu| reduce_cpu(op, (on_cpu, out.1), input, axes),
        |d_out, d_in| reduce(gpu, op, d_out, d_in, axes),
    )
}
