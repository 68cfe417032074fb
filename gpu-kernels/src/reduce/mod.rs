//! Reductions along any set of axes, in one order that is a fixed function of the
//! reduction length, so that the GPU and the CPU twin give the same bits every run.
//!
//! # The order
//! The elements of one output, `x[0..n)`, are its input elements in the logical row-major
//! order of the reduced axes (the input's axis order, last axis fastest); the memory
//! layout plays no part. With `w = `[`chunk`]`(size_of::<T>())` (16 bytes of elements):
//! 1. **Groups.** [`groups_used`]`(n, w)` groups of [`group_len`]`(n, w)` consecutive
//!    elements (the last may be shorter). `group_len` is a multiple of `SLOTS * w`.
//! 2. **Slots.** Within a group, element `q` (counted from the group's start) belongs to
//!    slot `(q / w) % SLOTS`; each slot folds its elements in increasing `q`
//!    ([`Reduce::first`], then [`Reduce::fold`]). Slots that receive elements are a prefix.
//! 3. **Trees.** The group's value is the halving [`tree`] over its slots that received
//!    elements; the output is the halving tree over its groups' values, then
//!    [`Reduce::finish`]. A reduction of nothing gives [`Reduce::empty`].
//!
//! Arg reductions ([`Argmin`], [`Argmax`]) carry each element's position `i` in this
//! order (`0..n`, the logical row-major index over the reduced axes) and break ties by it,
//! so their result is the first extreme's position whatever the pairing. A
//! [`MapReduce`] reads two inputs at each position and reduces `map(a, b)` in the same
//! order.
//!
//! The GPU spreads slots over a block's threads (the row kernel: up to [`ROW_SLOTS`] slots
//! per thread, [`row_threads`] threads per group, [`SLOTS`] threads a block, shared by as
//! many groups; the column kernel: `COL_Y` threads of `SLOTS / COL_Y` slots each) and
//! groups over blocks; the CPU twin ([`group_value`], [`write_output`]) walks the same definition
//! directly. No float atomics, no order that depends on the grid.
//!
//! # The kernels
//! Host and GPU share this module's definitions (the order, the reductions, the geometry,
//! the CPU twin); the GPU's kernel bodies (GPU builds with the `reductions` feature) are one
//! module each:
//!
//! | module | what |
//! |---|---|
//! | `rows` | the row kernel (`rows!`, `<family>_r`): the reduced axis unit-stride |
//! | `cols` | the column kernel (`cols!`, `<family>_k`): a kept axis unit-stride; it runs one of the three below |
//! | `slot` | the slot column kernel: the order above, for every source |
//! | `cols_exact` | the order-free column kernel over whole 16-byte row vectors ([`exact_cols`]) |
//! | `cols_loose` | the order-free column kernel over rows that are not whole vectors ([`loose_cols`]) |
//! | `finals` | the final kernel (`finals!`, `<family>_f`): the tree over an output's groups |
//! | `gpu` | what they share: the fold of a source's vectors, the block's halving trees, a group's end |
//! | `absent` | without the feature: bodies that fail the build naming it |
//!
//! **The module names are part of the image's bytes.** rustc hands LLVM the crate's
//! functions sorted by their mangled names, which hold the module path, and that order can
//! change a kernel's PTX (it did for the interpreter's kernels: `strided_apply_expr::kernel`).
//! The names above keep, for every call between these functions, the order of caller and
//! callee that the single module `gpu` they came from gave them (`cols_exact` and
//! `cols_loose` before `gpu::finish_group`, the slot kernel after `cols`, every other
//! kernel after `gpu`); check the image after renaming or moving any of them
//! (`scripts/ptx --check`).

use crate::elem::{Bool, ElemType};
use crate::math::{Float, Num};
use crate::ops::Op3;
use crate::FastDiv;

/// Slots per group (the row kernel's threads per block).
pub const SLOTS: u32 = 256;
/// Most groups per output (the final kernel trees over at most this many values).
pub const MAX_GROUPS: u32 = 1024;
/// Most slots a thread of the row kernel holds ([`row_threads`]).
pub const ROW_SLOTS: u32 = 4;
/// Reductions of more chunks than this take [`LONG_ROW_SLOTS`] slots per thread in the row
/// kernel.
pub const LONG_ROW_CHUNKS: u32 = 2048;
/// Slots a thread of the row kernel holds in reductions of more than [`LONG_ROW_CHUNKS`]
/// chunks: two groups a block, so one-output reductions of [`MAX_GROUPS`] groups take 512
/// blocks, one wave at five blocks an SM (`benches/NOTES.md`).
pub const LONG_ROW_SLOTS: u32 = 2;
/// Reductions shorter than twice this have one group.
pub const GROUP_MIN: u32 = 1 << 16;
/// Kept (output) dimensions after collapsing.
pub const KEPT_DIMS: usize = 6;
/// Reduced dimensions after collapsing.
pub const RED_DIMS: usize = 6;
/// Most inputs of one reduction source (a map over them, [`Source`]).
pub const MAX_INPUTS: usize = 3;
/// Column kernel: columns (outputs along the kept unit-stride axis) per block.
pub const COL_X: u32 = 32;
/// Column kernel: threads along the slots for one column per thread (each folds `SLOTS /
/// COL_Y` slots); with [`col_vec`] columns per thread, `COL_Y * col_vec` threads of
/// `SLOTS / (COL_Y * col_vec)` slots each.
pub const COL_Y: u32 = 16;
/// Final kernel: threads per block (one block per output).
pub const FINAL_BLOCK: u32 = 256;
/// [`ReduceGeometry::flags`]: the row kernel may read 16-byte vectors (one reduced
/// dimension of stride 1, every row start 16-byte aligned).
pub const VEC_ROWS: u32 = 1;
/// [`ReduceGeometry::flags`]: the column kernel may read each thread's [`col_vec`] columns
/// ([`exact_vec`] for sources with [`exact_cols`]) as one 16-byte vector (invariant 7 of
/// [`ReduceGeometry`]).
pub const VEC_COLS: u32 = 2;

/// Columns per thread of the column kernel for `size`-byte elements: 4 for 4-byte elements
/// (one 16-byte load along the kept axis where [`VEC_COLS`] allows), else 1 (8-byte
/// elements already read 256 bytes of a row per warp; two of them per thread took 70
/// registers, one block per SM). A thread holds `SLOTS / COL_Y` accumulators whatever
/// this is.
pub const fn col_vec(size: usize) -> u32 {
    if size == 4 {
        4
    } else {
        1
    }
}

/// The column kernel of order-free reductions (`cols_exact`): threads along the kept
/// axis, each reading [`exact_vec`] columns of a row as one 16-byte vector, so that 8
/// threads read one 128-byte line (the slot kernel reads one element per thread, 32 bytes of
/// a row per warp for 1-byte types: a load request per 32 bytes, `benches/NOTES.md`).
pub const EXACT_LANES: u32 = 8;
/// `cols_exact`: threads along the reduced axis.
pub const EXACT_ROWS: u32 = 64;
/// `cols_exact`: rows a thread loads before it folds any of them (one 16-byte vector
/// each).
pub const EXACT_BATCH: u32 = 8;
/// `cols_exact` without [`VEC_COLS`] (rows not in whole 16-byte vectors: odd widths,
/// unaligned or strided columns): threads along the kept axis, so that a warp reads
/// `LOOSE_LANES * LOOSE_COLS` consecutive columns of one row, one element load each.
/// A CUDA C reference measured the shapes first (`benches/reference/colfold_loose.cu`).
pub const LOOSE_LANES: u32 = 32;
/// `cols_exact` without [`VEC_COLS`]: threads along the reduced axis.
pub const LOOSE_ROWS: u32 = 32;
/// `cols_exact` without [`VEC_COLS`]: consecutive columns a thread, read one element at a
/// time (`EXACT_BATCH` rows of them loaded before any fold).
pub const LOOSE_COLS: u32 = 4;

/// Columns per thread of `cols_exact` for `size`-byte elements: one 16-byte vector.
pub const fn exact_vec(size: usize) -> u32 {
    (16 / size) as u32
}

/// `cols_exact`'s rows per piece for `w`-element chunks: `min(w, EXACT_BATCH)`.
pub const fn exact_piece(w: usize) -> usize {
    if w < EXACT_BATCH as usize {
        w
    } else {
        EXACT_BATCH as usize
    }
}

/// Whether the column launches of source `S` over `K` inputs of `T` take `cols_exact`
/// (vectors where [`VEC_COLS`] holds, invariant 7 with `v = `[`exact_vec`]; element reads
/// of [`LOOSE_COLS`] columns a thread otherwise, where [`loose_cols`]): order-free
/// reductions ([`Reduce::EXACT`]) of one-byte accumulators of one input, where
/// [`Reduce::ORDER_FREE_COLS`] chooses them (`any` of `Bool`, `u8`, `f16`, `bf16`; `all`
/// of `f16`, `bf16`; `u8` `sum`, `prod`, `amin`, `amax`).
pub const fn exact_cols<S: Source<T, K>, T, const K: usize>() -> bool {
    <ReductionOf<S, T, K> as Reduce<ItemOf<S, T, K>>>::EXACT
        && <ReductionOf<S, T, K> as Reduce<ItemOf<S, T, K>>>::ORDER_FREE_COLS
        && core::mem::size_of::<AccOf<S, T, K>>() == 1
        && K == 1
        && core::mem::size_of::<T>() <= 8
        && 16 % core::mem::size_of::<T>() == 0
}

/// Whether the column launches of source `S` over `K` inputs of `T` without [`VEC_COLS`]
/// take `cols_exact`'s element reads (else the slot kernel's): sources with
/// [`exact_cols`] whose [`Reduce::LOOSE_COLS`] chooses them.
pub const fn loose_cols<S: Source<T, K>, T, const K: usize>() -> bool {
    exact_cols::<S, T, K>() && <ReductionOf<S, T, K> as Reduce<ItemOf<S, T, K>>>::LOOSE_COLS
}

/// Whether the slot column kernel (`cols_body`) keeps its unrolled loops' plain form for
/// source `S` ([`Reduce::PLAIN_COLS`]): every one of their 16 candidate copies goes to LLVM,
/// guarded by `if i < n`. Every other instance compiles only its live copies (`if const`).
pub const fn plain_cols<S: Source<T, K>, T, const K: usize>() -> bool {
    <ReductionOf<S, T, K> as Reduce<ItemOf<S, T, K>>>::PLAIN_COLS
}

/// The slot column kernel's chunks per batch for `w`-element chunks of `v` columns of `k`
/// inputs: the largest power of two with `b * w * v * k <= 64` values and `b <= M` (`M =
/// SLOTS / COL_Y / v` slots a thread, so batches cover the slots exactly).
pub const fn col_batch(w: usize, v: usize, k: usize) -> usize {
    let m_slots = (SLOTS / COL_Y) as usize / v;
    let fit = 64 / (w * v * k);
    if fit >= m_slots {
        m_slots
    } else {
        1 << (usize::BITS - 1 - fit.leading_zeros())
    }
}

/// Elements per slot chunk: 16 bytes of `size`-byte elements.
pub const fn chunk(size: usize) -> u32 {
    if size >= 16 {
        1
    } else {
        (16 / size) as u32
    }
}

/// `log2(SLOTS)`.
pub const SLOT_BITS: u32 = SLOTS.trailing_zeros();

/// The row kernel's slots per output as a power of two, `log2` of it: the chunks of one
/// row (`ceil(n / w)`, at least 1) rounded up to a power of two, at most [`SLOTS`]. Rows of
/// at most `SLOTS / 2` chunks share a block (`SLOTS >> row_shift` outputs per block), so a
/// short row does not take a block of its own; the order is the same, since every slot
/// that receives elements receives one chunk (`q / w < SLOTS`).
pub const fn row_shift(n: u32, w: u32) -> u32 {
    let chunks = n.div_ceil(w);
    if chunks > SLOTS / 2 {
        SLOT_BITS
    } else if chunks <= 1 {
        0
    } else {
        chunks.next_power_of_two().trailing_zeros()
    }
}

/// The row kernel's threads per group of a reduction of length `n`, `log2`: the group's
/// `1 << `[`row_shift`] slots over threads of [`ROW_SLOTS`] slots each (fewer where the
/// group has fewer slots: one thread), thread `t` holding slots `t + (1 << row_threads) *
/// m`; [`LONG_ROW_SLOTS`] slots per thread past [`LONG_ROW_CHUNKS`] chunks (every slot then
/// has more than eight chunks: a thread has work enough, and loads two passes of its two
/// slots at a time). A performance choice only: the order is the slots', whoever folds them
/// (`benches/NOTES.md`).
pub const fn row_threads(n: u32, w: u32) -> u32 {
    let shift = row_shift(n, w);
    if n.div_ceil(w) > LONG_ROW_CHUNKS {
        shift - LONG_ROW_SLOTS.trailing_zeros()
    } else {
        shift.saturating_sub(ROW_SLOTS.trailing_zeros())
    }
}

/// The row kernel's blocks: `outputs * groups` (output, group) pairs, `SLOTS >>`
/// [`row_threads`] of them a block (invariant 8 of [`ReduceGeometry`]).
pub const fn row_blocks(outputs: u64, groups: u32, n: u32, w: u32) -> u64 {
    (outputs * groups as u64).div_ceil((SLOTS >> row_threads(n, w)) as u64)
}

/// Groups of a reduction of length `n`: the largest power of two at most `n / GROUP_MIN`,
/// between 1 and [`MAX_GROUPS`].
pub const fn groups(n: u32) -> u32 {
    let q = n / GROUP_MIN;
    if q <= 1 {
        1
    } else {
        let p = 1u32 << (31 - q.leading_zeros());
        if p > MAX_GROUPS {
            MAX_GROUPS
        } else {
            p
        }
    }
}

/// Elements per group: `n / groups(n)` rounded up to a multiple of `SLOTS * w` (0 for
/// `n == 0`).
pub const fn group_len(n: u32, w: u32) -> u32 {
    let round = SLOTS * w;
    n.div_ceil(groups(n)).div_ceil(round) * round
}

/// Groups that hold elements (1 for `n == 0`: the one empty group writes the empty value).
pub const fn groups_used(n: u32, w: u32) -> u32 {
    if n == 0 {
        1
    } else {
        n.div_ceil(group_len(n, w))
    }
}

/// A reduction: how elements fold into an accumulator and accumulators combine.
///
/// `first(x, i)` starts a slot, `fold(acc, x, i)` continues it (`i`: the element's
/// position in the reduction, `0..n`, which only the arg reductions read), `combine(a, b)`
/// joins two slot or group values (`a` from the lower slot or group), `finish(acc, n)`
/// gives the output.
pub trait Reduce<T>: Copy + Send + Sync {
    /// The accumulator (`f32` for `f16` and `bf16`, the type itself otherwise).
    type Acc: Copy + Send + Sync + AccWords;
    /// The output element (`T` itself, `i64` for arg reductions, `Bool` for all/any).
    type Out: Copy + Send + Sync;
    fn first(&self, x: T, i: u32) -> Self::Acc;
    fn fold(&self, acc: Self::Acc, x: T, i: u32) -> Self::Acc;
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn finish(&self, acc: Self::Acc, n: u32) -> Self::Out;
    /// The output of a reduction of nothing; `None` where there is none (min, max, arg).
    fn empty(&self) -> Option<Self::Out>;
    /// Any accumulator value: fills registers of slots that receive no element, whose
    /// values are never read.
    fn placeholder(&self) -> Self::Acc;
    /// Whether the column kernel serves this reduction. It holds 16 slot accumulators per
    /// thread in registers; (value, index) pairs do not fit beside the loads, so the arg
    /// reductions take the row kernel on every layout.
    const COLUMNS: bool = true;
    /// Whether the result has the same bits whatever the order of the folds and combines
    /// (integer folds, which wrap, and boolean ones): the column kernel may then read in
    /// its own order ([`exact_cols`]).
    const EXACT: bool = false;
    /// Whether column reductions of this [`EXACT`](Reduce::EXACT) reduction take the
    /// order-free column kernel ([`exact_cols`]): where it measured faster than the slot
    /// kernel (`benches/RESULTS.md`, `reduce_cols_1b`): `any` of 1- and 2-byte types, `all`
    /// of 2-byte types and (on words, [`BYTE_WORDS`](Reduce::BYTE_WORDS)) of `Bool`, `u8`
    /// and `i8`, and the folds of `u8`.
    const ORDER_FREE_COLS: bool = false;
    /// Whether those column reductions ([`exact_cols`]) also take the order-free kernel
    /// where rows are not in whole 16-byte vectors, reading elements ([`loose_cols`]), where
    /// it measured faster than the slot kernel's element reads: `all` of `bf16`
    /// (`benches/NOTES.md`, "Columns of odd widths"). One-byte loads hold a register each
    /// in flight: those kernels took 70–80 registers, over the 64 that a block of
    /// `LOOSE_LANES × LOOSE_ROWS` threads allows.
    const LOOSE_COLS: bool = false;
    /// Whether the slot column kernel compiles every candidate copy of its unrolled loops
    /// for this reduction ([`plain_cols`]), where compiling only the live ones measured
    /// slower: `all` of 4-byte and `any` of 8-byte types (0.91-0.98x, `benches/NOTES.md`,
    /// "Build time"). The plain form costs the nvptx build its time.
    const PLAIN_COLS: bool = false;
    /// Whether the order-free column kernel ([`exact_cols`]) folds this reduction's
    /// one-byte elements four to a 32-bit word ([`fold_bytes`](Reduce::fold_bytes)) rather
    /// than one at a time: `all` of `Bool`, `u8`, `i8`, whose truth is a non-zero byte
    /// (`benches/NOTES.md`, "Columns of one-byte folds"). Only for
    /// [`EXACT`](Reduce::EXACT) reductions.
    const BYTE_WORDS: bool = false;
    /// [`BYTE_WORDS`](Reduce::BYTE_WORDS): the packed accumulator of four columns before
    /// any element.
    fn bytes_start(&self) -> u32 {
        0
    }
    /// [`BYTE_WORDS`](Reduce::BYTE_WORDS): folds four packed elements `w` (one a column,
    /// the first in the low byte) into the packed accumulator `acc`.
    fn fold_bytes(&self, acc: u32, w: u32) -> u32 {
        let _ = w;
        acc
    }
    /// [`BYTE_WORDS`](Reduce::BYTE_WORDS): the accumulator of column `l < 4` of a packed
    /// one (read only where `BYTE_WORDS` holds).
    fn byte_acc(&self, acc: u32, l: u32) -> Self::Acc {
        let _ = (acc, l);
        self.placeholder()
    }
}

/// An accumulator as 32-bit words: what a warp shuffle moves (the row kernel's lower tree
/// levels). `from_words(to_words(a)) == a`, bit for bit; words past `WORDS` are 0.
pub trait AccWords: Copy {
    /// Words used, 1 to 4.
    const WORDS: usize;
    fn to_words(self) -> [u32; 4];
    fn from_words(w: [u32; 4]) -> Self;
}

/// Every number (at most 8 bytes, no padding: [`Elem`](crate::Elem) types are `Pod`) as
/// its bytes, little-endian, zero-extended.
impl<T: Num> AccWords for T {
    const WORDS: usize = {
        assert!(core::mem::size_of::<T>() <= 8);
        core::mem::size_of::<T>().div_ceil(4)
    };
    #[inline(always)]
    fn to_words(self) -> [u32; 4] {
        let mut w = [0u32; 4];
        let n = core::mem::size_of::<T>();
        bytemuck::bytes_of_mut(&mut w)[..n].copy_from_slice(bytemuck::bytes_of(&self));
        w
    }
    #[inline(always)]
    fn from_words(w: [u32; 4]) -> T {
        bytemuck::pod_read_unaligned(&bytemuck::bytes_of(&w)[..core::mem::size_of::<T>()])
    }
}

impl AccWords for bool {
    const WORDS: usize = 1;
    #[inline(always)]
    fn to_words(self) -> [u32; 4] {
        [self as u32, 0, 0, 0]
    }
    #[inline(always)]
    fn from_words(w: [u32; 4]) -> bool {
        w[0] != 0
    }
}

/// The value's words, then the index.
impl<A: AccWords> AccWords for ArgAcc<A> {
    const WORDS: usize = {
        assert!(A::WORDS <= 3);
        A::WORDS + 1
    };
    #[inline(always)]
    fn to_words(self) -> [u32; 4] {
        let mut w = self.value.to_words();
        w[Self::WORDS - 1] = self.index;
        w
    }
    #[inline(always)]
    fn from_words(w: [u32; 4]) -> Self {
        let mut v = w;
        v[Self::WORDS - 1] = 0;
        ArgAcc {
            value: A::from_words(v),
            index: w[Self::WORDS - 1],
        }
    }
}

/// What a reduction kernel reads and folds: `K` inputs of element type `T`, mapped to one
/// item per position, reduced by [`Source::R`]. Every [`Reduce`] is the one-input source;
/// [`MapReduce`] maps two inputs through an `Op3` first (`transform_reduce`).
pub trait Source<T, const K: usize>: Copy + Send + Sync {
    /// What the map gives per position.
    type Item: Copy;
    /// The reduction over the items.
    type R: Reduce<Self::Item>;
    fn reduction(&self) -> Self::R;
    fn item(&self, x: [T; K]) -> Self::Item;
    /// Whether the column kernel serves this source (see [`Reduce::COLUMNS`]; maps over two
    /// inputs do not: their loads and conversions exceed the registers).
    const COLUMNS: bool;
    /// Whether the item is the element itself and its reduction folds bytes four to a
    /// word ([`Reduce::BYTE_WORDS`]).
    const BYTE_WORDS: bool = false;
}

impl<T: Copy, R: Reduce<T>> Source<T, 1> for R {
    type Item = T;
    type R = R;
    const COLUMNS: bool = R::COLUMNS;
    const BYTE_WORDS: bool = R::BYTE_WORDS && core::mem::size_of::<T>() == 1;
    #[inline(always)]
    fn reduction(&self) -> R {
        *self
    }
    #[inline(always)]
    fn item(&self, x: [T; 1]) -> T {
        x[0]
    }
}

/// `reduce(map(a, b))` in one pass: `map` is an `Op3<T, T, T>` applied at every position
/// (its result rounded to `T`, as an apply would store it), `reduce` folds the results.
/// `MapReduce { reduce: SumSq, map: Sub }` is the sum of squared differences,
/// `MapReduce { reduce: Sum, map: Mul }` the dot product.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapReduce<R, F> {
    pub reduce: R,
    pub map: F,
}

impl<T: Num, R: Reduce<T>, F: Op3<T, T, T>> Source<T, 2> for MapReduce<R, F> {
    type Item = T;
    type R = R;
    const COLUMNS: bool = false;
    #[inline(always)]
    fn reduction(&self) -> R {
        self.reduce
    }
    #[inline(always)]
    fn item(&self, x: [T; 2]) -> T {
        let mut out = T::ZERO;
        self.map.apply(&mut out, x[0], x[1]);
        out
    }
}

/// The reduction of source `S` over `K` inputs of `T`.
pub type ReductionOf<S, T, const K: usize> = <S as Source<T, K>>::R;
/// The items `S` reduces.
pub type ItemOf<S, T, const K: usize> = <S as Source<T, K>>::Item;
/// `S`'s accumulator.
pub type AccOf<S, T, const K: usize> = <ReductionOf<S, T, K> as Reduce<ItemOf<S, T, K>>>::Acc;
/// `S`'s output element.
pub type OutOf<S, T, const K: usize> = <ReductionOf<S, T, K> as Reduce<ItemOf<S, T, K>>>::Out;

/// Sum (floats in their [`Num::Acc`] type, integers wrap).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sum;
/// Product.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prod;
/// Minimum, NaN-propagating, `-0` below `+0` ([`Num::minimum`]: the result does not
/// depend on the order); a reduction of nothing is an error.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amin;
/// Maximum, NaN-propagating, `+0` above `-0` ([`Num::maximum`]); a reduction of nothing is
/// an error.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amax;
/// Mean: the sum divided by `n` (NaN for a reduction of nothing).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mean;
/// Sum of squares, each square fused into the running sum (`fma(x, x, acc)`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SumSq;
/// Euclidean norm: the square root of [`SumSq`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Norm2;
/// Position (`i64`, in the row-major order of the reduced axes) of the first minimum; a
/// NaN beats every number (the first NaN's position), as in PyTorch. A reduction of
/// nothing is an error.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Argmin;
/// Position of the first maximum; NaN wins, as for [`Argmin`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Argmax;
/// Whether every element is non-zero (`Bool`; NaN counts as non-zero; true for nothing).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct All;
/// Whether any element is non-zero (`Bool`; false for nothing).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Any;

macro_rules! acc_reduce {
    ($op:ident, $bound:ident, |$a:ident, $b:ident| $combine:expr, empty $empty:expr) => {
        impl<T: $bound> Reduce<T> for $op {
            type Acc = T::Acc;
            type Out = T;
            const EXACT: bool = <T::Acc as Num>::INTEGER;
            const ORDER_FREE_COLS: bool =
                <T::Acc as Num>::INTEGER && core::mem::size_of::<T>() == 1;
            #[inline(always)]
            fn first(&self, x: T, _i: u32) -> T::Acc {
                x.to_acc()
            }
            #[inline(always)]
            fn fold(&self, acc: T::Acc, x: T, _i: u32) -> T::Acc {
                <Self as Reduce<T>>::combine(self, acc, x.to_acc())
            }
            #[inline(always)]
            fn combine(&self, $a: T::Acc, $b: T::Acc) -> T::Acc {
                $combine
            }
            #[inline(always)]
            fn finish(&self, acc: T::Acc, _n: u32) -> T {
                T::from_acc(acc)
            }
            #[inline(always)]
            fn empty(&self) -> Option<T> {
                $empty
            }
            #[inline(always)]
            fn placeholder(&self) -> T::Acc {
                <T::Acc as Num>::ZERO
            }
        }
    };
}
acc_reduce!(Sum, Num, |a, b| a.add(b), empty Some(T::ZERO));
acc_reduce!(Prod, Num, |a, b| a.mul(b), empty Some(T::ONE));
acc_reduce!(Amin, Num, |a, b| a.minimum(b), empty None);
acc_reduce!(Amax, Num, |a, b| a.maximum(b), empty None);

impl<T: Float<Acc: Float>> Reduce<T> for Mean {
    type Acc = T::Acc;
    type Out = T;
    #[inline(always)]
    fn first(&self, x: T, _i: u32) -> T::Acc {
        x.to_acc()
    }
    #[inline(always)]
    fn fold(&self, acc: T::Acc, x: T, _i: u32) -> T::Acc {
        acc.add(x.to_acc())
    }
    #[inline(always)]
    fn combine(&self, a: T::Acc, b: T::Acc) -> T::Acc {
        a.add(b)
    }
    #[inline(always)]
    fn finish(&self, acc: T::Acc, n: u32) -> T {
        T::from_acc(acc.div(<T::Acc as crate::ops::CastFrom<f64>>::cast_from(n as f64)))
    }
    #[inline(always)]
    fn empty(&self) -> Option<T> {
        Some(T::from_acc(
            <T::Acc as Num>::ZERO.div(<T::Acc as Num>::ZERO),
        ))
    }
    #[inline(always)]
    fn placeholder(&self) -> T::Acc {
        <T::Acc as Num>::ZERO
    }
}

macro_rules! squares {
    ($op:ident, |$acc:ident| $finish:expr) => {
        impl<T: Float<Acc: Float>> Reduce<T> for $op {
            type Acc = T::Acc;
            type Out = T;
            #[inline(always)]
            fn first(&self, x: T, _i: u32) -> T::Acc {
                let a = x.to_acc();
                a.mul(a)
            }
            #[inline(always)]
            fn fold(&self, acc: T::Acc, x: T, _i: u32) -> T::Acc {
                let a = x.to_acc();
                a.mul_add(a, acc)
            }
            #[inline(always)]
            fn combine(&self, a: T::Acc, b: T::Acc) -> T::Acc {
                a.add(b)
            }
            #[inline(always)]
            fn finish(&self, $acc: T::Acc, _n: u32) -> T {
                T::from_acc($finish)
            }
            #[inline(always)]
            fn empty(&self) -> Option<T> {
                Some(T::ZERO)
            }
            #[inline(always)]
            fn placeholder(&self) -> T::Acc {
                <T::Acc as Num>::ZERO
            }
        }
    };
}
squares!(SumSq, |acc| acc);
squares!(Norm2, |acc| acc.sqrt());

/// An arg reduction's accumulator: the best value so far (in the accumulation type) and
/// its position.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ArgAcc<A> {
    pub value: A,
    pub index: u32,
}

/// Whether `b` beats `a` in an arg reduction: a NaN beats every number, `better(b, a)`
/// decides between numbers, equal values (or two NaNs) go to the lower position. A total
/// order, so the result does not depend on how slots pair up.
#[inline(always)]
fn beats<A: Num>(b: ArgAcc<A>, a: ArgAcc<A>, better: impl Fn(A, A) -> bool) -> bool {
    let (an, bn) = (a.value.is_nan(), b.value.is_nan());
    if an || bn {
        bn && (!an || b.index < a.index)
    } else {
        better(b.value, a.value) || (b.value == a.value && b.index < a.index)
    }
}

macro_rules! arg_reduce {
    ($op:ident, |$b:ident, $a:ident| $better:expr, |$x:ident, $v:ident| $wins:expr) => {
        impl<T: Num> Reduce<T> for $op {
            type Acc = ArgAcc<T::Acc>;
            type Out = i64;
            const COLUMNS: bool = false;
            #[inline(always)]
            fn first(&self, x: T, i: u32) -> Self::Acc {
                ArgAcc {
                    value: x.to_acc(),
                    index: i,
                }
            }
            /// `beats` where `i` is above every position in `acc` (a slot folds in
            /// increasing position): a NaN wins over a number, a number only by `$wins`,
            /// which is also true of a NaN `x` (an unordered comparison), and nothing wins
            /// over a NaN. Two compares and a select a pair, no position compare.
            // `!(x <= v)` is meant: true for a NaN `x` (an unordered compare, one `setp`).
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            #[inline(always)]
            fn fold(&self, acc: Self::Acc, x: T, i: u32) -> Self::Acc {
                let ($x, $v) = (x.to_acc(), acc.value);
                #[allow(clippy::eq_op)]
                let acc_is_number = $v == $v;
                if acc_is_number && $wins {
                    ArgAcc {
                        value: $x,
                        index: i,
                    }
                } else {
                    acc
                }
            }
            #[inline(always)]
            fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
                if beats(b, a, |$b, $a| $better) {
                    b
                } else {
                    a
                }
            }
            #[inline(always)]
            fn finish(&self, acc: Self::Acc, _n: u32) -> i64 {
                acc.index as i64
            }
            #[inline(always)]
            fn empty(&self) -> Option<i64> {
                None
            }
            #[inline(always)]
            fn placeholder(&self) -> Self::Acc {
                ArgAcc {
                    value: <T::Acc as Num>::ZERO,
                    index: 0,
                }
            }
        }
    };
}
arg_reduce!(Argmin, |b, a| b < a, |x, v| !(x >= v));
arg_reduce!(Argmax, |b, a| b > a, |x, v| !(x <= v));

/// Elements that read as true or false: non-zero is true (NaN too, as in PyTorch).
pub trait Truth: crate::Elem {
    fn truth(self) -> bool;
}
impl<T: Num> Truth for T {
    #[inline(always)]
    fn truth(self) -> bool {
        self.to_acc() != <T::Acc as Num>::ZERO
    }
}
impl Truth for Bool {
    #[inline(always)]
    fn truth(self) -> bool {
        self.0 != 0
    }
}

macro_rules! truth_reduce {
    ($op:ident, $empty:literal, |$a:ident, $b:ident| $combine:expr, order_free_cols: $sizes:pat, loose_cols: $loose:expr, plain_cols: $plain:pat, byte_words: $bytes:tt) => {
        impl<T: Truth> Reduce<T> for $op {
            type Acc = bool;
            type Out = Bool;
            const EXACT: bool = true;
            const ORDER_FREE_COLS: bool = matches!(core::mem::size_of::<T>(), $sizes)
                || <Self as Reduce<T>>::BYTE_WORDS;
            const LOOSE_COLS: bool = $loose;
            const PLAIN_COLS: bool = matches!(core::mem::size_of::<T>(), $plain);
            // Types whose truth is a non-zero byte (not the 8-bit floats: -0 is false).
            const BYTE_WORDS: bool = truth_reduce!(@bytes $bytes)
                && matches!(T::TYPE, ElemType::Bool | ElemType::U8 | ElemType::I8);
            #[inline(always)]
            fn bytes_start(&self) -> u32 {
                truth_reduce!(@start $bytes)
            }
            #[inline(always)]
            fn fold_bytes(&self, acc: u32, w: u32) -> u32 {
                truth_reduce!(@fold $bytes acc, w)
            }
            #[inline(always)]
            fn byte_acc(&self, acc: u32, l: u32) -> bool {
                truth_reduce!(@lane $bytes acc, l)
            }
            #[inline(always)]
            fn first(&self, x: T, _i: u32) -> bool {
                x.truth()
            }
            #[inline(always)]
            fn fold(&self, acc: bool, x: T, _i: u32) -> bool {
                <Self as Reduce<T>>::combine(self, acc, x.truth())
            }
            #[inline(always)]
            fn combine(&self, $a: bool, $b: bool) -> bool {
                $combine
            }
            #[inline(always)]
            fn finish(&self, acc: bool, _n: u32) -> Bool {
                Bool(acc as u8)
            }
            #[inline(always)]
            fn empty(&self) -> Option<Bool> {
                Some(Bool($empty as u8))
            }
            #[inline(always)]
            fn placeholder(&self) -> bool {
                $empty
            }
        }
    };
    (@bytes false) => { false };
    (@bytes all) => { true };
    (@start false) => { 0 };
    // Every column true.
    (@start all) => { u32::MAX };
    (@fold false $acc:ident, $w:ident) => { $acc | $w };
    // Each byte's high bit: whether it is non-zero (`(b & 0x7f) + 0x7f` carries into bit 7
    // for any non-zero low bits and never out of the byte); the columns' `and`.
    (@fold all $acc:ident, $w:ident) => {
        $acc & ((($w & 0x7f7f_7f7f) + 0x7f7f_7f7f) | $w)
    };
    (@lane false $acc:ident, $l:ident) => { ($acc >> (8 * $l)) & 0xff != 0 };
    (@lane all $acc:ident, $l:ident) => { ($acc >> (8 * $l + 7)) & 1 != 0 };
}
// The order-free column kernel measured slower than the slot kernel for `all` of 1-byte
// types folded one at a time (16 compares a row-vector, 0.90×; on packed words 1.6×:
// `byte_words`) and of 4- and 8-byte types (0.90–0.96×; `any` 0.95–0.996×), faster for the
// others (1.15–3.7×; `benches/NOTES.md`).
// The slot kernel's loops compiled with only their live copies measured 0.96-0.98x for `all`
// of 4-byte types and 0.91x for `any` of `i64`: those keep the plain form.
// Over rows that are not whole vectors, the order-free kernel's element reads measured
// 3.4× the slot kernel's for `all` of `bf16` (and its vector kernel 1.7×, without the slot
// kernel's registers beside it), 0.93–0.96× for the other 2-byte folds; one-byte types keep
// the slot kernel there (registers).
truth_reduce!(All, true, |a, b| a & b, order_free_cols: 2, loose_cols: matches!(T::TYPE, ElemType::BF16), plain_cols: 4, byte_words: all);
truth_reduce!(Any, false, |a, b| a | b, order_free_cols: 1..=2, loose_cols: false, plain_cols: 8, byte_words: false);

/// Sizes and strides of one reduction launch, passed by value to its kernels.
///
/// Kept dimensions number the outputs (`kept[0]` fastest; for the column kernel it is the
/// input's unit-stride kept axis); reduced dimensions number each output's elements
/// (`red[0]` fastest). Strides are in elements, two's complement in `u32`; unused
/// dimensions have size 1 and stride 0. A source of `K` inputs uses `kept_strides[0]`
/// (the output) and `kept_strides[1..=K]`, `red_strides[0..K]`.
///
/// Invariants the host proves before a launch (kernels trust them):
/// 1. `1 <= nkept <= KEPT_DIMS`, `1 <= nred <= RED_DIMS`; the product of the kept sizes is
///    `outputs >= 1`, of the reduced sizes `n`; `n`, `outputs * groups` and every offset
///    below fit in 31 bits.
/// 2. `groups == groups_used(n, w)` and `group_len == group_len(n, w)` for the kernel's `w`.
/// 3. For every output `o`, reduced index `r < n` and input `k`, the input offset
///    `kept_offsets(o).1[k] + red_offset(r)[k]` and the output offset `kept_offsets(o).0`,
///    read as signed, lie in their buffers; distinct outputs have distinct output offsets;
///    the output shares no memory with the inputs or the scratch.
/// 4. With `groups > 1`, `scratch` holds `outputs * groups` accumulators.
/// 5. With [`VEC_ROWS`] in `flags`: `nred == 1`, `red_strides[k][0] == 1` and every
///    output's row start is 16-byte aligned, for every input `k`.
/// 6. For the column kernel: `kept_strides[1][0] == 1` (the first input's `kept[0]` is
///    unit-stride), and `nred == 1` (then `red[1]` has size 1 and stride 0), or `nred == 2`
///    and `red[0]` is a multiple of the kernel's `w` (a slot chunk never crosses the
///    innermost reduced dimension).
/// 7. With [`VEC_COLS`] in `flags` (column kernel, `v = `[`col_vec`]`(size_of::<T>()) > 1`;
///    `v = `[`exact_vec`]`(size_of::<T>())` for sources with [`exact_cols`]):
///    `kept[0]` is a multiple of `v`, `kept_strides[1 + k][0] == 1` for every input `k`,
///    and every input element whose `kept[0]` index is a multiple of `v` is 16-byte
///    aligned (each base 16-byte aligned, every other kept and every reduced stride a
///    multiple of 16 bytes).
/// 8. `row_shift == `[`row_shift`]`(n, w)` for the kernel's `w` (below [`SLOT_BITS`] only
///    with one group), and the row kernel's grid is [`row_blocks`]`(outputs, groups, n, w)`
///    blocks.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceGeometry {
    /// Reduction length.
    pub n: u32,
    pub group_len: u32,
    /// Groups used ([`groups_used`]).
    pub groups: u32,
    pub outputs: u32,
    /// Column kernel: blocks along `kept[0]` (`ceil(kept[0] / COL_X)`; `cols_exact`:
    /// `ceil(kept[0] / (EXACT_LANES * exact_vec(size)))` with [`VEC_COLS`], `ceil(kept[0] /
    /// (LOOSE_LANES * LOOSE_COLS))` without).
    pub col_blocks: u32,
    /// Row kernel: `log2` of the slots of one group, [`row_shift`]; a block reduces
    /// `SLOTS >> `[`row_threads`] (output, group) pairs.
    pub row_shift: u32,
    pub flags: u32,
    pub nkept: u32,
    pub nred: u32,
    pub kept: [FastDiv; KEPT_DIMS],
    /// `kept_strides[0]`: output, `kept_strides[1 + k]`: input `k`.
    pub kept_strides: [[u32; KEPT_DIMS]; 1 + MAX_INPUTS],
    pub red: [FastDiv; RED_DIMS],
    /// `red_strides[k]`: input `k`.
    pub red_strides: [[u32; RED_DIMS]; MAX_INPUTS],
}

impl ReduceGeometry {
    /// Output and input offsets of output `o`.
    #[inline(always)]
    #[allow(unused_assignments)] // the last dimension's quotient
    pub fn kept_offsets<const K: usize>(&self, mut o: u32) -> (isize, [isize; K]) {
        const _: () = assert!(KEPT_DIMS == 6, "unrolled!(dims …) unrolls 6 dimensions");
        let (mut oo, mut io) = (0u32, [0u32; K]);
        let nkept = self.nkept as usize;
        unrolled!(dims nkept, |d| {
            let cur = if d + 1 == nkept {
                o
            } else {
                let (q, r) = self.kept[d].divmod(o);
                o = q;
                r
            };
            oo = oo.wrapping_add(cur.wrapping_mul(self.kept_strides[0][d]));
            let mut k = 0;
            while k < K {
                io[k] = io[k].wrapping_add(cur.wrapping_mul(self.kept_strides[1 + k][d]));
                k += 1;
            }
        });
        (oo as i32 as isize, io.map(|v| v as i32 as isize))
    }

    /// Input offsets of reduced index `r` from the output's input bases.
    #[inline(always)]
    #[allow(unused_assignments)] // the last dimension's quotient
    pub fn red_offset<const K: usize>(&self, mut r: u32) -> [isize; K] {
        const _: () = assert!(RED_DIMS == 6, "unrolled!(dims …) unrolls 6 dimensions");
        let nred = self.nred as usize;
        let mut off = [0u32; K];
        if nred == 1 {
            off = core::array::from_fn(|k| r.wrapping_mul(self.red_strides[k][0]));
        } else {
            unrolled!(dims nred, |d| {
                let cur = if d + 1 == nred {
                    r
                } else {
                    let (q, rem) = self.red[d].divmod(r);
                    r = q;
                    rem
                };
                let mut k = 0;
                while k < K {
                    off[k] = off[k].wrapping_add(cur.wrapping_mul(self.red_strides[k][d]));
                    k += 1;
                }
            });
        }
        off.map(|v| v as i32 as isize)
    }

    /// [`red_offset`](Self::red_offset) for at most two reduced dimensions (the column
    /// kernel's, invariant 6), without a branch: one division (with one dimension,
    /// `red[1]` has size 1 and stride 0 and the quotient is 0).
    #[inline(always)]
    pub fn red_offset2<const K: usize>(&self, r: u32) -> [isize; K] {
        let (q, rem) = self.red[0].divmod(r);
        core::array::from_fn(|k| {
            rem.wrapping_mul(self.red_strides[k][0])
                .wrapping_add(q.wrapping_mul(self.red_strides[k][1])) as i32 as isize
        })
    }

    /// Start and length of group `grp`.
    #[inline(always)]
    pub fn group(&self, grp: u32) -> (u32, u32) {
        let lo = grp * self.group_len;
        let left = self.n - lo;
        (
            lo,
            if left < self.group_len {
                left
            } else {
                self.group_len
            },
        )
    }
}

/// The halving tree over `v` (values of a prefix of slots or groups): at each level `s`
/// (from half the next power of two of `v.len()` down to 1), `v[l] = combine(v[l], v[l +
/// s])` for every `l < s` with `l + s < v.len()`. `None` for an empty `v`.
pub fn tree<R: Reduce<T>, T>(op: &R, v: &mut [R::Acc]) -> Option<R::Acc> {
    let len = v.len();
    if len == 0 {
        return None;
    }
    let mut s = len.next_power_of_two() / 2;
    while s >= 1 {
        let mut l = 0;
        while l < s && l + s < len {
            v[l] = op.combine(v[l], v[l + s]);
            l += 1;
        }
        s /= 2;
    }
    Some(v[0])
}

/// The CPU twin's value of group `grp` of output `o` (`None` for an empty group), walking
/// the order's definition directly.
///
/// # Safety
/// The [`ReduceGeometry`] invariants hold for `inp` (each input's base element).
pub unsafe fn group_value<S: Source<T, K>, T: Copy, const K: usize>(
    src: &S,
    g: &ReduceGeometry,
    inp: [*const T; K],
    o: u32,
    grp: u32,
) -> Option<AccOf<S, T, K>> {
    let op = src.reduction();
    let w = chunk(core::mem::size_of::<T>());
    let (lo, len) = g.group(grp);
    let (_, io) = g.kept_offsets::<K>(o);
    let used = Ord::min(len.div_ceil(w), SLOTS) as usize;
    let mut slots = [op.placeholder(); SLOTS as usize];
    for q in 0..len {
        let s = ((q / w) % SLOTS) as usize;
        let off = g.red_offset::<K>(lo + q);
        // SAFETY: invariant 3, `lo + q < n`.
        let x = src.item(core::array::from_fn(|k| unsafe {
            *inp[k].offset(io[k] + off[k])
        }));
        let i = lo + q;
        slots[s] = if q < SLOTS * w && q % w == 0 {
            op.first(x, i)
        } else {
            op.fold(slots[s], x, i)
        };
    }
    tree(&op, &mut slots[..used])
}

/// Trees over the groups' values `accs` (`g.groups` of them), finishes and writes output
/// `o` (nothing when a reduction of nothing has no value).
///
/// # Safety
/// The [`ReduceGeometry`] invariants hold for `out` (the output's base element).
pub unsafe fn write_output<R: Reduce<I>, I>(
    op: &R,
    g: &ReduceGeometry,
    out: *mut R::Out,
    o: u32,
    accs: &mut [R::Acc],
) {
    let (oo, _) = g.kept_offsets::<0>(o);
    let v = if g.n == 0 {
        op.empty()
    } else {
        tree(op, accs).map(|a| op.finish(a, g.n))
    };
    if let Some(v) = v {
        // SAFETY: invariant 3.
        unsafe { *out.offset(oo) = v };
    }
}

/// Names of one reduction's kernels in one PTX module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceNames {
    /// The crate that instantiated them (the module to load).
    pub module: &'static str,
    /// A block per output and group, slots on threads (reduced axis unit-stride or general);
    /// short rows share a block ([`row_shift`]).
    pub rows: &'static str,
    /// Threads along a kept unit-stride axis, slots on `COL_Y` threads.
    pub cols: &'static str,
    /// The tree over each output's group values.
    pub fin: &'static str,
    /// Whether `cols` is `cols_exact` ([`exact_cols`]): its launch shape is that kernel's
    /// with [`VEC_COLS`].
    pub cols_exact: bool,
    /// Whether `cols` is `cols_exact` without [`VEC_COLS`] too ([`loose_cols`]): its
    /// launch shape is then that kernel's (element reads).
    pub cols_loose: bool,
}

/// A reduction source instantiated over `K` inputs of `T` (by `kernels!`'s `reduce`
/// lines).
#[diagnostic::on_unimplemented(
    message = "no reduction kernels are instantiated for `{Self}` over {K} input(s) of `{T}`",
    note = "instantiate them with `gpu_kernels::kernels! {{ reduce [name {T}]: Op => ({T}); }}` (one input) or `=> ({T}, {T});` (two, with `MapReduce`)"
)]
pub trait ReduceKernels<T, const K: usize>: Source<T, K> {
    const NAMES: ReduceNames;
}

// The kernel bodies: only with the `reductions` feature (Cargo.toml says why).
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
pub use {cols::cols, finals::finals, rows::rows};

// Without the feature, a `kernels!` `reduce` line instantiates these, which fail the
// build with a message naming the feature (not rustc's "cannot find function").
#[cfg(all(target_arch = "nvptx64", not(feature = "reductions")))]
pub use absent::{cols, finals, rows};

#[cfg(all(target_arch = "nvptx64", not(feature = "reductions")))]
mod absent;
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
mod cols;
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
mod cols_exact;
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
mod cols_loose;
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
mod finals;
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
mod gpu;
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
mod rows;
#[cfg(all(target_arch = "nvptx64", feature = "reductions"))]
mod slot;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_free_column_kernel_serves_one_byte_integer_folds() {
        use crate::ops::Mul;
        use crate::{bf16, f16};
        // Integer and boolean folds are exact, float ones are not.
        const { assert!(<Sum as Reduce<i32>>::EXACT && <Prod as Reduce<u8>>::EXACT) };
        const { assert!(!<Sum as Reduce<f32>>::EXACT && !<Amax as Reduce<f16>>::EXACT) };
        const { assert!(<All as Reduce<f64>>::EXACT && !<Argmax as Reduce<u8>>::EXACT) };
        // One-byte accumulators of one input take the order-free column kernel where it
        // measured faster.
        assert!(exact_cols::<Any, Bool, 1>() && exact_cols::<Any, u8, 1>());
        assert!(exact_cols::<Any, bf16, 1>() && exact_cols::<All, f16, 1>());
        // `all` of `Bool`, `u8` and `i8` there too, four columns to a word.
        assert!(exact_cols::<All, Bool, 1>() && exact_cols::<All, u8, 1>());
        const { assert!(<All as Source<i8, 1>>::BYTE_WORDS && <All as Source<u8, 1>>::BYTE_WORDS) };
        const { assert!(!<Any as Source<u8, 1>>::BYTE_WORDS && !<All as Source<f16, 1>>::BYTE_WORDS) };
        assert!(!exact_cols::<Any, i64, 1>() && !exact_cols::<All, f32, 1>());
        assert!(exact_cols::<Sum, u8, 1>() && exact_cols::<Prod, u8, 1>());
        assert!(exact_cols::<Amin, u8, 1>() && exact_cols::<Amax, u8, 1>());
        // Wider accumulators, float folds, arg reductions and maps keep the slot kernel.
        assert!(!exact_cols::<Sum, i32, 1>() && !exact_cols::<Amax, f32, 1>());
        assert!(!exact_cols::<Sum, f16, 1>() && !exact_cols::<Argmax, u8, 1>());
        assert!(!exact_cols::<MapReduce<Sum, Mul>, i32, 2>());
        // The slot kernel keeps its plain unrolled form only where the `if const` form
        // measured slower: `all` of 4-byte and `any` of 8-byte types.
        assert!(plain_cols::<All, i32, 1>() && plain_cols::<All, f32, 1>());
        assert!(plain_cols::<Any, i64, 1>() && plain_cols::<Any, f64, 1>());
        assert!(!plain_cols::<All, u8, 1>() && !plain_cols::<All, f64, 1>());
        assert!(!plain_cols::<Any, i32, 1>() && !plain_cols::<Sum, f32, 1>());
        assert!(!plain_cols::<Sum, u8, 1>() && !plain_cols::<Amax, bf16, 1>());
        // One 16-byte vector a thread.
        assert_eq!([1, 2, 4, 8].map(exact_vec), [16, 8, 4, 2]);
        assert_eq!([16, 8, 4, 2].map(exact_piece), [8, 8, 4, 2]);
    }

    #[test]
    fn packed_bytes_fold_as_their_columns() {
        // Every byte value in every column, beside other values: the packed fold and
        // column read give the column-by-column fold of the elements' truth.
        fn check<R: Reduce<u8, Acc = bool> + Reduce<Bool, Acc = bool>>(op: R) {
            let mut state = 0x9e37_79b9u32;
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state
            };
            for b in 0..=255u32 {
                for l in 0..4 {
                    let rows = [
                        next() & !(0xff << (8 * l)) | b << (8 * l),
                        next(),
                        next() | 0x0101_0101,
                    ];
                    let mut packed = Reduce::<u8>::bytes_start(&op);
                    for &w in &rows {
                        packed = Reduce::<u8>::fold_bytes(&op, packed, w);
                    }
                    for c in 0..4u32 {
                        let column = rows.map(|w| (w >> (8 * c)) as u8);
                        let want = column[1..]
                            .iter()
                            .fold(op.first(column[0], 0), |a, &x| op.fold(a, x, 0));
                        assert_eq!(
                            Reduce::<u8>::byte_acc(&op, packed, c),
                            want,
                            "{rows:x?} column {c}"
                        );
                        let bools = column.map(|x| Bool((x != 0) as u8));
                        let want = bools[1..]
                            .iter()
                            .fold(op.first(bools[0], 0), |a, &x| op.fold(a, x, 0));
                        assert_eq!(Reduce::<u8>::byte_acc(&op, packed, c), want);
                    }
                }
            }
        }
        check(All);
        check(Any);
    }

    #[test]
    fn groups_follow_the_length() {
        assert_eq!(groups(0), 1);
        assert_eq!(groups((1 << 17) - 1), 1);
        assert_eq!(groups(1 << 17), 2);
        assert_eq!(groups(1 << 28), MAX_GROUPS);
        assert_eq!(group_len(1 << 28, 4), 1 << 18);
        assert_eq!(groups_used(1 << 28, 4), 1024);
        assert_eq!(group_len(5, 4), 1024);
        assert_eq!(groups_used(5, 4), 1);
        assert_eq!(groups_used(0, 4), 1);
        // Every group but the last is full, none is empty.
        for n in [
            1u32,
            1023,
            1024,
            1025,
            200_000,
            1 << 20,
            (1 << 20) + 7,
            123_456_789,
        ] {
            for w in [1, 2, 4, 8, 16] {
                let (l, u) = (group_len(n, w), groups_used(n, w));
                assert_eq!(l % (SLOTS * w), 0);
                assert!(u <= MAX_GROUPS && (u - 1) * l < n && u * l >= n, "{n} {w}");
            }
        }
    }

    #[test]
    fn short_rows_share_blocks_in_the_order_of_one() {
        // Slots per output: the row's chunks rounded up to a power of two, all 256 past 128.
        let cases = [
            (0, 4, 0),
            (1, 4, 0),
            (4, 4, 0),
            (5, 4, 1),
            (16, 4, 2),
            (17, 4, 3),
        ];
        for (n, w, shift) in cases {
            assert_eq!(row_shift(n, w), shift, "n {n} w {w}");
        }
        assert_eq!(row_shift(128, 4), 5);
        assert_eq!(row_shift(512, 4), 7);
        assert_eq!(row_shift(513, 4), SLOT_BITS);
        assert_eq!(row_shift(1 << 20, 4), SLOT_BITS);
        for w in [1, 2, 4, 8, 16] {
            for n in 0..=(SLOTS * w + 3) {
                let shift = row_shift(n, w);
                let p = 1u32 << shift;
                // Every chunk has a slot of its own inside the output's share of the block
                // (the order's slot `(q / w) % SLOTS` is `q / w`), with room to spare only
                // below one half.
                assert!(shift <= SLOT_BITS && n.div_ceil(w) <= p || shift == SLOT_BITS);
                assert!(shift == 0 || n.div_ceil(w) > p / 2, "n {n} w {w}");
                // Shares below a block only with one group.
                assert!(shift == SLOT_BITS || groups_used(n, w) == 1);
            }
        }
    }

    #[test]
    fn row_threads_hold_their_slots() {
        // Rows of 128 f32 (32 slots): 8 threads of four slots, 32 rows a block.
        assert_eq!(row_threads(128, 4), 3);
        assert_eq!(row_blocks(1 << 21, 1, 128, 4), 1 << 16);
        // A row of 16 f32 (4 slots) on one thread, 256 rows a block.
        assert_eq!(row_threads(16, 4), 0);
        assert_eq!(row_blocks(1000, 1, 16, 4), 4);
        // Up to `LONG_ROW_CHUNKS` chunks: 64 threads of four of the 256 slots; past it two
        // slots a thread (128 threads a row, two rows a block).
        assert_eq!(row_threads(4 * LONG_ROW_CHUNKS, 4), 6);
        assert_eq!(row_threads(4 * LONG_ROW_CHUNKS + 1, 4), SLOT_BITS - 1);
        assert_eq!(row_threads(1 << 16, 1), SLOT_BITS - 1);
        // Groups are pairs of their own: one output of 1024 groups, two a block (one wave
        // of 512 blocks at five blocks an SM of 132).
        assert_eq!(row_blocks(1, 1024, 1 << 28, 4), 512);
        assert_eq!(row_blocks(3, 2, (1 << 17) + 9, 4), 3);
        for w in [1, 2, 4, 8, 16] {
            for n in 0..=(SLOTS * w * 9) {
                let (shift, rt) = (row_shift(n, w), row_threads(n, w));
                // At most `ROW_SLOTS` slots a thread, at least one.
                assert!(
                    rt <= shift && shift - rt <= ROW_SLOTS.trailing_zeros(),
                    "n {n} w {w}"
                );
                // Several groups only with `LONG_ROW_SLOTS` slots a thread.
                assert!(groups_used(n, w) == 1 || shift - rt == LONG_ROW_SLOTS.trailing_zeros());
            }
        }
    }

    #[test]
    fn accumulators_round_trip_through_words() {
        fn check<A: AccWords + core::fmt::Debug>(a: A, words: usize, same: impl Fn(A, A) -> bool) {
            assert_eq!(A::WORDS, words, "{a:?}");
            let w = a.to_words();
            assert!(w[words..].iter().all(|&x| x == 0), "{a:?}: {w:?}");
            assert!(same(A::from_words(w), a), "{a:?}");
        }
        let eq = |a: u64, b: u64| a == b;
        check(0xfedc_ba98_7654_3210u64, 2, eq);
        check(-7i64, 2, |a, b| a == b);
        check(-3i16, 1, |a, b| a == b);
        check(200u8, 1, |a, b| a == b);
        check(f32::from_bits(0x7fc0_1234), 1, |a, b| {
            a.to_bits() == b.to_bits()
        });
        check(-0.0f64, 2, |a, b| a.to_bits() == b.to_bits());
        check(true, 1, |a, b| a == b);
        check(
            ArgAcc {
                value: f64::MIN_POSITIVE,
                index: 77,
            },
            3,
            |a, b| a == b,
        );
        check(
            ArgAcc {
                value: -1.5f32,
                index: u32::MAX,
            },
            2,
            |a, b| a == b,
        );
        check(
            ArgAcc {
                value: -128i8 as i32,
                index: 5,
            },
            2,
            |a, b| a == b,
        );
    }

    #[test]
    fn tree_pairs_halves() {
        // With a non-commutative-looking record of the pairing: combine as string concat.
        #[derive(Clone, Copy)]
        struct Cat;
        impl Reduce<u64> for Cat {
            type Acc = u64;
            type Out = u64;
            fn first(&self, x: u64, _: u32) -> u64 {
                x
            }
            fn fold(&self, a: u64, x: u64, _: u32) -> u64 {
                a * 10 + x
            }
            fn combine(&self, a: u64, b: u64) -> u64 {
                a * 1000 + b
            }
            fn finish(&self, a: u64, _: u32) -> u64 {
                a
            }
            fn empty(&self) -> Option<u64> {
                None
            }
            fn placeholder(&self) -> u64 {
                0
            }
        }
        // 5 values: s = 4: v0 = c(v0, v4); s = 2: v0 = c(v0, v2), v1 = c(v1, v3);
        // s = 1: v0 = c(v0, v1).
        let mut v = [1u64, 2, 3, 4, 5];
        let r = tree(&Cat, &mut v).expect("non-empty");
        let v0 = 1_005 * 1000 + 3;
        let v1 = 2_004;
        assert_eq!(r, v0 * 1000 + v1);
        assert_eq!(tree(&Cat, &mut []), None);
    }
}
