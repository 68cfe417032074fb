//! Random layouts for the property tests (tests/cpu/property.rs) and the GPU-against-CPU random
//! run (tests/gpu/apply.rs): plain functions of an [`Rng`], so a case is replayed from its seed.
//!
//! - [`random_case`]: an output and 0–3 inputs that a call must accept: rank 0–6 (sometimes
//!   near the maximum), sizes including 0 and 1, permuted, padded and reversed strides,
//!   zero and overlapping input strides, offsets, numpy broadcasting.
//! - [`wild_layout`]: any (shape, strides, offset, buffer length), in bounds or not, with
//!   sizes and strides up to the integer limits, for the validation property.
//! - [`reference_fits`]: whether every reachable offset is inside a buffer, computed
//!   independently of the library (i128 arithmetic, no early exits shared with it).

use super::{Case, Operand, Rng};
use strided_apply::{Layout, MAX_DIMS};

/// Bounds on the cases [`random_case`] makes.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest element count of the output.
    pub max_numel: usize,
}

impl Rng {
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

/// Elements of a shape (saturating).
fn numel(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |a, &s| a.checked_mul(s))
        .unwrap_or(usize::MAX)
}

/// A random output shape: rank 0–6, or (one case in 12) a rank near [`MAX_DIMS`] with mostly
/// size-1 axes; sizes 0 (rarely), 1, small and medium; at most `limits.max_numel` elements.
pub fn random_shape(rng: &mut Rng, limits: Limits) -> Vec<usize> {
    let mut shape: Vec<usize> = if rng.one_in(12) {
        let rank = rng.range(MAX_DIMS as i64 - 4, MAX_DIMS as i64) as usize;
        (0..rank)
            .map(|_| if rng.one_in(4) { 2 } else { 1 })
            .collect()
    } else {
        let rank = rng.below(7) as usize;
        (0..rank)
            .map(|_| match rng.below(40) {
                0 => 0,
                1..=10 => 1,
                11..=30 => rng.range(2, 5) as usize,
                _ => rng.range(6, 40) as usize,
            })
            .collect()
    };
    while numel(&shape) > limits.max_numel {
        if let Some(m) = shape.iter_mut().max_by_key(|s| **s) {
            *m = (*m / 2).max(1);
        }
    }
    shape
}

/// Offsets `(min, max)` reached by `shape`/`strides` from offset 0, in i128 (`None` when the
/// layout has no elements).
fn reach(shape: &[usize], strides: &[isize]) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(strides) {
        let r = (n as i128 - 1) * s as i128;
        if r < 0 {
            lo += r;
        } else {
            hi += r;
        }
    }
    Some((lo, hi))
}

/// An operand of `shape` with `strides`: an offset that keeps the lowest element at or above
/// a random slack, and a buffer that ends a random slack after the highest.
fn place(rng: &mut Rng, shape: &[usize], strides: Vec<isize>) -> Operand {
    let (offset, len) = match reach(shape, &strides) {
        None => (rng.below(4) as usize, rng.below(4) as usize),
        Some((lo, hi)) => {
            let offset = (-lo) as usize + rng.below(4) as usize;
            let len = offset + hi as usize + 1 + rng.below(4) as usize;
            (offset, len)
        }
    };
    Operand {
        len,
        layout: Layout::new(shape, &strides, offset).unwrap(),
    }
}

/// Strides that map distinct indices to distinct elements: axes in a random memory order,
/// each stride at least the extent of the axes inside it (sometimes with padding, as a
/// slice with a step leaves), some axes reversed. Size-1 axes get arbitrary strides.
fn distinct_strides(rng: &mut Rng, shape: &[usize]) -> Vec<isize> {
    let mut order: Vec<usize> = (0..shape.len()).collect();
    if !rng.one_in(3) {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
    } else {
        order.reverse(); // row-major
    }
    let dense = rng.one_in(3);
    let mut acc: isize = if dense { 1 } else { rng.range(1, 3) as isize };
    let mut strides = vec![0isize; shape.len()];
    for &d in &order {
        if shape[d] == 1 {
            strides[d] = rng.range(-5, 5) as isize;
            continue;
        }
        let flip = !dense && rng.one_in(4);
        strides[d] = if flip { -acc } else { acc };
        acc *= shape[d].max(1) as isize;
        if !dense && rng.one_in(3) {
            acc = acc * rng.range(1, 2) as isize + rng.range(0, 3) as isize;
        }
    }
    strides
}

/// An output operand: distinct elements for distinct indices (the output rule).
pub fn random_output(rng: &mut Rng, shape: &[usize]) -> Operand {
    let strides = distinct_strides(rng, shape);
    place(rng, shape, strides)
}

/// An input operand broadcastable to `out_shape`: a suffix of its axes, some set to 1, with
/// distinct, arbitrary (zero, negative, overlapping) or row-major strides.
pub fn random_input(rng: &mut Rng, out_shape: &[usize]) -> Operand {
    let rank = if rng.one_in(2) {
        out_shape.len()
    } else {
        rng.below(out_shape.len() as u64 + 1) as usize
    };
    let shape: Vec<usize> = out_shape[out_shape.len() - rank..]
        .iter()
        .map(|&n| if rng.one_in(4) { 1 } else { n })
        .collect();
    let strides = match rng.below(4) {
        0 | 1 => distinct_strides(rng, &shape),
        2 => shape.iter().map(|_| rng.range(-6, 6) as isize).collect(),
        _ => strided_apply::layout::contiguous_strides(&shape).unwrap(),
    };
    place(rng, &shape, strides)
}

/// A case a call must accept: an output and `inputs` inputs.
pub fn random_case(rng: &mut Rng, inputs: usize, limits: Limits) -> Case {
    let shape = random_shape(rng, limits);
    // One case in four: everything dense and of one shape (the planner's fast path and the
    // vectorised kernels).
    if rng.one_in(4) {
        let dense = || Operand {
            len: numel(&shape),
            layout: Layout::contiguous(&shape).unwrap(),
        };
        return Case {
            name: "random-dense",
            out: dense(),
            inputs: (0..inputs).map(|_| dense()).collect(),
        };
    }
    let out = random_output(rng, &shape);
    Case {
        name: "random",
        out,
        inputs: (0..inputs).map(|_| random_input(rng, &shape)).collect(),
    }
}

/// Any layout and buffer length, valid or not: sizes up to `usize::MAX`, strides up to the
/// `isize` limits, offsets up to `usize::MAX`, ranks up to `MAX_DIMS + 2`; half of the
/// cases are near a valid layout's edge (buffer one element short, exact, or one long;
/// lowest element at -1).
pub fn wild_layout(rng: &mut Rng) -> (Layout, usize) {
    if rng.one_in(2) {
        let shape = random_shape(rng, Limits { max_numel: 1 << 12 });
        let op = if rng.one_in(2) {
            random_output(rng, &shape)
        } else {
            random_input(rng, &shape)
        };
        let l = op.layout;
        let (lo, hi) = reach(l.shape(), l.strides()).unwrap_or((0, 0));
        let base = (-lo) as usize; // the smallest offset that keeps every element >= 0
        let offset = match rng.below(3) {
            0 => base.saturating_sub(1),
            1 => base,
            _ => l.offset(),
        };
        let top = offset as i128 + hi + 1; // the exact buffer length
        let len = (top + rng.range(-1, 1) as i128).max(0) as usize;
        return (Layout::new(l.shape(), l.strides(), offset).unwrap(), len);
    }
    let rank = if rng.one_in(10) {
        rng.range(MAX_DIMS as i64 - 2, MAX_DIMS as i64 + 2) as usize
    } else {
        rng.below(6) as usize
    };
    let shape: Vec<usize> = (0..rank)
        .map(|_| match rng.below(12) {
            0 => 0,
            1..=3 => 1,
            4..=6 => rng.range(2, 9) as usize,
            7 => rng.range(10, 1000) as usize,
            8 => 1usize << rng.range(20, 40),
            9 => usize::MAX / rng.range(1, 4) as usize,
            10 => (rng.next() >> rng.below(64)) as usize,
            _ => (isize::MAX as usize) + rng.below(3) as usize,
        })
        .collect();
    let strides: Vec<isize> = (0..rank)
        .map(|_| {
            let s = match rng.below(9) {
                0 => 0,
                1 => 1,
                2..=4 => rng.range(2, 100) as isize,
                5 => 1isize << rng.range(20, 62),
                6 => isize::MAX - rng.below(2) as isize,
                7 => (rng.next() >> (1 + rng.below(63))) as isize,
                _ => return isize::MIN,
            };
            if rng.one_in(3) {
                -s
            } else {
                s
            }
        })
        .collect();
    let offset = match rng.below(6) {
        0 => 0,
        1 | 2 => rng.below(1000) as usize,
        3 => 1usize << rng.range(20, 62),
        4 => isize::MAX as usize,
        _ => usize::MAX - rng.below(2) as usize,
    };
    // Buffers never exceed isize::MAX elements (no allocation can).
    let len = match rng.below(5) {
        0 => 0,
        1 | 2 => rng.below(2000) as usize,
        3 => 1usize << rng.range(20, 62),
        _ => isize::MAX as usize,
    };
    (Layout::new(&shape, &strides, offset).unwrap(), len)
}

/// Whether every element `layout` reaches is in `0..len`, computed independently of the
/// library: i128 arithmetic, element count in u128. A layout with no elements fits.
/// Anything that overflows i128 cannot fit a buffer of at most `isize::MAX` elements.
pub fn reference_fits(layout: &Layout, len: usize) -> bool {
    if layout.shape().contains(&0) {
        return true;
    }
    let count = layout
        .shape()
        .iter()
        .try_fold(1u128, |a, &s| a.checked_mul(s as u128));
    if count.is_none_or(|c| c > usize::MAX as u128) {
        return false;
    }
    let mut lo = layout.offset() as i128;
    let mut hi = lo;
    for (&n, &s) in layout.shape().iter().zip(layout.strides()) {
        let Some(r) = (n as i128 - 1).checked_mul(s as i128) else {
            return false;
        };
        let sum = if r < 0 {
            lo.checked_add(r).map(|v| lo = v)
        } else {
            hi.checked_add(r).map(|v| hi = v)
        };
        if sum.is_none() {
            return false;
        }
    }
    lo >= 0 && hi < len as i128
}

/// Every element offset a layout reaches, in row-major index order (a naive walk).
pub fn all_offsets(layout: &Layout) -> Vec<usize> {
    let case = Case {
        name: "offsets",
        out: Operand {
            len: 0,
            layout: layout.clone(),
        },
        inputs: vec![],
    };
    super::naive_offsets(&case)
        .into_iter()
        .map(|o| o[0])
        .collect()
}
