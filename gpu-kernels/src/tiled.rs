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
//! When every operand has 2-byte elements the kernels use paired tiles
//! ([`TILE2_PAIRED`](crate::TILE2_PAIRED): 128 × 128 for apply2,
//! [`TILE3_PAIRED`](crate::TILE3_PAIRED): 64 × 64 for apply3) and, in blocks whose tile is
//! inside the tensor and whose operands' pairs are aligned words, the **paired form**
//! ([`paired`]): the same two phases, but each thread moves pairs of elements along the
//! operand's unit-stride axis, one 4-byte access per pair. Edge tiles and unaligned
//! operands take the element form over the same tile (apply2's 128 × 128 as four
//! quarters of 64 × 64).

use crate::device::{
    ld_shared_u32, shared_base, shared_base32, st_shared_u32, sync_threads, tile_thread,
};
use crate::geometry::Geometry;
use crate::ops::{Op2, Op3};
use crate::{FastDiv, TileArg, TileShape, PAIR_ALIGNED, TILE2, TILE2_PAIRED, TILE3, TILE3_PAIRED};
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

/// Tiled `apply2`, tiles of [`TILE2`]; with 2-byte operands [`TILE2_PAIRED`] tiles, in the
/// paired form where the whole tile is inside and both operands' pairs are aligned words,
/// element by element otherwise (four quarters of 64 × 64, one after the other).
///
/// # Safety
/// The Geometry invariants hold for every `(x, y, batch)` of the grid; the launch has
/// `32 × shape.rows` threads per block, `tiles_x * tiles_y * batch` blocks, and
/// `shape.stage_bytes(size_of::<A>())` bytes of dynamic shared memory, `shape` being
/// [`tile_shape`](crate::tile_shape) of the operands' sizes; bit `PAIR_ALIGNED << k` of
/// `t.staged` as [`paired`] requires.
#[inline(always)]
pub unsafe fn apply2_tiled<Op: Op2<O, A>, O, A: Copy>(
    op: Op,
    g: &Geometry<u32, 5, 2>,
    t: &TileArg,
    out: *mut O,
    a: *const A,
) {
    if crate::pairs(&[size_of::<O>(), size_of::<A>()]) {
        const S: TileShape = TILE2_PAIRED;
        let (x0, y0, base) = block_origin::<2, { S.x }, { S.y }>(g, t, tile_thread().2);
        if pairs_fast::<2, { S.x }, { S.y }>(g, t, x0, y0) {
            let f = |o: &mut [u16; CHUNK], [a]: &[[u16; CHUNK]; 1]| {
                let mut j = 0;
                while j < CHUNK {
                    let mut ov: O = transmute_copy(&o[j]);
                    op.apply(&mut ov, transmute_copy(&a[j]));
                    o[j] = transmute_copy(&ov);
                    j += 1;
                }
            };
            return paired::<2, 1, { S.x }, { S.y }, { S.rows }, { S.swizzle }>(
                g,
                t,
                (x0, y0, base),
                out.cast(),
                [a.cast()],
                Op::READS_OUT,
                f,
            );
        }
        // The element form in quarters of 64 × 64 (8 values per thread each): one 128 × 128
        // element tile would hold 32 values per thread and input in registers. The stage of
        // a quarter fits in the paired stage; the barrier after each quarter keeps the next
        // one's stores from overtaking its reads.
        const Q: u32 = S.x / 2;
        const { assert!(S.x == S.y && (Q * Q / (32 * S.rows)) as usize == 8) };
        let mut q = 0;
        while q < 4 {
            let origin = (x0 + Q * (q & 1), y0 + Q * (q >> 1), base);
            element2::<Op, O, A, Q, Q, { S.rows }, 8>(op, g, t, origin, out, a);
            sync_threads();
            q += 1;
        }
        return;
    }
    let origin = block_origin::<2, { TILE2.x }, { TILE2.y }>(g, t, tile_thread().2);
    element2::<Op, O, A, { TILE2.x }, { TILE2.y }, { TILE2.rows }, { TILE2.per_thread() }>(
        op, g, t, origin, out, a,
    )
}

/// The element form of tiled `apply2` with tiles of `X × Y`, `32 × R` threads, `V` values
/// per thread; `origin` from [`block_origin`].
#[inline(always)]
unsafe fn element2<
    Op: Op2<O, A>,
    O,
    A: Copy,
    const X: u32,
    const Y: u32,
    const R: u32,
    const V: usize,
>(
    op: Op,
    g: &Geometry<u32, 5, 2>,
    t: &TileArg,
    (x0, y0, base): (u32, u32, [u32; 2]),
    out: *mut O,
    a: *const A,
) {
    let (tx, ty, _) = tile_thread();
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

/// Tiled `apply3`, tiles of [`TILE3`]; with 2-byte operands [`TILE3_PAIRED`] tiles, paired
/// or element by element as [`apply2_tiled`] (the element form over the whole tile).
///
/// # Safety
/// As [`apply2_tiled`], with `shape.stage_bytes(size_of::<A>()) +
/// shape.stage_bytes(size_of::<B>())` bytes of dynamic shared memory (input 2's stage
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
        const S: TileShape = TILE3_PAIRED;
        let (x0, y0, base) = block_origin::<3, { S.x }, { S.y }>(g, t, tile_thread().2);
        if pairs_fast::<3, { S.x }, { S.y }>(g, t, x0, y0) {
            let f = |o: &mut [u16; CHUNK], [a, b]: &[[u16; CHUNK]; 2]| {
                let mut j = 0;
                while j < CHUNK {
                    let mut ov: O = transmute_copy(&o[j]);
                    op.apply(&mut ov, transmute_copy(&a[j]), transmute_copy(&b[j]));
                    o[j] = transmute_copy(&ov);
                    j += 1;
                }
            };
            let ins = [a.cast(), b.cast()];
            return paired::<3, 2, { S.x }, { S.y }, { S.rows }, { S.swizzle }>(
                g,
                t,
                (x0, y0, base),
                out.cast(),
                ins,
                Op::READS_OUT,
                f,
            );
        }
        let second = S.stage_bytes(2);
        return element3::<Op, O, A, B, { S.x }, { S.y }, { S.rows }, { S.per_thread() }>(
            op,
            g,
            t,
            (x0, y0, base),
            second,
            out,
            a,
            b,
        );
    }
    let origin = block_origin::<3, { TILE3.x }, { TILE3.y }>(g, t, tile_thread().2);
    let second = TILE3.stage_bytes(size_of::<A>());
    element3::<Op, O, A, B, { TILE3.x }, { TILE3.y }, { TILE3.rows }, { TILE3.per_thread() }>(
        op, g, t, origin, second, out, a, b,
    )
}

/// The element form of tiled `apply3` (as [`element2`]); input 2's stage starts `second`
/// bytes into the dynamic shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn element3<
    Op: Op3<O, A, B>,
    O,
    A: Copy,
    B: Copy,
    const X: u32,
    const Y: u32,
    const R: u32,
    const V: usize,
>(
    op: Op,
    g: &Geometry<u32, 5, 3>,
    t: &TileArg,
    (x0, y0, base): (u32, u32, [u32; 3]),
    second: usize,
    out: *mut O,
    a: *const A,
    b: *const B,
) {
    let (tx, ty, _) = tile_thread();
    let sa = shared_base() as *mut A;
    let sb = shared_base().add(second) as *mut B;
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

/// Values per call of the paired form's `compute`: a thread's 8 pairs of one round (see
/// [`paired`]).
const CHUNK: usize = 16;

/// Whether this block takes the paired form: its whole tile is inside axes 0 and 1 and
/// every operand's pairs are aligned words (bits `PAIR_ALIGNED << k`, set by the launcher).
/// Edge tiles and unaligned operands take the element form with the same tile shape.
#[inline(always)]
fn pairs_fast<const N: usize, const X: u32, const Y: u32>(
    g: &Geometry<u32, 5, N>,
    t: &TileArg,
    x0: u32,
    y0: u32,
) -> bool {
    let all = ((1u32 << N) - 1) * PAIR_ALIGNED;
    t.staged & all == all && x0 + X <= g.sizes[0] && y0 + Y <= g.sizes[1]
}

/// The paired form of the tiled variant for `NI` inputs (operands `1..=NI`), every operand
/// of 2-byte elements, passed as raw 16-bit values, for a block whose tile is inside and
/// whose operands' pairs are aligned words ([`pairs_fast`]). Tiles of `X × Y` elements
/// (multiples of 64), blocks of 32 × `R` threads with `Y / R` = 8:
/// 1. a staged input: thread `(tx, ty)` loads the pairs at `y = y0 + 2tx + 64c`
///    (`c < Y / 64`, along axis 1, its unit-stride axis) of rows `x = x0 + 2m` and
///    `x + 1`, `m = ty + R · j`: a warp reads 128 contiguous bytes per row and `c`. With
///    one round (below) an unstaged input is loaded at its phase-2 positions here. All
///    loads are issued before the first shared-memory store. The staged 2 × 2 blocks are
///    transposed in registers into pairs along axis 0 and stored to `stage[y][m]`, rows
///    of `X / 2 + 1` words; with `SW`, to `stage[y][m ^ (y / 32)]` (the XOR keeps the
///    stores of rows `2tx` and `2tx + 32` in different banks; the reads of phase 2 are a
///    permutation of one row);
/// 2. after the barrier, thread `(tx, ty)` owns the output pairs at `x = x0 + 2tx + 64c`
///    (`c < X / 64`), rows `y = y0 + ty + R · j` (`j < 8`), in rounds of 8 pairs: round
///    `h` takes rows `j = h · 8 / (X / 64) …` with every `c` of each, so a warp writes a
///    row's `X · 2` bytes in one round. Per round it gathers the pairs' input values (an
///    unstaged input of a tile with several rounds straight from global memory),
///    `compute` applies the op to those [`CHUNK`] values and the output's (loaded first
///    when `reads_out`) in a plain loop, and each pair is stored as one 4-byte access.
///
/// The rounds are a loop whose count the compiler cannot see (`X / 64`, plus `ndim >> 16`,
/// which is 0): a counted loop of two rounds is unrolled, which doubles the code of an
/// expensive op (sin, pow) in every family; no value crosses rounds, so the loop keeps them
/// in registers. In a round, LLVM unrolls the loop of 16 values for a cheap op and keeps
/// one copy of an expensive one (a loop of 32 values is one it does not unroll even for a
/// copy: the values went to local memory). A round of rows rather than of column groups:
/// in a CUDA C reference the latter was 2.5–3 % slower (`benches/NOTES.md`, "Tiles").
///
/// # Safety
/// As [`apply2_tiled`] with a paired [`tile_shape`](crate::tile_shape) of `X × Y` and `R`
/// rows, `origin` this block's [`block_origin`], and [`pairs_fast`] true for it: every pair
/// the tile moves is inside, and every offset `at(x, y)` of a pair's first element (even
/// `x`, or even `y` for a staged input, along the operand's unit-stride axis) is even from
/// a 4-byte aligned base.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn paired<
    const N: usize,
    const NI: usize,
    const X: u32,
    const Y: u32,
    const R: u32,
    const SW: bool,
>(
    g: &Geometry<u32, 5, N>,
    t: &TileArg,
    (x0, y0, base): (u32, u32, [u32; N]),
    out: *mut u16,
    ins: [*const u16; NI],
    reads_out: bool,
    mut compute: impl FnMut(&mut [u16; CHUNK], &[[u16; CHUNK]; NI]),
) {
    // Pairs per round (one chunk), column groups per row, rows per round and rounds.
    const W: usize = CHUNK / 2;
    let (ys, xs) = (Y / 64, X / 64);
    const { assert!(NI + 1 == N && X % 64 == 0 && Y % 64 == 0 && X / 2 % R == 0) };
    const { assert!(Y / R == 8 && W as u32 % (X / 64) == 0) };
    let rows_per_round = W as u32 / xs;
    let all_rounds = Y / R / rows_per_round;
    let stage_row = X / 2 + 1;
    let stage_words = Y * stage_row;
    let (tx, ty, _) = tile_thread();
    // apply2's one input is always staged (a tiled launch has a staged input); apply3's
    // inputs as the launcher says.
    let staged = |i: usize| NI == 1 || t.staged & (1 << i) != 0;
    // Addresses from one pointer per operand and thread, then steps of 64-bit element
    // offsets: every operand's reachable offsets fit in 31 bits (a 32-bit plan), so each
    // partial sum of coordinate × stride terms does too, and the pointer sums equal the
    // offsets `at` gives. Along its unit-stride axis an operand's stride is 1 (`pairs_fast`).
    let stride = |k: usize, d: usize| g.strides[k][d] as i32 as isize;
    // Pair `k` of round `h`: its row `yl` in the tile and column `col` (in pairs).
    let pair = |h: u32, k: usize| {
        let (r, c) = (h * rows_per_round + k as u32 / xs, k as u32 % xs);
        (ty + R * r, tx + 32 * c)
    };
    // Operand k's pair at the thread's phase-2 origin (x0 + 2tx, y0 + ty), and the step
    // from there to pair (yl, col) of the tile: rows along axis 1, 2 elements per column.
    let at2 = |k: usize, p: *const u16| p.offset(at(g, &base, k, x0 + 2 * tx, y0 + ty));
    let step2 =
        |k: usize, yl: u32, col: u32| (yl - ty) as isize * stride(k, 1) + 2 * (col - tx) as isize;
    // Phase 1: every load of the tile. Staged: `X / 2R · Y / 64` row pairs `(m, c)`.
    let mut rows = [[[0u32; 16]; 2]; NI];
    let mut pre = [[0u32; W]; NI];
    unrolled!(const NI, |i| {
        let (k, src) = (i + 1, ins[i]);
        if staged(i) {
            // The thread's first pair: rows x0 + 2ty and the next, column y0 + 2tx.
            let p = src.offset(at(g, &base, k, x0 + 2 * ty, y0 + 2 * tx));
            let s0 = stride(k, 0);
            unrolled!(const (X / 2 / R * (Y / 64)) as usize, |j| {
                let (jm, c) = (j as u32 / ys, j as u32 % ys);
                let q = p.offset((2 * R * jm) as isize * s0 + (64 * c) as isize);
                rows[i][0][j] = *(q as *const u32);
                rows[i][1][j] = *(q.offset(s0) as *const u32);
            });
        } else if all_rounds == 1 {
            let p = at2(k, src);
            unrolled!(const W, |kk| {
                let (yl, col) = pair(0, kk);
                pre[i][kk] = *(p.offset(step2(k, yl, col)) as *const u32);
            });
        }
    });
    let smem = shared_base32();
    unrolled!(const NI, |i| {
        if staged(i) {
            let st = smem + 4 * i as u32 * stage_words;
            unrolled!(const (X / 2 / R * (Y / 64)) as usize, |j| {
                let (m, c) = (ty + R * (j as u32 / ys), j as u32 % ys);
                // Rows y and y + 1 share `y / 32`.
                let y = 2 * tx + 64 * c;
                let col = if SW { m ^ (y >> 5) } else { m };
                let (r0, r1) = (rows[i][0][j], rows[i][1][j]);
                st_shared_u32(st + 4 * (y * stage_row + col), (r0 & 0xffff) | (r1 << 16));
                st_shared_u32(
                    st + 4 * ((y + 1) * stage_row + col),
                    (r0 >> 16) | (r1 & 0xffff_0000),
                );
            });
        }
    });
    sync_threads();
    // Phase 2: per round, gather, compute, store.
    let rounds = if all_rounds == 1 {
        1
    } else {
        all_rounds + (g.ndim >> 16)
    };
    let o = at2(0, out);
    let mut h = 0;
    while h < rounds {
        let mut vals = [[0u16; CHUNK]; NI];
        let mut outs = [0u16; CHUNK];
        unrolled!(const W, |k| {
            let (yl, col) = pair(h, k);
            unrolled!(const NI, |i| {
                let w = if staged(i) {
                    let c = if SW { col ^ (yl >> 5) } else { col };
                    ld_shared_u32(smem + 4 * (i as u32 * stage_words + yl * stage_row + c))
                } else if all_rounds == 1 {
                    pre[i][k]
                } else {
                    *(at2(i + 1, ins[i]).offset(step2(i + 1, yl, col)) as *const u32)
                };
                vals[i][2 * k] = w as u16;
                vals[i][2 * k + 1] = (w >> 16) as u16;
            });
            if reads_out {
                let w = *(o.offset(step2(0, yl, col)) as *const u32);
                outs[2 * k] = w as u16;
                outs[2 * k + 1] = (w >> 16) as u16;
            }
        });
        compute(&mut outs, &vals);
        unrolled!(const W, |k| {
            let (yl, col) = pair(h, k);
            let w = outs[2 * k] as u32 | (outs[2 * k + 1] as u32) << 16;
            *(o.offset(step2(0, yl, col)) as *mut u32) = w;
        });
        h += 1;
    }
}
