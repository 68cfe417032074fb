//! # strided-apply
//!
//! THCApply-style pointwise kernels for strided and broadcast tensors, written in Rust,
//! compiled ahead of time to machine code for every GPU generation from sm_70 (plus PTX for
//! newer ones), launched through cudarc, with a CPU twin that runs the
//! same plan and the same op code.
//!
//! | CPU (twin) | GPU |
//! |---|---|
//! | `Vec<T>` + [`Layout`] | [`DeviceTensor<T>`] (buffer + layout) |
//! | [`cpu::apply3`] | [`apply3`] (typed) / [`raw::apply3`] (framework pointers) |
//! | rayon | one launch per call on the [`Gpu`]'s stream |
//!
//! ```
//! use strided_apply::{cpu, ops, Layout};
//! // c = a + b on the CPU twin, with b broadcast along rows.
//! let a: Vec<f32> = (0..6).map(|x| x as f32).collect();
//! let b = vec![10.0f32, 20.0, 30.0];
//! let mut c = vec![0.0f32; 6];
//! let (l2x3, l3) = (Layout::contiguous(&[2, 3])?, Layout::contiguous(&[3])?);
//! cpu::apply3(ops::Add, (&mut c, &l2x3), (&a, &l2x3), (&b, &l3))?;
//! assert_eq!(c, [10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);
//! # Ok::<(), strided_apply::Error>(())
//! ```
//!
//! On a machine with a GPU, the same call on the device:
//!
//! ```no_run
//! use strided_apply::{apply3, ops, DeviceTensor};
//! let gpu = strided_apply::open(0)?;
//! let a = DeviceTensor::from_slice(&gpu, &[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let b = DeviceTensor::from_slice(&gpu, &[10.0f32, 20.0], &[2])?;
//! let mut c = DeviceTensor::<f32>::zeros(&gpu, &[2, 2])?;
//! apply3(&gpu, ops::Add, &mut c, &a.transpose(0, 1)?, &b)?;
//! assert_eq!(c.to_vec(&gpu)?, [11.0, 23.0, 12.0, 24.0]);
//! # Ok::<(), strided_apply::Error>(())
//! ```

//!
//! Features: `dispatch` (run-time dispatch by op id and element types, and DLPack, for
//! frameworks: modules `dispatch` and `dlpack`) and `ndarray` (the CPU twin and device
//! tensors over ndarray arrays: module `nd`). Both are off by default.

pub use gpu_kernels;
pub use host::*;

mod builtin_image {
    include!(concat!(env!("OUT_DIR"), "/builtin/module.rs"));
}
mod expr_image {
    include!(concat!(env!("OUT_DIR"), "/expr/module.rs"));
}

/// The built-in kernels (`gpu-kernels`): cubins per SM version and PTX, compressed per
/// kernel family (from the snapshot or a fresh build).
pub const BUILTIN: ModuleImage = builtin_image::MODULE;

/// The expression interpreter's kernels (`strided-apply-expr`, tier 0 of [`expr`]): one
/// family of layout variants for every program and element type.
pub const EXPR_KERNELS: ModuleImage = expr_image::MODULE;

/// Whether the built-in kernel image came from the committed snapshot or a fresh compile.
pub const PTX_SOURCE: &str = env!("STRIDED_APPLY_PTX_SOURCE");

/// Opens device `ordinal` with the built-in kernels and the interpreter's registered.
pub fn open(ordinal: usize) -> Result<Gpu> {
    let gpu = Gpu::new(ordinal)?;
    gpu.register(BUILTIN);
    gpu.register(EXPR_KERNELS);
    Ok(gpu)
}
