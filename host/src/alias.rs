//! Aliasing: where each operand lives in memory, and the rules that decide whether a launch
//! may write its output while reading its inputs. Every path (typed, raw, run-time dispatch,
//! the CPU twin, reductions, stencils) checks them before it runs.

use crate::error::{Error, Operand, Result};
use crate::layout::Layout;

/// Where an operand lives: enough to decide whether two operands share memory.
pub(crate) struct Region<'a> {
    pub operand: Operand,
    /// Address of the buffer's element 0 (the layout's offsets count from it).
    pub buffer: u64,
    pub elem_size: usize,
    pub layout: &'a Layout,
}

impl Region<'_> {
    /// Bytes `[lo, hi)` the operand reaches, `None` when it has no elements.
    pub(crate) fn byte_span(&self) -> Result<Option<(u64, u64)>> {
        Ok(self.layout.span(self.operand)?.map(|s| {
            let es = self.elem_size as i128;
            let lo = self.buffer as i128 + s.min as i128 * es;
            let hi = self.buffer as i128 + (s.max as i128 + 1) * es;
            (lo.max(0) as u64, hi.max(0) as u64)
        }))
    }
}

/// The aliasing rules:
/// 1. the output must not map two indices to one element;
/// 2. an input may share memory with the output only at exactly the same positions
///    (element-wise in place, `a = sin(a)`); any other overlap is refused.
pub(crate) fn check_aliasing(out: &Region, inputs: &[Region]) -> Result<()> {
    if out.layout.has_internal_overlap() {
        return Err(Error::OverlappingOutput {
            operand: out.operand,
            shape: out.layout.shape().to_vec(),
            strides: out.layout.strides().to_vec(),
        });
    }
    let Some((olo, ohi)) = out.byte_span()? else {
        return Ok(());
    };
    for input in inputs {
        let Some((lo, hi)) = input.byte_span()? else {
            continue;
        };
        if hi <= olo || ohi <= lo {
            continue;
        }
        let same_place = input.buffer == out.buffer && input.elem_size == out.elem_size && {
            let b = input
                .layout
                .broadcast_as(out.layout.shape(), input.operand)?;
            b.offset() == out.layout.offset()
                && b.shape()
                    .iter()
                    .zip(b.strides().iter().zip(out.layout.strides()))
                    .all(|(&n, (s, o))| n == 1 || s == o)
        };
        if !same_place {
            return Err(Error::PartialOverlap {
                operand: input.operand,
            });
        }
    }
    Ok(())
}
