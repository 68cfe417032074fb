//! 8-bit floats as PyTorch stores them: [`f8e4m3fn`] (`torch.float8_e4m3fn`: 4 exponent
//! bits, bias 7, no infinity, `0x7f`/`0xff` NaN, largest finite 448) and [`f8e5m2`]
//! (`torch.float8_e5m2`: 5 exponent bits, bias 15, IEEE-style infinities and NaNs, largest
//! finite 57344).
//!
//! They are storage types: a load widens to `f32` exactly, a store rounds an `f32` once to
//! nearest even with PyTorch's rules (c10's `fp8e4m3fn_from_fp32_value` and
//! `fp8e5m2_from_fp32_value`): `f8e4m3fn` has no infinity, so every magnitude from 480 up,
//! infinities and NaN give NaN (`0x7f`, with the sign); `f8e5m2` rounds magnitudes from
//! 61440 up to infinity and gives NaN `0x7f` for NaN. Wider sources go through `f32` first,
//! as PyTorch's conversions do (an `f64` is rounded twice). The same integer and `f32`
//! arithmetic runs on the GPU and the host, so both give the same bits.

use bytemuck::{Pod, Zeroable};

macro_rules! float8 {
    ($($(#[$m:meta])* $t:ident;)*) => {$(
        $(#[$m])*
        #[allow(non_camel_case_types)]
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        pub struct $t(pub u8);

        impl $t {
            #[inline(always)]
            pub const fn from_bits(b: u8) -> Self {
                $t(b)
            }
            #[inline(always)]
            pub const fn to_bits(self) -> u8 {
                self.0
            }
        }
    )*};
}
float8! {
    /// `torch.float8_e4m3fn`: see the module documentation.
    f8e4m3fn;
    /// `torch.float8_e5m2`: see the module documentation.
    f8e5m2;
}

/// `f8e4m3fn` to `f32` (exact; NaN keeps its sign).
#[inline(always)]
pub fn f8e4m3fn_to_f32(x: f8e4m3fn) -> f32 {
    let b = x.0 as u32;
    let sign = (b & 0x80) << 24;
    let (exp, mant) = ((b >> 3) & 0xf, b & 7);
    let mag = if exp == 0xf && mant == 7 {
        0x7fc0_0000
    } else if exp == 0 {
        // mant · 2^-9, exact.
        (mant as f32 * (1.0 / 512.0)).to_bits()
    } else {
        ((exp + 120) << 23) | (mant << 20)
    };
    f32::from_bits(sign | mag)
}

/// `f8e5m2` to `f32` (exact; NaN keeps its sign).
#[inline(always)]
pub fn f8e5m2_to_f32(x: f8e5m2) -> f32 {
    let b = x.0 as u32;
    let sign = (b & 0x80) << 24;
    let (exp, mant) = ((b >> 2) & 0x1f, b & 3);
    let mag = if exp == 0x1f {
        if mant == 0 {
            0x7f80_0000
        } else {
            0x7fc0_0000
        }
    } else if exp == 0 {
        // mant · 2^-16, exact.
        (mant as f32 * (1.0 / 65536.0)).to_bits()
    } else {
        ((exp + 112) << 23) | (mant << 21)
    };
    f32::from_bits(sign | mag)
}

/// `f32` to `f8e4m3fn`, rounded to nearest even as PyTorch does (see the module).
#[inline(always)]
pub fn f32_to_f8e4m3fn(x: f32) -> f8e4m3fn {
    const FP8_MAX: u32 = 1087 << 20; // 480.0: the first magnitude that rounds past 448
    const DENORM_MASK: u32 = 141 << 23;
    let mut bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    bits ^= sign;
    let r = if bits >= FP8_MAX {
        0x7f
    } else if bits < (121 << 23) {
        // Below 2^-6 (the smallest normal): adding 2^14 rounds to a multiple of 2^-9.
        let f = f32::from_bits(bits) + f32::from_bits(DENORM_MASK);
        f.to_bits().wrapping_sub(DENORM_MASK) as u8
    } else {
        let odd = (bits >> 20) & 1;
        let b = bits
            .wrapping_add((7u32.wrapping_sub(127) << 23).wrapping_add(0x7_ffff))
            .wrapping_add(odd);
        (b >> 20) as u8
    };
    f8e4m3fn(r | (sign >> 24) as u8)
}

/// `f32` to `f8e5m2`, rounded to nearest even as PyTorch does (see the module).
#[inline(always)]
pub fn f32_to_f8e5m2(x: f32) -> f8e5m2 {
    const INF: u32 = 255 << 23;
    const FP8_MAX: u32 = 143 << 23; // 65536.0
    const DENORM_MASK: u32 = 134 << 23;
    let mut bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    bits ^= sign;
    let r = if bits >= FP8_MAX {
        if bits > INF {
            0x7f
        } else {
            0x7c
        }
    } else if bits < (113 << 23) {
        // Below 2^-14 (the smallest normal): adding 2^7 rounds to a multiple of 2^-16.
        let f = f32::from_bits(bits) + f32::from_bits(DENORM_MASK);
        f.to_bits().wrapping_sub(DENORM_MASK) as u8
    } else {
        let odd = (bits >> 21) & 1;
        let b = bits
            .wrapping_add((15u32.wrapping_sub(127) << 23).wrapping_add(0xf_ffff))
            .wrapping_add(odd);
        (b >> 21) as u8
    };
    f8e5m2(r | (sign >> 24) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code widens to a value that rounds back to itself (NaNs to the NaN code of
    /// their sign).
    #[test]
    fn round_trips() {
        for b in 0..=255u8 {
            let x = f8e4m3fn_to_f32(f8e4m3fn(b));
            let back = f32_to_f8e4m3fn(x).0;
            if x.is_nan() {
                assert_eq!(back & 0x7f, 0x7f, "{b:#x}");
            } else {
                assert_eq!(back, b, "{b:#x} -> {x}");
            }
            let y = f8e5m2_to_f32(f8e5m2(b));
            let back = f32_to_f8e5m2(y).0;
            if y.is_nan() {
                assert_eq!(back & 0x7f, 0x7f, "{b:#x}");
            } else {
                assert_eq!(back, b, "{b:#x} -> {y}");
            }
        }
    }

    #[test]
    fn known_values() {
        assert_eq!(f8e4m3fn_to_f32(f8e4m3fn(0x7e)), 448.0);
        assert_eq!(f8e4m3fn_to_f32(f8e4m3fn(0x01)), 2f32.powi(-9));
        assert_eq!(f8e5m2_to_f32(f8e5m2(0x7b)), 57344.0);
        assert_eq!(f8e5m2_to_f32(f8e5m2(0x7c)), f32::INFINITY);
        assert_eq!(f8e5m2_to_f32(f8e5m2(0x01)), 2f32.powi(-16));
        // Saturation and overflow as PyTorch: e4m3fn has no infinity.
        assert_eq!(f32_to_f8e4m3fn(464.0).0, 0x7e);
        assert_eq!(f32_to_f8e4m3fn(480.0).0, 0x7f);
        assert_eq!(f32_to_f8e4m3fn(f32::INFINITY).0, 0x7f);
        assert_eq!(f32_to_f8e4m3fn(f32::NEG_INFINITY).0, 0xff);
        assert_eq!(f32_to_f8e5m2(61440.0).0, 0x7c);
        assert_eq!(f32_to_f8e5m2(61439.0).0, 0x7b);
        assert_eq!(f32_to_f8e5m2(f32::NAN).0, 0x7f);
        // Ties to even: 1 + 1/16 lies halfway between 1 and 1 + 1/8 in e4m3fn.
        assert_eq!(f32_to_f8e4m3fn(1.0625).0, 0x38);
        assert_eq!(f32_to_f8e4m3fn(1.1875).0, 0x3a);
        assert_eq!(f32_to_f8e4m3fn(-0.0).0, 0x80);
    }

    /// Rounding is to the nearest code, ties to even, checked against the decoded values
    /// for a sweep of `f32` values over both types' ranges.
    #[test]
    fn rounds_to_nearest_even() {
        fn check(x: f32, code: u8, decode: impl Fn(u8) -> f32, max: f32) {
            let got = decode(code);
            if x.abs() >= max {
                return;
            }
            let mut best: Option<(f32, u8)> = None;
            for b in 0..=255u8 {
                let v = decode(b);
                if v.is_nan()
                    || v.is_infinite()
                    || (v == 0.0 && v.is_sign_negative() != x.is_sign_negative())
                {
                    continue;
                }
                let d = (v - x).abs();
                best = match best {
                    Some((bd, bb)) if bd < d || (bd == d && bb & 1 == 0) => Some((bd, bb)),
                    _ => Some((d, b)),
                };
            }
            let (_, b) = best.expect("a finite code");
            assert_eq!(got, decode(b), "x = {x}");
        }
        let mut x = 1e-9f32;
        while x < 7e4 {
            for s in [x, -x] {
                check(
                    s,
                    f32_to_f8e4m3fn(s).0,
                    |b| f8e4m3fn_to_f32(f8e4m3fn(b)),
                    464.0,
                );
                check(s, f32_to_f8e5m2(s).0, |b| f8e5m2_to_f32(f8e5m2(b)), 61440.0);
            }
            x *= 1.0137;
        }
    }
}
