//! Expression trees and the builder: operators and methods on [`Expr`].

use gpu_kernels::elem::ElemType;
use std::sync::Arc;
use strided_apply_expr::Opcode;

/// An elementwise expression over named inputs (tensors or run-time scalars, decided when
/// it is compiled) and literals. Cheap to clone: subtrees are shared.
///
/// ```
/// # use host as strided_apply; // the examples name the root crate, which re-exports this one
/// use strided_apply::expr::Expr;
/// let (a, b, c) = (Expr::var("a"), Expr::var("b"), Expr::var("c"));
/// let e = (a.clone() * b.clone()).sin() + c.sqrt() + a.cos() / (b.cos() + 2).log();
/// assert_eq!(e, Expr::parse("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)")?);
/// # Ok::<(), strided_apply::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Expr(pub(crate) Arc<Node>);

/// A node of an [`Expr`].
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// A named input: a tensor or a run-time scalar.
    Var(String),
    /// An integer literal (weak: it takes the type of what it meets, as a Python number).
    Int(i64),
    /// A float literal (weak).
    Float(f64),
    /// A bool literal (weak).
    Bool(bool),
    /// An op over operands (any [`Opcode`] but `Load`, `Const` and `Cast`).
    Op(Opcode, Vec<Expr>),
    /// True division (`/`): integers divide as floats, as in PyTorch.
    TrueDiv(Expr, Expr),
    /// Conversion to an element type (the `cast` op's rules; the value stays in that
    /// type's math type).
    Cast(Expr, ElemType),
}

impl Expr {
    fn new(n: Node) -> Expr {
        Expr(Arc::new(n))
    }
    /// A named input.
    pub fn var(name: &str) -> Expr {
        Expr::new(Node::Var(name.to_string()))
    }
    /// A float literal.
    pub fn float(x: f64) -> Expr {
        Expr::new(Node::Float(x))
    }
    /// An integer literal.
    pub fn int(x: i64) -> Expr {
        Expr::new(Node::Int(x))
    }
    /// A bool literal.
    pub fn bool(x: bool) -> Expr {
        Expr::new(Node::Bool(x))
    }
    /// `op` over `args` (its arity is checked when the expression is compiled).
    pub fn op(op: Opcode, args: Vec<Expr>) -> Expr {
        Expr::new(Node::Op(op, args))
    }
    /// The node at the root.
    pub fn node(&self) -> &Node {
        &self.0
    }
    /// `self` converted to `elem`.
    pub fn cast(self, elem: ElemType) -> Expr {
        Expr::new(Node::Cast(self, elem))
    }
    /// `if cond { x } else { y }`.
    pub fn where_(cond: Expr, x: impl Into<Expr>, y: impl Into<Expr>) -> Expr {
        Expr::op(Opcode::Where, vec![cond, x.into(), y.into()])
    }
    /// `self * a + b`, one rounding for floats.
    pub fn fma(self, a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
        Expr::op(Opcode::Fma, vec![self, a.into(), b.into()])
    }
    /// `min(max(self, lo), hi)`; NaN stays NaN.
    pub fn clamp(self, lo: impl Into<Expr>, hi: impl Into<Expr>) -> Expr {
        Expr::op(Opcode::Clamp, vec![self, lo.into(), hi.into()])
    }
    /// Division as the library's `div` op: integers truncate (by zero 0), floats divide.
    pub fn trunc_div(self, o: impl Into<Expr>) -> Expr {
        Expr::op(Opcode::Div, vec![self, o.into()])
    }

    /// The names of the inputs, in order of first appearance (left to right). Shared
    /// subtrees are visited once.
    pub fn names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let mut seen: std::collections::HashSet<*const Node> = Default::default();
        let mut stack: Vec<&Expr> = vec![self];
        while let Some(e) = stack.pop() {
            if !seen.insert(Arc::as_ptr(&e.0)) {
                continue;
            }
            match e.node() {
                Node::Var(n) => {
                    if !out.contains(&n.as_str()) {
                        out.push(n);
                    }
                }
                Node::Int(_) | Node::Float(_) | Node::Bool(_) => {}
                // Children pushed last first, so the leftmost is visited next.
                Node::Op(_, args) => stack.extend(args.iter().rev()),
                Node::TrueDiv(a, b) => stack.extend([b, a]),
                Node::Cast(a, _) => stack.push(a),
            }
        }
        out
    }

    /// Whether the tree, its shared subtrees counted at every use (as code is emitted),
    /// has more than `limit` nodes; stops counting at `limit + 1`.
    pub(crate) fn more_nodes_than(&self, limit: usize) -> bool {
        let mut count = 0;
        let mut stack: Vec<&Expr> = vec![self];
        while let Some(e) = stack.pop() {
            count += 1;
            if count > limit {
                return true;
            }
            match e.node() {
                Node::Op(_, args) => stack.extend(args.iter()),
                Node::TrueDiv(a, b) => stack.extend([a, b]),
                Node::Cast(a, _) => stack.push(a),
                _ => {}
            }
        }
        false
    }
}

/// Dropping a deep tree without recursion (a parsed `a + a + … + a` is one level per term).
impl Drop for Expr {
    fn drop(&mut self) {
        let mut stack: Vec<Expr> = Vec::new();
        take_children(&mut self.0, &mut stack);
        while let Some(mut e) = stack.pop() {
            take_children(&mut e.0, &mut stack);
            // `e` drops here with no children left (or shared ones, which stay alive).
        }
    }
}

/// Moves a uniquely owned node's children onto `stack`.
fn take_children(node: &mut Arc<Node>, stack: &mut Vec<Expr>) {
    if let Some(n) = Arc::get_mut(node) {
        match std::mem::replace(n, Node::Bool(false)) {
            Node::Op(_, args) => stack.extend(args),
            Node::TrueDiv(a, b) => stack.extend([a, b]),
            Node::Cast(a, _) => stack.push(a),
            _ => {}
        }
    }
}

macro_rules! unary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Expr {$(
            $(#[$m])*
            pub fn $name(self) -> Expr { Expr::op(Opcode::$op, vec![self]) }
        )*}
    };
}
unary_methods!(
    /// `|x|`.
    abs => Abs,
    /// `max(x, 0)`; NaN stays NaN.
    relu => Relu,
    /// Correctly rounded square root.
    sqrt => Sqrt,
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt,
    /// `e^x`.
    exp => Exp,
    /// Natural logarithm.
    log => Log,
    sin => Sin,
    cos => Cos,
    tanh => Tanh,
    /// `1 / (1 + e^-x)`.
    sigmoid => Sigmoid,
    /// Logical not.
    logical_not => Not,
);

macro_rules! binary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Expr {$(
            $(#[$m])*
            pub fn $name(self, o: impl Into<Expr>) -> Expr { Expr::op(Opcode::$op, vec![self, o.into()]) }
        )*}
    };
}
binary_methods!(
    /// `self ^ o` (floats).
    pow => Pow,
    /// NaN-propagating minimum.
    minimum => Min,
    /// NaN-propagating maximum.
    maximum => Max,
    eq => Eq,
    ne => Ne,
    lt => Lt,
    le => Le,
    gt => Gt,
    ge => Ge,
    logical_and => And,
    logical_or => Or,
);

impl From<f64> for Expr {
    fn from(x: f64) -> Expr {
        Expr::float(x)
    }
}
impl From<i64> for Expr {
    fn from(x: i64) -> Expr {
        Expr::int(x)
    }
}
impl From<i32> for Expr {
    fn from(x: i32) -> Expr {
        Expr::int(x.into())
    }
}
impl From<bool> for Expr {
    fn from(x: bool) -> Expr {
        Expr::bool(x)
    }
}
impl From<&str> for Expr {
    fn from(name: &str) -> Expr {
        Expr::var(name)
    }
}

macro_rules! operators {
    ($($tr:ident $f:ident => $make:expr),*) => {$(
        impl<R: Into<Expr>> std::ops::$tr<R> for Expr {
            type Output = Expr;
            fn $f(self, o: R) -> Expr { ($make)(self, o.into()) }
        }
        impl std::ops::$tr<Expr> for f64 {
            type Output = Expr;
            fn $f(self, o: Expr) -> Expr { ($make)(Expr::float(self), o) }
        }
        impl std::ops::$tr<Expr> for i64 {
            type Output = Expr;
            fn $f(self, o: Expr) -> Expr { ($make)(Expr::int(self), o) }
        }
    )*};
}
operators!(
    Add add => |a, b| Expr::op(Opcode::Add, vec![a, b]),
    Sub sub => |a, b| Expr::op(Opcode::Sub, vec![a, b]),
    Mul mul => |a, b| Expr::op(Opcode::Mul, vec![a, b]),
    Div div => |a, b| Expr::new(Node::TrueDiv(a, b)),
    Rem rem => |a, b| Expr::op(Opcode::Rem, vec![a, b])
);

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::op(Opcode::Neg, vec![self])
    }
}
