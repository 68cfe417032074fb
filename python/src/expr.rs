//! Expressions: `sa.expr(text)` parses once and returns a callable; each call binds its
//! names (tensors by keyword or in order of first appearance, Python numbers as run-time
//! scalars), compiles a program once per argument signature (element types, scalar kinds,
//! output type) and runs it: on the GPU's interpreter kernels (tier 0) for CUDA operands, on
//! the CPU twin for host ones.

use crate::axes::{reduce_axes, reduced_shape};
use crate::call::{broadcast_shape, operands, Kernel};
use crate::dtypes::dtype_arg;
use crate::errors::ExprError;
use crate::scalars::scalar;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyTuple};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use strided_apply::cudarc::driver::sys::CUstream;
use strided_apply::dispatch::Scalar;
use strided_apply::expr::{Arg, Compiled, Expr as SaExpr, ReduceOp, ScalarKind};
use strided_apply::raw::RawTensor;
use strided_apply::{ElemType, Gpu};

/// An expression's names as operand names in messages: each distinct name is kept once for
/// the process (operand names are `&'static str` throughout the call path).
pub(crate) fn static_name(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(&n) = set.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(n);
    n
}

/// What a compiled program is keyed by: every name's binding and the output type asked for.
type Signature = (Vec<Arg>, Option<ElemType>);

/// A parsed expression: call it with its tensors and scalars.
#[pyclass(module = "strided_apply._native", frozen)]
pub(crate) struct Expr {
    text: String,
    expr: SaExpr,
    /// The names in order of first appearance, as operand names ([`static_name`]: kept
    /// here, no lookup per call).
    names: Vec<&'static str>,
    compiled: Mutex<Programs>,
}

/// The programs compiled for an expression, by signature, and the last one used (a call
/// with the signature of the one before it finds its program without hashing).
#[derive(Default)]
struct Programs {
    by_signature: HashMap<Signature, Arc<Compiled>>,
    last: Option<(Signature, Arc<Compiled>)>,
}

/// A program bound to its scalars, as the call path runs kernels.
struct BoundExpr {
    compiled: Arc<Compiled>,
    scalars: Vec<(&'static str, Scalar)>,
}

impl Kernel for BoundExpr {
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: forwarded contract (device memory described by its producer, held for the
        // call, on the producer's stream).
        unsafe {
            self.compiled
                .launch(gpu, stream, out, inputs, &self.scalars)
        }
    }

    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: forwarded contract (host memory described by its producer, held for the
        // call).
        unsafe { self.compiled.run_cpu_raw(out, inputs, &self.scalars) }
    }
}

#[pymethods]
impl Expr {
    /// Parses `text` (the expression language: operators, comparisons, `where`, the op
    /// set's functions, casts such as `f32(x)`, literals, names).
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        let expr = SaExpr::parse(text).map_err(crate::errors::py_err)?;
        let names = expr.names().into_iter().map(static_name).collect();
        Ok(Expr {
            text: text.to_string(),
            expr,
            names,
            compiled: Mutex::new(Programs::default()),
        })
    }

    /// The expression's names, in order of first appearance (the positional order).
    #[getter]
    fn names(&self) -> Vec<String> {
        self.names.iter().map(|n| n.to_string()).collect()
    }

    fn __repr__(&self) -> String {
        format!("strided_apply.expr({:?})", self.text)
    }

    /// Runs the expression: tensors and scalars by name or in the order of `names`, then
    /// `out=`, `dtype=` (the output type when `out` is omitted) and `stream=`.
    #[pyo3(signature = (*args, out=None, dtype=None, stream=None, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (ops, bound) = self.prepare(py, "expr", args, out, dtype, stream, kwargs)?;
        let out_type = bound.compiled.out();
        let call = ops.output_or_new(py, |inputs| Ok((broadcast_shape(inputs)?, out_type)))?;
        call.run(&bound)
    }

    /// `sum` of the expression's values over `dim` (None: every axis; an int or a sequence
    /// of ints of the inputs' broadcast shape) in one pass, no temporary; `keepdim` keeps
    /// the reduced axes as size 1. Arguments as for a call. The output type is the
    /// expression's (or `dtype`): each value rounds to it once, then the reduction runs in
    /// its math type, in the library's order (the GPU and the CPU twin give the same bits).
    #[pyo3(signature = (*args, dim=None, keepdim=false, out=None, dtype=None, stream=None, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn sum<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        dim: Option<Bound<'py, PyAny>>,
        keepdim: bool,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.reduce(
            py,
            ReduceOp::Sum,
            args,
            (dim, keepdim),
            out,
            dtype,
            stream,
            kwargs,
        )
    }

    /// `prod` of the expression's values over `dim`, as [`sum`](Self::sum).
    #[pyo3(signature = (*args, dim=None, keepdim=false, out=None, dtype=None, stream=None, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn prod<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        dim: Option<Bound<'py, PyAny>>,
        keepdim: bool,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.reduce(
            py,
            ReduceOp::Prod,
            args,
            (dim, keepdim),
            out,
            dtype,
            stream,
            kwargs,
        )
    }

    /// `amin` (NaN-propagating) of the expression's values over `dim`, as `sum`.
    #[pyo3(signature = (*args, dim=None, keepdim=false, out=None, dtype=None, stream=None, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn amin<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        dim: Option<Bound<'py, PyAny>>,
        keepdim: bool,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.reduce(
            py,
            ReduceOp::Amin,
            args,
            (dim, keepdim),
            out,
            dtype,
            stream,
            kwargs,
        )
    }

    /// `amax` (NaN-propagating) of the expression's values over `dim`, as `sum`.
    #[pyo3(signature = (*args, dim=None, keepdim=false, out=None, dtype=None, stream=None, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn amax<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        dim: Option<Bound<'py, PyAny>>,
        keepdim: bool,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.reduce(
            py,
            ReduceOp::Amax,
            args,
            (dim, keepdim),
            out,
            dtype,
            stream,
            kwargs,
        )
    }

    /// `mean` of the expression's values over `dim` (float outputs), as `sum`.
    #[pyo3(signature = (*args, dim=None, keepdim=false, out=None, dtype=None, stream=None, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn mean<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        dim: Option<Bound<'py, PyAny>>,
        keepdim: bool,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.reduce(
            py,
            ReduceOp::Mean,
            args,
            (dim, keepdim),
            out,
            dtype,
            stream,
            kwargs,
        )
    }
}

/// A bound expression reduced over axes, as the call path runs kernels.
struct ReducedExpr<'a> {
    bound: &'a BoundExpr,
    op: ReduceOp,
    axes: &'a [usize],
}

impl Kernel for ReducedExpr<'_> {
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: forwarded contract, as `BoundExpr::launch`.
        unsafe {
            self.bound.compiled.launch_reduce(
                gpu,
                stream,
                self.op,
                out,
                inputs,
                &self.bound.scalars,
                self.axes,
            )
        }
    }

    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: forwarded contract, as `BoundExpr::run_cpu_raw`.
        unsafe {
            self.bound
                .compiled
                .reduce_cpu_raw(self.op, out, inputs, &self.bound.scalars, self.axes)
        }
    }
}

impl Expr {
    /// Binds a call's arguments: the operands (tensors consumed, the output if given, the
    /// stream), in the compiled program's input order, and the program bound to its
    /// scalars. `what` names the call in messages.
    #[allow(clippy::too_many_arguments)]
    fn prepare<'py>(
        &self,
        py: Python<'py>,
        what: &'static str,
        args: &Bound<'py, PyTuple>,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(crate::call::Operands<'py>, BoundExpr)> {
        let call = Call {
            text: &self.text,
            names: &self.names,
            what,
            args,
            kwargs,
        };
        let (ops, scalars, compiled) = call.prepare(py, out, dtype, stream, |arg_of, out| {
            let c = self.compile(arg_of, out)?;
            let order = c.inputs().to_vec();
            Ok((c, order))
        })?;
        Ok((ops, BoundExpr { compiled, scalars }))
    }

    /// A reduction of the expression's values (`sum`, `prod`, `amin`, `amax`, `mean`).
    #[allow(clippy::too_many_arguments)]
    fn reduce<'py>(
        &self,
        py: Python<'py>,
        op: ReduceOp,
        args: &Bound<'py, PyTuple>,
        (dim, keepdim): (Option<Bound<'py, PyAny>>, bool),
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (ops, bound) = self.prepare(py, op.name(), args, out, dtype, stream, kwargs)?;
        let shape = broadcast_shape(&ops.inputs)?;
        let axes = reduce_axes(dim.as_ref(), shape.len())?;
        let out_type = bound.compiled.out();
        let call = ops.output_or_new(py, |_| {
            Ok((reduced_shape(&shape, &axes, keepdim), out_type))
        })?;
        call.run(&ReducedExpr {
            bound: &bound,
            op,
            axes: &axes,
        })
    }

    /// The program for a call whose names bind to `arg_of(name)` and whose output type
    /// is `out`, compiled on its signature's first use.
    fn compile(
        &self,
        arg_of: &dyn Fn(&str) -> PyResult<Arg>,
        out: Option<ElemType>,
    ) -> PyResult<Arc<Compiled>> {
        let mut cache = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        // The last signature again: compared in place, nothing allocated or hashed.
        if let Some(((args, last_out), c)) = &cache.last {
            let mut same = *last_out == out;
            for (a, &name) in args.iter().zip(&self.names) {
                same = same && *a == arg_of(name)?;
            }
            if same {
                return Ok(c.clone());
            }
        }
        let args: Vec<Arg> = self
            .names
            .iter()
            .map(|&n| arg_of(n))
            .collect::<PyResult<_>>()?;
        let sig = (args, out);
        let c = match cache.by_signature.get(&sig) {
            Some(c) => c.clone(),
            None => {
                let named: Vec<(&str, Arg)> = self
                    .names
                    .iter()
                    .copied()
                    .zip(sig.0.iter().copied())
                    .collect();
                let c = Arc::new(
                    self.expr
                        .compile(&named, out)
                        .map_err(crate::errors::py_err)?,
                );
                cache.by_signature.insert(sig.clone(), c.clone());
                c
            }
        };
        cache.last = Some((sig, c.clone()));
        Ok(c)
    }
}

/// `sa.expr(text)`: an expression to call with tensors and scalars.
#[pyfunction]
pub(crate) fn expr(text: &str) -> PyResult<Expr> {
    Expr::new(text)
}

/// A bound call: its operands, its scalars by name, its compiled program.
pub(crate) type Prepared<'py, C> = (crate::call::Operands<'py>, Vec<(&'static str, Scalar)>, C);

/// One call's arguments as given: the program's text and names (first appearance), what
/// the call is (`expr`, `norm`, a reduction's name) for messages, the positional and
/// keyword arguments.
pub(crate) struct Call<'a, 'py> {
    pub text: &'a str,
    pub names: &'a [&'static str],
    pub what: &'static str,
    pub args: &'a Bound<'py, PyTuple>,
    pub kwargs: Option<&'a Bound<'py, PyDict>>,
}

impl<'py> Call<'_, 'py> {
    /// Binds the call: Python numbers as run-time scalars, the rest as tensors (consumed,
    /// with the output if given and the stream); `compile(arg_of, out)` gives the program
    /// for the arguments' kinds and the output type, and the tensor names in the order it
    /// reads them, which the operands are put in.
    pub(crate) fn prepare<C>(
        &self,
        py: Python<'py>,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        compile: impl FnOnce(
            &dyn Fn(&str) -> PyResult<Arg>,
            Option<ElemType>,
        ) -> PyResult<(C, Vec<String>)>,
    ) -> PyResult<Prepared<'py, C>> {
        let what = self.what;
        let values = self.bind()?;
        // Python numbers are run-time scalars; everything else is a tensor.
        let is_scalar = |v: &Bound<'py, PyAny>| {
            v.is_instance_of::<PyBool>()
                || v.is_instance_of::<PyInt>()
                || v.is_instance_of::<PyFloat>()
        };
        let mut scalars: Vec<(&'static str, Scalar)> = Vec::new();
        for (&name, v) in self.names.iter().zip(&values) {
            if is_scalar(v) {
                scalars.push((name, scalar(v, what, name)?));
            }
        }
        let tensors = self.names.iter().zip(values);
        let tensors = tensors.filter(|(_, v)| !is_scalar(v)).map(|(&n, v)| (v, n));
        let mut ops = operands(py, what, tensors, out, stream.as_ref())?;
        let out_elem = match (&ops.out_elem(), &dtype) {
            (Some(e), _) => Some(*e),
            (None, Some(d)) => Some(dtype_arg(py, d)?),
            (None, None) => None,
        };
        let arg_of = |name: &str| -> PyResult<Arg> {
            if let Some((_, s)) = scalars.iter().find(|(n, _)| *n == name) {
                return Ok(Arg::Scalar(match s {
                    Scalar::Bool(_) => ScalarKind::Bool,
                    Scalar::F64(_) => ScalarKind::Float,
                    _ => ScalarKind::Int,
                }));
            }
            let o = ops.inputs.iter().find(|o| o.name == name);
            let elem = o.and_then(|o| o.elem).ok_or_else(|| {
                ExprError::new_err(format!("{name}: no element type (not consumed)"))
            })?;
            Ok(Arg::Tensor(elem))
        };
        let (compiled, wanted) = compile(&arg_of, out_elem)?;
        // The program reads its tensors in the order `compile` gave (first use), mostly
        // that of the names already (first appearance): reordered where not.
        let in_order = ops.inputs.len() == wanted.len()
            && ops
                .inputs
                .iter()
                .zip(&wanted)
                .all(|(o, n)| o.name == n.as_str());
        if !in_order {
            let order: Vec<usize> = wanted
                .iter()
                .filter_map(|n| ops.inputs.iter().position(|o| o.name == n.as_str()))
                .collect();
            let mut slots: Vec<Option<_>> = ops.inputs.drain(..).map(Some).collect();
            ops.inputs = order.iter().filter_map(|&k| slots[k].take()).collect();
        }
        Ok((ops, scalars, compiled))
    }

    /// Each name's value: positional in the order of `names`, or by keyword; each once.
    pub(crate) fn bind(&self) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let (args, kwargs) = (self.args, self.kwargs);
        let n = self.names.len();
        if args.len() > n {
            return Err(ExprError::new_err(format!(
                "{} {:?} takes {n} argument(s) ({}), got {} positional",
                self.what,
                self.text,
                self.names.join(", "),
                args.len()
            )));
        }
        if args.len() == n && kwargs.is_none_or(|kw| kw.is_empty()) {
            return Ok(args.iter().collect());
        }
        let mut values: Vec<Option<Bound<'py, PyAny>>> = vec![None; n];
        for (slot, a) in values.iter_mut().zip(args.iter()) {
            *slot = Some(a);
        }
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                let key: String = k.extract()?;
                let Some(i) = self.names.iter().position(|n| *n == key) else {
                    return Err(ExprError::new_err(format!(
                        "{key}: not a name of {} {:?} (its names: {})",
                        self.what,
                        self.text,
                        self.names.join(", ")
                    )));
                };
                if values[i].is_some() {
                    return Err(ExprError::new_err(format!("{key}: given twice")));
                }
                values[i] = Some(v);
            }
        }
        values
            .into_iter()
            .zip(self.names)
            .map(|(v, name)| {
                v.ok_or_else(|| {
                    ExprError::new_err(format!("{name}: missing (a tensor or a number)"))
                })
            })
            .collect()
    }
}
