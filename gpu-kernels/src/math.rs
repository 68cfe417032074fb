//! Number traits for the op library. Float functions come from NVIDIA's libdevice on the
//! GPU (linked as bitcode) and from Rust's `std` on the host.
//!
//! Tolerance policy (tested in `tests/cpu/conformance.rs`):
//! - `+ - * /`, `sqrt`, `rsqrt` (computed as `1 / sqrt(x)`), `fma`, `min`, `max`, `abs`,
//!   `neg`, `relu`, `clamp`, comparisons, casts, `where`: correctly rounded on both sides,
//!   so GPU and CPU are bit-identical.
//! - `exp`, `log`, `sin`, `cos`, `tanh`, `pow`, `sigmoid`: each side within a few ulp of
//!   an f64 reference (bounds in `ops::Tolerance`); GPU and CPU may differ in the last bits.
//! - `f16` and `bf16` compute in `f32` ([`Num::Acc`]) and round once to the output type, so
//!   every op above that is correctly rounded in `f32` is correctly rounded in 16 bits too
//!   (`f32` has more than `2p + 2` bits for `p` = 11 and 8), and the transcendentals are
//!   within one 16-bit ulp of the exact result. `fma` rounds twice (in `f32`, then to 16
//!   bits), as PyTorch's opmath does; GPU and CPU still agree bit for bit.

use crate::cast::CastFrom;
use crate::narrow::{bf16, bf16_to_f32, f16, f16_to_f32, f32_to_bf16, f32_to_f16, NAN_BITS};

/// Arithmetic shared by every numeric element type. Integer arithmetic wraps; integer
/// division by zero gives 0 (the GPU cannot raise, and both sides must agree). Literals
/// in [`fused!`](macro@crate::fused) expressions convert from `f64` and `i32` as Rust's `as` does.
pub trait Num: crate::Elem + PartialOrd + CastFrom<f64> + CastFrom<i32> {
    /// The type op math is done in (PyTorch's "opmath"): `f32` for `f16` and `bf16`, the
    /// type itself otherwise. Ops that chain several operations (`sigmoid`, fused
    /// expressions, stencils) convert their inputs once, compute in `Acc` and round once.
    /// `Acc` has the same traits as the type ([`Signed`], [`Float`]); generic code over
    /// `T: Float` that computes in `T::Acc` states `T::Acc: Float`.
    type Acc: Num;
    const ZERO: Self;
    const ONE: Self;
    /// Whether this is an integer type (exact arithmetic: wrapping sums and products
    /// associate, so reductions may fold in any order, [`Reduce::EXACT`]).
    ///
    /// [`Reduce::EXACT`]: crate::reduce::Reduce::EXACT
    const INTEGER: bool = false;
    fn to_acc(self) -> Self::Acc;
    fn from_acc(a: Self::Acc) -> Self;
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
    /// NaN-propagating maximum that orders `-0 < +0` (IEEE 754-2019 `maximum`), so the
    /// result does not depend on the operands' order: the `amax` reduction's combine. On
    /// sm_80 and later GPUs one instruction (`max.NaN.f32`) where [`max`](Num::max) takes
    /// five; a NaN result is some NaN (the library compares NaN equal to NaN).
    #[inline(always)]
    fn maximum(self, o: Self) -> Self {
        self.max(o)
    }
    /// [`maximum`](Num::maximum)'s counterpart (`-0 < +0`), the `amin` reduction's combine.
    #[inline(always)]
    fn minimum(self, o: Self) -> Self {
        self.min(o)
    }
    fn is_nan(self) -> bool;
    /// `add` on `E` lanes (the vectorised variant's `Add`); types override it with a
    /// whole-vector form (`u8`: four lanes per 32-bit operation).
    #[inline(always)]
    fn add_lanes<const E: usize>(a: &[Self; E], b: &[Self; E]) -> [Self; E] {
        core::array::from_fn(|j| a[j].add(b[j]))
    }
    /// `sub` on `E` lanes, like [`Num::add_lanes`].
    #[inline(always)]
    fn sub_lanes<const E: usize>(a: &[Self; E], b: &[Self; E]) -> [Self; E] {
        core::array::from_fn(|j| a[j].sub(b[j]))
    }
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
            type Acc = Self;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const INTEGER: bool = true;
            #[inline(always)] fn to_acc(self) -> Self { self }
            #[inline(always)] fn from_acc(a: Self) -> Self { a }
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
int_num!(i32, i64, u32, i8, i16, u16, u64);

// `u8`: as the other integers, and add and subtract four lanes per 32-bit word (SWAR): the
// low seven bits of each byte add without crossing into the next byte, the top bit is the
// exclusive or of the operands' top bits and that carry. The kernels otherwise unpack,
// add and repack every byte (five instructions a byte against one and a quarter).
impl Num for u8 {
    type Acc = Self;
    const ZERO: Self = 0;
    const ONE: Self = 1;
    const INTEGER: bool = true;
    #[inline(always)]
    fn to_acc(self) -> Self {
        self
    }
    #[inline(always)]
    fn from_acc(a: Self) -> Self {
        a
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self.wrapping_sub(o)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self.wrapping_mul(o)
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        if o == 0 {
            0
        } else {
            self.wrapping_div(o)
        }
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        self.wrapping_mul(a).wrapping_add(b)
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        if o < self {
            o
        } else {
            self
        }
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        if o > self {
            o
        } else {
            self
        }
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        false
    }
    #[inline(always)]
    fn add_lanes<const E: usize>(a: &[u8; E], b: &[u8; E]) -> [u8; E] {
        swar::<E>(
            a,
            b,
            |x, y| ((x & LOW7) + (y & LOW7)) ^ ((x ^ y) & HIGH),
            u8::wrapping_add,
        )
    }
    #[inline(always)]
    fn sub_lanes<const E: usize>(a: &[u8; E], b: &[u8; E]) -> [u8; E] {
        swar::<E>(
            a,
            b,
            |x, y| ((x | HIGH) - (y & LOW7)) ^ ((x ^ !y) & HIGH),
            u8::wrapping_sub,
        )
    }
}

const LOW7: u32 = 0x7f7f_7f7f;
const HIGH: u32 = 0x8080_8080;

/// `word` on every group of four lanes (little-endian words), `byte` on a remainder.
#[inline(always)]
fn swar<const E: usize>(
    a: &[u8; E],
    b: &[u8; E],
    word: impl Fn(u32, u32) -> u32,
    byte: impl Fn(u8, u8) -> u8,
) -> [u8; E] {
    let mut out = [0u8; E];
    let mut i = 0;
    while i + 4 <= E {
        // Whole 32-bit words (byte-wise assembly would make LLVM unpack and repack every
        // byte of the vector loads). Lane order does not matter: the word op is lane-wise.
        // SAFETY: bytes `i..i + 4` are inside the arrays; unaligned accesses of plain bytes.
        unsafe {
            let x = core::ptr::read_unaligned(a.as_ptr().add(i).cast::<u32>());
            let y = core::ptr::read_unaligned(b.as_ptr().add(i).cast::<u32>());
            core::ptr::write_unaligned(out.as_mut_ptr().add(i).cast::<u32>(), word(x, y));
        }
        i += 4;
    }
    while i < E {
        out[i] = byte(a[i], b[i]);
        i += 1;
    }
    out
}

macro_rules! int_signed {
    ($($t:ty),*) => {$(
        impl Signed for $t {
            #[inline(always)] fn neg(self) -> Self { self.wrapping_neg() }
            #[inline(always)] fn abs(self) -> Self { self.wrapping_abs() }
        }
    )*};
}
int_signed!(i32, i64, i8, i16);

#[cfg(test)]
mod tests {
    use super::Num;

    #[test]
    fn float_fns_on_the_host() {
        use super::FloatFns;
        // erfinv is erf's inverse to a few ulp (erf of it gives x back), and the f32 form
        // is the f64 one rounded.
        for i in -999..=999 {
            let x = i as f64 * 0.001;
            let y = FloatFns::erfinv(x);
            assert!(
                (FloatFns::erf(y) - x).abs() <= 4.0 * f64::EPSILON,
                "{x} {y}"
            );
            let yf = FloatFns::erfinv(x as f32);
            let want = FloatFns::erfinv((x as f32) as f64) as f32;
            assert!(
                (yf - want).abs() <= f32::EPSILON * want.abs(),
                "{x} {yf} {want}"
            );
        }
        assert_eq!(FloatFns::erfinv(1.0f32), f32::INFINITY);
        assert_eq!(FloatFns::erfinv(-1.0f64), f64::NEG_INFINITY);
        assert!(FloatFns::erfinv(1.5f32).is_nan());
        assert!((FloatFns::erfinv(0.5f64) - 0.476_936_276_204_469_9).abs() <= 2.0 * f64::EPSILON);
        // musl's atanh near -1 (std's formula was 37 600 ulp off here; the reference is
        // mpmath's, to 0.2 ulp).
        let t = FloatFns::atanh(-0.999_999f64);
        assert!(
            (t - -7.254_328_619_247_669).abs() <= 2.0 * 8.0 * f64::EPSILON,
            "{t}"
        );
        // Exact functions.
        assert_eq!(FloatFns::round(2.5f32), 2.0);
        assert_eq!(FloatFns::round(-3.5f64), -4.0);
        assert_eq!(FloatFns::fmod(-7.5f32, 2.0), -1.5);
        assert_eq!(FloatFns::copysign(3.0f32, -0.0), -3.0);
        assert_eq!(FloatFns::nextafter(1.0f32, 2.0), 1.0 + f32::EPSILON);
        assert_eq!(FloatFns::nextafter(1.0f64, 0.0), 1.0 - f64::EPSILON / 2.0);
        assert_eq!(FloatFns::nextafter(0.0f32, -1.0).to_bits(), 0x8000_0001);
        assert_eq!(FloatFns::nextafter(-1.0f32, -2.0), -1.0 - f32::EPSILON);
        assert_eq!(FloatFns::nextafter(f32::MAX, f32::INFINITY), f32::INFINITY);
        assert!(FloatFns::nextafter(f32::NAN, 1.0).is_nan());
    }

    /// `maximum` and `minimum` (the `amax` and `amin` reductions): NaN wins, `-0 < +0`
    /// whatever the operands' order, and otherwise `max` and `min`.
    #[test]
    fn maximum_orders_signed_zeros() {
        let (p, n) = (0.0f32, -0.0f32);
        for (a, b) in [(p, n), (n, p)] {
            assert_eq!(Num::maximum(a, b).to_bits(), p.to_bits());
            assert_eq!(Num::minimum(a, b).to_bits(), n.to_bits());
            assert_eq!(Num::maximum(a as f64, b as f64).to_bits(), 0.0f64.to_bits());
            assert_eq!(
                Num::minimum(a as f64, b as f64).to_bits(),
                (-0.0f64).to_bits()
            );
        }
        assert_eq!(Num::maximum(n, n).to_bits(), n.to_bits());
        assert_eq!(Num::minimum(p, p).to_bits(), p.to_bits());
        for x in [f32::NEG_INFINITY, -1.5, -0.0, 0.0, 2.0, f32::INFINITY] {
            assert!(Num::maximum(x, f32::NAN).is_nan() && Num::minimum(f32::NAN, x).is_nan());
            for y in [-3.0f32, -0.5, 1.0, 7.25] {
                assert_eq!(Num::maximum(x, y), Num::max(x, y));
                assert_eq!(Num::minimum(y, x), Num::min(y, x));
            }
        }
        // Integers and 16-bit floats keep `max` and `min`.
        assert_eq!(Num::maximum(-3i32, 5), 5);
        assert_eq!(Num::minimum(7u8, 2), 2);
    }

    #[test]
    fn u8_lanes_equal_scalar_arithmetic() {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        for x in 0..=255u8 {
            for y in (0..=255u8).step_by(3) {
                a.iter_mut()
                    .enumerate()
                    .for_each(|(j, v)| *v = x.wrapping_add(j as u8 * 17));
                b.iter_mut()
                    .enumerate()
                    .for_each(|(j, v)| *v = y.wrapping_mul(j as u8 | 1));
                let (s, d) = (u8::add_lanes(&a, &b), u8::sub_lanes(&a, &b));
                for j in 0..16 {
                    assert_eq!(s[j], a[j].wrapping_add(b[j]));
                    assert_eq!(d[j], a[j].wrapping_sub(b[j]));
                }
                let (s5, d5) = (
                    u8::add_lanes::<5>(&[x; 5], &[y; 5]),
                    u8::sub_lanes::<5>(&[x; 5], &[y; 5]),
                );
                assert_eq!((s5[4], d5[4]), (x.wrapping_add(y), x.wrapping_sub(y)));
            }
        }
    }
}

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

/// IEEE 754-2019 `maximum` and `minimum` (NaN if either operand is NaN; `-0 < +0`): in
/// software by default (equal operands, `-0 == +0`, merge their sign bits), as one PTX
/// instruction where the GPU has it (`max.NaN.f32`, sm_80 and later; PTX has no `f64`
/// form). Both give the same value for every pair of operands.
trait MinMaxNan: Copy {
    fn max_nan(self, o: Self) -> Self;
    fn min_nan(self, o: Self) -> Self;
}

macro_rules! soft_min_max_nan {
    ($t:ident) => {
        #[inline(always)]
        fn max_nan(self, o: Self) -> Self {
            if self != self || o != o {
                <$t>::NAN
            } else if self == o {
                <$t>::from_bits(self.to_bits() & o.to_bits())
            } else if o > self {
                o
            } else {
                self
            }
        }
        #[inline(always)]
        fn min_nan(self, o: Self) -> Self {
            if self != self || o != o {
                <$t>::NAN
            } else if self == o {
                <$t>::from_bits(self.to_bits() | o.to_bits())
            } else if o < self {
                o
            } else {
                self
            }
        }
    };
}

impl MinMaxNan for f64 {
    soft_min_max_nan!(f64);
}

#[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
impl MinMaxNan for f32 {
    soft_min_max_nan!(f32);
}

#[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
impl MinMaxNan for f32 {
    #[inline(always)]
    fn max_nan(self, o: Self) -> Self {
        let r: f32;
        // SAFETY: a register-to-register instruction of sm_80 and later (this build's
        // target).
        unsafe {
            core::arch::asm!("max.NaN.f32 {0}, {1}, {2};", out(reg32) r, in(reg32) self,
                             in(reg32) o, options(pure, nomem, nostack, preserves_flags))
        };
        r
    }
    #[inline(always)]
    fn min_nan(self, o: Self) -> Self {
        let r: f32;
        // SAFETY: as `max_nan`.
        unsafe {
            core::arch::asm!("min.NaN.f32 {0}, {1}, {2};", out(reg32) r, in(reg32) self,
                             in(reg32) o, options(pure, nomem, nostack, preserves_flags))
        };
        r
    }
}

macro_rules! float {
    ($t:ident, $bits:ident, $sign:expr, $sqrt:ident, $fma:ident, $exp:ident, $log:ident,
     $sin:ident, $cos:ident, $tanh:ident, $pow:ident) => {
        impl Num for $t {
            type Acc = Self;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)] fn to_acc(self) -> Self { self }
            #[inline(always)] fn from_acc(a: Self) -> Self { a }
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
            #[inline(always)] fn maximum(self, o: Self) -> Self { MinMaxNan::max_nan(self, o) }
            #[inline(always)] fn minimum(self, o: Self) -> Self { MinMaxNan::min_nan(self, o) }
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

/// `f16` and `bf16`: every operation in `f32`, rounded once to the type; sign operations on
/// the bits (exact).
macro_rules! narrow_float {
    ($($t:ident: $to:ident, $from:ident;)*) => {$(
        impl Num for $t {
            type Acc = f32;
            const ZERO: Self = $t::from_bits(0);
            const ONE: Self = $t::ONE;
            #[inline(always)] fn to_acc(self) -> f32 { $to(self) }
            #[inline(always)] fn from_acc(a: f32) -> Self { $from(a) }
            #[inline(always)] fn add(self, o: Self) -> Self { $from($to(self) + $to(o)) }
            #[inline(always)] fn sub(self, o: Self) -> Self { $from($to(self) - $to(o)) }
            #[inline(always)] fn mul(self, o: Self) -> Self { $from($to(self) * $to(o)) }
            #[inline(always)] fn div(self, o: Self) -> Self { $from($to(self) / $to(o)) }
            #[inline(always)] fn mul_add(self, a: Self, b: Self) -> Self {
                $from(Num::mul_add($to(self), $to(a), $to(b)))
            }
            #[inline(always)] fn min(self, o: Self) -> Self {
                let (x, y) = ($to(self), $to(o));
                if x != x || y != y { $t::from_bits(NAN_BITS) } else if y < x { o } else { self }
            }
            #[inline(always)] fn max(self, o: Self) -> Self {
                let (x, y) = ($to(self), $to(o));
                if x != x || y != y { $t::from_bits(NAN_BITS) } else if y > x { o } else { self }
            }
            #[inline(always)] fn is_nan(self) -> bool { self.to_bits() & 0x7fff > $t::INFINITY.to_bits() }
        }
        impl Signed for $t {
            #[inline(always)] fn neg(self) -> Self { $t::from_bits(self.to_bits() ^ 0x8000) }
            #[inline(always)] fn abs(self) -> Self { $t::from_bits(self.to_bits() & 0x7fff) }
        }
        impl Float for $t {
            #[inline(always)] fn sqrt(self) -> Self { $from(Float::sqrt($to(self))) }
            #[inline(always)] fn exp(self) -> Self { $from(Float::exp($to(self))) }
            #[inline(always)] fn ln(self) -> Self { $from(Float::ln($to(self))) }
            #[inline(always)] fn sin(self) -> Self { $from(Float::sin($to(self))) }
            #[inline(always)] fn cos(self) -> Self { $from(Float::cos($to(self))) }
            #[inline(always)] fn tanh(self) -> Self { $from(Float::tanh($to(self))) }
            #[inline(always)] fn powf(self, e: Self) -> Self { $from(Float::powf($to(self), $to(e))) }
        }
    )*};
}
narrow_float! {
    f16: f16_to_f32, f32_to_f16;
    bf16: bf16_to_f32, f32_to_bf16;
}

/// The op set's further float functions, on `f32` and `f64` (16-bit floats compute them in
/// `f32`). On the GPU each is libdevice's; on the host rust-lang's `libm` (musl's functions,
/// computed in `f64` for `f32` and rounded once), or this module's `erfinv`. `floor`,
/// `ceil`, `round` (half to even), `trunc`, `fmod`, `copysign` and `nextafter` are exact,
/// so both sides give the same bits; the others are within a few ulp of an f64 reference on
/// each side (`ops::Tolerance`), as `exp` and `sin` are.
pub trait FloatFns: Float {
    fn exp2(self) -> Self;
    fn expm1(self) -> Self;
    fn log2(self) -> Self;
    fn log10(self) -> Self;
    fn log1p(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
    fn erfinv(self) -> Self;
    fn lgamma(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    /// Rounds half to even (`torch.round`).
    fn round(self) -> Self;
    fn trunc(self) -> Self;
    fn atan2(self, x: Self) -> Self;
    fn hypot(self, y: Self) -> Self;
    /// The remainder of truncated division, with the sign of `self` (C's `fmod`), exact.
    fn fmod(self, y: Self) -> Self;
    fn copysign(self, sign: Self) -> Self;
    /// The next representable value after `self` toward `y` (C's `nextafter`).
    fn nextafter(self, y: Self) -> Self;
}

/// `$cb!` over the unary functions of [`FloatFns`]: name, libdevice's `f32` and `f64`
/// functions, the host's `f64` function (the host computes `f32` in `f64` and rounds once).
/// The host's are `libm`'s (musl's), within an ulp: `std`'s `f64::atanh` is
/// `0.5 * ln_1p(2x / (1 - x))`, 37 600 ulp off at -0.999999.
macro_rules! unary_fns {
    ($cb:ident) => {
        $cb! {
            exp2: __nv_exp2f, __nv_exp2, libm::exp2;
            expm1: __nv_expm1f, __nv_expm1, libm::expm1;
            log2: __nv_log2f, __nv_log2, libm::log2;
            log10: __nv_log10f, __nv_log10, libm::log10;
            log1p: __nv_log1pf, __nv_log1p, libm::log1p;
            tan: __nv_tanf, __nv_tan, libm::tan;
            asin: __nv_asinf, __nv_asin, libm::asin;
            acos: __nv_acosf, __nv_acos, libm::acos;
            atan: __nv_atanf, __nv_atan, libm::atan;
            sinh: __nv_sinhf, __nv_sinh, libm::sinh;
            cosh: __nv_coshf, __nv_cosh, libm::cosh;
            asinh: __nv_asinhf, __nv_asinh, libm::asinh;
            acosh: __nv_acoshf, __nv_acosh, libm::acosh;
            atanh: __nv_atanhf, __nv_atanh, libm::atanh;
            erf: __nv_erff, __nv_erf, libm::erf;
            erfc: __nv_erfcf, __nv_erfc, libm::erfc;
            erfinv: __nv_erfinvf, __nv_erfinv, erfinv_host;
            lgamma: __nv_lgammaf, __nv_lgamma, libm::lgamma;
            floor: __nv_floorf, __nv_floor, libm::floor;
            ceil: __nv_ceilf, __nv_ceil, libm::ceil;
            round: __nv_rintf, __nv_rint, libm::rint;
            trunc: __nv_truncf, __nv_trunc, libm::trunc;
        }
    };
}

/// `$cb!` over the binary functions of [`FloatFns`] that libdevice computes.
macro_rules! binary_fns {
    ($cb:ident) => {
        $cb! {
            atan2: __nv_atan2f, __nv_atan2, libm::atan2;
            hypot: __nv_hypotf, __nv_hypot, libm::hypot;
            fmod: __nv_fmodf, __nv_fmod, libm::fmod;
        }
    };
}

macro_rules! declare_fns {
    ($($name:ident: $nvf:ident, $nvd:ident, $hd:expr;)*) => {
        #[cfg(target_arch = "nvptx64")]
        extern "C" {
            $(fn $nvf(x: f32) -> f32; fn $nvd(x: f64) -> f64;)*
        }
    };
}
unary_fns!(declare_fns);
macro_rules! declare_fns2 {
    ($($name:ident: $nvf:ident, $nvd:ident, $hd:expr;)*) => {
        #[cfg(target_arch = "nvptx64")]
        extern "C" {
            $(fn $nvf(x: f32, y: f32) -> f32; fn $nvd(x: f64, y: f64) -> f64;)*
        }
    };
}
binary_fns!(declare_fns2);

macro_rules! impl_fns {
    ($t:ident, $unary:ident, $binary:ident, $sign:expr) => {
        impl FloatFns for $t {
            unary_fns!($unary);
            binary_fns!($binary);
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                <$t>::from_bits((self.to_bits() & !$sign) | (sign.to_bits() & $sign))
            }
            #[inline(always)]
            fn nextafter(self, y: Self) -> Self {
                if self != self || y != y {
                    return <$t>::NAN;
                }
                if self == y {
                    return y;
                }
                if self == 0.0 {
                    // The smallest subnormal with `y`'s sign.
                    return <$t>::from_bits((y.to_bits() & $sign) | 1);
                }
                let b = self.to_bits();
                // Away from zero when `y` is farther out on `self`'s side.
                let away = (y > self) == (self > 0.0);
                <$t>::from_bits(if away { b + 1 } else { b - 1 })
            }
        }
    };
}
/// The methods of one type from a list of `unary_fns!` or `binary_fns!`: `$nv` names which
/// libdevice column (`f32`'s or `f64`'s) each method calls, `$host` how the host calls the
/// `f64` function.
macro_rules! pick {
    (@unary $nv:tt $host:tt; $($name:ident: $nvf:ident, $nvd:ident, $hd:expr;)*) => {$(
        #[inline(always)]
        fn $name(self) -> Self {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: pure libdevice function.
            let r = unsafe { pick!(@col $nv $nvf $nvd)(self) };
            #[cfg(not(target_arch = "nvptx64"))]
            let r = pick!(@host $host $hd, self);
            r
        }
    )*};
    (@binary $nv:tt $host:tt; $($name:ident: $nvf:ident, $nvd:ident, $hd:expr;)*) => {$(
        #[inline(always)]
        fn $name(self, y: Self) -> Self {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: pure libdevice function.
            let r = unsafe { pick!(@col $nv $nvf $nvd)(self, y) };
            #[cfg(not(target_arch = "nvptx64"))]
            let r = pick!(@host2 $host $hd, self, y);
            r
        }
    )*};
    // The host computes `f32` functions in `f64` and rounds once: within an ulp where
    // `std`'s `f32` forms are not (`atanh` near -1 lost 24 ulp).
    (@host f $hd:expr, $x:expr) => { ($hd)($x as f64) as f32 };
    (@host d $hd:expr, $x:expr) => { ($hd)($x) };
    (@host2 f $hd:expr, $x:expr, $y:expr) => { ($hd)($x as f64, $y as f64) as f32 };
    (@host2 d $hd:expr, $x:expr, $y:expr) => { ($hd)($x, $y) };
    (@col f $a:tt $b:tt) => { $a };
    (@col d $a:tt $b:tt) => { $b };
}
macro_rules! unary_f32 { ($($x:tt)*) => { pick!(@unary f f; $($x)*); }; }
macro_rules! unary_f64 { ($($x:tt)*) => { pick!(@unary d d; $($x)*); }; }
macro_rules! binary_f32 { ($($x:tt)*) => { pick!(@binary f f; $($x)*); }; }
macro_rules! binary_f64 { ($($x:tt)*) => { pick!(@binary d d; $($x)*); }; }
impl_fns!(f32, unary_f32, binary_f32, 0x8000_0000u32);
impl_fns!(f64, unary_f64, binary_f64, 0x8000_0000_0000_0000u64);

/// `erfinv` on the host: Giles' single-precision approximation ("Approximating the erfinv
/// function", GPU Computing Gems, 2011), then Newton steps on `erf` (on `erfc` toward ±1,
/// where `1 − x` is exact) in `f64`.
#[cfg(not(target_arch = "nvptx64"))]
fn erfinv_host(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x.abs() == 1.0 {
        return f64::INFINITY.copysign(x);
    }
    let w = -((1.0 - x) * (1.0 + x)).ln();
    let p = if w < 5.0 {
        let w = w - 2.5;
        [
            3.432_739_39e-7,
            -3.523_387_7e-6,
            -4.391_506_54e-6,
            2.185_808_7e-4,
            -1.253_725_03e-3,
            -4.177_681_64e-3,
            2.466_407_27e-1,
            1.501_409_41,
        ]
        .iter()
        .fold(2.810_226_36e-8, |p, c| c + p * w)
    } else {
        let w = w.sqrt() - 3.0;
        [
            1.009_505_58e-4,
            1.349_343_22e-3,
            -3.673_428_44e-3,
            5.739_507_73e-3,
            -7.622_461_3e-3,
            9.438_870_47e-3,
            1.001_674_06,
            2.832_976_82,
        ]
        .iter()
        .fold(-2.002_142_57e-4, |p, c| c + p * w)
    };
    let (a, mut y) = (x.abs(), (p * x).abs());
    const TWO_OVER_SQRT_PI: f64 = core::f64::consts::FRAC_2_SQRT_PI;
    for _ in 0..3 {
        let d = TWO_OVER_SQRT_PI * (-y * y).exp();
        if d == 0.0 || !y.is_finite() {
            break;
        }
        y -= if a < 0.5 {
            (libm::erf(y) - a) / d
        } else {
            ((1.0 - a) - libm::erfc(y)) / d
        };
    }
    y.copysign(x)
}
