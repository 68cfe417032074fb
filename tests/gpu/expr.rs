//! Expressions on the GPU (tier 0, the interpreter's kernels): random programs over random
//! element types and layouts against the CPU twin, bit for bit; the transcendental ops
//! against the library's own GPU kernels, bit for bit (both call libdevice; the CPU twin
//! calls Rust's `std`, within the ulp bounds of `gpu_transcendentals_within_ulp_bound_of_f64`).

use crate::common::random::{random_case, Limits};
use crate::common::Rng;
use crate::harness::{knob, TestResult};
use strided_apply::dispatch::{DynOp, Scalar};
use strided_apply::expr::{
    tier1_launches, Arg, DeviceArg, Expr, RawTensor, ReduceOp, ScalarKind, Tier,
};
use strided_apply::gpu_kernels::{bf16, f16};
use strided_apply::{DeviceTensor, ElemType, Error, Gpu, Layout};

use ElemType::{Bool, BF16, F16, F32, F64, I16, I32, I64, I8, U16, U32, U64, U8};
const TYPES: [ElemType; 9] = [F32, F64, I32, I64, U32, U8, Bool, F16, BF16];

fn pick<'a, T>(r: &mut Rng, xs: &'a [T]) -> &'a T {
    &xs[r.below(xs.len() as u64) as usize]
}

/// A random expression of exact ops (the CPU twin and the GPU compute them the same way).
fn gen_num(r: &mut Rng, depth: usize, names: &[&str], scalar: bool) -> String {
    if depth == 0 || r.one_in(4) {
        return match r.below(10) {
            0..=5 => pick(r, names).to_string(),
            6 | 7 => pick(r, &["0", "1", "2", "3", "255", "-3", "100000"]).to_string(),
            8 => pick(r, &["0.5", "-2.25", "1e30", "(-0.0)", "1e-40"]).to_string(),
            _ if scalar => "s".to_string(),
            _ => pick(r, names).to_string(),
        };
    }
    let d = depth - 1;
    let sub = |r: &mut Rng| gen_num(r, d, names, scalar);
    match r.below(10) {
        0 | 1 => {
            let f = pick(r, &["-", "abs", "relu", "sqrt", "rsqrt"]);
            format!("{f}({})", sub(r))
        }
        2..=5 => {
            let op = pick(r, &["+", "-", "*", "/", "%", "+", "*"]);
            format!("({}) {op} ({})", sub(r), sub(r))
        }
        6 => {
            let f = pick(r, &["trunc_div", "min", "max", "remainder"]);
            format!("{f}({}, {})", sub(r), sub(r))
        }
        7 => {
            let f = pick(r, &["fma", "clamp"]);
            format!("{f}({}, {}, {})", sub(r), sub(r), sub(r))
        }
        8 => {
            let op = pick(r, &["<", "<=", ">", "==", "!="]);
            format!(
                "where(({}) {op} ({}), {}, {})",
                sub(r),
                sub(r),
                sub(r),
                sub(r)
            )
        }
        _ => {
            let t = pick(
                r,
                &[
                    "f32", "f64", "i32", "i64", "u32", "u8", "f16", "bf16", "bool",
                ],
            );
            format!("{t}({})", sub(r))
        }
    }
}

/// Random bits of element type `e`, `n` elements, in 8-byte words: small integers in the
/// type's encoding half the time, raw bits (NaNs, infinities, huge values) otherwise.
fn random_words(r: &mut Rng, e: ElemType, n: usize) -> Vec<u64> {
    let size = e.size();
    let mut bytes = vec![0u8; (n * size).div_ceil(8) * 8];
    for i in 0..n {
        let k = r.range(-8, 8);
        let bits: u64 = if r.one_in(2) {
            r.next()
        } else {
            match e {
                F32 => (k as f32).to_bits() as u64,
                F64 => (k as f64).to_bits(),
                F16 => f16::from_f64(k as f64).to_bits() as u64,
                BF16 => bf16::from_f64(k as f64).to_bits() as u64,
                Bool => (k > 0) as u64,
                _ => k as u64,
            }
        };
        let bits = if e == Bool { bits & 1 } else { bits };
        bytes[i * size..(i + 1) * size].copy_from_slice(&bits.to_le_bytes()[..size]);
    }
    bytemuck::pod_collect_to_vec(&bytes)
}

/// Element `i` of a buffer of `e`, zero-extended.
fn element(words: &[u64], e: ElemType, i: usize) -> u64 {
    let bytes: &[u8] = bytemuck::cast_slice(words);
    let s = e.size();
    let mut w = [0u8; 8];
    w[..s].copy_from_slice(&bytes[i * s..(i + 1) * s]);
    u64::from_le_bytes(w)
}

fn is_nan(e: ElemType, v: u64) -> bool {
    match e {
        F32 => f32::from_bits(v as u32).is_nan(),
        F64 => f64::from_bits(v).is_nan(),
        F16 => f16::from_bits(v as u16).is_nan(),
        BF16 => bf16::from_bits(v as u16).is_nan(),
        _ => false,
    }
}

/// The first element where two buffers of `e` differ (NaN equals NaN: a NaN's payload and
/// sign are not part of the contract), as a message.
fn first_difference(e: ElemType, n: usize, got: &[u64], want: &[u64]) -> Option<String> {
    (0..n).find_map(|i| {
        let (g, w) = (element(got, e, i), element(want, e, i));
        (g != w && !(is_nan(e, g) && is_nan(e, w)))
            .then(|| format!("element {i}: GPU {g:#x}, CPU twin {w:#x}"))
    })
}

/// A device copy of host words (as `i64`, an element type of the library).
fn upload(gpu: &Gpu, words: &[u64]) -> Result<DeviceTensor<i64>, String> {
    let w: &[i64] = if words.is_empty() {
        &[0]
    } else {
        bytemuck::cast_slice(words)
    };
    DeviceTensor::from_slice(gpu, w, &[w.len()]).map_err(|e| e.to_string())
}

/// The words of a device copy.
fn download(gpu: &Gpu, t: &DeviceTensor<i64>) -> Result<Vec<u64>, String> {
    let v = t.to_vec(gpu).map_err(|e| e.to_string())?;
    Ok(bytemuck::pod_collect_to_vec(&v))
}

fn raw<'a>(base: u64, e: ElemType, l: &'a Layout) -> RawTensor<'a> {
    RawTensor {
        ptr: base + (l.offset() * e.size()) as u64,
        elem: e,
        shape: l.shape(),
        strides: l.strides(),
    }
}

/// Random exact-op programs over random element types (1–4 inputs, a run-time scalar at
/// times) and random layouts (ranks 0–6, broadcast, reversed, permuted, padded, zero
/// strides): the GPU's output buffer equals the CPU twin's byte for byte, untouched
/// elements included.
pub fn random_programs(gpu: &Gpu) -> TestResult {
    let trials = knob("STRIDED_APPLY_EXPR_TRIALS", 400);
    let mut r = Rng(0xe4b7_0001);
    let (mut ran, mut refused, mut elements) = (0, 0, 0usize);
    for trial in 0..trials {
        let all = ["a", "b", "c", "d"];
        let n_names = 1 + r.below(4) as usize;
        let scalar = r.one_in(3);
        let text = gen_num(&mut r, 4, &all[..n_names], scalar);
        let e = Expr::parse(&text).map_err(|e| format!("`{text}`: {e}"))?;
        let names = e.names();
        let sval = if r.one_in(2) {
            Scalar::F64(*pick(&mut r, &[0.5, -3.0, 1e10, f64::NAN]))
        } else {
            Scalar::I64(*pick(&mut r, &[0, 1, 3, 100]))
        };
        let args: Vec<(&str, Arg)> = names
            .iter()
            .map(|&n| {
                if n == "s" {
                    let k = match sval {
                        Scalar::F64(_) => ScalarKind::Float,
                        _ => ScalarKind::Int,
                    };
                    (n, Arg::Scalar(k))
                } else {
                    (n, Arg::Tensor(*pick(&mut r, &TYPES)))
                }
            })
            .collect();
        let out_type = r.one_in(3).then(|| *pick(&mut r, &TYPES));
        let c = match e.compile(&args, out_type) {
            Ok(c) => c,
            Err(Error::ExprType { .. } | Error::ExprLimit { .. }) => {
                refused += 1;
                continue;
            }
            Err(err) => return Err(format!("`{text}`: {err}")),
        };
        let sc: Vec<(&str, Scalar)> = if names.contains(&"s") {
            vec![("s", sval)]
        } else {
            vec![]
        };
        if c.bind(&sc).is_err() {
            refused += 1;
            continue;
        }
        let types: Vec<ElemType> = c
            .inputs()
            .iter()
            .map(|n| match args.iter().find(|(m, _)| m == n) {
                Some((_, Arg::Tensor(t))) => *t,
                _ => F32,
            })
            .collect();
        let case = random_case(&mut r, types.len(), Limits { max_numel: 3000 });
        let ot = c.out();
        let host_in: Vec<Vec<u64>> = case
            .inputs
            .iter()
            .zip(&types)
            .map(|(o, &t)| random_words(&mut r, t, o.len))
            .collect();
        let poison = vec![0xC3C3_C3C3_C3C3_C3C3u64; (case.out.len * ot.size()).div_ceil(8)];
        // The CPU twin.
        let mut host_out = poison.clone();
        let ins: Vec<RawTensor<'_>> = case
            .inputs
            .iter()
            .zip(&types)
            .zip(&host_in)
            .map(|((o, &t), w)| raw(w.as_ptr() as u64, t, &o.layout))
            .collect();
        let out = raw(host_out.as_mut_ptr() as u64, ot, &case.out.layout);
        // SAFETY: every layout of the case lies in its buffer of `len` elements, which the
        // words hold; the output is its own buffer.
        let cpu = unsafe { c.run_cpu_raw(out, &ins, &sc) };
        // The GPU.
        let dev_in: Vec<DeviceTensor<i64>> = host_in
            .iter()
            .map(|w| upload(gpu, w))
            .collect::<Result<_, _>>()?;
        let dev_out = upload(gpu, &poison)?;
        let ins: Vec<RawTensor<'_>> = case
            .inputs
            .iter()
            .zip(&types)
            .zip(&dev_in)
            .map(|((o, &t), d)| raw(d.buffer().addr(), t, &o.layout))
            .collect();
        let out = raw(dev_out.buffer().addr(), ot, &case.out.layout);
        // SAFETY: as above, in device buffers of this gpu holding the same words.
        let dev = unsafe { c.launch(gpu, None, out, &ins, &sc) };
        match (&cpu, &dev) {
            (Ok(()), Ok(())) => {}
            (Err(a), Err(b)) if a.to_string() == b.to_string() => {
                refused += 1;
                continue;
            }
            _ => {
                return Err(format!(
                    "trial {trial} `{text}`: CPU twin {cpu:?}, GPU {dev:?}"
                ))
            }
        }
        let got = download(gpu, &dev_out)?;
        if let Some(d) = first_difference(ot, case.out.len, &got, &host_out) {
            return Err(format!(
                "trial {trial} `{text}` inputs {types:?} -> {ot:?}, out {:?}: {d}",
                case.out.layout
            ));
        }
        ran += 1;
        elements += case.out.layout.numel();
    }
    if ran < trials / 2 {
        return Err(format!(
            "only {ran} of {trials} programs ran ({refused} refused)"
        ));
    }
    Ok(format!(
        "{ran} programs bit-identical to the CPU twin ({elements} elements; {refused} refused by the type rules)"
    ))
}

/// Every transcendental op (and `sqrt`, `rsqrt`, `pow`) as a one-op program equals the
/// library's own kernel of that op on the GPU, bit for bit, in f32, f64, f16 and bf16, over
/// a dense and a transposed layout of 2^18 elements (several blocks per SM, every variant's
/// grid-stride loop).
pub fn transcendentals_match_library_kernels(gpu: &Gpu) -> TestResult {
    let n = 1 << 18;
    let mut r = Rng(0xe4b7_0002);
    let mut checked = 0;
    for t in [F32, F64, F16, BF16] {
        let a = random_words(&mut r, t, n);
        let b = random_words(&mut r, t, n);
        let (da, db) = (upload(gpu, &a)?, upload(gpu, &b)?);
        let dense = Layout::contiguous(&[512, 512]).map_err(|e| e.to_string())?;
        let transposed = dense.transpose(0, 1).map_err(|e| e.to_string())?;
        for layout in [&dense, &transposed] {
            for (op, text) in [
                ("sin", "sin(a)"),
                ("cos", "cos(a)"),
                ("exp", "exp(a)"),
                ("log", "log(a)"),
                ("tanh", "tanh(a)"),
                ("sigmoid", "sigmoid(a)"),
                ("sqrt", "sqrt(a)"),
                ("rsqrt", "rsqrt(a)"),
                ("pow", "a ** b"),
            ] {
                let binary = op == "pow";
                let e = Expr::parse(text).map_err(|e| e.to_string())?;
                let mut args = vec![("a", Arg::Tensor(t))];
                if binary {
                    args.push(("b", Arg::Tensor(t)));
                }
                let c = e.compile(&args, None).map_err(|e| format!("{text}: {e}"))?;
                let types: Vec<ElemType> = vec![t; if binary { 3 } else { 2 }];
                let lib = DynOp::new(op, &types, &[]).map_err(|e| format!("{op}: {e}"))?;
                let outs: Vec<DeviceTensor<i64>> = (0..2)
                    .map(|_| {
                        upload(
                            gpu,
                            &vec![0xC3C3_C3C3_C3C3_C3C3u64; (n * t.size()).div_ceil(8)],
                        )
                    })
                    .collect::<Result<_, _>>()?;
                let out_layout = Layout::contiguous(&[512, 512]).map_err(|e| e.to_string())?;
                let mut ins = vec![raw(da.buffer().addr(), t, layout)];
                if binary {
                    ins.push(raw(db.buffer().addr(), t, &dense));
                }
                // SAFETY: every view lies in its buffer of 2^18 elements of `t`.
                unsafe {
                    c.launch(
                        gpu,
                        None,
                        raw(outs[0].buffer().addr(), t, &out_layout),
                        &ins,
                        &[],
                    )
                    .map_err(|e| format!("{text}: {e}"))?;
                    lib.launch(
                        gpu,
                        None,
                        raw(outs[1].buffer().addr(), t, &out_layout),
                        &ins,
                    )
                    .map_err(|e| format!("{op}: {e}"))?;
                }
                let got = download(gpu, &outs[0])?;
                let want = download(gpu, &outs[1])?;
                if let Some(d) = first_difference(t, n, &got, &want) {
                    return Err(format!("{text} over {t:?} ({layout:?}): expression against the library's `{op}`: {d}"));
                }
                checked += 1;
            }
        }
    }
    Ok(format!(
        "{checked} (op, type, layout) cases bit-identical to the library's kernels"
    ))
}

/// The typed form over `DeviceTensor`s: the seed expression with a row, a column and a full
/// input, against an f64 reference (its transcendentals are libdevice's on the GPU), and
/// the typed errors of that form: a wrong output type, a wrong input count.
pub fn typed_seed_expression(gpu: &Gpu) -> TestResult {
    let e = |e: Error| e.to_string();
    let (m, n) = (300usize, 257usize);
    let mut r = Rng(0xe4b7_0003);
    let vals = |r: &mut Rng, k: usize| -> Vec<f32> {
        (0..k).map(|_| (r.unit() * 4.0 - 1.0) as f32).collect()
    };
    let (a, b, c) = (vals(&mut r, n), vals(&mut r, m), vals(&mut r, m * n));
    let da = DeviceTensor::from_slice(gpu, &a, &[1, n]).map_err(e)?;
    let db = DeviceTensor::from_slice(gpu, &b, &[m, 1]).map_err(e)?;
    let dc = DeviceTensor::from_slice(gpu, &c, &[m, n]).map_err(e)?;
    let mut out = DeviceTensor::<f32>::zeros(gpu, &[m, n]).map_err(e)?;
    let f = Expr::parse("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)").map_err(e)?;
    let args = [
        ("a", Arg::Tensor(F32)),
        ("b", Arg::Tensor(F32)),
        ("c", Arg::Tensor(F32)),
    ];
    let compiled = f.compile(&args, None).map_err(e)?;
    let inputs = [
        DeviceArg::from(&da),
        DeviceArg::from(&db),
        DeviceArg::from(&dc),
    ];
    compiled.run(gpu, &mut out, &inputs, &[]).map_err(e)?;
    let got = out.to_vec(gpu).map_err(e)?;
    let mut worst = 0f64;
    for i in 0..m {
        for j in 0..n {
            let (x, y, z) = (a[j] as f64, b[i] as f64, c[i * n + j] as f64);
            let terms = [(x * y).sin(), z.sqrt(), x.cos() / ((y.cos() + 2.0).ln())];
            let want: f64 = terms.iter().sum();
            let g = got[i * n + j] as f64;
            if want.is_nan() != g.is_nan() {
                return Err(format!("({i}, {j}): {g} against {want}"));
            }
            // Relative to the terms' magnitudes: the sum may cancel, and `log(cos(b) + 2)`
            // near 0 magnifies the f32 rounding of `cos(b) + 2` in the last term.
            if !want.is_nan() {
                let scale: f64 = terms.iter().map(|t| t.abs()).sum();
                worst = worst.max((g - want).abs() / scale.max(1e-30));
            }
        }
    }
    if worst > 1e-4 {
        return Err(format!("relative error {worst:e} against an f64 reference"));
    }
    // A wrong output type and a wrong input count are typed errors; nothing is launched.
    let mut wrong = DeviceTensor::<f64>::zeros(gpu, &[m, n]).map_err(e)?;
    let bad = compiled.run(gpu, &mut wrong, &inputs, &[]);
    if !matches!(bad, Err(Error::TypeMismatch { .. })) {
        return Err(format!("an f64 output of an f32 program: {bad:?}"));
    }
    let bad = compiled.run(gpu, &mut out, &inputs[..2], &[]);
    if !matches!(bad, Err(Error::ExprBind { .. })) {
        return Err(format!("two inputs for three: {bad:?}"));
    }
    let untouched = wrong.to_vec(gpu).map_err(e)?;
    if untouched.iter().any(|&x| x != 0.0) {
        return Err("the refused output was written".into());
    }
    Ok(format!("seed expression over a row, a column and a full input: relative error {worst:.1e}; typed errors"))
}

/// Broadcast-invariant hoisting changes no bit: expressions with expensive ops over rows,
/// columns and full inputs (2-D and 3-D, float and integer types), hoisted and not, give the
/// same output buffer.
pub fn hoisting_keeps_the_bits(gpu: &Gpu) -> TestResult {
    let mut r = Rng(0xe4b7_0004);
    let cases: [(&str, &[ElemType]); 5] = [
        (
            "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)",
            &[F32, F64, BF16],
        ),
        ("exp(a) * c + log(b) / (a + 1)", &[F32, F64, F16]),
        ("(a % 7 + b) * c - b / 3", &[I32, I64, U8]),
        ("tanh(a + b) * c + sigmoid(a) * sqrt(b)", &[F32]),
        ("where(c > 0, cos(a), sin(b)) + c", &[F32, F64]),
    ];
    // (out shape, a, b, c): a and b broadcast along different axes.
    type Shapes = (
        &'static [usize],
        &'static [usize],
        &'static [usize],
        &'static [usize],
    );
    let shapes: [Shapes; 3] = [
        (&[300, 257], &[1, 257], &[300, 1], &[300, 257]),
        (&[4, 50, 33], &[50, 1], &[33], &[4, 50, 33]),
        (&[6, 1, 40], &[6, 1, 1], &[1, 40], &[6, 1, 40]),
    ];
    let mut checked = 0;
    for (text, types) in cases {
        let e = Expr::parse(text).map_err(|e| e.to_string())?;
        for &t in types {
            let args = [
                ("a", Arg::Tensor(t)),
                ("b", Arg::Tensor(t)),
                ("c", Arg::Tensor(t)),
            ];
            let c = e.compile(&args, None).map_err(|e| format!("{text}: {e}"))?;
            for (out_shape, sa, sb, sc) in shapes {
                let ot = c.out();
                let n: usize = out_shape.iter().product();
                let layouts: Vec<Layout> = [sa, sb, sc]
                    .iter()
                    .map(|s| Layout::contiguous(s).map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?;
                let order = c.inputs();
                let pick_layout = |name: &str| match name {
                    "a" => &layouts[0],
                    "b" => &layouts[1],
                    _ => &layouts[2],
                };
                let dev: Vec<DeviceTensor<i64>> = order
                    .iter()
                    .map(|nm| upload(gpu, &random_words(&mut r, t, pick_layout(nm).numel())))
                    .collect::<Result<_, _>>()?;
                let out_layout = Layout::contiguous(out_shape).map_err(|e| e.to_string())?;
                let mut results = Vec::new();
                for hoist in [true, false] {
                    let f = c.clone().with_hoisting(hoist);
                    let out = upload(
                        gpu,
                        &vec![0xC3C3_C3C3_C3C3_C3C3u64; (n * ot.size()).div_ceil(8)],
                    )?;
                    let ins: Vec<RawTensor<'_>> = order
                        .iter()
                        .zip(&dev)
                        .map(|(nm, d)| raw(d.buffer().addr(), t, pick_layout(nm)))
                        .collect();
                    // SAFETY: every view lies in its own buffer of its element count.
                    unsafe {
                        f.launch(
                            gpu,
                            None,
                            raw(out.buffer().addr(), ot, &out_layout),
                            &ins,
                            &[],
                        )
                        .map_err(|e| format!("{text} {t:?}: {e}"))?;
                    }
                    results.push(download(gpu, &out)?);
                }
                if let Some(d) = first_difference(ot, n, &results[0], &results[1]) {
                    return Err(format!(
                        "`{text}` over {t:?}, out {out_shape:?}: hoisted against not: {d}"
                    ));
                }
                checked += 1;
            }
        }
    }
    Ok(format!(
        "{checked} (expression, type, layout) cases: hoisted = unhoisted, bit for bit"
    ))
}

/// The vectorised kernels (fast paths, one or two dimensions) against the CPU twin, bit
/// for bit: every fast math type, inputs of mixed sizes, dense, row, column and scalar
/// broadcasts, rows of a whole number of vectors and not, lengths with a partial last
/// vector, and bases off the vector alignment (the launcher falls back to the element-wise
/// kernels: same bits); ranks 5 and 8 (the six-dimension and any-rank kernels). Exact ops
/// only: transcendentals are the library kernels' bits, not the twin's
/// (`transcendentals_match_library_kernels` runs them on every kernel).
pub fn vectorised_kernels_match_cpu_twin(gpu: &Gpu) -> TestResult {
    let mut r = Rng(0xe4b7_0005);
    let cases: [(&str, [ElemType; 3]); 9] = [
        ("a * b + c", [F32, F32, F32]),
        ("a * b + c", [F32, BF16, F16]),
        // Every cheap op (the cheap kernel, `kernel::CHEAP_NAMES`), 16-bit inputs.
        (
            "clamp(fma(a, -b, c), -abs(c), relu(b)) + max(a, 0.5) - min(b, c)",
            [BF16, F16, F32],
        ),
        ("a * a - b / c", [F32, F32, F32]),
        ("a * b - c", [F64, F64, F64]),
        ("a % b + c", [I32, I32, I32]),
        ("a / b - c", [I64, I64, I64]),
        ("a * b + c", [U32, U32, U32]),
        ("a + b * c", [U8, U8, U8]),
    ];
    // (out shape, input shapes): dense, a row, a column, one element.
    let mut layouts: Vec<(Vec<usize>, [Vec<usize>; 3])> = Vec::new();
    for cols in [64usize, 60, 62] {
        let (o, row, col) = (vec![37, cols], vec![cols], vec![37, 1]);
        layouts.push((o.clone(), [o.clone(), row.clone(), col.clone()]));
        layouts.push((o.clone(), [col, vec![1], o.clone()]));
        layouts.push((o.clone(), [row, o.clone(), o.clone()]));
    }
    for n in [1usize, 7, 4101, 300_001] {
        layouts.push((vec![n], [vec![n], vec![n], vec![n]]));
        layouts.push((vec![n], [vec![n], vec![1], vec![n]]));
    }
    // Ranks past the vectorised kernels: input `a` with its axes reversed over an output of
    // 5 and of 8 dimensions (no two collapse): the six-dimension and any-rank kernels.
    layouts.push((vec![3, 2, 5, 2, 3], [vec![3, 2, 5, 2, 3], vec![3], vec![1]]));
    layouts.push((
        vec![2, 3, 2, 3, 2, 3, 2, 3],
        [vec![2, 3, 2, 3, 2, 3, 2, 3], vec![2, 3], vec![1]],
    ));
    let mut checked = 0;
    for (text, types) in cases {
        let e = Expr::parse(text).map_err(|e| e.to_string())?;
        let args = [
            ("a", Arg::Tensor(types[0])),
            ("b", Arg::Tensor(types[1])),
            ("c", Arg::Tensor(types[2])),
        ];
        let c = e.compile(&args, None).map_err(|e| format!("{text}: {e}"))?;
        for (out_shape, in_shapes) in &layouts {
            // Aligned (offset 0) and not (offset 1 element), for the inputs and the output.
            for shift in [0usize, 1, 2] {
                let view = |shape: &[usize], offset: usize, reversed: bool| {
                    let mut strides: Vec<isize> =
                        strided_apply::layout::contiguous_strides(shape).ok_or("shape overflow")?;
                    if reversed {
                        // The same elements, axes in the opposite order of strides.
                        let mut rev: Vec<usize> = shape.to_vec();
                        rev.reverse();
                        strides = strided_apply::layout::contiguous_strides(&rev)
                            .ok_or("shape overflow")?;
                        strides.reverse();
                    }
                    Layout::new(shape, &strides, offset).map_err(|e| e.to_string())
                };
                let high = out_shape.len() > 2;
                let ol = view(out_shape, usize::from(shift == 2), false)?;
                let ils: Vec<Layout> = (0..3)
                    .map(|k| {
                        view(
                            &in_shapes[k],
                            usize::from(shift == 1 && k == 1),
                            high && k == 0,
                        )
                    })
                    .collect::<Result<_, _>>()?;
                let what = format!(
                    "`{text}` {types:?} out {out_shape:?} inputs {in_shapes:?} shift {shift}"
                );
                twin_and_gpu_agree(gpu, &mut r, &c, &types, &ils, &ol)
                    .map_err(|d| format!("{what}: {d}"))?;
                checked += 1;
            }
        }
    }
    Ok(format!(
        "{checked} (program, layout, alignment) cases bit-identical to the CPU twin"
    ))
}

/// Programs of one op (`kernel::ONE_NAMES`: the op dispatched once per thread, one 16-byte
/// vector per thread) in every element type that has a one-op kernel, over dense operands
/// (partial last vectors included), rows and columns broadcast, scalars and constants, and
/// misaligned views (which run on the interpreter): bit-identical to the CPU twin.
pub fn one_op_kernels_match_cpu_twin(gpu: &Gpu) -> TestResult {
    use strided_apply_expr::kernel::one_kernel;
    let mut r = Rng(0xe4b7_0008);
    let texts = [
        // The copy (a whole program hoisted, `positive`).
        "a",
        "-a",
        "abs(a)",
        "relu(a)",
        "a + b",
        "a - b",
        "a * b",
        "a / b",
        "min(a, b)",
        "max(a, b)",
        "a * 3",
        "a - 1",
        "fma(a, b, c)",
        "fma(a, b, 2)",
        "clamp(a, b, c)",
        "clamp(a, 0, 6)",
    ];
    let mut layouts: Vec<(Vec<usize>, [Vec<usize>; 3])> = Vec::new();
    for cols in [64usize, 48] {
        let (o, row, col) = (vec![33, cols], vec![cols], vec![33, 1]);
        layouts.push((o.clone(), [o.clone(), row.clone(), o.clone()]));
        layouts.push((o.clone(), [row, col, vec![1]]));
    }
    for n in [1usize, 15, 4103, 200_001] {
        layouts.push((vec![n], [vec![n], vec![n], vec![n]]));
        layouts.push((vec![n], [vec![n], vec![1], vec![n]]));
    }
    let (mut checked, mut one_op) = (0, 0);
    // `i8`, `i16` and `u16` run in `i32` math on kernels of 16 and 8 lanes, whose input count
    // is a constant (one code path each for 1, 2 and 3 inputs).
    for t in [F32, F16, BF16, F64, I32, I64, U32, U8, I8, I16, U16, U64] {
        for text in texts {
            let e = Expr::parse(text).map_err(|e| e.to_string())?;
            let args: Vec<(&str, Arg)> =
                e.names().into_iter().map(|n| (n, Arg::Tensor(t))).collect();
            let c = match e.compile(&args, None) {
                Ok(c) => c,
                // An op the type does not have (`relu` of an unsigned type, …).
                Err(Error::ExprType { .. }) => continue,
                Err(err) => return Err(format!("{text} {t:?}: {err}")),
            };
            // Integer `/` is true division (f32 math over integer operands, an f32 output):
            // operands of two element types, which the interpreter runs; compared all the
            // same.
            if one_kernel(c.program()).is_some() {
                one_op += 1;
            }
            let types = [t; 3];
            for (out_shape, in_shapes) in &layouts {
                for shift in [0usize, 1] {
                    let view = |shape: &[usize], offset: usize| {
                        let strides = strided_apply::layout::contiguous_strides(shape)
                            .ok_or("shape overflow")?;
                        Layout::new(shape, &strides, offset).map_err(|e| e.to_string())
                    };
                    let ol = view(out_shape, 0)?;
                    let ils: Vec<Layout> = (0..3)
                        .map(|k| view(&in_shapes[k], usize::from(shift == 1 && k == 0)))
                        .collect::<Result<_, _>>()?;
                    twin_and_gpu_agree(gpu, &mut r, &c, &types, &ils, &ol).map_err(|d| {
                        format!("`{text}` {t:?} out {out_shape:?} inputs {in_shapes:?} shift {shift}: {d}")
                    })?;
                    checked += 1;
                }
            }
            // Transposed inputs (the tiled one-op kernel where it has one): `a`, then every
            // input, read across its rows; whole and partial tiles, and a batch axis.
            for shape in [vec![96usize, 64], vec![33, 70], vec![3, 40, 36]] {
                let rank = shape.len();
                let ol = Layout::contiguous(&shape).map_err(|e| e.to_string())?;
                let mut swapped = shape.clone();
                swapped.swap(rank - 2, rank - 1);
                let across = Layout::contiguous(&swapped)
                    .and_then(|l| l.transpose(rank - 2, rank - 1))
                    .map_err(|e| e.to_string())?;
                for all in [false, true] {
                    let ils: Vec<Layout> = (0..3)
                        .map(|q| {
                            if q == 0 || all {
                                across.clone()
                            } else {
                                ol.clone()
                            }
                        })
                        .collect();
                    twin_and_gpu_agree(gpu, &mut r, &c, &types, &ils, &ol).map_err(|d| {
                        format!("`{text}` {t:?} {shape:?} transposed (all: {all}): {d}")
                    })?;
                    checked += 1;
                }
            }
        }
    }
    if one_op < 60 {
        return Err(format!("only {one_op} programs took a one-op kernel"));
    }
    Ok(format!(
        "{checked} (one-op program, type, layout, alignment) cases bit-identical to the CPU twin ({one_op} programs)"
    ))
}

/// Runs `c` (inputs `a`, `b`, `c`, … of `types` over the views `ils`, in the order of the
/// alphabet, output `ol`) on the CPU twin and on the GPU from the same random words: the
/// first difference as an error.
fn twin_and_gpu_agree(
    gpu: &Gpu,
    r: &mut Rng,
    c: &strided_apply::expr::Compiled,
    types: &[ElemType],
    ils: &[Layout],
    ol: &Layout,
) -> Result<(), String> {
    let ot = c.out();
    let order = c.inputs();
    let slot = |name: &str| name.bytes().next().map_or(0, |b| (b - b'a') as usize);
    let host_in: Vec<Vec<u64>> = order
        .iter()
        .map(|nm| {
            let k = slot(nm);
            random_words(r, types[k], ils[k].offset() + ils[k].numel())
        })
        .collect();
    let n_out = ol.offset() + ol.numel();
    let poison = vec![0xC3C3_C3C3_C3C3_C3C3u64; (n_out * ot.size()).div_ceil(8)];
    let mut host_out = poison.clone();
    let ins: Vec<RawTensor<'_>> = order
        .iter()
        .zip(&host_in)
        .map(|(nm, w)| raw(w.as_ptr() as u64, types[slot(nm)], &ils[slot(nm)]))
        .collect();
    // SAFETY: every view lies in its own buffer of `offset + numel` elements.
    unsafe {
        c.run_cpu_raw(raw(host_out.as_mut_ptr() as u64, ot, ol), &ins, &[])
            .map_err(|e| format!("CPU twin: {e}"))?;
    }
    let dev_in: Vec<DeviceTensor<i64>> = host_in
        .iter()
        .map(|w| upload(gpu, w))
        .collect::<Result<_, _>>()?;
    let dev_out = upload(gpu, &poison)?;
    let ins: Vec<RawTensor<'_>> = order
        .iter()
        .zip(&dev_in)
        .map(|(nm, d)| raw(d.buffer().addr(), types[slot(nm)], &ils[slot(nm)]))
        .collect();
    // SAFETY: as above, in device buffers of this gpu holding the same words.
    unsafe {
        c.launch(gpu, None, raw(dev_out.buffer().addr(), ot, ol), &ins, &[])
            .map_err(|e| format!("GPU: {e}"))?;
    }
    let got = download(gpu, &dev_out)?;
    match first_difference(ot, n_out, &got, &host_out) {
        Some(d) => Err(d),
        None => Ok(()),
    }
}

/// Fast programs of five to eight inputs (more than the element-wise fast kernels load:
/// the vectorised kernel loads the rest by their load instruction, elsewhere the general
/// interpreter runs them) give the CPU twin's bits: every vectorised math type and f64,
/// dense, row, column and scalar inputs, partial last vectors, an unaligned output and a
/// transposed input (both off the vectorised kernel), and a fifth input of another element
/// type (off the fast path).
pub fn wide_programs_match_cpu_twin(gpu: &Gpu) -> TestResult {
    let mut r = Rng(0xe4b7_0009);
    let cases: [(&str, &[ElemType]); 8] = [
        ("a * b + c - d * e", &[F32; 5]),
        ("(a * b + c * d) - (e * f + g * h)", &[F32; 8]),
        (
            "min(a, b) * c + max(d, e) - f",
            &[F32, BF16, F16, F32, F32, F32],
        ),
        ("a * b + c - d * e", &[F32, F32, F32, F32, BF16]),
        ("a * b - c + d % e + f", &[I32; 6]),
        ("a * b + c - d + e * f - g", &[U32; 7]),
        ("a + b * c + d - e + f", &[U8; 6]),
        ("a * b - c + d * e", &[F64; 5]),
    ];
    // (out shape, input shapes by the input's index mod 4): dense, a row, a column, one
    // element.
    let mut layouts: Vec<(Vec<usize>, [Vec<usize>; 4])> = Vec::new();
    for cols in [64usize, 60] {
        let (o, row, col) = (vec![37, cols], vec![cols], vec![37, 1]);
        layouts.push((o.clone(), [o.clone(), row.clone(), col.clone(), vec![1]]));
        layouts.push((o.clone(), [row, col, vec![1], o.clone()]));
    }
    for n in [7usize, 4101] {
        layouts.push((vec![n], [vec![n], vec![1], vec![n], vec![n]]));
    }
    let mut checked = 0;
    for (text, types) in cases {
        let e = Expr::parse(text).map_err(|e| e.to_string())?;
        let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let args: Vec<(&str, Arg)> = types
            .iter()
            .zip(names)
            .map(|(&t, n)| (n, Arg::Tensor(t)))
            .collect();
        let c = e.compile(&args, None).map_err(|e| format!("{text}: {e}"))?;
        for (out_shape, in_shapes) in &layouts {
            // 0: aligned; 1: the output one element off its alignment; 2: input `a`
            // transposed (2-D only).
            for shift in [0usize, 1, 2] {
                let transposed = shift == 2 && out_shape.len() == 2;
                let ol = Layout::new(
                    out_shape,
                    &strided_apply::layout::contiguous_strides(out_shape).ok_or("overflow")?,
                    usize::from(shift == 1),
                )
                .map_err(|e| e.to_string())?;
                let ils: Vec<Layout> = (0..types.len())
                    .map(|k| {
                        let shape = &in_shapes[k % 4];
                        if k == 0 && transposed && shape.len() == 2 {
                            Layout::new(shape, &[1, shape[0] as isize], 0)
                        } else {
                            Layout::contiguous(shape)
                        }
                        .map_err(|e| e.to_string())
                    })
                    .collect::<Result<_, _>>()?;
                let what = format!("`{text}` {types:?} out {out_shape:?} shift {shift}");
                twin_and_gpu_agree(gpu, &mut r, &c, types, &ils, &ol)
                    .map_err(|d| format!("{what}: {d}"))?;
                checked += 1;
            }
        }
    }
    Ok(format!(
        "{checked} (program of 5-8 inputs, layout) cases bit-identical to the CPU twin"
    ))
}

/// The tiled kernels (an input whose unit-stride axis is not the output's, on the fast
/// paths) give the CPU twin's bits: transposed and permuted inputs, one or two staged,
/// beside dense, row and column inputs; sizes that leave partial tiles; one to three
/// batch axes; unaligned offsets.
pub fn tiled_kernels_match_cpu_twin(gpu: &Gpu) -> TestResult {
    let mut r = Rng(0xe4b7_0007);
    let cases: [(&str, [ElemType; 3]); 8] = [
        ("a + b * c", [F32, F32, F32]),
        ("a * b + c", [BF16, F32, F16]),
        ("min(a, b) * c - a", [F32, F32, F32]),
        ("a * b - c", [F64, F64, F64]),
        ("a % b + c", [I32, I32, I32]),
        ("a / b - c", [I64, I64, I64]),
        ("a * b + c", [U32, U32, U32]),
        ("a + b * c", [U8, U8, U8]),
    ];
    // The view of `shape` whose axes lie in memory in the order `perm` (outermost first),
    // `offset` elements into its buffer.
    let view = |shape: &[usize], perm: &[usize], offset: usize| {
        let in_order: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
        let packed =
            strided_apply::layout::contiguous_strides(&in_order).ok_or("shape overflow")?;
        let mut strides = vec![0isize; shape.len()];
        for (i, &d) in perm.iter().enumerate() {
            strides[d] = packed[i];
        }
        Layout::new(shape, &strides, offset).map_err(|e| e.to_string())
    };
    // (out shape, each input's memory order: `None` a row of the last axis broadcast).
    type Orders = [Option<Vec<usize>>; 3];
    let mut layouts: Vec<(Vec<usize>, Orders)> = Vec::new();
    for (m, n) in [(37usize, 45usize), (64, 64), (100, 33), (1, 70), (33, 1000)] {
        let (t, d) = (Some(vec![1, 0]), Some(vec![0, 1]));
        layouts.push((vec![m, n], [t.clone(), d.clone(), d.clone()]));
        layouts.push((vec![m, n], [d.clone(), t.clone(), t.clone()]));
        layouts.push((vec![m, n], [t.clone(), None, d.clone()]));
    }
    for shape in [
        vec![5usize, 33, 40],
        vec![2, 3, 35, 17],
        vec![2, 2, 3, 9, 40],
    ] {
        let k = shape.len();
        let reversed: Vec<usize> = (0..k).rev().collect();
        let swapped: Vec<usize> = (0..k - 2).chain([k - 1, k - 2]).collect();
        let dense: Vec<usize> = (0..k).collect();
        layouts.push((
            shape.clone(),
            [Some(reversed), Some(dense.clone()), Some(swapped)],
        ));
    }
    let mut checked = 0;
    for (text, types) in cases {
        let e = Expr::parse(text).map_err(|e| e.to_string())?;
        let args = [
            ("a", Arg::Tensor(types[0])),
            ("b", Arg::Tensor(types[1])),
            ("c", Arg::Tensor(types[2])),
        ];
        let c = e.compile(&args, None).map_err(|e| format!("{text}: {e}"))?;
        for (out_shape, orders) in &layouts {
            for shift in [0usize, 1] {
                let ol = view(out_shape, &(0..out_shape.len()).collect::<Vec<_>>(), shift)?;
                let ils: Vec<Layout> = orders
                    .iter()
                    .enumerate()
                    .map(|(k, o)| match o {
                        Some(perm) => view(out_shape, perm, usize::from(shift == 1 && k == 0)),
                        None => Layout::new(
                            out_shape,
                            &out_shape
                                .iter()
                                .enumerate()
                                .map(|(d, _)| isize::from(d + 1 == out_shape.len()))
                                .collect::<Vec<_>>(),
                            0,
                        )
                        .map_err(|e| e.to_string()),
                    })
                    .collect::<Result<_, _>>()?;
                let what =
                    format!("`{text}` {types:?} out {out_shape:?} orders {orders:?} shift {shift}");
                twin_and_gpu_agree(gpu, &mut r, &c, &types, &ils, &ol)
                    .map_err(|d| format!("{what}: {d}"))?;
                checked += 1;
            }
        }
    }
    Ok(format!(
        "{checked} (program, transposed layout, alignment) cases bit-identical to the CPU twin"
    ))
}

/// One expression reduction on the CPU twin and on the GPU, by the interpreter and by tier 1,
/// from the same words: `Ok(None)` when all refuse it with the same error, the first
/// difference as an error; `compiled` counts tier 1's launches.
#[allow(clippy::too_many_arguments)]
fn reduce_both(
    gpu: &Gpu,
    c: &strided_apply::expr::Compiled,
    op: ReduceOp,
    types: &[ElemType],
    layouts: &[Layout],
    host_in: &[Vec<u64>],
    shape: &[usize],
    axes: &[usize],
    compiled: &mut u64,
) -> Result<Option<usize>, String> {
    let ot = c.out();
    let out_shape: Vec<usize> = (0..shape.len())
        .filter(|a| !axes.contains(a))
        .map(|a| shape[a])
        .collect();
    let lo = Layout::contiguous(&out_shape).map_err(|e| e.to_string())?;
    let poison = vec![0xC3C3_C3C3_C3C3_C3C3u64; (lo.numel() * ot.size()).div_ceil(8).max(1)];
    let mut host_out = poison.clone();
    let ins: Vec<RawTensor<'_>> = layouts
        .iter()
        .zip(types)
        .zip(host_in)
        .map(|((l, &t), w)| raw(w.as_ptr() as u64, t, l))
        .collect();
    let out = raw(host_out.as_mut_ptr() as u64, ot, &lo);
    // SAFETY: every layout lies in its words; the output is its own buffer.
    let cpu = unsafe { c.reduce_cpu_raw(op, out, &ins, &[], axes) };
    let dev_in: Vec<DeviceTensor<i64>> = host_in
        .iter()
        .map(|w| upload(gpu, w))
        .collect::<Result<_, _>>()?;
    let ins: Vec<RawTensor<'_>> = layouts
        .iter()
        .zip(types)
        .zip(&dev_in)
        .map(|((l, &t), d)| raw(d.buffer().addr(), t, l))
        .collect();
    // The interpreter's kernels, then tier 1's (compiled at once, an error if its compile
    // fails); where tier 1 takes the reduction it must have launched.
    for tier in [Tier::Interpret, Tier::Compile] {
        let dev_out = upload(gpu, &poison)?;
        let out = raw(dev_out.buffer().addr(), ot, &lo);
        let before = tier1_launches();
        // SAFETY: as above, in device buffers of this gpu holding the same words.
        let dev = unsafe {
            c.clone()
                .with_tier(tier)
                .launch_reduce(gpu, None, op, out, &ins, &[], axes)
        };
        match (&cpu, &dev) {
            (Ok(()), Ok(())) => {}
            (Err(a), Err(b)) if a.to_string() == b.to_string() => return Ok(None),
            _ => return Err(format!("{tier:?}: CPU twin {cpu:?}, GPU {dev:?}")),
        }
        gpu.synchronize().map_err(|e| format!("{tier:?}: {e}"))?;
        *compiled += tier1_launches() - before;
        let got = download(gpu, &dev_out)?;
        if let Some(d) = first_difference(ot, lo.numel(), &got, &host_out) {
            return Err(format!("{tier:?}: {d}"));
        }
    }
    Ok(Some(lo.numel()))
}

/// A fixed reduction case: the expression, its inputs' types and shapes, the broadcast
/// shape and the reduced axes.
type FixedReduction = (
    &'static str,
    &'static [(ElemType, &'static [usize])],
    &'static [usize],
    &'static [usize],
);

/// Reductions of expressions (`sum`, `prod`, `amin`, `amax`, `mean`) over random axes of
/// random exact-op programs on random layouts and element types, and over fixed shapes that
/// take every path of the group kernel (short rows sharing a block, several groups and the
/// final kernel, columns, a reduction of nothing): the GPU's output equals the CPU twin's
/// bit for bit (NaN as NaN).
pub fn reductions_match_cpu_twin(gpu: &Gpu) -> TestResult {
    let trials = knob("STRIDED_APPLY_EXPR_TRIALS", 400);
    let mut r = Rng(0xe4b7_0002);
    let (mut ran, mut refused, mut outputs, mut compiled) = (0, 0, 0usize, 0u64);
    for trial in 0..trials {
        let all = ["a", "b", "c"];
        let n_names = 1 + r.below(3) as usize;
        let text = gen_num(&mut r, 3, &all[..n_names], false);
        let e = Expr::parse(&text).map_err(|e| format!("`{text}`: {e}"))?;
        let names = e.names();
        let args: Vec<(&str, Arg)> = names
            .iter()
            .map(|&n| (n, Arg::Tensor(*pick(&mut r, &TYPES))))
            .collect();
        let out_type = r.one_in(3).then(|| *pick(&mut r, &TYPES));
        let c = match e.compile(&args, out_type) {
            Ok(c) => c,
            Err(Error::ExprType { .. } | Error::ExprLimit { .. }) => {
                refused += 1;
                continue;
            }
            Err(err) => return Err(format!("`{text}`: {err}")),
        };
        let types: Vec<ElemType> = c
            .inputs()
            .iter()
            .map(|n| match args.iter().find(|(m, _)| m == n) {
                Some((_, Arg::Tensor(t))) => *t,
                _ => F32,
            })
            .collect();
        let case = random_case(&mut r, types.len(), Limits { max_numel: 3000 });
        let shape = case.out.layout.shape().to_vec();
        let axes: Vec<usize> = (0..shape.len()).filter(|_| r.one_in(2)).collect();
        let op = *pick(&mut r, &ReduceOp::ALL);
        let host_in: Vec<Vec<u64>> = case
            .inputs
            .iter()
            .zip(&types)
            .map(|(o, &t)| random_words(&mut r, t, o.len))
            .collect();
        let layouts: Vec<Layout> = case.inputs.iter().map(|o| o.layout.clone()).collect();
        match reduce_both(gpu, &c, op, &types, &layouts, &host_in, &shape, &axes, &mut compiled) {
            Ok(Some(n)) => {
                ran += 1;
                outputs += n;
            }
            Ok(None) => refused += 1,
            Err(d) => {
                return Err(format!(
                    "trial {trial} {op:?} of `{text}` over {axes:?}, inputs {types:?} -> {:?}, shape {shape:?}: {d}",
                    c.out()
                ))
            }
        }
    }
    if ran < trials / 4 {
        return Err(format!(
            "only {ran} of {trials} reductions ran ({refused} refused)"
        ));
    }
    // Fixed shapes: (expression, input types and shapes, broadcast shape, axes).
    let fixed: [FixedReduction; 15] = [
        // Tier 1's shapes: rows sharing a block with a broadcast operand and a partial last
        // chunk (16-bit output: chunks of 8), long rows of several chunks per slot,
        // several groups (the final kernel after tier 1's), f64's software maximum,
        // three kept dimensions; columns (the column shape: a partial last block of
        // outputs, a partial last chunk, several groups).
        (
            "(a - b) * (a - b)",
            &[(F32, &[1000, 300]), (F32, &[1, 300])],
            &[1000, 300],
            &[0],
        ),
        (
            "exp(a - b)",
            &[(F16, &[1003, 64]), (F16, &[1, 64])],
            &[1003, 64],
            &[0],
        ),
        ("a * a", &[(BF16, &[140_000, 20])], &[140_000, 20], &[0]),
        (
            "exp(a - b)",
            &[(BF16, &[300, 1003]), (BF16, &[300, 1])],
            &[300, 1003],
            &[1],
        ),
        (
            "(a - b) * (a - b)",
            &[(F16, &[40, 20_000]), (F16, &[40, 1])],
            &[40, 20_000],
            &[1],
        ),
        ("a * 3", &[(F32, &[3, 400_003])], &[3, 400_003], &[1]),
        (
            "a - b",
            &[(F64, &[64, 777]), (F64, &[777])],
            &[64, 777],
            &[1],
        ),
        (
            "a + b",
            &[(F32, &[3, 4, 5, 66]), (F32, &[5, 1])],
            &[3, 4, 5, 66],
            &[3],
        ),
        (
            "a * b",
            &[(F32, &[2, 300_000]), (F32, &[300_000])],
            &[2, 300_000],
            &[1],
        ),
        (
            "(a - b) * (a - b)",
            &[(F32, &[4096, 64]), (F32, &[64])],
            &[4096, 64],
            &[1],
        ),
        ("a + 1", &[(BF16, &[64, 4096])], &[64, 4096], &[0]),
        ("a * a", &[(F64, &[3, 5, 7000])], &[3, 5, 7000], &[0, 2]),
        (
            "a - b",
            &[(I32, &[1000, 17]), (I32, &[1000, 1])],
            &[1000, 17],
            &[1],
        ),
        ("a", &[(U8, &[7, 70_000])], &[7, 70_000], &[0, 1]),
        ("a * 2", &[(F32, &[5, 0])], &[5, 0], &[1]),
    ];
    let mut fixed_ran = 0;
    for (text, ins, shape, axes) in fixed {
        let names = ["a", "b"];
        let args: Vec<(&str, Arg)> = ins
            .iter()
            .zip(names)
            .map(|(&(t, _), n)| (n, Arg::Tensor(t)))
            .collect();
        let c = Expr::parse(text)
            .and_then(|e| e.compile(&args, None))
            .map_err(|e| format!("`{text}`: {e}"))?;
        let types: Vec<ElemType> = ins.iter().map(|&(t, _)| t).collect();
        let layouts: Vec<Layout> = ins
            .iter()
            .map(|&(_, s)| Layout::contiguous(s).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let host_in: Vec<Vec<u64>> = ins
            .iter()
            .zip(&layouts)
            .map(|(&(t, _), l)| random_words(&mut r, t, l.numel()))
            .collect();
        for op in ReduceOp::ALL {
            match reduce_both(
                gpu,
                &c,
                op,
                &types,
                &layouts,
                &host_in,
                shape,
                axes,
                &mut compiled,
            ) {
                Ok(Some(_)) => fixed_ran += 1,
                Ok(None) => {}
                Err(d) => {
                    return Err(format!(
                        "{op:?} of `{text}` over {axes:?}, shape {shape:?}: {d}"
                    ))
                }
            }
        }
    }
    if fixed_ran < 65 {
        return Err(format!("only {fixed_ran} of the fixed reductions ran"));
    }
    if compiled < 40 {
        return Err(format!("tier 1 ran only {compiled} of the reductions"));
    }
    Ok(format!(
        "{ran} random reductions ({outputs} outputs; {refused} refused alike by both) and {fixed_ran} fixed ones bit-identical to the CPU twin, on the interpreter and on tier 1 ({compiled} compiled launches)"
    ))
}
