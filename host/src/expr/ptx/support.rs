//! Which programs the generator writes: [`supports`] and [`supports_reduce`], op by op
//! ([`instr_ok`]), and whether a program calls the library ([`calls_lib`]).

use super::types::is_int;
use gpu_kernels::elem::ElemType;
use strided_apply_expr::ir::{elem_of_code, Class, Opcode, Program};
use strided_apply_expr::t1lib;

/// Whether tier 1 compiles `p` (the generator writes it): every value of a float math type, an integer math type
/// (`I32`, `I64`, `U32`, `U8`, `U64`) or bool, every op one the generator writes; inputs and
/// output of the float types `f32`, `f64`, `f16`, `bf16`, the integer types or bool. Not
/// compiled: the 8-bit floats, an `f64` or integer value rounded to a 16-bit float (the
/// library rounds those through `f32` rounded to odd, which the generator does not write),
/// `nextafter` of a 16-bit float, and expression reductions of integer math
/// ([`supports_reduce`]).
pub(crate) fn supports(p: &Program) -> bool {
    let io = |code: u8| {
        matches!(
            elem_of_code(code),
            Some(
                ElemType::F32
                    | ElemType::F64
                    | ElemType::F16
                    | ElemType::BF16
                    | ElemType::Bool
                    | ElemType::I8
                    | ElemType::I16
                    | ElemType::U16
                    | ElemType::I32
                    | ElemType::U32
                    | ElemType::U8
                    | ElemType::I64
                    | ElemType::U64
            )
        )
    };
    let (Some(result), Some(out)) = (Class::from_code(p.result), elem_of_code(p.out)) else {
        return false;
    };
    io(p.out)
        && (!to_half(out) || matches!(result, Class::F32 | Class::Bool))
        && p.inputs[..p.n_inputs as usize].iter().all(|&c| io(c))
        && p.code().iter().all(|i| {
            let (Some(op), Some(class)) = (Opcode::from_code(i.op), Class::from_code(i.class))
            else {
                return false;
            };
            instr_ok(op, class, i.arg)
        })
}

/// Whether tier 1 compiles `p` as an expression reduction: [`supports`], and every value of
/// a float math type or bool (the reduction kernels are not tested with integer math yet).
pub(crate) fn supports_reduce(p: &Program) -> bool {
    let float = |c: u8| Class::from_code(c).is_some_and(|c| c.is_float() || c == Class::Bool);
    supports(p)
        && p.code().iter().all(|i| {
            float(i.class)
                && match Opcode::from_code(i.op) {
                    Some(Opcode::Cast) => float(i.arg),
                    Some(Opcode::Narrow) => elem_of_code(i.arg).is_some_and(|e| e.is_float()),
                    _ => true,
                }
        })
        && p.inputs[..p.n_inputs as usize]
            .iter()
            .all(|&c| elem_of_code(c).is_some_and(|e| e.is_float() || e == ElemType::Bool))
}

/// A 16-bit float element type.
fn to_half(e: ElemType) -> bool {
    matches!(e, ElemType::F16 | ElemType::BF16)
}

fn instr_ok(op: Opcode, class: Class, arg: u8) -> bool {
    use Opcode::*;
    let float = class.is_float();
    let int = is_int(class);
    match op {
        Load | Const => true,
        Not | And | Or | Xor => class == Class::Bool,
        BitAnd | BitOr | BitXor => class == Class::Bool || int,
        Eq | Ne => true,
        // Every conversion between the math types.
        Cast => Class::from_code(arg).is_some(),
        Narrow => match elem_of_code(arg) {
            Some(ElemType::F16 | ElemType::BF16) => class == Class::F32,
            Some(ElemType::F32) => float,
            Some(ElemType::F64) => class == Class::F64,
            // Wrapped (integers), saturated (floats) or 0 and 1 (bool).
            Some(ElemType::I8 | ElemType::I16 | ElemType::U16) => true,
            _ => false,
        },
        // `nextafter` of a 16-bit float steps in that type (the interpreter's `arg`).
        Nextafter => float && elem_of_code(arg) == Some(ElemType::F32),
        // Comparisons of bools: false < true.
        Lt | Le | Gt | Ge => true,
        BitNot => int || class == Class::Bool,
        Neg | Abs | Relu | Sign | Floor | Ceil | Round | Trunc | IsNan | IsInf | IsFinite
        | IsPosInf | IsNegInf | SignBit | Add | Sub | Mul | Div | Min | Max | Fmin | Fmax | Fma
        | Where | Clamp => float || int,
        Rem | FloorDiv | Fmod | Shl | Shr => int || (float && t1lib::name(op, class).is_some()),
        Sqrt | Rsqrt | Copysign => float,
        _ => float && t1lib::name(op, class).is_some(),
    }
}

/// Whether `p` calls the library (a float function the generator does not write).
pub(crate) fn calls_lib(p: &Program) -> bool {
    p.code().iter().any(|i| {
        let (Some(op), Some(class)) = (Opcode::from_code(i.op), Class::from_code(i.class)) else {
            return false;
        };
        t1lib::name(op, class).is_some()
    })
}
