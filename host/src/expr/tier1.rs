//! Tier 1: an expression compiled to machine code at run time by the CUDA driver alone.
//!
//! The code generator ([`ptx`](super::ptx)) writes the program as a PTX kernel for the
//! launch's layout shape (vectorised rows or any strides); the driver compiles it
//! (`cuModuleLoadData`: no NVRTC, no toolkit), and the module is kept per context, keyed by
//! the program (its constants are parameters, so a new scalar value compiles nothing) and
//! the shape. The driver's own compute cache keeps the machine code across processes
//! (`CUDA_CACHE_PATH`, `CUDA_CACHE_MAXSIZE`; `CUDA_CACHE_DISABLE=1` turns it off).
//!
//! `STRIDED_APPLY_EXPR_TIER` picks the tier: unset, the first launch of an expression and
//! shape runs on the interpreter (tier 0) while a thread compiles it, and later launches run
//! compiled once it is ready; `0` always interprets; `1` compiles on the calling thread and
//! waits (what the tests force). A compile that fails leaves that expression on tier 0 (logged
//! once), or with `1` is an error. While a stream is being captured into a CUDA graph, no
//! compile starts: a capture records tier 1 only for an expression compiled before it.

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

/// Runs `f` with `tier` (if any) as this thread's tier.
pub(crate) fn with_tier<R>(tier: Option<Tier>, f: impl FnOnce() -> R) -> R {
    let before = CHOSEN.with(|c| c.replace(tier));
    let r = f();
    CHOSEN.with(|c| c.set(before));
    r
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
    /// The library's PTX (its functions), read from the image once.
    lib: OnceLock<std::result::Result<String, String>>,
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

/// Reports a failed compile once per process.
fn log_once(reason: &str) {
    static LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "strided-apply: compiling an expression (tier 1) failed, it runs on the \
             interpreter: {reason}"
        );
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
    let mut wanted: Vec<&str> = p
        .code()
        .iter()
        .filter_map(|i| {
            let op = strided_apply_expr::Opcode::from_code(i.op)?;
            t1lib::name(op, strided_apply_expr::Class::from_code(i.class)?)
        })
        .collect();
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

/// The kernel for `p` and `shape`, compiled now on this thread.
fn compile(
    ctx: &Arc<CudaContext>,
    sm: u32,
    lib: &str,
    p: &Program,
    shape: Shape,
) -> std::result::Result<CudaFunction, String> {
    let text = ptx::module(p, shape, sm, lib);
    let module = ctx
        .load_module(cudarc::nvrtc::Ptx::from_src(text))
        .map_err(|e| format!("the driver refused the generated PTX: {e}"))?;
    module
        .load_function(ptx::KERNEL)
        .map_err(|e| format!("the compiled module has no kernel {}: {e}", ptx::KERNEL))
}

/// The library's text for `p` (empty when it calls none).
fn lib_text(gpu: &Gpu, p: &Program) -> std::result::Result<String, String> {
    if !ptx::calls_lib(p) {
        return Ok(String::new());
    }
    let lib = gpu.tier1().lib.get_or_init(|| {
        gpu.family_ptx(MODULE, t1lib::FAMILY)
            .map_err(|e| e.to_string())
    });
    lib.as_ref().map(|l| lib_for(p, l)).map_err(Clone::clone)
}

/// The kernel of `p` for `shape` where tier 1 has (or, forced, makes) one.
fn function(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    shape: Shape,
) -> Result<Option<CudaFunction>> {
    let mode = tier();
    if mode == Tier::Interpret || !ptx::supports(p) {
        return Ok(None);
    }
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
    let cache = gpu.tier1();
    match cache.get(&key) {
        Some(Entry::Ready(f)) => return Ok(Some(f)),
        Some(Entry::Failed(reason)) if mode == Tier::Compile => {
            return Err(Error::ExprCompile { reason })
        }
        Some(Entry::Failed(_)) => return Ok(None),
        Some(Entry::Compiling) if mode == Tier::Auto => return Ok(None),
        _ => {}
    }
    if mode == Tier::Auto {
        // No compile starts while the stream is captured (module loading is not allowed
        // then); the capture records the interpreter.
        // SAFETY: a query of a live stream of this context.
        let capturing =
            unsafe { cudarc::driver::result::stream::is_capturing(stream) }.is_ok_and(|s| {
                s != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
            });
        if capturing || !cache.claim(&key) {
            return Ok(None);
        }
        let lib = match lib_text(gpu, p) {
            Ok(l) => l,
            Err(reason) => {
                log_once(&reason);
                cache.set(key, Entry::Failed(reason));
                return Ok(None);
            }
        };
        let (ctx, cache, program) = (gpu.context().clone(), cache.clone(), key.program);
        std::thread::spawn(move || {
            let e = match compile(&ctx, sm, &lib, &program, shape) {
                Ok(f) => Entry::Ready(f),
                Err(reason) => {
                    log_once(&reason);
                    Entry::Failed(reason)
                }
            };
            cache.set(key, e);
        });
        return Ok(None);
    }
    let made = lib_text(gpu, p).and_then(|lib| compile(gpu.context(), sm, &lib, p, shape));
    match made {
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
/// it launched. Plans that tier 0 runs on its tiled kernels (an input transposed against the
/// output) stay there.
///
/// # Safety
/// As `device::launch_program`: `ptrs[k]` is operand `k`'s element at the plan's base, in
/// a buffer of `sizes[k]`-byte elements of `p`'s type for it, every offset of `plan` proved
/// in bounds; the aliasing rules hold; `stream` is a live stream of the gpu's context.
pub(crate) unsafe fn launch<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    plan: &Plan<N>,
    ptrs: [u64; N],
    sizes: [usize; N],
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
    if super::device::tiled_geometry(p, plan).is_some() {
        return Ok(false);
    }
    let Some((shape, n, tail, extra)) = layout(plan, &ptrs, &sizes) else {
        return Ok(false);
    };
    let Some(f) = function(gpu, stream, p, shape)? else {
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
        Shape::Vector { .. } => LaunchShape {
            grid: n.max(tail).div_ceil(128).max(1) as u32,
            block: (128, 1),
            shared_bytes: 0,
        },
        Shape::Strided { .. } => LaunchShape {
            grid: gpu.grid(n),
            block: (crate::gpu::BLOCK, 1),
            shared_bytes: 0,
        },
    };
    let mut args = params.pointers();
    gpu.context()
        .bind_to_thread()
        .map_err(crate::gpu::driver("binding the context"))?;
    // SAFETY: the parameter list is the one `ptx::module` declares for `shape` (operand
    // addresses, constants, n, the shape's parameters, built above in that order); the
    // kernel reads only offsets of `plan` (the vector shape: the contract `layout` checked);
    // the caller proved the pointers, the plan and the stream.
    unsafe {
        cudarc::driver::result::launch_kernel(
            f.cu_function(),
            (launch.grid, 1, 1),
            (launch.block.0, launch.block.1, 1),
            0,
            stream,
            &mut args,
        )
    }
    .map_err(|source| Error::Launch {
        kernel: ptx::KERNEL,
        source,
    })?;
    LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(true)
}

/// The kernel shape of a 32-bit plan and its parameters past the constants: `(shape, n,
/// tail, rest)` (`tail` only for the vector shape).
fn layout<const N: usize>(
    plan: &Plan<N>,
    ptrs: &[u64; N],
    sizes: &[usize; N],
) -> Option<(Shape, u64, u64, Vec<u64>)> {
    let widest = sizes.iter().copied().max().unwrap_or(4).max(1);
    let lanes = (16 / widest).clamp(2, 8);
    let aligned = |k: usize| ptrs[k].is_multiple_of((lanes * sizes[k]) as u64);
    if plan.variant == Variant::Contig && (0..N).all(aligned) {
        let n = plan.numel / lanes as u64;
        let shape = Shape::Vector {
            lanes: lanes as u8,
            bcast: 0,
            rows: false,
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

    #[test]
    fn the_tier_comes_from_the_environment_value() {
        assert_eq!(tier_from(None), Tier::Auto);
        assert_eq!(tier_from(Some("0")), Tier::Interpret);
        assert_eq!(tier_from(Some(" 1 ")), Tier::Compile);
        assert_eq!(tier_from(Some("2")), Tier::Auto);
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
