//! Kernel bodies: one per arity, generic over op, element types, index type `I` and the
//! compile-time dimension count `D`. A GPU thread runs the body over the linear indices
//! `first, first + step, …` below `n` (a grid-stride loop); thread `t` of block `b` starts
//! at `b * blockDim + t` and steps by the grid's thread count.
//!
//! `ndim == 0` selects the contiguous variant: every operand's offset is the linear index.
//!
//! # Safety (all bodies)
//! The caller (the host planner, through the one launch site) guarantees the
//! [`Geometry`] invariants: every offset computed for `i < n` lies inside its operand's
//! buffer, output offsets are distinct for distinct `i`, and an input that shares memory
//! with the output does so at exactly the same offsets (element-wise in place).

use crate::geometry::{Geometry, Index};
use crate::ops::{Op1, Op2, Op3, Op4};
use crate::FastDiv;
use core::mem::size_of;

/// An op as a kernel parameter: the padding keeps zero-sized ops from vanishing from the
/// PTX parameter list, so the host passes every kernel the same parameter shapes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OpArg<Op> {
    pub op: Op,
    pub _pad: u32,
}

impl<Op> OpArg<Op> {
    pub fn new(op: Op) -> Self {
        OpArg { op, _pad: 0 }
    }
}

#[inline(always)]
fn offsets<I: Index, const D: usize, const N: usize>(
    g: &Geometry<I, D, N>,
    i: I,
    ndim: usize,
) -> [isize; N] {
    if ndim == 0 {
        [i.to_u64() as isize; N]
    } else {
        g.offsets(i, ndim)
    }
}

/// `apply1`: `op(&mut x[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
pub unsafe fn apply1<Op: Op1<T>, T, I: Index, const D: usize>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 1>,
    ndim: usize,
    x: *mut T,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [xo] = offsets(g, i, ndim);
        op.apply(&mut *x.offset(xo));
        i = i.wadd(step);
    }
}

/// `apply2`: `op(&mut out[i], a[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply2<Op: Op2<O, A>, O, A: Copy, I: Index, const D: usize>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 2>,
    ndim: usize,
    out: *mut O,
    a: *const A,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [oo, ao] = offsets(g, i, ndim);
        let av = *a.offset(ao);
        op.apply(&mut *out.offset(oo), av);
        i = i.wadd(step);
    }
}

/// `apply3`: `op(&mut out[i], a[i], b[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply3<Op: Op3<O, A, B>, O, A: Copy, B: Copy, I: Index, const D: usize>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 3>,
    ndim: usize,
    out: *mut O,
    a: *const A,
    b: *const B,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [oo, ao, bo] = offsets(g, i, ndim);
        let (av, bv) = (*a.offset(ao), *b.offset(bo));
        op.apply(&mut *out.offset(oo), av, bv);
        i = i.wadd(step);
    }
}

/// `apply4`: `op(&mut out[i], a[i], b[i], c[i])`.
///
/// # Safety
/// See the module documentation.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply4<
    Op: Op4<O, A, B, C>,
    O,
    A: Copy,
    B: Copy,
    C: Copy,
    I: Index,
    const D: usize,
>(
    op: Op,
    n: I,
    g: &Geometry<I, D, 4>,
    ndim: usize,
    out: *mut O,
    a: *const A,
    b: *const B,
    c: *const C,
    first: I,
    step: I,
) {
    let mut i = first;
    while i < n {
        let [oo, ao, bo, co] = offsets(g, i, ndim);
        let (av, bv, cv) = (*a.offset(ao), *b.offset(bo), *c.offset(co));
        op.apply(&mut *out.offset(oo), av, bv, cv);
        i = i.wadd(step);
    }
}

/// `E` elements of `T` with 16-byte alignment: loads and stores of a chunk compile to
/// 16-byte vector instructions (`ld.global.v4.b32`, …).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Chunk<T, const E: usize>(pub [T; E]);

/// A chunk of 8, 4 or 2 bytes with that alignment (a narrower input's chunk when the
/// output's is 16 bytes: [`load`]).
macro_rules! aligned_chunk {
    ($($name:ident $align:literal),*) => {$(
        #[repr(C, align($align))]
        #[derive(Clone, Copy)]
        struct $name<T, const E: usize>([T; E]);
    )*};
}
aligned_chunk!(Chunk8 8, Chunk4 4, Chunk2 2);

/// Elements per thread-iteration of the vectorised variant, for operands of these sizes
/// (output first): one 16-byte vector of the output. An input of narrower elements loads a
/// smaller aligned vector (a `bf16` input of an `f32` output: 8 bytes), a wider one several
/// vectors. CUDA C reference on the H200 (`benches/NOTES.md`, "Vectorised kernels"): `bf16 → f32` 4025–4093
/// GB/s with 4 elements per thread against 3768–3792 with 8.
pub const fn vec_width(sizes: &[usize]) -> usize {
    16 / sizes[0]
}

/// The vectorised variant's second parameter: the element count and, for the 2-D form, the
/// chunks per row as a divider (the host computes it once, so no chunk divides; `d == 1`
/// for the other forms).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VecArg {
    pub n: u64,
    pub row: FastDiv,
}

/// Whether an input of `size`-byte elements may have element stride 2 in a vectorised
/// kernel of width `width`: its chunk is read as whole 16-byte vectors, of which the even
/// elements are kept. The launcher and the kernels apply the same rule.
pub const fn step2_ok(size: usize, width: usize) -> bool {
    size >= 4 && (size * width).is_multiple_of(16)
}

/// Offsets of chunk `c` of the vectorised variant. `g.ndim == 0`: contiguous, every
/// operand at `c * E`. `g.ndim == 1`: one axis, operand `k` at `c * E * g.strides[k][0]`.
/// `g.ndim == 2`: rows of `g.sizes[0]` elements (a multiple of `E`), element stride
/// `g.strides[k][0]` and row stride `g.strides[k][1]`. Element strides are 1, or 2 for
/// inputs (see [`load_even`]).
/// `row` divides by the chunks per row (`g.sizes[0] / E`) in the 2-D form, where chunk
/// indices are below 2^31 (a 32-bit plan).
/// The second value: whether another chunk follows this one in its row (or on the one
/// axis), so the element after this chunk's last one is inside the view's span.
#[inline(always)]
fn chunk_offsets<const N: usize, const E: usize>(
    g: &Geometry<u32, 2, N>,
    row: &FastDiv,
    c: u64,
    chunks: u64,
) -> ([isize; N], bool) {
    if g.ndim == 0 {
        return ([(c * E as u64) as isize; N], c + 1 < chunks);
    }
    let (row, col, next) = if g.ndim == 1 {
        (0, c as u32 * E as u32, c + 1 < chunks)
    } else {
        let (r, c) = row.divmod(c as u32);
        let col = c * E as u32;
        (r, col, col + E as u32 != g.sizes[0])
    };
    let mut off = [0isize; N];
    let mut k = 0;
    while k < N {
        off[k] = row
            .wrapping_mul(g.strides[k][1])
            .wrapping_add(col.wrapping_mul(g.strides[k][0])) as i32 as isize;
        k += 1;
    }
    (off, next)
}

/// Whether input `k` has element stride 2 (read with [`load_even`]).
#[inline(always)]
fn stride2<const N: usize>(g: &Geometry<u32, 2, N>, k: usize) -> bool {
    g.ndim != 0 && g.strides[k][0] == 2
}

/// Chunk of `E` elements at `p`, in one access of its size where that is 2, 4, 8 or a
/// multiple of 16 bytes: the launcher aligns every chunk to the smaller of its size and 16
/// bytes (16-byte aligned bases and rows, chunks at multiples of `E` elements).
#[inline(always)]
unsafe fn load<T: Copy, const E: usize>(p: *const T) -> [T; E] {
    match size_of::<[T; E]>() {
        16 | 32 | 48 | 64 | 128 => (*(p as *const Chunk<T, E>)).0,
        8 => (*(p as *const Chunk8<T, E>)).0,
        4 => (*(p as *const Chunk4<T, E>)).0,
        2 => (*(p as *const Chunk2<T, E>)).0,
        _ => core::ptr::read(p as *const [T; E]),
    }
}

/// 16-byte vector loads that LLVM keeps whole (see `device::load_v4`); plain loads on the
/// host, where these bodies are only compiled.
#[inline(always)]
unsafe fn load_whole<T: Copy, const E: usize>(p: *const T) -> [T; E] {
    #[cfg(target_arch = "nvptx64")]
    return crate::device::load_v4(p);
    #[cfg(not(target_arch = "nvptx64"))]
    return load(p);
}

/// Elements `0, 2, …, 2E − 2` from `p` (an input with element stride 2, e.g. `A[:, ::2]`).
/// With `whole`, two `E`-element vectors, which also read element `2E − 1`: the caller
/// passes it only where that element lies inside the view's own span (it precedes the next
/// chunk of the same row). Otherwise one vector holds the first `⌈E / 2⌉` elements and the
/// rest are single loads, reading nothing past element `2E − 2`.
#[inline(always)]
unsafe fn load_even<T: Copy, const E: usize>(p: *const T, whole: bool) -> [T; E] {
    let head: [T; E] = load_whole(p);
    let mut v = head;
    if whole {
        let tail: [T; E] = load_whole(p.add(E));
        let mut m = 0;
        while m < E {
            v[m] = if 2 * m < E {
                head[2 * m]
            } else {
                tail[2 * m - E]
            };
            m += 1;
        }
    } else {
        let mut m = 0;
        while m < E {
            v[m] = if 2 * m < E {
                head[2 * m]
            } else {
                *p.add(2 * m)
            };
            m += 1;
        }
    }
    v
}

macro_rules! vec_body {
    ($(#[$doc:meta])* $name:ident, $lanes:ident, $trait:ident, $n:literal, $reads:expr,
     [$($x:ident: $t:ident = $k:literal),*]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As for the scalar bodies; in addition every operand's base pointer is 16-byte
        /// aligned, the output's element stride is 1 and each input's is 1 or 2, and in the
        /// 2-D form every row length is a multiple of `E`, every row stride keeps rows
        /// 16-byte aligned and `arg.row` divides by the chunks per row (the launcher checks
        /// and computes all of these before choosing this variant).
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name<Op: $trait<O $(, $t)*>, O: Copy $(, $t: Copy)*, const E: usize>(
            op: Op,
            arg: &VecArg,
            g: &Geometry<u32, 2, $n>,
            out: *mut O,
            $($x: *const $t,)*
            first: u64,
            step: u64,
        ) {
            let n = arg.n;
            let chunks = n / E as u64;
            // Element stride 2 only where `step2_ok` allows it (the launcher's rule): the
            // path is compiled out of other kernels.
            $( let $x = ($x, step2_ok(size_of::<$t>(), E) && stride2(g, $k)); )*
            let mut c = first;
            while c < chunks {
                #[allow(unused_variables)]
                let (offs, next) = chunk_offsets::<$n, E>(g, &arg.row, c, chunks);
                $( let $x: [$t; E] = if $x.1 {
                    load_even($x.0.offset(offs[$k]), next)
                } else {
                    load($x.0.offset(offs[$k]))
                }; )*
                let o = out.offset(offs[0]);
                // Outputs an op only writes are not loaded: zero bits are a valid value of
                // every element type (all are plain numbers).
                let mut ov: [O; E] = if $reads(&op) { load(o) } else { core::mem::zeroed() };
                $lanes(&op, &mut ov $(, &$x)*);
                *(o as *mut Chunk<O, E>) = Chunk(ov);
                c += step;
            }
            // The 0- and 1-axis forms' tail (fewer than E elements), one per thread.
            let t = chunks * E as u64 + first;
            if g.ndim <= 1 && t < n {
                let i = t as isize;
                op.apply(&mut *out.offset(i) $(, *$x.0.offset(i * if $x.1 { 2 } else { 1 }))*);
            }
        }
    };
}

// One chunk's lanes: `Op2` and `Op3` through their `apply_lanes` (which ops may specialise).
#[inline(always)]
fn lanes1<Op: Op1<O>, O, const E: usize>(op: &Op, out: &mut [O; E]) {
    let mut j = 0;
    while j < E {
        op.apply(&mut out[j]);
        j += 1;
    }
}
#[inline(always)]
fn lanes2<Op: Op2<O, A>, O, A: Copy, const E: usize>(op: &Op, out: &mut [O; E], a: &[A; E]) {
    op.apply_lanes(out, a);
}
#[inline(always)]
fn lanes3<Op: Op3<O, A, B>, O, A: Copy, B: Copy, const E: usize>(
    op: &Op,
    out: &mut [O; E],
    a: &[A; E],
    b: &[B; E],
) {
    op.apply_lanes(out, a, b);
}
#[inline(always)]
fn lanes4<Op: Op4<O, A, B, C>, O, A: Copy, B: Copy, C: Copy, const E: usize>(
    op: &Op,
    out: &mut [O; E],
    a: &[A; E],
    b: &[B; E],
    c: &[C; E],
) {
    let mut j = 0;
    while j < E {
        op.apply(&mut out[j], a[j], b[j], c[j]);
        j += 1;
    }
}

#[inline(always)]
fn reads_out1<Op>(_: &Op) -> bool {
    true
}
#[inline(always)]
fn reads_out2<Op: Op2<O, A>, O, A>(_: &Op) -> bool {
    Op::READS_OUT
}
#[inline(always)]
fn reads_out3<Op: Op3<O, A, B>, O, A, B>(_: &Op) -> bool {
    Op::READS_OUT
}
#[inline(always)]
fn reads_out4<Op: Op4<O, A, B, C>, O, A, B, C>(_: &Op) -> bool {
    Op::READS_OUT
}

vec_body!(
    /// Vectorised `apply1`: each thread-iteration updates `E` consecutive elements.
    apply1_vec, lanes1, Op1, 1, reads_out1, []
);
vec_body!(
    /// Vectorised `apply2`: 16-byte loads and stores of `E` consecutive elements.
    apply2_vec, lanes2, Op2, 2, reads_out2::<Op, O, A>, [a: A = 1]
);
vec_body!(
    /// Vectorised `apply3`: 16-byte loads and stores of `E` consecutive elements.
    apply3_vec, lanes3, Op3, 3, reads_out3::<Op, O, A, B>, [a: A = 1, b: B = 2]
);
vec_body!(
    /// Vectorised `apply4`: 16-byte loads and stores of `E` consecutive elements.
    apply4_vec, lanes4, Op4, 4, reads_out4::<Op, O, A, B, C>, [a: A = 1, b: B = 2, c: C = 3]
);
