//! The kernel a program and its layout take: the vectorised and tiled kernels' geometries,
//! the cheap kernel, the one-op kernels.

use super::*;

#[test]
fn the_vectorised_kernel_takes_aligned_unit_and_broadcast_dimensions_only() {
    use crate::expr::device::vector_geometry;
    use crate::plan::plan;
    let l =
        |shape: &[usize], strides: &[isize], off: usize| Layout::new(shape, strides, off).unwrap();
    let names = ["out", "a", "b"];
    // (out, a, b) layouts, element sizes, base addresses, lanes -> vectorised?
    let g = |ls: [&Layout; 3], sizes: [usize; 3], ptrs: [u64; 3], lanes: usize| {
        let p = plan(ls, names).unwrap();
        let v = vector_geometry(&p, &ptrs, &sizes, lanes);
        // A contiguous plan as it is, or as one strided unit axis: the same geometry.
        if p.variant == gpu_kernels::Variant::Contig {
            let flat = vector_geometry(&p.flat(), &ptrs, &sizes, lanes);
            assert_eq!(v, flat, "a dense plan as it is or flat");
        }
        v
    };
    let dense = l(&[6, 8], &[8, 1], 0);
    let row = l(&[6, 8], &[0, 1], 0);
    let col = l(&[6, 8], &[1, 0], 0);
    let aligned = [1024u64, 2048, 4096];
    // Contiguous: one dimension, a partial last vector allowed (10 elements, 4 lanes).
    let odd = l(&[10], &[1], 0);
    let v = g([&odd, &odd, &odd], [4, 4, 4], aligned, 4).expect("contiguous");
    assert_eq!(
        (v.ndim, v.sizes, v.strides[0], v.strides[1]),
        (2, [10, 1], [1, 0], [1, 0])
    );
    // A row broadcast (stride 0 along rows, unit inner) and a column broadcast (stride 0
    // inner: one element per vector).
    let v = g([&dense, &dense, &row], [4, 4, 2], aligned, 4).expect("row broadcast");
    assert_eq!((v.sizes, v.strides[2]), ([8, 6], [1, 0]));
    let v = g([&dense, &col, &dense], [4, 1, 4], aligned, 4).expect("column broadcast");
    assert_eq!(v.strides[1], [0, 1]);
    // Misaligned bases (a vector of 4 f32 needs 16 bytes): not vectorised.
    assert!(g([&dense, &dense, &row], [4, 4, 4], [1024, 2052, 4096], 4).is_none());
    assert!(g([&dense, &dense, &row], [4, 4, 2], [1024, 2048, 4104], 4).is_some());
    assert!(g([&dense, &dense, &row], [4, 4, 2], [1024, 2048, 4100], 4).is_none());
    // Rows that are not a whole number of vectors, row strides that misalign, a strided or
    // reversed inner dimension, a broadcast output: not vectorised.
    let d6 = l(&[4, 6], &[6, 1], 0);
    assert!(
        g([&d6, &d6, &d6], [4, 4, 4], aligned, 4).is_some(),
        "contiguous: flat"
    );
    let pad6 = l(&[4, 6], &[7, 1], 0);
    assert!(g([&d6, &pad6, &d6], [4, 4, 4], aligned, 4).is_none());
    let pad8 = l(&[6, 8], &[12, 1], 0);
    assert!(g([&dense, &pad8, &dense], [4, 4, 4], aligned, 4).is_some());
    let pad10 = l(&[6, 8], &[10, 1], 0);
    assert!(g([&dense, &pad10, &dense], [4, 4, 4], aligned, 4).is_none());
    // Two lanes (64-bit math) are never vectorised: measured slower.
    assert!(g([&odd, &odd, &odd], [8, 8, 8], aligned, 2).is_none());
    assert!(g([&dense, &dense, &dense], [8, 8, 8], aligned, 2).is_none());
    let strided = l(&[6, 8], &[16, 2], 0);
    assert!(g([&dense, &strided, &dense], [4, 4, 4], aligned, 4).is_none());
    let reversed = l(&[6, 8], &[8, -1], 7);
    assert!(g([&dense, &reversed, &dense], [4, 4, 4], aligned, 4).is_none());
    let flipped_rows = l(&[6, 8], &[-8, 1], 40);
    assert!(g([&dense, &flipped_rows, &dense], [4, 4, 4], aligned, 4).is_some());
    let transposed = l(&[6, 8], &[1, 6], 0);
    assert!(g([&dense, &transposed, &dense], [4, 4, 4], aligned, 4).is_none());
}

#[test]
fn the_tiled_kernel_takes_fast_programs_with_a_transposed_input() {
    use crate::expr::device::tiled_geometry;
    use crate::plan::plan;
    let l = |shape: &[usize], strides: &[isize]| Layout::new(shape, strides, 0).unwrap();
    let names = ["out", "a", "b"];
    let f32_add = compile("a + b", &tensors(&[("a", F32), ("b", F32)])).unwrap();
    let f64_add = compile("a + b", &tensors(&[("a", F64), ("b", F64)])).unwrap();
    let general = compile(
        "where((a > b) | (b > a), a, b)",
        &tensors(&[("a", F32), ("b", F32)]),
    )
    .unwrap();
    let tiles =
        |c: &Compiled, ls: [&Layout; 3]| tiled_geometry(c.program(), &plan(ls, names).unwrap());
    // [70, 40] row-major; `b` transposed (its unit stride on the output's slow axis).
    let dense = l(&[70, 40], &[40, 1]);
    let transposed = l(&[70, 40], &[1, 70]);
    let t = tiles(&f32_add, [&dense, &dense, &transposed]).expect("b staged");
    // A one-op program of one element type: the tiled one-op kernel, the same layout, one
    // block per tile, eight rows per thread; a program of more ops the interpreter's tiled
    // kernel (four).
    assert_eq!((t.name, t.lanes, t.arg.staged), ("expr_fo_tile", 8, 0b10));
    assert!(t.block_per_tile);
    let f32_two = compile("a * b + b", &tensors(&[("a", F32), ("b", F32)])).unwrap();
    let two = tiles(&f32_two, [&dense, &dense, &transposed]).expect("b staged");
    assert_eq!(
        (two.name, two.lanes, two.arg.staged),
        ("expr_fs_tile", 4, 0b10)
    );
    assert!(!two.block_per_tile);
    // Axis 0 is the output's unit axis (40 elements, 2 tiles), axis 1 b's (70, 3 tiles).
    assert_eq!((t.g.ndim, t.g.sizes), (2, [40, 70, 1, 1, 1]));
    assert_eq!(
        (&t.g.strides[0][..2], &t.g.strides[2][..2]),
        (&[1, 40][..], &[70, 1][..])
    );
    assert_eq!((t.arg.tiles_x.d, t.arg.tiles_y.d, t.tiles), (2, 3, 6));
    // Both inputs transposed: both staged. 8-byte math: two lanes, 8-byte stages.
    let t = tiles(&f64_add, [&dense, &transposed, &transposed]).expect("both staged");
    assert_eq!((t.name, t.lanes, t.arg.staged), ("expr_ds_tile", 2, 0b11));
    assert!(
        t.shared
            > tiles(&f32_add, [&dense, &dense, &transposed])
                .unwrap()
                .shared
    );
    // Batch axes: [5, 70, 40] with b's axes reversed; tiles × batch.
    let d3 = l(&[5, 70, 40], &[2800, 40, 1]);
    let r3 = l(&[5, 70, 40], &[1, 5, 350]);
    let t = tiles(&f32_add, [&d3, &d3, &r3]).expect("batched");
    // 2 × 1 tiles of [40, 5], 70 batch elements.
    assert_eq!((t.g.sizes, t.tiles), ([40, 5, 70, 1, 1], 2 * 70));
    // A transposed output: axis 0 is its unit axis, so both dense inputs are staged.
    let t = tiles(&f32_add, [&transposed, &dense, &dense]).expect("output transposed");
    assert_eq!((t.arg.staged, t.g.sizes), (0b11, [70, 40, 1, 1, 1]));
    // Nothing to stage (dense, row and column inputs), a general program: not tiled.
    let row = l(&[70, 40], &[0, 1]);
    let col = l(&[70, 40], &[1, 0]);
    assert!(tiles(&f32_add, [&dense, &row, &col]).is_none());
    assert!(tiles(&general, [&dense, &dense, &transposed]).is_none());
}

#[test]
fn the_cheap_kernel_takes_cheap_f32_programs_of_three_inputs() {
    use strided_apply_expr::kernel::{cheap_kernel, CHEAP_INPUTS};
    let of = |text: &str, t: ElemType| {
        let e = parse(text);
        let names: Vec<(&str, ElemType)> = e.names().into_iter().map(|n| (n, t)).collect();
        let c = e.compile(&tensors(&names), None).unwrap();
        cheap_kernel(c.program())
    };
    assert_eq!(of("a + b", F32), Some(("expr_fv_cheap", 8)));
    assert_eq!(
        of("a + b", BF16),
        Some(("expr_fv_cheap", 8)),
        "16-bit floats: f32 math"
    );
    assert_eq!(
        of(
            "clamp(fma(a, -b, c), -abs(c), relu(b)) + max(a, 0.5) - min(b, c)",
            F32
        ),
        Some(("expr_fv_cheap", 8))
    );
    // Not cheap: a division, a transcendental function, a power.
    for text in ["a / b", "sin(a) + b", "a ** b", "sqrt(a)"] {
        assert_eq!(of(text, F32), None, "{text}");
    }
    // More inputs than the kernel loads; other math types.
    assert_eq!(CHEAP_INPUTS, 3);
    assert_eq!(of("a + b + c + d", F32), None);
    assert_eq!(of("a + b", F64), None);
    assert_eq!(of("a + b", I32), None);
    assert_eq!(of("a + b", U8), None);
}

#[test]
fn one_op_programs_of_one_element_type_take_the_one_op_kernels() {
    use strided_apply_expr::kernel::{one_kernel, one_op, one_tiled_kernel};
    let compiled = |text: &str, types: &[ElemType], out: Option<ElemType>| {
        let e = parse(text);
        let names: Vec<(&str, ElemType)> =
            e.names().into_iter().zip(types.iter().copied()).collect();
        e.compile(&tensors(&names), out).unwrap()
    };
    let of = |text: &str, t: ElemType| one_kernel(compiled(text, &[t, t, t], None).program());
    // One 16-byte vector of the widest operand per thread.
    assert_eq!(of("a + b", F32), Some(("expr_fo_k4", 4)));
    assert_eq!(
        of("a + b", BF16),
        Some(("expr_fo_k8", 8)),
        "f32 math, 2-byte operands"
    );
    assert_eq!(of("a + b", F16), Some(("expr_fo_k8", 8)));
    assert_eq!(of("a + b", U8), Some(("expr_bo_k16", 16)));
    assert_eq!(of("a - b", I32), Some(("expr_io_k4", 4)));
    assert_eq!(of("a * b", U32), Some(("expr_uo_k4", 4)));
    assert_eq!(of("a / b", F64), Some(("expr_do_k2", 2)));
    assert_eq!(of("max(a, b)", I64), Some(("expr_lo_k2", 2)));
    // Unary, constants after the inputs, ternary.
    for text in [
        "a",
        "-a",
        "abs(a)",
        "relu(a)",
        "a * 2.5",
        "a / 3",
        "min(a, 0)",
        "clamp(a, 0, 6)",
        "clamp(a, b, 6)",
        "fma(a, b, c)",
        "fma(a, b, 1)",
    ] {
        assert_eq!(of(text, F32), Some(("expr_fo_k4", 4)), "{text}");
    }
    // Operands of two element types: one op, but the interpreter's kernels run it (each
    // arm of the one-op kernels' dispatch is one element type).
    let mixed = compiled("a + b", &[BF16, BF16], Some(F32));
    assert_eq!(
        one_op(mixed.program()),
        Some(strided_apply_expr::ir::Opcode::Add)
    );
    assert_eq!(one_kernel(mixed.program()), None);
    assert_eq!(one_tiled_kernel(mixed.program()), None);
    // The tiled one-op kernel: f32 math over one element type.
    let tiled =
        |text: &str, t: ElemType| one_tiled_kernel(compiled(text, &[t, t, t], None).program());
    assert_eq!(tiled("a + b", F32), Some(("expr_fo_tile", 8)));
    assert_eq!(tiled("a", BF16), Some(("expr_fo_tile", 8)), "the copy");
    assert_eq!(tiled("clamp(a, 0, 6)", BF16), Some(("expr_fo_tile", 8)));
    assert_eq!(tiled("a + b", F64), None);
    assert_eq!(tiled("a * b + c", F32), None);
    // Not one op (or not in the kernels' order): the interpreter runs them.
    for text in [
        "2 * a",
        "a + a",
        "b - a + 0",
        "a + b * c",
        "sin(a)",
        "sqrt(a)",
        "a ** b",
        "where(a > b, a, b)",
    ] {
        assert_eq!(of(text, F32), None, "{text}");
    }
}
