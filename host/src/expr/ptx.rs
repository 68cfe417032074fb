//! Tier 1's code generator: a checked [`Program`] written out as a PTX kernel, which the CUDA
//! driver compiles (no NVRTC, no toolkit). Every op is the interpreter's, instruction for
//! instruction: IEEE `.rn` arithmetic (no contraction: `fma` only where the program has one),
//! the NaN rules of the op structs, the `cvt`s of the library's conversions, and the float
//! functions called from the library the build compiled from the interpreter's own code
//! ([`t1lib`]). So a compiled expression gives the interpreter's bits.
//!
//! It compiles programs of every math type ([`supports`]): the float types, bool
//! (predicates), and the integer types in 32-bit registers (`I32`, `U32`; `U8` zero-extended,
//! wrapped back to 8 bits after every op that can leave them; `i8`, `i16`, `u16` elements
//! computed in `I32` as the program says, with its `Narrow`s) or 64-bit ones (`I64`, `U64`).
//! Integer arithmetic wraps (`add`, `mul.lo`, `neg` of two's complement); division and
//! remainders take a divisor of 1 in place of 0 and -1 (PTX leaves those undefined or
//! overflowing) and select the interpreter's results for them (0, and `MIN / -1` wrapping to
//! `MIN`); shifts select PyTorch's results for amounts out of range; conversions from floats
//! select their saturated bounds and NaN's 0 rather than rely on `cvt`'s own.
//!
//! The kernel shapes, with the layout machinery of tier 0's kernels:
//! - [`Shape::Vector`]: `lanes` elements along dimension 0 per thread, one vector access per
//!   operand (unit stride) or one element for all lanes (stride 0), over one dimension (with
//!   a scalar tail; one or more vectors a thread, their loads issued together) or rows of a
//!   multiple of `lanes` elements (tier 0's vectorised contract);
//! - [`Shape::Strided`]: one element per thread and grid-stride step, any strides, the
//!   coordinates by multiply-shift division ([`FastDiv`](gpu_kernels::FastDiv));
//! - [`Shape::Tiled`]: tiles staged through shared memory for transposed inputs;
//! - [`Shape::Reduce`]: an expression reduction's group kernel ([`reduce`]).

use gpu_kernels::elem::ElemType;
use std::fmt::Write;
use strided_apply_expr::ir::{elem_of_code, Class, Opcode, Program, MAX_CONSTS};
use strided_apply_expr::t1lib;

/// The generated kernel's name.
pub(crate) const KERNEL: &str = "sa_t1";

/// The layout a kernel is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// `lanes` elements per thread along dimension 0; operand `k` is broadcast along it
    /// where bit `k` of `bcast` is set (stride 0), else has unit stride and is aligned to
    /// `lanes` elements. `rows`: a second dimension of row strides, dimension 0 a multiple
    /// of `lanes`; otherwise one dimension, its last `n % lanes` elements one per thread.
    /// `per`: vectors per thread of one dimension (1 with `rows`), a block's `per` runs of
    /// `ntid` consecutive vectors, every load issued before the program runs
    /// (`tier1::vector_per`).
    Vector {
        lanes: u8,
        bcast: u16,
        rows: bool,
        per: u8,
    },
    /// One element per thread and step, `rank` collapsed dimensions of any strides.
    Strided { rank: u8 },
    /// One block of 32 × 8 threads per tile of [`tile_side`] × [`tile_side`] elements of
    /// axes 0 × 1 (`launch::tile_axes`: the output's unit-stride axis and a staged input's;
    /// three batch axes): the inputs of `staged` (bit `k`: operand `k`) are read along axis
    /// 1 into shared memory, the tile computed and stored along axis 0. `pair`: every
    /// operand has 2-byte elements and a full tile moves aligned pairs (two elements per
    /// 4-byte access, 2 × 2 blocks turned in registers): the staged inputs along axis 1,
    /// the output and the inputs of `words` along axis 0; otherwise one element per access.
    Tiled { pair: bool, staged: u16, words: u16 },
    /// An expression reduction's group kernel ([`reduce`]).
    Reduce(RedShape),
}

/// The divisions a tiled kernel takes, in order: a block's tile index by the tiles along
/// axes 0 and 1, then by the sizes of batch axes 2 and 3 (what is left is axis 4's index).
pub(crate) const TILED_DIVS: [&str; 4] = ["tx", "ty", "b2", "b3"];

/// Threads of a tiled block: 32 along axis 0 (the output's), 8 along axis 1.
pub(crate) const TILE_THREADS: (u32, u32) = (32, 8);

/// Bytes of static shared memory a kernel may declare: the tiled shape's stages fit it or
/// the plan takes another shape.
pub(crate) const STAGE_LIMIT: u32 = 48 * 1024;

/// Bytes of the tiled shape's stage of an input of `size`-byte elements (padded rows, each
/// stage 8-byte aligned).
pub(crate) fn stage_bytes(pair: bool, size: usize) -> u32 {
    let side = tile_side(pair);
    (side * (side + if pair { 2 } else { 1 }) * size as u32).next_multiple_of(8)
}

/// Elements of a tile's side: 32, 64 for paired tiles.
pub(crate) fn tile_side(pair: bool) -> u32 {
    if pair {
        64
    } else {
        32
    }
}

/// Whether tier 1 compiles `p` (the generator writes it): every value of a float math type, an integer math type
/// (`I32`, `I64`, `U32`, `U8`, `U64`) or bool, every op one the generator writes; inputs and
/// output of the float types `f32`, `f64`, `f16`, `bf16`, the integer types or bool. Not
/// compiled: the 8-bit floats, an `f64` or integer value rounded to a 16-bit float (the
/// library rounds those through `f32` rounded to odd, which the generator does not write),
/// `nextafter` of a 16-bit float, and expression reductions of integer math
/// ([`supports_reduce`]).
pub(crate) fn supports(p: &Program) -> bool {
    let io = |code: u8| {
        matches!(
            elem_of_code(code),
            Some(
                ElemType::F32
                    | ElemType::F64
                    | ElemType::F16
                    | ElemType::BF16
                    | ElemType::Bool
                    | ElemType::I8
                    | ElemType::I16
                    | ElemType::U16
                    | ElemType::I32
                    | ElemType::U32
                    | ElemType::U8
                    | ElemType::I64
                    | ElemType::U64
            )
        )
    };
    let (Some(result), Some(out)) = (Class::from_code(p.result), elem_of_code(p.out)) else {
        return false;
    };
    io(p.out)
        && (!to_half(out) || matches!(result, Class::F32 | Class::Bool))
        && p.inputs[..p.n_inputs as usize].iter().all(|&c| io(c))
        && p.code().iter().all(|i| {
            let (Some(op), Some(class)) = (Opcode::from_code(i.op), Class::from_code(i.class))
            else {
                return false;
            };
            instr_ok(op, class, i.arg)
        })
}

/// Whether tier 1 compiles `p` as an expression reduction: [`supports`], and every value of
/// a float math type or bool (the reduction kernels are not tested with integer math yet).
pub(crate) fn supports_reduce(p: &Program) -> bool {
    let float = |c: u8| Class::from_code(c).is_some_and(|c| c.is_float() || c == Class::Bool);
    supports(p)
        && p.code().iter().all(|i| {
            float(i.class)
                && match Opcode::from_code(i.op) {
                    Some(Opcode::Cast) => float(i.arg),
                    Some(Opcode::Narrow) => elem_of_code(i.arg).is_some_and(|e| e.is_float()),
                    _ => true,
                }
        })
        && p.inputs[..p.n_inputs as usize]
            .iter()
            .all(|&c| elem_of_code(c).is_some_and(|e| e.is_float() || e == ElemType::Bool))
}

/// A 16-bit float element type.
fn to_half(e: ElemType) -> bool {
    matches!(e, ElemType::F16 | ElemType::BF16)
}

/// Whether a math type is one of the integer types.
fn is_int(c: Class) -> bool {
    !c.is_float() && c != Class::Bool
}

fn instr_ok(op: Opcode, class: Class, arg: u8) -> bool {
    use Opcode::*;
    let float = class.is_float();
    let int = is_int(class);
    match op {
        Load | Const => true,
        Not | And | Or | Xor => class == Class::Bool,
        BitAnd | BitOr | BitXor => class == Class::Bool || int,
        Eq | Ne => true,
        // Every conversion between the math types.
        Cast => Class::from_code(arg).is_some(),
        Narrow => match elem_of_code(arg) {
            Some(ElemType::F16 | ElemType::BF16) => class == Class::F32,
            Some(ElemType::F32) => float,
            Some(ElemType::F64) => class == Class::F64,
            // Wrapped (integers), saturated (floats) or 0 and 1 (bool).
            Some(ElemType::I8 | ElemType::I16 | ElemType::U16) => true,
            _ => false,
        },
        // `nextafter` of a 16-bit float steps in that type (the interpreter's `arg`).
        Nextafter => float && elem_of_code(arg) == Some(ElemType::F32),
        // Comparisons of bools: false < true.
        Lt | Le | Gt | Ge => true,
        BitNot => int || class == Class::Bool,
        Neg | Abs | Relu | Sign | Floor | Ceil | Round | Trunc | IsNan | IsInf | IsFinite
        | IsPosInf | IsNegInf | SignBit | Add | Sub | Mul | Div | Min | Max | Fmin | Fmax | Fma
        | Where | Clamp => float || int,
        Rem | FloorDiv | Fmod | Shl | Shr => int || (float && t1lib::name(op, class).is_some()),
        Sqrt | Rsqrt | Copysign => float,
        _ => float && t1lib::name(op, class).is_some(),
    }
}

/// A value: a register of a float type, a predicate, or an integer register of an integer
/// math type (`.b32` for `I32`, `U32` and `U8`, a `u8` zero-extended; `.b64` for `I64` and
/// `U64`).
#[derive(Clone, Debug)]
enum V {
    F(String),
    D(String),
    P(String),
    I(Class, String),
}

impl V {
    fn reg(&self) -> &str {
        match self {
            V::F(r) | V::D(r) | V::P(r) | V::I(_, r) => r,
        }
    }

    /// The math type the value is of.
    fn class(&self) -> Class {
        match self {
            V::F(_) => Class::F32,
            V::D(_) => Class::F64,
            V::P(_) => Class::Bool,
            V::I(c, _) => *c,
        }
    }
}

/// The float type's PTX names: (type, bit type, sign bit, canonical NaN, 1.0, 0.0, +inf).
struct Ft {
    t: &'static str,
    b: &'static str,
    sign: &'static str,
    nan: &'static str,
    one: &'static str,
    zero: &'static str,
    inf: &'static str,
    ninf: &'static str,
    f64: bool,
}

const F32T: Ft = Ft {
    t: "f32",
    b: "b32",
    sign: "0x80000000",
    nan: "0f7FC00000",
    one: "0f3F800000",
    zero: "0f00000000",
    inf: "0f7F800000",
    ninf: "0fFF800000",
    f64: false,
};
const F64T: Ft = Ft {
    t: "f64",
    b: "b64",
    sign: "0x8000000000000000",
    nan: "0d7FF8000000000000",
    one: "0d3FF0000000000000",
    zero: "0d0000000000000000",
    inf: "0d7FF0000000000000",
    ninf: "0dFFF0000000000000",
    f64: true,
};

#[derive(Default)]
struct Gen {
    s: String,
    f: usize,
    d: usize,
    p: usize,
    r: usize,
    rd: usize,
    h: usize,
    /// Labels taken.
    l: usize,
    /// The target's SM version.
    sm: u32,
    /// The library's text (its functions, as `module` takes it).
    lib: String,
    /// The block the kernel launches with, where fixed (`.maxntid`).
    block: Option<(u32, u32)>,
    /// A predicate guarding the global accesses written now (`@p`), if any.
    guard: Option<String>,
}

macro_rules! emit {
    ($g:expr, $($t:tt)*) => {{
        let _ = writeln!($g.s, $($t)*);
    }};
}

mod reduce;
pub(crate) use reduce::{takes as reduce_takes, RedShape, COL_X};

impl Gen {
    fn f(&mut self) -> String {
        self.f += 1;
        format!("%f{}", self.f)
    }
    fn d(&mut self) -> String {
        self.d += 1;
        format!("%fd{}", self.d)
    }
    fn p(&mut self) -> String {
        self.p += 1;
        format!("%p{}", self.p)
    }
    fn r(&mut self) -> String {
        self.r += 1;
        format!("%r{}", self.r)
    }
    fn rd(&mut self) -> String {
        self.rd += 1;
        format!("%rd{}", self.rd)
    }
    fn h(&mut self) -> String {
        self.h += 1;
        format!("%h{}", self.h)
    }
    /// The division parameters `{prefix}_d`, `_magic`, `_shift` of a [`FastDiv`](gpu_kernels::FastDiv).
    fn div_params(&mut self, prefix: &str) -> [String; 3] {
        ["d", "magic", "shift"].map(|s| {
            let r = self.r();
            emit!(self, "ld.param.u32 {r}, [{prefix}_{s}];");
            r
        })
    }

    /// `x / d` and `x % d` by multiply-shift (`[d, magic, shift]` from [`Gen::div_params`]):
    /// (quotient, remainder).
    fn divmod(&mut self, x: &str, [d, m, s]: &[String; 3]) -> (String, String) {
        let (hi, q, r) = (self.r(), self.r(), self.r());
        emit!(self, "mul.hi.u32 {hi}, {x}, {m};");
        emit!(self, "add.u32 {q}, {hi}, {x};");
        emit!(self, "shr.u32 {q}, {q}, {s};");
        emit!(self, "mul.lo.u32 {r}, {q}, {d};");
        emit!(self, "sub.u32 {r}, {x}, {r};");
        (q, r)
    }

    /// The strides `{prefix}{k}_{d}` (`.s32` parameters) of operands `0..ops` along
    /// dimensions `0..rank`, by operand.
    fn stride_params(&mut self, prefix: &str, ops: usize, rank: usize) -> Vec<Vec<String>> {
        (0..ops)
            .map(|k| {
                (0..rank)
                    .map(|d| {
                        let r = self.r();
                        emit!(self, "ld.param.s32 {r}, [{prefix}{k}_{d}];");
                        r
                    })
                    .collect()
            })
            .collect()
    }

    /// Each operand's offset of linear index `index` over dimensions of sizes `divs`
    /// (dimension 0 fastest; the last dimension's size is not needed) and `strides` (by
    /// operand, [`Gen::stride_params`]): `sum_d coord_d * stride_d` in 32-bit arithmetic.
    fn offsets(
        &mut self,
        index: &str,
        divs: &[[String; 3]],
        strides: &[Vec<String>],
    ) -> Vec<String> {
        let rank = divs.len() + 1;
        let offs: Vec<String> = strides.iter().map(|_| self.r()).collect();
        for o in &offs {
            emit!(self, "mov.u32 {o}, 0;");
        }
        let rest = self.r();
        emit!(self, "mov.u32 {rest}, {index};");
        for d in 0..rank {
            let c = if d + 1 < rank {
                let (q, c) = self.divmod(&rest, &divs[d]);
                emit!(self, "mov.u32 {rest}, {q};");
                c
            } else {
                rest.clone()
            };
            for (o, st) in offs.iter().zip(strides) {
                emit!(self, "mad.lo.s32 {o}, {c}, {}, {o};", st[d]);
            }
        }
        offs
    }

    fn label(&mut self) -> String {
        self.l += 1;
        format!("L{}", self.l)
    }
    /// A fresh register of float type `ft`.
    fn fl(&mut self, ft: &Ft) -> String {
        if ft.f64 {
            self.d()
        } else {
            self.f()
        }
    }
    /// A fresh bit register of `ft`'s width.
    fn bits(&mut self, ft: &Ft) -> String {
        if ft.f64 {
            self.rd()
        } else {
            self.r()
        }
    }
    fn val(ft: &Ft, r: String) -> V {
        if ft.f64 {
            V::D(r)
        } else {
            V::F(r)
        }
    }

    /// `x` with its bits and-ed with `mask`, or-ed with `or` (a bit register of the same
    /// width, or none).
    fn bit_op(&mut self, ft: &Ft, x: &str, mask: &str, xor: bool) -> String {
        let b = self.bits(ft);
        let out = self.fl(ft);
        emit!(self, "mov.{} {b}, {x};", ft.b);
        emit!(
            self,
            "{}.{} {b}, {b}, {mask};",
            if xor { "xor" } else { "and" },
            ft.b
        );
        emit!(self, "mov.{} {out}, {b};", ft.b);
        out
    }

    /// NaN-propagating minimum or maximum (the op structs': a NaN operand gives the
    /// canonical NaN, else `y` where `y < x` (`y > x`), else `x`).
    fn min_max(&mut self, ft: &Ft, x: &str, y: &str, max: bool) -> String {
        let (p, q, r, out) = (self.p(), self.p(), self.fl(ft), self.fl(ft));
        let t = ft.t;
        emit!(
            self,
            "setp.{}.{t} {p}, {y}, {x};",
            if max { "gt" } else { "lt" }
        );
        emit!(self, "selp.{t} {r}, {y}, {x}, {p};");
        emit!(self, "setp.nan.{t} {q}, {x}, {y};");
        emit!(self, "selp.{t} {out}, {}, {r}, {q};", ft.nan);
        out
    }

    fn pred(&mut self, f: impl FnOnce(&mut Gen, &str)) -> V {
        let p = self.p();
        f(self, &p);
        V::P(p)
    }

    /// The library's device function `name` on `x` and `y`: its body in place where it is
    /// straight-line code ([`leaf`]: the same instructions, so the same bits, without the
    /// call's register traffic), else a call.
    fn call(&mut self, ft: &Ft, name: &str, x: &str, y: &str) -> String {
        let (t, b) = (ft.t, if ft.f64 { "b64" } else { "b32" });
        let out = self.fl(ft);
        if let Some(body) = leaf(&self.lib, name) {
            let body = body
                .replace(&format!("[{name}_param_0]"), x)
                .replace(&format!("[{name}_param_1]"), y)
                .replace("[func_retval0]", &out);
            emit!(self, "{{");
            self.s.push_str(&body);
            emit!(self, "}}");
            return out;
        }
        emit!(self, "{{");
        emit!(self, ".param .{b} t1a; .param .{b} t1b; .param .{b} t1r;");
        emit!(self, "st.param.{t} [t1a], {x};");
        emit!(self, "st.param.{t} [t1b], {y};");
        emit!(self, "call.uni (t1r), {name}, (t1a, t1b);");
        emit!(self, "ld.param.{t} {out}, [t1r];");
        emit!(self, "}}");
        out
    }

    /// `f32` rounded to a 16-bit float type and widened back (the library's `cvt`, NaN the
    /// canonical `0x7fff`).
    fn round16(&mut self, x: &str, e: ElemType) -> String {
        let h = self.bits16(x, e);
        self.widen16(&h, e)
    }

    /// `f32` rounded to a 16-bit float type's bits (a `.b16` register).
    fn bits16(&mut self, x: &str, e: ElemType) -> String {
        let (nan, h, h2) = (self.p(), self.h(), self.h());
        emit!(self, "setp.nan.f32 {nan}, {x}, {x};");
        if e == ElemType::F16 {
            emit!(self, "cvt.rn.f16.f32 {h}, {x};");
        } else if self.sm >= 80 {
            emit!(self, "cvt.rn.bf16.f32 {h}, {x};");
        } else {
            // Round to nearest even on the bits (`cvt.rn.bf16.f32`'s result for every
            // non-NaN value, on every architecture).
            let (r, r2) = (self.r(), self.r());
            emit!(self, "mov.b32 {r}, {x};");
            emit!(self, "bfe.u32 {r2}, {r}, 16, 1;");
            emit!(self, "add.u32 {r}, {r}, {r2};");
            emit!(self, "add.u32 {r}, {r}, 32767;");
            emit!(self, "shr.u32 {r}, {r}, 16;");
            emit!(self, "cvt.u16.u32 {h}, {r};");
        }
        emit!(self, "selp.b16 {h2}, 0x7fff, {h}, {nan};");
        h2
    }

    /// A 16-bit float's bits widened to `f32` (exact).
    fn widen16(&mut self, h: &str, e: ElemType) -> String {
        let out = self.f();
        if e == ElemType::F16 {
            emit!(self, "cvt.f32.f16 {out}, {h};");
        } else {
            let r = self.r();
            emit!(self, "cvt.u32.u16 {r}, {h};");
            emit!(self, "shl.b32 {r}, {r}, 16;");
            emit!(self, "mov.b32 {out}, {r};");
        }
        out
    }
}

fn ft_of(class: Class) -> &'static Ft {
    if class == Class::F64 {
        &F64T
    } else {
        &F32T
    }
}

/// An integer math type's PTX names: its arithmetic type `t` (`s32`, `u32`, `s64`, `u64`;
/// `U8` computes in `u32`, its values zero-extended), bit type `b`, width in bits as the
/// interpreter's shifts read it, signedness, whether it is 64 bits wide, and whether it
/// is `U8` (held in a wider register: an op that can leave 8 bits is and-ed back to them).
struct It {
    t: &'static str,
    b: &'static str,
    bits: u32,
    signed: bool,
    wide: bool,
    byte: bool,
}

/// The names of integer math type `class` (`I32`'s for a type that is not one).
fn it_of(class: Class) -> It {
    let (t, bits, signed, wide) = match class {
        Class::I64 => ("s64", 64, true, true),
        Class::U64 => ("u64", 64, false, true),
        Class::U32 => ("u32", 32, false, false),
        Class::U8 => ("u32", 8, false, false),
        _ => ("s32", 32, true, false),
    };
    It {
        t,
        b: if wide { "b64" } else { "b32" },
        bits,
        signed,
        wide,
        byte: class == Class::U8,
    }
}

/// A float constant of type `ft` in PTX's hexadecimal form.
fn fconst(ft: &Ft, v: f64) -> String {
    if ft.f64 {
        format!("0d{:016X}", v.to_bits())
    } else {
        format!("0f{:08X}", (v as f32).to_bits())
    }
}

impl Gen {
    /// A fresh integer register of `it`'s width.
    fn ireg(&mut self, it: &It) -> String {
        if it.wide {
            self.rd()
        } else {
            self.r()
        }
    }

    /// `r` wrapped to 8 bits where `it` is `U8` (a fresh register), else `r`.
    fn wrap_byte(&mut self, it: &It, r: String) -> String {
        if !it.byte {
            return r;
        }
        let o = self.r();
        emit!(self, "and.b32 {o}, {r}, 255;");
        o
    }

    /// `r` (a `u32`, saturated) at most 255 where `it` is `U8`, else `r`.
    fn clamp_byte(&mut self, it: &It, r: &str) -> String {
        if !it.byte {
            return r.to_string();
        }
        let o = self.r();
        emit!(self, "min.u32 {o}, {r}, 255;");
        o
    }

    /// Float `x` of type `ft` converted to integer type `it` (`U8`: to `u32`) as Rust's
    /// `as`: toward zero, saturated at the type's bounds, NaN 0. The bounds and NaN are
    /// selected explicitly, so no out-of-range `cvt` result is kept.
    fn float_to_int(&mut self, ft: &Ft, x: &str, it: &It) -> String {
        let w = if it.wide { 64 } else { 32 };
        let (lo, hi, min, max) = match (it.signed, it.wide) {
            (true, false) => (-(2f64.powi(31)), 2f64.powi(31), "0x80000000", "0x7FFFFFFF"),
            (true, true) => (
                -(2f64.powi(63)),
                2f64.powi(63),
                "0x8000000000000000",
                "0x7FFFFFFFFFFFFFFF",
            ),
            (false, false) => (0.0, 2f64.powi(32), "0", "0xFFFFFFFF"),
            (false, true) => (0.0, 2f64.powi(64), "0", "0xFFFFFFFFFFFFFFFF"),
        };
        let t = if it.signed {
            format!("s{w}")
        } else {
            format!("u{w}")
        };
        let (r, a, b, o) = (self.ireg(it), self.ireg(it), self.ireg(it), self.ireg(it));
        let (ph, pl, pn) = (self.p(), self.p(), self.p());
        let (ib, f) = (it.b, ft.t);
        emit!(self, "cvt.rzi.{t}.{f} {r}, {x};");
        emit!(self, "setp.ge.{f} {ph}, {x}, {};", fconst(ft, hi));
        emit!(self, "selp.{ib} {a}, {max}, {r}, {ph};");
        emit!(self, "setp.lt.{f} {pl}, {x}, {};", fconst(ft, lo));
        emit!(self, "selp.{ib} {b}, {min}, {a}, {pl};");
        emit!(self, "setp.nan.{f} {pn}, {x}, {x};");
        emit!(self, "selp.{ib} {o}, 0, {b}, {pn};");
        o
    }

    /// Integer `x` of type `from` converted to type `to` as Rust's `as`: two's-complement
    /// bits truncated, or extended by the source's signedness.
    fn int_convert(&mut self, from: &It, to: &It, x: &str) -> String {
        let r = match (from.wide, to.wide) {
            (true, false) => {
                let r = self.r();
                emit!(self, "cvt.u32.u64 {r}, {x};");
                r
            }
            (false, true) => {
                let r = self.rd();
                let t = if from.signed { "s64.s32" } else { "u64.u32" };
                emit!(self, "cvt.{t} {r}, {x};");
                r
            }
            _ => x.to_string(),
        };
        if from.byte {
            r
        } else {
            self.wrap_byte(to, r)
        }
    }

    /// Value `v` rounded to `i8`, `i16` or `u16` (`e`) as the interpreter's `Narrow` (a
    /// cast: integers wrap, floats saturate, bool gives 1 or 0), extended back to `I32`.
    fn narrow_int(&mut self, v: &V, e: ElemType) -> V {
        let x = v.reg().to_string();
        let c = v.class();
        let o = self.r();
        if c == Class::Bool {
            emit!(self, "selp.b32 {o}, 1, 0, {x};");
        } else if c.is_float() {
            let unsigned = e == ElemType::U16;
            let it = it_of(if unsigned { Class::U32 } else { Class::I32 });
            let r = self.float_to_int(ft_of(c), &x, &it);
            match e {
                ElemType::U16 => emit!(self, "min.u32 {o}, {r}, 65535;"),
                _ => {
                    let (lo, hi) = if e == ElemType::I8 {
                        (-128, 127)
                    } else {
                        (-32768, 32767)
                    };
                    let m = self.r();
                    emit!(self, "max.s32 {m}, {r}, {lo};");
                    emit!(self, "min.s32 {o}, {m}, {hi};");
                }
            }
        } else {
            let it = it_of(c);
            let r = self.int_convert(&it, &it_of(Class::I32), &x);
            match e {
                ElemType::I8 => emit!(self, "bfe.s32 {o}, {r}, 0, 8;"),
                ElemType::I16 => emit!(self, "bfe.s32 {o}, {r}, 0, 16;"),
                _ => emit!(self, "and.b32 {o}, {r}, 65535;"),
            }
        }
        V::I(Class::I32, o)
    }

    /// A divisor that PTX's `div` and `rem` take for every `y` (an integer of type `it`):
    /// 1 where `y` is 0 or, for a signed type, -1 (`MIN / -1` overflows; the callers
    /// give those their results). (divisor, `y == 0`, `y == -1` (signed types)).
    fn safe_divisor(&mut self, it: &It, y: &str) -> (String, String, Option<String>) {
        let (t, b) = (it.t, it.b);
        let (zero, ys) = (self.p(), self.ireg(it));
        emit!(self, "setp.eq.{t} {zero}, {y}, 0;");
        if !it.signed {
            emit!(self, "selp.{b} {ys}, 1, {y}, {zero};");
            return (ys, zero, None);
        }
        let (m1, bad) = (self.p(), self.p());
        emit!(self, "setp.eq.{t} {m1}, {y}, -1;");
        emit!(self, "or.pred {bad}, {zero}, {m1};");
        emit!(self, "selp.{b} {ys}, 1, {y}, {bad};");
        (ys, zero, Some(m1))
    }

    /// `x / y` truncated, wrapping (`MIN / -1` is `MIN`), by zero 0; the divisor of
    /// [`Gen::safe_divisor`] and its predicates.
    fn int_div(&mut self, it: &It, x: &str, ys: &str, zero: &str, m1: Option<&str>) -> String {
        let (t, b) = (it.t, it.b);
        let q = self.ireg(it);
        emit!(self, "div.{t} {q}, {x}, {ys};");
        let q = match m1 {
            Some(m1) => {
                let (n, q2) = (self.ireg(it), self.ireg(it));
                emit!(self, "neg.{t} {n}, {x};");
                emit!(self, "selp.{b} {q2}, {n}, {q}, {m1};");
                q2
            }
            None => q,
        };
        let o = self.ireg(it);
        emit!(self, "selp.{b} {o}, 0, {q}, {zero};");
        o
    }

    /// Instruction `op` of integer math type `class` on registers `x`, `y`, `z`, as the
    /// interpreter's `int_eval`: wrapping arithmetic, division and remainders by zero 0,
    /// PyTorch's shifts.
    fn int_op(&mut self, op: Opcode, class: Class, x: &str, y: &str, z: &str) -> V {
        use Opcode::*;
        let it = it_of(class);
        let (t, b) = (it.t, it.b);
        // The signed type of the register's width (`neg` has no unsigned form).
        let s = if it.wide { "s64" } else { "s32" };
        let int = |g: &mut Gen, text: &dyn Fn(&str) -> String| {
            let o = g.ireg(&it);
            let line = text(&o);
            emit!(g, "{line}");
            o
        };
        let r = match op {
            Neg => {
                let o = int(self, &|o| format!("neg.{s} {o}, {x};"));
                self.wrap_byte(&it, o)
            }
            Abs if it.signed => {
                // Wrapping: `|MIN|` is `MIN`.
                let (p, n, o) = (self.p(), self.ireg(&it), self.ireg(&it));
                emit!(self, "setp.lt.{t} {p}, {x}, 0;");
                emit!(self, "neg.{t} {n}, {x};");
                emit!(self, "selp.{b} {o}, {n}, {x}, {p};");
                o
            }
            Relu if it.signed => int(self, &|o| format!("max.{t} {o}, {x}, 0;")),
            // Unsigned values are their own magnitude and never below zero; integers are
            // their own rounding.
            Abs | Relu | Floor | Ceil | Round | Trunc => x.to_string(),
            Sign => {
                // (0 < x) - (x < 0).
                let (pos, neg, m, o) = (self.p(), self.p(), self.ireg(&it), self.ireg(&it));
                emit!(self, "setp.gt.{t} {pos}, {x}, 0;");
                emit!(self, "setp.lt.{t} {neg}, {x}, 0;");
                emit!(self, "selp.{b} {m}, -1, 0, {neg};");
                emit!(self, "selp.{b} {o}, 1, {m}, {pos};");
                o
            }
            BitNot => {
                let o = int(self, &|o| format!("not.{b} {o}, {x};"));
                self.wrap_byte(&it, o)
            }
            // Integers are finite, never NaN or infinite; the sign bit of a signed value.
            IsFinite => return self.pred(|g, p| emit!(g, "setp.eq.{b} {p}, {x}, {x};")),
            SignBit if it.signed => return self.pred(|g, p| emit!(g, "setp.lt.{t} {p}, {x}, 0;")),
            IsNan | IsInf | IsPosInf | IsNegInf | SignBit => {
                return self.pred(|g, p| emit!(g, "setp.ne.{b} {p}, {x}, {x};"))
            }
            Add | Sub | Mul => {
                let o = match op {
                    Add => int(self, &|o| format!("add.{t} {o}, {x}, {y};")),
                    Sub => int(self, &|o| format!("sub.{t} {o}, {x}, {y};")),
                    _ => int(self, &|o| format!("mul.lo.{t} {o}, {x}, {y};")),
                };
                self.wrap_byte(&it, o)
            }
            Fma => {
                let o = int(self, &|o| format!("mad.lo.{t} {o}, {x}, {y}, {z};"));
                self.wrap_byte(&it, o)
            }
            Min | Fmin => int(self, &|o| format!("min.{t} {o}, {x}, {y};")),
            Max | Fmax => int(self, &|o| format!("max.{t} {o}, {x}, {y};")),
            Clamp => {
                let m = int(self, &|o| format!("max.{t} {o}, {x}, {y};"));
                int(self, &|o| format!("min.{t} {o}, {m}, {z};"))
            }
            Div => {
                let (ys, zero, m1) = self.safe_divisor(&it, y);
                self.int_div(&it, x, &ys, &zero, m1.as_deref())
            }
            FloorDiv => {
                let (ys, zero, m1) = self.safe_divisor(&it, y);
                let q = self.int_div(&it, x, &ys, &zero, m1.as_deref());
                if !it.signed {
                    q
                } else {
                    // One less where the remainder is not 0 and the signs differ (the
                    // remainder by -1 is 0: `rem` by the safe divisor 1 gives it).
                    let (r, q1, o) = (self.ireg(&it), self.ireg(&it), self.ireg(&it));
                    let (nz, xn, yn, d) = (self.p(), self.p(), self.p(), self.p());
                    emit!(self, "rem.{t} {r}, {x}, {ys};");
                    emit!(self, "setp.ne.{t} {nz}, {r}, 0;");
                    emit!(self, "setp.lt.{t} {xn}, {x}, 0;");
                    emit!(self, "setp.lt.{t} {yn}, {y}, 0;");
                    emit!(self, "xor.pred {d}, {xn}, {yn};");
                    emit!(self, "and.pred {d}, {d}, {nz};");
                    emit!(self, "sub.{t} {q1}, {q}, 1;");
                    emit!(self, "selp.{b} {o}, {q1}, {q}, {d};");
                    o
                }
            }
            Rem | Fmod => {
                // By the safe divisor 1 the remainder is 0, as by 0 and (MIN % -1) by -1.
                let (ys, _, _) = self.safe_divisor(&it, y);
                let r = int(self, &|o| format!("rem.{t} {o}, {x}, {ys};"));
                if op == Fmod || !it.signed {
                    r
                } else {
                    // Python's `%`: moved to the divisor's sign where it is not 0.
                    let (sum, o) = (self.ireg(&it), self.ireg(&it));
                    let (nz, rn, yn, d) = (self.p(), self.p(), self.p(), self.p());
                    emit!(self, "setp.ne.{t} {nz}, {r}, 0;");
                    emit!(self, "setp.lt.{t} {rn}, {r}, 0;");
                    emit!(self, "setp.lt.{t} {yn}, {y}, 0;");
                    emit!(self, "xor.pred {d}, {rn}, {yn};");
                    emit!(self, "and.pred {d}, {d}, {nz};");
                    emit!(self, "add.{t} {sum}, {r}, {y};");
                    emit!(self, "selp.{b} {o}, {sum}, {r}, {d};");
                    o
                }
            }
            Eq | Ne | Lt | Le | Gt | Ge => {
                let cmp = match op {
                    Eq => "eq",
                    Ne => "ne",
                    Lt => "lt",
                    Le => "le",
                    Gt => "gt",
                    _ => "ge",
                };
                return self.pred(|g, p| emit!(g, "setp.{cmp}.{t} {p}, {x}, {y};"));
            }
            BitAnd => int(self, &|o| format!("and.{b} {o}, {x}, {y};")),
            BitOr => int(self, &|o| format!("or.{b} {o}, {x}, {y};")),
            BitXor => int(self, &|o| format!("xor.{b} {o}, {x}, {y};")),
            Shl | Shr => {
                // Out of range: a negative amount or the width or more (one unsigned
                // comparison). The amount as `.u32`.
                let (oor, amt) = (self.p(), self.r());
                let u = if it.wide { "u64" } else { "u32" };
                emit!(self, "setp.gt.{u} {oor}, {y}, {};", it.bits - 1);
                if it.wide {
                    emit!(self, "cvt.u32.u64 {amt}, {y};");
                } else {
                    emit!(self, "mov.b32 {amt}, {y};");
                }
                if op == Shr && it.signed {
                    // Out of range: the sign fill, a shift by the width less one.
                    let a = self.r();
                    emit!(self, "selp.b32 {a}, {}, {amt}, {oor};", it.bits - 1);
                    int(self, &|o| format!("shr.{t} {o}, {x}, {a};"))
                } else {
                    let how = if op == Shl { "shl.b" } else { "shr.u" };
                    let w = if it.wide { 64 } else { 32 };
                    let sh = int(self, &|o| format!("{how}{w} {o}, {x}, {amt};"));
                    let o = int(self, &|o| format!("selp.{b} {o}, 0, {sh}, {oor};"));
                    self.wrap_byte(&it, o)
                }
            }
            Where => int(self, &|o| format!("selp.{b} {o}, {y}, {z}, {x};")),
            // `supports` admits no other op of integer math.
            _ => x.to_string(),
        };
        V::I(class, r)
    }
}

/// The PTX type of an element type's raw bits in loads and stores.
fn raw_ty(e: ElemType) -> &'static str {
    match e {
        ElemType::F32 => "f32",
        ElemType::F64 => "f64",
        _ => match e.size() {
            1 => "u8",
            2 => "b16",
            4 => "b32",
            _ => "b64",
        },
    }
}

/// The element type of input or output code `c` (`supports` checked it).
fn elem(c: u8) -> ElemType {
    elem_of_code(c).unwrap_or(ElemType::F32)
}

impl Gen {
    /// The program on one element: `inputs[k]` is input `k`'s value, `consts[c]` constant
    /// `c`'s register (each in its math type); the result's value.
    fn program(&mut self, p: &Program, inputs: &[V], consts: &[Option<V>]) -> V {
        let mut stack: Vec<V> = Vec::new();
        for i in p.code() {
            let (Some(op), Some(class)) = (Opcode::from_code(i.op), Class::from_code(i.class))
            else {
                continue;
            };
            let arity = op.arity();
            let at = stack.len().saturating_sub(arity);
            let args: Vec<V> = stack.drain(at..).collect();
            let v = match op {
                Opcode::Load => inputs[i.arg as usize % inputs.len().max(1)].clone(),
                Opcode::Const => consts[i.arg as usize % MAX_CONSTS]
                    .clone()
                    .unwrap_or(V::F(F32T.zero.into())),
                _ => self.op(op, class, i.arg, &args),
            };
            stack.push(v);
        }
        stack.pop().unwrap_or(V::F(F32T.zero.into()))
    }

    fn op(&mut self, op: Opcode, class: Class, arg: u8, a: &[V]) -> V {
        use Opcode::*;
        let x = a.first().map(V::reg).unwrap_or("").to_string();
        let y = a.get(1).map(V::reg).unwrap_or("").to_string();
        let z = a.get(2).map(V::reg).unwrap_or("").to_string();
        let Some(v) = a.first() else {
            return V::F(F32T.zero.into());
        };
        match op {
            Cast => return self.cast(Class::from_code(arg).unwrap_or(class), class, v),
            Narrow if matches!(elem(arg), ElemType::I8 | ElemType::I16 | ElemType::U16) => {
                return self.narrow_int(v, elem(arg));
            }
            _ if is_int(class) && op != Narrow => return self.int_op(op, class, &x, &y, &z),
            _ => {}
        }
        if class == Class::Bool {
            let p = self.p();
            let pred = match op {
                Not | BitNot => format!("not.pred {p}, {x};"),
                And | BitAnd => format!("and.pred {p}, {x}, {y};"),
                Or | BitOr => format!("or.pred {p}, {x}, {y};"),
                Xor | BitXor | Ne => format!("xor.pred {p}, {x}, {y};"),
                // false < true: `x < y` is `!x & y`, `x <= y` is `!x | y`; `>` and `>=`
                // with the operands' roles swapped.
                Lt | Le | Gt | Ge => {
                    let (lo, hi) = if matches!(op, Lt | Le) {
                        (&x, &y)
                    } else {
                        (&y, &x)
                    };
                    let n = self.p();
                    emit!(self, "not.pred {n}, {lo};");
                    let how = if matches!(op, Lt | Gt) { "and" } else { "or" };
                    format!("{how}.pred {p}, {n}, {hi};")
                }
                _ => {
                    // Eq: not xor.
                    emit!(self, "xor.pred {p}, {x}, {y};");
                    format!("not.pred {p}, {p};")
                }
            };
            emit!(self, "{pred}");
            return V::P(p);
        }
        let ft = ft_of(class);
        let t = ft.t;
        let new = |g: &mut Gen, text: &dyn Fn(&str) -> String| {
            let out = g.fl(ft);
            let line = text(&out);
            emit!(g, "{line}");
            Gen::val(ft, out)
        };
        match op {
            Neg => Gen::val(ft, self.bit_op(ft, &x, ft.sign, true)),
            Abs => {
                let mask = if ft.f64 {
                    "0x7FFFFFFFFFFFFFFF"
                } else {
                    "0x7FFFFFFF"
                };
                Gen::val(ft, self.bit_op(ft, &x, mask, false))
            }
            Relu => {
                let (p, out) = (self.p(), self.fl(ft));
                emit!(self, "setp.lt.{t} {p}, {x}, {};", ft.zero);
                emit!(self, "selp.{t} {out}, {}, {x}, {p};", ft.zero);
                Gen::val(ft, out)
            }
            Sqrt => new(self, &|o| format!("sqrt.rn.{t} {o}, {x};")),
            Rsqrt => {
                let s = self.fl(ft);
                emit!(self, "sqrt.rn.{t} {s}, {x};");
                new(self, &|o| format!("div.rn.{t} {o}, {}, {s};", ft.one))
            }
            Floor => new(self, &|o| format!("cvt.rmi.{t}.{t} {o}, {x};")),
            Ceil => new(self, &|o| format!("cvt.rpi.{t}.{t} {o}, {x};")),
            Round => new(self, &|o| format!("cvt.rni.{t}.{t} {o}, {x};")),
            Trunc => new(self, &|o| format!("cvt.rzi.{t}.{t} {o}, {x};")),
            Sign => {
                // (0 < x) - (x < 0): NaN and both zeros give +0.
                let (pos, neg, r, out) = (self.p(), self.p(), self.fl(ft), self.fl(ft));
                emit!(self, "setp.gt.{t} {pos}, {x}, {};", ft.zero);
                emit!(self, "setp.lt.{t} {neg}, {x}, {};", ft.zero);
                let m1 = if ft.f64 {
                    "0dBFF0000000000000"
                } else {
                    "0fBF800000"
                };
                emit!(self, "selp.{t} {r}, {m1}, {}, {neg};", ft.zero);
                emit!(self, "selp.{t} {out}, {}, {r}, {pos};", ft.one);
                Gen::val(ft, out)
            }
            IsNan => self.pred(|g, p| emit!(g, "setp.nan.{t} {p}, {x}, {x};")),
            IsInf | IsFinite => {
                let abs = self.bit_op(
                    ft,
                    &x,
                    if ft.f64 {
                        "0x7FFFFFFFFFFFFFFF"
                    } else {
                        "0x7FFFFFFF"
                    },
                    false,
                );
                let cmp = if op == IsInf { "eq" } else { "lt" };
                self.pred(|g, p| emit!(g, "setp.{cmp}.{t} {p}, {abs}, {};", ft.inf))
            }
            IsPosInf => self.pred(|g, p| emit!(g, "setp.eq.{t} {p}, {x}, {};", ft.inf)),
            IsNegInf => self.pred(|g, p| emit!(g, "setp.eq.{t} {p}, {x}, {};", ft.ninf)),
            SignBit => {
                let b = self.bits(ft);
                emit!(self, "mov.{} {b}, {x};", ft.b);
                let s = if ft.f64 { "s64" } else { "s32" };
                self.pred(|g, p| emit!(g, "setp.lt.{s} {p}, {b}, 0;"))
            }
            Add => new(self, &|o| format!("add.rn.{t} {o}, {x}, {y};")),
            Sub => new(self, &|o| format!("sub.rn.{t} {o}, {x}, {y};")),
            Mul => new(self, &|o| format!("mul.rn.{t} {o}, {x}, {y};")),
            Div => new(self, &|o| format!("div.rn.{t} {o}, {x}, {y};")),
            Min => Gen::val(ft, self.min_max(ft, &x, &y, false)),
            Max => Gen::val(ft, self.min_max(ft, &x, &y, true)),
            Fmin | Fmax => {
                // A NaN `y` gives `x`; else `x` where `y > x` (`y < x`), else `y`.
                let (n, c, e, out) = (self.p(), self.p(), self.p(), self.fl(ft));
                emit!(self, "setp.nan.{t} {n}, {y}, {y};");
                let cmp = if op == Fmin { "gt" } else { "lt" };
                emit!(self, "setp.{cmp}.{t} {c}, {y}, {x};");
                emit!(self, "or.pred {e}, {n}, {c};");
                emit!(self, "selp.{t} {out}, {x}, {y}, {e};");
                Gen::val(ft, out)
            }
            Copysign => {
                let (bx, by, out) = (self.bits(ft), self.bits(ft), self.fl(ft));
                let b = ft.b;
                let mag = if ft.f64 {
                    "0x7FFFFFFFFFFFFFFF"
                } else {
                    "0x7FFFFFFF"
                };
                emit!(self, "mov.{b} {bx}, {x};");
                emit!(self, "mov.{b} {by}, {y};");
                emit!(self, "and.{b} {bx}, {bx}, {mag};");
                emit!(self, "and.{b} {by}, {by}, {};", ft.sign);
                emit!(self, "or.{b} {bx}, {bx}, {by};");
                emit!(self, "mov.{b} {out}, {bx};");
                Gen::val(ft, out)
            }
            Eq => self.pred(|g, p| emit!(g, "setp.eq.{t} {p}, {x}, {y};")),
            // `!=` is true for a NaN operand.
            Ne => self.pred(|g, p| emit!(g, "setp.neu.{t} {p}, {x}, {y};")),
            Lt => self.pred(|g, p| emit!(g, "setp.lt.{t} {p}, {x}, {y};")),
            Le => self.pred(|g, p| emit!(g, "setp.le.{t} {p}, {x}, {y};")),
            Gt => self.pred(|g, p| emit!(g, "setp.gt.{t} {p}, {x}, {y};")),
            Ge => self.pred(|g, p| emit!(g, "setp.ge.{t} {p}, {x}, {y};")),
            Fma => new(self, &|o| format!("fma.rn.{t} {o}, {x}, {y}, {z};")),
            Where => new(self, &|o| format!("selp.{t} {o}, {y}, {z}, {x};")),
            Clamp => {
                // A NaN `x` stays; else min(max(x, lo), hi), NaN-propagating.
                let m = self.min_max(ft, &x, &y, true);
                let m = self.min_max(ft, &m, &z, false);
                let (n, out) = (self.p(), self.fl(ft));
                emit!(self, "setp.nan.{t} {n}, {x}, {x};");
                emit!(self, "selp.{t} {out}, {x}, {m}, {n};");
                Gen::val(ft, out)
            }
            Narrow => {
                let out = match (class, elem(arg)) {
                    (Class::F32, e @ (ElemType::F16 | ElemType::BF16)) => self.round16(&x, e),
                    (Class::F64, ElemType::F32) => {
                        let (f, out) = (self.f(), self.d());
                        emit!(self, "cvt.rn.f32.f64 {f}, {x};");
                        emit!(self, "cvt.f64.f32 {out}, {f};");
                        out
                    }
                    _ => x,
                };
                Gen::val(ft, out)
            }
            _ => {
                let name = t1lib::name(op, class).unwrap_or("");
                let y = if op.arity() == 1 { x.clone() } else { y };
                Gen::val(ft, self.call(ft, name, &x, &y))
            }
        }
    }

    /// A value of math type `from` converted to `to` (the `cast` op: float to bool `x != 0`,
    /// bool to float 1 or 0).
    fn cast(&mut self, from: Class, to: Class, v: &V) -> V {
        let x = v.reg().to_string();
        match (from, to) {
            (Class::F32, Class::F64) => {
                let o = self.d();
                emit!(self, "cvt.f64.f32 {o}, {x};");
                V::D(o)
            }
            (Class::F64, Class::F32) => {
                let o = self.f();
                emit!(self, "cvt.rn.f32.f64 {o}, {x};");
                V::F(o)
            }
            (Class::Bool, Class::F32 | Class::F64) => {
                let ft = ft_of(to);
                let o = self.fl(ft);
                emit!(self, "selp.{} {o}, {}, {}, {x};", ft.t, ft.one, ft.zero);
                Gen::val(ft, o)
            }
            (Class::F32 | Class::F64, Class::Bool) => {
                let ft = ft_of(from);
                self.pred(|g, p| emit!(g, "setp.neu.{} {p}, {x}, {};", ft.t, ft.zero))
            }
            _ if from == to => v.clone(),
            (Class::Bool, _) => {
                // `to` is an integer type here: 1 or 0.
                let it = it_of(to);
                let o = self.ireg(&it);
                emit!(self, "selp.{} {o}, 1, 0, {x};", it.b);
                V::I(to, o)
            }
            (_, Class::Bool) => {
                let it = it_of(from);
                self.pred(|g, p| emit!(g, "setp.ne.{} {p}, {x}, 0;", it.b))
            }
            (Class::F32 | Class::F64, _) => {
                // Saturating, NaN to 0 (`as`); `u8` through `u32`, then at most 255.
                let it = it_of(to);
                let r = self.float_to_int(ft_of(from), &x, &it);
                V::I(to, self.clamp_byte(&it, &r))
            }
            (_, Class::F32 | Class::F64) => {
                // Rounded to nearest even, as `as` rounds.
                let (it, ft) = (it_of(from), ft_of(to));
                let o = self.fl(ft);
                emit!(self, "cvt.rn.{}.{} {o}, {x};", ft.t, it.t);
                Gen::val(ft, o)
            }
            _ => V::I(to, self.int_convert(&it_of(from), &it_of(to), &x)),
        }
    }

    /// A fresh register for the raw bits of an element of type `e` (as loaded).
    fn raw_reg(&mut self, e: ElemType) -> String {
        match e {
            ElemType::F32 => self.f(),
            ElemType::F64 => self.d(),
            _ => match e.size() {
                1 | 2 => self.h(),
                4 => self.r(),
                _ => self.rd(),
            },
        }
    }

    /// Sets raw register `r` of type `e` to zero bits.
    fn zero_raw(&mut self, e: ElemType, r: &str) {
        let zero = match e {
            ElemType::F32 => "0f00000000",
            ElemType::F64 => "0d0000000000000000",
            _ => "0",
        };
        emit!(self, "mov.{} {r}, {zero};", raw_ty(e).replace("u8", "b16"));
    }

    /// The value of raw bits `r` of an element of type `e` (16-bit floats widened to `f32`
    /// exactly, a bool byte nonzero true, `u8` zero-extended to 32 bits, `i8`, `i16` and
    /// `u16` extended to `I32`).
    fn widen(&mut self, e: ElemType, r: &str) -> V {
        let ext = |g: &mut Gen, cvt: &str, c: Class| {
            let o = g.r();
            emit!(g, "cvt.{cvt} {o}, {r};");
            V::I(c, o)
        };
        match e {
            ElemType::F32 => V::F(r.to_string()),
            ElemType::F64 => V::D(r.to_string()),
            ElemType::F16 | ElemType::BF16 => V::F(self.widen16(r, e)),
            ElemType::Bool => self.pred(|g, p| emit!(g, "setp.ne.u16 {p}, {r}, 0;")),
            ElemType::U8 => ext(self, "u32.u16", Class::U8),
            ElemType::I8 => ext(self, "s32.s8", Class::I32),
            ElemType::I16 => ext(self, "s32.s16", Class::I32),
            ElemType::U16 => ext(self, "u32.u16", Class::I32),
            _ => V::I(Class::of(e).unwrap_or(Class::I32), r.to_string()),
        }
    }

    /// Loads `lanes` consecutive elements of an input of element type `e` at global
    /// address `addr` (one vector access per 16 bytes): their values.
    fn load(&mut self, e: ElemType, addr: &str, lanes: usize) -> Vec<V> {
        let regs: Vec<String> = (0..lanes.max(1)).map(|_| self.raw_reg(e)).collect();
        self.vector_access("ld.global", raw_ty(e), e.size(), addr, &regs);
        regs.iter().map(|r| self.widen(e, r)).collect()
    }

    /// `what` (`ld.global`, `st.shared`, …) of `regs` (one per lane) at `addr`, as vectors
    /// of at most 16 bytes; an even number of 2-byte lanes as 4-byte words (`.v4.b32`: 16
    /// bytes per access, split and joined with `mov`).
    fn vector_access(&mut self, what: &str, ty: &str, size: usize, addr: &str, regs: &[String]) {
        if ty == "b16" && regs.len() >= 2 && regs.len().is_multiple_of(2) {
            let words: Vec<String> = (0..regs.len() / 2).map(|_| self.r()).collect();
            let load = what.starts_with("ld");
            if !load {
                for (w, pair) in words.iter().zip(regs.chunks(2)) {
                    emit!(self, "mov.b32 {w}, {{{}, {}}};", pair[0], pair[1]);
                }
            }
            self.vector_access(what, "b32", 4, addr, &words);
            if load {
                for (w, pair) in words.iter().zip(regs.chunks(2)) {
                    emit!(self, "mov.b32 {{{}, {}}}, {w};", pair[0], pair[1]);
                }
            }
            return;
        }
        let per = (16 / size).min(regs.len()).clamp(1, 4);
        for (c, chunk) in regs.chunks(per).enumerate() {
            let off = c * per * size;
            let list = chunk.join(", ");

            let v = match chunk.len() {
                1 => String::new(),
                k => format!(".v{k}"),
            };
            let operand = if chunk.len() == 1 {
                list.clone()
            } else {
                format!("{{{list}}}")
            };
            let guard = self
                .guard
                .as_ref()
                .map(|p| format!("@{p} "))
                .unwrap_or_default();
            if what.starts_with("ld") {
                emit!(self, "{guard}{what}{v}.{ty} {operand}, [{addr}+{off}];");
            } else {
                emit!(self, "{guard}{what}{v}.{ty} [{addr}+{off}], {operand};");
            }
        }
    }

    /// `f`'s global loads and stores, each under predicate `p` (`@p`).
    fn guarded<R>(&mut self, p: &str, f: impl FnOnce(&mut Gen) -> R) -> R {
        self.guard = Some(p.to_string());
        let r = f(self);
        self.guard = None;
        r
    }

    /// Stores `vals` (the program's result, one per lane) at `addr` as the output type.
    fn store(&mut self, p: &Program, vals: &[V], addr: &str) {
        let e = elem(p.out);
        let regs: Vec<String> = vals.iter().map(|v| self.raw_of(v, e)).collect();
        let ty = raw_ty(e);
        self.vector_access("st.global", ty, e.size(), addr, &regs);
    }

    /// The raw bits of element type `e` that value `v` rounds to (the store's conversion,
    /// as the interpreter's `narrow`): a register of [`Gen::raw_reg`]'s kind.
    fn raw_of(&mut self, v: &V, e: ElemType) -> String {
        // The low 16 bits of a 32-bit integer register.
        let low16 = |g: &mut Gen, r: &str| {
            let h = g.h();
            emit!(g, "cvt.u16.u32 {h}, {r};");
            h
        };
        match e {
            ElemType::F32 | ElemType::F64 => {
                let ft = if e == ElemType::F64 { &F64T } else { &F32T };
                self.float_of(v, ft)
            }
            ElemType::F16 | ElemType::BF16 => {
                let f = self.float_of(v, &F32T);
                self.bits16(&f, e)
            }
            ElemType::Bool => {
                let p = self.cast(v.class(), Class::Bool, v).reg().to_string();
                let h = self.h();
                emit!(self, "selp.u16 {h}, 1, 0, {p};");
                h
            }
            ElemType::I8 | ElemType::I16 | ElemType::U16 => {
                let r = self.narrow_int(v, e).reg().to_string();
                low16(self, &r)
            }
            _ => {
                let c = Class::of(e).unwrap_or(Class::I32);
                let r = self.cast(v.class(), c, v).reg().to_string();
                if c == Class::U8 {
                    low16(self, &r)
                } else {
                    r
                }
            }
        }
    }

    /// A value converted to float type `ft` (the store's rounding: `f64` to `f32` rounds
    /// once; bool gives 1 or 0).
    fn float_of(&mut self, v: &V, ft: &Ft) -> String {
        let to = if ft.f64 { Class::F64 } else { Class::F32 };
        self.cast(v.class(), to, v).reg().to_string()
    }
}

/// The PTX module of `p` for `shape`: the library's text (`lib`: its functions, without a
/// header; empty when `p` calls none), then the kernel [`KERNEL`], under a header for
/// `.target sm_{sm}`. Parameters, in order: the operands' addresses (`.u64`, output first),
/// the constants (`.b8 [128]`, each in its math type's encoding), then the shape's:
/// - `Vector`: `n` (`.u32`, vectors), `tail` (`.u32`, one-dimensional: the elements past
///   the last vector), `rows`: the division by vectors per row (`d`, `magic`, `shift`,
///   `.u32` each) and each operand's row stride in elements (`.s32`);
/// - `Strided { rank }`: `n` (`.u32`), the divisions by dimensions `0..rank-1` (`d`,
///   `magic`, `shift` each), each operand's strides (`.s32`, dimension 0 first);
/// - `Tiled`: `n` (`.u32`, tiles: the grid), the divisions of [`TILED_DIVS`] (`d`, `magic`,
///   `shift` each: tiles along axes 0 and 1, batch axes 2 and 3), the sizes of axes 0 and 1
///   (`.u32`), each operand's strides of axes 0–4 (`.s32`).
pub(crate) fn module(p: &Program, shape: Shape, sm: u32, lib: &str) -> String {
    if let Shape::Reduce(r) = shape {
        return reduce::module(p, r, sm, lib);
    }
    let mut g = Gen {
        sm,
        lib: lib.to_string(),
        ..Gen::default()
    };
    // Bytes of the tiled shape's stages.
    let mut shared = 0;
    let ops = 1 + p.n_inputs as usize;
    let sizes: Vec<usize> = (0..ops)
        .map(|k| elem(if k == 0 { p.out } else { p.inputs[k - 1] }).size())
        .collect();
    let mut params: Vec<String> = (0..ops).map(|k| format!(".param .u64 ptr{k}")).collect();
    params.push(".param .align 8 .b8 kc[128]".into());
    params.push(".param .u32 n".into());
    match shape {
        Shape::Vector { rows, .. } => {
            params.push(".param .u32 tail".into());
            if rows {
                params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 row_{s}")));
                params.extend((0..ops).map(|k| format!(".param .s32 rs{k}")));
            }
        }
        Shape::Strided { rank } => {
            for d in 0..rank.saturating_sub(1) {
                params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 dim{d}_{s}")));
            }
            for k in 0..ops {
                params.extend((0..rank).map(|d| format!(".param .s32 st{k}_{d}")));
            }
        }
        // Written by `reduce::module` (above).
        Shape::Reduce(_) => {}
        Shape::Tiled { .. } => {
            for d in TILED_DIVS {
                params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 {d}_{s}")));
            }
            params.extend(["n0", "n1"].map(|s| format!(".param .u32 {s}")));
            for k in 0..ops {
                params.extend((0..5).map(|d| format!(".param .s32 st{k}_{d}")));
            }
        }
    }
    let (base, consts) = prologue(&mut g, p, ops);
    let (tid, ntid, ctaid, nctaid) = (g.r(), g.r(), g.r(), g.r());
    emit!(g, "mov.u32 {tid}, %tid.x;");
    emit!(g, "mov.u32 {ntid}, %ntid.x;");
    emit!(g, "mov.u32 {ctaid}, %ctaid.x;");
    emit!(g, "mov.u32 {nctaid}, %nctaid.x;");
    let gid = g.r();
    emit!(g, "mad.lo.u32 {gid}, {ctaid}, {ntid}, {tid};");
    let n = g.r();
    emit!(g, "ld.param.u32 {n}, [n];");
    let inputs_at = |g: &mut Gen, addrs: &[String], lanes: usize, bcast: u16| -> Vec<Vec<V>> {
        (1..ops)
            .map(|k| {
                let e = elem(p.inputs[k - 1]);
                if bcast >> k & 1 != 0 {
                    let v = g.load(e, &addrs[k], 1);
                    vec![v[0].clone(); lanes]
                } else {
                    g.load(e, &addrs[k], lanes)
                }
            })
            .collect()
    };
    let run = |g: &mut Gen, ins: &[Vec<V>], lanes: usize| -> Vec<V> {
        (0..lanes)
            .map(|j| {
                let lane: Vec<V> = ins.iter().map(|v| v[j].clone()).collect();
                g.program(p, &lane, &consts)
            })
            .collect()
    };
    // `addr[k] = base[k] + off[k] * size[k]` for 32-bit signed element offsets.
    let addresses = |g: &mut Gen, offs: &[String]| -> Vec<String> {
        (0..ops)
            .map(|k| {
                let a = g.rd();
                emit!(g, "mul.wide.s32 {a}, {}, {};", offs[k], sizes[k]);
                emit!(g, "add.s64 {a}, {a}, {};", base[k]);
                a
            })
            .collect()
    };
    match shape {
        Shape::Vector {
            lanes,
            bcast,
            rows,
            per,
        } => {
            let lanes = lanes as usize;
            if rows {
                let done = g.p();
                emit!(g, "setp.ge.u32 {done}, {gid}, {n};");
                emit!(g, "@{done} bra DONE;");
                // row = gid / (vectors per row), column = (gid - row * per_row) * lanes.
                let div = g.div_params("row");
                let (q, col) = g.divmod(&gid, &div);
                emit!(g, "mul.lo.u32 {col}, {col}, {lanes};");
                let offs: Vec<String> = (0..ops)
                    .map(|k| {
                        let (rs, o) = (g.r(), g.r());
                        emit!(g, "ld.param.s32 {rs}, [rs{k}];");
                        if bcast >> k & 1 != 0 {
                            emit!(g, "mul.lo.s32 {o}, {q}, {rs};");
                        } else {
                            emit!(g, "mad.lo.s32 {o}, {q}, {rs}, {col};");
                        }
                        o
                    })
                    .collect();
                let addrs = addresses(&mut g, &offs);
                let ins = inputs_at(&mut g, &addrs, lanes, bcast);
                let out = run(&mut g, &ins, lanes);
                g.store(p, &out, &addrs[0]);
            } else {
                // Vector `j` of thread `tid` of block `b`: `(b * per + j) * ntid + tid`, each
                // guarded by `< n`: the loads of all `per`, then the program, then the stores.
                let (first, zero) = (g.r(), g.r());
                emit!(g, "mul.lo.u32 {first}, {ctaid}, {ntid};");
                emit!(g, "mad.lo.u32 {first}, {first}, {per}, {tid};");
                emit!(g, "mov.u32 {zero}, 0;");
                let at = |k: usize, i: &String| if bcast >> k & 1 != 0 { &zero } else { i }.clone();
                let mut loaded = Vec::new();
                for j in 0..per {
                    let (v, inside, col) = (g.r(), g.p(), g.r());
                    emit!(g, "mad.lo.u32 {v}, {ntid}, {j}, {first};");
                    emit!(g, "setp.lt.u32 {inside}, {v}, {n};");
                    emit!(g, "mul.lo.u32 {col}, {v}, {lanes};");
                    let offs: Vec<String> = (0..ops).map(|k| at(k, &col)).collect();
                    let addrs = addresses(&mut g, &offs);
                    let ins = g.guarded(&inside, |g| inputs_at(g, &addrs, lanes, bcast));
                    loaded.push((inside, addrs, ins));
                }
                let outs: Vec<Vec<V>> = loaded
                    .iter()
                    .map(|(_, _, ins)| run(&mut g, ins, lanes))
                    .collect();
                for ((inside, addrs, _), out) in loaded.iter().zip(&outs) {
                    g.guarded(inside, |g| g.store(p, out, &addrs[0]));
                }
                // The tail: element `n * lanes + gid` for `gid < tail`.
                let (tail, in_tail, i) = (g.r(), g.p(), g.r());
                emit!(g, "ld.param.u32 {tail}, [tail];");
                emit!(g, "setp.ge.u32 {in_tail}, {gid}, {tail};");
                emit!(g, "@{in_tail} bra DONE;");
                emit!(g, "mad.lo.u32 {i}, {n}, {lanes}, {gid};");
                let offs: Vec<String> = (0..ops).map(|k| at(k, &i)).collect();
                let addrs = addresses(&mut g, &offs);
                let ins = inputs_at(&mut g, &addrs, 1, bcast);
                let out = run(&mut g, &ins, 1);
                g.store(p, &out, &addrs[0]);
            }
        }
        Shape::Strided { rank } => {
            let rank = rank.max(1) as usize;
            let divs: Vec<[String; 3]> = (0..rank - 1)
                .map(|d| g.div_params(&format!("dim{d}")))
                .collect();
            let strides = g.stride_params("st", ops, rank);
            let (step, i, more) = (g.r(), g.r(), g.p());
            emit!(g, "mul.lo.u32 {step}, {ntid}, {nctaid};");
            emit!(g, "mov.u32 {i}, {gid};");
            emit!(g, "LOOP:");
            emit!(g, "setp.ge.u32 {more}, {i}, {n};");
            emit!(g, "@{more} bra DONE;");
            let offs = g.offsets(&i, &divs, &strides);
            let addrs = addresses(&mut g, &offs);
            let ins = inputs_at(&mut g, &addrs, 1, 0);
            let out = run(&mut g, &ins, 1);
            g.store(p, &out, &addrs[0]);
            emit!(g, "add.u32 {i}, {i}, {step};");
            emit!(g, "bra LOOP;");
        }
        Shape::Tiled {
            pair,
            staged,
            words,
        } => {
            shared = tiled(&mut g, p, &consts, &base, pair, staged, words, &sizes);
        }
        Shape::Reduce(_) => {}
    }
    emit!(g, "DONE:");
    emit!(g, "ret;");

    text(&g, &params, shared)
}

/// The prologue of every kernel: the operands' global addresses (`ptr{k}` parameters) and
/// the registers of the constants `p` reads (from the `kc` parameter, each in its math type).
fn prologue(g: &mut Gen, p: &Program, ops: usize) -> (Vec<String>, Vec<Option<V>>) {
    let base: Vec<String> = (0..ops)
        .map(|k| {
            let r = g.rd();
            emit!(g, "ld.param.u64 {r}, [ptr{k}];");
            emit!(g, "cvta.to.global.u64 {r}, {r};");
            r
        })
        .collect();
    let mut consts: Vec<Option<V>> = vec![None; MAX_CONSTS];
    for i in p.code().iter().filter(|i| i.op == Opcode::Const as u8) {
        let c = i.arg as usize % MAX_CONSTS;
        if consts[c].is_some() {
            continue;
        }
        let v = match Class::from_code(i.class) {
            Some(Class::F64) => {
                let r = g.d();
                emit!(g, "ld.param.f64 {r}, [kc+{}];", 8 * c);
                V::D(r)
            }
            Some(Class::Bool) => {
                let h = g.h();
                emit!(g, "ld.param.u8 {h}, [kc+{}];", 8 * c);
                g.pred(|g, p| emit!(g, "setp.ne.u16 {p}, {h}, 0;"))
            }
            // An integer's encoding is its bits zero-extended to 64 (a `u8` fits 32).
            Some(class @ (Class::I32 | Class::U32 | Class::U8 | Class::I64 | Class::U64)) => {
                let it = it_of(class);
                let r = g.ireg(&it);
                emit!(g, "ld.param.{} {r}, [kc+{}];", it.b, 8 * c);
                V::I(class, r)
            }
            _ => {
                let r = g.f();
                emit!(g, "ld.param.f32 {r}, [kc+{}];", 8 * c);
                V::F(r)
            }
        };
        consts[c] = Some(v);
    }
    (base, consts)
}

/// The module's text: the header for `.target sm_{g.sm}`, the library, the static shared
/// stage (`shared` bytes, if any), the kernel [`KERNEL`] with `params` and `g`'s registers
/// and code.
fn text(g: &Gen, params: &[String], shared: u32) -> String {
    let lib = &g.lib;
    let sm = g.sm;
    let mut text = format!(".version 7.8\n.target sm_{sm}\n.address_size 64\n\n{lib}\n");
    if shared > 0 {
        let _ = writeln!(text, ".shared .align 8 .b8 {STAGE}[{shared}];\n");
    }
    // A block size the kernel must launch with bounds ptxas's registers (a block of 1024
    // threads needs 64 or fewer a thread).
    let maxntid = g
        .block
        .map_or(String::new(), |(x, y)| format!(".maxntid {x}, {y}, 1\n"));
    let _ = writeln!(
        text,
        ".visible .entry {KERNEL}(\n\t{}\n)\n{maxntid}{{",
        params.join(",\n\t")
    );
    for (kind, count, prefix) in [
        ("f32", g.f, "%f"),
        ("f64", g.d, "%fd"),
        ("pred", g.p, "%p"),
        ("b32", g.r, "%r"),
        ("b64", g.rd, "%rd"),
        ("b16", g.h, "%h"),
    ] {
        if count > 0 {
            let _ = writeln!(text, ".reg .{kind} {prefix}<{}>;", count + 1);
        }
    }
    text.push_str(&g.s);
    text.push_str("}\n");
    text
}

/// The body of library function `name` as code to paste in place of a call, where it is
/// straight-line: no branch, label, call or memory but its parameters (`ld.param` of
/// `[name_param_0]` and `[name_param_1]`) and its result (`st.param` of `[func_retval0]`),
/// `ret` last. Its registers are renamed (`%r5` → `%ir5`, declared in the pasted scope),
/// its parameter loads and result store become `mov`s: the caller replaces the bracketed
/// parameter and result names with registers. `None` otherwise.
fn leaf(lib: &str, name: &str) -> Option<String> {
    // The definition: `name(` … `)` then `{`, the body to the matching `}`.
    let mut from = 0;
    let body = loop {
        let at = from + lib[from..].find(name)?;
        from = at + name.len();
        let rest = lib[from..].trim_start();
        let Some(params) = rest.strip_prefix('(') else {
            continue;
        };
        let after = params[params.find(')')? + 1..].trim_start();
        if let Some(b) = after.strip_prefix('{') {
            break &b[..b.find('}')?];
        }
    };
    if body.contains('{') {
        return None;
    }
    let lines: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect();
    let (last, code) = lines.split_last()?;
    if *last != "ret;" {
        return None;
    }
    let rename = |l: &str| l.replace('%', "%i");
    let mut out = String::new();
    for l in code {
        let word = l.split_whitespace().next().unwrap_or("");
        let op = word.split('.').next().unwrap_or("");
        let (param, result) = (l.contains("_param_"), l.contains("func_retval0"));
        let memory = [
            "ld", "st", "ldu", "atom", "red", "call", "bra", "ret", "cvta", "prefetch",
        ];
        if l.starts_with(".reg") {
            let _ = writeln!(out, "{}", rename(l));
        } else if op == "ld" && word.starts_with("ld.param.") && param {
            // `ld.param.T %r3, [name_param_0];` → `mov.T %ir3, [name_param_0];`
            let _ = writeln!(
                out,
                "mov.{} {}",
                &word["ld.param.".len()..],
                rename(&l[word.len()..]).trim()
            );
        } else if op == "st" && word.starts_with("st.param.") && result {
            // `st.param.T [func_retval0], %r17;` → `mov.T [func_retval0], %ir17;`
            let _ = writeln!(
                out,
                "mov.{} {}",
                &word["st.param.".len()..],
                rename(&l[word.len()..]).trim()
            );
        } else if l.starts_with('.')
            || l.ends_with(':')
            || l.starts_with('@') && l.contains("bra")
            || memory.contains(&op)
            || param
            || result
            || l.contains("__")
            || l.contains('$')
        {
            return None;
        } else {
            let _ = writeln!(out, "{}", rename(l));
        }
    }
    Some(out)
}

/// The shared array of the tiled shape's stages.
const STAGE: &str = "sa_stage";

/// The tiled shape's body ([`Shape::Tiled`], parameters as [`module`] lists them): `consts`
/// the constants' registers, `base` the operands' global addresses, `sizes` their element
/// sizes. Returns the bytes of its stages (static shared memory).
#[allow(clippy::too_many_arguments)]
fn tiled(
    g: &mut Gen,
    p: &Program,
    consts: &[Option<V>],
    base: &[String],
    pair: bool,
    staged: u16,
    words: u16,
    sizes: &[usize],
) -> u32 {
    let ops = base.len();
    let pf = if pair { 2u32 } else { 1 };
    let side = tile_side(pair);
    // Elements per stage row: a padding column keeps the turned reads off one bank.
    let pitch = side + pf;
    let th = TILE_THREADS.1;
    // Stage rows per thread, and column blocks (of `pf` columns) per thread.
    let (rows, blocks) = (side / th, side / (th * pf));
    let elem_k = |k: usize| elem(if k == 0 { p.out } else { p.inputs[k - 1] });
    let is_staged = |k: usize| k > 0 && staged >> k & 1 != 0;
    let mut stage_at = vec![0u32; ops];
    let mut bytes = 0u32;
    for k in (1..ops).filter(|&k| is_staged(k)) {
        stage_at[k] = bytes;
        bytes += stage_bytes(pair, sizes[k]);
    }
    let (tx, ty, rest) = (g.r(), g.r(), g.r());
    emit!(g, "mov.u32 {tx}, %tid.x;");
    emit!(g, "mov.u32 {ty}, %tid.y;");
    emit!(g, "mov.u32 {rest}, %ctaid.x;");
    // The tile's indices along axes 0 and 1 and its batch indices (axis 0 fastest).
    let mut at: Vec<String> = Vec::new();
    for d in TILED_DIVS {
        let div = g.div_params(d);
        let (q, c) = g.divmod(&rest, &div);
        at.push(c);
        emit!(g, "mov.u32 {rest}, {q};");
    }
    at.push(rest);
    let (x0, y0, n0, n1) = (g.r(), g.r(), g.r(), g.r());
    emit!(g, "mul.lo.u32 {x0}, {}, {side};", at[0]);
    emit!(g, "mul.lo.u32 {y0}, {}, {side};", at[1]);
    emit!(g, "ld.param.u32 {n0}, [n0];");
    emit!(g, "ld.param.u32 {n1}, [n1];");
    at[0] = x0.clone();
    at[1] = y0.clone();
    // Each operand's strides and the element offset of the tile's origin.
    let mut st: Vec<[String; 2]> = Vec::new();
    let mut origin: Vec<String> = Vec::new();
    for k in 0..ops {
        let o = g.r();
        emit!(g, "mov.u32 {o}, 0;");
        let mut s01 = [String::new(), String::new()];
        for (d, c) in at.iter().enumerate() {
            let s = g.r();
            emit!(g, "ld.param.s32 {s}, [st{k}_{d}];");
            emit!(g, "mad.lo.s32 {o}, {c}, {s}, {o};");
            if d < 2 {
                s01[d] = s;
            }
        }
        st.push(s01);
        origin.push(o);
    }
    let (full, t) = (g.p(), g.r());
    emit!(g, "add.u32 {t}, {x0}, {side};");
    emit!(g, "setp.le.u32 {full}, {t}, {n0};");
    emit!(g, "add.u32 {t}, {y0}, {side};");
    emit!(g, "setp.le.and.u32 {full}, {t}, {n1}, {full};");
    // Tile-local coordinate `c + step * m` (a thread index scaled and shifted).
    let coord = |g: &mut Gen, c: &str, scale: u32, add: u32| {
        let r = g.r();
        emit!(g, "mad.lo.u32 {r}, {c}, {scale}, {add};");
        r
    };
    // Global address of operand `k`'s element at tile-local `(i, j)`.
    let addr = |g: &mut Gen, k: usize, i: &str, j: &str| {
        let (o, a) = (g.r(), g.rd());
        emit!(g, "mad.lo.s32 {o}, {i}, {}, {};", st[k][0], origin[k]);
        emit!(g, "mad.lo.s32 {o}, {j}, {}, {o};", st[k][1]);
        emit!(g, "mul.wide.s32 {a}, {o}, {};", sizes[k]);
        emit!(g, "add.s64 {a}, {a}, {};", base[k]);
        a
    };
    // Whether tile-local `(i, j)` lies inside the plan.
    let inside = |g: &mut Gen, i: &str, j: &str| {
        let (p, gi, gj) = (g.p(), g.r(), g.r());
        emit!(g, "add.u32 {gi}, {x0}, {i};");
        emit!(g, "add.u32 {gj}, {y0}, {j};");
        emit!(g, "setp.lt.u32 {p}, {gi}, {n0};");
        emit!(g, "setp.lt.and.u32 {p}, {gj}, {n1}, {p};");
        p
    };
    let sbase = g.r();
    emit!(g, "mov.u32 {sbase}, {STAGE};");
    // Shared address of stage `k`'s element `(i, j)`.
    let saddr = |g: &mut Gen, k: usize, i: &str, j: &str| {
        let a = g.r();
        emit!(g, "mad.lo.u32 {a}, {i}, {pitch}, {j};");
        emit!(g, "mad.lo.u32 {a}, {a}, {}, {sbase};", sizes[k]);
        emit!(g, "add.u32 {a}, {a}, {};", stage_at[k]);
        a
    };
    // A full or a partial tile: `full_part(full code, partial code)`, both writing the same
    // registers.
    let branch = |g: &mut Gen, fast: &mut dyn FnMut(&mut Gen), slow: &mut dyn FnMut(&mut Gen)| {
        let (part, join) = (g.label(), g.label());
        emit!(g, "@!{full} bra {part};");
        fast(g);
        emit!(g, "bra.uni {join};");
        emit!(g, "{part}:");
        slow(g);
        emit!(g, "{join}:");
    };

    // Stage: thread (tx, ty) reads elements (ty + 8r, pf·tx + e) of each staged input,
    // consecutive threads along axis 1.
    let stage_ks: Vec<usize> = (1..ops).filter(|&k| is_staged(k)).collect();
    let coords: Vec<(String, String)> = (0..rows)
        .map(|r| (coord(g, &ty, 1, th * r), coord(g, &tx, pf, 0)))
        .collect();
    let raw: Vec<Vec<Vec<String>>> = stage_ks
        .iter()
        .map(|&k| {
            (0..rows)
                .map(|_| (0..pf).map(|_| g.raw_reg(elem_k(k))).collect())
                .collect()
        })
        .collect();
    branch(
        g,
        &mut |g| {
            for (s, &k) in stage_ks.iter().enumerate() {
                let e = elem_k(k);
                for (r, (i, j)) in coords.iter().enumerate() {
                    let a = addr(g, k, i, j);
                    g.vector_access("ld.global", raw_ty(e), e.size(), &a, &raw[s][r]);
                }
            }
        },
        &mut |g| {
            for (s, &k) in stage_ks.iter().enumerate() {
                let e = elem_k(k);
                for (r, (i, j)) in coords.iter().enumerate() {
                    for (c, reg) in raw[s][r].iter().enumerate() {
                        let jc = coord(g, j, 1, c as u32);
                        g.zero_raw(e, reg);
                        let live = inside(g, i, &jc);
                        let a = addr(g, k, i, &jc);
                        emit!(g, "@{live} ld.global.{} {reg}, [{a}];", raw_ty(e));
                    }
                }
            }
        },
    );
    for (s, &k) in stage_ks.iter().enumerate() {
        let e = elem_k(k);
        for (r, (i, j)) in coords.iter().enumerate() {
            let a = saddr(g, k, i, j);
            g.vector_access("st.shared", raw_ty(e), e.size(), &a, &raw[s][r]);
        }
    }
    emit!(g, "bar.sync 0;");

    // Compute: thread (tx, ty) takes rows pf·tx + a and columns pf·(ty + 8r) + c,
    // consecutive threads along axis 0. Element index: (r, c, a).
    let n_el = (blocks * pf * pf) as usize;
    let el = |r: u32, c: u32, a: u32| ((r * pf + c) * pf + a) as usize;
    let rows_of: Vec<String> = (0..pf).map(|a| coord(g, &tx, pf, a)).collect();
    let cols_of: Vec<Vec<String>> = (0..blocks)
        .map(|r| {
            (0..pf)
                .map(|c| coord(g, &ty, pf, pf * th * r + c))
                .collect()
        })
        .collect();
    let mut raws: Vec<Vec<String>> = vec![Vec::new(); ops];
    for k in 1..ops {
        raws[k] = (0..n_el).map(|_| g.raw_reg(elem_k(k))).collect();
    }
    let paired = |k: usize| pair && (k == 0 || words >> k & 1 != 0);
    branch(
        g,
        &mut |g| {
            for k in (1..ops).filter(|&k| !is_staged(k)) {
                let e = elem_k(k);
                for r in 0..blocks {
                    for c in 0..pf {
                        let j = &cols_of[r as usize][c as usize];
                        if paired(k) {
                            let regs: Vec<String> =
                                (0..pf).map(|a| raws[k][el(r, c, a)].clone()).collect();
                            let ad = addr(g, k, &rows_of[0], j);
                            g.vector_access("ld.global", raw_ty(e), e.size(), &ad, &regs);
                        } else {
                            for a in 0..pf {
                                let ad = addr(g, k, &rows_of[a as usize], j);
                                let reg = &raws[k][el(r, c, a)];
                                emit!(g, "ld.global.{} {reg}, [{ad}];", raw_ty(e));
                            }
                        }
                    }
                }
            }
        },
        &mut |g| {
            for k in (1..ops).filter(|&k| !is_staged(k)) {
                let e = elem_k(k);
                for r in 0..blocks {
                    for c in 0..pf {
                        for a in 0..pf {
                            let (i, j) = (&rows_of[a as usize], &cols_of[r as usize][c as usize]);
                            let reg = &raws[k][el(r, c, a)];
                            g.zero_raw(e, reg);
                            let live = inside(g, i, j);
                            let ad = addr(g, k, i, j);
                            emit!(g, "@{live} ld.global.{} {reg}, [{ad}];", raw_ty(e));
                        }
                    }
                }
            }
        },
    );
    // The staged inputs from their stages: row pf·tx + a, columns pf·cb .. + pf.
    for &k in &stage_ks {
        let e = elem_k(k);
        for r in 0..blocks {
            for a in 0..pf {
                let regs: Vec<String> = (0..pf).map(|c| raws[k][el(r, c, a)].clone()).collect();
                let sa = saddr(g, k, &rows_of[a as usize], &cols_of[r as usize][0]);
                g.vector_access("ld.shared", raw_ty(e), e.size(), &sa, &regs);
            }
        }
    }
    let results: Vec<V> = (0..n_el)
        .map(|x| {
            let lane: Vec<V> = (1..ops)
                .map(|k| {
                    let reg = raws[k][x].clone();
                    g.widen(elem_k(k), &reg)
                })
                .collect();
            g.program(p, &lane, consts)
        })
        .collect();
    branch(
        g,
        &mut |g| {
            for r in 0..blocks {
                for c in 0..pf {
                    let j = &cols_of[r as usize][c as usize];
                    if paired(0) {
                        let vals: Vec<V> = (0..pf).map(|a| results[el(r, c, a)].clone()).collect();
                        let ad = addr(g, 0, &rows_of[0], j);
                        g.store(p, &vals, &ad);
                    } else {
                        for a in 0..pf {
                            let ad = addr(g, 0, &rows_of[a as usize], j);
                            g.store(p, &[results[el(r, c, a)].clone()], &ad);
                        }
                    }
                }
            }
        },
        &mut |g| {
            for r in 0..blocks {
                for c in 0..pf {
                    for a in 0..pf {
                        let (i, j) = (&rows_of[a as usize], &cols_of[r as usize][c as usize]);
                        let live = inside(g, i, j);
                        let skip = g.label();
                        emit!(g, "@!{live} bra {skip};");
                        let ad = addr(g, 0, i, j);
                        g.store(p, &[results[el(r, c, a)].clone()], &ad);
                        emit!(g, "{skip}:");
                    }
                }
            }
        },
    );
    bytes
}

/// Whether `p` calls the library (a float function the generator does not write).
pub(crate) fn calls_lib(p: &Program) -> bool {
    p.code().iter().any(|i| {
        let (Some(op), Some(class)) = (Opcode::from_code(i.op), Class::from_code(i.class)) else {
            return false;
        };
        t1lib::name(op, class).is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{Arg, Expr};
    use std::path::PathBuf;
    use ElemType::{Bool, BF16, F16, F32, F64, F8E4M3, I16, I32, I64, I8, U16, U32, U64, U8};

    /// Expressions over `a`, `b`, `c` covering every op the generator writes or calls.
    const EXPRS: &[&str] = &[
        "a * b + c",
        "sin(a * b) + sqrt(c) + cos(a) / log(cos(b) + 2)",
        "where(isnan(a), 0, a) - b * c",
        "clamp(a, -1, 1) + relu(b) - abs(c) + neg(a) + rsqrt(b)",
        "minimum(a, b) + maximum(b, c) + fmin(a, c) + fmax(a, b) + fma(a, b, c)",
        "copysign(a, b) + sign(c) + floor(a) + ceil(b) + round(c) + trunc(a)",
        "where(logical_and(lt(a, b), ge(b, c)), a, where(logical_or(ne(a, c), le(a, b)), b, c))",
        "where(logical_xor(eq(a, b), gt(b, c)), a, b) + where(logical_not(isinf(c)), c, 0)",
        "exp(a) + tanh(b) + sigmoid(c) + erf(a) + pow(a, b) + a / b",
        "atan2(a, b) + hypot(b, c) + fmod(a, b) + remainder(a, c) + floor_divide(a, b) + nextafter(a, b)",
        "erfc(a) + erfinv(b) + lgamma(c) + exp2(a) + expm1(b) + log2(c) + log10(a) + log1p(b)",
        "tan(c) + asin(a) + acos(b) + atan(c) + sinh(a) + cosh(b) + asinh(c) + acosh(a) + atanh(b)",
        "where(isfinite(a), a, b) + where(isposinf(b), 1.0, 2.5) + where(isneginf(c), 3.0, 4.0) + where(signbit(a), c, b)",
    ];

    fn ptxas() -> PathBuf {
        std::env::var_os("STRIDED_APPLY_PTXAS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("ptxas"))
    }

    /// The library's PTX from the committed expression image, as tier 1 reads it.
    fn lib() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../expr/image/kernels.img");
        let bytes = std::fs::read(path).expect("the expression image");
        crate::expr::tier1::library(Box::leak(bytes.into_boxed_slice()))
            .expect("the library's PTX")
            .to_string()
    }

    /// `leaf` on synthetic library text: a straight-line function's registers renamed, its
    /// parameter loads and result store turned into `mov`s; a function with a branch, a
    /// call, a table or a local array, or only declared, is not pasted.
    #[test]
    fn leaf_pastes_only_straight_line_code() {
        let lib = ".visible .func  (.param .b32 func_retval0) f_decl\n(\n\t.param .b32 f_decl_param_0\n)\n;\n\
            .visible .func  (.param .b32 func_retval0) f_ok(\n\t.param .b32 f_ok_param_0,\n\t.param .b32 f_ok_param_1\n)\n{\n\
            \t.reg .b32 \t%r<4>;\n\tld.param.b32 \t%r1, [f_ok_param_0];\n\tld.param.b32 \t%r2, [f_ok_param_1];\n\
            \tadd.rn.f32 \t%r3, %r1, %r2;\n\tst.param.b32 \t[func_retval0], %r3;\n\tret;\n}\n\
            .visible .func  (.param .b32 func_retval0) f_branch(\n\t.param .b32 f_branch_param_0\n)\n{\n\
            \t.reg .pred \t%p<2>;\n\t.reg .b32 \t%r<3>;\n\tld.param.b32 \t%r1, [f_branch_param_0];\n\
            \tsetp.gt.f32 \t%p1, %r1, 0f00000000;\n\t@%p1 bra \t$L__BB0_2;\n\tneg.f32 \t%r1, %r1;\n$L__BB0_2:\n\
            \tst.param.b32 \t[func_retval0], %r1;\n\tret;\n}\n\
            .visible .func  (.param .b32 func_retval0) f_table(\n\t.param .b32 f_table_param_0\n)\n{\n\
            \t.reg .b32 \t%r<3>;\n\t.reg .b64 \t%rd<2>;\n\tmov.u64 \t%rd1, __cudart_i2opi_f;\n\
            \tld.global.nc.b32 \t%r1, [%rd1];\n\tst.param.b32 \t[func_retval0], %r1;\n\tret;\n}\n";
        let body = leaf(lib, "f_ok").expect("straight-line");
        assert!(body.contains(".reg .b32 \t%ir<4>;"), "{body}");
        assert!(body.contains("mov.b32 %ir1, [f_ok_param_0];"), "{body}");
        assert!(body.contains("add.rn.f32 \t%ir3, %ir1, %ir2;"), "{body}");
        assert!(body.contains("mov.b32 [func_retval0], %ir3;"), "{body}");
        assert!(
            !body.contains("ret;") && !body.contains("ld.param"),
            "{body}"
        );
        for name in ["f_branch", "f_table", "f_decl", "f_missing"] {
            assert!(leaf(lib, name).is_none(), "{name}");
        }
    }

    /// The straight-line float functions are pasted in place of their calls (the
    /// ptxas test compiles them, the GPU tests compare their bits with the interpreter's);
    /// those with branches or tables stay calls.
    #[test]
    fn straight_line_functions_are_pasted_in() {
        let lib = lib();
        for name in [
            "t1_exp_f32",
            "t1_tanh_f32",
            "t1_sigmoid_f32",
            "t1_log1p_f32",
        ] {
            let body = leaf(&lib, name).unwrap_or_else(|| panic!("{name} is not pasted in"));
            assert!(body.contains(&format!("[{name}_param_0]")), "{body}");
            assert!(
                body.contains("[func_retval0]") && !body.contains("ret;"),
                "{body}"
            );
        }
        for name in ["t1_sin_f32", "t1_pow_f32", "t1_exp_f64"] {
            assert!(leaf(&lib, name).is_none(), "{name}");
        }
        let e =
            Expr::parse("(tanh((a * a * a * 0.044715 + a) * 0.7978845608028654) + 1) * (a * 0.5)")
                .expect("parses");
        let c = e
            .compile(&[("a", Arg::Tensor(BF16))], None)
            .expect("compiles");
        let p = *c.program();
        let lib = crate::expr::tier1::lib_for(&p, &lib);
        let shape = Shape::Vector {
            lanes: 8,
            bcast: 0,
            rows: false,
            per: 1,
        };
        let text = module(&p, shape, 90, &lib);
        assert!(!text.contains("call.uni"), "{text}");
        assert!(text.contains("cvt.rn.bf16.f32"), "{text}");
        assert!(!module(&p, shape, 70, &lib).contains("cvt.rn.bf16.f32"));
    }

    fn check(dir: &std::path::Path, name: &str, text: &str, sm: u32) {
        let ptx = dir.join(format!("{name}.ptx"));
        std::fs::write(&ptx, text).expect("writes");
        let out = std::process::Command::new(ptxas())
            .arg(format!("-arch=sm_{sm}"))
            .arg(&ptx)
            .arg("-o")
            .arg(dir.join(format!("{name}.cubin")))
            .output()
            .unwrap_or_else(|e| {
                panic!("running ptxas ({e}): set STRIDED_APPLY_PTXAS (scripts/setup-toolchain)")
            });
        assert!(
            out.status.success(),
            "ptxas -arch=sm_{sm} refused {name}:\n{}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Input types and output type (`None`: the expression's) of the float programs.
    const FLOAT_TYPES: [([ElemType; 3], Option<ElemType>); 5] = [
        ([F32, F32, F32], None),
        ([F64, F64, F64], None),
        ([F16, BF16, F32], Some(BF16)),
        ([F16, F16, F16], Some(F16)),
        ([F32, F64, F32], Some(F32)),
    ];

    /// Each of `exprs` compiled for each of `types` (input types, output type):
    /// (expression index, type index, the program or the compile error).
    fn compile_each(
        exprs: &[&str],
        types: &[([ElemType; 3], Option<ElemType>)],
    ) -> Vec<(usize, usize, crate::error::Result<Program>)> {
        let mut out = Vec::new();
        for (x, text) in exprs.iter().enumerate() {
            let e = Expr::parse(text).unwrap_or_else(|err| panic!("{text}: {err}"));
            for (t, (ty, o)) in types.iter().enumerate() {
                let args = [
                    ("a", Arg::Tensor(ty[0])),
                    ("b", Arg::Tensor(ty[1])),
                    ("c", Arg::Tensor(ty[2])),
                ];
                out.push((x, t, e.compile(&args, *o).map(|c| *c.program())));
            }
        }
        out
    }

    /// Each of [`EXPRS`] compiled for each of `types` (input types, output type) that tier 1
    /// compiles: (expression index, type index, program). The only programs it does not
    /// compile are `nextafter`'s over 16-bit floats (that step is the interpreter's).
    fn programs(types: &[([ElemType; 3], Option<ElemType>)]) -> Vec<(usize, usize, Program)> {
        let mut out = Vec::new();
        for (x, t, p) in compile_each(EXPRS, types) {
            let (text, ty) = (EXPRS[x], types[t].0);
            let p = p.unwrap_or_else(|err| panic!("{text}: {err}"));
            if supports(&p) {
                out.push((x, t, p));
            } else {
                assert!(
                    text.contains("nextafter") && ty.contains(&F16),
                    "{text} over {ty:?}"
                );
            }
        }
        out
    }

    /// Runs `ptxas` over the (name, text, target) jobs on four threads: each must compile.
    fn compile_all(dir: &std::path::Path, jobs: Vec<(String, String, u32)>) {
        let jobs = std::sync::Mutex::new(jobs);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    // The guard is consumed by `and_then`: no lock is held while ptxas runs.
                    while let Some((name, text, sm)) = jobs.lock().ok().and_then(|mut j| j.pop()) {
                        check(dir, &name, &text, sm);
                    }
                });
            }
        });
    }

    /// Every generated module compiles with `ptxas` (the driver's compiler): each expression
    /// for the float types and bool outputs, each kernel shape the layout can give it
    /// ([`shapes_for`]), for sm_90 (and the first
    /// shape of each expression for sm_70 and sm_80), with the library's stored sm_70 PTX.
    #[test]
    fn generated_kernels_compile_with_ptxas() {
        let lib = lib();
        let dir = std::env::temp_dir().join(format!("sa-t1-ptxas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let mut types = FLOAT_TYPES.to_vec();
        types.push(([F32, F32, F32], Some(Bool)));
        let mut jobs = Vec::new();
        for (x, t, p) in programs(&types) {
            let lib = crate::expr::tier1::lib_for(&p, &lib);
            for (s, shape) in shapes_for(&sizes_of(&p)).iter().enumerate() {
                // The older targets once per expression.
                let sms: &[u32] = if t == 0 && s == 0 {
                    &[90, 80, 70]
                } else {
                    &[90]
                };
                for &sm in sms {
                    jobs.push((
                        format!("e{x}_t{t}_s{s}_sm{sm}"),
                        module(&p, *shape, sm, &lib),
                        sm,
                    ));
                }
            }
        }
        compile_all(&dir, jobs);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Every generated reduction kernel compiles with `ptxas`: each expression over the
    /// float types, each reduction, tree depths from one slot to a block, one and several
    /// kept dimensions, inputs read as vectors, strided and broadcast, one, two and four
    /// slots a thread, for sm_90 (sm_70 and sm_80 on the first expression: the software
    /// maximum and the bf16 rounding without `cvt`).
    #[test]
    fn generated_reduction_kernels_compile_with_ptxas() {
        use strided_apply_expr::reduce::ReduceOp;
        let lib = lib();
        let dir = std::env::temp_dir().join(format!("sa-t1-red-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let types = &FLOAT_TYPES;
        let shape = |op, shift, nkept, unit, bcast, per, col_y| {
            Shape::Reduce(RedShape {
                op,
                shift,
                nkept,
                unit,
                bcast,
                per,
                col_y,
            })
        };
        let shapes = [
            shape(ReduceOp::Sum, 8, 1, 0b1110, 0, 0, 0),
            shape(ReduceOp::Mean, 5, 2, 0b0010, 0b0100, 2, 0),
            shape(ReduceOp::Amax, 0, 1, 0, 0b1000, 2, 0),
            shape(ReduceOp::Amin, 8, 3, 0b0100, 0b0010, 1, 0),
            shape(ReduceOp::Prod, 3, 6, 0, 0, 1, 0),
            shape(ReduceOp::Sum, 8, 2, 0, 0b0100, 0, 8),
            shape(ReduceOp::Amax, 3, 1, 0, 0, 0, 32),
        ];
        let mut jobs = Vec::new();
        for (x, t, p) in programs(types) {
            let lib = crate::expr::tier1::lib_for(&p, &lib);
            for (s, shape) in shapes.iter().enumerate() {
                // Every shape for the first expression, one each after it.
                if x > 0 && s != (x + t) % shapes.len() {
                    continue;
                }
                let sms: &[u32] = if x == 0 && t < 3 {
                    &[90, 80, 70]
                } else {
                    &[90]
                };
                for &sm in sms {
                    jobs.push((
                        format!("r{x}_t{t}_s{s}_sm{sm}"),
                        module(&p, *shape, sm, &lib),
                        sm,
                    ));
                }
            }
        }
        assert!(jobs.len() > 60, "{} kernels", jobs.len());
        compile_all(&dir, jobs);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Expressions of integer math over `a`, `b`, `c` covering every op the generator
    /// writes for integers, then conversions between integers, floats and bool.
    const INT_EXPRS: &[&str] = &[
        "a * b + c - neg(a) + abs(b) * sign(c) + relu(a)",
        "trunc_div(a, b) + remainder(a, c) + floor_divide(b, c) + fmod(c, a)",
        "bitwise_left_shift(a, b) + bitwise_right_shift(c, b) + bitwise_xor(bitwise_and(a, b), bitwise_or(b, c)) + bitwise_not(a)",
        "where(logical_and(lt(a, b), ge(b, c)), a, where(logical_or(ne(a, c), le(a, b)), b, c)) + where(logical_xor(eq(a, b), gt(b, c)), a, b)",
        "clamp(a, b, c) + minimum(a, b) + maximum(b, c) + fmin(a, c) + fmax(b, a) + fma(a, b, c) + floor(a) + round(b) + ceil(c) + trunc(a)",
        "where(isfinite(a), a, b) + where(signbit(b), c, a) + where(logical_or(isnan(c), isinf(a)), b, c) + where(logical_or(isposinf(b), isneginf(c)), a, c)",
    ];

    /// Conversions: floats to every integer type (saturating), integers to each other and
    /// to floats, bool both ways.
    const CAST_EXPRS: &[&str] = &[
        "i32(f32(a) * 2.5) + i32(f64(b) * 1e10) + i32(u8(c)) + i32(i8(a)) + i32(i16(b)) + i32(u16(c)) + i32(u32(a)) + i32(i64(b))",
        "i64(f32(a) * 1e20) + i64(u64(b)) + i64(bool(c)) + i64(u8(f64(c) * 300)) + i64(u32(f32(a) - 7))",
        "u64(f64(a) - 1e19) + u64(u32(b)) + u64(i8(f32(c))) + u64(u16(f64(a))) + u64(i16(f32(b) * 1e3))",
        "f64(a) * 0.5 + f64(u64(b)) + f32(i64(c)) + f32(u8(a)) + f32(bool(b)) + f64(i8(c))",
        "where(bool(a), i8(f32(b) * 100.0), i16(f64(c) * 1e6)) + u16(f32(a) * -3.0) + u8(bool(c))",
    ];

    /// Comparisons and bitwise ops of bools.
    const BOOL_EXPRS: &[&str] = &[
        "logical_or(logical_xor(lt(a, b), ge(b, c)), logical_and(gt(a, c), le(c, b)))",
        "bitwise_not(bitwise_and(a, bitwise_or(b, bitwise_xor(a, c))))",
    ];

    /// Input types and output type of the bool programs.
    const BOOL_TYPES: [([ElemType; 3], Option<ElemType>); 3] = [
        ([Bool, Bool, Bool], None),
        ([Bool, Bool, Bool], Some(U8)),
        ([Bool, Bool, Bool], Some(F32)),
    ];

    /// Input types and output type (`None`: the expression's) of the integer programs.
    const INT_TYPES: [([ElemType; 3], Option<ElemType>); 11] = [
        ([I32, I32, I32], None),
        ([I64, I64, I64], None),
        ([U8, U8, U8], None),
        ([U32, U32, U32], None),
        ([U64, U64, U64], None),
        ([I8, I16, U16], None),
        ([I8, I8, I8], Some(I8)),
        ([U16, U16, U16], Some(U16)),
        ([I16, I16, I16], None),
        ([I32, I32, I32], Some(Bool)),
        ([I64, U8, I32], Some(F64)),
    ];

    /// Each of `exprs` compiled for each of `types` where it type-checks (bitwise ops and
    /// shifts take integers only): (expression index, type index, program), every one a
    /// program the generator writes.
    fn int_programs(
        exprs: &[&str],
        types: &[([ElemType; 3], Option<ElemType>)],
    ) -> Vec<(usize, usize, Program)> {
        let mut out = Vec::new();
        for (x, t, p) in compile_each(exprs, types) {
            let Ok(p) = p else {
                continue;
            };
            let (ty, o) = types[t];
            assert!(supports(&p), "{} over {ty:?} to {o:?}", exprs[x]);
            out.push((x, t, p));
        }
        out
    }

    /// The element sizes of `p`'s operands, output first.
    fn sizes_of(p: &Program) -> Vec<usize> {
        std::iter::once(p.out)
            .chain(p.inputs[..p.n_inputs as usize].iter().copied())
            .map(|c| elem(c).size())
            .collect()
    }

    /// The shapes the ptxas tests compile for operands of `sizes` bytes (the paired tiles
    /// where every operand has 2-byte elements, as the layout takes them).
    fn shapes_for(sizes: &[usize]) -> Vec<Shape> {
        let mut shapes = vec![
            Shape::Vector {
                lanes: 4,
                bcast: 0,
                rows: false,
                per: 1,
            },
            Shape::Vector {
                lanes: 8,
                bcast: 0b0100,
                rows: true,
                per: 1,
            },
            Shape::Vector {
                lanes: 2,
                bcast: 0b1010,
                rows: false,
                per: 4,
            },
            Shape::Strided { rank: 1 },
            Shape::Strided { rank: 3 },
            Shape::Tiled {
                pair: false,
                staged: 0b1010,
                words: 0,
            },
        ];
        if sizes.iter().all(|&s| s == 2) {
            shapes.push(Shape::Tiled {
                pair: true,
                staged: 0b0010,
                words: 0b1100,
            });
        }
        shapes
    }

    /// Every generated module of integer math compiles with `ptxas`: each integer
    /// expression for every integer math type (and `i8`, `i16`, `u16` in `I32`), bool and
    /// float outputs, the conversions, comparisons and bitwise ops of bools, on the vector,
    /// strided and tiled shapes, for sm_90
    /// (the first shape of each program also for sm_70 and sm_80).
    #[test]
    fn integer_kernels_compile_with_ptxas() {
        let dir = std::env::temp_dir().join(format!("sa-t1-int-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let mut programs = int_programs(INT_EXPRS, &INT_TYPES);
        let casts = int_programs(CAST_EXPRS, &INT_TYPES);
        programs.extend(
            casts
                .into_iter()
                .map(|(x, t, p)| (x + INT_EXPRS.len(), t, p)),
        );
        let bools = int_programs(BOOL_EXPRS, &BOOL_TYPES);
        let at = INT_EXPRS.len() + CAST_EXPRS.len();
        programs.extend(bools.into_iter().map(|(x, t, p)| (x + at, t, p)));
        assert!(programs.len() > 80, "{} programs", programs.len());
        let mut jobs = Vec::new();
        for (x, t, p) in programs {
            for (s, shape) in shapes_for(&sizes_of(&p)).iter().enumerate() {
                let sms: &[u32] = if s == 0 { &[90, 80, 70] } else { &[90] };
                for &sm in sms {
                    jobs.push((
                        format!("i{x}_t{t}_s{s}_sm{sm}"),
                        module(&p, *shape, sm, ""),
                        sm,
                    ));
                }
            }
        }
        compile_all(&dir, jobs);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Tier 1 compiles integer programs of every integer type, conversions included; what
    /// it does not write stays on the interpreter: an integer or `f64` value rounded to a
    /// 16-bit float, an 8-bit float operand; expression reductions take float math only.
    #[test]
    fn supports_integer_math_but_not_rounding_to_16_bit_floats() {
        let compile = |text: &str, ty: [ElemType; 2], out: Option<ElemType>| {
            let e = Expr::parse(text).expect("parses");
            *e.compile(&[("a", Arg::Tensor(ty[0])), ("b", Arg::Tensor(ty[1]))], out)
                .expect("compiles")
                .program()
        };
        for ty in [I32, I64, U32, U8, U64, I8, I16, U16] {
            let p = compile("a + b", [ty, ty], None);
            assert!(supports(&p), "{ty:?}");
            assert!(!supports_reduce(&p), "{ty:?}");
            assert!(supports(&compile("a * b", [ty, F32], None)), "{ty:?}");
            assert!(supports(&compile("a - b", [ty, ty], Some(F64))), "{ty:?}");
            assert!(
                supports(&compile("lt(a, b)", [ty, ty], Some(Bool))),
                "{ty:?}"
            );
            // Integer math rounded to a 16-bit float goes through `f32` rounded to odd.
            assert!(!supports(&compile("a + b", [ty, ty], Some(F16))), "{ty:?}");
            assert!(
                !supports(&compile("bf16(a) * b", [ty, BF16], None)),
                "{ty:?}"
            );
            // Through `f32` first, as the program says: written.
            assert!(
                supports(&compile("f32(a) + b", [ty, ty], Some(F16))),
                "{ty:?}"
            );
        }
        for text in [
            "lt(a, b)",
            "ge(a, b)",
            "logical_and(bitwise_not(a), b)",
            "logical_and(logical_not(a), b)",
        ] {
            assert!(supports(&compile(text, [Bool, Bool], None)), "{text}");
        }
        let p = compile("i32(a) + b", [F32, I32], None);
        assert!(supports(&p) && !supports_reduce(&p));
        let p = compile("f32(a) + b", [F8E4M3, F32], None);
        assert!(!supports(&p));
        let p = compile("a + b", [F64, F64], Some(F16));
        assert!(!supports(&p), "f64 to f16 rounds through f32 to odd");
        let p = compile("a + b", [F32, F32], None);
        assert!(supports(&p) && supports_reduce(&p));
    }
}
