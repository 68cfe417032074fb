//! The generator's state ([`Gen`]): the kernel's code written so far, its register counters
//! and labels, the target, the library, the fixed block and the guard of global accesses;
//! fresh registers of every kind.

use super::types::{Ft, It, V};

/// The generator's state while it writes one kernel: its code (`s`), the registers taken of
/// each kind (`%f`, `%fd`, `%p`, `%r`, `%rd`, `%h`), the labels, and what the kernel is for.
#[derive(Default)]
pub(super) struct Gen {
    pub(super) s: String,
    pub(super) f: usize,
    pub(super) d: usize,
    pub(super) p: usize,
    pub(super) r: usize,
    pub(super) rd: usize,
    pub(super) h: usize,
    /// Labels taken.
    pub(super) l: usize,
    /// The target's SM version.
    pub(super) sm: u32,
    /// The library's text (its functions, as `module` takes it).
    pub(super) lib: String,
    /// The block the kernel launches with, where fixed (`.maxntid`).
    pub(super) block: Option<(u32, u32)>,
    /// A predicate guarding the global accesses written now (`@p`), if any.
    pub(super) guard: Option<String>,
}

impl Gen {
    pub(super) fn f(&mut self) -> String {
        self.f += 1;
        format!("%f{}", self.f)
    }
    pub(super) fn d(&mut self) -> String {
        self.d += 1;
        format!("%fd{}", self.d)
    }
    pub(super) fn p(&mut self) -> String {
        self.p += 1;
        format!("%p{}", self.p)
    }
    pub(super) fn r(&mut self) -> String {
        self.r += 1;
        format!("%r{}", self.r)
    }
    pub(super) fn rd(&mut self) -> String {
        self.rd += 1;
        format!("%rd{}", self.rd)
    }
    pub(super) fn h(&mut self) -> String {
        self.h += 1;
        format!("%h{}", self.h)
    }

    pub(super) fn label(&mut self) -> String {
        self.l += 1;
        format!("L{}", self.l)
    }
    /// A fresh register of float type `ft`.
    pub(super) fn fl(&mut self, ft: &Ft) -> String {
        if ft.f64 {
            self.d()
        } else {
            self.f()
        }
    }
    /// A fresh bit register of `ft`'s width.
    pub(super) fn bits(&mut self, ft: &Ft) -> String {
        if ft.f64 {
            self.rd()
        } else {
            self.r()
        }
    }
    pub(super) fn val(ft: &Ft, r: String) -> V {
        if ft.f64 {
            V::D(r)
        } else {
            V::F(r)
        }
    }

    pub(super) fn pred(&mut self, f: impl FnOnce(&mut Gen, &str)) -> V {
        let p = self.p();
        f(self, &p);
        V::P(p)
    }

    /// A fresh integer register of `it`'s width.
    pub(super) fn ireg(&mut self, it: &It) -> String {
        if it.wide {
            self.rd()
        } else {
            self.r()
        }
    }
}
