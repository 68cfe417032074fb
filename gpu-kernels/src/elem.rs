//! Element types the kernels are instantiated for.

pub use crate::float8::{f8e4m3fn, f8e5m2};
use bytemuck::{Pod, Zeroable};
pub use half::{bf16, f16};

/// A boolean stored as one byte: 0 is false, anything else is true. Comparisons write 0 or 1.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Pod, Zeroable)]
pub struct Bool(pub u8);

impl Bool {
    pub const FALSE: Bool = Bool(0);
    pub const TRUE: Bool = Bool(1);
    #[inline(always)]
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

impl From<bool> for Bool {
    #[inline(always)]
    fn from(b: bool) -> Self {
        Bool(b as u8)
    }
}

/// What the kernels need of an element type.
pub trait Elem: Copy + PartialEq + Pod + Send + Sync + core::fmt::Debug + 'static {
    /// The type's name in kernel names and messages.
    const NAME: &'static str;
    /// Which [`ElemType`] this is, for the raw API and error messages.
    const TYPE: ElemType;
}

/// The element type of a raw buffer, for frameworks that choose the type at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElemType {
    F32,
    F64,
    I32,
    I64,
    U32,
    U8,
    Bool,
    /// IEEE 754 binary16 ([`f16`](struct@f16)).
    F16,
    /// bfloat16 ([`bf16`]): the high half of an `f32`.
    BF16,
    I8,
    I16,
    U16,
    U64,
    /// 8-bit float, 4 exponent bits, no infinity ([`f8e4m3fn`], `torch.float8_e4m3fn`): a
    /// storage type (loads widen to `f32`, stores round as PyTorch does).
    F8E4M3,
    /// 8-bit float, 5 exponent bits ([`f8e5m2`], `torch.float8_e5m2`): a storage type.
    F8E5M2,
}

impl ElemType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 8,
            ElemType::F16 | ElemType::BF16 | ElemType::I16 | ElemType::U16 => 2,
            ElemType::U8 | ElemType::Bool | ElemType::I8 => 1,
            ElemType::F8E4M3 | ElemType::F8E5M2 => 1,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U32 => "u32",
            ElemType::U8 => "u8",
            ElemType::Bool => "bool",
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::U16 => "u16",
            ElemType::U64 => "u64",
            ElemType::F8E4M3 => "f8e4m3fn",
            ElemType::F8E5M2 => "f8e5m2",
        }
    }

    /// Every element type, in declaration order.
    pub const ALL: [ElemType; 15] = [
        ElemType::F32,
        ElemType::F64,
        ElemType::I32,
        ElemType::I64,
        ElemType::U32,
        ElemType::U8,
        ElemType::Bool,
        ElemType::F16,
        ElemType::BF16,
        ElemType::I8,
        ElemType::I16,
        ElemType::U16,
        ElemType::U64,
        ElemType::F8E4M3,
        ElemType::F8E5M2,
    ];

    /// Floating-point types (the 16- and 8-bit ones included).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            ElemType::F32
                | ElemType::F64
                | ElemType::F16
                | ElemType::BF16
                | ElemType::F8E4M3
                | ElemType::F8E5M2
        )
    }

    /// Signed integer types.
    pub const fn is_signed_int(self) -> bool {
        matches!(
            self,
            ElemType::I8 | ElemType::I16 | ElemType::I32 | ElemType::I64
        )
    }

    /// Unsigned integer types (not `Bool`).
    pub const fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            ElemType::U8 | ElemType::U16 | ElemType::U32 | ElemType::U64
        )
    }
}

macro_rules! elem {
    ($($t:ty => $name:literal, $v:ident;)*) => {$(
        impl Elem for $t {
            const NAME: &'static str = $name;
            const TYPE: ElemType = ElemType::$v;
        }
    )*};
}

elem! {
    f32 => "f32", F32;
    f64 => "f64", F64;
    i32 => "i32", I32;
    i64 => "i64", I64;
    u32 => "u32", U32;
    u8 => "u8", U8;
    Bool => "bool", Bool;
    f16 => "f16", F16;
    bf16 => "bf16", BF16;
    i8 => "i8", I8;
    i16 => "i16", I16;
    u16 => "u16", U16;
    u64 => "u64", U64;
    f8e4m3fn => "f8e4m3fn", F8E4M3;
    f8e5m2 => "f8e5m2", F8E5M2;
}
