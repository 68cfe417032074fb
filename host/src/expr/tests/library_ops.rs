//! Every op of today's library, bit-identical to its expression (run-time dispatch).

use super::*;
use crate::dispatch::{instances, DynOp, Instance};

/// A seed from a name (FNV-1a), so each family gets its own data.
fn seed_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Op ids with no expression form (stencils and reductions live in their own lists
/// today, so none of them reaches `instances()`; they are named here so that one that
/// does is skipped on purpose, and an op id in neither list fails the test).
const NO_EXPRESSION: &[&str] = &[
    "shift_xp", "shift_xm", "shift_yp", "shift_ym", "shift_zp", "shift_zm", "fdiff", "bdiff",
    "lap2", "lap3", "sum", "prod", "amin", "amax", "mean", "sumsq", "norm2", "argmin", "argmax",
    "all", "any", "sqdiff", "dot",
];

/// A library op as an expression.
struct Case {
    text: String,
    /// The expression's names of the library's inputs, in operand order.
    inputs: Vec<&'static str>,
    /// The expression's names of the library's scalars, in order.
    scalars: Vec<&'static str>,
    /// The library op reads its output (update forms): the expression reads it as `o`.
    reads_out: bool,
    /// Only values the library accepts are compared (the expression's type is wider).
    lenient: bool,
}

/// `x op y` for a binary op id of the library (`div` truncates integers: `trunc_div`).
fn binary(op: &str, x: &str, y: &str) -> Option<String> {
    let infix = |s: &str| Some(format!("{x} {s} {y}"));
    let call = |f: &str| Some(format!("{f}({x}, {y})"));
    match op {
        "add" => infix("+"),
        "sub" => infix("-"),
        "mul" => infix("*"),
        "div" => call("trunc_div"),
        "min" => call("min"),
        "max" => call("max"),
        "pow" => call("pow"),
        "eq" => infix("=="),
        "ne" => infix("!="),
        "lt" => infix("<"),
        "le" => infix("<="),
        "gt" => infix(">"),
        "ge" => infix(">="),
        _ => None,
    }
}

/// A library op over a 16-bit float holds its scalars in that type (rounded once when
/// the op is built), then computes in `f32`: the expression says so with a cast.
fn case(inst: &Instance) -> Option<Case> {
    let c = case_text(inst)?;
    let st = *inst.types.last()?;
    if !matches!(st, F16 | BF16) || c.scalars.is_empty() {
        return Some(c);
    }
    let text = wrap_names(&c.text, &c.scalars, st.name());
    Some(Case { text, ..c })
}

/// `text` with every whole-word occurrence of `names` written as `f(name)`.
fn wrap_names(text: &str, names: &[&str], f: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if names.contains(&word.as_str()) {
            out.push_str(&format!("{f}({word})"));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            word.push(ch);
        } else {
            flush(&mut word, &mut out);
            out.push(ch);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn case_text(inst: &Instance) -> Option<Case> {
    let op = inst.op();
    let float = matches!(inst.types[0], F32 | F64 | F16 | BF16);
    let mk = |text: String, inputs: &[&'static str], scalars: &[&'static str]| Case {
        text,
        inputs: inputs.to_vec(),
        scalars: scalars.to_vec(),
        reads_out: false,
        lenient: false,
    };
    let update = |text: String, inputs: &[&'static str], scalars: &[&'static str]| Case {
        reads_out: true,
        ..mk(text, inputs, scalars)
    };
    if let Some(t) = binary(op, "a", "b") {
        return Some(mk(t, &["a", "b"], &[]));
    }
    if let Some(base) = op.strip_suffix("_assign_s") {
        return Some(update(binary(base, "o", "s")?, &[], &["s"]));
    }
    if let Some(base) = op.strip_suffix("_assign") {
        return Some(update(binary(base, "o", "a")?, &["a"], &[]));
    }
    match op {
        "rsub_s" => return Some(mk(binary("sub", "s", "a")?, &["a"], &["s"])),
        "rdiv_s" => return Some(mk(binary("div", "s", "a")?, &["a"], &["s"])),
        _ => {}
    }
    if let Some(base) = op.strip_suffix("_s") {
        return Some(mk(binary(base, "a", "s")?, &["a"], &["s"]));
    }
    Some(match op {
        "neg" => mk("-a".into(), &["a"], &[]),
        "abs" | "relu" | "sqrt" | "rsqrt" | "exp" | "log" | "sin" | "cos" | "tanh" | "sigmoid" => {
            mk(format!("{op}(a)"), &["a"], &[])
        }
        "clamp" => mk("clamp(a, lo, hi)".into(), &["a"], &["lo", "hi"]),
        "fma" => mk("fma(a, b, c)".into(), &["a", "b", "c"], &[]),
        "where" => mk("where(c, a, b)".into(), &["c", "a", "b"], &[]),
        "cast" => mk(format!("{}(a)", inst.types[0].name()), &["a"], &[]),
        // The expression `s` is an integer or float of its own: the library refuses
        // values its element type cannot hold, the expression converts them.
        "fill" => Case {
            lenient: true,
            ..mk("s".into(), &[], &["s"])
        },
        "axpy" => mk("alpha * x + y".into(), &["x", "y"], &["alpha"]),
        "axpby" => mk("sa * x + sb * y".into(), &["x", "y"], &["sa", "sb"]),
        "bias_relu" => mk("relu(x + bias)".into(), &["x", "bias"], &[]),
        "silu" => mk("x * sigmoid(x)".into(), &["x"], &[]),
        "divmul" if float => mk("(a / s) * (b / t)".into(), &["a", "b"], &["s", "t"]),
        "divmul" => mk(
            "trunc_div(a, s) * trunc_div(b, t)".into(),
            &["a", "b"],
            &["s", "t"],
        ),
        "lerp" => mk("a + w * (b - a)".into(), &["a", "b", "w"], &[]),
        "recip_update" => update("o + 1.0 / o + 2.0 * o * b".into(), &["b"], &[]),
        _ => return None,
    })
}

const TIE_ABOVE: f64 = 1.0 + 1.0 / 2048.0 + 1.0 / 1_099_511_627_776.0; // 1 + 2^-11 + 2^-40
const BIG_I64: i64 = (1 << 62) + (1 << 38) + 1;

/// The scalar values to try, for `n` scalars of an op over `t`.
fn scalar_sets(n: usize, t: ElemType) -> Vec<Vec<Scalar>> {
    let float = matches!(t, F32 | F64 | F16 | BF16);
    match (n, float) {
        (0, _) => vec![vec![]],
        (1, true) => [
            Scalar::F64(2.5),
            Scalar::F64(-0.0),
            Scalar::F64(0.1),
            Scalar::F64(1e-40),
            Scalar::F64(1e300),
            Scalar::F64(f64::NAN),
            Scalar::F64(f64::NEG_INFINITY),
            Scalar::F64(TIE_ABOVE),
            Scalar::F64(3.0),
            Scalar::F64(65504.0),
            Scalar::F64(1e5),
            Scalar::I64(3),
            Scalar::I64(-7),
            Scalar::I64(0),
            Scalar::I64(BIG_I64),
            Scalar::I64((1 << 24) + 1),
            Scalar::U64((1 << 63) + (1 << 39) + 1),
            Scalar::Bool(true),
        ]
        .iter()
        .map(|&s| vec![s])
        .collect(),
        (1, false) => [
            Scalar::I64(0),
            Scalar::I64(1),
            Scalar::I64(-1),
            Scalar::I64(3),
            Scalar::I64(-7),
            Scalar::I64(255),
            Scalar::I64(300),
            Scalar::I64(i32::MIN as i64),
            Scalar::I64(i32::MAX as i64),
            Scalar::I64(i64::MIN),
            Scalar::I64(u32::MAX as i64),
            Scalar::U64(u64::MAX),
            Scalar::U64(200),
            Scalar::Bool(true),
        ]
        .iter()
        .map(|&s| vec![s])
        .collect(),
        (_, true) => vec![
            vec![Scalar::F64(-1.0), Scalar::F64(1.0)],
            vec![Scalar::F64(0.1), Scalar::F64(0.2)],
            vec![Scalar::F64(-0.0), Scalar::F64(0.0)],
            vec![Scalar::F64(2.0), Scalar::F64(-2.0)],
            vec![Scalar::F64(f64::NAN), Scalar::F64(1.0)],
            vec![Scalar::F64(f64::NEG_INFINITY), Scalar::F64(f64::INFINITY)],
            vec![Scalar::I64(-1), Scalar::F64(1.0)],
            vec![Scalar::F64(1e-40), Scalar::F64(3.0)],
            vec![Scalar::F64(0.0), Scalar::F64(4.0)],
            vec![Scalar::I64(BIG_I64), Scalar::Bool(true)],
        ],
        (_, false) => vec![
            vec![Scalar::I64(-5), Scalar::I64(5)],
            vec![Scalar::I64(0), Scalar::I64(255)],
            vec![Scalar::I64(10), Scalar::I64(3)],
            vec![Scalar::I64(i64::MIN), Scalar::I64(i64::MAX)],
            vec![Scalar::I64(-1), Scalar::I64(1)],
            vec![Scalar::Bool(false), Scalar::Bool(true)],
            vec![Scalar::I64(0), Scalar::U64(200)],
        ],
    }
}

/// The inputs of one family: the first two cross every pair of their special values,
/// then random values; the others random.
fn family_data(r: &mut Rng, types: &[ElemType]) -> (usize, Vec<Vec<u64>>) {
    let sp: Vec<Vec<u64>> = types.iter().map(|&t| specials(t)).collect();
    let cross: usize = sp.iter().take(2).map(Vec::len).product();
    let n = cross + 160;
    let data = (0..types.len())
        .map(|j| {
            (0..n)
                .map(|i| {
                    if i < cross && j < 2 {
                        let k0 = sp[0].len();
                        if j == 0 {
                            sp[0][i % k0]
                        } else {
                            sp[1][i / k0]
                        }
                    } else {
                        random_value(r, types[j])
                    }
                })
                .collect()
        })
        .collect();
    (n, data)
}

/// What one comparison found.
enum Outcome {
    Same,
    BothRefused,
    /// Elements that differ: how many, an example.
    Differ(String),
    /// Only one side accepted the scalars, or the expression failed otherwise.
    Broken(String),
}

fn compare(inst: &Instance, c: &Case, scalars: &[Scalar], r: &mut Rng) -> Outcome {
    let out_t = inst.types[0];
    // Operand types of the expression's tensors: `o` (read output) first.
    let mut names: Vec<&str> = Vec::new();
    let mut types: Vec<ElemType> = Vec::new();
    if c.reads_out {
        names.push("o");
        types.push(out_t);
    }
    for (k, &n) in c.inputs.iter().enumerate() {
        names.push(n);
        types.push(inst.types[k + 1]);
    }
    let (n, data) = family_data(r, &types);
    let l = contiguous(&[n]);
    let bufs: Vec<Buf> = types
        .iter()
        .zip(&data)
        .map(|(&t, v)| Buf::of(t, v))
        .collect();

    // The library.
    let first = usize::from(c.reads_out);
    let lib = DynOp::new(inst.op(), inst.types, scalars);
    let mut lib_out = if c.reads_out {
        bufs[0].clone()
    } else {
        Buf::new(n * out_t.size(), 0xA5)
    };
    if let Ok(op) = &lib {
        let ins: Vec<HostTensor> = bufs[first..]
            .iter()
            .zip(&types[first..])
            .map(|(b, &t)| HostTensor::new(b.bytes(), t, &l))
            .collect();
        if let Err(e) = op.run_cpu(HostTensorMut::new(lib_out.bytes_mut(), out_t, &l), &ins) {
            return Outcome::Broken(format!("the library op fails: {e}"));
        }
    }

    // The expression.
    let mut args = tensors(
        &names
            .iter()
            .copied()
            .zip(types.iter().copied())
            .collect::<Vec<_>>(),
    );
    let named: Vec<(&str, Scalar)> = c
        .scalars
        .iter()
        .copied()
        .zip(scalars.iter().copied())
        .collect();
    args.extend(named.iter().map(|(n, s)| (*n, Arg::Scalar(kind_of(s)))));
    let compiled = match parse(&c.text).compile(&args, Some(out_t)) {
        Ok(x) => x,
        Err(e) => return Outcome::Broken(format!("`{}` does not compile: {e}", c.text)),
    };
    let order: Vec<usize> = compiled
        .inputs()
        .iter()
        .map(|name| names.iter().position(|n| n == name).unwrap())
        .collect();
    let ins: Vec<HostTensor> = order
        .iter()
        .map(|&k| HostTensor::new(bufs[k].bytes(), types[k], &l))
        .collect();
    let mut ex_out = Buf::new(n * out_t.size(), 0x5A);
    let ran = compiled.run_cpu(
        HostTensorMut::new(ex_out.bytes_mut(), out_t, &l),
        &ins,
        &named,
    );

    match (&lib, ran) {
        (Err(_), Err(_)) => Outcome::BothRefused,
        (Err(_), Ok(())) if c.lenient => Outcome::BothRefused,
        (Err(e), Ok(())) => Outcome::Broken(format!(
            "the library refuses the scalars ({e}), the expression accepts them"
        )),
        (Ok(_), Err(e)) => Outcome::Broken(format!(
            "the library accepts the scalars, the expression fails: {e}"
        )),
        (Ok(_), Ok(())) => {
            // Documented differences (docs/expressions.md, "Types"): a NaN is a NaN
            // whatever its payload and sign (IEEE leaves them open, and an optimised CPU
            // build picks the operand whose NaN it keeps by instruction order), and a
            // bool loads as 0 or 1 (the library's `where` copies a bool byte as it is).
            let same = |x: u64, y: u64| {
                x == y
                    || both_nan(out_t, x, y)
                    || (out_t == Bool && inst.op() == "where" && (x != 0) == (y != 0))
            };
            let mut bad = (0..n).filter(|&i| !same(lib_out.get(out_t, i), ex_out.get(out_t, i)));
            let Some(i) = bad.next() else {
                return Outcome::Same;
            };
            let count = 1 + bad.count();
            let ins: Vec<String> = names
                .iter()
                .zip(&types)
                .zip(&bufs)
                .map(|((name, &t), b)| format!("{name}={}", show(t, b.get(t, i))))
                .collect();
            Outcome::Differ(format!(
                "{} of {n} elements differ, e.g. {}: library {}, expression {}",
                count,
                ins.join(" "),
                show(out_t, lib_out.get(out_t, i)),
                show(out_t, ex_out.get(out_t, i)),
            ))
        }
    }
}

#[test]
fn every_library_op_equals_its_expression_bit_for_bit() {
    let mut checked = 0usize;
    let mut runs = 0usize;
    let mut skipped: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let all: Vec<&Instance> = instances().collect();
    for inst in &all {
        let fam = format!(
            "{} ({})",
            inst.op(),
            inst.types
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let Some(c) = case(inst) else {
            if NO_EXPRESSION.contains(&inst.op()) {
                skipped.push(fam);
            } else {
                unknown.push(fam);
            }
            continue;
        };
        checked += 1;
        let st = *inst.types.last().unwrap();
        let mut r = Rng::new(seed_of(&fam));
        let mut lines = Vec::new();
        for scalars in scalar_sets(c.scalars.len(), st) {
            runs += 1;
            let what = if scalars.is_empty() {
                String::new()
            } else {
                format!(" scalars {scalars:?}")
            };
            match compare(inst, &c, &scalars, &mut r) {
                Outcome::Same | Outcome::BothRefused => {}
                Outcome::Differ(d) => lines.push(format!("   {}{what}: {d}", c.text)),
                Outcome::Broken(d) => lines.push(format!("   {}{what}: {d}", c.text)),
            }
        }
        if !lines.is_empty() {
            failures.push(format!("{fam}:\n{}", lines.join("\n")));
        }
    }
    println!(
        "{checked} families of {} checked ({runs} runs); skipped (no expression form): {skipped:?}",
        all.len()
    );
    assert!(
        unknown.is_empty(),
        "op ids neither mapped nor skipped: {unknown:?}"
    );
    assert_eq!(checked + skipped.len(), all.len());
    assert!(checked >= 480, "only {checked} families checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} families differ from their expression:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
