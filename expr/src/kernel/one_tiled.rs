//! The tiled one-op kernel (`expr_fo_tile`, [`ONE_TILED`](super::ONE_TILED)): the programs
//! of the one-op kernels over the tiled kernels' layout.

use crate::kernel::ONE_OPERANDS;

use crate::eval::Eval;
use crate::ir::{Class, Opcode, Program};
use crate::kernel::interp::{load_lanes, store_lanes, Raw};
use crate::kernel::one_op::{by_code, code_of, each_lane, one_code, one_consts};
use crate::kernel::tiled::{ld_raw, st_raw, tile_lanes, tile_origin};
use crate::kernel::{Pointers, OPERANDS, STAGED_BYTES};

use crate::value::{narrow, widen};

use gpu_kernels::device::{block_rows_and_grid, shared_base32, sync_threads, tile_thread};
use gpu_kernels::elem::ElemType;
use gpu_kernels::geometry::{Geometry, Index};

use gpu_kernels::TileArg;

/// A tiled one-op kernel's body ([`ONE_TILED`](super::ONE_TILED)): the
/// tiled kernels' tiles, staging and lanes ([`tiled`]), the op dispatched once per
/// tile instead of an interpreter pass, every operand of one element type.
///
/// # Safety
/// The contract of [`TILED_NAMES`](crate::kernel::TILED_NAMES); `p` is a program of
/// [`one_tiled_kernel`](super::one_tiled_kernel) for `T`'s math type.
#[inline(always)]
unsafe fn one_tiled<T: Eval, R: Raw, const K: usize>(
    p: &Program,
    tiles: u32,
    t: &TileArg,
    g: &Geometry<u32, 5, OPERANDS>,
    ptrs: &Pointers,
) {
    let op = one_code(p);
    let k = one_consts::<T>(p);
    macro_rules! body {
        ($e:expr, $s:literal) => {
            if $s <= core::mem::size_of::<R>() && crate::kernel::one_elem(T::CLASS, $e) {
                // SAFETY: forwarded; every operand is of element type `$e`.
                unsafe { one_tiled_typed::<T, R, K, $s>($e, p, tiles, t, g, ptrs, &k, op) }
            }
        };
    }
    by_code!(p.out, body, ())
}

/// [`one_tiled`] for operands of element type `e` of `S` bytes (a constant in each call).
///
/// # Safety
/// As [`one_tiled`]; `k[q]` is operand `q`'s value where it is a constant.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn one_tiled_typed<T: Eval, R: Raw, const K: usize, const S: usize>(
    e: ElemType,
    p: &Program,
    tiles: u32,
    t: &TileArg,
    g: &Geometry<u32, 5, OPERANDS>,
    ptrs: &Pointers,
    k: &[T; ONE_OPERANDS],
    op: u8,
) {
    let n_in = p.n_inputs as usize;
    let base = shared_base32();
    const TILE: u32 = crate::kernel::TILE;
    let rows = TILE / K as u32;
    let raw_bytes = core::mem::size_of::<R>() as u32;
    // Input q's stage: TILE rows of TILE + 1 values (the tiled kernels' layout).
    let stage_of = |q: usize| base + STAGED_BYTES + q as u32 * TILE * (TILE + 1) * raw_bytes;
    let staged = |q: usize| t.staged >> q & 1 != 0;
    let (tx, ty, first) = tile_thread();
    let (_, grid) = block_rows_and_grid();
    let (n0, n1) = (g.sizes[0], g.sizes[1]);
    let mut b = first;
    while b < tiles {
        let (x0, y0, batch) = tile_origin(t, b);
        let full = x0 + TILE <= n0 && y0 + TILE <= n1;
        let lanes_at = |k: usize, at: (u32, u32), step: (u32, u32)| {
            tile_lanes::<K>(g, k, (x0 + at.0, y0 + at.1), &batch, step)
        };
        // Every global load of the tile first, so all are in flight together (as the
        // library's tiled kernels): the staged inputs' elements (ty + rows·l, tx),
        // consecutive threads along axis 1, and the others' elements (tx, ty + rows·l)
        // of the compute phase; then the staged values go to shared memory.
        let live1: [bool; K] =
            core::array::from_fn(|l| full || (x0 + ty + rows * (l as u32) < n0 && y0 + tx < n1));
        let live: [bool; K] =
            core::array::from_fn(|l| full || (x0 + tx < n0 && y0 + ty + rows * (l as u32) < n1));
        let mut raw = [[R::default(); K]; ONE_OPERANDS];
        macro_rules! load {
            ($($q:literal)*) => {$(
                if $q < n_in {
                    raw[$q] = if staged($q) {
                        let offs = lanes_at($q + 1, (ty, tx), (rows, 0));
                        // SAFETY: the live lanes are elements of the plan (module contract).
                        unsafe { load_lanes(ptrs.0[$q + 1], &offs, &live1, S) }
                    } else {
                        let offs = lanes_at($q + 1, (tx, ty), (0, rows));
                        // SAFETY: the live lanes are elements of the plan.
                        unsafe { load_lanes(ptrs.0[$q + 1], &offs, &live, S) }
                    };
                }
            )*};
        }
        load!(0 1 2);
        macro_rules! stage {
            ($($q:literal)*) => {$(
                if $q < n_in && staged($q) {
                    let at = stage_of($q) + (ty * (TILE + 1) + tx) * raw_bytes;
                    each_lane!(|L| {
                        if L < K {
                            // SAFETY: row ty + rows·L, column tx of input $q's stage.
                            unsafe {
                                st_raw::<R>(
                                    at + (L as u32 * rows * (TILE + 1)) * raw_bytes,
                                    raw[$q][L].bits(),
                                )
                            };
                        }
                    });
                }
            )*};
        }
        stage!(0 1 2);
        sync_threads();
        macro_rules! unstage {
            ($($q:literal)*) => {$(
                if $q < n_in && staged($q) {
                    let at = stage_of($q) + (tx * (TILE + 1) + ty) * raw_bytes;
                    // SAFETY: row tx, columns ty + rows·l of input $q's stage.
                    raw[$q] = core::array::from_fn(|l| unsafe {
                        ld_raw::<R>(at + l as u32 * rows * raw_bytes)
                    });
                }
            )*};
        }
        unstage!(0 1 2);
        let x = |q: usize, j: usize| {
            if q < n_in {
                T::dec(widen(e, raw[q][j].bits()))
            } else {
                k[q]
            }
        };
        macro_rules! ops {
            ($($name:ident $arity:tt),*) => {
                match Opcode::from_code(op) {
                    $(Some(Opcode::$name) => ops!(@ $name $arity),)*
                    _ => [0u64; K],
                }
            };
            (@ $name:ident $arity:tt) => {{
                // Unrolled by lane: an `array::from_fn` here stays a call through
                // local memory in the PTX for the unary ops.
                let mut r = [0u64; K];
                each_lane!(|J| {
                    if J < K {
                        r[J] = narrow(T::CLASS, ops!(@@ $name $arity J).enc(), e);
                    }
                });
                r
            }};
            // The copy: input 0 as it is.
        (@@ Load 1 $j:ident) => {
            x(0, $j)
        };
        (@@ $name:ident 1 $j:ident) => {
                T::unary(Opcode::$name, x(0, $j))
            };
            (@@ $name:ident 2 $j:ident) => {
                T::binary(Opcode::$name, x(0, $j), x(1, $j))
            };
            (@@ $name:ident 3 $j:ident) => {
                T::ternary(Opcode::$name, x(0, $j), x(1, $j), x(2, $j))
            };
        }
        let bits: [u64; K] = ops!(
            Load 1, Neg 1, Abs 1, Relu 1, Add 2, Sub 2, Mul 2, Div 2, Min 2, Max 2, Fma 3, Clamp 3
        );
        let offs = lanes_at(0, (tx, ty), (0, rows));
        // SAFETY: the live lanes' output offsets (module contract).
        unsafe { store_lanes(ptrs.0[0], &offs, &live, S, &bits) };
        // The stage is read to the end before the next tile's loads overwrite it.
        sync_threads();
        b = b.wadd(grid);
    }
}

/// The tiled one-op kernels, `expr_<class>o_tile`.
#[export_name = "expr_fo_tile"]
#[allow(improper_ctypes_definitions)]
unsafe extern "ptx-kernel" fn one_tiled_f32(
    p: Program,
    tiles: u32,
    t: TileArg,
    g: Geometry<u32, 5, OPERANDS>,
    ptrs: Pointers,
) {
    const _: () = assert!(matches!(crate::paths::FAST_PATHS[0], Class::F32));
    const K: usize = match super::ONE_TILED[0] {
        Some((_, lanes)) => lanes,
        None => panic!("expr_fo_tile is listed in ONE_TILED"),
    };
    // SAFETY: the tiled kernels' contract; the host launches it only for a program of
    // `one_tiled_kernel` of f32 math, with its lanes.
    unsafe { one_tiled::<f32, u32, K>(&p, tiles, &t, &g, &ptrs) }
}
