//! Values and the PTX names of types: a value's register ([`V`]), the float types' names
//! ([`Ft`]) and the integer math types' ([`It`]), float constants in PTX's form, and the
//! element type of an operand's code.

use gpu_kernels::elem::ElemType;
use strided_apply_expr::ir::{elem_of_code, Class};

/// A value: a register of a float type, a predicate, or an integer register of an integer
/// math type (`.b32` for `I32`, `U32` and `U8`, a `u8` zero-extended; `.b64` for `I64` and
/// `U64`).
#[derive(Clone, Debug)]
pub(super) enum V {
    F(String),
    D(String),
    P(String),
    I(Class, String),
}

impl V {
    pub(super) fn reg(&self) -> &str {
        match self {
            V::F(r) | V::D(r) | V::P(r) | V::I(_, r) => r,
        }
    }

    /// The math type the value is of.
    pub(super) fn class(&self) -> Class {
        match self {
            V::F(_) => Class::F32,
            V::D(_) => Class::F64,
            V::P(_) => Class::Bool,
            V::I(c, _) => *c,
        }
    }
}

/// The float type's PTX names: (type, bit type, sign bit, canonical NaN, 1.0, 0.0, +inf).
pub(super) struct Ft {
    pub(super) t: &'static str,
    pub(super) b: &'static str,
    pub(super) sign: &'static str,
    pub(super) nan: &'static str,
    pub(super) one: &'static str,
    pub(super) zero: &'static str,
    pub(super) inf: &'static str,
    pub(super) ninf: &'static str,
    pub(super) f64: bool,
}

pub(super) const F32T: Ft = Ft {
    t: "f32",
    b: "b32",
    sign: "0x80000000",
    nan: "0f7FC00000",
    one: "0f3F800000",
    zero: "0f00000000",
    inf: "0f7F800000",
    ninf: "0fFF800000",
    f64: false,
};
pub(super) const F64T: Ft = Ft {
    t: "f64",
    b: "b64",
    sign: "0x8000000000000000",
    nan: "0d7FF8000000000000",
    one: "0d3FF0000000000000",
    zero: "0d0000000000000000",
    inf: "0d7FF0000000000000",
    ninf: "0dFFF0000000000000",
    f64: true,
};

pub(super) fn ft_of(class: Class) -> &'static Ft {
    if class == Class::F64 {
        &F64T
    } else {
        &F32T
    }
}

/// An integer math type's PTX names: its arithmetic type `t` (`s32`, `u32`, `s64`, `u64`;
/// `U8` computes in `u32`, its values zero-extended), bit type `b`, width in bits as the
/// interpreter's shifts read it, signedness, whether it is 64 bits wide, and whether it
/// is `U8` (held in a wider register: an op that can leave 8 bits is and-ed back to them).
pub(super) struct It {
    pub(super) t: &'static str,
    pub(super) b: &'static str,
    pub(super) bits: u32,
    pub(super) signed: bool,
    pub(super) wide: bool,
    pub(super) byte: bool,
}

/// The names of integer math type `class` (`I32`'s for a type that is not one).
pub(super) fn it_of(class: Class) -> It {
    let (t, bits, signed, wide) = match class {
        Class::I64 => ("s64", 64, true, true),
        Class::U64 => ("u64", 64, false, true),
        Class::U32 => ("u32", 32, false, false),
        Class::U8 => ("u32", 8, false, false),
        _ => ("s32", 32, true, false),
    };
    It {
        t,
        b: if wide { "b64" } else { "b32" },
        bits,
        signed,
        wide,
        byte: class == Class::U8,
    }
}

/// A float constant of type `ft` in PTX's hexadecimal form.
pub(super) fn fconst(ft: &Ft, v: f64) -> String {
    if ft.f64 {
        format!("0d{:016X}", v.to_bits())
    } else {
        format!("0f{:08X}", (v as f32).to_bits())
    }
}

/// Whether a math type is one of the integer types.
pub(super) fn is_int(c: Class) -> bool {
    !c.is_float() && c != Class::Bool
}

/// The element type of input or output code `c` (`supports` checked it).
pub(super) fn elem(c: u8) -> ElemType {
    elem_of_code(c).unwrap_or(ElemType::F32)
}
