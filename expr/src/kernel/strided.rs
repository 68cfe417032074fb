//! The element-wise kernels of the planner's layout variants (`expr_<class>s_<variant>`,
//! [`NAMES`](super::NAMES)): contiguous operands for the general interpreter, one to three
//! collapsed dimensions, up to six, any rank.

use crate::eval::{run_in, Eval, FAST_LOADED};
use crate::ir::{Class, Program, MAX_INPUTS};
use crate::kernel::interp::{
    coords_of, each_fast_input, each_input, interpret, load_lanes, offset_at, store_lanes, Path,
    Raw,
};
use crate::kernel::staging::{fetch, konst, stage};
use crate::kernel::{Pointers, OPERANDS};
use crate::reduce::{load_bits, store_bits};
use crate::value::{elem_of, narrow, narrow_in, widen};

use gpu_kernels::device::thread_range;
use gpu_kernels::elem::ElemType;
use gpu_kernels::geometry::{Geometry, Index};

use gpu_kernels::MAX_DIMS;

/// The fast path: a program of one numeric math type `T` ([`run_fast`](crate::eval::run_fast)), `K` elements per
/// dispatch — indices `i, i + step, …, i + (K - 1) step` of the grid-stride loop, so every
/// lane's loads and stores stay coalesced across the warp.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fast<T: Eval, R: Raw, const K: usize, const D: usize>(
    p: &Program,
    base: u32,
    n: u32,
    g: &Geometry<u32, D, OPERANDS>,
    ptrs: &Pointers,
    ndim: usize,
    first: u32,
    step: u32,
) {
    let n_in = p.n_inputs as usize;
    let out = elem_of(p.out);
    let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
    // Element sizes once, before the loop (a size is a table lookup, a global load: in
    // the loop it delays every input's load).
    let size: [usize; FAST_LOADED] = core::array::from_fn(|k| ins[k].size());
    let out_size = out.size();
    let n = n as u64;
    let mut i = first as u64;
    while i < n {
        let idx: [u64; K] = core::array::from_fn(|j| i + j as u64 * step as u64);
        // Every input up front (guards in sequence, each with a constant input index:
        // exclusive arms of one `match` on the index would be merged by the compiler
        // into one arm indexing the parameters at run time, a stack frame); every load
        // of every input first, then the conversions, so the loads are all in flight
        // at once.
        let live: [bool; K] = core::array::from_fn(|j| idx[j] < n);
        // One multi-index per lane, shared by every operand (`ndim == 0`: contiguous,
        // every offset is the index).
        let coords: [[u32; D]; K] = core::array::from_fn(|j| coords_of(g, idx[j] as u32, ndim));
        let offset = |k: usize, j: usize| {
            if ndim == 0 {
                idx[j] as isize
            } else {
                offset_at(g, &coords[j], ndim, k)
            }
        };
        let mut raw = [[R::default(); K]; FAST_LOADED];
        each_fast_input!(|KK| {
            if KK < n_in {
                let offs: [isize; K] = core::array::from_fn(|j| offset(KK + 1, j));
                // SAFETY: input KK's offsets for the live lanes (module contract).
                raw[KK] = unsafe { load_lanes(ptrs.0[KK + 1], &offs, &live, size[KK]) };
            }
        });
        // At most FAST_LOADED inputs (the contract at `NAMES`): none past them.
        let none = |_| [R::default(); K];
        let bits =
            interpret::<T, R, K, false, FAST_LOADED, false, false>(p, base, &ins, &raw, none, out);
        let offs: [isize; K] = core::array::from_fn(|j| offset(0, j));
        // SAFETY: the output's offsets for the live lanes (module contract).
        unsafe { store_lanes(ptrs.0[0], &offs, &live, out_size, &bits) };
        i += K as u64 * step as u64;
    }
}

/// The grid-stride loop of every variant; `ndim == 0` is the contiguous one.
#[inline(always)]
unsafe fn body<const D: usize>(
    path: Path,
    p: &Program,
    n: u32,
    g: &Geometry<u32, D, OPERANDS>,
    ptrs: &Pointers,
    ndim: usize,
) {
    // SAFETY: the module contract's shared memory; called once by every thread.
    let general = matches!(path, Path::General | Path::GeneralExt);
    let base = unsafe { stage(p, !general) };
    let (first, step) = thread_range::<u32>();
    // SAFETY (both): forwarded; the host launches a fast kernel only for a program of
    // its math type (`Program::fast`).
    macro_rules! fast {
        ($t:ty, $r:ty, $k:literal) => {
            return unsafe { fast::<$t, $r, $k, D>(p, base, n, g, ptrs, ndim, first, step) }
        };
    }
    match path {
        Path::F32 => fast!(f32, u32, 4),
        Path::F64 => fast!(f64, u64, 2),
        Path::I32 => fast!(i32, u32, 4),
        Path::I64 => fast!(i64, u64, 2),
        Path::U32 => fast!(u32, u32, 4),
        Path::U8 => fast!(u8, u32, 4),
        Path::General | Path::GeneralExt => {}
    }
    let ext = matches!(path, Path::GeneralExt);
    let len = p.len as usize;
    let n_in = p.n_inputs as usize;
    let out = elem_of(p.out);
    let result = Class::from_code(p.result).unwrap_or(Class::F32);
    let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
    let mut i = first;
    while i < n {
        let off: [isize; OPERANDS] = if ndim == 0 {
            [i as isize; OPERANDS]
        } else {
            let c = coords_of(g, i, ndim);
            let mut off = [0isize; OPERANDS];
            each_input!(|K| {
                if K < n_in {
                    off[K + 1] = offset_at(g, &c, ndim, K + 1);
                }
            });
            off[0] = offset_at(g, &c, ndim, 0);
            off
        };
        // Every load first, then every conversion: a conversion between two loads
        // would wait for the first load before the second is issued.
        let mut x = [[0u64; 1]; MAX_INPUTS];
        each_input!(|K| {
            if K < n_in {
                // SAFETY: input K's offset for `i < n` (module contract).
                x[K] = [unsafe { load_bits(ptrs.0[K + 1], off[K + 1], ins[K].size()) }];
            }
        });
        each_input!(|K| {
            if K < n_in {
                x[K] = [widen(ins[K], x[K][0])];
            }
        });
        let (fetch, konst) = (|pc| fetch(base, pc), |c| konst(base, c));
        let v = if ext {
            run_in::<1, true>(len, fetch, konst, &x)
        } else {
            run_in::<1, false>(len, fetch, konst, &x)
        };
        // SAFETY: the output's offset for `i < n` (module contract).
        let bits = if ext {
            narrow(result, v[0], out)
        } else {
            narrow_in::<false>(result, v[0], out)
        };
        unsafe { store_bits(ptrs.0[0], off[0], out.size(), bits) };
        i = i.wadd(step);
    }
}

macro_rules! entry {
    ($($name:literal $d:tt $ndim:tt;)*) => {$(
        entry!(@one $name, "gs", General, $d, $ndim);
        entry!(@one $name, "fs", F32, $d, $ndim);
        entry!(@one $name, "ds", F64, $d, $ndim);
        entry!(@one $name, "is", I32, $d, $ndim);
        entry!(@one $name, "ls", I64, $d, $ndim);
        entry!(@one $name, "us", U32, $d, $ndim);
        entry!(@one $name, "bs", U8, $d, $ndim);
    )*};
    (@one $name:literal, $class:literal, $path:ident, $d:tt, $ndim:tt) => {
        const _: () = {
            #[export_name = concat!("expr_", $class, "_", $name)]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                p: Program,
                n: u32,
                g: Geometry<u32, $d, OPERANDS>,
                ptrs: Pointers,
            ) {
                let ndim = entry!(@ndim g $ndim);
                // SAFETY: the module contract.
                unsafe { body::<$d>(Path::$path, &p, n, &g, &ptrs, ndim) }
            }
        };
    };
    (@ndim $g:ident (fixed $n:literal)) => { $n };
    (@ndim $g:ident run) => { $g.ndim as usize };
}

#[export_name = "expr_gs_c"]
#[allow(improper_ctypes_definitions)]
unsafe extern "ptx-kernel" fn contiguous(
    p: Program,
    n: u32,
    g: Geometry<u32, 1, OPERANDS>,
    ptrs: Pointers,
) {
    // SAFETY: the module contract; every offset is the linear index.
    unsafe { body::<1>(Path::General, &p, n, &g, &ptrs, 0) }
}

#[export_name = "expr_gx_c"]
#[allow(improper_ctypes_definitions)]
unsafe extern "ptx-kernel" fn contiguous_ext(
    p: Program,
    n: u32,
    g: Geometry<u32, 1, OPERANDS>,
    ptrs: Pointers,
) {
    // SAFETY: the module contract; every offset is the linear index.
    unsafe { body::<1>(Path::GeneralExt, &p, n, &g, &ptrs, 0) }
}

entry! {
    "d1" 1 (fixed 1);
    "d2" 2 (fixed 2);
    "d3" 3 (fixed 3);
    "d6" { super::D6_DIMS } run;
}

#[export_name = "expr_gs_dn"]
#[allow(improper_ctypes_definitions)]
unsafe extern "ptx-kernel" fn any_rank(
    p: Program,
    n: u32,
    g: Geometry<u32, MAX_DIMS, OPERANDS>,
    ptrs: Pointers,
) {
    // SAFETY: the module contract.
    unsafe { body::<MAX_DIMS>(Path::General, &p, n, &g, &ptrs, g.ndim as usize) }
}

#[export_name = "expr_gx_dn"]
#[allow(improper_ctypes_definitions)]
unsafe extern "ptx-kernel" fn any_rank_ext(
    p: Program,
    n: u32,
    g: Geometry<u32, MAX_DIMS, OPERANDS>,
    ptrs: Pointers,
) {
    // SAFETY: the module contract.
    unsafe { body::<MAX_DIMS>(Path::GeneralExt, &p, n, &g, &ptrs, g.ndim as usize) }
}
