//! Host side of strided-apply: layouts and views, the planner, device tensors, the launcher,
//! the CPU twin and the verification helpers.
//!
//! | where | what |
//! |---|---|
//! | [`layout`] | shape, strides, offset; views; bounds proofs |
//! | [`plan`] | broadcast, joint dimension collapse, variant and index-width choice |
//! | [`gpu`] | context, stream, PTX modules, the one launch site |
//! | [`tensor`] | reference-counted device buffers with a layout |
//! | [`api`] | typed `apply1`…`apply4` |
//! | [`raw`] | device pointer + shape + strides, for frameworks |
//! | `dispatch` (feature `dispatch`) | ops and element types named at run time, GPU and CPU twin |
//! | `dlpack` (feature `dispatch`) | DLPack tensors in (GPU and CPU twin) and out, no copy |
//! | [`cpu`] | the CPU twin |
//! | `nd` (feature `ndarray`) | the CPU twin and device tensors over ndarray arrays |
//! | [`stencil`] | stencils: plan, launch and CPU twin |
//! | [`reduce`] | reductions over any axes: plan, launch and CPU twin, one order on both |
//! | [`verify`] | GPU-against-CPU comparison |

#![allow(clippy::needless_range_loop)] // loops over operands index several arrays at once

pub mod api;
pub mod cpu;
#[cfg(feature = "dispatch")]
pub mod dispatch;
#[cfg(feature = "dispatch")]
pub mod dlpack;
pub mod error;
pub mod gpu;
pub mod layout;
#[cfg(feature = "ndarray")]
pub mod nd;
pub mod plan;
pub mod raw;
pub mod reduce;
pub mod stencil;
pub mod tensor;
pub mod verify;

pub use api::{apply1, apply2, apply3, apply4};
/// The CUDA driver bindings the library launches through (streams, contexts, functions).
pub use cudarc;
pub use error::{Error, Result};
pub use gpu::{driver_present, FamilyLoad, Gpu, ModuleImage, ModuleInfo};
/// The kernel crate: element types, ops, geometry, reductions and stencils.
pub use gpu_kernels;
pub use gpu_kernels::{
    bf16, elem::ElemType, f16, ops, Bool, Elem, Kernels1, Kernels2, Kernels3, Kernels4, Variant,
    MAX_DIMS,
};
pub use layout::Layout;
pub use strided_apply_image::{self as image, Target};
pub use tensor::DeviceTensor;
