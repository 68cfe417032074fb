//! Pointwise kernels for strided and broadcast tensors, written once and run twice:
//! compiled to PTX (target `nvptx64-nvidia-cuda`) for the GPU, and compiled for the host,
//! where the CPU twin calls the very same op code and offset arithmetic.
//!
//! - [`elem`]: element types (`f32`, `f64`, `i32`, `i64`, `u32`, `u8`, [`elem::Bool`]).
//! - [`geometry`]: [`geometry::Geometry`], the `#[repr(C)]` TensorInfo passed by value to
//!   every kernel (sizes of the jointly collapsed dimensions, strides of every operand),
//!   and the IndexToOffset arithmetic.
//! - [`ops`]: the op traits ([`ops::Op1`] … [`ops::Op4`]) and the op library.
//! - [`apply`]: the kernel bodies, generic over op, element types, index type and
//!   compile-time dimension count.
//! - [`kernels!`]: the one macro that names and instantiates entry points; [`builtin`]
//!   is the library's own list.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx))]

#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

pub mod apply;
pub mod builtin;
pub mod elem;
pub mod geometry;
mod instantiate;
pub mod math;
pub mod ops;

#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod device;

pub use elem::{Bool, Elem};
pub use geometry::{Geometry, Index, MAX_DIMS};
pub use instantiate::{KernelNames, Kernels1, Kernels2, Kernels3, Kernels4, Variant};
