//! Element types by the names Python uses: ours (`f32`), the frameworks' (`float32`,
//! `torch.float32`), and the `dtype=` argument.

use crate::errors::DtypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;
use strided_apply::ElemType;

/// The element types a Python operand may have.
pub(crate) const ELEM_TYPES: [ElemType; 15] = ElemType::ALL;

/// The dtype name frameworks use (torch, NumPy, CuPy): `float32`, `bfloat16`, …
pub(crate) fn framework_name(t: ElemType) -> &'static str {
    match t {
        ElemType::F32 => "float32",
        ElemType::F64 => "float64",
        ElemType::F16 => "float16",
        ElemType::BF16 => "bfloat16",
        ElemType::I32 => "int32",
        ElemType::I64 => "int64",
        ElemType::U32 => "uint32",
        ElemType::U8 => "uint8",
        ElemType::I8 => "int8",
        ElemType::I16 => "int16",
        ElemType::U16 => "uint16",
        ElemType::U64 => "uint64",
        ElemType::F8E4M3 => "float8_e4m3fn",
        ElemType::F8E5M2 => "float8_e5m2",
        _ => "bool",
    }
}

/// An element type from our short name (`f32`) or a framework's (`float32`, `torch.float32`).
fn elem_from_name(name: &str) -> Option<ElemType> {
    let name = name.strip_prefix("torch.").unwrap_or(name);
    ELEM_TYPES
        .into_iter()
        .find(|t| t.name() == name || framework_name(*t) == name)
}

/// The element type of `dtype=`: a name ('f32', 'float32'), a torch dtype
/// ('torch.float32'), a NumPy or CuPy dtype (its `name`) or a scalar type such as
/// numpy.float32 (its `__name__`).
pub(crate) fn dtype_arg(py: Python<'_>, d: &Bound<'_, PyAny>) -> PyResult<ElemType> {
    let name = if let Ok(s) = d.cast::<PyString>() {
        s.to_string()
    } else if d.hasattr(intern!(py, "is_floating_point"))? {
        d.str()?.to_string()
    } else if let Ok(n) = d.getattr(intern!(py, "name")) {
        n.to_string()
    } else if let Ok(n) = d.getattr(intern!(py, "__name__")) {
        n.to_string()
    } else {
        d.str()?.to_string()
    };
    elem_from_name(&name)
        .ok_or_else(|| DtypeError::new_err(format!("dtype: {name} has no element type here")))
}
