//! Devices: where an operand lives, one `Gpu` per CUDA ordinal (opened on first use, kept
//! for the process), and the code loaded on each.

use crate::errors::{CudaError, DeviceError, OrPy};
use crate::ops::op_info;
use pyo3::prelude::*;
use std::sync::Mutex;
use strided_apply::reduce::reduce_instances;
use strided_apply::stencil::stencil_instances;
use strided_apply::Gpu;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Device {
    Cpu,
    Cuda(i32),
}

impl Device {
    pub(crate) fn describe(self) -> String {
        match self {
            Device::Cpu => "the CPU".into(),
            Device::Cuda(i) => format!("CUDA device {i}"),
        }
    }
}

pub(crate) fn gpu(ordinal: i32) -> PyResult<&'static Gpu> {
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

/// The code chosen for each loaded module on CUDA device `device` (cubin or PTX).
#[pyfunction]
#[pyo3(signature = (device=0))]
pub(crate) fn module_info(device: i32) -> PyResult<Vec<String>> {
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
pub(crate) fn preload(op_ids: Vec<String>, device: i32) -> PyResult<()> {
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
            for inst in op_info(id)?.instances() {
                g.preload_kernels(&inst.names).py()?;
            }
        }
        for (module, kernel) in kernels {
            g.kernel(module, kernel).py()?;
        }
    }
    Ok(())
}
