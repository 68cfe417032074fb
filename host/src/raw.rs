//! The raw API for tensor frameworks: device pointer + shape + strides + element type +
//! stream. Memory may come from any allocator (cudarc, a framework's caching allocator).
//!
//! The library checks everything it can see — null and misaligned pointers, element types,
//! broadcastable shapes, offset overflow, rank, output self-overlap and partial overlap
//! between operands — and returns a typed error. It cannot see how large the caller's
//! allocations are: that is the `unsafe` part the caller vouches for.

use crate::api::{check_aliasing, launch_plan, Region};
use crate::error::{Error, Operand, Result};
use crate::gpu::Gpu;
use crate::layout::Layout;
use crate::plan::{plan, Plan};
use cudarc::driver::sys::CUstream;
use gpu_kernels::apply::OpArg;
use gpu_kernels::elem::ElemType;
use gpu_kernels::{Elem, KernelNames, Kernels1, Kernels2, Kernels3, Kernels4};
use std::ffi::c_void;

/// A strided tensor in caller-owned device memory.
#[derive(Clone, Copy, Debug)]
pub struct RawTensor<'a> {
    /// Device address of the element at multi-index `(0, …, 0)`.
    pub ptr: u64,
    pub elem: ElemType,
    pub shape: &'a [usize],
    /// In elements; negative and zero strides are allowed.
    pub strides: &'a [isize],
}

impl RawTensor<'_> {
    /// The tensor's layout, after checking its element type, shape, strides and pointer.
    pub(crate) fn check(&self, operand: Operand, expected: ElemType) -> Result<Layout> {
        if self.elem != expected {
            return Err(Error::type_mismatch(operand, expected, self.elem));
        }
        let layout = Layout::new(self.shape, self.strides, 0).map_err(|e| match e {
            Error::InvalidView { reason, .. } => Error::InvalidView { operand, reason },
            e => e,
        })?;
        let span = layout.span(operand)?;
        if span.is_some() {
            if self.ptr == 0 {
                return Err(Error::NullPointer { operand });
            }
            let align = expected.size();
            if !self.ptr.is_multiple_of(align as u64) {
                return Err(Error::Misaligned {
                    operand,
                    ptr: self.ptr,
                    align,
                });
            }
        }
        Ok(layout)
    }
}

/// Operand names in messages, output first.
pub(crate) const OPERANDS: [Operand; 4] = ["out", "a", "b", "c"];

/// Each raw tensor's layout after checking it against its element type in `types`
/// (output first).
pub(crate) fn checked_layouts<const N: usize>(
    types: &[ElemType],
    t: &[RawTensor<'_>; N],
) -> Result<[Layout; N]> {
    let mut layouts: [Layout; N] = std::array::from_fn(|_| Layout::default());
    for k in 0..N {
        layouts[k] = t[k].check(OPERANDS[k], types[k])?;
    }
    Ok(layouts)
}

/// The memory regions of raw tensors with their checked `layouts`.
pub(crate) fn raw_regions<'a, const N: usize>(
    types: &[ElemType],
    t: &[RawTensor<'_>; N],
    layouts: &'a [Layout; N],
) -> [Region<'a>; N] {
    std::array::from_fn(|k| Region {
        operand: OPERANDS[k],
        buffer: t[k].ptr,
        elem_size: types[k].size(),
        layout: &layouts[k],
    })
}

/// The raw launch shared by the typed raw API and run-time dispatch: checks every tensor
/// against its element type in `types` (output first), plans, checks the aliasing rules and
/// launches the kernels `names` with the kernel argument `op`.
///
/// # Safety
/// The raw API's conditions 1–3 for every tensor and `stream`; `op` points to the `OpArg`
/// of the op whose kernels `names` names, for the element types `types`.
pub(crate) unsafe fn launch_raw<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    names: &KernelNames,
    op: *const c_void,
    types: &[ElemType],
    t: [RawTensor<'_>; N],
) -> Result<()> {
    let layouts = checked_layouts(types, &t)?;
    let plan: Plan<N> = plan(
        std::array::from_fn(|k| &layouts[k]),
        std::array::from_fn(|k| OPERANDS[k]),
    )?;
    let regions = raw_regions(types, &t, &layouts);
    check_aliasing(&regions[0], &regions[1..])?;
    if plan.numel == 0 {
        return Ok(());
    }
    let sizes = std::array::from_fn(|k| types[k].size());
    // SAFETY: the caller vouches for the memory and the op argument; the checks above prove
    // the element types, the aliasing rules and that offsets do not overflow.
    unsafe { launch_plan(gpu, names, op, &plan, t.map(|t| t.ptr), sizes, stream) }
}

macro_rules! raw_apply {
    ($(#[$doc:meta])* $fn:ident, $trait:ident, $n:literal, out: $o:ident, [$($x:ident: $t:ident),*]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// 1. Every tensor's `ptr`, with its shape and strides, addresses only memory of one
        ///    live device allocation of this `gpu`'s context, for every multi-index.
        /// 2. That memory holds values of the stated element type and stays allocated until
        ///    the work queued on `stream` completes.
        /// 3. `stream`, if given, is a live stream of this `gpu`'s context.
        pub unsafe fn $fn<Op: $trait<$o $(, $t)*>, $o: Elem $(, $t: Elem)*>(
            gpu: &Gpu,
            stream: Option<CUstream>,
            op: Op,
            out: RawTensor<'_>,
            $($x: RawTensor<'_>),*
        ) -> Result<()> {
            let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
            let op = OpArg::new(op);
            // SAFETY: the caller's conditions 1–3; the op argument is the `OpArg` of the op
            // whose kernels `Op::NAMES` names, for these element types.
            unsafe {
                launch_raw(
                    gpu,
                    stream,
                    &Op::NAMES,
                    (&op as *const OpArg<Op>).cast(),
                    &[$o::TYPE $(, $t::TYPE)*],
                    [out $(, $x)*],
                )
            }
        }
    };
}

raw_apply!(
    /// In-place `op(&mut x[i])` on caller-owned memory.
    apply1, Kernels1, 1, out: T, []
);
raw_apply!(
    /// `op(&mut out[i], a[i])` on caller-owned memory.
    apply2, Kernels2, 2, out: O, [a: A]
);
raw_apply!(
    /// `op(&mut out[i], a[i], b[i])` on caller-owned memory.
    apply3, Kernels3, 3, out: O, [a: A, b: B]
);
raw_apply!(
    /// `op(&mut out[i], a[i], b[i], c[i])` on caller-owned memory.
    apply4, Kernels4, 4, out: O, [a: A, b: B, c: C]
);
