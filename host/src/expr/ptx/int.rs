//! Integer math: a program's instructions of an integer math type ([`Gen::int_op`]:
//! wrapping arithmetic, division and remainders by zero 0, PyTorch's shifts), the wraps to 8
//! bits, and the conversions from floats and between integer types.

use super::emit::Gen;
use super::types::{fconst, ft_of, it_of, Ft, It, V};
use gpu_kernels::elem::ElemType;
use std::fmt::Write;
use strided_apply_expr::ir::{Class, Opcode};

impl Gen {
    /// `r` wrapped to 8 bits where `it` is `U8` (a fresh register), else `r`.
    pub(super) fn wrap_byte(&mut self, it: &It, r: String) -> String {
        if !it.byte {
            return r;
        }
        let o = self.r();
        emit!(self, "and.b32 {o}, {r}, 255;");
        o
    }

    /// `r` (a `u32`, saturated) at most 255 where `it` is `U8`, else `r`.
    pub(super) fn clamp_byte(&mut self, it: &It, r: &str) -> String {
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
    pub(super) fn float_to_int(&mut self, ft: &Ft, x: &str, it: &It) -> String {
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
    pub(super) fn int_convert(&mut self, from: &It, to: &It, x: &str) -> String {
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
    pub(super) fn narrow_int(&mut self, v: &V, e: ElemType) -> V {
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
    pub(super) fn safe_divisor(&mut self, it: &It, y: &str) -> (String, String, Option<String>) {
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
    pub(super) fn int_div(
        &mut self,
        it: &It,
        x: &str,
        ys: &str,
        zero: &str,
        m1: Option<&str>,
    ) -> String {
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
    pub(super) fn int_op(&mut self, op: Opcode, class: Class, x: &str, y: &str, z: &str) -> V {
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
