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
use core::mem::MaybeUninit;
use core::num::NonZeroU32;

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
/// clamped to the edges. Only the stencil bodies make one, for an in-range element.
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
    /// The tiled body's register window: the input at `(x, y - 1 ..= y + 1, z)`, y
    /// clamped, when `windowed` (uninitialised otherwise).
    window: MaybeUninit<[T; 3]>,
    windowed: bool,
    /// Offsets fit in `i32` (a 32-bit launch: the geometry's invariant 2 for `u32`), so
    /// they are computed in wrapping 32-bit arithmetic and sign-extended once.
    narrow: bool,
}

impl<T: Copy> Taps<T> {
    /// The input element at `(x + dx, y + dy, z + dz)`, each coordinate clamped to
    /// `0..size` (clamp-to-edge). Offsets are meant to be literals (they fold away).
    #[inline(always)]
    pub fn at(&self, dx: i32, dy: i32, dz: i32) -> T {
        if self.windowed && dx == 0 && dz == 0 && (-1..=1).contains(&dy) {
            // SAFETY: `windowed` is only set together with an initialised window.
            return unsafe { self.window.assume_init_ref()[(dy + 1) as usize] };
        }
        let d = [dx as isize, dy as isize, dz as isize];
        let mut off = self.base;
        let mut off32 = self.base as i32;
        let mut k = 0;
        while k < 3 {
            // SAFETY: a `Taps` is only made for an in-range element (see the struct), so
            // the clamp below needs one side only for a literal offset.
            unsafe {
                core::hint::assert_unchecked(0 <= self.pos[k] && self.pos[k] <= self.last[k])
            };
            let c = self.pos[k] + d[k];
            let c = if c < 0 {
                0
            } else if c > self.last[k] {
                self.last[k]
            } else {
                c
            };
            if self.narrow {
                off32 = off32.wrapping_add((c as i32).wrapping_mul(self.stride[k] as i32));
            } else {
                off += c * self.stride[k];
            }
            k += 1;
        }
        if self.narrow {
            // Wrapping sums of the exact terms: the exact offset when it fits in `i32`.
            off = off32 as isize;
        }
        // SAFETY: `Taps` is only made by the stencil bodies for an in-range element; the
        // clamped coordinates are in range, so by the geometry's invariant 2 the offset is
        // inside the input buffer.
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
            window: MaybeUninit::uninit(),
            windowed: false,
            narrow: false,
        };
        // SAFETY: invariants 2 and 3: the output offset is in bounds and no other index
        // writes it; the input is not written by this launch.
        unsafe { *out.offset(o_off.signed()) = op.apply(&taps) };
        i = i.wadd(step);
    }
}

/// Threads of a tiled stencil block along x (one warp).
pub const TILE_LANES: u32 = 32;
/// Threads of a tiled stencil block across lines, by default (the host picks the block's
/// `blockDim.y`). With `TILE_WALK` the fastest pair of a sweep on an H200 (`benches/NOTES.md`,
/// "Stencils").
pub const TILE_LINES: u32 = 4;
/// y positions in one line (one thread walks them), by default (a kernel parameter).
pub const TILE_WALK: u32 = 32;

/// Elements along x one thread of the tiled body takes, `TILE_LANES` apart: 16 bytes'
/// worth, 1 to 8.
pub const fn tile_elems(size: usize) -> usize {
    match 16usize.checked_div(size) {
        Some(0) => 1,
        Some(v) if v < 8 => v,
        _ => 8,
    }
}

/// Blocks of the tiled body over frame and batch sizes `sizes` (as [`StencilGeometry`]
/// holds them) for elements of `size` bytes: x tiles of `TILE_LANES * tile_elems(size)`
/// positions times groups of `lines` lines (the block's rows), where a line is up to
/// `walk` y positions at one z and batch position. `walk` and `lines` are at least 1.
pub const fn tiled_tasks(sizes: &[u64; STENCIL_DIMS], size: usize, walk: u32, lines: u32) -> u64 {
    let x_tiles = sizes[0].div_ceil(TILE_LANES as u64 * tile_elems(size) as u64);
    let all = sizes[2] * sizes[1].div_ceil(walk as u64) * sizes[3] * sizes[4] * sizes[5];
    x_tiles * all.div_ceil(lines as u64)
}

/// The tiled stencil body, with no division per element. Task `t` (of [`tiled_tasks`]) is
/// an x tile of `TILE_LANES * V` positions by `lines` lines of `walk` y positions (the last
/// of a y run may be shorter), lines numbered z fastest,
/// so a block's lines are neighbours along z. A thread takes `V` x positions `TILE_LANES`
/// apart in its line and walks the line along y, keeping the input at `y - 1`, `y` and
/// `y + 1` in registers (the [`Taps`] window: one new load per position for every tap along
/// y), and loading `y + 2` one step ahead, so that row's loads are in flight while this
/// step computes and stores. The other taps are loads that mostly hit what the block has
/// just read. Offsets are 32-bit (wrapping sums, sign-extended once per access).
///
/// This thread is `lane` (x) and `row` (line) of its block and takes tasks `first, first +
/// step, …`.
///
/// # Safety
/// The [`StencilGeometry`] invariants hold for `out` and `inp` with 32-bit indices;
/// `walk >= 1`, `1 <= lines` and the block is `TILE_LANES × lines` threads with
/// `lane < TILE_LANES`, `row < lines`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn stencil_tiled<S: Stencil<T>, T: Copy, const V: usize>(
    op: S,
    g: &StencilGeometry<u32>,
    out: *mut T,
    inp: *const T,
    walk: u32,
    lines: u32,
    (lane, row): (u32, u32),
    (first, step): (u32, u32),
) {
    let sizes = g.sizes;
    // SAFETY: invariant 1, every size is at least 1; `walk` and `lines` are at least 1
    // (the caller). Divisors without a zero check.
    let nonzero = |d: u32| unsafe { NonZeroU32::new_unchecked(d) };
    let (nx, ny, nz) = (sizes[0], sizes[1], nonzero(sizes[2]));
    let (walk, lines) = (nonzero(walk), nonzero(lines));
    let ceil = |n: u32, d: NonZeroU32| n / d + (n % d != 0) as u32;
    // Both at least 1, and they fit: invariant 1 bounds the element count.
    let x_tiles = nonzero(ceil(nx, nonzero(TILE_LANES * V as u32)));
    let segments = nonzero(ceil(ny, walk));
    let all = nz.get() * segments.get() * sizes[3] * sizes[4] * sizes[5];
    let tasks = x_tiles.get() * ceil(all, lines);
    // Strides as `i32` (two's complement in `u32`); offsets are wrapping sums of them,
    // exact by invariant 2 (every offset of a 32-bit launch fits in `i32`).
    let (so, si) = (
        g.strides[0].map(|s| s as i32),
        g.strides[1].map(|s| s as i32),
    );
    let last = [nx as i32 - 1, ny as i32 - 1, nz.get() as i32 - 1];
    let mut task = first;
    while task < tasks {
        let (group, tile) = (task / x_tiles, task % x_tiles);
        let line = group * lines.get() + row;
        if line < all {
            let z = line % nz;
            let mut rest = line / nz;
            let segment = rest % segments;
            rest /= segments;
            // Batch position: offsets of the output element at (0, 0, z) and of the
            // input's batch origin.
            let (mut ob, mut ib) = ((z as i32).wrapping_mul(so[2]), 0i32);
            unrolled!(STENCIL_DIMS, |d| {
                if d >= 3 {
                    let c = if d + 1 == STENCIL_DIMS {
                        rest
                    } else {
                        let c = rest % nonzero(sizes[d]);
                        rest /= nonzero(sizes[d]);
                        c
                    } as i32;
                    ob = ob.wrapping_add(c.wrapping_mul(so[d]));
                    ib = ib.wrapping_add(c.wrapping_mul(si[d]));
                }
            });
            let zi = ib.wrapping_add((z as i32).wrapping_mul(si[2]));
            // x positions, clamped so every load stays in range; `live` ones are stored.
            let x0 = tile * TILE_LANES * V as u32 + lane;
            let mut xs = [0i32; V];
            let mut live = [false; V];
            unrolled!(V, |j| {
                let x = x0 + (j as u32) * TILE_LANES;
                live[j] = x < nx;
                xs[j] = if x < nx { x as i32 } else { last[0] };
            });
            // SAFETY (the closure's loads): x, y are in range and z, the batch position
            // are the line's, so by invariant 2 the offset is inside the input buffer.
            let load = |x: i32, y: i32| unsafe {
                let off = zi
                    .wrapping_add(x.wrapping_mul(si[0]))
                    .wrapping_add(y.wrapping_mul(si[1]));
                *inp.offset(off as isize)
            };
            let clamp_y = |y: i32| if y < last[1] { y } else { last[1] };
            let y0 = (segment * walk.get()) as i32;
            let y1 = Ord::min((y0 as u32).saturating_add(walk.get()), ny) as i32;
            let above = if y0 > 0 { y0 - 1 } else { 0 };
            // window[j]: the input at y - 1, y, y + 1 and (loaded ahead) y + 2.
            let c = load(xs[0], y0);
            let mut window = [[c; 4]; V];
            unrolled!(V, |j| {
                window[j] = [
                    load(xs[j], above),
                    load(xs[j], y0),
                    load(xs[j], clamp_y(y0 + 1)),
                    c,
                ];
            });
            let mut y = y0;
            while y < y1 {
                if y + 1 < y1 {
                    let ahead = clamp_y(y + 2);
                    unrolled!(V, |j| {
                        window[j][3] = load(xs[j], ahead);
                    });
                }
                // Every value before any store: a load of element `j + 1` cannot then move
                // past the (possibly aliasing, to LLVM) store of element `j`, so all of this
                // position's loads are in flight together.
                let mut v = [c; V];
                unrolled!(V, |j| {
                    let w = window[j];
                    let taps = Taps {
                        inp,
                        base: ib as isize,
                        pos: [xs[j] as isize, y as isize, z as isize],
                        last: last.map(|l| l as isize),
                        stride: [si[0] as isize, si[1] as isize, si[2] as isize],
                        window: MaybeUninit::new([w[0], w[1], w[2]]),
                        windowed: true,
                        narrow: true,
                    };
                    v[j] = op.apply(&taps);
                    window[j] = [w[1], w[2], w[3], w[3]];
                });
                unrolled!(V, |j| {
                    if live[j] {
                        let off = ob
                            .wrapping_add(xs[j].wrapping_mul(so[0]))
                            .wrapping_add(y.wrapping_mul(so[1]));
                        // SAFETY: invariants 2 and 3 for the in-range (x, y, z, batch):
                        // in bounds, and written by this thread only.
                        unsafe { *out.offset(off as isize) = v[j] };
                    }
                });
                y += 1;
            }
        }
        task = match task.checked_add(step) {
            Some(t) => t,
            None => break,
        };
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

/// Names of one stencil's kernels in one PTX module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilNames {
    /// The crate that instantiated them (the module to load).
    pub module: &'static str,
    /// 32-bit index.
    pub s32: &'static str,
    /// 64-bit index.
    pub s64: &'static str,
    /// The tiled body ([`stencil_tiled`]), 32-bit index.
    pub tiled: &'static str,
}

impl StencilNames {
    /// Every kernel of the stencil (what a launch may pick).
    pub const fn kernels(&self) -> [&'static str; 3] {
        [self.s32, self.s64, self.tiled]
    }
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

    /// The tiled body, every thread of every block run in turn (it has no barriers), over
    /// a geometry with batch axes: equal to the generic body, element for element.
    fn tiled_equals_generic<S: Stencil<f64>>(
        op: S,
        sizes: [u32; STENCIL_DIMS],
        (walk, lines, grid): (u32, u32, u32),
    ) {
        let n: u32 = sizes.iter().product();
        // Output dense; input dense in the reversed axis order (x has a large stride).
        let mut g = StencilGeometry {
            sizes,
            strides: [[0u32; STENCIL_DIMS]; 2],
        };
        let (mut so, mut si) = (1u32, 1u32);
        for d in 0..STENCIL_DIMS {
            g.strides[0][d] = so;
            so *= sizes[d];
            g.strides[1][STENCIL_DIMS - 1 - d] = si;
            si *= sizes[STENCIL_DIMS - 1 - d];
        }
        let inp: std::vec::Vec<f64> = (0..n).map(|v| ((v * 7919) % 1009) as f64).collect();
        let mut want = std::vec![f64::NAN; n as usize];
        let mut got = std::vec![f64::NAN; n as usize];
        // SAFETY: dense layouts of n elements (a permutation for the input), distinct buffers.
        unsafe { stencil(op, n, &g, want.as_mut_ptr(), inp.as_ptr(), 0, 1) };
        for block in 0..grid {
            for row in 0..lines {
                for lane in 0..TILE_LANES {
                    // SAFETY: as above; the threads of a block run in turn.
                    unsafe {
                        stencil_tiled::<_, f64, { tile_elems(8) }>(
                            op,
                            &g,
                            got.as_mut_ptr(),
                            inp.as_ptr(),
                            walk,
                            lines,
                            (lane, row),
                            (block, grid),
                        )
                    };
                }
            }
        }
        for i in 0..n as usize {
            assert_eq!(got[i].to_bits(), want[i].to_bits(), "{sizes:?} element {i}");
        }
    }

    #[test]
    fn the_tiled_body_equals_the_generic_one() {
        // x tiles of 64 f64 positions; the default tile and three others (walk, lines).
        let shapes = [
            [1000, 1, 1, 1, 1, 1],
            [70, 37, 1, 1, 1, 1],
            [65, 17, 9, 1, 1, 1],
            [33, 16, 3, 2, 3, 1],
            [130, 5, 1, 4, 1, 3],
        ];
        for sizes in shapes {
            for (walk, lines) in [(TILE_WALK, TILE_LINES), (1, 1), (5, 3), (64, 4)] {
                let tasks = tiled_tasks(&sizes.map(|s| s as u64), 8, walk, lines) as u32;
                assert!(tasks >= 1);
                // One block per task, and fewer blocks than tasks (blocks loop).
                for grid in [tasks, 3] {
                    let t = (walk, lines, grid);
                    tiled_equals_generic(Laplacian2, sizes, t);
                    tiled_equals_generic(Laplacian3, sizes, t);
                    tiled_equals_generic(ForwardDiff, sizes, t);
                    tiled_equals_generic(Shift::<0, -1, 0>, sizes, t);
                    tiled_equals_generic(Shift::<0, 1, 0>, sizes, t);
                    tiled_equals_generic(Shift::<0, 0, -1>, sizes, t);
                    tiled_equals_generic(Wide, sizes, t);
                }
            }
        }
    }

    /// Taps beyond the register window (two positions along y, diagonal): loads.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Wide;
    impl Stencil<f64> for Wide {
        fn apply(&self, t: &Taps<f64>) -> f64 {
            t.at(0, 2, 0) - 3.0 * t.at(0, -2, 0) + 5.0 * t.at(1, 1, -1) + t.at(0, 1, 0)
        }
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
