//! Devices: where an operand lives, one `Gpu` per CUDA ordinal (opened on first use, kept
//! for the process), and the code loaded on each.

use crate::errors::{CudaError, DeviceError, OrPy};
use pyo3::prelude::*;
use std::sync::Mutex;
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
