//! 16-bit floats (`f16`, `bf16`): conversions to and from `f32`, their op math type.
//!
//! Every conversion rounds once, to nearest even, and gives the same bits on the GPU and on
//! the host: the GPU uses the `cvt` instructions, the host the `half` crate (`f16`) or the
//! same integer arithmetic (`bf16` on sm_70, which has no `cvt.bf16`). NaN results are the
//! canonical NaN `0x7fff` on both sides (the GPU's `cvt` produces it; the host is made to).
//!
//! Wider sources (`f64`, 64-bit and 32-bit integers) are first rounded to `f32` **to odd**
//! (truncate, then set the last bit when inexact): a value rounded to odd at 24 bits and
//! then to nearest even at 11 or 8 bits is the value rounded to nearest even once, because
//! 24 ≥ 11 + 2. So `f64 → bf16` is correctly rounded, not rounded twice.

pub use half::{bf16, f16};

/// The canonical NaN of both 16-bit types.
pub const NAN_BITS: u16 = 0x7fff;

/// `f16` to `f32` (exact).
#[inline(always)]
pub fn f16_to_f32(h: f16) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let f: f32;
        // SAFETY: a register-to-register conversion.
        unsafe {
            core::arch::asm!("cvt.f32.f16 {0}, {1};", out(reg32) f, in(reg16) h.to_bits(),
                             options(pure, nomem, nostack, preserves_flags))
        };
        f
    }
    #[cfg(not(target_arch = "nvptx64"))]
    h.to_f32()
}

/// `f32` to `f16`, rounded to nearest even; NaN gives `0x7fff`.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> f16 {
    if x.is_nan() {
        return f16::from_bits(NAN_BITS);
    }
    #[cfg(target_arch = "nvptx64")]
    {
        let h: u16;
        // SAFETY: a register-to-register conversion.
        unsafe {
            core::arch::asm!("cvt.rn.f16.f32 {0}, {1};", out(reg16) h, in(reg32) x,
                             options(pure, nomem, nostack, preserves_flags))
        };
        f16::from_bits(h)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    f16::from_f32(x)
}

/// `bf16` to `f32` (exact: the high half of the `f32` bits).
#[inline(always)]
pub fn bf16_to_f32(h: bf16) -> f32 {
    f32::from_bits((h.to_bits() as u32) << 16)
}

/// `f32` to `bf16`, rounded to nearest even; NaN gives `0x7fff`.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> bf16 {
    if x.is_nan() {
        return bf16::from_bits(NAN_BITS);
    }
    #[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
    {
        let h: u16;
        // SAFETY: a register-to-register conversion.
        unsafe {
            core::arch::asm!("cvt.rn.bf16.f32 {0}, {1};", out(reg16) h, in(reg32) x,
                             options(pure, nomem, nostack, preserves_flags))
        };
        bf16::from_bits(h)
    }
    #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
    bf16::from_bits(bf16_bits_rne(x.to_bits()))
}

/// The `bf16` bits nearest to the (non-NaN) `f32` with bits `b`, ties to even. Carries
/// into the exponent are right: the largest finite values round up to infinity.
#[inline(always)]
pub const fn bf16_bits_rne(b: u32) -> u16 {
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// `x` rounded to `f32` to odd (see the module documentation).
pub trait ToF32Odd: Copy {
    fn to_f32_odd(self) -> f32;
}

/// `nearest`, the `f32` nearest to the value `exact` compares with, moved to the `f32`
/// rounded to odd: unchanged when exact, else truncated toward zero with the last bit set.
#[inline(always)]
fn odd(nearest: f32, cmp: core::cmp::Ordering, negative: bool) -> f32 {
    use core::cmp::Ordering;
    if cmp == Ordering::Equal {
        return nearest;
    }
    // `cmp` orders `nearest` against the exact value; away from zero means `nearest` is
    // one step too far out.
    let away = (cmp == Ordering::Greater) != negative;
    let bits = nearest.to_bits() - away as u32;
    f32::from_bits(bits | 1)
}

impl ToF32Odd for f64 {
    #[inline(always)]
    fn to_f32_odd(self) -> f32 {
        let f = self as f32;
        if self.is_nan() {
            return f;
        }
        match (f as f64).partial_cmp(&self) {
            Some(c) => odd(f, c, self < 0.0),
            None => f,
        }
    }
}

impl ToF32Odd for i64 {
    #[inline(always)]
    fn to_f32_odd(self) -> f32 {
        let f = self as f32;
        // Below 2^63 in magnitude `f` is an integer that `as i64` gives exactly (−2^63 too);
        // 2^63 itself is above every i64.
        let c = if f >= 9.223_372e18 {
            core::cmp::Ordering::Greater
        } else {
            (f as i64).cmp(&self)
        };
        odd(f, c, self < 0)
    }
}

macro_rules! odd_via_f64 {
    ($($t:ty),*) => {$(
        impl ToF32Odd for $t {
            #[inline(always)]
            fn to_f32_odd(self) -> f32 { (self as f64).to_f32_odd() }
        }
    )*};
}
odd_via_f64!(i32, u32);

impl ToF32Odd for u64 {
    #[inline(always)]
    fn to_f32_odd(self) -> f32 {
        let f = self as f32;
        // Below 2^64 `f` is an integer that `as u64` gives exactly; 2^64 is above every u64.
        let c = if f >= 1.844_674_4e19 {
            core::cmp::Ordering::Greater
        } else {
            (f as u64).cmp(&self)
        };
        odd(f, c, false)
    }
}

/// Types that `f32` holds exactly.
macro_rules! exact_in_f32 {
    ($($t:ty),*) => {$(
        impl ToF32Odd for $t {
            #[inline(always)]
            fn to_f32_odd(self) -> f32 { self as f32 }
        }
    )*};
}
exact_in_f32!(u8, i8, i16, u16);

impl ToF32Odd for f32 {
    #[inline(always)]
    fn to_f32_odd(self) -> f32 {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn f16_round_trips_and_rounds_like_half() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            let f = f16_to_f32(h);
            let back = f32_to_f16(f);
            if h.is_nan() {
                assert_eq!(back.to_bits(), NAN_BITS);
            } else {
                assert_eq!(back.to_bits(), bits, "{bits:#x}");
            }
        }
        let mut x = 1u64;
        for _ in 0..200_000 {
            let f = f32::from_bits(xorshift(&mut x) as u32);
            let want = if f.is_nan() {
                NAN_BITS
            } else {
                f16::from_f32(f).to_bits()
            };
            assert_eq!(f32_to_f16(f).to_bits(), want, "{f:e}");
        }
    }

    #[test]
    fn casts_to_the_same_16_bit_type_keep_every_bit_and_cross_casts_round() {
        use crate::ops::CastFrom;
        for bits in 0..=u16::MAX {
            let (h, b) = (f16::from_bits(bits), bf16::from_bits(bits));
            // NaN payloads and signs included, as PyTorch's copy.
            assert_eq!(<f16 as CastFrom<f16>>::cast_from(h).to_bits(), bits);
            assert_eq!(<bf16 as CastFrom<bf16>>::cast_from(b).to_bits(), bits);
            // Between the two: through f32, rounded once (NaN to the canonical NaN).
            let want = if h.is_nan() {
                NAN_BITS
            } else {
                f32_to_bf16(f16_to_f32(h)).to_bits()
            };
            assert_eq!(<bf16 as CastFrom<f16>>::cast_from(h).to_bits(), want);
        }
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        for bits in 0..=u16::MAX {
            let h = bf16::from_bits(bits);
            let back = f32_to_bf16(bf16_to_f32(h));
            let want = if h.is_nan() { NAN_BITS } else { bits };
            assert_eq!(back.to_bits(), want);
        }
        let mut x = 7u64;
        for _ in 0..200_000 {
            let f = f32::from_bits(xorshift(&mut x) as u32);
            let want = if f.is_nan() {
                NAN_BITS
            } else {
                bf16::from_f32(f).to_bits()
            };
            assert_eq!(f32_to_bf16(f).to_bits(), want, "{f:e}");
        }
        // Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to the even 1.
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0).to_bits(), 0x3f80);
        assert_eq!(f32_to_bf16(f32::MAX).to_bits(), 0x7f80);
    }

    /// Whether `r` (bits of a 16-bit float, widened exactly by `wide`) is `d` rounded to
    /// nearest, ties to even: no neighbour of `r` is nearer (differences of numbers within a
    /// factor of two are exact in f64). `half::f16::from_f64` is not a reference: with F16C
    /// it rounds to f32 first (twice).
    fn nearest_even(d: f64, r: u16, wide: fn(u16) -> f64, max: u16) -> bool {
        let v = wide(r);
        if d.is_nan() {
            return v.is_nan();
        }
        let mag = r & 0x7fff;
        if v.is_infinite() {
            // Above the midpoint between the largest finite value and the next power of two.
            let top = wide(max);
            let limit = top + (top - wide(max - 1)) / 2.0;
            return d.abs() >= limit && (v > 0.0) == (d > 0.0);
        }
        let sign = r & 0x8000;
        let mut ok = true;
        for n in [mag.wrapping_sub(1), mag + 1] {
            if n > max {
                continue; // below zero (mag 0), or past the largest finite value
            }
            let w = wide(sign | n);
            let (dr, dn) = ((d - v).abs(), (d - w).abs());
            ok &= dr < dn || (dr == dn && r & 1 == 0);
        }
        ok
    }

    #[test]
    fn wide_sources_round_once() {
        let wf: fn(u16) -> f64 = |b| f16::from_bits(b).to_f64();
        let wb: fn(u16) -> f64 = |b| bf16::from_bits(b).to_f64();
        let mut x = 3u64;
        for i in 0..300_000 {
            let r = xorshift(&mut x);
            let d = match i % 3 {
                0 => f64::from_bits(r),
                // Near 16-bit ties: a short mantissa plus a tiny tail.
                1 => {
                    (((r >> 40) as f64) * 2f64.powi((r % 60) as i32 - 30)) * (1.0 + 2f64.powi(-40))
                }
                _ => ((r >> 11) as f64 + 0.5) * 2f64.powi((r % 40) as i32 - 20),
            };
            let o = d.to_f32_odd();
            let (h, b) = (f32_to_f16(o).to_bits(), f32_to_bf16(o).to_bits());
            assert!(nearest_even(d, h, wf, 0x7bff), "f16 {d:e}: {h:#x}");
            assert!(nearest_even(d, b, wb, 0x7f7f), "bf16 {d:e}: {b:#x}");
        }
        // The classic double-rounding case: 1 + 2^-8 + 2^-40 rounds up in bf16, but to f32
        // first (nearest) it would be the tie 1 + 2^-8 and go down.
        let d = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(f32_to_bf16(d.to_f32_odd()).to_bits(), 0x3f81);
        assert_eq!(f32_to_bf16(d as f32).to_bits(), 0x3f80);
        let mut x = 5u64;
        for i in 0..100_000 {
            let v = (xorshift(&mut x) as i64) >> (i % 60);
            let o = v.to_f32_odd();
            assert_eq!(
                f32_to_bf16(o).to_bits(),
                bf16::from_f64(rne_int(v, 8)).to_bits(),
                "{v}"
            );
            assert_eq!(
                f32_to_f16(o).to_bits(),
                f16::from_f64(rne_int(v, 11)).to_bits(),
                "{v}"
            );
        }
        for v in [
            i64::MAX,
            i64::MIN,
            (1 << 40) + (1 << 32) + 1,
            257,
            -257,
            0,
            -1,
        ] {
            let o = v.to_f32_odd();
            assert_eq!(
                f32_to_bf16(o).to_bits(),
                bf16::from_f64(rne_int(v, 8)).to_bits(),
                "{v}"
            );
        }
    }

    /// `v` rounded to `p` significant bits, ties to even, by integer arithmetic (exact in
    /// f64, so `half` rounds it no further).
    fn rne_int(v: i64, p: u32) -> f64 {
        let mag = v.unsigned_abs() as u128;
        let len = 128 - mag.leading_zeros();
        let r = if len <= p {
            mag
        } else {
            let shift = len - p;
            let (q, rem, half) = (mag >> shift, mag & ((1 << shift) - 1), 1u128 << (shift - 1));
            let up = rem > half || (rem == half && q & 1 == 1);
            (q + up as u128) << shift
        };
        if v < 0 {
            -(r as f64)
        } else {
            r as f64
        }
    }
}
