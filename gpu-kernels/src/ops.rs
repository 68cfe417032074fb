//! The op library. Each op is defined once here and used by the GPU kernels and the CPU
//! twin alike.
//!
//! An op is a small `#[repr(C)]` value (zero-sized, or carrying its scalars such as
//! [`Clamp`]'s bounds) passed to the kernel by value. Outputs are read-write, inputs
//! read-only, as in THCApply: an op gets `&mut` to its output element, so update ops such
//! as [`Update`] read it, map ops only write it.

pub use crate::cast::CastFrom;
use crate::elem::Bool;
use crate::math::{Float, Num, Signed};
use crate::narrow::{bf16, f16};

/// In-place op on one operand: `apply1`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an in-place op over `{T}` (Op1, for apply1)",
    note = "an op with one input is an Op2 (apply2), two inputs an Op3 (apply3), three inputs an Op4 (apply4); an op on its output alone is an Op1 (apply1)"
)]
pub trait Op1<T>: Copy + Send + Sync {
    fn apply(&self, x: &mut T);
}
/// `out = f(a)`: `apply2`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an op with one input over (out `{O}`, input `{A}`) (Op2, for apply2)",
    note = "an op with one input is an Op2 (apply2), two inputs an Op3 (apply3), three inputs an Op4 (apply4); an op on its output alone is an Op1 (apply1)"
)]
pub trait Op2<O, A>: Copy + Send + Sync {
    /// Whether the op reads its output element before writing it (`out += a`). Map ops
    /// only write, so vectorised kernels skip loading the output.
    const READS_OUT: bool = false;
    fn apply(&self, out: &mut O, a: A);
    /// `apply` on `E` consecutive elements (the vectorised variant). An op may override it
    /// with a whole-vector form that gives the same result on every lane.
    #[inline(always)]
    fn apply_lanes<const E: usize>(&self, out: &mut [O; E], a: &[A; E])
    where
        A: Copy,
    {
        let mut j = 0;
        while j < E {
            self.apply(&mut out[j], a[j]);
            j += 1;
        }
    }
}
/// `out = f(a, b)`: `apply3`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an op with two inputs over (out `{O}`, inputs `{A}`, `{B}`) (Op3, for apply3)",
    note = "an op with one input is an Op2 (apply2), two inputs an Op3 (apply3), three inputs an Op4 (apply4); an op on its output alone is an Op1 (apply1)"
)]
pub trait Op3<O, A, B>: Copy + Send + Sync {
    /// Whether the op reads its output element before writing it (`out += a`). Map ops
    /// only write, so vectorised kernels skip loading the output.
    const READS_OUT: bool = false;
    fn apply(&self, out: &mut O, a: A, b: B);
    /// `apply` on `E` consecutive elements (the vectorised variant). An op may override it
    /// with a whole-vector form that gives the same result on every lane (`u8` add and
    /// subtract: four bytes per 32-bit operation).
    #[inline(always)]
    fn apply_lanes<const E: usize>(&self, out: &mut [O; E], a: &[A; E], b: &[B; E])
    where
        A: Copy,
        B: Copy,
    {
        let mut j = 0;
        while j < E {
            self.apply(&mut out[j], a[j], b[j]);
            j += 1;
        }
    }
}
/// `out = f(a, b, c)`: `apply4`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an op with three inputs over (out `{O}`, inputs `{A}`, `{B}`, `{C}`) (Op4, for apply4)",
    note = "an op with one input is an Op2 (apply2), two inputs an Op3 (apply3), three inputs an Op4 (apply4); an op on its output alone is an Op1 (apply1)"
)]
pub trait Op4<O, A, B, C>: Copy + Send + Sync {
    /// Whether the op reads its output element before writing it (`out += a`). Map ops
    /// only write, so vectorised kernels skip loading the output.
    const READS_OUT: bool = false;
    fn apply(&self, out: &mut O, a: A, b: B, c: C);
}

/// How closely GPU and CPU results of an op must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// Correctly rounded on both sides: bit-identical.
    Exact,
    /// Each side within this many ulp of an f64 reference.
    Ulp(u32),
}

/// Ops whose GPU and CPU results may differ: their documented bound.
pub trait Accuracy {
    const TOLERANCE: Tolerance = Tolerance::Exact;
}

macro_rules! zst_op {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;
        #[cfg(not(target_arch = "nvptx64"))]
        impl $crate::dispatch::FromScalars for $name {
            fn from_scalars(s: &[$crate::dispatch::Scalar]) -> Option<Self> {
                s.is_empty().then_some($name)
            }
        }
    )*};
}

zst_op!(
    /// `a + b`
    Add, /// `a - b`
    Sub, /// `a * b`
    Mul, /// `a / b` (integer division by zero gives 0)
    Div, /// NaN-propagating `min(a, b)`
    Min, /// NaN-propagating `max(a, b)`
    Max, /// `a ^ b` (floats)
    Pow, /// `a == b`
    Eq, /// `a != b`
    Ne, /// `a < b`
    Lt, /// `a <= b`
    Le, /// `a > b`
    Gt, /// `a >= b`
    Ge, /// `-a`
    Neg, /// `|a|`
    Abs, /// `max(a, 0)`
    Relu, /// `sqrt(a)`, correctly rounded
    Sqrt, /// `1 / sqrt(a)`
    Rsqrt, /// `e^a`
    Exp, /// natural logarithm
    Log, /// `sin(a)`
    Sin, /// `cos(a)`
    Cos, /// `tanh(a)`
    Tanh, /// `1 / (1 + e^-a)`
    Sigmoid, /// `a * b + c`, fused for floats
    Fma, /// `if cond { a } else { b }`
    Where, /// `a` converted to the output type (Rust `as` semantics; to bool: `a != 0`)
    Cast,
);

macro_rules! binary {
    ($bound:ident: $($op:ident => |$a:ident, $b:ident| $e:expr $(, lanes $lanes:ident)?);* $(;)?) => {$(
        impl<T: $bound> Op3<T, T, T> for $op {
            #[inline(always)]
            fn apply(&self, out: &mut T, $a: T, $b: T) { *out = $e; }
            $(
            #[inline(always)]
            fn apply_lanes<const E: usize>(&self, out: &mut [T; E], a: &[T; E], b: &[T; E]) {
                *out = T::$lanes(a, b);
            }
            )?
        }
    )*};
}
binary!(Num: Add => |a, b| a.add(b), lanes add_lanes; Sub => |a, b| a.sub(b), lanes sub_lanes;
        Mul => |a, b| a.mul(b); Div => |a, b| a.div(b); Min => |a, b| a.min(b);
        Max => |a, b| a.max(b));
binary!(Float: Pow => |a, b| a.powf(b));

/// The mixed-type ops frameworks use most: a 16-bit input with an `f32` one, computed in
/// `f32`, the result `f32` or the 16-bit type (rounded once).
macro_rules! mixed {
    ($($op:ident => $f:ident),*) => { $( mixed!(@one $op $f f16); mixed!(@one $op $f bf16); )* };
    (@one $op:ident $f:ident $h:ident) => {
        impl Op3<f32, $h, f32> for $op {
            #[inline(always)]
            fn apply(&self, out: &mut f32, a: $h, b: f32) { *out = a.to_acc().$f(b); }
        }
        impl Op3<$h, $h, f32> for $op {
            #[inline(always)]
            fn apply(&self, out: &mut $h, a: $h, b: f32) { *out = $h::from_acc(a.to_acc().$f(b)); }
        }
    };
}
mixed!(Add => add, Sub => sub, Mul => mul, Div => div);

macro_rules! compare {
    ($($op:ident => $cmp:tt),* $(,)?) => {$(
        impl<T: Num> Op3<Bool, T, T> for $op {
            #[inline(always)]
            fn apply(&self, out: &mut Bool, a: T, b: T) {
                *out = Bool::from(a.to_acc() $cmp b.to_acc());
            }
        }
        impl Accuracy for $op {}
    )*};
}
compare!(Eq => ==, Ne => !=, Lt => <, Le => <=, Gt => >, Ge => >=);

macro_rules! unary {
    ($bound:ident: $($op:ident => |$a:ident| $e:expr),* $(,)?) => {$(
        impl<T: $bound> Op2<T, T> for $op {
            #[inline(always)]
            fn apply(&self, out: &mut T, $a: T) { *out = $e; }
        }
    )*};
}
unary!(Signed: Neg => |a| a.neg(), Abs => |a| a.abs());
unary!(Num: Relu => |a| if a.is_nan() { a } else { a.max(T::ZERO) });

/// Float ops computed in the op math type ([`Num::Acc`]) and rounded once: `x` is the
/// input converted, `one` the type's 1.
macro_rules! unary_acc {
    ($($op:ident => |$a:ident, $one:ident| $e:expr),* $(,)?) => {$(
        impl<T: Float<Acc: Float>> Op2<T, T> for $op {
            #[inline(always)]
            fn apply(&self, out: &mut T, a: T) {
                let ($a, $one) = (a.to_acc(), <T::Acc as Num>::ONE);
                *out = T::from_acc($e);
            }
        }
    )*};
}
unary_acc!(Sqrt => |a, _one| a.sqrt(), Rsqrt => |a, one| one.div(a.sqrt()), Exp => |a, _one| a.exp(),
           Log => |a, _one| a.ln(), Sin => |a, _one| a.sin(), Cos => |a, _one| a.cos(),
           Tanh => |a, _one| a.tanh(), Sigmoid => |a, one| one.div(one.add(a.neg().exp())));

macro_rules! accuracy {
    ($($op:ident = $t:expr),* $(,)?) => {$( impl Accuracy for $op { const TOLERANCE: Tolerance = $t; } )*};
}
accuracy!(
    Add = Tolerance::Exact,
    Sub = Tolerance::Exact,
    Mul = Tolerance::Exact,
    Div = Tolerance::Exact,
    Min = Tolerance::Exact,
    Max = Tolerance::Exact,
    Neg = Tolerance::Exact,
    Abs = Tolerance::Exact,
    Relu = Tolerance::Exact,
    Sqrt = Tolerance::Exact,
    Rsqrt = Tolerance::Exact,
    Fma = Tolerance::Exact,
    Where = Tolerance::Exact,
    Cast = Tolerance::Exact,
    Exp = Tolerance::Ulp(2),
    Log = Tolerance::Ulp(2),
    Sin = Tolerance::Ulp(2),
    Cos = Tolerance::Ulp(2),
    Tanh = Tolerance::Ulp(2),
    Pow = Tolerance::Ulp(2),
    Sigmoid = Tolerance::Ulp(3)
);

impl<T: Num> Op4<T, T, T, T> for Fma {
    #[inline(always)]
    fn apply(&self, out: &mut T, a: T, b: T, c: T) {
        *out = a.mul_add(b, c);
    }
}

impl<T: Copy> Op4<T, Bool, T, T> for Where {
    #[inline(always)]
    fn apply(&self, out: &mut T, cond: Bool, a: T, b: T) {
        *out = if cond.get() { a } else { b };
    }
}

/// `clamp(a, lo, hi)`: NaN stays NaN.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Clamp<T> {
    pub lo: T,
    pub hi: T,
}
impl<T: Num> Op2<T, T> for Clamp<T> {
    #[inline(always)]
    fn apply(&self, out: &mut T, a: T) {
        *out = if a.is_nan() {
            a
        } else {
            a.max(self.lo).min(self.hi)
        };
    }
}
impl<T> Accuracy for Clamp<T> {}

/// Writes a constant.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fill<T>(pub T);
impl<T: Copy + Send + Sync> Op1<T> for Fill<T> {
    #[inline(always)]
    fn apply(&self, x: &mut T) {
        *x = self.0;
    }
}
impl<T> Accuracy for Fill<T> {}

/// A binary op with a run-time scalar on the right: `a + 7.0` is `Rhs { op: Add, s: 7.0 }`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rhs<Op, T> {
    pub op: Op,
    pub s: T,
}
impl<Op: Op3<O, A, T>, O, A, T: Copy + Send + Sync> Op2<O, A> for Rhs<Op, T> {
    const READS_OUT: bool = Op::READS_OUT;
    #[inline(always)]
    fn apply(&self, out: &mut O, a: A) {
        self.op.apply(out, a, self.s);
    }
    #[inline(always)]
    fn apply_lanes<const E: usize>(&self, out: &mut [O; E], a: &[A; E])
    where
        A: Copy,
    {
        self.op.apply_lanes(out, a, &[self.s; E]);
    }
}
impl<Op: Accuracy, T> Accuracy for Rhs<Op, T> {
    const TOLERANCE: Tolerance = Op::TOLERANCE;
}

/// A binary op with a run-time scalar on the left: `1.0 / a` is `Lhs { op: Div, s: 1.0 }`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Lhs<Op, T> {
    pub op: Op,
    pub s: T,
}
impl<Op: Op3<O, T, B>, O, B, T: Copy + Send + Sync> Op2<O, B> for Lhs<Op, T> {
    const READS_OUT: bool = Op::READS_OUT;
    #[inline(always)]
    fn apply(&self, out: &mut O, b: B) {
        self.op.apply(out, self.s, b);
    }
    #[inline(always)]
    fn apply_lanes<const E: usize>(&self, out: &mut [O; E], b: &[B; E])
    where
        B: Copy,
    {
        self.op.apply_lanes(out, &[self.s; E], b);
    }
}
impl<Op: Accuracy, T> Accuracy for Lhs<Op, T> {
    const TOLERANCE: Tolerance = Op::TOLERANCE;
}

/// `out = op(out, a)`: the output is read and written (`out += a`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Update<Op>(pub Op);
impl<Op: Op3<T, T, T>, T: Copy> Op2<T, T> for Update<Op> {
    const READS_OUT: bool = true;
    #[inline(always)]
    fn apply(&self, out: &mut T, a: T) {
        let cur = *out;
        self.0.apply(out, cur, a);
    }
    #[inline(always)]
    fn apply_lanes<const E: usize>(&self, out: &mut [T; E], a: &[T; E]) {
        let cur = *out;
        self.0.apply_lanes(out, &cur, a);
    }
}
impl<Op: Accuracy> Accuracy for Update<Op> {
    const TOLERANCE: Tolerance = Op::TOLERANCE;
}

/// `x = op(x)` in place, for any one-input op (`a = sin(a)`, `a *= 2`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InPlace<Op>(pub Op);
impl<Op: Op2<T, T>, T: Copy> Op1<T> for InPlace<Op> {
    #[inline(always)]
    fn apply(&self, x: &mut T) {
        let cur = *x;
        self.0.apply(x, cur);
    }
}
impl<Op: Accuracy> Accuracy for InPlace<Op> {
    const TOLERANCE: Tolerance = Op::TOLERANCE;
}

impl<O: CastFrom<A>, A> Op2<O, A> for Cast {
    #[inline(always)]
    fn apply(&self, out: &mut O, a: A) {
        *out = O::cast_from(a);
    }
}
