//! TensorInfo for jointly collapsed operands, and IndexToOffset.
//!
//! After the host planner has broadcast every operand to the output's shape and collapsed
//! dimensions jointly (see the host crate's `plan` module), all operands share one list of
//! sizes; each has its own strides. A kernel thread turns a linear index over the output
//! into one element offset per operand with one divmod per dimension, shared by all operands.

/// Largest number of collapsed dimensions the generic variant handles.
pub const MAX_DIMS: usize = 25;

/// Sizes and strides of `N` operands over `D` jointly collapsed dimensions.
///
/// Passed to kernels by value (`.param` space): no host-to-device copy per launch.
/// Dimension 0 is the innermost (fastest-varying in the linear index).
///
/// Invariants the planner proves before a launch (kernels trust them):
/// 1. `ndim <= D`, and `sizes[d] >= 1` for `d < ndim`.
/// 2. The product of `sizes[..ndim]` is the launch's element count `n`, which fits in `I`
///    together with the grid's thread count.
/// 3. For every operand `k` and every in-range multi-index, the offset
///    `sum(idx[d] * strides[k][d])`, computed in wrapping `I` arithmetic and read as signed,
///    is the exact element offset from that operand's base pointer, and lies in its buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry<I, const D: usize, const N: usize> {
    pub sizes: [I; D],
    /// `strides[k][d]`: operand `k`, dimension `d`, in elements, two's complement in `I`.
    pub strides: [[I; D]; N],
    /// Dimensions in use (only the generic variant reads it; fixed variants use `D`).
    pub ndim: u32,
}

/// Index arithmetic: `u32` when everything fits in 31 bits, else `u64`.
pub trait Index: Copy + PartialOrd + core::fmt::Debug + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    const MAX_EXTENT: u64;
    fn from_u64(v: u64) -> Self;
    fn from_isize(v: isize) -> Self;
    fn to_u64(self) -> u64;
    fn wadd(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn divmod(self, d: Self) -> (Self, Self);
    /// The value read as a signed offset.
    fn signed(self) -> isize;
}

macro_rules! index {
    ($t:ty, $s:ty) => {
        impl Index for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const MAX_EXTENT: u64 = <$s>::MAX as u64;
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_isize(v: isize) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_u64(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn divmod(self, d: Self) -> (Self, Self) {
                let q = self / d;
                (q, self.wrapping_sub(q.wrapping_mul(d)))
            }
            #[inline(always)]
            fn signed(self) -> isize {
                self as $s as isize
            }
        }
    };
}
index!(u32, i32);
index!(u64, i64);

impl<I: Index, const D: usize, const N: usize> Geometry<I, D, N> {
    /// A geometry with every size 1 and every stride 0.
    pub fn empty() -> Self {
        Geometry {
            sizes: [I::ONE; D],
            strides: [[I::ZERO; D]; N],
            ndim: 0,
        }
    }

    /// IndexToOffset for all operands at once: the element offset of linear index `i` in
    /// each operand. `ndim` is `D` for the fixed variants (so the loop unrolls) and
    /// `self.ndim` for the generic one.
    #[inline(always)]
    pub fn offsets(&self, mut i: I, ndim: usize) -> [isize; N] {
        let mut off = [I::ZERO; N];
        // The loop bound `D` is a constant, so the loop unrolls and every `sizes[d]` and
        // `strides[k][d]` is a constant offset into the kernel's parameter space (a run-time
        // index would copy the whole Geometry to local memory). The generic variant
        // (`D == MAX_DIMS`) stops early at its run-time `ndim`.
        let mut d = 0;
        while d < D && d < ndim {
            // The outermost dimension needs no division: what is left is its index.
            let cur = if d + 1 == ndim {
                i
            } else {
                let size = self.sizes[d];
                // SAFETY: invariant 1, every size in use is at least 1.
                unsafe { core::hint::assert_unchecked(size != I::ZERO) };
                let (q, r) = i.divmod(size);
                i = q;
                r
            };
            let mut k = 0;
            while k < N {
                off[k] = off[k].wadd(cur.wmul(self.strides[k][d]));
                k += 1;
            }
            d += 1;
        }
        let mut out = [0isize; N];
        let mut k = 0;
        while k < N {
            out[k] = off[k].signed();
            k += 1;
        }
        out
    }
}
