//! Tier 1's math library: the float functions of the op set that compiled expressions call
//! rather than write out (libdevice's transcendental functions, `fmod`, floor division …),
//! one PTX device function each per float math type, compiled ahead of time from the very
//! code the interpreter runs ([`Eval`](crate::eval::Eval)), so a compiled expression gives
//! the interpreter's bits.
//!
//! The functions are `.func`s of the family [`FAMILY`] (its one kernel, [`KERNEL`], calls
//! each so that the family holds them); the host's code generator appends its kernel to that
//! family's PTX and calls [`name`]`(op, class)`.

use crate::ir::{Class, Opcode};

/// The image family that holds the library.
pub const FAMILY: &str = "expr_t1lib";
/// Its kernel (it exists so that the family holds every function; nothing launches it).
pub const KERNEL: &str = "expr_t1lib_all";

/// `$cb!` over the library's ops: unary ops, then binary ops, each `Name "text"` with the
/// [`Eval`](crate::eval::Eval) method that computes it.
macro_rules! lib_ops {
    ($cb:ident $($pre:tt)*) => {
        $cb! { $($pre)*
            unary: Exp "exp", Log "log", Sin "sin", Cos "cos", Tanh "tanh",
                Sigmoid "sigmoid", Erf "erf";
            unary_ext: Erfc "erfc", Erfinv "erfinv", Lgamma "lgamma", Exp2 "exp2",
                Expm1 "expm1", Log2 "log2", Log10 "log10", Log1p "log1p", Tan "tan",
                Asin "asin", Acos "acos", Atan "atan", Sinh "sinh", Cosh "cosh",
                Asinh "asinh", Acosh "acosh", Atanh "atanh";
            binary: Pow "pow";
            binary_ext: Rem "remainder", FloorDiv "floor_divide", Fmod "fmod",
                Atan2 "atan2", Hypot "hypot", Nextafter "nextafter";
        }
    };
}

macro_rules! names {
    ($($kind:ident: $($op:ident $text:literal),*;)*) => {
        /// The device function computing `op` in float math type `class`, if the library
        /// has one (`t1_<op>_f32`, `t1_<op>_f64`).
        pub const fn name(op: Opcode, class: Class) -> Option<&'static str> {
            let f64 = matches!(class, Class::F64);
            if !matches!(class, Class::F32 | Class::F64) {
                return None;
            }
            match op {
                $($(Opcode::$op => Some(if f64 {
                    concat!("t1_", $text, "_f64")
                } else {
                    concat!("t1_", $text, "_f32")
                }),)*)*
                _ => None,
            }
        }

        /// Every op the library has, with its arity.
        pub const OPS: &[(Opcode, usize)] = &[$($((Opcode::$op, names!(@arity $kind))),*),*];
    };
    (@arity unary) => { 1 };
    (@arity unary_ext) => { 1 };
    (@arity binary) => { 2 };
    (@arity binary_ext) => { 2 };
}
lib_ops!(names);

#[cfg(target_arch = "nvptx64")]
mod device {
    use crate::eval::Eval;
    use crate::ir::Opcode;

    /// The functions of float type `$t`, in a module of their own (`f32s::Sin`).
    macro_rules! functions {
        ($t:ident; $($kind:ident: $($op:ident $text:literal),*;)*) => {
            $($( functions!(@one $kind $op $text $t); )*)*
        };
        (@one $kind:ident $op:ident $text:literal $t:ident) => {
            #[export_name = concat!("t1_", $text, "_", stringify!($t))]
            #[inline(never)]
            #[allow(non_snake_case)]
            pub extern "C" fn $op(x: $t, y: $t) -> $t {
                let _ = y;
                functions!(@body $kind $op $t x y)
            }
        };
        (@body unary $op:ident $t:ident $x:ident $y:ident) => {
            <$t as Eval>::unary(Opcode::$op, $x)
        };
        (@body unary_ext $op:ident $t:ident $x:ident $y:ident) => {
            <$t as Eval>::unary_ext(Opcode::$op, $x)
        };
        (@body binary $op:ident $t:ident $x:ident $y:ident) => {
            <$t as Eval>::binary(Opcode::$op, $x, $y)
        };
        (@body binary_ext $op:ident $t:ident $x:ident $y:ident) => {
            <$t as Eval>::binary_ext(Opcode::$op, $x, $y)
        };
    }

    mod f32s {
        use super::*;
        lib_ops!(functions f32;);
    }
    mod f64s {
        use super::*;
        lib_ops!(functions f64;);
    }

    macro_rules! calls {
        ($($kind:ident: $($op:ident $text:literal),*;)*) => {
            /// Calls every function once (the family's one kernel, never launched: it keeps
            /// the functions in the family's PTX).
            #[export_name = "expr_t1lib_all"]
            unsafe extern "ptx-kernel" fn all(p: *mut f64, q: *mut f32) {
                // SAFETY: never launched; were it, `p` and `q` would be two elements each.
                unsafe {
                    $($(
                        *p = f64s::$op(*p, *p.add(1));
                        *q = f32s::$op(*q, *q.add(1));
                    )*)*
                }
            }
        };
    }
    lib_ops!(calls);
}
