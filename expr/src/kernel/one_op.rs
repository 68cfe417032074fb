//! The one-op kernels (`expr_<class>o_k<lanes>`, [`ONE_NAMES`](super::ONE_NAMES)):
//! programs of a single op over the vectorised layout, the op dispatched once per thread.

use crate::eval::Eval;
use crate::ir::{Opcode, Program};
use crate::kernel::interp::{coords_of, load_words, offset_at, store_words};
use crate::kernel::{Pointers, ONE_OPERANDS, OPERANDS};
use crate::reduce::{load_bits, store_bits};
use crate::value::{narrow, widen, Math};
use gpu_kernels::device::thread_range;
use gpu_kernels::elem::ElemType;
use gpu_kernels::geometry::Geometry;

/// The program code of element type `e` ([`ELEMS`](crate::ir::ELEMS)), at compile time.
pub(crate) const fn code_of(e: ElemType) -> u8 {
    let mut i = 0;
    while i < crate::ir::ELEMS.len() {
        if crate::ir::ELEMS[i] as u8 == e as u8 {
            return i as u8;
        }
        i += 1;
    }
    u8::MAX
}

/// `$arm!(e, size)` for the element type of program code `$code`, `e` and its size
/// constants in each arm (codes of [`ELEMS`](crate::ir::ELEMS), matched without a table
/// load); `$none` for a code that is none.
macro_rules! by_code {
    ($code:expr, $arm:ident, $none:expr) => {{
        match $code {
            c if c == code_of(ElemType::F32) => $arm!(ElemType::F32, 4),
            c if c == code_of(ElemType::BF16) => $arm!(ElemType::BF16, 2),
            c if c == code_of(ElemType::F16) => $arm!(ElemType::F16, 2),
            c if c == code_of(ElemType::U8) => $arm!(ElemType::U8, 1),
            c if c == code_of(ElemType::I32) => $arm!(ElemType::I32, 4),
            c if c == code_of(ElemType::U32) => $arm!(ElemType::U32, 4),
            c if c == code_of(ElemType::F64) => $arm!(ElemType::F64, 8),
            c if c == code_of(ElemType::I64) => $arm!(ElemType::I64, 8),
            c if c == code_of(ElemType::Bool) => $arm!(ElemType::Bool, 1),
            c if c == code_of(ElemType::I8) => $arm!(ElemType::I8, 1),
            c if c == code_of(ElemType::I16) => $arm!(ElemType::I16, 2),
            c if c == code_of(ElemType::U16) => $arm!(ElemType::U16, 2),
            _ => $none,
        }
    }};
}
pub(crate) use by_code;

/// `$body` once for each constant `$j` of `0..16`, the lanes of a 16-byte vector (a loop
/// over lanes that LLVM leaves rolled indexes the lane arrays at run time: a stack
/// frame).
macro_rules! each_lane {
    (|$j:ident| $body:block) => {
        each_lane!(@ $j, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $j:ident, $body:block, $($n:literal)*) => {
        $( { const $j: usize = $n; $body } )*
    };
}
pub(crate) use each_lane;

/// Lane `j` of a vector of `S`-byte elements held as little-endian words.
#[inline(always)]
fn lane<const S: usize>(w: &[u32; 4], j: usize) -> u64 {
    match S {
        1 => ((w[j / 4] >> (8 * (j % 4))) & 0xff) as u64,
        2 => ((w[j / 2] >> (16 * (j % 2))) & 0xffff) as u64,
        4 => w[j] as u64,
        _ => w[2 * j] as u64 | (w[2 * j + 1] as u64) << 32,
    }
}

/// Sets lane `j` (zero before) of a vector of `S`-byte elements held as words to the
/// low `S` bytes of `bits`.
#[inline(always)]
fn set_lane<const S: usize>(w: &mut [u32; 4], j: usize, bits: u64) {
    match S {
        1 => w[j / 4] |= ((bits & 0xff) as u32) << (8 * (j % 4)),
        2 => w[j / 2] |= ((bits & 0xffff) as u32) << (16 * (j % 2)),
        4 => w[j] = bits as u32,
        _ => {
            w[2 * j] = bits as u32;
            w[2 * j + 1] = (bits >> 32) as u32;
        }
    }
}

/// One operand's 16 bytes (`16 / S` elements of `S` bytes) from element offset `off` of
/// `base`, as words: one vector where `unit` and `full`; one element in every lane where
/// not `unit` (stride 0); the live lanes one by one otherwise (a partial last vector).
/// The lanes stay packed until the op's arm unpacks them.
///
/// # Safety
/// The vectorised contract for this operand at `off`.
#[inline(always)]
unsafe fn load_packed<const S: usize>(
    base: u64,
    off: isize,
    unit: bool,
    full: bool,
    n_live: u32,
) -> [u32; 4] {
    let mut w = [0u32; 4];
    if unit && full {
        // SAFETY: the caller's aligned 16-byte vector.
        let v = unsafe { load_words::<16>((base as *const u8).wrapping_offset(off * S as isize)) };
        w.copy_from_slice(&v[..4]);
    } else if !unit {
        // SAFETY: the caller's element at `off`.
        let x = unsafe { load_bits(base, off, S) };
        each_lane!(|J| {
            if J < 16 / S {
                set_lane::<S>(&mut w, J, x);
            }
        });
    } else {
        each_lane!(|J| {
            if J < 16 / S && (J as u32) < n_live {
                // SAFETY: a live lane's element (the caller's contract).
                let x = unsafe { load_bits(base, off + J as isize, S) };
                set_lane::<S>(&mut w, J, x);
            }
        });
    }
    w
}

/// A one-op program's op code, read at constant offsets of the parameter (a run-time
/// index would copy it whole into a stack frame). Guards in sequence: exclusive arms
/// that differ in a constant index are merged by LLVM into one read at a run-time index.
#[inline(always)]
pub(crate) fn one_code(p: &Program) -> u8 {
    let operands = (p.len as usize).wrapping_sub(1);
    let mut op = p.instrs[3].op;
    if operands == 0 {
        op = p.instrs[0].op;
    }
    if operands == 1 {
        op = p.instrs[1].op;
    }
    if operands == 2 {
        op = p.instrs[2].op;
    }
    op
}

/// A one-op program's constant operands in `T` (operand `q` past the inputs; 0
/// elsewhere), read as [`one_code`] reads the op.
#[inline(always)]
pub(crate) fn one_consts<T: Math>(p: &Program) -> [T; ONE_OPERANDS] {
    let n_in = p.n_inputs as usize;
    let operands = (p.len as usize).wrapping_sub(1);
    let konst = |q: usize| {
        let arg = p.instrs[q].arg;
        let mut bits = p.consts[2];
        if arg == 0 {
            bits = p.consts[0];
        }
        if arg == 1 {
            bits = p.consts[1];
        }
        T::dec(bits)
    };
    core::array::from_fn(|q| {
        if q >= n_in && q < operands {
            konst(q)
        } else {
            T::dec(0)
        }
    })
}

/// A one-op kernel's body ([`ONE_NAMES`](super::ONE_NAMES)): this thread's vector of `K`
/// lanes, every operand of one element type ([`one_kernel`](super::one_kernel)) of
/// `16 / K` bytes: the inputs loaded as packed 16-byte vectors, constants taken from
/// the program, the op dispatched once (each arm unpacks, widens, computes, rounds and
/// packs its lanes: no lane array crosses a branch), one vector stored.
///
/// # Safety
/// The module contract without the shared memory, and the vectorised contract for `K`
/// lanes; `p` is a one-op program ([`one_op`](super::one_op)) of `T`'s math type whose
/// operands are all of one element type of `16 / K` bytes.
#[inline(always)]
unsafe fn one<T: Eval, const K: usize>(
    p: &Program,
    n: u32,
    g: &Geometry<u32, 2, OPERANDS>,
    ptrs: &Pointers,
) {
    let (v, _) = thread_range::<u32>();
    if v >= n.div_ceil(K as u32) {
        return;
    }
    let i = v * K as u32;
    let n_live = n - i;
    let c = if g.sizes[1] == 1 {
        [i, 0]
    } else {
        coords_of(g, i, 2)
    };
    let op = one_code(p);
    macro_rules! body {
        ($e:expr, $s:literal) => {
            if K * $s == 16 && super::one_elem(T::CLASS, $e) {
                let k = one_consts::<T>(p);
                // SAFETY (every arm): forwarded; every operand is of element type `$e`,
                // and the program has the inputs the arm names.
                if $s >= 4 {
                    unsafe { one_typed::<T, K, $s, 0>($e, p, g, ptrs, c, n_live, &k, op) }
                } else {
                    // Lanes narrower than a register: the input count as a constant, so
                    // no lane selects between an input and a constant (registers).
                    match p.n_inputs {
                        1 => unsafe { one_typed::<T, K, $s, 1>($e, p, g, ptrs, c, n_live, &k, op) },
                        2 => unsafe { one_typed::<T, K, $s, 2>($e, p, g, ptrs, c, n_live, &k, op) },
                        _ => unsafe { one_typed::<T, K, $s, 3>($e, p, g, ptrs, c, n_live, &k, op) },
                    }
                }
            }
        };
    }
    by_code!(p.out, body, ())
}

/// [`one`] for operands of element type `e` of `S` bytes (a constant in each call), of
/// `N` inputs (`N == 0`: the program's count, read at run time).
///
/// # Safety
/// As [`one`]; `k[q]` is operand `q`'s value where it is a constant; `N` is 0 or the
/// program's input count.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn one_typed<T: Eval, const K: usize, const S: usize, const N: usize>(
    e: ElemType,
    p: &Program,
    g: &Geometry<u32, 2, OPERANDS>,
    ptrs: &Pointers,
    c: [u32; 2],
    n_live: u32,
    k: &[T; ONE_OPERANDS],
    op: u8,
) {
    let n_in = if N == 0 { p.n_inputs as usize } else { N };
    let full = n_live >= K as u32;
    let mut w = [[0u32; 4]; ONE_OPERANDS];
    macro_rules! operand {
        ($($q:literal)*) => {$(
            if $q < n_in {
                let off = offset_at(g, &c, 2, $q + 1);
                let unit = g.strides[$q + 1][0] == 1;
                // SAFETY: the vectorised contract for input $q.
                w[$q] = unsafe { load_packed::<S>(ptrs.0[$q + 1], off, unit, full, n_live) };
            }
        )*};
    }
    operand!(0 1 2);
    // Operand q of lane j in T: input q's lane, or the constant.
    let x = |q: usize, j: usize| {
        if q < n_in {
            T::dec(widen(e, lane::<S>(&w[q], j)))
        } else {
            k[q]
        }
    };
    macro_rules! ops {
        ($($name:ident $arity:tt),*) => {
            match Opcode::from_code(op) {
                $(Some(Opcode::$name) => ops!(@ $name $arity),)*
                _ => return,
            }
        };
        (@ $name:ident $arity:tt) => {{
            if N > $arity {
                // More inputs than operands: no such one-op program (`one_op`).
                return;
            }
            let mut r = [0u32; 4];
            each_lane!(|J| {
                if J < K {
                    let y = ops!(@@ $name $arity J);
                    set_lane::<S>(&mut r, J, narrow(T::CLASS, y.enc(), e));
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
    let r = ops!(
        Load 1, Neg 1, Abs 1, Relu 1, Add 2, Sub 2, Mul 2, Div 2, Min 2, Max 2, Fma 3, Clamp 3
    );
    let off = offset_at(g, &c, 2, 0);
    if full {
        let mut words = [0u32; 16];
        words[..4].copy_from_slice(&r);
        let out = (ptrs.0[0] as *mut u8).wrapping_offset(off * S as isize);
        // SAFETY: the output's aligned 16-byte vector (the vectorised contract).
        unsafe { store_words::<16>(out, &words) };
    } else {
        each_lane!(|J| {
            if J < K && (J as u32) < n_live {
                // SAFETY: a live lane's element of the output.
                unsafe { store_bits(ptrs.0[0], off + J as isize, S, lane::<S>(&r, J)) };
            }
        });
    }
}

/// The one-op kernels, `expr_<class>o_k<lanes>` ([`ONE_NAMES`](super::ONE_NAMES)).
macro_rules! one_kernels {
    ($($name:literal $t:ty, $i:literal, $k:literal;)*) => {$(
        const _: () = {
            #[export_name = $name]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                p: Program,
                n: u32,
                g: Geometry<u32, 2, OPERANDS>,
                ptrs: Pointers,
            ) {
                const _: () = assert!(super::one_listed($i, $k, $name));
                // SAFETY: the module contract and the vectorised one; the host launches
                // it only for a one-op program of this path and lanes.
                unsafe { one::<$t, $k>(&p, n, &g, &ptrs) }
            }
        };
    )*};
}

one_kernels! {
    "expr_fo_k4" f32, 0, 4;
    "expr_fo_k8" f32, 0, 8;
    "expr_do_k2" f64, 1, 2;
    "expr_io_k4" i32, 2, 4;
    "expr_io_k8" i32, 2, 8;
    "expr_io_k16" i32, 2, 16;
    "expr_lo_k2" i64, 3, 2;
    "expr_uo_k4" u32, 4, 4;
    "expr_bo_k16" u8, 5, 16;
}
