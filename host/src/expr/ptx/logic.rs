//! Bool math: a program's instructions on bools, as predicates ([`Gen::bool_op`]).

use super::emit::Gen;
use super::types::V;
use std::fmt::Write;
use strided_apply_expr::ir::Opcode;

impl Gen {
    /// Instruction `op` of bool math on predicates `x` and `y`: the logical and bitwise ops,
    /// the comparisons (false < true).
    pub(super) fn bool_op(&mut self, op: Opcode, x: &str, y: &str) -> V {
        use Opcode::*;
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
                    (x, y)
                } else {
                    (y, x)
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
        V::P(p)
    }
}
