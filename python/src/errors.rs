//! The module's exceptions, and which one each library error raises.

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use strided_apply::Error as SaError;

create_exception!(
    _native,
    Error,
    PyRuntimeError,
    "Base of every strided_apply error."
);
create_exception!(
    _native,
    LayoutError,
    Error,
    "Shapes, strides, bounds, alignment or aliasing of an operand."
);
create_exception!(
    _native,
    DtypeError,
    Error,
    "An element type that is unsupported, mismatched or not instantiated for the op."
);
create_exception!(
    _native,
    DeviceError,
    Error,
    "Operands on different devices, no device, or no code for it."
);
create_exception!(
    _native,
    OpError,
    Error,
    "An unknown op, wrong scalars or input count, or an output type to choose."
);
create_exception!(
    _native,
    ExprError,
    Error,
    "An expression with a syntax error, an unknown name or function, over a limit, or called with arguments that do not bind."
);
create_exception!(
    _native,
    DlpackError,
    Error,
    "A DLPack capsule that is consumed, null, of an unknown version, or read-only as out."
);
create_exception!(
    _native,
    CudaError,
    Error,
    "The CUDA driver failed (module load, launch, out of memory)."
);

/// Adds the exception types to the module.
pub(crate) fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("LayoutError", py.get_type::<LayoutError>())?;
    m.add("DtypeError", py.get_type::<DtypeError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("OpError", py.get_type::<OpError>())?;
    m.add("ExprError", py.get_type::<ExprError>())?;
    m.add("DlpackError", py.get_type::<DlpackError>())?;
    m.add("CudaError", py.get_type::<CudaError>())?;
    Ok(())
}

/// The Python exception for a library error.
pub(crate) fn py_err(e: SaError) -> PyErr {
    use SaError as E;
    let msg = e.to_string();
    match e {
        E::OutOfBounds { .. }
        | E::Overflow { .. }
        | E::Broadcast { .. }
        | E::RankTooHigh { .. }
        | E::OverlappingOutput { .. }
        | E::PartialOverlap { .. }
        | E::Misaligned { .. }
        | E::NullPointer { .. }
        | E::InvalidView { .. }
        | E::LengthMismatch { .. }
        | E::StencilOverlap { .. }
        | E::ReduceOverlap { .. }
        | E::ReducedShape { .. }
        | E::ReduceTooLarge { .. } => LayoutError::new_err(msg),
        E::TypeMismatch { .. }
        | E::NotInstantiated { .. }
        | E::DlpackDtype { .. }
        | E::ExprType { .. } => DtypeError::new_err(msg),
        E::ExprSyntax { .. } | E::ExprUnknown { .. } | E::ExprLimit { .. } | E::ExprBind { .. } => {
            ExprError::new_err(msg)
        }
        E::NoDriver(_)
        | E::NoDevice { .. }
        | E::NoCodeForDevice { .. }
        | E::WrongDevice { .. }
        | E::DlpackDevice { .. } => DeviceError::new_err(msg),
        E::UnknownOp { .. }
        | E::AmbiguousOp { .. }
        | E::BadScalars { .. }
        | E::OpNotBuildable { .. }
        | E::InputCount { .. }
        | E::EmptyReduction { .. } => OpError::new_err(msg),
        E::DlpackNull | E::DlpackVersion { .. } | E::DlpackReadOnly { .. } => {
            DlpackError::new_err(msg)
        }
        _ => CudaError::new_err(msg),
    }
}

/// A library error with the operand's name in front where the error has none.
pub(crate) fn named(e: SaError, name: &str) -> PyErr {
    let err = py_err(e);
    Python::attach(|py| {
        let msg = err.value(py).to_string();
        if msg.starts_with(name) {
            err
        } else {
            let ty = err.get_type(py);
            PyErr::from_type(ty, format!("{name}: {msg}"))
        }
    })
}

/// A library result as a Python one ([`py_err`]).
pub(crate) trait OrPy<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> OrPy<T> for strided_apply::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(py_err)
    }
}
