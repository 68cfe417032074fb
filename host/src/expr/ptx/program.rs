//! The program on one element: its instructions walked over a stack of values
//! ([`Gen::program`]), each op sent to its family ([`Gen::op`]: casts, integer, bool or float
//! math).

use super::emit::Gen;
use super::types::{elem, is_int, F32T, V};
use gpu_kernels::elem::ElemType;
use strided_apply_expr::ir::{Class, Opcode, Program, MAX_CONSTS};

impl Gen {
    /// The program on one element: `inputs[k]` is input `k`'s value, `consts[c]` constant
    /// `c`'s register (each in its math type); the result's value.
    pub(super) fn program(&mut self, p: &Program, inputs: &[V], consts: &[Option<V>]) -> V {
        let mut stack: Vec<V> = Vec::new();
        for i in p.code() {
            let (Some(op), Some(class)) = (Opcode::from_code(i.op), Class::from_code(i.class))
            else {
                continue;
            };
            let arity = op.arity();
            let at = stack.len().saturating_sub(arity);
            let args: Vec<V> = stack.drain(at..).collect();
            let v = match op {
                Opcode::Load => inputs[i.arg as usize % inputs.len().max(1)].clone(),
                Opcode::Const => consts[i.arg as usize % MAX_CONSTS]
                    .clone()
                    .unwrap_or(V::F(F32T.zero.into())),
                _ => self.op(op, class, i.arg, &args),
            };
            stack.push(v);
        }
        stack.pop().unwrap_or(V::F(F32T.zero.into()))
    }

    /// Instruction `op` of math type `class` (argument `arg`) on the values `a`: a cast, an
    /// integer `Narrow`, or the op of its family (integer, bool or float math).
    pub(super) fn op(&mut self, op: Opcode, class: Class, arg: u8, a: &[V]) -> V {
        use Opcode::*;
        let x = a.first().map(V::reg).unwrap_or("").to_string();
        let y = a.get(1).map(V::reg).unwrap_or("").to_string();
        let z = a.get(2).map(V::reg).unwrap_or("").to_string();
        let Some(v) = a.first() else {
            return V::F(F32T.zero.into());
        };
        match op {
            Cast => return self.cast(Class::from_code(arg).unwrap_or(class), class, v),
            Narrow if matches!(elem(arg), ElemType::I8 | ElemType::I16 | ElemType::U16) => {
                return self.narrow_int(v, elem(arg));
            }
            _ if is_int(class) && op != Narrow => return self.int_op(op, class, &x, &y, &z),
            _ => {}
        }
        if class == Class::Bool {
            return self.bool_op(op, &x, &y);
        }
        self.float_op(op, class, arg, x, y, z)
    }
}
