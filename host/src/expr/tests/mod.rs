//! Tests of expressions on the CPU twin: every op of the library against its expression,
//! the parser, lowering and its limits, binding, promotion, layouts, and accuracy.
//!
//! One file a topic: every op of the library against its expression (`library_ops`), the
//! parser (`parse`), deep expressions in a child process (`child`), lowering, limits and
//! binding (`lower`), promotion (`promote`), layouts (`layouts`), accuracy (`accuracy`), the
//! interpreter's decoding and fast path (`interp`), hoisting (`hoist`), the kernel a program
//! and layout take (`kernels`), reductions of expressions (`reduce`), and the op set's
//! further ops and narrow types (`opset`). The helpers they share are here.

use super::*;
use crate::layout::Layout;
use gpu_kernels::elem::{bf16, f16};
use ElemType::*;

mod accuracy;
mod child;
mod hoist;
mod interp;
mod kernels;
mod layouts;
#[cfg(feature = "dispatch")]
mod library_ops;
mod lower;
mod opset;
mod parse;
mod promote;
mod reduce;

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

fn v(name: &str) -> Expr {
    Expr::var(name)
}

fn compile(text: &str, args: &[(&str, Arg)]) -> Result<Compiled> {
    parse(text).compile(args, None)
}

// ---------------------------------------------------------------------------------------
// Random expressions (the layouts' and the fast path's tests).
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
