//! The interpreter: opcode and class codes decoded without tables, the fast path's
//! programs and its bits against the general interpreter's.

use super::*;

#[test]
fn opcode_and_class_codes_decode_without_tables() {
    // The interpreter decodes codes by range and order (a table is a memory load on the
    // GPU): every opcode's arity from its position, every code round-trips, others refused.
    for (i, &op) in Opcode::ALL.iter().enumerate() {
        assert_eq!(op as usize, i);
        assert_eq!(Opcode::arity_of(i as u8), op.arity(), "{op:?}");
        assert_eq!(Opcode::from_code(i as u8), Some(op));
    }
    for c in Opcode::ALL.len()..=255 {
        assert_eq!(Opcode::from_code(c as u8), None);
    }
    for (i, &c) in Class::ALL.iter().enumerate() {
        assert_eq!(Class::from_code(i as u8), Some(c));
    }
    for c in Class::ALL.len()..=255 {
        assert_eq!(Class::from_code(c as u8), None);
    }
}

#[test]
fn the_fast_path_takes_one_numeric_type_programs_of_four_slots() {
    use strided_apply_expr::eval::fast_class;
    let f = |text: &str, t: ElemType| {
        let e = parse(text);
        let args: Vec<(&str, Arg)> = e.names().into_iter().map(|n| (n, Arg::Tensor(t))).collect();
        e.compile(&args, None).unwrap()
    };
    let seed = f("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)", F32);
    assert_eq!(fast_class(seed.program()), Some(Class::F32));
    assert_eq!(seed.program().fast, Class::F32 as u8);
    assert_eq!(fast_class(f("a + b", BF16).program()), Some(Class::F32));
    assert_eq!(fast_class(f("a * b + c", F64).program()), Some(Class::F64));
    assert_eq!(fast_class(f("a + b", U8).program()), Some(Class::U8));
    assert_eq!(fast_class(f("a % b - a", I64).program()), Some(Class::I64));
    // Every input the IR allows (eight), a stack of four.
    assert_eq!(
        fast_class(f("a + b + c + d + e + f + g + h", F32).program()),
        Some(Class::F32)
    );
    // Comparisons, tests and `where` of floats (a comparison as the type's 1 or 0).
    assert_eq!(
        fast_class(f("where(a > b, a, b)", F32).program()),
        Some(Class::F32)
    );
    assert_eq!(
        fast_class(f("where(isnan(a), 0, a)", F16).program()),
        Some(Class::F32)
    );
    assert_eq!(
        fast_class(f("where(a <= b, a - b, b)", F64).program()),
        Some(Class::F64)
    );
    // Narrow integers in `i32` math (its fast kernels widen and wrap them).
    assert_eq!(fast_class(f("a + b", I8).program()), Some(Class::I32));
    assert_eq!(fast_class(f("a * b", U16).program()), Some(Class::I32));
    // An integer output of another math type: general (the fast kernels convert between
    // the float types and within a math type only).
    let u8_to_i32 = parse("a + b")
        .compile(&tensors(&[("a", U8), ("b", U8)]), Some(I32))
        .unwrap();
    assert_eq!(fast_class(u8_to_i32.program()), None);
    // Bool, integer comparisons, casts, other functions, 8-bit floats, or a deeper stack:
    // general.
    for (text, t) in [
        ("f32(a) * 2 + 1", F8E4M3),
        ("f32(a) * 2 + 1", F8E5M2),
        ("a & b", Bool),
        ("where(a > b, a, b)", U8),
        ("where(a > b, a, b)", I32),
        ("erf(a)", F32),
        ("where((a > b) & (b > a), a, b)", F32),
        ("where(a, b, b)", Bool),
        ("f32(a > b) + a", F32),
        ("bf16(a) + b", F32),
        ("a + (b + (c + (d + e)))", F32),
    ] {
        let c = f(text, t);
        assert_eq!(fast_class(c.program()), None, "{text}");
        assert_eq!(c.program().fast, strided_apply_expr::ir::NOT_FAST, "{text}");
    }
}

/// The fast interpreter (one dispatch per instruction on its precomputed word) gives the
/// general interpreter's bits for random programs of every fast math type, and every
/// (opcode, slot) and (input, slot) has a dispatch code of its own.
#[test]
fn the_fast_path_gives_the_general_interpreters_bits() {
    use strided_apply_expr::eval::{
        fast_allows, fast_class, fast_word, run_fast, Eval, FAST_INPUTS, FAST_SLOTS,
    };
    use strided_apply_expr::ir::{Instr, Opcode};
    // Distinct codes: loads by (input, slot), every op of the fast paths by (op, slot).
    let mut seen = std::collections::HashMap::new();
    let fast_op = |o: Opcode| o == Opcode::Load || Class::ALL.iter().any(|&c| fast_allows(c, o));
    for (op, arity) in Opcode::ALL
        .iter()
        .filter(|&&o| fast_op(o))
        .map(|&o| (o, o.arity()))
    {
        for slot in 0..FAST_SLOTS as u8 {
            let inputs = if op == Opcode::Load {
                FAST_INPUTS as u8
            } else {
                1
            };
            for arg in 0..inputs {
                let i = Instr {
                    op: op as u8,
                    class: 0,
                    depth: slot + arity as u8,
                    arg,
                };
                let code = fast_word(i) & 0xff;
                if let Some(other) = seen.insert(code, (op, slot, arg)) {
                    panic!("{op:?} slot {slot} input {arg} shares code {code} with {other:?}");
                }
            }
        }
    }
    fn check<T: Eval>(p: &Program, vals: &[[u64; 4]], text: &str) {
        let mut fast = [[T::dec(0); 4]; FAST_INPUTS];
        let mut general = [[0u64; 4]; MAX_INPUTS];
        for (k, lanes) in vals.iter().enumerate() {
            fast[k] = lanes.map(T::dec);
            general[k] = *lanes;
        }
        let got = run_fast::<T, 4, FAST_INPUTS>(
            p.len as usize,
            |pc| fast_word(p.instrs[pc]),
            |c| p.consts[c],
            |k| fast[k],
        );
        let want = strided_apply_expr::eval(p, &general);
        // Bits, but a NaN as a NaN ([`both_nan`]: an optimised build may keep either
        // operand's NaN).
        let got = got.map(|v| v.enc());
        let e = T::CLASS.elem();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g == w || both_nan(e, *g, *w),
                "{text} on {vals:x?}: {got:x?} against {want:x?}"
            );
        }
    }
    let mut r = Rng::new(31);
    let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let mut ran = [0usize; 6];
    for t in [F32, BF16, F64, I32, I64, U32, U8] {
        let class = Class::of(t).unwrap();
        let mut tried = 0;
        while tried < 300 {
            let text = gen_num(
                &mut r,
                4,
                &Gen {
                    names: &names,
                    scalar: false,
                },
            );
            let e = parse(&text);
            let args = tensors(&e.names().into_iter().map(|n| (n, t)).collect::<Vec<_>>());
            let Ok(c) = e.compile(&args, None) else {
                continue;
            };
            let p = c.program();
            if fast_class(p) != Some(class) {
                continue;
            }
            tried += 1;
            let vals: Vec<[u64; 4]> = (0..p.n_inputs)
                .map(|_| std::array::from_fn(|_| value::widen(t, random_value(&mut r, t))))
                .collect();
            match class {
                Class::F32 => check::<f32>(p, &vals, &text),
                Class::F64 => check::<f64>(p, &vals, &text),
                Class::I32 => check::<i32>(p, &vals, &text),
                Class::I64 => check::<i64>(p, &vals, &text),
                Class::U32 => check::<u32>(p, &vals, &text),
                _ => check::<u8>(p, &vals, &text),
            }
            ran[Class::ALL.iter().position(|&x| x == class).unwrap()] += 1;
        }
    }
    assert!(
        ran.iter().all(|&n| n >= 300),
        "fast programs run per class: {ran:?}"
    );
}
