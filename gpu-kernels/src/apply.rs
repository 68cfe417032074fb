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

/// `apply1`: `op(&mut x[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
pub unsafe fn apply1<Op: Op1<T>, T, I: Index, const D: usize>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 1>,
    ndim: usize,
    x: *mut T,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [xo] = offsets(g, i, ndim);
        op.apply(&mut *x.offset(xo));
        i = i.wadd(step);
    }
}

/// `apply2`: `op(&mut out[i], a[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply2<Op: Op2<O, A>, O, A: Copy, I: Index, const D: usize>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 2>,
    ndim: usize,
    out: *mut O,
    a: *const A,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [oo, ao] = offsets(g, i, ndim);
        let av = *a.offset(ao);
        op.apply(&mut *out.offset(oo), av);
        i = i.wadd(step);
    }
}

/// `apply3`: `op(&mut out[i], a[i], b[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply3<Op: Op3<O, A, B>, O, A: Copy, B: Copy, I: Index, const D: usize>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 3>,
    ndim: usize,
    out: *mut O,
    a: *const A,
    b: *const B,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [oo, ao, bo] = offsets(g, i, ndim);
        let (av, bv) = (*a.offset(ao), *b.offset(bo));
        op.apply(&mut *out.offset(oo), av, bv);
        i = i.wadd(step);
    }
}

/// `apply4`: `op(&mut out[i], a[i], b[i], c[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply4<
    Op: Op4<O, A, B, C>,
    O,
    A: Copy,
    B: Copy,
    C: Copy,
    I: Index,
    const D: usize,
>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 4>,
    ndim: usize,
    out: *mut O,
    a: *const A,
    b: *const B,
    c: *const C,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [oo, ao, bo, co] = offsets(g, i, ndim);
        let (av, bv, cv) = (*a.offset(ao), *b.offset(bo), *c.offset(co));
        op.apply(&mut *out.offset(oo), av, bv, cv);
        i = i.wadd(step);
    }
}
