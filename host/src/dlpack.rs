//! DLPack in and out: a `DLManagedTensor` (legacy) or `DLManagedTensorVersioned` (DLPack
//! 1.x) from another library becomes an operand — a [`RawTensor`] for the GPU (typed or
//! [run-time dispatched](crate::dispatch)) or a [`HostTensor`] for the CPU twin — with any
//! strides (zero and negative included) and its byte offset; a [`DeviceTensor`] exports
//! itself without a copy.
//!
//! The C ABI is written out here (`#[repr(C)]` structs of `dlpack.h`, v1.1): it is small
//! and frozen by the standard, while the Rust DLPack crates' APIs changed in every recent
//! minor release and bring Python bindings along.
//!
//! ```no_run
//! # mod strided_apply { pub use host::*; pub fn open(o: usize) -> Result<Gpu> { Gpu::new(o) } } // the root crate: `open` also registers its built-in kernels
//! use strided_apply::dlpack::{DLManagedTensorVersioned, Dlpack};
//! use strided_apply::dispatch::DynOp;
//! # fn producer() -> *mut DLManagedTensorVersioned { std::ptr::null_mut() }
//! let gpu = strided_apply::open(0)?;
//! // Tensors from another framework (e.g. its `__dlpack__` capsules' pointers).
//! let (a, b, out) = unsafe {
//!     (Dlpack::from_versioned(producer())?, Dlpack::from_versioned(producer())?,
//!      Dlpack::from_versioned(producer())?)
//! };
//! let op = DynOp::new("add", &[out.elem(), a.elem(), b.elem()], &[])?;
//! // SAFETY: the producer's memory lives while `a`, `b` and `out` are held; work is
//! // queued on the producer's stream (here the Gpu's own: `None`).
//! unsafe {
//!     op.launch(&gpu, None, out.raw_on(&gpu, "out")?, &[a.raw_on(&gpu, "a")?, b.raw_on(&gpu, "b")?])?;
//! }
//! gpu.synchronize()?; // or keep the tensors until the stream has passed this point
//! drop((a, b, out)); // calls each producer's deleter, once
//! # Ok::<(), strided_apply::Error>(())
//! ```
//!
//! Lifetimes: a [`Dlpack`] owns the managed tensor and calls its deleter when dropped. The
//! GPU reads the memory when the stream gets there, so keep the [`Dlpack`] (or the
//! producer's tensor) until then; with a stream-ordered allocator (PyTorch's caching
//! allocator, cudarc's pool) on the same stream, dropping right after queuing is safe.

use crate::error::{Error, Operand, Result};
use crate::gpu::Gpu;
use crate::layout::Layout;
use crate::operand::{HostTensor, HostTensorMut, RawTensor};
use crate::tensor::DeviceTensor;
use gpu_kernels::elem::ElemType;
use gpu_kernels::Elem;
use std::ffi::c_void;
use std::ptr::NonNull;

/// `DLDeviceType` values this library reads.
pub mod device_type {
    pub const CPU: i32 = 1;
    pub const CUDA: i32 = 2;
    pub const CUDA_HOST: i32 = 3;
    pub const CUDA_MANAGED: i32 = 13;
}

/// `DLDataTypeCode` values.
pub mod type_code {
    pub const INT: u8 = 0;
    pub const UINT: u8 = 1;
    pub const FLOAT: u8 = 2;
    pub const OPAQUE_HANDLE: u8 = 3;
    pub const BFLOAT: u8 = 4;
    pub const COMPLEX: u8 = 5;
    pub const BOOL: u8 = 6;
    /// DLPack 1.1's 8-bit floats (`kDLFloat8_e4m3fn`, `kDLFloat8_e5m2`), as PyTorch writes them.
    pub const FLOAT8_E4M3FN: u8 = 10;
    pub const FLOAT8_E5M2: u8 = 12;
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    /// In elements; null means compact row-major.
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// The legacy (pre-1.0) managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// The versioned managed tensor (DLPack 1.x).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// `flags` bit: the producer marks the data read-only.
pub const FLAG_READ_ONLY: u64 = 1;
/// The DLPack version this library writes and the major version it reads.
pub const VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 1 };

/// The element type of a DLPack dtype, or the error naming it.
pub fn elem_type(dtype: DLDataType, operand: Operand) -> Result<ElemType> {
    use type_code::*;
    let t = match (dtype.code, dtype.bits, dtype.lanes) {
        (FLOAT, 32, 1) => ElemType::F32,
        (FLOAT, 64, 1) => ElemType::F64,
        (FLOAT, 16, 1) => ElemType::F16,
        (BFLOAT, 16, 1) => ElemType::BF16,
        (INT, 32, 1) => ElemType::I32,
        (INT, 64, 1) => ElemType::I64,
        (UINT, 32, 1) => ElemType::U32,
        (UINT, 8, 1) => ElemType::U8,
        (BOOL, 8, 1) => ElemType::Bool,
        (INT, 8, 1) => ElemType::I8,
        (INT, 16, 1) => ElemType::I16,
        (UINT, 16, 1) => ElemType::U16,
        (UINT, 64, 1) => ElemType::U64,
        (FLOAT8_E4M3FN, 8, 1) => ElemType::F8E4M3,
        (FLOAT8_E5M2, 8, 1) => ElemType::F8E5M2,
        _ => {
            let kind = match dtype.code {
                COMPLEX => "complex",
                OPAQUE_HANDLE => "opaque handle",
                _ if dtype.lanes != 1 => "vector lanes",
                _ if dtype.bits < 8 => "sub-byte",
                7.. => "an 8-bit float other than e4m3fn and e5m2, or another extension type",
                _ => "a width this library has no element type for",
            };
            return Err(Error::DlpackDtype {
                operand,
                code: dtype.code,
                bits: dtype.bits,
                lanes: dtype.lanes,
                kind,
            });
        }
    };
    Ok(t)
}

/// The DLPack dtype of an element type (`None` for a type this version does not map).
pub fn dl_dtype(t: ElemType) -> Option<DLDataType> {
    use type_code::*;
    let (code, bits) = match t {
        ElemType::F32 => (FLOAT, 32),
        ElemType::F64 => (FLOAT, 64),
        ElemType::F16 => (FLOAT, 16),
        ElemType::BF16 => (BFLOAT, 16),
        ElemType::I32 => (INT, 32),
        ElemType::I64 => (INT, 64),
        ElemType::U32 => (UINT, 32),
        ElemType::U8 => (UINT, 8),
        ElemType::Bool => (BOOL, 8),
        ElemType::I8 => (INT, 8),
        ElemType::I16 => (INT, 16),
        ElemType::U16 => (UINT, 16),
        ElemType::U64 => (UINT, 64),
        ElemType::F8E4M3 => (FLOAT8_E4M3FN, 8),
        ElemType::F8E5M2 => (FLOAT8_E5M2, 8),
        _ => return None,
    };
    Some(DLDataType {
        code,
        bits,
        lanes: 1,
    })
}

enum Owner {
    Legacy(NonNull<DLManagedTensor>),
    Versioned(NonNull<DLManagedTensorVersioned>),
}

/// An imported DLPack tensor: owns the managed tensor (its deleter runs on drop, once) and
/// holds its checked shape, strides and element type.
pub struct Dlpack {
    owner: Owner,
    device: DLDevice,
    elem: ElemType,
    /// Address of the element at index 0 (`data + byte_offset`).
    addr: u64,
    shape: Vec<usize>,
    strides: Vec<isize>,
    read_only: bool,
}

// SAFETY: a DLPack tensor is a description of memory plus a deleter; the standard lets the
// consumer call the deleter from any thread.
unsafe impl Send for Dlpack {}

impl std::fmt::Debug for Dlpack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dlpack")
            .field("device", &self.device)
            .field("elem", &self.elem)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .finish()
    }
}

impl Dlpack {
    /// Takes ownership of a legacy `DLManagedTensor`.
    ///
    /// # Safety
    /// `ptr` is null or a live managed tensor whose ownership passes to the result (not
    /// used by the caller afterwards, its deleter not called elsewhere); its `shape` and
    /// `strides` arrays hold `ndim` values.
    pub unsafe fn from_legacy(ptr: *mut DLManagedTensor) -> Result<Dlpack> {
        let ptr = NonNull::new(ptr).ok_or(Error::DlpackNull)?;
        // SAFETY: the caller's contract; on error the deleter runs (the result owns it).
        unsafe {
            let t = &ptr.as_ref().dl_tensor;
            Self::new(Owner::Legacy(ptr), t, false)
        }
    }

    /// Takes ownership of a `DLManagedTensorVersioned` (DLPack 1.x). A tensor of another
    /// major version is refused (and its deleter called, as the standard says).
    ///
    /// # Safety
    /// As [`from_legacy`](Self::from_legacy).
    pub unsafe fn from_versioned(ptr: *mut DLManagedTensorVersioned) -> Result<Dlpack> {
        let ptr = NonNull::new(ptr).ok_or(Error::DlpackNull)?;
        // SAFETY: the caller's contract. Only `version` and `deleter` are read before the
        // version check (their place is fixed across major versions).
        unsafe {
            let m = ptr.as_ref();
            if m.version.major != VERSION.major {
                let found = m.version;
                if let Some(d) = m.deleter {
                    d(ptr.as_ptr());
                }
                return Err(Error::DlpackVersion {
                    major: found.major,
                    minor: found.minor,
                });
            }
            let read_only = m.flags & FLAG_READ_ONLY != 0;
            Self::new(Owner::Versioned(ptr), &m.dl_tensor, read_only)
        }
    }

    /// # Safety
    /// `t` belongs to `owner`'s live managed tensor (see `from_legacy`).
    unsafe fn new(owner: Owner, t: &DLTensor, read_only: bool) -> Result<Dlpack> {
        // Built first, so that every error below drops it and runs the deleter.
        let mut d = Dlpack {
            owner,
            device: t.device,
            elem: ElemType::U8,
            addr: 0,
            shape: Vec::new(),
            strides: Vec::new(),
            read_only,
        };
        d.elem = elem_type(t.dtype, "dlpack")?;
        let ndim = usize::try_from(t.ndim).map_err(|_| Error::InvalidView {
            operand: "dlpack",
            reason: format!("ndim {} is negative", t.ndim),
        })?;
        let read = |p: *mut i64, what: &str| -> Result<Vec<i64>> {
            if ndim == 0 {
                return Ok(Vec::new());
            }
            if p.is_null() {
                return Err(Error::InvalidView {
                    operand: "dlpack",
                    reason: format!("{what} is null with ndim {ndim}"),
                });
            }
            // SAFETY: the producer's array of `ndim` values (caller's contract).
            Ok(unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec())
        };
        let shape = read(t.shape, "shape")?;
        d.shape = shape
            .iter()
            .map(|&n| usize::try_from(n))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::InvalidView {
                operand: "dlpack",
                reason: format!("negative extent in shape {shape:?}"),
            })?;
        d.strides = if t.strides.is_null() {
            // Compact row-major (DLPack < 1.2 allows null strides).
            Layout::contiguous(&d.shape)?.strides().to_vec()
        } else {
            read(t.strides, "strides")?
                .into_iter()
                .map(|s| s as isize)
                .collect()
        };
        d.addr = (t.data as u64).wrapping_add(t.byte_offset);
        Ok(d)
    }

    pub fn elem(&self) -> ElemType {
        self.elem
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// In elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
    pub fn device(&self) -> DLDevice {
        self.device
    }
    /// Whether the producer marked the data read-only (versioned tensors' flag).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The tensor as a GPU operand on `gpu`: it must be CUDA (or CUDA managed) memory of
    /// `gpu`'s device. Element-type alignment and everything else is checked at launch.
    pub fn raw_on(&self, gpu: &Gpu, operand: Operand) -> Result<RawTensor<'_>> {
        let ordinal = gpu.context().ordinal() as i32;
        let on_gpu = matches!(
            self.device.device_type,
            device_type::CUDA | device_type::CUDA_MANAGED
        );
        if !on_gpu || self.device.device_id != ordinal {
            return Err(Error::DlpackDevice {
                operand,
                device_type: self.device.device_type,
                device_id: self.device.device_id,
                expected: format!("CUDA device {ordinal}"),
            });
        }
        if operand == "out" && self.read_only {
            return Err(Error::DlpackReadOnly { operand });
        }
        Ok(self.raw())
    }

    /// The tensor as a raw operand, whatever its device (for callers that check it).
    pub fn raw(&self) -> RawTensor<'_> {
        RawTensor {
            ptr: self.addr,
            elem: self.elem,
            shape: &self.shape,
            strides: &self.strides,
        }
    }

    /// The tensor as a CPU-twin input: host memory (`kDLCPU` or CUDA pinned host memory).
    /// `layout` receives its layout (the result borrows it).
    pub fn host<'a>(&'a self, layout: &'a mut Layout, operand: Operand) -> Result<HostTensor<'a>> {
        let (ptr, len) = self.host_span(layout, operand)?;
        // SAFETY: `host_span` checked the device and alignment; the producer's memory
        // holds every element the layout reaches, from `ptr`, for `len` bytes (DLPack
        // describes memory that lives while the managed tensor is held, which `self` does).
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        Ok(HostTensor::new(data, self.elem, layout))
    }

    /// The tensor as the CPU twin's output (see [`host`](Self::host)).
    pub fn host_mut<'a>(
        &'a mut self,
        layout: &'a mut Layout,
        operand: Operand,
    ) -> Result<HostTensorMut<'a>> {
        if self.read_only {
            return Err(Error::DlpackReadOnly { operand });
        }
        let (ptr, len) = self.host_span(layout, operand)?;
        // SAFETY: as in `host`; `&mut self` makes this the one view of the tensor made
        // through it.
        let data = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
        Ok(HostTensorMut::new(data, self.elem, layout))
    }

    /// The lowest address the tensor reaches and the bytes up to its highest element, with
    /// the layout from there written to `layout`.
    fn host_span(&self, layout: &mut Layout, operand: Operand) -> Result<(u64, usize)> {
        if !matches!(
            self.device.device_type,
            device_type::CPU | device_type::CUDA_HOST
        ) {
            return Err(Error::DlpackDevice {
                operand,
                device_type: self.device.device_type,
                device_id: self.device.device_id,
                expected: "host memory (kDLCPU or kDLCUDAHost)".into(),
            });
        }
        let size = self.elem.size();
        let empty = self.shape.contains(&0);
        if self.addr == 0 && !empty {
            return Err(Error::NullPointer { operand });
        }
        // A tensor without elements reads nothing: its pointer need not be aligned.
        if !empty && !self.addr.is_multiple_of(size as u64) {
            return Err(Error::Misaligned {
                operand,
                ptr: self.addr,
                align: size,
            });
        }
        let (from_lowest, span) = Layout::from_first_element(&self.shape, &self.strides, operand)?;
        let below = from_lowest.offset();
        *layout = from_lowest;
        let bytes = span.map_or(0, |s| (s.max - s.min + 1) as usize * size);
        Ok((self.addr - (below * size) as u64, bytes))
    }
}

impl Drop for Dlpack {
    fn drop(&mut self) {
        // SAFETY: the managed tensor is owned (constructors' contract) and this is the one
        // call of its deleter.
        unsafe {
            match self.owner {
                Owner::Legacy(p) => {
                    if let Some(d) = p.as_ref().deleter {
                        d(p.as_ptr())
                    }
                }
                Owner::Versioned(p) => {
                    if let Some(d) = p.as_ref().deleter {
                        d(p.as_ptr())
                    }
                }
            }
        }
    }
}

/// What an exported tensor keeps alive: the buffer and the shape and strides arrays.
#[repr(C)]
struct Export<M> {
    managed: M,
    _buffer: std::sync::Arc<crate::tensor::DeviceBuffer>,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

impl<T: Elem> DeviceTensor<T> {
    /// The tensor's description; `shape` and `strides` are set by the caller.
    fn dl_tensor(&self, gpu: &Gpu) -> Result<DLTensor> {
        let dtype = dl_dtype(T::TYPE).ok_or(Error::DlpackDtype {
            operand: "export",
            code: u8::MAX,
            bits: (size_of::<T>() * 8) as u8,
            lanes: 1,
            kind: T::NAME,
        })?;
        Ok(DLTensor {
            data: self.buffer().addr() as *mut c_void,
            device: DLDevice {
                device_type: device_type::CUDA,
                device_id: gpu.context().ordinal() as i32,
            },
            ndim: 0,
            dtype,
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: (self.layout().offset() * size_of::<T>()) as u64,
        })
    }

    /// Exports the view as a `DLManagedTensorVersioned` (DLPack 1.1) without a copy: the
    /// result holds a reference to the buffer until its deleter is called (by the
    /// consumer, once). The data is ordered on `gpu`'s stream: a consumer on another stream
    /// synchronises with it first (DLPack's `stream` argument of `__dlpack__`).
    pub fn to_dlpack(&self, gpu: &Gpu) -> Result<*mut DLManagedTensorVersioned> {
        self.export(gpu, |dl_tensor, deleter| DLManagedTensorVersioned {
            version: VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
            flags: 0,
            dl_tensor,
        })
    }

    /// [`to_dlpack`](Self::to_dlpack) as a legacy `DLManagedTensor`, for consumers that
    /// predate DLPack 1.0.
    pub fn to_dlpack_legacy(&self, gpu: &Gpu) -> Result<*mut DLManagedTensor> {
        self.export(gpu, |dl_tensor, deleter| DLManagedTensor {
            dl_tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
        })
    }

    /// Boxes an [`Export`] of this view in managed-tensor form `M` (made by `make` from the
    /// description and the deleter) and points its shape, strides and context into the box.
    fn export<M: ManagedForm>(
        &self,
        gpu: &Gpu,
        make: impl FnOnce(DLTensor, unsafe extern "C" fn(*mut M)) -> M,
    ) -> Result<*mut M> {
        let l = self.layout();
        let mut e = Box::new(Export {
            managed: make(self.dl_tensor(gpu)?, delete_export::<M>),
            _buffer: self.buffer().clone(),
            shape: l.shape().iter().map(|&n| n as i64).collect(),
            strides: l.strides().iter().map(|&s| s as i64).collect(),
        });
        let (sp, st, ndim) = (e.shape.as_mut_ptr(), e.strides.as_mut_ptr(), e.shape.len());
        let t = e.managed.tensor_mut();
        (t.shape, t.strides, t.ndim) = (sp, st, ndim as i32);
        let p = Box::into_raw(e);
        // SAFETY: just allocated; the managed struct is the box's first field (repr(C)), so
        // the deleter finds the box from the pointer it is given.
        unsafe { (*p).managed.set_context(p.cast()) };
        Ok(p.cast())
    }
}

/// The two managed-tensor structs, as [`DeviceTensor::export`] fills them.
trait ManagedForm {
    fn tensor_mut(&mut self) -> &mut DLTensor;
    fn set_context(&mut self, ctx: *mut c_void);
}
impl ManagedForm for DLManagedTensor {
    fn tensor_mut(&mut self) -> &mut DLTensor {
        &mut self.dl_tensor
    }
    fn set_context(&mut self, ctx: *mut c_void) {
        self.manager_ctx = ctx;
    }
}
impl ManagedForm for DLManagedTensorVersioned {
    fn tensor_mut(&mut self) -> &mut DLTensor {
        &mut self.dl_tensor
    }
    fn set_context(&mut self, ctx: *mut c_void) {
        self.manager_ctx = ctx;
    }
}

/// The deleter of an exported tensor: frees the [`Export`] box (the buffer reference with it).
unsafe extern "C" fn delete_export<M>(m: *mut M) {
    if !m.is_null() {
        // SAFETY: `m` is the first field of a boxed `Export<M>` made by `export` (repr(C)),
        // and the consumer calls the deleter once.
        drop(unsafe { Box::from_raw(m as *mut Export<M>) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::DynOp;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Deleter calls, one counter per test (tests run in parallel).
    static DELETED_OK: AtomicUsize = AtomicUsize::new(0);
    static DELETED_BAD: AtomicUsize = AtomicUsize::new(0);

    /// A host tensor made the way a producer makes one: the managed struct, its shape and
    /// strides arrays and the data, all owned by one box that the deleter frees.
    struct Producer {
        managed: DLManagedTensorVersioned,
        shape: Vec<i64>,
        strides: Vec<i64>,
        data: Vec<u8>,
        deleted: &'static AtomicUsize,
    }

    unsafe extern "C" fn delete(m: *mut DLManagedTensorVersioned) {
        // SAFETY: made by `produce`.
        let p = unsafe { Box::from_raw((*m).manager_ctx as *mut Producer) };
        p.deleted.fetch_add(1, Ordering::SeqCst);
    }

    fn produce(
        deleted: &'static AtomicUsize,
        data: Vec<u8>,
        dtype: DLDataType,
        shape: &[i64],
        strides: Option<&[i64]>,
        offset: u64,
        device: i32,
    ) -> *mut DLManagedTensorVersioned {
        let mut p = Box::new(Producer {
            managed: DLManagedTensorVersioned {
                version: VERSION,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete),
                flags: 0,
                dl_tensor: DLTensor {
                    data: std::ptr::null_mut(),
                    device: DLDevice {
                        device_type: device,
                        device_id: 0,
                    },
                    ndim: shape.len() as i32,
                    dtype,
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: offset,
                },
            },
            shape: shape.to_vec(),
            strides: strides.map(|s| s.to_vec()).unwrap_or_default(),
            data,
            deleted,
        });
        p.managed.dl_tensor.data = p.data.as_mut_ptr().cast();
        p.managed.dl_tensor.shape = p.shape.as_mut_ptr();
        if strides.is_some() {
            p.managed.dl_tensor.strides = p.strides.as_mut_ptr();
        }
        let raw = Box::into_raw(p);
        // SAFETY: just allocated.
        unsafe {
            (*raw).managed.manager_ctx = raw.cast();
            &mut (*raw).managed
        }
    }

    fn f32_dtype() -> DLDataType {
        DLDataType {
            code: type_code::FLOAT,
            bits: 32,
            lanes: 1,
        }
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        bytemuck::cast_slice(v).to_vec()
    }

    #[test]
    fn host_tensors_with_negative_strides_and_offsets_run_on_the_cpu_twin() {
        let before = DELETED_OK.load(Ordering::SeqCst);
        let f32t = f32_dtype();
        // a: a 2×3 matrix read reversed along columns (stride -1), starting at element 2.
        let a = produce(
            &DELETED_OK,
            f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            f32t,
            &[2, 3],
            Some(&[3, -1]),
            8,
            device_type::CPU,
        );
        // b: a broadcast row (stride 0 along rows), compact strides omitted for the out.
        let b = produce(
            &DELETED_OK,
            f32_bytes(&[10.0, 20.0, 30.0]),
            f32t,
            &[2, 3],
            Some(&[0, 1]),
            0,
            device_type::CPU,
        );
        let out = produce(
            &DELETED_OK,
            vec![0; 24],
            f32t,
            &[2, 3],
            None,
            0,
            device_type::CPU,
        );
        // SAFETY: fresh producer tensors, owned from here on.
        let (a, b, mut out) = unsafe {
            (
                Dlpack::from_versioned(a).unwrap(),
                Dlpack::from_versioned(b).unwrap(),
                Dlpack::from_versioned(out).unwrap(),
            )
        };
        let op = DynOp::new("add", &[out.elem(), a.elem(), b.elem()], &[]).unwrap();
        let (mut la, mut lb, mut lo) = Default::default();
        let (ha, hb) = (a.host(&mut la, "a").unwrap(), b.host(&mut lb, "b").unwrap());
        op.run_cpu(out.host_mut(&mut lo, "out").unwrap(), &[ha, hb])
            .unwrap();
        let mut lo2 = Layout::default();
        let got = out.host(&mut lo2, "out").unwrap();
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(got.data),
            [13.0, 22.0, 31.0, 16.0, 25.0, 34.0]
        );
        drop((a, b, out));
        assert_eq!(
            DELETED_OK.load(Ordering::SeqCst) - before,
            3,
            "each deleter once"
        );
    }

    #[test]
    fn bad_dlpack_tensors_are_typed_errors_and_still_deleted() {
        // Two f32 elements with this byte offset, on this device.
        let small = |offset: u64, device: i32| {
            produce(
                &DELETED_BAD,
                vec![0; 16],
                f32_dtype(),
                &[2],
                None,
                offset,
                device,
            )
        };
        // SAFETY: null is allowed by the contract.
        assert!(matches!(
            unsafe { Dlpack::from_versioned(std::ptr::null_mut()) },
            Err(Error::DlpackNull)
        ));
        let before = DELETED_BAD.load(Ordering::SeqCst);
        let cases: [(DLDataType, &str); 4] = [
            (
                DLDataType {
                    code: type_code::COMPLEX,
                    bits: 64,
                    lanes: 1,
                },
                "complex",
            ),
            (
                DLDataType {
                    code: 9,
                    bits: 8,
                    lanes: 1,
                },
                "8-bit float other than",
            ),
            (
                DLDataType {
                    code: type_code::INT,
                    bits: 4,
                    lanes: 1,
                },
                "sub-byte",
            ),
            (
                DLDataType {
                    code: type_code::FLOAT,
                    bits: 32,
                    lanes: 4,
                },
                "lanes",
            ),
        ];
        for (dtype, word) in cases {
            let t = produce(
                &DELETED_BAD,
                vec![0; 16],
                dtype,
                &[2],
                None,
                0,
                device_type::CPU,
            );
            // SAFETY: a fresh producer tensor.
            let e = unsafe { Dlpack::from_versioned(t) }.unwrap_err();
            assert!(
                matches!(e, Error::DlpackDtype { .. }) && e.to_string().contains(word),
                "{e}"
            );
        }
        let t = small(0, device_type::CPU);
        // SAFETY: a fresh producer tensor; its version is changed before the hand-over.
        unsafe { (*t).version.major = 2 };
        let e = unsafe { Dlpack::from_versioned(t) }.unwrap_err();
        assert!(matches!(e, Error::DlpackVersion { major: 2, .. }), "{e}");
        assert_eq!(
            DELETED_BAD.load(Ordering::SeqCst) - before,
            5,
            "refused tensors are deleted"
        );

        // A CUDA tensor is not a host operand; a misaligned host tensor is refused.
        let t = small(0, device_type::CUDA);
        // SAFETY: a fresh producer tensor.
        let d = unsafe { Dlpack::from_versioned(t) }.unwrap();
        let e = d.host(&mut Layout::default(), "a").unwrap_err();
        assert!(matches!(e, Error::DlpackDevice { operand: "a", .. }), "{e}");
        let t = small(2, device_type::CPU);
        // SAFETY: a fresh producer tensor.
        let d = unsafe { Dlpack::from_versioned(t) }.unwrap();
        let e = d.host(&mut Layout::default(), "b").unwrap_err();
        assert!(matches!(e, Error::Misaligned { operand: "b", .. }), "{e}");
        let t = small(0, device_type::CPU);
        // SAFETY: a fresh producer tensor, marked read-only before the hand-over.
        unsafe { (*t).flags = FLAG_READ_ONLY };
        let mut d = unsafe { Dlpack::from_versioned(t) }.unwrap();
        let e = d.host_mut(&mut Layout::default(), "out").unwrap_err();
        assert!(matches!(e, Error::DlpackReadOnly { operand: "out" }), "{e}");
    }

    #[test]
    fn every_elem_type_round_trips_through_its_dtype() {
        for t in ElemType::ALL {
            assert_eq!(elem_type(dl_dtype(t).unwrap(), "x").unwrap(), t);
        }
    }
}
