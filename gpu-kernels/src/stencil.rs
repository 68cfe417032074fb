//! Stencils: every output element is computed from its input's neighbours at compile-time
//! offsets (cuArray's `shift<Offset<…>>`), with clamp-to-edge borders.
//!
//! A stencil works in a frame of up to three axes, `x`, `y` and `z` (the host maps them to
//! any axes of the tensors); the remaining axes are batch axes, visited but never shifted
//! along. An op reads neighbours through [`Taps::at`]:
//!
//! ```
//! use gpu_kernels::stencil::{Stencil, Taps};
//! /// `out = in[x + 1] - 2 in[x] + in[x - 1]` (second difference along x).
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct SecondDiff;
//! impl Stencil<f32> for SecondDiff {
//!     fn apply(&self, t: &Taps<f32>) -> f32 {
//!         t.at(1, 0, 0) - 2.0 * t.at(0, 0, 0) + t.at(-1, 0, 0)
//!     }
//! }
//! ```
//!
//! Output and input have the same shape and must not share memory: a stencil reads
//! elements other threads write (the host refuses such calls).

use crate::geometry::Index;
use crate::math::Num;

/// Axes of a stencil launch: `x`, `y`, `z` of the stencil frame, then up to three batch axes.
pub const STENCIL_DIMS: usize = 6;

/// Sizes of the frame and batch axes and the strides of the output (`strides[0]`) and the
/// input (`strides[1]`), in elements, two's complement in `I`. Dimension 0 is `x`, 1 is
/// `y`, 2 is `z`, 3.. are batch axes; unused axes have size 1 and stride 0. The linear
/// index runs over dimension 0 fastest.
///
/// Invariants the host proves before a launch (kernels trust them):
/// 1. every size is at least 1 and their product is the launch's element count `n`,
///    which fits in `I` together with the grid's thread count;
/// 2. for every in-range multi-index, `sum(idx[d] * strides[k][d])` read as signed is the
///    exact element offset from operand `k`'s base pointer and lies inside its buffer;
/// 3. output offsets are distinct for distinct indices, and the output shares no memory
///    with the input.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilGeometry<I> {
    pub sizes: [I; STENCIL_DIMS],
    pub strides: [[I; STENCIL_DIMS]; 2],
}

/// The input around one output element: [`Taps::at`] reads the neighbour at an offset,
/// clamped to the edges. Only the stencil body makes one, for an in-range element.
pub struct Taps<T> {
    inp: *const T,
    /// Input offset of the element's batch position.
    base: isize,
    /// The element's coordinates along x, y, z.
    pos: [isize; 3],
    /// Largest coordinate along x, y, z (size - 1).
    last: [isize; 3],
    /// Input strides along x, y, z.
    stride: [isize; 3],
}

impl<T: Copy> Taps<T> {
    /// The input element at `(x + dx, y + dy, z + dz)`, each coordinate clamped to
    /// `0..size` (clamp-to-edge). Offsets are meant to be literals (they fold away).
    #[inline(always)]
    pub fn at(&self, dx: i32, dy: i32, dz: i32) -> T {
        let d = [dx as isize, dy as isize, dz as isize];
        let mut off = self.base;
        let mut k = 0;
        while k < 3 {
            let c = self.pos[k] + d[k];
            let c = if c < 0 {
                0
            } else if c > self.last[k] {
                self.last[k]
            } else {
                c
            };
            off += c * self.stride[k];
            k += 1;
        }
        // SAFETY: `Taps` is only made by `stencil` for an in-range element; the clamped
        // coordinates are in range, so by the geometry's invariant 2 the offset is inside
        // the input buffer.
        unsafe { *self.inp.offset(off) }
    }
}

/// A stencil op: computes one output element from the input's neighbours.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a stencil over `{T}`",
    note = "a stencil implements `gpu_kernels::stencil::Stencil<T>` and reads neighbours with `Taps::at`"
)]
pub trait Stencil<T>: Copy + Send + Sync {
    fn apply(&self, t: &Taps<T>) -> T;
}

/// The stencil body: `out[i] = op(taps around i)` for the linear indices `first, first +
/// step, …` below `n`.
///
/// # Safety
/// The [`StencilGeometry`] invariants hold for `out`, `inp` and `n`.
#[inline(always)]
pub unsafe fn stencil<S: Stencil<T>, T: Copy, I: Index>(
    op: S,
    n: I,
    g: &StencilGeometry<I>,
    out: *mut T,
    inp: *const T,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let mut rest = i;
        let mut coord = [0isize; STENCIL_DIMS];
        let (mut o_off, mut i_off) = (I::ZERO, I::ZERO);
        let mut d = 0;
        while d < STENCIL_DIMS {
            let cur = if d + 1 == STENCIL_DIMS {
                rest
            } else {
                let size = g.sizes[d];
                // SAFETY: invariant 1, every size is at least 1.
                unsafe { core::hint::assert_unchecked(size != I::ZERO) };
                let (q, r) = rest.divmod(size);
                rest = q;
                r
            };
            coord[d] = cur.to_u64() as isize;
            o_off = o_off.wadd(cur.wmul(g.strides[0][d]));
            if d >= 3 {
                i_off = i_off.wadd(cur.wmul(g.strides[1][d]));
            }
            d += 1;
        }
        let taps = Taps {
            inp,
            base: i_off.signed(),
            pos: [coord[0], coord[1], coord[2]],
            last: [
                g.sizes[0].to_u64() as isize - 1,
                g.sizes[1].to_u64() as isize - 1,
                g.sizes[2].to_u64() as isize - 1,
            ],
            stride: [
                g.strides[1][0].signed(),
                g.strides[1][1].signed(),
                g.strides[1][2].signed(),
            ],
        };
        // SAFETY: invariants 2 and 3: the output offset is in bounds and no other index
        // writes it; the input is not written by this launch.
        unsafe { *out.offset(o_off.signed()) = op.apply(&taps) };
        i = i.wadd(step);
    }
}

/// `out = in[x + DX, y + DY, z + DZ]`, clamped to the edges (cuArray's `shift`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shift<const DX: i32, const DY: i32, const DZ: i32>;
impl<T: Copy + Send + Sync, const DX: i32, const DY: i32, const DZ: i32> Stencil<T>
    for Shift<DX, DY, DZ>
{
    #[inline(always)]
    fn apply(&self, t: &Taps<T>) -> T {
        t.at(DX, DY, DZ)
    }
}

/// `out = in[x + 1] - in[x]` (forward difference along x; 0 at the last element).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardDiff;
impl<T: Num> Stencil<T> for ForwardDiff {
    #[inline(always)]
    fn apply(&self, t: &Taps<T>) -> T {
        t.at(1, 0, 0).sub(t.at(0, 0, 0))
    }
}

/// `out = in[x] - in[x - 1]` (backward difference along x; 0 at the first element).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackwardDiff;
impl<T: Num> Stencil<T> for BackwardDiff {
    #[inline(always)]
    fn apply(&self, t: &Taps<T>) -> T {
        t.at(0, 0, 0).sub(t.at(-1, 0, 0))
    }
}

/// Five-point Laplacian over x and y: `in[x±1] + in[y±1] - 4 in[x, y]`, computed in the op
/// math type and rounded once.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Laplacian2;
impl<T: Num> Stencil<T> for Laplacian2 {
    #[inline(always)]
    fn apply(&self, t: &Taps<T>) -> T {
        let at = |dx, dy| t.at(dx, dy, 0).to_acc();
        let sum = at(1, 0).add(at(-1, 0)).add(at(0, 1).add(at(0, -1)));
        let one = <T::Acc as Num>::ONE;
        let four = one.add(one).add(one.add(one));
        T::from_acc(sum.sub(four.mul(at(0, 0))))
    }
}

/// Seven-point Laplacian over x, y and z: `in[x±1] + in[y±1] + in[z±1] - 6 in[x, y, z]`,
/// computed in the op math type and rounded once.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Laplacian3;
impl<T: Num> Stencil<T> for Laplacian3 {
    #[inline(always)]
    fn apply(&self, t: &Taps<T>) -> T {
        let at = |dx, dy, dz| t.at(dx, dy, dz).to_acc();
        let sum = at(1, 0, 0)
            .add(at(-1, 0, 0))
            .add(at(0, 1, 0).add(at(0, -1, 0)))
            .add(at(0, 0, 1).add(at(0, 0, -1)));
        let two = <T::Acc as Num>::ONE.add(<T::Acc as Num>::ONE);
        let six = two.add(two).add(two);
        T::from_acc(sum.sub(six.mul(at(0, 0, 0))))
    }
}

// The built-in stencils carry no scalars: run-time dispatch builds them from none.
#[cfg(not(target_arch = "nvptx64"))]
macro_rules! no_scalars {
    ($($t:ty),*) => {$(
        impl crate::dispatch::FromScalars for $t {
            fn from_scalars(s: &[crate::dispatch::Scalar]) -> Option<Self> {
                s.is_empty().then(Self::default)
            }
        }
    )*};
}
#[cfg(not(target_arch = "nvptx64"))]
no_scalars!(ForwardDiff, BackwardDiff, Laplacian2, Laplacian3);
#[cfg(not(target_arch = "nvptx64"))]
impl<const DX: i32, const DY: i32, const DZ: i32> crate::dispatch::FromScalars
    for Shift<DX, DY, DZ>
{
    fn from_scalars(s: &[crate::dispatch::Scalar]) -> Option<Self> {
        s.is_empty().then_some(Shift)
    }
}

/// Names of one stencil's kernels in one PTX module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilNames {
    /// The crate that instantiated them (the module to load).
    pub module: &'static str,
    /// 32-bit index.
    pub s32: &'static str,
    /// 64-bit index.
    pub s64: &'static str,
}

/// A stencil instantiated over `T` (by `kernels!`'s `stencil` lines).
#[diagnostic::on_unimplemented(
    message = "no stencil kernels are instantiated for `{Self}` over `{T}`",
    note = "instantiate them with `gpu_kernels::kernels! {{ stencil [name {T}]: Op => ({T}); }}`"
)]
pub trait StencilKernels<T>: Stencil<T> {
    const NAMES: StencilNames;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the body over a whole 3-D array on the host.
    fn run<S: Stencil<f64>>(op: S, sizes: [u32; 3], inp: &[f64]) -> std::vec::Vec<f64> {
        let n: u32 = sizes.iter().product();
        let mut out = std::vec![f64::NAN; n as usize];
        let mut g = StencilGeometry {
            sizes: [1u32; STENCIL_DIMS],
            strides: [[0u32; STENCIL_DIMS]; 2],
        };
        let dense = [1, sizes[0], sizes[0] * sizes[1]];
        g.sizes[..3].copy_from_slice(&sizes);
        g.strides[0][..3].copy_from_slice(&dense);
        g.strides[1][..3].copy_from_slice(&dense);
        // SAFETY: dense layouts of n elements, distinct buffers.
        unsafe { stencil(op, n, &g, out.as_mut_ptr(), inp.as_ptr(), 0, 1) };
        out
    }

    #[test]
    fn differences_and_laplacians_clamp_at_the_edges() {
        let x: std::vec::Vec<f64> = (0..5).map(|v| (v * v) as f64).collect();
        assert_eq!(run(ForwardDiff, [5, 1, 1], &x), [1.0, 3.0, 5.0, 7.0, 0.0]);
        assert_eq!(run(BackwardDiff, [5, 1, 1], &x), [0.0, 1.0, 3.0, 5.0, 7.0]);
        assert_eq!(
            run(Shift::<-1, 0, 0>, [5, 1, 1], &x),
            [0.0, 0.0, 1.0, 4.0, 9.0]
        );
        // x² + y² on a 4×3 grid: Laplacian 4 inside, edges see clamped neighbours.
        let f = |x: usize, y: usize| (x * x + y * y) as f64;
        let grid: std::vec::Vec<f64> = (0..3).flat_map(|y| (0..4).map(move |x| f(x, y))).collect();
        let lap = run(Laplacian2, [4, 3, 1], &grid);
        assert_eq!(lap[4 + 1], 4.0);
        assert_eq!(lap[4 + 2], 4.0);
        // (0, 0): neighbours (1,0), (0,0) clamped, (0,1), (0,0) clamped.
        assert_eq!(lap[0], 1.0 + 0.0 + 1.0 + 0.0);
        let cube: std::vec::Vec<f64> = (0..27).map(|v| v as f64).collect();
        let lap3 = run(Laplacian3, [3, 3, 3], &cube);
        assert_eq!(lap3[13], 0.0);
    }
}
