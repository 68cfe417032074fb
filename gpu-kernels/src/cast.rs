//! Conversions between element types: [`CastFrom`], the one rule every cast follows (the
//! `cast` op, scalar conversion in run-time dispatch, and the constants of [`Num`]).
//!
//! [`Num`]: crate::math::Num

use crate::elem::Bool;
use crate::float8::{
    f32_to_f8e4m3fn, f32_to_f8e5m2, f8e4m3fn, f8e4m3fn_to_f32, f8e5m2, f8e5m2_to_f32,
};
use crate::narrow::{bf16, bf16_to_f32, f16, f16_to_f32, f32_to_bf16, f32_to_f16, ToF32Odd};

/// Conversion between element types, as Rust's `as` (float to int saturates, NaN to 0);
/// to [`Bool`]: `x != 0`; from [`Bool`]: 0 or 1.
pub trait CastFrom<A> {
    fn cast_from(a: A) -> Self;
}
macro_rules! casts {
    ($($from:ty),*) => { $( casts!(@row $from; f32, f64, i32, i64, u32, u8, i8, i16, u16, u64); )* };
    (@row $from:ty; $($to:ty),*) => {$(
        impl CastFrom<$from> for $to {
            #[inline(always)] fn cast_from(a: $from) -> Self { a as $to }
        }
    )*};
}
casts!(f32, f64, i32, i64, u32, u8, i8, i16, u16, u64);
macro_rules! bool_casts {
    ($($t:ty),*) => {$(
        impl CastFrom<$t> for Bool {
            #[inline(always)] fn cast_from(a: $t) -> Self { Bool::from(a != (0 as $t)) }
        }
        impl CastFrom<Bool> for $t {
            #[inline(always)] fn cast_from(a: Bool) -> Self { a.get() as u8 as $t }
        }
    )*};
}
bool_casts!(f32, f64, i32, i64, u32, u8, i8, i16, u16, u64);
impl CastFrom<Bool> for Bool {
    #[inline(always)]
    fn cast_from(a: Bool) -> Self {
        Bool::from(a.get())
    }
}
/// Casts to and from the 16-bit floats: from them through `f32` (exact), to them rounded
/// once to nearest even (wider sources through `f32` rounded to odd, see `narrow`); from
/// the other 16-bit float through `f32`. To the same type the bits are kept as they are
/// (a NaN keeps its payload and sign, as in PyTorch's copy): a copy moves words, where a
/// round trip through `f32` cost five instructions per element (measured on an H200;
/// `benches/NOTES.md`, "Casts").
macro_rules! narrow_casts {
    ($($h:ident / $other:ident: $to:ident, $from:ident;)*) => {$(
        narrow_casts!(@from $h, $from; f32, f64, i32, i64, u32, u8, i8, i16, u16, u64, $other);
        impl CastFrom<$h> for $h {
            #[inline(always)] fn cast_from(a: $h) -> Self { a }
        }
        impl CastFrom<$h> for Bool {
            #[inline(always)] fn cast_from(a: $h) -> Self { Bool::from($to(a) != 0.0) }
        }
        impl CastFrom<Bool> for $h {
            #[inline(always)] fn cast_from(a: Bool) -> Self { $from(a.get() as u8 as f32) }
        }
        narrow_casts!(@to $h, $to; f32, f64, i32, i64, u32, u8, i8, i16, u16, u64);
    )*};
    (@from $h:ident, $from:ident; $($src:ty),*) => {$(
        impl CastFrom<$src> for $h {
            #[inline(always)] fn cast_from(a: $src) -> Self { $from(widen(a).to_f32_odd()) }
        }
    )*};
    (@to $h:ident, $to:ident; $($dst:ty),*) => {$(
        impl CastFrom<$h> for $dst {
            #[inline(always)] fn cast_from(a: $h) -> Self { $to(a) as $dst }
        }
    )*};
}
narrow_casts! {
    f16 / bf16: f16_to_f32, f32_to_f16;
    bf16 / f16: bf16_to_f32, f32_to_bf16;
}

/// A cast source as a type [`ToF32Odd`] rounds: 16-bit floats widen to `f32` (exactly).
trait Widen {
    type W: ToF32Odd;
    fn widen(self) -> Self::W;
}
#[inline(always)]
fn widen<A: Widen>(a: A) -> A::W {
    a.widen()
}
macro_rules! widen_as_is {
    ($($t:ty),*) => {$( impl Widen for $t { type W = $t; #[inline(always)] fn widen(self) -> $t { self } } )*};
}
widen_as_is!(f32, f64, i32, i64, u32, u8, i8, i16, u16, u64);
impl Widen for f16 {
    type W = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        f16_to_f32(self)
    }
}
impl Widen for bf16 {
    type W = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        bf16_to_f32(self)
    }
}

/// Casts to and from the 8-bit floats, through `f32` as PyTorch's conversions go: a source
/// converts to `f32` (rounded once, as `as` does; 16-bit floats exactly), then rounds once
/// to the 8-bit type; an 8-bit float widens to `f32` exactly and converts from there.
macro_rules! float8_casts {
    ($($t:ident: $to:ident, $from:ident;)*) => {$(
        float8_casts!(@pair $t, $to, $from; f32, f64, i32, i64, u32, u8, i8, i16, u16, u64,
                      f16, bf16, Bool);
        impl CastFrom<$t> for $t {
            #[inline(always)] fn cast_from(a: $t) -> Self { a }
        }
    )*};
    (@pair $t:ident, $to:ident, $from:ident; $($x:ty),*) => {$(
        impl CastFrom<$x> for $t {
            #[inline(always)] fn cast_from(a: $x) -> Self { $from(<f32 as CastFrom<$x>>::cast_from(a)) }
        }
        impl CastFrom<$t> for $x {
            #[inline(always)] fn cast_from(a: $t) -> Self { <$x as CastFrom<f32>>::cast_from($to(a)) }
        }
    )*};
}
float8_casts! {
    f8e4m3fn: f8e4m3fn_to_f32, f32_to_f8e4m3fn;
    f8e5m2: f8e5m2_to_f32, f32_to_f8e5m2;
}
impl CastFrom<f8e4m3fn> for f8e5m2 {
    #[inline(always)]
    fn cast_from(a: f8e4m3fn) -> Self {
        f32_to_f8e5m2(f8e4m3fn_to_f32(a))
    }
}
impl CastFrom<f8e5m2> for f8e4m3fn {
    #[inline(always)]
    fn cast_from(a: f8e5m2) -> Self {
        f32_to_f8e4m3fn(f8e5m2_to_f32(a))
    }
}
