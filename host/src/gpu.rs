//! The GPU: a CUDA context, a stream, lazily loaded PTX modules, and the one place that
//! launches a kernel.

use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule, CudaStream, DriverError};
use gpu_kernels::{KernelNames, Variant};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, RwLock};

/// PTX of one kernel crate for several SM targets (from `strided-apply-builder`).
#[derive(Clone, Copy, Debug)]
pub struct ModuleImage {
    /// The kernel crate's package name (what `kernels!` records in [`KernelNames::module`]).
    pub name: &'static str,
    /// One PTX text per SM target.
    pub ptx: &'static [PtxText],
}

/// The PTX for one SM target, as `header + body` (targets usually share the body).
#[derive(Clone, Copy, Debug)]
pub struct PtxText {
    pub sm: u32,
    pub header: &'static str,
    pub body: &'static str,
}

/// Blocks per SM a grid-stride launch is capped at: `STRIDED_APPLY_BLOCKS_PER_SM` (a
/// tuning knob, read once), default 32.
fn blocks_per_sm() -> u64 {
    static V: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("STRIDED_APPLY_BLOCKS_PER_SM")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&v| v > 0)
            .unwrap_or(32)
    })
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaunchShape {
    pub grid: u32,
    pub block: (u32, u32),
    pub shared_bytes: u32,
}

/// Threads per block of every grid-stride launch.
pub const BLOCK: u32 = 256;

/// A device, its context and stream, and the modules loaded on it.
///
/// `Gpu` is `Send + Sync`: threads may share one (launches go to its one stream in the
/// order they are made) or each open their own with [`Gpu::new_stream`].
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    cc: (i32, i32),
    sm_count: u32,
    images: RwLock<HashMap<&'static str, ModuleImage>>,
    modules: RwLock<HashMap<&'static str, Arc<CudaModule>>>,
    /// Loaded kernels by (module, kernel): two modules may use the same kernel name.
    functions: RwLock<HashMap<(&'static str, &'static str), CudaFunction>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ctx.ordinal())
            .field("cc", &self.cc)
            .finish()
    }
}

fn driver(what: &'static str) -> impl Fn(DriverError) -> Error {
    move |source| Error::Driver { what, source }
}

/// Whether the CUDA driver library can be loaded (cudarc panics on first use otherwise).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library.
    unsafe { sys::is_culib_present() }
}

impl Gpu {
    /// Opens device `ordinal`. Errors, never panics, when there is no driver or device.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        if !driver_present() {
            return Err(Error::NoDriver("libcuda.so was not found".into()));
        }
        let count = CudaContext::device_count().map_err(|e| Error::NoDriver(e.to_string()))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoDevice {
                ordinal,
                count: count.max(0) as usize,
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("creating a context"))?;
        let cc = ctx
            .compute_capability()
            .map_err(driver("reading the compute capability"))?;
        let sm_count = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver("reading the SM count"))? as u32;
        let stream = ctx.new_stream().map_err(driver("creating a stream"))?;
        Ok(Gpu {
            ctx,
            stream,
            cc,
            sm_count,
            images: RwLock::default(),
            modules: RwLock::default(),
            functions: RwLock::default(),
        })
    }

    /// Another handle on the same device and modules with a stream of its own.
    pub fn new_stream(&self) -> Result<Gpu> {
        let stream = self.ctx.new_stream().map_err(driver("creating a stream"))?;
        Ok(Gpu {
            ctx: self.ctx.clone(),
            stream,
            cc: self.cc,
            sm_count: self.sm_count,
            images: RwLock::new(self.images.read().map(|m| m.clone()).unwrap_or_default()),
            modules: RwLock::new(self.modules.read().map(|m| m.clone()).unwrap_or_default()),
            functions: RwLock::new(self.functions.read().map(|m| m.clone()).unwrap_or_default()),
        })
    }

    /// Makes a kernel crate's PTX available; it is loaded on first use.
    pub fn register(&self, image: ModuleImage) {
        if let Ok(mut m) = self.images.write() {
            m.insert(image.name, image);
        }
    }

    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "unknown GPU".into())
    }
    pub fn compute_capability(&self) -> (i32, i32) {
        self.cc
    }
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Waits for everything queued on this Gpu's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(driver("synchronizing"))
    }

    fn module(&self, name: &'static str) -> Result<Arc<CudaModule>> {
        if let Some(m) = self.modules.read().ok().and_then(|m| m.get(name).cloned()) {
            return Ok(m);
        }
        let mut modules = self
            .modules
            .write()
            .map_err(|_| Error::ModuleNotRegistered { module: name })?;
        if let Some(m) = modules.get(name) {
            return Ok(m.clone());
        }
        let image = self
            .images
            .read()
            .ok()
            .and_then(|i| i.get(name).copied())
            .ok_or(Error::ModuleNotRegistered { module: name })?;
        let device_sm = (self.cc.0 * 10 + self.cc.1) as u32;
        let text = image
            .ptx
            .iter()
            .filter(|t| t.sm <= device_sm)
            .max_by_key(|t| t.sm)
            .copied()
            .ok_or_else(|| Error::NoPtxForDevice {
                module: name,
                major: self.cc.0,
                minor: self.cc.1,
                built: image.ptx.iter().map(|t| t.sm).collect(),
            })?;
        let (sm, ptx) = (text.sm, format!("{}{}", text.header, text.body));
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|source| Error::PtxLoad {
                module: name,
                sm,
                source,
            })?;
        modules.insert(name, module.clone());
        Ok(module)
    }

    /// Loads every registered module now (otherwise the first launch of each does).
    pub fn preload(&self) -> Result<()> {
        let names: Vec<&'static str> = self
            .images
            .read()
            .map(|i| i.keys().copied().collect())
            .unwrap_or_default();
        for n in names {
            self.module(n)?;
        }
        Ok(())
    }

    /// Kernel `kernel` of module `module` (loaded on first use and cached), for callers
    /// that launch kernels themselves through cudarc (re-exported as `cudarc`).
    pub fn kernel(&self, module: &'static str, kernel: &'static str) -> Result<CudaFunction> {
        if let Some(f) = self
            .functions
            .read()
            .ok()
            .and_then(|f| f.get(&(module, kernel)).cloned())
        {
            return Ok(f);
        }
        let m = self.module(module)?;
        let f = m
            .load_function(kernel)
            .map_err(|source| Error::KernelMissing {
                module,
                kernel,
                source,
            })?;
        if let Ok(mut fs) = self.functions.write() {
            fs.insert((module, kernel), f.clone());
        }
        Ok(f)
    }

    /// Grid for a grid-stride launch over `n` elements: enough blocks to fill the device,
    /// never more than [`MAX_GRID_THREADS`](crate::plan::MAX_GRID_THREADS) threads.
    pub(crate) fn grid(&self, n: u64) -> u32 {
        let want = n.div_ceil(BLOCK as u64).max(1);
        let cap = (self.sm_count as u64 * blocks_per_sm())
            .min(crate::plan::MAX_GRID_THREADS / BLOCK as u64);
        want.min(cap) as u32
    }

    /// Grid and block of a grid-stride launch over `n` elements (or vector chunks).
    /// One thread per element (or vector chunk), no grid-stride loop: measured faster for
    /// the vectorised variant, whose 64-bit index cannot wrap.
    pub(crate) fn shape_per_thread(&self, n: u64) -> LaunchShape {
        let blocks = n.div_ceil(BLOCK as u64).clamp(1, i32::MAX as u64);
        LaunchShape {
            grid: blocks as u32,
            block: (BLOCK, 1),
            shared_bytes: 0,
        }
    }

    pub(crate) fn shape_1d(&self, n: u64) -> LaunchShape {
        LaunchShape {
            grid: self.grid(n),
            block: (BLOCK, 1),
            shared_bytes: 0,
        }
    }

    /// The one launch site.
    ///
    /// # Safety
    /// 1. `args` match the kernel's parameter list in count, order, size and layout (the
    ///    launcher builds them from the same `#[repr(C)]` types the kernel takes).
    /// 2. Every pointer argument is valid for every offset the kernel computes from the
    ///    launch's [`Plan`](crate::plan::Plan), which the planner proved in bounds.
    /// 4. `shape` is what the variant's body expects (grid-stride variants: any grid and
    ///    1-D blocks; the tiled variant: one block per tile, `32 × rows` threads of its
    ///    `TileShape` and its stage bytes of shared memory).
    /// 3. `stream` is a live stream of this Gpu's context.
    pub(crate) unsafe fn launch(
        &self,
        names: &KernelNames,
        variant: Variant,
        shape: LaunchShape,
        stream: sys::CUstream,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.launch_named(names.module, names.get(variant), shape, stream, args) }
    }

    /// [`launch`](Self::launch) of kernel `kernel` of module `module`.
    ///
    /// # Safety
    /// As [`launch`](Self::launch), for that kernel's parameter list and body.
    pub(crate) unsafe fn launch_named(
        &self,
        module: &'static str,
        kernel: &'static str,
        shape: LaunchShape,
        stream: sys::CUstream,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        // The raw handle under the read lock (no clone of the cached function): the
        // module it belongs to stays in `modules` as long as this Gpu.
        let cached = self
            .functions
            .read()
            .ok()
            .and_then(|f| f.get(&(module, kernel)).map(|f| f.cu_function()));
        let f = match cached {
            Some(f) => f,
            None => self.kernel(module, kernel)?.cu_function(),
        };
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: conditions 1–3 of this function.
        unsafe {
            cudarc::driver::result::launch_kernel(
                f,
                (shape.grid, 1, 1),
                (shape.block.0, shape.block.1, 1),
                shape.shared_bytes,
                stream,
                args,
            )
        }
        .map_err(|source| Error::Launch { kernel, source })
    }
}

impl Gpu {
    /// Milliseconds of device time taken by the work `f` queues on this Gpu's stream,
    /// measured with CUDA events.
    pub fn time_ms(&self, f: impl FnOnce() -> Result<()>) -> Result<f32> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .stream
            .record_event(flags)
            .map_err(driver("recording an event"))?;
        f()?;
        let end = self
            .stream
            .record_event(flags)
            .map_err(driver("recording an event"))?;
        end.synchronize()
            .map_err(driver("synchronizing an event"))?;
        start.elapsed_ms(&end).map_err(driver("reading an event"))
    }

    /// Device-to-device copy of `bytes` bytes between two buffers of this Gpu.
    pub fn copy_buffer(
        &self,
        dst: &crate::tensor::DeviceBuffer,
        src: &crate::tensor::DeviceBuffer,
        bytes: usize,
    ) -> Result<()> {
        if bytes > dst.num_bytes() || bytes > src.num_bytes() {
            return Err(Error::InvalidView {
                operand: "copy",
                reason: format!("{bytes} bytes do not fit the buffers"),
            });
        }
        // SAFETY: both addresses belong to live allocations of this context of at least
        // `bytes` bytes (checked above); the copy is ordered on this Gpu's stream.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst.addr(),
                src.addr(),
                bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(driver("copying device memory"))
    }
}
