//! The tiled variant, for operands that disagree on their fastest axis (`A + Bᵀ`, a
//! permuted copy). Axis 0 of the geometry is the output's unit-stride axis, axis 1 a staged
//! input's unit-stride axis, axes 2..ndim are a batch. A block of `32 × rows` threads covers
//! one `x × y` tile of axes (0, 1) of one batch element ([`TileShape`](crate::TileShape):
//! 64 × 64 for apply2, 32 × 32 for apply3; both extents are multiples of a warp):
//! 1. every input's values for the thread are loaded into registers first, so all of a
//!    tile's global loads are in flight together: staged inputs with consecutive threads
//!    along axis 1 (coalesced for them), the others along axis 0. Then staged values go to
//!    shared memory, padded to `y + 1` columns so neither phase has bank conflicts;
//! 2. after the barrier, consecutive threads walk axis 0 and write the output along its
//!    unit-stride axis, staged inputs read back from shared memory.
//!
//! The helpers take the parts of the tile shape they use as const parameters: `X`, `Y`, `R`
//! (rows of threads) and `V` (values per thread and input, `X · Y / (32 · R)`).
//!
//! When every operand has 2-byte elements the kernels take the **paired form**
//! ([`TILE_PAIRED`](crate::TILE_PAIRED), see [`paired`]): the same two phases, but each
//! thread moves pairs of elements along the operand's unit-stride axis, one 4-byte access
//! per pair where the operand's pairs are aligned words.

use crate::device::{shared_base, sync_threads, tile_thread};
use crate::geometry::Geometry;
use crate::ops::{Op2, Op3};
use crate::{FastDiv, TileArg, PAIR_ALIGNED, TILE2, TILE3, TILE_PAIRED};
use core::mem::{size_of, transmute_copy, MaybeUninit};

/// Offsets of element `(x, y)` of this block's batch element.
#[inline(always)]
fn at<const N: usize>(g: &Geometry<u32, 5, N>, base: &[u32; N], k: usize, x: u32, y: u32) -> isize {
    base[k]
        .wrapping_add(x.wrapping_mul(g.strides[k][0]))
        .wrapping_add(y.wrapping_mul(g.strides[k][1])) as i32 as isize
}

/// This block's tile origin and the offsets of its batch element.
#[inline(always)]
fn block_origin<const N: usize, const X: u32, const Y: u32>(
    g: &Geometry<u32, 5, N>,
    t: &TileArg,
    block: u32,
) -> (u32, u32, [u32; N]) {
    let (rest, bx) = t.tiles_x.divmod(block);
    let (mut batch, by) = t.tiles_y.divmod(rest);
    let mut base = [0u32; N];
    // Batch axes 2, 3, 4 by constant index, so `sizes[d]` and `strides[k][d]` stay constant
    // offsets into parameter space (a run-time index copies the Geometry to local memory).
    let mut axis = |d: usize, div: Option<&FastDiv>| {
        if d < g.ndim as usize {
            // The last axis in use (at the latest axis 4) takes the rest of the block index.
            let i = match div {
                Some(div) if d + 1 < g.ndim as usize => {
                    let (q, r) = div.divmod(batch);
                    batch = q;
                    r
                }
                _ => batch,
            };
            let mut k = 0;
            while k < N {
                base[k] = base[k].wrapping_add(i.wrapping_mul(g.strides[k][d]));
                k += 1;
            }
        }
    };
    axis(2, Some(&t.batch[0]));
    axis(3, Some(&t.batch[1]));
    axis(4, None);
    (bx * X, by * Y, base)
}

/// Phase-1 position `i` of a staged input, in tile coordinates: consecutive threads along
/// axis 1 (its unit-stride axis), `Y / 32` warp-wide column groups, rows `ty + R · j`.
#[inline(always)]
fn phase1<const Y: u32, const R: u32>(tx: u32, ty: u32, i: usize) -> (u32, u32) {
    let (i, ys) = (i as u32, Y / 32);
    (ty + R * (i / ys), tx + 32 * (i % ys))
}

/// Phase-2 position `i` of the thread, in tile coordinates: consecutive threads along axis
/// 0 (the output's unit-stride axis), `X / 32` warp-wide column groups, rows `ty + R · j`.
#[inline(always)]
fn phase2<const X: u32, const R: u32>(tx: u32, ty: u32, i: usize) -> (u32, u32) {
    let (i, xs) = (i as u32, X / 32);
    (tx + 32 * (i % xs), ty + R * (i / xs))
}

/// Input `k`'s `V` values for this thread, all loaded before any is used, so every global
/// load of the tile is in flight together (a shared-memory store between two loads would
/// make the second wait for the first: the store may alias the global buffer). A staged
/// input is read at its [`phase1`] positions, any other where phase 2 uses it.
#[inline(always)]
unsafe fn load_tile<
    T: Copy,
    const N: usize,
    const X: u32,
    const Y: u32,
    const R: u32,
    const V: usize,
>(
    g: &Geometry<u32, 5, N>,
    base: &[u32; N],
    k: usize,
    src: *const T,
    staged: bool,
    (x0, y0, tx, ty): (u32, u32, u32, u32),
) -> [MaybeUninit<T>; V] {
    const { assert!(X % 32 == 0 && Y % 32 == 0 && V as u32 * 32 * R == X * Y) };
    let mut v = [MaybeUninit::uninit(); V];
    let mut i = 0;
    while i < V {
        let (px, py) = if staged {
            phase1::<Y, R>(tx, ty, i)
        } else {
            phase2::<X, R>(tx, ty, i)
        };
        let (x, y) = (x0 + px, y0 + py);
        if x < g.sizes[0] && y < g.sizes[1] {
            v[i] = MaybeUninit::new(*src.offset(at(g, base, k, x, y)));
        }
        i += 1;
    }
    v
}

/// Writes a staged input's values (from [`load_tile`]) to its shared-memory stage: tile
/// element `(px, py)` at `px · (Y + 1) + py`.
#[inline(always)]
unsafe fn stage<T: Copy, const N: usize, const Y: u32, const R: u32, const V: usize>(
    g: &Geometry<u32, 5, N>,
    v: &[MaybeUninit<T>; V],
    stage: *mut T,
    (x0, y0, tx, ty): (u32, u32, u32, u32),
) {
    let mut i = 0;
    while i < V {
        let (px, py) = phase1::<Y, R>(tx, ty, i);
        if x0 + px < g.sizes[0] && y0 + py < g.sizes[1] {
            *stage.add((px * (Y + 1) + py) as usize) = v[i].assume_init();
        }
        i += 1;
    }
}

/// Input value at phase-2 position `i` (tile coordinates `(px, py)`): from the stage, or
/// from what [`load_tile`] loaded.
#[inline(always)]
unsafe fn value<T: Copy, const Y: u32, const V: usize>(
    stage: Option<*const T>,
    pre: &[MaybeUninit<T>; V],
    (px, py): (u32, u32),
    i: usize,
) -> T {
    match stage {
        Some(s) => *s.add((px * (Y + 1) + py) as usize),
        None => pre[i].assume_init(),
    }
}

/// Tiled `apply2`, tiles of [`TILE2`].
///
/// # Safety
/// The Geometry invariants hold for every `(x, y, batch)` of the grid; the launch has
/// `32 × TILE2.rows` threads per block, `tiles_x * tiles_y * batch` blocks, and
/// `TILE2.stage_bytes(size_of::<A>())` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn apply2_tiled<Op: Op2<O, A>, O, A: Copy>(
    op: Op,
    g: &Geometry<u32, 5, 2>,
    t: &TileArg,
    out: *mut O,
    a: *const A,
) {
    if crate::pairs(&[size_of::<O>(), size_of::<A>()]) {
        let f = |o: &mut [u16; PAIR_VALUES], [a]: &[[u16; PAIR_VALUES]; 1]| {
            let mut j = 0;
            while j < PAIR_VALUES {
                let mut ov: O = transmute_copy(&o[j]);
                op.apply(&mut ov, transmute_copy(&a[j]));
                o[j] = transmute_copy(&ov);
                j += 1;
            }
        };
        return paired::<2, 1>(g, t, out.cast(), [a.cast()], Op::READS_OUT, f);
    }
    const X: u32 = TILE2.x;
    const Y: u32 = TILE2.y;
    const R: u32 = TILE2.rows;
    const V: usize = TILE2.per_thread();
    let (tx, ty, block) = tile_thread();
    let (x0, y0, base) = block_origin::<2, X, Y>(g, t, block);
    let sa = shared_base() as *mut A;
    let stage_a = t.staged & 1 != 0;
    let pos = (x0, y0, tx, ty);
    let pa = load_tile::<A, 2, X, Y, R, V>(g, &base, 1, a, stage_a, pos);
    if stage_a {
        stage::<A, 2, Y, R, V>(g, &pa, sa, pos);
    }
    sync_threads();
    let mut i = 0;
    while i < V {
        let p = phase2::<X, R>(tx, ty, i);
        let (x, y) = (x0 + p.0, y0 + p.1);
        if x < g.sizes[0] && y < g.sizes[1] {
            let av = value::<A, Y, V>(stage_a.then_some(sa as *const A), &pa, p, i);
            op.apply(&mut *out.offset(at(g, &base, 0, x, y)), av);
        }
        i += 1;
    }
}

/// Tiled `apply3`, tiles of [`TILE3`].
///
/// # Safety
/// As [`apply2_tiled`] with [`TILE3`], and `TILE3.stage_bytes(size_of::<A>()) +
/// TILE3.stage_bytes(size_of::<B>())` bytes of dynamic shared memory (input 2's stage
/// follows input 1's).
#[inline(always)]
pub unsafe fn apply3_tiled<Op: Op3<O, A, B>, O, A: Copy, B: Copy>(
    op: Op,
    g: &Geometry<u32, 5, 3>,
    t: &TileArg,
    out: *mut O,
    a: *const A,
    b: *const B,
) {
    if crate::pairs(&[size_of::<O>(), size_of::<A>(), size_of::<B>()]) {
        let f = |o: &mut [u16; PAIR_VALUES], [a, b]: &[[u16; PAIR_VALUES]; 2]| {
            let mut j = 0;
            while j < PAIR_VALUES {
                let mut ov: O = transmute_copy(&o[j]);
                op.apply(&mut ov, transmute_copy(&a[j]), transmute_copy(&b[j]));
                o[j] = transmute_copy(&ov);
                j += 1;
            }
        };
        return paired::<3, 2>(g, t, out.cast(), [a.cast(), b.cast()], Op::READS_OUT, f);
    }
    const X: u32 = TILE3.x;
    const Y: u32 = TILE3.y;
    const R: u32 = TILE3.rows;
    const V: usize = TILE3.per_thread();
    let (tx, ty, block) = tile_thread();
    let (x0, y0, base) = block_origin::<3, X, Y>(g, t, block);
    let sa = shared_base() as *mut A;
    let sb = shared_base().add(TILE3.stage_bytes(core::mem::size_of::<A>())) as *mut B;
    let (stage_a, stage_b) = (t.staged & 1 != 0, t.staged & 2 != 0);
    let pos = (x0, y0, tx, ty);
    let pa = load_tile::<A, 3, X, Y, R, V>(g, &base, 1, a, stage_a, pos);
    let pb = load_tile::<B, 3, X, Y, R, V>(g, &base, 2, b, stage_b, pos);
    if stage_a {
        stage::<A, 3, Y, R, V>(g, &pa, sa, pos);
    }
    if stage_b {
        stage::<B, 3, Y, R, V>(g, &pb, sb, pos);
    }
    sync_threads();
    let mut i = 0;
    while i < V {
        let p = phase2::<X, R>(tx, ty, i);
        let (x, y) = (x0 + p.0, y0 + p.1);
        if x < g.sizes[0] && y < g.sizes[1] {
            let av = value::<A, Y, V>(stage_a.then_some(sa as *const A), &pa, p, i);
            let bv = value::<B, Y, V>(stage_b.then_some(sb as *const B), &pb, p, i);
            op.apply(&mut *out.offset(at(g, &base, 0, x, y)), av, bv);
        }
        i += 1;
    }
}

// ------------------------------------------------------------------ paired form

const PX: u32 = TILE_PAIRED.x;
const PY: u32 = TILE_PAIRED.y;
const PR: u32 = TILE_PAIRED.rows;
/// Phase-2 pairs per thread (one pair of axis 0 in each of `WORDS` rows of axis 1).
const WORDS: usize = (PX / 2 * PY / (32 * PR)) as usize;
/// Values per thread and operand in phase 2.
const PAIR_VALUES: usize = 2 * WORDS;
/// Phase-1 pairs of rows per thread and staged input.
const ROW_PAIRS: usize = WORDS / 2;
/// Words per row of a stage: `PX / 2` pairs and one of padding.
const STAGE_ROW: u32 = PX / 2 + 1;
/// Words of one input's stage (`TILE_PAIRED.stage_bytes / 4`).
const STAGE_WORDS: usize = (PY * STAGE_ROW) as usize;
const _: () = assert!(STAGE_WORDS * 4 == TILE_PAIRED.stage_bytes(2) && PX == 64 && PY == 64);

/// `body` for `i = 0, 1, …, n − 1` (`n` a constant of at most 16) as straight-line code, so
/// that per-thread arrays indexed by `i` stay in registers. A macro rather than a function
/// taking a closure: LLVM decides whether to unroll a loop, or to inline a closure called
/// several times, by its size, and a closure left out of line takes its arrays to the stack.
macro_rules! unrolled {
    ($n:expr, |$i:ident| $body:block) => {
        unrolled!(@each $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@each $n:expr, $i:ident, $body:block, $($k:literal)*) => {{
        const { assert!($n <= 16) };
        $( if $k < $n { let $i: usize = $k; $body } )*
    }};
}

/// Whether `(x, y)` is inside the geometry's axes 0 and 1.
#[inline(always)]
fn inside<const N: usize>(g: &Geometry<u32, 5, N>, x: u32, y: u32) -> bool {
    x < g.sizes[0] && y < g.sizes[1]
}

/// The pair of operand `k` at `(x, y)` and its neighbour along axis 1 (`along_y`) or 0, the
/// first element in the low half: one 4-byte load if the operand's pairs are aligned words
/// and both are inside, else one 2-byte load for each that is inside (0 for the others).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn load_pair<const N: usize>(
    g: &Geometry<u32, 5, N>,
    base: &[u32; N],
    k: usize,
    p: *const u16,
    aligned: bool,
    along_y: bool,
    x: u32,
    y: u32,
) -> u32 {
    let (x1, y1) = if along_y { (x, y + 1) } else { (x + 1, y) };
    // The second element inside means the first is (it is not past it on either axis).
    if aligned && inside(g, x1, y1) {
        return *(p.offset(at(g, base, k, x, y)) as *const u32);
    }
    let lo = if inside(g, x, y) {
        *p.offset(at(g, base, k, x, y))
    } else {
        0
    };
    let hi = if inside(g, x1, y1) {
        *p.offset(at(g, base, k, x1, y1))
    } else {
        0
    };
    lo as u32 | (hi as u32) << 16
}

/// Writes the output pair at `(x, y)`, `(x + 1, y)`: one 4-byte store if its pairs are
/// aligned words and both are inside, else a 2-byte store for each that is inside.
#[inline(always)]
unsafe fn store_pair<const N: usize>(
    g: &Geometry<u32, 5, N>,
    base: &[u32; N],
    out: *mut u16,
    aligned: bool,
    (x, y): (u32, u32),
    w: u32,
) {
    if aligned && inside(g, x + 1, y) {
        *(out.offset(at(g, base, 0, x, y)) as *mut u32) = w;
        return;
    }
    if inside(g, x, y) {
        *out.offset(at(g, base, 0, x, y)) = w as u16;
    }
    if inside(g, x + 1, y) {
        *out.offset(at(g, base, 0, x + 1, y)) = (w >> 16) as u16;
    }
}

/// The paired form of the tiled variant for `NI` inputs (operands `1..=NI`), every operand
/// of 2-byte elements, passed as raw 16-bit values; `compute` applies the op to a thread's
/// `PAIR_VALUES` output values (loaded first when `reads_out`) and input values. Tiles of
/// `PX × PY` = 64 × 64 elements, blocks of 32 × `PR` threads:
/// 1. a staged input: thread `(tx, ty)` loads the pairs at `y = y0 + 2tx` (along axis 1,
///    its unit-stride axis) of rows `x = x0 + 2m` and `x + 1`, `m = ty + PR · j`: a warp
///    reads 128 contiguous bytes per row. An unstaged input is loaded at its phase-2
///    positions. All loads are issued before the first shared-memory store. The staged
///    2 × 2 blocks are transposed in registers into pairs along axis 0 and stored to
///    `stage[y][m ^ (y / 32)]`, rows of `STAGE_ROW` words (the XOR keeps the stores of
///    rows `2tx` and `2tx + 1` in different banks; the reads of phase 2 are a permutation
///    of one row);
/// 2. after the barrier, thread `(tx, ty)` owns the output pairs at `x = x0 + 2tx`, rows
///    `y = y0 + ty + PR · j`: it gathers their input values, applies the op in a plain loop
///    (LLVM unrolls it for cheap ops and keeps one copy of an expensive one), and stores
///    each pair as one 4-byte access where it can.
///
/// # Safety
/// As [`apply2_tiled`] with [`TILE_PAIRED`]: the Geometry invariants hold for every
/// `(x, y, batch)` of the grid; the launch has `32 × PR` threads per block and `NI` stages
/// of `TILE_PAIRED.stage_bytes(2)` bytes of dynamic shared memory; bit `PAIR_ALIGNED << k`
/// of `t.staged` is set only if every offset `at(x, y)` that the tile reads or writes as a
/// pair's first element (even `x`, or even `y` for a staged input, along the operand's
/// unit-stride axis) is even from a 4-byte aligned base.
#[inline(always)]
unsafe fn paired<const N: usize, const NI: usize>(
    g: &Geometry<u32, 5, N>,
    t: &TileArg,
    out: *mut u16,
    ins: [*const u16; NI],
    reads_out: bool,
    compute: impl FnOnce(&mut [u16; PAIR_VALUES], &[[u16; PAIR_VALUES]; NI]),
) {
    const { assert!(NI + 1 == N && size_of::<u32>() == 4) };
    let (tx, ty, block) = tile_thread();
    let (x0, y0, base) = block_origin::<N, PX, PY>(g, t, block);
    let staged = |i: usize| t.staged & (1 << i) != 0;
    let aligned = |k: usize| t.staged & (PAIR_ALIGNED << k) != 0;
    // Phase 1: every load of the tile.
    let mut rows = [[[0u32; ROW_PAIRS]; 2]; NI];
    let mut pre = [[0u32; WORDS]; NI];
    unrolled!(NI, |i| {
        let (k, src) = (i + 1, ins[i]);
        if staged(i) {
            unrolled!(ROW_PAIRS, |j| {
                let (x, y) = (x0 + 2 * (ty + PR * j as u32), y0 + 2 * tx);
                rows[i][0][j] = load_pair(g, &base, k, src, aligned(k), true, x, y);
                rows[i][1][j] = load_pair(g, &base, k, src, aligned(k), true, x + 1, y);
            });
        } else {
            unrolled!(WORDS, |j| {
                let (x, y) = (x0 + 2 * tx, y0 + ty + PR * j as u32);
                pre[i][j] = load_pair(g, &base, k, src, aligned(k), false, x, y);
            });
        }
    });
    let stages = shared_base() as *mut u32;
    unrolled!(NI, |i| {
        if staged(i) {
            let st = stages.add(i * STAGE_WORDS);
            // Rows 2tx and 2tx + 1 share `y / 32`.
            let (y, swizzle) = (2 * tx, tx >> 4);
            unrolled!(ROW_PAIRS, |j| {
                let col = (ty + PR * j as u32) ^ swizzle;
                let (r0, r1) = (rows[i][0][j], rows[i][1][j]);
                *st.add((y * STAGE_ROW + col) as usize) = (r0 & 0xffff) | (r1 << 16);
                *st.add(((y + 1) * STAGE_ROW + col) as usize) = (r0 >> 16) | (r1 & 0xffff_0000);
            });
        }
    });
    sync_threads();
    // Phase 2: gather, compute, store.
    let x = x0 + 2 * tx;
    let mut vals = [[0u16; PAIR_VALUES]; NI];
    let mut outs = [0u16; PAIR_VALUES];
    unrolled!(WORDS, |j| {
        let yl = ty + PR * j as u32;
        unrolled!(NI, |i| {
            let w = if staged(i) {
                *stages.add(i * STAGE_WORDS + (yl * STAGE_ROW + (tx ^ (yl >> 5))) as usize)
            } else {
                pre[i][j]
            };
            vals[i][2 * j] = w as u16;
            vals[i][2 * j + 1] = (w >> 16) as u16;
        });
        if reads_out {
            let w = load_pair(
                g,
                &base,
                0,
                out as *const u16,
                aligned(0),
                false,
                x,
                y0 + yl,
            );
            outs[2 * j] = w as u16;
            outs[2 * j + 1] = (w >> 16) as u16;
        }
    });
    compute(&mut outs, &vals);
    unrolled!(WORDS, |j| {
        let w = outs[2 * j] as u32 | (outs[2 * j + 1] as u32) << 16;
        store_pair(g, &base, out, aligned(0), (x, y0 + ty + PR * j as u32), w);
    });
}
