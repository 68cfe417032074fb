//! The CPU twin (`strided_apply::cpu::apply2` / `apply3`) against ndarray's
//! `Zip::par_for_each` on the same shapes, the same input buffers and rayon's global pool
//! (neither side builds a pool of its own; `RAYON_NUM_THREADS` sets both).
//!
//! ```sh
//! cargo bench --bench cpu_twin -- --warm-up-time 1 --measurement-time 3
//! CPU_TWIN_SUMMARY=only cargo bench --bench cpu_twin   # only the interleaved table
//! ```
//!
//! Two parts:
//! 1. criterion groups, one per shape, with the functions `twin` and `ndarray`;
//! 2. a summary table: per shape, `CPU_TWIN_ROUNDS` rounds (default 15), each timing the
//!    twin and ndarray back to back (alternating which goes first), then the median of each
//!    side and the twin's speed as a fraction of ndarray's (`ndarray ms / twin ms`; ≥ 1 means
//!    the twin is as fast or faster). Interleaving keeps load from other processes from
//!    favouring one side. The table is printed and written to `target/cpu_twin_summary.md`.
//!
//! `CPU_TWIN_SUMMARY=0` skips the table, `=only` skips criterion; `CPU_TWIN_FILTER=text`
//! keeps the shapes whose name contains `text` (both parts). Each case is built only when
//! it runs, and both outputs are checked equal before it is timed.

use criterion::{black_box, Criterion};
use ndarray::{s, ArrayView, ArrayViewMut, Zip};
use std::sync::Arc;
use std::time::Instant;
use strided_apply::ops::{Add, Cast};
use strided_apply::{cpu, Layout};

/// Deterministic pseudo-random values (xorshift), so both sides read the same data.
fn data<T>(len: usize, seed: u64, f: impl Fn(u64) -> T) -> Arc<Vec<T>> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Arc::new(
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                f(x)
            })
            .collect(),
    )
}
fn f32s(len: usize, seed: u64) -> Arc<Vec<f32>> {
    data(len, seed, |x| (x >> 40) as f32 / (1u64 << 24) as f32)
}
fn f64s(len: usize, seed: u64) -> Arc<Vec<f64>> {
    data(len, seed, |x| (x >> 11) as f64 / (1u64 << 53) as f64)
}
fn u8s(len: usize, seed: u64) -> Arc<Vec<u8>> {
    data(len, seed, |x| (x >> 56) as u8)
}

fn layout(shape: &[usize]) -> Layout {
    Layout::contiguous(shape).expect("layout")
}

/// One shape, type-erased.
trait Bench {
    fn twin(&mut self);
    fn ndarray(&mut self);
    /// Both outputs equal.
    fn agree(&self) -> bool;
}

/// One side of a shape: writes its output buffer from the shared inputs.
type Side<T> = Box<dyn Fn(&mut [T])>;

/// Both sides of one shape, each with its own output buffer.
struct Pair<T> {
    out_twin: Vec<T>,
    out_nd: Vec<T>,
    twin: Side<T>,
    nd: Side<T>,
}

impl<T: PartialEq> Bench for Pair<T> {
    fn twin(&mut self) {
        (self.twin)(black_box(&mut self.out_twin));
    }
    fn ndarray(&mut self) {
        (self.nd)(black_box(&mut self.out_nd));
    }
    fn agree(&self) -> bool {
        self.out_twin == self.out_nd
    }
}

fn pair<T: Clone + Default + PartialEq + 'static>(
    len: usize,
    twin: impl Fn(&mut [T]) + 'static,
    nd: impl Fn(&mut [T]) + 'static,
) -> Box<dyn Bench> {
    Box::new(Pair {
        out_twin: vec![T::default(); len],
        out_nd: vec![T::default(); len],
        twin: Box::new(twin),
        nd: Box::new(nd),
    })
}

/// `c = a + b`, every operand dense with `len` elements.
macro_rules! contiguous {
    ($t:ty, $gen:ident, $len:expr, |$x:ident, $y:ident| $add:expr) => {{
        let len: usize = $len;
        let (a, b) = ($gen(len, 1), $gen(len, 2));
        let (a2, b2) = (a.clone(), b.clone());
        let l = layout(&[len]);
        pair::<$t>(
            len,
            move |c| cpu::apply3(Add, (c, &l), (&a, &l), (&b, &l)).unwrap(),
            move |c| {
                Zip::from(c)
                    .and(&a2[..])
                    .and(&b2[..])
                    .par_for_each(|c, &$x, &$y| *c = $add)
            },
        )
    }};
}

/// `[n, n] + [1, n]`.
macro_rules! broadcast_row {
    ($t:ty, $gen:ident, $n:expr, |$x:ident, $y:ident| $add:expr) => {{
        let n: usize = $n;
        let (a, b) = ($gen(n * n, 3), $gen(n, 4));
        let (a2, b2) = (a.clone(), b.clone());
        let (lc, lb) = (layout(&[n, n]), layout(&[1, n]));
        pair::<$t>(
            n * n,
            move |c| cpu::apply3(Add, (c, &lc), (&a, &lc), (&b, &lb)).unwrap(),
            move |c| {
                let c = ArrayViewMut::from_shape((n, n), c).unwrap();
                let a = ArrayView::from_shape((n, n), &a2[..]).unwrap();
                let b = ArrayView::from_shape((1, n), &b2[..]).unwrap();
                Zip::from(c)
                    .and(a)
                    .and_broadcast(b)
                    .par_for_each(|c, &$x, &$y| *c = $add)
            },
        )
    }};
}

/// `A + Bᵀ`, `[n, n]`, f32.
fn transposed(n: usize) -> Box<dyn Bench> {
    let (a, b) = (f32s(n * n, 5), f32s(n * n, 6));
    let (a2, b2) = (a.clone(), b.clone());
    let l = layout(&[n, n]);
    let lt = l.transpose(0, 1).unwrap();
    pair::<f32>(
        n * n,
        move |c| cpu::apply3(Add, (c, &l), (&a, &l), (&b, &lt)).unwrap(),
        move |c| {
            let c = ArrayViewMut::from_shape((n, n), c).unwrap();
            let a = ArrayView::from_shape((n, n), &a2[..]).unwrap();
            let b = ArrayView::from_shape((n, n), &b2[..]).unwrap();
            Zip::from(c)
                .and(a)
                .and(b.t())
                .par_for_each(|c, &x, &y| *c = x + y)
        },
    )
}

/// A dense (32,32,64,128) f32 tensor permuted (3,1,0,2), copied into a dense one.
fn permuted_copy() -> Box<dyn Bench> {
    let shape = [32usize, 32, 64, 128];
    let perm = [3usize, 1, 0, 2];
    let len = shape.iter().product();
    let a = f32s(len, 7);
    let a2 = a.clone();
    let la = layout(&shape).permute(&perm).unwrap();
    let lc = layout(la.shape());
    pair::<f32>(
        len,
        move |c| cpu::apply2(Cast, (c, &lc), (&a, &la)).unwrap(),
        move |c| {
            let a = ArrayView::from_shape(shape, &a2[..])
                .unwrap()
                .permuted_axes(perm);
            let c = ArrayViewMut::from_shape(a.raw_dim(), c).unwrap();
            Zip::from(c).and(a).par_for_each(|c, &x| *c = x)
        },
    )
}

/// `A[:, ::2] + B`, A `[n, 2n]`, B and the output `[n, n]`, f32.
fn slice_step2(n: usize) -> Box<dyn Bench> {
    let (a, b) = (f32s(2 * n * n, 8), f32s(n * n, 9));
    let (a2, b2) = (a.clone(), b.clone());
    let l = layout(&[n, n]);
    let la = layout(&[n, 2 * n]).slice(1, None, None, 2).unwrap();
    pair::<f32>(
        n * n,
        move |c| cpu::apply3(Add, (c, &l), (&a, &la), (&b, &l)).unwrap(),
        move |c| {
            let c = ArrayViewMut::from_shape((n, n), c).unwrap();
            let a = ArrayView::from_shape((n, 2 * n), &a2[..]).unwrap();
            let b = ArrayView::from_shape((n, n), &b2[..]).unwrap();
            Zip::from(c)
                .and(a.slice(s![.., ..;2]))
                .and(b)
                .par_for_each(|c, &x, &y| *c = x + y)
        },
    )
}

type Make = fn() -> Box<dyn Bench>;

/// Every shape, in table order.
fn shapes() -> Vec<(&'static str, usize, Make)> {
    vec![
        ("contiguous a+b f32 2^22", 1 << 22, || {
            contiguous!(f32, f32s, 1 << 22, |x, y| x + y)
        }),
        ("contiguous a+b f32 2^24", 1 << 24, || {
            contiguous!(f32, f32s, 1 << 24, |x, y| x + y)
        }),
        ("contiguous a+b f64 2^23", 1 << 23, || {
            contiguous!(f64, f64s, 1 << 23, |x, y| x + y)
        }),
        ("contiguous a+b u8 2^24", 1 << 24, || {
            contiguous!(u8, u8s, 1 << 24, |x, y| x.wrapping_add(y))
        }),
        ("broadcast row [4096,4096]+[1,4096] f32", 1 << 24, || {
            broadcast_row!(f32, f32s, 4096, |x, y| x + y)
        }),
        ("broadcast row [4096,4096]+[1,4096] u8", 1 << 24, || {
            broadcast_row!(u8, u8s, 4096, |x, y| x.wrapping_add(y))
        }),
        ("transposed A+B^T 2048^2 f32", 1 << 22, || transposed(2048)),
        ("transposed A+B^T 4096^2 f32", 1 << 24, || transposed(4096)),
        (
            "permuted copy (32,32,64,128)->(3,1,0,2) f32",
            1 << 23,
            permuted_copy,
        ),
        ("slice step 2 A[:, ::2]+B [4096,4096] f32", 1 << 24, || {
            slice_step2(4096)
        }),
    ]
}

fn build(name: &str, make: Make) -> Box<dyn Bench> {
    let mut case = make();
    case.twin();
    case.ndarray();
    assert!(case.agree(), "{name}: twin and ndarray outputs differ");
    case
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Milliseconds per call of `f`, over `reps` calls.
fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_secs_f64() * 1e3 / reps as f64
}

fn summary(shapes: &[(&'static str, usize, Make)]) {
    let rounds: usize = std::env::var("CPU_TWIN_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let threads = std::env::var("RAYON_NUM_THREADS").ok().unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get().to_string())
            .unwrap_or_else(|_| "?".into())
    });
    let mut table = format!(
        "rayon global pool, {threads} threads; median of {rounds} interleaved rounds \
         (each round ≥ 30 ms per side)\n\n\
         | shape | elements | twin ms | ndarray ms | twin speed / ndarray |\n\
         |---|---|---|---|---|\n"
    );
    for &(name, elems, make) in shapes {
        let mut case = build(name, make);
        // Calls per timed sample: enough for ~30 ms.
        let once = time(1, || case.twin()).max(time(1, || case.ndarray()));
        let reps = ((30.0 / once).ceil() as usize).max(1);
        let (mut tw, mut nd) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            if r % 2 == 0 {
                tw.push(time(reps, || case.twin()));
                nd.push(time(reps, || case.ndarray()));
            } else {
                nd.push(time(reps, || case.ndarray()));
                tw.push(time(reps, || case.twin()));
            }
        }
        assert!(case.agree(), "{name}: twin and ndarray outputs differ");
        let (tw, nd) = (median(tw), median(nd));
        let row = format!(
            "| {name} | {elems} | {tw:.3} | {nd:.3} | {:.2} |\n",
            nd / tw
        );
        print!("{row}");
        table.push_str(&row);
    }
    println!("\n{table}");
    let _ = std::fs::create_dir_all("target");
    if let Err(e) = std::fs::write("target/cpu_twin_summary.md", &table) {
        eprintln!("could not write target/cpu_twin_summary.md: {e}");
    }
}

fn main() {
    let filter = std::env::var("CPU_TWIN_FILTER").unwrap_or_default();
    let shapes: Vec<_> = shapes()
        .into_iter()
        .filter(|(name, _, _)| name.contains(&filter))
        .collect();
    let mode = std::env::var("CPU_TWIN_SUMMARY").unwrap_or_default();
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) criterion runs
    // each function once as a test and the summary is skipped.
    let benching = std::env::args().any(|a| a == "--bench");

    if mode != "only" {
        let mut c = Criterion::default().configure_from_args();
        for &(name, elems, make) in &shapes {
            let mut case = build(name, make);
            let mut g = c.benchmark_group(name);
            g.throughput(criterion::Throughput::Elements(elems as u64));
            g.bench_function("twin", |b| b.iter(|| case.twin()));
            g.bench_function("ndarray", |b| b.iter(|| case.ndarray()));
            g.finish();
        }
        c.final_summary();
    }
    if benching && mode != "0" {
        summary(&shapes);
    }
}
