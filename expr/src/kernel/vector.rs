//! The vectorised kernels (`expr_<class>v_vec`: [`VECTOR_LANES`](super::VECTOR_LANES)
//! consecutive elements per thread, one vector per operand), and the `f32` path's wide and
//! cheap kernels of the same layout ([`WIDE_NAMES`](super::WIDE_NAMES),
//! [`CHEAP_NAMES`](super::CHEAP_NAMES)).

use super::CHEAP_INPUTS;
use crate::eval::{Eval, FAST_INPUTS, FAST_LOADED};
use crate::ir::{Class, Program, MAX_INPUTS};
use crate::kernel::interp::{
    coords_of, each_fast_input, each_input, interpret, load_lanes, load_words, offset_at,
    store_lanes, store_words, Path, Raw,
};
use crate::kernel::staging::stage;
use crate::kernel::{Pointers, OPERANDS};
use crate::reduce::load_bits;
use crate::value::elem_of;

use gpu_kernels::device::thread_range;
use gpu_kernels::elem::ElemType;
use gpu_kernels::geometry::{Geometry, Index};

/// `K` consecutive `S`-byte elements at `base + off * S` (aligned to `K * S`), one
/// vector load, zero-extended.
#[inline(always)]
unsafe fn load_vec<R: Raw, const K: usize, const S: usize>(base: u64, off: isize) -> [R; K] {
    let p = (base as *const u8).wrapping_offset(off * S as isize);
    // SAFETY: the caller's aligned vector in the operand's buffer.
    let w = unsafe {
        match K * S {
            1 => load_words::<1>(p),
            2 => load_words::<2>(p),
            4 => load_words::<4>(p),
            8 => load_words::<8>(p),
            16 => load_words::<16>(p),
            32 => load_words::<32>(p),
            _ => load_words::<64>(p),
        }
    };
    core::array::from_fn(|j| {
        let at = j * S;
        let word = w[at / 4] as u64;
        R::from_u64(match S {
            1 => (word >> (8 * (at % 4))) & 0xff,
            2 => (word >> (8 * (at % 4))) & 0xffff,
            4 => word,
            _ => word | (w[at / 4 + 1] as u64) << 32,
        })
    })
}

/// Stores the low `S` bytes of each of `bits` as `K` consecutive elements at `base +
/// off * S` (aligned to `K * S`), one vector store.
#[inline(always)]
unsafe fn store_vec<const K: usize, const S: usize>(base: u64, off: isize, bits: &[u64; K]) {
    let mut w = [0u32; 16];
    let mut j = 0;
    while j < K {
        let at = j * S;
        match S {
            1 => w[at / 4] |= ((bits[j] & 0xff) as u32) << (8 * (at % 4)),
            2 => w[at / 4] |= ((bits[j] & 0xffff) as u32) << (8 * (at % 4)),
            4 => w[at / 4] = bits[j] as u32,
            _ => {
                w[at / 4] = bits[j] as u32;
                w[at / 4 + 1] = (bits[j] >> 32) as u32;
            }
        }
        j += 1;
    }
    let p = (base as *mut u8).wrapping_offset(off * S as isize);
    // SAFETY: the caller's aligned vector in the output's buffer.
    unsafe {
        match K * S {
            1 => store_words::<1>(p, &w),
            2 => store_words::<2>(p, &w),
            4 => store_words::<4>(p, &w),
            8 => store_words::<8>(p, &w),
            16 => store_words::<16>(p, &w),
            32 => store_words::<32>(p, &w),
            _ => store_words::<64>(p, &w),
        }
    }
}

/// One input's `K` lanes from element offset `off`: a vector (`unit`, `full`), one
/// element for every lane (not `unit`: stride 0), or the live lanes one by one (the
/// partial last vector).
#[inline(always)]
unsafe fn load_input<R: Raw, const K: usize>(
    base: u64,
    off: isize,
    size: usize,
    unit: bool,
    full: bool,
    live: &[bool; K],
) -> [R; K] {
    macro_rules! by_size {
        ($s:literal) => {
            if !unit {
                // SAFETY (all three): the vectorised contract; `off` is in the buffer.
                let x = R::from_u64(unsafe { load_bits(base, off, $s) });
                [x; K]
            } else if full {
                unsafe { load_vec::<R, K, $s>(base, off) }
            } else {
                let offs: [isize; K] = core::array::from_fn(|j| off + j as isize);
                unsafe { load_lanes(base, &offs, live, $s) }
            }
        };
    }
    match size {
        1 => by_size!(1),
        2 => by_size!(2),
        4 => by_size!(4),
        _ => by_size!(8),
    }
}

/// The vectorised kernels' loop (the contract at [`CONTIG`](crate::kernel::CONTIG)): `K` lanes
/// `i .. i + K` along dimension 0 per dispatch, one multi-index per vector.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn vector<
    T: Eval,
    R: Raw,
    const K: usize,
    const INPUTS: usize,
    const OWN: bool,
    const CHEAP: bool,
>(
    p: &Program,
    base: u32,
    n: u32,
    g: &Geometry<u32, 2, OPERANDS>,
    ptrs: &Pointers,
    first: u32,
    step: u32,
) {
    let n_in = p.n_inputs as usize;
    let out = elem_of(p.out);
    let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
    // Two dimensions always (a one-dimensional plan has `sizes[1] == 1`), so the
    // geometry is read at constant offsets.
    let ndim = 2;
    let flat = g.sizes[1] == 1;
    // Element sizes and strides once, before the loop (a size is a table lookup, a
    // global load: in the loop it delays every input's load).
    // `OWN` (the wide kernel): every operand of `T`'s own element type.
    let size: [usize; FAST_LOADED] = core::array::from_fn(|k| {
        if OWN {
            core::mem::size_of::<T>()
        } else {
            ins[k].size()
        }
    });
    let unit: [bool; FAST_LOADED] = core::array::from_fn(|k| g.strides[k + 1][0] == 1);
    let out_size = if OWN {
        core::mem::size_of::<T>()
    } else {
        out.size()
    };
    let vectors = n.div_ceil(K as u32);
    let mut v = first;
    while v < vectors {
        let i = v * K as u32;
        let full = n - i >= K as u32;
        let live: [bool; K] = core::array::from_fn(|j| (j as u32) < n - i);
        // No division for one dimension.
        let c = if flat { [i, 0] } else { coords_of(g, i, ndim) };
        let mut raw = [[R::default(); K]; FAST_LOADED];
        each_fast_input!(|KK| {
            if KK < n_in && KK < INPUTS {
                let off = offset_at(g, &c, ndim, KK + 1);
                // SAFETY: the vectorised contract for input KK.
                raw[KK] =
                    unsafe { load_input(ptrs.0[KK + 1], off, size[KK], unit[KK], full, &live) };
            }
        });
        // A wide kernel's inputs past the first four: loaded by their load instruction,
        // in `T`'s own element type (`fast_class`). Others take at most FAST_LOADED
        // inputs (`NAMES`).
        let more = |k: usize| -> [R; K] {
            if INPUTS <= FAST_LOADED {
                return [R::default(); K];
            }
            let off = offset_at(g, &c, ndim, k + 1);
            let unit = g.strides[k + 1][0] == 1;
            let size = core::mem::size_of::<T>();
            // SAFETY: the vectorised contract for input k.
            unsafe { load_input(ptrs.0[k + 1], off, size, unit, full, &live) }
        };
        // The cheap kernels take every element type's widening and rounding as an arm
        // of its own (`EVERY`): their run-time-type fallback over twice the lanes is a
        // loop LLVM leaves rolled, in a stack frame.
        let bits = interpret::<T, R, K, CHEAP, INPUTS, OWN, CHEAP>(p, base, &ins, &raw, more, out);
        let off = offset_at(g, &c, ndim, 0);
        macro_rules! store {
            ($s:literal) => {
                if full {
                    // SAFETY: the output's aligned vector (the vectorised contract).
                    unsafe { store_vec::<K, $s>(ptrs.0[0], off, &bits) }
                } else {
                    let offs: [isize; K] = core::array::from_fn(|j| off + j as isize);
                    // SAFETY: the live lanes' offsets are the output's.
                    unsafe { store_lanes(ptrs.0[0], &offs, &live, $s, &bits) }
                }
            };
        }
        match out_size {
            1 => store!(1),
            2 => store!(2),
            4 => store!(4),
            _ => store!(8),
        }
        v = v.wadd(step);
    }
}

/// A vectorised kernel's whole body (the vectorised, wide and cheap kernels): the
/// program staged into shared memory, then [`vector`] over this thread's vectors.
///
/// # Safety
/// The module contract and the vectorised one, for a program that the kernel's
/// parameters (`T`, `INPUTS`, `OWN`, `CHEAP`) serve; called once by every thread.
#[inline(always)]
unsafe fn staged_vector<
    T: Eval,
    R: Raw,
    const K: usize,
    const INPUTS: usize,
    const OWN: bool,
    const CHEAP: bool,
>(
    p: &Program,
    n: u32,
    g: &Geometry<u32, 2, OPERANDS>,
    ptrs: &Pointers,
) {
    // SAFETY: the module contract's shared memory; called once by every thread.
    let base = unsafe { stage(p, true) };
    let (first, step) = thread_range::<u32>();
    // SAFETY: forwarded.
    unsafe { vector::<T, R, K, INPUTS, OWN, CHEAP>(p, base, n, g, ptrs, first, step) }
}

/// The vectorised kernels' body: the fast path `path`'s interpreter over
/// [`VECTOR_LANES`](super::VECTOR_LANES) lanes.
#[inline(always)]
unsafe fn vectorised(
    path: Path,
    p: &Program,
    n: u32,
    g: &Geometry<u32, 2, OPERANDS>,
    ptrs: &Pointers,
) {
    macro_rules! go {
        ($t:ty, $r:ty, $i:literal, $class:ident) => {{
            const K: usize = match super::VECTOR_LANES[$i] {
                Some(k) => k,
                None => panic!("a fast path without a vectorised kernel"),
            };
            const _: () = assert!(matches!(crate::paths::FAST_PATHS[$i], Class::$class));
            // SAFETY: forwarded; the host launches it only for a program of this path.
            unsafe { staged_vector::<$t, $r, K, FAST_LOADED, false, false>(p, n, g, ptrs) }
        }};
    }
    match path {
        Path::F32 => go!(f32, u32, 0, F32),
        Path::I32 => go!(i32, u32, 2, I32),
        Path::U32 => go!(u32, u32, 4, U32),
        Path::U8 => go!(u8, u32, 5, U8),
        Path::General | Path::GeneralExt | Path::F64 | Path::I64 => {}
    }
}

/// The vectorised kernels, `expr_<class>v_vec`.
macro_rules! vectorised {
    ($($suffix:literal $path:ident;)*) => {$(
        const _: () = {
            #[export_name = concat!("expr_", $suffix, "v_vec")]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                p: Program,
                n: u32,
                g: Geometry<u32, 2, OPERANDS>,
                ptrs: Pointers,
            ) {
                // SAFETY: the module contract and the vectorised one.
                unsafe { vectorised(Path::$path, &p, n, &g, &ptrs) }
            }
        };
    )*};
}

vectorised! {
    "f" F32;
    "i" I32;
    "u" U32;
    "b" U8;
}

/// `expr_fv_wide`: the vectorised kernel of `f32` math for wide programs (the contract at
/// [`WIDE_NAMES`](super::WIDE_NAMES)).
#[export_name = "expr_fv_wide"]
#[allow(improper_ctypes_definitions)]
unsafe extern "ptx-kernel" fn wide_f32(
    p: Program,
    n: u32,
    g: Geometry<u32, 2, OPERANDS>,
    ptrs: Pointers,
) {
    const _: () = assert!(matches!(crate::paths::FAST_PATHS[0], Class::F32));
    const K: usize = match super::VECTOR_LANES[0] {
        Some(k) => k,
        None => panic!("f32 has a vectorised kernel"),
    };
    // SAFETY: the module contract and the vectorised one; the host launches it only for
    // a wide program of `f32` math.
    unsafe { staged_vector::<f32, u32, K, FAST_INPUTS, true, false>(&p, n, &g, &ptrs) }
}

/// The cheap kernels ([`CHEAP_NAMES`](super::CHEAP_NAMES), and their contract): the
/// vectorised layout, twice the lanes, the dispatch of the cheap ops only.
macro_rules! cheap {
    ($($name:literal $t:ty, $i:literal, $class:ident;)*) => {$(
        const _: () = {
            #[export_name = $name]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                p: Program,
                n: u32,
                g: Geometry<u32, 2, OPERANDS>,
                ptrs: Pointers,
            ) {
                const _: () = assert!(matches!(crate::paths::FAST_PATHS[$i], Class::$class));
                const K: usize = match super::CHEAP_LANES[$i] {
                    Some(k) => k,
                    None => panic!("a fast path without a cheap kernel"),
                };
                // SAFETY: the module contract and the vectorised one; the host launches
                // it only for a cheap program of this path.
                unsafe {
                    staged_vector::<$t, u32, K, CHEAP_INPUTS, false, true>(&p, n, &g, &ptrs)
                }
            }
        };
    )*};
}

cheap! {
    "expr_fv_cheap" f32, 0, F32;
}
