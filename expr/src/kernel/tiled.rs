//! The tiled kernels (`expr_<class>s_tile`, [`TILED_NAMES`](super::TILED_NAMES)): operands
//! that disagree on their fastest axis, the staged inputs read through shared memory.

use crate::eval::{Eval, FAST_LOADED};
use crate::ir::{Class, Program, MAX_INPUTS};
use crate::kernel::interp::{each_fast_input, each_input, interpret, load_lanes, store_lanes, Raw};
use crate::kernel::staging::stage;
use crate::kernel::{Pointers, OPERANDS, STAGED_BYTES};
use crate::value::elem_of;

use gpu_kernels::device::{
    block_rows_and_grid, ld_shared_u32, st_shared_u32, sync_threads, tile_thread,
};
use gpu_kernels::elem::ElemType;
use gpu_kernels::geometry::{Geometry, Index};

use gpu_kernels::TileArg;

/// Stores `v` (its low 4 bytes, or 8 for `R = u64`) at shared address `at`.
///
/// # Safety
/// `at` is inside the launch's shared memory, aligned to `size_of::<R>()`.
#[inline(always)]
pub(crate) unsafe fn st_raw<R: Raw>(at: u32, v: u64) {
    // SAFETY: the caller's.
    unsafe {
        st_shared_u32(at, v as u32);
        if core::mem::size_of::<R>() == 8 {
            st_shared_u32(at + 4, (v >> 32) as u32);
        }
    }
}

/// The value [`st_raw`] stored at `at`.
///
/// # Safety
/// As [`st_raw`].
#[inline(always)]
pub(crate) unsafe fn ld_raw<R: Raw>(at: u32) -> R {
    // SAFETY: the caller's.
    unsafe {
        let lo = ld_shared_u32(at) as u64;
        R::from_u64(if core::mem::size_of::<R>() == 8 {
            lo | (ld_shared_u32(at + 4) as u64) << 32
        } else {
            lo
        })
    }
}

/// Tile `b`'s origin along axes 0 and 1 and its batch index along axes 2–4 (the tiled
/// kernels' order: axis 0 fastest).
#[inline(always)]
pub(crate) fn tile_origin(t: &TileArg, b: u32) -> (u32, u32, [u32; 3]) {
    let (r, x) = t.tiles_x.divmod(b);
    let (r, y) = t.tiles_y.divmod(r);
    let (r, c2) = t.batch[0].divmod(r);
    let (c4, c3) = t.batch[1].divmod(r);
    (x * super::TILE, y * super::TILE, [c2, c3, c4])
}

/// Operand `k`'s offsets of `K` lanes: element `(i, j)` of batch element `batch`, then
/// steps of `(di, dj)` (32-bit wrapping, as the planner proved every offset in 32 bits).
#[inline(always)]
pub(crate) fn tile_lanes<const K: usize>(
    g: &Geometry<u32, 5, OPERANDS>,
    k: usize,
    (i, j): (u32, u32),
    batch: &[u32; 3],
    (di, dj): (u32, u32),
) -> [isize; K] {
    let s = &g.strides[k];
    let o = i
        .wrapping_mul(s[0])
        .wrapping_add(j.wrapping_mul(s[1]))
        .wrapping_add(batch[0].wrapping_mul(s[2]))
        .wrapping_add(batch[1].wrapping_mul(s[3]))
        .wrapping_add(batch[2].wrapping_mul(s[4]));
    let step = di.wrapping_mul(s[0]).wrapping_add(dj.wrapping_mul(s[1]));
    core::array::from_fn(|l| o.wrapping_add(step.wrapping_mul(l as u32)).signed())
}

/// The tiled kernels' loop (the contract at [`TILED_NAMES`](super::TILED_NAMES)): `K`
/// rows of the tile per thread and dispatch.
#[inline(always)]
unsafe fn tiled<T: Eval, R: Raw, const K: usize>(
    p: &Program,
    tiles: u32,
    t: &TileArg,
    g: &Geometry<u32, 5, OPERANDS>,
    ptrs: &Pointers,
) {
    // SAFETY: the contract's shared memory; called once by every thread.
    let base = unsafe { stage(p, true) };
    let n_in = p.n_inputs as usize;
    let out = elem_of(p.out);
    let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
    let size: [usize; FAST_LOADED] = core::array::from_fn(|k| ins[k].size());
    let out_size = out.size();
    const TILE: u32 = super::TILE;
    let rows = TILE / K as u32;
    let raw_bytes = core::mem::size_of::<R>() as u32;
    // Input k's stage: TILE rows (axis-0 index in the tile) of TILE + 1 values.
    let stage_of = |k: usize| base + STAGED_BYTES + k as u32 * TILE * (TILE + 1) * raw_bytes;
    let staged = |k: usize| t.staged >> k & 1 != 0;
    let (tx, ty, first) = tile_thread();
    let (_, grid) = block_rows_and_grid();
    let (n0, n1) = (g.sizes[0], g.sizes[1]);
    let mut b = first;
    while b < tiles {
        let (x0, y0, batch) = tile_origin(t, b);
        // A whole tile inside the plan: every lane live, no bounds to check.
        let full = x0 + TILE <= n0 && y0 + TILE <= n1;
        // Operand k's offsets of K lanes: element (x0 + i, y0 + j) of this tile's batch,
        // then steps of (di, dj) (32-bit wrapping, as the planner proved every offset
        // in 32 bits).
        let lanes_at = |k: usize, at: (u32, u32), step: (u32, u32)| {
            tile_lanes::<K>(g, k, (x0 + at.0, y0 + at.1), &batch, step)
        };
        // Stage: thread (tx, ty) loads elements (ty + rows·l, tx) of each staged input,
        // consecutive threads along axis 1.
        let live: [bool; K] =
            core::array::from_fn(|l| full || (x0 + ty + rows * (l as u32) < n0 && y0 + tx < n1));
        each_fast_input!(|KK| {
            if KK < n_in && staged(KK) {
                let offs = lanes_at(KK + 1, (ty, tx), (rows, 0));
                // SAFETY: the live lanes are elements of the plan (module contract).
                let v: [R; K] = unsafe { load_lanes(ptrs.0[KK + 1], &offs, &live, size[KK]) };
                let at = stage_of(KK) + (ty * (TILE + 1) + tx) * raw_bytes;
                let mut l = 0;
                while l < K {
                    // SAFETY: row ty + rows·l, column tx of input KK's stage.
                    unsafe {
                        st_raw::<R>(at + (l as u32 * rows * (TILE + 1)) * raw_bytes, v[l].bits())
                    };
                    l += 1;
                }
            }
        });
        sync_threads();
        // Compute: thread (tx, ty) takes elements (tx, ty + rows·l), consecutive
        // threads along axis 0. A staged value is read whether live or not (in the
        // stage either way; a dead lane's result is not stored).
        let live: [bool; K] =
            core::array::from_fn(|l| full || (x0 + tx < n0 && y0 + ty + rows * (l as u32) < n1));
        let mut raw = [[R::default(); K]; FAST_LOADED];
        each_fast_input!(|KK| {
            if KK < n_in {
                raw[KK] = if staged(KK) {
                    let at = stage_of(KK) + (tx * (TILE + 1) + ty) * raw_bytes;
                    // SAFETY: row tx, columns ty + rows·l of input KK's stage.
                    core::array::from_fn(|l| unsafe {
                        ld_raw::<R>(at + l as u32 * rows * raw_bytes)
                    })
                } else {
                    let offs = lanes_at(KK + 1, (tx, ty), (0, rows));
                    // SAFETY: the live lanes are elements of the plan (module contract).
                    unsafe { load_lanes(ptrs.0[KK + 1], &offs, &live, size[KK]) }
                };
            }
        });
        // At most TILED_INPUTS inputs (the host's `tiled_name`): none past them.
        let none = |_| [R::default(); K];
        let bits =
            interpret::<T, R, K, true, FAST_LOADED, false, false>(p, base, &ins, &raw, none, out);
        let offs = lanes_at(0, (tx, ty), (0, rows));
        // SAFETY: the live lanes' output offsets (module contract).
        unsafe { store_lanes(ptrs.0[0], &offs, &live, out_size, &bits) };
        // The stage is read to the end before the next tile's loads overwrite it.
        sync_threads();
        b = b.wadd(grid);
    }
}

/// The tiled kernels, `expr_<class>s_tile`.
macro_rules! tiled {
    ($($suffix:literal $t:ty, $r:ty, $i:literal, $class:ident;)*) => {$(
        const _: () = {
            const K: usize = super::TILE_LANES[$i];
            const _: () = assert!(matches!(crate::paths::FAST_PATHS[$i], Class::$class));
            #[export_name = concat!("expr_", $suffix, "s_tile")]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                p: Program,
                tiles: u32,
                t: TileArg,
                g: Geometry<u32, 5, OPERANDS>,
                ptrs: Pointers,
            ) {
                // SAFETY: the module contract and the tiled one; the host launches it
                // only for a program of this path.
                unsafe { tiled::<$t, $r, K>(&p, tiles, &t, &g, &ptrs) }
            }
        };
    )*};
}

tiled! {
    "f" f32, u32, 0, F32;
    "d" f64, u64, 1, F64;
    "i" i32, u32, 2, I32;
    "l" i64, u64, 3, I64;
    "u" u32, u32, 4, U32;
    "b" u8, u32, 5, U8;
}
