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
use gpu_kernels::{Elem, Kernels1, Kernels2, Kernels3, Kernels4};

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
            let lo = out.check("out", $o::TYPE)?;
            $( let $x = ($x, $x.check(stringify!($x), $t::TYPE)?); )*
            let plan: Plan<$n> = plan([&lo $(, &$x.1)*], ["out" $(, stringify!($x))*])?;
            let region = |operand, r: &RawTensor, layout| Region {
                operand, buffer: r.ptr, elem_size: r.elem.size(), layout,
            };
            check_aliasing(&region("out", &out, &lo), &[$(region(stringify!($x), &$x.0, &$x.1)),*])?;
            if plan.numel == 0 {
                return Ok(());
            }
            let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
            // SAFETY: the caller vouches for the memory (conditions 1–3); the checks above
            // prove the aliasing rules and that offsets do not overflow.
            let sizes = [out.elem.size() $(, $x.0.elem.size())*];
            let op = OpArg::new(op);
            let op = (&op as *const OpArg<Op>).cast();
            unsafe { launch_plan(gpu, &Op::NAMES, op, &plan, [out.ptr $(, $x.0.ptr)*], sizes, stream) }
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
