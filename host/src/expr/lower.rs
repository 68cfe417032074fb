//! From an [`Expr`] and the types of its arguments to a checked [`Program`]: PyTorch's type
//! promotion (literals and scalars are weak, as Python numbers), the math type of every
//! value, explicit conversions, stack depths and the limits.

use super::ast::{Expr, Node};
use crate::error::{Error, Result};
use gpu_kernels::elem::ElemType;
use strided_apply_expr::ir::elem_code;
use strided_apply_expr::value::{convert, from_f64, from_i64};
use strided_apply_expr::{
    Class, Instr, Opcode, Program, MAX_CONSTS, MAX_DEPTH, MAX_INPUTS, MAX_INSTRS,
};

/// The category of a run-time scalar (a Python number): it is weak, as in PyTorch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    Bool,
    Int,
    Float,
}

/// What a name of the expression is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// A tensor input of this element type.
    Tensor(ElemType),
    /// A run-time scalar: its value is given at each call.
    Scalar(ScalarKind),
}

/// A type during promotion: an element type, weak for literals and scalars.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ty {
    elem: ElemType,
    weak: bool,
}

fn category(e: ElemType) -> u8 {
    match e {
        ElemType::Bool => 0,
        ElemType::F32 | ElemType::F64 | ElemType::F16 | ElemType::BF16 => 2,
        _ => 1,
    }
}

fn is_signed(e: ElemType) -> bool {
    matches!(e, ElemType::I32 | ElemType::I64)
}

/// `torch.promote_types` over the element types the library has.
pub fn promote_types(a: ElemType, b: ElemType) -> ElemType {
    use ElemType::*;
    if a == b {
        return a;
    }
    let (ca, cb) = (category(a), category(b));
    if ca != cb {
        return if ca > cb { a } else { b };
    }
    match ca {
        0 => Bool,
        2 => {
            if a == F64 || b == F64 {
                F64
            } else {
                // f16 with bf16, or either with f32.
                F32
            }
        }
        _ => {
            let (sa, sb) = (a.size(), b.size());
            match (is_signed(a), is_signed(b)) {
                (true, true) | (false, false) => {
                    if sa >= sb {
                        a
                    } else {
                        b
                    }
                }
                (true, false) if sa > sb => a,
                (false, true) if sb > sa => b,
                // An unsigned type with a signed one no wider: the next wider signed type.
                _ => I64,
            }
        }
    }
}

fn promote(a: Ty, b: Ty) -> Ty {
    match (a.weak, b.weak) {
        (false, false) => Ty {
            elem: promote_types(a.elem, b.elem),
            weak: false,
        },
        (false, true) | (true, false) => {
            let (strong, weak) = if a.weak { (b, a) } else { (a, b) };
            if category(weak.elem) > category(strong.elem) {
                Ty {
                    elem: weak.elem,
                    weak: false,
                }
            } else {
                strong
            }
        }
        (true, true) => {
            if category(a.elem) >= category(b.elem) {
                a
            } else {
                b
            }
        }
    }
}

fn class(e: ElemType) -> Result<Class> {
    Class::of(e).ok_or_else(|| Error::ExprType {
        reason: format!("element type {} is not covered by expressions", e.name()),
    })
}

fn type_error(reason: String) -> Error {
    Error::ExprType { reason }
}

/// A scalar's slot in the constant table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ScalarSlot {
    pub name: String,
    pub slot: u8,
    pub class: Class,
    pub kind: ScalarKind,
}

struct Lower<'a> {
    args: &'a [(&'a str, Arg)],
    p: Program,
    n: usize,
    depth: usize,
    inputs: Vec<String>,
    /// Every constant slot's value (scalars' slots hold 0 until bound).
    consts: Vec<u64>,
    /// The literals' slots, by value and math type.
    literals: Vec<(u64, Class, usize)>,
    scalars: Vec<ScalarSlot>,
}

impl Lower<'_> {
    fn arg(&self, name: &str) -> Result<Arg> {
        self.args
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, a)| a)
            .ok_or_else(|| Error::ExprBind {
                name: name.to_string(),
                reason: "not given (pass a tensor or a number for it)".into(),
            })
    }

    fn ty(&self, e: &Expr) -> Result<Ty> {
        let strong = |elem| Ty { elem, weak: false };
        let weak = |elem| Ty { elem, weak: true };
        Ok(match e.node() {
            Node::Var(n) => match self.arg(n)? {
                Arg::Tensor(t) => strong(t),
                Arg::Scalar(ScalarKind::Bool) => weak(ElemType::Bool),
                Arg::Scalar(ScalarKind::Int) => weak(ElemType::I64),
                Arg::Scalar(ScalarKind::Float) => weak(ElemType::F32),
            },
            Node::Int(_) => weak(ElemType::I64),
            Node::Float(_) => weak(ElemType::F32),
            Node::Bool(_) => weak(ElemType::Bool),
            Node::Cast(_, t) => strong(*t),
            Node::TrueDiv(a, b) => to_float(promote(self.ty(a)?, self.ty(b)?)),
            Node::Op(op, args) => {
                if matches!(
                    op,
                    Opcode::Load | Opcode::Const | Opcode::Cast | Opcode::Narrow
                ) {
                    return Err(type_error(format!(
                        "`{}` is not an op of the expression language",
                        op.name()
                    )));
                }
                if args.len() != op.arity() {
                    return Err(type_error(format!(
                        "`{}` takes {} operand(s), not {}",
                        op.name(),
                        op.arity(),
                        args.len()
                    )));
                }
                let tys: Vec<Ty> = args.iter().map(|a| self.ty(a)).collect::<Result<_>>()?;
                op_type(*op, &tys)?
            }
        })
    }

    fn push(&mut self, op: Opcode, class: Class, arg: u8) -> Result<()> {
        let arity = op.arity();
        if self.n >= MAX_INSTRS {
            return Err(Error::ExprLimit {
                what: "instructions",
                limit: MAX_INSTRS,
                got: self.n + 1,
            });
        }
        let depth = self.depth;
        let after = depth + 1 - arity;
        if after > MAX_DEPTH {
            return Err(Error::ExprLimit {
                what: "stack depth",
                limit: MAX_DEPTH,
                got: after,
            });
        }
        self.p.instrs[self.n] = Instr {
            op: op as u8,
            class: class as u8,
            depth: depth as u8,
            arg,
        };
        self.n += 1;
        self.depth = after;
        self.p.max_depth = self.p.max_depth.max(after as u8);
        Ok(())
    }

    fn constant(&mut self, bits: u64, class: Class) -> Result<()> {
        let slot = match self
            .literals
            .iter()
            .find(|&&(b, c, _)| b == bits && c == class)
        {
            Some(&(_, _, i)) => i,
            None => {
                let i = self.new_slot(bits)?;
                self.literals.push((bits, class, i));
                i
            }
        };
        self.push(Opcode::Const, class, slot as u8)
    }

    fn new_slot(&mut self, bits: u64) -> Result<usize> {
        let i = self.consts.len();
        if i >= MAX_CONSTS {
            return Err(Error::ExprLimit {
                what: "constants and scalars",
                limit: MAX_CONSTS,
                got: i + 1,
            });
        }
        self.consts.push(bits);
        Ok(i)
    }

    /// Converts the value on top of the stack from `from` to `to`.
    fn convert(&mut self, from: Class, to: Class) -> Result<()> {
        if from == to {
            return Ok(());
        }
        self.push(Opcode::Cast, to, from as u8)
    }

    /// Emits `e` and leaves its value on the stack in math type `want`.
    fn emit(&mut self, e: &Expr, want: Class) -> Result<()> {
        match e.node() {
            Node::Var(name) => match self.arg(name)? {
                Arg::Tensor(t) => {
                    let i = match self.inputs.iter().position(|n| n == name) {
                        Some(i) => i,
                        None => {
                            if self.inputs.len() >= MAX_INPUTS {
                                return Err(Error::ExprLimit {
                                    what: "tensor inputs",
                                    limit: MAX_INPUTS,
                                    got: self.inputs.len() + 1,
                                });
                            }
                            let code = elem_code(t).ok_or_else(|| {
                                type_error(format!("input `{name}`: {} is not covered", t.name()))
                            })?;
                            self.p.inputs[self.inputs.len()] = code;
                            self.inputs.push(name.clone());
                            self.inputs.len() - 1
                        }
                    };
                    let c = class(t)?;
                    self.push(Opcode::Load, c, i as u8)?;
                    self.convert(c, want)
                }
                Arg::Scalar(kind) => {
                    // One slot per (scalar, math type): filled when the values are bound.
                    let slot = match self
                        .scalars
                        .iter()
                        .find(|s| s.name == *name && s.class == want)
                    {
                        Some(s) => s.slot as usize,
                        None => {
                            let slot = self.new_slot(0)?;
                            self.scalars.push(ScalarSlot {
                                name: name.clone(),
                                slot: slot as u8,
                                class: want,
                                kind,
                            });
                            slot
                        }
                    };
                    self.push(Opcode::Const, want, slot as u8)
                }
            },
            Node::Int(x) => {
                // As PyTorch, an integer that does not fit the integer type it meets is an
                // error (`uint8 + 300`), not a wrapped value.
                let fits = match want {
                    Class::I32 => i32::try_from(*x).is_ok(),
                    Class::U32 => u32::try_from(*x).is_ok(),
                    Class::U8 => u8::try_from(*x).is_ok(),
                    _ => true,
                };
                if !fits {
                    return Err(type_error(format!(
                        "the literal {x} does not fit {}",
                        want.elem().name()
                    )));
                }
                self.constant(from_i64(want, *x), want)
            }
            Node::Float(x) => self.constant(from_f64(want, *x), want),
            Node::Bool(b) => self.constant(convert(Class::Bool, want, *b as u64), want),
            Node::Cast(a, t) => {
                let ty = self.ty(a)?;
                let from = class_meeting(ty, *t)?;
                self.emit(a, from)?;
                match t {
                    ElemType::F16 | ElemType::BF16 => {
                        let code = elem_code(*t).unwrap_or(0);
                        self.push(Opcode::Narrow, from, code)?;
                        self.convert(Class::F32, want)
                    }
                    _ => {
                        let to = class(*t)?;
                        self.convert(from, to)?;
                        self.convert(to, want)
                    }
                }
            }
            Node::TrueDiv(a, b) => {
                let c = class(self.ty(e)?.elem)?;
                self.emit(a, c)?;
                self.emit(b, c)?;
                self.push(Opcode::Div, c, 0)?;
                self.convert(c, want)
            }
            Node::Op(op, args) => {
                let tys: Vec<Ty> = args.iter().map(|a| self.ty(a)).collect::<Result<_>>()?;
                let result = class(op_type(*op, &tys)?.elem)?;
                let operands = operand_class(*op, &tys)?;
                for (k, a) in args.iter().enumerate() {
                    let c = if *op == Opcode::Where && k == 0 {
                        Class::Bool
                    } else {
                        operands
                    };
                    self.emit(a, c)?;
                }
                self.push(*op, operands, 0)?;
                self.convert(result, want)
            }
        }
    }
}

/// The math type a value of type `ty` is computed in when it goes to element type
/// `target` (a cast, or the output): its own, or for a weak number (a literal or scalar)
/// the target's at once, f64 for a 16-bit target (rounded once there), not f32 first.
fn class_meeting(ty: Ty, target: ElemType) -> Result<Class> {
    match (ty.weak, target) {
        (true, ElemType::F16 | ElemType::BF16) if category(ty.elem) > 0 => Ok(Class::F64),
        (true, _) if category(ty.elem) > 0 => class(target),
        _ => class(ty.elem),
    }
}

fn to_float(t: Ty) -> Ty {
    if category(t.elem) < 2 {
        Ty {
            elem: ElemType::F32,
            weak: t.weak,
        }
    } else {
        t
    }
}

fn promote_all(tys: &[Ty]) -> Ty {
    let mut t = tys[0];
    for &u in &tys[1..] {
        t = promote(t, u);
    }
    t
}

/// The math type an op's operands are computed in (a `where`'s condition aside).
fn operand_class(op: Opcode, tys: &[Ty]) -> Result<Class> {
    use Opcode::*;
    let t = match op {
        And | Or | Not => return Ok(Class::Bool),
        Where => promote(tys[1], tys[2]),
        Sqrt | Rsqrt | Exp | Log | Sin | Cos | Tanh | Sigmoid | Pow => to_float(promote_all(tys)),
        _ => promote_all(tys),
    };
    class(t.elem)
}

/// The type of an op's result, or why the op does not take these operands.
fn op_type(op: Opcode, tys: &[Ty]) -> Result<Ty> {
    use Opcode::*;
    let name = op.name();
    let t = match op {
        Where => promote(tys[1], tys[2]),
        And | Or | Not => {
            return Ok(Ty {
                elem: ElemType::Bool,
                weak: tys.iter().all(|t| t.weak),
            })
        }
        _ => promote_all(tys),
    };
    let cat = category(t.elem);
    match op {
        Eq | Ne | Lt | Le | Gt | Ge => Ok(Ty {
            elem: ElemType::Bool,
            weak: t.weak,
        }),
        Sqrt | Rsqrt | Exp | Log | Sin | Cos | Tanh | Sigmoid | Pow => Ok(to_float(t)),
        Add | Sub | Mul | Div | Min | Max | Fma | Clamp | Neg | Abs | Relu | Rem if cat == 0 => {
            Err(type_error(format!(
                "`{name}` of bools: cast them to a number type first (e.g. i32(x))"
            )))
        }
        Rem if cat == 2 => Err(type_error(format!(
            "`{name}` (`%`) of floats is not in the op set yet; it takes integers"
        ))),
        Load | Const | Cast | Narrow => Err(type_error(format!(
            "`{name}` is not an op of the expression language"
        ))),
        _ => Ok(t),
    }
}

/// A compiled expression: the program and how its arguments bind.
#[derive(Clone, Debug, PartialEq)]
pub struct Compiled {
    pub(crate) program: Program,
    pub(crate) inputs: Vec<String>,
    pub(crate) scalars: Vec<ScalarSlot>,
    pub(crate) out: ElemType,
    /// Whether GPU launches hoist broadcast-invariant subexpressions
    /// ([`Compiled::with_hoisting`]).
    pub(crate) hoist: bool,
}

/// Compiles `e` with `args` naming every input's binding; the output's element type is
/// `out`, or the expression's own type.
pub(crate) fn compile(e: &Expr, args: &[(&str, Arg)], out: Option<ElemType>) -> Result<Compiled> {
    for (i, (n, _)) in args.iter().enumerate() {
        if args[..i].iter().any(|(m, _)| m == n) {
            return Err(Error::ExprBind {
                name: n.to_string(),
                reason: "given twice".into(),
            });
        }
    }
    let names = e.names();
    if let Some((n, _)) = args.iter().find(|(n, _)| !names.contains(n)) {
        return Err(Error::ExprBind {
            name: n.to_string(),
            reason: format!(
                "not a name of the expression (its names: {})",
                names.join(", ")
            ),
        });
    }
    // Every node emits at least one instruction: a larger tree (shared subtrees counted at
    // every use) is over the limit, and is refused before anything recurses over it.
    if e.more_nodes_than(MAX_INSTRS) {
        return Err(Error::ExprLimit {
            what: "instructions",
            limit: MAX_INSTRS,
            got: MAX_INSTRS + 1,
        });
    }
    let mut l = Lower {
        args,
        p: Program::default(),
        n: 0,
        depth: 0,
        inputs: Vec::new(),
        consts: Vec::new(),
        literals: Vec::new(),
        scalars: Vec::new(),
    };
    let ty = l.ty(e)?;
    let out = out.unwrap_or(ty.elem);
    class(out)?;
    let result = class_meeting(ty, out)?;
    l.emit(e, result)?;
    let code = elem_code(out).ok_or_else(|| type_error(format!("output {}", out.name())))?;
    for (i, &b) in l.consts.iter().enumerate() {
        l.p.consts[i] = b;
    }
    l.p.len = l.n as u8;
    l.p.n_inputs = l.inputs.len() as u8;
    l.p.out = code;
    l.p.result = result as u8;
    l.p.fast = strided_apply_expr::eval::fast_class(&l.p)
        .map_or(strided_apply_expr::ir::NOT_FAST, |c| c as u8);
    Ok(Compiled {
        program: l.p,
        inputs: l.inputs,
        scalars: l.scalars,
        out,
        hoist: true,
    })
}
