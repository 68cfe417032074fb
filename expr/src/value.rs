//! Values in their math type's encoding, in a `u64`: `F32`/`F64` their bits, integers their
//! two's-complement bits zero-extended from their width, bool 0 or 1. Conversions follow
//! the `cast` op's rules ([`CastFrom`]), so a load, a cast and the final store give the
//! bits today's `cast` kernels give.

use crate::ir::Class;
use gpu_kernels::elem::{bf16, f16, f8e4m3fn, f8e5m2, Bool, ElemType};
use gpu_kernels::ops::CastFrom;

/// A math type's values as Rust values.
pub trait Math: Copy {
    const CLASS: Class;
    fn dec(v: u64) -> Self;
    fn enc(self) -> u64;
}

macro_rules! math {
    ($($t:ty => $c:ident, |$x:ident| $dec:expr, |$y:ident| $enc:expr;)*) => {$(
        impl Math for $t {
            const CLASS: Class = Class::$c;
            #[inline(always)] fn dec($x: u64) -> Self { $dec }
            #[inline(always)] fn enc(self) -> u64 { let $y = self; $enc }
        }
    )*};
}
math! {
    f32 => F32, |v| f32::from_bits(v as u32), |x| x.to_bits() as u64;
    f64 => F64, |v| f64::from_bits(v), |x| x.to_bits();
    i32 => I32, |v| v as u32 as i32, |x| x as u32 as u64;
    i64 => I64, |v| v as i64, |x| x as u64;
    u32 => U32, |v| v as u32, |x| x as u64;
    u8 => U8, |v| v as u8, |x| x as u64;
    u64 => U64, |v| v, |x| x;
    Bool => Bool, |v| Bool::from(v as u8 != 0), |x| x.get() as u64;
}

/// Calls `$body` with `$T` bound to the Rust type of math type `$c`, with the `U64` arm
/// only where `$ext` (a constant): `u64` math (its
/// 64-bit unsigned division among the arms) took the general interpreter's kernels from
/// 81–90 registers to 122–125 on sm_90, so those kernels hold it only in their extended
/// form (the host runs programs of `u64` math there); without it, `U64` runs `Bool`'s arm.
macro_rules! with_class_in {
    ($ext:expr, $c:expr, $T:ident => $body:expr) => {
        match $c {
            Class::F32 => {
                type $T = f32;
                $body
            }
            Class::F64 => {
                type $T = f64;
                $body
            }
            Class::I32 => {
                type $T = i32;
                $body
            }
            Class::I64 => {
                type $T = i64;
                $body
            }
            Class::U32 => {
                type $T = u32;
                $body
            }
            Class::U8 => {
                type $T = u8;
                $body
            }
            Class::U64 if $ext => {
                type $T = u64;
                $body
            }
            Class::Bool | Class::U64 => {
                type $T = Bool;
                $body
            }
        }
    };
}
pub(crate) use with_class_in;

#[inline(always)]
fn cast<To: Math + CastFrom<From>, From: Math>(v: u64) -> u64 {
    To::cast_from(From::dec(v)).enc()
}

/// `v` of math type `from` converted to math type `to`, as the `cast` op.
#[inline(always)]
pub fn convert(from: Class, to: Class, v: u64) -> u64 {
    convert_in::<true>(from, to, v)
}

/// [`convert`] with `u64` math only where `EXT` (the general kernels without extended ops
/// hold no `u64` arm).
#[inline(always)]
pub fn convert_in<const EXT: bool>(from: Class, to: Class, v: u64) -> u64 {
    with_class_in!(EXT, to, To => with_class_in!(EXT, from, From => cast::<To, From>(v)))
}

/// An element's bits (zero-extended) as a value of its math type ([`Class::of`]): exact.
#[inline(always)]
pub fn widen(e: ElemType, bits: u64) -> u64 {
    match e {
        ElemType::F16 => <f32 as CastFrom<f16>>::cast_from(f16::from_bits(bits as u16)).enc(),
        ElemType::BF16 => <f32 as CastFrom<bf16>>::cast_from(bf16::from_bits(bits as u16)).enc(),
        ElemType::F8E4M3 => <f32 as CastFrom<f8e4m3fn>>::cast_from(f8e4m3fn(bits as u8)).enc(),
        ElemType::F8E5M2 => <f32 as CastFrom<f8e5m2>>::cast_from(f8e5m2(bits as u8)).enc(),
        // Narrow integers in `I32`: sign- or zero-extended.
        ElemType::I8 => (bits as u8 as i8 as i32).enc(),
        ElemType::I16 => (bits as u16 as i16 as i32).enc(),
        ElemType::U16 => (bits as u16 as i32).enc(),
        // Every other element type is its own math type; keep only its width.
        _ => bits & width_mask(e),
    }
}

/// [`widen`] of an element type whose math type is `c` (`Class::of(e) == Some(c)`), not a
/// float type: the fast kernels' run-time arm, which holds these conversions only (every
/// type's had cost the `u8` kernel a 200-byte stack frame; the 8-bit floats' took
/// `expr_fs_d2` from 64 registers to 66–69, so programs over them run on the general
/// interpreter).
#[inline(always)]
pub fn widen_own(c: Class, e: ElemType, bits: u64) -> u64 {
    match c {
        Class::I32 => match e {
            ElemType::I8 => (bits as u8 as i8 as i32).enc(),
            ElemType::I16 => (bits as u16 as i16 as i32).enc(),
            ElemType::U16 => (bits as u16 as i32).enc(),
            _ => bits & 0xffff_ffff,
        },
        _ => bits & width_mask(c.elem()),
    }
}

/// [`narrow`] of a value of math type `c` to an element type of that math type (as
/// [`widen_own`]): wrapping for the narrow integers.
#[inline(always)]
pub fn narrow_own(c: Class, v: u64, e: ElemType) -> u64 {
    match c {
        Class::I32 => match e {
            ElemType::I8 => v & 0xff,
            ElemType::I16 | ElemType::U16 => v & 0xffff,
            _ => v & 0xffff_ffff,
        },
        _ => v & width_mask(c.elem()),
    }
}

/// A value of math type `c` rounded once to element type `e`, as the element's bits (a
/// cast: floats to integers saturate, integers to narrower integers wrap).
#[inline(always)]
pub fn narrow(c: Class, v: u64, e: ElemType) -> u64 {
    narrow_in::<true>(c, v, e)
}

/// [`narrow`] with `u64` math only where `EXT` (as [`convert_in`]).
#[inline(always)]
pub fn narrow_in<const EXT: bool>(c: Class, v: u64, e: ElemType) -> u64 {
    macro_rules! to {
        ($t:ty, $bits:expr) => {
            with_class_in!(EXT, c, From => {
                let x = <$t as CastFrom<From>>::cast_from(From::dec(v));
                ($bits)(x)
            })
        };
    }
    match e {
        ElemType::F16 => to!(f16, |x: f16| x.to_bits() as u64),
        ElemType::BF16 => to!(bf16, |x: bf16| x.to_bits() as u64),
        ElemType::F8E4M3 => to!(f8e4m3fn, |x: f8e4m3fn| x.0 as u64),
        ElemType::F8E5M2 => to!(f8e5m2, |x: f8e5m2| x.0 as u64),
        ElemType::I8 => to!(i8, |x: i8| x as u8 as u64),
        ElemType::I16 => to!(i16, |x: i16| x as u16 as u64),
        ElemType::U16 => to!(u16, |x: u16| x as u64),
        _ => match Class::of(e) {
            Some(to) => convert_in::<EXT>(c, to, v),
            None => 0,
        },
    }
}

/// The bits an element of `e` occupies.
#[inline(always)]
pub const fn width_mask(e: ElemType) -> u64 {
    match e.size() {
        1 => 0xff,
        2 => 0xffff,
        4 => 0xffff_ffff,
        _ => u64::MAX,
    }
}

/// A literal or scalar given as `f64` in math type `c` (the `as` rules).
pub fn from_f64(c: Class, x: f64) -> u64 {
    convert(Class::F64, c, x.to_bits())
}

/// A literal or scalar given as `i64` in math type `c` (the `as` rules).
pub fn from_i64(c: Class, x: i64) -> u64 {
    convert(Class::I64, c, x as u64)
}

/// The element type of a code in a program ([`ELEMS`](crate::ir::ELEMS)); `F32` for a code
/// that is not one (a checked program has none).
pub fn elem_of(code: u8) -> ElemType {
    crate::ir::elem_of_code(code).unwrap_or(ElemType::F32)
}
