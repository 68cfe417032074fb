//! Conformance table on the CPU: every (op, element types) × every layout class, the CPU
//! twin against a naive index-by-index walk. Outputs are poisoned first and compared as
//! whole buffers, so a write outside the view or a missed element fails too.

use crate::common::{cases, naive_offsets, random_vec, Case, Rng, TestElem};
use crate::op_table;
use strided_apply::ops::{Op1, Op2, Op3, Op4, Tolerance};
use strided_apply::verify::first_mismatch;
use strided_apply::{cpu, plan, Variant};

fn check<O: TestElem>(name: &str, case: &Case, got: &[O], expect: &[O]) {
    if let Some(m) = first_mismatch(got, expect, Tolerance::Exact) {
        panic!(
            "{name} / {}: CPU twin differs from the naive walk at {m}",
            case.name
        );
    }
}

fn cpu1<Op: Op1<T>, T: TestElem>(op: Op, name: &str, rng: &mut Rng) -> usize {
    let all = cases(0);
    for case in &all {
        let init: Vec<T> = random_vec(rng, case.out.len);
        let mut got = init.clone();
        cpu::apply1(op, (&mut got, &case.out.layout))
            .unwrap_or_else(|e| panic!("{name} / {}: {e}", case.name));
        let mut expect = init;
        for o in naive_offsets(case) {
            op.apply(&mut expect[o[0]]);
        }
        check(name, case, &got, &expect);
    }
    all.len()
}

fn cpu2<Op: Op2<O, A>, O: TestElem, A: TestElem>(op: Op, name: &str, rng: &mut Rng) -> usize {
    let all = cases(1);
    for case in &all {
        let a: Vec<A> = random_vec(rng, case.inputs[0].len);
        let mut got = vec![O::poison(); case.out.len];
        cpu::apply2(
            op,
            (&mut got, &case.out.layout),
            (&a, &case.inputs[0].layout),
        )
        .unwrap_or_else(|e| panic!("{name} / {}: {e}", case.name));
        let mut expect = vec![O::poison(); case.out.len];
        for o in naive_offsets(case) {
            op.apply(&mut expect[o[0]], a[o[1]]);
        }
        check(name, case, &got, &expect);
    }
    all.len()
}

fn cpu3<Op: Op3<O, A, B>, O: TestElem, A: TestElem, B: TestElem>(
    op: Op,
    name: &str,
    rng: &mut Rng,
) -> usize {
    let all = cases(2);
    for case in &all {
        let a: Vec<A> = random_vec(rng, case.inputs[0].len);
        let b: Vec<B> = random_vec(rng, case.inputs[1].len);
        let mut got = vec![O::poison(); case.out.len];
        cpu::apply3(
            op,
            (&mut got, &case.out.layout),
            (&a, &case.inputs[0].layout),
            (&b, &case.inputs[1].layout),
        )
        .unwrap_or_else(|e| panic!("{name} / {}: {e}", case.name));
        let mut expect = vec![O::poison(); case.out.len];
        for o in naive_offsets(case) {
            op.apply(&mut expect[o[0]], a[o[1]], b[o[2]]);
        }
        check(name, case, &got, &expect);
    }
    all.len()
}

fn cpu4<Op: Op4<O, A, B, C>, O: TestElem, A: TestElem, B: TestElem, C: TestElem>(
    op: Op,
    name: &str,
    rng: &mut Rng,
) -> usize {
    let all = cases(3);
    for case in &all {
        let a: Vec<A> = random_vec(rng, case.inputs[0].len);
        let b: Vec<B> = random_vec(rng, case.inputs[1].len);
        let c: Vec<C> = random_vec(rng, case.inputs[2].len);
        let mut got = vec![O::poison(); case.out.len];
        cpu::apply4(
            op,
            (&mut got, &case.out.layout),
            (&a, &case.inputs[0].layout),
            (&b, &case.inputs[1].layout),
            (&c, &case.inputs[2].layout),
        )
        .unwrap_or_else(|e| panic!("{name} / {}: {e}", case.name));
        let mut expect = vec![O::poison(); case.out.len];
        for o in naive_offsets(case) {
            op.apply(&mut expect[o[0]], a[o[1]], b[o[2]], c[o[3]]);
        }
        check(name, case, &got, &expect);
    }
    all.len()
}

#[test]
fn cpu_twin_matches_naive_walk_for_every_op_type_and_layout() {
    let mut rng = Rng(0x5eed);
    let mut count = 0;
    macro_rules! run {
        (1, $name:expr, $op:expr, $t:ty) => {
            count += cpu1::<_, $t>($op, $name, &mut rng)
        };
        (2, $name:expr, $op:expr, $o:ty, $a:ty) => {
            count += cpu2::<_, $o, $a>($op, $name, &mut rng)
        };
        (3, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty) => {
            count += cpu3::<_, $o, $a, $b>($op, $name, &mut rng)
        };
        (4, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty, $c:ty) => {
            count += cpu4::<_, $o, $a, $b, $c>($op, $name, &mut rng)
        };
    }
    op_table!(run);
    println!("conformance: {count} (op, type, layout) cases on the CPU twin");
    assert!(count > 5000, "the table shrank: {count} cases");
}

#[test]
fn layout_table_reaches_every_32_bit_variant() {
    let mut seen = std::collections::HashSet::new();
    for k in 0..=3 {
        for case in cases(k) {
            let layouts: Vec<_> = std::iter::once(&case.out)
                .chain(&case.inputs)
                .map(|o| o.layout.clone())
                .collect();
            let v = match k {
                0 => plan::plan([&layouts[0]], ["out"]).map(|p| p.variant),
                1 => plan::plan([&layouts[0], &layouts[1]], ["out", "a"]).map(|p| p.variant),
                2 => plan::plan([&layouts[0], &layouts[1], &layouts[2]], ["out", "a", "b"])
                    .map(|p| p.variant),
                _ => plan::plan(
                    [&layouts[0], &layouts[1], &layouts[2], &layouts[3]],
                    ["out", "a", "b", "c"],
                )
                .map(|p| p.variant),
            };
            seen.insert(v.unwrap_or_else(|e| panic!("{}: {e}", case.name)));
        }
    }
    for v in [
        Variant::Contig,
        Variant::D1,
        Variant::D2,
        Variant::D3,
        Variant::Dn,
    ] {
        assert!(
            seen.contains(&v),
            "no layout class plans to {v:?}; seen {seen:?}"
        );
    }
}

/// Each side of the tolerance policy, on the CPU: transcendental f32 results within their
/// bound of an f64 reference rounded to f32.
#[test]
fn cpu_transcendentals_within_their_ulp_bound_of_f64() {
    use strided_apply::ops::*;
    use strided_apply::verify::Distance;
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..100_000)
        .map(|_| (rng.unit() * 20.0 - 10.0) as f32)
        .collect();
    let y: Vec<f32> = (0..100_000)
        .map(|_| (rng.unit() * 6.0 - 3.0) as f32)
        .collect();
    let l = strided_apply::Layout::contiguous(&[x.len()]).unwrap();
    macro_rules! unary {
        ($op:expr, $bound:expr, $f:expr) => {{
            let mut out = vec![0.0f32; x.len()];
            cpu::apply2($op, (&mut out, &l), (&x, &l)).unwrap();
            let worst = x
                .iter()
                .zip(&out)
                .map(|(&a, &g)| f32::distance(g, ($f)(a as f64) as f32))
                .max()
                .unwrap();
            assert!(worst <= $bound, "{}: {worst} ulp", stringify!($op));
        }};
    }
    unary!(Exp, 2, f64::exp);
    unary!(Log, 2, f64::ln);
    unary!(Sin, 2, f64::sin);
    unary!(Cos, 2, f64::cos);
    unary!(Tanh, 2, f64::tanh);
    unary!(Sigmoid, 3, |a: f64| 1.0 / (1.0 + (-a).exp()));
    unary!(Sqrt, 0, f64::sqrt);
    let mut out = vec![0.0f32; x.len()];
    cpu::apply3(Pow, (&mut out, &l), (&x, &l), (&y, &l)).unwrap();
    let worst = (0..x.len())
        .map(|i| f32::distance(out[i], (x[i] as f64).powf(y[i] as f64) as f32))
        .max()
        .unwrap();
    assert!(worst <= 2, "Pow: {worst} ulp");
}

/// 16-bit floats on the CPU twin: `+ - * /` and `sqrt` are correctly rounded (the f32 op
/// math rounds once, and f32 holds enough bits that rounding it to 16 bits is the correct
/// rounding of the exact result); transcendentals within 1 ulp of f64. (Casts from wide
/// types: `gpu_kernels::narrow`'s unit tests.)
#[test]
fn cpu_16bit_ops_round_once_to_nearest_even() {
    use strided_apply::ops::*;
    use strided_apply::verify::Distance;
    use strided_apply::{bf16, f16};
    let mut rng = Rng(16);
    let n = 200_000;
    let l = strided_apply::Layout::contiguous(&[n]).unwrap();
    macro_rules! check {
        ($t:ident) => {{
            let x: Vec<$t> = (0..n).map(|_| <$t as TestElem>::random(&mut rng)).collect();
            let y: Vec<$t> = (0..n).map(|_| <$t as TestElem>::random(&mut rng)).collect();
            // The exact result (f64 holds every sum, difference and product of two 16-bit
            // values; quotients and roots rounded with 53 ≥ 2·24 + 2 bits), rounded to f32
            // and then to the 16-bit type: both roundings are innocuous at these widths.
            // (`half`'s `from_f64` is not used: it rounded 2.614266 to the farther f16.)
            let exact = |r: f64| $t::from_f32(r as f32);
            macro_rules! binary {
                ($op:expr, $f:expr) => {{
                    let mut out = vec![$t::ZERO; n];
                    cpu::apply3($op, (&mut out, &l), (&x, &l), (&y, &l)).unwrap();
                    for i in 0..n {
                        let want = exact(($f)(x[i].to_f64(), y[i].to_f64()));
                        assert_eq!(
                            $t::distance(out[i], want),
                            0,
                            "{} {}: {:?} {:?} gave {:?}, want {:?}",
                            stringify!($op),
                            stringify!($t),
                            x[i],
                            y[i],
                            out[i],
                            want
                        );
                    }
                }};
            }
            binary!(Add, |a: f64, b: f64| a + b);
            binary!(Sub, |a: f64, b: f64| a - b);
            binary!(Mul, |a: f64, b: f64| a * b);
            binary!(Div, |a: f64, b: f64| a / b);
            let mut out = vec![$t::ZERO; n];
            cpu::apply2(Sqrt, (&mut out, &l), (&x, &l)).unwrap();
            for i in 0..n {
                assert_eq!($t::distance(out[i], exact(x[i].to_f64().sqrt())), 0);
            }
            for (op, f) in [
                (0, f64::exp as fn(f64) -> f64),
                (1, f64::tanh),
                (2, f64::sin),
            ] {
                match op {
                    0 => cpu::apply2(Exp, (&mut out, &l), (&x, &l)).unwrap(),
                    1 => cpu::apply2(Tanh, (&mut out, &l), (&x, &l)).unwrap(),
                    _ => cpu::apply2(Sin, (&mut out, &l), (&x, &l)).unwrap(),
                }
                let worst = (0..n)
                    .map(|i| $t::distance(out[i], exact(f(x[i].to_f64()))))
                    .max();
                assert!(
                    worst <= Some(1),
                    "{} op {op}: {worst:?} ulp",
                    stringify!($t)
                );
            }
        }};
    }
    check!(f16);
    check!(bf16);
}
