//! The order-free column kernel over whole 16-byte row vectors ([`cols_exact`]), for the
//! reductions whose result does not depend on the order of the fold ([`exact_cols`]).

use super::gpu::finish_group;
use super::*;
use crate::device::{load_v4, shared_base, sync_threads, tile_thread};

/// The column kernel of order-free reductions ([`exact_cols`]), under [`VEC_COLS`]:
/// blocks of `EXACT_LANES × EXACT_ROWS` threads over `EXACT_LANES * E` columns (`E =
/// 16 / size_of::<T>()`); thread `(x, y)` reads columns `x * E ..+ E` of its block as
/// one 16-byte vector per row. A group's rows are pieces of `P = min(W, EXACT_BATCH)`
/// (inside one slot chunk, so inside the innermost reduced dimension: invariant 6);
/// thread `y` folds pieces `y, y + EXACT_ROWS, …`, `EXACT_BATCH / P` of them (8 rows)
/// loaded before any is folded. The threads' values then combine over `y` in shared
/// memory, one level per barrier. Block `b` is column block `b % col_blocks`
/// (`col_blocks = ceil(kept[0] / (EXACT_LANES * E))`) of outer output `(b /
/// col_blocks) % outer`, group `b / (col_blocks * outer)`; `EXACT_LANES * E *
/// EXACT_ROWS * size_of::<Acc>()` bytes of dynamic shared memory.
///
/// This is not the slots' order: the result is the same only because the reduction is
/// [`Reduce::EXACT`], so the GPU still agrees with the CPU twin bit for bit.
///
/// # Safety
/// The [`ReduceGeometry`] invariants with [`VEC_COLS`] (invariant 7 with `v = E`); the
/// launch shape above.
#[inline(always)]
pub(super) unsafe fn cols_exact<
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
    let ry = EXACT_ROWS;
    let op = src.reduction();
    let (x, y, bid) = tile_thread();
    let k0 = g.kept[0].d;
    let outer = g.outputs / k0;
    let (cb, rest) = (bid % g.col_blocks, bid / g.col_blocks);
    let (ob, grp) = (rest % outer, rest / outer);
    let c = cb * (EXACT_LANES * E as u32) + x * E as u32;
    // Threads past the last column read the last vector (`k0` is a multiple of `E`:
    // invariant 7) and write nothing.
    let c_in = if c < k0 { c } else { k0 - E as u32 };
    let (oo, io) = g.kept_offsets::<K>(c_in + k0 * ob);
    let (lo, len) = g.group(grp);
    // SAFETY (all reads): invariant 3 for every column read and every index below `len`
    // of this group; 16 aligned bytes at each (invariant 7).
    let base: [*const T; K] = core::array::from_fn(|k| unsafe { inp[k].offset(io[k]) });
    let s0: [u32; K] = core::array::from_fn(|k| g.red_strides[k][0]);
    // The inputs' vectors at piece `q`'s row `j` (`q * P + j < len`).
    let piece = |q: u32| -> [*const T; K] {
        let off = g.red_offset2::<K>(lo + q * pw);
        core::array::from_fn(|k| unsafe { base[k].offset(off[k]) })
    };
    let read = |ptr: &[*const T; K], j: usize| -> [[T; E]; K] {
        core::array::from_fn(|k| unsafe {
            load_v4::<T, E>(ptr[k].offset((j as u32).wrapping_mul(s0[k]) as i32 as isize))
        })
    };
    let mut acc = [op.placeholder(); E];
    // One input of one-byte elements whose reduction folds them four to a word: `E`
    // (16) columns in four packed accumulators (the reduction is exact: any order).
    let bytes = S::BYTE_WORDS && K == 1 && E == 16 && core::mem::size_of::<T>() == 1;
    let mut packed = [op.bytes_start(); 4];
    let fold_packed = |packed: &mut [u32; 4], v: &[[T; E]; K]| {
        // SAFETY: `bytes`: `v[0]` is 16 one-byte elements, the four words' bytes.
        let w: [u32; 4] = unsafe { core::mem::transmute_copy(&v[0]) };
        unrolled!(4, |q| { packed[q] = op.fold_bytes(packed[q], w[q]) });
    };
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
                let x = unsafe { &v[b * p + j].assume_init() };
                if bytes {
                    fold_packed(&mut packed, x);
                } else {
                    fold(&mut acc, x, t + b as u32, j);
                }
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
                    if bytes {
                        fold_packed(&mut packed, &read(&ptr, j));
                    } else {
                        fold(&mut acc, &read(&ptr, j), t + b as u32, j);
                    }
                }
            });
        }
    });
    if bytes {
        // Column `l`'s accumulator is byte `l % 4` of word `l / 4` (little-endian).
        unrolled!(const E, |l| { acc[l] = op.byte_acc(packed[l / 4], (l % 4) as u32) });
    }
    let sm = shared_base() as *mut AccOf<S, T, K>;
    // Thread `(x, y)`'s column `l` at `y * EXACT_LANES * E + x * E + l`.
    let at = |yy: u32, l: usize| ((yy * EXACT_LANES + x) * E as u32) as usize + l;
    // SAFETY: `y < EXACT_ROWS`, `x < EXACT_LANES`: inside the shared array.
    unrolled!(const E, |l| { unsafe { *sm.add(at(y, l)) = acc[l] } });
    sync_threads();
    // The levels over `y`; thread `y + s` holds values when its first piece starts
    // inside the group.
    let mut s = ry / 2;
    while s >= 1 {
        if y < s && (y + s) * pw < len {
            unrolled!(const E, |l| {
                // SAFETY: rows `y` and `y + s < EXACT_ROWS` of the thread's columns.
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
