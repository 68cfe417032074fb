//! Kernel bodies: one per arity, generic over op, element types, index type `I` and the
//! compile-time dimension count `D`. A GPU thread runs the body over the linear indices
//! `first, first + step, …` below `n` (a grid-stride loop); thread `t` of block `b` starts
//! at `b * blockDim + t` and steps by the grid's thread count.
//!
//! `ndim == 0` selects the contiguous variant: every operand's offset is the linear index.
//!
//! # Safety (all bodies)
//! The caller (the host planner, through the one launch site) guarantees the
//! [`Geometry`] invariants: every offset computed for `i < n` lies inside its operand's
//! buffer, output offsets are distinct for distinct `i`, and an input that shares memory
//! with the output does so at exactly the same offsets (element-wise in place).

use crate::geometry::{Geometry, Index};
use crate::ops::{Op1, Op2, Op3, Op4};

/// An op as a kernel parameter: the padding keeps zero-sized ops from vanishing from the
/// PTX parameter list, so the host passes every kernel the same parameter shapes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OpArg<Op> {
    pub op: Op,
    pub _pad: u32,
}

impl<Op> OpArg<Op> {
    pub fn new(op: Op) -> Self {
        OpArg { op, _pad: 0 }
    }
}

#[inline(always)]
fn offsets<I: Index, const D: usize, const N: usize>(
    g: &Geometry<I, D, N>,
    i: I,
    ndim: usize,
) -> [isize; N] {
    if ndim == 0 {
        [i.to_u64() as isize; N]
    } else {
        g.offsets(i, ndim)
    }
}

/// Indices a thread handles per iteration of the scalar bodies: the fixed variants (`c`,
/// `d1`..`d3`) load the inputs of `UNROLL` elements before applying the op to any of
/// them, so several loads per thread are in flight (memory-level parallelism); the
/// generic variants keep one (their IndexToOffset is long and their code would grow).
pub const UNROLL: usize = 4;

/// Unroll factor of a scalar body with `D` compile-time dimensions.
pub const fn unroll_for(d: usize) -> usize {
    if d <= 3 {
        UNROLL
    } else {
        1
    }
}

/// Input `k`'s values at the group's valid offsets.
#[inline(always)]
unsafe fn load_group<T: Copy, const N: usize, const U: usize>(
    u: usize,
    ok: &[bool; U],
    offs: &[[isize; N]; U],
    k: usize,
    p: *const T,
) -> [core::mem::MaybeUninit<T>; U] {
    let mut v = [core::mem::MaybeUninit::uninit(); U];
    let mut j = 0;
    while j < u {
        if ok[j] {
            v[j] = core::mem::MaybeUninit::new(*p.offset(offs[j][k]));
        }
        j += 1;
    }
    v
}

macro_rules! scalar_body {
    ($(#[$doc:meta])* $name:ident, $trait:ident, $n:literal, [$($x:ident: $t:ident = $k:literal),*]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// See the module documentation.
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name<Op: $trait<O $(, $t)*>, O $(, $t: Copy)*, I: Index, const D: usize>(
            op: Op,
            n: I,
            g: &Geometry<I, D, $n>,
            ndim: usize,
            out: *mut O,
            $($x: *const $t,)*
            first: I,
            step: I,
        ) {
            const U: usize = UNROLL;
            let u = unroll_for(D);
            let mut i = first;
            while i < n {
                // Indices i, i + step, … while below n: each is formed only from one below
                // n, so with n + step within I (the planner's bound) nothing wraps.
                let mut offs = [[0isize; $n]; U];
                let mut ok = [false; U];
                let mut j = 0;
                while j < u {
                    if i < n {
                        ok[j] = true;
                        offs[j] = offsets(g, i, ndim);
                        i = i.wadd(step);
                    }
                    j += 1;
                }
                // Every input load of the group first, then the op and the stores.
                $( let $x = load_group::<$t, $n, U>(u, &ok, &offs, $k, $x); )*
                let mut j = 0;
                while j < u {
                    if ok[j] {
                        op.apply(&mut *out.offset(offs[j][0]) $(, $x[j].assume_init())*);
                    }
                    j += 1;
                }
            }
        }
    };
}

scalar_body!(
    /// `apply1`: `op(&mut x[i])`.
    apply1, Op1, 1, []
);
scalar_body!(
    /// `apply2`: `op(&mut out[i], a[i])`.
    apply2, Op2, 2, [a: A = 1]
);
scalar_body!(
    /// `apply3`: `op(&mut out[i], a[i], b[i])`.
    apply3, Op3, 3, [a: A = 1, b: B = 2]
);
scalar_body!(
    /// `apply4`: `op(&mut out[i], a[i], b[i], c[i])`.
    apply4, Op4, 4, [a: A = 1, b: B = 2, c: C = 3]
);

/// `E` elements of `T` with 16-byte alignment: loads and stores of a chunk compile to
/// 16-byte vector instructions (`ld.global.v4.b32`, …).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Chunk<T, const E: usize>(pub [T; E]);

/// Elements per thread-iteration of the vectorised variant: one 16-byte vector of the
/// smallest operand type (larger types load several vectors).
pub const fn vec_width(sizes: &[usize]) -> usize {
    let mut min = 16;
    let mut i = 0;
    while i < sizes.len() {
        if sizes[i] < min {
            min = sizes[i];
        }
        i += 1;
    }
    16 / min
}

/// Offsets of chunk `c` of the vectorised variant: contiguous when `g.ndim == 0`, else a
/// 2-D walk (rows of `g.sizes[0]` unit-stride elements, row strides `g.strides[k][1]`).
#[inline(always)]
fn chunk_offsets<const N: usize, const E: usize>(
    g: &Geometry<u32, 2, N>,
    per_row: u32,
    c: u64,
) -> [isize; N] {
    if g.ndim == 0 {
        return [(c * E as u64) as isize; N];
    }
    let c = c as u32;
    // SAFETY: the planner only picks the 2-D form with at least one chunk per row.
    unsafe { core::hint::assert_unchecked(per_row != 0) };
    let row = c / per_row;
    let col = (c - row * per_row) * E as u32;
    let mut off = [0isize; N];
    let mut k = 0;
    while k < N {
        off[k] = row.wrapping_mul(g.strides[k][1]).wrapping_add(col) as i32 as isize;
        k += 1;
    }
    off
}

#[inline(always)]
unsafe fn load<T: Copy, const E: usize>(p: *const T) -> [T; E] {
    (*(p as *const Chunk<T, E>)).0
}

macro_rules! vec_body {
    ($(#[$doc:meta])* $name:ident, $scalar:ident, $trait:ident, $n:literal, $reads:expr,
     [$($x:ident: $t:ident = $k:literal),*]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As for the scalar bodies; in addition every operand's base pointer is 16-byte
        /// aligned, every row length is a multiple of `E` and every row stride keeps rows
        /// 16-byte aligned (the launcher checks all three before choosing this variant).
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name<Op: $trait<O $(, $t)*>, O: Copy $(, $t: Copy)*, const E: usize>(
            op: Op,
            n: u64,
            g: &Geometry<u32, 2, $n>,
            out: *mut O,
            $($x: *const $t,)*
            first: u64,
            step: u64,
        ) {
            let per_row = if g.ndim == 0 { 1 } else { g.sizes[0] / E as u32 };
            let chunks = n / E as u64;
            let mut c = first;
            while c < chunks {
                let offs = chunk_offsets::<$n, E>(g, per_row, c);
                $( let $x: [$t; E] = load($x.offset(offs[$k])); )*
                let o = out.offset(offs[0]);
                // Outputs an op only writes are not loaded: zero bits are a valid value of
                // every element type (all are plain numbers).
                let mut ov: [O; E] = if $reads(&op) { load(o) } else { core::mem::zeroed() };
                let mut j = 0;
                while j < E {
                    op.apply(&mut ov[j] $(, $x[j])*);
                    j += 1;
                }
                *(o as *mut Chunk<O, E>) = Chunk(ov);
                c += step;
            }
            // The contiguous form's tail (fewer than E elements), one per thread.
            let t = chunks * E as u64 + first;
            if g.ndim == 0 && t < n {
                let i = t as isize;
                op.apply(&mut *out.offset(i) $(, *$x.offset(i))*);
            }
        }
    };
}

#[inline(always)]
fn reads_out1<Op>(_: &Op) -> bool {
    true
}
#[inline(always)]
fn reads_out2<Op: Op2<O, A>, O, A>(_: &Op) -> bool {
    Op::READS_OUT
}
#[inline(always)]
fn reads_out3<Op: Op3<O, A, B>, O, A, B>(_: &Op) -> bool {
    Op::READS_OUT
}
#[inline(always)]
fn reads_out4<Op: Op4<O, A, B, C>, O, A, B, C>(_: &Op) -> bool {
    Op::READS_OUT
}

vec_body!(
    /// Vectorised `apply1`: each thread-iteration updates `E` consecutive elements.
    apply1_vec, apply1, Op1, 1, reads_out1, []
);
vec_body!(
    /// Vectorised `apply2`: 16-byte loads and stores of `E` consecutive elements.
    apply2_vec, apply2, Op2, 2, reads_out2::<Op, O, A>, [a: A = 1]
);
vec_body!(
    /// Vectorised `apply3`: 16-byte loads and stores of `E` consecutive elements.
    apply3_vec, apply3, Op3, 3, reads_out3::<Op, O, A, B>, [a: A = 1, b: B = 2]
);
vec_body!(
    /// Vectorised `apply4`: 16-byte loads and stores of `E` consecutive elements.
    apply4_vec, apply4, Op4, 4, reads_out4::<Op, O, A, B, C>, [a: A = 1, b: B = 2, c: C = 3]
);
