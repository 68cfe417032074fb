//! `strided_apply._native`: the Python module's Rust half.
//!
//! Every call goes through run-time dispatch ([`DynOp`](strided_apply::dispatch::DynOp))
//! over the operands' element types. Operands are torch tensors (read directly: pointer,
//! shape, strides, dtype, device) or anything with `__dlpack__` (CuPy, JAX, NumPy, torch on
//! the CPU), or a DLPack capsule. CUDA operands launch on the producer's current stream
//! (torch's, CuPy's, or `stream=`); host operands run on the CPU twin.
//!
//! Lifetimes: every operand object (and each DLPack capsule's managed tensor) is held until
//! the call returns, after the launch is queued. Memory from a stream-ordered allocator
//! (torch's caching allocator, CuPy's pool) freed after that is reused only by work queued
//! later on the same stream, which runs after ours: launching on the producer's stream is
//! what makes returning without a synchronisation safe.
//!
//! Modules, from an argument to the launch:
//! - `errors`: the exception types and which library error raises which;
//! - `dtypes`: element types by the frameworks' names, `dtype=`;
//! - `torch`, `torch_shim`: torch's objects, and reading its tensors without Python;
//! - `capsule`, `operands`: one argument as an operand (a torch tensor, `__dlpack__`, a
//!   DLPack capsule);
//! - `streams`: the launch stream;
//! - `device`: one `Gpu` per CUDA device, and the code loaded on it;
//! - `call`: the one path from a call's arguments to its run;
//! - `scalars`, `ops`: pointwise ops (`Op`, the op index, the call);
//! - `axes`: stencils and reductions;
//! - `expr`: expressions (`sa.expr`).
//! - `norm`: normalisation programs (`sa.norm`).

use pyo3::prelude::*;

mod axes;
mod call;
mod capsule;
mod device;
mod dtypes;
mod errors;
mod expr;
mod norm;
mod operands;
mod ops;
mod scalars;
mod streams;
mod torch;
mod torch_shim;

#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ops::Op>()?;
    m.add_class::<expr::Expr>()?;
    m.add_function(wrap_pyfunction!(expr::expr, m)?)?;
    m.add_class::<norm::Norm>()?;
    m.add_function(wrap_pyfunction!(norm::norm, m)?)?;
    m.add_function(wrap_pyfunction!(norm::wait_compiles, m)?)?;
    m.add_function(wrap_pyfunction!(ops::instances, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_ids, m)?)?;
    m.add_function(wrap_pyfunction!(device::module_info, m)?)?;
    m.add_function(wrap_pyfunction!(ops::preload, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_call_phases, m)?)?;
    m.add_function(wrap_pyfunction!(torch::_torch_reader, m)?)?;
    m.add_function(wrap_pyfunction!(axes::stencil, m)?)?;
    m.add_function(wrap_pyfunction!(axes::reduce, m)?)?;
    m.add_function(wrap_pyfunction!(axes::map_reduce, m)?)?;
    m.add_function(wrap_pyfunction!(axes::reduce_ids, m)?)?;
    m.add_function(wrap_pyfunction!(axes::reduce_families, m)?)?;
    m.add_function(wrap_pyfunction!(axes::stencil_ids, m)?)?;
    errors::add_to(m)
}
