//! Shapes, strides and offsets, and the views built from them.
//!
//! A [`Layout`] maps a multi-index `idx` to the element `offset + Σ idx[d] * strides[d]` of a
//! buffer. Strides are in elements and signed: negative strides walk backwards (reversed
//! axes), stride 0 repeats an element (broadcasting).
//!
//! A layout is attached to a buffer only after [`Layout::check_in`] proves, with
//! overflow-checked arithmetic, that
//! 1. the element count `Π shape` fits in `usize`;
//! 2. the lowest reachable element `offset + Σ min(0, strides[d]) * (shape[d] - 1)` is ≥ 0;
//! 3. the highest `offset + Σ max(0, strides[d]) * (shape[d] - 1)` is < the buffer length.
//!
//! A layout with zero elements reaches nothing and fits any buffer.

use crate::error::{Error, Operand, Result};

/// Shape, strides (in elements, signed) and element offset of a strided view. The default
/// is a 0-dimensional layout (one element at offset 0).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

/// The range of element offsets a layout reaches (`None` when it has no elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub min: isize,
    pub max: isize,
}

/// Row-major strides for `shape`, or `None` on overflow.
pub fn contiguous_strides(shape: &[usize]) -> Option<Vec<isize>> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc: isize = 1;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc = acc.checked_mul(isize::try_from(shape[d].max(1)).ok()?)?;
    }
    Some(strides)
}

/// `Π shape`, or `None` when it overflows `usize`. A shape with a size-0 axis has 0
/// elements whatever its other sizes (a partial product may overflow before the 0).
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s))
}

/// numpy's broadcast of two shapes.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let y = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

impl Layout {
    /// A dense row-major layout of `shape` at offset 0.
    pub fn contiguous(shape: &[usize]) -> Result<Layout> {
        // An empty shape reaches nothing: its strides may be 0 when row-major ones overflow.
        let empty = || (checked_numel(shape) == Some(0)).then(|| vec![0; shape.len()]);
        let strides = contiguous_strides(shape)
            .or_else(empty)
            .ok_or_else(|| Error::Overflow {
                operand: "view",
                shape: shape.to_vec(),
                strides: vec![],
            })?;
        Ok(Layout {
            shape: shape.to_vec(),
            strides,
            offset: 0,
        })
    }

    /// Any layout; it is checked against a buffer by [`check_in`](Self::check_in) before use.
    pub fn new(shape: &[usize], strides: &[isize], offset: usize) -> Result<Layout> {
        if shape.len() != strides.len() {
            return Err(Error::InvalidView {
                operand: "view",
                reason: format!("{} sizes but {} strides", shape.len(), strides.len()),
            });
        }
        Ok(Layout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        })
    }

    /// The layout of a view known by its element at index 0 (ndarray's pointer, DLPack's
    /// `data + byte_offset`), with offsets counted from its lowest element instead: negative
    /// strides reach `offset()` elements below index 0. Also gives the span from there
    /// (`None` when the view has no elements).
    pub fn from_first_element(
        shape: &[usize],
        strides: &[isize],
        operand: Operand,
    ) -> Result<(Layout, Option<Span>)> {
        let at0 = Layout::new(shape, strides, 0).map_err(|e| match e {
            Error::InvalidView { reason, .. } => Error::InvalidView { operand, reason },
            e => e,
        })?;
        let Some(span) = at0.span(operand)? else {
            return Ok((at0, None));
        };
        // `span.min` is at most 0 (index 0 is one of the offsets) and fits an isize.
        let below = (-span.min) as usize;
        let layout = Layout::new(shape, strides, below)?;
        let span = layout.span(operand)?;
        Ok((layout, span))
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (condition 1 is checked by `check_in`; this saturates).
    pub fn numel(&self) -> usize {
        checked_numel(&self.shape).unwrap_or(usize::MAX)
    }

    fn overflow(&self, operand: Operand) -> Error {
        Error::Overflow {
            operand,
            shape: self.shape.clone(),
            strides: self.strides.clone(),
        }
    }

    /// The lowest and highest element offsets reached, with checked arithmetic.
    pub fn span(&self, operand: Operand) -> Result<Option<Span>> {
        // Condition 1.
        match checked_numel(&self.shape) {
            None => return Err(self.overflow(operand)),
            Some(0) => return Ok(None),
            Some(_) => {}
        }
        let mut min = isize::try_from(self.offset).map_err(|_| self.overflow(operand))?;
        let mut max = min;
        for (&size, &stride) in self.shape.iter().zip(&self.strides) {
            // A stride-0 axis reaches nothing new, however long it is.
            let reach = match stride {
                0 => 0,
                _ => isize::try_from(size - 1)
                    .ok()
                    .and_then(|s| s.checked_mul(stride))
                    .ok_or_else(|| self.overflow(operand))?,
            };
            if reach < 0 {
                min = min
                    .checked_add(reach)
                    .ok_or_else(|| self.overflow(operand))?;
            } else {
                max = max
                    .checked_add(reach)
                    .ok_or_else(|| self.overflow(operand))?;
            }
        }
        Ok(Some(Span { min, max }))
    }

    /// Proves conditions 1–3 for a buffer of `len` elements.
    pub fn check_in(&self, len: usize, operand: Operand) -> Result<Option<Span>> {
        let span = self.span(operand)?;
        if let Some(s) = span {
            // Conditions 2 and 3.
            if s.min < 0 || s.max as usize >= len {
                return Err(Error::OutOfBounds {
                    operand,
                    shape: self.shape.clone(),
                    strides: self.strides.clone(),
                    offset: self.offset,
                    min: s.min as i128,
                    max: s.max as i128,
                    len,
                });
            }
        }
        Ok(span)
    }

    /// Dense and row-major from the offset (size-1 axes may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut expect: isize = 1;
        for d in (0..self.ndim()).rev() {
            if self.shape[d] != 1 {
                if self.strides[d] != expect {
                    return false;
                }
                expect = expect.saturating_mul(self.shape[d] as isize);
            }
        }
        true
    }

    /// True when two different multi-indices can reach the same element. Conservative:
    /// axes sorted by |stride| must each step over everything the smaller ones reach.
    pub fn has_internal_overlap(&self) -> bool {
        if self.is_contiguous() {
            return false;
        }
        let mut axes: Vec<(usize, usize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&n, _)| n > 1)
            .map(|(&n, &s)| (n, s.unsigned_abs()))
            .collect();
        if self.numel() == 0 {
            return false;
        }
        axes.sort_by_key(|&(_, s)| s);
        let mut reach: usize = 0;
        for (n, s) in axes {
            if s == 0 || s <= reach {
                return true;
            }
            match s.checked_mul(n - 1).and_then(|r| r.checked_add(reach)) {
                Some(r) => reach = r,
                None => return true,
            }
        }
        false
    }

    fn axis(&self, axis: usize, operand: Operand) -> Result<usize> {
        if axis < self.ndim() {
            Ok(axis)
        } else {
            Err(Error::InvalidView {
                operand,
                reason: format!("axis {axis} out of range for {} dimensions", self.ndim()),
            })
        }
    }

    /// Python-style `start..end` with `step` along `axis`: indices are clamped to the
    /// axis; a negative `step` walks backwards from `start` (default: the last element).
    /// `None` bounds mean "from the beginning / to the end" in the step's direction.
    pub fn slice(
        &self,
        axis: usize,
        start: Option<isize>,
        end: Option<isize>,
        step: isize,
    ) -> Result<Layout> {
        let axis = self.axis(axis, "view")?;
        if step == 0 {
            return Err(Error::InvalidView {
                operand: "view",
                reason: "slice step is 0".into(),
            });
        }
        let n = self.shape[axis] as isize;
        let norm = |i: isize, lo: isize, hi: isize| -> isize {
            let i = if i < 0 { i + n } else { i };
            i.clamp(lo, hi)
        };
        let (first, count) = if step > 0 {
            let s = start.map_or(0, |s| norm(s, 0, n));
            let e = end.map_or(n, |e| norm(e, 0, n));
            (s, if e > s { (e - s + step - 1) / step } else { 0 })
        } else {
            let s = start.map_or(n - 1, |s| norm(s, -1, n - 1));
            let e = end.map_or(-1, |e| norm(e, -1, n - 1));
            (
                s,
                if s > e {
                    (s - e + (-step) - 1) / (-step)
                } else {
                    0
                },
            )
        };
        let mut out = self.clone();
        out.shape[axis] = count as usize;
        if count > 0 {
            let moved = first
                .checked_mul(self.strides[axis])
                .ok_or_else(|| self.overflow("view"))?;
            out.offset = (self.offset as isize)
                .checked_add(moved)
                .and_then(|o| usize::try_from(o).ok())
                .ok_or_else(|| self.overflow("view"))?;
        }
        out.strides[axis] = self.strides[axis]
            .checked_mul(step)
            .ok_or_else(|| self.overflow("view"))?;
        Ok(out)
    }

    /// Reverses `axis`.
    pub fn flip(&self, axis: usize) -> Result<Layout> {
        self.slice(axis, None, None, -1)
    }

    /// Reorders axes: new axis `i` is old axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Result<Layout> {
        let mut seen = vec![false; self.ndim()];
        if perm.len() != self.ndim()
            || perm
                .iter()
                .any(|&p| p >= self.ndim() || std::mem::replace(&mut seen[p], true))
        {
            return Err(Error::InvalidView {
                operand: "view",
                reason: format!("{perm:?} is not a permutation of {} axes", self.ndim()),
            });
        }
        Ok(Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        })
    }

    /// Swaps two axes.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Layout> {
        self.axis(a, "view")?;
        self.axis(b, "view")?;
        let mut perm: Vec<usize> = (0..self.ndim()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// numpy broadcasting to `shape`: new leading axes and size-1 axes get stride 0.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Layout> {
        self.broadcast_as(shape, "view")
    }

    pub(crate) fn broadcast_as(&self, shape: &[usize], operand: Operand) -> Result<Layout> {
        let err = || Error::Broadcast {
            operand,
            shape: self.shape.clone(),
            target: shape.to_vec(),
        };
        if shape.len() < self.ndim() {
            return Err(err());
        }
        let lead = shape.len() - self.ndim();
        let mut strides = vec![0isize; shape.len()];
        for d in 0..self.ndim() {
            let (have, want) = (self.shape[d], shape[lead + d]);
            strides[lead + d] = if have == want {
                self.strides[d]
            } else if have == 1 {
                0
            } else {
                return Err(err());
            };
        }
        Ok(Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// Inserts a size-1 axis at `axis` (0..=ndim).
    pub fn unsqueeze(&self, axis: usize) -> Result<Layout> {
        if axis > self.ndim() {
            return Err(Error::InvalidView {
                operand: "view",
                reason: format!("cannot insert axis {axis} into {} dimensions", self.ndim()),
            });
        }
        let mut out = self.clone();
        out.shape.insert(axis, 1);
        out.strides.insert(axis, 0);
        Ok(out)
    }

    /// Removes `axis`, which must have size 1.
    pub fn squeeze(&self, axis: usize) -> Result<Layout> {
        let axis = self.axis(axis, "view")?;
        if self.shape[axis] != 1 {
            return Err(Error::InvalidView {
                operand: "view",
                reason: format!("axis {axis} has size {}, not 1", self.shape[axis]),
            });
        }
        let mut out = self.clone();
        out.shape.remove(axis);
        out.strides.remove(axis);
        Ok(out)
    }

    /// A view with a new shape over the same elements in row-major order, when the strides
    /// allow it without a copy (as `torch.view`); otherwise an error suggesting a copy.
    pub fn reshape(&self, shape: &[usize]) -> Result<Layout> {
        let new_n = shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
        if new_n != Some(self.numel()) {
            return Err(Error::InvalidView {
                operand: "view",
                reason: format!(
                    "cannot reshape {:?} ({} elements) to {shape:?}",
                    self.shape,
                    self.numel()
                ),
            });
        }
        if self.numel() == 0 {
            return Layout::contiguous(shape).map(|l| Layout {
                offset: self.offset,
                ..l
            });
        }
        // Group old axes (size-1 dropped) into runs that are contiguous among themselves,
        // then split each run into new axes.
        let old: Vec<(usize, isize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&n, _)| n != 1)
            .map(|(&n, &s)| (n, s))
            .collect();
        let mut strides = vec![0isize; shape.len()];
        let mut oi = 0; // next old axis
        let mut ni = 0; // next new axis
        while ni < shape.len() {
            if shape[ni] == 1 {
                strides[ni] = 0;
                ni += 1;
                continue;
            }
            // Take old axes while their product is below the new axes' product.
            let (mut old_prod, mut new_prod) = (1usize, 1usize);
            let (o_start, n_start) = (oi, ni);
            loop {
                if old_prod <= new_prod && oi < old.len() && (old_prod < new_prod || old_prod == 1)
                {
                    old_prod *= old[oi].0;
                    oi += 1;
                } else if new_prod < old_prod && ni < shape.len() {
                    new_prod *= shape[ni];
                    ni += 1;
                } else {
                    break;
                }
                if old_prod == new_prod {
                    break;
                }
            }
            let run = &old[o_start..oi];
            for w in run.windows(2) {
                if w[0].1 != w[1].1 * w[1].0 as isize {
                    return Err(Error::InvalidView {
                        operand: "view",
                        reason: format!(
                            "reshape of {:?} with strides {:?} to {shape:?} needs a copy (use .contiguous())",
                            self.shape, self.strides
                        ),
                    });
                }
            }
            let mut stride = run.last().map_or(1, |r| r.1);
            for k in (n_start..ni).rev() {
                strides[k] = stride;
                stride *= shape[k] as isize;
            }
        }
        Ok(Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }
}
