//! Run-time dispatch (host builds only): with the feature `dispatch`, every `apply` line of
//! [`kernels!`](crate::kernels) also registers an [`Instance`] in one link-time list,
//! `INSTANCES`, so that a framework
//! that knows its op and element types only at run time can find the instantiated kernels
//! (and the CPU twin's row function for the same op code) without a match of its own.
//!
//! An instance says:
//! - its op id: the first name part of its `kernels!` line (`add` for `[add f32]`, `cast`
//!   for `[cast f32 u8]`, `add_s` for the op with a scalar on the right, `where` for
//!   `[where_ f32]`: a trailing `_` is dropped);
//! - its element types, output first, one per operand;
//! - its kernel names (the module and the family);
//! - how to build the op value from run-time [`Scalar`]s ([`FromScalars`]: `add_s` takes
//!   one, `clamp` two, `fill` one, fused ops their own), and
//! - the CPU twin's inner loop for it ([`Row`]).
//!
//! The GPU build has no such list: this module and every registration are compiled for the
//! host only, so the kernels' PTX does not change. The CPU twin's row loops
//! ([`run1`] … [`run4`]) and the op builders are here without the feature too.

use crate::apply::OpArg;
use crate::elem::{bf16, f16, Bool, ElemType};
use crate::names::KernelNames;
use crate::ops::{
    Accuracy, CastFrom, Clamp, Fill, InPlace, Lhs, Op1, Op2, Op3, Op4, Rhs, Tolerance, Update,
};
use crate::reduce::{AccOf, OutOf, Reduce, ReduceGeometry, ReduceNames, Source};
use crate::stencil::StencilNames;
use core::marker::PhantomData;

#[cfg(feature = "dispatch")]
#[doc(hidden)]
pub use linkme as __linkme;

/// Every instantiated `apply` kernel family of every kernel crate linked into the program
/// (the built-in list, and those of custom-op crates), in link order. Feature `dispatch`:
/// the list and the row functions it keeps cost about 0.7 MB of binary for the built-in
/// families, which a program that never names an op at run time need not carry.
#[cfg(feature = "dispatch")]
#[linkme::distributed_slice]
pub static INSTANCES: [Instance];

/// Every instantiated stencil family (the `stencil` lines of `kernels!`), in link order;
/// feature `dispatch`, as [`INSTANCES`].
#[cfg(feature = "dispatch")]
#[linkme::distributed_slice]
pub static STENCILS: [StencilInstance];

/// Every instantiated reduction family (the `reduce` lines of `kernels!`), in link order;
/// feature `dispatch`, as [`INSTANCES`].
#[cfg(feature = "dispatch")]
#[linkme::distributed_slice]
pub static REDUCTIONS: [ReduceInstance];

/// One instantiated reduction family: its id (the line's first name part: `sum` for
/// `[sum f32]`), input element type and count, output element type, kernels, and the CPU
/// twin's parts.
pub struct ReduceInstance {
    pub op: &'static str,
    /// The inputs' element type.
    pub elem: ElemType,
    /// How many inputs the source maps (1 for a plain reduction).
    pub inputs: usize,
    /// The output's element type (`elem`, `i64` for arg reductions, `bool` for all/any).
    pub out_elem: ElemType,
    pub names: ReduceNames,
    /// Bytes of one accumulator (the GPU's scratch per output and group).
    pub acc_size: usize,
    /// Alignment of one accumulator.
    pub acc_align: usize,
    /// Whether the column kernel serves it ([`Source::COLUMNS`]).
    pub columns: bool,
    /// Whether a reduction of nothing has a value ([`Reduce::empty`]).
    pub has_empty: fn() -> bool,
    pub group: ReduceGroup,
    pub write: ReduceWrite,
}

impl ReduceInstance {
    /// The family name, e.g. `sum_f32`.
    pub fn family(&self) -> &'static str {
        self.names
            .rows
            .strip_suffix("_r")
            .unwrap_or(self.names.rows)
    }
}

impl core::fmt::Debug for ReduceInstance {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReduceInstance")
            .field("op", &self.op)
            .field("elem", &self.elem)
            .field("inputs", &self.inputs)
            .field("out_elem", &self.out_elem)
            .field("module", &self.names.module)
            .field("family", &self.family())
            .finish()
    }
}

/// The CPU twin's value of one group of one output, type-erased
/// ([`group_value`](crate::reduce::group_value)): writes the accumulator to `acc` and
/// returns `true`, or `false` for an empty group.
///
/// # Safety
/// `inp` holds the family's `inputs` base addresses; the [`ReduceGeometry`] invariants
/// hold for them (typed as the family's element type); `acc` is valid for one aligned
/// accumulator.
pub type ReduceGroup =
    unsafe fn(g: &ReduceGeometry, inp: &[*const u8], o: u32, grp: u32, acc: *mut u8) -> bool;

/// The CPU twin's last step for one output, type-erased
/// ([`write_output`](crate::reduce::write_output)): the tree over the `g.groups`
/// accumulators at `accs`, then the output.
///
/// # Safety
/// The [`ReduceGeometry`] invariants hold for `out` (typed as the family's output type);
/// `accs` holds `g.groups` aligned accumulators (written by [`ReduceGroup`] unless
/// `g.n == 0`).
pub type ReduceWrite = unsafe fn(g: &ReduceGeometry, out: *mut u8, o: u32, accs: *mut u8);

/// Whether `S` over `T` has a value for a reduction of nothing.
pub fn reduce_has_empty<S: Source<T, K> + Default, T, const K: usize>() -> bool {
    S::default().reduction().empty().is_some()
}

/// [`ReduceGroup`] of `S` over `K` inputs of `T`.
///
/// # Safety
/// As [`ReduceGroup`].
pub unsafe fn reduce_group<S: Source<T, K> + Default, T: Copy, const K: usize>(
    g: &ReduceGeometry,
    inp: &[*const u8],
    o: u32,
    grp: u32,
    acc: *mut u8,
) -> bool {
    let inp: [*const T; K] = core::array::from_fn(|k| inp[k].cast::<T>());
    // SAFETY: the caller's contract.
    match unsafe { crate::reduce::group_value(&S::default(), g, inp, o, grp) } {
        Some(a) => {
            // SAFETY: the caller's contract.
            unsafe { acc.cast::<AccOf<S, T, K>>().write(a) };
            true
        }
        None => false,
    }
}

/// [`ReduceWrite`] of `S` over `K` inputs of `T`.
///
/// # Safety
/// As [`ReduceWrite`].
pub unsafe fn reduce_write<S: Source<T, K> + Default, T: Copy, const K: usize>(
    g: &ReduceGeometry,
    out: *mut u8,
    o: u32,
    accs: *mut u8,
) {
    let count = if g.n == 0 { 0 } else { g.groups as usize };
    // SAFETY: the caller's contract: `count` aligned, written accumulators.
    unsafe {
        let accs = core::slice::from_raw_parts_mut(accs.cast::<AccOf<S, T, K>>(), count);
        crate::reduce::write_output(
            &S::default().reduction(),
            g,
            out.cast::<OutOf<S, T, K>>(),
            o,
            accs,
        )
    }
}

/// One instantiated stencil family: its id (the line's first name part: `lap2` for
/// `[lap2 f32]`), element type (output and input), kernels, op builder and the CPU twin's
/// body.
pub struct StencilInstance {
    pub op: &'static str,
    pub elem: ElemType,
    pub names: StencilNames,
    /// Gives the stencil's [`Builder`] (`None` for a stencil without [`FromScalars`]).
    pub builder: fn() -> Option<Builder>,
    pub run: StencilRun,
}

impl StencilInstance {
    /// The family name, e.g. `lap2_f32`.
    pub fn family(&self) -> &'static str {
        self.names.s32.strip_suffix("_s").unwrap_or(self.names.s32)
    }
}

impl core::fmt::Debug for StencilInstance {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StencilInstance")
            .field("op", &self.op)
            .field("elem", &self.elem)
            .field("module", &self.names.module)
            .field("family", &self.family())
            .finish()
    }
}

/// The CPU twin of one stencil family, type-erased: the stencil body over the linear
/// indices `first..n`.
///
/// # Safety
/// `op` was built by the instance's [`Builder`]; `g`'s invariants
/// ([`StencilGeometry`](crate::stencil::StencilGeometry)) hold for `out` and `inp`, typed as
/// the instance's element type, for every index below `n`, and no other thread writes the
/// outputs of `first..n` or any input element meanwhile.
pub type StencilRun = unsafe fn(
    op: &OpValue,
    n: u64,
    g: &crate::stencil::StencilGeometry<u64>,
    out: *mut u8,
    inp: *const u8,
    first: u64,
);

/// [`StencilRun`] of stencil `S` over `T`.
///
/// # Safety
/// As [`StencilRun`], with `op` built by [`build::<S>`].
pub unsafe fn stencil_run<S: crate::stencil::Stencil<T>, T: Copy>(
    op: &OpValue,
    n: u64,
    g: &crate::stencil::StencilGeometry<u64>,
    out: *mut u8,
    inp: *const u8,
    first: u64,
) {
    // SAFETY: the caller's contract.
    unsafe { crate::stencil::stencil(op.get::<S>(), n, g, out.cast(), inp.cast(), first, 1) }
}

/// A scalar argument of an op built at run time (`add_s`'s right operand, `clamp`'s bounds,
/// `fill`'s value, a fused op's constants).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    F64(f64),
    I64(i64),
    U64(u64),
    Bool(bool),
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar {
                Scalar::$v(x.into())
            }
        }
    )*};
}
scalar_from!(f64 => F64, f32 => F64, i64 => I64, i32 => I64, u64 => U64, u32 => U64, u8 => U64, bool => Bool);

/// An element type a [`Scalar`] converts to: floats round to nearest even (as `as` does),
/// integers must be exact and in range, [`Bool`] takes `true`/`false` or 0/1.
pub trait FromScalar: Sized {
    fn from_scalar(s: Scalar) -> Option<Self>;
    /// The value as a scalar, exactly (floats as `F64`, signed integers as `I64`, unsigned
    /// ones as `U64`): what an op that runs as a program passes for it.
    fn to_scalar(&self) -> Scalar;
}

macro_rules! float_from_scalar {
    ($($t:ty),*) => {$(
        impl FromScalar for $t {
            /// Rounded once to nearest even from the value the scalar holds, by the
            /// element casts of [`Cast`](crate::ops::Cast) (16-bit types through `f32`
            /// rounded to odd). A `U64` above `i64::MAX` goes through `f64` first.
            fn from_scalar(s: Scalar) -> Option<Self> {
                Some(match s {
                    Scalar::F64(x) => <$t as CastFrom<f64>>::cast_from(x),
                    Scalar::I64(x) => <$t as CastFrom<i64>>::cast_from(x),
                    Scalar::U64(x) => match i64::try_from(x) {
                        Ok(x) => <$t as CastFrom<i64>>::cast_from(x),
                        Err(_) => <$t as CastFrom<f64>>::cast_from(x as f64),
                    },
                    Scalar::Bool(b) => <$t as CastFrom<Bool>>::cast_from(Bool::from(b)),
                })
            }
            fn to_scalar(&self) -> Scalar {
                Scalar::F64(<f64 as CastFrom<$t>>::cast_from(*self))
            }
        }
    )*};
}
float_from_scalar!(f64, f32, f16, bf16);

macro_rules! int_from_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl FromScalar for $t {
            fn to_scalar(&self) -> Scalar {
                Scalar::$v((*self).into())
            }
            fn from_scalar(s: Scalar) -> Option<Self> {
                match s {
                    Scalar::I64(x) => <$t>::try_from(x).ok(),
                    Scalar::U64(x) => <$t>::try_from(x).ok(),
                    Scalar::Bool(b) => Some(b as $t),
                    // Integral and in range (the cast saturates, the round trip checks it).
                    Scalar::F64(x) => {
                        let y = x as $t;
                        (y as f64 == x).then_some(y)
                    }
                }
            }
        }
    )*};
}
int_from_scalar!(i32 => I64, i64 => I64, u32 => U64, u8 => U64);

impl FromScalar for Bool {
    fn from_scalar(s: Scalar) -> Option<Self> {
        match s {
            Scalar::Bool(b) => Some(b.into()),
            Scalar::I64(x @ 0..=1) => Some(Bool(x as u8)),
            Scalar::U64(x @ 0..=1) => Some(Bool(x as u8)),
            _ => None,
        }
    }
    fn to_scalar(&self) -> Scalar {
        Scalar::Bool(self.get())
    }
}

/// An op's scalars, in the order of [`FromScalars::SCALARS`] (at most
/// [`ScalarList::CAPACITY`], the scalars an [`OpValue`] has room for).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalarList {
    values: [Scalar; ScalarList::CAPACITY],
    len: usize,
}

impl ScalarList {
    pub const CAPACITY: usize = 8;
    /// No scalars.
    pub const EMPTY: ScalarList = ScalarList {
        values: [Scalar::Bool(false); ScalarList::CAPACITY],
        len: 0,
    };

    /// The list of `values` (a compile-time error past [`CAPACITY`](Self::CAPACITY)).
    pub fn new<const N: usize>(values: [Scalar; N]) -> Self {
        const { assert!(N <= ScalarList::CAPACITY) };
        let mut list = ScalarList::EMPTY;
        list.values[..N].copy_from_slice(&values);
        list.len = N;
        list
    }

    pub fn as_slice(&self) -> &[Scalar] {
        &self.values[..self.len]
    }
}

/// An op that can be built from run-time scalars. The library's ops and every op made by
/// [`fused!`](macro@crate::fused) implement it; a hand-written op implements it to be reachable
/// through run-time dispatch (an op without it is still listed, but cannot be built).
pub trait FromScalars: Sized {
    /// The names of the op's scalars, in order (empty for ops without any).
    const SCALARS: &'static [&'static str] = &[];
    /// The op, or `None` when `s` has the wrong length or a value does not convert.
    fn from_scalars(s: &[Scalar]) -> Option<Self>;
    /// The op's scalars, in the order of [`SCALARS`](Self::SCALARS), each exactly as the op
    /// holds it: what the op's expression program reads where the op runs as a program (a
    /// `kernels!` line marked `@program`). Ops with scalars implement it; the default is
    /// none.
    fn to_scalars(&self) -> ScalarList {
        ScalarList::EMPTY
    }
}

impl<T: FromScalar> FromScalars for Clamp<T> {
    const SCALARS: &'static [&'static str] = &["lo", "hi"];
    fn from_scalars(s: &[Scalar]) -> Option<Self> {
        match *s {
            [lo, hi] => Some(Clamp {
                lo: T::from_scalar(lo)?,
                hi: T::from_scalar(hi)?,
            }),
            _ => None,
        }
    }
    fn to_scalars(&self) -> ScalarList {
        ScalarList::new([self.lo.to_scalar(), self.hi.to_scalar()])
    }
}
impl<T: FromScalar> FromScalars for Fill<T> {
    const SCALARS: &'static [&'static str] = &["value"];
    fn from_scalars(s: &[Scalar]) -> Option<Self> {
        match *s {
            [v] => Some(Fill(T::from_scalar(v)?)),
            _ => None,
        }
    }
    fn to_scalars(&self) -> ScalarList {
        ScalarList::new([self.0.to_scalar()])
    }
}
macro_rules! with_scalar {
    ($($op:ident),*) => {$(
        impl<Op: FromScalars, T: FromScalar> FromScalars for $op<Op, T> {
            const SCALARS: &'static [&'static str] = &["scalar"];
            fn from_scalars(s: &[Scalar]) -> Option<Self> {
                match *s {
                    [v] => Some($op { op: Op::from_scalars(&[])?, s: T::from_scalar(v)? }),
                    _ => None,
                }
            }
            fn to_scalars(&self) -> ScalarList {
                ScalarList::new([self.s.to_scalar()])
            }
        }
    )*};
}
with_scalar!(Rhs, Lhs);
macro_rules! wrapper {
    ($($op:ident),*) => {$(
        impl<Op: FromScalars> FromScalars for $op<Op> {
            const SCALARS: &'static [&'static str] = Op::SCALARS;
            fn from_scalars(s: &[Scalar]) -> Option<Self> {
                Op::from_scalars(s).map($op)
            }
            fn to_scalars(&self) -> ScalarList {
                self.0.to_scalars()
            }
        }
    )*};
}
wrapper!(Update, InPlace);

// The built-in stencils carry no scalars: run-time dispatch builds them from none.
macro_rules! no_scalars {
    ($($t:ty),*) => {$(
        impl FromScalars for $t {
            fn from_scalars(s: &[Scalar]) -> Option<Self> {
                s.is_empty().then(Self::default)
            }
        }
    )*};
}
no_scalars!(
    crate::stencil::ForwardDiff,
    crate::stencil::BackwardDiff,
    crate::stencil::Laplacian2,
    crate::stencil::Laplacian3
);
impl<const DX: i32, const DY: i32, const DZ: i32> FromScalars
    for crate::stencil::Shift<DX, DY, DZ>
{
    fn from_scalars(s: &[Scalar]) -> Option<Self> {
        s.is_empty().then_some(crate::stencil::Shift)
    }
}

/// An op value built at run time: the op's bytes, then zeros. It is what the kernels take
/// as their first parameter (an [`OpArg`]) for every op that fits (a const assertion in
/// [`build`] checks it), and what the CPU twin's [`Row`] reads the op back from.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct OpValue {
    bytes: [u8; OpValue::SIZE],
}

impl OpValue {
    /// Room for the op and the kernel parameter's padding: 8 scalars of 8 bytes.
    pub const SIZE: usize = 80;

    /// The kernel parameter bytes (an `OpArg<Op>` for the op this value was built for).
    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }

    /// # Safety
    /// `self` was written by [`build::<Op>`].
    unsafe fn get<Op: Copy>(&self) -> Op {
        // SAFETY: `build::<Op>` wrote an `Op` at offset 0, and the alignment is 16 (at
        // least `Op`'s, asserted there).
        unsafe { *(self.bytes.as_ptr() as *const Op) }
    }
}

/// Builds `Op` from `s` into a zeroed [`OpValue`] (its padding then zero, as the typed
/// launch's `OpArg` has it), or `None` as [`FromScalars::from_scalars`].
pub fn build<Op: FromScalars + Copy>(s: &[Scalar]) -> Option<OpValue> {
    const {
        assert!(size_of::<OpArg<Op>>() <= OpValue::SIZE && align_of::<Op>() <= 16);
    }
    let op = Op::from_scalars(s)?;
    let mut v = OpValue {
        bytes: [0; OpValue::SIZE],
    };
    // SAFETY: the storage is large and aligned enough for `Op` (asserted above).
    unsafe { core::ptr::write(v.bytes.as_mut_ptr() as *mut Op, op) };
    Some(v)
}

/// How an instance builds its op: [`build`] with the op's scalar names, or nothing for an
/// op without [`FromScalars`].
#[derive(Clone, Copy)]
pub struct Builder {
    pub scalars: &'static [&'static str],
    pub build: fn(&[Scalar]) -> Option<OpValue>,
    /// The scalars of an op value ([`FromScalars::to_scalars`]).
    ///
    /// # Safety
    /// The value was built by this builder's `build`.
    pub scalars_of: unsafe fn(&OpValue) -> ScalarList,
}

/// [`Builder::scalars_of`] of `Op`.
///
/// # Safety
/// `v` was written by [`build::<Op>`].
unsafe fn scalars_of<Op: FromScalars + Copy>(v: &OpValue) -> ScalarList {
    // SAFETY: the caller's.
    unsafe { v.get::<Op>() }.to_scalars()
}

#[doc(hidden)]
pub struct Probe<Op>(pub PhantomData<Op>);
#[doc(hidden)]
pub trait ViaScalars {
    fn builder(&self) -> Option<Builder>;
}
impl<Op: FromScalars + Copy> ViaScalars for Probe<Op> {
    fn builder(&self) -> Option<Builder> {
        Some(Builder {
            scalars: Op::SCALARS,
            build: build::<Op>,
            scalars_of: scalars_of::<Op>,
        })
    }
}
#[doc(hidden)]
pub trait WithoutScalars {
    fn builder(&self) -> Option<Builder> {
        None
    }
}
impl<Op> WithoutScalars for &Probe<Op> {}
/// The scalars of an op value that runs as a program (the `@program` lines of `kernels!`):
/// its [`FromScalars::to_scalars`], none for an op without [`FromScalars`] (which must then
/// be zero-sized: a compile-time error otherwise, since its value would be dropped).
#[doc(hidden)]
pub trait ViaToScalars<Op> {
    fn scalars_of(&self, op: &Op) -> ScalarList;
}
impl<Op: FromScalars> ViaToScalars<Op> for Probe<Op> {
    fn scalars_of(&self, op: &Op) -> ScalarList {
        op.to_scalars()
    }
}
#[doc(hidden)]
pub trait WithoutToScalars<Op> {
    fn scalars_of(&self, _: &Op) -> ScalarList {
        const {
            assert!(
                size_of::<Op>() == 0,
                "an @program line's op that is not zero-sized implements FromScalars: its program reads the op's scalars"
            )
        };
        ScalarList::EMPTY
    }
}
impl<Op> WithoutToScalars<Op> for &Probe<Op> {}
#[doc(hidden)]
pub trait ViaAccuracy {
    fn tolerance(&self) -> Option<Tolerance>;
}
impl<Op: Accuracy> ViaAccuracy for Probe<Op> {
    fn tolerance(&self) -> Option<Tolerance> {
        Some(Op::TOLERANCE)
    }
}
#[doc(hidden)]
pub trait WithoutAccuracy {
    fn tolerance(&self) -> Option<Tolerance> {
        None
    }
}
impl<Op> WithoutAccuracy for &Probe<Op> {}

/// The CPU twin's inner loop of one instance, type-erased: `len` elements, operand `k`'s
/// at `ptrs[k] + i * steps[k]` elements (`ptrs` beyond the arity are unused).
///
/// # Safety
/// `op` was built by this instance's [`Builder`]; for `i < len`, every output address is a
/// distinct, writable, aligned element of the instance's output type that no input
/// reaches, and every input address a readable, aligned element of its type.
pub type Row = unsafe fn(op: &OpValue, len: usize, ptrs: [*mut u8; 4], steps: [isize; 4]);

/// One instantiated `apply` family (see the module documentation).
pub struct Instance {
    /// The op id: the line's first name part, a trailing `_` dropped (`where_` is `where`).
    pub op: &'static str,
    /// Element types, output first, one per operand.
    pub types: &'static [ElemType],
    pub names: KernelNames,
    /// Gives the op's [`Builder`] (a function: the probe for [`FromScalars`] is a method call).
    pub builder: fn() -> Option<Builder>,
    /// How closely GPU and CPU results agree ([`Accuracy`]); `None` for an op without it.
    pub tolerance: fn() -> Option<Tolerance>,
    pub row: Row,
}

impl Instance {
    /// The op id (see [`Instance::op`]).
    pub fn op(&self) -> &'static str {
        self.op.strip_suffix('_').unwrap_or(self.op)
    }
    /// The family name, e.g. `add_f32` (also of a family that runs as a program).
    pub fn family(&self) -> &'static str {
        match &self.names.program {
            Some(p) => p.family,
            None => self.names.dn.strip_suffix("_dn").unwrap_or(self.names.dn),
        }
    }
    /// Number of inputs (the operands after the output).
    pub fn inputs(&self) -> usize {
        self.types.len() - 1
    }
}

impl core::fmt::Debug for Instance {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Instance")
            .field("op", &self.op())
            .field("types", &self.types)
            .field("module", &self.names.module)
            .field("family", &self.family())
            .finish()
    }
}

macro_rules! rows {
    ($($run:ident $row:ident $trait:ident $n:literal [$o:ident $(, $x:ident: $t:ident @ $k:literal)*];)*) => {$(
        /// The CPU twin's loop over one run of elements (see [`Row`] for the contract,
        /// with typed pointers). Unit steps take slices, so the loop vectorises.
        ///
        /// # Safety
        /// As [`Row`].
        #[inline(always)]
        pub unsafe fn $run<Op: $trait<$o $(, $t)*>, $o $(, $t: Copy)*>(
            op: Op,
            len: usize,
            ptrs: [*mut u8; $n],
            steps: [isize; $n],
        ) {
            // SAFETY: the caller's contract; locals, not captures, so that stores through
            // the output cannot alias the op or the steps.
            unsafe {
                if steps.iter().all(|&s| s == 1) {
                    let o = core::slice::from_raw_parts_mut(ptrs[0] as *mut $o, len);
                    $( let $x = core::slice::from_raw_parts(ptrs[$k] as *const $t, len); )*
                    for (_i, o) in o.iter_mut().enumerate() {
                        op.apply(o $(, $x[_i])*);
                    }
                } else {
                    // The step past the run's last element may leave the buffer, hence
                    // `wrapping_offset` (never dereferenced).
                    let mut o = ptrs[0] as *mut $o;
                    $( let mut $x = ptrs[$k] as *const $t; )*
                    for _ in 0..len {
                        op.apply(&mut *o $(, *$x)*);
                        o = o.wrapping_offset(steps[0]);
                        $( $x = $x.wrapping_offset(steps[$k]); )*
                    }
                }
            }
        }

        /// [`Row`] of an instance with this op and these element types.
        ///
        /// # Safety
        /// As [`Row`].
        pub unsafe fn $row<Op: $trait<$o $(, $t)*>, $o $(, $t: Copy)*>(
            op: &OpValue,
            len: usize,
            ptrs: [*mut u8; 4],
            steps: [isize; 4],
        ) {
            // SAFETY: the caller's contract.
            unsafe {
                $run(op.get::<Op>(), len, [ptrs[0] $(, ptrs[$k])*], [steps[0] $(, steps[$k])*])
            }
        }
    )*};
}

rows! {
    run1 row1 Op1 1 [T];
    run2 row2 Op2 2 [O, a: A @ 1];
    run3 row3 Op3 3 [O, a: A @ 1, b: B @ 2];
    run4 row4 Op4 4 [O, a: A @ 1, b: B @ 2, c: C @ 3];
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Add, Where};

    #[test]
    fn scalars_convert_exactly_or_refuse() {
        assert_eq!(i32::from_scalar(Scalar::I64(-5)), Some(-5));
        assert_eq!(u8::from_scalar(Scalar::I64(256)), None);
        assert_eq!(u8::from_scalar(Scalar::I64(-1)), None);
        assert_eq!(i64::from_scalar(Scalar::F64(3.0)), Some(3));
        assert_eq!(i64::from_scalar(Scalar::F64(3.5)), None);
        assert_eq!(i32::from_scalar(Scalar::F64(1e10)), None);
        assert_eq!(f32::from_scalar(Scalar::F64(0.1)), Some(0.1f32));
        assert_eq!(bf16::from_scalar(Scalar::I64(3)), Some(bf16::from_f32(3.0)));
        // Rounded once: just above a tie rounds up (half's `from_f64` drops the low bits of
        // the double first and rounded these down).
        let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(
            f16::from_scalar(Scalar::F64(above)).map(f16::to_bits),
            Some(0x3c01)
        );
        let above = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(
            bf16::from_scalar(Scalar::F64(above)).map(bf16::to_bits),
            Some(0x3f81)
        );
        // Integers round once too (2^24 + 1 is a tie in f32: even).
        assert_eq!(
            f32::from_scalar(Scalar::I64((1 << 24) + 1)),
            Some(16777216.0)
        );
        assert_eq!(
            f32::from_scalar(Scalar::I64((1 << 24) + 3)),
            Some(16777220.0)
        );
        assert_eq!(
            f16::from_scalar(Scalar::Bool(true)),
            Some(f16::from_f32(1.0))
        );
        assert_eq!(Bool::from_scalar(Scalar::I64(1)), Some(Bool::TRUE));
        assert_eq!(Bool::from_scalar(Scalar::I64(2)), None);
        assert_eq!(Bool::from_scalar(Scalar::F64(1.0)), None);
    }

    #[test]
    #[allow(clippy::needless_borrow)] // the probe needs the borrow (autoref specialisation)
    fn ops_build_from_their_scalars_only() {
        let v = build::<Clamp<f32>>(&[Scalar::F64(-1.0), Scalar::I64(2)]).expect("two bounds");
        // SAFETY: built for Clamp<f32>.
        let c: Clamp<f32> = unsafe { v.get() };
        assert_eq!((c.lo, c.hi), (-1.0, 2.0));
        assert!(build::<Clamp<f32>>(&[Scalar::F64(1.0)]).is_none());
        assert!(build::<Add>(&[Scalar::F64(1.0)]).is_none());
        assert!(build::<Rhs<Add, u8>>(&[Scalar::I64(300)]).is_none());
        assert_eq!(Rhs::<Add, u8>::SCALARS, ["scalar"]);
        // A probe finds the builder of ops with scalars and none for others.
        assert!((&Probe::<Add>(PhantomData)).builder().is_some());
        #[derive(Clone, Copy)]
        struct Plain;
        assert!((&Probe::<Plain>(PhantomData)).builder().is_none());
        assert_eq!(
            (&Probe::<Add>(PhantomData)).tolerance(),
            Some(Tolerance::Exact)
        );
        assert_eq!((&Probe::<Plain>(PhantomData)).tolerance(), None);
    }

    #[test]
    fn rows_walk_unit_and_strided_steps() {
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [10.0f32, 20.0, 30.0];
        let mut o = [0.0f32; 3];
        let v = build::<Add>(&[]).expect("add");
        let ptrs = [
            o.as_mut_ptr() as *mut u8,
            a.as_ptr() as *mut u8,
            b.as_ptr() as *mut u8,
            core::ptr::null_mut(),
        ];
        // SAFETY: 3 elements of every operand, a with step 2.
        unsafe { row3::<Add, f32, f32, f32>(&v, 3, ptrs, [1, 2, 1, 0]) };
        assert_eq!(o, [11.0, 23.0, 35.0]);
        let cond = [Bool::TRUE, Bool::FALSE, Bool::TRUE];
        let v = build::<Where>(&[]).expect("where");
        let ptrs = [
            o.as_mut_ptr() as *mut u8,
            cond.as_ptr() as *mut u8,
            a.as_ptr() as *mut u8,
            b.as_ptr() as *mut u8,
        ];
        // SAFETY: 3 elements of every operand, unit steps.
        unsafe { row4::<Where, f32, Bool, f32, f32>(&v, 3, ptrs, [1; 4]) };
        assert_eq!(o, [1.0, 20.0, 3.0]);
    }
}

#[cfg(all(test, feature = "builtin", feature = "dispatch"))]
mod builtin_tests {
    use super::*;

    fn find(op: &str, types: &[ElemType]) -> Option<&'static Instance> {
        INSTANCES.iter().find(|i| i.op() == op && i.types == types)
    }

    #[test]
    fn every_builtin_family_is_listed_once_with_its_names() {
        use ElemType::*;
        let add = find("add", &[F32, F32, F32]).expect("add f32");
        assert_eq!(
            (add.family(), add.names.module, add.names.vec),
            ("add_f32", "gpu-kernels", "add_f32_v")
        );
        let cast = find("cast", &[U8, BF16]).expect("cast u8 from bf16");
        assert_eq!(cast.family(), "cast_u8_bf16");
        let w = find("where", &[F16, Bool, F16, F16]).expect("where f16");
        assert_eq!(w.family(), "where__f16");
        let mixed = find("mul", &[BF16, BF16, F32]).expect("mixed mul");
        assert_eq!(mixed.inputs(), 2);
        let b = (find("clamp", &[I32, I32]).expect("clamp").builder)().expect("clamp builds");
        assert_eq!(b.scalars, ["lo", "hi"]);
        let b = (find("axpby", &[F64, F64, F64]).expect("axpby").builder)().expect("axpby");
        assert_eq!(b.scalars, ["a", "b"]);
        let sin = find("sin", &[F32, F32]).expect("sin");
        assert_eq!((sin.tolerance)(), Some(crate::ops::Tolerance::Ulp(2)));
        assert_eq!((add.tolerance)(), Some(crate::ops::Tolerance::Exact));
        // Family names are unique within the module, and every apply family is listed: 617
        // families, 59 of them programs (`@program` lines: no kernels in the image, which
        // holds the other 558), 40 stencils (10 stencils × 4 float types) and 86 reductions
        // (6 ops × 8 numeric types, 2 × 9 types (all, any), 3 × 4 float types, 2 maps × 4
        // float types).
        let mut fams: std::vec::Vec<_> = INSTANCES
            .iter()
            .map(|i| (i.names.module, i.family()))
            .collect();
        fams.sort();
        let n = fams.len();
        fams.dedup();
        assert_eq!(fams.len(), n, "a family is listed twice");
        assert_eq!(n, 617 - 40 - 86);
        let programs = INSTANCES
            .iter()
            .filter(|i| i.names.program.is_some())
            .count();
        assert_eq!(programs, 59);
        // A program family whose op carries scalars: its program reads the op's.
        let clamp = find("clamp", &[F16, F16]).expect("clamp f16");
        assert_eq!(
            (clamp.family(), clamp.names.program.map(|p| p.op)),
            ("clamp_f16", Some("clamp"))
        );
        let fma = find("fma", &[F32, F32, F32, F32]).expect("fma f32");
        assert_eq!(
            (fma.family(), fma.names.program.map(|p| p.op)),
            ("fma_f32", Some("fma"))
        );
        let mut reds: std::vec::Vec<_> = REDUCTIONS.iter().map(|r| r.family()).collect();
        reds.sort();
        reds.dedup();
        assert_eq!(reds.len(), 86);
        let sum = REDUCTIONS
            .iter()
            .find(|r| r.op == "sum" && r.elem == BF16)
            .expect("sum bf16");
        assert_eq!(
            (sum.family(), sum.acc_size, (sum.has_empty)()),
            ("sum_bf16", 4, true)
        );
        let amax = REDUCTIONS.iter().find(|r| r.op == "amax").expect("amax");
        assert!(!(amax.has_empty)());
        let arg = REDUCTIONS
            .iter()
            .find(|r| r.op == "argmax" && r.elem == F64)
            .expect("argmax f64");
        assert_eq!(
            (arg.inputs, arg.out_elem, arg.acc_size),
            (1, ElemType::I64, 16)
        );
        let all = REDUCTIONS
            .iter()
            .find(|r| r.op == "all" && r.elem == ElemType::Bool)
            .expect("all bool");
        assert_eq!(
            (all.out_elem, all.acc_size, (all.has_empty)()),
            (ElemType::Bool, 1, true)
        );
        let dot = REDUCTIONS
            .iter()
            .find(|r| r.op == "sqdiff" && r.elem == BF16)
            .expect("sqdiff bf16");
        assert_eq!((dot.inputs, dot.out_elem, dot.acc_size), (2, BF16, 4));
    }
}
