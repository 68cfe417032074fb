//! The GPU: a CUDA context, a stream, kernel families loaded on first use (the best cubin
//! for the device, else PTX), and the one place that launches a kernel.

use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule, CudaStream, DriverError};
use gpu_kernels::{KernelNames, Variant};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use strided_apply_image::{family_of, Decoder, Image, ImageError, Kind, Target};

/// The kernel image of one kernel crate (from `strided-apply-builder`): cubins for several
/// SM versions and PTX, one compressed frame per kernel family, decoded and loaded on the
/// family's first launch.
#[derive(Clone, Copy, Debug)]
pub struct ModuleImage {
    /// The kernel crate's package name (what `kernels!` records in [`KernelNames::module`]).
    pub name: &'static str,
    /// The image ([`strided_apply_image`] format), usually `include_bytes!`.
    pub bytes: &'static [u8],
}

/// Time spent bringing one family onto the device.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyLoad {
    pub family: &'static str,
    /// Decompressing its frame (and, for the module's first family, the dictionary).
    pub decode_ms: f64,
    /// `cuModuleLoadData` (for PTX, the driver's compilation or cache lookup).
    pub load_ms: f64,
}

/// What a [`Gpu`] chose and loaded for one registered module ([`Gpu::module_info`]).
#[derive(Clone, Debug)]
pub struct ModuleInfo {
    pub module: &'static str,
    /// Compressed size of the image.
    pub image_bytes: usize,
    /// Targets in the image.
    pub built: Vec<Target>,
    /// What runs on this device, if anything.
    pub chosen: Option<Target>,
    /// Whether `STRIDED_APPLY_FORCE_PTX` asked for PTX.
    pub forced_ptx: bool,
    /// Number of families in the image.
    pub families: usize,
    /// Families loaded so far, in load order.
    pub loaded: Vec<FamilyLoad>,
    /// Why the image could not be read, if it could not.
    pub error: Option<String>,
}

impl std::fmt::Display for ModuleInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chosen = self.chosen.map_or_else(
            || "nothing runs on this device".to_string(),
            |t| t.to_string(),
        );
        write!(
            f,
            "{}: {chosen}{}; {} families, {} loaded",
            self.module,
            if self.forced_ptx { " (PTX forced)" } else { "" },
            self.families,
            self.loaded.len()
        )?;
        if !self.loaded.is_empty() {
            let (d, l) = self
                .loaded
                .iter()
                .fold((0.0, 0.0), |(d, l), x| (d + x.decode_ms, l + x.load_ms));
            write!(f, " (decode {d:.2} ms, load {l:.2} ms)")?;
        }
        write!(
            f,
            "; image {:.2} MB: {}",
            self.image_bytes as f64 / 1e6,
            built_list(&self.built)
        )?;
        if let Some(e) = &self.error {
            write!(f, "; unreadable: {e}")?;
        }
        Ok(())
    }
}

fn built_list(targets: &[Target]) -> String {
    if targets.is_empty() {
        return "no targets".into();
    }
    targets
        .iter()
        .map(Target::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A registered module: its parsed image, the target chosen for the device, and a decoder
/// for that target with its dictionary decoded and parsed (once, on the first family).
struct Registered {
    image: ModuleImage,
    parsed: std::result::Result<Image<'static>, ImageError>,
    choice: Option<usize>,
    decoder: std::sync::OnceLock<std::result::Result<std::sync::Mutex<Decoder>, ImageError>>,
    loads: std::sync::Mutex<Vec<FamilyLoad>>,
}

/// `STRIDED_APPLY_FORCE_PTX` set to anything but empty or `0`.
fn force_ptx_env() -> bool {
    std::env::var("STRIDED_APPLY_FORCE_PTX").is_ok_and(|v| !v.is_empty() && v != "0")
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

/// Threads per block of the vectorised variant's one-chunk-per-thread launch, unless
/// `STRIDED_APPLY_VEC_BLOCK` says otherwise. 128 against 256 on an H200 (`benches/NOTES.md`,
/// "Vectorised kernels"): bf16 and mixed broadcast rows +1–2 %, fused div-mul +1 %, 2^20–2^24-element
/// adds +2–12 %, the rest within ±0.3 %; 64 loses 10–40 % on the broadcast rows, the
/// bf16 -> f32 cast and the mixed-type row.
pub const VEC_BLOCK: u32 = 128;

/// Threads per block of the vectorised variant's one-chunk-per-thread launch:
/// `STRIDED_APPLY_VEC_BLOCK` (a tuning knob, read once; a multiple of 32 from 32 to 1024),
/// default [`VEC_BLOCK`].
fn vec_block() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| vec_block_from(std::env::var("STRIDED_APPLY_VEC_BLOCK").ok().as_deref()))
}

/// The block size a `STRIDED_APPLY_VEC_BLOCK` value asks for; anything but a multiple of 32
/// from 32 to 1024 gives [`VEC_BLOCK`].
fn vec_block_from(value: Option<&str>) -> u32 {
    value
        .and_then(|v| v.trim().parse().ok())
        .filter(|&v: &u32| (32..=1024).contains(&v) && v % 32 == 0)
        .unwrap_or(VEC_BLOCK)
}

/// `alloc`, and when it fails for lack of memory, `free_cache` and `alloc` once more.
fn retry_on_oom<T>(
    mut alloc: impl FnMut() -> std::result::Result<T, DriverError>,
    free_cache: impl FnOnce(),
) -> std::result::Result<T, DriverError> {
    match alloc() {
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
            free_cache();
            alloc()
        }
        r => r,
    }
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
    force_ptx: bool,
    images: RwLock<HashMap<&'static str, Arc<Registered>>>,
    /// Loaded families by (module, family).
    modules: RwLock<HashMap<(&'static str, &'static str), Arc<CudaModule>>>,
    /// Modules of images registered again since: kept loaded (see `register`).
    retired: std::sync::Mutex<Vec<Arc<CudaModule>>>,
    /// Loaded kernels by (module, kernel): two modules may use the same kernel name.
    functions: RwLock<HashMap<(&'static str, &'static str), CudaFunction>>,
    /// State an upper layer keeps per context, made on first use and shared by the
    /// context's stream handles ([`Gpu::context_state`]: tier 1's compiled expressions).
    context_state: Arc<OnceLock<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ctx.ordinal())
            .field("cc", &self.cc)
            .finish()
    }
}

pub(crate) fn driver(what: &'static str) -> impl Fn(DriverError) -> Error {
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
        let gpu = Gpu {
            ctx,
            stream,
            cc,
            sm_count,
            force_ptx: force_ptx_env(),
            images: RwLock::default(),
            modules: RwLock::default(),
            retired: Default::default(),
            functions: RwLock::default(),
            context_state: Default::default(),
        };
        gpu.set_memory_cache_limit(u64::MAX)?;
        Ok(gpu)
    }

    /// Another handle on the same device and modules with a stream of its own.
    pub fn new_stream(&self) -> Result<Gpu> {
        let stream = self.ctx.new_stream().map_err(driver("creating a stream"))?;
        Ok(Gpu {
            ctx: self.ctx.clone(),
            stream,
            cc: self.cc,
            sm_count: self.sm_count,
            force_ptx: self.force_ptx,
            images: RwLock::new(self.images.read().map(|m| m.clone()).unwrap_or_default()),
            modules: RwLock::new(self.modules.read().map(|m| m.clone()).unwrap_or_default()),
            retired: Default::default(),
            functions: RwLock::new(self.functions.read().map(|m| m.clone()).unwrap_or_default()),
            context_state: self.context_state.clone(),
        })
    }

    /// Makes a kernel crate's image available. Its index is read now (a few
    /// microseconds); each family is decoded and loaded on its first launch. An image that
    /// cannot be read is kept, and every launch from it reports why.
    pub fn register(&self, image: ModuleImage) {
        let parsed = Image::parse(image.bytes);
        let cc = (self.cc.0.max(0) as u32, self.cc.1.max(0) as u32);
        let choice = parsed
            .as_ref()
            .ok()
            .and_then(|i| i.choose(cc, self.force_ptx));
        let reg = Registered {
            image,
            parsed,
            choice,
            decoder: Default::default(),
            loads: Default::default(),
        };
        if let Ok(mut m) = self.images.write() {
            m.insert(image.name, Arc::new(reg));
        }
        // Families of an image registered again under the same name reload from it. The
        // modules loaded from the old image stay loaded as long as this Gpu: a launch on
        // another thread may hold one of their raw kernel handles.
        if let Ok(mut m) = self.modules.write() {
            let old: Vec<_> = m
                .keys()
                .filter(|(module, _)| *module == image.name)
                .copied()
                .collect();
            let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
            retired.extend(old.iter().filter_map(|k| m.remove(k)));
        }
        if let Ok(mut f) = self.functions.write() {
            f.retain(|(module, _), _| *module != image.name);
        }
    }

    /// What was chosen and loaded for each registered module, by name.
    pub fn module_info(&self) -> Vec<ModuleInfo> {
        let images: Vec<Arc<Registered>> = self
            .images
            .read()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        let mut info: Vec<ModuleInfo> = images
            .iter()
            .map(|r| {
                let (built, families, error) = match &r.parsed {
                    Ok(i) => (i.targets().to_vec(), i.len(), None),
                    Err(e) => (Vec::new(), 0, Some(e.to_string())),
                };
                ModuleInfo {
                    module: r.image.name,
                    image_bytes: r.image.bytes.len(),
                    chosen: r.choice.map(|t| built[t]),
                    built,
                    forced_ptx: self.force_ptx,
                    families,
                    loaded: r.loads.lock().map(|l| l.clone()).unwrap_or_default(),
                    error,
                }
            })
            .collect();
        info.sort_by_key(|i| i.module);
        info
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

    /// The device's current stream-ordered memory pool, where tensors and scratch are
    /// allocated; `None` when the device has no pools (allocations are then plain
    /// `cuMemAlloc` and nothing is cached).
    fn memory_pool(&self) -> Result<Option<sys::CUmemoryPool>> {
        if !self.ctx.has_async_alloc() {
            return Ok(None);
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: `cu_device` is this context's device, from `cuDeviceGet`.
        let pool = unsafe { cudarc::driver::result::device::get_mem_pool(self.ctx.cu_device()) }
            .map_err(driver("reading the device's memory pool"))?;
        Ok(Some(pool))
    }

    /// How many bytes of freed memory the device's memory pool keeps mapped, for later
    /// allocations to reuse, when a stream, event or context is next synchronised; the rest
    /// goes back to the driver.
    ///
    /// [`Gpu::new`] sets it to `u64::MAX`: freed tensors stay with the pool, as PyTorch's
    /// caching allocator (and RMM's and TensorFlow's pools) keep theirs. The driver's own
    /// default is 0, which returns memory at every synchronisation; memory mapped again after
    /// large allocations were returned streamed up to 10 % slower in the bench
    /// (`benches/NOTES.md`, "The memory pool"). The setting belongs to the device's pool, so it holds for every `Gpu` and every
    /// library in the process that allocates from it. A no-op on a device without pools.
    ///
    /// ```no_run
    /// # use host as strided_apply; // the examples name the root crate, which re-exports this one
    /// let gpu = strided_apply::Gpu::new(0)?;
    /// gpu.set_memory_cache_limit(1 << 30)?; // keep at most 1 GiB of freed memory
    /// # Ok::<(), strided_apply::Error>(())
    /// ```
    pub fn set_memory_cache_limit(&self, bytes: u64) -> Result<()> {
        let Some(pool) = self.memory_pool()? else {
            return Ok(());
        };
        let mut v = bytes;
        // SAFETY: `pool` is the device's live pool; the release threshold is a `u64`
        // (cuMemPoolSetAttribute), read through `&mut v` during the call only.
        unsafe {
            cudarc::driver::result::mem_pool::set_attribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut v as *mut u64).cast(),
            )
        }
        .map_err(driver("setting the memory pool's release threshold"))
    }

    /// Bytes the device's memory pool has mapped now: memory in use and memory cached for
    /// reuse (0 on a device without pools).
    pub fn reserved_memory(&self) -> Result<u64> {
        let Some(pool) = self.memory_pool()? else {
            return Ok(0);
        };
        let mut v = 0u64;
        // SAFETY: as in `set_memory_cache_limit`; the attribute is a `u64` written to `v`.
        unsafe {
            cudarc::driver::result::mem_pool::get_attribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                (&mut v as *mut u64).cast(),
            )
        }
        .map_err(driver("reading the memory pool's reserved bytes"))?;
        Ok(v)
    }

    /// Gives the memory the device's pool has cached (freed, not in use) back to the
    /// driver, after waiting for this Gpu's stream (so its pending frees are done); what
    /// other streams free later is cached again (see [`Gpu::set_memory_cache_limit`]).
    pub fn release_cached_memory(&self) -> Result<()> {
        self.synchronize()?;
        self.trim_pool()
    }

    fn trim_pool(&self) -> Result<()> {
        let Some(pool) = self.memory_pool()? else {
            return Ok(());
        };
        // SAFETY: `pool` is the device's live pool; trimming releases only unused memory.
        unsafe { cudarc::driver::result::mem_pool::trim_to(pool, 0) }
            .map_err(driver("releasing the memory pool's cached memory"))
    }

    /// Runs the allocation `alloc`; when the device is out of memory, gives the pool's
    /// cached memory back to the driver and runs it once more (as PyTorch's caching
    /// allocator frees its cache and retries), so a cache never causes an out-of-memory
    /// error that an empty one would not.
    pub(crate) fn alloc_retrying<T>(
        &self,
        alloc: impl FnMut() -> std::result::Result<T, DriverError>,
    ) -> std::result::Result<T, DriverError> {
        // A failed trim leaves the pool as it was; the retry then reports the out-of-memory
        // error itself.
        retry_on_oom(alloc, || {
            let _ = self.trim_pool();
        })
    }

    /// Waits for everything queued on this Gpu's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(driver("synchronizing"))
    }

    /// The loaded module of family `family` of module `name`: decoded and loaded on first
    /// use, then cached.
    fn family_module(&self, name: &'static str, family: &'static str) -> Result<Arc<CudaModule>> {
        let key = (name, family);
        if let Some(m) = self.modules.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(m);
        }
        let reg = self
            .images
            .read()
            .ok()
            .and_then(|i| i.get(name).cloned())
            .ok_or(Error::ModuleNotRegistered { module: name })?;
        let mut modules = self
            .modules
            .write()
            .map_err(|_| Error::ModuleNotRegistered { module: name })?;
        if let Some(m) = modules.get(&key) {
            return Ok(m.clone());
        }
        let (major, minor) = self.cc;
        let image = reg.parsed.as_ref().map_err(|e| Error::ImageCorrupt {
            module: name,
            major,
            minor,
            built: "unknown (unreadable image)".into(),
            reason: e.to_string(),
        })?;
        let built = || built_list(image.targets());
        let corrupt = |e: &ImageError| Error::ImageCorrupt {
            module: name,
            major,
            minor,
            built: built(),
            reason: e.to_string(),
        };
        let t = reg.choice.ok_or_else(|| Error::NoCodeForDevice {
            module: name,
            major,
            minor,
            built: built(),
        })?;
        let target = image.targets()[t];
        let missing = || Error::FamilyMissing {
            module: name,
            family,
            major,
            minor,
            built: built(),
        };
        let f = image.family(family).ok_or_else(missing)?;
        let start = std::time::Instant::now();
        let decoder = reg
            .decoder
            .get_or_init(|| image.decoder(t).map(std::sync::Mutex::new))
            .as_ref()
            .map_err(corrupt)?;
        let code = {
            // A poisoned lock only means another thread's decode panicked inside the guard
            // of `decode_with`; the decoder resets for every frame.
            let mut dec = decoder.lock().unwrap_or_else(|p| p.into_inner());
            image.decode_with(f, t, &mut dec).map_err(|e| corrupt(&e))?
        };
        if code.is_empty() {
            return Err(missing());
        }
        let decode_ms = start.elapsed().as_secs_f64() * 1e3;
        let load = match target.kind {
            // The decoded bytes are exactly the cubin ptxas wrote (content checksum and
            // length checked), so the driver reads a well-formed ELF image.
            Kind::Cubin => cudarc::nvrtc::Ptx::from_binary(code),
            Kind::Ptx => {
                let text = String::from_utf8(code)
                    .ok()
                    .filter(|t| !t.contains('\0'))
                    .ok_or_else(|| Error::ImageCorrupt {
                        module: name,
                        major,
                        minor,
                        built: built(),
                        reason: format!("family `{family}` ({target}) is not PTX text"),
                    })?;
                cudarc::nvrtc::Ptx::from_src(format!("{}{text}", image.header(t)))
            }
        };
        let start = std::time::Instant::now();
        let module = self
            .ctx
            .load_module(load)
            .map_err(|source| Error::ModuleLoad {
                module: name,
                family,
                target,
                major,
                minor,
                built: built(),
                source,
            })?;
        let load_ms = start.elapsed().as_secs_f64() * 1e3;
        if let Ok(mut l) = reg.loads.lock() {
            l.push(FamilyLoad {
                family,
                decode_ms,
                load_ms,
            });
        }
        modules.insert(key, module.clone());
        Ok(module)
    }

    /// This context's state of type `T` (made on first use, shared by the context's stream
    /// handles); `None` if the slot holds another type (it has one user: tier 1).
    pub(crate) fn context_state<T: std::any::Any + Send + Sync + Default>(&self) -> Option<Arc<T>> {
        self.context_state
            .get_or_init(|| Arc::new(T::default()))
            .clone()
            .downcast::<T>()
            .ok()
    }

    /// The bytes of module `module`'s registered image: tier 1 reads its library there.
    pub(crate) fn image_bytes(&self, module: &'static str) -> Option<&'static [u8]> {
        self.images.read().ok()?.get(module).map(|r| r.image.bytes)
    }

    /// Loads every family of every registered module now (otherwise the first launch of
    /// each does). With PTX this compiles every kernel: meant for tests and warm-up.
    pub fn preload(&self) -> Result<()> {
        let images: Vec<Arc<Registered>> = self
            .images
            .read()
            .map(|i| i.values().cloned().collect())
            .unwrap_or_default();
        self.preload_registered(images)
    }

    /// [`preload`](Self::preload) of one module's families.
    fn preload_module(&self, module: &str) -> Result<()> {
        let images: Vec<Arc<Registered>> = self
            .images
            .read()
            .map(|i| i.get(module).cloned().into_iter().collect())
            .unwrap_or_default();
        self.preload_registered(images)
    }

    fn preload_registered(&self, images: Vec<Arc<Registered>>) -> Result<()> {
        for reg in images {
            let families: Vec<&'static str> = match &reg.parsed {
                Ok(i) => (0..i.len()).map(|f| i.family_name(f)).collect(),
                Err(_) => Vec::new(),
            };
            for family in families {
                self.family_module(reg.image.name, family)?;
            }
        }
        Ok(())
    }

    /// Loads an op's family and looks up every kernel of it now, so that later launches of
    /// the op make no driver call but the launch itself: what a CUDA graph capture needs
    /// (module loading may not happen while a stream is captured). The typed API's
    /// `Op::NAMES` (`<Add as Kernels3<f32, f32, f32>>::NAMES`) or a
    /// [`DynOp`](crate::dispatch::DynOp)'s `instance().names`.
    ///
    /// An op without kernels of its own (`names.program`) runs on the expression engine:
    /// this loads every family of the interpreter's module.
    pub fn preload_kernels(&self, names: &KernelNames) -> Result<()> {
        if names.program.is_some() {
            return self.preload_module(strided_apply_expr::kernel::MODULE);
        }
        // Every variant with a kernel of its own (`Dn64` and apply1/apply4's `Tiled` have none).
        let variants = [Variant::Vec, Variant::Tiled]
            .into_iter()
            .chain(Variant::ALL);
        for kernel in variants.map(|v| names.get(v)).filter(|k| !k.is_empty()) {
            self.kernel(names.module, kernel)?;
        }
        Ok(())
    }

    /// [`preload_kernels`](Self::preload_kernels) for a stencil: its family and every kernel
    /// a launch may pick (`<Laplacian2 as StencilKernels<f32>>::NAMES`, or a
    /// `DynStencil`'s `instance().names`).
    pub fn preload_stencil(&self, names: &gpu_kernels::stencil::StencilNames) -> Result<()> {
        for kernel in names.kernels() {
            self.kernel(names.module, kernel)?;
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
        let m = self.family_module(module, family_of(kernel))?;
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
        let block = vec_block();
        let blocks = n.div_ceil(block as u64).clamp(1, i32::MAX as u64);
        LaunchShape {
            grid: blocks as u32,
            block: (block, 1),
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
        // module it belongs to stays loaded as long as this Gpu (in `modules`, or in
        // `retired` once its image is registered again).
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

/// Driver work running on threads of the library's own (tier 1's compiles). A process must
/// not exit under it: the driver's teardown then crashes that thread (a process that exited
/// right after its first launch of an expression died in `free()`). Dropping a `Gpu` waits
/// for it ([`wait_for_background_work`]), and so does the process's exit once
/// [`wait_at_exit_once`] registered the wait, each for at most 5 s.
static IN_FLIGHT: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// One piece of background driver work, counted while it lives.
pub(crate) struct InFlight;

impl InFlight {
    /// Counts work about to start on another thread.
    pub(crate) fn start() -> InFlight {
        if let Ok(mut n) = IN_FLIGHT.0.lock() {
            *n += 1;
        }
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut n) = IN_FLIGHT.0.lock() {
            *n = n.saturating_sub(1);
        }
        IN_FLIGHT.1.notify_all();
    }
}

/// Waits (at most 5 s) until no background driver work runs.
pub(crate) fn wait_for_background_work() {
    let Ok(n) = IN_FLIGHT.0.lock() else { return };
    if *n == 0 {
        return;
    }
    let _ = IN_FLIGHT
        .1
        .wait_timeout_while(n, std::time::Duration::from_secs(5), |n| *n > 0);
}

extern "C" fn wait_at_exit() {
    wait_for_background_work();
}

/// Registers [`wait_for_background_work`] to run at the process's exit (once): it runs
/// before the exit handlers registered earlier, so the caller makes sure the driver's are.
pub(crate) fn wait_at_exit_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        extern "C" {
            fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
        }
        // SAFETY: registers a function that only waits on this module's counter.
        unsafe { atexit(wait_at_exit) };
    });
}

impl Drop for Gpu {
    /// Waits for compiles of expressions running on other threads (at most 5 s): a process
    /// must not tear the driver down under one.
    fn drop(&mut self) {
        wait_for_background_work();
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::CUresult::{CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY};

    /// `retry_on_oom` over allocations that fail with `errors` in turn, then succeed:
    /// (the result, calls of the allocation, calls of `free_cache`).
    fn run(errors: &[sys::CUresult]) -> (std::result::Result<u32, DriverError>, usize, usize) {
        let (mut calls, mut freed) = (0, 0);
        let r = retry_on_oom(
            || {
                calls += 1;
                errors
                    .get(calls - 1)
                    .map_or(Ok(7), |&e| Err(DriverError(e)))
            },
            || freed += 1,
        );
        (r, calls, freed)
    }

    #[test]
    fn vec_block_takes_multiples_of_32_up_to_1024() {
        assert_eq!(VEC_BLOCK, 128);
        assert_eq!(vec_block_from(None), VEC_BLOCK);
        assert_eq!(vec_block_from(Some("256")), 256);
        assert_eq!(vec_block_from(Some(" 64 ")), 64);
        assert_eq!(vec_block_from(Some("32")), 32);
        assert_eq!(vec_block_from(Some("1024")), 1024);
        for bad in ["", "0", "16", "48", "1056", "2048", "-128", "x128"] {
            assert_eq!(vec_block_from(Some(bad)), VEC_BLOCK, "{bad:?}");
        }
    }

    #[test]
    fn out_of_memory_frees_the_cache_and_retries_once() {
        assert_eq!(run(&[]), (Ok(7), 1, 0));
        assert_eq!(run(&[CUDA_ERROR_OUT_OF_MEMORY]), (Ok(7), 2, 1));
        let (r, calls, freed) = run(&[CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY]);
        assert_eq!(
            (r.map_err(|e| e.0), calls, freed),
            (Err(CUDA_ERROR_OUT_OF_MEMORY), 2, 1)
        );
        // Other errors are not retried.
        let (r, calls, freed) = run(&[CUDA_ERROR_INVALID_VALUE]);
        assert_eq!(
            (r.map_err(|e| e.0), calls, freed),
            (Err(CUDA_ERROR_INVALID_VALUE), 1, 0)
        );
    }
}
