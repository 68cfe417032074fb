//! Normalisation programs: `sa.norm(text)` parses once and returns a callable; each call
//! binds its names as `sa.expr` does, compiles the program once per argument signature,
//! and runs it over the normalised axes `dim`: on the GPU (the fused row kernel, or its
//! composition) for CUDA operands, on the CPU twin for host ones, with the same bits.

use crate::axes::{reduce_axes, reduced_shape};
use crate::call::{broadcast_shape, Kernel};
use crate::expr::{static_name, Call};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use strided_apply::cudarc::driver::sys::CUstream;
use strided_apply::dispatch::Scalar;
use strided_apply::expr::{Arg, CompiledNorm, Norm as SaNorm};
use strided_apply::raw::RawTensor;
use strided_apply::{ElemType, Gpu};

/// What a compiled program is keyed by: every name's binding and the output type asked for.
type Signature = (Vec<Arg>, Option<ElemType>);

/// A parsed normalisation program: call it with its tensors, scalars and `dim`.
#[pyclass(module = "strided_apply._native", frozen)]
pub(crate) struct Norm {
    text: String,
    norm: SaNorm,
    names: Vec<&'static str>,
    compiled: Mutex<HashMap<Signature, Arc<CompiledNorm>>>,
}

/// A compiled program with its scalars and axes, as the call path runs kernels.
struct BoundNorm<'a> {
    compiled: Arc<CompiledNorm>,
    scalars: Vec<(&'static str, Scalar)>,
    axes: &'a [usize],
}

impl Kernel for BoundNorm<'_> {
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
                .launch(gpu, stream, out, inputs, &self.scalars, self.axes)
        }
    }

    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()> {
        // SAFETY: forwarded contract (host memory described by its producer, held for the
        // call).
        unsafe {
            self.compiled
                .run_cpu_raw(out, inputs, &self.scalars, self.axes)
        }
    }
}

#[pymethods]
impl Norm {
    /// Parses `text`: `let`s (`name = expr;`), then the result; `amax amin sum mean prod`
    /// of one argument reduce it over the call's axes, their values broadcast back.
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        let norm = SaNorm::parse(text).map_err(crate::errors::py_err)?;
        let names = norm.names().iter().map(|n| static_name(n)).collect();
        Ok(Norm {
            text: text.to_string(),
            norm,
            names,
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// The program's names, in order of first appearance (the positional order).
    #[getter]
    fn names(&self) -> Vec<String> {
        self.names.iter().map(|n| n.to_string()).collect()
    }

    fn __repr__(&self) -> String {
        format!("strided_apply.norm({:?})", self.text)
    }

    /// Runs the program over the normalised axes `dim` (an int or a sequence of ints of
    /// the inputs' broadcast shape; by default the last axis): tensors and scalars by name
    /// or in the order of `names`, then `out=`, `dtype=` and `stream=`. A program whose
    /// result reads no input tensor gives one value a row: the reduced shape, the axes
    /// kept as 1 with `keepdim`.
    #[pyo3(signature = (*args, dim=None, keepdim=false, out=None, dtype=None, stream=None, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn __call__<'py>(
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
        let call = Call {
            text: &self.text,
            names: &self.names,
            what: "norm",
            args,
            kwargs,
        };
        let (ops, scalars, compiled) = call.prepare(py, out, dtype, stream, |arg_of, out| {
            let c = self.compile(arg_of, out)?;
            let order = c.inputs().to_vec();
            Ok((c, order))
        })?;
        let shape = broadcast_shape(&ops.inputs)?;
        let last = shape.len().saturating_sub(1).into_pyobject(py)?.into_any();
        let axes = reduce_axes(Some(dim.as_ref().unwrap_or(&last)), shape.len())?;
        let out_type = compiled.out();
        let rowwise = compiled.is_rowwise();
        let call = ops.output_or_new(py, |_| {
            let s = if rowwise {
                shape.clone()
            } else {
                reduced_shape(&shape, &axes, keepdim)
            };
            Ok((s, out_type))
        })?;
        call.run(&BoundNorm {
            compiled,
            scalars,
            axes: &axes,
        })
    }
}

impl Norm {
    /// The program for a call whose names bind to `arg_of(name)` and whose output type is
    /// `out`, compiled on its signature's first use.
    fn compile(
        &self,
        arg_of: &dyn Fn(&str) -> PyResult<Arg>,
        out: Option<ElemType>,
    ) -> PyResult<Arc<CompiledNorm>> {
        let args: Vec<Arg> = self
            .names
            .iter()
            .map(|&n| arg_of(n))
            .collect::<PyResult<_>>()?;
        let sig = (args, out);
        let mut cache = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.get(&sig) {
            return Ok(c.clone());
        }
        let named: Vec<(&str, Arg)> = self
            .names
            .iter()
            .copied()
            .zip(sig.0.iter().copied())
            .collect();
        let c = Arc::new(
            self.norm
                .compile(&named, out)
                .map_err(crate::errors::py_err)?,
        );
        cache.insert(sig, c.clone());
        Ok(c)
    }
}

/// `sa.norm(text)`: a normalisation program to call with tensors, scalars and `dim`.
#[pyfunction]
pub(crate) fn norm(text: &str) -> PyResult<Norm> {
    Norm::new(text)
}

/// Waits (at most 5 s, the GIL released) until the kernels the library compiles on
/// threads of its own (a new normalisation program's row kernel, a new expression's tier-1
/// kernel) are ready: calls before that run precompiled kernels (the same values), calls
/// after it the compiled ones — for timing them.
#[pyfunction]
pub(crate) fn wait_compiles(py: Python<'_>) {
    py.detach(strided_apply::expr::wait_compiles);
}
