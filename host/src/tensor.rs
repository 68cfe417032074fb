//! Device tensors: a reference-counted device buffer plus a [`Layout`]. Views share the
//! buffer; every view is checked against the buffer's length when it is made.

use crate::alias::Region;
use crate::error::{Error, Operand, Result};
use crate::gpu::{driver, Gpu};
use crate::layout::Layout;
use cudarc::driver::{CudaSlice, DevicePtr};
use gpu_kernels::Elem;
use std::marker::PhantomData;
use std::sync::Arc;

/// Device memory for `len` elements, stored as bytes so any [`Elem`] fits.
///
/// A buffer belongs to the [`Gpu`] handle (stream) that allocated it: all work on it is
/// ordered on that stream, including its release, so the typed API refuses a buffer of
/// another handle ([`Error::WrongDevice`]).
pub struct DeviceBuffer {
    bytes: CudaSlice<u8>,
    len: usize,
    /// The device address, read once: launches need no per-call driver calls for it.
    addr: u64,
    stream: usize,
}

impl DeviceBuffer {
    fn new(gpu: &Gpu, bytes: CudaSlice<u8>, len: usize) -> Self {
        let addr = {
            let (p, _sync) = bytes.device_ptr(gpu.stream());
            p
        };
        DeviceBuffer {
            bytes,
            len,
            addr,
            stream: gpu.stream().cu_stream() as usize,
        }
    }
    /// Base device address.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Whether `gpu` is the handle whose stream owns this buffer.
    pub fn belongs_to(&self, gpu: &Gpu) -> bool {
        self.stream == gpu.stream().cu_stream() as usize
    }
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Bytes allocated.
    pub fn num_bytes(&self) -> usize {
        self.bytes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device-to-device copy of `bytes` bytes from `src` into this buffer, ordered on
    /// `gpu`'s stream.
    pub fn copy_from(&self, gpu: &Gpu, src: &DeviceBuffer, bytes: usize) -> Result<()> {
        if bytes > self.num_bytes() || bytes > src.num_bytes() {
            return Err(Error::InvalidView {
                operand: "copy",
                reason: format!("{bytes} bytes do not fit the buffers"),
            });
        }
        // SAFETY: both addresses belong to live allocations of at least `bytes` bytes
        // (checked above; a `DeviceBuffer` owns its allocation); the copy is ordered on
        // `gpu`'s stream.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                self.addr(),
                src.addr(),
                bytes,
                gpu.stream().cu_stream(),
            )
        }
        .map_err(driver("copying device memory"))
    }
}

pub(crate) fn oom_or(
    bytes: usize,
    what: &'static str,
) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| {
        if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory { bytes }
        } else {
            Error::Driver { what, source: e }
        }
    }
}

/// An n-dimensional strided view of device memory holding `T`.
#[derive(Clone)]
pub struct DeviceTensor<T> {
    buf: Arc<DeviceBuffer>,
    layout: Layout,
    _t: PhantomData<T>,
}

impl<T> std::fmt::Debug for DeviceTensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTensor")
            .field("layout", &self.layout)
            .field("buffer_len", &self.buf.len)
            .finish()
    }
}

impl<T: Elem> DeviceTensor<T> {
    fn alloc_bytes(gpu: &Gpu, len: usize) -> Result<CudaSlice<u8>> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        gpu.alloc_retrying(|| gpu.stream().alloc_zeros::<u8>(bytes.max(1)))
            .map_err(oom_or(bytes, "allocating"))
    }

    /// Uploads `data` as a dense tensor of `shape` (Kamasu's `<<`).
    pub fn from_slice(gpu: &Gpu, data: &[T], shape: &[usize]) -> Result<Self> {
        let layout = Layout::contiguous(shape)?;
        if layout.numel() != data.len() {
            return Err(Error::LengthMismatch {
                operand: "data",
                len: data.len(),
                shape: shape.to_vec(),
                expected: layout.numel(),
            });
        }
        let mut bytes = Self::alloc_bytes(gpu, data.len())?;
        if !data.is_empty() {
            gpu.stream()
                .memcpy_htod(bytemuck::cast_slice::<T, u8>(data), &mut bytes)
                .map_err(oom_or(0, "uploading"))?;
        }
        Ok(DeviceTensor {
            buf: Arc::new(DeviceBuffer::new(gpu, bytes, data.len())),
            layout,
            _t: PhantomData,
        })
    }

    /// A dense tensor of `shape` filled with zero bytes.
    pub fn zeros(gpu: &Gpu, shape: &[usize]) -> Result<Self> {
        let layout = Layout::contiguous(shape)?;
        let len = layout.numel();
        let bytes = Self::alloc_bytes(gpu, len)?;
        Ok(DeviceTensor {
            buf: Arc::new(DeviceBuffer::new(gpu, bytes, len)),
            layout,
            _t: PhantomData,
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
    pub fn buffer(&self) -> &Arc<DeviceBuffer> {
        &self.buf
    }

    /// The same buffer under another layout, checked against the buffer.
    pub fn with_layout(&self, layout: Layout) -> Result<Self> {
        layout.check_in(self.buf.len, "view")?;
        Ok(DeviceTensor {
            buf: self.buf.clone(),
            layout,
            _t: PhantomData,
        })
    }

    /// See [`Layout::slice`].
    pub fn slice(
        &self,
        axis: usize,
        start: Option<isize>,
        end: Option<isize>,
        step: isize,
    ) -> Result<Self> {
        self.with_layout(self.layout.slice(axis, start, end, step)?)
    }
    pub fn flip(&self, axis: usize) -> Result<Self> {
        self.with_layout(self.layout.flip(axis)?)
    }
    pub fn permute(&self, perm: &[usize]) -> Result<Self> {
        self.with_layout(self.layout.permute(perm)?)
    }
    pub fn transpose(&self, a: usize, b: usize) -> Result<Self> {
        self.with_layout(self.layout.transpose(a, b)?)
    }
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Self> {
        self.with_layout(self.layout.broadcast_to(shape)?)
    }
    pub fn unsqueeze(&self, axis: usize) -> Result<Self> {
        self.with_layout(self.layout.unsqueeze(axis)?)
    }
    pub fn squeeze(&self, axis: usize) -> Result<Self> {
        self.with_layout(self.layout.squeeze(axis)?)
    }
    pub fn reshape(&self, shape: &[usize]) -> Result<Self> {
        self.with_layout(self.layout.reshape(shape)?)
    }

    /// Device address of the element at the layout's offset.
    pub(crate) fn base_addr(&self) -> u64 {
        self.buf.addr + (self.layout.offset() * size_of::<T>()) as u64
    }

    /// Operand description for the planner's alias check.
    pub(crate) fn region(&self, gpu: &Gpu, operand: Operand) -> Result<Region<'_>> {
        if !self.buf.belongs_to(gpu) {
            return Err(Error::WrongDevice { operand });
        }
        Ok(Region {
            operand,
            buffer: self.buf.addr,
            elem_size: size_of::<T>(),
            layout: &self.layout,
        })
    }

    /// Downloads the whole underlying buffer (not just this view).
    pub fn buffer_to_vec(&self, gpu: &Gpu) -> Result<Vec<T>> {
        let bytes = gpu
            .stream()
            .clone_dtoh(&self.buf.bytes)
            .map_err(oom_or(0, "downloading"))?;
        let n = self.buf.len * size_of::<T>();
        Ok(bytemuck::pod_collect_to_vec(&bytes[..n]))
    }

    /// The elements of a contiguous view, in order (the caller checked
    /// `self.layout().is_contiguous()`; [`to_vec`](Self::to_vec) serves any view).
    pub(crate) fn download_contiguous(&self, gpu: &Gpu) -> Result<Vec<T>> {
        if self.numel() == 0 {
            return Ok(Vec::new());
        }
        let start = self.layout.offset() * size_of::<T>();
        let view = self
            .buf
            .bytes
            .slice(start..start + self.numel() * size_of::<T>());
        let bytes = gpu
            .stream()
            .clone_dtoh(&view)
            .map_err(oom_or(0, "downloading"))?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}
