//! The tiled variant, for operands that disagree on their fastest axis (`A + Bᵀ`, a
//! permuted copy). Axis 0 of the geometry is the output's unit-stride axis, axis 1 a staged
//! input's unit-stride axis, axes 2..ndim are a batch. A block of `32 × TILE_ROWS` threads
//! covers one `TILE_X × TILE_Y` tile of axes (0, 1) of one batch element (`TILE_Y` = 32, a
//! warp; `TILE_X` a multiple of it, so a block writes `TILE_X` consecutive output elements
//! per row of the tile):
//! 1. every input's values for the thread are loaded into registers first, so all of a
//!    tile's global loads are in flight together: staged inputs with consecutive threads
//!    along axis 1 (coalesced for them), the others along axis 0. Then staged values go to
//!    shared memory, padded to `TILE_Y + 1` columns so neither phase has bank conflicts;
//! 2. after the barrier, consecutive threads walk axis 0 and write the output along its
//!    unit-stride axis, staged inputs read back from shared memory.

use crate::device::{shared_base, sync_threads, tile_thread};
use crate::geometry::Geometry;
use crate::ops::{Op2, Op3};
use crate::{stage_bytes, FastDiv, TileArg, TILE_ROWS, TILE_X, TILE_Y};
use core::mem::MaybeUninit;

const PITCH: u32 = TILE_Y + 1;
/// Warp-wide columns of a tile along axis 0 in phase 2.
const XS: u32 = TILE_X / TILE_Y;
const _: () = assert!(TILE_Y == 32 && TILE_X % TILE_Y == 0 && TILE_Y % TILE_ROWS == 0);

/// Offsets of element `(x, y)` of this block's batch element.
#[inline(always)]
fn at<const N: usize>(g: &Geometry<u32, 5, N>, base: &[u32; N], k: usize, x: u32, y: u32) -> isize {
    base[k]
        .wrapping_add(x.wrapping_mul(g.strides[k][0]))
        .wrapping_add(y.wrapping_mul(g.strides[k][1])) as i32 as isize
}

/// This block's tile origin and the offsets of its batch element.
#[inline(always)]
fn block_origin<const N: usize>(
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
    (bx * TILE_X, by * TILE_Y, base)
}

/// Values per thread and input: `TILE_X / TILE_ROWS` staged rows, which is also the
/// `XS × TILE_Y / TILE_ROWS` phase-2 positions.
const ROWS: usize = (TILE_X / TILE_ROWS) as usize;

/// Phase-2 position `i` of the thread, in tile coordinates: column `tx + 32 * (i % XS)` of
/// axis 0, row `ty + TILE_ROWS * (i / XS)` of axis 1.
#[inline(always)]
fn phase2(tx: u32, ty: u32, i: usize) -> (u32, u32) {
    let i = i as u32;
    (tx + TILE_Y * (i % XS), ty + TILE_ROWS * (i / XS))
}

/// Input `k`'s `ROWS` values for this thread, all loaded before any is used, so every
/// global load of the tile is in flight together (a shared-memory store between two loads
/// would make the second wait for the first: the store may alias the global buffer).
/// A staged input is read with consecutive threads along axis 1, its unit-stride axis:
/// element `(x0 + ty + i * TILE_ROWS, y0 + tx)`. Any other input is read where phase 2
/// uses it, consecutive threads along axis 0 (see [`phase2`]).
#[inline(always)]
unsafe fn load_tile<T: Copy, const N: usize>(
    g: &Geometry<u32, 5, N>,
    base: &[u32; N],
    k: usize,
    src: *const T,
    staged: bool,
    (x0, y0, tx, ty): (u32, u32, u32, u32),
) -> [MaybeUninit<T>; ROWS] {
    let mut v = [MaybeUninit::uninit(); ROWS];
    let mut i = 0;
    while i < ROWS {
        let (x, y) = if staged {
            (x0 + ty + i as u32 * TILE_ROWS, y0 + tx)
        } else {
            let (px, py) = phase2(tx, ty, i);
            (x0 + px, y0 + py)
        };
        if x < g.sizes[0] && y < g.sizes[1] {
            v[i] = MaybeUninit::new(*src.offset(at(g, base, k, x, y)));
        }
        i += 1;
    }
    v
}

/// Writes a staged input's values (from [`load_tile`]) to its shared-memory stage, at row
/// `r` (axis 0) and column `tx` (axis 1) of the padded tile.
#[inline(always)]
unsafe fn stage<T: Copy, const N: usize>(
    g: &Geometry<u32, 5, N>,
    v: &[MaybeUninit<T>; ROWS],
    stage: *mut T,
    (x0, y0, tx, ty): (u32, u32, u32, u32),
) {
    let mut i = 0;
    while i < ROWS {
        let r = ty + i as u32 * TILE_ROWS;
        if x0 + r < g.sizes[0] && y0 + tx < g.sizes[1] {
            *stage.add((r * PITCH + tx) as usize) = v[i].assume_init();
        }
        i += 1;
    }
}

/// Input value at phase-2 position `i` (tile coordinates `(px, py)`): from the stage, or
/// from what [`load_tile`] loaded.
#[inline(always)]
unsafe fn value<T: Copy>(
    stage: Option<*const T>,
    pre: &[MaybeUninit<T>; ROWS],
    (px, py): (u32, u32),
    i: usize,
) -> T {
    match stage {
        Some(s) => *s.add((px * PITCH + py) as usize),
        None => pre[i].assume_init(),
    }
}

/// Tiled `apply2`.
///
/// # Safety
/// The Geometry invariants hold for every `(x, y, batch)` of the grid; the launch has
/// `TILE_Y × TILE_ROWS` threads per block, `tiles_x * tiles_y * batch` blocks, and
/// `stage_bytes(size_of::<A>())` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn apply2_tiled<Op: Op2<O, A>, O, A: Copy>(
    op: Op,
    g: &Geometry<u32, 5, 2>,
    t: &TileArg,
    out: *mut O,
    a: *const A,
) {
    let (tx, ty, block) = tile_thread();
    let (x0, y0, base) = block_origin(g, t, block);
    let sa = shared_base() as *mut A;
    let stage_a = t.staged & 1 != 0;
    let pos = (x0, y0, tx, ty);
    let pa = load_tile(g, &base, 1, a, stage_a, pos);
    if stage_a {
        stage(g, &pa, sa, pos);
    }
    sync_threads();
    let mut i = 0;
    while i < ROWS {
        let p = phase2(tx, ty, i);
        let (x, y) = (x0 + p.0, y0 + p.1);
        if x < g.sizes[0] && y < g.sizes[1] {
            let av = value(stage_a.then_some(sa as *const A), &pa, p, i);
            op.apply(&mut *out.offset(at(g, &base, 0, x, y)), av);
        }
        i += 1;
    }
}

/// Tiled `apply3`.
///
/// # Safety
/// As [`apply2_tiled`], with `stage_bytes(size_of::<A>()) + stage_bytes(size_of::<B>())`
/// bytes of dynamic shared memory (input 2's stage follows input 1's).
#[inline(always)]
pub unsafe fn apply3_tiled<Op: Op3<O, A, B>, O, A: Copy, B: Copy>(
    op: Op,
    g: &Geometry<u32, 5, 3>,
    t: &TileArg,
    out: *mut O,
    a: *const A,
    b: *const B,
) {
    let (tx, ty, block) = tile_thread();
    let (x0, y0, base) = block_origin(g, t, block);
    let sa = shared_base() as *mut A;
    let sb = shared_base().add(stage_bytes(core::mem::size_of::<A>())) as *mut B;
    let (stage_a, stage_b) = (t.staged & 1 != 0, t.staged & 2 != 0);
    let pos = (x0, y0, tx, ty);
    let pa = load_tile(g, &base, 1, a, stage_a, pos);
    let pb = load_tile(g, &base, 2, b, stage_b, pos);
    if stage_a {
        stage(g, &pa, sa, pos);
    }
    if stage_b {
        stage(g, &pb, sb, pos);
    }
    sync_threads();
    let mut i = 0;
    while i < ROWS {
        let p = phase2(tx, ty, i);
        let (x, y) = (x0 + p.0, y0 + p.1);
        if x < g.sizes[0] && y < g.sizes[1] {
            let av = value(stage_a.then_some(sa as *const A), &pa, p, i);
            let bv = value(stage_b.then_some(sb as *const B), &pb, p, i);
            op.apply(&mut *out.offset(at(g, &base, 0, x, y)), av, bv);
        }
        i += 1;
    }
}
