//! Device code every interpreter kernel shares: operands' lanes loaded and stored by element
//! size, offsets of a multi-index, the fast paths' interpreter over lanes ([`interpret`]),
//! and which interpreter a kernel runs ([`Path`]).

use crate::eval::{run_ops, Eval, FAST_LOADED};
use crate::ir::{Program, MAX_INPUTS};
use crate::kernel::staging::konst;
use crate::kernel::{OPERANDS, PROGRAM_BYTES};
use crate::value::{narrow, narrow_own, widen, widen_own, Math};
use gpu_kernels::device::ld_shared_u32;
use gpu_kernels::elem::ElemType;
use gpu_kernels::geometry::{Geometry, Index};

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
pub(crate) use each_input;

/// `$body` once for each constant `$k` of `0..FAST_LOADED`.
macro_rules! each_fast_input {
    (|$k:ident| $body:block) => {
        each_input!(@ $k, $body, 0 1 2 3)
    };
}
const _: () = assert!(FAST_LOADED == 4 && crate::kernel::TILED_INPUTS == FAST_LOADED);
pub(crate) use each_fast_input;

/// `$body` for each `$d` below `D` and `$ndim`: unrolled by hand (a constant `$d`) for
/// up to [`UNROLLED`] dimensions, so the geometry is read at constant parameter offsets
/// whatever `ndim` is (a loop that the compiler leaves rolled indexes the parameter at
/// run time, which copies it whole into a stack frame); a loop for the general kernel of
/// every rank ([`DN`](crate::kernel::DN)).
macro_rules! each_dim {
    ($ndim:expr, |$d:ident| $body:block) => {
        if D <= UNROLLED {
            each_dim!(@ $ndim, $d, $body, 0 1 2 3 4 5)
        } else {
            let mut dd = 0;
            while dd < D && dd < $ndim {
                #[allow(non_snake_case)]
                let $d: usize = dd;
                $body
                dd += 1;
            }
        }
    };
    (@ $ndim:expr, $d:ident, $body:block, $($n:literal)*) => {{
        $( if $n < D && $n < $ndim { const $d: usize = $n; $body } )*
    }};
}
const UNROLLED: usize = crate::kernel::D6_DIMS;
const _: () = assert!(UNROLLED == 6);

/// The multi-index of linear index `i` over the collapsed sizes (`ndim` in use).
#[inline(always)]
#[allow(unused_assignments)] // the outermost dimension's quotient
pub(crate) fn coords_of<const D: usize>(
    g: &Geometry<u32, D, OPERANDS>,
    mut i: u32,
    ndim: usize,
) -> [u32; D] {
    let mut c = [0u32; D];
    each_dim!(ndim, |DD| {
        c[DD] = if DD + 1 == ndim {
            i
        } else {
            let size = g.sizes[DD];
            // SAFETY: the planner's invariant: every size in use is at least 1.
            unsafe { core::hint::assert_unchecked(size != 0) };
            let (q, r) = i.divmod(size);
            i = q;
            r
        };
    });
    c
}

/// Operand `k`'s element offset at multi-index `c`. Called with a constant `k`, so the
/// geometry is read at constant offsets.
#[inline(always)]
pub(crate) fn offset_at<const D: usize>(
    g: &Geometry<u32, D, OPERANDS>,
    c: &[u32; D],
    ndim: usize,
    k: usize,
) -> isize {
    let mut off = 0u32;
    each_dim!(ndim, |DD| {
        off = off.wrapping_add(c[DD].wrapping_mul(g.strides[k][DD]));
    });
    off.signed()
}

/// A fast program on `K` lanes of raw input bits (`raw[k]`: input `k`'s, of element
/// type `ins[k]`, for the first [`FAST_LOADED`]; `more(k)` for the others, called by
/// their load instruction): widened to `T`, interpreted, each result rounded once to
/// `out`. A wide kernel (`INPUTS` past `FAST_LOADED`) takes every operand in `T`'s own
/// element type ([`WIDE_NAMES`](crate::kernel::WIDE_NAMES)): no conversion.
/// `EVERY`: the widening and rounding branch to an arm of a constant type for every
/// element type (the tiled kernels: 56 registers against 72 with a run-time fallback
/// arm); else for the float types only (the other kernels: the seed expression ran 6 %
/// slower on `expr_fv_vec` with every arm).
#[inline(always)]
pub(crate) fn interpret<
    T: Eval,
    R: Raw,
    const K: usize,
    const EVERY: bool,
    const INPUTS: usize,
    const OWN: bool,
    const CHEAP: bool,
>(
    p: &Program,
    base: u32,
    ins: &[ElemType; MAX_INPUTS],
    raw: &[[R; K]; FAST_LOADED],
    more: impl Fn(usize) -> [R; K],
    out: ElemType,
) -> [u64; K] {
    let n_in = p.n_inputs as usize;
    let mut x = [[T::dec(0); K]; FAST_LOADED];
    each_fast_input!(|KK| {
        if KK < n_in && KK < INPUTS {
            x[KK] = if OWN {
                raw[KK].map(|v| T::dec(v.bits()))
            } else {
                widen_lanes::<T, R, K, EVERY>(ins[KK], &raw[KK])
            };
        }
    });
    let input = |k: usize| {
        if k < FAST_LOADED {
            x[k]
        } else {
            more(k).map(|v| T::dec(v.bits()))
        }
    };
    // The words' address as an induction variable of its own: derived from the block's
    // shared-memory base in every iteration, ptxas re-read that base (`S2UR`) per
    // interpreted instruction (`run_ops` calls `word` once per instruction, in order).
    let mut at = base + PROGRAM_BYTES;
    let r = run_ops::<T, K, INPUTS, CHEAP>(
        p.len as usize,
        |_| {
            // SAFETY: the staged words; `run_ops` reads at most `MAX_INSTRS` of them.
            let w = unsafe { ld_shared_u32(at) };
            at += 4;
            w
        },
        |c| konst(base, c),
        input,
    );
    if OWN {
        r.map(|v| v.enc())
    } else {
        narrow_lanes::<T, K, EVERY>(&r, out)
    }
}

/// Sixteen bytes, for 16-byte vector loads and stores.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct V4([u32; 4]);

/// The `B` bytes at `p` (a power of two, at most 64, `p` aligned to `min(B, 16)`), as
/// little-endian words; the words past them are 0.
#[inline(always)]
pub(crate) unsafe fn load_words<const B: usize>(p: *const u8) -> [u32; 16] {
    let mut w = [0u32; 16];
    // SAFETY (every arm): the caller's `B` readable, aligned bytes.
    unsafe {
        match B {
            1 => w[0] = *p as u32,
            2 => w[0] = *(p as *const u16) as u32,
            4 => w[0] = *(p as *const u32),
            8 => {
                let v = *(p as *const u64);
                w[0] = v as u32;
                w[1] = (v >> 32) as u32;
            }
            _ => {
                // Unrolled by hand: a loop LLVM keeps rolled indexes `w` at run time
                // (a stack frame).
                let q = p as *const V4;
                macro_rules! part {
                    ($($c:literal)*) => {$(
                        if $c < B / 16 {
                            let v = *q.add($c);
                            w[4 * $c..4 * $c + 4].copy_from_slice(&v.0);
                        }
                    )*};
                }
                part!(0 1 2 3);
            }
        }
    }
    w
}

/// Stores the first `B` bytes of `w` at `p` (as [`load_words`]).
#[inline(always)]
pub(crate) unsafe fn store_words<const B: usize>(p: *mut u8, w: &[u32; 16]) {
    // SAFETY (every arm): the caller's `B` writable, aligned bytes.
    unsafe {
        match B {
            1 => *p = w[0] as u8,
            2 => *(p as *mut u16) = w[0] as u16,
            4 => *(p as *mut u32) = w[0],
            8 => *(p as *mut u64) = w[0] as u64 | (w[1] as u64) << 32,
            _ => {
                let q = p as *mut V4;
                macro_rules! part {
                    ($($c:literal)*) => {$(
                        if $c < B / 16 {
                            *q.add($c) =
                                V4([w[4 * $c], w[4 * $c + 1], w[4 * $c + 2], w[4 * $c + 3]]);
                        }
                    )*};
                }
                part!(0 1 2 3);
            }
        }
    }
}

/// Raw element bits as loaded: `u32` for programs of 4-byte and narrower inputs,
/// `u64` otherwise (half the registers for the first).
pub(crate) trait Raw: Copy + Default {
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
pub(crate) unsafe fn load_lanes<R: Raw, const K: usize>(
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
pub(crate) unsafe fn store_lanes<const K: usize>(
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

/// `$lanes!(t)` for element type `$e`, with `t` a constant in each arm. `$every`: an arm
/// for every element type (`$none` for a code that is none); else the float types' arms
/// and `$own!(t)` of a run-time type for the others, which are of the math type itself
/// there ([`fast_class`](crate::eval::fast_class)). [`widen_lanes`] and
/// [`narrow_lanes`].
macro_rules! by_elem {
    ($e:expr, $every:expr, $lanes:ident, $own:ident, $none:expr) => {
        if !$every {
            match $e {
                ElemType::F32 => $lanes!(ElemType::F32),
                ElemType::F64 => $lanes!(ElemType::F64),
                ElemType::F16 => $lanes!(ElemType::F16),
                ElemType::BF16 => $lanes!(ElemType::BF16),
                other => $own!(other),
            }
        } else {
            match $e {
                ElemType::F32 => $lanes!(ElemType::F32),
                ElemType::F64 => $lanes!(ElemType::F64),
                ElemType::F16 => $lanes!(ElemType::F16),
                ElemType::BF16 => $lanes!(ElemType::BF16),
                ElemType::I32 => $lanes!(ElemType::I32),
                ElemType::I64 => $lanes!(ElemType::I64),
                ElemType::U32 => $lanes!(ElemType::U32),
                ElemType::U8 => $lanes!(ElemType::U8),
                ElemType::Bool => $lanes!(ElemType::Bool),
                ElemType::I8 => $lanes!(ElemType::I8),
                ElemType::I16 => $lanes!(ElemType::I16),
                ElemType::U16 => $lanes!(ElemType::U16),
                ElemType::U64 => $lanes!(ElemType::U64),
                ElemType::F8E4M3 => $lanes!(ElemType::F8E4M3),
                ElemType::F8E5M2 => $lanes!(ElemType::F8E5M2),
                // No program element type (`elem_of` gives one of the above).
                _ => $none,
            }
        }
    };
}

/// Elements of type `e` widened to `T` ([`widen`]), one branch on the type (every arm
/// a constant type: a fallback arm of a run-time type keeps its lanes in a loop over a
/// stack frame).
#[inline(always)]
fn widen_lanes<T: Math, R: Raw, const K: usize, const EVERY: bool>(
    e: ElemType,
    bits: &[R; K],
) -> [T; K] {
    macro_rules! lanes {
        ($e:expr) => {
            core::array::from_fn(|j| T::dec(widen($e, bits[j].bits())))
        };
    }
    // The fast kernels' run-time arm: a type of `T`'s math type (`fast_class`).
    macro_rules! own {
        ($e:expr) => {
            core::array::from_fn(|j| T::dec(widen_own(T::CLASS, $e, bits[j].bits())))
        };
    }
    by_elem!(e, EVERY, lanes, own, [T::dec(0); K])
}

/// Values of `T` rounded once to the output type `e` ([`narrow`]), one branch on it.
#[inline(always)]
fn narrow_lanes<T: Math, const K: usize, const EVERY: bool>(v: &[T; K], e: ElemType) -> [u64; K] {
    macro_rules! lanes {
        ($e:expr) => {
            core::array::from_fn(|j| narrow(T::CLASS, v[j].enc(), $e))
        };
    }
    macro_rules! own {
        ($e:expr) => {
            core::array::from_fn(|j| narrow_own(T::CLASS, v[j].enc(), $e))
        };
    }
    by_elem!(e, EVERY, lanes, own, [0; K])
}

/// Which interpreter a kernel runs: each is its own kernel, so the fast paths' register
/// counts (and so the threads an SM holds) are their own, not the general path's.
#[derive(Clone, Copy)]
pub(crate) enum Path {
    General,
    /// The general interpreter with the extended ops ([`is_extended`](crate::eval::is_extended)).
    GeneralExt,
    F32,
    F64,
    I32,
    I64,
    U32,
    U8,
}
