//! An op's scalars from Python values: positional and by name, each converted to a
//! [`Scalar`] (the host converts it to the op's element type).

use crate::errors::OpError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use strided_apply::dispatch::Scalar;

pub(crate) fn scalar(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Scalar> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Ok(Scalar::Bool(obj.extract()?));
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Scalar::I64(v));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Scalar::U64(v));
        }
        return Err(OpError::new_err(format!(
            "{op}: scalar {what} = {obj} does not fit in 64 bits"
        )));
    }
    if let Ok(v) = obj.extract::<f64>() {
        return Ok(Scalar::F64(v));
    }
    Err(OpError::new_err(format!(
        "{op}: scalar {what} must be a bool, int or float; got {}",
        obj.get_type().name()?
    )))
}

/// The scalars of op `op`, whose scalar names are `names`, from `positional` values and
/// `named` ones: each given once, none missing.
pub(crate) fn scalars_of(
    op: &str,
    names: &[&str],
    positional: &[Bound<'_, PyAny>],
    named: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<Scalar>> {
    let mut out: Vec<Option<Scalar>> = vec![None; names.len()];
    if positional.len() > names.len() {
        return Err(OpError::new_err(format!(
            "op `{op}` takes {} scalar(s) ({}); {} given",
            names.len(),
            names.join(", "),
            positional.len()
        )));
    }
    for (k, v) in positional.iter().enumerate() {
        out[k] = Some(scalar(v, op, names[k])?);
    }
    if let Some(named) = named {
        for (k, v) in named.iter() {
            let key: String = k.extract()?;
            let Some(i) = names.iter().position(|s| *s == key) else {
                return Err(OpError::new_err(format!(
                    "op `{op}` has no scalar `{key}` (its scalars: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            };
            if out[i].is_some() {
                return Err(OpError::new_err(format!(
                    "op `{op}`: scalar `{key}` given twice"
                )));
            }
            out[i] = Some(scalar(&v, op, &key)?);
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(k, s)| {
            s.ok_or_else(|| {
                OpError::new_err(format!(
                    "op `{op}` needs scalar `{}` (its scalars: {})",
                    names[k],
                    names.join(", ")
                ))
            })
        })
        .collect()
}
