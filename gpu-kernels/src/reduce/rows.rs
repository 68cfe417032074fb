//! The row kernel (`<family>_r`): the reduced axis unit-stride, `1 << rt` threads a
//! group folding their slots in registers, then the segment trees.

use super::gpu::{finish_group, fold_lanes, segment_tree};
use super::*;
use crate::device::{load_v4, shared_base, tile_thread};

/// The row kernel: `SLOTS` threads a block, `1 << rt` threads a group (`rt =
/// `[`row_threads`]`(n, w)`), each holding `M = (1 << row_shift) >> rt <= ROW_SLOTS`
/// slots. Block `b` reduces (output, group) pairs `p = b * (SLOTS >> rt) ..+ SLOTS >>
/// rt` (output `p / groups`, group `p % groups`; pairs past the last fold nothing),
/// thread `t` of a pair's threads folding slots `t + (1 << rt) * m`, `m < M`: the
/// chunks of slot `s` are `s, s + SLOTS, …` (a group of more than `SLOTS` chunks has
/// `row_shift == SLOT_BITS`). A pass reads one chunk of each slot as 16-byte vectors,
/// loads first: with [`LONG_ROW_SLOTS`] slots a thread (long rows), two whole passes at
/// a time, then one pass at a time, `M` loads, each slot's chunk guarded (whole or
/// absent); the group's last,
/// partial chunk at the end, element by element. The halving tree's levels of
/// distance `1 << rt` and up fold in registers, the others in [`segment_tree`].
/// `SLOTS * size_of::<Acc>()` bytes of dynamic shared memory.
///
/// # Safety
/// The [`ReduceGeometry`] invariants; the launch shape above.
#[inline(always)]
pub unsafe fn rows<S: Source<T, K>, T: Copy, const K: usize, const W: usize>(
    src: S,
    g: &ReduceGeometry,
    out: *mut OutOf<S, T, K>,
    inp: [*const T; K],
    scratch: *mut AccOf<S, T, K>,
) {
    const MR: usize = ROW_SLOTS as usize;
    const LM: usize = LONG_ROW_SLOTS as usize;
    const BATCH: usize = 2;
    let op = src.reduction();
    let (tid, _, bid) = tile_thread();
    let w = W as u32;
    let rt = row_threads(g.n, w);
    // At most `MR` (invariant 8: `row_shift == row_shift(n, w)`).
    let m_used = 1usize << (g.row_shift - rt);
    let tpr = 1u32 << rt;
    let t = tid & (tpr - 1);
    let pair = (bid << (SLOT_BITS - rt)) + (tid >> rt);
    let (o, grp) = (pair / g.groups, pair % g.groups);
    // Invariant 8: only the last block has pairs past the last; theirs read nothing
    // and write nothing, and their offsets are the last output's (in bounds).
    let live = o < g.outputs;
    let (lo, len) = g.group(grp);
    let (oo, io) = g.kept_offsets::<K>(if live { o } else { g.outputs - 1 });
    // SAFETY (all reads): invariant 3 for every index below `len` of this group.
    let base: [*const T; K] = core::array::from_fn(|k| unsafe { inp[k].offset(io[k]) });
    let step = SLOTS * w;
    // The first chunk of the thread's slot `m`.
    let first = |m: usize| (t + tpr * m as u32) * w;
    let mut acc = [op.placeholder(); MR];
    // Writes `a` to the accumulator of slot `m` (a run-time `m`: selects, no copies).
    let set = |acc: &mut [AccOf<S, T, K>; MR], m: usize, a: AccOf<S, T, K>| {
        unrolled!(MR, |mm| {
            if mm == m {
                acc[mm] = a;
            }
        });
    };
    if live && g.flags & VEC_ROWS != 0 {
        // Invariant 5: `lo` and every chunk start are multiples of `w`: aligned vectors.
        let at = |k: usize, c: u32| unsafe { base[k].add((lo + c) as usize) };
        let vec =
            |c: u32| -> [[T; W]; K] { core::array::from_fn(|k| unsafe { load_v4(at(k, c)) }) };
        let one = |c: u32| src.item(core::array::from_fn(|k| unsafe { *at(k, c) }));
        // Slot `m`'s whole chunk at `c` folded into `a`: the first element starts the
        // slot on the first pass (one select; the other lanes are one copy).
        let fold_chunk = |a: AccOf<S, T, K>, x: &[[T; W]; K], c: u32, pass: u32| {
            let x0 = src.item(core::array::from_fn(|k| x[k][0]));
            let a = if pass == 0 {
                op.first(x0, lo + c)
            } else {
                op.fold(a, x0, lo + c)
            };
            fold_lanes(&src, &op, a, x, lo + c, 1)
        };
        let whole = len / w * w;
        let mut pass = 0;
        if m_used == LM {
            // Long rows (`LONG_ROW_SLOTS` slots a thread): `BATCH` whole passes at a
            // time, every load first.
            while pass + BATCH as u32 * step <= whole {
                let mut v = [[core::mem::MaybeUninit::<[[T; W]; K]>::uninit(); LM]; BATCH];
                unrolled!(BATCH, |b| {
                    unrolled!(LM, |m| {
                        let c = pass + b as u32 * step + first(m);
                        v[b][m] = core::mem::MaybeUninit::new(vec(c));
                    });
                });
                unrolled!(BATCH, |b| {
                    let p = pass + b as u32 * step;
                    unrolled!(LM, |m| {
                        // SAFETY: the load phase wrote every `v[b][m]`.
                        let x = unsafe { v[b][m].assume_init() };
                        acc[m] = fold_chunk(acc[m], &x, p + first(m), p);
                    });
                });
                pass += BATCH as u32 * step;
            }
        }
        // The other passes: slot `m`'s chunk whole or absent.
        while pass < whole {
            let mut v = [core::mem::MaybeUninit::<[[T; W]; K]>::uninit(); MR];
            unrolled!(MR, |m| {
                let c = pass + first(m);
                if m < m_used && c < whole {
                    v[m] = core::mem::MaybeUninit::new(vec(c));
                }
            });
            unrolled!(MR, |m| {
                let c = pass + first(m);
                if m < m_used && c < whole {
                    // SAFETY: written above.
                    acc[m] = fold_chunk(acc[m], unsafe { &v[m].assume_init() }, c, pass);
                }
            });
            pass += step;
        }
        // The group's last chunk, partial: its slot's last, on that slot's thread.
        if whole < len {
            let slot = (whole / w) % SLOTS;
            if slot & (tpr - 1) == t {
                let m = (slot >> rt) as usize;
                let mut a = acc[0];
                unrolled!(MR, |mm| {
                    if mm == m {
                        a = acc[mm];
                    }
                });
                a = if whole < step {
                    op.first(one(whole), lo + whole)
                } else {
                    op.fold(a, one(whole), lo + whole)
                };
                let mut c = whole + 1;
                while c < len {
                    a = op.fold(a, one(c), lo + c);
                    c += 1;
                }
                set(&mut acc, m, a);
            }
        }
    } else if live {
        // Any reduced layout: element by element, slot by slot (one copy of the loop).
        let at = |q: u32| {
            let off = g.red_offset::<K>(lo + q);
            src.item(core::array::from_fn(|k| unsafe { *base[k].offset(off[k]) }))
        };
        let mut m = 0;
        while m < m_used {
            let mut c = first(m);
            if c < len {
                let mut a = op.first(at(c), lo + c);
                let mut j = 1;
                loop {
                    while j < w && c + j < len {
                        a = op.fold(a, at(c + j), lo + c + j);
                        j += 1;
                    }
                    c += step;
                    if c >= len {
                        break;
                    }
                    j = 0;
                }
                set(&mut acc, m, a);
            }
            m += 1;
        }
    }
    let used = {
        let u = len.div_ceil(w);
        if u < SLOTS {
            u
        } else {
            SLOTS
        }
    };
    // The tree's levels of slot distance `tpr * h`, `h < m_used`, in registers: slot
    // `t + tpr * m` takes slot `t + tpr * (m + h)` where that received chunks.
    unrolled!(2, |lv| {
        let h = (MR / 2) >> lv;
        if h < m_used {
            unrolled!(MR / 2, |m| {
                if m < h && t + tpr * ((m + h) as u32) < used {
                    acc[m] = op.combine(acc[m], acc[m + h]);
                }
            });
        }
    });
    let sm = shared_base() as *mut AccOf<S, T, K>;
    // SAFETY: every thread calls it with the same `rt <= SLOT_BITS` (invariant 8);
    // `tid < SLOTS`, the shared array's length; the lower levels start at `tpr / 2`,
    // as the order's tree over `1 << row_shift` slots continues below `tpr`.
    let v = unsafe { segment_tree(&op, sm, acc[0], tid, rt, used) };
    if live && t == 0 {
        // SAFETY: invariants 3 and 4.
        unsafe { finish_group(&op, g, out, scratch, o, grp, oo, len, v) };
    }
}
