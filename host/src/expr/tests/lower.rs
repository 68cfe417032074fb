//! Lowering, limits and binding: typed limit and type errors, constants, names and scalars
//! bound exactly once, and the CPU run's errors.

use super::*;

#[test]
fn limits_are_typed_errors() {
    let a = [("a", Arg::Tensor(F32))];
    // 70 terms: 139 instructions.
    let e = compile(&vec!["a"; 70].join(" + "), &a).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExprLimit {
                what: "instructions",
                limit: 64,
                got: 65
            }
        ),
        "{e:?}"
    );
    // 64 instructions fit (32 loads, 31 adds, 1 neg).
    compile(&format!("-({})", vec!["a"; 32].join(" + ")), &a).unwrap();
    // Right-leaning: every `a` waits on the stack for the sum to its right.
    let mut text = "a".to_string();
    for _ in 0..10 {
        text = format!("a+({text})");
    }
    let e = compile(&text, &a).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExprLimit {
                what: "stack depth",
                limit: 8,
                got: 9
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("stack depth"), "{e}");
    // Depth 8 fits.
    let mut text = "a".to_string();
    for _ in 0..7 {
        text = format!("a+({text})");
    }
    assert_eq!(compile(&text, &a).unwrap().program().max_depth, 8);
    // Nine distinct tensors.
    let names: Vec<String> = (0..9).map(|i| format!("x{i}")).collect();
    let args: Vec<(&str, Arg)> = names
        .iter()
        .map(|n| (n.as_str(), Arg::Tensor(F32)))
        .collect();
    let e = compile(&names.join(" + "), &args).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExprLimit {
                what: "tensor inputs",
                limit: 8,
                got: 9
            }
        ),
        "{e:?}"
    );
    compile(&names[..8].join(" + "), &args[..8]).unwrap();
    // Seventeen distinct constants; repeated literals share a slot.
    let lits: Vec<String> = (1..=17).map(|i| i.to_string()).collect();
    let e = compile(&format!("a + {}", lits.join(" + ")), &a).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExprLimit {
                what: "constants and scalars",
                limit: 16,
                got: 17
            }
        ),
        "{e:?}"
    );
    compile(&format!("a{}", " + 2.5".repeat(20)), &a).unwrap();
}

/// Repeated literals share one constant slot, whatever came before them: a run-time
/// scalar's slot (whose placeholder bits are 0) must not make every later `0` literal take
/// a slot of its own.
#[test]
fn zero_literals_after_a_scalar_share_one_constant_slot() {
    let args = [
        ("a", Arg::Tensor(F32)),
        ("s", Arg::Scalar(ScalarKind::Float)),
    ];
    let without = compile(&format!("a{}", " + 0".repeat(16)), &args[..1]).unwrap();
    assert_eq!(without.program().len, 33);
    let with = compile(&format!("a + s{}", " + 0".repeat(16)), &args);
    assert!(
        with.is_ok(),
        "two distinct constants (s and 0) over the limit of 16: {:?}",
        with.err()
    );
}

#[test]
fn names_must_be_bound_exactly_once() {
    let f = Arg::Tensor(F32);
    let bind_err = |r: Result<Compiled>| match r {
        Err(Error::ExprBind { name, reason }) => (name, reason),
        other => panic!("expected ExprBind, got {other:?}"),
    };
    let (name, reason) = bind_err(compile("a + b", &[("a", f), ("b", f), ("a", f)]));
    assert_eq!(name, "a");
    assert!(reason.contains("twice"), "{reason}");
    let (name, reason) = bind_err(compile("a + b", &[("a", f), ("b", f), ("z", f)]));
    assert_eq!(name, "z");
    assert!(reason.contains("a, b"), "{reason}");
    let (name, _) = bind_err(compile("a + b", &[("a", f)]));
    assert_eq!(name, "b");
    let (name, _) = bind_err(compile("a + sin(q)", &[("a", f)]));
    assert_eq!(name, "q");
}

#[test]
fn type_errors() {
    let t = |ty| Arg::Tensor(ty);
    let type_err = |r: Result<Compiled>| match r {
        Err(Error::ExprType { reason }) => reason,
        other => panic!("expected ExprType, got {other:?}"),
    };
    // Remainders of floats are PyTorch's `remainder`.
    compile("a % b", &[("a", t(F32)), ("b", t(F32))]).unwrap();
    compile("a % 2.5", &[("a", t(I32))]).unwrap();
    compile("a % b", &[("a", t(I32)), ("b", t(U8))]).unwrap();
    // Each op kind refuses the types PyTorch refuses, naming the op and the type.
    for (text, ty, words) in [
        ("bitwise_and(a, a)", F32, ["bitwise_and", "f32"]),
        ("bitwise_not(a)", F16, ["bitwise_not", "f16"]),
        (
            "bitwise_left_shift(a, a)",
            Bool,
            ["bitwise_left_shift", "bools"],
        ),
        (
            "bitwise_right_shift(a, a)",
            F64,
            ["bitwise_right_shift", "f64"],
        ),
        ("nextafter(a, a)", I32, ["nextafter", "i32"]),
        ("floor(a)", Bool, ["floor", "bools"]),
        ("a + a", F8E4M3, ["add", "f8e4m3fn"]),
        ("sin(a)", F8E5M2, ["sin", "f8e5m2"]),
    ] {
        let r = type_err(compile(text, &[("a", t(ty))]));
        assert!(words.iter().all(|w| r.contains(w)), "{text}: {r}");
    }
    // Casting 8-bit floats in and out is fine; so are the new ops on their types.
    compile("f32(a) * 2", &[("a", t(F8E4M3))]).unwrap();
    compile("f8e5m2(a)", &[("a", t(F32))]).unwrap();
    compile("bitwise_xor(a, a) + floor(a)", &[("a", t(I8))]).unwrap();
    compile("erf(a) + isnan(a)", &[("a", t(I16))]).unwrap();
    let r = type_err(compile("a + b", &[("a", t(Bool)), ("b", t(Bool))]));
    assert!(r.contains("bool"), "{r}");
    type_err(compile("a * (a < a)", &[("a", t(Bool))]));
    type_err(compile("-a", &[("a", t(Bool))]));
    type_err(compile("clamp(a, a, a)", &[("a", t(Bool))]));
    type_err(compile("a + true", &[("a", t(Bool))]));
    // Bools with numbers, logic and comparisons of bools are fine.
    compile("a + 1", &[("a", t(Bool))]).unwrap();
    compile(
        "(a < b) & !c",
        &[("a", t(Bool)), ("b", t(Bool)), ("c", t(Bool))],
    )
    .unwrap();
    compile("where(a, a, b)", &[("a", t(Bool)), ("b", t(Bool))]).unwrap();
    // Ops built with the wrong operand count, or that are not ops of the language.
    let e = Expr::op(Opcode::Add, vec![v("a")]).compile(&[("a", t(F32))], None);
    assert!(matches!(e, Err(Error::ExprType { .. })), "{e:?}");
    let e = Expr::op(Opcode::Where, vec![v("a"), v("a")]).compile(&[("a", t(F32))], None);
    assert!(matches!(e, Err(Error::ExprType { .. })), "{e:?}");
    for op in [Opcode::Cast, Opcode::Narrow] {
        let e = Expr::op(op, vec![v("a")]).compile(&[("a", t(F32))], None);
        assert!(matches!(e, Err(Error::ExprType { .. })), "{op:?}: {e:?}");
    }
}

/// `load` and `const` take no operands, so `Expr::op(Opcode::Load, vec![])` passes the
/// arity check; compiling it must be a type error like the other non-language opcodes,
/// not a panic.
#[test]
fn opcodes_without_operands_are_type_errors_not_panics() {
    for op in [Opcode::Load, Opcode::Const] {
        let e = std::panic::catch_unwind(|| Expr::op(op, vec![]).compile(&[], None));
        match e {
            Ok(Err(Error::ExprType { .. })) => {}
            Ok(other) => panic!("{op:?}: {other:?}"),
            Err(_) => panic!("compiling Expr::op({op:?}, vec![]) panics"),
        }
    }
}

#[test]
fn scalars_bind_exactly_or_are_refused() {
    let c = compile(
        "a + s",
        &[("a", Arg::Tensor(U8)), ("s", Arg::Scalar(ScalarKind::Int))],
    )
    .unwrap();
    assert_eq!(c.out(), U8);
    let refused = |s: Scalar| match c.bind(&[("s", s)]) {
        Err(Error::ExprBind { name, reason }) => {
            assert_eq!(name, "s");
            reason
        }
        other => panic!("{s:?}: expected ExprBind, got {other:?}"),
    };
    assert!(refused(Scalar::I64(300)).contains("300"));
    refused(Scalar::U64(300));
    refused(Scalar::I64(-1));
    let r = refused(Scalar::F64(3.0));
    assert!(r.contains("Int"), "{r}");
    refused(Scalar::Bool(true));
    c.bind(&[("s", Scalar::I64(255))]).unwrap();
    c.bind(&[("s", Scalar::U64(0))]).unwrap();
    // Missing, and not a scalar of the expression.
    assert!(matches!(c.bind(&[]), Err(Error::ExprBind { .. })));
    assert!(matches!(
        c.bind(&[("s", Scalar::I64(1)), ("t", Scalar::I64(1))]),
        Err(Error::ExprBind { name, .. }) if name == "t"
    ));
    assert!(matches!(
        c.bind(&[("a", Scalar::I64(1)), ("s", Scalar::I64(1))]),
        Err(Error::ExprBind { name, .. }) if name == "a"
    ));
    // A float program refuses an int scalar only if compiled for floats.
    let f = compile(
        "a * s",
        &[
            ("a", Arg::Tensor(F32)),
            ("s", Arg::Scalar(ScalarKind::Float)),
        ],
    )
    .unwrap();
    assert!(matches!(
        f.bind(&[("s", Scalar::I64(2))]),
        Err(Error::ExprBind { .. })
    ));
    f.bind(&[("s", Scalar::F64(1e300))]).unwrap();
    // i32 and i64 ranges.
    let i = compile(
        "a - s",
        &[("a", Arg::Tensor(I32)), ("s", Arg::Scalar(ScalarKind::Int))],
    )
    .unwrap();
    i.bind(&[("s", Scalar::I64(i32::MIN as i64))]).unwrap();
    assert!(i.bind(&[("s", Scalar::I64(i32::MAX as i64 + 1))]).is_err());
    let l = compile(
        "a - s",
        &[("a", Arg::Tensor(I64)), ("s", Arg::Scalar(ScalarKind::Int))],
    )
    .unwrap();
    assert!(l.bind(&[("s", Scalar::U64(u64::MAX))]).is_err());
    l.bind(&[("s", Scalar::U64(i64::MAX as u64))]).unwrap();
}

/// A scalar given twice is refused at binding, as a name given twice is at compiling.
#[test]
fn a_scalar_given_twice_is_refused() {
    let c = compile(
        "a + s",
        &[("a", Arg::Tensor(I32)), ("s", Arg::Scalar(ScalarKind::Int))],
    )
    .unwrap();
    let r = c.bind(&[("s", Scalar::I64(1)), ("s", Scalar::I64(2))]);
    assert!(
        matches!(&r, Err(Error::ExprBind { name, .. }) if name == "s"),
        "two values for `s` accepted (the constant is {:?})",
        r.map(|p| p.consts[0])
    );
}

/// An integer literal meets an integer type as a scalar does (PyTorch: `uint8 + 300` is an
/// error), instead of wrapping silently (`a + 300` computing `a + 44`).
#[test]
fn an_integer_literal_that_does_not_fit_its_type_is_refused() {
    let u8a = [("a", Arg::Tensor(U8))];
    let r = compile("a + 300", &u8a);
    assert!(
        matches!(r, Err(Error::ExprType { .. } | Error::ExprBind { .. })),
        "`a + 300` over u8 compiles (the constant is {:?})",
        r.map(|c| c.program().consts[0])
    );
    let r = compile("a < -1", &u8a);
    assert!(r.is_err(), "`a < -1` over u8 compiles to `a < 255`");
    compile("a + 255", &u8a).unwrap();
    // The scalar path refuses the same values.
    let s = compile(
        "a + s",
        &[("a", Arg::Tensor(U8)), ("s", Arg::Scalar(ScalarKind::Int))],
    )
    .unwrap();
    assert!(s.bind(&[("s", Scalar::I64(300))]).is_err());
}

/// An integer scalar meeting a float type rounds once, as the library's scalars and the
/// expression's own integer literals do (`i64 as f32`), not twice through `f64`.
#[test]
fn integer_scalars_round_once_into_floats() {
    let x: i64 = (1 << 62) + (1 << 38) + 1;
    let once = x as f32;
    assert_eq!(once.to_bits(), 0x5e80_0001);
    assert_eq!(((x as f64) as f32).to_bits(), 0x5e80_0000);
    // The literal path rounds once.
    let (_, lit) = eval_1d(&format!("a + {x}"), &[("a", F32, f32s(&[0.0]))], &[], None).unwrap();
    assert_eq!(lit, f32s(&[once]));
    // The scalar path must agree.
    let (_, got) = eval_1d(
        "a + s",
        &[("a", F32, f32s(&[0.0]))],
        &[("s", Scalar::I64(x))],
        None,
    )
    .unwrap();
    assert_eq!(
        got[0],
        once.to_bits() as u64,
        "int scalar {x} into f32: got {}, want {}",
        show(F32, got[0]),
        show(F32, once.to_bits() as u64)
    );
}

/// A float literal or scalar converted to f64 keeps its f64 value (`f64(0.1)` is 0.1, as
/// in `a_f64 + 0.1`), rather than going through f32 first.
#[test]
fn weak_floats_cast_to_f64_keep_their_precision() {
    let a = [("a", F64, vec![0f64.to_bits()])];
    let (_, direct) = eval_1d("a + 0.1", &a, &[], None).unwrap();
    assert_eq!(direct, vec![0.1f64.to_bits()]);
    let (_, lit) = eval_1d("a + f64(0.1)", &a, &[], None).unwrap();
    let (_, sc) = eval_1d("a + f64(s)", &a, &[("s", Scalar::F64(0.1))], None).unwrap();
    assert_eq!(
        (show(F64, lit[0]), show(F64, sc[0])),
        (show(F64, 0.1f64.to_bits()), show(F64, 0.1f64.to_bits())),
        "f64(0.1) and f64(s) with s = 0.1 (left: literal, right: scalar)"
    );
}

#[test]
fn run_cpu_errors_leave_the_output_untouched() {
    let c = compile(
        "a * s + b",
        &[
            ("a", Arg::Tensor(F32)),
            ("b", Arg::Tensor(F32)),
            ("s", Arg::Scalar(ScalarKind::Float)),
        ],
    )
    .unwrap();
    assert_eq!(c.inputs(), ["a", "b"]);
    let l = contiguous(&[4]);
    let a = Buf::of(F32, &f32s(&[1.0, 2.0, 3.0, 4.0]));
    let ai = Buf::of(I32, &[1, 2, 3, 4]);
    let short = contiguous(&[5]);
    let wide = contiguous(&[3]);
    let s = [("s", Scalar::F64(2.0))];
    let mut out = Buf::new(16, 0xEE);
    let mut out64 = Buf::new(32, 0xEE);
    let check = |what: &str, out: &Buf, r: Result<()>, ok: &dyn Fn(&Error) -> bool| {
        let e = r.expect_err(what);
        assert!(ok(&e), "{what}: {e:?}");
        assert!(
            out.bytes().iter().all(|&b| b == 0xEE),
            "{what}: output written"
        );
    };
    fn t<'a>(b: &'a Buf, ty: ElemType, l: &'a Layout) -> HostTensor<'a> {
        HostTensor::new(b.bytes(), ty, l)
    }
    let run = |o: &mut Buf, ins: &[HostTensor], sc: &[(&str, Scalar)]| {
        c.run_cpu(HostTensorMut::new(o.bytes_mut(), F32, &l), ins, sc)
    };
    let r = run(&mut out, &[t(&a, F32, &l)], &s);
    check("one input of two", &out, r, &|e| {
        matches!(e, Error::ExprBind { .. })
    });
    let r = run(
        &mut out,
        &[t(&a, F32, &l), t(&a, F32, &l), t(&a, F32, &l)],
        &s,
    );
    check("three inputs", &out, r, &|e| {
        matches!(e, Error::ExprBind { .. })
    });
    let r = run(&mut out, &[t(&a, F32, &l), t(&ai, I32, &l)], &s);
    check("an i32 input", &out, r, &|e| {
        matches!(
            e,
            Error::TypeMismatch {
                operand: "input 1",
                expected: "f32",
                found: "i32"
            }
        )
    });
    let r = run(&mut out, &[t(&a, F32, &l), t(&a, F32, &l)], &[]);
    check("no scalar", &out, r, &|e| {
        matches!(e, Error::ExprBind { .. })
    });
    let r = run(
        &mut out,
        &[t(&a, F32, &l), t(&a, F32, &l)],
        &[("s", Scalar::I64(2))],
    );
    check("an int scalar", &out, r, &|e| {
        matches!(e, Error::ExprBind { .. })
    });
    let r = run(&mut out, &[t(&a, F32, &l), t(&a, F32, &short)], &s);
    check("out of bounds", &out, r, &|e| {
        matches!(e, Error::OutOfBounds { .. })
    });
    let r = run(&mut out, &[t(&a, F32, &l), t(&a, F32, &wide)], &s);
    check("shapes [4] and [3]", &out, r, &|e| {
        matches!(e, Error::Broadcast { .. })
    });
    let overlapping = Layout::new(&[2, 2], &[0, 1], 0).unwrap();
    let square = contiguous(&[2, 2]);
    let r = c.run_cpu(
        HostTensorMut::new(out.bytes_mut(), F32, &overlapping),
        &[t(&a, F32, &square), t(&a, F32, &square)],
        &s,
    );
    check("an overlapping output", &out, r, &|e| {
        matches!(e, Error::OverlappingOutput { .. })
    });
    // A wrong output type.
    let r = c.run_cpu(
        HostTensorMut::new(out64.bytes_mut(), F64, &l),
        &[t(&a, F32, &l), t(&a, F32, &l)],
        &s,
    );
    assert!(
        matches!(r, Err(Error::TypeMismatch { operand: "out", .. })),
        "{r:?}"
    );
    assert!(out64.bytes().iter().all(|&b| b == 0xEE));
    // And the good call writes.
    run(&mut out, &[t(&a, F32, &l), t(&a, F32, &l)], &s).unwrap();
    assert_eq!(out.elems(F32), f32s(&[3.0, 6.0, 9.0, 12.0]));
}

#[test]
fn programs_run_with_no_tensor_input_and_on_empty_tensors() {
    let c = compile("s * 2 + 1", &[("s", Arg::Scalar(ScalarKind::Int))]).unwrap();
    assert_eq!((c.out(), c.inputs().len()), (I64, 0));
    let l = contiguous(&[3]);
    let mut o = Buf::new(24, 0);
    c.run_cpu(
        HostTensorMut::new(o.bytes_mut(), I64, &l),
        &[],
        &[("s", Scalar::I64(20))],
    )
    .unwrap();
    assert_eq!(o.elems(I64), [41, 41, 41]);
    let c = compile("a + 1", &[("a", Arg::Tensor(F32))]).unwrap();
    let none = contiguous(&[0, 3]);
    c.run_cpu(
        HostTensorMut::new(&mut [], F32, &none),
        &[HostTensor::new(&[], F32, &none)],
        &[],
    )
    .unwrap();
}
