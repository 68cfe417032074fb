//! The planner: shared by the GPU launcher and the CPU twin.
//!
//! 1. Broadcast every input to the output's shape (numpy rules; stride 0 on repeated axes).
//! 2. Drop size-1 axes; order the rest by the output's strides (then the inputs'),
//!    innermost first, so the output is written in memory order.
//! 3. Collapse jointly (THC `collapseDims`, PyTorch `coalesce_dimensions`): neighbours merge
//!    when *every* operand has `stride[outer] == stride[inner] * size[inner]`.
//! 4. Pick the variant: contiguous when one dimension with unit strides remains; else the
//!    fixed 1/2/3-dimension or generic kernel, with 32-bit indices when the element count
//!    and every operand's reachable offsets fit in 31 bits, else 64-bit.

use crate::error::{Error, Operand, Result};
use crate::layout::{checked_numel, Layout};
use gpu_kernels::{Geometry, Index, Variant, MAX_DIMS};

/// Threads of one launch never exceed this (see the launcher's grid size), which keeps
/// `i + step` of the 32-bit grid-stride loop from wrapping.
pub const MAX_GRID_THREADS: u64 = 1 << 30;

/// A launch plan for `N` operands (operand 0 is the output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan<const N: usize> {
    /// Elements to visit.
    pub numel: u64,
    /// Collapsed dimensions in use (0 when contiguous or a single element).
    pub ndim: usize,
    /// Sizes, innermost first.
    pub sizes: [u64; MAX_DIMS],
    /// `strides[k][d]` of operand `k`, innermost first.
    pub strides: [[i64; MAX_DIMS]; N],
    /// Element offset of each operand's first element in its buffer.
    pub base: [usize; N],
    pub variant: Variant,
}

/// Broadcasts `inputs` to `out`'s shape and plans the walk. `names[k]` names operand `k`
/// in errors.
pub fn plan<const N: usize>(layouts: [&Layout; N], names: [Operand; N]) -> Result<Plan<N>> {
    // Fast path (small tensors are dominated by host time): all operands dense, same shape.
    let out = layouts[0];
    if layouts
        .iter()
        .all(|l| l.shape() == out.shape() && l.is_contiguous())
    {
        if let Some(numel) = checked_numel(out.shape()) {
            let numel = numel as u64;
            return Ok(Plan {
                numel,
                ndim: 0,
                sizes: [1; MAX_DIMS],
                strides: [[0; MAX_DIMS]; N],
                base: layouts.map(|l| l.offset()),
                variant: Variant::Contig,
            });
        }
    }
    let out_shape = layouts[0].shape().to_vec();
    let mut strides_in: Vec<Vec<isize>> = Vec::with_capacity(N);
    let mut base = [0usize; N];
    for k in 0..N {
        let l = if k == 0 {
            layouts[0].clone()
        } else {
            layouts[k].broadcast_as(&out_shape, names[k])?
        };
        base[k] = l.offset();
        strides_in.push(l.strides().to_vec());
    }
    let numel = checked_numel(&out_shape).ok_or_else(|| Error::Overflow {
        operand: names[0],
        shape: out_shape.clone(),
        strides: layouts[0].strides().to_vec(),
    })? as u64;
    // Nothing to visit: no launch, whatever the rank (and no `size - 1` of a 0 below).
    if numel == 0 {
        return Ok(Plan {
            numel,
            ndim: 0,
            sizes: [1; MAX_DIMS],
            strides: [[0; MAX_DIMS]; N],
            base,
            variant: Variant::Contig,
        });
    }

    // Step 2: axes of size > 1, innermost first by position, then stable-sorted by stride.
    let mut axes: Vec<usize> = (0..out_shape.len())
        .rev()
        .filter(|&d| out_shape[d] != 1)
        .collect();
    axes.sort_by_key(|&d| {
        let mut key = [0usize; N];
        for k in 0..N {
            key[k] = strides_in[k][d].unsigned_abs();
        }
        key
    });

    // Step 3: joint collapse.
    let mut dims: Vec<(u64, [i64; N])> = Vec::new();
    for &d in &axes {
        let size = out_shape[d] as u64;
        let mut st = [0i64; N];
        for k in 0..N {
            st[k] = strides_in[k][d] as i64;
        }
        if let Some((isize_, ist)) = dims.last_mut() {
            let mergeable = (0..N).all(|k| Some(st[k]) == ist[k].checked_mul(*isize_ as i64));
            if mergeable {
                *isize_ *= size;
                continue;
            }
        }
        dims.push((size, st));
    }
    if dims.len() > MAX_DIMS {
        return Err(Error::RankTooHigh {
            operand: names[0],
            ndim: dims.len(),
            max: MAX_DIMS,
        });
    }

    let mut plan = Plan {
        numel,
        ndim: dims.len(),
        sizes: [1; MAX_DIMS],
        strides: [[0; MAX_DIMS]; N],
        base,
        variant: Variant::Contig,
    };
    for (d, (size, st)) in dims.iter().enumerate() {
        plan.sizes[d] = *size;
        for k in 0..N {
            plan.strides[k][d] = st[k];
        }
    }

    // Step 4.
    let contiguous = plan.ndim == 0 || (plan.ndim == 1 && (0..N).all(|k| plan.strides[k][0] == 1));
    if contiguous {
        plan.ndim = 0;
        plan.variant = Variant::Contig;
        return Ok(plan);
    }
    plan.variant = plan.variant32().unwrap_or(Variant::Dn64);
    Ok(plan)
}

impl<const N: usize> Plan<N> {
    /// The 32-bit variant for this plan's dimensions, when the element count and every
    /// operand's reachable offsets fit in 31 bits.
    fn variant32(&self) -> Option<Variant> {
        let limit = i32::MAX as u64;
        let fits32 = self.numel <= limit
            && (0..N).all(|k| {
                (0..self.ndim)
                    .try_fold(0u64, |acc, d| {
                        acc.checked_add(
                            self.strides[k][d]
                                .unsigned_abs()
                                .checked_mul(self.sizes[d] - 1)?,
                        )
                    })
                    .is_some_and(|reach| reach <= limit)
            });
        fits32.then_some(match self.ndim {
            1 => Variant::D1,
            2 => Variant::D2,
            3 => Variant::D3,
            _ => Variant::Dn,
        })
    }

    /// This plan's elements as one axis of unit strides (`ndim` 1): how the launcher runs a
    /// [`Variant::Contig`] plan that the vectorised variant cannot take, as
    /// [`Variant::D1`], or [`Variant::Dn64`] (pieces of `D1`) beyond 32-bit offsets. The
    /// same indices with the same offsets: a dense plan's operand `k` is at `i` for index
    /// `i`.
    pub fn flat(&self) -> Plan<N> {
        let mut p = self.clone();
        p.ndim = 1;
        p.sizes = [1; MAX_DIMS];
        p.sizes[0] = self.numel.max(1);
        p.strides = [[0; MAX_DIMS]; N];
        for k in 0..N {
            p.strides[k][0] = 1;
        }
        p.variant = p.variant32().unwrap_or(Variant::Dn64);
        p
    }

    /// A [`Variant::Contig`] plan as [`flat`](Self::flat) gives it, any other as it is: the
    /// form the launchers without a contiguous kernel take.
    pub fn strided(&self) -> std::borrow::Cow<'_, Plan<N>> {
        if self.variant == Variant::Contig {
            std::borrow::Cow::Owned(self.flat())
        } else {
            std::borrow::Cow::Borrowed(self)
        }
    }

    /// A [`Variant::Dn64`] plan as pieces that each fit 32-bit indices (as PyTorch's
    /// `with_32bit_indexing`): `(piece, offsets)`, where operand `k` of the piece starts
    /// `offsets[k]` elements after its start in this plan. The pieces visit every index of
    /// this plan exactly once, with the same operand offsets. A plan that fits already is
    /// one piece. Each step halves the dimension that reaches farthest.
    pub fn split32(&self) -> Vec<(Plan<N>, [i64; N])> {
        let mut pieces = Vec::new();
        let mut todo = vec![(self.clone(), [0i64; N])];
        while let Some((mut p, off)) = todo.pop() {
            if p.variant != Variant::Dn64 || p.ndim == 0 {
                pieces.push((p, off));
                continue;
            }
            if let Some(v) = p.variant32() {
                p.variant = v;
                pieces.push((p, off));
                continue;
            }
            let reach = |d: usize| {
                let stride = (0..N).map(|k| p.strides[k][d].unsigned_abs()).max();
                (p.sizes[d] - 1).saturating_mul(stride.unwrap_or(0).max(1))
            };
            // A plan that does not fit has an axis of size 2 or more (else numel = 1).
            let Some(d) = (0..p.ndim)
                .filter(|&d| p.sizes[d] > 1)
                .max_by_key(|&d| reach(d))
            else {
                pieces.push((p, off));
                continue;
            };
            let (size, half) = (p.sizes[d], p.sizes[d] / 2);
            let mut lo = p.clone();
            lo.sizes[d] = half;
            lo.numel = p.numel / size * half;
            let mut hi = p;
            hi.sizes[d] = size - half;
            hi.numel = hi.numel / size * (size - half);
            let mut hi_off = off;
            for k in 0..N {
                hi_off[k] += half as i64 * hi.strides[k][d];
            }
            todo.push((hi, hi_off));
            todo.push((lo, off));
        }
        pieces
    }

    /// The kernel parameter for variants with index type `I` and `D` dimensions.
    pub fn geometry<I: Index, const D: usize>(&self) -> Geometry<I, D, N> {
        let mut g = Geometry::<I, D, N>::empty();
        g.ndim = self.ndim as u32;
        for d in 0..self.ndim.min(D) {
            g.sizes[d] = I::from_u64(self.sizes[d]);
            for k in 0..N {
                g.strides[k][d] = I::from_isize(self.strides[k][d] as isize);
            }
        }
        g
    }

    /// The `ndim` argument the kernel body receives (0 = contiguous).
    pub fn kernel_ndim(&self) -> usize {
        self.ndim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (output, input) offset pair of a plan, by a naive walk (innermost first).
    fn walk(p: &Plan<2>, off: [i64; 2]) -> Vec<[i64; 2]> {
        let mut out = Vec::new();
        let mut idx = [0u64; MAX_DIMS];
        for _ in 0..p.numel {
            let mut o = off;
            for d in 0..p.ndim {
                for k in 0..2 {
                    o[k] += idx[d] as i64 * p.strides[k][d];
                }
            }
            out.push(o);
            for d in 0..p.ndim.max(1) {
                idx[d] += 1;
                if idx[d] < p.sizes[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out.sort();
        out
    }

    #[test]
    fn split32_pieces_fit_and_cover_the_plan_once() {
        let m = i32::MAX as isize;
        // Huge strides over few elements (views of memory never allocated): reach beyond
        // 2^31 through a stride, through a negative stride, and across several axes.
        let cases: [(&[usize], &[isize], &[isize]); 4] = [
            (&[3, 5], &[5, 1], &[m + 7, 1]),
            (&[4, 3], &[3, 1], &[-(m / 2), 1]),
            (&[2, 3, 4], &[12, 4, 1], &[m, m / 3, 1]),
            (&[7], &[1], &[m / 2]),
        ];
        for (shape, so, si) in cases {
            let n: usize = shape.iter().product();
            let lo = Layout::new(shape, so, 0).unwrap();
            let li = Layout::new(shape, si, 8 * m as usize).unwrap();
            let p = plan([&lo, &li], ["out", "a"]).unwrap();
            assert_eq!(p.variant, Variant::Dn64, "{shape:?} {si:?}");
            let pieces = p.split32();
            assert!(pieces.len() > 1);
            let mut all = Vec::new();
            for (piece, off) in &pieces {
                assert_ne!(piece.variant, Variant::Dn64, "{piece:?}");
                assert_eq!(piece.variant32(), Some(piece.variant));
                all.extend(walk(piece, *off));
            }
            all.sort();
            assert_eq!(all.len(), n);
            assert_eq!(all, walk(&p, [0, 0]), "{shape:?} {si:?}");
        }
        // A plan that fits is one piece, itself.
        let l = Layout::new(&[3, 5], &[1, 3], 0).unwrap();
        let p = plan([&l, &l], ["out", "a"]).unwrap();
        assert_eq!(p.split32(), vec![(p.clone(), [0, 0])]);
    }

    #[test]
    fn flat_dense_plans_are_one_unit_axis_in_32_bit_pieces() {
        // A dense plan runs as D1 with the same offsets as the contiguous walk.
        let l = Layout::contiguous(&[3, 4, 5]).unwrap();
        let p = plan([&l, &l], ["out", "a"]).unwrap();
        assert_eq!(p.variant, Variant::Contig);
        let f = p.flat();
        assert_eq!(
            (f.variant, f.ndim, f.numel, f.sizes[0]),
            (Variant::D1, 1, 60, 60)
        );
        assert_eq!(f.strides[0][0], 1);
        assert_eq!(f.strides[1][0], 1);
        assert_eq!(
            walk(&f, [0, 0]),
            (0..60).map(|i| [i, i]).collect::<Vec<_>>()
        );
        // Beyond 2^31 elements: Dn64, split into D1 pieces that cover every index once (a
        // plan of memory never allocated; only offsets are compared, by piece ends).
        let n = (1usize << 31) + 5;
        let l = Layout::contiguous(&[n]).unwrap();
        let f = plan([&l, &l], ["out", "a"]).unwrap().flat();
        assert_eq!(f.variant, Variant::Dn64);
        let mut pieces: Vec<_> = f
            .split32()
            .into_iter()
            .map(|(p, off)| {
                assert_eq!(
                    (p.variant, p.ndim, p.strides[0][0], p.strides[1][0]),
                    (Variant::D1, 1, 1, 1)
                );
                assert_eq!(off[0], off[1]);
                (off[0], p.numel)
            })
            .collect();
        pieces.sort();
        let mut next = 0i64;
        for (start, len) in pieces {
            assert_eq!(start, next);
            next += len as i64;
        }
        assert_eq!(next as usize, n);
    }
}
