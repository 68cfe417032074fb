//! The program format: math types, opcodes, instructions, and the program value that a
//! kernel takes as a parameter.

use gpu_kernels::elem::ElemType;

/// Tensor inputs a program may read.
pub const MAX_INPUTS: usize = 8;
/// Constants (literals and run-time scalars) a program may hold.
pub const MAX_CONSTS: usize = 16;
/// Instructions in a program.
pub const MAX_INSTRS: usize = 64;
/// Values on the stack at once (a power of two: stack slots are indexed modulo it).
pub const MAX_DEPTH: usize = 8;

/// A math type: the type an instruction computes in. 16-bit floats compute in `F32` (their
/// loads widen exactly, the store rounds once); every other element type is its own math
/// type, so integer programs wrap at their own width, as today's ops do.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    F32 = 0,
    F64 = 1,
    I32 = 2,
    I64 = 3,
    U32 = 4,
    U8 = 5,
    Bool = 6,
    U64 = 7,
}

impl Class {
    /// Every math type, in code order.
    pub const ALL: [Class; 8] = [
        Class::F32,
        Class::F64,
        Class::I32,
        Class::I64,
        Class::U32,
        Class::U8,
        Class::Bool,
        Class::U64,
    ];

    /// The math type of an element type, `None` for one programs do not cover yet. The
    /// 16- and 8-bit floats compute in `F32`; `i8`, `i16` and `u16` in `I32` (their values
    /// fit it; a program wraps them to their width after every op that can leave it, with
    /// a `Narrow`, so they wrap as their own type does).
    pub const fn of(e: ElemType) -> Option<Class> {
        Some(match e {
            ElemType::F32
            | ElemType::F16
            | ElemType::BF16
            | ElemType::F8E4M3
            | ElemType::F8E5M2 => Class::F32,
            ElemType::F64 => Class::F64,
            ElemType::I32 | ElemType::I8 | ElemType::I16 | ElemType::U16 => Class::I32,
            ElemType::I64 => Class::I64,
            ElemType::U32 => Class::U32,
            ElemType::U8 => Class::U8,
            ElemType::Bool => Class::Bool,
            ElemType::U64 => Class::U64,
            _ => return None,
        })
    }

    /// The element type that holds this math type's values exactly.
    pub const fn elem(self) -> ElemType {
        match self {
            Class::F32 => ElemType::F32,
            Class::F64 => ElemType::F64,
            Class::I32 => ElemType::I32,
            Class::I64 => ElemType::I64,
            Class::U32 => ElemType::U32,
            Class::U8 => ElemType::U8,
            Class::Bool => ElemType::Bool,
            Class::U64 => ElemType::U64,
        }
    }

    /// The class of a code (a range check, no table).
    #[inline(always)]
    pub fn from_code(c: u8) -> Option<Class> {
        if (c as usize) < Class::ALL.len() {
            // SAFETY: `Class` is `repr(u8)` with the codes `0..ALL.len()`, in order.
            Some(unsafe { core::mem::transmute::<u8, Class>(c) })
        } else {
            None
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(self, Class::F32 | Class::F64)
    }
}

/// Element types as they are coded in a [`Program`] (input and output types): every
/// element type, a code being its position in [`ElemType::ALL`].
pub const ELEMS: [ElemType; 15] = ElemType::ALL;

/// The code of an element type in [`ELEMS`], `None` for one programs do not cover yet.
pub fn elem_code(e: ElemType) -> Option<u8> {
    ELEMS.iter().position(|&x| x == e).map(|i| i as u8)
}

/// The element type of a code, `None` for a code that is not one.
pub fn elem_of_code(c: u8) -> Option<ElemType> {
    ELEMS.get(c as usize).copied()
}

macro_rules! opcodes {
    ($($(#[$m:meta])* $name:ident = $arity:literal, $text:literal;)*) => {
        /// What an instruction does. The list is the op set of the expression language; each
        /// opcode computes as today's op of the same name does, in the instruction's
        /// [`Class`].
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Opcode { $($(#[$m])* $name),* }

        impl Opcode {
            /// Every opcode, in code order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$name),*];

            /// Values the instruction pops (it pushes one).
            pub const fn arity(self) -> usize {
                match self { $(Opcode::$name => $arity),* }
            }

            /// Its name in the expression language (`load` and `const` have no name there).
            pub const fn name(self) -> &'static str {
                match self { $(Opcode::$name => $text),* }
            }
        }
    };
}

opcodes! {
    /// Push input `arg` (loaded once per element, in its math type).
    Load = 0, "load";
    /// Push constant `arg`.
    Const = 0, "const";
    /// `-x` (wrapping for integers).
    Neg = 1, "neg";
    /// `|x|`.
    Abs = 1, "abs";
    /// `max(x, 0)`; NaN stays NaN.
    Relu = 1, "relu";
    /// Correctly rounded square root.
    Sqrt = 1, "sqrt";
    /// `1 / sqrt(x)`.
    Rsqrt = 1, "rsqrt";
    /// `e^x`.
    Exp = 1, "exp";
    /// Natural logarithm.
    Log = 1, "log";
    Sin = 1, "sin";
    Cos = 1, "cos";
    Tanh = 1, "tanh";
    /// `1 / (1 + e^-x)`.
    Sigmoid = 1, "sigmoid";
    /// Logical not (bool).
    Not = 1, "logical_not";
    /// Conversion from the math type `arg` to the instruction's class, as the `cast` op
    /// (Rust's `as`: float to int saturates, NaN to 0; to bool `x != 0`).
    Cast = 1, "cast";
    /// Rounding of the class's value to the element type whose code is `arg` (as a cast
    /// does), the result widened back to that type's math type (exact): a cast to a 16- or
    /// 8-bit float or to `i8`/`i16`/`u16` inside a program, and the wrap of those integers
    /// to their width after an op.
    Narrow = 1, "narrow";
    /// The error function (floats).
    Erf = 1, "erf";
    Erfc = 1, "erfc";
    Erfinv = 1, "erfinv";
    /// `ln |Γ(x)|`.
    Lgamma = 1, "lgamma";
    /// Rounding to an integral value (floats; integers unchanged): down, up, to nearest
    /// with ties to even (`torch.round`), toward zero.
    Floor = 1, "floor";
    Ceil = 1, "ceil";
    Round = 1, "round";
    Trunc = 1, "trunc";
    Exp2 = 1, "exp2";
    /// `e^x - 1`.
    Expm1 = 1, "expm1";
    Log2 = 1, "log2";
    Log10 = 1, "log10";
    /// `ln(1 + x)`.
    Log1p = 1, "log1p";
    Tan = 1, "tan";
    Asin = 1, "asin";
    Acos = 1, "acos";
    Atan = 1, "atan";
    Sinh = 1, "sinh";
    Cosh = 1, "cosh";
    Asinh = 1, "asinh";
    Acosh = 1, "acosh";
    Atanh = 1, "atanh";
    /// -1, 0 or 1 (`torch.sign`; NaN gives 0).
    Sign = 1, "sign";
    /// Bitwise complement (integers; bool: logical not).
    BitNot = 1, "bitwise_not";
    /// Tests of a value, bool results (integers and bools: never NaN, never infinite).
    IsNan = 1, "isnan";
    IsInf = 1, "isinf";
    IsFinite = 1, "isfinite";
    IsPosInf = 1, "isposinf";
    IsNegInf = 1, "isneginf";
    /// Whether the sign bit is set (`-0.0` included).
    SignBit = 1, "signbit";
    Add = 2, "add";
    Sub = 2, "sub";
    Mul = 2, "mul";
    /// `x / y` (integer division truncates; by zero gives 0).
    Div = 2, "div";
    /// Remainder with the sign of the divisor (Python's `%`, `torch.remainder`); integer
    /// remainder by zero gives 0.
    Rem = 2, "remainder";
    /// NaN-propagating minimum.
    Min = 2, "minimum";
    /// NaN-propagating maximum.
    Max = 2, "maximum";
    /// `x ^ y` (floats).
    Pow = 2, "pow";
    Eq = 2, "eq";
    Ne = 2, "ne";
    Lt = 2, "lt";
    Le = 2, "le";
    Gt = 2, "gt";
    Ge = 2, "ge";
    /// Logical and (bool).
    And = 2, "logical_and";
    /// Logical or (bool).
    Or = 2, "logical_or";
    /// Logical exclusive or (bool).
    Xor = 2, "logical_xor";
    /// Bitwise and, or, exclusive or (integers and bools).
    BitAnd = 2, "bitwise_and";
    BitOr = 2, "bitwise_or";
    BitXor = 2, "bitwise_xor";
    /// Shifts (integers), as PyTorch: by a negative amount or by the math type's width or
    /// more, a left shift gives 0 and a right shift fills with the sign bit (0 for an
    /// unsigned value).
    Shl = 2, "bitwise_left_shift";
    Shr = 2, "bitwise_right_shift";
    /// Division rounded toward negative infinity (`torch.floor_divide`, Python's `//`;
    /// integer division by zero gives 0).
    FloorDiv = 2, "floor_divide";
    /// Remainder with the sign of the dividend (C's `fmod`, `torch.fmod`); integer by zero
    /// gives 0.
    Fmod = 2, "fmod";
    Atan2 = 2, "atan2";
    Hypot = 2, "hypot";
    /// `|x|` with the sign of `y`.
    Copysign = 2, "copysign";
    /// The next float after `x` toward `y`.
    Nextafter = 2, "nextafter";
    /// Minimum and maximum that ignore a NaN operand (`torch.fmin`, `torch.fmax`).
    Fmin = 2, "fmin";
    Fmax = 2, "fmax";
    /// `x * y + z`, one rounding for floats.
    Fma = 3, "fma";
    /// `if c { x } else { y }`: `c` is bool, `x` and `y` of the instruction's class.
    Where = 3, "where";
    /// `min(max(x, lo), hi)`; NaN stays NaN.
    Clamp = 3, "clamp";
}

impl Opcode {
    /// The opcode of a code (a range check, no table: on the GPU a table is a memory load).
    #[inline(always)]
    pub fn from_code(c: u8) -> Option<Opcode> {
        if (c as usize) < Opcode::ALL.len() {
            // SAFETY: `Opcode` is `repr(u8)` with the codes `0..ALL.len()`, in order.
            Some(unsafe { core::mem::transmute::<u8, Opcode>(c) })
        } else {
            None
        }
    }

    /// [`arity`](Self::arity) of an opcode's code, from the order of the list (nullary,
    /// unary, binary, ternary opcodes in that order) rather than a table.
    #[inline(always)]
    pub const fn arity_of(c: u8) -> usize {
        (c >= Opcode::Neg as u8) as usize
            + (c >= Opcode::Add as u8) as usize
            + (c >= Opcode::Fma as u8) as usize
    }

    /// Whether the result is bool whatever the operands' class (comparisons and the
    /// value tests: [`is_test`](Self::is_test)).
    pub const fn is_comparison(self) -> bool {
        matches!(
            self,
            Opcode::Eq | Opcode::Ne | Opcode::Lt | Opcode::Le | Opcode::Gt | Opcode::Ge
        ) || self.is_test()
    }

    /// Whether the op is correctly rounded (or exact) in every class, so that the GPU and
    /// the CPU twin give the same bits: false for the transcendental functions, which are
    /// libdevice's on the GPU and `std`'s or `libm`'s on the host (each within a few ulp).
    pub const fn is_exact(self) -> bool {
        use Opcode::*;
        !matches!(
            self,
            Exp | Log
                | Sin
                | Cos
                | Tanh
                | Sigmoid
                | Pow
                | Erf
                | Erfc
                | Erfinv
                | Lgamma
                | Exp2
                | Expm1
                | Log2
                | Log10
                | Log1p
                | Tan
                | Asin
                | Acos
                | Atan
                | Sinh
                | Cosh
                | Asinh
                | Acosh
                | Atanh
                | Atan2
                | Hypot
        )
    }

    /// The unary tests of a value (`isnan` …): bool results.
    pub const fn is_test(self) -> bool {
        matches!(
            self,
            Opcode::IsNan
                | Opcode::IsInf
                | Opcode::IsFinite
                | Opcode::IsPosInf
                | Opcode::IsNegInf
                | Opcode::SignBit
        )
    }
}

/// One instruction: 4 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Instr {
    /// An [`Opcode`] code.
    pub op: u8,
    /// The [`Class`] code it computes in (a comparison: its operands' class; `Cast`: the
    /// class it converts to; `Narrow`: the class it rounds from).
    pub class: u8,
    /// Values on the stack before it runs (the host computes it; the interpreter reads its
    /// operands at `depth - arity ..` and writes its result at `depth - arity`).
    pub depth: u8,
    /// `Load`: the input; `Const`: the constant; `Cast`: the class it converts from;
    /// `Narrow`: the element code it rounds to; `Nextafter` of `F32` math: the element code
    /// of the 16-bit float it steps in (0, `f32`'s, otherwise).
    pub arg: u8,
}

/// A checked program, by value: what a kernel takes as its op parameter (400 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    pub instrs: [Instr; MAX_INSTRS],
    /// Constants, each in its math type's encoding ([`value`](crate::value)).
    pub consts: [u64; MAX_CONSTS],
    /// The element type code ([`elem_code`]) of each input.
    pub inputs: [u8; MAX_INPUTS],
    /// Instructions used.
    pub len: u8,
    /// Inputs used.
    pub n_inputs: u8,
    /// The output's element type code.
    pub out: u8,
    /// The [`Class`] code of the result.
    pub result: u8,
    /// The deepest the stack gets.
    pub max_depth: u8,
    /// The [`Class`] code of a program whose every value is of that one float math type
    /// (loads, constants and that type's arithmetic: [`fast_class`](crate::eval::fast_class)),
    /// which the fast path runs with typed registers and several elements per dispatch;
    /// [`NOT_FAST`] otherwise.
    pub fast: u8,
    pub _pad: [u8; 2],
}

/// [`Program::fast`] of a program that only the general path runs.
pub const NOT_FAST: u8 = 0xff;

impl Default for Program {
    fn default() -> Self {
        Program {
            instrs: [Instr::default(); MAX_INSTRS],
            consts: [0; MAX_CONSTS],
            inputs: [0; MAX_INPUTS],
            len: 0,
            n_inputs: 0,
            out: 0,
            result: 0,
            max_depth: 0,
            fast: NOT_FAST,
            _pad: [0; 2],
        }
    }
}

impl Program {
    /// The instructions used.
    pub fn code(&self) -> &[Instr] {
        &self.instrs[..(self.len as usize).min(MAX_INSTRS)]
    }
}
