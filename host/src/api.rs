//! The typed API: `apply1`…`apply4` over [`DeviceTensor`]s. Each call plans, checks the
//! aliasing rules and launches through the launch layer (the planner is the only guard the
//! GPU has).

use crate::alias::check_aliasing;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::launch::launch_plan;
use crate::plan::{plan, Plan};
use crate::tensor::DeviceTensor;
use gpu_kernels::apply::OpArg;
use gpu_kernels::{Elem, Kernels1, Kernels2, Kernels3, Kernels4};

pub use crate::launch::DIV_ONE;

macro_rules! typed_apply {
    ($(#[$doc:meta])* $fn:ident, $trait:ident, $n:literal,
     out: $o:ident, [$($x:ident: $t:ident),*]) => {
        $(#[$doc])*
        pub fn $fn<Op: $trait<$o $(, $t)*>, $o: Elem $(, $t: Elem)*>(
            gpu: &Gpu,
            op: Op,
            out: &mut DeviceTensor<$o>,
            $($x: &DeviceTensor<$t>),*
        ) -> Result<()> {
            if let Some(prog) = &Op::NAMES.program {
                // An op without kernels of its own: its expression program (the same checks).
                let scalars = op.program_scalars();
                return crate::programs::run(
                    gpu,
                    prog,
                    scalars.as_slice(),
                    out,
                    &[$(crate::expr::DeviceArg::from($x)),*],
                );
            }
            let plan: Plan<$n> = plan([out.layout() $(, $x.layout())*], ["out" $(, stringify!($x))*])?;
            check_aliasing(&out.region(gpu, "out")?, &[$($x.region(gpu, stringify!($x))?),*])?;
            if plan.numel == 0 {
                return Ok(());
            }
            let ptrs = [out.base_addr() $(, $x.base_addr())*];
            // SAFETY: every tensor's layout was checked against its buffer when the view was
            // made (`DeviceTensor::with_layout`), the plan broadcast them to the output, and
            // `check_aliasing` proved the aliasing rules.
            let sizes = [size_of::<$o>() $(, size_of::<$t>())*];
            let op = OpArg::new(op);
            let op = (&op as *const OpArg<Op>).cast();
            unsafe { launch_plan(gpu, &Op::NAMES, op, &plan, ptrs, sizes, gpu.stream().cu_stream()) }
        }
    };
}

typed_apply!(
    /// `op(&mut x[i])` for every element of `x`, in place.
    apply1, Kernels1, 1, out: T, []
);
typed_apply!(
    /// `op(&mut out[i], a[i])`; `a` is broadcast to `out`'s shape.
    apply2, Kernels2, 2, out: O, [a: A]
);
typed_apply!(
    /// `op(&mut out[i], a[i], b[i])`; inputs are broadcast to `out`'s shape.
    apply3, Kernels3, 3, out: O, [a: A, b: B]
);
typed_apply!(
    /// `op(&mut out[i], a[i], b[i], c[i])`; inputs are broadcast to `out`'s shape.
    apply4, Kernels4, 4, out: O, [a: A, b: B, c: C]
);

impl<T: Elem> DeviceTensor<T> {
    /// A dense copy on the device (a `Cast` kernel from `T` to `T`).
    pub fn contiguous(&self, gpu: &Gpu) -> Result<Self>
    where
        gpu_kernels::ops::Cast: gpu_kernels::Kernels2<T, T>,
    {
        let mut out = DeviceTensor::<T>::zeros(gpu, self.shape())?;
        apply2(gpu, gpu_kernels::ops::Cast, &mut out, self)?;
        Ok(out)
    }

    /// This view's elements in row-major order (Kamasu's `>>`); a strided view is made
    /// contiguous on the device first.
    pub fn to_vec(&self, gpu: &Gpu) -> Result<Vec<T>>
    where
        gpu_kernels::ops::Cast: gpu_kernels::Kernels2<T, T>,
    {
        if !self.layout().is_contiguous() && self.numel() != 0 {
            return self.contiguous(gpu)?.download_contiguous(gpu);
        }
        self.download_contiguous(gpu)
    }
}
