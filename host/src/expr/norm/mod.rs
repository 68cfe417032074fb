//! Normalisation programs: expressions whose reductions over the call's axes are values
//! broadcast back into the rest of the expression — softmax, log-softmax, logsumexp, layer
//! and RMS norm — with `let`-bindings that name shared values.
//!
//! ```
//! # use host as strided_apply; // the examples name the root crate, which re-exports this one
//! use strided_apply::expr::{Arg, HostTensor, HostTensorMut, Norm};
//! use strided_apply::{ElemType::F32, Layout};
//! let softmax = Norm::parse("m = amax(a); e = exp(a - m); e / sum(e)")?
//!     .compile(&[("a", Arg::Tensor(F32))], None)?;
//! let a = [1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0]; // two rows of three
//! let l = Layout::contiguous(&[2, 3])?;
//! let mut out = [0.0f32; 6];
//! softmax.run_cpu(
//!     HostTensorMut::new(bytemuck::cast_slice_mut(&mut out), F32, &l),
//!     &[HostTensor::new(bytemuck::cast_slice(&a), F32, &l)],
//!     &[],
//!     &[1], // the normalised axes
//! )?;
//! assert!((out[2] - 0.66524094).abs() < 1e-6 && out[3] == 1.0 / 3.0);
//! # Ok::<(), strided_apply::Error>(())
//! ```
//!
//! **Meaning.** A program is its stages, in the order the text (or the builder) made them:
//! stage `k` is a reduction ([`ReduceOp`]) over the call's axes of an expression of the
//! inputs and of earlier stages' values, and the result is an expression of the inputs and
//! of every stage's value. Each stage's value is what [`Compiled::reduce`] of its expression
//! gives in its accumulator type — `f32` where the expression is of `f32`, `f16` or `bf16`
//! (or bool or integer) math, `f64` for `f64` — in the library's reduction order, a fixed
//! function of the row length. The result is computed in its math type with the stages'
//! values as inputs and rounds once to the output type (by default the type the expression
//! has with the stages' values weak, so a `bf16` softmax is `bf16`). A result that reads no
//! input tensor (`m + log(sum(exp(a - m)))`, logsumexp) is one value per row: its output has
//! the reduced shape (the axes kept as 1 or dropped); otherwise the output has the inputs'
//! broadcast shape.
//!
//! **Where it runs.** The CPU twin ([`CompiledNorm::run_cpu`]) runs each stage as
//! [`Compiled::reduce_cpu`] into a temporary and the result as [`Compiled::run_cpu`]: that
//! composition defines the bits. On the GPU ([`CompiledNorm::run`]) rows that fit one
//! block's registers run in one kernel, one read of the row
//! ([`fused`]); other calls run the same composition on the GPU (each stage one pass
//! over the inputs): the same bits either way.
//!
//! **Limits.** At most [`MAX_STAGES`] reductions; each stage's and the result's program
//! within the expression limits ([`MAX_INPUTS`](crate::expr::MAX_INPUTS) tensor inputs,
//! the stages' values counted as inputs).

mod cpu;
mod fused;
mod gpu;
mod plan;

use super::ast::Expr;
use super::lower::{Arg, Compiled, ScalarKind};
use super::reduce::ReduceOp;
use crate::error::{Error, Result};
use gpu_kernels::elem::ElemType;

/// Most reductions in one program.
pub const MAX_STAGES: usize = 8;

/// The name a stage's value has inside the programs (no name of the language's text).
pub(crate) fn stage_name(k: usize) -> String {
    format!("%{k}")
}

/// One reduction of a program: `op` of `value` over the call's axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub op: ReduceOp,
    pub value: Expr,
}

/// A normalisation program, before its arguments' types are known: its stages and its
/// result ([`Norm::parse`], or built with [`Norm::stage`] and [`Norm::new`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Norm {
    stages: Vec<Stage>,
    result: Expr,
}

impl Norm {
    /// The value of stage `k` (of `stages` given to [`new`](Self::new)) inside later
    /// stages and the result: the builder's way to write `amax(a)`.
    ///
    /// ```
    /// # use host as strided_apply;
    /// use strided_apply::expr::{Expr, Norm, ReduceOp, Stage};
    /// let a = Expr::var("a");
    /// let m = Norm::stage(0);
    /// let e = (a.clone() - m).exp();
    /// let softmax = Norm::new(
    ///     vec![
    ///         Stage { op: ReduceOp::Amax, value: a },
    ///         Stage { op: ReduceOp::Sum, value: e.clone() },
    ///     ],
    ///     e / Norm::stage(1),
    /// )?;
    /// assert_eq!(softmax, Norm::parse("m = amax(a); e = exp(a - m); e / sum(e)")?);
    /// # Ok::<(), strided_apply::Error>(())
    /// ```
    pub fn stage(k: usize) -> Expr {
        Expr::var(&stage_name(k))
    }

    /// A program of these stages and this result; a stage may name only earlier stages.
    pub fn new(stages: Vec<Stage>, result: Expr) -> Result<Norm> {
        if stages.len() > MAX_STAGES {
            return Err(Error::ExprLimit {
                what: "reductions",
                limit: MAX_STAGES,
                got: stages.len(),
            });
        }
        for (k, s) in stages.iter().enumerate() {
            if let Some(j) = stage_refs(&s.value).into_iter().find(|&j| j >= k) {
                return Err(Error::ExprType {
                    reason: format!("stage {k} names stage {j}, which is not an earlier one"),
                });
            }
        }
        if let Some(j) = stage_refs(&result).into_iter().find(|&j| j >= stages.len()) {
            return Err(Error::ExprType {
                reason: format!("the result names stage {j} of {}", stages.len()),
            });
        }
        Ok(Norm { stages, result })
    }

    /// Its stages, in order.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }
    /// Its result.
    pub fn result(&self) -> &Expr {
        &self.result
    }

    /// Compiles the program for arguments of these kinds (every name of the text bound
    /// once, as for [`Expr::compile`]); the output has element type `out` or, by default,
    /// the result's own type with the stages' values weak. Nothing is launched.
    pub fn compile(&self, args: &[(&str, Arg)], out: Option<ElemType>) -> Result<CompiledNorm> {
        let names = self.names();
        if let Some((n, _)) = args.iter().find(|(n, _)| !names.iter().any(|m| m == n)) {
            return Err(Error::ExprBind {
                name: n.to_string(),
                reason: format!(
                    "not a name of the program (its names: {})",
                    names.join(", ")
                ),
            });
        }
        let mut accs: Vec<ElemType> = Vec::new();
        let mut stages = Vec::new();
        for (k, s) in self.stages.iter().enumerate() {
            let bound = bind(&s.value, args, &accs, None);
            let natural = s
                .value
                .compile(&refs(&bound), None)
                .map_err(|e| in_stage(k, e))?;
            let acc = if natural.out() == ElemType::F64 {
                ElemType::F64
            } else {
                ElemType::F32
            };
            if s.op == ReduceOp::Mean && !natural.out().is_float() {
                return Err(Error::ExprType {
                    reason: format!(
                        "stage {k}: `mean` of a {} value (floats only: cast first)",
                        natural.out().name()
                    ),
                });
            }
            let c = s
                .value
                .compile(&refs(&bound), Some(acc))
                .map_err(|e| in_stage(k, e))?;
            stages.push((s.op, c));
            accs.push(acc);
        }
        let weak = bind(&self.result, args, &accs, Some(ScalarKind::Float));
        let natural = self.result.compile(&refs(&weak), None)?.out();
        // A result of the stages' values alone (one value a row) takes the inputs' type.
        let reads_input = self.result.names().iter().any(|n| {
            args.iter()
                .any(|(m, a)| m == n && matches!(a, Arg::Tensor(_)))
        });
        let natural = if reads_input {
            natural
        } else {
            let mut t: Option<ElemType> = None;
            for (_, a) in args {
                if let Arg::Tensor(e) = a {
                    t = Some(match t {
                        Some(u) => super::lower::promote_types(u, *e)?,
                        None => *e,
                    });
                }
            }
            t.filter(|e| e.is_float()).unwrap_or(natural)
        };
        let bound = bind(&self.result, args, &accs, None);
        let result = self
            .result
            .compile(&refs(&bound), Some(out.unwrap_or(natural)))?;
        let mut inputs: Vec<String> = Vec::new();
        for c in stages.iter().map(|(_, c)| c).chain([&result]) {
            for n in c.inputs() {
                if !n.starts_with('%') && !inputs.contains(n) {
                    inputs.push(n.clone());
                }
            }
        }
        let rowwise = result.inputs().iter().any(|n| !n.starts_with('%'));
        Ok(CompiledNorm {
            tier: None,
            fused: true,
            cached_rows: true,
            stages,
            accs,
            out: result.out(),
            result,
            inputs,
            rowwise,
        })
    }

    /// The names of the program (its inputs and scalars), first appearance first.
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.stages.iter().map(|s| &s.value).chain([&self.result]) {
            for n in e.names() {
                if !n.starts_with('%') && !out.iter().any(|m| m == n) {
                    out.push(n.to_string());
                }
            }
        }
        out
    }
}

/// The stages an expression names.
fn stage_refs(e: &Expr) -> Vec<usize> {
    e.names()
        .into_iter()
        .filter_map(|n| n.strip_prefix('%').and_then(|k| k.parse().ok()))
        .collect()
}

/// The arguments of `e`: those of `args` it names, and the stages it names as tensors of
/// their accumulator types (or as scalars of kind `weak`).
fn bind(
    e: &Expr,
    args: &[(&str, Arg)],
    accs: &[ElemType],
    weak: Option<ScalarKind>,
) -> Vec<(String, Arg)> {
    let names = e.names();
    let mut out: Vec<(String, Arg)> = args
        .iter()
        .filter(|(n, _)| names.contains(n))
        .map(|(n, a)| (n.to_string(), *a))
        .collect();
    for k in stage_refs(e) {
        let a = match weak {
            Some(kind) => Arg::Scalar(kind),
            None => Arg::Tensor(accs[k]),
        };
        out.push((stage_name(k), a));
    }
    out
}

fn refs(b: &[(String, Arg)]) -> Vec<(&str, Arg)> {
    b.iter().map(|(n, a)| (n.as_str(), *a)).collect()
}

fn in_stage(k: usize, e: Error) -> Error {
    match e {
        Error::ExprType { reason } => Error::ExprType {
            reason: format!("stage {k}: {reason}"),
        },
        e => e,
    }
}

/// A compiled normalisation program: each stage's and the result's compiled expression.
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledNorm {
    /// The tier of its GPU launches, where chosen ([`with_tier`](Self::with_tier)).
    tier: Option<super::Tier>,
    /// Whether GPU calls may run the fused row kernel ([`with_fused`](Self::with_fused)).
    fused: bool,
    /// Whether the row kernel may keep short rows in registers
    /// ([`with_cached_rows`](Self::with_cached_rows)).
    cached_rows: bool,
    /// Each stage's reduction and program (its output type the accumulator's).
    stages: Vec<(ReduceOp, Compiled)>,
    /// Each stage's accumulator type.
    accs: Vec<ElemType>,
    result: Compiled,
    out: ElemType,
    /// The input tensors' names, first appearance (stages first) first.
    inputs: Vec<String>,
    /// Whether the result reads an input tensor (one output element per input element);
    /// else one per row.
    rowwise: bool,
}

impl CompiledNorm {
    /// The input tensors' names, in the order operands are passed.
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }
    /// The output's element type.
    pub fn out(&self) -> ElemType {
        self.out
    }
    /// Whether the output has the inputs' shape (else the reduced shape: one value a row).
    pub fn is_rowwise(&self) -> bool {
        self.rowwise
    }
    /// The stages' programs and the result's: what runs.
    pub fn parts(&self) -> (Vec<(ReduceOp, &Compiled)>, &Compiled) {
        (
            self.stages.iter().map(|(op, c)| (*op, c)).collect(),
            &self.result,
        )
    }

    /// The same program with its GPU launches on `tier` (as
    /// [`Compiled::with_tier`]): the fused row kernel is tier 1's (a tier that interprets
    /// runs the composition on the interpreter's kernels); the composition's parts run on
    /// `tier` too.
    pub fn with_tier(mut self, tier: super::Tier) -> Self {
        self.tier = Some(tier);
        for (_, c) in &mut self.stages {
            *c = c.clone().with_tier(tier);
        }
        self.result = self.result.clone().with_tier(tier);
        self
    }

    /// The same program with its GPU calls on the fused row kernel where it takes them
    /// (`true`, the default) or always as the composition (each stage a reduction into a
    /// temporary, then the result): the same bits either way.
    pub fn with_fused(mut self, on: bool) -> Self {
        self.fused = on;
        self
    }

    /// The same program with the row kernel keeping rows of a few chunks a thread in
    /// registers (`true`, the default: one read of the row) or reading the row again for
    /// every stage: the same bits; for measurements and tests of both forms.
    pub fn with_cached_rows(mut self, on: bool) -> Self {
        self.cached_rows = on;
        self
    }

    /// The scalars of `scalars` that `c` takes.
    fn scalars_of<'a>(
        c: &Compiled,
        scalars: &[(&'a str, super::Scalar)],
    ) -> Vec<(&'a str, super::Scalar)> {
        scalars
            .iter()
            .filter(|(n, _)| c.scalars.iter().any(|s| s.name == *n))
            .copied()
            .collect()
    }

    /// Every scalar given once and taken by some part.
    fn check_scalars(&self, scalars: &[(&str, super::Scalar)]) -> Result<()> {
        for (i, (n, _)) in scalars.iter().enumerate() {
            if scalars[..i].iter().any(|(m, _)| m == n) {
                return Err(Error::ExprBind {
                    name: n.to_string(),
                    reason: "given twice".into(),
                });
            }
            let taken = self
                .stages
                .iter()
                .map(|(_, c)| c)
                .chain([&self.result])
                .any(|c| c.scalars.iter().any(|s| s.name == *n));
            if !taken {
                return Err(Error::ExprBind {
                    name: n.to_string(),
                    reason: "not a scalar of the program".into(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
