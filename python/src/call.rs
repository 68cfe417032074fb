//! The one path from a call's arguments to its run, for pointwise ops, stencils and
//! reductions alike: the inputs and `out` as operands on one device, the launch stream,
//! every operand consumed, the output given or allocated, and the run on the GPU or the CPU
//! twin.

use crate::device::{gpu, Device};
use crate::dtypes::framework_name;
use crate::errors::{DeviceError, DlpackError, DtypeError, Error, LayoutError, OpError, OrPy};
use crate::operands::{classify, consume, Framework, Operand};
use crate::streams::launch_stream;
use crate::torch::torch;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use strided_apply::cudarc::driver::sys::CUstream;
use strided_apply::layout::broadcast_shapes;
use strided_apply::raw::RawTensor;
use strided_apply::{ElemType, Gpu};

/// A call's inputs and given `out`, on one device, consumed on the launch stream.
pub(crate) struct Operands<'py> {
    pub(crate) inputs: Vec<Operand<'py>>,
    /// `out=`, writable, when given.
    out: Option<Operand<'py>>,
    /// The launch stream on a CUDA device; `None` on the CPU.
    stream: Option<CUstream>,
}

/// A call's operands with its output, ready to run.
pub(crate) struct Call<'py> {
    pub(crate) inputs: Vec<Operand<'py>>,
    pub(crate) out: Operand<'py>,
    stream: Option<CUstream>,
}

/// The first steps of every call: the inputs (with their operand names) and `out`
/// classified, on one device (the first input's, else `out`'s), the launch stream chosen,
/// every operand consumed (the inputs first), and `out`, when given, writable. `op` names
/// the op in the error for a call with neither inputs nor `out`.
pub(crate) fn operands<'py>(
    py: Python<'py>,
    op: &str,
    inputs: impl IntoIterator<Item = (Bound<'py, PyAny>, &'static str)>,
    out: Option<Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Operands<'py>> {
    let mut ins = inputs
        .into_iter()
        .map(|(obj, name)| classify(py, obj, name))
        .collect::<PyResult<Vec<_>>>()?;
    let mut out_op = match out {
        Some(o) => Some(classify(py, o, "out")?),
        None => None,
    };
    let (first_name, device) = match (ins.first(), &out_op) {
        (Some(first), _) => (first.name, first.device),
        (None, Some(o)) => (o.name, o.device),
        (None, None) => {
            return Err(OpError::new_err(format!(
                "op `{op}` has no inputs: pass out="
            )))
        }
    };
    for o in ins.iter().chain(out_op.iter()) {
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
            Some(launch_stream(py, stream, &frameworks, d)?)
        }
        Device::Cpu => None,
    };
    for o in ins.iter_mut().chain(out_op.iter_mut()) {
        consume(py, o, stream)?;
    }
    if let Some(o) = &out_op {
        check_writable(o)?;
    }
    Ok(Operands {
        inputs: ins,
        out: out_op,
        stream,
    })
}

/// The DlpackError for an output its producer marked read-only.
fn check_writable(out: &Operand<'_>) -> PyResult<()> {
    if out.read_only() {
        return Err(DlpackError::new_err(
            "out: the producer marked this array read-only",
        ));
    }
    Ok(())
}

/// Refuses an op other than a conversion over an 8-bit float operand (an input or the
/// output; one whose type is not known yet passes), naming it: they are storage types, as in
/// PyTorch. Nothing has run.
pub(crate) fn refuse_float8<'a, 'py: 'a>(
    op: &str,
    operands: impl IntoIterator<Item = &'a Operand<'py>>,
) -> PyResult<()> {
    if op == "cast" {
        return Ok(());
    }
    let f8 = operands
        .into_iter()
        .find(|o| matches!(o.elem, Some(ElemType::F8E4M3 | ElemType::F8E5M2)));
    match f8 {
        Some(o) => Err(DtypeError::new_err(format!(
            "{}: `{op}` of {}: 8-bit floats are storage types, as in PyTorch (convert them \
             first, e.g. sa.expr(\"f32(a)\"))",
            o.name,
            framework_name(o.elem.unwrap_or(ElemType::F8E4M3)),
        ))),
        None => Ok(()),
    }
}

impl<'py> Operands<'py> {
    /// [`refuse_float8`] of the operands known so far (inputs and `out=`).
    pub(crate) fn refuse_float8(&self, op: &str) -> PyResult<()> {
        refuse_float8(op, self.inputs.iter().chain(self.out.as_ref()))
    }

    /// The given `out`'s element type (known once consumed).
    pub(crate) fn out_elem(&self) -> Option<ElemType> {
        self.out.as_ref().and_then(|o| o.elem)
    }

    /// `out` as given, else a new output of the `(shape, element type)` that `new` gives
    /// for the inputs, in the framework and on the device of the first input, consumed and
    /// writable.
    pub(crate) fn output_or_new(
        self,
        py: Python<'py>,
        new: impl FnOnce(&[Operand<'py>]) -> PyResult<(Vec<usize>, ElemType)>,
    ) -> PyResult<Call<'py>> {
        let Operands {
            inputs,
            out,
            stream,
        } = self;
        let out = match out {
            Some(o) => o,
            None => {
                let Some(like) = inputs.first() else {
                    // Unreachable: `operands` refuses a call with neither inputs nor `out`.
                    return Err(OpError::new_err("out: no input to allocate it like"));
                };
                let (shape, elem) = new(&inputs)?;
                let obj = allocate(py, like, &shape, elem)?;
                let mut o = classify(py, obj, "out")?;
                consume(py, &mut o, stream)?;
                check_writable(&o)?;
                o
            }
        };
        Ok(Call {
            inputs,
            out,
            stream,
        })
    }
}

/// The broadcast shape of the inputs (NumPy's rule, `layout::broadcast_shapes`), naming the
/// first that does not fit.
pub(crate) fn broadcast_shape(inputs: &[Operand<'_>]) -> PyResult<Vec<usize>> {
    inputs.iter().try_fold(Vec::new(), |shape, o| {
        broadcast_shapes(&shape, &o.shape).ok_or_else(|| {
            LayoutError::new_err(format!(
                "{}: shape {:?} cannot be broadcast with the other inputs (to {:?})",
                o.name, o.shape, shape
            ))
        })
    })
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
            if matches!(elem, ElemType::BF16 | ElemType::F8E4M3 | ElemType::F8E5M2) {
                return Err(DtypeError::new_err(format!(
                    "out: {} has no {}; pass out=",
                    if like.framework == Framework::Cupy {
                        "CuPy"
                    } else {
                        "NumPy"
                    },
                    framework_name(elem),
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

/// An op chosen at run time over an output and its inputs: a GPU launch on a stream, and
/// the CPU twin.
pub(crate) trait Kernel {
    /// # Safety
    /// As `DynOp::launch` (`DynStencil::launch` and `DynReduce::launch` ask the same).
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()>;

    /// # Safety
    /// As `DynOp::run_cpu_raw` (`DynStencil::run_cpu_raw` and `DynReduce::run_cpu_raw` ask
    /// the same).
    unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> strided_apply::Result<()>;
}

impl<'py> Call<'py> {
    /// Runs `kernel` over the operands on their device; returns `out`.
    pub(crate) fn run(self, kernel: &impl Kernel) -> PyResult<Bound<'py, PyAny>> {
        let raws: Vec<RawTensor> = self
            .inputs
            .iter()
            .map(|o| o.raw())
            .collect::<PyResult<_>>()?;
        let out_raw = self.out.raw()?;
        match self.out.device {
            Device::Cuda(d) => {
                let g = gpu(d)?;
                // SAFETY: every operand is held (`inputs`, `out`: the caller's objects and
                // the consumed DLPack tensors) until this returns, after the launch (and a
                // reduction's stream-ordered scratch) is queued on the producer's stream
                // `stream` of the device's primary context (torch and CuPy use it too); their
                // allocators reuse memory only in that stream's order. Each pointer is the
                // producer's own description of its CUDA memory of that type.
                unsafe { kernel.launch(g, self.stream, out_raw, &raws) }.py()?;
            }
            Device::Cpu => {
                // SAFETY: host memory described by its producer, held for the call, written
                // only here (the GIL is held; NumPy and torch do not write behind it).
                unsafe { kernel.run_cpu_raw(out_raw, &raws) }.py()?;
            }
        }
        let result = self.out.obj.clone();
        // The operands (and the DLPack tensors they own) go after the launch is queued.
        drop(raws);
        drop(self.inputs);
        drop(self.out);
        Ok(result)
    }
}
