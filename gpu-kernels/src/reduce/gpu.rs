//! Device code the reduction kernels share: the fold of one position of a source's vectors
//! ([`fold_lanes`]), the halving trees over a block's shared memory ([`block_tree`],
//! [`segment_tree`]), and the end of a group ([`finish_group`]). The module keeps the name
//! (`reduce::gpu`) that held every kernel body: the module paths of these functions order
//! the image's code (`reduce`'s module documentation).

use super::*;
use crate::device::{shfl_down, sync_threads, WARP};

/// Folds position `i + j` of the `K` vectors `v` into `acc`, `j` in `from..W`.
#[inline(always)]
pub(super) fn fold_lanes<S: Source<T, K>, T: Copy, const K: usize, const W: usize>(
    src: &S,
    op: &S::R,
    mut acc: AccOf<S, T, K>,
    v: &[[T; W]; K],
    i: u32,
    from: usize,
) -> AccOf<S, T, K> {
    let mut j = from;
    while j < W {
        acc = op.fold(
            acc,
            src.item(core::array::from_fn(|k| v[k][j])),
            i + j as u32,
        );
        j += 1;
    }
    acc
}

/// Halving tree over `used` values in shared memory `sm` (`SLOTS` or fewer), by a
/// block of `threads` threads; every thread must call it. The result is `sm[0]`.
#[inline(always)]
pub(super) unsafe fn block_tree<R: Reduce<T>, T>(
    op: &R,
    sm: *mut R::Acc,
    used: u32,
    start: u32,
    threads: u32,
    tid: u32,
) {
    let mut s = start;
    while s >= 1 {
        let mut l = tid;
        while l < s {
            if l + s < used {
                // SAFETY: `l + s < used`, within the caller's shared array.
                unsafe {
                    *sm.add(l as usize) = op.combine(*sm.add(l as usize), *sm.add((l + s) as usize))
                };
            }
            l += threads;
        }
        sync_threads();
        s /= 2;
    }
}

/// The halving tree over the slots of thread `tid`'s segment of `1 << shift` threads
/// (threads `tid - t ..+ 1 << shift`, `t = tid % (1 << shift)`), thread `t` holding slot
/// `t`'s value `v` (its own slots' subtree, the levels above folded in registers); the
/// first `used` slots take part. From level `(1 << shift) / 2` down, pairing as
/// [`tree`] does: levels of at least [`WARP`] threads in shared memory, a block barrier
/// before each; the lower ones (a segment of at most `WARP` threads lies in one warp:
/// segments are aligned) by warp shuffles, [`AccWords::WORDS`] per level. Thread `t ==
/// 0` returns the tree's value. Every thread of the block calls it with the same
/// `shift <= SLOT_BITS`.
///
/// # Safety
/// `sm` holds `SLOTS` accumulators of this block's shared memory; `tid < SLOTS`.
#[inline(always)]
pub(super) unsafe fn segment_tree<R: Reduce<T>, T>(
    op: &R,
    sm: *mut R::Acc,
    mut v: R::Acc,
    tid: u32,
    shift: u32,
    used: u32,
) -> R::Acc {
    let t = tid & ((1 << shift) - 1);
    let mut s = (1u32 << shift) / 2;
    if s >= WARP {
        // SAFETY (every access): `seg + t + s` with `t + s < 1 << shift` stays in the
        // thread's segment, inside the `SLOTS` accumulators.
        let seg = unsafe { sm.add((tid - t) as usize) };
        unsafe { *sm.add(tid as usize) = v };
        sync_threads();
        while s >= WARP {
            if t < s {
                if t + s < used {
                    v = op.combine(v, unsafe { *seg.add((t + s) as usize) });
                }
                unsafe { *seg.add(t as usize) = v };
            }
            sync_threads();
            s /= 2;
        }
    }
    while s >= 1 {
        let w = v.to_words();
        let mut o = [0u32; 4];
        unrolled!(4, |i| {
            if i < R::Acc::WORDS {
                // SAFETY: every lane runs this loop with the same `s` (`shift` is the
                // block's); lane `tid % WARP + s` is thread `t + s` of the same segment
                // where `t < s` (the only lanes that use it).
                o[i] = unsafe { shfl_down(w[i], s) };
            }
        });
        if t < s && t + s < used {
            v = op.combine(v, R::Acc::from_words(o));
        }
        s /= 2;
    }
    v
}

/// Writes a group's value: the output itself for one group (or the empty value), else
/// the scratch slot of `(o, grp)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn finish_group<R: Reduce<I>, I>(
    op: &R,
    g: &ReduceGeometry,
    out: *mut R::Out,
    scratch: *mut R::Acc,
    o: u32,
    grp: u32,
    oo: isize,
    len: u32,
    v: R::Acc,
) {
    if g.groups == 1 {
        let r = if len == 0 {
            op.empty()
        } else {
            Some(op.finish(v, g.n))
        };
        if let Some(r) = r {
            // SAFETY: invariant 3.
            unsafe { *out.offset(oo) = r };
        }
    } else {
        // SAFETY: invariant 4.
        unsafe { *scratch.add((o * g.groups + grp) as usize) = v };
    }
}
