//! Pointwise ops: the host's instances by op id, the output type of a call without `out`,
//! the call, and `Op` (an op by id with its scalars bound or given at the call).

use crate::call::{broadcast_shape, operands, refuse_float8, Kernel};
use crate::device::{gpu, Device};
use crate::dtypes::dtype_arg;
use crate::errors::{DeviceError, DtypeError, Error, OpError, OrPy};
use crate::operands::{classify, Framework, Operand, Source};
use crate::scalars::scalars_of;
use crate::streams::launch_stream;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::collections::HashMap;
use std::sync::OnceLock;
use strided_apply::cudarc::driver::sys::CUstream;
use strided_apply::dispatch::{self, DynOp, Instance, Scalar};
use strided_apply::raw::RawTensor;
use strided_apply::reduce::reduce_instances;
use strided_apply::stencil::stencil_instances;
use strided_apply::{ElemType, Gpu};

/// One op id's families among the host's instances.
pub(crate) struct OpInfo {
    /// In the order of `dispatch::instances()`.
    instances: Vec<&'static Instance>,
    /// The first family's input count and scalar names: the op's.
    inputs: usize,
    scalars: &'static [&'static str],
}

impl OpInfo {
    pub(crate) fn instances(&self) -> &[&'static Instance] {
        &self.instances
    }
}

/// The scalar names of an instance's op, in order (none without a builder).
fn scalar_names(inst: &Instance) -> &'static [&'static str] {
    (inst.builder)().map_or(&[], |b| b.scalars)
}

/// The host's instances ([`dispatch::instances`]) grouped by op id, once.
fn op_table() -> &'static HashMap<&'static str, OpInfo> {
    static TABLE: OnceLock<HashMap<&'static str, OpInfo>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: HashMap<&'static str, OpInfo> = HashMap::new();
        for inst in dispatch::instances() {
            let info = table.entry(inst.op()).or_insert_with(|| OpInfo {
                instances: Vec::new(),
                inputs: inst.inputs(),
                scalars: scalar_names(inst),
            });
            info.instances.push(inst);
        }
        // The op ids with no family run as programs over every type combination.
        for op in dispatch::program_ops() {
            if let Some((inputs, scalars)) = dispatch::program_signature(op) {
                table.entry(op).or_insert_with(|| OpInfo {
                    instances: Vec::new(),
                    inputs,
                    scalars,
                });
            }
        }
        table
    })
}

pub(crate) fn op_info(op: &str) -> PyResult<&'static OpInfo> {
    op_table().get(op).ok_or_else(|| {
        let mut known: Vec<&str> = op_table().keys().copied().collect();
        known.sort_unstable();
        OpError::new_err(format!(
            "no op `{op}` is instantiated; op ids: {}",
            known.join(", ")
        ))
    })
}

/// The output type when `out` is omitted: `dtype=`, else for an op with an expression
/// (`dispatch::program_ops`) its promoted type (`torch.result_type`, scalars weak), else the
/// op's one output type for these input types.
fn output_type(
    py: Python<'_>,
    op: &str,
    info: &OpInfo,
    inputs: &[ElemType],
    scalars: &[Scalar],
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<ElemType> {
    if let Some(d) = dtype {
        return dtype_arg(py, d);
    }
    // A cast has no output type of its own: the families' rule below (several: name it).
    if op != "cast" && dispatch::program_ops().any(|p| p == op) {
        return dispatch::output_type(op, inputs, scalars).py();
    }
    let mut outs: Vec<ElemType> = info
        .instances
        .iter()
        .filter(|i| &i.types[1..] == inputs)
        .map(|i| i.types[0])
        .collect();
    outs.dedup();
    match outs.as_slice() {
        [one] => Ok(*one),
        [] => {
            let names: Vec<&str> = inputs.iter().map(|t| t.name()).collect();
            Err(DtypeError::new_err(format!(
                "op `{op}` is not instantiated for inputs ({}); instantiated: {}",
                names.join(", "),
                type_lists(info)
            )))
        }
        many => {
            let names: Vec<&str> = many.iter().map(|t| t.name()).collect();
            Err(OpError::new_err(format!(
                "op `{op}` has several output types for these inputs ({}): pass out= or dtype=",
                names.join(", ")
            )))
        }
    }
}

fn type_lists(info: &OpInfo) -> String {
    let mut v: Vec<String> = info
        .instances
        .iter()
        .map(|i| {
            let n: Vec<&str> = i.types.iter().map(|t| t.name()).collect();
            format!("({})", n.join(", "))
        })
        .collect();
    v.sort_unstable();
    v.join(", ")
}

fn check_input_count(op: &str, info: &OpInfo, given: usize) -> PyResult<()> {
    if given != info.inputs {
        return Err(OpError::new_err(format!(
            "op `{op}` takes {} input(s); {given} given",
            info.inputs
        )));
    }
    Ok(())
}

/// The inputs with their operand names `a`, `b`, `c` (at most three: the op's input count is
/// checked first).
fn named_inputs<'a, 'py>(
    inputs: &'a [Bound<'py, PyAny>],
) -> impl Iterator<Item = (Bound<'py, PyAny>, &'static str)> + 'a {
    const NAMES: [&str; 3] = ["a", "b", "c"];
    inputs.iter().cloned().zip(NAMES)
}

/// The element types of an output and its inputs, output first (each operand consumed).
fn types_of(out: &Operand<'_>, inputs: &[Operand<'_>]) -> Vec<ElemType> {
    std::iter::once(out)
        .chain(inputs)
        .map(|o| o.elem.unwrap_or(ElemType::U8))
        .collect()
}

impl Kernel for DynOp {
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { DynOp::launch(self, gpu, stream, out, inputs) }
    }

    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { DynOp::run_cpu_raw(self, out, inputs) }
    }
}

/// `out = op(inputs…)` with `scalars`; returns `out` (allocated when `None`).
#[allow(clippy::too_many_arguments)]
fn call<'py>(
    py: Python<'py>,
    op: &str,
    info: &OpInfo,
    scalars: &[Scalar],
    inputs: &[Bound<'py, PyAny>],
    out: Option<Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    check_input_count(op, info, inputs.len())?;
    let ops = operands(py, op, named_inputs(inputs), out, stream)?;
    ops.refuse_float8(op)?;
    let call = ops.output_or_new(py, |ins| {
        refuse_float8(op, ins)?;
        let in_types: Vec<ElemType> = ins.iter().map(|o| o.elem.unwrap_or(ElemType::U8)).collect();
        let elem = output_type(py, op, info, &in_types, scalars, dtype)?;
        Ok((broadcast_shape(ins)?, elem))
    })?;
    refuse_float8(op, call.inputs.iter().chain([&call.out]))?;
    let dyn_op = DynOp::new(op, &types_of(&call.out, &call.inputs), scalars).py()?;
    call.run(&dyn_op)
}

/// An op by id, with its scalars bound (or given at the call).
#[pyclass(module = "strided_apply._native", frozen)]
pub(crate) struct Op {
    id: String,
    info: &'static OpInfo,
    bound: Vec<Scalar>,
}

#[pymethods]
impl Op {
    /// `Op(id, *scalars, **named_scalars)`: scalars bound now; with none, an op whose
    /// scalars follow the inputs at each call.
    #[new]
    #[pyo3(signature = (id, *scalars, **named))]
    fn new(
        id: &str,
        scalars: &Bound<'_, PyTuple>,
        named: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Op> {
        let info = op_info(id)?;
        let positional: Vec<Bound<PyAny>> = scalars.iter().collect();
        let bound = if positional.is_empty() && named.is_none_or(|n| n.is_empty()) {
            Vec::new()
        } else {
            scalars_of(id, info.scalars, &positional, named)?
        };
        Ok(Op {
            id: id.to_string(),
            info,
            bound,
        })
    }

    /// `op(*inputs, *scalars, out=None, dtype=None, stream=None, **named_scalars)`.
    #[pyo3(signature = (*args, out=None, dtype=None, stream=None, **named))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        out: Option<Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
        stream: Option<Bound<'py, PyAny>>,
        named: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = self.info.inputs.min(args.len());
        let args: Vec<Bound<PyAny>> = args.iter().collect();
        let (inputs, rest) = args.split_at(n);
        let owned;
        let scalars: &[Scalar] = if self.info.scalars.is_empty()
            && rest.is_empty()
            && named.is_none_or(|d| d.is_empty())
        {
            &[]
        } else if !self.bound.is_empty() {
            if !rest.is_empty() || named.is_some_and(|d| !d.is_empty()) {
                return Err(OpError::new_err(format!(
                    "op `{}`: its scalars are bound; give inputs only",
                    self.id
                )));
            }
            &self.bound
        } else {
            owned = scalars_of(&self.id, self.info.scalars, rest, named)?;
            &owned
        };
        call(
            py,
            &self.id,
            self.info,
            scalars,
            inputs,
            out,
            dtype.as_ref(),
            stream.as_ref(),
        )
    }

    /// The op id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// Number of inputs.
    #[getter]
    fn inputs(&self) -> usize {
        self.info.inputs
    }

    /// The op's scalar names, in order.
    #[getter]
    fn scalar_names(&self) -> Vec<&'static str> {
        self.info.scalars.to_vec()
    }

    fn __repr__(&self) -> String {
        if self.bound.is_empty() {
            format!("strided_apply.Op({:?})", self.id)
        } else {
            format!("strided_apply.Op({:?}, {:?})", self.id, self.bound)
        }
    }
}

/// Host time of each phase of `op(*inputs, out=out)` on CUDA operands, in ns per call
/// averaged over `n` calls of each phase (a diagnostic for the Python bench; the caller
/// synchronises first so the launch queue does not fill): reading the operands, the stream
/// query, finding the op, the launch, and the whole call.
#[pyfunction]
#[pyo3(signature = (n, op, *inputs, out))]
pub(crate) fn _call_phases<'py>(
    py: Python<'py>,
    n: usize,
    op: &str,
    inputs: &Bound<'py, PyTuple>,
    out: Bound<'py, PyAny>,
) -> PyResult<Vec<(&'static str, f64)>> {
    let info = op_info(op)?;
    let inputs: Vec<Bound<PyAny>> = inputs.iter().collect();
    check_input_count(op, info, inputs.len())?;
    let n = n.max(1);
    let time = |f: &mut dyn FnMut() -> PyResult<()>| -> PyResult<f64> {
        let t = std::time::Instant::now();
        for _ in 0..n {
            f()?;
        }
        Ok(t.elapsed().as_nanos() as f64 / n as f64)
    };
    let classify_all = || -> PyResult<Vec<Operand<'py>>> {
        named_inputs(&inputs)
            .chain([(out.clone(), "out")])
            .map(|(obj, name)| classify(py, obj, name))
            .collect()
    };
    let t_read = time(&mut || classify_all().map(drop))?;
    let ops = classify_all()?;
    let Device::Cuda(d) = ops[0].device else {
        return Err(DeviceError::new_err("_call_phases: CUDA operands only"));
    };
    if ops
        .iter()
        .any(|o| !matches!(o.source, Source::Direct { .. }))
    {
        return Err(Error::new_err("_call_phases: torch CUDA tensors only"));
    }
    let frameworks: Vec<Framework> = ops.iter().map(|o| o.framework).collect();
    let t_stream = time(&mut || launch_stream(py, None, &frameworks, d).map(drop))?;
    let stream = launch_stream(py, None, &frameworks, d)?;
    let (ins, out_op) = (&ops[..inputs.len()], &ops[inputs.len()]);
    let types = types_of(out_op, ins);
    let t_find = time(&mut || DynOp::new(op, &types, &[]).map(drop).py())?;
    let dyn_op = DynOp::new(op, &types, &[]).py()?;
    let g = gpu(d)?;
    let raws: Vec<RawTensor> = ins.iter().map(|o| o.raw()).collect::<PyResult<_>>()?;
    let out_raw = out_op.raw()?;
    // SAFETY: as in `Call::run`: torch's tensors, held by the caller, on torch's current
    // stream.
    let t_launch = time(&mut || unsafe { dyn_op.launch(g, Some(stream), out_raw, &raws) }.py())?;
    let t_call =
        time(&mut || call(py, op, info, &[], &inputs, Some(out.clone()), None, None).map(drop))?;
    Ok(vec![
        ("read_operands", t_read),
        ("stream", t_stream),
        ("find_op", t_find),
        ("launch", t_launch),
        ("call", t_call),
    ])
}

/// Every instantiated (op, types) family: `(op_id, types, scalar_names, tolerance)`, types
/// output first (tuples of names); tolerance `None` for exact ops, else the ulp bound against
/// an f64 reference.
#[pyfunction]
pub(crate) fn instances(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyTuple>>> {
    use strided_apply::ops::Tolerance;
    dispatch::instances()
        .map(|i| {
            let types = PyTuple::new(py, i.types.iter().map(|t| t.name()))?;
            let scalars = PyTuple::new(py, scalar_names(i))?;
            let tol = match (i.tolerance)() {
                Some(Tolerance::Ulp(n)) => Some(n),
                _ => None,
            };
            (i.op(), types, scalars, tol).into_pyobject(py)
        })
        .collect()
}

/// The op ids, sorted.
#[pyfunction]
pub(crate) fn op_ids() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = op_table().keys().copied().collect();
    v.sort_unstable();
    v
}

/// Loads the families of `op_ids` (pointwise ops, stencils, reductions) on CUDA device
/// `device` now (before a CUDA graph capture: loading a module is not allowed while
/// capturing).
#[pyfunction]
#[pyo3(signature = (op_ids, device=0))]
pub(crate) fn preload(op_ids: Vec<String>, device: i32) -> PyResult<()> {
    let g = gpu(device)?;
    for id in &op_ids {
        let mut kernels: Vec<(&'static str, &'static str)> = Vec::new();
        for r in reduce_instances().filter(|r| r.op == id) {
            let n = &r.names;
            kernels.extend([n.rows, n.cols, n.fin].map(|k| (n.module, k)));
        }
        for s in stencil_instances().filter(|s| s.op == id) {
            kernels.extend(s.names.kernels().map(|k| (s.names.module, k)));
        }
        if kernels.is_empty() {
            for inst in op_info(id)?.instances() {
                g.preload_kernels(&inst.names).py()?;
            }
        }
        for (module, kernel) in kernels {
            g.kernel(module, kernel).py()?;
        }
    }
    Ok(())
}
