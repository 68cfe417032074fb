//! Tier 0 on the GPU: the interpreter's own kernels, one per layout variant of the
//! planner and per interpreter (the general one, and a fast one per numeric math type:
//! [`NAMES`]) — never per op, never per element type. A kernel takes the [`Program`] by
//! value, the element count, the jointly collapsed geometry of the output and up to
//! [`MAX_INPUTS`] inputs, and their addresses ([`Pointers`]); element types and sizes are
//! read from the program at run time, so one kernel serves every dtype combination.
//!
//! Each block first stages the program in shared memory (thread 0 copies it word by word
//! from the parameter space at constant offsets; a parameter read at a run-time index, as
//! `instrs[pc]`, would copy the whole parameter into a stack frame), then every thread runs
//! the grid-stride loop: load each input by its size and widen it to its math type, run
//! the interpreter the CPU twin runs ([`run`](crate::eval::run), or
//! [`run_fast`](crate::eval::run_fast) for the fast paths), and round the result once into
//! the output.
//!
//! # Safety (every kernel)
//! The host (`strided_apply::expr`) launches these kernels only with a program its
//! compiler checked, [`PROGRAM_BYTES`] of dynamic shared memory, one-dimensional blocks,
//! and the planner's invariants for the geometry: every offset of every operand for
//! `i < n` lies in that operand's buffer (of the program's element type), output offsets
//! are distinct, and an input that shares memory with the output does so only at the same
//! offsets.

use crate::ir::{Class, Program, MAX_INPUTS};

/// Operands of one launch: the output, then the inputs.
pub const OPERANDS: usize = MAX_INPUTS + 1;

/// Bytes of dynamic shared memory every interpreter launch provides: the program.
pub const PROGRAM_BYTES: u32 = core::mem::size_of::<Program>() as u32;

/// The kernel image's module name (the crate's package name).
pub const MODULE: &str = "strided-apply-expr";

/// The variants, as indices of [`NAMES`]: contiguous operands (every offset is the linear
/// index), one to three collapsed dimensions, and up to [`MAX_DIMS`](gpu_kernels::MAX_DIMS)
/// dimensions. All index in 32 bits; the host launches larger plans as 32-bit pieces.
pub const CONTIG: usize = 0;
pub const D1: usize = 1;
pub const D2: usize = 2;
pub const D3: usize = 3;
pub const DN: usize = 4;

/// Kernel names by variant and interpreter: the general one (every program), and the fast
/// paths of programs of one numeric math type ([`Program::fast`]), in the order of
/// [`FAST_PATHS`].
pub const NAMES: [[&str; 7]; 5] = [
    [
        "expr_c", "expr_cf", "expr_cd", "expr_ci", "expr_cl", "expr_cu", "expr_cb",
    ],
    [
        "expr_d1", "expr_d1f", "expr_d1d", "expr_d1i", "expr_d1l", "expr_d1u", "expr_d1b",
    ],
    [
        "expr_d2", "expr_d2f", "expr_d2d", "expr_d2i", "expr_d2l", "expr_d2u", "expr_d2b",
    ],
    [
        "expr_d3", "expr_d3f", "expr_d3d", "expr_d3i", "expr_d3l", "expr_d3u", "expr_d3b",
    ],
    [
        "expr_dn", "expr_dnf", "expr_dnd", "expr_dni", "expr_dnl", "expr_dnu", "expr_dnb",
    ],
];

/// The math types with a fast path, in the order of their kernels in [`NAMES`] (after the
/// general one).
pub const FAST_PATHS: [Class; 6] = [
    Class::F32,
    Class::F64,
    Class::I32,
    Class::I64,
    Class::U32,
    Class::U8,
];

/// The kernel of `variant` that runs program `p`.
pub fn name(variant: usize, p: &Program) -> &'static str {
    let path = FAST_PATHS
        .iter()
        .position(|&c| c as u8 == p.fast)
        .map_or(0, |i| i + 1);
    NAMES[variant % NAMES.len()][path]
}

/// Device addresses of the operands, the output first; unused entries are 0 and never read.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pointers(pub [u64; OPERANDS]);

const _: () = assert!(PROGRAM_BYTES.is_multiple_of(8) && PROGRAM_BYTES <= 48 * 1024);

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::{Pointers, OPERANDS, PROGRAM_BYTES};
    use crate::eval::{run, run_fast, Eval, FAST_SLOTS};
    use crate::ir::{Class, Instr, Program, MAX_INPUTS};
    use crate::value::{elem_of, narrow, widen, Math};
    use gpu_kernels::device::{
        ld_shared_u32, shared_base32, st_shared_u32, sync_threads, thread_range, tile_thread,
    };
    use gpu_kernels::elem::ElemType;
    use gpu_kernels::geometry::{Geometry, Index};
    use gpu_kernels::MAX_DIMS;

    /// `$body` once for each constant `$k` of `0..8`, so arrays indexed by `$k` are read at
    /// constant offsets (parameters) or kept in registers (values).
    macro_rules! each_input {
        (|$k:ident| $body:block) => {
            each_input!(@ $k, $body, 0 1 2 3 4 5 6 7)
        };
        (@ $k:ident, $body:block, $($n:literal)*) => {
            $( { const $k: usize = $n; $body } )*
        };
    }
    const _: () = assert!(MAX_INPUTS == 8);

    /// `$body` once for each constant `$k` of `0..FAST_SLOTS`.
    macro_rules! each_fast_input {
        (|$k:ident| $body:block) => {
            each_input!(@ $k, $body, 0 1 2 3)
        };
    }
    const _: () = assert!(FAST_SLOTS == 4);

    /// `$f(w)` for each constant `w` of `0..100`.
    macro_rules! hundred {
        ($f:ident) => { hundred!(@hi $f, 0 1 2 3 4 5 6 7 8 9) };
        (@hi $f:ident, $($h:literal)*) => { $( hundred!(@lo $f, $h, 0 1 2 3 4 5 6 7 8 9); )* };
        (@lo $f:ident, $h:literal, $($l:literal)*) => { $( $f($h * 10 + $l); )* };
    }

    /// Copies the program into this block's shared memory; returns its shared address.
    ///
    /// # Safety
    /// The launch provides [`PROGRAM_BYTES`] of dynamic shared memory, and every thread of
    /// the block calls this once, before any other shared-memory access.
    #[inline(always)]
    unsafe fn stage(p: &Program) -> u32 {
        let base = shared_base32();
        if tile_thread().0 == 0 {
            const WORDS: usize = PROGRAM_BYTES as usize / 4;
            // SAFETY: `Program` is `repr(C)`, 400 bytes of plain integers, 4-byte aligned.
            let words = unsafe { &*(p as *const Program as *const [u32; WORDS]) };
            // Word `w` of the parameter at a constant offset (a loop would index the
            // parameter at run time, which copies it whole into a stack frame).
            let copy = |w: usize| {
                if w < WORDS {
                    // SAFETY: below PROGRAM_BYTES of the launch's shared memory, aligned.
                    unsafe { st_shared_u32(base + 4 * w as u32, words[w]) };
                }
            };
            const _: () = assert!(WORDS <= 100);
            hundred!(copy);
        }
        sync_threads();
        base
    }

    /// Instruction `pc` of the staged program.
    #[inline(always)]
    fn fetch(base: u32, pc: usize) -> Instr {
        // SAFETY: `pc < MAX_INSTRS` (the interpreter's bound), inside the staged program.
        let w = unsafe { ld_shared_u32(base + 4 * pc as u32) };
        let b = w.to_le_bytes();
        Instr {
            op: b[0],
            class: b[1],
            depth: b[2],
            arg: b[3],
        }
    }

    /// Constant `c` of the staged program.
    #[inline(always)]
    fn konst(base: u32, c: usize) -> u64 {
        const CONSTS: u32 = core::mem::offset_of!(Program, consts) as u32;
        let at = base + CONSTS + 8 * c as u32;
        // SAFETY: `c < MAX_CONSTS` (the interpreter masks it), inside the staged program.
        let (lo, hi) = unsafe { (ld_shared_u32(at), ld_shared_u32(at + 4)) };
        lo as u64 | (hi as u64) << 32
    }

    /// The bits of the `size`-byte element at `base + off * size`, zero-extended.
    #[inline(always)]
    unsafe fn load_bits(base: u64, off: isize, size: usize) -> u64 {
        // SAFETY: the caller's offset is in the operand's buffer (module contract).
        unsafe {
            match size {
                1 => *(base as *const u8).offset(off) as u64,
                2 => *(base as *const u16).offset(off) as u64,
                4 => *(base as *const u32).offset(off) as u64,
                _ => *(base as *const u64).offset(off),
            }
        }
    }

    /// Stores the low `size` bytes of `bits` at `base + off * size`.
    #[inline(always)]
    unsafe fn store_bits(base: u64, off: isize, size: usize, bits: u64) {
        // SAFETY: as `load_bits`, for the output.
        unsafe {
            match size {
                1 => *(base as *mut u8).offset(off) = bits as u8,
                2 => *(base as *mut u16).offset(off) = bits as u16,
                4 => *(base as *mut u32).offset(off) = bits as u32,
                _ => *(base as *mut u64).offset(off) = bits,
            }
        }
    }

    /// The multi-index of linear index `i` over the collapsed sizes (`ndim` in use).
    #[inline(always)]
    fn coords_of<const D: usize>(
        g: &Geometry<u32, D, OPERANDS>,
        mut i: u32,
        ndim: usize,
    ) -> [u32; D] {
        let mut c = [0u32; D];
        let mut d = 0;
        while d < D && d < ndim {
            c[d] = if d + 1 == ndim {
                i
            } else {
                let size = g.sizes[d];
                // SAFETY: the planner's invariant: every size in use is at least 1.
                unsafe { core::hint::assert_unchecked(size != 0) };
                let (q, r) = i.divmod(size);
                i = q;
                r
            };
            d += 1;
        }
        c
    }

    /// Operand `k`'s element offset at multi-index `c`. Called with a constant `k`, so the
    /// geometry is read at constant offsets.
    #[inline(always)]
    fn offset_at<const D: usize>(
        g: &Geometry<u32, D, OPERANDS>,
        c: &[u32; D],
        ndim: usize,
        k: usize,
    ) -> isize {
        let mut off = 0u32;
        let mut d = 0;
        while d < D && d < ndim {
            off = off.wrapping_add(c[d].wrapping_mul(g.strides[k][d]));
            d += 1;
        }
        off.signed()
    }

    /// The fast path: a program of one numeric math type `T` ([`run_fast`]), `K` elements per
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
        let len = p.len as usize;
        let n_in = p.n_inputs as usize;
        let out = elem_of(p.out);
        let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
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
            let mut raw = [[R::default(); K]; FAST_SLOTS];
            each_fast_input!(|KK| {
                if KK < n_in {
                    let offs: [isize; K] = core::array::from_fn(|j| offset(KK + 1, j));
                    // SAFETY: input KK's offsets for the live lanes (module contract).
                    raw[KK] = unsafe { load_lanes(ptrs.0[KK + 1], &offs, &live, ins[KK].size()) };
                }
            });
            let mut x = [[T::dec(0); K]; FAST_SLOTS];
            each_fast_input!(|KK| {
                if KK < n_in {
                    x[KK] = widen_lanes::<T, R, K>(ins[KK], &raw[KK]);
                }
            });
            let v = run_fast::<T, K>(len, |pc| fetch(base, pc), |c| konst(base, c), &x);
            let offs: [isize; K] = core::array::from_fn(|j| offset(0, j));
            let bits = narrow_lanes::<T, K>(&v, out);
            // SAFETY: the output's offsets for the live lanes (module contract).
            unsafe { store_lanes(ptrs.0[0], &offs, &live, out.size(), &bits) };
            i += K as u64 * step as u64;
        }
    }

    /// Raw element bits as loaded: `u32` for programs of 4-byte and narrower inputs,
    /// `u64` otherwise (half the registers for the first).
    trait Raw: Copy + Default {
        fn from_u64(v: u64) -> Self;
        fn bits(self) -> u64;
    }
    impl Raw for u32 {
        #[inline(always)]
        fn from_u64(v: u64) -> Self {
            v as u32
        }
        #[inline(always)]
        fn bits(self) -> u64 {
            self as u64
        }
    }
    impl Raw for u64 {
        #[inline(always)]
        fn from_u64(v: u64) -> Self {
            v
        }
        #[inline(always)]
        fn bits(self) -> u64 {
            self
        }
    }

    /// The live lanes' elements of `size` bytes at `base + offs[j] * size`, zero-extended:
    /// one branch on the size, then every load.
    #[inline(always)]
    unsafe fn load_lanes<R: Raw, const K: usize>(
        base: u64,
        offs: &[isize; K],
        live: &[bool; K],
        size: usize,
    ) -> [R; K] {
        macro_rules! lanes {
            ($t:ty) => {
                core::array::from_fn(|j| {
                    if live[j] {
                        // SAFETY: the caller's offsets of live lanes are in the buffer.
                        R::from_u64(unsafe { *(base as *const $t).offset(offs[j]) } as u64)
                    } else {
                        R::default()
                    }
                })
            };
        }
        match size {
            1 => lanes!(u8),
            2 => lanes!(u16),
            4 => lanes!(u32),
            _ => lanes!(u64),
        }
    }

    /// Stores the live lanes' low `size` bytes at `base + offs[j] * size`.
    #[inline(always)]
    unsafe fn store_lanes<const K: usize>(
        base: u64,
        offs: &[isize; K],
        live: &[bool; K],
        size: usize,
        bits: &[u64; K],
    ) {
        macro_rules! lanes {
            ($t:ty) => {{
                let mut j = 0;
                while j < K {
                    if live[j] {
                        // SAFETY: the caller's offsets of live lanes are in the buffer.
                        unsafe { *(base as *mut $t).offset(offs[j]) = bits[j] as $t };
                    }
                    j += 1;
                }
            }};
        }
        match size {
            1 => lanes!(u8),
            2 => lanes!(u16),
            4 => lanes!(u32),
            _ => lanes!(u64),
        }
    }

    /// Elements of type `e` widened to `T` ([`widen`]), one branch on the type.
    #[inline(always)]
    fn widen_lanes<T: Math, R: Raw, const K: usize>(e: ElemType, bits: &[R; K]) -> [T; K] {
        macro_rules! lanes {
            ($e:expr) => {
                core::array::from_fn(|j| T::dec(widen($e, bits[j].bits())))
            };
        }
        match e {
            ElemType::F32 => lanes!(ElemType::F32),
            ElemType::F64 => lanes!(ElemType::F64),
            ElemType::F16 => lanes!(ElemType::F16),
            ElemType::BF16 => lanes!(ElemType::BF16),
            other => lanes!(other),
        }
    }

    /// Values of `T` rounded once to the output type `e` ([`narrow`]), one branch on it.
    #[inline(always)]
    fn narrow_lanes<T: Math, const K: usize>(v: &[T; K], e: ElemType) -> [u64; K] {
        macro_rules! lanes {
            ($e:expr) => {
                core::array::from_fn(|j| narrow(T::CLASS, v[j].enc(), $e))
            };
        }
        match e {
            ElemType::F32 => lanes!(ElemType::F32),
            ElemType::F64 => lanes!(ElemType::F64),
            ElemType::F16 => lanes!(ElemType::F16),
            ElemType::BF16 => lanes!(ElemType::BF16),
            other => lanes!(other),
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
        let base = unsafe { stage(p) };
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
            Path::General => {}
        }
        let len = p.len as usize;
        let n_in = p.n_inputs as usize;
        let out = elem_of(p.out);
        let result = Class::from_code(p.result).unwrap_or(Class::F32);
        let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
        let mut i = first;
        while i < n {
            let off = if ndim == 0 {
                [i as isize; OPERANDS]
            } else {
                g.offsets(i, ndim)
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
            let v = run::<1>(len, |pc| fetch(base, pc), |c| konst(base, c), &x);
            // SAFETY: the output's offset for `i < n` (module contract).
            unsafe { store_bits(ptrs.0[0], off[0], out.size(), narrow(result, v[0], out)) };
            i = i.wadd(step);
        }
    }

    /// Which interpreter a kernel runs: each is its own kernel, so the fast paths' register
    /// counts (and so the threads an SM holds) are their own, not the general path's.
    #[derive(Clone, Copy)]
    enum Path {
        General,
        F32,
        F64,
        I32,
        I64,
        U32,
        U8,
    }

    macro_rules! entry {
        ($($name:literal $d:tt $ndim:tt;)*) => {$(
            entry!(@one $name, "", General, $d, $ndim);
            entry!(@one $name, "f", F32, $d, $ndim);
            entry!(@one $name, "d", F64, $d, $ndim);
            entry!(@one $name, "i", I32, $d, $ndim);
            entry!(@one $name, "l", I64, $d, $ndim);
            entry!(@one $name, "u", U32, $d, $ndim);
            entry!(@one $name, "b", U8, $d, $ndim);
        )*};
        (@one $name:literal, $suffix:literal, $path:ident, $d:tt, $ndim:tt) => {
            const _: () = {
                #[export_name = concat!($name, $suffix)]
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

    entry! {
        "expr_c" 1 (fixed 0);
        "expr_d1" 1 (fixed 1);
        "expr_d2" 2 (fixed 2);
        "expr_d3" 3 (fixed 3);
        "expr_dn" { MAX_DIMS } run;
    }
}
