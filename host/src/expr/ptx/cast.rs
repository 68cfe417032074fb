//! Conversions between math types: the program's `cast` op ([`Gen::cast`]).

use super::emit::Gen;
use super::types::{ft_of, it_of, V};
use std::fmt::Write;
use strided_apply_expr::ir::Class;

impl Gen {
    /// A value of math type `from` converted to `to` (the `cast` op: float to bool `x != 0`,
    /// bool to float 1 or 0).
    pub(super) fn cast(&mut self, from: Class, to: Class, v: &V) -> V {
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
}
