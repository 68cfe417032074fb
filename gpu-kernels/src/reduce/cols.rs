//! The column kernel (`<family>_k`): a kept axis unit-stride. It runs the order-free
//! kernels ([`cols_exact`], [`cols_loose`]) for the sources that take them, else the slot
//! kernel ([`cols_body`]).

use super::cols_exact::cols_exact;
use super::cols_loose::cols_loose;
use super::slot::cols_body;
use super::*;

/// The column kernel: blocks of `COL_X / V × COL_Y * V` threads over `COL_X` columns;
/// thread `(x, y)` holds columns `x * V ..+ V` of its block and, in each, slots
/// `y + COL_Y * V * m` for `m < M = SLOTS / (COL_Y * V)` (`M * V` accumulators: 16).
/// Block `b` is column block `b % col_blocks` of outer output `(b / col_blocks) %
/// outer`, group `b / (col_blocks * outer)`. `COL_X * COL_Y * V * size_of::<Acc>()`
/// bytes of dynamic shared memory. With [`VEC_COLS`] a thread reads its `V` columns as
/// one 16-byte vector, else one element at a time.
///
/// The halving tree over a column's slots pairs slot `s` with `s + h`: the levels of
/// `m` fold in registers, those of `y` in shared memory, one level per barrier.
///
/// Sources with [`exact_cols`] take [`cols_exact`] instead: under [`VEC_COLS`] with
/// `E = `[`exact_vec`]`(size_of::<T>())` columns a thread read as vectors, otherwise
/// where [`loose_cols`] with [`LOOSE_COLS`] columns a thread read as elements (and
/// this kernel's element reads where not).
///
/// # Safety
/// The [`ReduceGeometry`] invariants (`kept[0]` the input's unit-stride axis is a
/// performance matter only, except under [`VEC_COLS`]: invariant 7, with `v = E` for
/// sources with [`exact_cols`]); the launch shape above, or [`cols_exact`]'s for those
/// sources.
#[inline(always)]
pub unsafe fn cols<
    S: Source<T, K>,
    T: Copy,
    const K: usize,
    const W: usize,
    const V: usize,
    const E: usize,
>(
    src: S,
    g: &ReduceGeometry,
    out: *mut OutOf<S, T, K>,
    inp: [*const T; K],
    scratch: *mut AccOf<S, T, K>,
) {
    if !S::COLUMNS {
        // The host never launches it (`Source::COLUMNS`); nothing is instantiated.
        // SAFETY: stops the kernel.
        unsafe { core::arch::nvptx::trap() };
    }
    // SAFETY (all): the caller's contract; `VEC_COLS` only where invariant 7 holds
    // (with `v = E` for exact sources).
    if const { exact_cols::<S, T, K>() } {
        if g.flags & VEC_COLS != 0 {
            unsafe { cols_exact::<S, T, K, W, E>(src, g, out, inp, scratch) }
        } else if const { loose_cols::<S, T, K>() } {
            const C: usize = LOOSE_COLS as usize;
            unsafe { cols_loose::<S, T, K, W, C>(src, g, out, inp, scratch) }
        } else {
            unsafe { cols_body::<S, T, K, W, V, false>(src, g, out, inp, scratch) }
        }
    } else if V > 1 && g.flags & VEC_COLS != 0 {
        unsafe { cols_body::<S, T, K, W, V, true>(src, g, out, inp, scratch) }
    } else {
        unsafe { cols_body::<S, T, K, W, V, false>(src, g, out, inp, scratch) }
    }
}
