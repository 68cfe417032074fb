//! Ops over tensor axes: stencils and reductions, chosen by id at run time.

use crate::call::{broadcast_shape, operands, Kernel};
use crate::errors::{named, py_err, OpError, OrPy};
use pyo3::prelude::*;
use strided_apply::cudarc::driver::sys::CUstream;
use strided_apply::raw::RawTensor;
use strided_apply::reduce::{reduce_instances, DynReduce};
use strided_apply::stencil::{stencil_instances, DynStencil};
use strided_apply::{ElemType, Error as SaError, Gpu};

/// A stencil or a reduction over `axes`: a [`Kernel`] over an output and its inputs.
struct OnAxes<'a, T> {
    op: T,
    axes: &'a [usize],
}

impl Kernel for OnAxes<'_, DynReduce> {
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.op.launch(gpu, stream, out, inputs, self.axes) }
    }

    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.op.run_cpu_raw(out, inputs, self.axes) }
    }
}

/// A stencil's one input out of the slice.
fn stencil_input<'b>(inputs: &[RawTensor<'b>]) -> strided_apply::Result<RawTensor<'b>> {
    match inputs {
        [input] => Ok(*input),
        _ => Err(SaError::InvalidView {
            operand: "inputs",
            reason: format!("a stencil reads 1 input, {} given", inputs.len()),
        }),
    }
}

impl Kernel for OnAxes<'_, DynStencil> {
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        let input = stencil_input(inputs)?;
        // SAFETY: the caller's contract.
        unsafe { self.op.launch(gpu, stream, out, input, self.axes) }
    }

    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        let input = stencil_input(inputs)?;
        // SAFETY: the caller's contract.
        unsafe { self.op.run_cpu_raw(out, input, self.axes) }
    }
}

/// `out = stencil(input)` by stencil id (`lap2`, `fdiff`, `shift_xp`, …; `stencil_ids()`):
/// `axes` are the tensor axes of the stencil's x, y and z (one to three); `out` has the
/// input's shape and type when omitted, and may not share memory with the input.
#[pyfunction]
#[pyo3(signature = (id, input, *, axes, out=None, stream=None))]
pub(crate) fn stencil<'py>(
    py: Python<'py>,
    id: &str,
    input: Bound<'py, PyAny>,
    axes: Vec<usize>,
    out: Option<Bound<'py, PyAny>>,
    stream: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let ops = operands(py, id, [(input, "input")], out, stream.as_ref())?;
    let call = ops.output_or_new(py, |ins| {
        let inp = &ins[0];
        Ok((inp.shape.clone(), inp.elem.unwrap_or(ElemType::U8)))
    })?;
    let op = DynStencil::new(id, call.out.elem.unwrap_or(ElemType::U8)).py()?;
    call.run(&OnAxes { op, axes: &axes })
}

/// The reduced axes of `dim` (None: all; an int or a sequence of ints, negative from the
/// end) over a tensor of `rank` axes, sorted.
pub(crate) fn reduce_axes(dim: Option<&Bound<'_, PyAny>>, rank: usize) -> PyResult<Vec<usize>> {
    let Some(dim) = dim.filter(|d| !d.is_none()) else {
        return Ok((0..rank).collect());
    };
    let dims: Vec<i64> = match dim.extract::<i64>() {
        Ok(d) => vec![d],
        Err(_) => dim.extract::<Vec<i64>>().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err("dim: an int, a sequence of ints, or None")
        })?,
    };
    let mut axes = Vec::with_capacity(dims.len());
    for d in dims {
        let a = if d < 0 { d + rank as i64 } else { d };
        if a < 0 || a >= rank as i64 {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "dim: {d} is out of range for a {rank}-dimensional input"
            )));
        }
        if axes.contains(&(a as usize)) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "dim: axis {a} is named twice"
            )));
        }
        axes.push(a as usize);
    }
    axes.sort_unstable();
    Ok(axes)
}

/// `shape` reduced over `axes`: the reduced axes dropped, or kept as size 1 (`keepdim`).
pub(crate) fn reduced_shape(shape: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    (0..shape.len())
        .filter_map(|i| match (axes.contains(&i), keepdim) {
            (false, _) => Some(shape[i]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// A reduction by id over one input (`reduce`) or two (`map_reduce`): the family of the
/// first input's element type, the inputs broadcast to one shape that `dim` refers to,
/// `out` allocated in the family's output type when omitted.
#[allow(clippy::too_many_arguments)]
fn reduce_call<'py>(
    py: Python<'py>,
    id: &str,
    inputs: Vec<(Bound<'py, PyAny>, &'static str)>,
    dim: Option<Bound<'py, PyAny>>,
    keepdim: bool,
    out: Option<Bound<'py, PyAny>>,
    stream: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let given = inputs.len();
    let ops = operands(py, id, inputs, out, stream.as_ref())?;
    let first = &ops.inputs[0];
    // A family not instantiated for the first input's type names that input.
    let op = DynReduce::new(id, first.elem.unwrap_or(ElemType::U8)).map_err(|e| match e {
        SaError::NotInstantiated { .. } => named(e, first.name),
        e => py_err(e),
    })?;
    let inst = op.instance();
    if inst.inputs != given {
        return Err(OpError::new_err(if inst.inputs == 1 {
            format!("reduction `{id}` reads one input: call reduce(`{id}`, input, …)")
        } else {
            format!(
                "reduction `{id}` reads {} inputs: call map_reduce(`{id}`, a, b, …)",
                inst.inputs
            )
        }));
    }
    let shape = broadcast_shape(&ops.inputs)?;
    let axes = reduce_axes(dim.as_ref(), shape.len())?;
    let call = ops.output_or_new(py, |_| {
        Ok((reduced_shape(&shape, &axes, keepdim), inst.out_elem))
    })?;
    call.run(&OnAxes { op, axes: &axes })
}

/// `out = reduction(input over dim)` by reduction id (`sum`, `prod`, `amin`, `amax`,
/// `mean`, `sumsq`, `norm2`, `argmin`, `argmax`, `all`, `any`; `reduce_ids()`): `dim` is
/// None (every axis), an axis or a sequence of axes; `keepdim` keeps the reduced axes as
/// size 1 in an allocated output (`out`'s own shape says it otherwise). An allocated output
/// has the family's output type: the input's, int64 for `argmin`/`argmax` (the position in
/// the row-major order of the reduced axes), bool for `all`/`any`. The GPU and the CPU twin
/// reduce in the same order: the same bits on both.
#[pyfunction]
#[pyo3(signature = (id, input, dim=None, keepdim=false, *, out=None, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce<'py>(
    py: Python<'py>,
    id: &str,
    input: Bound<'py, PyAny>,
    dim: Option<Bound<'py, PyAny>>,
    keepdim: bool,
    out: Option<Bound<'py, PyAny>>,
    stream: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    reduce_call(py, id, vec![(input, "input")], dim, keepdim, out, stream)
}

/// `out = reduction(map(a, b) over dim)` in one pass, by the id of a reduction of two
/// inputs (`sqdiff`: the sum of `(a - b)²`, `dot`: the sum of `a * b`): `a` and `b` have
/// one element type and broadcast to one shape (NumPy's rule), which `dim` refers to;
/// otherwise as `reduce`.
#[pyfunction]
#[pyo3(signature = (id, a, b, dim=None, keepdim=false, *, out=None, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn map_reduce<'py>(
    py: Python<'py>,
    id: &str,
    a: Bound<'py, PyAny>,
    b: Bound<'py, PyAny>,
    dim: Option<Bound<'py, PyAny>>,
    keepdim: bool,
    out: Option<Bound<'py, PyAny>>,
    stream: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    reduce_call(py, id, vec![(a, "a"), (b, "b")], dim, keepdim, out, stream)
}

/// The reduction ids, sorted.
#[pyfunction]
pub(crate) fn reduce_ids() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = reduce_instances().map(|i| i.op).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Every instantiated reduction family: `(reduction_id, input_type, inputs, output_type)`
/// (type names such as `f32`; `inputs`: 1 for `reduce`, 2 for `map_reduce`), sorted.
#[pyfunction]
pub(crate) fn reduce_families() -> Vec<(&'static str, &'static str, usize, &'static str)> {
    let mut v: Vec<_> = reduce_instances()
        .map(|i| (i.op, i.elem.name(), i.inputs, i.out_elem.name()))
        .collect();
    v.sort_unstable();
    v
}

/// The stencil ids, sorted.
#[pyfunction]
pub(crate) fn stencil_ids() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = stencil_instances().map(|i| i.op).collect();
    v.sort_unstable();
    v.dedup();
    v
}
