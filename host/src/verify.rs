//! Comparing GPU results with the CPU twin (or any reference).

pub use crate::compare::{first_mismatch, twin_tolerance, Distance, Mismatch};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::layout::Layout;
use crate::tensor::DeviceTensor;
use gpu_kernels::ops::Accuracy;
use gpu_kernels::{Elem, Kernels1, Kernels2, Kernels3, Kernels4};

macro_rules! verify_apply {
    ($(#[$doc:meta])* $fn:ident, $trait:ident, $cpu:path, $api:path, [$($x:ident: $t:ident),*]) => {
        $(#[$doc])*
        pub fn $fn<Op, O: Distance $(, $t: Elem)*>(
            gpu: &Gpu,
            op: Op,
            out: (&[O], &Layout),
            $($x: (&[$t], &Layout)),*
        ) -> Result<Option<Mismatch<O>>>
        where
            Op: $trait<O $(, $t)*> + Accuracy,
        {
            let mut on_cpu = out.0.to_vec();
            $cpu(op, (&mut on_cpu, out.1) $(, $x)*)?;
            let mut d_out = DeviceTensor::from_slice(gpu, out.0, &[out.0.len()])?.with_layout(out.1.clone())?;
            $( let $x = DeviceTensor::from_slice(gpu, $x.0, &[$x.0.len()])?.with_layout($x.1.clone())?; )*
            $api(gpu, op, &mut d_out $(, &$x)*)?;
            let on_gpu = d_out.buffer_to_vec(gpu)?;
            Ok(first_mismatch(&on_gpu, &on_cpu, twin_tolerance::<Op>()))
        }
    };
}

verify_apply!(
    /// Runs `apply1` on the GPU and on the CPU twin from the same buffer contents and
    /// returns the first element (of the whole buffer) where they disagree.
    apply1, Kernels1, crate::cpu::apply1, crate::api::apply1, []
);
verify_apply!(
    /// [`apply1`] for `apply2`: buffers are uploaded whole and viewed through the layouts.
    apply2, Kernels2, crate::cpu::apply2, crate::api::apply2, [a: A]
);
verify_apply!(
    /// [`apply1`] for `apply3`.
    apply3, Kernels3, crate::cpu::apply3, crate::api::apply3, [a: A, b: B]
);
verify_apply!(
    /// [`apply1`] for `apply4`.
    apply4, Kernels4, crate::cpu::apply4, crate::api::apply4, [a: A, b: B, c: C]
);
