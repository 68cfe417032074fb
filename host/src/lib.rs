//! Host side of strided-apply: layouts and views, the planner, device tensors, the launcher,
//! the CPU twin and the verification helpers.
//!
//! The crate is built in layers, as cudarc builds `sys → result → safe`: each module uses
//! only modules of the layers below it, and no facade uses another facade.
//!
//! | layer | module | what |
//! |---|---|---|
//! | facades | [`api`] | typed `apply1`…`apply4` over [`DeviceTensor`]s |
//! | | [`raw`] | device pointer + shape + strides, for frameworks |
//! | | `dispatch` (feature `dispatch`) | ops and element types named at run time, GPU and CPU twin |
//! | | `dlpack` (feature `dispatch`) | DLPack tensors in (GPU and CPU twin) and out, no copy |
//! | | [`cpu`] | the typed CPU twin over host slices |
//! | | `nd` (feature `ndarray`) | the CPU twin and device tensors over ndarray arrays |
//! | | [`reduce`] | reductions over any axes: plan, launch and CPU twin, one order on both |
//! | | [`stencil`] | stencils: plan, launch and CPU twin |
//! | | [`verify`] | GPU-against-CPU comparison of the apply functions |
//! | | [`expr`] | expressions as data: builder, parser, programs, the CPU twin |
//! | execution | `launch` | a plan's variant, geometry and kernel parameters; the apply launch |
//! | | `operand` | operands typed at run time (`RawTensor`, host tensors), their checks and launch |
//! | | `twin` | the CPU twin's engine: a plan walked with rayon |
//! | | `compare` | distances, first mismatch, upload-run-compare |
//! | memory | [`tensor`] | reference-counted device buffers with a layout |
//! | | [`gpu`] | context, stream, PTX modules, the one launch site |
//! | planning | [`plan`] | broadcast, joint dimension collapse, variant and index-width choice |
//! | | `alias` | where operands live; the aliasing rules every path checks |
//! | | [`layout`] | shape, strides, offset; views; bounds proofs |
//! | | [`error`] | every way a call can fail, as one typed error |

#![allow(clippy::needless_range_loop)] // loops over operands index several arrays at once

mod alias;
pub mod api;
mod compare;
pub mod cpu;
#[cfg(feature = "dispatch")]
pub mod dispatch;
#[cfg(feature = "dispatch")]
pub mod dlpack;
pub mod error;
pub mod expr;
pub mod gpu;
mod launch;
pub mod layout;
#[cfg(feature = "ndarray")]
pub mod nd;
mod operand;
pub mod plan;
mod programs;
pub mod raw;
pub mod reduce;
pub mod stencil;
pub mod tensor;
mod twin;
pub mod verify;

pub use api::{apply1, apply2, apply3, apply4};
/// The CUDA driver bindings the library launches through (streams, contexts, functions).
pub use cudarc;
pub use error::{Error, Result};
pub use gpu::{driver_present, FamilyLoad, Gpu, ModuleImage, ModuleInfo};
/// The kernel crate: element types, ops, geometry, reductions and stencils.
pub use gpu_kernels;
pub use gpu_kernels::{
    bf16,
    elem::{f8e4m3fn, f8e5m2, ElemType},
    f16, ops, Bool, Elem, Kernels1, Kernels2, Kernels3, Kernels4, Variant, MAX_DIMS,
};
pub use layout::Layout;
pub use strided_apply_image::{self as image, Target};
pub use tensor::DeviceTensor;
