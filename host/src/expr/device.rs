//! Tier 0 on the GPU: a compiled expression launched on the interpreter's kernels
//! (`strided_apply_expr::kernel`), with the planner, the aliasing rules and the 32-bit
//! pieces of huge plans that `apply` uses. The program travels by value as the kernels'
//! first parameter; nothing is compiled.

use super::{Compiled, NAMES};
use crate::alias::{check_aliasing, Region};
use crate::error::{Error, Operand, Result};
use crate::gpu::{Gpu, LaunchShape};
use crate::layout::Layout;
use crate::operand::RawTensor;
use crate::plan::{plan, Plan};
use crate::tensor::{DeviceBuffer, DeviceTensor};
use cudarc::driver::sys::CUstream;
use gpu_kernels::elem::{Elem, ElemType};
use gpu_kernels::{FastDiv, Geometry, TileArg, Variant, MAX_DIMS};
use std::ffi::c_void;
use strided_apply_expr::eval::FAST_LOADED;
use strided_apply_expr::ir::NOT_FAST;
use strided_apply_expr::kernel::{self, Pointers, OPERANDS, STAGED_BYTES};
use strided_apply_expr::{value, Program, MAX_INPUTS};

pub use gpu_kernels::dispatch::Scalar;

/// A device tensor of any element type as an expression's input: `(&tensor).into()`.
#[derive(Clone, Copy)]
pub struct DeviceArg<'a> {
    buf: &'a DeviceBuffer,
    layout: &'a Layout,
    elem: ElemType,
}

impl<'a, T: Elem> From<&'a DeviceTensor<T>> for DeviceArg<'a> {
    fn from(t: &'a DeviceTensor<T>) -> Self {
        DeviceArg {
            buf: t.buffer(),
            layout: t.layout(),
            elem: T::TYPE,
        }
    }
}

impl std::fmt::Debug for DeviceArg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArg")
            .field("buffer", &self.buf.addr())
            .field("layout", self.layout)
            .field("elem", &self.elem)
            .finish()
    }
}

impl DeviceArg<'_> {
    /// The tensor as a raw tensor at its first element.
    pub(super) fn raw(&self) -> RawTensor<'_> {
        RawTensor {
            ptr: self.base(),
            elem: self.elem,
            shape: self.layout.shape(),
            strides: self.layout.strides(),
        }
    }

    pub(super) fn region(&self, gpu: &Gpu, operand: Operand) -> Result<Region<'_>> {
        if !self.buf.belongs_to(gpu) {
            return Err(Error::WrongDevice { operand });
        }
        Ok(Region {
            operand,
            buffer: self.buf.addr(),
            elem_size: self.elem.size(),
            layout: self.layout,
        })
    }

    /// Device address of the element at the layout's offset.
    fn base(&self) -> u64 {
        self.buf.addr() + (self.layout.offset() * self.elem.size()) as u64
    }
}

impl Compiled {
    /// Runs the expression on the GPU (tier 0, the interpreter's kernels) on the `gpu`'s
    /// stream: `inputs` in the order of [`inputs`](Self::inputs), each of the element type it
    /// was compiled for, broadcast to `out`'s shape; `out` of the compiled output type. The
    /// same checks as `apply` (device, shapes, aliasing: an input may be the output
    /// element-wise in place); nothing is launched when one fails.
    pub fn run<O: Elem>(
        &self,
        gpu: &Gpu,
        out: &mut DeviceTensor<O>,
        inputs: &[DeviceArg<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        super::tier1::with_tier(self.tier, || self.run_here(gpu, out, inputs, scalars))
    }

    fn run_here<O: Elem>(
        &self,
        gpu: &Gpu,
        out: &mut DeviceTensor<O>,
        inputs: &[DeviceArg<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let p = self.bound(scalars)?;
        self.check_count(inputs.len())?;
        let out = DeviceArg::from(&*out);
        let mut args = [out; MAX_INPUTS + 1];
        args[1..=inputs.len()].copy_from_slice(inputs);
        let args = &args[..=inputs.len()];
        for (k, a) in args.iter().enumerate() {
            let want = if k == 0 {
                self.out
            } else {
                value::elem_of(p.inputs[k - 1])
            };
            if a.elem != want {
                return Err(Error::type_mismatch(NAMES[k], want, a.elem));
            }
        }
        for (k, a) in args.iter().enumerate() {
            a.region(gpu, NAMES[k])?;
        }
        let stream = gpu.stream().cu_stream();
        let mut raw = [args[0].raw(); MAX_INPUTS + 1];
        for (r, a) in raw.iter_mut().zip(args).skip(1) {
            *r = a.raw();
        }
        let raw = &raw[..args.len()];
        // SAFETY (both): every view was checked against its buffer of this gpu when it was
        // made; the buffers live until the work queued on the gpu's stream completes (a
        // tensor's buffer is freed in stream order).
        if self.hoist
            && hoisting_on()
            && invariant_axes(raw[0].shape, &raw[1..])
                .iter()
                .any(|&a| a != 0)
        {
            return unsafe { launch_bound(gpu, stream, &p, true, raw[0], &raw[1..]) };
        }
        // Nothing to hoist: the tensors' own layouts, as the typed `apply` takes them.
        macro_rules! go {
            ($($n:literal),*) => {
                match args.len() {
                    $($n => {
                        let regions: [Region<'_>; $n] = std::array::from_fn(|k| Region {
                            operand: NAMES[k],
                            buffer: args[k].buf.addr(),
                            elem_size: args[k].elem.size(),
                            layout: args[k].layout,
                        });
                        let ptrs: [u64; $n] = std::array::from_fn(|k| args[k].base());
                        // SAFETY: as above; the regions are the views' own.
                        unsafe { launch_checked(gpu, stream, &p, regions, ptrs, Mode::Launch) }
                            .map(drop)
                    })*
                    _ => unreachable!("at most {MAX_INPUTS} inputs (check_count)"),
                }
            };
        }
        go!(1, 2, 3, 4, 5, 6, 7, 8, 9)
    }

    /// [`run`](Self::run) over caller-owned device memory given by address (a framework's
    /// tensors), on `stream` (the `gpu`'s own when `None`), with the raw API's checks.
    ///
    /// # Safety
    /// As for [`raw::apply3`](crate::raw::apply3): every tensor's memory is one live
    /// allocation of this `gpu`'s context holding values of its element type, kept until the
    /// work queued on `stream` completes; `stream` is a live stream of that context.
    pub unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let p = self.bound(scalars)?;
        self.check_count(inputs.len())?;
        let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
        // SAFETY: forwarded contract.
        super::tier1::with_tier(self.tier, || unsafe {
            launch_bound(gpu, stream, &p, self.hoist, out, inputs)
        })
    }

    /// Every check [`launch`](Self::launch) makes of these operands (types, shapes,
    /// bounds, aliasing), launching nothing.
    ///
    /// # Safety
    /// As for [`launch`](Self::launch) (nothing is read or written).
    pub(crate) unsafe fn check_launch(
        &self,
        gpu: &Gpu,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let p = self.bound(scalars)?;
        self.check_count(inputs.len())?;
        let stream = gpu.stream().cu_stream();
        // SAFETY: a check launches nothing.
        unsafe { launch_plain(gpu, stream, &p, out, inputs, Mode::Check).map(drop) }
    }

    /// The same expression with its GPU launches on `tier` (by default the one
    /// `STRIDED_APPLY_EXPR_TIER` picks: [`Tier::Auto`](super::Tier::Auto) unless set).
    /// Tier 1 compiles the program to machine code with the CUDA driver (no toolkit): the
    /// interpreter's bits, at compiled speed; see `docs/expressions.md`.
    pub fn with_tier(mut self, tier: super::Tier) -> Self {
        self.tier = Some(tier);
        self
    }

    /// The same expression with broadcast-invariant hoisting on or off for its GPU launches
    /// (on by default; `STRIDED_APPLY_EXPR_HOIST=0` turns it off for every expression). A
    /// subexpression whose inputs are all broadcast along some output axes (`cos(a)` of a
    /// row `a`) is computed once per distinct index into a temporary of its math type,
    /// allocated and freed in the stream's order, when it holds an expensive op (a division
    /// or a transcendental function) and the temporary has at most half the output's
    /// elements. The bits are those of the unhoisted program.
    pub fn with_hoisting(mut self, on: bool) -> Self {
        self.hoist = on;
        self
    }
}

/// `STRIDED_APPLY_EXPR_HOIST=0` turns broadcast-invariant hoisting off (read once): for
/// comparisons, and a test that both forms give the same bits.
fn hoisting_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("STRIDED_APPLY_EXPR_HOIST").map_or(true, |v| v != "0"))
}

/// The output axes along which each input does not vary once broadcast to `out` (size 1,
/// stride 0 or a missing leading axis); bit `d` is axis `d`, outermost 0. No allocation:
/// every call of a kept expression computes it.
fn invariant_axes(out: &[usize], inputs: &[RawTensor<'_>]) -> [u64; MAX_INPUTS] {
    let mut axes = [0u64; MAX_INPUTS];
    for (a, t) in axes.iter_mut().zip(inputs) {
        let lead = out.len().saturating_sub(t.shape.len());
        *a = (0..out.len().min(64)).fold(0u64, |m, d| {
            let fixed = d < lead || {
                let j = d - lead;
                t.shape.get(j).is_none_or(|&n| n == 1) || t.strides.get(j) == Some(&0)
            };
            if fixed || out[d] == 1 {
                m | 1 << d
            } else {
                m
            }
        });
    }
    axes
}

/// Checks, hoists what is worth it ([`hoist`](super::hoist::hoist)) and launches a bound
/// program: nothing runs unless every check of the whole expression passes.
///
/// # Safety
/// As [`Compiled::launch`], with `stream` a live stream of the gpu's context.
unsafe fn launch_bound(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    hoist: bool,
    out: RawTensor<'_>,
    inputs: &[RawTensor<'_>],
) -> Result<()> {
    let numel: usize = out.shape.iter().product();
    // Only where some input is broadcast along some axis (a dense call allocates nothing).
    let invariant = invariant_axes(out.shape, inputs);
    let any = invariant.iter().any(|&a| a != 0);
    if !(hoist && any && hoisting_on() && numel > 1 && gpu.context().has_async_alloc()) {
        // SAFETY: forwarded.
        return unsafe { launch_plain(gpu, stream, p, out, inputs, Mode::Launch).map(drop) };
    }
    let invariant = &invariant[..inputs.len().min(MAX_INPUTS)];
    let Some(h) = super::hoist::hoist(p, invariant, out.shape, MAX_INPUTS) else {
        // SAFETY: forwarded.
        return unsafe { launch_plain(gpu, stream, p, out, inputs, Mode::Launch).map(drop) };
    };
    // Every check of the unhoisted program first: an error launches nothing.
    // SAFETY: a check launches nothing.
    unsafe { launch_plain(gpu, stream, p, out, inputs, Mode::Check)? };
    // A fast program stays on the fast kernels: a main program of more inputs than they
    // load runs fast on a wide kernel only; where there is none for it, fewer parts are
    // hoisted (the main program reading at most `FAST_LOADED` inputs), and where that
    // fails too the unhoisted program is the faster. (A general program is hoisted either
    // way.)
    let wide = h.program.n_inputs as usize > FAST_LOADED;
    // SAFETY: forwarded.
    if !(kernel::is_fast(p) && wide && kernel::wide_name(&h.program).is_none())
        && unsafe { launch_hoisted(gpu, stream, p, &h, out, inputs)? }
    {
        return Ok(());
    }
    let fewer = super::hoist::hoist(p, invariant, out.shape, FAST_LOADED);
    let fewer =
        fewer.filter(|f| wide && kernel::is_fast(p) && f.program.n_inputs as usize <= FAST_LOADED);
    if let Some(h) = fewer {
        // SAFETY: forwarded.
        if unsafe { launch_hoisted(gpu, stream, p, &h, out, inputs)? } {
            return Ok(());
        }
    }
    // SAFETY: forwarded.
    unsafe { launch_plain(gpu, stream, p, out, inputs, Mode::Launch).map(drop) }
}

/// Launches the hoisted form `h` of `p`: each part into a temporary of this call, then the
/// main program. Where `p` is a fast program and `h`'s main program would not run on a
/// fast kernel, nothing is launched: `false`.
///
/// # Safety
/// As [`launch_bound`], with the unhoisted program's checks passed on these operands.
unsafe fn launch_hoisted(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    h: &super::hoist::Hoisted,
    out: RawTensor<'_>,
    inputs: &[RawTensor<'_>],
) -> Result<bool> {
    let mut temps = Temps::new(gpu, stream);
    let mut shapes: Vec<(Vec<usize>, Vec<isize>)> = Vec::new();
    let mut ptrs = Vec::new();
    for part in &h.parts {
        let shape: Vec<usize> = (0..out.shape.len())
            .map(|d| {
                if part.axes >> d & 1 != 0 {
                    1
                } else {
                    out.shape[d]
                }
            })
            .collect();
        // A part's shape is the output's with some axes 1: its strides fit when the
        // output's element count does (checked by the caller).
        let strides = crate::layout::contiguous_strides(&shape).unwrap_or_default();
        let bytes = shape.iter().product::<usize>() * part.elem.size();
        ptrs.push(temps.alloc(bytes.max(1))?);
        shapes.push((shape, strides));
    }
    let mut main: Vec<RawTensor<'_>> = h.inputs.iter().map(|&k| inputs[k]).collect();
    for (j, part) in h.parts.iter().enumerate() {
        main.push(RawTensor {
            ptr: ptrs[j],
            elem: part.elem,
            shape: &shapes[j].0,
            strides: &shapes[j].1,
        });
    }
    // SAFETY: a probe launches nothing.
    if kernel::is_fast(p)
        && !unsafe { launch_plain(gpu, stream, &h.program, out, &main, Mode::Probe)? }
    {
        return Ok(false);
    }
    for (j, part) in h.parts.iter().enumerate() {
        // Each input of the part as a view of the temporary's shape: broadcast to the
        // output, then index 0 along the axes the part does not vary on.
        let views: Vec<(Vec<usize>, Vec<isize>)> = part
            .inputs
            .iter()
            .map(|&k| {
                let t = inputs[k];
                let lead = out.shape.len() - t.shape.len().min(out.shape.len());
                (0..out.shape.len())
                    .map(|d| {
                        if part.axes >> d & 1 != 0 {
                            return (1, 0);
                        }
                        match d.checked_sub(lead) {
                            Some(i) if t.shape[i] != 1 => (t.shape[i], t.strides[i]),
                            _ => (out.shape[d], 0),
                        }
                    })
                    .unzip()
            })
            .collect();
        let ins: Vec<RawTensor<'_>> = part
            .inputs
            .iter()
            .zip(&views)
            .map(|(&k, (shape, strides))| RawTensor {
                ptr: inputs[k].ptr,
                elem: inputs[k].elem,
                shape,
                strides,
            })
            .collect();
        let temp = RawTensor {
            ptr: ptrs[j],
            elem: part.elem,
            shape: &shapes[j].0,
            strides: &shapes[j].1,
        };
        // SAFETY: the inputs' views reach a subset of what they reach in the output's
        // broadcast (index 0 of axes they do not vary along); the temporary is this call's.
        unsafe { launch_plain(gpu, stream, &part.program, temp, &ins, Mode::Launch)? };
    }
    // SAFETY: the original operands (checked above) and the temporaries, written above on
    // the same stream.
    unsafe { launch_plain(gpu, stream, &h.program, out, &main, Mode::Launch)? };
    Ok(true)
}

/// Temporaries of one call, allocated and freed in the order of `stream`.
pub(crate) struct Temps {
    stream: CUstream,
    ptrs: Vec<u64>,
}

impl Temps {
    pub(crate) fn new(gpu: &Gpu, stream: CUstream) -> Temps {
        // Allocations below need the context current on this thread.
        let _ = gpu.context().bind_to_thread();
        Temps {
            stream,
            ptrs: Vec::new(),
        }
    }

    pub(crate) fn alloc(&mut self, bytes: usize) -> Result<u64> {
        // SAFETY: a stream-ordered allocation on a live stream of the current context.
        let p = unsafe { cudarc::driver::result::malloc_async(self.stream, bytes) }
            .map_err(|_| Error::OutOfMemory { bytes })?;
        self.ptrs.push(p);
        Ok(p)
    }
}

impl Drop for Temps {
    fn drop(&mut self) {
        for &p in &self.ptrs {
            // SAFETY: allocated on this stream by `alloc`; freed after the work queued so far.
            let _ = unsafe { cudarc::driver::result::free_async(p, self.stream) };
        }
    }
}

/// What [`launch_plain`] does once its checks pass.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Nothing more.
    Check,
    /// Nothing more; it answers whether the launch would run on a fast path's kernel.
    Probe,
    /// Launches.
    Launch,
}

/// Checks a bound program's operands (types, layouts, the plan, the aliasing rules) and,
/// in [`Mode::Launch`], launches it; whether it runs (or would run) on a fast path's
/// kernel ([`on_fast_kernel`]).
///
/// # Safety
/// As [`Compiled::launch`], with `stream` a live stream of the gpu's context.
unsafe fn launch_plain(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    out: RawTensor<'_>,
    inputs: &[RawTensor<'_>],
    mode: Mode,
) -> Result<bool> {
    let mut t = [out; MAX_INPUTS + 1];
    t[1..=inputs.len()].copy_from_slice(inputs);
    let t = &t[..=inputs.len()];
    macro_rules! go {
        ($($n:literal),*) => {
            match t.len() {
                $($n => {
                    let t: [RawTensor<'_>; $n] = std::array::from_fn(|k| t[k]);
                    let names: [Operand; $n] = std::array::from_fn(|k| NAMES[k]);
                    let types: [ElemType; $n] = std::array::from_fn(|k| {
                        value::elem_of(if k == 0 { p.out } else { p.inputs[k - 1] })
                    });
                    let layouts = crate::operand::checked_layouts(&types, &t, names)?;
                    let regions = crate::operand::raw_regions(&types, &t, &layouts, names);
                    // SAFETY: forwarded; the layouts are the raw tensors' (offset 0 at
                    // each pointer), checked against their types.
                    unsafe { launch_checked(gpu, stream, p, regions, t.map(|t| t.ptr), mode) }
                })*
                _ => unreachable!("at most {MAX_INPUTS} inputs (check_count)"),
            }
        };
    }
    go!(1, 2, 3, 4, 5, 6, 7, 8, 9)
}

/// Plans checked operands, checks the aliasing rules and, in [`Mode::Launch`], launches:
/// whether it runs (or would run) on a fast path's kernel ([`on_fast_kernel`]).
/// `regions[k]` is operand `k`'s view (output first) of `p`'s element type for it, and
/// `ptrs[k]` the device address of its element at the layout's offset.
///
/// # Safety
/// As [`Compiled::launch`], with `stream` a live stream of the gpu's context, for the memory
/// the regions describe.
unsafe fn launch_checked<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    regions: [Region<'_>; N],
    ptrs: [u64; N],
    mode: Mode,
) -> Result<bool> {
    let names: [Operand; N] = std::array::from_fn(|k| NAMES[k]);
    let plan: Plan<N> = plan(regions.each_ref().map(|r| r.layout), names)?;
    check_aliasing(&regions[0], &regions[1..])?;
    let sizes = regions.each_ref().map(|r| r.elem_size);
    let fast = on_fast_kernel(p, &plan, &ptrs, &sizes);
    if mode != Mode::Launch {
        return Ok(fast);
    }
    // SAFETY: the caller vouches for the memory and the stream; the checks above prove the
    // aliasing rules and the offsets.
    unsafe { launch_program(gpu, stream, p, &plan, ptrs, sizes)? };
    Ok(fast)
}

/// Whether [`launch_program`] runs `p` over `plan` on a fast path's kernel: every fast
/// program does, but one of more than [`FAST_LOADED`] inputs only on a wide kernel
/// ([`wide_geometry`]).
fn on_fast_kernel<const N: usize>(
    p: &Program,
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
) -> bool {
    if !kernel::is_fast(p) {
        return false;
    }
    if p.n_inputs as usize <= FAST_LOADED {
        return true;
    }
    let plan = &*plan.strided();
    plan.variant != Variant::Dn64 && wide_geometry(p, plan, ptrs, sizes).is_some()
}

/// The wide kernel of a fast program of more than [`FAST_LOADED`] inputs over a 32-bit
/// plan, and its geometry (`kernel::WIDE_NAMES`: vectorised kernels) where the vectorised
/// contract holds; `None` otherwise (the general interpreter runs it).
fn wide_geometry<const N: usize>(
    p: &Program,
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
) -> Option<(&'static str, Geometry<u32, 2, OPERANDS>)> {
    let name = kernel::wide_name(p)?;
    let lanes = kernel::vector_lanes(p)?;
    vector_geometry(plan, ptrs, sizes, lanes).map(|g| (name, g))
}

/// The one-op kernel of `p` (`kernel::ONE_NAMES`) over a 32-bit `plan`, its lanes and
/// geometry, where `p` is a one-op program with a kernel for its widest operand and the
/// vectorised contract holds for those lanes.
fn one_kernel<const N: usize>(
    p: &Program,
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
) -> Option<(&'static str, usize, Geometry<u32, 2, OPERANDS>)> {
    let (name, lanes) = kernel::one_kernel(p)?;
    vector_geometry_of(plan, ptrs, sizes, lanes).map(|g| (name, lanes, g))
}

/// A one-op kernel's launch: one vector of `lanes` elements per thread, no staged program.
///
/// # Safety
/// As [`one`], for a one-op kernel whose contract `one_kernel` checked.
#[allow(clippy::too_many_arguments)]
unsafe fn one_op<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    name: &'static str,
    numel: u64,
    lanes: usize,
    g: &Geometry<u32, 2, OPERANDS>,
    ptrs: [u64; N],
) -> Result<()> {
    let shape = gpu.shape_per_thread(numel.div_ceil(lanes as u64));
    // SAFETY: forwarded; the one-op kernels take the parameter list of `one`.
    unsafe { launch(gpu, stream, p, name, numel, g, ptrs, shape) }
}

/// The vectorised kernel that runs `p` over a 32-bit `plan` and its geometry, where one
/// does and the vectorised contract holds for its lanes: the cheap kernel of a cheap
/// program (`kernel::CHEAP_NAMES`), the wide kernel of a fast program of more than
/// [`FAST_LOADED`] inputs, else the fast path's vectorised kernel.
fn vector_kernel<const N: usize>(
    p: &Program,
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
) -> Option<(&'static str, Geometry<u32, 2, OPERANDS>)> {
    if let Some((name, lanes)) = kernel::cheap_kernel(p) {
        if let Some(g) = vector_geometry(plan, ptrs, sizes, lanes) {
            return Some((name, g));
        }
    }
    if kernel::is_fast(p) && p.n_inputs as usize > FAST_LOADED {
        return wide_geometry(p, plan, ptrs, sizes);
    }
    let lanes = kernel::vector_lanes(p)?;
    vector_geometry(plan, ptrs, sizes, lanes).map(|g| (kernel::name(kernel::CONTIG, p), g))
}

/// Launches a bound program over a plan: the contiguous kernel for a dense plan of fewer
/// than 2^31 elements, else the plan's collapsed variant, in 32-bit pieces beyond that.
///
/// # Safety
/// `ptrs[k]` is the device address of operand `k`'s element at `plan.base[k]` in a buffer
/// of `sizes[k]`-byte elements of the program's type for that operand, in which the planner
/// proved every offset of `plan`; the aliasing rules hold; `p` is a checked program.
pub(crate) unsafe fn launch_program<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    plan: &Plan<N>,
    ptrs: [u64; N],
    sizes: [usize; N],
) -> Result<()> {
    const { assert!(N <= OPERANDS) };
    if plan.numel == 0 {
        return Ok(());
    }
    // Tier 1 where it has (or starts) a compiled kernel for the program and layout; a
    // compile it starts begins when `later` drops, after the interpreter's launch below.
    let mut later = super::tier1::Deferred::default();
    if plan.variant != Variant::Dn64 && plan.numel <= i32::MAX as u64 {
        // SAFETY: forwarded.
        if unsafe { super::tier1::launch(gpu, stream, p, plan, ptrs, sizes, &mut later)? } {
            return Ok(());
        }
    }
    // The general interpreter's contiguous kernel; the fast paths' vectorised kernel takes
    // contiguous plans as one dimension (`scalar`).
    let general = !kernel::is_fast(p);
    if general && plan.variant == Variant::Contig && plan.numel <= i32::MAX as u64 {
        let g = Geometry::<u32, 1, OPERANDS>::empty();
        let name = kernel::name(kernel::CONTIG, p);
        // SAFETY: forwarded; every operand's offset is the linear index.
        return unsafe { one(gpu, stream, p, name, plan.numel, &g, ptrs) };
    }
    // A dense plan goes to the vectorised kernels as it is where their contract holds
    // (`vector_geometry`), else as one strided dimension.
    if plan.variant == Variant::Contig {
        if let Some((name, lanes, g)) = one_kernel(p, plan, &ptrs, &sizes) {
            // SAFETY: forwarded; `one_kernel` checked the vectorised contract for its lanes.
            return unsafe { one_op(gpu, stream, p, name, plan.numel, lanes, &g, ptrs) };
        }
        if let Some((name, g)) = vector_kernel(p, plan, &ptrs, &sizes) {
            // SAFETY: forwarded; `vector_kernel` checked the vectorised contract for the
            // kernel's lanes, and the geometry is the plan's.
            return unsafe { one(gpu, stream, p, name, plan.numel, &g, ptrs) };
        }
    }
    let plan = &*plan.strided();
    if plan.variant != Variant::Dn64 {
        // SAFETY: forwarded.
        return unsafe { scalar(gpu, stream, p, plan, ptrs, sizes) };
    }
    // 32-bit launches over pieces (each a subset of the plan's indices, so the bounds and
    // aliasing proofs cover it; `split32` gives no `Dn64` piece).
    for (piece, off) in plan.split32() {
        let mut q = ptrs;
        for k in 0..N {
            q[k] = ptrs[k].wrapping_add_signed(off[k] * sizes[k] as i64);
        }
        // SAFETY (both): as above, for the piece's part of every operand.
        if unsafe { super::tier1::launch(gpu, stream, p, &piece, q, sizes, &mut later)? } {
            continue;
        }
        unsafe { scalar(gpu, stream, p, &piece, q, sizes)? };
    }
    Ok(())
}

/// The plan's geometry with every operand slot the kernels have (unused ones zero).
fn padded<const D: usize, const N: usize>(plan: &Plan<N>) -> Geometry<u32, D, OPERANDS> {
    let g = plan.geometry::<u32, D>();
    let mut out = Geometry::<u32, D, OPERANDS>::empty();
    out.sizes = g.sizes;
    out.ndim = g.ndim;
    out.strides[..N].copy_from_slice(&g.strides);
    out
}

/// The vectorised kernels' geometry for a 32-bit plan of one or two dimensions, if the plan
/// and the addresses meet their contract (`kernel::CONTIG`'s documentation): `lanes`
/// elements along dimension 0 per vector, the output and every input read as vectors (unit
/// stride, aligned) or one element per vector (stride 0).
pub(crate) fn vector_geometry<const N: usize>(
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
    lanes: usize,
) -> Option<Geometry<u32, 2, OPERANDS>> {
    // Two lanes (64-bit math) measured slower than the element-wise kernels (H100, f64:
    // `a + b` dense 3 %, the seed expression dense 4 %, broadcast 1.3 %): not taken.
    if lanes < 4 {
        return None;
    }
    vector_geometry_of(plan, ptrs, sizes, lanes)
}

/// [`vector_geometry`] for any lanes (the one-op kernels take two lanes of 8-byte
/// elements: one 16-byte vector, as a specialised kernel reads).
fn vector_geometry_of<const N: usize>(
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
    lanes: usize,
) -> Option<Geometry<u32, 2, OPERANDS>> {
    // A dense plan as one dimension of unit strides (no flat copy of the plan per call).
    if plan.variant == Variant::Contig {
        let aligned = (0..N).all(|k| ptrs[k].is_multiple_of((lanes * sizes[k]) as u64));
        if !aligned || plan.numel > i32::MAX as u64 {
            return None;
        }
        let mut g = Geometry::<u32, 2, OPERANDS>::empty();
        g.sizes = [plan.numel as u32, 1];
        for s in g.strides.iter_mut().take(N) {
            *s = [1, 0];
        }
        g.ndim = 2;
        return Some(g);
    }
    if !matches!(plan.variant, Variant::D1 | Variant::D2) || !(1..=2).contains(&plan.ndim) {
        return None;
    }
    let rows = if plan.ndim == 2 { plan.sizes[1] } else { 1 };
    if rows > 1 && !plan.sizes[0].is_multiple_of(lanes as u64) {
        return None;
    }
    let fits = (0..N).all(|k| match plan.strides[k][0] {
        0 => k > 0,
        1 => {
            ptrs[k].is_multiple_of((lanes * sizes[k]) as u64)
                && (rows == 1 || plan.strides[k][1] % lanes as i64 == 0)
        }
        _ => false,
    });
    if !fits {
        return None;
    }
    let mut g = padded::<2, N>(plan);
    g.ndim = 2;
    if plan.ndim == 1 {
        g.sizes[1] = 1;
        for s in &mut g.strides {
            s[1] = 0;
        }
    }
    Some(g)
}

/// A 32-bit plan on the vectorised kernel where its contract holds, else on its collapsed
/// variant's kernel.
unsafe fn scalar<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    plan: &Plan<N>,
    ptrs: [u64; N],
    sizes: [usize; N],
) -> Result<()> {
    let wide = kernel::is_fast(p) && p.n_inputs as usize > FAST_LOADED;
    if let Some((name, lanes, g)) = one_kernel(p, plan, &ptrs, &sizes) {
        // SAFETY: forwarded; `one_kernel` checked the vectorised contract for its lanes.
        return unsafe { one_op(gpu, stream, p, name, plan.numel, lanes, &g, ptrs) };
    }
    if let Some((name, g)) = vector_kernel(p, plan, &ptrs, &sizes) {
        // SAFETY: forwarded; `vector_kernel` checked the vectorised contract for the
        // kernel's lanes, and the geometry is the plan's.
        return unsafe { one(gpu, stream, p, name, plan.numel, &g, ptrs) };
    }
    // Off the wide kernels, a fast program of more inputs than the fast kernels load runs
    // on the general interpreter (`kernel::NAMES`).
    let general;
    let p = if wide {
        general = Program {
            fast: NOT_FAST,
            ..*p
        };
        &general
    } else {
        p
    };
    if let Some(t) = tiled_geometry(p, plan) {
        // SAFETY: forwarded; the geometry is the plan's with its axes reordered, and
        // `tiled_geometry` counted its tiles.
        return unsafe { tiled(gpu, stream, p, &t, ptrs) };
    }
    // SAFETY (each arm): forwarded; the geometry is the plan's, which fits 32 bits.
    unsafe {
        // A program with extended ops has only the any-rank kernel past the contiguous one
        // (`kernel::EXT_NAMES`): every strided plan takes its geometry.
        let ext = !kernel::is_fast(p) && kernel::is_ext(p);
        match plan.variant {
            _ if ext => one(
                gpu,
                stream,
                p,
                kernel::name(kernel::DN, p),
                plan.numel,
                &padded::<MAX_DIMS, N>(plan),
                ptrs,
            ),
            Variant::D2 => one(
                gpu,
                stream,
                p,
                kernel::name(kernel::D2, p),
                plan.numel,
                &padded::<2, N>(plan),
                ptrs,
            ),
            Variant::D3 => one(
                gpu,
                stream,
                p,
                kernel::name(kernel::D3, p),
                plan.numel,
                &padded::<3, N>(plan),
                ptrs,
            ),
            Variant::Dn | Variant::Dn64 if plan.ndim <= kernel::D6_DIMS => one(
                gpu,
                stream,
                p,
                kernel::name(kernel::D6, p),
                plan.numel,
                &padded::<{ kernel::D6_DIMS }, N>(plan),
                ptrs,
            ),
            Variant::Dn | Variant::Dn64 => one(
                gpu,
                stream,
                p,
                kernel::name(kernel::DN, p),
                plan.numel,
                &padded::<MAX_DIMS, N>(plan),
                ptrs,
            ),
            // `Contig` is flattened and `Vec`/`Tiled` are never planned here.
            Variant::D1 | Variant::Contig | Variant::Vec | Variant::Tiled => one(
                gpu,
                stream,
                p,
                kernel::name(kernel::D1, p),
                plan.numel,
                &padded::<1, N>(plan),
                ptrs,
            ),
        }
    }
}

/// A launch of a tiled kernel ([`tiled_geometry`]).
pub(crate) struct Tiled {
    pub(crate) name: &'static str,
    /// Elements per thread and dispatch: the kernel's blocks are `32 × TILE / lanes`.
    pub(crate) lanes: usize,
    /// Its dynamic shared memory.
    pub(crate) shared: u32,
    pub(crate) arg: TileArg,
    /// The plan's axes `[0, j, batch…]`, every operand slot (unused axes of size 1).
    pub(crate) g: Geometry<u32, 5, OPERANDS>,
    pub(crate) tiles: u32,
    /// One block per tile (the tiled one-op kernel, as the library's tiled kernels:
    /// measured 4 % faster than persistent blocks for `a + bᵀ`), else at most the
    /// grid-stride cap of blocks, each taking tiles `k, k + grid, …`.
    pub(crate) block_per_tile: bool,
}

/// The tiled kernel's launch of a 32-bit plan, when `p` has a fast path and the plan stages
/// an input (`launch::tile_axes`: an input whose unit-stride axis is not the output's).
pub(crate) fn tiled_geometry<const N: usize>(p: &Program, plan: &Plan<N>) -> Option<Tiled> {
    // A one-op program of one element type: the tiled one-op kernel, same layout.
    let one = kernel::one_tiled_kernel(p);
    let (name, lanes) = match one {
        Some(kernel) => kernel,
        None => (kernel::tiled_name(p)?, kernel::tile_lanes(p)?),
    };
    let shared = kernel::tile_shared_bytes(p)?;
    let (g, staged) = crate::launch::tile_axes(plan)?;
    let mut out = Geometry::<u32, 5, OPERANDS>::empty();
    out.ndim = g.ndim;
    for d in 0..5 {
        out.sizes[d] = if d < g.ndim as usize { g.sizes[d] } else { 1 };
    }
    out.strides[..N].copy_from_slice(&g.strides);
    // Every divisor is at least 1 and at most the element count (below 2^31 in a 32-bit
    // plan); `FastDiv::new` checks both.
    let t = TileArg {
        staged,
        tiles_x: FastDiv::new(out.sizes[0].div_ceil(kernel::TILE))?,
        tiles_y: FastDiv::new(out.sizes[1].div_ceil(kernel::TILE))?,
        batch: [FastDiv::new(out.sizes[2])?, FastDiv::new(out.sizes[3])?],
    };
    let tiles = [
        t.tiles_x.d,
        t.tiles_y.d,
        out.sizes[2],
        out.sizes[3],
        out.sizes[4],
    ]
    .iter()
    .map(|&s| s as u64)
    .product::<u64>();
    // Tile indices stay below 2^31, as `FastDiv` needs.
    let tiles = u32::try_from(tiles)
        .ok()
        .filter(|&n| n <= i32::MAX as u32)?;
    Some(Tiled {
        name,
        lanes,
        shared,
        arg: t,
        g: out,
        tiles,
        block_per_tile: one.is_some(),
    })
}

/// One launch of `p`'s tiled kernel: (program, tiles, tile arguments, geometry, pointers),
/// blocks of `32 × TILE / lanes` threads taking tiles `k, k + grid, …`.
///
/// # Safety
/// As [`launch_program`], for a geometry and tiles from [`tiled_geometry`] of its plan.
unsafe fn tiled<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    t: &Tiled,
    ptrs: [u64; N],
) -> Result<()> {
    let mut all = Pointers::default();
    all.0[..N].copy_from_slice(&ptrs);
    let mut args: [*mut c_void; 5] = [
        p as *const Program as *mut c_void,
        &t.tiles as *const u32 as *mut c_void,
        &t.arg as *const TileArg as *mut c_void,
        &t.g as *const Geometry<u32, 5, OPERANDS> as *mut c_void,
        &all as *const Pointers as *mut c_void,
    ];
    let shape = LaunchShape {
        grid: if t.block_per_tile {
            t.tiles
        } else {
            gpu.grid(t.tiles as u64 * crate::gpu::BLOCK as u64)
        },
        block: (32, kernel::TILE / t.lanes as u32),
        shared_bytes: t.shared,
    };
    // SAFETY: the parameter list is (Program, u32, TileArg, Geometry<u32, 5, OPERANDS>,
    // Pointers) as the tiled kernels declare; blocks of 32 × TILE / lanes threads and
    // their stage bytes; the caller proved the pointers and the plan.
    unsafe { gpu.launch_named(kernel::MODULE, t.name, shape, stream, &mut args) }
}

/// One launch of the interpreter kernel `name` for `p` (of a variant, `kernel::name`, or a
/// wide kernel): (program, n, geometry, pointers).
unsafe fn one<const D: usize, const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    name: &'static str,
    numel: u64,
    g: &Geometry<u32, D, OPERANDS>,
    ptrs: [u64; N],
) -> Result<()> {
    let shape = LaunchShape {
        shared_bytes: STAGED_BYTES,
        ..gpu.shape_1d(numel)
    };
    // SAFETY: forwarded; a grid-stride body, 1-D blocks, the program's shared bytes.
    unsafe { launch(gpu, stream, p, name, numel, g, ptrs, shape) }
}

/// The launch of interpreter kernel `name`: (program, n, geometry, pointers) in `shape`.
///
/// # Safety
/// As [`one`], and `shape` is what the kernel's body expects.
#[allow(clippy::too_many_arguments)]
unsafe fn launch<const D: usize, const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    name: &'static str,
    numel: u64,
    g: &Geometry<u32, D, OPERANDS>,
    ptrs: [u64; N],
    shape: LaunchShape,
) -> Result<()> {
    let n = numel as u32;
    let mut all = Pointers::default();
    all.0[..N].copy_from_slice(&ptrs);
    let mut args: [*mut c_void; 4] = [
        p as *const Program as *mut c_void,
        &n as *const u32 as *mut c_void,
        g as *const Geometry<u32, D, OPERANDS> as *mut c_void,
        &all as *const Pointers as *mut c_void,
    ];
    // SAFETY: the parameter list is (Program, u32, Geometry<u32, D, OPERANDS>, Pointers) as
    // the kernel declares; the caller's shape; the caller proved the pointers and the plan.
    unsafe { gpu.launch_named(kernel::MODULE, name, shape, stream, &mut args) }
}
