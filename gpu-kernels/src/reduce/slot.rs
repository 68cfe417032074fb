//! The slot column kernel ([`cols_body`]): the library's order over columns, 256 slots a
//! group each folding its chunks, then the halving tree; its reads as vectors or elements.

use super::gpu::finish_group;
use super::*;
use crate::device::{load_v4, shared_base, sync_threads, tile_thread};

/// [`cols`], with its reads as vectors (`VEC`) or elements.
#[inline(always)]
pub(super) unsafe fn cols_body<
    S: Source<T, K>,
    T: Copy,
    const K: usize,
    const W: usize,
    const V: usize,
    const VEC: bool,
>(
    src: S,
    g: &ReduceGeometry,
    out: *mut OutOf<S, T, K>,
    inp: [*const T; K],
    scratch: *mut AccOf<S, T, K>,
) {
    // Accumulators per thread, `M` slots of `V` columns.
    const A: usize = (SLOTS / COL_Y) as usize;
    let m_slots = A / V;
    let cy = COL_Y * V as u32;
    let op = src.reduction();
    let (x, y, bid) = tile_thread();
    let k0 = g.kept[0].d;
    let outer = g.outputs / k0;
    let (cb, rest) = (bid % g.col_blocks, bid / g.col_blocks);
    let (ob, grp) = (rest % outer, rest / outer);
    let c = cb * COL_X + x * V as u32;
    // The thread's first column, inside the kept axis: threads past the last column
    // read the last columns' elements (in bounds; under `VEC_COLS`, `k0` is a multiple
    // of `V`, so this is a whole aligned vector) and write nothing. Column `c + j`
    // reads column `min(c + j, k0 - 1)`.
    let c_in = if c < k0 {
        c
    } else {
        (k0 - 1) / V as u32 * V as u32
    };
    let o = c_in + k0 * ob;
    let (oo, io) = g.kept_offsets::<K>(o);
    let (lo, len) = g.group(grp);
    // SAFETY (all reads): invariant 3 for every column read and every index below
    // `len` of this group.
    let base: [*const T; K] = core::array::from_fn(|k| unsafe { inp[k].offset(io[k]) });
    // Element offsets of the thread's columns from its first (element reads only).
    let dcol: [[isize; V]; K] = core::array::from_fn(|k| {
        core::array::from_fn(|j| {
            let cj = if c_in + (j as u32) < k0 {
                c_in + j as u32
            } else {
                k0 - 1
            };
            (cj - c_in).wrapping_mul(g.kept_strides[1 + k][0]) as i32 as isize
        })
    });
    let w = W as u32;
    let mut acc = [op.placeholder(); A];
    let s0: [u32; K] = core::array::from_fn(|k| g.red_strides[k][0]);
    // The inputs' chunks at reduced index `r` (one offset per chunk, without a branch),
    // and element `j` of such chunks, `V` columns of each input: a chunk's elements are
    // consecutive along the innermost reduced dimension (invariant 6).
    // SAFETY (callers): invariant 3 for `r + j < len`.
    let chunk_at = |r: u32| -> [*const T; K] {
        let off = g.red_offset2::<K>(lo + r);
        core::array::from_fn(|k| unsafe { base[k].offset(off[k]) })
    };
    let read = |p: &[*const T; K], j: usize| -> [[T; V]; K] {
        core::array::from_fn(|k| unsafe {
            let q = p[k].offset((j as u32).wrapping_mul(s0[k]) as i32 as isize);
            if VEC {
                // 16 aligned bytes: invariant 7.
                load_v4::<T, V>(q)
            } else if V == 1 {
                [*q; V]
            } else {
                core::array::from_fn(|l| *q.offset(dcol[k][l]))
            }
        })
    };
    // Column `l` of input values `v` (one per input), as the source's item.
    let item = |v: &[[T; V]; K], l: usize| src.item(core::array::from_fn(|k| v[k][l]));
    // Each pass reads chunk `base / step` of every slot of this thread. Whole passes
    // are straight-line code without guards, loading `b` chunks (at most 64 values)
    // before folding any, so the loads are in flight together; the last, partial pass
    // is guarded. Chunks per batch: the largest power of two with `b * W * V * K <= 64`
    // values and `b <= M` (so batches cover the slots exactly), a constant. A batch's
    // loads are one unrolled loop over its `b * W <= 64` elements (not a loop over
    // chunks holding one over elements: 16 × 16 candidate copies), so the source holds
    // 16 × 64 copies of the load, not 16 × 256 (this kernel was most of the crate's
    // MIR). The folds keep their nested loops and `b` stays a `let`: the other forms
    // tried change the code LLVM makes of some families (`benches/NOTES.md`, "Build
    // time").
    let fit = 64 / (W * V * K);
    let b: usize = if fit >= m_slots {
        m_slots
    } else {
        1 << (usize::BITS - 1 - fit.leading_zeros())
    };
    let step = SLOTS * w;
    let mut pass = 0;
    while pass + step <= len {
        unrolled!(@sel plain_cols::<S, T, K>(), A / V / col_batch(W, V, K), mb, {
            // One batch's chunks, flat (`b * W <= 64` elements of `V` columns of each
            // input), declared per batch: a `[[_; W]; M]` array of the whole pass cost
            // LLVM's SROA minutes per 1-byte family (256 slices in one alloca).
            let mut v = [core::mem::MaybeUninit::<[[T; V]; K]>::uninit(); 64];
            let mut p = [core::ptr::null::<T>(); K];
            unrolled!(wide if plain_cols::<S, T, K>(); col_batch(W, V, K) * W, |ij| {
                let (i, j) = (ij / W, ij % W);
                if j == 0 {
                    let m = mb * b + i;
                    let c0 = pass + (y + cy * m as u32) * w;
                    // SAFETY: `c0 + W <= pass + step <= len`.
                    p = chunk_at(c0);
                }
                v[i * W + j] = core::mem::MaybeUninit::new(read(&p, j));
            });
            unrolled!(@sel plain_cols::<S, T, K>(), col_batch(W, V, K), i, {
                let m = mb * b + i;
                let c0 = pass + (y + cy * m as u32) * w;
                unrolled!(if plain_cols::<S, T, K>(); W * V, |jl| {
                    let (j, l) = (jl / V, jl % V);
                    // SAFETY: the load phase above wrote every `v[i * W + j]`.
                    let x = item(unsafe { &v[i * W + j].assume_init() }, l);
                    let i = lo + c0 + j as u32;
                    let a = &mut acc[m * V + l];
                    *a = if pass == 0 && j == 0 { op.first(x, i) } else { op.fold(*a, x, i) };
                });
            }, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
            // A barrier to LLVM's scheduling (an asm block that may touch memory): the
            // next batch's loads stay after this batch's folds, so at most 64 loaded
            // values are live (merged, the 256 loads of `u8` would spill).
            // SAFETY: an empty instruction sequence.
            unsafe { core::arch::asm!("", options(nostack, preserves_flags)) };
        }, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
        pass += step;
    }
    if pass < len {
        unrolled!(if plain_cols::<S, T, K>(); A, |m| {
            if m < m_slots {
                let c0 = pass + (y + cy * m as u32) * w;
                if c0 < len {
                    let p = chunk_at(c0);
                    unrolled!(if plain_cols::<S, T, K>(); W * V, |jl| {
                        let (j, l) = (jl / V, jl % V);
                        if c0 + (j as u32) < len {
                            // SAFETY: `c0 + j < len`.
                            let x = item(&read(&p, j), l);
                            let i = lo + c0 + j as u32;
                            let a = &mut acc[m * V + l];
                            *a = if pass == 0 && j == 0 {
                                op.first(x, i)
                            } else {
                                op.fold(*a, x, i)
                            };
                        }
                    });
                }
            }
        });
    }
    // The tree's levels over `m` (slot distance `cy * h`), in registers: constant
    // indices only.
    unrolled!(if plain_cols::<S, T, K>(); 4, |lv| {
        let h = 8 >> lv;
        if h < m_slots {
            unrolled!(if plain_cols::<S, T, K>(); A, |ml| {
                let (m, l) = (ml / V, ml % V);
                if m < h && (y + cy * (m + h) as u32) * w < len {
                    acc[m * V + l] = op.combine(acc[m * V + l], acc[(m + h) * V + l]);
                }
            });
        }
    });
    let sm = shared_base() as *mut AccOf<S, T, K>;
    // Thread `(x, y)`'s column `l` at `y * COL_X + x * V + l`.
    let at = |yy: u32, l: usize| (yy * COL_X + x * V as u32) as usize + l;
    // SAFETY: `y < cy`, `x * V + l < COL_X`: inside the shared array.
    unrolled!(if plain_cols::<S, T, K>(); V, |l| { unsafe { *sm.add(at(y, l)) = acc[l] } });
    sync_threads();
    // The levels over `y` (slot distance `s`), one per barrier.
    let mut s = cy / 2;
    while s >= 1 {
        if y < s && (y + s) * w < len {
            unrolled!(if plain_cols::<S, T, K>(); V, |l| {
                // SAFETY: rows `y` and `y + s < cy` of the thread's columns.
                unsafe {
                    let a = sm.add(at(y, l));
                    *a = op.combine(*a, *sm.add(at(y + s, l)));
                }
            });
        }
        sync_threads();
        s /= 2;
    }
    if y == 0 {
        unrolled!(if plain_cols::<S, T, K>(); V, |l| {
            let cl = c + l as u32;
            if cl < k0 {
                let ool = oo + (l as u32).wrapping_mul(g.kept_strides[0][0]) as i32 as isize;
                // SAFETY: invariants 3 and 4 (output `cl + k0 * ob`, whose offset is
                // `ool`: `c_in == c` for a thread with an active column).
                unsafe {
                    finish_group(
                        &op,
                        g,
                        out,
                        scratch,
                        cl + k0 * ob,
                        grp,
                        ool,
                        len,
                        *sm.add(at(0, l)),
                    )
                };
            }
        });
    }
}
