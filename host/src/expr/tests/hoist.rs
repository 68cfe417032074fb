//! Hoisting: the invariant subexpressions taken out of the loop, and a program invariant
//! along an axis hoisted whole, with the bits kept.

use super::*;

/// Values of `p` at one element, its inputs given in their math types.
fn eval_at(p: &Program, inputs: &[u64]) -> u64 {
    let mut x = [[0u64; 1]; MAX_INPUTS];
    for (k, &v) in inputs.iter().enumerate() {
        x[k] = [v];
    }
    strided_apply_expr::eval(p, &x)[0]
}

#[test]
fn hoisting_takes_the_invariant_subexpressions_and_keeps_the_bits() {
    use crate::expr::hoist::{hoist, hoist_parts};
    use strided_apply_expr::eval::FAST_LOADED;
    let e = parse("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)");
    for t in [F32, F64, BF16] {
        let c = e
            .compile(&tensors(&[("a", t), ("b", t), ("c", t)]), None)
            .unwrap();
        let p = c.program();
        // Out [m, n]: a a row (invariant along axis 0), b a column (axis 1), c full.
        let (m, n) = (5usize, 7usize);
        let h = hoist_parts(p, &[0b01, 0b10, 0], &[m, n], MAX_INPUTS).expect("two invariant parts");
        // Five inputs stay on the fast path (eight): hoisted when it launches.
        assert_ne!(h.program.fast, strided_apply_expr::ir::NOT_FAST, "{t:?}");
        assert_eq!(
            hoist(p, &[0b01, 0b10, 0], &[m, n], MAX_INPUTS).as_ref(),
            Some(&h)
        );
        assert_eq!(h.parts.len(), 2);
        assert_eq!((h.parts[0].axes, h.parts[1].axes), (0b01, 0b10));
        assert_eq!(
            (h.parts[0].inputs.clone(), h.parts[1].inputs.clone()),
            (vec![0], vec![1])
        );
        assert_eq!(h.inputs, [0, 1, 2], "a and b still feed sin(a*b)");
        assert_eq!(h.program.n_inputs, 5);
        // At most four inputs (the fast kernels without a wide one): the part that saves
        // more, `log(cos(b)+2)` (two expensive ops against `cos(a)`'s one).
        let f = hoist_parts(p, &[0b01, 0b10, 0], &[m, n], FAST_LOADED).expect("one part fits");
        assert_eq!(f.parts.len(), 1, "{t:?}");
        assert_eq!(
            (f.parts[0].axes, f.parts[0].inputs.clone()),
            (0b10, vec![1])
        );
        assert_eq!(f.parts[0].program.code().len(), 5, "b, cos, 2, +, log");
        assert_eq!((f.inputs.clone(), f.program.n_inputs), (vec![0, 1, 2], 4));
        assert_ne!(f.program.fast, strided_apply_expr::ir::NOT_FAST, "{t:?}");
        assert!(
            hoist_parts(p, &[0b01, 0b10, 0], &[m, n], 3).is_none(),
            "a, b, c alone are 3"
        );
        // Every element: the parts' values fed to the main program give the original bits.
        let mut r = Rng::new(7);
        let class = Class::of(t).unwrap();
        for i in 0..m {
            for j in 0..n {
                let vals: Vec<u64> = (0..3)
                    .map(|_| value::widen(t, random_value(&mut r, t)))
                    .collect();
                let (a, b, cc) = (vals[0], vals[1], vals[2]);
                let want = eval_at(p, &[a, b, cc]);
                let p0 = eval_at(&h.parts[0].program, &[a]);
                let p1 = eval_at(&h.parts[1].program, &[b]);
                // Stored in the part's element type and read back: exact.
                let e0 = h.parts[0].elem;
                let p0 = value::widen(e0, value::narrow(class, p0, e0));
                let got = eval_at(&h.program, &[a, b, cc, p0, p1]);
                assert_eq!(eval_at(&f.program, &[a, b, cc, p1]), got, "{t:?} one part");
                let same = got == want || {
                    let f = |v: u64| {
                        if class == Class::F64 {
                            f64::from_bits(v).is_nan()
                        } else {
                            f32::from_bits(v as u32).is_nan()
                        }
                    };
                    f(got) && f(want)
                };
                assert!(same, "{t:?} ({i}, {j}): {got:#x} != {want:#x}");
            }
        }
    }
    // Nothing to gain: no expensive op, every input varying, a temporary as large as the
    // output, or a bare load.
    let cheap = parse("a * b + c")
        .compile(&tensors(&[("a", F32), ("b", F32), ("c", F32)]), None)
        .unwrap();
    assert!(hoist(cheap.program(), &[0b01, 0b10, 0], &[5, 7], MAX_INPUTS).is_none());
    let full = parse("cos(a) * b")
        .compile(&tensors(&[("a", F32), ("b", F32)]), None)
        .unwrap();
    assert!(hoist(full.program(), &[0, 0], &[5, 7], MAX_INPUTS).is_none());
    assert!(
        hoist(full.program(), &[0b01, 0], &[1, 7], MAX_INPUTS).is_none(),
        "size-1 axis: no saving"
    );
    let h = hoist(full.program(), &[0b01, 0], &[5, 7], MAX_INPUTS).expect("cos of a row");
    assert_eq!(
        (h.parts.len(), h.inputs.clone()),
        (1, vec![1]),
        "a is read by the part only"
    );
}

#[test]
fn a_program_invariant_along_an_axis_is_hoisted_whole_and_keeps_the_bits() {
    use crate::expr::hoist::hoist;
    for (text, t) in [("erf(a)", F32), ("erf(a)", F16), ("sqrt(a) * a + 1", F64)] {
        let c = parse(text).compile(&tensors(&[("a", t)]), None).unwrap();
        let p = c.program();
        // Out [5, 7], `a` a row: the whole program once per column.
        let h = hoist(p, &[0b01], &[5, 7], MAX_INPUTS).expect("the root hoisted");
        assert_eq!(h.parts.len(), 1, "{text}");
        assert_eq!(
            (h.parts[0].axes, h.parts[0].inputs.clone()),
            (0b01, vec![0])
        );
        assert!(
            h.inputs.is_empty(),
            "{text}: the main program reads the temporary only"
        );
        assert_eq!(h.program.code().len(), 1, "{text}: a load");
        assert_eq!(h.program.out, p.out, "{text}: the output type stays");
        let class = Class::of(t).unwrap();
        let e = h.parts[0].elem;
        let mut r = Rng::new(11);
        for _ in 0..200 {
            let a = value::widen(t, random_value(&mut r, t));
            let want = value::narrow(class, eval_at(p, &[a]), t);
            // The part stored in its element type, read back, rounded once to the output.
            let part = value::widen(
                e,
                value::narrow(class, eval_at(&h.parts[0].program, &[a]), e),
            );
            let got = value::narrow(class, eval_at(&h.program, &[part]), t);
            assert_eq!(got, want, "{text} {t:?}");
        }
        // Varying along every axis, or a temporary over half the output: not hoisted.
        assert!(hoist(p, &[0], &[5, 7], MAX_INPUTS).is_none(), "{text}");
        assert!(hoist(p, &[0b01], &[1, 7], MAX_INPUTS).is_none(), "{text}");
    }
    // A bare load or cheap ops only: nothing to save.
    for text in ["a", "a * 2 + 1"] {
        let c = parse(text).compile(&tensors(&[("a", F32)]), None).unwrap();
        assert!(
            hoist(c.program(), &[0b01], &[5, 7], MAX_INPUTS).is_none(),
            "{text}"
        );
    }
}
