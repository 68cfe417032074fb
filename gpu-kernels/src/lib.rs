//! Pointwise kernels for strided and broadcast tensors, written once and run twice:
//! compiled to PTX (target `nvptx64-nvidia-cuda`) for the GPU, and compiled for the host,
//! where the CPU twin calls the very same op code and offset arithmetic.
//!
//! - [`elem`]: element types (`f32`, `f64`, `i32`, `i64`, `u32`, `u8`, [`elem::Bool`], and
//!   the 16-bit floats [`f16`](struct@f16) and [`bf16`] of the `half` crate, computed in `f32`: [`narrow`]).
//! - [`geometry`]: [`geometry::Geometry`], the `#[repr(C)]` TensorInfo passed by value to
//!   every kernel (sizes of the jointly collapsed dimensions, strides of every operand),
//!   and the IndexToOffset arithmetic.
//! - [`ops`]: the op traits ([`ops::Op1`] … [`ops::Op4`]) and the op library.
//! - [`apply`]: the kernel bodies, generic over op, element types, index type and
//!   compile-time dimension count.
//! - [`kernels!`]: the one macro that names and instantiates entry points; `builtin`
//!   (feature `builtin`, on by default) is the library's own list.
//! - [`fused`](mod@fused): [`fused!`](macro@fused) turns a whole elementwise expression into one op type.
//! - [`stencil`]: neighbour reads at compile-time offsets with clamp-to-edge borders.
//! - [`reduce`]: reductions along any axes in one order fixed by the reduction length, so
//!   the GPU and the CPU twin agree bit for bit.
//! - `dispatch` (host builds): the link-time list of every instantiated family, for
//!   run-time dispatch by op id and element types.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]

#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

/// `body` for `i = 0, 1, …, n − 1` (`n` a constant of at most 16) as straight-line code, so
/// that per-thread arrays indexed by `i` stay in registers. A macro rather than a function
/// taking a closure: LLVM decides whether to unroll a loop, or to inline a closure called
/// several times, by its size, and a closure left out of line takes its arrays to the stack.
/// `unrolled!(dims n, |d| …)` takes a run-time `n` of at most 6 (array dimensions), each
/// copy guarded by `d < n`: arrays of kernel parameters indexed by `d` are then read at
/// constant offsets instead of being copied to local memory.
///
/// Each of the 16 copies is guarded by `if i < n`, which only LLVM folds: every copy of
/// every instance reaches LLVM. `unrolled!(const n, …)` guards them with `if const`, so
/// rustc compiles only the live ones; `unrolled!(if plain; n, …)` chooses per instance (the
/// first form where the constant `plain` holds; `wide if` takes up to 64 copies, one flat loop
/// in place of two nested ones, a quarter of their source). Both change LLVM's layout of some
/// kernels (`benches/NOTES.md`, "Build time").
#[allow(unused_macros)]
macro_rules! unrolled {
    (dims $n:expr, |$i:ident| $body:block) => {
        unrolled!(@each $n, $i, $body, 0 1 2 3 4 5)
    };
    (const $n:expr, |$i:ident| $body:block) => {{
        const { assert!($n <= 16) };
        unrolled!(@const $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    }};
    // Before the plain arm, whose `expr` an `if` would start.
    (if $plain:expr; $n:expr, |$i:ident| $body:block) => {{
        const { assert!($n <= 16) };
        unrolled!(@sel $plain, $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    }};
    // Up to 64 copies (a flat loop over what would be two nested ones).
    (wide if $plain:expr; $n:expr, |$i:ident| $body:block) => {{
        const { assert!($n <= 64) };
        unrolled!(@sel $plain, $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
            20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
            48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    }};
    ($n:expr, |$i:ident| $body:block) => {{
        const { assert!($n <= 16) };
        unrolled!(@each $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    }};
    (@each $n:expr, $i:ident, $body:block, $($k:literal)*) => {{
        $( if $k < $n { let $i: usize = $k; $body } )*
    }};
    (@sel $plain:expr, $n:expr, $i:ident, $body:block, $($k:literal)*) => {{
        $( if const { $plain || $k < $n } {
            #[allow(unconditional_panic)]
            let () = { if $k < $n { let $i: usize = $k; $body } };
        } )*
    }};
    (@const $n:expr, $i:ident, $body:block, $($k:literal)*) => {{
        // The copies past `n` are never compiled, but rustc still lints their constant
        // indices.
        $( if const { $k < $n } {
            #[allow(unconditional_panic)]
            let () = { let $i: usize = $k; $body };
        } )*
    }};
}

pub mod apply;
#[cfg(feature = "builtin")]
pub mod builtin;
mod cast;
#[cfg(not(target_arch = "nvptx64"))]
pub mod dispatch;
pub mod elem;
pub mod float8;
pub mod fused;
pub mod geometry;
mod instantiate;
pub mod math;
mod names;
pub mod narrow;
pub mod ops;
pub mod reduce;
pub mod stencil;
#[cfg(target_arch = "nvptx64")]
pub mod tiled;

/// Parameters of the tiled variant (see `tiled`): which inputs are staged through shared
/// memory, and the divisors that split a block index into its tile and batch coordinates.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TileArg {
    /// Bit `k - 1` set: input `k` is read through shared memory. Bit
    /// [`PAIR_ALIGNED`]` << k` set (the paired form, [`TILE2_PAIRED`], [`TILE3_PAIRED`]): every pair of operand
    /// `k` that the tile moves is an aligned 4-byte word of it (operand 0 is the output).
    pub staged: u32,
    /// Tiles along axis 0 (the output's unit-stride axis).
    pub tiles_x: FastDiv,
    /// Tiles along axis 1 (a staged input's unit-stride axis).
    pub tiles_y: FastDiv,
    /// Sizes of batch axes 2 and 3 (axis 4, the last, takes what remains).
    pub batch: [FastDiv; 2],
}

/// Division of 31-bit numbers by a divisor fixed at launch, as a multiply-high, an add and
/// a shift (the host precomputes `magic` and `shift`; PyTorch's `IntDivider` and cubecl's
/// `FastDivmod` use the same method). `n / d` for every `n < 2^31` and `1 <= d <= 2^31`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastDiv {
    /// The divisor.
    pub d: u32,
    /// `⌊2^32 · (2^shift − d) / d⌋ + 1`.
    pub magic: u32,
    /// `⌈log2 d⌉`.
    pub shift: u32,
}

impl FastDiv {
    /// The divider for `d`, or `None` unless `1 <= d <= 2^31`.
    pub const fn new(d: u32) -> Option<FastDiv> {
        if d == 0 || d > 1 << 31 {
            return None;
        }
        let shift = 32 - (d - 1).leading_zeros();
        let magic = (((1u64 << 32) * ((1u64 << shift) - d as u64)) / d as u64 + 1) as u32;
        Some(FastDiv { d, magic, shift })
    }

    /// `(n / d, n % d)` for `n < 2^31`.
    #[inline(always)]
    pub fn divmod(&self, n: u32) -> (u32, u32) {
        let hi = ((n as u64 * self.magic as u64) >> 32) as u32;
        let q = (hi + n) >> self.shift;
        (q, n - q * self.d)
    }
}

/// Shape of the tiled variant's tiles: `x × y` elements of axes 0 × 1 (the output's and a
/// staged input's unit-stride axes), blocks of `32 × rows` threads. Both extents are
/// multiples of 32 (a warp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileShape {
    pub x: u32,
    pub y: u32,
    pub rows: u32,
    /// The paired form for 2-byte operands: every thread moves pairs of elements, one
    /// 4-byte access each where the operand allows it (`tiled`, [`TILE2_PAIRED`]).
    pub paired: bool,
    /// In the paired form, word `m` of stage row `y` is stored at `m ^ (y / 32)` (no bank
    /// conflict between the stage stores of rows `y` and `y + 32`).
    pub swizzle: bool,
}

impl TileShape {
    /// Values each thread loads per input (and outputs it writes).
    pub const fn per_thread(self) -> usize {
        (self.x * self.y / (32 * self.rows)) as usize
    }

    /// Bytes of dynamic shared memory that stage one input of `size`-byte elements: an
    /// `x × (y + 1)` tile (the padding column avoids bank conflicts), rounded up to 16
    /// bytes; in the paired form `y` rows of `x / 2 + 1` 4-byte pairs. Input `k`'s stage
    /// follows inputs `1..k`'s.
    pub const fn stage_bytes(self, size: usize) -> usize {
        if self.paired {
            return (self.y * (self.x / 2 + 1)) as usize * 4;
        }
        (((self.y + 1) * self.x) as usize * size).div_ceil(16) * 16
    }
}

/// Tiles of `apply2` (one input: a permuted or transposed copy): 64 × 64, 16 values per
/// thread. CUDA C references on the H200: 3863 GB/s for the permuted copy against 3579 with
/// 32 × 32 tiles (`benches/NOTES.md`, "Tiles").
pub const TILE2: TileShape = TileShape {
    x: 64,
    y: 64,
    rows: 8,
    paired: false,
    swizzle: false,
};
/// Tiles of `apply3` (two inputs, each staged or not): 32 × 32, 8 values per thread.
pub const TILE3: TileShape = TileShape {
    x: 32,
    y: 32,
    rows: 4,
    paired: false,
    swizzle: false,
};
/// Tiles of apply2 when both operands have 2-byte elements (f16, bf16): 128 × 128, blocks
/// of 32 × 16 threads, each thread moving pairs of elements along the operand's unit-stride
/// axis as one 4-byte access (32 elements per thread), no stage swizzle. A tile spanning 128
/// elements of the output's unit axis writes runs of 256 bytes. CUDA C references on the
/// H200 (the bf16 permuted copy, `benches/NOTES.md`, "Tiles"): 3760–3840 GB/s against
/// 3545–3590 with [`TILE3_PAIRED`]'s 64 × 64, when phase 2 stores a row's 256 bytes in one
/// round and the stage is not swizzled (the swizzle cost 8–16 % at two blocks per SM).
pub const TILE2_PAIRED: TileShape = TileShape {
    x: 128,
    y: 128,
    rows: 16,
    paired: true,
    swizzle: false,
};
/// Tiles of apply3 when every operand has 2-byte elements: 64 × 64, blocks of 32 × 8
/// threads, in pairs as [`TILE2_PAIRED`] (16 elements per thread and input). With one
/// element per access a 2-byte tile issues twice the loads, stores and shared-memory
/// accesses of an f32 tile for the same bytes; CUDA C references on the H200: bf16
/// `A + Bᵀ` 4170–4181 GB/s paired against 3287–3294 with 32 × 32 element tiles
/// (`benches/NOTES.md`, "Tiles").
pub const TILE3_PAIRED: TileShape = TileShape {
    x: 64,
    y: 64,
    rows: 8,
    paired: true,
    swizzle: true,
};
/// [`TileArg::staged`] bit `PAIR_ALIGNED << k`: operand `k`'s pairs are aligned words.
pub const PAIR_ALIGNED: u32 = 1 << 8;

/// Whether operands of these element sizes (output first) take the paired form.
pub const fn pairs(sizes: &[usize]) -> bool {
    let mut i = 0;
    while i < sizes.len() {
        if sizes[i] != 2 {
            return false;
        }
        i += 1;
    }
    true
}

/// The tile shape of the tiled variant for operands of these element sizes (output first).
pub const fn tile_shape(sizes: &[usize]) -> TileShape {
    if pairs(sizes) {
        if sizes.len() == 2 {
            TILE2_PAIRED
        } else {
            TILE3_PAIRED
        }
    } else if sizes.len() == 2 {
        TILE2
    } else {
        TILE3
    }
}

#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod device;

pub use elem::{bf16, f16, Bool, Elem};
pub use geometry::{Geometry, Index, MAX_DIMS};
pub use instantiate::{Kernels1, Kernels2, Kernels3, Kernels4};
pub use names::{KernelNames, ProgramOf, Variant};

#[cfg(test)]
mod tests {
    use super::FastDiv;

    fn check(d: u32, n: u32) {
        let f = FastDiv::new(d).expect("valid divisor");
        assert_eq!(f.divmod(n), (n / d, n % d), "{n} / {d}");
    }

    #[test]
    fn fast_div_equals_division() {
        const EDGES: [u32; 8] = [0, 1, 2, 3, 1 << 30, (1 << 31) - 2, (1 << 31) - 1, 12345];
        for d in 1..=3000u32 {
            for n in (0..5000u32).chain(EDGES) {
                check(d, n);
            }
            // Multiples of d and their neighbours, up to 2^31 - 1.
            let mut m = d as u64;
            while m < 1 << 31 {
                for n in [m - 1, m, m + 1] {
                    if n < 1 << 31 {
                        check(d, n as u32);
                    }
                }
                m = m * 7 + d as u64;
            }
        }
        // Large and power-of-two divisors, pseudo-random numerators.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = match i % 4 {
                0 => 1 << (i % 32).min(31),
                1 => (x >> 33) as u32 | 1,
                _ => ((x >> 40) as u32).max(1),
            };
            check(d, (x as u32) >> 1);
        }
        for d in [1u32 << 31, (1 << 31) - 1, 1 << 16, 65535, 65537] {
            for n in EDGES {
                check(d, n);
            }
        }
    }

    #[test]
    fn fast_div_refuses_zero_and_above_2_pow_31() {
        assert_eq!(FastDiv::new(0), None);
        assert_eq!(FastDiv::new((1 << 31) + 1), None);
        assert_eq!(FastDiv::new(u32::MAX), None);
        assert!(FastDiv::new(1 << 31).is_some());
    }
}
