//! Reductions: planning, checks, launch and the CPU twin, in one place.
//!
//! `reduce(&gpu, Sum, &mut out, &input, &axes)` reduces `input` over `axes` into `out`.
//! The output's shape says whether the reduced axes are kept: the input's shape with each
//! reduced axis set to 1 keeps them (PyTorch's `keepdim=True`), the input's shape without
//! them drops them. Any layout of the input is taken: strided, reversed, permuted,
//! broadcast. The output's element type is the op's: the input's, `i64` for the arg
//! reductions, `Bool` for all/any. `map_reduce(&gpu, MapReduce { reduce, map }, &mut out,
//! (&a, &b), &axes)` reduces `map(a, b)` in one pass, `a` and `b` broadcast to one shape.
//!
//! GPU and CPU twin reduce in one order, a fixed function of the reduction length
//! ([`gpu_kernels::reduce`]), so they agree bit for bit on every layout, every run.
//!
//! ```
//! # use host as strided_apply; // the examples name the root crate, which re-exports this one
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

use crate::alias::{check_aliasing, Region};
use crate::error::{Error, Operand, Result};
use crate::gpu::{Gpu, LaunchShape};
use crate::launch::DIV_ONE;
use crate::layout::Layout;
use crate::tensor::{oom_or, DeviceTensor};
use crate::twin::{region, SendPtr};
use cudarc::driver::sys::CUstream;
use gpu_kernels::apply::OpArg;
use gpu_kernels::reduce::{
    self as body, exact_vec, AccOf, OutOf, Reduce, ReduceGeometry, ReduceKernels, ReduceNames,
    Source, COL_X, COL_Y, EXACT_LANES, EXACT_ROWS, FINAL_BLOCK, KEPT_DIMS, LOOSE_COLS, LOOSE_LANES,
    LOOSE_ROWS, MAX_INPUTS, RED_DIMS, SLOTS, VEC_COLS, VEC_ROWS,
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
    /// Base element of the output and of each input (the layouts' offsets; unused
    /// inputs 0).
    pub base: [usize; 1 + MAX_INPUTS],
    /// How many inputs the source reads.
    pub inputs: usize,
}

/// One host input of the CPU twin: its elements and its layout over them.
pub type HostInput<'a, T> = (&'a [T], &'a Layout);

/// The operand names of a reduction's `k` inputs: `input` alone, else `a`, `b`, `c`.
pub fn input_names(k: usize) -> &'static [Operand] {
    if k == 1 {
        &["input"]
    } else {
        &["a", "b", "c"][..k.min(MAX_INPUTS)]
    }
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

pub(crate) fn fast_div(d: u64) -> Result<FastDiv> {
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

/// A reduction's dimensions after broadcasting and collapsing, for the output and `S - 1`
/// inputs: `kept` with each operand's stride (the output's first), innermost first, and
/// `red` with each input's stride at `1 + k` (the output's entry 0); the reduction length,
/// the output count, and each operand's base element.
pub(crate) struct Dims<const S: usize> {
    pub n: u32,
    pub outputs: u64,
    pub kept: Vec<(u64, [i64; S])>,
    pub red: Vec<(u64, [i64; S])>,
    pub base: [usize; S],
}

/// Checks a reduction of `inputs` (named `names`) over `axes` into `out` and collapses its
/// dimensions: the axes, the output's shape, the inputs' broadcast to one shape, the
/// reduction length (`has_empty`: whether the op has a value for a reduction of nothing),
/// the ranks and every offset within 31 bits. `None` when the output has no elements.
pub(crate) fn plan_dims<const S: usize>(
    out: &Layout,
    inputs: &[&Layout],
    names: &[Operand],
    axes: &[usize],
    has_empty: bool,
) -> Result<Option<Dims<S>>> {
    let k = inputs.len();
    if k == 0 || k >= S {
        return Err(Error::InvalidView {
            operand: "inputs",
            reason: format!("{k} inputs given; a reduction reads 1 to {}", S - 1),
        });
    }
    // One shape for every input: numpy's broadcast.
    let mut shape = inputs[0].shape().to_vec();
    for (i, l) in inputs.iter().enumerate().skip(1) {
        shape =
            crate::layout::broadcast_shapes(&shape, l.shape()).ok_or_else(|| Error::Broadcast {
                operand: names[i],
                shape: l.shape().to_vec(),
                target: shape.clone(),
            })?;
    }
    let inputs: Vec<Layout> = inputs
        .iter()
        .zip(names)
        .map(|(l, &name)| {
            if l.shape() == shape.as_slice() {
                Ok((*l).clone())
            } else {
                l.broadcast_as(&shape, name)
            }
        })
        .collect::<Result<_>>()?;
    let rank = shape.len();
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
        return Err(Error::EmptyReduction { operand: names[0] });
    }
    let n32 = u32::try_from(n)
        .ok()
        .filter(|&n| n <= i32::MAX as u32)
        .ok_or_else(|| too_large(format!("{n} elements per output, more than 2^31 - 1")))?;
    // Strides of the output and every input (unused inputs: 0, which always merge).
    let kept = collapse(kept_axes.iter().zip(&out_axis).map(|(&a, &oa)| {
        let mut s = [0i64; S];
        s[0] = out.strides()[oa] as i64;
        for (i, l) in inputs.iter().enumerate() {
            s[1 + i] = l.strides()[a] as i64;
        }
        (shape[a] as u64, s)
    }));
    let mut red = collapse((0..rank).filter(|a| axes.contains(a)).map(|a| {
        let mut s = [0i64; S];
        for (i, l) in inputs.iter().enumerate() {
            s[1 + i] = l.strides()[a] as i64;
        }
        (shape[a] as u64, s)
    }));
    if n == 0 {
        red.clear();
    }
    if kept.len() > KEPT_DIMS || red.len() > RED_DIMS {
        return Err(Error::RankTooHigh {
            operand: names[0],
            ndim: kept.len().max(red.len()),
            max: KEPT_DIMS.min(RED_DIMS),
        });
    }
    // Offsets from each base element fit in 31 bits (the geometries truncate strides to
    // 32 bits only where this holds).
    for (layout, operand) in
        std::iter::once((out, "out")).chain(inputs.iter().zip(names.iter().copied()))
    {
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
    let mut base = [0usize; S];
    base[0] = out.offset();
    for (i, l) in inputs.iter().enumerate() {
        base[1 + i] = l.offset();
    }
    Ok(Some(Dims {
        n: n32,
        outputs: out.numel() as u64,
        kept,
        red,
        base,
    }))
}

/// The blocks of a launch of `blocks`, or an error past what a grid holds.
pub(crate) fn check_blocks(blocks: u64, outputs: u64, groups: u32) -> Result<()> {
    if blocks > i32::MAX as u64 || outputs * groups as u64 > i32::MAX as u64 {
        return Err(too_large(format!(
            "{outputs} outputs of {groups} groups each, more than 2^31 - 1 blocks"
        )));
    }
    Ok(())
}

/// Plans `out = reduce(inputs over axes)` for elements of `elem_size` bytes: checks the
/// axes, the output's shape and the index range, broadcasts the inputs to one shape (with
/// more than one), collapses the kept and the reduced axes, chooses the kernel (`columns`:
/// whether the source has a column kernel). `None` when the output has no elements.
/// `has_empty`: whether the op has a value for a reduction of nothing.
pub fn plan_reduce(
    out: &Layout,
    inputs: &[&Layout],
    axes: &[usize],
    elem_size: usize,
    has_empty: bool,
    columns: bool,
) -> Result<Option<ReducePlan>> {
    let k = inputs.len();
    let names = input_names(k.clamp(1, MAX_INPUTS));
    let Some(Dims {
        n: n32,
        outputs,
        kept,
        red,
        base,
    }) = plan_dims::<{ 1 + MAX_INPUTS }>(out, inputs, names, axes, has_empty)?
    else {
        return Ok(None);
    };
    // Rows when the reduced elements are unit-stride, else columns along a kept axis of
    // unit stride in the (first) input, moved to `kept[0]` (when slot chunks stay inside
    // the innermost reduced dimension: invariant 6 of `ReduceGeometry`), else rows
    // (strided reads).
    let w = body::chunk(elem_size);
    let mut kept = kept;
    let unit_red = red.first().is_some_and(|d| d.1[1] == 1);
    let unit_kept = kept.iter().position(|d| d.1[1] == 1);
    let chunks_inside = red.len() <= 1 || (red.len() == 2 && red[0].0 % w as u64 == 0);
    let variant = match unit_kept {
        Some(d) if columns && !unit_red && chunks_inside => {
            let dim = kept.remove(d);
            kept.insert(0, dim);
            ReduceVariant::Cols
        }
        _ => ReduceVariant::Rows,
    };
    let groups = body::groups_used(n32, w);
    let one = DIV_ONE;
    let mut g = ReduceGeometry {
        n: n32,
        group_len: body::group_len(n32, w),
        groups,
        outputs: 0,
        col_blocks: 1,
        row_shift: body::row_shift(n32, w),
        flags: 0,
        nkept: kept.len().max(1) as u32,
        nred: red.len().max(1) as u32,
        kept: [one; KEPT_DIMS],
        kept_strides: [[0; KEPT_DIMS]; 1 + MAX_INPUTS],
        red: [one; RED_DIMS],
        red_strides: [[0; RED_DIMS]; MAX_INPUTS],
    };
    for (d, (size, s)) in kept.iter().enumerate() {
        g.kept[d] = fast_div(*size)?;
        for (j, &st) in s.iter().enumerate() {
            g.kept_strides[j][d] = st as i32 as u32;
        }
    }
    for (d, (size, s)) in red.iter().enumerate() {
        g.red[d] = fast_div(*size)?;
        for (j, &st) in s[1..].iter().enumerate() {
            g.red_strides[j][d] = st as i32 as u32;
        }
    }
    let blocks = match variant {
        ReduceVariant::Rows => row_blocks(outputs, g.row_shift) * groups as u64,
        ReduceVariant::Cols => {
            let k0 = kept[0].0;
            g.col_blocks = k0.div_ceil(COL_X as u64) as u32;
            g.col_blocks as u64 * (outputs / k0) * groups as u64
        }
    };
    check_blocks(blocks, outputs, groups)?;
    g.outputs = outputs as u32;
    Ok(Some(ReducePlan {
        geometry: g,
        variant,
        base,
        inputs: k,
    }))
}

/// Refuses an output that maps two outputs to one element or shares memory with an input.
pub(crate) fn check_reduce_aliasing(out: &Region, inputs: &[Region]) -> Result<()> {
    check_aliasing(out, &[])?;
    let Some(o) = out.byte_span()? else {
        return Ok(());
    };
    for input in inputs {
        if let Some(i) = input.byte_span()? {
            if !(o.1 <= i.0 || i.1 <= o.0) {
                return Err(Error::ReduceOverlap {
                    operand: input.operand,
                });
            }
        }
    }
    Ok(())
}

/// `out = op(input over axes)` on the GPU (see the module documentation for the shapes).
/// The output's element type is the op's: the input's, `i64` for
/// [`Argmin`](body::Argmin)/[`Argmax`](body::Argmax), `Bool` for [`All`](body::All)/
/// [`Any`](body::Any).
pub fn reduce<S, T>(
    gpu: &Gpu,
    op: S,
    out: &mut DeviceTensor<OutOf<S, T, 1>>,
    input: &DeviceTensor<T>,
    axes: &[usize],
) -> Result<()>
where
    S: ReduceKernels<T, 1>,
    T: Elem,
    OutOf<S, T, 1>: Elem,
{
    reduce_n(gpu, op, out, [input], axes)
}

/// `out = op.reduce(op.map(a, b) over axes)` on the GPU, in one pass
/// ([`MapReduce`](body::MapReduce)): `a` and `b` broadcast to one shape, which `axes`
/// and `out` refer to.
///
/// ```no_run
/// # mod strided_apply { pub use host::*; pub fn open(o: usize) -> Result<Gpu> { Gpu::new(o) } } // the root crate: `open` also registers its built-in kernels
/// use strided_apply::{reduce, DeviceTensor};
/// use strided_apply::gpu_kernels::{ops::Sub, reduce::{MapReduce, SumSq}};
/// let gpu = strided_apply::open(0)?;
/// let a = DeviceTensor::from_slice(&gpu, &[1.0f32, 2.0, 3.0], &[3])?;
/// let b = DeviceTensor::from_slice(&gpu, &[1.0f32, 0.0, 1.0], &[3])?;
/// let mut out = DeviceTensor::<f32>::zeros(&gpu, &[])?;
/// let sqdiff = MapReduce { reduce: SumSq, map: Sub };
/// reduce::map_reduce(&gpu, sqdiff, &mut out, (&a, &b), &[0])?; // 0² + 2² + 2² = 8
/// assert_eq!(out.to_vec(&gpu)?, [8.0]);
/// # Ok::<(), strided_apply::Error>(())
/// ```
pub fn map_reduce<S, T>(
    gpu: &Gpu,
    op: S,
    out: &mut DeviceTensor<OutOf<S, T, 2>>,
    (a, b): (&DeviceTensor<T>, &DeviceTensor<T>),
    axes: &[usize],
) -> Result<()>
where
    S: ReduceKernels<T, 2>,
    T: Elem,
    OutOf<S, T, 2>: Elem,
{
    reduce_n(gpu, op, out, [a, b], axes)
}

/// [`reduce`] or [`map_reduce`] by the source's input count: `K` inputs as an array
/// (generic code over sources of any count).
pub fn reduce_n<S, T, const K: usize>(
    gpu: &Gpu,
    op: S,
    out: &mut DeviceTensor<OutOf<S, T, K>>,
    inputs: [&DeviceTensor<T>; K],
    axes: &[usize],
) -> Result<()>
where
    S: ReduceKernels<T, K>,
    T: Elem,
    OutOf<S, T, K>: Elem,
{
    let has_empty = op.reduction().empty().is_some();
    let layouts: Vec<&Layout> = inputs.iter().map(|t| t.layout()).collect();
    let Some(plan) = plan_reduce(
        out.layout(),
        &layouts,
        axes,
        T::TYPE.size(),
        has_empty,
        S::COLUMNS,
    )?
    else {
        return Ok(());
    };
    let names = input_names(K);
    let regions = inputs
        .iter()
        .zip(names)
        .map(|(t, &name)| t.region(gpu, name))
        .collect::<Result<Vec<_>>>()?;
    check_reduce_aliasing(&out.region(gpu, "out")?, &regions)?;
    let stream = gpu.stream().cu_stream();
    let acc_size = size_of::<AccOf<S, T, K>>();
    // SAFETY: the Gpu's own stream lives as long as `gpu`.
    let scratch = unsafe { Scratch::new(gpu, &plan, acc_size, stream)? };
    let mut ptrs = [0u64; 1 + MAX_INPUTS];
    ptrs[0] = out.base_addr();
    for (i, t) in inputs.iter().enumerate() {
        ptrs[1 + i] = t.base_addr();
    }
    let op = OpArg::new(op);
    // SAFETY: every layout was checked against its buffer when the views were made;
    // `plan_reduce` proved the geometry's ranges (over the inputs broadcast as it planned
    // them) and `check_reduce_aliasing` kept the output apart from the inputs; the scratch
    // holds `outputs * groups` accumulators of `S`'s; `op` is the `OpArg` of the source
    // whose kernels `S::NAMES` names.
    unsafe {
        launch_planned(
            gpu,
            &S::NAMES,
            (&op as *const OpArg<S>).cast(),
            &plan,
            ptrs,
            scratch.addr(),
            (T::TYPE.size(), acc_size),
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
        // SAFETY: forwarded.
        unsafe { Scratch::for_groups(gpu, g.outputs, g.groups, acc_size, stream) }
    }

    /// Scratch for `groups` accumulators of `acc_size` bytes per output (none for one).
    ///
    /// # Safety
    /// As [`new`](Self::new).
    pub(crate) unsafe fn for_groups(
        gpu: &Gpu,
        outputs: u32,
        groups: u32,
        acc_size: usize,
        stream: CUstream,
    ) -> Result<Scratch> {
        if groups <= 1 {
            return Ok(Scratch { ptr: 0, stream });
        }
        let bytes = outputs as usize * groups as usize * acc_size;
        gpu.context()
            .bind_to_thread()
            .map_err(|source| Error::Driver {
                what: "binding the context",
                source,
            })?;
        // SAFETY: the caller's contract for the stream; uninitialised device memory, of
        // which the group kernel writes every accumulator the final kernel reads
        // (invariant 4 of `ReduceGeometry`).
        let ptr = gpu
            .alloc_retrying(|| unsafe { cudarc::driver::result::malloc_async(stream, bytes) })
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
/// `ptrs` are the device addresses of the output's and each input's elements at
/// `plan.base` (unused inputs 0), in buffers for which every offset of the plan is in
/// bounds, the inputs holding elements of `elem_size` bytes and the output the source's
/// output elements; the output is distinct per output index and apart from the inputs;
/// with more than one group, `scratch` holds `outputs * groups` accumulators of
/// `acc_size` bytes and is not freed before the queued kernels complete; `op` points to
/// the `OpArg` of the source whose kernels `names` names, over `plan.inputs` inputs;
/// `stream` is a live stream of `gpu`'s context.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch_planned(
    gpu: &Gpu,
    names: &ReduceNames,
    op: *const c_void,
    plan: &ReducePlan,
    ptrs: [u64; 1 + MAX_INPUTS],
    scratch: u64,
    (elem_size, acc_size): (usize, usize),
    stream: CUstream,
) -> Result<()> {
    let mut g = plan.geometry;
    let (kernel, shape) = match plan.variant {
        ReduceVariant::Rows => {
            if vec_rows(&g, &ptrs[1..=plan.inputs], elem_size) {
                g.flags |= VEC_ROWS;
            }
            (
                names.rows,
                LaunchShape {
                    grid: body::row_blocks(g.outputs as u64, g.groups, g.n, body::chunk(elem_size))
                        as u32,
                    block: (SLOTS, 1),
                    shared_bytes: SLOTS * acc_size as u32,
                },
            )
        }
        ReduceVariant::Cols => {
            // Threads and columns a thread: the order-free kernel
            // (`gpu_kernels::reduce::exact_cols`), its vectors where they are whole, its
            // element reads otherwise where `loose_cols` chose them; else the slot kernel (`col_vec`
            // columns, vectors where `vec_cols` allows). Shared memory holds one accumulator
            // per thread and column.
            let inputs = &ptrs[1..=plan.inputs];
            let e = exact_vec(elem_size);
            let (block, v) = if names.cols_exact && vec_cols(&g, inputs, elem_size, e) {
                g.flags |= VEC_COLS;
                g.col_blocks = g.kept[0].d.div_ceil(EXACT_LANES * e);
                ((EXACT_LANES, EXACT_ROWS), e)
            } else if names.cols_loose {
                g.col_blocks = g.kept[0].d.div_ceil(LOOSE_LANES * LOOSE_COLS);
                ((LOOSE_LANES, LOOSE_ROWS), LOOSE_COLS)
            } else {
                let v = body::col_vec(elem_size);
                if !names.cols_exact && vec_cols(&g, inputs, elem_size, v) {
                    g.flags |= VEC_COLS;
                }
                ((COL_X / v, COL_Y * v), v)
            };
            (
                names.cols,
                LaunchShape {
                    grid: g.col_blocks * (g.outputs / g.kept[0].d) * g.groups,
                    block,
                    shared_bytes: block.0 * block.1 * v * acc_size as u32,
                },
            )
        }
    };
    let mut args: [*mut c_void; 4 + MAX_INPUTS] = [
        op as *mut c_void,
        &g as *const ReduceGeometry as *mut c_void,
        &ptrs[0] as *const u64 as *mut c_void,
        &scratch as *const u64 as *mut c_void,
        &ptrs[1] as *const u64 as *mut c_void,
        &ptrs[2] as *const u64 as *mut c_void,
        &ptrs[3] as *const u64 as *mut c_void,
    ];
    // SAFETY: the parameter list is (OpArg<S>, ReduceGeometry, *mut Out, *mut Acc, and
    // one *const T per possible input) as `kernels!` declares for every reduction kernel;
    // the shapes are the ones `gpu_kernels::reduce`'s kernels document (VEC_ROWS and
    // VEC_COLS only where `vec_rows` and `vec_cols` proved their invariants; columns only for sources that have them, as
    // `plan_reduce` was told); the caller's contract covers the rest.
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

/// The expression reduction kernel's blocks per group: `SLOTS >> row_shift` outputs each;
/// an upper bound of the library's row kernel's blocks per group
/// ([`body::row_blocks`], which gives a thread several slots).
pub(crate) fn row_blocks(outputs: u64, row_shift: u32) -> u64 {
    outputs.div_ceil((SLOTS >> row_shift) as u64)
}

/// Whether the row kernel may read 16-byte vectors: one reduced dimension of stride 1 and
/// every output's row start 16-byte aligned (each input's base and every kept stride).
fn vec_rows(g: &ReduceGeometry, inputs: &[u64], elem_size: usize) -> bool {
    g.nred == 1
        && inputs.iter().enumerate().all(|(k, &p)| {
            g.red_strides[k][0] == 1
                && p.is_multiple_of(16)
                && (0..g.nkept as usize).all(|d| whole_vectors(g.kept_strides[1 + k][d], elem_size))
        })
}

/// Whether a geometry stride (elements, two's complement) moves by whole 16-byte vectors.
fn whole_vectors(stride: u32, elem_size: usize) -> bool {
    (stride as i32 as i64 * elem_size as i64).rem_euclid(16) == 0
}

/// Whether the column kernel may read each thread's `v` columns (`col_vec`, or
/// `exact_vec` for the order-free kernel) as one 16-byte vector (invariant 7 of
/// `ReduceGeometry`): more than one column per thread, the kept axis a multiple of them
/// and of stride 1 in every input, each input's base 16-byte aligned and every other
/// stride (kept and reduced) a multiple of 16 bytes.
fn vec_cols(g: &ReduceGeometry, inputs: &[u64], elem_size: usize, v: u32) -> bool {
    v > 1
        && g.kept[0].d.is_multiple_of(v)
        && inputs.iter().enumerate().all(|(k, &p)| {
            g.kept_strides[1 + k][0] == 1
                && p.is_multiple_of(16)
                && (1..g.nkept as usize).all(|d| whole_vectors(g.kept_strides[1 + k][d], elem_size))
                && (0..g.nred as usize).all(|d| whole_vectors(g.red_strides[k][d], elem_size))
        })
}

/// The CPU twin of [`reduce`]: the same plan, the same order and the same op code, over
/// host slices.
pub fn reduce_cpu<S, T>(
    op: S,
    out: (&mut [OutOf<S, T, 1>], &Layout),
    input: (&[T], &Layout),
    axes: &[usize],
) -> Result<()>
where
    S: Source<T, 1>,
    T: Elem,
    OutOf<S, T, 1>: Elem,
{
    reduce_n_cpu(op, out, [input], axes)
}

/// The CPU twin of [`map_reduce`].
pub fn map_reduce_cpu<S, T>(
    op: S,
    out: (&mut [OutOf<S, T, 2>], &Layout),
    (a, b): (HostInput<'_, T>, HostInput<'_, T>),
    axes: &[usize],
) -> Result<()>
where
    S: Source<T, 2>,
    T: Elem,
    OutOf<S, T, 2>: Elem,
{
    reduce_n_cpu(op, out, [a, b], axes)
}

/// The CPU twin of [`reduce_n`].
pub fn reduce_n_cpu<S, T, const K: usize>(
    op: S,
    out: (&mut [OutOf<S, T, K>], &Layout),
    inputs: [(&[T], &Layout); K],
    axes: &[usize],
) -> Result<()>
where
    S: Source<T, K>,
    T: Elem,
    OutOf<S, T, K>: Elem,
{
    let names = input_names(K);
    out.1.check_in(out.0.len(), "out")?;
    for (i, &name) in inputs.iter().zip(names) {
        i.1.check_in(i.0.len(), name)?;
    }
    let has_empty = op.reduction().empty().is_some();
    let layouts: Vec<&Layout> = inputs.iter().map(|i| i.1).collect();
    let Some(plan) = plan_reduce(out.1, &layouts, axes, T::TYPE.size(), has_empty, false)? else {
        return Ok(());
    };
    let regions: Vec<Region> = inputs
        .iter()
        .zip(names)
        .map(|(i, &name)| region(name, i.0, i.1))
        .collect();
    check_reduce_aliasing(&region("out", out.0, out.1), &regions)?;
    let po = SendPtr(out.0.as_mut_ptr().wrapping_add(plan.base[0]));
    let pi: [SendPtr<T>; K] = core::array::from_fn(|k| {
        SendPtr(
            inputs[k]
                .0
                .as_ptr()
                .wrapping_add(plan.base[1 + k])
                .cast_mut(),
        )
    });
    let acc = (size_of::<AccOf<S, T, K>>(), align_of::<AccOf<S, T, K>>());
    // SAFETY: `check_in` proved every offset of each layout inside its slice, and the plan
    // keeps those offsets (broadcasting only repeats them); the output is distinct per
    // output and apart from the inputs.
    unsafe {
        run_planned(
            &plan,
            acc,
            &|g, o, grp, acc| {
                let inp = core::array::from_fn(|k| pi[k].get().cast_const());
                match body::group_value(&op, g, inp, o, grp) {
                    Some(a) => {
                        acc.cast::<AccOf<S, T, K>>().write(a);
                        true
                    }
                    None => false,
                }
            },
            &|g, o, accs| {
                let count = if g.n == 0 { 0 } else { g.groups as usize };
                let accs = std::slice::from_raw_parts_mut(accs.cast::<AccOf<S, T, K>>(), count);
                body::write_output(&op.reduction(), g, po.get(), o, accs)
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
/// `acc.0` bytes at `acc` (aligned to `acc.1`) and says whether the group had elements;
/// `write(g, o, accs)` writes output `o` from its `g.groups` accumulators; both are sound
/// for every output and group of the plan.
pub(crate) unsafe fn run_planned(
    plan: &ReducePlan,
    (acc_size, acc_align): (usize, usize),
    group: &(dyn Fn(&ReduceGeometry, u32, u32, *mut u8) -> bool + Sync),
    write: &(dyn Fn(&ReduceGeometry, u32, *mut u8) + Sync),
) {
    assert!(
        acc_size <= 16 && acc_align <= 16 && acc_size.is_multiple_of(acc_align),
        "accumulators of at most 16 bytes, a multiple of their alignment"
    );
    let g = &plan.geometry;
    let (outputs, groups) = (g.outputs as usize, g.groups as usize);
    let mut buf = vec![0u128; (outputs * groups * acc_size).div_ceil(16)];
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

/// Reductions chosen at run time (feature `dispatch`): by id (`"sum"`, `"amax"`,
/// `"argmax"`, `"sqdiff"`, … the first name part of the `kernels!` reduce line) and the
/// inputs' element type.
#[cfg(feature = "dispatch")]
mod dynamic {
    use super::*;
    use crate::operand::{find_one_type, RawTensor};
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
        /// Reduction `op` over inputs of `elem`. The output's element type is the
        /// family's ([`ReduceInstance::out_elem`]: `elem`, `i64` for arg reductions,
        /// `bool` for all/any), its input count [`ReduceInstance::inputs`].
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
            inputs: &[RawTensor<'_>],
            axes: &[usize],
        ) -> Result<Option<ReducePlan>> {
            let inst = self.instance;
            if inputs.len() != inst.inputs {
                return Err(Error::InvalidView {
                    operand: "inputs",
                    reason: format!(
                        "reduction `{}` reads {} input(s), {} given",
                        inst.op,
                        inst.inputs,
                        inputs.len()
                    ),
                });
            }
            let names = input_names(inputs.len());
            let lo = out.check("out", inst.out_elem)?;
            let li = inputs
                .iter()
                .zip(names)
                .map(|(t, &name)| t.check(name, inst.elem))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Layout> = li.iter().collect();
            let plan = plan_reduce(
                &lo,
                &refs,
                axes,
                inst.elem.size(),
                (inst.has_empty)(),
                inst.columns,
            )?;
            let region = |operand, t: &RawTensor<'_>, layout, elem: ElemType| Region {
                operand,
                buffer: t.ptr,
                elem_size: elem.size(),
                layout,
            };
            let regions: Vec<Region> = inputs
                .iter()
                .zip(names)
                .zip(&li)
                .map(|((t, &name), l)| region(name, t, l, inst.elem))
                .collect();
            check_reduce_aliasing(&region("out", out, &lo, inst.out_elem), &regions)?;
            Ok(plan)
        }

        /// Launches the reduction on `stream` (the `gpu`'s own when `None`) with the checks
        /// and plan of [`reduce`](super::reduce); its scratch memory, when it needs any,
        /// is allocated and freed in that stream's order.
        ///
        /// # Safety
        /// As for [`raw::apply3`](crate::raw::apply3): every tensor's memory is one live
        /// allocation of this `gpu`'s context each, holding values of its element type and
        /// kept until the queued work completes; `stream` is a live stream of that context.
        pub unsafe fn launch(
            &self,
            gpu: &Gpu,
            stream: Option<CUstream>,
            out: RawTensor<'_>,
            inputs: &[RawTensor<'_>],
            axes: &[usize],
        ) -> Result<()> {
            let Some(plan) = self.plan(&out, inputs, axes)? else {
                return Ok(());
            };
            let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
            let inst = self.instance;
            let mut ptrs = [0u64; 1 + MAX_INPUTS];
            ptrs[0] = out.ptr + (plan.base[0] * inst.out_elem.size()) as u64;
            for (i, t) in inputs.iter().enumerate() {
                ptrs[1 + i] = t.ptr + (plan.base[1 + i] * inst.elem.size()) as u64;
            }
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
        /// Every tensor's `ptr` is a host address; every element its shape and strides
        /// reach is in one live allocation holding values of its element type, and nothing
        /// else accesses the output's elements during the call.
        pub unsafe fn run_cpu_raw(
            &self,
            out: RawTensor<'_>,
            inputs: &[RawTensor<'_>],
            axes: &[usize],
        ) -> Result<()> {
            let Some(plan) = self.plan(&out, inputs, axes)? else {
                return Ok(());
            };
            let inst = self.instance;
            let po =
                SendPtr((out.ptr as *mut u8).wrapping_add(plan.base[0] * inst.out_elem.size()));
            let pi: Vec<SendPtr<u8>> = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    SendPtr((t.ptr as *mut u8).wrapping_add(plan.base[1 + i] * inst.elem.size()))
                })
                .collect();
            // SAFETY: the caller's contract for the memory; the plan and the aliasing check
            // hold; `group` and `write` are this family's typed functions, given its
            // `inputs` bases.
            unsafe {
                run_planned(
                    &plan,
                    (inst.acc_size, inst.acc_align),
                    &|g, o, grp, acc| {
                        let mut inp = [core::ptr::null::<u8>(); MAX_INPUTS];
                        for (k, p) in pi.iter().enumerate() {
                            inp[k] = p.get().cast_const();
                        }
                        (inst.group)(g, &inp[..pi.len()], o, grp, acc)
                    },
                    &|g, o, accs| (inst.write)(g, po.get(), o, accs),
                )
            };
            Ok(())
        }
    }
}

/// Runs a reduction on the GPU and on the CPU twin from the same buffer contents and
/// returns the first element (of the whole output buffer) where they disagree: exact, the
/// order is the same on both sides.
pub fn verify<S, T>(
    gpu: &Gpu,
    op: S,
    out: (&[OutOf<S, T, 1>], &Layout),
    input: (&[T], &Layout),
    axes: &[usize],
) -> Result<Option<crate::compare::Mismatch<OutOf<S, T, 1>>>>
where
    S: ReduceKernels<T, 1>,
    T: Elem,
    OutOf<S, T, 1>: crate::compare::Distance,
{
    verify_n(gpu, op, out, [input], axes)
}

/// [`verify`] for a map-reduce over two inputs.
pub fn verify_map<S, T>(
    gpu: &Gpu,
    op: S,
    out: (&[OutOf<S, T, 2>], &Layout),
    (a, b): (HostInput<'_, T>, HostInput<'_, T>),
    axes: &[usize],
) -> Result<Option<crate::compare::Mismatch<OutOf<S, T, 2>>>>
where
    S: ReduceKernels<T, 2>,
    T: Elem,
    OutOf<S, T, 2>: crate::compare::Distance,
{
    verify_n(gpu, op, out, [a, b], axes)
}

/// [`verify`] by the source's input count (see [`reduce_n`]).
pub fn verify_n<S, T, const K: usize>(
    gpu: &Gpu,
    op: S,
    out: (&[OutOf<S, T, K>], &Layout),
    inputs: [(&[T], &Layout); K],
    axes: &[usize],
) -> Result<Option<crate::compare::Mismatch<OutOf<S, T, K>>>>
where
    S: ReduceKernels<T, K>,
    T: Elem,
    OutOf<S, T, K>: crate::compare::Distance,
{
    crate::compare::with_inputs(
        gpu,
        out,
        inputs,
        |on_cpu| reduce_n_cpu(op, (on_cpu, out.1), inputs, axes),
        |d_out, d_in| reduce_n(gpu, op, d_out, d_in, axes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The column plan of `sum(dim=0)` over `input` (one input of `size`-byte elements).
    fn cols_plan(input: &Layout, size: usize) -> ReducePlan {
        let out = Layout::contiguous(&[input.shape()[1]]).expect("layout");
        let plan = plan_reduce(&out, &[input], &[0], size, true, true)
            .expect("plan")
            .expect("outputs");
        assert_eq!(plan.variant, ReduceVariant::Cols);
        // Invariant 6: the first input's kept[0] is unit-stride (the order-free kernel's
        // element reads take it as given).
        assert_eq!(plan.geometry.kept_strides[1][0], 1);
        plan
    }

    #[test]
    fn short_rows_share_the_row_kernels_blocks() {
        let c = |s: &[usize]| Layout::contiguous(s).expect("layout");
        let rows = |out: &[usize], input: &[usize], size: usize| {
            let plan = plan_reduce(&c(out), &[&c(input)], &[1], size, true, true)
                .expect("plan")
                .expect("outputs");
            assert_eq!(plan.variant, ReduceVariant::Rows);
            plan.geometry
        };
        // f32 rows of 24: 6 chunks take 8 slots, 32 rows a block; 1000 rows fill 31 blocks
        // and 8 rows of a 32nd.
        let g = rows(&[1000], &[1000, 24], 4);
        assert_eq!((g.row_shift, row_blocks(1000, g.row_shift)), (3, 32));
        // u8 rows of 24: 2 chunks, 128 rows a block. f64 rows of 24: 12 chunks, 16 slots.
        assert_eq!(rows(&[1000], &[1000, 24], 1).row_shift, 1);
        assert_eq!(rows(&[1000], &[1000, 24], 8).row_shift, 4);
        // Rows of one chunk or less: one slot, 256 rows a block.
        let g = rows(&[300], &[300, 3], 4);
        assert_eq!((g.row_shift, row_blocks(300, g.row_shift)), (0, 2));
        // Rows of more than 128 chunks keep a block each.
        let g = rows(&[48], &[48, 1024], 4);
        assert_eq!(
            (g.row_shift, row_blocks(48, g.row_shift)),
            (body::SLOT_BITS, 48)
        );
        assert_eq!(rows(&[48], &[48, 513], 4).row_shift, body::SLOT_BITS);
        assert_eq!(rows(&[48], &[48, 512], 4).row_shift, 7);
        // Several groups: a block per output and group.
        let g = rows(&[3], &[3, (1 << 17) + 5], 4);
        assert_eq!((g.groups, g.row_shift), (2, body::SLOT_BITS));
    }

    #[test]
    fn column_vectors_only_where_every_read_is_an_aligned_16_byte_vector() {
        let c = |s: &[usize]| Layout::contiguous(s).expect("layout");
        // The slot kernel's vectors: `col_vec(size)` columns.
        let slot = |g: &ReduceGeometry, p: &[u64], size| vec_cols(g, p, size, body::col_vec(size));
        let dense = cols_plan(&c(&[64, 96]), 4).geometry;
        assert!(slot(&dense, &[0x1000], 4));
        // 8-, 2- and 1-byte elements: one column per thread, no vectors.
        assert!(!slot(&cols_plan(&c(&[64, 96]), 8).geometry, &[0x1000], 8));
        // Base not 16-byte aligned.
        assert!(!slot(&dense, &[0x1004], 4));
        assert!(!slot(&cols_plan(&c(&[64, 96]), 2).geometry, &[0x1000], 2));
        assert!(!slot(&cols_plan(&c(&[64, 96]), 1).geometry, &[0x1000], 1));
        // Kept axis not a multiple of 4 columns.
        assert!(!slot(&cols_plan(&c(&[64, 70]), 4).geometry, &[0x1000], 4));
        // Rows of 97 elements: the reduced stride breaks the alignment.
        let sliced = c(&[64, 97]).slice(1, None, Some(96), 1).expect("slice");
        assert!(!slot(&cols_plan(&sliced, 4).geometry, &[0x1000], 4));
        // Flipped rows keep it (stride -96 elements, 384 bytes).
        assert!(slot(
            &cols_plan(&c(&[64, 96]).flip(0).expect("flip"), 4).geometry,
            &[0x1000],
            4
        ));
        // A second input broadcast along the kept axis (stride 0) has no vectors.
        let out = c(&[96]);
        let row = c(&[64, 1]).broadcast_to(&[64, 96]).expect("broadcast");
        let two = plan_reduce(&out, &[&c(&[64, 96]), &row], &[0], 4, true, true)
            .expect("plan")
            .expect("outputs");
        assert_eq!(two.variant, ReduceVariant::Cols);
        assert!(!slot(&two.geometry, &[0x1000, 0x2000], 4));
        assert!(slot(&two.geometry, &[0x1000], 4), "the first input alone");
        // The order-free kernel's: one 16-byte vector of `16 / size` columns, for every size.
        let exact = |s: &[usize], size, base| {
            vec_cols(
                &cols_plan(&c(s), size).geometry,
                &[base],
                size,
                exact_vec(size),
            )
        };
        assert!(exact(&[64, 96], 1, 0x1000) && exact(&[64, 96], 2, 0x1000));
        assert!(exact(&[64, 96], 8, 0x1000));
        // 70 columns: not a whole number of 16-column vectors of `u8` (nor 8 of `f16`).
        assert!(!exact(&[64, 70], 1, 0x1000) && !exact(&[64, 70], 2, 0x1000));
        assert!(!exact(&[64, 96], 1, 0x1008));
    }
}
