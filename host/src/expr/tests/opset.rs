//! The op set's further ops and the narrow element types, on the CPU twin.

use super::*;

/// `text` over one-dimensional tensors of type `t`, the output's bits.
fn run1(text: &str, args: &[(&str, ElemType, Vec<u64>)]) -> Vec<u64> {
    eval_1d(text, args, &[], None)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .1
}

fn ints(t: ElemType, xs: &[i64]) -> Vec<u64> {
    let mask = strided_apply_expr::value::width_mask(t);
    xs.iter().map(|&x| x as u64 & mask).collect()
}

#[test]
fn narrow_integers_wrap_at_their_own_width() {
    let i8s = |xs: &[i64]| ints(I8, xs);
    let a = i8s(&[100, -128, 127, -128, 1, 1, -1, 5]);
    let b = i8s(&[100, -1, 1, -1, 7, 8, 9, -1]);
    let c = i8s(&[2, 1, 1, 1, 1, 1, 1, 1]);
    let args = |xs: &[(&'static str, &Vec<u64>)]| -> Vec<(&'static str, ElemType, Vec<u64>)> {
        xs.iter().map(|(n, v)| (*n, I8, (*v).clone())).collect()
    };
    assert_eq!(
        run1("a + b", &args(&[("a", &a), ("b", &b)])),
        i8s(&[-56, 127, -128, 127, 8, 9, 8, 4])
    );
    // The sum wraps before the division, as PyTorch's `(a + b) // c` on int8 does.
    assert_eq!(
        run1(
            "floor_divide(a + b, c)",
            &args(&[("a", &a), ("b", &b), ("c", &c)])
        )[0],
        i8s(&[-28])[0]
    );
    // MIN / -1 and -MIN wrap; shifts as PyTorch (by the width or more, or negative).
    assert_eq!(
        run1("trunc_div(a, b)", &args(&[("a", &a), ("b", &b)]))[1],
        i8s(&[-128])[0]
    );
    assert_eq!(run1("-a", &args(&[("a", &a)]))[1], i8s(&[-128])[0]);
    assert_eq!(
        run1("bitwise_left_shift(a, b)", &args(&[("a", &a), ("b", &b)]))[4..],
        i8s(&[-128, 0, 0, 0])[..]
    );
    assert_eq!(
        run1("bitwise_right_shift(a, b)", &args(&[("a", &a), ("b", &b)]))[4..],
        i8s(&[0, 0, -1, 0])[..]
    );
    // An unsigned right shift by the width or more gives 0 (a signed one the sign fill).
    assert_eq!(
        run1(
            "bitwise_right_shift(a, b)",
            &[("a", U8, vec![255, 128, 3]), ("b", U8, vec![10, 8, 7])]
        ),
        vec![0, 0, 0]
    );
    // u16 and u64 wrap as unsigned types.
    let u16s = ints(U16, &[0, 5, 65535]);
    let one = ints(U16, &[1, 1, 1]);
    assert_eq!(
        run1("a - b", &[("a", U16, u16s.clone()), ("b", U16, one)]),
        ints(U16, &[65535, 4, 65534])
    );
    assert_eq!(
        run1("bitwise_not(a)", &[("a", U16, u16s)]),
        ints(U16, &[65535, 65530, 0])
    );
    let big = vec![u64::MAX, 1 << 63, 3];
    assert_eq!(
        run1("a + 1", &[("a", U64, big.clone())]),
        vec![0, (1 << 63) + 1, 4]
    );
    assert_eq!(run1("a > 2", &[("a", U64, big.clone())]), vec![1, 1, 1]);
    assert_eq!(
        run1("floor_divide(a, 2)", &[("a", U64, big)]),
        vec![u64::MAX / 2, 1 << 62, 1]
    );
    // i16 with i8 promotes to i16; u8 with i8 to i16 (torch.promote_types).
    let (t, v) = eval_1d(
        "a * b",
        &[
            ("a", I16, ints(I16, &[300, -300])),
            ("b", I8, i8s(&[200 - 256, 100])),
        ],
        &[],
        None,
    )
    .unwrap();
    assert_eq!(
        (t, v),
        (
            I16,
            ints(
                I16,
                &[(300 * -56) as i16 as i64, (-300 * 100) as i16 as i64]
            )
        )
    );
    let (t, _) = eval_1d(
        "a + b",
        &[("a", U8, vec![1]), ("b", I8, vec![1])],
        &[],
        None,
    )
    .unwrap();
    assert_eq!(t, I16);
}

#[test]
fn integer_division_ops_follow_pytorch() {
    let a = ints(I32, &[-7, 7, -7, 7, 5, i32::MIN as i64]);
    let b = ints(I32, &[2, -2, -2, 2, 0, -1]);
    let run = |text: &str| run1(text, &[("a", I32, a.clone()), ("b", I32, b.clone())]);
    // floor_divide rounds down; by zero gives 0 (PyTorch raises on the CPU).
    assert_eq!(
        run("floor_divide(a, b)"),
        ints(I32, &[-4, -4, 3, 3, 0, i32::MIN as i64])
    );
    // fmod takes the dividend's sign, remainder the divisor's.
    assert_eq!(run("fmod(a, b)"), ints(I32, &[-1, 1, -1, 1, 0, 0]));
    assert_eq!(run("remainder(a, b)"), ints(I32, &[1, -1, -1, 1, 0, 0]));
    assert_eq!(
        run1("sign(a)", &[("a", I32, a.clone())]),
        ints(I32, &[-1, 1, -1, 1, 1, -1])
    );
    assert_eq!(
        run("bitwise_and(a, b)"),
        ints(I32, &[0, 6, -8, 2, 0, i32::MIN as i64])
    );
    assert_eq!(run("fmax(a, b)"), ints(I32, &[2, 7, -2, 7, 5, -1]));
    // Rounding an integer keeps it; the tests of a value hold as for numbers.
    assert_eq!(
        run("floor(a) + round(b)"),
        ints(I32, &[-5, 5, -9, 9, 5, (i32::MIN as i64 - 1) as i32 as i64])
    );
    assert_eq!(run("isfinite(a) & !isnan(b) & !isinf(a)"), vec![1; 6]);
    assert_eq!(
        run1("signbit(a)", &[("a", I32, a.clone())]),
        vec![1, 0, 1, 0, 0, 1]
    );
}

/// The distance in units in the last place between two finite `f32` values.
fn ulps32(x: f32, y: f32) -> u64 {
    let key = |v: f32| {
        let b = v.to_bits() as i64;
        if b < 0x8000_0000 {
            b
        } else {
            0x8000_0000 - b
        }
    };
    (key(x) - key(y)).unsigned_abs()
}

#[test]
fn float_functions_are_within_their_bounds_of_an_f64_reference() {
    use gpu_kernels::math::FloatFns;
    // (name, reference, lowest input, highest input, ulps; 0: exact).
    type F = fn(f64) -> f64;
    let unary: &[(&str, F, f64, f64, u64)] = &[
        ("erf", FloatFns::erf, -4.0, 4.0, 2),
        ("erfc", FloatFns::erfc, -4.0, 9.0, 4),
        ("erfinv", FloatFns::erfinv, -0.999, 0.999, 4),
        ("lgamma", FloatFns::lgamma, 0.1, 30.0, 4),
        ("exp2", f64::exp2, -20.0, 20.0, 2),
        ("expm1", f64::exp_m1, -5.0, 5.0, 2),
        ("log2", f64::log2, 1e-3, 1e3, 2),
        ("log10", f64::log10, 1e-3, 1e3, 2),
        ("log1p", f64::ln_1p, -0.9, 1e3, 2),
        ("tan", f64::tan, -1.5, 1.5, 4),
        ("asin", f64::asin, -1.0, 1.0, 2),
        ("acos", f64::acos, -1.0, 1.0, 2),
        ("atan", f64::atan, -50.0, 50.0, 2),
        ("sinh", f64::sinh, -10.0, 10.0, 2),
        ("cosh", f64::cosh, -10.0, 10.0, 2),
        ("asinh", f64::asinh, -50.0, 50.0, 2),
        ("acosh", f64::acosh, 1.0, 50.0, 2),
        ("atanh", f64::atanh, -0.99, 0.99, 2),
        ("floor", f64::floor, -100.0, 100.0, 0),
        ("ceil", f64::ceil, -100.0, 100.0, 0),
        ("round", f64::round_ties_even, -100.0, 100.0, 0),
        ("trunc", f64::trunc, -100.0, 100.0, 0),
    ];
    let mut r = Rng::new(39);
    let n = 512;
    for &(name, f, lo, hi, bound) in unary {
        // Random values in the domain, and halves (ties of `round`).
        let xs: Vec<f32> = (0..n)
            .map(|i| {
                if i % 8 == 0 {
                    ((lo + (hi - lo) * r.unit()) as f32 * 2.0).round() / 2.0
                } else {
                    (lo + (hi - lo) * r.unit()) as f32
                }
            })
            .map(|x| x.clamp(lo as f32, hi as f32))
            .collect();
        let got = run1(&format!("{name}(a)"), &[("a", F32, f32s(&xs))]);
        for (x, g) in xs.iter().zip(got) {
            let want = f(*x as f64) as f32;
            let g = f32::from_bits(g as u32);
            assert!(ulps32(g, want) <= bound, "{name}({x}) = {g}, want {want}");
        }
    }
    type G = fn(f64, f64) -> f64;
    let binary: &[(&str, G, u64)] = &[
        ("atan2", f64::atan2, 2),
        ("hypot", f64::hypot, 1),
        ("fmod", |x, y| x % y, 0),
        ("copysign", f64::copysign, 0),
        ("fmin", f64::min, 0),
        ("fmax", f64::max, 0),
        ("remainder", |x, y| x - (x / y).floor() * y, 1),
        ("floor_divide", |x, y| (x / y).floor(), 0),
    ];
    for &(name, f, bound) in binary {
        let xs: Vec<f32> = (0..n).map(|_| (200.0 * r.unit() - 100.0) as f32).collect();
        let ys: Vec<f32> = (0..n).map(|_| (20.0 * r.unit() - 10.0) as f32).collect();
        let got = run1(
            &format!("{name}(a, b)"),
            &[("a", F32, f32s(&xs)), ("b", F32, f32s(&ys))],
        );
        for ((x, y), g) in xs.iter().zip(&ys).zip(got) {
            let want = f(*x as f64, *y as f64) as f32;
            let g = f32::from_bits(g as u32);
            assert!(
                ulps32(g, want) <= bound,
                "{name}({x}, {y}) = {g}, want {want}"
            );
        }
    }
    // nextafter of 16-bit floats steps in their own type.
    let h = |x: f32| f16::from_f32(x).to_bits() as u64;
    let got = run1(
        "nextafter(a, b)",
        &[
            ("a", F16, vec![h(6.668), h(0.0), h(-1.0)]),
            ("b", F16, vec![h(1e4), h(0.5), h(-2.0)]),
        ],
    );
    let up = |x: f32| f16::from_bits(f16::from_f32(x).to_bits() + 1).to_bits() as u64;
    assert_eq!(got, vec![up(6.668), 1, up(-1.0)]);
    // Numbers alone compute in f64 (as Python): `a * (1 / s)` of an f64 tensor.
    let (_, got) = eval_1d(
        "a * (1 / s)",
        &[("a", F64, vec![3.0f64.to_bits()])],
        &[("s", Scalar::F64(3.0))],
        None,
    )
    .unwrap();
    assert_eq!(f64::from_bits(got[0]), 3.0 * (1.0 / 3.0));
    // acosh below 1 is NaN (musl's acosh gave -inf below -1).
    let got = run1("acosh(a)", &[("a", F32, f32s(&[-32768.0, -1.0, 0.5, 1.0]))]);
    assert!(
        got[..3].iter().all(|&g| f32::from_bits(g as u32).is_nan()),
        "{got:?}"
    );
    assert_eq!(got[3], 0);
    // NaN operands: fmin/fmax take the other one; nextafter steps by one ulp.
    let nan = f32::NAN;
    let got = run1(
        "fmin(a, b) + fmax(b, a)",
        &[("a", F32, f32s(&[nan, 1.0])), ("b", F32, f32s(&[2.0, nan]))],
    );
    assert_eq!(got, f32s(&[4.0, 2.0]));
    let got = run1(
        "nextafter(a, b)",
        &[
            ("a", F32, f32s(&[1.0, 0.0])),
            ("b", F32, f32s(&[2.0, -1.0])),
        ],
    );
    assert_eq!(
        got,
        vec![(1.0f32 + f32::EPSILON).to_bits() as u64, 0x8000_0001]
    );
}

#[test]
fn value_tests_and_sign_of_floats() {
    let xs = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        -2.5,
        3.0,
    ];
    let run = |text: &str| run1(text, &[("a", F32, f32s(&xs))]);
    assert_eq!(run("isnan(a)"), vec![1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(run("isinf(a)"), vec![0, 1, 1, 0, 0, 0, 0]);
    assert_eq!(run("isfinite(a)"), vec![0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(run("isposinf(a)"), vec![0, 1, 0, 0, 0, 0, 0]);
    assert_eq!(run("isneginf(a)"), vec![0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(run("signbit(a)"), vec![0, 0, 1, 1, 0, 1, 0]);
    // Bools: minimum is and, maximum or, sign itself (PyTorch's); logit of an integer
    // converts it first.
    let bools = |t: &str| {
        run1(
            t,
            &[("a", Bool, vec![0, 1, 1, 0]), ("b", Bool, vec![0, 0, 1, 1])],
        )
    };
    assert_eq!(bools("minimum(a, b)"), vec![0, 0, 1, 0]);
    assert_eq!(bools("fmax(a, b)"), vec![0, 1, 1, 1]);
    assert_eq!(run1("sign(a)", &[("a", Bool, vec![0, 1])]), vec![0, 1]);
    let got = run1(
        "log((a / 1) / (1 - a / 1))",
        &[("a", I8, ints(I8, &[-127]))],
    );
    assert!(f32::from_bits(got[0] as u32).is_nan());
    // sign: (0 < x) - (x < 0), so NaN gives 0, as PyTorch.
    assert_eq!(run("sign(a)"), f32s(&[0.0, 1.0, -1.0, 0.0, 0.0, -1.0, 1.0]));
    assert_eq!(
        run("where(isnan(a), 0, a)"),
        f32s(&[0.0, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, -2.5, 3.0])
    );
}

#[test]
fn float8_and_narrow_casts_round_as_pytorch() {
    use gpu_kernels::float8::{f32_to_f8e4m3fn, f32_to_f8e5m2, f8e4m3fn, f8e4m3fn_to_f32};
    let xs = [
        0.0f32,
        -0.0,
        1.0625,
        447.0,
        464.0,
        480.0,
        1e-3,
        -3.3,
        f32::NAN,
        f32::INFINITY,
    ];
    let got = run1("f8e4m3fn(a)", &[("a", F32, f32s(&xs))]);
    let want: Vec<u64> = xs.iter().map(|&x| f32_to_f8e4m3fn(x).0 as u64).collect();
    assert_eq!(got, want);
    let got = run1("f8e5m2(a)", &[("a", F32, f32s(&xs))]);
    let want: Vec<u64> = xs.iter().map(|&x| f32_to_f8e5m2(x).0 as u64).collect();
    assert_eq!(got, want);
    // Every code widens exactly; arithmetic goes through f32.
    let codes: Vec<u64> = (0..256).collect();
    let got = run1("f32(a) * 2", &[("a", F8E4M3, codes.clone())]);
    for (c, g) in codes.iter().zip(got) {
        let want = f8e4m3fn_to_f32(f8e4m3fn(*c as u8)) * 2.0;
        let g = f32::from_bits(g as u32);
        assert!(
            g == want || (g.is_nan() && want.is_nan()),
            "{c:#x}: {g} {want}"
        );
    }
    // Floats to narrow integers saturate (NaN gives 0), as every cast here.
    let got = run1(
        "i8(a)",
        &[("a", F32, f32s(&[300.0, -300.0, f32::NAN, -5.7]))],
    );
    assert_eq!(got, ints(I8, &[127, -128, 0, -5]));
    // An i32 to i8 wraps.
    let got = run1("i8(a)", &[("a", I32, ints(I32, &[300, -129]))]);
    assert_eq!(got, ints(I8, &[44, 127]));
}
