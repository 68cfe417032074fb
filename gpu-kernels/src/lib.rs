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
//! - [`kernels!`]: the one macro that names and instantiates entry points; `builtin`
//!   (feature `builtin`, on by default) is the library's own list.
//! - [`fused`]: [`fused!`] turns a whole elementwise expression into one op type.
//! - [`stencil`]: neighbour reads at compile-time offsets with clamp-to-edge borders.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]

#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

pub mod apply;
#[cfg(feature = "builtin")]
pub mod builtin;
pub mod elem;
pub mod fused;
pub mod geometry;
mod instantiate;
pub mod math;
pub mod ops;
pub mod stencil;
#[cfg(target_arch = "nvptx64")]
pub mod tiled;

/// Parameters of the tiled variant (see `tiled`): which inputs are staged through shared
/// memory, and how many `TILE_X × TILE_Y` tiles cover the two tiled axes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TileArg {
    /// Bit `k - 1` set: input `k` is read through shared memory.
    pub staged: u32,
    /// Tiles along axis 0 (the output's unit-stride axis).
    pub tiles_x: u32,
    /// Tiles along axis 1 (a staged input's unit-stride axis).
    pub tiles_y: u32,
}

/// Extent of a tiled variant's tile along axis 0 (the output's unit-stride axis).
pub const TILE_X: u32 = 64;
/// Extent of a tile along axis 1 (a staged input's unit-stride axis): one warp.
pub const TILE_Y: u32 = 32;
/// Rows of threads per tiled block: a block is `TILE_Y × TILE_ROWS` threads, and each
/// thread covers `TILE_X / TILE_ROWS` elements of the tile.
pub const TILE_ROWS: u32 = 8;

/// Bytes of dynamic shared memory the tiled variant uses to stage one input of
/// `size`-byte elements: a `TILE_X × (TILE_Y + 1)` tile (the padding column avoids bank
/// conflicts), rounded up to 16 bytes. Input `k`'s stage follows inputs `1..k`'s.
pub const fn stage_bytes(size: usize) -> usize {
    (((TILE_Y + 1) * TILE_X) as usize * size).div_ceil(16) * 16
}

#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod device;

pub use elem::{Bool, Elem};
pub use geometry::{Geometry, Index, MAX_DIMS};
pub use instantiate::{KernelNames, Kernels1, Kernels2, Kernels3, Kernels4, Variant};
