//! Stencil conformance on the CPU: the CPU twin (the kernels' own stencil body over the
//! host plan) against a naive coordinate-by-coordinate reference, on contiguous,
//! transposed, sliced, reversed and broadcast inputs and transposed outputs, every border
//! included; plus the typed errors. (In-place refusal needs two views of one buffer,
//! which safe host slices cannot express: `tests/gpu/stencil.rs` checks it with device tensors.) Inputs are small integers stored as floats, so any
//! summation order gives the exact result and comparisons are exact.

use crate::common::stencil::{input_layouts, output_layouts};
use strided_apply::gpu_kernels::stencil::{
    BackwardDiff, ForwardDiff, Laplacian2, Laplacian3, Shift, Stencil,
};
use strided_apply::{stencil, Error, Layout};

/// A stencil written against `at(dx, dy, dz)`, the clamped neighbour read.
type Formula = dyn Fn(&dyn Fn(i64, i64, i64) -> f64) -> f64;

/// Element offset of multi-index `idx` in `l` (broadcast axes of size 1 read index 0).
fn offset(l: &Layout, idx: &[usize]) -> usize {
    let mut o = l.offset() as isize;
    for ((&i, &n), &s) in idx.iter().zip(l.shape()).zip(l.strides()) {
        let i = if n == 1 { 0 } else { i };
        o += i as isize * s;
    }
    o as usize
}

/// All multi-indices of `shape` in row-major order.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut all = vec![vec![]];
    for &n in shape {
        all = all
            .into_iter()
            .flat_map(|p| {
                (0..n).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    all
}

/// The naive reference: `f(at)` where `at(dx, dy, dz)` reads the input at the clamped
/// neighbour along the frame axes `axes` (x, y, z).
fn naive(
    shape: &[usize],
    out: &Layout,
    out_len: usize,
    input: (&[f64], &Layout),
    axes: &[usize],
    f: &Formula,
) -> Vec<f64> {
    let mut res = vec![f64::NAN; out_len];
    for idx in indices(shape) {
        let at = |dx: i64, dy: i64, dz: i64| {
            let mut j = idx.clone();
            for (k, &a) in axes.iter().enumerate() {
                let d = [dx, dy, dz][k];
                j[a] = (idx[a] as i64 + d).clamp(0, shape[a] as i64 - 1) as usize;
            }
            input.0[offset(input.1, &j)]
        };
        res[offset(out, &idx)] = f(&at);
    }
    res
}

fn check<S: Stencil<f64> + Copy>(
    name: &str,
    op: S,
    axes: &[usize],
    shape: &[usize],
    f: &Formula,
) -> usize {
    let mut cases = 0;
    let mut seed = 0x5eed_u64;
    for (in_name, li, in_len) in input_layouts(shape) {
        let input: Vec<f64> = (0..in_len)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 33) % 41) as f64 - 20.0
            })
            .collect();
        for (out_name, lo) in output_layouts(shape) {
            let n: usize = shape.iter().product();
            let mut got = vec![f64::NAN; n];
            stencil::apply_cpu(op, (&mut got, &lo), (&input, &li), axes)
                .unwrap_or_else(|e| panic!("{name} {shape:?} axes {axes:?} {in_name}: {e}"));
            let expect = naive(shape, &lo, n, (&input, &li), axes, f);
            assert_eq!(
                got, expect,
                "{name} {shape:?} axes {axes:?}, {in_name} input, {out_name}"
            );
            cases += 1;
        }
    }
    cases
}

#[test]
fn stencils_match_the_naive_reference_on_every_layout() {
    let fwd = |at: &dyn Fn(i64, i64, i64) -> f64| at(1, 0, 0) - at(0, 0, 0);
    let bwd = |at: &dyn Fn(i64, i64, i64) -> f64| at(0, 0, 0) - at(-1, 0, 0);
    let lap2 = |at: &dyn Fn(i64, i64, i64) -> f64| {
        at(1, 0, 0) + at(-1, 0, 0) + at(0, 1, 0) + at(0, -1, 0) - 4.0 * at(0, 0, 0)
    };
    let lap3 = |at: &dyn Fn(i64, i64, i64) -> f64| {
        at(1, 0, 0) + at(-1, 0, 0) + at(0, 1, 0) + at(0, -1, 0) + at(0, 0, 1) + at(0, 0, -1)
            - 6.0 * at(0, 0, 0)
    };
    let mut cases = 0;
    for shape in [&[9usize][..], &[5, 7], &[4, 6, 3], &[3, 4, 5, 2]] {
        let rank = shape.len();
        for axis in 0..rank {
            cases += check("ForwardDiff", ForwardDiff, &[axis], shape, &fwd);
            cases += check("BackwardDiff", BackwardDiff, &[axis], shape, &bwd);
        }
        cases += check(
            "Shift<-1,0,0>",
            Shift::<-1, 0, 0>,
            &[rank - 1],
            shape,
            &|at| at(-1, 0, 0),
        );
        if rank >= 2 {
            cases += check(
                "Laplacian2",
                Laplacian2,
                &[rank - 1, rank - 2],
                shape,
                &lap2,
            );
            cases += check(
                "Laplacian2 (axes 0, last)",
                Laplacian2,
                &[0, rank - 1],
                shape,
                &lap2,
            );
            cases += check(
                "Shift<0,1,0>",
                Shift::<0, 1, 0>,
                &[rank - 1, 0],
                shape,
                &|at| at(0, 1, 0),
            );
        }
        if rank >= 3 {
            cases += check(
                "Laplacian3",
                Laplacian3,
                &[rank - 1, rank - 2, rank - 3],
                shape,
                &lap3,
            );
            cases += check(
                "Laplacian3 (permuted axes)",
                Laplacian3,
                &[0, 2, 1],
                shape,
                &lap3,
            );
            cases += check(
                "Shift<0,0,-1>",
                Shift::<0, 0, -1>,
                &[2, 1, 0],
                shape,
                &|at| at(0, 0, -1),
            );
        }
    }
    println!("{cases} stencil cases (op, shape, axes, input layout, output layout)");
    assert!(cases > 300, "only {cases} cases ran");
}

#[test]
fn bad_stencil_calls_are_typed_errors() {
    let l = Layout::contiguous(&[4, 5]).unwrap();
    let a = vec![0.0f64; 20];
    let mut o = vec![0.0f64; 20];
    let err = |axes: &[usize], o: &mut Vec<f64>| {
        stencil::apply_cpu(ForwardDiff, (o, &l), (&a, &l), axes).unwrap_err()
    };
    for (axes, what) in [
        (&[][..], "1 to 3 frame axes"),
        (&[2][..], "out of range"),
        (&[1, 1][..], "named twice"),
        (&[0, 1, 0, 1][..], "1 to 3 frame axes"),
    ] {
        let e = err(axes, &mut o);
        assert!(
            matches!(
                e,
                Error::InvalidView {
                    operand: "axes",
                    ..
                }
            ) && e.to_string().contains(what),
            "axes {axes:?}: {e}"
        );
    }
    // Input that does not broadcast to the output.
    let l3 = Layout::contiguous(&[3]).unwrap();
    let e = stencil::apply_cpu(ForwardDiff, (&mut o, &l), (&a[..3], &l3), &[1]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Broadcast {
                operand: "input",
                ..
            }
        ),
        "{e}"
    );
    // Input view outside its buffer.
    let e = stencil::apply_cpu(ForwardDiff, (&mut o, &l), (&a[..19], &l), &[1]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfBounds {
                operand: "input",
                ..
            }
        ),
        "{e}"
    );
    // Output mapping two indices to one element.
    let bad = Layout::new(&[4, 5], &[0, 1], 0).unwrap();
    let e = stencil::apply_cpu(ForwardDiff, (&mut o, &bad), (&a, &l), &[1]).unwrap_err();
    assert!(matches!(e, Error::OverlappingOutput { .. }), "{e}");
    // Too many batch axes that do not merge: 7 dimensions, every other one skipped.
    let shape = [2usize; 7];
    let wide = Layout::contiguous(&[4usize; 7]).unwrap();
    let mut strided = wide.clone();
    for a in 0..7 {
        strided = strided.slice(a, None, None, 2).unwrap();
    }
    assert_eq!(strided.shape(), shape);
    let big = vec![0.0f64; 4usize.pow(7)];
    let mut out = vec![0.0f64; 128];
    let e = stencil::apply_cpu(
        ForwardDiff,
        (&mut out, &Layout::contiguous(&shape).unwrap()),
        (&big, &strided),
        &[6],
    )
    .unwrap_err();
    assert!(matches!(e, Error::RankTooHigh { .. }), "{e}");
    // Empty tensors are valid and do nothing.
    let e0 = Layout::contiguous(&[0, 5]).unwrap();
    stencil::apply_cpu::<_, f64>(ForwardDiff, (&mut [], &e0), (&[], &e0), &[1]).unwrap();
}

/// Run-time dispatch of stencils (`DynStencil`): every registered family runs on the CPU
/// twin over raw host addresses and equals the typed CPU twin bit for bit, on a transposed
/// input; unknown ids, missing element types and bad calls are typed errors.
#[test]
fn stencils_by_id_equal_the_typed_twin() {
    use strided_apply::dispatch::FromScalars;
    use strided_apply::raw::RawTensor;
    use strided_apply::stencil::{stencil_instances, DynStencil};
    use strided_apply::ElemType;
    let (rows, cols) = (7usize, 9usize);
    let input: Vec<f32> = (0..rows * cols)
        .map(|v| ((v * 37) % 23) as f32 - 11.0)
        .collect();
    // The input seen transposed: shape [cols, rows].
    let lt = Layout::new(&[cols, rows], &[1, cols as isize], 0).unwrap();
    let lo = Layout::contiguous(&[cols, rows]).unwrap();
    let axes = [1usize, 0];
    fn raw(ptr: u64, elem: ElemType, l: &Layout) -> RawTensor<'_> {
        RawTensor {
            ptr,
            elem,
            shape: l.shape(),
            strides: l.strides(),
        }
    }
    fn typed<S: Stencil<f32> + FromScalars>(
        out: &mut [f32],
        lo: &Layout,
        input: &[f32],
        lt: &Layout,
        axes: &[usize],
    ) {
        let op = S::from_scalars(&[]).expect("built-in stencils take no scalars");
        stencil::apply_cpu(op, (out, lo), (input, lt), axes).unwrap();
    }
    let mut checked = Vec::new();
    for inst in stencil_instances().filter(|i| i.elem == ElemType::F32) {
        let mut want = vec![f32::NAN; rows * cols];
        match inst.op {
            "lap2" => typed::<Laplacian2>(&mut want, &lo, &input, &lt, &axes),
            "lap3" => typed::<Laplacian3>(&mut want, &lo, &input, &lt, &axes),
            "fdiff" => typed::<ForwardDiff>(&mut want, &lo, &input, &lt, &axes),
            "bdiff" => typed::<BackwardDiff>(&mut want, &lo, &input, &lt, &axes),
            "shift_xp" => typed::<Shift<1, 0, 0>>(&mut want, &lo, &input, &lt, &axes),
            "shift_xm" => typed::<Shift<-1, 0, 0>>(&mut want, &lo, &input, &lt, &axes),
            "shift_yp" => typed::<Shift<0, 1, 0>>(&mut want, &lo, &input, &lt, &axes),
            "shift_ym" => typed::<Shift<0, -1, 0>>(&mut want, &lo, &input, &lt, &axes),
            "shift_zp" => typed::<Shift<0, 0, 1>>(&mut want, &lo, &input, &lt, &axes),
            "shift_zm" => typed::<Shift<0, 0, -1>>(&mut want, &lo, &input, &lt, &axes),
            other => panic!("a built-in stencil this test does not know: {other}"),
        }
        let mut got = vec![f32::NAN; rows * cols];
        let op = DynStencil::new(inst.op, ElemType::F32).unwrap();
        let (o, i) = (got.as_mut_ptr() as u64, input.as_ptr() as u64);
        // SAFETY: both addresses are live host vectors of f32 covering their layouts.
        unsafe {
            op.run_cpu_raw(
                raw(o, ElemType::F32, &lo),
                raw(i, ElemType::F32, &lt),
                &axes,
            )
        }
        .unwrap();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{}",
            inst.op
        );
        checked.push(inst.op);
    }
    checked.sort_unstable();
    assert_eq!(checked.len(), 10, "f32 stencil families: {checked:?}");
    // Every family of the built-in list is registered: 10 stencils × f32, f64, f16, bf16.
    assert_eq!(stencil_instances().count(), 40);

    let e = DynStencil::new("lap9", ElemType::F32).unwrap_err();
    assert!(
        matches!(e, Error::UnknownOp { .. }) && e.to_string().contains("lap2"),
        "{e}"
    );
    let e = DynStencil::new("lap2", ElemType::I32).unwrap_err();
    assert!(
        matches!(e, Error::NotInstantiated { .. }) && e.to_string().contains("f32"),
        "{e}"
    );
    // An input of another element type, and an output that overlaps the input.
    let op = DynStencil::new("lap2", ElemType::F32).unwrap();
    let mut out = vec![0.0f32; rows * cols];
    let (o, i) = (out.as_mut_ptr() as u64, input.as_ptr() as u64);
    // SAFETY: live host vectors covering the layouts (the calls fail before any access).
    let e = unsafe {
        op.run_cpu_raw(
            raw(o, ElemType::F32, &lo),
            raw(i, ElemType::F64, &lt),
            &axes,
        )
    }
    .unwrap_err();
    assert!(
        matches!(e, Error::TypeMismatch { .. }) && e.to_string().contains("input"),
        "{e}"
    );
    // SAFETY: as above.
    let e = unsafe {
        op.run_cpu_raw(
            raw(o, ElemType::F32, &lo),
            raw(o, ElemType::F32, &lt),
            &axes,
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::StencilOverlap { .. }), "{e}");
}

#[test]
fn the_planner_takes_the_tiled_body_for_warp_wide_32_bit_frames() {
    let plan = |shape: &[usize], axes: &[usize]| {
        let l = Layout::contiguous(shape).unwrap();
        stencil::plan_stencil(&l, &l, axes).unwrap()
    };
    // x (the first frame axis) 32 or more positions wide, 32-bit offsets: tiled.
    let p = plan(&[64, 32], &[1, 0]);
    assert!(p.index32 && p.tiled, "{p:?}");
    assert!(plan(&[8, 40, 3], &[1, 2]).tiled);
    // A narrow x takes the generic body, whatever the other axes.
    assert!(!plan(&[64, 31], &[1, 0]).tiled);
    assert!(!plan(&[4096, 8], &[1]).tiled);
    // Offsets beyond 32 bits: a broadcast input keeps the buffer small, the output's span
    // (2^31 + 32 elements) needs 64-bit indices, so the generic 64-bit body.
    let big = Layout::new(&[1 << 26, 33], &[33, 1], 0).unwrap();
    let row = Layout::new(&[1 << 26, 33], &[0, 1], 0).unwrap();
    let p = stencil::plan_stencil(&big, &row, &[1]).unwrap();
    assert!(!p.index32 && !p.tiled, "{p:?}");
}
