//! torch's objects, looked up once the user has imported torch (this module never imports
//! it): the tensor types read directly, the dtypes, `torch.empty`, the current stream, and
//! libtorch's C shim.

use crate::dtypes::{framework_name, ELEM_TYPES};
use crate::torch_shim::Shim;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use strided_apply::ElemType;

pub(crate) struct Torch {
    pub(crate) tensor: Py<PyType>,
    /// `torch.nn.Parameter` (read like `torch.Tensor`: it defines no `__torch_function__`).
    pub(crate) parameter: Py<PyType>,
    pub(crate) dtypes: Vec<(Py<PyAny>, ElemType)>,
    pub(crate) empty: Py<PyAny>,
    pub(crate) current_stream: Py<PyAny>,
    /// libtorch's C shim for reading tensors, or why the Python reads are used instead.
    pub(crate) shim: Result<Shim, String>,
}

/// torch's objects, once torch is imported (by the user; this module never imports it).
pub(crate) fn torch(py: Python<'_>) -> PyResult<Option<&'static Torch>> {
    static TORCH: PyOnceLock<Torch> = PyOnceLock::new();
    if let Some(t) = TORCH.get(py) {
        return Ok(Some(t));
    }
    let modules = py.import("sys")?.getattr("modules")?;
    let Ok(torch) = modules.get_item("torch") else {
        return Ok(None);
    };
    let mut dtypes = Vec::new();
    for t in ELEM_TYPES {
        dtypes.push((torch.getattr(framework_name(t))?.unbind(), t));
    }
    // STRIDED_APPLY_TORCH_READER: `python` (six Python calls per tensor), `shim` (the
    // stable shim only), else the shim and the calibrated reads.
    let shim = match std::env::var("STRIDED_APPLY_TORCH_READER").as_deref() {
        Ok("python") => Err("STRIDED_APPLY_TORCH_READER=python".to_string()),
        Ok("shim") => Shim::load(py, &torch, &dtypes, false),
        _ => Shim::load(py, &torch, &dtypes, true),
    };
    let t = Torch {
        tensor: torch.getattr("Tensor")?.cast_into::<PyType>()?.unbind(),
        parameter: torch
            .getattr("nn")?
            .getattr("Parameter")?
            .cast_into::<PyType>()?
            .unbind(),
        dtypes,
        shim,
        empty: torch.getattr("empty")?.unbind(),
        current_stream: torch
            .getattr("_C")?
            .getattr("_cuda_getCurrentRawStream")?
            .unbind(),
    };
    Ok(Some(TORCH.get_or_init(py, || t)))
}

/// How torch tensors are read: `"shim, …"` (libtorch's C shim, then each calibrated read in
/// use or why not) or `"python: "` and why the shim is not used (six Python calls per
/// tensor); `None` before torch is imported.
#[pyfunction]
pub(crate) fn _torch_reader(py: Python<'_>) -> PyResult<Option<String>> {
    Ok(torch(py)?.map(|t| match &t.shim {
        Ok(shim) => shim.describe.clone(),
        Err(why) => format!("python: {why}"),
    }))
}
