//! A call's shapes: the inputs' broadcast shape, the normalised axes, the output's shape,
//! and the layouts of the stages' temporaries (one value a row, contiguous over the kept
//! axes) as each part reads them.

use crate::error::{Error, Result};
use crate::layout::broadcast_shapes;

/// The shapes of one call of a [`CompiledNorm`](super::CompiledNorm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Shapes {
    /// The inputs' broadcast shape.
    pub full: Vec<usize>,
    /// The normalised axes (of `full`), checked: in range, each once.
    pub axes: Vec<usize>,
    /// `full` with each normalised axis 1.
    pub keepdim: Vec<usize>,
    /// Rows: the product of the kept axes' sizes.
    pub rows: usize,
    /// Elements a row: the product of the normalised axes' sizes.
    pub len: usize,
}

fn bad_axes(reason: String) -> Error {
    Error::InvalidView {
        operand: "axes",
        reason,
    }
}

impl Shapes {
    /// The shapes of a call over inputs of `shapes` and `axes`, the output of `out` (the
    /// broadcast shape for a rowwise program, else the reduced one: axes kept as 1 or
    /// dropped).
    pub(super) fn new(
        shapes: &[&[usize]],
        out: &[usize],
        axes: &[usize],
        rowwise: bool,
    ) -> Result<Shapes> {
        if shapes.is_empty() {
            return Err(Error::ExprType {
                reason: "a normalisation program reads at least one input tensor".into(),
            });
        }
        let mut full: Vec<usize> = Vec::new();
        for (k, s) in shapes.iter().enumerate() {
            full = broadcast_shapes(&full, s).ok_or_else(|| Error::Broadcast {
                operand: super::super::NAMES[k + 1],
                shape: s.to_vec(),
                target: full.clone(),
            })?;
        }
        if rowwise {
            full = broadcast_shapes(&full, out).ok_or_else(|| Error::Broadcast {
                operand: "out",
                shape: out.to_vec(),
                target: full.clone(),
            })?;
        }
        let rank = full.len();
        if axes.is_empty() {
            return Err(bad_axes(
                "a normalisation reduces over one axis or more; none given".into(),
            ));
        }
        for (i, &a) in axes.iter().enumerate() {
            if a >= rank {
                return Err(bad_axes(format!(
                    "axis {a} is out of range for a {rank}-dimensional input"
                )));
            }
            if axes[..i].contains(&a) {
                return Err(bad_axes(format!("axis {a} is named twice")));
            }
        }
        let keepdim: Vec<usize> = (0..rank)
            .map(|a| if axes.contains(&a) { 1 } else { full[a] })
            .collect();
        let dropped: Vec<usize> = (0..rank)
            .filter(|a| !axes.contains(a))
            .map(|a| full[a])
            .collect();
        let want_ok = if rowwise {
            out == full.as_slice()
        } else {
            out == keepdim.as_slice() || out == dropped.as_slice()
        };
        if !want_ok {
            return Err(if rowwise {
                Error::Broadcast {
                    operand: "out",
                    shape: out.to_vec(),
                    target: full.clone(),
                }
            } else {
                Error::ReducedShape {
                    operand: "out",
                    found: out.to_vec(),
                    dropped,
                    keepdim: keepdim.clone(),
                }
            });
        }
        let mut sorted = axes.to_vec();
        sorted.sort_unstable();
        let rows = keepdim.iter().product();
        let len = axes.iter().map(|&a| full[a]).product();
        Ok(Shapes {
            full,
            axes: sorted,
            keepdim,
            rows,
            len,
        })
    }

    /// Row-major strides of a temporary over `keepdim` (one value a row).
    pub(super) fn temp_strides(&self) -> Vec<isize> {
        let mut st = vec![0isize; self.keepdim.len()];
        let mut acc = 1isize;
        for a in (0..self.keepdim.len()).rev() {
            st[a] = if self.keepdim[a] == 1 { 0 } else { acc };
            acc *= self.keepdim[a] as isize;
        }
        st
    }

    /// A temporary as a view of shape `full` (stride 0 along the normalised axes).
    pub(super) fn temp_full(&self) -> (Vec<usize>, Vec<isize>) {
        (self.full.clone(), self.temp_strides())
    }

    /// An input's strides over `full`: broadcast from the right, its size-1 and missing
    /// axes stride 0. Every part reads the inputs at this shape, so a stage that reads only
    /// broadcast inputs still folds the row's `len` values.
    pub(super) fn input_strides(&self, shape: &[usize], strides: &[isize]) -> Vec<isize> {
        let rank = self.full.len();
        let lead = rank - shape.len().min(rank);
        (0..rank)
            .map(|a| {
                if a < lead || shape[a - lead] == 1 {
                    0
                } else {
                    strides[a - lead]
                }
            })
            .collect()
    }

    /// A temporary as a view of the output's shape `out` (keepdim or dropped).
    pub(super) fn temp_as(&self, out: &[usize]) -> (Vec<usize>, Vec<isize>) {
        let st = self.temp_strides();
        if out.len() == self.keepdim.len() {
            return (out.to_vec(), st);
        }
        let kept: Vec<isize> = (0..st.len())
            .filter(|a| !self.axes.contains(a))
            .map(|a| st[a])
            .collect();
        (out.to_vec(), kept)
    }
}
