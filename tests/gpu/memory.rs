//! Device memory: the pool keeping and releasing freed memory, out of memory and back, and
//! 64-bit indexing over tensors of 2^31 elements and more (the `STRIDED_APPLY_BIG` tests).

use crate::errors::estr;
use crate::harness::TestResult;
use strided_apply::{api, DeviceTensor, Error, Gpu};

/// The device's memory pool keeps freed tensors mapped (the library's default), gives them
/// back on `release_cached_memory`, and at every synchronisation under a cache limit of 0.
pub fn memory_pool_keeps_then_releases(gpu: &Gpu) -> TestResult {
    const MIB256: u64 = 256 << 20;
    if !gpu.context().has_async_alloc() {
        let r = gpu.reserved_memory().map_err(estr)?;
        return match r {
            0 => Ok("device without memory pools: nothing reserved".into()),
            _ => Err(format!("no pool, yet {r} bytes reserved")),
        };
    }
    let alloc_drop = || -> Result<(), String> {
        let t = DeviceTensor::<u8>::zeros(gpu, &[MIB256 as usize]).map_err(estr)?;
        drop(t);
        gpu.synchronize().map_err(estr)
    };
    gpu.release_cached_memory().map_err(estr)?;
    let base = gpu.reserved_memory().map_err(estr)?;
    alloc_drop()?;
    let kept = gpu.reserved_memory().map_err(estr)?;
    if kept < base + MIB256 {
        return Err(format!("freed 256 MiB not kept: {base} -> {kept} bytes"));
    }
    gpu.release_cached_memory().map_err(estr)?;
    let released = gpu.reserved_memory().map_err(estr)?;
    if released > base {
        return Err(format!("not released: {kept} -> {released} (base {base})"));
    }
    gpu.set_memory_cache_limit(0).map_err(estr)?;
    let limited = alloc_drop().and_then(|()| gpu.reserved_memory().map_err(estr));
    gpu.set_memory_cache_limit(u64::MAX).map_err(estr)?;
    let limited = limited?;
    if limited > base {
        return Err(format!("cache limit 0 kept {limited} bytes (base {base})"));
    }
    Ok(format!(
        "reserved {} MiB, 256 MiB freed: {} MiB kept, {} MiB after release, {} MiB with limit 0",
        base >> 20,
        kept >> 20,
        released >> 20,
        limited >> 20
    ))
}

/// Allocates until the device is out of memory, checks the typed error, frees, and runs
/// an op successfully.
pub fn out_of_memory_then_recover(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::Neg;
    gpu.synchronize().map_err(estr)?;
    let mut held: Vec<DeviceTensor<u8>> = Vec::new();
    let mut err = None;
    let mut total = 0usize;
    'outer: for chunk in [8usize << 30, 1 << 30, 64 << 20] {
        for _ in 0..256 {
            match DeviceTensor::<u8>::zeros(gpu, &[chunk]) {
                Ok(t) => {
                    total += chunk;
                    held.push(t);
                }
                Err(e @ Error::OutOfMemory { .. }) => {
                    err = Some(e);
                    continue 'outer;
                }
                Err(e) => return Err(format!("allocating: {e:?}")),
            }
        }
        return Err(format!("no OutOfMemory after {total} bytes"));
    }
    let Some(e) = err else {
        return Err("no OutOfMemory".into());
    };
    if !e.to_string().contains("out of memory") {
        return Err(format!("message: {e}"));
    }
    let msg = e.to_string();
    drop(held);
    gpu.synchronize().map_err(estr)?;
    // The pool now caches what was freed, in chunks of 8 GiB, 1 GiB and 64 MiB; one tensor
    // of all but 1 GiB of it must still fit: the driver serves it from the cached chunks
    // (580.159 does), or the allocation gives the cache back and retries.
    let cached = gpu.reserved_memory().map_err(estr)?;
    let whole = total.saturating_sub(1 << 30).max(1);
    let t = DeviceTensor::<u8>::zeros(gpu, &[whole])
        .map_err(|e| format!("{whole} bytes after freeing {total} ({cached} cached): {e}"))?;
    drop(t);
    gpu.synchronize().map_err(estr)?;
    let a = DeviceTensor::from_slice(gpu, &[1.0f32, -2.0, 3.0], &[3]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(gpu, &[3]).map_err(estr)?;
    api::apply2(gpu, Neg, &mut out, &a).map_err(estr)?;
    if out.to_vec(gpu).map_err(estr)? != [-1.0, 2.0, -3.0] {
        return Err("wrong result after recovering from OOM".into());
    }
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    Ok(format!(
        "{:.1} GiB allocated, then `{msg}`; freed ({:.1} GiB cached), one tensor of {:.1} GiB, op ok",
        gib(total),
        gib(cached as usize),
        gib(whole)
    ))
}

/// `f(i)` for `i` in `0..n`, filled on all cores.
fn par_fill<T: Copy + Default + Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut v = vec![T::default(); n];
    let threads = std::thread::available_parallelism().map_or(8, |p| p.get());
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (c, part) in v.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (j, x) in part.iter_mut().enumerate() {
                    *x = f(c * chunk + j);
                }
            });
        }
    });
    v
}

/// The first `i` in `0..got.len()` where `got[i] != f(i)`, checked on all cores.
fn par_first_wrong<T: Copy + PartialEq + Sync>(
    got: &[T],
    f: impl Fn(usize) -> T + Sync,
) -> Option<usize> {
    let threads = std::thread::available_parallelism().map_or(8, |p| p.get());
    let chunk = got.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = got
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                let f = &f;
                s.spawn(move || {
                    part.iter()
                        .enumerate()
                        .find(|(j, &x)| x != f(c * chunk + j))
                        .map(|(j, _)| c * chunk + j)
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .min()
    })
}

fn variant_of<const N: usize>(layouts: [&strided_apply::Layout; N]) -> String {
    let names = ["out", "a", "b", "c"];
    strided_apply::plan::plan(layouts, std::array::from_fn(|k| names[k]))
        .map_or_else(|e| e.to_string(), |p| format!("{:?}", p.variant))
}

fn check_all<T: Copy + PartialEq + Sync + std::fmt::Debug>(
    what: &str,
    got: &[T],
    f: impl Fn(usize) -> T + Sync,
) -> Result<(), String> {
    match par_first_wrong(got, &f) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: element {i} is {:?}, expected {:?}",
            got[i],
            f(i)
        )),
    }
}

/// A 3 GiB u8 tensor (3 * 2^30 elements): contiguous (aligned, and from element 1),
/// transposed and broadcast, each element checked against its closed form.
pub fn index64_u8_3gib(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Rhs};
    let (m, k) = (3usize << 14, 1usize << 16);
    let n = m * k;
    let a = DeviceTensor::from_slice(gpu, &par_fill(n, |i| (i % 251) as u8), &[n]).map_err(estr)?;
    let mut out = DeviceTensor::<u8>::zeros(gpu, &[n]).map_err(estr)?;
    let plus1 = Rhs { op: Add, s: 1u8 };
    let mut report = Vec::new();
    api::apply2(gpu, plus1, &mut out, &a).map_err(estr)?;
    report.push(format!(
        "contiguous {}",
        variant_of([out.layout(), a.layout()])
    ));
    check_all("contiguous", &out.to_vec(gpu).map_err(estr)?, |i| {
        (i % 251) as u8 + 1
    })?;
    // Dense but not 16-byte aligned (both views start at element 1): one unit-stride axis
    // through `d1`, in 32-bit pieces.
    let (a1, mut o1) = (
        a.slice(0, Some(1), None, 1).map_err(estr)?,
        out.slice(0, Some(1), None, 1).map_err(estr)?,
    );
    api::apply2(gpu, Rhs { op: Add, s: 2u8 }, &mut o1, &a1).map_err(estr)?;
    report.push(format!(
        "unaligned {}",
        variant_of([o1.layout(), a1.layout()])
    ));
    check_all("unaligned", &out.to_vec(gpu).map_err(estr)?, |i| {
        (i % 251) as u8 + if i == 0 { 1 } else { 2 }
    })?;
    let at = a
        .reshape(&[m, k])
        .map_err(estr)?
        .transpose(0, 1)
        .map_err(estr)?;
    let mut ot = out.reshape(&[k, m]).map_err(estr)?;
    api::apply2(gpu, plus1, &mut ot, &at).map_err(estr)?;
    report.push(format!(
        "transposed {}",
        variant_of([ot.layout(), at.layout()])
    ));
    check_all("transposed", &ot.to_vec(gpu).map_err(estr)?, |x| {
        let (j, i) = (x / m, x % m);
        ((i * k + j) % 251) as u8 + 1
    })?;
    let row =
        DeviceTensor::from_slice(gpu, &par_fill(k, |j| (j % 13) as u8), &[k]).map_err(estr)?;
    let col = DeviceTensor::from_slice(gpu, &par_fill(m, |i| (i % 7) as u8 * 16), &[m, 1])
        .map_err(estr)?;
    let mut ob = out.reshape(&[m, k]).map_err(estr)?;
    api::apply3(gpu, Add, &mut ob, &row, &col).map_err(estr)?;
    report.push(format!(
        "broadcast {}",
        variant_of([ob.layout(), row.layout(), col.layout()])
    ));
    check_all("broadcast", &ob.to_vec(gpu).map_err(estr)?, |x| {
        let (i, j) = (x / k, x % k);
        (j % 13) as u8 + (i % 7) as u8 * 16
    })?;
    Ok(format!(
        "u8 [{m}, {k}] = {n} elements: {}",
        report.join(", ")
    ))
}

/// An f32 tensor of 2^31 + 7 elements: contiguous, transposed ([45, 47721859]ᵀ) and
/// broadcast, against closed forms (exact in f32).
pub fn index64_f32_2pow31_plus_7(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Mul, Rhs};
    let (p, q) = (45usize, 47_721_859usize);
    let n = p * q;
    debug_assert_eq!(n, (1 << 31) + 7);
    let a =
        DeviceTensor::from_slice(gpu, &par_fill(n, |i| (i % 4093) as f32), &[n]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(estr)?;
    let twice = Rhs { op: Mul, s: 2.0f32 };
    let mut report = Vec::new();
    api::apply2(gpu, twice, &mut out, &a).map_err(estr)?;
    report.push(format!(
        "contiguous {}",
        variant_of([out.layout(), a.layout()])
    ));
    check_all("contiguous", &out.to_vec(gpu).map_err(estr)?, |i| {
        2.0 * (i % 4093) as f32
    })?;
    let at = a
        .reshape(&[p, q])
        .map_err(estr)?
        .transpose(0, 1)
        .map_err(estr)?;
    let mut ot = out.reshape(&[q, p]).map_err(estr)?;
    api::apply2(gpu, twice, &mut ot, &at).map_err(estr)?;
    report.push(format!(
        "transposed {}",
        variant_of([ot.layout(), at.layout()])
    ));
    check_all("transposed", &ot.to_vec(gpu).map_err(estr)?, |x| {
        let (j, i) = (x / p, x % p);
        2.0 * ((i * q + j) % 4093) as f32
    })?;
    let row =
        DeviceTensor::from_slice(gpu, &par_fill(q, |j| (j % 1000) as f32), &[q]).map_err(estr)?;
    let col = DeviceTensor::from_slice(gpu, &par_fill(p, |i| (i * 1000) as f32), &[p, 1])
        .map_err(estr)?;
    let mut ob = out.reshape(&[p, q]).map_err(estr)?;
    api::apply3(gpu, Add, &mut ob, &row, &col).map_err(estr)?;
    report.push(format!(
        "broadcast {}",
        variant_of([ob.layout(), row.layout(), col.layout()])
    ));
    check_all("broadcast", &ob.to_vec(gpu).map_err(estr)?, |x| {
        let (i, j) = (x / q, x % q);
        (j % 1000) as f32 + (i * 1000) as f32
    })?;
    Ok(format!("f32 {n} elements: {}", report.join(", ")))
}

/// Reversed 1-D u8 views of 2^31 - 1, 2^31 and 2^31 + 1 elements (not contiguous, so a
/// `D` variant): the planner picks 32-bit D1 below the boundary and Dn64 from it on, and
/// every result is right; the element after the view is untouched.
pub fn index_width_boundary(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Rhs};
    let top = (1usize << 31) + 2;
    let a =
        DeviceTensor::from_slice(gpu, &par_fill(top, |i| (i % 253) as u8), &[top]).map_err(estr)?;
    let out = DeviceTensor::<u8>::zeros(gpu, &[top]).map_err(estr)?;
    let mut report = Vec::new();
    for n in [(1usize << 31) - 1, 1 << 31, (1 << 31) + 1] {
        let av = a
            .slice(0, Some(0), Some(n as isize), 1)
            .map_err(estr)?
            .flip(0)
            .map_err(estr)?;
        let mut ov = out.slice(0, Some(0), Some(n as isize), 1).map_err(estr)?;
        let v = variant_of([ov.layout(), av.layout()]);
        let want = if n <= i32::MAX as usize { "D1" } else { "Dn64" };
        if v != want {
            return Err(format!("{n} elements: planner chose {v}, expected {want}"));
        }
        api::apply2(gpu, Rhs { op: Add, s: 1u8 }, &mut ov, &av).map_err(estr)?;
        let got = out.buffer_to_vec(gpu).map_err(estr)?;
        check_all(&format!("{n} elements"), &got[..n], |i| {
            ((n - 1 - i) % 253) as u8 + 1
        })?;
        if got[n] != 0 {
            return Err(format!(
                "{n} elements: element {n} after the view was written"
            ));
        }
        report.push(format!("{n}: {v}"));
    }
    Ok(report.join(", "))
}
