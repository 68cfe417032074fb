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

use crate::device::{shared_base, sync_threads, tile_thread};
use crate::geometry::Geometry;
use crate::ops::{Op2, Op3};
use crate::{FastDiv, TileArg, TILE2, TILE3};
use core::mem::MaybeUninit;

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
