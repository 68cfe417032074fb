//! The expression language, parsed into an [`Expr`].
//!
//! ```text
//! expr    = or
//! or      = and (("||" | "|") and)*
//! and     = not (("&&" | "&") not)*
//! not     = ("!" | "~") not | compare
//! compare = sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//! sum     = product (("+" | "-") product)*
//! product = unary (("*" | "/" | "%") unary)*
//! unary   = ("-" | "+") unary | power
//! power   = atom ("**" unary)?            (right-associative: -a**2 is -(a**2))
//! atom    = number | "true" | "false" | name | name "(" args ")" | "(" expr ")"
//! ```
//! `/` is true division (integers divide as floats, as in PyTorch); `%` is the remainder
//! with the sign of the divisor. Functions: every op name ([`FUNCTIONS`]), and the element
//! type names as casts (`f32(x)`, `bf16(x)`, `u8(x)`, …).

use super::ast::{Expr, Node};
use super::norm::{stage_name, Norm, Stage, MAX_STAGES};
use super::reduce::ReduceOp;
use crate::error::{Error, Result};
use gpu_kernels::elem::ElemType;
use strided_apply_expr::Opcode;

/// Function names of the language and what they build (casts aside).
pub const FUNCTIONS: &[(&str, Func)] = &[
    ("abs", Func::Op(Opcode::Abs)),
    ("neg", Func::Op(Opcode::Neg)),
    ("negative", Func::Op(Opcode::Neg)),
    ("relu", Func::Op(Opcode::Relu)),
    ("sqrt", Func::Op(Opcode::Sqrt)),
    ("rsqrt", Func::Op(Opcode::Rsqrt)),
    ("exp", Func::Op(Opcode::Exp)),
    ("log", Func::Op(Opcode::Log)),
    ("sin", Func::Op(Opcode::Sin)),
    ("cos", Func::Op(Opcode::Cos)),
    ("tanh", Func::Op(Opcode::Tanh)),
    ("sigmoid", Func::Op(Opcode::Sigmoid)),
    ("logical_not", Func::Op(Opcode::Not)),
    ("add", Func::Op(Opcode::Add)),
    ("sub", Func::Op(Opcode::Sub)),
    ("mul", Func::Op(Opcode::Mul)),
    ("div", Func::TrueDiv),
    ("true_divide", Func::TrueDiv),
    ("trunc_div", Func::Op(Opcode::Div)),
    ("remainder", Func::Op(Opcode::Rem)),
    ("min", Func::Op(Opcode::Min)),
    ("minimum", Func::Op(Opcode::Min)),
    ("max", Func::Op(Opcode::Max)),
    ("maximum", Func::Op(Opcode::Max)),
    ("pow", Func::Op(Opcode::Pow)),
    ("eq", Func::Op(Opcode::Eq)),
    ("ne", Func::Op(Opcode::Ne)),
    ("lt", Func::Op(Opcode::Lt)),
    ("le", Func::Op(Opcode::Le)),
    ("gt", Func::Op(Opcode::Gt)),
    ("ge", Func::Op(Opcode::Ge)),
    ("logical_and", Func::Op(Opcode::And)),
    ("logical_or", Func::Op(Opcode::Or)),
    ("fma", Func::Op(Opcode::Fma)),
    ("where", Func::Op(Opcode::Where)),
    ("clamp", Func::Op(Opcode::Clamp)),
    ("erf", Func::Op(Opcode::Erf)),
    ("erfc", Func::Op(Opcode::Erfc)),
    ("erfinv", Func::Op(Opcode::Erfinv)),
    ("lgamma", Func::Op(Opcode::Lgamma)),
    ("floor", Func::Op(Opcode::Floor)),
    ("ceil", Func::Op(Opcode::Ceil)),
    ("round", Func::Op(Opcode::Round)),
    ("trunc", Func::Op(Opcode::Trunc)),
    ("exp2", Func::Op(Opcode::Exp2)),
    ("expm1", Func::Op(Opcode::Expm1)),
    ("log2", Func::Op(Opcode::Log2)),
    ("log10", Func::Op(Opcode::Log10)),
    ("log1p", Func::Op(Opcode::Log1p)),
    ("tan", Func::Op(Opcode::Tan)),
    ("asin", Func::Op(Opcode::Asin)),
    ("acos", Func::Op(Opcode::Acos)),
    ("atan", Func::Op(Opcode::Atan)),
    ("sinh", Func::Op(Opcode::Sinh)),
    ("cosh", Func::Op(Opcode::Cosh)),
    ("asinh", Func::Op(Opcode::Asinh)),
    ("acosh", Func::Op(Opcode::Acosh)),
    ("atanh", Func::Op(Opcode::Atanh)),
    ("sign", Func::Op(Opcode::Sign)),
    ("bitwise_not", Func::Op(Opcode::BitNot)),
    ("isnan", Func::Op(Opcode::IsNan)),
    ("isinf", Func::Op(Opcode::IsInf)),
    ("isfinite", Func::Op(Opcode::IsFinite)),
    ("isposinf", Func::Op(Opcode::IsPosInf)),
    ("isneginf", Func::Op(Opcode::IsNegInf)),
    ("signbit", Func::Op(Opcode::SignBit)),
    ("logical_xor", Func::Op(Opcode::Xor)),
    ("bitwise_and", Func::Op(Opcode::BitAnd)),
    ("bitwise_or", Func::Op(Opcode::BitOr)),
    ("bitwise_xor", Func::Op(Opcode::BitXor)),
    ("bitwise_left_shift", Func::Op(Opcode::Shl)),
    ("bitwise_right_shift", Func::Op(Opcode::Shr)),
    ("floor_divide", Func::Op(Opcode::FloorDiv)),
    ("fmod", Func::Op(Opcode::Fmod)),
    ("atan2", Func::Op(Opcode::Atan2)),
    ("hypot", Func::Op(Opcode::Hypot)),
    ("copysign", Func::Op(Opcode::Copysign)),
    ("nextafter", Func::Op(Opcode::Nextafter)),
    ("fmin", Func::Op(Opcode::Fmin)),
    ("fmax", Func::Op(Opcode::Fmax)),
    ("sgn", Func::Op(Opcode::Sign)),
    ("arctan2", Func::Op(Opcode::Atan2)),
];

/// Element type names usable as casts (`f32(x)`), PyTorch's spellings among them.
pub const CASTS: &[(&str, ElemType)] = &[
    ("f32", ElemType::F32),
    ("float32", ElemType::F32),
    ("float", ElemType::F32),
    ("f64", ElemType::F64),
    ("float64", ElemType::F64),
    ("double", ElemType::F64),
    ("i32", ElemType::I32),
    ("int32", ElemType::I32),
    ("int", ElemType::I32),
    ("i64", ElemType::I64),
    ("int64", ElemType::I64),
    ("long", ElemType::I64),
    ("u32", ElemType::U32),
    ("uint32", ElemType::U32),
    ("u8", ElemType::U8),
    ("uint8", ElemType::U8),
    ("bool", ElemType::Bool),
    ("f16", ElemType::F16),
    ("float16", ElemType::F16),
    ("half", ElemType::F16),
    ("bf16", ElemType::BF16),
    ("bfloat16", ElemType::BF16),
    ("i8", ElemType::I8),
    ("int8", ElemType::I8),
    ("i16", ElemType::I16),
    ("int16", ElemType::I16),
    ("short", ElemType::I16),
    ("u16", ElemType::U16),
    ("uint16", ElemType::U16),
    ("u64", ElemType::U64),
    ("uint64", ElemType::U64),
    ("f8e4m3fn", ElemType::F8E4M3),
    ("float8_e4m3fn", ElemType::F8E4M3),
    ("f8e5m2", ElemType::F8E5M2),
    ("float8_e5m2", ElemType::F8E5M2),
];

/// What a function name builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Op(Opcode),
    TrueDiv,
}

impl Func {
    fn arity(self) -> usize {
        match self {
            Func::Op(op) => op.arity(),
            Func::TrueDiv => 2,
        }
    }
}

/// Longest accepted text, and deepest nesting (the parser recurses).
const MAX_TEXT: usize = 1 << 16;
const MAX_NESTING: usize = 64;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64, Option<i64>),
    Name(String),
    Sym(&'static str),
    End,
}

// `=` and `;` after every symbol they begin: the lexer takes the first that matches.
const SYMBOLS: [&str; 23] = [
    "**", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "!", "~", "&",
    "|", "(", ")", ",", "=", ";",
];

fn syntax(pos: usize, reason: impl Into<String>) -> Error {
    Error::ExprSyntax {
        pos,
        reason: reason.into(),
    }
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>> {
    if text.len() > MAX_TEXT {
        return Err(syntax(MAX_TEXT, format!("longer than {MAX_TEXT} bytes")));
    }
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                i += 1;
                if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                    i += 1;
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let s: String = text[start..i].chars().filter(|&c| c != '_').collect();
            let is_int = !s.contains(['.', 'e', 'E']);
            let f: f64 = s
                .parse()
                .map_err(|_| syntax(start, format!("`{}` is not a number", &text[start..i])))?;
            let int =
                if is_int {
                    Some(s.parse::<i64>().map_err(|_| {
                        syntax(start, format!("`{s}` does not fit a 64-bit integer"))
                    })?)
                } else {
                    None
                };
            out.push((Tok::Num(f, int), start));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Name(text[start..i].to_string()), start));
        } else if let Some(s) = SYMBOLS.iter().find(|s| b[i..].starts_with(s.as_bytes())) {
            out.push((Tok::Sym(s), i));
            i += s.len();
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(syntax(i, format!("unexpected character `{ch}`")));
        }
    }
    out.push((Tok::End, text.len()));
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    nesting: usize,
    /// A normalisation program's bindings and reductions; `None` for a plain expression,
    /// where a reduction is an error.
    scope: Option<Scope>,
}

/// What a normalisation program's text has bound so far: its `let`s (the latest of a
/// name wins) and its reductions, each a [`Stage`] named by [`stage_name`].
#[derive(Default)]
struct Scope {
    lets: Vec<(String, Expr)>,
    stages: Vec<Stage>,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at.min(self.toks.len() - 1)].0
    }
    fn pos(&self) -> usize {
        self.toks[self.at.min(self.toks.len() - 1)].1
    }
    fn eat(&mut self, sym: &str) -> bool {
        if *self.peek()
            == Tok::Sym(match SYMBOLS.iter().find(|s| **s == sym) {
                Some(s) => s,
                None => return false,
            })
        {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn eat_any(&mut self, syms: &[&'static str]) -> Option<&'static str> {
        syms.iter().copied().find(|s| self.eat(s))
    }
    fn expect(&mut self, sym: &str) -> Result<()> {
        if self.eat(sym) {
            Ok(())
        } else {
            Err(syntax(
                self.pos(),
                format!("expected `{sym}`, found {}", self.describe()),
            ))
        }
    }
    fn describe(&self) -> String {
        match self.peek() {
            Tok::Num(..) => "a number".into(),
            Tok::Name(n) => format!("`{n}`"),
            Tok::Sym(s) => format!("`{s}`"),
            Tok::End => "the end".into(),
        }
    }
    fn nest(&mut self) -> Result<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(syntax(
                self.pos(),
                format!("nested deeper than {MAX_NESTING}"),
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr> {
        self.nest()?;
        let e = self.or();
        self.nesting -= 1;
        e
    }
    fn or(&mut self) -> Result<Expr> {
        let mut e = self.and()?;
        while self.eat_any(&["||", "|"]).is_some() {
            e = e.logical_or(self.and()?);
        }
        Ok(e)
    }
    fn and(&mut self) -> Result<Expr> {
        let mut e = self.not()?;
        while self.eat_any(&["&&", "&"]).is_some() {
            e = e.logical_and(self.not()?);
        }
        Ok(e)
    }
    fn not(&mut self) -> Result<Expr> {
        if self.eat_any(&["!", "~"]).is_some() {
            self.nest()?;
            let e = self.not()?.logical_not();
            self.nesting -= 1;
            return Ok(e);
        }
        self.compare()
    }
    fn compare(&mut self) -> Result<Expr> {
        let e = self.sum()?;
        let op = match self.eat_any(&["<=", ">=", "==", "!=", "<", ">"]) {
            Some("<=") => Opcode::Le,
            Some(">=") => Opcode::Ge,
            Some("==") => Opcode::Eq,
            Some("!=") => Opcode::Ne,
            Some("<") => Opcode::Lt,
            Some(_) => Opcode::Gt,
            None => return Ok(e),
        };
        let r = self.sum()?;
        if matches!(self.peek(), Tok::Sym("<" | "<=" | ">" | ">=" | "==" | "!=")) {
            return Err(syntax(
                self.pos(),
                "comparisons do not chain: write (a < b) & (b < c)",
            ));
        }
        Ok(Expr::op(op, vec![e, r]))
    }
    fn sum(&mut self) -> Result<Expr> {
        let mut e = self.product()?;
        while let Some(s) = self.eat_any(&["+", "-"]) {
            let r = self.product()?;
            e = if s == "+" { e + r } else { e - r };
        }
        Ok(e)
    }
    fn product(&mut self) -> Result<Expr> {
        let mut e = self.unary()?;
        while let Some(s) = self.eat_any(&["*", "/", "%"]) {
            let r = self.unary()?;
            e = match s {
                "*" => e * r,
                "/" => e / r,
                _ => e % r,
            };
        }
        Ok(e)
    }
    fn unary(&mut self) -> Result<Expr> {
        if let Some(s) = self.eat_any(&["-", "+"]) {
            self.nest()?;
            let e = self.unary()?;
            self.nesting -= 1;
            // A negative literal stays a literal (`-1` is the number -1).
            return Ok(match (s, e.node()) {
                ("+", _) => e,
                (_, Node::Int(x)) => Expr::int(x.wrapping_neg()),
                (_, Node::Float(x)) => Expr::float(-x),
                _ => -e,
            });
        }
        self.power()
    }
    fn power(&mut self) -> Result<Expr> {
        let base = self.atom()?;
        if self.eat("**") {
            self.nest()?;
            let exp = self.unary()?;
            self.nesting -= 1;
            return Ok(base.pow(exp));
        }
        Ok(base)
    }
    fn atom(&mut self) -> Result<Expr> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Num(f, int) => {
                self.at += 1;
                Ok(match int {
                    Some(i) => Expr::int(i),
                    None => Expr::float(f),
                })
            }
            Tok::Name(name) => {
                self.at += 1;
                if !self.eat("(") {
                    if let Some(e) = self.scope.as_ref().and_then(|s| {
                        s.lets
                            .iter()
                            .rev()
                            .find(|(n, _)| *n == name)
                            .map(|(_, e)| e.clone())
                    }) {
                        return Ok(e);
                    }
                    return Ok(match name.as_str() {
                        "true" | "True" => Expr::bool(true),
                        "false" | "False" => Expr::bool(false),
                        _ => Expr::var(&name),
                    });
                }
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.expr()?);
                        if self.eat(")") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                if let Some(op) = ReduceOp::from_name(&name) {
                    return self.reduction(op, &name, args, pos);
                }
                call(&name, args, pos)
            }
            Tok::Sym("(") => {
                self.at += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            _ => Err(syntax(
                pos,
                format!("expected a value, found {}", self.describe()),
            )),
        }
    }
}

impl Parser {
    /// A reduction `op(x)` over the call's axes: a new stage of the program, its value the
    /// stage's name (a normalisation program's only; a plain expression refuses it).
    fn reduction(
        &mut self,
        op: ReduceOp,
        name: &str,
        mut args: Vec<Expr>,
        pos: usize,
    ) -> Result<Expr> {
        let Some(scope) = self.scope.as_mut() else {
            return Err(syntax(
                pos,
                format!(
                    "`{name}(...)` reduces over the call's axes: reductions are values only in \
                     normalisation programs (`Norm::parse`); reduce a whole expression with \
                     `Compiled::reduce`"
                ),
            ));
        };
        if args.len() != 1 {
            return Err(syntax(
                pos,
                format!("`{name}` takes 1 argument, not {}", args.len()),
            ));
        }
        if scope.stages.len() >= MAX_STAGES {
            return Err(Error::ExprLimit {
                what: "reductions",
                limit: MAX_STAGES,
                got: MAX_STAGES + 1,
            });
        }
        let k = scope.stages.len();
        scope.stages.push(Stage {
            op,
            value: args.remove(0),
        });
        Ok(Expr::var(&stage_name(k)))
    }

    /// A normalisation program: `(name "=" expr ";")* expr [";"]`.
    fn program(&mut self) -> Result<Expr> {
        loop {
            let is_let = matches!(self.peek(), Tok::Name(_))
                && matches!(self.toks.get(self.at + 1), Some((Tok::Sym("="), _)));
            if !is_let {
                break;
            }
            let Tok::Name(name) = self.peek().clone() else {
                break;
            };
            let pos = self.pos();
            if FUNCTIONS.iter().any(|(n, _)| *n == name)
                || CASTS.iter().any(|(n, _)| *n == name)
                || ReduceOp::from_name(&name).is_some()
                || matches!(name.as_str(), "true" | "True" | "false" | "False")
            {
                return Err(syntax(
                    pos,
                    format!("`{name}` is a function or literal of the language; bind another name"),
                ));
            }
            self.at += 2;
            let e = self.expr()?;
            self.expect(";")?;
            if let Some(s) = self.scope.as_mut() {
                s.lets.push((name, e));
            }
        }
        let e = self.expr()?;
        self.eat(";");
        Ok(e)
    }
}

fn call(name: &str, mut args: Vec<Expr>, pos: usize) -> Result<Expr> {
    if let Some(&(_, elem)) = CASTS.iter().find(|(n, _)| *n == name) {
        return match args.len() {
            1 => Ok(args.remove(0).cast(elem)),
            n => Err(syntax(
                pos,
                format!("`{name}` (a cast) takes 1 argument, not {n}"),
            )),
        };
    }
    let Some(&(_, f)) = FUNCTIONS.iter().find(|(n, _)| *n == name) else {
        let mut known: Vec<&str> = FUNCTIONS.iter().map(|(n, _)| *n).collect();
        known.extend(CASTS.iter().map(|(n, _)| *n));
        return Err(Error::ExprUnknown {
            name: name.to_string(),
            pos,
            known: known.join(", "),
        });
    };
    if args.len() != f.arity() {
        return Err(syntax(
            pos,
            format!(
                "`{name}` takes {} argument(s), not {}",
                f.arity(),
                args.len()
            ),
        ));
    }
    Ok(match f {
        Func::Op(op) => Expr::op(op, args),
        Func::TrueDiv => {
            let b = args.pop();
            let a = args.pop();
            match (a, b) {
                (Some(a), Some(b)) => a / b,
                _ => return Err(syntax(pos, "`div` takes 2 arguments")),
            }
        }
    })
}

impl Expr {
    /// Parses the expression language ([`expr`](crate::expr), `docs/expressions.md`); errors carry the
    /// byte position.
    pub fn parse(text: &str) -> Result<Expr> {
        let mut p = Parser {
            toks: lex(text)?,
            at: 0,
            nesting: 0,
            scope: None,
        };
        let e = p.expr()?;
        if *p.peek() != Tok::End {
            return Err(syntax(
                p.pos(),
                format!("unexpected {} after the expression", p.describe()),
            ));
        }
        Ok(e)
    }
}

impl Norm {
    /// Parses a normalisation program: `let`s (`name = expr;`), then the result; a
    /// reduction (`amax amin sum mean prod` of one argument) is a value reduced over the
    /// call's axes and broadcast back (`docs/normalisations.md`). Errors carry the byte
    /// position.
    pub fn parse(text: &str) -> Result<Norm> {
        let mut p = Parser {
            toks: lex(text)?,
            at: 0,
            nesting: 0,
            scope: Some(Scope::default()),
        };
        let e = p.program()?;
        if *p.peek() != Tok::End {
            return Err(syntax(
                p.pos(),
                format!("unexpected {} after the program", p.describe()),
            ));
        }
        let stages = p.scope.map(|s| s.stages).unwrap_or_default();
        Norm::new(stages, e)
    }
}
