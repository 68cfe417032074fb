//! One argument as an operand: a torch tensor read directly (pointer, shape, strides, dtype,
//! device), anything with `__dlpack__` (consumed once the launch stream is known), or a
//! DLPack capsule.

use crate::capsule::{consume_capsule, is_capsule};
use crate::device::Device;
use crate::errors::{DeviceError, DtypeError, Error, LayoutError, OpError};
use crate::torch::{torch, Torch};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use strided_apply::cudarc::driver::sys::CUstream;
use strided_apply::dlpack::Dlpack;
use strided_apply::raw::RawTensor;
use strided_apply::ElemType;

pub(crate) enum Source<'py> {
    /// A CUDA torch tensor read directly.
    Direct { ptr: u64 },
    /// A `__dlpack__` object not consumed yet (its device is known).
    Pending(Bound<'py, PyAny>),
    /// A consumed DLPack tensor (its deleter runs when this is dropped).
    Dl(Dlpack),
}

pub(crate) struct Operand<'py> {
    pub(crate) name: &'static str,
    /// The caller's object, held until the call returns.
    pub(crate) obj: Bound<'py, PyAny>,
    pub(crate) device: Device,
    /// Known for direct tensors; for DLPack ones once consumed.
    pub(crate) elem: Option<ElemType>,
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<isize>,
    pub(crate) source: Source<'py>,
    pub(crate) framework: Framework,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Framework {
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

/// The device of a DLPack device type and id: the CPU (host or pinned memory) or a CUDA
/// device (device or managed memory).
fn dlpack_device(name: &str, device_type: i32, device_id: i32) -> PyResult<Device> {
    match device_type {
        KDL_CPU | KDL_CUDA_HOST => Ok(Device::Cpu),
        KDL_CUDA | KDL_CUDA_MANAGED => Ok(Device::Cuda(device_id)),
        other => Err(DeviceError::new_err(format!(
            "{name}: DLPack device type {other} (id {device_id}); a CUDA device or the CPU is needed"
        ))),
    }
}

/// `obj` as operand `name`: read now when it is a CUDA torch tensor or a capsule, else
/// pending (its device known) until [`consume`].
pub(crate) fn classify<'py>(
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
    let device = dlpack_device(name, device_type, device_id)?;
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

/// A CUDA torch tensor read by Python calls (where the shim does not read it).
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

fn from_dlpack<'py>(
    obj: Bound<'py, PyAny>,
    name: &'static str,
    dl: Dlpack,
) -> PyResult<Operand<'py>> {
    let dev = dl.device();
    let device = dlpack_device(name, dev.device_type, dev.device_id)?;
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
pub(crate) fn consume<'py>(
    py: Python<'py>,
    op: &mut Operand<'py>,
    stream: Option<CUstream>,
) -> PyResult<()> {
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
    /// The operand as the library reads it (once consumed).
    pub(crate) fn raw(&self) -> PyResult<RawTensor<'_>> {
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

    /// Whether the producer marked the operand read-only.
    pub(crate) fn read_only(&self) -> bool {
        matches!(&self.source, Source::Dl(dl) if dl.read_only())
    }
}
