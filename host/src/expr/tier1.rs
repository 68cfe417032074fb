//! Tier 1: an expression compiled to machine code at run time by the CUDA driver alone.
//!
//! The code generator ([`ptx`](super::ptx)) writes the program as a PTX kernel for the
//! launch's layout shape (vectorised rows or any strides); the driver's linker compiles it
//! to a cubin (`cuLinkCreate`, `cuLinkAddData`, `cuLinkComplete`: no NVRTC, no toolkit).
//! Compiled kernels are kept per context, keyed by the program (its constants are
//! parameters, so a new scalar value compiles nothing) and the shape, and their cubins on
//! disk ([`disk_cache`], verified before the driver sees them), keyed by the kernel's text, the expression image, the device and
//! the driver: a new process loads them in about a millisecond.
//!
//! `STRIDED_APPLY_EXPR_TIER` picks the tier ([`Tier`]): unset, the first launch of an
//! expression and shape runs on the interpreter (tier 0) while a thread compiles it (or, when
//! its cubin is on disk, runs compiled at once), and later launches run compiled once it is
//! ready; `0` always interprets; `1` compiles on the calling thread and waits. A compile that
//! fails leaves that expression on tier 0 (logged once), or with `1` is an error; a cache file
//! that is damaged or does not load is deleted and compiled again. While a stream is being captured into a
//! CUDA graph, no compile starts and no cubin is loaded (whatever the tier): a capture records
//! tier 1 only for an expression and layout compiled before it, the interpreter otherwise.

use super::disk_cache::{self, cache_dir, hash128};
use super::ptx::{self, Shape};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, LaunchShape};
use crate::plan::Plan;
use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaContext, CudaFunction};
use gpu_kernels::{FastDiv, Variant};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};
use strided_apply_expr::kernel::MODULE;
use strided_apply_expr::{t1lib, Program, MAX_CONSTS};

/// Which tier runs an expression's GPU launches: `STRIDED_APPLY_EXPR_TIER` for every
/// expression, [`Compiled::with_tier`](super::Compiled::with_tier) for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Tier 0 only, the interpreter (`STRIDED_APPLY_EXPR_TIER=0`).
    Interpret,
    /// Tier 0 until a compile started on a thread of its own is ready, tier 1 from then on
    /// (the default).
    Auto,
    /// Tier 1: compiled on first use, the launch waiting for it; a failed compile is an
    /// error (`STRIDED_APPLY_EXPR_TIER=1`). Programs and layouts that tier 1 does not
    /// compile still run on the interpreter.
    Compile,
}

thread_local! {
    /// The tier of the expression whose launch runs on this thread, if it chose one.
    static CHOSEN: std::cell::Cell<Option<Tier>> = const { std::cell::Cell::new(None) };
}

thread_local! {
    /// Nesting of [`with_tier`] on this thread, and the compiles its launches deferred: they
    /// start when the outermost call ends, after every launch of the expression (its
    /// hoisted parts' included) is queued.
    static BATCH: std::cell::RefCell<(usize, Deferred)> = std::cell::RefCell::new((0, Deferred::default()));
}

/// Runs one expression's launches `f` with `tier` (if any) as this thread's tier; compiles
/// they start begin when it returns.
pub(crate) fn with_tier<R>(tier: Option<Tier>, f: impl FnOnce() -> R) -> R {
    /// Restores the thread's tier and closes the batch, also when `f` unwinds.
    struct Scope(Option<Tier>);
    impl Drop for Scope {
        fn drop(&mut self) {
            let done = BATCH.with(|b| {
                let mut b = b.borrow_mut();
                b.0 = b.0.saturating_sub(1);
                if b.0 == 0 {
                    std::mem::take(&mut b.1)
                } else {
                    Deferred::default()
                }
            });
            drop(done);
            CHOSEN.with(|c| c.set(self.0));
        }
    }
    let _scope = Scope(CHOSEN.with(|c| c.replace(tier)));
    BATCH.with(|b| b.borrow_mut().0 += 1);
    f()
}

fn tier() -> Tier {
    static T: OnceLock<Tier> = OnceLock::new();
    CHOSEN.with(|c| c.get()).unwrap_or_else(|| {
        *T.get_or_init(|| tier_from(std::env::var("STRIDED_APPLY_EXPR_TIER").ok().as_deref()))
    })
}

/// Launches that ran compiled (tier 1) in this process: a diagnostic for tests and benches.
pub fn launches() -> u64 {
    LAUNCHES.load(std::sync::atomic::Ordering::Relaxed)
}

static LAUNCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn tier_from(v: Option<&str>) -> Tier {
    match v.map(str::trim) {
        Some("0") => Tier::Interpret,
        Some("1") => Tier::Compile,
        _ => Tier::Auto,
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    /// The program with its constants zero (they are the kernel's parameters).
    program: Program,
    shape: Shape,
}

#[derive(Clone)]
enum Entry {
    Compiling,
    Ready(CudaFunction),
    Failed(String),
}

/// The compiled expressions of one context.
#[derive(Default)]
pub(crate) struct Cache {
    entries: Mutex<HashMap<Key, Entry>>,
    /// Kernels of several programs (the normalisations' row kernels).
    modules: Mutex<HashMap<ModuleKey, Entry>>,
}

/// A kernel of several programs: the programs (constants zero) and the words that say
/// how the kernel combines them and for which layout (its writer's own encoding).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct ModuleKey {
    pub programs: Vec<Program>,
    pub shape: Vec<u64>,
}

impl Cache {
    fn get(&self, k: &Key) -> Option<Entry> {
        self.entries.lock().ok()?.get(k).cloned()
    }
    fn set(&self, k: Key, e: Entry) {
        if let Ok(mut m) = self.entries.lock() {
            m.insert(k, e);
        }
    }
    /// Marks `k` as compiling unless it has an entry: whether the caller should compile.
    fn claim(&self, k: &Key) -> bool {
        match self.entries.lock() {
            Ok(mut m) if !m.contains_key(k) => {
                m.insert(k.clone(), Entry::Compiling);
                true
            }
            _ => false,
        }
    }
}

/// Reports a failure of tier 1 (a compile, the cache) once per process.
fn log_once(what: &str) {
    static LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!("strided-apply: {what} (reported once)");
    }
}

/// The PTX target for a device of compute capability `cc`: its own up to sm_90 (the
/// library's PTX is sm_90's, whose instructions every sm_70 and later device has; the
/// tests check it with `ptxas`), sm_90 above; `None` before sm_70.
fn target(cc: (i32, i32)) -> Option<u32> {
    let sm = (cc.0.max(0) * 10 + cc.1.max(0)) as u32;
    (sm >= 70).then_some(sm.min(90))
}

/// The library's functions that `p` calls, from the library's PTX `lib` (each `.func` is
/// one top-level item of the text), with the functions they call and the library's data.
pub(crate) fn lib_for(p: &Program, lib: &str) -> String {
    lib_for_all(std::slice::from_ref(p), lib)
}

/// [`lib_for`] of every program of `ps` (each function once).
pub(crate) fn lib_for_all(ps: &[Program], lib: &str) -> String {
    let mut wanted: Vec<&str> = Vec::new();
    for p in ps {
        for i in p.code() {
            let name = strided_apply_expr::Opcode::from_code(i.op)
                .and_then(|op| t1lib::name(op, strided_apply_expr::Class::from_code(i.class)?));
            if let Some(n) = name.filter(|n| !wanted.contains(n)) {
                wanted.push(n);
            }
        }
    }
    let items = items(lib);
    let names: Vec<Option<&str>> = items.iter().map(|i| func_name(i)).collect();
    // The closure of the wanted functions over the calls in their definitions.
    let mut k = 0;
    while k < wanted.len() {
        let w = wanted[k];
        for (item, _) in items.iter().zip(&names).filter(|(_, n)| **n == Some(w)) {
            for n in names.iter().flatten() {
                if !wanted.contains(n) && mentions(item, n) {
                    wanted.push(n);
                }
            }
        }
        k += 1;
    }
    let mut out = String::new();
    for (item, name) in items.iter().zip(&names) {
        // The wanted functions (declarations and definitions), and the data tables
        // (libdevice's trigonometric reduction: a few hundred bytes).
        let keep = match name {
            Some(n) => wanted.contains(n),
            None => item.trim_start().starts_with(".global"),
        };
        if keep {
            for line in item.lines().filter(|l| !l.trim_start().starts_with("//")) {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The name a `.func` item declares or defines (past its return parameter list).
fn func_name(item: &str) -> Option<&str> {
    let rest = &item[item.find(".func")? + 5..];
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('(') {
        Some(r) => &r[r.find(')')? + 1..],
        None => rest,
    };
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Whether `text` holds identifier `name` as a whole word.
fn mentions(text: &str, name: &str) -> bool {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')))
        .any(|w| w == name)
}

/// The top-level items of a PTX text (from one line that starts a declaration to the next),
/// comments dropped.
fn items(text: &str) -> Vec<&str> {
    let mut starts = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_start();
        if !line.starts_with([' ', '\t'])
            && (l.starts_with(".visible")
                || l.starts_with(".func")
                || l.starts_with(".entry")
                || l.starts_with(".global")
                || l.starts_with(".extern")
                || l.starts_with(".weak"))
        {
            starts.push(at);
        }
        at += line.len();
    }
    starts.push(text.len());
    starts.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

/// What a compile needs besides the program: the device's PTX target, the expression
/// image (its library and identity), the context.
#[derive(Clone)]
struct Job {
    ctx: Arc<CudaContext>,
    sm: u32,
    cc: (i32, i32),
    image: &'static [u8],
}

/// The library's functions from the expression image's PTX target (decoded once per
/// process; the first compile that calls one pays about 20 ms for the target's dictionary).
pub(crate) fn library(image: &'static [u8]) -> std::result::Result<&'static str, String> {
    static LIB: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let img = strided_apply_image::Image::parse(image).map_err(|e| e.to_string())?;
        let missing = || {
            format!(
                "the expression image has no PTX of family {}",
                t1lib::FAMILY
            )
        };
        let t = img
            .targets()
            .iter()
            .position(|t| t.kind == strided_apply_image::Kind::Ptx)
            .ok_or_else(missing)?;
        let f = img.family(t1lib::FAMILY).ok_or_else(missing)?;
        let dict = img.dictionary(t).map_err(|e| e.to_string())?;
        let code = img
            .decode(f, t, dict.as_deref())
            .map_err(|e| e.to_string())?;
        String::from_utf8(code)
            .ok()
            .filter(|t| !t.is_empty() && !t.contains('\0'))
            .ok_or_else(missing)
    })
    .as_ref()
    .map(String::as_str)
    .map_err(Clone::clone)
}

/// The image's identity (its description names the fingerprint of its sources): part of a
/// cached cubin's key, with the kernel's text and the device.
fn image_identity(image: &'static [u8]) -> &'static str {
    strided_apply_image::Image::parse(image).map_or("", |i| i.meta())
}

fn driver_version() -> i32 {
    static V: OnceLock<i32> = OnceLock::new();
    *V.get_or_init(|| {
        let mut v = 0;
        // SAFETY: writes one int.
        let _ = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
        v
    })
}

/// The disk cache's file for a kernel: a 128-bit hash of its text, the image, the device
/// and the driver.
fn cache_file(text: &str, job: &Job) -> Option<std::path::PathBuf> {
    let dir = cache_dir()?;
    let parts = [
        text.as_bytes(),
        image_identity(job.image).as_bytes(),
        &job.cc.0.to_le_bytes(),
        &job.cc.1.to_le_bytes(),
        &driver_version().to_le_bytes(),
    ];
    Some(dir.join(format!("{}.cubin", hash128(&parts))))
}

/// A cubin from the cache as a loaded kernel: only a verified entry reaches the driver
/// ([`disk_cache::read`] deletes a damaged one). One that the driver still refuses (a
/// cubin of another driver's making under the same name) is deleted too.
fn load_cached(job: &Job, path: &std::path::Path) -> Option<CudaFunction> {
    let disk_cache::Read::Hit(cubin) = disk_cache::read(path) else {
        return None;
    };
    let f = job
        .ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
        .ok()
        .and_then(|m| m.load_function(ptx::KERNEL).ok());
    if f.is_none() {
        let _ = std::fs::remove_file(path);
    }
    f
}

/// The driver's linker: PTX text to a cubin (the context current on this thread).
fn link(ctx: &Arc<CudaContext>, text: &str) -> std::result::Result<Vec<u8>, String> {
    use cudarc::driver::sys;
    ctx.bind_to_thread().map_err(|e| e.to_string())?;
    let c = std::ffi::CString::new(text).map_err(|e| e.to_string())?;
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    let check = |r: sys::CUresult, what: &str| {
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("{what}: {r:?}"))
        }
    };
    // SAFETY: the driver API's linker with no options; `state` is destroyed on every path
    // after its creation succeeded; the cubin is copied out before.
    unsafe {
        check(
            sys::cuLinkCreate_v2(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut state),
            "cuLinkCreate",
        )?;
        let out = (|| {
            check(
                sys::cuLinkAddData_v2(
                    state,
                    sys::CUjitInputType::CU_JIT_INPUT_PTX,
                    c.as_ptr() as *mut c_void,
                    c.as_bytes_with_nul().len(),
                    c"sa_t1.ptx".as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                ),
                "the driver refused the generated PTX (cuLinkAddData)",
            )?;
            let (mut cubin, mut size) = (std::ptr::null_mut(), 0usize);
            check(
                sys::cuLinkComplete(state, &mut cubin, &mut size),
                "cuLinkComplete",
            )?;
            if cubin.is_null() || size == 0 {
                return Err("cuLinkComplete gave no cubin".to_string());
            }
            Ok(std::slice::from_raw_parts(cubin as *const u8, size).to_vec())
        })();
        let _ = sys::cuLinkDestroy(state);
        out
    }
}

/// Compiles `p` for `shape` on this thread (the disk cache first): its kernel.
fn compile(
    job: &Job,
    p: &Program,
    shape: Shape,
    path: Option<&std::path::Path>,
) -> std::result::Result<CudaFunction, String> {
    if let Some(f) = path.and_then(|path| load_cached(job, path)) {
        return Ok(f);
    }
    let lib = if ptx::calls_lib(p) {
        lib_for(p, library(job.image)?)
    } else {
        String::new()
    };
    let mut text = ptx::module(p, shape, job.sm, &lib);
    // Fault injection for the failure tests: PTX the driver refuses (as an old driver does).
    if std::env::var_os("STRIDED_APPLY_EXPR_TIER1_FAULT").is_some_and(|v| v == "ptx") {
        text.push_str("\nnot.an.instruction;\n");
    }
    link_and_load(job, &text, path)
}

/// Links PTX `text` into a cubin, keeps it in the disk cache at `path` (and, with
/// `STRIDED_APPLY_EXPR_DUMP=DIR`, its PTX and cubin there, for reading the generated code
/// with `cuobjdump -sass`; best effort), and loads its kernel.
fn link_and_load(
    job: &Job,
    text: &str,
    path: Option<&std::path::Path>,
) -> std::result::Result<CudaFunction, String> {
    let cubin = link(&job.ctx, text)?;
    if let Some(path) = path {
        if let Err(e) = disk_cache::store(path, &cubin) {
            log_once(&format!(
                "compiled expressions are not cached: {} is not writable: {e}",
                path.display()
            ));
        }
    }
    if let Some(dir) = std::env::var_os("STRIDED_APPLY_EXPR_DUMP") {
        let name = hash128(&[text.as_bytes()]);
        let dir = std::path::Path::new(&dir);
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(dir.join(format!("{name}.ptx")), text);
        let _ = std::fs::write(dir.join(format!("{name}.cubin")), &cubin);
    }
    job.ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
        .map_err(|e| format!("loading the compiled kernel failed: {e}"))?
        .load_function(ptx::KERNEL)
        .map_err(|e| format!("the compiled module has no kernel {}: {e}", ptx::KERNEL))
}

/// The kernel of `p` for `shape` where tier 1 has (or, forced, makes) one.
fn function(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    shape: Shape,
    later: &mut Deferred,
) -> Result<Option<CudaFunction>> {
    // `launch`, the one caller, checked the tier and that tier 1 takes `p`.
    let mode = tier();
    let Some(sm) = target(gpu.compute_capability()) else {
        return Ok(None);
    };
    let key = Key {
        program: Program {
            consts: [0; MAX_CONSTS],
            ..*p
        },
        shape,
    };
    let Some(cache) = gpu.context_state::<Cache>() else {
        return Ok(None);
    };
    let cache = &cache;
    match cache.get(&key) {
        Some(Entry::Ready(f)) => return Ok(Some(f)),
        Some(Entry::Failed(reason)) if mode == Tier::Compile => {
            return Err(Error::ExprCompile { reason })
        }
        Some(Entry::Failed(_)) => return Ok(None),
        Some(Entry::Compiling) if mode == Tier::Auto => return Ok(None),
        _ => {}
    }
    // Module loading is not allowed while the stream is captured: the capture records the
    // interpreter (in either mode).
    let Some(image) = gpu.image_bytes(MODULE).filter(|_| !capturing(stream)) else {
        return Ok(None);
    };
    let job = Job {
        ctx: gpu.context().clone(),
        sm,
        cc: gpu.compute_capability(),
        image,
    };
    // The cache file's name hashes the kernel's text without the library (the image's
    // identity stands for it).
    let path = cache_file(&ptx::module(&key.program, shape, sm, ""), &job);
    if mode == Tier::Auto {
        if !cache.claim(&key) {
            return Ok(None);
        }
        // Compiled before (by this process or another): at once.
        if let Some(f) = path.as_deref().and_then(|path| load_cached(&job, path)) {
            cache.set(key, Entry::Ready(f.clone()));
            return Ok(Some(f));
        }
        later.0.push((job, key, path, cache.clone()));
        return Ok(None);
    }
    match compile(&job, p, shape, path.as_deref()) {
        Ok(f) => {
            cache.set(key, Entry::Ready(f.clone()));
            Ok(Some(f))
        }
        Err(reason) => {
            cache.set(key, Entry::Failed(reason.clone()));
            Err(Error::ExprCompile { reason })
        }
    }
}

/// Whether `stream` (a live stream of the gpu's context) is being captured into a graph:
/// no module may be loaded then.
fn capturing(stream: CUstream) -> bool {
    // SAFETY: a query of a live stream.
    unsafe { cudarc::driver::result::stream::is_capturing(stream) }.is_ok_and(|s| {
        s != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
    })
}

/// The kernel of several programs that `write(sm, lib)` writes (the PTX target, the
/// library's functions the programs call), compiled by the driver and cached as tier 1's
/// other kernels (per context; on disk, keyed by the text without the library). A cached
/// cubin loads at once (about a millisecond). Otherwise, in the automatic tier, the first
/// call starts the driver's compile on a thread of its own and returns `None` (the caller
/// runs its composition of precompiled kernels meanwhile; later calls get the kernel once
/// it is ready: [`wait_compiles`](crate::expr::wait_compiles) waits for it); with the
/// compiled tier forced, it compiles on the caller's thread and waits (tens to hundreds of
/// milliseconds). `None` also where tier 1 does not run it: the interpreter's tier asked
/// for, no PTX target, a stream being captured (no module loads then), or a failed compile
/// (reported once; with the compiled tier forced, an error).
pub(crate) fn module_function(
    gpu: &Gpu,
    stream: CUstream,
    key: &ModuleKey,
    write: &dyn Fn(u32, &str) -> String,
) -> Result<Option<CudaFunction>> {
    let mode = tier();
    if mode == Tier::Interpret {
        return Ok(None);
    }
    let Some(sm) = target(gpu.compute_capability()) else {
        return Ok(None);
    };
    let Some(cache) = gpu.context_state::<Cache>() else {
        return Ok(None);
    };
    let entry = cache.modules.lock().ok().and_then(|m| m.get(key).cloned());
    match entry {
        Some(Entry::Ready(f)) => return Ok(Some(f)),
        Some(Entry::Failed(reason)) if mode == Tier::Compile => {
            return Err(Error::ExprCompile { reason })
        }
        Some(_) => return Ok(None),
        None => {}
    }
    let Some(image) = gpu.image_bytes(MODULE).filter(|_| !capturing(stream)) else {
        return Ok(None);
    };
    let job = Job {
        ctx: gpu.context().clone(),
        sm,
        cc: gpu.compute_capability(),
        image,
    };
    let path = cache_file(&write(sm, ""), &job);
    if mode == Tier::Auto {
        return Ok(background(&cache, key, job, path, write));
    }
    // The compiled tier, forced: compile here and wait; a failure is the caller's error.
    let compiled = match path.as_deref().and_then(|p| load_cached(&job, p)) {
        Some(f) => Ok(f),
        None => module_text(&job, key, write)
            .and_then(|text| link_and_load(&job, &text, path.as_deref())),
    };
    let (entry, out) = match compiled {
        Ok(f) => (Entry::Ready(f.clone()), Ok(Some(f))),
        Err(reason) => (
            Entry::Failed(reason.clone()),
            Err(Error::ExprCompile { reason }),
        ),
    };
    if let Ok(mut m) = cache.modules.lock() {
        m.insert(key.clone(), entry);
    }
    out
}

/// The text of `key`'s kernel as `write` writes it, with the library's functions its
/// programs call.
fn module_text(
    job: &Job,
    key: &ModuleKey,
    write: &dyn Fn(u32, &str) -> String,
) -> std::result::Result<String, String> {
    let lib = if key.programs.iter().any(ptx::calls_lib) {
        lib_for_all(&key.programs, library(job.image)?)
    } else {
        String::new()
    };
    Ok(write(job.sm, &lib))
}

/// Reports (once) a normalisation kernel that failed to compile in the automatic tier.
fn module_failed(reason: &str) {
    log_once(&format!(
        "compiling a normalisation kernel (tier 1) failed, it runs as separate launches: {reason}"
    ));
}

/// [`module_function`] in the automatic tier: the kernel at once where its cubin is on
/// disk; else `None`, its compile started on a thread of its own (once: the entry says
/// `Compiling` until it ends), whose result later calls find.
fn background(
    cache: &Arc<Cache>,
    key: &ModuleKey,
    job: Job,
    path: Option<std::path::PathBuf>,
    write: &dyn Fn(u32, &str) -> String,
) -> Option<CudaFunction> {
    let set = |e: Entry| {
        if let Ok(mut m) = cache.modules.lock() {
            m.insert(key.clone(), e);
        }
    };
    {
        let mut m = cache.modules.lock().ok()?;
        if m.contains_key(key) {
            return None;
        }
        m.insert(key.clone(), Entry::Compiling);
    }
    if let Some(f) = path.as_deref().and_then(|p| load_cached(&job, p)) {
        set(Entry::Ready(f.clone()));
        return Some(f);
    }
    let text = match module_text(&job, key, write) {
        Ok(text) => text,
        Err(reason) => {
            module_failed(&reason);
            set(Entry::Failed(reason));
            return None;
        }
    };
    let (cache, key) = (cache.clone(), key.clone());
    let in_flight = crate::gpu::InFlight::start();
    std::thread::spawn(move || {
        let _done = in_flight;
        exit_hook(&job.ctx);
        let e = match link_and_load(&job, &text, path.as_deref()) {
            Ok(f) => Entry::Ready(f),
            Err(reason) => {
                module_failed(&reason);
                Entry::Failed(reason)
            }
        };
        if let Ok(mut m) = cache.modules.lock() {
            m.insert(key, e);
        }
    });
    None
}

/// Waits (at most 5 s) until the compiles that tier 1 started on threads of their own
/// have ended, so that the next call of an expression or a normalisation program runs its
/// compiled kernel (for timing, and tests, of the compiled kernels in the automatic tier).
pub fn wait_compiles() {
    crate::gpu::wait_for_background_work();
}

/// Launches `f` with the kernel parameters at `args` (one pointer a parameter).
///
/// # Safety
/// `args` match `f`'s parameter list; the launch shape is the kernel's and every address
/// it reaches is in bounds; `stream` is a live stream of the gpu's context.
pub(crate) unsafe fn launch_function(
    gpu: &Gpu,
    f: &CudaFunction,
    launch: LaunchShape,
    stream: CUstream,
    args: &mut [*mut c_void],
) -> Result<()> {
    gpu.context()
        .bind_to_thread()
        .map_err(crate::gpu::driver("binding the context"))?;
    // SAFETY: the caller's.
    unsafe {
        cudarc::driver::result::launch_kernel(
            f.cu_function(),
            (launch.grid, 1, 1),
            (launch.block.0, launch.block.1, 1),
            launch.shared_bytes,
            stream,
            args,
        )
    }
    .map_err(|source| Error::Launch {
        kernel: ptx::KERNEL,
        source,
    })?;
    LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// On a compiling thread, before its first compile: links a trivial kernel, so that the
/// driver's linker registers its own exit handlers before the library's exit wait
/// ([`crate::gpu::wait_at_exit_once`]), which therefore runs before them. (A process that
/// exits during this first link, with a `Gpu` it never drops, is not covered.)
fn exit_hook(ctx: &Arc<CudaContext>) {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        const TRIVIAL: &str =
            ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry sa_t1_warm() { ret; }\n";
        if let Ok(cubin) = link(ctx, TRIVIAL) {
            let _ = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin));
        }
        crate::gpu::wait_at_exit_once();
    });
}

/// Compiles to start on threads of their own once the caller's launch is queued: dropping
/// it starts them (the interpreter's launch first, so that its kernel's module load does
/// not wait behind a compile: the driver serialises them).
#[derive(Default)]
pub(crate) struct Deferred(Vec<(Job, Key, Option<std::path::PathBuf>, Arc<Cache>)>);

impl Drop for Deferred {
    fn drop(&mut self) {
        // Inside an expression's launches ([`with_tier`]): to the batch, started at its end.
        let batched = BATCH
            .try_with(|b| match b.try_borrow_mut() {
                Ok(mut b) if b.0 > 0 => {
                    b.1 .0.append(&mut self.0);
                    true
                }
                _ => false,
            })
            .unwrap_or(false);
        if batched {
            return;
        }
        for (job, key, path, cache) in self.0.drain(..) {
            let in_flight = crate::gpu::InFlight::start();
            std::thread::spawn(move || {
                let _done = in_flight;
                exit_hook(&job.ctx);
                let e = match compile(&job, &key.program, key.shape, path.as_deref()) {
                    Ok(f) => Entry::Ready(f),
                    Err(reason) => {
                        log_once(&format!(
                            "compiling an expression (tier 1) failed, it runs on the interpreter: {reason}"
                        ));
                        Entry::Failed(reason)
                    }
                };
                cache.set(key, e);
            });
        }
    }
}

/// Parameter values of one launch: each a `u64` slot (a 32-bit parameter is its low half),
/// the constants one 128-byte block.
struct Params {
    slots: Vec<u64>,
    consts: [u64; MAX_CONSTS],
    /// Where the constants go among the slots.
    kc_at: usize,
}

impl Params {
    fn pointers(&mut self) -> Vec<*mut c_void> {
        let mut v: Vec<*mut c_void> = Vec::with_capacity(self.slots.len() + 1);
        for (i, s) in self.slots.iter_mut().enumerate() {
            if i == self.kc_at {
                v.push(self.consts.as_mut_ptr() as *mut c_void);
            }
            v.push(s as *mut u64 as *mut c_void);
        }
        v
    }
}

fn div_params(v: &mut Vec<u64>, d: u64) -> Option<()> {
    let f = FastDiv::new(u32::try_from(d).ok()?)?;
    v.extend([f.d as u64, f.magic as u64, f.shift as u64]);
    Some(())
}

/// Tier 1's launch of `p` over a 32-bit `plan` (not `Dn64`), where tier 1 runs it: whether
/// it launched. A plan with an input transposed against the output (`launch::tile_axes`)
/// runs on the tiled shape. A compile to start in the background goes into `later`, which
/// the caller drops once it has launched the interpreter.
///
/// # Safety
/// As `device::launch_program`: `ptrs[k]` is operand `k`'s element at the plan's base, in
/// a buffer of `sizes[k]`-byte elements of `p`'s type for it, every offset of `plan` proved
/// in bounds; the aliasing rules hold; `stream` is a live stream of the gpu's context.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    plan: &Plan<N>,
    ptrs: [u64; N],
    sizes: [usize; N],
    later: &mut Deferred,
) -> Result<bool> {
    if tier() == Tier::Interpret
        || plan.variant == Variant::Dn64
        || plan.numel == 0
        || plan.numel > i32::MAX as u64
        || N != 1 + p.n_inputs as usize
        || !ptx::supports(p)
    {
        return Ok(false);
    }
    // Tier 0's one-op kernels (one op over operands of one type, specialised code already)
    // keep their programs but on tiled layouts.
    let one_op = strided_apply_expr::kernel::one_kernel(p).is_some() && !one_op_knob();
    let Some((shape, n, tail, extra)) = tiled_layout(plan, &ptrs, &sizes).or_else(|| {
        (!one_op)
            .then(|| layout(plan, &ptrs, &sizes, gpu.sm_count()))
            .flatten()
    }) else {
        return Ok(false);
    };
    let Some(f) = function(gpu, stream, p, shape, later)? else {
        return Ok(false);
    };
    let mut slots: Vec<u64> = ptrs.to_vec();
    let kc_at = slots.len();
    slots.push(n);
    if matches!(shape, Shape::Vector { .. }) {
        slots.push(tail);
    }
    slots.extend(extra);
    let mut params = Params {
        slots,
        consts: p.consts,
        kc_at,
    };
    let launch = match shape {
        Shape::Vector { per, .. } => LaunchShape {
            grid: n
                .div_ceil(VECTOR_BLOCK as u64 * per as u64)
                .max(tail.div_ceil(VECTOR_BLOCK as u64))
                .max(1) as u32,
            block: (VECTOR_BLOCK, 1),
            shared_bytes: 0,
        },
        Shape::Strided { .. } => LaunchShape {
            grid: gpu.grid(n),
            block: (crate::gpu::BLOCK, 1),
            shared_bytes: 0,
        },
        // One block per tile; the stages are the kernel's static shared memory.
        Shape::Tiled { .. } => LaunchShape {
            grid: n as u32,
            block: ptx::TILE_THREADS,
            shared_bytes: 0,
        },
        // `launch_reduce`'s.
        Shape::Reduce(_) => return Ok(false),
    };
    // SAFETY: the parameter list is the one `ptx::module` declares for `shape` (operand
    // addresses, constants, n, the shape's parameters, built above in that order); the
    // kernel reads only offsets of `plan` (the vector shape: the contract `layout` checked);
    // the caller proved the pointers, the plan and the stream.
    unsafe { start(gpu, &f, launch, stream, &mut params) }?;
    Ok(true)
}

/// Launches compiled kernel `f` with `params` on `stream` (the context bound first).
///
/// # Safety
/// `params` are the kernel's parameter list, whose values meet its contract; `launch` is
/// its launch shape; `stream` is a live stream of the gpu's context.
unsafe fn start(
    gpu: &Gpu,
    f: &CudaFunction,
    launch: LaunchShape,
    stream: CUstream,
    params: &mut Params,
) -> Result<()> {
    let mut args = params.pointers();
    // SAFETY: the caller's.
    unsafe { launch_function(gpu, f, launch, stream, &mut args) }
}

/// `STRIDED_APPLY_EXPR_RED_PER` (0, 1 or 2): `log2` of the slots a thread of tier 1's
/// reduction kernels folds, for every reduction, for measurements (read once).
fn per_knob() -> Option<u8> {
    static P: OnceLock<Option<u8>> = OnceLock::new();
    *P.get_or_init(|| {
        std::env::var("STRIDED_APPLY_EXPR_RED_PER")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|p: &u8| *p <= 2)
    })
}

/// `STRIDED_APPLY_EXPR_RED_COLS`: `0` turns tier 1's column shape off (the row shape for
/// every layout), `8` or `32` forces its threads along the slots, for measurements (read
/// once).
fn cols_knob() -> Option<u8> {
    static C: OnceLock<Option<u8>> = OnceLock::new();
    *C.get_or_init(|| {
        std::env::var("STRIDED_APPLY_EXPR_RED_COLS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|c: &u8| matches!(c, 0 | 8 | 32))
    })
}

/// The column shape's threads along the slots for `blocks` blocks of outputs on `sms` SMs:
/// 8 (blocks of 256 threads, six an SM by their shared memory) where the blocks fill every
/// SM's six, else 32 (blocks of 1024, two an SM: four times the threads where the outputs
/// are few).
fn col_threads(blocks: u64, sms: u32) -> u8 {
    if blocks >= 6 * sms as u64 {
        8
    } else {
        32
    }
}

/// Tier 1's group kernel of an expression reduction (`ptx::RedShape`), where tier 1 runs
/// it: whether it launched. Takes float outputs of programs tier 1 compiles, one reduced
/// dimension and at least one element; the caller launches the interpreter's final kernel
/// after it where `g.groups > 1` (the scratch's accumulators are the interpreter's).
///
/// # Safety
/// As the interpreter's group kernel (`expr::reduce`): `g`'s invariants hold for `ptrs`
/// (operand `k`'s address at its base element, output first) and `scratch`; `stream` is a
/// live stream of the gpu's context.
pub(crate) unsafe fn launch_reduce(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    g: &strided_apply_expr::reduce::Geometry,
    ptrs: &[u64],
    scratch: u64,
    later: &mut Deferred,
) -> Result<bool> {
    use gpu_kernels::elem::ElemType;
    use strided_apply_expr::reduce::{chunk, SLOTS};
    use strided_apply_expr::value::elem_of;
    let ops = 1 + p.n_inputs as usize;
    let out = elem_of(p.out);
    let nkept = g.nkept as usize;
    if tier() == Tier::Interpret
        || g.n == 0
        || g.nred != 1
        || !(1..=g.kept.len()).contains(&nkept)
        || ptrs.len() < ops
        || !ptx::supports_reduce(p)
        || !ptx::reduce_takes(out)
    {
        return Ok(false);
    }
    let w = chunk(out.size()) as i64;
    let (mut unit, mut bcast) = (0u16, 0u16);
    // The column shape: every input read along the reduced axis has a stride other than 1
    // along it and unit stride along kept dimension 0, of at least 16 outputs (so a warp
    // reads consecutive elements); `f32` accumulators.
    let mut cols = out != ElemType::F64 && g.kept[0].d >= 16;
    let mut read = false;
    for k in 1..ops {
        let rs = g.red_strides[k - 1][0] as i32;
        let size = elem_of(p.inputs[k - 1]).size() as i64;
        // A chunk of `w` elements of unit stride is read as vectors where every chunk's
        // first element is aligned to its bytes (at most 16): the base, and each kept
        // stride of a dimension of more than one output (chunks start at multiples of `w`).
        let align = (w * size).min(16);
        let aligned = ptrs[k] as i64 % align == 0
            && (0..nkept).all(|d| {
                g.kept[d].d == 1 || (g.kept_strides[k][d] as i32 as i64 * size) % align == 0
            });
        if rs == 0 {
            bcast |= 1 << k;
        } else {
            read = true;
            cols &= rs != 1 && g.kept_strides[k][0] == 1;
            if rs == 1 && aligned {
                unit |= 1 << k;
            }
        }
    }
    let col_y = if cols && read {
        cols_knob().unwrap_or_else(|| {
            col_threads(
                g.outputs.div_ceil(ptx::COL_X) as u64 * g.groups as u64,
                gpu.sm_count(),
            )
        })
    } else {
        0
    };
    let shape = Shape::Reduce(ptx::RedShape {
        op: g.fold(strided_apply_expr::Class::F32).op,
        shift: g.row_shift as u8,
        nkept: nkept as u8,
        unit,
        bcast,
        per: per_knob().unwrap_or_else(|| ptx::RedShape::per_for(g.n, w as u32)),
        col_y,
    });
    let Some(f) = function(gpu, stream, p, shape, later)? else {
        return Ok(false);
    };
    let Some(grp) = FastDiv::new(g.groups) else {
        return Ok(false);
    };
    let mut slots: Vec<u64> = ptrs[..ops].to_vec();
    let kc_at = slots.len();
    slots.extend([g.n, g.group_len, g.groups, g.outputs].map(u64::from));
    slots.extend([grp.d, grp.magic, grp.shift].map(u64::from));
    for d in &g.kept[..nkept - 1] {
        slots.extend([d.d, d.magic, d.shift].map(u64::from));
    }
    for k in 0..ops {
        slots.extend(g.kept_strides[k][..nkept].iter().map(|&s| s as u64));
    }
    slots.extend((1..ops).map(|k| g.red_strides[k - 1][0] as u64));
    slots.push(scratch);
    let mut params = Params {
        slots,
        consts: p.consts,
        kc_at,
    };
    let Shape::Reduce(r) = shape else {
        return Ok(false);
    };
    let Ok(grid) = u32::try_from(r.blocks(g.outputs, g.groups)) else {
        return Ok(false);
    };
    let launch = LaunchShape {
        grid,
        block: if r.col_y != 0 {
            (ptx::COL_X, r.col_y as u32)
        } else {
            (SLOTS, 1)
        },
        shared_bytes: 0,
    };
    // SAFETY: the parameter list is the one `ptx::reduce::module` declares (operand
    // addresses, constants, the geometry's sizes, divisions and strides, the scratch, in
    // that order); the kernel reads the offsets the geometry's invariants prove, vectors
    // only for the inputs `unit` names (aligned, checked above), and writes the outputs or
    // the scratch's `outputs * groups` accumulators; `r.blocks` blocks of `SLOTS` threads.
    unsafe { start(gpu, &f, launch, stream, &mut params) }?;
    Ok(true)
}

/// `STRIDED_APPLY_EXPR_LANES` (2, 4, 8 or 16): the vector shape's lanes for every
/// program, for measurements (read once); by default 16 bytes of the widest operand per
/// thread, 2 to 8 lanes.
/// `STRIDED_APPLY_EXPR_ONE_OP=1`: one-op programs take tier 1 on every layout, not only on
/// tiled ones (read once; for measurements against tier 0's one-op kernels).
fn one_op_knob() -> bool {
    static K: OnceLock<bool> = OnceLock::new();
    *K.get_or_init(|| std::env::var_os("STRIDED_APPLY_EXPR_ONE_OP").is_some_and(|v| v == "1"))
}

fn lanes_knob() -> Option<usize> {
    static L: OnceLock<Option<usize>> = OnceLock::new();
    *L.get_or_init(|| {
        std::env::var("STRIDED_APPLY_EXPR_LANES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|l: &usize| matches!(l, 2 | 4 | 8 | 16))
    })
}

/// The tiled shape of a 32-bit plan with an input transposed against the output
/// (`launch::tile_axes`) and its parameters past the constants: `(shape, tiles, 0, rest)`.
/// Paired when every operand has 2-byte elements and the output's and staged inputs'
/// pairs are aligned words.
fn tiled_layout<const N: usize>(
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
) -> Option<(Shape, u64, u64, Vec<u64>)> {
    let (g, staged_inputs) = crate::launch::tile_axes(plan)?;
    // `tile_axes` marks input k as bit k - 1; the shape marks operand k as bit k.
    let staged = (staged_inputs << 1) as u16;
    let is_staged = |k: usize| staged >> k & 1 != 0;
    let aligned = |k: usize, axis: usize| crate::launch::pairs_aligned(&g, k, axis, ptrs[k]);
    let pair = sizes.iter().all(|&s| s == 2)
        && aligned(0, 0)
        && (1..N).filter(|&k| is_staged(k)).all(|k| aligned(k, 1));
    let words = if pair {
        (1..N)
            .filter(|&k| !is_staged(k) && aligned(k, 0))
            .fold(0u16, |m, k| m | 1 << k)
    } else {
        0
    };
    // The stages are static shared memory: more than fits takes another shape.
    let stages: u32 = (1..N)
        .filter(|&k| is_staged(k))
        .map(|k| ptx::stage_bytes(pair, sizes[k]))
        .sum();
    if stages > ptx::STAGE_LIMIT {
        return None;
    }
    let side = ptx::tile_side(pair);
    let size = |d: usize| if d < g.ndim as usize { g.sizes[d] } else { 1 };
    let counts = [
        size(0).div_ceil(side),
        size(1).div_ceil(side),
        size(2),
        size(3),
    ];
    let tiles = counts.iter().map(|&c| c as u64).product::<u64>() * size(4) as u64;
    // Tile indices below 2^31 (the grid, and `FastDiv`'s range).
    if tiles == 0 || tiles > i32::MAX as u64 {
        return None;
    }
    let mut extra = Vec::new();
    for c in counts {
        div_params(&mut extra, c as u64)?;
    }
    extra.extend([size(0) as u64, size(1) as u64]);
    for k in 0..N {
        extra.extend((0..5).map(|d| {
            if d < g.ndim as usize {
                g.strides[k][d] as u64
            } else {
                0
            }
        }));
    }
    let shape = Shape::Tiled {
        pair,
        staged,
        words,
    };
    Some((shape, tiles, 0, extra))
}

/// The kernel shape of a 32-bit plan and its parameters past the constants: `(shape, n,
/// tail, rest)` (`tail` only for the vector shape).
/// Threads of a block of the vector shape.
const VECTOR_BLOCK: u32 = 128;

/// Vectors per thread of the one-dimensional vector shape ([`Shape::Vector`]'s `per`) for
/// `n` vectors, `reads` of the inputs read as vectors (the others broadcast), on `sms` SMs:
/// a program that reads one input takes 8 (or 4) where the threads still fill every SM
/// (2048 threads each), else 1. Eight vectors a thread keep eight times the bytes in flight
/// a thread: a program of some length (`gelu`'s tanh form over bf16) otherwise holds each
/// thread's single load behind its arithmetic, and the memory system waits. Programs of
/// more inputs already have as many loads in flight, and their vectors held at once take
/// the registers of the threads (`benches/NOTES.md`, "Bytes in flight").
fn vector_per(n: u64, reads: u32, sms: u32) -> u8 {
    let fills = |per: u64| n >= per * 2048 * sms as u64;
    match reads {
        0 | 1 if fills(8) => 8,
        0 | 1 if fills(4) => 4,
        _ => 1,
    }
}

/// `STRIDED_APPLY_EXPR_VECTORS` (1, 2, 4 or 8): the vectors a thread of the one-dimensional
/// vector shape takes, for every launch, for measurements (read once).
fn vectors_knob() -> Option<u8> {
    static V: OnceLock<Option<u8>> = OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("STRIDED_APPLY_EXPR_VECTORS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|v: &u8| matches!(v, 1 | 2 | 4 | 8))
    })
}

fn layout<const N: usize>(
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
    sms: u32,
) -> Option<(Shape, u64, u64, Vec<u64>)> {
    let widest = sizes.iter().copied().max().unwrap_or(4).max(1);
    let lanes = lanes_knob().unwrap_or((16 / widest).clamp(2, 8));
    let aligned = |k: usize| ptrs[k].is_multiple_of((lanes * sizes[k]) as u64);
    if plan.variant == Variant::Contig && (0..N).all(aligned) {
        let n = plan.numel / lanes as u64;
        let shape = Shape::Vector {
            lanes: lanes as u8,
            bcast: 0,
            rows: false,
            per: vectors_knob().unwrap_or_else(|| vector_per(n, N as u32 - 1, sms)),
        };
        return Some((shape, n, plan.numel % lanes as u64, Vec::new()));
    }
    let plan = &*plan.strided();
    let ndim = plan.ndim;
    if (1..=2).contains(&ndim) && plan.strides[0][0] == 1 && aligned(0) {
        let mut bcast = 0u16;
        let mut fits = true;
        for k in 1..N {
            match plan.strides[k][0] {
                0 => bcast |= 1 << k,
                1 if aligned(k) => {}
                _ => fits = false,
            }
        }
        let rows = ndim == 2;
        let n0 = plan.sizes[0];
        if rows {
            fits &= n0.is_multiple_of(lanes as u64)
                && (0..N).all(|k| bcast >> k & 1 != 0 || plan.strides[k][1] % lanes as i64 == 0);
        }
        if fits {
            let shape = Shape::Vector {
                lanes: lanes as u8,
                bcast,
                rows,
                per: if rows {
                    1
                } else {
                    let reads = N as u32 - 1 - (bcast >> 1).count_ones();
                    vectors_knob().unwrap_or_else(|| vector_per(n0 / lanes as u64, reads, sms))
                },
            };
            if rows {
                let per_row = n0 / lanes as u64;
                let mut extra = Vec::new();
                div_params(&mut extra, per_row)?;
                extra.extend((0..N).map(|k| plan.strides[k][1] as i32 as u32 as u64));
                return Some((shape, per_row * plan.sizes[1], 0, extra));
            }
            return Some((shape, n0 / lanes as u64, n0 % lanes as u64, Vec::new()));
        }
    }
    let rank = ndim.max(1);
    let mut extra = Vec::new();
    for d in 0..rank - 1 {
        div_params(&mut extra, plan.sizes[d])?;
    }
    for k in 0..N {
        extra.extend((0..rank).map(|d| plan.strides[k][d] as i32 as u32 as u64));
    }
    Some((Shape::Strided { rank: rank as u8 }, plan.numel, 0, extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long one-dimensional launches of programs reading one input as vectors take eight or
    /// four vectors a thread where the threads still fill every SM (a 2^28-element bf16
    /// `gelu`: 2^25 vectors, eight a thread); shorter ones, and programs of more inputs, one.
    #[test]
    fn long_launches_of_one_input_take_more_vectors_a_thread() {
        let sms = 132;
        assert_eq!(vector_per(1 << 25, 1, sms), 8);
        assert_eq!(vector_per(8 * 2048 * 132, 1, sms), 8);
        assert_eq!(vector_per(8 * 2048 * 132 - 1, 1, sms), 4);
        assert_eq!(vector_per(4 * 2048 * 132, 0, sms), 4);
        assert_eq!(vector_per(4 * 2048 * 132 - 1, 1, sms), 1);
        assert_eq!(vector_per(1 << 20, 1, sms), 1);
        assert_eq!(vector_per(1 << 25, 2, sms), 1);
        assert_eq!(vector_per(1 << 25, 3, sms), 1);
        assert_eq!(vector_per(0, 1, 1), 1);
    }

    /// Columns take 8 threads along the slots where their blocks fill six an SM, else 32
    /// (columns of 32768 of `reduce_rows_expr`: 8192 outputs, 256 blocks on 132 SMs).
    #[test]
    fn few_column_blocks_take_more_threads_along_the_slots() {
        assert_eq!(col_threads(256, 132), 32);
        assert_eq!(col_threads(6 * 132 - 1, 132), 32);
        assert_eq!(col_threads(6 * 132, 132), 8);
        assert_eq!(col_threads(8192, 132), 8);
    }

    /// `out = f(a, bᵀ)` over a 128 × 256 output: the tiled shape, paired for 2-byte operands
    /// whose pairs are aligned words, element tiles otherwise; a dense plan is not tiled.
    #[test]
    fn transposed_plans_take_the_tiled_shape_paired_where_aligned() {
        use crate::layout::Layout;
        let out = Layout::contiguous(&[128, 256]).expect("layout");
        let bt = Layout::contiguous(&[256, 128])
            .and_then(|l| l.transpose(0, 1))
            .expect("layout");
        let p: Plan<3> = crate::plan::plan([&out, &out, &bt], ["out", "a", "b"]).expect("plan");
        let tiled = |ptrs: [u64; 3], sizes: [usize; 3]| {
            tiled_layout(&p, &ptrs, &sizes).map(|(shape, tiles, _, extra)| (shape, tiles, extra))
        };
        let b_staged = |pair, words| Shape::Tiled {
            pair,
            staged: 0b100,
            words,
        };
        let (shape, tiles, extra) = tiled([0x1000, 0x2000, 0x3000], [2; 3]).expect("tiled");
        let paired = b_staged(true, 0b010);
        assert_eq!((shape, tiles), (paired, 4 * 2));
        // Four divisions, the two sizes, five strides per operand.
        assert_eq!(extra.len(), 4 * 3 + 2 + 3 * 5);
        assert_eq!(&extra[12..14], &[256, 128]);
        // b starting one element off a word: element tiles.
        let (shape, tiles, _) = tiled([0x1000, 0x2000, 0x3002], [2; 3]).expect("tiled");
        let elements = b_staged(false, 0);
        assert_eq!((shape, tiles), (elements, 8 * 4));
        // a only off a word: still paired, a read element by element.
        let (shape, _, _) = tiled([0x1000, 0x2002, 0x3000], [2; 3]).expect("tiled");
        assert_eq!(shape, b_staged(true, 0));
        // 4-byte operands: element tiles.
        let (shape, _, _) = tiled([0x1000, 0x2000, 0x3000], [4; 3]).expect("tiled");
        assert_eq!(shape, elements);
        // Eight staged f64 inputs would need 66 KB of stages: another shape.
        let p9: Plan<9> = crate::plan::plan(
            [&out, &bt, &bt, &bt, &bt, &bt, &bt, &bt, &bt],
            ["out", "a", "b", "c", "d", "e", "f", "g", "h"],
        )
        .expect("plan");
        assert!(tiled_layout(&p9, &[0x1000; 9], &[8; 9]).is_none());
        assert!(
            tiled_layout(&p9, &[0x1000; 9], &[4; 9]).is_some(),
            "33 KB fits"
        );
        let dense: Plan<3> =
            crate::plan::plan([&out, &out, &out], ["out", "a", "b"]).expect("plan");
        assert!(tiled_layout(&dense, &[0x1000, 0x2000, 0x3000], &[4; 3]).is_none());
    }

    #[test]
    fn the_tier_comes_from_the_environment_value() {
        assert_eq!(tier_from(None), Tier::Auto);
        assert_eq!(tier_from(Some("0")), Tier::Interpret);
        assert_eq!(tier_from(Some(" 1 ")), Tier::Compile);
        assert_eq!(tier_from(Some("2")), Tier::Auto);
    }

    #[test]
    fn a_chosen_tier_holds_inside_and_is_restored_after_even_on_unwind() {
        assert_eq!(CHOSEN.with(|c| c.get()), None);
        with_tier(Some(Tier::Compile), || {
            assert_eq!(tier(), Tier::Compile);
            with_tier(Some(Tier::Interpret), || {
                assert_eq!(tier(), Tier::Interpret)
            });
            assert_eq!(tier(), Tier::Compile);
            assert_eq!(BATCH.with(|b| b.borrow().0), 1);
        });
        assert_eq!(CHOSEN.with(|c| c.get()), None);
        let r = std::panic::catch_unwind(|| with_tier(Some(Tier::Compile), || panic!("unwinds")));
        assert!(r.is_err());
        assert_eq!(CHOSEN.with(|c| c.get()), None);
        assert_eq!(
            BATCH.with(|b| b.borrow().0),
            0,
            "the batch closed on unwind"
        );
    }

    #[test]
    fn targets_follow_the_device_up_to_sm_90() {
        assert_eq!(target((6, 1)), None);
        assert_eq!(target((7, 0)), Some(70));
        assert_eq!(target((8, 6)), Some(86));
        assert_eq!(target((9, 0)), Some(90));
        assert_eq!(target((12, 0)), Some(90));
    }

    #[test]
    fn the_library_text_keeps_only_the_called_functions() {
        let lib = "\
.visible .func  (.param .b32 func_retval0) t1_sin_f32(
\t.param .b32 t1_sin_f32_param_0,
\t.param .b32 t1_sin_f32_param_1
)
{
\tcall.uni (r), __internal_helper, (a);
\tret;
}
\t// .globl\tt1_cos_f32
.global .align 4 .b8 table[2] = {1, 2};
.func  (.param .b32 func_retval0) __internal_helper(
\t.param .b32 p
)
{
\tret;
}
.visible .func  (.param .b32 func_retval0) t1_cos_f32(
\t.param .b32 t1_cos_f32_param_0
)
{
\tret;
}
.visible .entry expr_t1lib_all(
)
{
\tret;
}
";
        let e = super::super::Expr::parse("sin(a) * 2").expect("parses");
        let c = e
            .compile(
                &[(
                    "a",
                    super::super::Arg::Tensor(gpu_kernels::elem::ElemType::F32),
                )],
                None,
            )
            .expect("compiles");
        let text = lib_for(c.program(), lib);
        assert!(text.contains("t1_sin_f32("), "{text}");
        assert!(!text.contains("t1_cos_f32"), "{text}");
        assert!(!text.contains("expr_t1lib_all"), "{text}");
        assert!(
            text.contains("__internal_helper("),
            "called functions too: {text}"
        );
        assert!(
            text.contains(".global .align 4 .b8 table"),
            "data too: {text}"
        );
    }
}
