//! A normalisation program on the GPU: the fused row kernel ([`super::fused`]) where the
//! call fits it, else the CPU twin's composition on the GPU (each stage
//! [`Compiled::launch_reduce`] into a temporary, then [`Compiled::launch`]): the same
//! bits either way.

use super::cpu::{full_inputs, full_strides, part_inputs};
use super::CompiledNorm;
use crate::error::{Error, Result};
use crate::expr::device::{DeviceArg, Temps};
use crate::expr::{RawTensor, Scalar, NAMES};
use crate::gpu::Gpu;
use crate::tensor::DeviceTensor;
use cudarc::driver::sys::CUstream;
use gpu_kernels::elem::Elem;

impl CompiledNorm {
    /// Runs the program on the GPU on the `gpu`'s stream: `inputs` in the order of
    /// [`inputs`](Self::inputs), broadcast to one shape, `axes` the normalised axes of that
    /// shape; `out` as for [`run_cpu`](Self::run_cpu). Checks as `Compiled::run`'s;
    /// nothing is launched when one fails.
    pub fn run<O: Elem>(
        &self,
        gpu: &Gpu,
        out: &mut DeviceTensor<O>,
        inputs: &[DeviceArg<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        let out = DeviceArg::from(&*out);
        let mut args = vec![out];
        args.extend_from_slice(inputs);
        for (k, a) in args.iter().enumerate() {
            a.region(gpu, NAMES.get(k).copied().unwrap_or("input"))?;
        }
        let raw: Vec<RawTensor<'_>> = args.iter().map(|a| a.raw()).collect();
        // SAFETY: every view was checked against its buffer of this gpu when it was made;
        // the buffers live until the work queued on the gpu's stream completes.
        unsafe { self.launch(gpu, None, raw[0], &raw[1..], scalars, axes) }
    }

    /// [`run`](Self::run) over caller-owned device memory given by address, on `stream`
    /// (the `gpu`'s own when `None`).
    ///
    /// # Safety
    /// As for [`Compiled::launch`](crate::expr::Compiled::launch): every tensor's memory is
    /// one live allocation of this `gpu`'s context holding values of its element type,
    /// kept until the work queued on `stream` completes.
    pub unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape).collect();
        let sh = self.shapes(inputs.len(), &shapes, out.shape, scalars, axes)?;
        if out.elem != self.out {
            return Err(Error::type_mismatch("out", self.out, out.elem));
        }
        let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
        crate::expr::tier1::with_tier(self.tier, || {
            // SAFETY: forwarded; the fused launch checks what the composition would.
            if unsafe { self.launch_fused(gpu, stream, &sh, out, inputs, scalars)? } {
                return Ok(());
            }
            // SAFETY: forwarded.
            unsafe { self.launch_composed(gpu, stream, &sh, out, inputs, scalars) }
        })
    }

    /// The CPU twin's composition on the GPU.
    ///
    /// # Safety
    /// As for [`launch`](Self::launch).
    unsafe fn launch_composed(
        &self,
        gpu: &Gpu,
        stream: CUstream,
        sh: &super::plan::Shapes,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let keep_strides = crate::layout::contiguous_strides(&sh.keepdim).unwrap_or_default();
        let bst = full_strides(sh, inputs);
        let inputs = &full_inputs(sh, inputs, &bst)[..];
        let (fs, fst) = sh.temp_full();
        let (os, ost) = if self.rowwise {
            (fs.clone(), fst.clone())
        } else {
            sh.temp_as(out.shape)
        };
        let mut temps = Temps::new(gpu, stream);
        let mut ptrs: Vec<u64> = Vec::new();
        for acc in &self.accs {
            ptrs.push(temps.alloc((sh.rows * acc.size()).max(1))?);
        }
        let c = &self.result;
        let ins = part_inputs(self, c, inputs, &ptrs, &os, &ost);
        // Every check of the result's launch before anything launches. SAFETY: a check launches nothing; the temporaries are live allocations of this
        // context of the stages' types, of `rows` values each, which these views reach.
        unsafe { c.check_launch(gpu, out, &ins, &Self::scalars_of(c, scalars))? };
        for (k, (op, c)) in self.stages.iter().enumerate() {
            let ins = part_inputs(self, c, inputs, &ptrs, &fs, &fst);
            let t = RawTensor {
                ptr: ptrs[k],
                elem: self.accs[k],
                shape: &sh.keepdim,
                strides: &keep_strides,
            };
            // SAFETY: the caller's operands; the temporary as above, freed in the
            // stream's order after the work queued (`Temps`).
            unsafe {
                c.launch_reduce(
                    gpu,
                    Some(stream),
                    *op,
                    t,
                    &ins,
                    &Self::scalars_of(c, scalars),
                    &sh.axes,
                )?
            };
        }
        // SAFETY: as above.
        unsafe { c.launch(gpu, Some(stream), out, &ins, &Self::scalars_of(c, scalars)) }
    }
}
