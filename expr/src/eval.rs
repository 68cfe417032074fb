//! The interpreter: `K` lanes (elements) at a time, one dispatch per instruction on its
//! opcode and math type. Each operation is today's op of the same name (the op structs of
//! `gpu_kernels::ops` on the math type), so a one-op program gives that op's bits.
//!
//! The stack is `MAX_DEPTH` slots of `K` lanes; slots are named by the depth the host
//! recorded in each instruction, through a `match` over constant indices, so a GPU compiler
//! can keep every slot in registers.

use crate::ir::{
    elem_code, elem_of_code, Class, Instr, Opcode, Program, MAX_CONSTS, MAX_DEPTH, MAX_INPUTS,
    MAX_INSTRS,
};
use crate::value::{convert_in, narrow_in, widen, with_class_in, Math};
use gpu_kernels::elem::{Bool, ElemType};
use gpu_kernels::math::{FloatFns, Num, Signed};
use gpu_kernels::ops::{self, Op2, Op3, Op4};

/// `K` lanes of one value.
pub type Lanes<const K: usize> = [u64; K];

/// Runs `p` on `K` lanes. `inputs[i]` holds input `i` already in its math type
/// ([`widen`]); the result is in the program's result class (round
/// it to the output with [`narrow`](crate::value::narrow)).
#[inline(always)]
pub fn eval<const K: usize>(p: &Program, inputs: &[Lanes<K>; MAX_INPUTS]) -> Lanes<K> {
    run(
        p.len as usize,
        |pc| p.instrs[pc % MAX_INSTRS],
        |c| p.consts[c % MAX_CONSTS],
        inputs,
    )
}

/// [`eval`] with the program read through `instr` (instruction `pc < len`) and `konst`
/// (constant `c`): the GPU kernels read a program they staged in shared memory, the CPU
/// twin its value; the interpretation is this one function either way.
#[inline(always)]
pub fn run<const K: usize>(
    len: usize,
    instr: impl Fn(usize) -> Instr,
    konst: impl Fn(usize) -> u64,
    inputs: &[Lanes<K>; MAX_INPUTS],
) -> Lanes<K> {
    run_in::<K, true>(len, instr, konst, inputs)
}

/// [`run`] with the extended ops ([`is_extended`]) only where `EXT`: without them a GPU
/// kernel's dispatch holds no code for them (the general interpreter's kernels without the
/// op set's further float functions keep 81–90 registers on sm_90, with them 126–129), and
/// an extended instruction leaves its first operand (the host runs such programs on the
/// kernels with them).
#[inline(always)]
pub fn run_in<const K: usize, const EXT: bool>(
    len: usize,
    instr: impl Fn(usize) -> Instr,
    konst: impl Fn(usize) -> u64,
    inputs: &[Lanes<K>; MAX_INPUTS],
) -> Lanes<K> {
    let mut s = [[0u64; K]; MAX_DEPTH];
    let n = len.min(MAX_INSTRS);
    let mut pc = 0;
    while pc < n {
        step::<K, EXT>(instr(pc), &konst, &mut s, inputs);
        pc += 1;
    }
    s[0]
}

/// Whether instruction `i` is of the extended ops: the op set's float functions past the
/// fast path's (`erfc`, `lgamma`, `tan`, the inverse and hyperbolic functions, `atan2`,
/// `hypot`, …), `fmod`, `floor_divide`, `nextafter`, the remainder of floats, and every
/// instruction of `u64` math. Their code is long (libdevice's functions, 64-bit unsigned
/// division), and in the general interpreter's dispatch it costs every program registers:
/// the host runs programs with them on kernels of their own.
pub fn is_extended(i: Instr) -> bool {
    let u64_math = i.class == Class::U64 as u8
        || (i.op == Opcode::Cast as u8 && i.arg == Class::U64 as u8)
        || (i.op == Opcode::Narrow as u8 && crate::ir::elem_of_code(i.arg) == Some(ElemType::U64));
    u64_math || Opcode::from_code(i.op).is_some_and(|op| ext_op(op, i.class))
}

/// Whether `op` in class code `class` is an extended op ([`is_extended`]) that
/// [`Eval::unary_ext`] or [`Eval::binary_ext`] computes.
#[inline(always)]
fn ext_op(op: Opcode, class: u8) -> bool {
    use Opcode::*;
    match op {
        Rem => Class::from_code(class).is_some_and(Class::is_float),
        _ => matches!(
            op,
            Erfc | Erfinv
                | Lgamma
                | Exp2
                | Expm1
                | Log2
                | Log10
                | Log1p
                | Tan
                | Asin
                | Acos
                | Atan
                | Sinh
                | Cosh
                | Asinh
                | Acosh
                | Atanh
                | Atan2
                | Hypot
                | Fmod
                | FloorDiv
                | Nextafter
        ),
    }
}

/// Stack depth of a fast-path program: its stack slots are four values each, so the GPU
/// keeps them in registers with room for enough threads per SM.
pub const FAST_SLOTS: usize = 4;

/// Inputs of a fast-path program: every input of the IR (a hoisted program reads its
/// temporaries beside the inputs it kept: the seed expression over a row, a column and a
/// full input reads five).
pub const FAST_INPUTS: usize = MAX_INPUTS;

/// Inputs that the GPU kernels load before a fast program runs, every load in flight at
/// once. Only the wide kernels (`kernel::WIDE_NAMES`) take more, loaded by their load
/// instruction: all eight inputs' lanes up front took `expr_fv_vec` from 56 to 77 registers and
/// the 64-bit kernels past 110.
pub const FAST_LOADED: usize = 4;

/// Whether `p` is a program of the fast path ([`run_fast`]): at most [`FAST_INPUTS`] inputs
/// (those past [`FAST_LOADED`] of the math type's own element type) and [`FAST_SLOTS`] of
/// stack depth, every instruction a load or a constant of one numeric math type, or
/// an arithmetic op of that type (no comparison, `where`, cast or rounding to 16 bits);
/// that type, or `None`.
pub fn fast_class(p: &Program) -> Option<Class> {
    let class = Class::from_code(p.result).filter(|&c| c != Class::Bool)?;
    if p.n_inputs as usize > FAST_INPUTS || p.max_depth as usize > FAST_SLOTS {
        return None;
    }
    let own = elem_code(class.elem());
    if (FAST_LOADED..p.n_inputs as usize).any(|k| Some(p.inputs[k]) != own) {
        return None;
    }
    // The fast kernels convert between the float types, and to and from the other element
    // types of the math type itself (`value::widen_own`, `narrow_own`): an operand of
    // another math type, or an 8-bit float, leaves the fast path.
    let converted = |code: u8| {
        elem_of_code(code).is_some_and(|e| match e {
            ElemType::F32 | ElemType::F64 | ElemType::F16 | ElemType::BF16 => true,
            ElemType::F8E4M3 | ElemType::F8E5M2 => false,
            _ => Class::of(e) == Some(class),
        })
    };
    if !converted(p.out)
        || !p.inputs[..p.n_inputs as usize]
            .iter()
            .all(|&c| converted(c))
    {
        return None;
    }
    let allowed = |op: Opcode| fast_allows(class, op);
    p.code()
        .iter()
        .all(|i| i.class == class as u8 && Opcode::from_code(i.op).is_some_and(allowed))
        .then_some(class)
}

/// Whether the fast path of math type `class` runs `op`: loads, constants, the arithmetic
/// every type has, the float functions of the fast list for floats, the remainder for
/// integers; comparisons, tests and `where` for the float types (a comparison gives the
/// type's 1 or 0, which only a `where` of the same program reads: a bool value anywhere
/// else is of another math type). The fast kernels hold arms for these only. On the general
/// interpreter `where(isnan(a), 0, a)` of a transposed f16 square took 10.8 ms (H100), on
/// the fast path's tiled kernel (`benches/runs/75-op-set-h100`). For `u8` math the
/// comparisons' arms took `expr_bv_vec` from 60 registers to 106: integers stay off.
pub const fn fast_allows(class: Class, op: Opcode) -> bool {
    use Opcode::*;
    let float = class.is_float();
    match op {
        Load | Const | Neg | Abs | Relu | Add | Sub | Mul | Div | Min | Max | Fma | Clamp => true,
        Sqrt | Rsqrt | Exp | Log | Sin | Cos | Tanh | Sigmoid | Pow => float,
        Eq | Ne | Lt | Le | Gt | Ge | IsNan | IsInf | IsFinite | IsPosInf | IsNegInf | SignBit
        | Where => float,
        Rem => !float,
        _ => false,
    }
}

/// The first dispatch code of an op in [`fast_word`]: the codes below it are loads, `input
/// * 4 + slot`. (Loads of the inputs past [`FAST_LOADED`] placed after the ops' codes
/// instead gave the `u8` kernels up to 6 registers more.)
const LOAD_CODES: u32 = (FAST_INPUTS * FAST_SLOTS) as u32;

/// The fast path's dispatch word of instruction `i` ([`run_fast`]): the opcode and the stack
/// slot it writes as one code in the low byte (a load: the input and the slot), its
/// argument (a constant's index) in the next. The interpreter branches once per
/// instruction, on the code; the GPU kernels compute the words once per block.
#[inline(always)]
pub fn fast_word(i: Instr) -> u32 {
    let slots = FAST_SLOTS as u32 - 1;
    let at = (i.depth as u32).wrapping_sub(Opcode::arity_of(i.op) as u32) & slots;
    let code = if i.op == Opcode::Load as u8 {
        (i.arg as u32 & (FAST_INPUTS as u32 - 1)) * FAST_SLOTS as u32 + at
    } else {
        LOAD_CODES + fast_index(i.op) * FAST_SLOTS as u32 + at
    };
    (code & 0xff) | (i.arg as u32) << 8
}

/// The codes of [`fast_word`] that write stack slot `$a`, a constant per op (the patterns
/// of the fast interpreter's one `match`).
macro_rules! slot_codes {
    ($m:ident $a:literal; $($op:ident $n:tt),*) => {
        #[allow(non_upper_case_globals)]
        mod $m {
            use super::{fast_index, Opcode, FAST_SLOTS, LOAD_CODES};
            $(pub const $op: u32 = LOAD_CODES + fast_index(Opcode::$op as u8) * FAST_SLOTS as u32 + $a;)*
        }
    };
}

/// `fast_index` and `FAST_OPS` from the list of `fast_ops!`.
macro_rules! fast_index_fn {
    ($($op:ident $n:tt),*) => {
        /// The fast path's ops, `Const` first, in the order of their dispatch codes.
        const FAST_LIST: &[u8] = &[$(Opcode::$op as u8),*];
    };
}

/// Each opcode's position in the fast path's list (`fast_ops!`), the list's length for an op
/// not in it (a table made at compile time: the GPU kernels read it once per instruction and
/// block, when they compute the dispatch words).
const FAST_INDEX: [u8; Opcode::ALL.len()] = {
    let mut t = [FAST_LIST.len() as u8; Opcode::ALL.len()];
    let mut i = 0;
    while i < FAST_LIST.len() {
        t[FAST_LIST[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// The position of opcode code `op` in the fast path's list (`fast_ops!`), the list's
/// length for any other op: a fast program's dispatch code counts from it, so the opcode
/// numbering can grow past the codes a byte holds.
#[inline(always)]
pub const fn fast_index(op: u8) -> u32 {
    if (op as usize) < FAST_INDEX.len() {
        FAST_INDEX[op as usize] as u32
    } else {
        FAST_LIST.len() as u32
    }
}

/// `$cb!($($args)* op arity, …)` over the ops of the fast path: `Const` (arity 0), then
/// every op [`fast_class`] admits.
macro_rules! fast_ops {
    ($cb:ident! $($args:tt)*) => {
        $cb! {$($args)*
            Const 0, Neg 1, Abs 1, Relu 1, Sqrt 1, Rsqrt 1, Exp 1, Log 1, Sin 1, Cos 1, Tanh 1,
            Sigmoid 1, IsNan 1, IsInf 1, IsFinite 1, IsPosInf 1, IsNegInf 1, SignBit 1, Add 2,
            Sub 2, Mul 2, Div 2, Rem 2, Min 2, Max 2, Pow 2, Eq 2, Ne 2, Lt 2, Le 2, Gt 2, Ge 2,
            Fma 3, Clamp 3, Where 3}
    };
}
/// `$cb!($($args)* op arity, …)` over the cheap ops of the fast path (no transcendental
/// function, no division, `Rem` or `Pow`): the programs the cheap kernels run
/// ([`is_cheap`]), whose dispatch holds these arms only and so fits more lanes in about the
/// same registers (`Div` with its IEEE subroutine cost a block per SM).
macro_rules! cheap_ops {
    ($cb:ident! $($args:tt)*) => {
        $cb! {$($args)*
            Const 0, Neg 1, Abs 1, Relu 1, Add 2, Sub 2, Mul 2, Min 2, Max 2, Fma 3,
            Clamp 3}
    };
}

/// Whether every instruction of `p` is a load, a constant or a cheap op (`cheap_ops!`):
/// a fast program that the cheap kernels can run.
pub fn is_cheap(p: &Program) -> bool {
    use Opcode::*;
    p.code().iter().all(|i| {
        matches!(
            Opcode::from_code(i.op),
            Some(Load | Const | Neg | Abs | Relu | Add | Sub | Mul | Min | Max | Fma | Clamp)
        )
    })
}

fast_ops!(fast_index_fn!);
fast_ops!(slot_codes! s0 0;);
fast_ops!(slot_codes! s1 1;);
fast_ops!(slot_codes! s2 2;);
fast_ops!(slot_codes! s3 3;);
const _: () = assert!(
    FAST_SLOTS == 4
        && FAST_INPUTS == 8
        && FAST_INPUTS.is_power_of_two()
        && LOAD_CODES + (FAST_LIST.len() as u32 + 1) * 4 <= 256
);

/// The fast path of [`run`] for a program of one numeric math type `T` ([`fast_class`]):
/// stack slots are `K` values of `T` (registers on the GPU, no encoding), `input(k)` is
/// input `k`'s `K` lanes in `T` (called with a constant `k` in each load's arm; the arms
/// of the first `INPUTS` inputs only, so a kernel that loads four has no code for the
/// others), and one dispatch serves `K` elements. The program comes as
/// its [`fast_word`]s (`word(pc)` for `pc < len`, called once per `pc` in order). The same ops as [`run`], so the same
/// bits.
#[inline(always)]
pub fn run_fast<T: Eval, const K: usize, const INPUTS: usize>(
    len: usize,
    word: impl FnMut(usize) -> u32,
    konst: impl Fn(usize) -> u64,
    input: impl Fn(usize) -> [T; K],
) -> [T; K] {
    run_ops::<T, K, INPUTS, false>(len, word, konst, input)
}

/// [`run_fast`], with the dispatch of the cheap ops only where `CHEAP` (for a program that
/// [`is_cheap`]; any other op's instruction would be skipped).
#[inline(always)]
pub fn run_ops<T: Eval, const K: usize, const INPUTS: usize, const CHEAP: bool>(
    len: usize,
    mut word: impl FnMut(usize) -> u32,
    konst: impl Fn(usize) -> u64,
    input: impl Fn(usize) -> [T; K],
) -> [T; K] {
    let zero = T::dec(0);
    let mut s = [[zero; K]; FAST_SLOTS];
    let n = len.min(MAX_INSTRS) as u32;
    let mut pc = 0u32;
    while pc < n {
        let w = word(pc as usize);
        // One dispatch per instruction on its code, (opcode, slot), as the CUDA C probe's
        // stack machine: in each arm the op and the slots are constants, so the slots stay
        // in registers without selects and the lanes are that op's code only.
        macro_rules! lanes {
            ($a:literal Const 0) => {{
                s[$a] = [T::dec(konst((w >> 8) as usize % MAX_CONSTS)); K];
            }};
            // An op the type's fast path does not run has an empty arm. A comparison or a
            // test gives `T`'s 1 or 0; a `where` takes its condition as such a value.
            ($a:literal $op:ident 1) => {{
                if fast_allows(T::CLASS, Opcode::$op) {
                    let x = s[$a];
                    s[$a] = if Opcode::$op.is_test() {
                        core::array::from_fn(|j| T::truth(T::test(Opcode::$op, x[j]).get()))
                    } else {
                        core::array::from_fn(|j| T::unary(Opcode::$op, x[j]))
                    };
                }
            }};
            ($a:literal $op:ident 2) => {{
                if fast_allows(T::CLASS, Opcode::$op) {
                    let (x, y) = (s[$a], s[($a + 1) & 3]);
                    s[$a] = if Opcode::$op.is_comparison() {
                        core::array::from_fn(|j| {
                            T::truth(T::compare(Opcode::$op, x[j], y[j]).get())
                        })
                    } else {
                        core::array::from_fn(|j| T::binary(Opcode::$op, x[j], y[j]))
                    };
                }
            }};
            ($a:literal $op:ident 3) => {{
                if fast_allows(T::CLASS, Opcode::$op) {
                    let (x, y, z) = (s[$a], s[($a + 1) & 3], s[($a + 2) & 3]);
                    s[$a] = if matches!(Opcode::$op, Opcode::Where) {
                        core::array::from_fn(|j| if x[j].enc() != 0 { y[j] } else { z[j] })
                    } else {
                        core::array::from_fn(|j| T::ternary(Opcode::$op, x[j], y[j], z[j]))
                    };
                }
            }};
        }
        // The arms of each slot gathered in turn, then the one `match`.
        macro_rules! dispatch {
            ($list:ident [$($arms:tt)*]; $m:ident $a:literal, $($rest:tt)*) => {
                $list!(dispatch! @slot $list [$($arms)*] [$($rest)*] $m $a;)
            };
            ($list:ident [$($arms:tt)*];) => {
                match w & 0xff {
                    $($arms)*
                    _ => {}
                }
            };
            (@slot $list:ident [$($arms:tt)*] [$($rest:tt)*] $m:ident $a:literal;
             $($op:ident $n:tt),*) => {
                dispatch!($list [$($arms)* $($m::$op => lanes!($a $op $n),)*]; $($rest)*)
            };
        }
        // Loads: code `input * 4 + slot`.
        macro_rules! loads {
            ($list:ident; $($c:literal $k:literal $a:literal),*) => {
                dispatch!($list [$($c if $k < INPUTS => s[$a] = input($k),)*];
                          s0 0, s1 1, s2 2, s3 3,)
            };
        }
        macro_rules! all {
            ($list:ident) => {
                loads!($list;
                    0 0 0, 1 0 1, 2 0 2, 3 0 3, 4 1 0, 5 1 1, 6 1 2, 7 1 3,
                    8 2 0, 9 2 1, 10 2 2, 11 2 3, 12 3 0, 13 3 1, 14 3 2, 15 3 3,
                    16 4 0, 17 4 1, 18 4 2, 19 4 3, 20 5 0, 21 5 1, 22 5 2, 23 5 3,
                    24 6 0, 25 6 1, 26 6 2, 27 6 3, 28 7 0, 29 7 1, 30 7 2, 31 7 3
                )
            };
        }
        if CHEAP {
            all!(cheap_ops)
        } else {
            all!(fast_ops)
        }
        pc += 1;
    }
    s[0]
}

/// Element `i` of an 8-slot array through constant indices only (a GPU compiler can keep
/// every slot in a register): stack slots and input slots.
#[inline(always)]
fn slot<T: Copy>(a: &[T; 8], i: usize) -> T {
    match i & 7 {
        0 => a[0],
        1 => a[1],
        2 => a[2],
        3 => a[3],
        4 => a[4],
        5 => a[5],
        6 => a[6],
        _ => a[7],
    }
}

#[inline(always)]
fn get<const K: usize>(s: &[Lanes<K>; MAX_DEPTH], i: usize) -> Lanes<K> {
    slot(s, i)
}

/// Input `i`'s lanes.
#[inline(always)]
fn load<const K: usize>(inputs: &[Lanes<K>; MAX_INPUTS], i: usize) -> Lanes<K> {
    slot(inputs, i)
}

#[inline(always)]
fn set<V>(s: &mut [V; MAX_DEPTH], i: usize, v: V) {
    match i & (MAX_DEPTH - 1) {
        0 => s[0] = v,
        1 => s[1] = v,
        2 => s[2] = v,
        3 => s[3] = v,
        4 => s[4] = v,
        5 => s[5] = v,
        6 => s[6] = v,
        _ => s[7] = v,
    }
}

#[inline(always)]
fn step<const K: usize, const EXT: bool>(
    ins: Instr,
    konst: &impl Fn(usize) -> u64,
    s: &mut [Lanes<K>; MAX_DEPTH],
    inputs: &[Lanes<K>; MAX_INPUTS],
) {
    let (Some(op), Some(class)) = (Opcode::from_code(ins.op), Class::from_code(ins.class)) else {
        return;
    };
    let d = ins.depth as usize;
    let arity = Opcode::arity_of(ins.op);
    let at = d.wrapping_sub(arity);
    if ext_op(op, ins.class) {
        if EXT {
            let x = get(s, at);
            let v = if arity == 1 {
                with_class_in!(EXT, class, T => core::array::from_fn(|j| T::unary_ext(op, T::dec(x[j])).enc()))
            } else {
                let y = get(s, at.wrapping_add(1));
                match elem_of_code(ins.arg) {
                    // `nextafter` of a 16-bit float (`F32` math): the step of its own type.
                    Some(e @ (ElemType::F16 | ElemType::BF16)) if op == Opcode::Nextafter => {
                        core::array::from_fn(|j| nextafter16(e, x[j], y[j]))
                    }
                    _ => with_class_in!(EXT, class, T => core::array::from_fn(|j| {
                        T::binary_ext(op, T::dec(x[j]), T::dec(y[j])).enc()
                    })),
                }
            };
            set(s, at, v);
        }
        return;
    }
    let v = match op {
        Opcode::Load => load(inputs, ins.arg as usize),
        Opcode::Const => [konst(ins.arg as usize % MAX_CONSTS); K],
        Opcode::Cast => {
            let from = Class::from_code(ins.arg).unwrap_or(class);
            let x = get(s, at);
            core::array::from_fn(|j| convert_in::<EXT>(from, class, x[j]))
        }
        Opcode::Narrow => {
            let x = get(s, at);
            match elem_of_code(ins.arg) {
                Some(e) => core::array::from_fn(|j| widen(e, narrow_in::<EXT>(class, x[j], e))),
                None => x,
            }
        }
        _ => match arity {
            1 => {
                let x = get(s, at);
                with_class_in!(EXT, class, T => lanes1::<T, K>(op, &x))
            }
            2 => {
                let (x, y) = (get(s, at), get(s, at.wrapping_add(1)));
                with_class_in!(EXT, class, T => lanes2::<T, K>(op, &x, &y))
            }
            _ => {
                let x = get(s, at);
                let y = get(s, at.wrapping_add(1));
                let z = get(s, at.wrapping_add(2));
                with_class_in!(EXT, class, T => lanes3::<T, K>(op, &x, &y, &z))
            }
        },
    };
    set(s, at, v);
}

#[inline(always)]
fn lanes1<T: Eval, const K: usize>(op: Opcode, x: &Lanes<K>) -> Lanes<K> {
    if op.is_test() {
        return core::array::from_fn(|j| T::test(op, T::dec(x[j])).enc());
    }
    core::array::from_fn(|j| T::unary(op, T::dec(x[j])).enc())
}

#[inline(always)]
fn lanes2<T: Eval, const K: usize>(op: Opcode, x: &Lanes<K>, y: &Lanes<K>) -> Lanes<K> {
    core::array::from_fn(|j| {
        let (a, b) = (T::dec(x[j]), T::dec(y[j]));
        if op.is_comparison() {
            T::compare(op, a, b).enc()
        } else {
            T::binary(op, a, b).enc()
        }
    })
}

#[inline(always)]
fn lanes3<T: Eval, const K: usize>(
    op: Opcode,
    x: &Lanes<K>,
    y: &Lanes<K>,
    z: &Lanes<K>,
) -> Lanes<K> {
    core::array::from_fn(|j| {
        if op == Opcode::Where {
            // The condition is bool; the values are of the class.
            return if x[j] != 0 { y[j] } else { z[j] };
        }
        T::ternary(op, T::dec(x[j]), T::dec(y[j]), T::dec(z[j])).enc()
    })
}

/// The operations of one math type. An opcode the type does not have (the host's type
/// check keeps them out) gives the first operand unchanged.
pub trait Eval: Math {
    /// 1 or 0 of this type: a comparison's result on the fast path.
    #[inline(always)]
    fn truth(b: bool) -> Self {
        Self::dec(b as u64)
    }
    fn unary(op: Opcode, x: Self) -> Self;
    fn binary(op: Opcode, x: Self, y: Self) -> Self;
    fn compare(op: Opcode, x: Self, y: Self) -> Bool;
    fn ternary(op: Opcode, x: Self, y: Self, z: Self) -> Self;
    /// The unary tests ([`Opcode::is_test`]).
    fn test(op: Opcode, x: Self) -> Bool;
    /// The extended unary ops ([`is_extended`]); the operand unchanged where the type has
    /// none.
    #[inline(always)]
    fn unary_ext(_op: Opcode, x: Self) -> Self {
        x
    }
    /// The extended binary ops ([`is_extended`]); the first operand where the type has none.
    #[inline(always)]
    fn binary_ext(_op: Opcode, x: Self, _y: Self) -> Self {
        x
    }
}

#[inline(always)]
fn op2<O: Op2<T, T>, T: Copy>(o: O, x: T) -> T {
    let mut r = x;
    o.apply(&mut r, x);
    r
}

#[inline(always)]
fn op3<O: Op3<T, T, T>, T: Copy>(o: O, x: T, y: T) -> T {
    let mut r = x;
    o.apply(&mut r, x, y);
    r
}

#[inline(always)]
fn cmp<O: Op3<Bool, T, T>, T: Copy>(o: O, x: T, y: T) -> Bool {
    let mut r = Bool::FALSE;
    o.apply(&mut r, x, y);
    r
}

/// The arithmetic every numeric type has, as today's op structs compute it; `None` for
/// another opcode.
#[inline(always)]
fn arith<T: Num>(op: Opcode, x: T, y: T) -> Option<T> {
    Some(match op {
        Opcode::Add => op3(ops::Add, x, y),
        Opcode::Sub => op3(ops::Sub, x, y),
        Opcode::Mul => op3(ops::Mul, x, y),
        Opcode::Div => op3(ops::Div, x, y),
        Opcode::Min => op3(ops::Min, x, y),
        Opcode::Max => op3(ops::Max, x, y),
        _ => return None,
    })
}

#[inline(always)]
fn compare_num<T: Num>(op: Opcode, x: T, y: T) -> Bool {
    match op {
        Opcode::Eq => cmp(ops::Eq, x, y),
        Opcode::Ne => cmp(ops::Ne, x, y),
        Opcode::Lt => cmp(ops::Lt, x, y),
        Opcode::Le => cmp(ops::Le, x, y),
        Opcode::Gt => cmp(ops::Gt, x, y),
        _ => cmp(ops::Ge, x, y),
    }
}

#[inline(always)]
fn ternary_num<T: Num>(op: Opcode, x: T, y: T, z: T) -> T {
    match op {
        Opcode::Fma => {
            let mut r = x;
            ops::Fma.apply(&mut r, x, y, z);
            r
        }
        Opcode::Clamp => op2(ops::Clamp { lo: y, hi: z }, x),
        _ => x,
    }
}

macro_rules! float_eval {
    ($($t:ty),*) => {$(
        impl Eval for $t {
            #[inline(always)]
            fn truth(b: bool) -> Self { if b { 1.0 } else { 0.0 } }
            #[inline(always)]
            fn unary(op: Opcode, x: Self) -> Self {
                match op {
                    Opcode::Neg => op2(ops::Neg, x),
                    Opcode::Abs => op2(ops::Abs, x),
                    Opcode::Relu => op2(ops::Relu, x),
                    Opcode::Sqrt => op2(ops::Sqrt, x),
                    Opcode::Rsqrt => op2(ops::Rsqrt, x),
                    Opcode::Exp => op2(ops::Exp, x),
                    Opcode::Log => op2(ops::Log, x),
                    Opcode::Sin => op2(ops::Sin, x),
                    Opcode::Cos => op2(ops::Cos, x),
                    Opcode::Tanh => op2(ops::Tanh, x),
                    Opcode::Sigmoid => op2(ops::Sigmoid, x),
                    Opcode::Erf => FloatFns::erf(x),
                    Opcode::Floor => FloatFns::floor(x),
                    Opcode::Ceil => FloatFns::ceil(x),
                    Opcode::Round => FloatFns::round(x),
                    Opcode::Trunc => FloatFns::trunc(x),
                    // (0 < x) - (x < 0): NaN gives 0, as PyTorch's `sign`.
                    Opcode::Sign => ((0.0 < x) as i32 - (x < 0.0) as i32) as $t,
                    _ => x,
                }
            }
            #[inline(always)]
            fn unary_ext(op: Opcode, x: Self) -> Self {
                match op {
                    Opcode::Erfc => FloatFns::erfc(x),
                    Opcode::Erfinv => FloatFns::erfinv(x),
                    Opcode::Lgamma => FloatFns::lgamma(x),
                    Opcode::Exp2 => FloatFns::exp2(x),
                    Opcode::Expm1 => FloatFns::expm1(x),
                    Opcode::Log2 => FloatFns::log2(x),
                    Opcode::Log10 => FloatFns::log10(x),
                    Opcode::Log1p => FloatFns::log1p(x),
                    Opcode::Tan => FloatFns::tan(x),
                    Opcode::Asin => FloatFns::asin(x),
                    Opcode::Acos => FloatFns::acos(x),
                    Opcode::Atan => FloatFns::atan(x),
                    Opcode::Sinh => FloatFns::sinh(x),
                    Opcode::Cosh => FloatFns::cosh(x),
                    Opcode::Asinh => FloatFns::asinh(x),
                    // Below 1 NaN on both sides (musl's `acosh` on the host gives -inf for
                    // x < -1: it assumes x >= 1).
                    Opcode::Acosh => if x < 1.0 { <$t>::NAN } else { FloatFns::acosh(x) },
                    Opcode::Atanh => FloatFns::atanh(x),
                    _ => x,
                }
            }
            #[inline(always)]
            fn binary(op: Opcode, x: Self, y: Self) -> Self {
                match op {
                    Opcode::Pow => op3(ops::Pow, x, y),
                    Opcode::Copysign => FloatFns::copysign(x, y),
                    // A NaN operand gives the other one.
                    Opcode::Fmin => if y != y || y > x { x } else { y },
                    Opcode::Fmax => if y != y || y < x { x } else { y },
                    _ => arith(op, x, y).unwrap_or(x),
                }
            }
            #[inline(always)]
            fn binary_ext(op: Opcode, x: Self, y: Self) -> Self {
                match op {
                    Opcode::Rem => {
                        // PyTorch's `remainder`: `fmod`, moved to the divisor's sign.
                        let m = FloatFns::fmod(x, y);
                        if m != 0.0 && ((y < 0.0) != (m < 0.0)) { m + y } else { m }
                    }
                    Opcode::FloorDiv => floor_div_float(x, y),
                    Opcode::Fmod => FloatFns::fmod(x, y),
                    Opcode::Atan2 => FloatFns::atan2(x, y),
                    Opcode::Hypot => FloatFns::hypot(x, y),
                    Opcode::Nextafter => FloatFns::nextafter(x, y),
                    _ => x,
                }
            }
            #[inline(always)]
            fn compare(op: Opcode, x: Self, y: Self) -> Bool { compare_num(op, x, y) }
            #[inline(always)]
            fn ternary(op: Opcode, x: Self, y: Self, z: Self) -> Self { ternary_num(op, x, y, z) }
            #[inline(always)]
            fn test(op: Opcode, x: Self) -> Bool {
                let inf = x.abs() == <$t>::INFINITY;
                Bool::from(match op {
                    Opcode::IsNan => x != x,
                    Opcode::IsInf => inf,
                    Opcode::IsFinite => x == x && !inf,
                    Opcode::IsPosInf => x == <$t>::INFINITY,
                    Opcode::IsNegInf => x == <$t>::NEG_INFINITY,
                    _ => x.is_sign_negative(),
                })
            }
        }
    )*};
}

/// `nextafter` in 16-bit float type `e` of two `F32` values of that type (their encodings):
/// the neighbour of `x` toward `y` in `e`, widened back (exact).
#[inline(always)]
fn nextafter16(e: ElemType, x: u64, y: u64) -> u64 {
    let (fx, fy) = (f32::dec(x), f32::dec(y));
    if fx.is_nan() || fy.is_nan() {
        return f32::NAN.enc();
    }
    if fx == fy {
        return y;
    }
    let bits = narrow_in::<false>(Class::F32, x, e) as u16;
    let next = if fx == 0.0 {
        (if fy < 0.0 { 0x8000 } else { 0 }) | 1
    } else if (fy > fx) == (fx > 0.0) {
        bits + 1
    } else {
        bits - 1
    };
    widen(e, next as u64)
}

/// PyTorch's floor division of floats (`div_floor_floating`): by zero the IEEE quotient;
/// else `(x - fmod(x, y)) / y`, moved down by one where the remainder's sign is not the
/// divisor's, then rounded to the nearest integer the quotient lies within a half of.
#[inline(always)]
fn floor_div_float<T: FloatFns + Copy + PartialOrd + Num>(x: T, y: T) -> T {
    let zero = T::ZERO;
    if y == zero {
        return x.div(y);
    }
    let m = x.fmod(y);
    let mut d = x.sub(m).div(y);
    if m != zero && ((y < zero) != (m < zero)) {
        d = d.sub(T::ONE);
    }
    if d != zero {
        let f = d.floor();
        let half = T::ONE.div(T::ONE.add(T::ONE));
        if d.sub(f) > half {
            f.add(T::ONE)
        } else {
            f
        }
    } else {
        zero.copysign(x.div(y))
    }
}

float_eval!(f32, f64);

macro_rules! int_eval {
    ($($t:ty, $u:ty: $neg:expr, $abs:expr, $rem:expr;)*) => {$(
        impl Eval for $t {
            #[inline(always)]
            fn unary(op: Opcode, x: Self) -> Self {
                match op {
                    Opcode::Neg => ($neg)(x),
                    Opcode::Abs => ($abs)(x),
                    Opcode::Relu => op2(ops::Relu, x),
                    Opcode::Sign => ((0 < x) as $t).wrapping_sub(x.negative() as $t),
                    Opcode::BitNot => !x,
                    // Rounding an integer leaves it as it is (as every other unary op here
                    // that only floats have; the host's type check keeps those out).
                    _ => x,
                }
            }
            #[inline(always)]
            fn binary(op: Opcode, x: Self, y: Self) -> Self {
                const BITS: $t = <$t>::BITS as $t;
                // A shift amount outside 0..BITS, as PyTorch reads it (signed).
                let out_of_range = y.negative() || y >= BITS;
                // The amount saturated at the width, from all of `y` before a shift reads
                // it. (Written as "out of range ? 0 : x << y", LLVM's NVPTX backend folded
                // the test into PTX's saturating shift, whose amount is 32 bits: 64-bit
                // amounts such as 2^32 or 2^63 shifted by their low word.)
                let s: u32 = if out_of_range { <$t>::BITS } else { y as u32 };
                match op {
                    Opcode::Rem => ($rem)(x, y),
                    Opcode::BitAnd => x & y,
                    Opcode::BitOr => x | y,
                    Opcode::BitXor => x ^ y,
                    Opcode::Shl => (x as $u).checked_shl(s).unwrap_or(0) as $t,
                    // Out of range: the sign fill (0 for an unsigned value), as PyTorch.
                    Opcode::Shr => x.checked_shr(s).unwrap_or(if x.negative() { !0 } else { 0 }),
                    Opcode::Fmin => op3(ops::Min, x, y),
                    Opcode::Fmax => op3(ops::Max, x, y),
                    _ => arith(op, x, y).unwrap_or(x),
                }
            }
            #[inline(always)]
            fn compare(op: Opcode, x: Self, y: Self) -> Bool { compare_num(op, x, y) }
            #[inline(always)]
            fn ternary(op: Opcode, x: Self, y: Self, z: Self) -> Self { ternary_num(op, x, y, z) }
            #[inline(always)]
            fn binary_ext(op: Opcode, x: Self, y: Self) -> Self {
                match op {
                    Opcode::FloorDiv => {
                        if y == 0 {
                            0
                        } else {
                            let q = x.wrapping_div(y);
                            let r = x.wrapping_rem(y);
                            if r != 0 && (x.negative() != y.negative()) { q.wrapping_sub(1) } else { q }
                        }
                    }
                    Opcode::Fmod => x.checked_rem(y).unwrap_or(0),
                    _ => x,
                }
            }
            #[inline(always)]
            fn test(op: Opcode, x: Self) -> Bool {
                Bool::from(match op {
                    Opcode::IsFinite => true,
                    Opcode::SignBit => x.negative(),
                    _ => false,
                })
            }
        }
    )*};
}

/// Python's `%` (the sign of the divisor), by zero 0.
#[inline(always)]
fn rem_signed<T: Num + Signed + RemOps>(x: T, y: T) -> T {
    if y == T::ZERO {
        return T::ZERO;
    }
    let r = x.wrapping_rem_(y);
    if r != T::ZERO && ((r < T::ZERO) != (y < T::ZERO)) {
        r.add(y)
    } else {
        r
    }
}

/// Integer remainder that does not overflow (`MIN % -1` is 0).
trait RemOps: Sized {
    fn wrapping_rem_(self, y: Self) -> Self;
}
macro_rules! rem_ops {
    ($($t:ty),*) => {$( impl RemOps for $t {
        #[inline(always)] fn wrapping_rem_(self, y: Self) -> Self { self.wrapping_rem(y) }
    } )*};
}
rem_ops!(i32, i64);

/// Whether an integer is below zero (never, for an unsigned one).
trait Negative: Copy {
    fn negative(self) -> bool;
}
macro_rules! negative {
    ($($t:ty: $signed:literal),*) => {$( impl Negative for $t {
        #[inline(always)]
        #[allow(unused_comparisons)]
        fn negative(self) -> bool { $signed && self < 0 }
    } )*};
}
negative!(i32: true, i64: true, u32: false, u8: false, u64: false);

// Each integer math type and its unsigned form (for shifts).
int_eval! {
    i32, u32: |x| op2(ops::Neg, x), |x| op2(ops::Abs, x), rem_signed::<i32>;
    i64, u64: |x| op2(ops::Neg, x), |x| op2(ops::Abs, x), rem_signed::<i64>;
    u32, u32: u32::wrapping_neg, |x| x, |x: u32, y: u32| x.checked_rem(y).unwrap_or(0);
    u8, u8: u8::wrapping_neg, |x| x, |x: u8, y: u8| x.checked_rem(y).unwrap_or(0);
    u64, u64: u64::wrapping_neg, |x| x, |x: u64, y: u64| x.checked_rem(y).unwrap_or(0);
}

impl Eval for Bool {
    #[inline(always)]
    fn unary(op: Opcode, x: Self) -> Self {
        match op {
            Opcode::Not | Opcode::BitNot => Bool::from(!x.get()),
            _ => x,
        }
    }
    #[inline(always)]
    fn binary(op: Opcode, x: Self, y: Self) -> Self {
        match op {
            // The minimum of bools is their and, the maximum their or (as PyTorch's).
            Opcode::And | Opcode::BitAnd | Opcode::Min | Opcode::Fmin => {
                Bool::from(x.get() && y.get())
            }
            Opcode::Or | Opcode::BitOr | Opcode::Max | Opcode::Fmax => {
                Bool::from(x.get() || y.get())
            }
            Opcode::Xor | Opcode::BitXor => Bool::from(x.get() != y.get()),
            _ => x,
        }
    }
    #[inline(always)]
    fn compare(op: Opcode, x: Self, y: Self) -> Bool {
        let (a, b) = (x.get(), y.get());
        Bool::from(match op {
            Opcode::Eq => a == b,
            Opcode::Ne => a != b,
            Opcode::Lt => !a & b,
            Opcode::Le => a <= b,
            Opcode::Gt => a & !b,
            _ => a >= b,
        })
    }
    #[inline(always)]
    fn ternary(_op: Opcode, x: Self, _y: Self, _z: Self) -> Self {
        x
    }
    #[inline(always)]
    fn test(op: Opcode, _x: Self) -> Bool {
        Bool::from(op == Opcode::IsFinite)
    }
}
