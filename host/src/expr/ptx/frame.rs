//! A pointwise kernel's frame ([`Pointwise`]): the program, its operands and the thread's
//! indices as the vector, strided and tiled bodies see them, and what those bodies share
//! (operand addresses, the inputs' loads, the program on each lane).

use super::emit::Gen;
use super::types::{elem, V};
use std::fmt::Write;
use strided_apply_expr::ir::Program;

/// A pointwise kernel being written: the program, its operands (output first), their element
/// sizes and global addresses, the constants' registers, and the registers of the thread's
/// indices (`%tid.x`, `%ntid.x`, `%ctaid.x`, `%nctaid.x`, the global index `gid`) and of `n`.
pub(super) struct Pointwise<'a> {
    pub(super) p: &'a Program,
    pub(super) ops: usize,
    pub(super) sizes: Vec<usize>,
    pub(super) base: Vec<String>,
    pub(super) consts: Vec<Option<V>>,
    pub(super) tid: String,
    pub(super) ntid: String,
    pub(super) ctaid: String,
    pub(super) nctaid: String,
    pub(super) gid: String,
    pub(super) n: String,
}

impl Pointwise<'_> {
    /// Each input's values at `addrs` (by operand): `lanes` consecutive elements, or one for
    /// all lanes where bit `k` of `bcast` is set.
    pub(super) fn inputs_at(
        &self,
        g: &mut Gen,
        addrs: &[String],
        lanes: usize,
        bcast: u16,
    ) -> Vec<Vec<V>> {
        (1..self.ops)
            .map(|k| {
                let e = elem(self.p.inputs[k - 1]);
                if bcast >> k & 1 != 0 {
                    let v = g.load(e, &addrs[k], 1);
                    vec![v[0].clone(); lanes]
                } else {
                    g.load(e, &addrs[k], lanes)
                }
            })
            .collect()
    }

    /// The program on each of `lanes` lanes of the inputs' values `ins`: the results.
    pub(super) fn run(&self, g: &mut Gen, ins: &[Vec<V>], lanes: usize) -> Vec<V> {
        (0..lanes)
            .map(|j| {
                let lane: Vec<V> = ins.iter().map(|v| v[j].clone()).collect();
                g.program(self.p, &lane, &self.consts)
            })
            .collect()
    }

    /// `addr[k] = base[k] + off[k] * size[k]` for 32-bit signed element offsets.
    pub(super) fn addresses(&self, g: &mut Gen, offs: &[String]) -> Vec<String> {
        (0..self.ops)
            .map(|k| {
                let a = g.rd();
                emit!(g, "mul.wide.s32 {a}, {}, {};", offs[k], self.sizes[k]);
                emit!(g, "add.s64 {a}, {a}, {};", self.base[k]);
                a
            })
            .collect()
    }
}
