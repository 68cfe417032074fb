//! Fused expressions: a whole elementwise expression over several operands and run-time
//! scalars becomes **one** op type, instantiated by the same `apply` kernels as every
//! other op (any layout, broadcasting, every variant) and run by the CPU twin unchanged.
//! `c = (a / s) * (b / t)` is one kernel that reads `a` and `b` once and writes `c` once,
//! with no temporaries.
//!
//! [`fused!`](macro@crate::fused) declares such ops:
//!
//! ```
//! gpu_kernels::fused! {
//!     /// `out = alpha * x + y`
//!     pub struct MyAxpy<T: Float>(alpha) = |x, y| alpha * x + y;
//!     /// `a += 1/a + 2ab`, in place: `mut a;` names the output, which is read too.
//!     pub struct MyUpdate<T: Float>() = |mut a; b| a + 1.0 / a + 2.0 * a * b;
//! }
//! use gpu_kernels::ops::{Op2, Op3};
//! let mut out = 0.0f32;
//! MyAxpy::new(2.0f32).apply(&mut out, 3.0, 1.0);
//! assert_eq!(out, 7.0);
//! let mut a = 2.0f64;
//! MyUpdate::new().apply(&mut a, 0.25);
//! assert_eq!(a, 2.0 + 0.5 + 1.0);
//! ```
//!
//! - `struct Name<T: Bound>(s1, s2, …)` — the scalars, each of type `T`, become `#[repr(C)]`
//!   fields: run-time kernel parameters, set with `Name::new(s1, s2, …)`. `Bound` is
//!   [`Num`], [`Signed`] or [`Float`] (what the expression needs).
//! - `|x, y, z|` — one to three inputs: the op is an [`Op2`], [`Op3`] or [`Op4`] over
//!   `T` (`out = expr`), launched with `apply2` … `apply4`.
//! - `|mut o; x, …|` — the output is read as well (`o = expr(o, …)`, in place without a
//!   temporary); zero to three inputs: [`Op1`] … [`Op4`] with `READS_OUT`.
//! - The expression is evaluated in the element type's op math type
//!   ([`Num::Acc`]: `f32` for `f16` and `bf16`) and rounded once.
//! - In the expression: `+ - * /` and unary `-` on operands, scalars and literals
//!   (`2.0 * x`, `x / 3`; a literal is converted to `T` as Rust's `as` does), and the
//!   functions of [`fns`]: `sqrt`, `exp`, `ln`, `sin`, `cos`, `tanh`, `pow`, `sigmoid`,
//!   `relu`, `abs`, `min`, `max`, `fma`, `clamp`, and `select(cond, a, b)` with the
//!   comparisons `lt`, `le`, `gt`, `ge`, `eq`, `ne`.
//!
//! Mistakes are compile errors. More than three inputs:
//!
//! ```compile_fail
//! gpu_kernels::fused! {
//!     pub struct Five<T: Float>() = |a, b, c, d| a + b + c + d;
//! }
//! ```
//!
//! An expression that is not a value of the element type (here a `bool`):
//!
//! ```compile_fail,E0308
//! gpu_kernels::fused! {
//!     pub struct Less<T: Float>() = |a, b| gpu_kernels::fused::fns::lt(a, b);
//! }
//! ```
//!
//! A function the bound does not provide (`sqrt` needs `Float`):
//!
//! ```compile_fail,E0277
//! gpu_kernels::fused! {
//!     pub struct Root<T: Num>() = |a| sqrt(a);
//! }
//! ```
//!
//! Using an op with the wrong number of operands (an op with two inputs is an `Op3`):
//!
//! ```compile_fail,E0277
//! use gpu_kernels::ops::{Op2, Relu};
//! gpu_kernels::fused! {
//!     pub struct Sum<T: Num>() = |a, b| a + b;
//! }
//! fn needs_op2<Op: Op2<f32, f32>>(_: Op) {}
//! needs_op2(Sum::<f32>::new());
//! ```
//!
//! [`Num`]: crate::math::Num
//! [`Signed`]: crate::math::Signed
//! [`Float`]: crate::math::Float
//! [`Op1`]: crate::ops::Op1
//! [`Op2`]: crate::ops::Op2
//! [`Op3`]: crate::ops::Op3
//! [`Op4`]: crate::ops::Op4

use crate::math::{Num, Signed};
use core::ops::{Add, Div, Mul, Neg, Sub};

/// A value inside a fused expression. Its operators are the element type's [`Num`]
/// methods: wrapping for integers (division by zero gives 0), IEEE for floats.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct V<T>(pub T);

macro_rules! binop {
    ($($tr:ident $f:ident),*) => {$(
        impl<T: Num> $tr for V<T> {
            type Output = V<T>;
            #[inline(always)]
            fn $f(self, o: V<T>) -> V<T> { V(self.0.$f(o.0)) }
        }
        // A literal on either side: `2.0 * x`, `x / 3`.
        impl<T: Num> $tr<f64> for V<T> {
            type Output = V<T>;
            #[inline(always)]
            fn $f(self, o: f64) -> V<T> { V(self.0.$f(T::cast_from(o))) }
        }
        impl<T: Num> $tr<V<T>> for f64 {
            type Output = V<T>;
            #[inline(always)]
            fn $f(self, o: V<T>) -> V<T> { V(T::cast_from(self).$f(o.0)) }
        }
        impl<T: Num> $tr<i32> for V<T> {
            type Output = V<T>;
            #[inline(always)]
            fn $f(self, o: i32) -> V<T> { V(self.0.$f(T::cast_from(o))) }
        }
        impl<T: Num> $tr<V<T>> for i32 {
            type Output = V<T>;
            #[inline(always)]
            fn $f(self, o: V<T>) -> V<T> { V(T::cast_from(self).$f(o.0)) }
        }
    )*};
}
binop!(Add add, Sub sub, Mul mul, Div div);

impl<T: Signed> Neg for V<T> {
    type Output = V<T>;
    #[inline(always)]
    fn neg(self) -> V<T> {
        V(Signed::neg(self.0))
    }
}

/// Functions usable inside [`fused!`](macro@crate::fused) expressions (in scope there).
pub mod fns {
    use super::V;
    use crate::math::{Float, Num, Signed};

    macro_rules! float_fn {
        ($($(#[$m:meta])* $name:ident => $method:ident),*) => {$(
            $(#[$m])*
            #[inline(always)]
            pub fn $name<T: Float>(x: V<T>) -> V<T> { V(x.0.$method()) }
        )*};
    }
    float_fn!(
        /// Correctly rounded square root.
        sqrt => sqrt,
        /// `e^x`.
        exp => exp,
        /// Natural logarithm.
        ln => ln,
        /// Sine.
        sin => sin,
        /// Cosine.
        cos => cos,
        /// Hyperbolic tangent.
        tanh => tanh
    );
    /// `x^e`.
    #[inline(always)]
    pub fn pow<T: Float>(x: V<T>, e: V<T>) -> V<T> {
        V(x.0.powf(e.0))
    }
    /// `1 / (1 + e^-x)`, as the [`Sigmoid`](crate::ops::Sigmoid) op computes it.
    #[inline(always)]
    pub fn sigmoid<T: Float>(x: V<T>) -> V<T> {
        V(T::ONE.div(T::ONE.add(x.0.neg().exp())))
    }
    /// `max(x, 0)`; NaN stays NaN.
    #[inline(always)]
    pub fn relu<T: Num>(x: V<T>) -> V<T> {
        V(if x.0.is_nan() { x.0 } else { x.0.max(T::ZERO) })
    }
    /// `|x|`.
    #[inline(always)]
    pub fn abs<T: Signed>(x: V<T>) -> V<T> {
        V(x.0.abs())
    }
    /// NaN-propagating minimum.
    #[inline(always)]
    pub fn min<T: Num>(a: V<T>, b: V<T>) -> V<T> {
        V(a.0.min(b.0))
    }
    /// NaN-propagating maximum.
    #[inline(always)]
    pub fn max<T: Num>(a: V<T>, b: V<T>) -> V<T> {
        V(a.0.max(b.0))
    }
    /// `a * b + c` with one rounding (floats).
    #[inline(always)]
    pub fn fma<T: Num>(a: V<T>, b: V<T>, c: V<T>) -> V<T> {
        V(a.0.mul_add(b.0, c.0))
    }
    /// `min(max(x, lo), hi)`; NaN stays NaN.
    #[inline(always)]
    pub fn clamp<T: Num>(x: V<T>, lo: V<T>, hi: V<T>) -> V<T> {
        V(if x.0.is_nan() {
            x.0
        } else {
            x.0.max(lo.0).min(hi.0)
        })
    }
    /// `if cond { a } else { b }`.
    #[inline(always)]
    pub fn select<T>(cond: bool, a: V<T>, b: V<T>) -> V<T> {
        if cond {
            a
        } else {
            b
        }
    }
    macro_rules! cmp_fn {
        ($($name:ident => $op:tt),*) => {$(
            #[doc = concat!("`a ", stringify!($op), " b`, for [`select`].")]
            #[inline(always)]
            pub fn $name<T: Num>(a: V<T>, b: V<T>) -> bool { a.0 $op b.0 }
        )*};
    }
    cmp_fn!(lt => <, le => <=, gt => >, ge => >=, eq => ==, ne => !=);
}

#[doc(hidden)]
pub use core::marker::PhantomData as __PhantomData;

/// Declares fused elementwise ops; see the [module documentation](mod@crate::fused).
#[macro_export]
macro_rules! fused {
    () => {};
    // `|mut o; inputs|`: the output is read as well.
    ($(#[$m:meta])* $vis:vis struct $name:ident<$T:ident: $bound:ident>($($s:ident),* $(,)?)
     = |mut $o:ident ; $($a:ident),*| $e:expr; $($rest:tt)*) => {
        $crate::fused!(@struct [$(#[$m])*] $vis $name $T [$($s)*]);
        $crate::fused!(@impl $name $T $bound [$($s)*] [mut $o ; $($a),*] $e);
        $crate::fused!($($rest)*);
    };
    // `|inputs|`: the output is only written.
    ($(#[$m:meta])* $vis:vis struct $name:ident<$T:ident: $bound:ident>($($s:ident),* $(,)?)
     = |$($a:ident),*| $e:expr; $($rest:tt)*) => {
        $crate::fused!(@struct [$(#[$m])*] $vis $name $T [$($s)*]);
        $crate::fused!(@impl $name $T $bound [$($s)*] [$($a),*] $e);
        $crate::fused!($($rest)*);
    };
    (@struct [$($attr:tt)*] $vis:vis $name:ident $T:ident [$($s:ident)*]) => {
        $($attr)*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        $vis struct $name<$T> {
            $(pub $s: $T,)*
            _elem: $crate::fused::__PhantomData<$T>,
        }
        impl<$T> $name<$T> {
            /// The op with these scalars (kernel parameters).
            #[allow(clippy::new_without_default)]
            pub const fn new($($s: $T),*) -> Self {
                $name { $($s,)* _elem: $crate::fused::__PhantomData }
            }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        impl<$T: $crate::dispatch::FromScalar> $crate::dispatch::FromScalars for $name<$T> {
            const SCALARS: &'static [&'static str] = &[$(stringify!($s)),*];
            #[allow(unused_variables)]
            fn from_scalars(s: &[$crate::dispatch::Scalar]) -> Option<Self> {
                match *s {
                    [$($s),*] => Some($name::new($(<$T as $crate::dispatch::FromScalar>::from_scalar($s)?),*)),
                    _ => None,
                }
            }
            fn to_scalars(&self) -> $crate::dispatch::ScalarList {
                $crate::dispatch::ScalarList::new([$(<$T as $crate::dispatch::FromScalar>::to_scalar(&self.$s)),*])
            }
        }
        impl<$T> $crate::ops::Accuracy for $name<$T> {
            /// GPU and CPU evaluate the same expression; libdevice functions and the
            /// compiler's contraction choices may differ in the last bits.
            const TOLERANCE: $crate::ops::Tolerance = $crate::ops::Tolerance::Ulp(4);
        }
    };
    // `|mut o; inputs|`: the output is read.
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [mut $o:ident ; ] $e:expr) => {
        impl<$T: $crate::math::$bound<Acc: $crate::math::$bound>> $crate::ops::Op1<$T> for $name<$T> {
            #[inline(always)]
            fn apply(&self, out: &mut $T) {
                $crate::fused!(@eval self $T [$($s)*] [$o = *out] out $e)
            }
        }
    };
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [mut $o:ident ; $a:ident] $e:expr) => {
        impl<$T: $crate::math::$bound<Acc: $crate::math::$bound>> $crate::ops::Op2<$T, $T> for $name<$T> {
            const READS_OUT: bool = true;
            #[inline(always)]
            fn apply(&self, out: &mut $T, $a: $T) {
                $crate::fused!(@eval self $T [$($s)*] [$o = *out, $a = $a] out $e)
            }
        }
    };
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [mut $o:ident ; $a:ident, $b:ident] $e:expr) => {
        impl<$T: $crate::math::$bound<Acc: $crate::math::$bound>> $crate::ops::Op3<$T, $T, $T> for $name<$T> {
            const READS_OUT: bool = true;
            #[inline(always)]
            fn apply(&self, out: &mut $T, $a: $T, $b: $T) {
                $crate::fused!(@eval self $T [$($s)*] [$o = *out, $a = $a, $b = $b] out $e)
            }
        }
    };
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [mut $o:ident ; $a:ident, $b:ident, $c:ident] $e:expr) => {
        impl<$T: $crate::math::$bound<Acc: $crate::math::$bound>> $crate::ops::Op4<$T, $T, $T, $T> for $name<$T> {
            const READS_OUT: bool = true;
            #[inline(always)]
            fn apply(&self, out: &mut $T, $a: $T, $b: $T, $c: $T) {
                $crate::fused!(@eval self $T [$($s)*] [$o = *out, $a = $a, $b = $b, $c = $c] out $e)
            }
        }
    };
    // `|inputs|`: the output is only written.
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [$a:ident] $e:expr) => {
        impl<$T: $crate::math::$bound<Acc: $crate::math::$bound>> $crate::ops::Op2<$T, $T> for $name<$T> {
            #[inline(always)]
            fn apply(&self, out: &mut $T, $a: $T) {
                $crate::fused!(@eval self $T [$($s)*] [$a = $a] out $e)
            }
        }
    };
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [$a:ident, $b:ident] $e:expr) => {
        impl<$T: $crate::math::$bound<Acc: $crate::math::$bound>> $crate::ops::Op3<$T, $T, $T> for $name<$T> {
            #[inline(always)]
            fn apply(&self, out: &mut $T, $a: $T, $b: $T) {
                $crate::fused!(@eval self $T [$($s)*] [$a = $a, $b = $b] out $e)
            }
        }
    };
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [$a:ident, $b:ident, $c:ident] $e:expr) => {
        impl<$T: $crate::math::$bound<Acc: $crate::math::$bound>> $crate::ops::Op4<$T, $T, $T, $T> for $name<$T> {
            #[inline(always)]
            fn apply(&self, out: &mut $T, $a: $T, $b: $T, $c: $T) {
                $crate::fused!(@eval self $T [$($s)*] [$a = $a, $b = $b, $c = $c] out $e)
            }
        }
    };
    (@impl $name:ident $T:ident $bound:ident [$($s:ident)*] [$($args:tt)*] $e:expr) => {
        ::core::compile_error!(concat!(
            "fused!: `", stringify!($name), "` takes `|", stringify!($($args)*),
            "|`: an op has one to three inputs (`|x|`, `|x, y|`, `|x, y, z|`: apply2 to apply4), \
             or names its output first when it reads it (`|mut o; x, …|`, zero to three inputs)"
        ));
    };
    (@eval $self:ident $T:ident [$($s:ident)*] [$($v:ident = $x:expr),*] $out:ident $e:expr) => {{
        #[allow(unused_imports)]
        use $crate::fused::fns::*;
        // Inputs and scalars convert to the op math type once; the result rounds once.
        $( let $s = $crate::fused::V($crate::math::Num::to_acc($self.$s)); )*
        $( let $v = $crate::fused::V($crate::math::Num::to_acc($x)); )*
        let r: $crate::fused::V<<$T as $crate::math::Num>::Acc> = $e;
        *$out = <$T as $crate::math::Num>::from_acc(r.0);
    }};
}

crate::fused! {
    /// `out = alpha * x + y` (BLAS axpy; in place when `out` is `y`).
    pub struct Axpy<T: Num>(alpha) = |x, y| alpha * x + y;
    /// `out = a * x + b * y`.
    pub struct Axpby<T: Num>(a, b) = |x, y| a * x + b * y;
    /// `out = relu(x + bias)` (bias usually broadcast).
    pub struct BiasRelu<T: Num>() = |x, bias| relu(x + bias);
    /// `out = x * sigmoid(x)` (SiLU / swish).
    pub struct Silu<T: Float>() = |x| x * sigmoid(x);
    /// `out = (a / s) * (b / t)`: the expression-template example, one pass.
    pub struct DivMul<T: Num>(s, t) = |a, b| (a / s) * (b / t);
    /// `out = a + w * (b - a)`.
    pub struct Lerp<T: Num>() = |a, b, w| a + w * (b - a);
    /// `a += 1/a + 2ab`, in place: reads and writes `a`.
    pub struct RecipUpdate<T: Float>() = |mut a; b| a + 1.0 / a + 2.0 * a * b;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Op2, Op3, Op4};

    #[test]
    fn library_ops_compute_their_expressions() {
        let mut o = 0.0f32;
        Axpy::new(2.0f32).apply(&mut o, 3.0, 1.0);
        assert_eq!(o, 7.0);
        Axpby::new(2.0f32, -1.0).apply(&mut o, 3.0, 1.0);
        assert_eq!(o, 5.0);
        BiasRelu::new().apply(&mut o, -3.0, 1.0);
        assert_eq!(o, 0.0);
        DivMul::new(3.0f32, 7.0).apply(&mut o, 6.0, 14.0);
        assert_eq!(o, 4.0);
        Lerp::new().apply(&mut o, 1.0, 3.0, 0.5);
        assert_eq!(o, 2.0);
        let mut x = 0.0f64;
        Silu::new().apply(&mut x, 0.0);
        assert_eq!(x, 0.0);
        let mut i = 0i32;
        DivMul::new(3i32, 7).apply(&mut i, 9, 21);
        assert_eq!(i, 9);
        let mut a = 2.0f64;
        RecipUpdate::new().apply(&mut a, 0.25);
        assert_eq!(a, 3.5);
        const {
            assert!(<RecipUpdate<f64> as Op2<f64, f64>>::READS_OUT);
            assert!(!<Axpy<f64> as Op3<f64, f64, f64>>::READS_OUT);
            assert!(!<Lerp<f32> as Op4<f32, f32, f32, f32>>::READS_OUT);
        }
    }

    crate::fused! {
        struct Pick<T: Float>(lo) = |x, y| select(lt(x, y), clamp(x, lo, y), -abs(y));
        struct Scale<T: Num>(k) = |mut x;| x * k;
    }

    #[test]
    fn select_comparisons_and_in_place_without_inputs() {
        let mut o = 0.0f32;
        Pick::new(0.0f32).apply(&mut o, -1.0, 2.0);
        assert_eq!(o, 0.0);
        Pick::new(0.0f32).apply(&mut o, 3.0, 2.0);
        assert_eq!(o, -2.0);
        let mut x = 3u8;
        crate::ops::Op1::apply(&Scale::new(5u8), &mut x);
        assert_eq!(x, 15);
    }
}
