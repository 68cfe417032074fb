//! Index arithmetic: the parameters of a [`FastDiv`](gpu_kernels::FastDiv), multiply-shift
//! division, the operands' stride parameters and their offsets of a linear index.

use super::emit::Gen;
use std::fmt::Write;

impl Gen {
    /// The division parameters `{prefix}_d`, `_magic`, `_shift` of a [`FastDiv`](gpu_kernels::FastDiv).
    pub(super) fn div_params(&mut self, prefix: &str) -> [String; 3] {
        ["d", "magic", "shift"].map(|s| {
            let r = self.r();
            emit!(self, "ld.param.u32 {r}, [{prefix}_{s}];");
            r
        })
    }

    /// `x / d` and `x % d` by multiply-shift (`[d, magic, shift]` from [`Gen::div_params`]):
    /// (quotient, remainder).
    pub(super) fn divmod(&mut self, x: &str, [d, m, s]: &[String; 3]) -> (String, String) {
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
    pub(super) fn stride_params(
        &mut self,
        prefix: &str,
        ops: usize,
        rank: usize,
    ) -> Vec<Vec<String>> {
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
    pub(super) fn offsets(
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
}
