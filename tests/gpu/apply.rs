//! Pointwise ops against the CPU twin: the conformance table, accuracy against f64, random
//! layouts, step-2 views, tiles of narrow and wide types over batch axes, empty tensors.

use crate::common::random::{random_case, Limits};
use crate::common::{cases, random_vec, Rng, TestElem};
use crate::errors::{estr, expect_err};
use crate::harness::{knob, TestResult};
use crate::op_table;
use strided_apply::ops::{self, Accuracy};
use strided_apply::verify::{self, Distance};
use strided_apply::{
    api, DeviceTensor, Error, Gpu, Kernels1, Kernels2, Kernels3, Kernels4, Layout,
};

macro_rules! gpu_check {
    ($fn:ident, $trait:ident, $verify:path, $k:literal, [$($x:ident: $t:ident),*]) => {
        fn $fn<Op, O: TestElem $(, $t: TestElem)*>(gpu: &Gpu, op: Op, name: &str, rng: &mut Rng) -> Result<usize, String>
        where Op: $trait<O $(, $t)*> + Accuracy {
            let all = cases($k);
            for case in &all {
                let mut _i = 0;
                $(
                    let $x: Vec<$t> = random_vec(rng, case.inputs[_i].len);
                    let $x = (&$x[..], &case.inputs[_i].layout);
                    _i += 1;
                )*
                // apply1 updates its operand: start from random values, not poison.
                let init: Vec<O> = if $k == 0 { random_vec(rng, case.out.len) } else { vec![O::poison(); case.out.len] };
                match $verify(gpu, op, (&init, &case.out.layout) $(, $x)*) {
                    Ok(None) => {}
                    Ok(Some(m)) => return Err(format!("{name} / {}: {m}", case.name)),
                    Err(e) => return Err(format!("{name} / {}: {e}", case.name)),
                }
            }
            Ok(all.len())
        }
    };
}
gpu_check!(gpu1, Kernels1, verify::apply1, 0, []);
gpu_check!(gpu2, Kernels2, verify::apply2, 1, [a: A]);
gpu_check!(gpu3, Kernels3, verify::apply3, 2, [a: A, b: B]);
gpu_check!(gpu4, Kernels4, verify::apply4, 3, [a: A, b: B, c: C]);

pub fn conformance(gpu: &Gpu) -> TestResult {
    let mut rng = Rng(0xc0ffee);
    let mut count = 0usize;
    let mut failures = Vec::new();
    macro_rules! run {
        ($k:tt, $name:expr, $op:expr, $($t:ty),+) => {{
            let r = match $k {
                1 => run!(@call gpu1, $op, $name, $($t),+),
                2 => run!(@call gpu2, $op, $name, $($t),+),
                3 => run!(@call gpu3, $op, $name, $($t),+),
                _ => run!(@call gpu4, $op, $name, $($t),+),
            };
            match r {
                Ok(n) => count += n,
                Err(e) => failures.push(e),
            }
        }};
        (@call $f:ident, $op:expr, $name:expr, $($t:ty),+) => { run!(@arity $f, $op, $name; $($t),+) };
        (@arity gpu1, $op:expr, $name:expr; $o:ty) => { gpu1::<_, $o>(gpu, $op, $name, &mut rng) };
        (@arity gpu2, $op:expr, $name:expr; $o:ty, $a:ty) => { gpu2::<_, $o, $a>(gpu, $op, $name, &mut rng) };
        (@arity gpu3, $op:expr, $name:expr; $o:ty, $a:ty, $b:ty) => { gpu3::<_, $o, $a, $b>(gpu, $op, $name, &mut rng) };
        (@arity gpu4, $op:expr, $name:expr; $o:ty, $a:ty, $b:ty, $c:ty) => {
            gpu4::<_, $o, $a, $b, $c>(gpu, $op, $name, &mut rng)
        };
        (@arity $f:ident, $op:expr, $name:expr; $($t:ty),+) => { unreachable!() };
    }
    op_table!(run);
    if failures.is_empty() {
        Ok(format!("{count} (op, type, layout) cases, GPU = CPU twin"))
    } else {
        Err(format!(
            "{} of the (op, types) rows failed; first: {}",
            failures.len(),
            failures[0]
        ))
    }
}

pub fn accuracy(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::*;
    let mut rng = Rng(11);
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|_| (rng.unit() * 20.0 - 10.0) as f32).collect();
    let y: Vec<f32> = (0..n).map(|_| (rng.unit() * 6.0 - 3.0) as f32).collect();
    let dx = DeviceTensor::from_slice(gpu, &x, &[n]).map_err(|e| e.to_string())?;
    let dy = DeviceTensor::from_slice(gpu, &y, &[n]).map_err(|e| e.to_string())?;
    let mut report = Vec::new();
    macro_rules! unary {
        ($op:expr, $name:literal, $bound:expr, $f:expr) => {{
            let mut out = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(|e| e.to_string())?;
            api::apply2(gpu, $op, &mut out, &dx).map_err(|e| e.to_string())?;
            let got = out.to_vec(gpu).map_err(|e| e.to_string())?;
            let worst = x
                .iter()
                .zip(&got)
                .map(|(&a, &g)| f32::distance(g, ($f)(a as f64) as f32))
                .max()
                .unwrap_or(0);
            report.push(format!("{} {worst} ulp", $name));
            if worst > $bound {
                return Err(format!(
                    "{}: {worst} ulp from f64 (bound {})",
                    $name, $bound
                ));
            }
        }};
    }
    unary!(Exp, "exp", 2, f64::exp);
    unary!(Log, "log", 2, f64::ln);
    unary!(Sin, "sin", 2, f64::sin);
    unary!(Cos, "cos", 2, f64::cos);
    unary!(Tanh, "tanh", 2, f64::tanh);
    unary!(Sigmoid, "sigmoid", 3, |a: f64| 1.0 / (1.0 + (-a).exp()));
    unary!(Sqrt, "sqrt", 0, f64::sqrt);
    unary!(Rsqrt, "rsqrt", 1, |a: f64| 1.0 / a.sqrt());
    let mut out = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(|e| e.to_string())?;
    api::apply3(gpu, Pow, &mut out, &dx, &dy).map_err(|e| e.to_string())?;
    let got = out.to_vec(gpu).map_err(|e| e.to_string())?;
    let worst = (0..n)
        .map(|i| f32::distance(got[i], (x[i] as f64).powf(y[i] as f64) as f32))
        .max()
        .unwrap_or(0);
    report.push(format!("pow {worst} ulp"));
    if worst > 2 {
        return Err(format!("pow: {worst} ulp from f64 (bound 2)"));
    }
    Ok(format!("f32 vs f64 reference, max: {}", report.join(", ")))
}

/// Step-2 views whose last element is the last element of their buffer (no slack after
/// it), 1-D and in rows, f32 and f64, with and without a tail: the vectorised variant's
/// whole-vector loads must not read past the view (compute-sanitizer's memcheck would
/// report it), and every result equals the CPU twin.
pub fn step2_views_ending_at_buffer_end(gpu: &Gpu) -> TestResult {
    use strided_apply::{cpu, ops, Layout};
    fn one<T: TestElem + PartialEq + std::fmt::Debug>(
        gpu: &Gpu,
        rng: &mut Rng,
        shape: &[usize],
        row_stride: usize,
    ) -> Result<(), String>
    where
        ops::Add: Kernels3<T, T, T> + strided_apply::ops::Op3<T, T, T>,
        ops::Cast: Kernels2<T, T>,
    {
        let e = |e: Error| e.to_string();
        let (rows, cols) = match shape {
            [n] => (1, *n),
            [r, c] => (*r, *c),
            _ => return Err("shape must have 1 or 2 axes".into()),
        };
        let strides: Vec<isize> = match shape.len() {
            1 => vec![2],
            _ => vec![row_stride as isize, 2],
        };
        let len = (rows - 1) * row_stride + 2 * cols - 1;
        let view = Layout::new(shape, &strides, 0).map_err(e)?;
        let dense = Layout::contiguous(shape).map_err(e)?;
        let a_host: Vec<T> = random_vec(rng, len);
        let b_host: Vec<T> = random_vec(rng, rows * cols);
        let a = DeviceTensor::from_slice(gpu, &a_host, &[len])
            .and_then(|t| t.with_layout(view.clone()))
            .map_err(e)?;
        let b = DeviceTensor::from_slice(gpu, &b_host, shape).map_err(e)?;
        let poison = vec![T::poison(); rows * cols];
        let mut out = DeviceTensor::from_slice(gpu, &poison, shape).map_err(e)?;
        api::apply3(gpu, ops::Add, &mut out, &a, &b).map_err(e)?;
        let got = out.to_vec(gpu).map_err(e)?;
        let mut want = vec![T::poison(); rows * cols];
        cpu::apply3(
            ops::Add,
            (&mut want, &dense),
            (&a_host, &view),
            (&b_host, &dense),
        )
        .map_err(e)?;
        match got.iter().zip(&want).position(|(g, w)| g != w) {
            None => Ok(()),
            Some(i) => Err(format!(
                "{} shape {shape:?} row stride {row_stride}: element {i}: GPU {:?}, CPU {:?}",
                T::NAME,
                got[i],
                want[i]
            )),
        }
    }
    let mut rng = Rng(0x5732);
    let mut cases = 0;
    for n in [1, 3, 4, 8, 12, 1000, 1001, 4096, 65536 + 5] {
        one::<f32>(gpu, &mut rng, &[n], 0)?;
        one::<f64>(gpu, &mut rng, &[n], 0)?;
        cases += 2;
    }
    // Rows: the row stride keeps rows 16-byte aligned (a multiple of 4 elements).
    for (rows, cols, rs) in [(3, 4, 8), (5, 8, 20), (64, 256, 516), (7, 12, 24)] {
        one::<f32>(gpu, &mut rng, &[rows, cols], rs)?;
        one::<f64>(gpu, &mut rng, &[rows, cols], rs)?;
        cases += 2;
    }
    Ok(format!(
        "{cases} step-2 views ending at their buffer's end, GPU = CPU twin"
    ))
}

/// `Ok` where `got` equals `want` bit for bit, else the first mismatch, named by `what`.
fn check_exact<T: TestElem>(what: &str, got: &[T], want: &[T]) -> Result<(), String> {
    match verify::first_mismatch(got, want, strided_apply::ops::Tolerance::Exact) {
        None => Ok(()),
        Some(m) => Err(format!("{} {what}: {m}", T::NAME)),
    }
}

/// `out = a + b` and `out = b * a`, `b` a view of a buffer of `len` elements and `a` the
/// view `a` of its own buffer (dense like `out` where `None`); then `out += b` (apply2,
/// reads its output) and `out = b` (a copy).
#[allow(clippy::too_many_arguments)]
fn tiled_case<T: TestElem>(
    gpu: &Gpu,
    rng: &mut Rng,
    what: &str,
    out: &Layout,
    view: &Layout,
    len: usize,
    a: Option<(&Layout, usize)>,
) -> Result<(), String>
where
    ops::Add: Kernels3<T, T, T> + ops::Op3<T, T, T>,
    ops::Mul: Kernels3<T, T, T> + ops::Op3<T, T, T>,
    ops::Update<ops::Add>: Kernels2<T, T> + ops::Op2<T, T>,
    ops::Cast: Kernels2<T, T> + ops::Op2<T, T>,
{
    use strided_apply::cpu;
    use strided_apply::ops::{Add, Cast, Mul, Update};
    let e = |e: Error| format!("{} {what}: {e}", T::NAME);
    let n = out.numel();
    let (a_host, a_view): (Vec<T>, Layout) = match a {
        Some((l, len)) => (random_vec(rng, len), l.clone()),
        None => (random_vec(rng, n), out.clone()),
    };
    let b_host: Vec<T> = random_vec(rng, len);
    let a = DeviceTensor::from_slice(gpu, &a_host, &[a_host.len()])
        .and_then(|t| t.with_layout(a_view.clone()))
        .map_err(e)?;
    let b = DeviceTensor::from_slice(gpu, &b_host, &[len])
        .and_then(|t| t.with_layout(view.clone()))
        .map_err(e)?;
    let start: Vec<T> = random_vec(rng, n);
    let mut o = DeviceTensor::from_slice(gpu, &start, &[n])
        .and_then(|t| t.with_layout(out.clone()))
        .map_err(e)?;
    let mut want = start.clone();
    api::apply3(gpu, Add, &mut o, &a, &b).map_err(e)?;
    cpu::apply3(Add, (&mut want, out), (&a_host, &a_view), (&b_host, view)).map_err(e)?;
    check_exact(
        &format!("{what}: a + b"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )?;
    api::apply3(gpu, Mul, &mut o, &b, &a).map_err(e)?;
    cpu::apply3(Mul, (&mut want, out), (&b_host, view), (&a_host, &a_view)).map_err(e)?;
    check_exact(
        &format!("{what}: b * a"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )?;
    api::apply2(gpu, Update(Add), &mut o, &b).map_err(e)?;
    cpu::apply2(Update(Add), (&mut want, out), (&b_host, view)).map_err(e)?;
    check_exact(
        &format!("{what}: out += b"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )?;
    api::apply2(gpu, Cast, &mut o, &b).map_err(e)?;
    cpu::apply2(Cast, (&mut want, out), (&b_host, view)).map_err(e)?;
    check_exact(
        &format!("{what}: out = b"),
        &o.buffer_to_vec(gpu).map_err(e)?,
        &want,
    )
}

/// The tiled variant with 2-byte operands: transposes and permutations of f16 and bf16 with
/// one and two staged inputs, broadcast inputs, an op that reads its output (`out += bᵀ`),
/// whole tiles (apply2's 128 × 128, apply3's 64 × 64) beside edge tiles (sizes not
/// multiples of 64, odd sizes; apply2's element form runs in quarters), and the layouts a
/// paired form (two elements per 4-byte access; `benches/NOTES.md`, "Tiles") must take
/// element by element: a view starting at an odd element, an odd stride, a reversed
/// unit-stride axis, a column broadcast. Every result equals the CPU twin bit for bit.
pub fn two_byte_tiles(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Cast, Mul, Update};
    use strided_apply::{bf16, f16, Layout};
    fn all<T: TestElem>(gpu: &Gpu, rng: &mut Rng) -> Result<usize, String>
    where
        Add: Kernels3<T, T, T> + strided_apply::ops::Op3<T, T, T>,
        Mul: Kernels3<T, T, T> + strided_apply::ops::Op3<T, T, T>,
        Update<Add>: Kernels2<T, T> + strided_apply::ops::Op2<T, T>,
        Cast: Kernels2<T, T> + strided_apply::ops::Op2<T, T>,
    {
        let e = |e: Error| e.to_string();
        let dense = |shape: &[usize]| Layout::contiguous(shape).map_err(e);
        let mut cases = 0;
        let mut run =
            |what: String, out: &Layout, b: &Layout, len: usize, a: Option<(&Layout, usize)>| {
                cases += 1;
                tiled_case::<T>(gpu, rng, &what, out, b, len, a)
            };
        // Transposes: out [r, c], b = B[c, r]ᵀ (odd sizes: a pair cut by the tile's edge).
        let sizes = [
            (64, 64),
            (128, 96),
            (130, 66),
            (2, 200),
            (66, 2),
            (2, 2),
            (100, 37),
        ];
        // Several whole tiles, and whole ones beside edge tiles (apply2's 128 × 128 tiles of
        // which only some quarters are inside).
        let whole = [(128, 128), (256, 200), (300, 260)];
        for (r, c) in sizes.into_iter().chain([(37, 100), (63, 64)]).chain(whole) {
            let (out, n) = (dense(&[r, c])?, r * c);
            let bt = dense(&[c, r])?.permute(&[1, 0]).map_err(e)?;
            run(format!("[{r}, {c}] + bT"), &out, &bt, n, None)?;
            run(format!("[{r}, {c}] aT + bT"), &out, &bt, n, Some((&bt, n)))?;
            // Broadcasts: a column (stride 0 along the output's unit axis), a row.
            let col = dense(&[r, 1])?;
            run(
                format!("[{r}, {c}] column + bT"),
                &out,
                &bt,
                n,
                Some((&col, r)),
            )?;
            let row = dense(&[1, c])?;
            run(
                format!("[{r}, {c}] row + bT"),
                &out,
                &bt,
                n,
                Some((&row, c)),
            )?;
            // Reversed along its slow axis (still words), along its unit axis (elements).
            for d in 0..2 {
                let rev = bt.flip(d).map_err(e)?;
                run(format!("[{r}, {c}] + bT flip({d})"), &out, &rev, n, None)?;
            }
        }
        // A view starting at an odd element (every pair misaligned), one with an odd row
        // stride (elements), one aligned.
        for (start, pitch) in [(1usize, 130usize), (2, 129), (2, 130)] {
            let (r, c) = (96, 64);
            let len = start + (r - 1) + (c - 1) * pitch + 1;
            let bt = Layout::new(&[r, c], &[1, pitch as isize], start).map_err(e)?;
            let what = format!("offset {start}, pitch {pitch}");
            run(what, &dense(&[r, c])?, &bt, len, None)?;
        }
        // Permuted copies (and adds) of 4-D views, batch axes beyond the tile.
        for (shape, perm) in [
            ([8usize, 6, 10, 12], [3usize, 1, 0, 2]),
            ([4, 66, 3, 70], [3, 1, 0, 2]),
            ([2, 3, 64, 130], [0, 1, 3, 2]),
            ([5, 7, 9, 11], [3, 1, 0, 2]),
            // The bench's permutation, small: whole 128 × 128 tiles of apply2, both rounds
            // of phase 2, batch axes in the input's order.
            ([2, 3, 128, 256], [3, 1, 0, 2]),
        ] {
            let src = dense(&shape)?.permute(&perm).map_err(e)?;
            let len = shape.iter().product();
            run(
                format!("{shape:?} permuted {perm:?}"),
                &dense(src.shape())?,
                &src,
                len,
                None,
            )?;
        }
        Ok(cases)
    }
    let mut rng = Rng(0x9a17);
    let cases = all::<f16>(gpu, &mut rng)? + all::<bf16>(gpu, &mut rng)?;
    Ok(format!(
        "{cases} layouts × 4 ops (a + b, b * a, out += b, out = b), f16 and bf16, GPU = CPU twin"
    ))
}

/// The tiled variant over batch axes for every element size a tile stages (1, 2, 4, 8
/// bytes): permuted 3-D and 4-D views through apply2 (64 × 64 tiles) and apply3 (32 × 32),
/// the staged input's unit axis a whole number of tiles for both, for one, for neither; that
/// axis reversed; a second input broadcast over the batch. Every result equals the CPU twin
/// bit for bit.
pub fn tiled_batches(gpu: &Gpu) -> TestResult {
    use strided_apply::{bf16, ops::*};
    fn all<T: TestElem>(gpu: &Gpu, rng: &mut Rng) -> Result<usize, String>
    where
        Add: Kernels3<T, T, T> + Op3<T, T, T>,
        Mul: Kernels3<T, T, T> + Op3<T, T, T>,
        Update<Add>: Kernels2<T, T> + Op2<T, T>,
        Cast: Kernels2<T, T> + Op2<T, T>,
    {
        let e = |e: Error| e.to_string();
        let dense = |shape: &[usize]| Layout::contiguous(shape).map_err(e);
        let mut cases = 0;
        for (shape, perm) in [
            // The bench's permutation, small: axis p = 256 (4 tiles of 64, 8 of 32).
            (vec![2usize, 3, 128, 256], vec![3usize, 1, 0, 2]),
            // 3-D: the input's unit axis 128 (whole tiles), one batch axis.
            (vec![5, 192, 128], vec![2, 0, 1]),
            // 96: whole tiles for apply3's 32-wide tiles, not for apply2's 64.
            (vec![3, 70, 96], vec![2, 0, 1]),
            // 200: no whole number of tiles for either.
            (vec![4, 66, 200], vec![2, 0, 1]),
        ] {
            let len = shape.iter().product();
            let src = dense(&shape)?.permute(&perm).map_err(e)?;
            let out = dense(src.shape())?;
            let flipped = src.flip(0).map_err(e)?;
            for (what, view) in [("", &src), (" flip(0)", &flipped)] {
                let what = format!("{shape:?} permuted {perm:?}{what}");
                cases += 1;
                tiled_case::<T>(gpu, rng, &what, &out, view, len, None)?;
            }
            // `a` broadcast over every axis but the output's unit axis and the next.
            let mut bshape = src.shape().to_vec();
            let nd = bshape.len();
            bshape[..nd - 2].iter_mut().for_each(|s| *s = 1);
            let row = dense(&bshape)?;
            let row = row.broadcast_to(src.shape()).map_err(e)?;
            cases += 1;
            tiled_case::<T>(
                gpu,
                rng,
                &format!("{shape:?} permuted {perm:?}, a broadcast"),
                &out,
                &src,
                len,
                Some((&row, bshape.iter().product())),
            )?;
        }
        Ok(cases)
    }
    let mut rng = Rng(0x7c17);
    let cases = all::<u8>(gpu, &mut rng)?
        + all::<bf16>(gpu, &mut rng)?
        + all::<f32>(gpu, &mut rng)?
        + all::<f64>(gpu, &mut rng)?;
    Ok(format!(
        "{cases} layouts × 4 ops (a + b, b * a, out += b, out = b), u8, bf16, f32, f64, GPU = CPU twin"
    ))
}

/// Empty tensors are valid and launch nothing: on a handle with no module registered, an
/// empty op succeeds (a launch would fail with ModuleNotRegistered), of any rank, typed and
/// raw (a null pointer is fine when nothing is reached).
pub fn empty_tensors(_gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Neg};
    use strided_apply::raw::{self, RawTensor};
    use strided_apply::ElemType;
    let bare = Gpu::new(0).map_err(estr)?;
    let mut shapes: Vec<Vec<usize>> = vec![vec![0], vec![3, 0], vec![0, 5, 7]];
    // Rank above the maximum with no mergeable axes, empty.
    shapes.push((0..30).map(|d| if d == 7 { 0 } else { 2 }).collect());
    for shape in &shapes {
        let a = DeviceTensor::<f32>::zeros(&bare, shape).map_err(estr)?;
        let mut out = DeviceTensor::<f32>::zeros(&bare, shape).map_err(estr)?;
        api::apply3(&bare, Add, &mut out, &a, &a).map_err(|e| format!("empty {shape:?}: {e}"))?;
    }
    let (shape, strides) = ([4usize, 0], [1isize, 1]);
    let t = |ptr| RawTensor {
        ptr,
        elem: ElemType::F32,
        shape: &shape,
        strides: &strides,
    };
    // SAFETY: nothing is reached (0 elements).
    unsafe { raw::apply2::<_, f32, f32>(&bare, None, Neg, t(0), t(0)) }.map_err(estr)?;
    // A non-empty op on the same handle does try to launch.
    let a = DeviceTensor::<f32>::zeros(&bare, &[2]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(&bare, &[2]).map_err(estr)?;
    expect_err(api::apply2(&bare, Neg, &mut out, &a), "non-empty", |e| {
        matches!(e, Error::ModuleNotRegistered { .. })
    })?;
    Ok(format!(
        "{} empty shapes, typed and raw, no launch",
        shapes.len()
    ))
}

macro_rules! gpu_random {
    ($fn:ident, $trait:ident, $verify:path, $k:literal, [$($x:ident: $t:ident),*]) => {
        /// One random case (common::random) of an op, GPU against the CPU twin.
        fn $fn<Op, O: TestElem $(, $t: TestElem)*>(gpu: &Gpu, op: Op, name: &str, rng: &mut Rng) -> Result<(), String>
        where Op: strided_apply::ops::Accuracy + $trait<O $(, $t)*> {
            let case = random_case(rng, $k, GPU_LIMITS);
            let mut _i = 0;
            $(
                let $x: Vec<$t> = random_vec(rng, case.inputs[_i].len);
                let $x = (&$x[..], &case.inputs[_i].layout);
                _i += 1;
            )*
            let init: Vec<O> = if $k == 0 { random_vec(rng, case.out.len) } else { vec![O::poison(); case.out.len] };
            match $verify(gpu, op, (&init, &case.out.layout) $(, $x)*) {
                Ok(None) => Ok(()),
                Ok(Some(m)) => Err(format!("{name}: {m}; case {case:?}")),
                Err(e) => Err(format!("{name}: {e}; case {case:?}")),
            }
        }
    };
}
gpu_random!(random1, Kernels1, verify::apply1, 0, []);
gpu_random!(random2, Kernels2, verify::apply2, 1, [a: A]);
gpu_random!(random3, Kernels3, verify::apply3, 2, [a: A, b: B]);
gpu_random!(random4, Kernels4, verify::apply4, 3, [a: A, b: B, c: C]);

const GPU_LIMITS: Limits = Limits { max_numel: 1 << 13 };

/// Rows of the op table.
fn op_rows() -> usize {
    let mut rows = 0;
    macro_rules! count {
        ($($t:tt)*) => {
            rows += 1
        };
    }
    #[allow(unused_imports, unused_variables)] // the table's `use`s and bindings
    {
        op_table!(count);
    }
    rows
}

/// One random (layout, op, types) case from `seed`: a random row of the op table on a
/// random case of `common::random`.
fn random_case_on_gpu(gpu: &Gpu, seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed | 1);
    let pick = rng.below(op_rows() as u64) as usize;
    let mut row = 0usize;
    let mut result: Option<Result<(), String>> = None;
    macro_rules! run {
        (1, $name:expr, $op:expr, $t:ty) => { run!(@row random1::<_, $t>(gpu, $op, $name, &mut rng)) };
        (2, $name:expr, $op:expr, $o:ty, $a:ty) => { run!(@row random2::<_, $o, $a>(gpu, $op, $name, &mut rng)) };
        (3, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty) => {
            run!(@row random3::<_, $o, $a, $b>(gpu, $op, $name, &mut rng))
        };
        (4, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty, $c:ty) => {
            run!(@row random4::<_, $o, $a, $b, $c>(gpu, $op, $name, &mut rng))
        };
        (@row $call:expr) => {{
            if row == pick {
                result = Some($call);
            }
            row += 1;
        }};
    }
    op_table!(run);
    let _ = row;
    result.unwrap_or_else(|| Err(format!("row {pick} not in the table")))
}

/// ≥ 100k random (layout, op, type) cases, GPU against the CPU twin. The seed is printed;
/// `STRIDED_APPLY_SEED` replays a run, `STRIDED_APPLY_GPU_CASES` sets the count.
pub fn random_layouts(gpu: &Gpu) -> TestResult {
    let seed = std::env::var("STRIDED_APPLY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let cases = knob("STRIDED_APPLY_GPU_CASES", 100_000);
    println!("  random_layouts: STRIDED_APPLY_SEED={seed} STRIDED_APPLY_GPU_CASES={cases}");
    let mut master = Rng(seed | 1);
    for i in 0..cases {
        let case_seed = master.next();
        random_case_on_gpu(gpu, case_seed).map_err(|e| {
            format!("case {i} (seed {case_seed}; run seed STRIDED_APPLY_SEED={seed}): {e}")
        })?;
    }
    Ok(format!("{cases} random cases, GPU = CPU twin, seed {seed}"))
}
