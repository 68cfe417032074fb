//! Tier 1's code generator: a checked [`Program`] written out as a PTX kernel, which the CUDA
//! driver compiles (no NVRTC, no toolkit). Every op is the interpreter's, instruction for
//! instruction: IEEE `.rn` arithmetic (no contraction: `fma` only where the program has one),
//! the NaN rules of the op structs, the `cvt`s of the library's conversions, and the float
//! functions called from the library the build compiled from the interpreter's own code
//! ([`t1lib`](strided_apply_expr::t1lib)). So a compiled expression gives the interpreter's bits.
//!
//! It compiles programs of every math type ([`supports`]): the float types, bool
//! (predicates), and the integer types in 32-bit registers (`I32`, `U32`; `U8` zero-extended,
//! wrapped back to 8 bits after every op that can leave them; `i8`, `i16`, `u16` elements
//! computed in `I32` as the program says, with its `Narrow`s) or 64-bit ones (`I64`, `U64`).
//! Integer arithmetic wraps (`add`, `mul.lo`, `neg` of two's complement); division and
//! remainders take a divisor of 1 in place of 0 and -1 (PTX leaves those undefined or
//! overflowing) and select the interpreter's results for them (0, and `MIN / -1` wrapping to
//! `MIN`); shifts select PyTorch's results for amounts out of range; conversions from floats
//! select their saturated bounds and NaN's 0 rather than rely on `cvt`'s own.
//!
//! The kernel shapes, with the layout machinery of tier 0's kernels:
//! - [`Shape::Vector`]: `lanes` elements along dimension 0 per thread, one vector access per
//!   operand (unit stride) or one element for all lanes (stride 0), over one dimension (with
//!   a scalar tail; one or more vectors a thread, their loads issued together) or rows of a
//!   multiple of `lanes` elements (tier 0's vectorised contract);
//! - [`Shape::Strided`]: one element per thread and grid-stride step, any strides, the
//!   coordinates by multiply-shift division ([`FastDiv`](gpu_kernels::FastDiv));
//! - [`Shape::Tiled`]: tiles staged through shared memory for transposed inputs;
//! - [`Shape::Reduce`]: an expression reduction's group kernel ([`reduce`]).
//!
//! The modules: the generator's state and registers (`emit`), value and type names
//! (`types`), index arithmetic (`index`), the program on one element (`program`) and its
//! op families (`float`, `int`, `logic`, `cast`, the library's functions in `call`), memory
//! accesses (`memory`), what every kernel shares (`kernel`), the shapes (`shape`; the
//! pointwise kernels in `pointwise`, their frame in `frame` and their bodies in `vector`,
//! `strided` and `tiled`; the reductions in `reduce`; the normalisations' row kernels in
//! `norm`), and which programs it writes
//! (`support`).

use strided_apply_expr::ir::Program;

macro_rules! emit {
    ($g:expr, $($t:tt)*) => {{
        let _ = writeln!($g.s, $($t)*);
    }};
}

mod call;
mod cast;
mod emit;
mod float;
mod frame;
mod index;
mod int;
mod kernel;
mod logic;
mod memory;
mod norm;
mod pointwise;
mod program;
mod reduce;
mod shape;
mod strided;
mod support;
mod tiled;
mod types;
mod vector;

pub(crate) use kernel::KERNEL;
pub(crate) use norm::{module as norm_module, NormShape, Part as NormPart, Src as NormSrc};
pub(crate) use reduce::{takes as reduce_takes, RedShape, COL_X};
pub(crate) use shape::Shape;
pub(crate) use support::{calls_lib, supports, supports_reduce};
pub(crate) use tiled::{stage_bytes, tile_side, STAGE_LIMIT, TILE_THREADS};

/// The PTX module of `p` for `shape`: the library's text (`lib`: its functions, without a
/// header; empty when `p` calls none), then the kernel [`KERNEL`], under a header for
/// `.target sm_{sm}`. Parameters, in order: the operands' addresses (`.u64`, output first),
/// the constants (`.b8 [128]`, each in its math type's encoding), then the shape's:
/// - `Vector`: `n` (`.u32`, vectors), `tail` (`.u32`, one-dimensional: the elements past
///   the last vector), `rows`: the division by vectors per row (`d`, `magic`, `shift`,
///   `.u32` each) and each operand's row stride in elements (`.s32`);
/// - `Strided { rank }`: `n` (`.u32`), the divisions by dimensions `0..rank-1` (`d`,
///   `magic`, `shift` each), each operand's strides (`.s32`, dimension 0 first);
/// - `Tiled`: `n` (`.u32`, tiles: the grid), the divisions of
///   [`TILED_DIVS`](tiled::TILED_DIVS) (`d`, `magic`, `shift` each: tiles along axes 0 and 1,
///   batch axes 2 and 3), the sizes of axes 0 and 1 (`.u32`), each operand's strides of axes
///   0–4 (`.s32`).
pub(crate) fn module(p: &Program, shape: Shape, sm: u32, lib: &str) -> String {
    if let Shape::Reduce(r) = shape {
        return reduce::module(p, r, sm, lib);
    }
    pointwise::module(p, shape, sm, lib)
}

#[cfg(test)]
mod tests;
