//! Expressions as data: any elementwise expression over named tensors and run-time
//! scalars, written with operators or parsed from text, compiled to a [`Program`] (no
//! compiler involved: the program is data that an interpreter runs), then run on the CPU
//! twin with the same interpreter code as the GPU's.
//!
//! ```
//! # use host as strided_apply; // the examples name the root crate, which re-exports this one
//! use strided_apply::expr::{Arg, Expr, HostTensor, HostTensorMut, ScalarKind};
//! use strided_apply::{ElemType::F32, Layout};
//! let e = Expr::parse("a * s + sqrt(b)")?;
//! let f = e.compile(&[("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32)), ("s", Arg::Scalar(ScalarKind::Float))], None)?;
//! let (a, b) = ([1.0f32, 2.0, 3.0], [4.0f32, 9.0, 16.0]);
//! let mut out = [0.0f32; 3];
//! let l = Layout::contiguous(&[3])?;
//! f.run_cpu(
//!     HostTensorMut::new(bytemuck::cast_slice_mut(&mut out), F32, &l),
//!     &[HostTensor::new(bytemuck::cast_slice(&a), F32, &l), HostTensor::new(bytemuck::cast_slice(&b), F32, &l)],
//!     &[("s", 2.0.into())],
//! )?;
//! assert_eq!(out, [4.0, 7.0, 10.0]);
//! # Ok::<(), strided_apply::Error>(())
//! ```
//!
//! **Types.** Inputs load into their math type ([`Class`]: `f32` for `f32`, `f16` and
//! `bf16`; every other element type its own, so integer programs wrap at their own width as
//! today's ops do). Mixed operands promote as `torch.result_type` (literals and scalars are
//! weak, as Python numbers); `/` divides integers as floats. The result rounds once to the
//! output's element type (the expression's type unless another is asked for).
//!
//! **Limits** (checked when compiling): [`MAX_INPUTS`] tensor inputs, [`MAX_CONSTS`]
//! literals and scalars, [`MAX_INSTRS`] instructions, a stack [`MAX_DEPTH`] deep.
//!
//! **What runs where.** A compiled expression runs on the GPU on the interpreter's kernels
//! (tier 0, [`Compiled::run`] and [`Compiled::launch`]) and on the CPU twin
//! ([`Compiled::run_cpu`]), with the same interpreter code. Its values reduce over axes in
//! one pass ([`Compiled::reduce`], [`Compiled::reduce_cpu`]: `sum`, `prod`, `amin`, `amax`,
//! `mean`, [`ReduceOp`]).

mod ast;
pub(crate) mod device;
mod disk_cache;
mod hoist;
mod lower;
mod norm;
mod parse;
mod ptx;
mod reduce;
pub(crate) mod tier1;

use crate::operand::HostOperands;
pub use crate::operand::{HostTensor, HostTensorMut, RawTensor};
pub use ast::{Expr, Node};
pub use device::DeviceArg;
pub use disk_cache::{
    cache_dir as compiled_cache_dir, clear_cache as clear_compiled_cache,
    damaged_entries as damaged_cache_entries,
};
pub use gpu_kernels::dispatch::Scalar;
pub use lower::{promote_types, Arg, Compiled, ScalarKind};
pub use norm::{CompiledNorm, Norm, Stage, MAX_STAGES};
pub use parse::{Func, CASTS, FUNCTIONS};
pub use reduce::ReduceOp;
/// Every element type programs take, in the order of their codes.
pub use strided_apply_expr::ir::ELEMS;
pub use strided_apply_expr::{
    Class, Instr, Opcode, Program, MAX_CONSTS, MAX_DEPTH, MAX_INPUTS, MAX_INSTRS,
};
pub use tier1::{launches as tier1_launches, wait_compiles, Tier};

use crate::error::{Error, Result};
use gpu_kernels::elem::ElemType;
use strided_apply_expr::value;

/// Operand names in the planner's messages: the output, then the inputs by position.
const NAMES: [&str; MAX_INPUTS + 1] = [
    "out", "input 0", "input 1", "input 2", "input 3", "input 4", "input 5", "input 6", "input 7",
];

impl Expr {
    /// Compiles the expression for arguments of these kinds: every name bound once, to a
    /// tensor of an element type or to a run-time scalar. The output has element type `out`
    /// or, by default, the expression's own (promoted) type. Nothing is launched.
    pub fn compile(&self, args: &[(&str, Arg)], out: Option<ElemType>) -> Result<Compiled> {
        lower::compile(self, args, out)
    }
}

impl Compiled {
    /// The program, its scalars' slots zero (see [`bind`](Self::bind)).
    pub fn program(&self) -> &Program {
        &self.program
    }
    /// The tensor inputs' names, in the order operands are passed (first appearance).
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }
    /// The output's element type.
    pub fn out(&self) -> ElemType {
        self.out
    }

    /// The program with its run-time scalars' values in place: every scalar of the
    /// expression given once. An integer scalar must fit the integer type it meets exactly
    /// (as PyTorch's `uint8 + 300` is an error); a float rounds to a float type.
    pub fn bind(&self, scalars: &[(&str, Scalar)]) -> Result<Program> {
        self.bound(scalars).map(std::borrow::Cow::into_owned)
    }

    /// [`bind`](Self::bind), borrowing the program where it has no scalars (no copy per
    /// call).
    pub(crate) fn bound(
        &self,
        scalars: &[(&str, Scalar)],
    ) -> Result<std::borrow::Cow<'_, Program>> {
        if self.scalars.is_empty() && scalars.is_empty() {
            return Ok(std::borrow::Cow::Borrowed(&self.program));
        }
        let mut p = self.program;
        for (i, (n, _)) in scalars.iter().enumerate() {
            if scalars[..i].iter().any(|(m, _)| m == n) {
                return Err(Error::ExprBind {
                    name: n.to_string(),
                    reason: "given twice".into(),
                });
            }
        }
        for s in &self.scalars {
            let Some(&(_, v)) = scalars.iter().find(|(n, _)| *n == s.name) else {
                return Err(Error::ExprBind {
                    name: s.name.clone(),
                    reason: "a scalar of the expression without a value".into(),
                });
            };
            p.consts[s.slot as usize] = scalar_bits(&s.name, s.kind, s.class, v)?;
        }
        if let Some((n, _)) = scalars
            .iter()
            .find(|(n, _)| !self.scalars.iter().any(|s| s.name == *n))
        {
            return Err(Error::ExprBind {
                name: n.to_string(),
                reason: "not a scalar of the expression".into(),
            });
        }
        Ok(std::borrow::Cow::Owned(p))
    }

    /// Runs the expression on the CPU twin: `inputs` in the order of [`inputs`](Self::inputs),
    /// each of the element type it was compiled for, broadcast to `out`'s shape.
    pub fn run_cpu(
        &self,
        out: HostTensorMut<'_>,
        inputs: &[HostTensor<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let (out_raw, ins) = self.host_raw(out, inputs, scalars)?;
        // SAFETY: `check` proved every element each layout reaches inside its slice and each
        // slice aligned for its element type; the output is a unique borrow, so nothing else
        // accesses it, and no input overlaps it.
        unsafe { self.run_cpu_raw(out_raw, &ins, scalars) }
    }
}

impl Compiled {
    /// Host slices as raw tensors at their layouts' first elements, after checking each
    /// against the program's element types (bound to `scalars`) and its slice.
    pub(crate) fn host_raw<'a>(
        &self,
        out: HostTensorMut<'a>,
        inputs: &[HostTensor<'a>],
        scalars: &[(&str, Scalar)],
    ) -> Result<(RawTensor<'a>, Vec<RawTensor<'a>>)> {
        let p = self.bind(scalars)?;
        self.check_count(inputs.len())?;
        out.as_ref().check(NAMES[0], self.out)?;
        for (k, t) in inputs.iter().enumerate() {
            t.check(NAMES[k + 1], value::elem_of(p.inputs[k]))?;
        }
        // The layouts count from each slice's start; `RawTensor` from its pointer.
        fn raw<'a>(data: *const u8, elem: ElemType, l: &'a crate::layout::Layout) -> RawTensor<'a> {
            RawTensor {
                ptr: data.wrapping_add(l.offset() * elem.size()) as u64,
                elem,
                shape: l.shape(),
                strides: l.strides(),
            }
        }
        let o = raw(out.data.as_mut_ptr(), self.out, out.layout);
        let ins = inputs
            .iter()
            .map(|t| raw(t.data.as_ptr(), t.elem, t.layout))
            .collect();
        Ok((o, ins))
    }

    /// [`run_cpu`](Self::run_cpu) over raw host pointers, for callers that hold addresses
    /// rather than slices (a Python module, a framework's host tensors): the same checks,
    /// plan and aliasing rules, so an input may be the output element-wise in place
    /// (`a = a * 2 + b`); such an input is read from a copy taken before the run.
    ///
    /// # Safety
    /// Every tensor's `ptr` is a host address; every element its shape and strides reach
    /// from there is in one live allocation holding values of its element type, and nothing
    /// else accesses the output's elements during the call.
    pub unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let p = self.bind(scalars)?;
        self.check_count(inputs.len())?;
        let mut types = [self.out; MAX_INPUTS + 1];
        for k in 0..inputs.len() {
            types[k + 1] = value::elem_of(p.inputs[k]);
        }
        macro_rules! run {
            ($($n:literal),*) => {
                match inputs.len() + 1 {
                    $($n => {
                        let t: [RawTensor<'_>; $n] =
                            std::array::from_fn(|k| if k == 0 { out } else { inputs[k - 1] });
                        let names: [&str; $n] = std::array::from_fn(|k| NAMES[k]);
                        // SAFETY: the caller's contract.
                        let host = unsafe { HostOperands::new(&types[..$n], &t, names)? };
                        let layouts: [&crate::layout::Layout; $n] =
                            std::array::from_fn(|k| &host.layouts[k]);
                        let elems: [ElemType; $n] = std::array::from_fn(|k| types[k]);
                        // SAFETY: the caller's contract for every address, checked layouts
                        // and element types; inputs sharing bytes with the output read from
                        // private copies (`host` keeps them until the run ends).
                        unsafe { crate::twin::run_program(&p, names, layouts, host.data, elems) }
                    })*
                    _ => unreachable!("at most {MAX_INPUTS} inputs (check_count)"),
                }
            };
        }
        run!(1, 2, 3, 4, 5, 6, 7, 8, 9)
    }

    fn check_count(&self, n: usize) -> Result<()> {
        if n != self.inputs.len() {
            return Err(Error::ExprBind {
                name: format!("({n} tensors)"),
                reason: format!(
                    "the expression takes {} tensor input(s): {}",
                    self.inputs.len(),
                    self.inputs.join(", ")
                ),
            });
        }
        Ok(())
    }
}

/// A scalar's value in math type `class`, or why it does not convert.
fn scalar_bits(name: &str, kind: ScalarKind, class: Class, v: Scalar) -> Result<u64> {
    let bad = |reason: String| Error::ExprBind {
        name: name.to_string(),
        reason,
    };
    let given = match v {
        Scalar::F64(_) => ScalarKind::Float,
        Scalar::I64(_) | Scalar::U64(_) => ScalarKind::Int,
        Scalar::Bool(_) => ScalarKind::Bool,
    };
    if given != kind {
        return Err(bad(format!(
            "compiled as a {kind:?} scalar, given {v:?} (compile again for another kind)"
        )));
    }
    let int = |x: i128| -> Result<u64> {
        let (lo, hi): (i128, i128) = match class {
            Class::I32 => (i32::MIN.into(), i32::MAX.into()),
            Class::I64 => (i64::MIN.into(), i64::MAX.into()),
            Class::U32 => (0, u32::MAX.into()),
            Class::U8 => (0, u8::MAX.into()),
            Class::U64 => (0, u64::MAX.into()),
            Class::Bool => (0, 1),
            Class::F32 | Class::F64 => (i128::MIN, i128::MAX),
        };
        if x < lo || x > hi {
            return Err(bad(format!(
                "{x} does not fit {} exactly",
                class.elem().name()
            )));
        }
        // One rounding into a float type, as `as` and integer literals.
        Ok(match class {
            Class::F32 => (x as f32).to_bits() as u64,
            Class::F64 => (x as f64).to_bits(),
            _ => value::from_i64(class, x as i64),
        })
    };
    match v {
        Scalar::F64(x) => Ok(value::from_f64(class, x)),
        Scalar::I64(x) => int(x.into()),
        // Beyond i64, the library's scalar conversion goes through f64 (rounding twice
        // into f32): the same here, so `add_s` and `a + s` agree bit for bit.
        Scalar::U64(x) if i64::try_from(x).is_err() && class.is_float() => {
            Ok(value::from_f64(class, x as f64))
        }
        Scalar::U64(x) => int(x.into()),
        Scalar::Bool(b) => Ok(value::convert(Class::Bool, class, b as u64)),
    }
}

#[cfg(test)]
mod tests;
