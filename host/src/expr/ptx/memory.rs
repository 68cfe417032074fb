//! Memory: the raw registers of elements, global loads and stores (vector accesses, under a
//! guard where asked), and the conversions between an element's bits and its value.

use super::emit::Gen;
use super::types::{elem, Ft, F32T, F64T, V};
use gpu_kernels::elem::ElemType;
use std::fmt::Write;
use strided_apply_expr::ir::{Class, Program};

/// The PTX type of an element type's raw bits in loads and stores.
pub(super) fn raw_ty(e: ElemType) -> &'static str {
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

impl Gen {
    /// A fresh register for the raw bits of an element of type `e` (as loaded).
    pub(super) fn raw_reg(&mut self, e: ElemType) -> String {
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
    pub(super) fn zero_raw(&mut self, e: ElemType, r: &str) {
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
    pub(super) fn widen(&mut self, e: ElemType, r: &str) -> V {
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
    pub(super) fn load(&mut self, e: ElemType, addr: &str, lanes: usize) -> Vec<V> {
        let regs: Vec<String> = (0..lanes.max(1)).map(|_| self.raw_reg(e)).collect();
        self.vector_access("ld.global", raw_ty(e), e.size(), addr, &regs);
        regs.iter().map(|r| self.widen(e, r)).collect()
    }

    /// `what` (`ld.global`, `st.shared`, …) of `regs` (one per lane) at `addr`, as vectors
    /// of at most 16 bytes; an even number of 2-byte lanes as 4-byte words (`.v4.b32`: 16
    /// bytes per access, split and joined with `mov`).
    pub(super) fn vector_access(
        &mut self,
        what: &str,
        ty: &str,
        size: usize,
        addr: &str,
        regs: &[String],
    ) {
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
    pub(super) fn guarded<R>(&mut self, p: &str, f: impl FnOnce(&mut Gen) -> R) -> R {
        self.guard = Some(p.to_string());
        let r = f(self);
        self.guard = None;
        r
    }

    /// Stores `vals` (the program's result, one per lane) at `addr` as the output type.
    pub(super) fn store(&mut self, p: &Program, vals: &[V], addr: &str) {
        let e = elem(p.out);
        let regs: Vec<String> = vals.iter().map(|v| self.raw_of(v, e)).collect();
        let ty = raw_ty(e);
        self.vector_access("st.global", ty, e.size(), addr, &regs);
    }

    /// The raw bits of element type `e` that value `v` rounds to (the store's conversion,
    /// as the interpreter's `narrow`): a register of [`Gen::raw_reg`]'s kind.
    pub(super) fn raw_of(&mut self, v: &V, e: ElemType) -> String {
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
    pub(super) fn float_of(&mut self, v: &V, ft: &Ft) -> String {
        let to = if ft.f64 { Class::F64 } else { Class::F32 };
        self.cast(v.class(), to, v).reg().to_string()
    }
}
