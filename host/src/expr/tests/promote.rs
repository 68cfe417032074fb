//! Promotion: `promote_types` and the expressions' types follow PyTorch.

use super::*;

#[test]
fn promote_types_follows_pytorch() {
    // torch.promote_types over the element types the library has, every unordered pair.
    #[rustfmt::skip]
    let table: &[(ElemType, ElemType, ElemType)] = &[
        (Bool, Bool, Bool), (Bool, U8, U8), (Bool, I32, I32), (Bool, I64, I64),
        (Bool, U32, U32), (Bool, F16, F16), (Bool, BF16, BF16), (Bool, F32, F32),
        (Bool, F64, F64),
        (U8, U8, U8), (U8, I32, I32), (U8, I64, I64), (U8, U32, U32), (U8, F16, F16),
        (U8, BF16, BF16), (U8, F32, F32), (U8, F64, F64),
        (I32, I32, I32), (I32, I64, I64), (I32, U32, I64), (I32, F16, F16),
        (I32, BF16, BF16), (I32, F32, F32), (I32, F64, F64),
        (I64, I64, I64), (I64, U32, I64), (I64, F16, F16), (I64, BF16, BF16),
        (I64, F32, F32), (I64, F64, F64),
        (U32, U32, U32), (U32, F16, F16), (U32, BF16, BF16), (U32, F32, F32),
        (U32, F64, F64),
        (F16, F16, F16), (F16, BF16, F32), (F16, F32, F32), (F16, F64, F64),
        (BF16, BF16, BF16), (BF16, F32, F32), (BF16, F64, F64),
        (F32, F32, F32), (F32, F64, F64),
        (F64, F64, F64),
    ];
    assert_eq!(table.len(), 45);
    // The narrow signed integers (torch.promote_types gives these too).
    #[rustfmt::skip]
    let narrow: &[(ElemType, ElemType, ElemType)] = &[
        (Bool, I8, I8), (U8, I8, I16), (I8, I16, I16), (I8, I32, I32), (I8, I64, I64),
        (I8, U32, I64), (I8, F16, F16), (I8, BF16, BF16), (I8, F32, F32), (I8, F64, F64),
        (Bool, I16, I16), (U8, I16, I16), (I16, I32, I32), (I16, I64, I64), (I16, F16, F16),
        (I16, F64, F64),
        // Unsigned types past u8 with floats and bools (as torch); with other integers as
        // NumPy (torch refuses them).
        (Bool, U16, U16), (U16, F16, F16), (U16, F32, F32), (U64, BF16, BF16),
        (U64, F64, F64), (Bool, U64, U64), (U8, U16, U16), (U16, I8, I32), (U16, I16, I32),
        (U16, I32, I32), (U16, U64, U64), (U32, U64, U64),
        (F8E4M3, F8E4M3, F8E4M3), (F8E5M2, F8E5M2, F8E5M2),
    ];
    for &(a, b, want) in table.iter().chain(narrow) {
        assert_eq!(promote_types(a, b).unwrap(), want, "{a:?} + {b:?}");
        assert_eq!(promote_types(b, a).unwrap(), want, "{b:?} + {a:?}");
    }
    // No type holds u64 and a signed integer; 8-bit floats promote with nothing else
    // (torch: "Promotion for Float8 Types is not supported").
    for (a, b) in [
        (U64, I64),
        (U64, I8),
        (F8E4M3, F32),
        (F8E5M2, F8E4M3),
        (F8E4M3, Bool),
    ] {
        for (x, y) in [(a, b), (b, a)] {
            let e = promote_types(x, y).unwrap_err().to_string();
            assert!(e.contains(x.name()) && e.contains(y.name()), "{e}");
        }
    }
}

/// The output type of `text` over tensors `args`.
fn out_type(text: &str, args: &[(&str, ElemType)]) -> ElemType {
    compile(text, &tensors(args))
        .unwrap_or_else(|e| panic!("`{text}` {args:?}: {e}"))
        .out()
}

#[test]
fn expression_types_follow_pytorch() {
    // Tensor with tensor.
    assert_eq!(out_type("a + b", &[("a", U8), ("b", I32)]), I32);
    assert_eq!(out_type("a + b", &[("a", U32), ("b", I32)]), I64);
    assert_eq!(out_type("a + b", &[("a", F16), ("b", BF16)]), F32);
    assert_eq!(out_type("a + b", &[("a", F16), ("b", F32)]), F32);
    assert_eq!(out_type("a + b", &[("a", I64), ("b", F64)]), F64);
    assert_eq!(out_type("a + b", &[("a", F16), ("b", I64)]), F16);
    assert_eq!(
        out_type("a * b + c", &[("a", U8), ("b", Bool), ("c", F32)]),
        F32
    );
    // Literals are weak: they take the tensor's type within its category.
    assert_eq!(out_type("a + 1.5", &[("a", I32)]), F32);
    assert_eq!(out_type("a + 1.5", &[("a", U8)]), F32);
    assert_eq!(out_type("a + 1.5", &[("a", F16)]), F16);
    assert_eq!(out_type("a + 1.5", &[("a", F64)]), F64);
    assert_eq!(out_type("a + 1", &[("a", U8)]), U8);
    assert_eq!(out_type("a + 1", &[("a", I32)]), I32);
    assert_eq!(out_type("a + 1", &[("a", Bool)]), I64);
    assert_eq!(out_type("a + 1", &[("a", BF16)]), BF16);
    assert_eq!(
        out_type("where(c, a, 1.5)", &[("c", Bool), ("a", I32)]),
        F32
    );
    assert_eq!(out_type("where(c, a, 1)", &[("c", Bool), ("a", U8)]), U8);
    assert_eq!(out_type("1 + 2", &[]), I64);
    assert_eq!(out_type("1 + 2.5", &[]), F32);
    // Scalars are weak too.
    let c = compile(
        "a * s",
        &[("a", Arg::Tensor(U8)), ("s", Arg::Scalar(ScalarKind::Int))],
    )
    .unwrap();
    assert_eq!(c.out(), U8);
    let c = compile(
        "a * s",
        &[
            ("a", Arg::Tensor(I64)),
            ("s", Arg::Scalar(ScalarKind::Float)),
        ],
    )
    .unwrap();
    assert_eq!(c.out(), F32);
    // True division and the float functions give floats; comparisons bools.
    assert_eq!(out_type("a / b", &[("a", I32), ("b", I32)]), F32);
    assert_eq!(out_type("a / 2", &[("a", U8)]), F32);
    assert_eq!(out_type("a / b", &[("a", F16), ("b", F16)]), F16);
    assert_eq!(out_type("trunc_div(a, b)", &[("a", I32), ("b", I32)]), I32);
    assert_eq!(out_type("sqrt(a)", &[("a", I64)]), F32);
    assert_eq!(out_type("exp(a)", &[("a", BF16)]), BF16);
    assert_eq!(out_type("a < 1.5", &[("a", I32)]), Bool);
    assert_eq!(out_type("(a < b) + 1", &[("a", F32), ("b", F32)]), I64);
    assert_eq!(out_type("i32(a) + 1.5", &[("a", F64)]), F32);
    assert_eq!(out_type("u8(a) + 1", &[("a", F64)]), U8);
    assert_eq!(out_type("f16(a) * b", &[("a", F64), ("b", BF16)]), F32);
    // An output type given overrides.
    let c = parse("a + b")
        .compile(&tensors(&[("a", F16), ("b", F16)]), Some(F64))
        .unwrap();
    assert_eq!(c.out(), F64);
}

#[test]
fn true_division_of_integers_gives_floats() {
    let a: Vec<u64> = [7, -7, 1, 0, i32::MAX, i32::MIN, -1]
        .iter()
        .map(|&x: &i32| x as u32 as u64)
        .collect();
    let b: Vec<u64> = [2, 2, 0, 0, 1, -1, 3]
        .iter()
        .map(|&x: &i32| x as u32 as u64)
        .collect();
    let (t, got) = eval_1d(
        "a / b",
        &[("a", I32, a.clone()), ("b", I32, b.clone())],
        &[],
        None,
    )
    .unwrap();
    assert_eq!(t, F32);
    let want = [
        3.5f32,
        -3.5,
        f32::INFINITY,
        f32::NAN,
        2_147_483_648.0,
        2_147_483_648.0,
        -1.0 / 3.0,
    ];
    for (g, w) in got.iter().zip(want) {
        let g = f32::from_bits(*g as u32);
        assert!(g == w || (g.is_nan() && w.is_nan()), "{g} != {w}");
    }
    // trunc_div and % stay integers: truncation, the divisor's sign, and 0 for x / 0.
    let (_, q) = eval_1d(
        "trunc_div(a, b)",
        &[("a", I32, a.clone()), ("b", I32, b.clone())],
        &[],
        None,
    )
    .unwrap();
    let q: Vec<i32> = q.iter().map(|&x| x as u32 as i32).collect();
    assert_eq!(q, [3, -3, 0, 0, i32::MAX, i32::MIN, 0]);
    let (_, m) = eval_1d("a % b", &[("a", I32, a), ("b", I32, b)], &[], None).unwrap();
    let m: Vec<i32> = m.iter().map(|&x| x as u32 as i32).collect();
    assert_eq!(m, [1, 1, 0, 0, 0, 0, 2]);
}
