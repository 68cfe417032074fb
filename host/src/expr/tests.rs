//! Tests of expressions on the CPU twin: every op of the library against its expression,
//! the parser, lowering and its limits, binding, promotion, layouts, and accuracy.

use super::*;
use crate::layout::Layout;
use gpu_kernels::elem::{bf16, f16};
use std::time::Duration;
use ElemType::*;

// ---------------------------------------------------------------------------------------
// Helpers: a deterministic RNG, aligned byte buffers, values of every element type.
// ---------------------------------------------------------------------------------------

/// xorshift64* (no dependency, deterministic).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// Element bytes held in 8-byte words, so that every element type is aligned.
#[derive(Clone)]
struct Buf {
    words: Vec<u64>,
    len: usize,
}

impl Buf {
    fn new(len: usize, fill: u8) -> Buf {
        let mut b = Buf {
            words: vec![0; len.div_ceil(8).max(1)],
            len,
        };
        b.bytes_mut().fill(fill);
        b
    }
    /// Elements of `e` with these bits (zero-extended), contiguous.
    fn of(e: ElemType, vals: &[u64]) -> Buf {
        let mut b = Buf::new(vals.len() * e.size(), 0);
        for (i, &v) in vals.iter().enumerate() {
            b.set(e, i, v);
        }
        b
    }
    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[..len]
    }
    fn get(&self, e: ElemType, i: usize) -> u64 {
        let s = e.size();
        let mut w = [0u8; 8];
        w[..s].copy_from_slice(&self.bytes()[i * s..(i + 1) * s]);
        u64::from_ne_bytes(w)
    }
    fn set(&mut self, e: ElemType, i: usize, v: u64) {
        let s = e.size();
        self.bytes_mut()[i * s..(i + 1) * s].copy_from_slice(&v.to_ne_bytes()[..s]);
    }
    fn elems(&self, e: ElemType) -> Vec<u64> {
        (0..self.len / e.size()).map(|i| self.get(e, i)).collect()
    }
}

fn contiguous(shape: &[usize]) -> Layout {
    Layout::contiguous(shape).unwrap()
}

/// An element's bits in hex, with its value.
fn show(e: ElemType, v: u64) -> String {
    let val = match e {
        F32 => format!("{:e}", f32::from_bits(v as u32)),
        F64 => format!("{:e}", f64::from_bits(v)),
        F16 => format!("{:e}", f16::from_bits(v as u16).to_f32()),
        BF16 => format!("{:e}", bf16::from_bits(v as u16).to_f32()),
        I32 => (v as u32 as i32).to_string(),
        I64 => (v as i64).to_string(),
        _ => v.to_string(),
    };
    format!("{:#0w$x} ({val})", v, w = 2 + 2 * e.size())
}

const ALL_TYPES: [ElemType; 9] = [F32, F64, I32, I64, U32, U8, Bool, F16, BF16];

/// Whether `x` and `y` are both NaNs of float type `t`. Payload and sign of a NaN are not
/// part of the contract: IEEE leaves them open, and an optimised CPU build keeps the NaN of
/// whichever operand its instruction order puts first (lanes of one program can differ).
fn both_nan(t: ElemType, x: u64, y: u64) -> bool {
    let nan = |b: u64| match t {
        F32 => f32::from_bits(b as u32).is_nan(),
        F64 => f64::from_bits(b).is_nan(),
        F16 => b & 0x7c00 == 0x7c00 && b & 0x3ff != 0,
        BF16 => b & 0x7f80 == 0x7f80 && b & 0x7f != 0,
        _ => false,
    };
    nan(x) && nan(y)
}

fn f32s(xs: &[f32]) -> Vec<u64> {
    xs.iter().map(|x| x.to_bits() as u64).collect()
}

/// Values that break things: NaNs (with payloads, negative, signalling), ±inf, ±0,
/// subnormals, extremes, integer edges, non-canonical bools.
fn specials(e: ElemType) -> Vec<u64> {
    match e {
        F32 => f32s(&[
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            -2.5,
            3.0,
            7.0,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7fc0_1234),
            f32::from_bits(0x7f80_0001),
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            -1e-40,
            f32::MAX,
            f32::MIN,
            1e30,
            -1e-30,
            88.7,
            -103.0,
            16_777_217.0,
            0.1,
        ]),
        F64 => [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            -2.5,
            3.0,
            7.0,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_1234),
            f64::from_bits(0x7ff0_0000_0000_0001),
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            f64::from_bits(1),
            -1e-310,
            f64::MAX,
            f64::MIN,
            1e300,
            1e-300,
            1e-40,
            709.8,
            -745.2,
            9_007_199_254_740_993.0,
            0.1,
        ]
        .iter()
        .map(|x: &f64| x.to_bits())
        .collect(),
        F16 => vec![
            0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x4000, 0xc100, 0x4200, 0x7c00, 0xfc00, 0x7e00,
            0x7fff, 0xfe00, 0x7c01, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x2e66, 0x5640,
        ],
        BF16 => vec![
            0x0000, 0x8000, 0x3f80, 0xbf80, 0x3f00, 0x4000, 0xc020, 0x4040, 0x7f80, 0xff80, 0x7fc0,
            0x7fff, 0xffc0, 0x7f81, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3dcd, 0x4b80,
        ],
        I32 => [
            i32::MIN,
            i32::MAX,
            -1,
            0,
            1,
            2,
            -2,
            3,
            7,
            -7,
            255,
            256,
            i32::MIN + 1,
            (1 << 24) + 1,
        ]
        .iter()
        .map(|&x| x as u32 as u64)
        .collect(),
        I64 => [
            i64::MIN,
            i64::MAX,
            -1,
            0,
            1,
            2,
            -2,
            3,
            -7,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            (1 << 53) + 1,
            (1 << 62) + (1 << 38) + 1,
            255,
        ]
        .iter()
        .map(|&x| x as u64)
        .collect(),
        U32 => [
            0,
            1,
            2,
            3,
            7,
            255,
            256,
            0x8000_0000,
            u32::MAX,
            u32::MAX - 1,
            (1 << 24) + 1,
        ]
        .iter()
        .map(|&x| x as u64)
        .collect(),
        U8 => vec![0, 1, 2, 3, 7, 127, 128, 254, 255],
        Bool => vec![0, 1, 2, 255],
        _ => vec![0],
    }
}

/// A random element: a special value, a moderate value, or random bits.
fn random_value(r: &mut Rng, e: ElemType) -> u64 {
    match r.below(4) {
        0 | 1 => r.pick(&specials(e)),
        2 => {
            let x = (r.unit() - 0.5) * 16.0;
            match e {
                F32 => (x as f32).to_bits() as u64,
                F64 => x.to_bits(),
                F16 => f16::from_f64(x).to_bits() as u64,
                BF16 => bf16::from_f64(x).to_bits() as u64,
                I32 => (x as i32) as u32 as u64,
                I64 => (x as i64) as u64,
                U32 | U8 => (x.abs() * 16.0) as u64 & value::width_mask(e),
                _ => r.below(2) as u64,
            }
        }
        _ => match e {
            Bool => r.below(2) as u64,
            _ => r.next() & value::width_mask(e),
        },
    }
}

fn random_buf(r: &mut Rng, e: ElemType, n: usize) -> Buf {
    let vals: Vec<u64> = (0..n).map(|_| random_value(r, e)).collect();
    Buf::of(e, &vals)
}

/// The element offsets `l` reaches over `shape`, row-major (numpy broadcasting of `l` to
/// `shape`: leading axes added, size-1 axes repeated).
fn offsets(l: &Layout, shape: &[usize]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let lead = shape.len() - l.ndim();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let mut off = l.offset() as isize;
        for d in 0..l.ndim() {
            let i = if l.shape()[d] == 1 { 0 } else { idx[lead + d] };
            off += i as isize * l.strides()[d];
        }
        out.push(usize::try_from(off).expect("offset in the buffer"));
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// The logical elements of a view, broadcast to `shape`, row-major.
fn gather(b: &Buf, e: ElemType, l: &Layout, shape: &[usize]) -> Vec<u64> {
    offsets(l, shape).iter().map(|&o| b.get(e, o)).collect()
}

fn parse(text: &str) -> Expr {
    Expr::parse(text).unwrap_or_else(|e| panic!("`{text}`: {e}"))
}

fn tensors<'a>(args: &[(&'a str, ElemType)]) -> Vec<(&'a str, Arg)> {
    args.iter().map(|&(n, t)| (n, Arg::Tensor(t))).collect()
}

fn kind_of(s: &Scalar) -> ScalarKind {
    match s {
        Scalar::F64(_) => ScalarKind::Float,
        Scalar::I64(_) | Scalar::U64(_) => ScalarKind::Int,
        Scalar::Bool(_) => ScalarKind::Bool,
    }
}

/// Compiles `text` over tensors `args` (contiguous, 1-D) and runs it on `data`.
fn eval_1d(
    text: &str,
    args: &[(&str, ElemType, Vec<u64>)],
    scalars: &[(&str, Scalar)],
    out: Option<ElemType>,
) -> Result<(ElemType, Vec<u64>)> {
    let mut a: Vec<(&str, Arg)> = args.iter().map(|(n, t, _)| (*n, Arg::Tensor(*t))).collect();
    a.extend(scalars.iter().map(|(n, s)| (*n, Arg::Scalar(kind_of(s)))));
    let c = parse(text).compile(&a, out)?;
    let n = args.first().map_or(1, |x| x.2.len());
    let l = contiguous(&[n]);
    let bufs: Vec<(ElemType, Buf)> = c
        .inputs()
        .iter()
        .map(|name| {
            let (_, t, v) = args.iter().find(|x| x.0 == name).unwrap();
            (*t, Buf::of(*t, v))
        })
        .collect();
    let ins: Vec<HostTensor> = bufs
        .iter()
        .map(|(t, b)| HostTensor::new(b.bytes(), *t, &l))
        .collect();
    let mut o = Buf::new(n * c.out().size(), 0xEE);
    c.run_cpu(
        HostTensorMut::new(o.bytes_mut(), c.out(), &l),
        &ins,
        scalars,
    )?;
    Ok((c.out(), o.elems(c.out())))
}

// ---------------------------------------------------------------------------------------
// 1. Every op of today's library, bit-identical to its expression.
// ---------------------------------------------------------------------------------------

#[cfg(feature = "dispatch")]
mod library_ops {
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
        "lap2", "lap3", "sum", "prod", "amin", "amax", "mean", "sumsq", "norm2", "argmin",
        "argmax", "all", "any", "sqdiff", "dot",
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
            "abs" | "relu" | "sqrt" | "rsqrt" | "exp" | "log" | "sin" | "cos" | "tanh"
            | "sigmoid" => mk(format!("{op}(a)"), &["a"], &[]),
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
                let mut bad =
                    (0..n).filter(|&i| !same(lib_out.get(out_t, i), ex_out.get(out_t, i)));
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
}

// ---------------------------------------------------------------------------------------
// 2. The parser.
// ---------------------------------------------------------------------------------------

fn v(name: &str) -> Expr {
    Expr::var(name)
}

#[test]
fn the_seed_expression_parses_to_its_builder_form() {
    let (a, b, c) = (v("a"), v("b"), v("c"));
    let built = (a.clone() * b.clone()).sin() + c.sqrt() + a.cos() / (b.cos() + 2).log();
    assert_eq!(parse("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)"), built);
    // Spacing does not matter; function names and casts build the same nodes.
    assert_eq!(
        parse("  sin( a * b )+sqrt(c)+cos(a) / log(cos(b) + 2)  "),
        built
    );
    assert_eq!(parse("div(a, b)"), v("a") / v("b"));
    assert_eq!(parse("trunc_div(a, b)"), v("a").trunc_div(v("b")));
    assert_eq!(parse("f16(a)"), v("a").cast(F16));
    assert_eq!(parse("bfloat16(a)"), v("a").cast(BF16));
    assert_eq!(parse("where(c, a, 1.5)"), Expr::where_(v("c"), v("a"), 1.5));
    assert_eq!(parse("a % 3"), v("a") % 3);
}

#[test]
fn precedence_and_associativity() {
    let (a, b, c) = (v("a"), v("b"), v("c"));
    // `-a**2` is `-(a**2)`; `**` is right-associative.
    assert_eq!(parse("-a**2"), -(a.clone().pow(2)));
    assert_eq!(
        parse("a ** b ** c"),
        a.clone().pow(b.clone().pow(c.clone()))
    );
    assert_eq!(parse("2 ** -1"), Expr::int(2).pow(-1));
    // Left-associative sums and products; `/` is true division, then `*`.
    assert_eq!(parse("a - b - c"), (a.clone() - b.clone()) - c.clone());
    assert_eq!(parse("a / b * c"), (a.clone() / b.clone()) * c.clone());
    assert_eq!(parse("a + b * c"), a.clone() + b.clone() * c.clone());
    // Comparisons bind tighter than `&`, `&` tighter than `|`, `!` tighter than both.
    assert_eq!(
        parse("a < b & c"),
        a.clone().lt(b.clone()).logical_and(c.clone())
    );
    assert_eq!(
        parse("!a | b"),
        a.clone().logical_not().logical_or(b.clone())
    );
    assert_eq!(
        parse("a && b || c"),
        a.clone().logical_and(b.clone()).logical_or(c.clone())
    );
    assert_eq!(parse("~a"), a.clone().logical_not());
    // Negative literals stay literals; `-x` of a name is `neg`.
    assert_eq!(parse("-2"), Expr::int(-2));
    assert_eq!(parse("-2.5"), Expr::float(-2.5));
    assert_eq!(parse("-0.0").node(), &Node::Float(-0.0));
    assert!(matches!(parse("-0.0").node(), Node::Float(x) if x.is_sign_negative()));
    assert_eq!(parse("-a"), -a.clone());
    assert_eq!(parse("+a"), a.clone());
    // Numbers: underscores, exponents, leading dot; `true`/`false`.
    assert_eq!(parse("1_000"), Expr::int(1000));
    assert_eq!(parse("1e3"), Expr::float(1000.0));
    assert_eq!(parse(".5"), Expr::float(0.5));
    assert_eq!(parse("true | False"), Expr::bool(true).logical_or(false));
    // Comparisons do not chain.
    let e = Expr::parse("a < b < c").unwrap_err();
    assert!(
        matches!(&e, Error::ExprSyntax { pos: 6, reason } if reason.contains("chain")),
        "{e:?}"
    );
    let e = Expr::parse("a == b != c").unwrap_err();
    assert!(matches!(e, Error::ExprSyntax { pos: 7, .. }), "{e:?}");
}

/// The position and reason of a syntax error.
fn syntax_error(text: &str) -> (usize, String) {
    match Expr::parse(text) {
        Err(Error::ExprSyntax { pos, reason }) => (pos, reason),
        other => panic!("`{text}`: expected a syntax error, got {other:?}"),
    }
}

#[test]
fn parse_errors_are_typed_with_their_byte_position() {
    // Unexpected character, named whole even when it is not ASCII.
    let (pos, reason) = syntax_error("a + $b");
    assert_eq!(pos, 4);
    assert!(reason.contains("unexpected character `$`"), "{reason}");
    let (pos, reason) = syntax_error("a + é");
    assert_eq!(pos, 4);
    assert!(reason.contains("`é`"), "{reason}");
    assert_eq!(syntax_error("a # b").0, 2);
    // Unbalanced parentheses.
    let (pos, reason) = syntax_error("(a + b");
    assert_eq!(pos, 6);
    assert!(reason.contains("expected `)`"), "{reason}");
    let (pos, reason) = syntax_error("a + b)");
    assert_eq!(pos, 5);
    assert!(reason.contains("after the expression"), "{reason}");
    assert_eq!(syntax_error("sin(a").0, 5);
    assert_eq!(syntax_error("((a)").0, 4);
    // Unknown function: its name, position, and every known name.
    match Expr::parse("a + frob(b)") {
        Err(Error::ExprUnknown { name, pos, known }) => {
            assert_eq!((name.as_str(), pos), ("frob", 4));
            for n in [
                "sin",
                "trunc_div",
                "where",
                "clamp",
                "f32",
                "bf16",
                "u8",
                "bool",
            ] {
                assert!(known.split(", ").any(|k| k == n), "{n} not in {known}");
            }
        }
        other => panic!("{other:?}"),
    }
    // Wrong argument counts, at the function's name.
    let (pos, reason) = syntax_error("a + sin(a, b)");
    assert_eq!(pos, 4);
    assert!(reason.contains("takes 1 argument(s), not 2"), "{reason}");
    let (pos, reason) = syntax_error("where(a)");
    assert_eq!(pos, 0);
    assert!(reason.contains("takes 3"), "{reason}");
    let (pos, reason) = syntax_error("1 + f32(a, b)");
    assert_eq!(pos, 4);
    assert!(reason.contains("takes 1 argument"), "{reason}");
    assert_eq!(syntax_error("max()").0, 0);
    // Trailing tokens.
    let (pos, reason) = syntax_error("a b");
    assert_eq!(pos, 2);
    assert!(reason.contains("unexpected `b`"), "{reason}");
    assert_eq!(syntax_error("2a").0, 1);
    // Empty text, or nothing after an operator.
    let (pos, reason) = syntax_error("");
    assert_eq!(pos, 0);
    assert!(reason.contains("the end"), "{reason}");
    assert_eq!(syntax_error("   ").0, 3);
    assert_eq!(syntax_error("a +").0, 3);
    assert_eq!(syntax_error("a * * b").0, 4);
    // Numbers: too big for i64, malformed.
    let (pos, reason) = syntax_error("a + 99999999999999999999");
    assert_eq!(pos, 4);
    assert!(reason.contains("64-bit"), "{reason}");
    assert_eq!(parse("9223372036854775807"), Expr::int(i64::MAX));
    assert_eq!(syntax_error("a + 1e").0, 4);
    assert_eq!(syntax_error("1.2.3").0, 0);
}

#[test]
fn nesting_deeper_than_the_limit_is_an_error() {
    let nested = |n: usize| format!("{}a{}", "(".repeat(n), ")".repeat(n));
    parse(&nested(60));
    let (pos, reason) = syntax_error(&nested(100));
    assert!(reason.contains("nested deeper than 64"), "{reason}");
    // At the parenthesis that goes over (the 64th opens the 65th level) or the next.
    assert!((63..=64).contains(&pos), "{pos}");
    // Prefix operators and powers nest too.
    assert!(syntax_error(&format!("{}a", "-".repeat(100)))
        .1
        .contains("nested"));
    assert!(syntax_error(&format!("{}a", "!".repeat(100)))
        .1
        .contains("nested"));
    assert!(syntax_error(&vec!["a"; 100].join("**"))
        .1
        .contains("nested"));
    assert!(
        syntax_error(&format!("{}a{}", "sin(".repeat(100), ")".repeat(100)))
            .1
            .contains("nested")
    );
    // Text over 64 KiB.
    let (pos, reason) = syntax_error(&"a+".repeat(40_000));
    assert_eq!(pos, 1 << 16);
    assert!(reason.contains("longer"), "{reason}");
}

// ---------------------------------------------------------------------------------------
// Child processes: a stack overflow aborts the whole test binary and a hang never ends, so
// such tests run in a copy of this binary, limited in time.
// ---------------------------------------------------------------------------------------

const CHILD_ENV: &str = "STRIDED_APPLY_EXPR_TEST_CHILD";

/// This module's path as the test harness names tests (without the crate).
fn test_path(name: &str) -> String {
    let m = module_path!();
    let m = m.split_once("::").map_or(m, |(_, rest)| rest);
    format!("{m}::{name}")
}

/// Whether this process is the child that runs test `name`.
fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).ok() == Some(test_path(name))
}

/// Runs test `name` of this binary in a child process; `Ok(stderr)` when it passed,
/// `Err(why)` when it failed, crashed, or ran past `timeout` (then it is killed).
fn run_child(name: &str, timeout: Duration) -> std::result::Result<String, String> {
    use std::process::{Command, Stdio};
    let path = test_path(name);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([path.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > timeout {
            // Our own child, by its handle.
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).ok();
    }
    let tail: String = err
        .lines()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    match status {
        Some(s) if s.success() => Ok(tail),
        Some(s) => Err(format!("{path} failed ({s}):\n{tail}")),
        None => Err(format!(
            "{path} did not finish in {timeout:?} (killed):\n{tail}"
        )),
    }
}

/// The child of [`a_long_flat_chain_is_a_limit_error_not_a_stack_overflow`].
#[test]
fn child_long_flat_chain() {
    if !is_child("child_long_flat_chain") {
        return;
    }
    // An 8 MiB stack, a main thread's usual size.
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| {
            // 65_533 bytes: under the parser's own 64 KiB limit, and no nesting at all.
            let text = vec!["a"; 32_767].join("+");
            let e = Expr::parse(&text).expect("a flat sum parses");
            let r = e.compile(&[("a", Arg::Tensor(F32))], None);
            assert!(
                matches!(
                    r,
                    Err(Error::ExprLimit {
                        what: "instructions",
                        ..
                    })
                ),
                "{r:?}"
            );
            drop(e);
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A flat `a+a+…+a` has no nesting, so the parser's nesting limit lets it through as a
/// left-deep tree; compiling (and dropping) it must end in `ExprLimit`, not a stack
/// overflow that aborts the process.
#[test]
fn a_long_flat_chain_is_a_limit_error_not_a_stack_overflow() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    if let Err(e) = run_child("child_long_flat_chain", Duration::from_secs(60)) {
        panic!("{e}");
    }
}

/// The child of [`a_shared_subtree_compiles_in_time_linear_in_its_nodes`].
#[test]
fn child_shared_dag() {
    if !is_child("child_shared_dag") {
        return;
    }
    // 41 distinct nodes, a tree of 2^40 leaves: `Expr` clones share subtrees.
    let mut e = v("a");
    for _ in 0..40 {
        e = e.clone() + e;
    }
    let r = e.compile(&[("a", Arg::Tensor(F32))], None);
    assert!(
        matches!(
            r,
            Err(Error::ExprLimit {
                what: "instructions",
                ..
            })
        ),
        "{r:?}"
    );
}

/// `Expr` is cheap to clone because subtrees are shared; compiling such a DAG must not
/// walk the tree it stands for (2^40 leaves here) before the instruction limit stops it.
#[test]
fn a_shared_subtree_compiles_in_time_linear_in_its_nodes() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    if let Err(e) = run_child("child_shared_dag", Duration::from_secs(20)) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------
// 3. Lowering, limits and binding.
// ---------------------------------------------------------------------------------------

fn compile(text: &str, args: &[(&str, Arg)]) -> Result<Compiled> {
    parse(text).compile(args, None)
}

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

// ---------------------------------------------------------------------------------------
// 4. Promotion.
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// 5. Layouts: strided inputs and outputs give the bits of contiguous copies.
// ---------------------------------------------------------------------------------------

const CASTS_GEN: [&str; 9] = [
    "f32", "f64", "i32", "i64", "u32", "u8", "f16", "bf16", "bool",
];

struct Gen<'a> {
    names: &'a [&'a str],
    scalar: bool,
}

fn gen_leaf(r: &mut Rng, g: &Gen) -> String {
    match r.below(10) {
        0..=5 => r.pick(g.names).to_string(),
        6 | 7 => r
            .pick(&["0", "1", "2", "3", "7", "255", "-3", "100000"])
            .to_string(),
        8 => r
            .pick(&["0.5", "-2.25", "1e30", "3.0", "0.001", "(-0.0)", "1e-40"])
            .to_string(),
        _ if g.scalar => "s".to_string(),
        _ => r.pick(g.names).to_string(),
    }
}

/// A random numeric expression at most `depth` levels below this one.
fn gen_num(r: &mut Rng, depth: usize, g: &Gen) -> String {
    if depth == 0 || r.chance(0.15 + 0.1 * (4 - depth.min(4)) as f64) {
        return gen_leaf(r, g);
    }
    let d = depth - 1;
    match r.below(12) {
        0 | 1 => {
            let f = r.pick(&[
                "-", "abs", "relu", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid",
            ]);
            format!("{f}({})", gen_num(r, d, g))
        }
        2..=5 => {
            let op = r.pick(&["+", "-", "*", "/", "%", "**", "+", "*"]);
            format!("({}) {op} ({})", gen_num(r, d, g), gen_num(r, d, g))
        }
        6 | 7 => {
            let f = r.pick(&["trunc_div", "min", "max", "pow", "remainder"]);
            format!("{f}({}, {})", gen_num(r, d, g), gen_num(r, d, g))
        }
        8 => {
            let f = r.pick(&["fma", "clamp"]);
            let (x, y, z) = (gen_num(r, d, g), gen_num(r, d, g), gen_num(r, d, g));
            format!("{f}({x}, {y}, {z})")
        }
        9 => {
            let (c, x, y) = (gen_bool(r, d, g), gen_num(r, d, g), gen_num(r, d, g));
            format!("where({c}, {x}, {y})")
        }
        10 => format!("{}({})", r.pick(&CASTS_GEN), gen_num(r, d, g)),
        _ => gen_leaf(r, g),
    }
}

/// A random bool expression.
fn gen_bool(r: &mut Rng, depth: usize, g: &Gen) -> String {
    if depth == 0 || r.chance(0.3) {
        return match r.below(3) {
            0 => r.pick(&["true", "false"]).to_string(),
            1 => format!("bool({})", r.pick(g.names)),
            _ => format!("{} > 0", r.pick(g.names)),
        };
    }
    let d = depth - 1;
    match r.below(4) {
        0 | 1 => {
            let op = r.pick(&["<", "<=", ">", ">=", "==", "!="]);
            format!("({}) {op} ({})", gen_num(r, d, g), gen_num(r, d, g))
        }
        2 => {
            let op = r.pick(&["&", "|"]);
            format!("({}) {op} ({})", gen_bool(r, d, g), gen_bool(r, d, g))
        }
        _ => format!("!({})", gen_bool(r, d, g)),
    }
}

/// A random view of logical shape `shape` over a fresh buffer (`fill` for every element,
/// or random values): sliced with steps ±1 and ±2 from random starts, transposed, or (for
/// inputs) broadcast with zero strides.
fn random_view(
    r: &mut Rng,
    e: ElemType,
    shape: &[usize],
    broadcast: bool,
    fill: Option<u8>,
) -> (Buf, Layout) {
    if broadcast && shape.iter().any(|&n| n > 1) && r.chance(0.3) {
        // Zero strides: a view with size-1 axes (and maybe fewer axes) broadcast up.
        let lead = r.below(shape.len().min(2) + 1).min(shape.len() - 1);
        let small: Vec<usize> = shape[lead..]
            .iter()
            .map(|&n| if r.chance(0.5) { 1 } else { n })
            .collect();
        let (b, l) = random_view(r, e, &small, false, fill);
        let l = l.broadcast_to(shape).unwrap();
        assert_eq!(l.shape(), shape);
        return (b, l);
    }
    let rank = shape.len();
    let swap = (rank >= 2 && r.chance(0.4)).then(|| {
        let i = r.below(rank);
        (i, (i + 1 + r.below(rank - 1)) % rank)
    });
    let mut m = shape.to_vec();
    if let Some((i, j)) = swap {
        m.swap(i, j);
    }
    let steps: Vec<isize> = m
        .iter()
        .map(|_| {
            if r.chance(0.5) {
                r.pick(&[2, -1, -2, 1])
            } else {
                1
            }
        })
        .collect();
    let storage: Vec<usize> = m
        .iter()
        .zip(&steps)
        .map(|(&n, &s)| {
            if s == 1 && r.chance(0.5) {
                n
            } else {
                n * s.unsigned_abs() + 1 + r.below(2)
            }
        })
        .collect();
    let mut l = contiguous(&storage);
    for d in 0..rank {
        let (n, k, size) = (m[d], steps[d].unsigned_abs(), storage[d]);
        if size == n {
            continue;
        }
        let (start, end) = if steps[d] > 0 {
            let s = r.below(size - n * k + 1);
            (s, s + n * k)
        } else {
            let s = n * k + r.below(size - n * k);
            (s, s - n * k)
        };
        l = l
            .slice(d, Some(start as isize), Some(end as isize), steps[d])
            .unwrap();
        assert_eq!(l.shape()[d], n, "slice {start}..{end} by {}", steps[d]);
    }
    if let Some((i, j)) = swap {
        l = l.transpose(i, j).unwrap();
    }
    assert_eq!(l.shape(), shape);
    let count: usize = storage.iter().product();
    let b = match fill {
        Some(f) => Buf::new(count * e.size(), f),
        None => random_buf(r, e, count),
    };
    (b, l)
}

#[test]
fn strided_layouts_give_the_bits_of_contiguous_copies() {
    let mut r = Rng::new(0x5eed_1a70);
    let (mut ran, mut refused, mut scalars_refused) = (0, 0, 0);
    let mut failures: Vec<String> = Vec::new();
    let trials = 1500;
    for trial in 0..trials {
        let all = ["a", "b", "c", "d"];
        let n_in = 1 + r.below(4);
        let g = Gen {
            names: &all[..n_in],
            scalar: r.chance(0.3),
        };
        let text = gen_num(&mut r, 4, &g);
        let e = parse(&text);
        let used: Vec<String> = e.names().iter().map(|s| s.to_string()).collect();
        let dtypes: Vec<ElemType> = used.iter().map(|_| r.pick(&ALL_TYPES)).collect();
        let scalar = if r.chance(0.5) {
            Scalar::F64(r.pick(&[0.5, -3.0, 1e10, 0.1, f64::NAN]))
        } else {
            Scalar::I64(r.pick(&[0, 1, 3, 100, -2]))
        };
        let args: Vec<(&str, Arg)> = used
            .iter()
            .zip(&dtypes)
            .map(|(n, &t)| {
                if n == "s" {
                    (n.as_str(), Arg::Scalar(kind_of(&scalar)))
                } else {
                    (n.as_str(), Arg::Tensor(t))
                }
            })
            .collect();
        let out = r.chance(0.3).then(|| r.pick(&ALL_TYPES));
        let c = match e.compile(&args, out) {
            Ok(c) => c,
            Err(Error::ExprType { .. } | Error::ExprLimit { .. }) => {
                refused += 1;
                continue;
            }
            Err(err) => panic!("`{text}` {args:?}: {err}"),
        };
        let sc: Vec<(&str, Scalar)> = if g.scalar && used.iter().any(|n| n == "s") {
            vec![("s", scalar)]
        } else {
            vec![]
        };
        if c.bind(&sc).is_err() {
            // An int scalar that does not fit the type it meets (e.g. -2 for u8).
            scalars_refused += 1;
            continue;
        }
        // Shapes: the output's, rank 1 to 3, an inner axis longer than the interpreter's
        // 16 lanes at times; each input the same or broadcastable (size-1 axes, fewer axes).
        let rank = 1 + r.below(3);
        let mut shape: Vec<usize> = (0..rank).map(|_| r.pick(&[1, 2, 3, 5])).collect();
        shape[rank - 1] = r.pick(&[1, 3, 7, 17, 37]);
        let ins: Vec<(ElemType, Buf, Layout)> = c
            .inputs()
            .iter()
            .map(|name| {
                let t = dtypes[used.iter().position(|n| n == name).unwrap()];
                let lead = r.below(rank);
                let own: Vec<usize> = shape[lead..]
                    .iter()
                    .map(|&n| if r.chance(0.2) { 1 } else { n })
                    .collect();
                let (b, l) = random_view(&mut r, t, &own, true, None);
                (t, b, l)
            })
            .collect();
        let ot = c.out();
        let (mut ob, ol) = random_view(&mut r, ot, &shape, false, Some(0xC3));
        let strided: Vec<HostTensor> = ins
            .iter()
            .map(|(t, b, l)| HostTensor::new(b.bytes(), *t, l))
            .collect();
        c.run_cpu(HostTensorMut::new(ob.bytes_mut(), ot, &ol), &strided, &sc)
            .unwrap_or_else(|err| panic!("`{text}`: {err}"));
        // Contiguous copies of the same logical inputs, broadcast to the output's shape.
        let cl = contiguous(&shape);
        let copies: Vec<(ElemType, Buf)> = ins
            .iter()
            .map(|(t, b, l)| (*t, Buf::of(*t, &gather(b, *t, l, &shape))))
            .collect();
        let dense: Vec<HostTensor> = copies
            .iter()
            .map(|(t, b)| HostTensor::new(b.bytes(), *t, &cl))
            .collect();
        let numel: usize = shape.iter().product();
        let mut want = Buf::new(numel * ot.size(), 0x3C);
        c.run_cpu(HostTensorMut::new(want.bytes_mut(), ot, &cl), &dense, &sc)
            .unwrap();
        ran += 1;
        let got = gather(&ob, ot, &ol, &shape);
        let want = want.elems(ot);
        // A NaN is a NaN whatever its payload (see `both_nan`).
        if let Some(i) = (0..numel).find(|&i| got[i] != want[i] && !both_nan(ot, got[i], want[i])) {
            let layouts: Vec<String> = ins
                .iter()
                .map(|(t, _, l)| format!("{t:?} {:?}/{:?}+{}", l.shape(), l.strides(), l.offset()))
                .collect();
            failures.push(format!(
                "trial {trial}: `{text}` out {ot:?} {shape:?} {:?}/{:?}, inputs {layouts:?}: \
                 element {i}: strided {}, contiguous {}",
                ol.strides(),
                ol.offset(),
                show(ot, got[i]),
                show(ot, want[i])
            ));
        }
        // Elements of the output buffer outside the view are untouched.
        let reached: std::collections::HashSet<usize> = offsets(&ol, &shape).into_iter().collect();
        let poison = u64::from_ne_bytes([0xC3; 8]) & value::width_mask(ot);
        for k in 0..ob.len / ot.size() {
            if !reached.contains(&k) && ob.get(ot, k) != poison {
                failures.push(format!(
                    "trial {trial}: `{text}` wrote element {k} outside the view"
                ));
                break;
            }
        }
    }
    println!(
        "layouts: {ran} expressions run, {refused} refused when compiling (ExprType/ExprLimit), \
         {scalars_refused} with a scalar that does not fit, of {trials}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        ran * 10 >= trials * 6,
        "only {ran} of {trials} expressions ran"
    );
}

// ---------------------------------------------------------------------------------------
// 6. Accuracy of the seed expression in f32 against an f64 reference.
// ---------------------------------------------------------------------------------------

/// Distance in f32 ulps between `x` and `y` (finite, same sign or near 0).
fn ulps(x: f32, y: f32) -> u64 {
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
fn the_seed_expression_is_within_a_few_ulps_of_an_f64_reference() {
    let mut r = Rng::new(2024);
    let n = 4000;
    // a, b in [-2, 2] (cos(b) + 2 ≥ 1.58: no cancellation in the log), c in [4, 10] (the
    // sum stays ≥ 0.09 and every term is O(1)).
    let gen = |r: &mut Rng, lo: f64, hi: f64| -> Vec<f32> {
        (0..n).map(|_| (lo + (hi - lo) * r.unit()) as f32).collect()
    };
    let (a, b, c) = (
        gen(&mut r, -2.0, 2.0),
        gen(&mut r, -2.0, 2.0),
        gen(&mut r, 4.0, 10.0),
    );
    let args = [
        ("a", F32, f32s(&a)),
        ("b", F32, f32s(&b)),
        ("c", F32, f32s(&c)),
    ];
    let (t, got) = eval_1d(
        "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)",
        &args,
        &[],
        None,
    )
    .unwrap();
    assert_eq!(t, F32);
    let mut worst = (0u64, 0usize);
    for i in 0..n {
        let (x, y, z) = (a[i] as f64, b[i] as f64, c[i] as f64);
        let want = (x * y).sin() + z.sqrt() + x.cos() / (y.cos() + 2.0).ln();
        let g = f32::from_bits(got[i] as u32);
        let d = ulps(g, want as f32);
        if d > worst.0 {
            worst = (d, i);
        }
    }
    let i = worst.1;
    println!(
        "seed expression: worst {} ulp at a={} b={} c={}",
        worst.0, a[i], b[i], c[i]
    );
    assert!(
        worst.0 <= 4,
        "{} ulp at a={} b={} c={}",
        worst.0,
        a[i],
        b[i],
        c[i]
    );
}

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
    use super::hoist::{hoist, hoist_parts};
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
    use super::hoist::hoist;
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

#[test]
fn the_vectorised_kernel_takes_aligned_unit_and_broadcast_dimensions_only() {
    use super::device::vector_geometry;
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
    use super::device::tiled_geometry;
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

// ---------------------------------------------------------------------------------------
// Reductions of expressions: one pass against the two steps it fuses.
// ---------------------------------------------------------------------------------------

/// An input of a reduction test: its elements, type and layout over them.
struct In {
    buf: Buf,
    elem: ElemType,
    layout: Layout,
}

impl In {
    fn random(r: &mut Rng, elem: ElemType, layout: Layout) -> In {
        let len = layout
            .span("input")
            .unwrap()
            .map_or(0, |s| s.max as usize + 1)
            + 1;
        In {
            buf: random_buf(r, elem, len),
            elem,
            layout,
        }
    }
    fn host(&self) -> HostTensor<'_> {
        HostTensor::new(self.buf.bytes(), self.elem, &self.layout)
    }
}

/// A fused case: the expression, its inputs (name, type, layout), the broadcast shape and
/// an output type of its own.
type Fused = (
    &'static str,
    Vec<(&'static str, ElemType, Layout)>,
    Vec<usize>,
    Option<ElemType>,
);

/// The reduced shape of `shape` over `axes`.
fn reduced(shape: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    (0..shape.len())
        .filter_map(|a| match (axes.contains(&a), keepdim) {
            (false, _) => Some(shape[a]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Equal bits, or NaN on both sides: which NaN payload an operation on two NaNs keeps
/// depends on how the compiler ordered its operands (and a GPU gives its own canonical
/// NaN), so the reductions compare NaN as NaN.
fn same_bits(e: ElemType, got: &[u64], want: &[u64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            g == w || both_nan(e, g, w),
            "{what}: output {i}: {} against {}",
            show(e, g),
            show(e, w)
        );
    }
}

/// The one-pass reduction of `f` over `ins` (broadcast to `shape`) on the CPU twin, into
/// a poisoned output.
fn one_pass(
    f: &Compiled,
    op: ReduceOp,
    ins: &[In],
    shape: &[usize],
    axes: &[usize],
    keepdim: bool,
) -> Result<Vec<u64>> {
    let lo = contiguous(&reduced(shape, axes, keepdim));
    let mut out = Buf::new(lo.numel() * f.out().size(), 0x5a);
    let hosts: Vec<HostTensor<'_>> = ins.iter().map(In::host).collect();
    f.reduce_cpu(
        op,
        HostTensorMut::new(out.bytes_mut(), f.out(), &lo),
        &hosts,
        &[],
        axes,
    )?;
    Ok(out.elems(f.out()))
}

/// The same reduction in two steps: the expression's values into a temporary (an
/// expression run), then the library's reduction of it (run-time dispatch's twin).
#[cfg(feature = "dispatch")]
fn two_steps(f: &Compiled, op: ReduceOp, ins: &[In], shape: &[usize], axes: &[usize]) -> Vec<u64> {
    let e = f.out();
    let lt = contiguous(shape);
    let mut tmp = Buf::new(lt.numel() * e.size(), 0);
    let hosts: Vec<HostTensor<'_>> = ins.iter().map(In::host).collect();
    f.run_cpu(HostTensorMut::new(tmp.bytes_mut(), e, &lt), &hosts, &[])
        .unwrap();
    let lo = contiguous(&reduced(shape, axes, false));
    let mut out = Buf::new(lo.numel() * e.size(), 0xa5);
    fn raw(ptr: u64, e: ElemType, l: &Layout) -> RawTensor<'_> {
        RawTensor {
            ptr,
            elem: e,
            shape: l.shape(),
            strides: l.strides(),
        }
    }
    // SAFETY: both buffers hold the layouts' elements; the output is borrowed uniquely.
    unsafe {
        crate::reduce::DynReduce::new(op.name(), e)
            .unwrap()
            .run_cpu_raw(
                raw(out.bytes_mut().as_mut_ptr() as u64, e, &lo),
                &[raw(tmp.bytes().as_ptr() as u64, e, &lt)],
                axes,
            )
            .unwrap()
    };
    out.elems(e)
}

#[cfg(feature = "dispatch")]
#[test]
fn expression_reductions_give_the_bits_of_the_two_steps_they_fuse() {
    let mut r = Rng::new(41);
    let mut cases = 0;
    // (expression, inputs' types and layouts, broadcast shape, axes lists)
    let permuted = Layout::contiguous(&[300, 7])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let reversed = contiguous(&[7, 300]).flip(1).unwrap();
    for e in [F32, F64, F16, BF16, I32, I64, U32, U8] {
        for layout in [contiguous(&[7, 300]), permuted.clone(), reversed.clone()] {
            let f = compile("a", &tensors(&[("a", e)])).unwrap();
            let ins = [In::random(&mut r, e, layout)];
            for op in ReduceOp::ALL {
                if op == ReduceOp::Mean && !matches!(e, F32 | F64 | F16 | BF16) {
                    continue;
                }
                for axes in [&[1][..], &[0], &[0, 1], &[1, 0]] {
                    let got = one_pass(&f, op, &ins, &[7, 300], axes, false).unwrap();
                    let want = two_steps(&f, op, &ins, &[7, 300], axes);
                    same_bits(e, &got, &want, &format!("{op:?} of {e:?} over {axes:?}"));
                    cases += 1;
                }
            }
        }
    }
    // Fused expressions over broadcast inputs, promotion, an output type of one's own,
    // and a reduction long enough for several groups.
    let row = |n: usize| contiguous(&[n]);
    let col = |n: usize| contiguous(&[n, 1]);
    let fused: Vec<Fused> = vec![
        (
            "(a - b) * (a - b)",
            vec![
                ("a", F32, contiguous(&[5, 1000])),
                ("b", F32, row(1000).flip(0).unwrap()),
            ],
            vec![5, 1000],
            None,
        ),
        (
            "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)",
            vec![
                ("a", F32, row(64)),
                ("b", F32, col(32)),
                ("c", F32, contiguous(&[32, 64])),
            ],
            vec![32, 64],
            None,
        ),
        (
            "a * b + 1",
            vec![("a", I32, contiguous(&[3, 400])), ("b", F32, row(400))],
            vec![3, 400],
            None,
        ),
        (
            "a * b",
            vec![("a", F32, contiguous(&[4, 333])), ("b", F32, col(4))],
            vec![4, 333],
            Some(F16),
        ),
        (
            "a * 0.5 + b",
            vec![("a", BF16, row(300_001)), ("b", F32, row(300_001))],
            vec![300_001],
            None,
        ),
        (
            "a * a",
            vec![("a", F64, contiguous(&[2, 200_000]))],
            vec![2, 200_000],
            None,
        ),
    ];
    for (text, args, shape, out) in fused {
        let names: Vec<(&str, Arg)> = args.iter().map(|(n, e, _)| (*n, Arg::Tensor(*e))).collect();
        let f = parse(text).compile(&names, out).unwrap();
        let ins: Vec<In> = args
            .into_iter()
            .map(|(_, e, l)| In::random(&mut r, e, l))
            .collect();
        let rank = shape.len();
        let mut axes_list: Vec<Vec<usize>> = (0..rank).map(|a| vec![a]).collect();
        axes_list.push((0..rank).collect());
        for axes in &axes_list {
            for op in ReduceOp::ALL {
                if op == ReduceOp::Mean && !matches!(f.out(), F32 | F64 | F16 | BF16) {
                    continue;
                }
                let got = one_pass(&f, op, &ins, &shape, axes, false).unwrap();
                let want = two_steps(&f, op, &ins, &shape, axes);
                same_bits(
                    f.out(),
                    &got,
                    &want,
                    &format!("{op:?} of `{text}` over {axes:?}"),
                );
                // The kept axes as size 1: the same values.
                assert_eq!(one_pass(&f, op, &ins, &shape, axes, true).unwrap(), got);
                cases += 1;
            }
        }
    }
    assert!(cases > 200, "{cases} cases");
}

#[test]
fn expression_reductions_of_nothing_and_their_errors() {
    let mut r = Rng::new(42);
    let f = compile("a * 2", &tensors(&[("a", F32)])).unwrap();
    let empty = [In::random(&mut r, F32, contiguous(&[3, 0]))];
    let sum = one_pass(&f, ReduceOp::Sum, &empty, &[3, 0], &[1], false).unwrap();
    assert_eq!(sum, vec![0; 3]);
    let prod = one_pass(&f, ReduceOp::Prod, &empty, &[3, 0], &[1], false).unwrap();
    assert_eq!(prod, vec![1.0f32.to_bits() as u64; 3]);
    let mean = one_pass(&f, ReduceOp::Mean, &empty, &[3, 0], &[1], false).unwrap();
    assert!(
        mean.iter().all(|&b| f32::from_bits(b as u32).is_nan()),
        "{mean:?}"
    );
    let err = one_pass(&f, ReduceOp::Amax, &empty, &[3, 0], &[1], false).unwrap_err();
    assert!(matches!(err, Error::EmptyReduction { .. }), "{err}");
    // An output without elements: nothing to do.
    assert_eq!(
        one_pass(&f, ReduceOp::Amax, &empty, &[3, 0], &[0], false).unwrap(),
        Vec::<u64>::new()
    );

    let ins = [In::random(&mut r, F32, contiguous(&[4, 5]))];
    let refuse = |f: &Compiled, op, ins: &[In], out_shape: &[usize], axes: &[usize]| {
        let lo = contiguous(out_shape);
        let mut out = Buf::new(lo.numel() * f.out().size(), 0x77);
        let hosts: Vec<HostTensor<'_>> = ins.iter().map(In::host).collect();
        let e = f
            .reduce_cpu(
                op,
                HostTensorMut::new(out.bytes_mut(), f.out(), &lo),
                &hosts,
                &[],
                axes,
            )
            .unwrap_err();
        assert!(
            out.bytes().iter().all(|&b| b == 0x77),
            "{e}: the output was written"
        );
        e
    };
    let e = refuse(&f, ReduceOp::Sum, &ins, &[5], &[1]);
    assert!(matches!(e, Error::ReducedShape { .. }), "{e}");
    let e = refuse(&f, ReduceOp::Sum, &ins, &[4], &[2]);
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = refuse(&f, ReduceOp::Sum, &ins, &[], &[0, 0]);
    assert!(e.to_string().contains("named twice"), "{e}");
    let ints = compile("a + 1", &tensors(&[("a", I32)])).unwrap();
    let int_in = [In::random(&mut r, I32, contiguous(&[4, 5]))];
    let e = refuse(&ints, ReduceOp::Mean, &int_in, &[4], &[1]);
    assert!(
        matches!(e, Error::ExprType { .. }) && e.to_string().contains("mean"),
        "{e}"
    );
    let bools = compile("a > 0", &tensors(&[("a", F32)])).unwrap();
    let e = refuse(&bools, ReduceOp::Sum, &ins, &[4], &[1]);
    assert!(
        matches!(e, Error::ExprType { .. }) && e.to_string().contains("bool"),
        "{e}"
    );
    let two = compile("a + b", &tensors(&[("a", F32), ("b", F32)])).unwrap();
    let e = refuse(&two, ReduceOp::Sum, &ins, &[4], &[1]);
    assert!(matches!(e, Error::ExprBind { .. }), "{e}");
    // The output inside an input's memory.
    let mut buf = ins[0].buf.clone();
    let lo = contiguous(&[4]);
    let la = contiguous(&[4, 5]);
    let ptr = buf.bytes_mut().as_mut_ptr() as u64;
    let raw = |shape: &'static [usize], l: &Layout| RawTensor {
        ptr,
        elem: F32,
        shape,
        strides: if shape.len() == 1 { &[1] } else { l.strides() }
            .to_vec()
            .leak(),
    };
    // SAFETY: both views lie in `buf`, which lives through the call.
    let e = unsafe {
        f.reduce_cpu_raw(
            ReduceOp::Sum,
            raw(&[4], &lo),
            &[raw(&[4, 5], &la)],
            &[],
            &[1],
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::ReduceOverlap { .. }), "{e}");
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

// ---------------------------------------------------------------------------------------
// The op set's further ops and the narrow element types, on the CPU twin.
// ---------------------------------------------------------------------------------------

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
