//! The order-free column kernel where rows are not whole 16-byte vectors
//! ([`cols_loose`], for sources with [`loose_cols`]).

use super::gpu::finish_group;
use super::*;
use crate::device::{shared_base, sync_threads, tile_thread};

/// The order-free column kernel ([`exact_cols`]) where rows are not whole 16-byte
/// vectors, for sources with [`loose_cols`]: [`cols_exact`]'s pieces, batches and tree
/// over blocks of `LOOSE_LANES × LOOSE_ROWS` threads and `LOOSE_LANES * E` columns
/// (`E = `[`LOOSE_COLS`]); thread `(x, y)` reads columns `x * E ..+ E` of its block one
/// element at a time (a warp: `LOOSE_LANES * E` consecutive columns of a row). Block
/// `b` is column block `b % col_blocks` (`col_blocks = ceil(kept[0] / (LOOSE_LANES *
/// E))`) of outer output `(b / col_blocks) % outer`, group `b / (col_blocks * outer)`;
/// `LOOSE_LANES * E * LOOSE_ROWS * size_of::<Acc>()` bytes of dynamic shared memory.
/// A separate function, so that [`cols_exact`]'s vector kernels stay as they were
/// (one function for both changed the registers, and the speed, of the vector kernels
/// of one-byte types: `benches/NOTES.md`, "Columns of odd widths").
///
/// This is not the slots' order: the result is the same only because the reduction is
/// [`Reduce::EXACT`], so the GPU still agrees with the CPU twin bit for bit.
///
/// # Safety
/// The [`ReduceGeometry`] invariants (the kept axis's unit stride: invariant 6); the
/// launch shape above.
#[inline(always)]
pub(super) unsafe fn cols_loose<
    S: Source<T, K>,
    T: Copy,
    const K: usize,
    const W: usize,
    const E: usize,
>(
    src: S,
    g: &ReduceGeometry,
    out: *mut OutOf<S, T, K>,
    inp: [*const T; K],
    scratch: *mut AccOf<S, T, K>,
) {
    const B: usize = EXACT_BATCH as usize;
    let p = exact_piece(W);
    let pw = p as u32;
    let (lanes, ry) = (LOOSE_LANES, LOOSE_ROWS);
    let op = src.reduction();
    let (x, y, bid) = tile_thread();
    let k0 = g.kept[0].d;
    let outer = g.outputs / k0;
    let (cb, rest) = (bid % g.col_blocks, bid / g.col_blocks);
    let (ob, grp) = (rest % outer, rest / outer);
    let c = cb * (lanes * E as u32) + x * E as u32;
    // The thread reads columns `c_in ..+ E` and writes those of them at `c` or later
    // and below `k0`. A thread whose columns pass `k0` reads the last `E` columns
    // instead (the earlier ones are its neighbour's), or, with fewer than `E` columns
    // in all, columns `0 .. k0` (its other lanes repeat column 0's values and write
    // nothing): every lane's offset from the thread's first column is a constant.
    let c_in = if c + E as u32 <= k0 {
        c
    } else if k0 >= E as u32 {
        k0 - E as u32
    } else {
        0
    };
    // Lanes that read their own column (`E` but for fewer than `E` columns in all).
    let live = if k0 - c_in < E as u32 {
        k0 - c_in
    } else {
        E as u32
    };
    let (oo, io) = g.kept_offsets::<K>(c_in + k0 * ob);
    let (lo, len) = g.group(grp);
    // SAFETY (all reads): invariant 3 for every column read and every index below `len`
    // of this group.
    let base: [*const T; K] = core::array::from_fn(|k| unsafe { inp[k].offset(io[k]) });
    let s0: [u32; K] = core::array::from_fn(|k| g.red_strides[k][0]);

    // The inputs' vectors at piece `q`'s row `j` (`q * P + j < len`).
    let piece = |q: u32| -> [*const T; K] {
        let off = g.red_offset2::<K>(lo + q * pw);
        core::array::from_fn(|k| unsafe { base[k].offset(off[k]) })
    };
    let read = |ptr: &[*const T; K], j: usize| -> [[T; E]; K] {
        core::array::from_fn(|k| unsafe {
            let q = ptr[k].offset((j as u32).wrapping_mul(s0[k]) as i32 as isize);
            // Lane `l < live` reads column `c_in + l < k0`, `l` elements on (the kept
            // axis is unit-stride: invariant 6).
            let v0 = *q;
            core::array::from_fn(|l| if (l as u32) < live { *q.add(l) } else { v0 })
        })
    };
    let mut acc = [op.placeholder(); E];
    // Folds row `j` of the thread's piece `t`, values `v`, into every column. (LLVM
    // inlines it at each call; the same fold written as a macro made rustc's work on
    // the 22 instances take twice as long.)
    let fold = |acc: &mut [AccOf<S, T, K>; E], v: &[[T; E]; K], t: u32, j: usize| {
        let i = lo + (y + ry * t) * pw + j as u32;
        unrolled!(const E, |l| {
            let x = src.item(core::array::from_fn(|k| v[k][l]));
            acc[l] = if t == 0 && j == 0 {
                op.first(x, i)
            } else {
                op.fold(acc[l], x, i)
            };
        });
    };
    let nb = B / p;
    let mut t = 0;
    // Whole batches: the thread's next `nb` pieces end inside the group.
    while (y + ry * (t + nb as u32 - 1) + 1) * pw <= len {
        let mut v = [core::mem::MaybeUninit::<[[T; E]; K]>::uninit(); B];
        unrolled!(const B / exact_piece(W), |b| {
            let ptr = piece(y + ry * (t + b as u32));
            unrolled!(const exact_piece(W), |j| { v[b * p + j] = core::mem::MaybeUninit::new(read(&ptr, j)) });
        });
        unrolled!(const B / exact_piece(W), |b| {
            unrolled!(const exact_piece(W), |j| {
                // SAFETY: the loop above wrote every `v[b * p + j]`.
                fold(&mut acc, unsafe { &v[b * p + j].assume_init() }, t + b as u32, j);
            });
        });
        t += nb as u32;
    }
    // The last, partial batch: every row below `len`.
    unrolled!(const B / exact_piece(W), |b| {
        let q = y + ry * (t + b as u32);
        if q * pw < len {
            let ptr = piece(q);
            unrolled!(const exact_piece(W), |j| {
                if q * pw + (j as u32) < len {
                    fold(&mut acc, &read(&ptr, j), t + b as u32, j);
                }
            });
        }
    });
    let sm = shared_base() as *mut AccOf<S, T, K>;
    // Thread `(x, y)`'s column `l` at `y * lanes * E + x * E + l`.
    let at = |yy: u32, l: usize| ((yy * lanes + x) * E as u32) as usize + l;
    // SAFETY: `y < rows`, `x < lanes`: inside the shared array.
    unrolled!(const E, |l| { unsafe { *sm.add(at(y, l)) = acc[l] } });
    sync_threads();
    // The levels over `y`; thread `y + s` holds values when its first piece starts
    // inside the group.
    let mut s = ry / 2;
    while s >= 1 {
        if y < s && (y + s) * pw < len {
            unrolled!(const E, |l| {
                // SAFETY: rows `y` and `y + s < rows` of the thread's columns.
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
        unrolled!(const E, |l| {
            let cl = c_in + l as u32;
            if cl >= c && cl < k0 {
                let ool = oo + (l as u32).wrapping_mul(g.kept_strides[0][0]) as i32 as isize;
                // SAFETY: invariants 3 and 4 (output `cl + k0 * ob`, whose offset is
                // `ool`; each column is written by the one thread whose `c ..+ E` holds
                // it).
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
