//! `strided_apply._native`: the Python module's Rust half.
//!
//! Every call goes through run-time dispatch ([`DynOp`]) over the operands' element types.
//! Operands are torch tensors (read directly: pointer, shape, strides, dtype, device) or
//! anything with `__dlpack__` (CuPy, JAX, NumPy, torch on the CPU), or a DLPack capsule.
//! CUDA operands launch on the producer's current stream (torch's, CuPy's, or `stream=`);
//! host operands run on the CPU twin.
//!
//! Lifetimes: every operand object (and each DLPack capsule's managed tensor) is held until
//! the call returns, after the launch is queued. Memory from a stream-ordered allocator
//! (torch's caching allocator, CuPy's pool) freed after that is reused only by work queued
//! later on the same stream, which runs after ours: launching on the producer's stream is
//! what makes returning without a synchronisation safe.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use pyo3::{create_exception, ffi, intern};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::{Mutex, OnceLock};
use strided_apply::cudarc::driver::sys::CUstream;
use strided_apply::dispatch::{self, DynOp, Instance, Scalar};
use strided_apply::dlpack::{DLManagedTensor, DLManagedTensorVersioned, Dlpack};
use strided_apply::layout::broadcast_shapes;
use strided_apply::raw::RawTensor;
use strided_apply::reduce::{reduce_instances, DynReduce};
use strided_apply::stencil::{stencil_instances, DynStencil};
use strided_apply::{ElemType, Error as SaError, Gpu};

mod torch_shim;
use torch_shim::Shim;

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

/// The Python exception for a library error.
fn py_err(e: SaError) -> PyErr {
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
        E::TypeMismatch { .. } | E::NotInstantiated { .. } | E::DlpackDtype { .. } => {
            DtypeError::new_err(msg)
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

trait OrPy<T> {
    fn py(self) -> PyResult<T>;
}
impl<T> OrPy<T> for strided_apply::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(py_err)
    }
}

const ELEM_TYPES: [ElemType; 9] = [
    ElemType::F32,
    ElemType::F64,
    ElemType::F16,
    ElemType::BF16,
    ElemType::I32,
    ElemType::I64,
    ElemType::U32,
    ElemType::U8,
    ElemType::Bool,
];

/// The dtype name frameworks use (torch, NumPy, CuPy): `float32`, `bfloat16`, …
fn framework_name(t: ElemType) -> &'static str {
    match t {
        ElemType::F32 => "float32",
        ElemType::F64 => "float64",
        ElemType::F16 => "float16",
        ElemType::BF16 => "bfloat16",
        ElemType::I32 => "int32",
        ElemType::I64 => "int64",
        ElemType::U32 => "uint32",
        ElemType::U8 => "uint8",
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

// ---------------------------------------------------------------------------------------
// The op table: for each op id, its instances, input count and scalar names.

struct OpInfo {
    instances: Vec<&'static Instance>,
    inputs: usize,
    scalars: Vec<&'static str>,
}

fn op_table() -> &'static HashMap<&'static str, OpInfo> {
    static TABLE: OnceLock<HashMap<&'static str, OpInfo>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: HashMap<&'static str, OpInfo> = HashMap::new();
        for inst in dispatch::instances() {
            let info = table.entry(inst.op()).or_insert_with(|| OpInfo {
                instances: Vec::new(),
                inputs: inst.inputs(),
                scalars: (inst.builder)().map_or(Vec::new(), |b| b.scalars.to_vec()),
            });
            info.instances.push(inst);
        }
        table
    })
}

fn op_info(op: &str) -> PyResult<&'static OpInfo> {
    op_table().get(op).ok_or_else(|| {
        let mut known: Vec<&str> = op_table().keys().copied().collect();
        known.sort_unstable();
        OpError::new_err(format!(
            "no op `{op}` is instantiated; op ids: {}",
            known.join(", ")
        ))
    })
}

// ---------------------------------------------------------------------------------------
// Devices: one `Gpu` per CUDA ordinal, opened on first use, kept for the process.

fn gpu(ordinal: i32) -> PyResult<&'static Gpu> {
    static GPUS: Mutex<Vec<(i32, &'static Gpu)>> = Mutex::new(Vec::new());
    let mut gpus = GPUS
        .lock()
        .map_err(|_| CudaError::new_err("the device table's lock is poisoned"))?;
    if let Some((_, g)) = gpus.iter().find(|(o, _)| *o == ordinal) {
        return Ok(g);
    }
    let index = usize::try_from(ordinal)
        .map_err(|_| DeviceError::new_err(format!("no CUDA device with ordinal {ordinal}")))?;
    let g: &'static Gpu = Box::leak(Box::new(strided_apply::open(index).py()?));
    gpus.push((ordinal, g));
    Ok(g)
}

// ---------------------------------------------------------------------------------------
// torch: the fast path reads a CUDA tensor's pointer, shape, strides and dtype directly.

struct Torch {
    tensor: Py<PyType>,
    /// `torch.nn.Parameter` (read like `torch.Tensor`: it defines no `__torch_function__`).
    parameter: Py<PyType>,
    dtypes: Vec<(Py<PyAny>, ElemType)>,
    empty: Py<PyAny>,
    current_stream: Py<PyAny>,
    /// libtorch's C shim for reading tensors, or why the Python reads are used instead.
    shim: Result<Shim, String>,
}

/// torch's objects, once torch is imported (by the user; this module never imports it).
fn torch(py: Python<'_>) -> PyResult<Option<&'static Torch>> {
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

// ---------------------------------------------------------------------------------------
// Operands.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Device {
    Cpu,
    Cuda(i32),
}

impl Device {
    fn describe(self) -> String {
        match self {
            Device::Cpu => "the CPU".into(),
            Device::Cuda(i) => format!("CUDA device {i}"),
        }
    }
}

enum Source<'py> {
    /// A CUDA torch tensor read directly.
    Direct { ptr: u64 },
    /// A `__dlpack__` object not consumed yet (its device is known).
    Pending(Bound<'py, PyAny>),
    /// A consumed DLPack tensor (its deleter runs when this is dropped).
    Dl(Dlpack),
}

struct Operand<'py> {
    name: &'static str,
    /// The caller's object, held until the call returns.
    obj: Bound<'py, PyAny>,
    device: Device,
    /// Known for direct tensors; for DLPack ones once consumed.
    elem: Option<ElemType>,
    shape: Vec<usize>,
    strides: Vec<isize>,
    source: Source<'py>,
    framework: Framework,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Framework {
    Torch,
    Cupy,
    Numpy,
    Other,
}

const KDL_CPU: i32 = 1;
const KDL_CUDA: i32 = 2;
const KDL_CUDA_HOST: i32 = 3;
const KDL_CUDA_MANAGED: i32 = 13;

fn framework_of(obj: &Bound<'_, PyAny>) -> Framework {
    let module = obj
        .get_type()
        .module()
        .map(|m| m.to_string())
        .unwrap_or_default();
    let root = module.split('.').next().unwrap_or("");
    match root {
        "torch" => Framework::Torch,
        "cupy" => Framework::Cupy,
        "numpy" => Framework::Numpy,
        _ => Framework::Other,
    }
}

fn classify<'py>(
    py: Python<'py>,
    obj: Bound<'py, PyAny>,
    name: &'static str,
) -> PyResult<Operand<'py>> {
    if let Some(t) = torch(py)? {
        // Exactly torch.Tensor or Parameter (a subclass may override what it reports):
        // read by the shim; the negative bit by Python only where its calibrated read is off.
        let ty = obj.get_type();
        if let (Ok(shim), true) = (
            &t.shim,
            ty.is(t.tensor.bind(py)) || ty.is(t.parameter.bind(py)),
        ) {
            if let Some(c) = shim.read_cuda(&obj) {
                match c.neg {
                    Some(true) => return Err(neg_error(name)),
                    Some(false) => {}
                    None => check_not_neg(py, &obj, name)?,
                }
                return Ok(Operand {
                    name,
                    obj,
                    device: Device::Cuda(c.read.device_index),
                    elem: Some(c.elem),
                    shape: c.read.shape,
                    strides: c.read.strides,
                    source: Source::Direct { ptr: c.read.ptr },
                    framework: Framework::Torch,
                });
            }
        }
        if obj.is_instance(t.tensor.bind(py))? {
            let device: i32 = obj.call_method0(intern!(py, "get_device"))?.extract()?;
            if device >= 0 {
                return torch_direct(py, t, obj, name, device);
            }
        }
    }
    if is_capsule(&obj) {
        let dl = consume_capsule(&obj, name)?;
        return from_dlpack(obj, name, dl);
    }
    let framework = framework_of(&obj);
    let Ok(dev) = obj.call_method0(intern!(py, "__dlpack_device__")) else {
        if obj.is_instance_of::<pyo3::types::PyFloat>()
            || obj.is_instance_of::<pyo3::types::PyInt>()
        {
            return Err(OpError::new_err(format!(
                "{name}: a Python number where a tensor is expected; ops with a scalar operand have their own ids (add_s, mul_s, rsub_s, …: `sa.op_ids()`)"
            )));
        }
        return Err(OpError::new_err(format!(
            "{name}: expected a tensor, an array with __dlpack__ or a DLPack capsule; got {}",
            obj.get_type().name()?
        )));
    };
    let (device_type, device_id): (i32, i32) = dev.extract()?;
    let device = match device_type {
        KDL_CPU | KDL_CUDA_HOST => Device::Cpu,
        KDL_CUDA | KDL_CUDA_MANAGED => Device::Cuda(device_id),
        other => {
            return Err(DeviceError::new_err(format!(
                "{name}: DLPack device type {other} (id {device_id}); a CUDA device or the CPU is needed"
            )))
        }
    };
    Ok(Operand {
        name,
        obj: obj.clone(),
        device,
        elem: None,
        shape: Vec::new(),
        strides: Vec::new(),
        source: Source::Pending(obj),
        framework,
    })
}

fn torch_direct<'py>(
    py: Python<'py>,
    t: &Torch,
    obj: Bound<'py, PyAny>,
    name: &'static str,
    device: i32,
) -> PyResult<Operand<'py>> {
    let dtype = obj.getattr(intern!(py, "dtype"))?;
    let Some(elem) = t
        .dtypes
        .iter()
        .find(|(d, _)| d.bind(py).is(&dtype))
        .map(|(_, e)| *e)
    else {
        return Err(DtypeError::new_err(format!(
            "{name}: dtype {dtype} has no element type here (float32, float64, float16, bfloat16, int32, int64, uint32, uint8, bool)"
        )));
    };
    check_not_neg(py, &obj, name)?;
    let ptr: u64 = obj.call_method0(intern!(py, "data_ptr"))?.extract()?;
    let shape: Vec<usize> = obj.getattr(intern!(py, "shape"))?.extract()?;
    let strides: Vec<isize> = obj.call_method0(intern!(py, "stride"))?.extract()?;
    Ok(Operand {
        name,
        obj,
        device: Device::Cuda(device),
        elem: Some(elem),
        shape,
        strides,
        source: Source::Direct { ptr },
        framework: Framework::Torch,
    })
}

/// The LayoutError for a tensor with torch's negative bit (its memory holds `-x`).
fn neg_error(name: &str) -> PyErr {
    LayoutError::new_err(format!(
        "{name}: a tensor with torch's negative bit set (a lazy negation view); call .resolve_neg() first"
    ))
}

/// [`neg_error`] when Python's `is_neg()` says the bit is set.
fn check_not_neg(py: Python<'_>, obj: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
    if obj.call_method0(intern!(py, "is_neg"))?.is_truthy()? {
        return Err(neg_error(name));
    }
    Ok(())
}

fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `obj` is a live object (a bound reference).
    unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) != 0 }
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// Takes the managed tensor out of a DLPack capsule and marks the capsule used (the
/// protocol: the consumer then owns the tensor and calls its deleter, and the capsule's
/// destructor leaves it alone).
fn consume_capsule(capsule: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Dlpack> {
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

/// A library error with the operand's name in front where the error has none.
fn named(e: SaError, name: &str) -> PyErr {
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

fn from_dlpack<'py>(
    obj: Bound<'py, PyAny>,
    name: &'static str,
    dl: Dlpack,
) -> PyResult<Operand<'py>> {
    let dev = dl.device();
    let device = match dev.device_type {
        KDL_CPU | KDL_CUDA_HOST => Device::Cpu,
        KDL_CUDA | KDL_CUDA_MANAGED => Device::Cuda(dev.device_id),
        other => {
            return Err(DeviceError::new_err(format!(
                "{name}: DLPack device type {other} (id {}); a CUDA device or the CPU is needed",
                dev.device_id
            )))
        }
    };
    Ok(Operand {
        name,
        framework: framework_of(&obj),
        obj,
        device,
        elem: Some(dl.elem()),
        shape: dl.shape().to_vec(),
        strides: dl.strides().to_vec(),
        source: Source::Dl(dl),
    })
}

/// Consumes a pending `__dlpack__` operand, asking the producer to order its work before
/// `stream` (DLPack's consumer stream: 1 is CUDA's legacy default stream).
fn consume<'py>(py: Python<'py>, op: &mut Operand<'py>, stream: Option<CUstream>) -> PyResult<()> {
    let Source::Pending(obj) = &op.source else {
        return Ok(());
    };
    let kwargs = PyDict::new(py);
    if let Some(s) = stream {
        let handle = if s.is_null() { 1 } else { s as usize };
        kwargs.set_item(intern!(py, "stream"), handle)?;
    }
    kwargs.set_item(intern!(py, "max_version"), (1, 1))?;
    let capsule = match obj.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs)) {
        Ok(c) => c,
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => {
            // A producer older than DLPack 1.0 takes no `max_version`.
            kwargs.del_item(intern!(py, "max_version"))?;
            obj.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs))?
        }
        Err(e) => {
            return Err(LayoutError::new_err(format!(
                "{}: its __dlpack__ refused: {}",
                op.name,
                e.value(py)
            )))
        }
    };
    let dl = consume_capsule(&capsule, op.name)?;
    let done = from_dlpack(op.obj.clone(), op.name, dl)?;
    *op = Operand {
        framework: op.framework,
        ..done
    };
    Ok(())
}

impl Operand<'_> {
    fn raw(&self) -> PyResult<RawTensor<'_>> {
        let elem = self
            .elem
            .ok_or_else(|| Error::new_err(format!("{}: not consumed", self.name)))?;
        let ptr = match &self.source {
            Source::Direct { ptr } => *ptr,
            Source::Dl(dl) => dl.raw().ptr,
            Source::Pending(_) => {
                return Err(Error::new_err(format!("{}: not consumed", self.name)))
            }
        };
        Ok(RawTensor {
            ptr,
            elem,
            shape: &self.shape,
            strides: &self.strides,
        })
    }
    fn read_only(&self) -> bool {
        matches!(&self.source, Source::Dl(dl) if dl.read_only())
    }
}

// ---------------------------------------------------------------------------------------
// Scalars, streams, output allocation.

fn scalar(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Scalar> {
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

/// `stream=`: an int handle, or an object with `cuda_stream` (torch) or `ptr` (CuPy).
fn stream_arg(py: Python<'_>, s: &Bound<'_, PyAny>) -> PyResult<CUstream> {
    let handle: usize = if let Ok(h) = s.extract::<usize>() {
        h
    } else if let Ok(h) = s.getattr(intern!(py, "cuda_stream")) {
        h.extract()?
    } else if let Ok(h) = s.getattr(intern!(py, "ptr")) {
        h.extract()?
    } else {
        return Err(Error::new_err(
            "stream: expected an int handle, a torch.cuda.Stream or a cupy.cuda.Stream",
        ));
    };
    // DLPack's and CuPy's 1 and 2 are the legacy and per-thread default streams.
    Ok(match handle {
        1 => std::ptr::null_mut(),
        2 => 2usize as CUstream,
        h => h as CUstream,
    })
}

/// The stream a CUDA call launches on: `stream=`, else the current stream of the operands'
/// framework (torch, then CuPy), else CUDA's legacy default stream.
fn launch_stream(
    py: Python<'_>,
    explicit: Option<&Bound<'_, PyAny>>,
    frameworks: &[Framework],
    device: i32,
) -> PyResult<CUstream> {
    if let Some(s) = explicit {
        return stream_arg(py, s);
    }
    if frameworks.contains(&Framework::Torch) {
        if let Some(t) = torch(py)? {
            if let Some(h) = t.shim.as_ref().ok().and_then(|s| s.current_stream(device)) {
                return Ok(h as CUstream);
            }
            let h: usize = t.current_stream.bind(py).call1((device,))?.extract()?;
            return Ok(h as CUstream);
        }
    }
    if frameworks.contains(&Framework::Cupy) {
        let cupy = py.import("cupy")?;
        let h: usize = cupy
            .getattr("cuda")?
            .call_method0("get_current_stream")?
            .getattr("ptr")?
            .extract()?;
        return Ok(h as CUstream);
    }
    Ok(std::ptr::null_mut())
}

/// The broadcast shape of the inputs (NumPy's rule, `layout::broadcast_shapes`), naming the
/// first that does not fit.
fn broadcast_shape(inputs: &[Operand<'_>]) -> PyResult<Vec<usize>> {
    inputs.iter().try_fold(Vec::new(), |shape, o| {
        broadcast_shapes(&shape, &o.shape).ok_or_else(|| {
            LayoutError::new_err(format!(
                "{}: shape {:?} cannot be broadcast with the other inputs (to {:?})",
                o.name, o.shape, shape
            ))
        })
    })
}

/// The output type when `out` is omitted: `dtype=`, else the op's one output type for these
/// input types.
fn output_type(
    py: Python<'_>,
    op: &str,
    info: &OpInfo,
    inputs: &[ElemType],
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<ElemType> {
    if let Some(d) = dtype {
        // A name ('f32', 'float32'), a torch dtype ('torch.float32'), a NumPy or CuPy dtype
        // (its `name`) or a scalar type such as numpy.float32 (its `__name__`).
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
        return elem_from_name(&name)
            .ok_or_else(|| DtypeError::new_err(format!("dtype: {name} has no element type here")));
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

/// A new output of the first operand's framework (torch, CuPy, NumPy) on its device.
fn allocate<'py>(
    py: Python<'py>,
    like: &Operand<'py>,
    shape: &[usize],
    elem: ElemType,
) -> PyResult<Bound<'py, PyAny>> {
    let shape = PyTuple::new(py, shape)?;
    match like.framework {
        Framework::Torch => {
            let t = torch(py)?.ok_or_else(|| Error::new_err("torch is not imported"))?;
            let dtype = t
                .dtypes
                .iter()
                .find(|(_, e)| *e == elem)
                .map(|(d, _)| d.bind(py).clone())
                .ok_or_else(|| DtypeError::new_err("no torch dtype"))?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("dtype", dtype)?;
            kwargs.set_item("device", like.obj.getattr(intern!(py, "device"))?)?;
            t.empty.bind(py).call((shape,), Some(&kwargs))
        }
        Framework::Cupy | Framework::Numpy => {
            if elem == ElemType::BF16 {
                return Err(DtypeError::new_err(format!(
                    "out: {} has no bfloat16; pass out=",
                    if like.framework == Framework::Cupy {
                        "CuPy"
                    } else {
                        "NumPy"
                    }
                )));
            }
            let module = py.import(if like.framework == Framework::Cupy {
                "cupy"
            } else {
                "numpy"
            })?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("dtype", framework_name(elem))?;
            if like.framework == Framework::Cupy {
                // On the operands' device.
                let dev =
                    module
                        .getattr("cuda")?
                        .getattr("Device")?
                        .call1((match like.device {
                            Device::Cuda(i) => i,
                            Device::Cpu => 0,
                        },))?;
                dev.call_method0("__enter__")?;
                let r = module.call_method("empty", (shape,), Some(&kwargs));
                dev.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
                r
            } else {
                module.call_method("empty", (shape,), Some(&kwargs))
            }
        }
        Framework::Other => Err(Error::new_err(format!(
            "out: cannot allocate an output like {} ({}); pass out=",
            like.name,
            like.obj.get_type().name()?
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// The call.

fn check_input_count(op: &str, info: &OpInfo, given: usize) -> PyResult<()> {
    if given != info.inputs {
        return Err(OpError::new_err(format!(
            "op `{op}` takes {} input(s); {given} given",
            info.inputs
        )));
    }
    Ok(())
}

/// The inputs as operands `a`, `b`, `c` (at most three: the op's input count is checked first).
fn classify_inputs<'py>(
    py: Python<'py>,
    inputs: &[Bound<'py, PyAny>],
) -> PyResult<Vec<Operand<'py>>> {
    const NAMES: [&str; 3] = ["a", "b", "c"];
    let mut ops = Vec::with_capacity(inputs.len() + 1);
    for (x, name) in inputs.iter().zip(NAMES) {
        ops.push(classify(py, x.clone(), name)?);
    }
    Ok(ops)
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
    let mut ops = classify_inputs(py, inputs)?;
    let mut out_op = match out {
        Some(o) => Some(classify(py, o, "out")?),
        None => None,
    };
    // One device for every operand.
    let device = match (ops.first(), &out_op) {
        (Some(first), _) => first.device,
        (None, Some(o)) => o.device,
        (None, None) => {
            return Err(OpError::new_err(format!(
                "op `{op}` has no inputs: pass out="
            )))
        }
    };
    for o in ops.iter().chain(out_op.iter()) {
        if o.device != device {
            return Err(DeviceError::new_err(format!(
                "{}: on {}, while {} is on {}",
                o.name,
                o.device.describe(),
                ops.first().map_or("out", |f| f.name),
                device.describe()
            )));
        }
    }
    let stream = match device {
        Device::Cuda(d) => {
            let frameworks: Vec<Framework> = ops
                .iter()
                .chain(out_op.iter())
                .map(|o| o.framework)
                .collect();
            Some(launch_stream(py, stream, &frameworks, d)?)
        }
        Device::Cpu => None,
    };
    for o in ops.iter_mut().chain(out_op.iter_mut()) {
        consume(py, o, stream)?;
    }
    let in_types: Vec<ElemType> = ops.iter().map(|o| o.elem.unwrap_or(ElemType::U8)).collect();
    let out_op = match out_op {
        Some(o) => o,
        None => {
            let like = &ops[0];
            let elem = output_type(py, op, info, &in_types, dtype)?;
            let shape = broadcast_shape(&ops)?;
            let obj = allocate(py, like, &shape, elem)?;
            let mut o = classify(py, obj, "out")?;
            consume(py, &mut o, stream)?;
            o
        }
    };
    if out_op.read_only() {
        return Err(DlpackError::new_err(
            "out: the producer marked this array read-only",
        ));
    }
    let mut types = Vec::with_capacity(ops.len() + 1);
    types.push(out_op.elem.unwrap_or(ElemType::U8));
    types.extend(&in_types);
    let dyn_op = DynOp::new(op, &types, scalars).py()?;
    let raws: Vec<RawTensor> = ops.iter().map(|o| o.raw()).collect::<PyResult<_>>()?;
    let out_raw = out_op.raw()?;
    match device {
        Device::Cuda(d) => {
            let g = gpu(d)?;
            // SAFETY: every operand is held (`ops`, `out_op`: the caller's objects and the
            // consumed DLPack tensors) until this returns, after the launch is queued on the
            // producer's stream `stream` of the device's primary context (torch and CuPy
            // use it too); their allocators reuse memory only in that stream's order. Each
            // pointer is the producer's own description of its CUDA memory of that type.
            unsafe { dyn_op.launch(g, stream, out_raw, &raws) }.py()?;
        }
        Device::Cpu => {
            // SAFETY: host memory described by its producer, held for the call, written only
            // here (the GIL is held; NumPy and torch do not write behind it).
            unsafe { dyn_op.run_cpu_raw(out_raw, &raws) }.py()?;
        }
    }
    let result = out_op.obj.clone();
    drop(ops);
    drop(out_op);
    Ok(result)
}

// ---------------------------------------------------------------------------------------
// Python-facing: `Op` and module functions.

/// An op by id, with its scalars bound (or given at the call).
#[pyclass(module = "strided_apply._native", frozen)]
struct Op {
    id: String,
    info: &'static OpInfo,
    bound: Vec<Scalar>,
}

fn scalars_of(
    op: &str,
    info: &OpInfo,
    positional: &[Bound<'_, PyAny>],
    named: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<Scalar>> {
    let mut out: Vec<Option<Scalar>> = vec![None; info.scalars.len()];
    if positional.len() > info.scalars.len() {
        return Err(OpError::new_err(format!(
            "op `{op}` takes {} scalar(s) ({}); {} given",
            info.scalars.len(),
            info.scalars.join(", "),
            positional.len()
        )));
    }
    for (k, v) in positional.iter().enumerate() {
        out[k] = Some(scalar(v, op, info.scalars[k])?);
    }
    if let Some(named) = named {
        for (k, v) in named.iter() {
            let key: String = k.extract()?;
            let Some(i) = info.scalars.iter().position(|s| *s == key) else {
                return Err(OpError::new_err(format!(
                    "op `{op}` has no scalar `{key}` (its scalars: {})",
                    if info.scalars.is_empty() {
                        "none".to_string()
                    } else {
                        info.scalars.join(", ")
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
                    info.scalars[k],
                    info.scalars.join(", ")
                ))
            })
        })
        .collect()
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
            scalars_of(id, info, &positional, named)?
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
            owned = scalars_of(&self.id, self.info, rest, named)?;
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
        self.info.scalars.clone()
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
fn _call_phases<'py>(
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
        let mut v = classify_inputs(py, &inputs)?;
        v.push(classify(py, out.clone(), "out")?);
        Ok(v)
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
    let mut types: Vec<ElemType> = vec![ops[inputs.len()].elem.unwrap_or(ElemType::U8)];
    types.extend(
        ops[..inputs.len()]
            .iter()
            .map(|o| o.elem.unwrap_or(ElemType::U8)),
    );
    let t_find = time(&mut || DynOp::new(op, &types, &[]).map(drop).py())?;
    let dyn_op = DynOp::new(op, &types, &[]).py()?;
    let g = gpu(d)?;
    let raws: Vec<RawTensor> = ops[..inputs.len()]
        .iter()
        .map(|o| o.raw())
        .collect::<PyResult<_>>()?;
    let out_raw = ops[inputs.len()].raw()?;
    // SAFETY: as in `call`: torch's tensors, held by the caller, on torch's current stream.
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

/// The first steps of a stencil or reduction call: the inputs (with their operand names)
/// and `out` classified, on one device, the launch stream chosen, every operand consumed
/// (the inputs first), and `out`, when given, writable.
#[allow(clippy::type_complexity)]
fn operands<'py>(
    py: Python<'py>,
    inputs: Vec<(Bound<'py, PyAny>, &'static str)>,
    out: Option<Bound<'py, PyAny>>,
    stream: Option<Bound<'py, PyAny>>,
) -> PyResult<(Vec<Operand<'py>>, Option<Operand<'py>>, Option<CUstream>)> {
    let mut ins = inputs
        .into_iter()
        .map(|(obj, name)| classify(py, obj, name))
        .collect::<PyResult<Vec<_>>>()?;
    let mut out_op = match out {
        Some(o) => Some(classify(py, o, "out")?),
        None => None,
    };
    let (first_name, device) = match ins.first() {
        Some(f) => (f.name, f.device),
        None => return Err(OpError::new_err("no input given")),
    };
    for o in ins.iter().skip(1).chain(out_op.iter()) {
        if o.device != device {
            return Err(DeviceError::new_err(format!(
                "{}: on {}, while {first_name} is on {}",
                o.name,
                o.device.describe(),
                device.describe()
            )));
        }
    }
    let stream = match device {
        Device::Cuda(d) => {
            let frameworks: Vec<Framework> = ins
                .iter()
                .chain(out_op.iter())
                .map(|o| o.framework)
                .collect();
            Some(launch_stream(py, stream.as_ref(), &frameworks, d)?)
        }
        Device::Cpu => None,
    };
    for o in ins.iter_mut().chain(out_op.iter_mut()) {
        consume(py, o, stream)?;
    }
    if out_op.as_ref().is_some_and(|o| o.read_only()) {
        return Err(DlpackError::new_err(
            "out: the producer marked this array read-only",
        ));
    }
    Ok((ins, out_op, stream))
}

/// `out` as given, else a new output of the `(shape, element type)` that `new` gives, in
/// the framework and on the device of `like` (the first input), consumed.
fn output_or_new<'py>(
    py: Python<'py>,
    out: Option<Operand<'py>>,
    like: &Operand<'py>,
    stream: Option<CUstream>,
    new: impl FnOnce() -> PyResult<(Vec<usize>, ElemType)>,
) -> PyResult<Operand<'py>> {
    if let Some(o) = out {
        return Ok(o);
    }
    let (shape, elem) = new()?;
    let obj = allocate(py, like, &shape, elem)?;
    let mut o = classify(py, obj, "out")?;
    consume(py, &mut o, stream)?;
    Ok(o)
}

/// A stencil or a reduction chosen at run time: a GPU launch on a stream and the CPU twin,
/// over an output, its inputs (raw tensors) and axes, with the library's contracts.
trait AxesOp {
    /// # Safety
    /// As `DynStencil::launch` / `DynReduce::launch`.
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        axes: &[usize],
    ) -> strided_apply::Result<()>;
    /// # Safety
    /// As `DynStencil::run_cpu_raw` / `DynReduce::run_cpu_raw`.
    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        axes: &[usize],
    ) -> strided_apply::Result<()>;
}

impl AxesOp for DynReduce {
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        axes: &[usize],
    ) -> strided_apply::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { DynReduce::launch(self, gpu, stream, out, inputs, axes) }
    }
    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        axes: &[usize],
    ) -> strided_apply::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { DynReduce::run_cpu_raw(self, out, inputs, axes) }
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

impl AxesOp for DynStencil {
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        axes: &[usize],
    ) -> strided_apply::Result<()> {
        let input = stencil_input(inputs)?;
        // SAFETY: the caller's contract.
        unsafe { DynStencil::launch(self, gpu, stream, out, input, axes) }
    }
    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        axes: &[usize],
    ) -> strided_apply::Result<()> {
        let input = stencil_input(inputs)?;
        // SAFETY: the caller's contract.
        unsafe { DynStencil::run_cpu_raw(self, out, input, axes) }
    }
}

/// Runs `op` over the operands `operands` prepared, on their device, and returns `out`.
fn run_axes_op<'py>(
    op: &impl AxesOp,
    inputs: Vec<Operand<'py>>,
    out_op: Operand<'py>,
    stream: Option<CUstream>,
    axes: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let raws: Vec<RawTensor> = inputs.iter().map(|o| o.raw()).collect::<PyResult<_>>()?;
    let out_raw = out_op.raw()?;
    match out_op.device {
        Device::Cuda(d) => {
            let g = gpu(d)?;
            // SAFETY: as in `call`: every operand is held until this returns, after the
            // launch (and a reduction's stream-ordered scratch) is queued on the producer's
            // stream of the primary context; each pointer is its producer's description of
            // its CUDA memory of that type.
            unsafe { op.launch(g, stream, out_raw, &raws, axes) }.py()?;
        }
        Device::Cpu => {
            // SAFETY: host memory described by its producer, held for the call.
            unsafe { op.run_cpu_raw(out_raw, &raws, axes) }.py()?;
        }
    }
    let result = out_op.obj.clone();
    drop(raws);
    drop(inputs);
    drop(out_op);
    Ok(result)
}

/// `out = stencil(input)` by stencil id (`lap2`, `fdiff`, `shift_xp`, …; `stencil_ids()`):
/// `axes` are the tensor axes of the stencil's x, y and z (one to three); `out` has the
/// input's shape and type when omitted, and may not share memory with the input.
#[pyfunction]
#[pyo3(signature = (id, input, *, axes, out=None, stream=None))]
fn stencil<'py>(
    py: Python<'py>,
    id: &str,
    input: Bound<'py, PyAny>,
    axes: Vec<usize>,
    out: Option<Bound<'py, PyAny>>,
    stream: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (ins, out_op, stream) = operands(py, vec![(input, "input")], out, stream)?;
    let inp = &ins[0];
    let out_op = output_or_new(py, out_op, inp, stream, || {
        Ok((inp.shape.clone(), inp.elem.unwrap_or(ElemType::U8)))
    })?;
    let op = DynStencil::new(id, out_op.elem.unwrap_or(ElemType::U8)).py()?;
    run_axes_op(&op, ins, out_op, stream, &axes)
}

/// The reduced axes of `dim` (None: all; an int or a sequence of ints, negative from the
/// end) over a tensor of `rank` axes, sorted.
fn reduce_axes(dim: Option<&Bound<'_, PyAny>>, rank: usize) -> PyResult<Vec<usize>> {
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
fn reduced_shape(shape: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
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
    let (ins, out_op, stream) = operands(py, inputs, out, stream)?;
    // A family not instantiated for the first input's type names that input.
    let op = DynReduce::new(id, ins[0].elem.unwrap_or(ElemType::U8)).map_err(|e| match e {
        SaError::NotInstantiated { .. } => named(e, ins[0].name),
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
    let shape = broadcast_shape(&ins)?;
    let axes = reduce_axes(dim.as_ref(), shape.len())?;
    let out_op = output_or_new(py, out_op, &ins[0], stream, || {
        Ok((reduced_shape(&shape, &axes, keepdim), inst.out_elem))
    })?;
    run_axes_op(&op, ins, out_op, stream, &axes)
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
fn reduce<'py>(
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
fn map_reduce<'py>(
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
fn reduce_ids() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = reduce_instances().map(|i| i.op).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Every instantiated reduction family: `(reduction_id, input_type, inputs, output_type)`
/// (type names such as `f32`; `inputs`: 1 for `reduce`, 2 for `map_reduce`), sorted.
#[pyfunction]
fn reduce_families() -> Vec<(&'static str, &'static str, usize, &'static str)> {
    let mut v: Vec<_> = reduce_instances()
        .map(|i| (i.op, i.elem.name(), i.inputs, i.out_elem.name()))
        .collect();
    v.sort_unstable();
    v
}

/// The stencil ids, sorted.
#[pyfunction]
fn stencil_ids() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = stencil_instances().map(|i| i.op).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Every instantiated (op, types) family: `(op_id, types, scalar_names, tolerance)`, types
/// output first (tuples of names); tolerance `None` for exact ops, else the ulp bound against
/// an f64 reference.
#[pyfunction]
fn instances(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyTuple>>> {
    use strided_apply::ops::Tolerance;
    dispatch::instances()
        .map(|i| {
            let types = PyTuple::new(py, i.types.iter().map(|t| t.name()))?;
            let scalars =
                PyTuple::new(py, (i.builder)().map_or(Vec::new(), |b| b.scalars.to_vec()))?;
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
fn op_ids() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = op_table().keys().copied().collect();
    v.sort_unstable();
    v
}

/// How torch tensors are read: `"shim, …"` (libtorch's C shim, then each calibrated read in
/// use or why not) or `"python: "` and why the shim is not used (six Python calls per
/// tensor); `None` before torch is imported.
#[pyfunction]
fn _torch_reader(py: Python<'_>) -> PyResult<Option<String>> {
    Ok(torch(py)?.map(|t| match &t.shim {
        Ok(shim) => shim.describe.clone(),
        Err(why) => format!("python: {why}"),
    }))
}

/// The code chosen for each loaded module on CUDA device `device` (cubin or PTX).
#[pyfunction]
#[pyo3(signature = (device=0))]
fn module_info(device: i32) -> PyResult<Vec<String>> {
    Ok(gpu(device)?
        .module_info()
        .iter()
        .map(|m| format!("{m:?}"))
        .collect())
}

/// Loads the families of `op_ids` (pointwise ops, stencils, reductions) on CUDA device
/// `device` now (before a CUDA graph capture: loading a module is not allowed while
/// capturing).
#[pyfunction]
#[pyo3(signature = (op_ids, device=0))]
fn preload(op_ids: Vec<String>, device: i32) -> PyResult<()> {
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
            for inst in &op_info(id)?.instances {
                g.preload_kernels(&inst.names).py()?;
            }
        }
        for (module, kernel) in kernels {
            g.kernel(module, kernel).py()?;
        }
    }
    Ok(())
}

#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Op>()?;
    m.add_function(wrap_pyfunction!(instances, m)?)?;
    m.add_function(wrap_pyfunction!(op_ids, m)?)?;
    m.add_function(wrap_pyfunction!(module_info, m)?)?;
    m.add_function(wrap_pyfunction!(preload, m)?)?;
    m.add_function(wrap_pyfunction!(_call_phases, m)?)?;
    m.add_function(wrap_pyfunction!(_torch_reader, m)?)?;
    m.add_function(wrap_pyfunction!(stencil, m)?)?;
    m.add_function(wrap_pyfunction!(reduce, m)?)?;
    m.add_function(wrap_pyfunction!(map_reduce, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_ids, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_families, m)?)?;
    m.add_function(wrap_pyfunction!(stencil_ids, m)?)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("LayoutError", py.get_type::<LayoutError>())?;
    m.add("DtypeError", py.get_type::<DtypeError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("OpError", py.get_type::<OpError>())?;
    m.add("DlpackError", py.get_type::<DlpackError>())?;
    m.add("CudaError", py.get_type::<CudaError>())?;
    Ok(())
}
