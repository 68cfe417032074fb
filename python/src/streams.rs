//! The stream a CUDA call launches on: `stream=`, else the producer's current stream.

use crate::errors::Error;
use crate::operands::Framework;
use crate::torch::torch;
use pyo3::intern;
use pyo3::prelude::*;
use strided_apply::cudarc::driver::sys::CUstream;

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
pub(crate) fn launch_stream(
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
