//! Number traits for the op library. Float functions come from NVIDIA's libdevice on the
//! GPU (linked as bitcode) and from Rust's `std` on the host.
//!
//! Tolerance policy (tested in `tests/conformance.rs`):
//! - `+ - * /`, `sqrt`, `rsqrt` (computed as `1 / sqrt(x)`), `fma`, `min`, `max`, `abs`,
//!   `neg`, `relu`, `clamp`, comparisons, casts, `where`: correctly rounded on both sides,
//!   so GPU and CPU are bit-identical.
//! - `exp`, `log`, `sin`, `cos`, `tanh`, `pow`, `sigmoid`: each side within a few ulp of
//!   an f64 reference (bounds in `ops::Tolerance`); GPU and CPU may differ in the last bits.

use crate::ops::CastFrom;

/// Arithmetic shared by every numeric element type. Integer arithmetic wraps; integer
/// division by zero gives 0 (the GPU cannot raise, and both sides must agree). Literals
/// in [`fused!`](crate::fused) expressions convert from `f64` and `i32` as Rust's `as` does.
pub trait Num: crate::Elem + PartialOrd + CastFrom<f64> + CastFrom<i32> {
    const ZERO: Self;
    const ONE: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// `self * a + b`, fused (one rounding) for floats.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// NaN-propagating minimum.
    fn min(self, o: Self) -> Self;
    /// NaN-propagating maximum.
    fn max(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
}

/// Numbers with a sign: negation and absolute value.
pub trait Signed: Num {
    fn neg(self) -> Self;
    fn abs(self) -> Self;
}

/// Floating-point functions.
pub trait Float: Signed {
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tanh(self) -> Self;
    fn powf(self, e: Self) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn div(self, o: Self) -> Self {
                if o == 0 { 0 } else { self.wrapping_div(o) }
            }
            #[inline(always)] fn mul_add(self, a: Self, b: Self) -> Self {
                self.wrapping_mul(a).wrapping_add(b)
            }
            #[inline(always)] fn min(self, o: Self) -> Self { if o < self { o } else { self } }
            #[inline(always)] fn max(self, o: Self) -> Self { if o > self { o } else { self } }
            #[inline(always)] fn is_nan(self) -> bool { false }
        }
    )*};
}
int_num!(i32, i64, u32, u8);

macro_rules! int_signed {
    ($($t:ty),*) => {$(
        impl Signed for $t {
            #[inline(always)] fn neg(self) -> Self { self.wrapping_neg() }
            #[inline(always)] fn abs(self) -> Self { self.wrapping_abs() }
        }
    )*};
}
int_signed!(i32, i64);

#[cfg(target_arch = "nvptx64")]
extern "C" {
    fn __nv_fsqrt_rn(x: f32) -> f32;
    fn __nv_dsqrt_rn(x: f64) -> f64;
    fn __nv_fmaf(a: f32, b: f32, c: f32) -> f32;
    fn __nv_fma(a: f64, b: f64, c: f64) -> f64;
    fn __nv_expf(x: f32) -> f32;
    fn __nv_exp(x: f64) -> f64;
    fn __nv_logf(x: f32) -> f32;
    fn __nv_log(x: f64) -> f64;
    fn __nv_sinf(x: f32) -> f32;
    fn __nv_sin(x: f64) -> f64;
    fn __nv_cosf(x: f32) -> f32;
    fn __nv_cos(x: f64) -> f64;
    fn __nv_tanhf(x: f32) -> f32;
    fn __nv_tanh(x: f64) -> f64;
    fn __nv_powf(x: f32, y: f32) -> f32;
    fn __nv_pow(x: f64, y: f64) -> f64;
}

macro_rules! float {
    ($t:ident, $bits:ident, $sign:expr, $sqrt:ident, $fma:ident, $exp:ident, $log:ident,
     $sin:ident, $cos:ident, $tanh:ident, $pow:ident) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn div(self, o: Self) -> Self { self / o }
            #[inline(always)] fn mul_add(self, a: Self, b: Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: pure libdevice function.
                let r = unsafe { $fma(self, a, b) };
                #[cfg(not(target_arch = "nvptx64"))]
                let r = <$t>::mul_add(self, a, b);
                r
            }
            #[inline(always)] fn min(self, o: Self) -> Self {
                if self != self || o != o { <$t>::NAN } else if o < self { o } else { self }
            }
            #[inline(always)] fn max(self, o: Self) -> Self {
                if self != self || o != o { <$t>::NAN } else if o > self { o } else { self }
            }
            #[inline(always)] fn is_nan(self) -> bool { self != self }
        }
        impl Signed for $t {
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn abs(self) -> Self { <$t>::from_bits(self.to_bits() & !$sign) }
        }
        impl Float for $t {
            #[inline(always)] fn sqrt(self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: pure libdevice function.
                let r = unsafe { $sqrt(self) };
                #[cfg(not(target_arch = "nvptx64"))]
                let r = <$t>::sqrt(self);
                r
            }
            #[inline(always)] fn exp(self) -> Self { float!(@call $exp, exp, self) }
            #[inline(always)] fn ln(self) -> Self { float!(@call $log, ln, self) }
            #[inline(always)] fn sin(self) -> Self { float!(@call $sin, sin, self) }
            #[inline(always)] fn cos(self) -> Self { float!(@call $cos, cos, self) }
            #[inline(always)] fn tanh(self) -> Self { float!(@call $tanh, tanh, self) }
            #[inline(always)] fn powf(self, e: Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: pure libdevice function.
                let r = unsafe { $pow(self, e) };
                #[cfg(not(target_arch = "nvptx64"))]
                let r = <$t>::powf(self, e);
                r
            }
        }
    };
    (@call $nv:ident, $std:ident, $x:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: pure libdevice function.
        let r = unsafe { $nv($x) };
        #[cfg(not(target_arch = "nvptx64"))]
        let r = $x.$std();
        r
    }};
}

float!(
    f32,
    u32,
    0x8000_0000u32,
    __nv_fsqrt_rn,
    __nv_fmaf,
    __nv_expf,
    __nv_logf,
    __nv_sinf,
    __nv_cosf,
    __nv_tanhf,
    __nv_powf
);
float!(
    f64,
    u64,
    0x8000_0000_0000_0000u64,
    __nv_dsqrt_rn,
    __nv_fma,
    __nv_exp,
    __nv_log,
    __nv_sin,
    __nv_cos,
    __nv_tanh,
    __nv_pow
);
