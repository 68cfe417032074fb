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
    if e == ElemType::Bool {
        0
    } else if e.is_float() {
        2
    } else {
        1
    }
}

fn is_f8(e: ElemType) -> bool {
    matches!(e, ElemType::F8E4M3 | ElemType::F8E5M2)
}

/// `torch.promote_types` over the element types the library has. Two differences: the
/// unsigned types wider than `u8` promote with the signed ones as NumPy's do (to the next
/// wider signed type; PyTorch refuses them), except `u64` with a signed type, which no type
/// holds (refused, as PyTorch does); the 8-bit floats promote with nothing but themselves
/// (as PyTorch).
pub fn promote_types(a: ElemType, b: ElemType) -> Result<ElemType> {
    use ElemType::*;
    if a == b {
        return Ok(a);
    }
    if is_f8(a) || is_f8(b) {
        return Err(type_error(format!(
            "{} and {} do not promote: 8-bit floats are storage types (cast to f32 first, as PyTorch asks)",
            a.name(),
            b.name()
        )));
    }
    let (ca, cb) = (category(a), category(b));
    if ca != cb {
        return Ok(if ca > cb { a } else { b });
    }
    Ok(match ca {
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
            match (a.is_signed_int(), b.is_signed_int()) {
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
                _ => match sa.max(sb) {
                    1 => I16,
                    2 => I32,
                    4 => I64,
                    _ => {
                        return Err(type_error(format!(
                            "{} and {} do not promote: no integer type holds both (cast one first)",
                            a.name(),
                            b.name()
                        )))
                    }
                },
            }
        }
    })
}

fn promote(a: Ty, b: Ty) -> Result<Ty> {
    Ok(match (a.weak, b.weak) {
        (false, false) => Ty {
            elem: promote_types(a.elem, b.elem)?,
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
    })
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
            Node::TrueDiv(a, b) => to_float(promote(self.ty(a)?, self.ty(b)?)?),
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
                    t if narrowed(*t) => {
                        let code = elem_code(*t).unwrap_or(0);
                        self.push(Opcode::Narrow, from, code)?;
                        self.convert(class(*t)?, want)
                    }
                    _ => {
                        let to = class(*t)?;
                        self.convert(from, to)?;
                        self.convert(to, want)
                    }
                }
            }
            Node::TrueDiv(a, b) => {
                let c = class_of(self.ty(e)?)?;
                self.emit(a, c)?;
                self.emit(b, c)?;
                self.push(Opcode::Div, c, 0)?;
                self.convert(c, want)
            }
            Node::Op(op, args) => {
                let tys: Vec<Ty> = args.iter().map(|a| self.ty(a)).collect::<Result<_>>()?;
                let result = class_of(op_type(*op, &tys)?)?;
                let operands = operand_class(*op, &tys)?;
                for (k, a) in args.iter().enumerate() {
                    let c = if *op == Opcode::Where && k == 0 {
                        Class::Bool
                    } else {
                        operands
                    };
                    self.emit(a, c)?;
                }
                let t = op_type(*op, &tys)?.elem;
                // `nextafter` of a 16-bit float steps in that type (its math is `F32`).
                let arg = match (op, t) {
                    (Opcode::Nextafter, ElemType::F16 | ElemType::BF16) => {
                        elem_code(t).unwrap_or(0)
                    }
                    _ => 0,
                };
                self.push(*op, operands, arg)?;
                if narrowed(t) && !t.is_float() && !stays_in_range(*op) {
                    // An `i8`, `i16` or `u16` result computed in `I32`: wrapped to its width.
                    self.push(Opcode::Narrow, result, elem_code(t).unwrap_or(0))?;
                }
                self.convert(result, want)
            }
        }
    }
}

/// Element types whose values a program holds in a wider math type (`Class::of`): a cast to
/// one is a `Narrow` (rounding or wrapping to it), and an integer one is wrapped after
/// every op that can leave its range.
fn narrowed(e: ElemType) -> bool {
    Class::of(e).is_some_and(|c| c.elem() != e)
}

/// Ops whose result lies in the range of their operands' integer type when the operands
/// do (no wrap needed for `i8`, `i16`, `u16`).
fn stays_in_range(op: Opcode) -> bool {
    use Opcode::*;
    op.is_comparison()
        || matches!(
            op,
            Min | Max
                | Clamp
                | Where
                | Relu
                | Floor
                | Ceil
                | Round
                | Trunc
                | Fmin
                | Fmax
                | Rem
                | Fmod
                | BitAnd
                | BitOr
                | BitXor
                | Shr
                | Sign
                | And
                | Or
                | Xor
                | Not
        )
}

/// The math type a value of type `ty` is computed in when it goes to element type
/// `target` (a cast, or the output): its own, or for a weak number (a literal or scalar)
/// the target's at once, f64 for a 16-bit target (rounded once there), not f32 first.
fn class_meeting(ty: Ty, target: ElemType) -> Result<Class> {
    match (ty.weak, target) {
        (true, t) if t.is_float() && narrowed(t) && category(ty.elem) > 0 => Ok(Class::F64),
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

fn promote_all(tys: &[Ty]) -> Result<Ty> {
    let mut t = tys[0];
    for &u in &tys[1..] {
        t = promote(t, u)?;
    }
    Ok(t)
}

/// How an op types its operands and result: one list per kind, so an op added to the
/// language is typed by adding it to one of them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Computed in a float type (integers and bools go to the default float, `f32`).
    FloatFn,
    /// A float op that PyTorch defines for floats only.
    FloatOnly,
    /// Rounding: floats round, integers are unchanged.
    Rounding,
    /// Bool results of any number (`isnan` …).
    Test,
    /// Bool operands and result (`logical_and` …).
    Logical,
    /// Integers and bools (`bitwise_and` …).
    Bitwise,
    /// Integers only (shifts).
    Shift,
    /// Numbers, not bools.
    Arith,
    /// Comparisons: any promoted pair, a bool result.
    Compare,
    Where,
    /// Not an op of the language (`load`, `const`, `cast`, `narrow`).
    Internal,
}

fn kind(op: Opcode) -> Kind {
    use Opcode::*;
    match op {
        Sqrt | Rsqrt | Exp | Log | Sin | Cos | Tanh | Sigmoid | Pow | Erf | Erfc | Erfinv
        | Lgamma | Exp2 | Expm1 | Log2 | Log10 | Log1p | Tan | Asin | Acos | Atan | Sinh | Cosh
        | Asinh | Acosh | Atanh | Atan2 | Hypot | Copysign => Kind::FloatFn,
        Nextafter => Kind::FloatOnly,
        Floor | Ceil | Round | Trunc => Kind::Rounding,
        IsNan | IsInf | IsFinite | IsPosInf | IsNegInf | SignBit => Kind::Test,
        And | Or | Not | Xor => Kind::Logical,
        BitAnd | BitOr | BitXor | BitNot => Kind::Bitwise,
        Shl | Shr => Kind::Shift,
        Eq | Ne | Lt | Le | Gt | Ge => Kind::Compare,
        Where => Kind::Where,
        Load | Const | Cast | Narrow => Kind::Internal,
        Neg | Abs | Relu | Sign | Add | Sub | Mul | Div | Rem | Min | Max | FloorDiv | Fmod
        | Fmin | Fmax | Fma | Clamp => Kind::Arith,
    }
}

/// The promoted type of an op's operands (a `where`'s condition aside).
fn operands_type(op: Opcode, tys: &[Ty]) -> Result<Ty> {
    match kind(op) {
        Kind::Where => promote(tys[1], tys[2]),
        _ => promote_all(tys),
    }
}

/// The math type an op's operands are computed in (a `where`'s condition aside).
fn operand_class(op: Opcode, tys: &[Ty]) -> Result<Class> {
    let t = operands_type(op, tys)?;
    match kind(op) {
        Kind::Logical => Ok(Class::Bool),
        Kind::FloatFn => class_of(to_float(t)),
        _ => class_of(t),
    }
}

/// The math type a value of type `t` is computed in: its element type's, except that
/// arithmetic of numbers alone (`1 / s`, a weak float) is done in `f64`, as Python does it
/// before PyTorch sees the value (`celu`'s `x * (1 / alpha)` of an `f64` tensor was off by
/// the rounding of `1 / alpha` to `f32`).
fn class_of(t: Ty) -> Result<Class> {
    if t.weak && category(t.elem) == 2 {
        Ok(Class::F64)
    } else {
        class(t.elem)
    }
}

/// The type of an op's result, or why the op does not take these operands.
fn op_type(op: Opcode, tys: &[Ty]) -> Result<Ty> {
    use Opcode::*;
    let name = op.name();
    let k = kind(op);
    if k == Kind::Internal {
        return Err(type_error(format!(
            "`{name}` is not an op of the expression language"
        )));
    }
    let t = operands_type(op, tys)?;
    let boolean = Ty {
        elem: ElemType::Bool,
        weak: t.weak,
    };
    if is_f8(t.elem) {
        return Err(type_error(format!(
            "`{name}` of {}: 8-bit floats are storage types, as in PyTorch (cast to f32 first, e.g. f32(x))",
            t.elem.name()
        )));
    }
    let cat = category(t.elem);
    let refuse = |what: &str| {
        Err(type_error(format!(
            "`{name}` of {}: {what}",
            if cat == 0 {
                "bools".to_string()
            } else {
                t.elem.name().to_string()
            }
        )))
    };
    match k {
        Kind::Logical => Ok(Ty {
            elem: ElemType::Bool,
            weak: tys.iter().all(|t| t.weak),
        }),
        Kind::Compare | Kind::Test => Ok(boolean),
        Kind::FloatFn => Ok(to_float(t)),
        Kind::FloatOnly if cat != 2 => refuse("it takes floats only (cast first, e.g. f32(x))"),
        // The minimum and maximum of bools are their and and or, their sign themselves
        // (as PyTorch's).
        Kind::Arith if cat == 0 && matches!(op, Min | Max | Fmin | Fmax | Sign) => Ok(t),
        Kind::Rounding | Kind::Arith if cat == 0 => {
            refuse("cast them to a number type first (e.g. i32(x))")
        }
        Kind::Bitwise if cat == 2 => refuse("it takes integers and bools only"),
        Kind::Shift if cat != 1 => refuse("it takes integers only"),
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
    /// The tier of its GPU launches, where chosen ([`Compiled::with_tier`]).
    pub(crate) tier: Option<super::tier1::Tier>,
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
    // A last wrap to the output's own integer type is the store's: dropped (so `a + b` of
    // `i8` is the one-op program the one-op kernels run).
    if let Some(last) = l.n.checked_sub(1).map(|i| l.p.instrs[i]) {
        if last.op == Opcode::Narrow as u8 && last.class == result as u8 && last.arg == code {
            l.n -= 1;
            l.p.instrs[l.n] = Instr::default();
        }
    }
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
        tier: None,
    })
}
