//! Tier 1's code generator: a checked [`Program`] written out as a PTX kernel, which the CUDA
//! driver compiles (no NVRTC, no toolkit). Every op is the interpreter's, instruction for
//! instruction: IEEE `.rn` arithmetic (no contraction: `fma` only where the program has one),
//! the NaN rules of the op structs, the `cvt`s of the library's conversions, and the float
//! functions called from the library the build compiled from the interpreter's own code
//! ([`t1lib`]). So a compiled expression gives the interpreter's bits.
//!
//! Two kernel shapes, with the layout machinery of tier 0's kernels:
//! - [`Shape::Vector`]: `lanes` elements along dimension 0 per thread, one vector access per
//!   operand (unit stride) or one element for all lanes (stride 0), over one dimension (with
//!   a scalar tail) or rows of a multiple of `lanes` elements (tier 0's vectorised contract);
//! - [`Shape::Strided`]: one element per thread and grid-stride step, any strides, the
//!   coordinates by multiply-shift division ([`FastDiv`](gpu_kernels::FastDiv)).

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
    Vector { lanes: u8, bcast: u16, rows: bool },
    /// One element per thread and step, `rank` collapsed dimensions of any strides.
    Strided { rank: u8 },
}

/// Whether tier 1 compiles `p`: every value of a float math type or bool, every op one the
/// generator writes, inputs and output of the float types or bool.
pub(crate) fn supports(p: &Program) -> bool {
    let io = |code: u8| {
        matches!(
            elem_of_code(code),
            Some(ElemType::F32 | ElemType::F64 | ElemType::F16 | ElemType::BF16 | ElemType::Bool)
        )
    };
    let result = Class::from_code(p.result);
    let out = elem_of_code(p.out);
    // Rounding an `f64` value to a 16-bit float goes through `f32` rounded to odd, which the
    // generator does not write.
    let out_ok = match (result, out) {
        (Some(Class::F64), Some(ElemType::F16 | ElemType::BF16)) => false,
        (Some(Class::F32 | Class::F64 | Class::Bool), Some(_)) => true,
        _ => false,
    };
    out_ok
        && io(p.out)
        && p.inputs[..p.n_inputs as usize].iter().all(|&c| io(c))
        && p.code().iter().all(|i| {
            let (Some(op), Some(class)) = (Opcode::from_code(i.op), Class::from_code(i.class))
            else {
                return false;
            };
            instr_ok(op, class, i.arg)
        })
}

fn instr_ok(op: Opcode, class: Class, arg: u8) -> bool {
    use Opcode::*;
    let float = class.is_float();
    match op {
        Load | Const => float || class == Class::Bool,
        Not | And | Or | Xor | BitAnd | BitOr | BitXor => class == Class::Bool,
        Eq | Ne => float || class == Class::Bool,
        Cast => {
            let from = Class::from_code(arg);
            (float || class == Class::Bool)
                && from.is_some_and(|f| f.is_float() || f == Class::Bool)
        }
        Narrow => matches!(
            (class, elem_of_code(arg)),
            (
                Class::F32,
                Some(ElemType::F16 | ElemType::BF16 | ElemType::F32)
            ) | (Class::F64, Some(ElemType::F32 | ElemType::F64))
        ),
        // `nextafter` of a 16-bit float steps in that type (the interpreter's `arg`).
        Nextafter => float && elem_of_code(arg) == Some(ElemType::F32),
        Neg | Abs | Relu | Sqrt | Rsqrt | Sign | Floor | Ceil | Round | Trunc | IsNan | IsInf
        | IsFinite | IsPosInf | IsNegInf | SignBit | Add | Sub | Mul | Div | Min | Max | Lt
        | Le | Gt | Ge | Copysign | Fmin | Fmax | Fma | Where | Clamp => float,
        _ => float && t1lib::name(op, class).is_some(),
    }
}

/// A value: a register of a float type or a predicate.
#[derive(Clone, Debug)]
enum V {
    F(String),
    D(String),
    P(String),
}

impl V {
    fn reg(&self) -> &str {
        match self {
            V::F(r) | V::D(r) | V::P(r) => r,
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
}

macro_rules! emit {
    ($g:expr, $($t:tt)*) => {{
        let _ = writeln!($g.s, $($t)*);
    }};
}

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

    /// A call of the library's device function `name` on `x` and `y`.
    fn call(&mut self, ft: &Ft, name: &str, x: &str, y: &str) -> String {
        let (t, b) = (ft.t, if ft.f64 { "b64" } else { "b32" });
        let out = self.fl(ft);
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
        if class == Class::Bool && !matches!(op, Cast) {
            let p = self.p();
            let pred = match op {
                Not => format!("not.pred {p}, {x};"),
                And | BitAnd => format!("and.pred {p}, {x}, {y};"),
                Or | BitOr => format!("or.pred {p}, {x}, {y};"),
                Xor | BitXor | Ne => format!("xor.pred {p}, {x}, {y};"),
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
            Cast => self.cast(Class::from_code(arg).unwrap_or(class), class, &a[0]),
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
            _ => v.clone(),
        }
    }

    /// Loads element `idx` (a register of 32-bit element offsets, or `None` for
    /// lanes `lanes` of a vector at `addr`) of an input of element type `e`.
    fn load(&mut self, e: ElemType, addr: &str, lanes: usize) -> Vec<V> {
        let n = lanes.max(1);
        match e {
            ElemType::F32 | ElemType::F64 => {
                let ft = if e == ElemType::F64 { &F64T } else { &F32T };
                let regs: Vec<String> = (0..n).map(|_| self.fl(ft)).collect();
                self.vector_access("ld", ft.t, e.size(), addr, &regs);
                regs.into_iter().map(|r| Gen::val(ft, r)).collect()
            }
            ElemType::F16 | ElemType::BF16 => {
                let hs: Vec<String> = (0..n).map(|_| self.h()).collect();
                self.vector_access("ld", "b16", 2, addr, &hs);
                hs.iter().map(|h| V::F(self.widen16(h, e))).collect()
            }
            _ => {
                // bool: a byte, nonzero true.
                let hs: Vec<String> = (0..n).map(|_| self.h()).collect();
                self.vector_access("ld", "u8", 1, addr, &hs);
                hs.iter()
                    .map(|h| self.pred(|g, p| emit!(g, "setp.ne.u16 {p}, {h}, 0;")))
                    .collect()
            }
        }
    }

    /// `ld` or `st` of `regs` (one per lane) at `addr`, as vectors of at most 16 bytes.
    fn vector_access(&mut self, what: &str, ty: &str, size: usize, addr: &str, regs: &[String]) {
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
            if what == "ld" {
                emit!(self, "ld.global{v}.{ty} {operand}, [{addr}+{off}];");
            } else {
                emit!(self, "st.global{v}.{ty} [{addr}+{off}], {operand};");
            }
        }
    }

    /// Stores `vals` (the program's result, one per lane) at `addr` as the output type.
    fn store(&mut self, p: &Program, vals: &[V], addr: &str) {
        let e = elem(p.out);
        match e {
            ElemType::F32 | ElemType::F64 => {
                let ft = if e == ElemType::F64 { &F64T } else { &F32T };
                let regs: Vec<String> = vals.iter().map(|v| self.float_of(v, ft)).collect();
                self.vector_access("st", ft.t, e.size(), addr, &regs);
            }
            ElemType::F16 | ElemType::BF16 => {
                let regs: Vec<String> = vals
                    .iter()
                    .map(|v| {
                        let f = self.float_of(v, &F32T);
                        self.bits16(&f, e)
                    })
                    .collect();
                self.vector_access("st", "b16", 2, addr, &regs);
            }
            _ => {
                let regs: Vec<String> = vals
                    .iter()
                    .map(|v| {
                        let p = match v {
                            V::P(p) => p.clone(),
                            V::F(_) | V::D(_) => {
                                let from = if matches!(v, V::D(_)) {
                                    Class::F64
                                } else {
                                    Class::F32
                                };
                                self.cast(from, Class::Bool, v).reg().to_string()
                            }
                        };
                        let h = self.h();
                        emit!(self, "selp.u16 {h}, 1, 0, {p};");
                        h
                    })
                    .collect();
                self.vector_access("st", "u8", 1, addr, &regs);
            }
        }
    }

    /// A value converted to float type `ft` (the store's rounding: `f64` to `f32` rounds
    /// once; bool gives 1 or 0).
    fn float_of(&mut self, v: &V, ft: &Ft) -> String {
        let to = if ft.f64 { Class::F64 } else { Class::F32 };
        let from = match v {
            V::F(_) => Class::F32,
            V::D(_) => Class::F64,
            V::P(_) => Class::Bool,
        };
        self.cast(from, to, v).reg().to_string()
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
///   `magic`, `shift` each), each operand's strides (`.s32`, dimension 0 first).
pub(crate) fn module(p: &Program, shape: Shape, sm: u32, lib: &str) -> String {
    let mut g = Gen::default();
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
    }
    // Prologue: operand addresses, constants.
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
            _ => {
                let r = g.f();
                emit!(g, "ld.param.f32 {r}, [kc+{}];", 8 * c);
                V::F(r)
            }
        };
        consts[c] = Some(v);
    }
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
        Shape::Vector { lanes, bcast, rows } => {
            let lanes = lanes as usize;
            let (done, vec_done) = (g.p(), "VEC_DONE");
            emit!(g, "setp.ge.u32 {done}, {gid}, {n};");
            emit!(g, "@{done} bra {vec_done};");
            let offs: Vec<String> = if rows {
                // row = gid / (vectors per row), column = (gid - row * per_row) * lanes.
                let (d, m, s, hi, q, col) = (g.r(), g.r(), g.r(), g.r(), g.r(), g.r());
                emit!(g, "ld.param.u32 {d}, [row_d];");
                emit!(g, "ld.param.u32 {m}, [row_magic];");
                emit!(g, "ld.param.u32 {s}, [row_shift];");
                emit!(g, "mul.hi.u32 {hi}, {gid}, {m};");
                emit!(g, "add.u32 {q}, {hi}, {gid};");
                emit!(g, "shr.u32 {q}, {q}, {s};");
                emit!(g, "mul.lo.u32 {col}, {q}, {d};");
                emit!(g, "sub.u32 {col}, {gid}, {col};");
                emit!(g, "mul.lo.u32 {col}, {col}, {lanes};");
                (0..ops)
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
                    .collect()
            } else {
                let (col, zero) = (g.r(), g.r());
                emit!(g, "mul.lo.u32 {col}, {gid}, {lanes};");
                emit!(g, "mov.u32 {zero}, 0;");
                (0..ops)
                    .map(|k| {
                        if bcast >> k & 1 != 0 {
                            zero.clone()
                        } else {
                            col.clone()
                        }
                    })
                    .collect()
            };
            let addrs = addresses(&mut g, &offs);
            let ins = inputs_at(&mut g, &addrs, lanes, bcast);
            let out = run(&mut g, &ins, lanes);
            g.store(p, &out, &addrs[0]);
            emit!(g, "{vec_done}:");
            if !rows {
                // The tail: element `n * lanes + gid` for `gid < tail`.
                let (tail, in_tail, i, zero) = (g.r(), g.p(), g.r(), g.r());
                emit!(g, "ld.param.u32 {tail}, [tail];");
                emit!(g, "setp.ge.u32 {in_tail}, {gid}, {tail};");
                emit!(g, "@{in_tail} bra DONE;");
                emit!(g, "mad.lo.u32 {i}, {n}, {lanes}, {gid};");
                emit!(g, "mov.u32 {zero}, 0;");
                let offs: Vec<String> = (0..ops)
                    .map(|k| {
                        if bcast >> k & 1 != 0 {
                            zero.clone()
                        } else {
                            i.clone()
                        }
                    })
                    .collect();
                let addrs = addresses(&mut g, &offs);
                let ins = inputs_at(&mut g, &addrs, 1, bcast);
                let out = run(&mut g, &ins, 1);
                g.store(p, &out, &addrs[0]);
            }
        }
        Shape::Strided { rank } => {
            let rank = rank.max(1) as usize;
            let divs: Vec<[String; 3]> = (0..rank - 1)
                .map(|d| {
                    ["d", "magic", "shift"].map(|s| {
                        let r = g.r();
                        emit!(g, "ld.param.u32 {r}, [dim{d}_{s}];");
                        r
                    })
                })
                .collect();
            let strides: Vec<Vec<String>> = (0..ops)
                .map(|k| {
                    (0..rank)
                        .map(|d| {
                            let r = g.r();
                            emit!(g, "ld.param.s32 {r}, [st{k}_{d}];");
                            r
                        })
                        .collect()
                })
                .collect();
            let (step, i, more) = (g.r(), g.r(), g.p());
            emit!(g, "mul.lo.u32 {step}, {ntid}, {nctaid};");
            emit!(g, "mov.u32 {i}, {gid};");
            emit!(g, "LOOP:");
            emit!(g, "setp.ge.u32 {more}, {i}, {n};");
            emit!(g, "@{more} bra DONE;");
            let offs: Vec<String> = (0..ops).map(|_| g.r()).collect();
            for o in &offs {
                emit!(g, "mov.u32 {o}, 0;");
            }
            let rest = g.r();
            emit!(g, "mov.u32 {rest}, {i};");
            for d in 0..rank {
                let c = if d + 1 < rank {
                    let [dv, m, s] = &divs[d];
                    let (hi, q, c) = (g.r(), g.r(), g.r());
                    emit!(g, "mul.hi.u32 {hi}, {rest}, {m};");
                    emit!(g, "add.u32 {q}, {hi}, {rest};");
                    emit!(g, "shr.u32 {q}, {q}, {s};");
                    emit!(g, "mul.lo.u32 {c}, {q}, {dv};");
                    emit!(g, "sub.u32 {c}, {rest}, {c};");
                    emit!(g, "mov.u32 {rest}, {q};");
                    c
                } else {
                    rest.clone()
                };
                for k in 0..ops {
                    emit!(g, "mad.lo.s32 {0}, {c}, {1}, {0};", offs[k], strides[k][d]);
                }
            }
            let addrs = addresses(&mut g, &offs);
            let ins = inputs_at(&mut g, &addrs, 1, 0);
            let out = run(&mut g, &ins, 1);
            g.store(p, &out, &addrs[0]);
            emit!(g, "add.u32 {i}, {i}, {step};");
            emit!(g, "bra LOOP;");
        }
    }
    emit!(g, "DONE:");
    emit!(g, "ret;");

    let mut text = format!(".version 7.8\n.target sm_{sm}\n.address_size 64\n\n{lib}\n");
    let _ = writeln!(
        text,
        ".visible .entry {KERNEL}(\n\t{}\n)\n{{",
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
    use ElemType::{Bool, BF16, F16, F32, F64};

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

    /// Every generated module compiles with `ptxas` (the driver's compiler): each expression
    /// for the float types and bool outputs, each kernel shape, for sm_90 and, from the
    /// library's sm_90 PTX retargeted, for sm_70 and sm_80.
    #[test]
    fn generated_kernels_compile_with_ptxas() {
        let lib = lib();
        let dir = std::env::temp_dir().join(format!("sa-t1-ptxas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let types: &[([ElemType; 3], Option<ElemType>)] = &[
            ([F32, F32, F32], None),
            ([F64, F64, F64], None),
            ([F16, BF16, F32], Some(BF16)),
            ([F16, F16, F16], Some(F16)),
            ([F32, F64, F32], Some(F32)),
            ([F32, F32, F32], Some(Bool)),
        ];
        let shapes = [
            Shape::Vector {
                lanes: 4,
                bcast: 0,
                rows: false,
            },
            Shape::Vector {
                lanes: 8,
                bcast: 0b0100,
                rows: true,
            },
            Shape::Strided { rank: 1 },
            Shape::Strided { rank: 3 },
        ];
        let mut jobs = Vec::new();
        for (x, text) in EXPRS.iter().enumerate() {
            let e = Expr::parse(text).unwrap_or_else(|err| panic!("{text}: {err}"));
            for (t, (ty, out)) in types.iter().enumerate() {
                let args = [
                    ("a", Arg::Tensor(ty[0])),
                    ("b", Arg::Tensor(ty[1])),
                    ("c", Arg::Tensor(ty[2])),
                ];
                let c = e
                    .compile(&args, *out)
                    .unwrap_or_else(|err| panic!("{text}: {err}"));
                let p = *c.program();
                if !supports(&p) {
                    // `nextafter` of a 16-bit float steps in that type: the interpreter's.
                    assert!(
                        text.contains("nextafter") && ty.contains(&F16),
                        "{text} over {ty:?}"
                    );
                    continue;
                }
                let lib = crate::expr::tier1::lib_for(&p, &lib);
                for (s, shape) in shapes.iter().enumerate() {
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
        }
        let jobs = std::sync::Mutex::new(jobs);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    // The guard is consumed by `and_then`: no lock is held while ptxas runs.
                    while let Some((name, text, sm)) = jobs.lock().ok().and_then(|mut j| j.pop()) {
                        check(&dir, &name, &text, sm);
                    }
                });
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn programs_of_integer_math_stay_on_the_interpreter() {
        let e = Expr::parse("a + b").expect("parses");
        let c = e
            .compile(
                &[
                    ("a", Arg::Tensor(ElemType::I32)),
                    ("b", Arg::Tensor(ElemType::I32)),
                ],
                None,
            )
            .expect("compiles");
        assert!(!supports(c.program()));
        let c = e
            .compile(
                &[("a", Arg::Tensor(F64)), ("b", Arg::Tensor(F64))],
                Some(F16),
            )
            .expect("compiles");
        assert!(
            !supports(c.program()),
            "f64 to f16 rounds through f32 to odd"
        );
        let c = e
            .compile(&[("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32))], None)
            .expect("compiles");
        assert!(supports(c.program()));
    }
}
