//! The raw API for tensor frameworks: device pointer + shape + strides + element type +
//! stream. Memory may come from any allocator (cudarc, a framework's caching allocator).
//!
//! The library checks everything it can see — null and misaligned pointers, element types,
//! broadcastable shapes, offset overflow, rank, output self-overlap and partial overlap
//! between operands — and returns a typed error. It cannot see how large the caller's
//! allocations are: that is the `unsafe` part the caller vouches for.

use crate::error::Result;
use crate::gpu::Gpu;
pub use crate::operand::RawTensor;
use crate::programs::launch_raw;
use cudarc::driver::sys::CUstream;
use gpu_kernels::apply::OpArg;
use gpu_kernels::{Elem, Kernels1, Kernels2, Kernels3, Kernels4};

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
            let scalars = op.program_scalars();
            let op = OpArg::new(op);
            // SAFETY: the caller's conditions 1–3; the op argument is the `OpArg` of the op
            // whose kernels `Op::NAMES` names, for these element types.
            unsafe {
                launch_raw(
                    gpu,
                    stream,
                    &Op::NAMES,
                    (&op as *const OpArg<Op>).cast(),
                    scalars.as_slice(),
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
