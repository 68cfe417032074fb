//! DLPack capsules: the managed tensor taken out of a capsule, which is then marked used.

use crate::errors::{named, DlpackError};
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::CStr;
use strided_apply::dlpack::{DLManagedTensor, DLManagedTensorVersioned, Dlpack};

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

pub(crate) fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `obj` is a live object (a bound reference).
    unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) != 0 }
}

/// Takes the managed tensor out of a DLPack capsule and marks the capsule used (the
/// protocol: the consumer then owns the tensor and calls its deleter, and the capsule's
/// destructor leaves it alone).
pub(crate) fn consume_capsule(capsule: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Dlpack> {
    let p = capsule.as_ptr();
    // SAFETY: `p` is a live capsule (checked by the caller); the name checks make the
    // pointer's type the one the protocol names, and renaming it before returning makes
    // this call its one consumer (the GIL is held throughout).
    unsafe {
        if ffi::PyCapsule_IsValid(p, VERSIONED.as_ptr()) != 0 {
            let ptr =
                ffi::PyCapsule_GetPointer(p, VERSIONED.as_ptr()) as *mut DLManagedTensorVersioned;
            if ffi::PyCapsule_SetName(p, USED_VERSIONED.as_ptr()) != 0 {
                return Err(PyErr::fetch(capsule.py()));
            }
            return Dlpack::from_versioned(ptr).map_err(|e| named(e, name));
        }
        if ffi::PyCapsule_IsValid(p, LEGACY.as_ptr()) != 0 {
            let ptr = ffi::PyCapsule_GetPointer(p, LEGACY.as_ptr()) as *mut DLManagedTensor;
            if ffi::PyCapsule_SetName(p, USED_LEGACY.as_ptr()) != 0 {
                return Err(PyErr::fetch(capsule.py()));
            }
            return Dlpack::from_legacy(ptr).map_err(|e| named(e, name));
        }
        let cname = ffi::PyCapsule_GetName(p);
        ffi::PyErr_Clear();
        let cname = if cname.is_null() {
            String::new()
        } else {
            CStr::from_ptr(cname).to_string_lossy().into_owned()
        };
        Err(DlpackError::new_err(if cname.starts_with("used_") {
            format!("{name}: this DLPack capsule was already consumed")
        } else {
            format!("{name}: a capsule named `{cname}`, not a DLPack tensor")
        }))
    }
}
