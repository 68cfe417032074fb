//! Float math: a program's instructions of a float math type ([`Gen::float_op`]: IEEE `.rn`
//! arithmetic, the op structs' NaN rules, the library's functions for the rest), the sign-bit
//! operations, NaN-propagating minimum and maximum, and 16-bit floats' rounding and widening.

use super::emit::Gen;
use super::types::{elem, ft_of, Ft, V};
use gpu_kernels::elem::ElemType;
use std::fmt::Write;
use strided_apply_expr::ir::{Class, Opcode};
use strided_apply_expr::t1lib;

impl Gen {
    /// Instruction `op` of float math type `class` (`arg` its argument) on registers `x`, `y`,
    /// `z`, as the interpreter's.
    pub(super) fn float_op(
        &mut self,
        op: Opcode,
        class: Class,
        arg: u8,
        x: String,
        y: String,
        z: String,
    ) -> V {
        use Opcode::*;
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

    /// `x` with its bits and-ed with `mask`, or-ed with `or` (a bit register of the same
    /// width, or none).
    pub(super) fn bit_op(&mut self, ft: &Ft, x: &str, mask: &str, xor: bool) -> String {
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
    pub(super) fn min_max(&mut self, ft: &Ft, x: &str, y: &str, max: bool) -> String {
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

    /// `f32` rounded to a 16-bit float type and widened back (the library's `cvt`, NaN the
    /// canonical `0x7fff`).
    pub(super) fn round16(&mut self, x: &str, e: ElemType) -> String {
        let h = self.bits16(x, e);
        self.widen16(&h, e)
    }

    /// `f32` rounded to a 16-bit float type's bits (a `.b16` register).
    pub(super) fn bits16(&mut self, x: &str, e: ElemType) -> String {
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
    pub(super) fn widen16(&mut self, h: &str, e: ElemType) -> String {
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
