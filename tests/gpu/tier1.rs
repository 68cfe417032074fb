//! Tier 1, compiled expressions: on every layout class, for the float and integer types
//! (and conversions between them), a compiled expression gives the interpreter's bits (the
//! same process runs both, by `Compiled::with_tier`), and for exact ops the CPU twin's;
//! tier 1 really ran where it compiles the layout.

use crate::harness::TestResult;
use strided_apply::expr::{tier1_launches, Arg, DeviceArg, Expr, HostTensor, HostTensorMut, Tier};
use strided_apply::gpu_kernels::{bf16, f16};
use strided_apply::verify::{first_mismatch, Distance};
use strided_apply::{ops, Bool, DeviceTensor, Elem, ElemType::F32, Error, Gpu, Layout};

/// An input: values and a layout (broadcast, sliced or permuted views of them).
struct Input<T> {
    host: Vec<T>,
    layout: Layout,
}

/// Runs `text` over `ins` into `out` on both tiers and the CPU twin; `compiled`: whether
/// tier 1 must have launched (layouts it compiles). A line describing the case.
fn case<T: Elem, O: Elem + Distance>(
    gpu: &Gpu,
    text: &str,
    ins: &[Input<T>],
    out: &Layout,
    poison: O,
    exact: bool,
    compiled: bool,
) -> TestResult {
    let e = |e: Error| format!("{text}: {e}");
    let names = ["a", "b", "c"];
    let args: Vec<(&str, Arg)> = (0..ins.len())
        .map(|k| (names[k], Arg::Tensor(T::TYPE)))
        .collect();
    let f = Expr::parse(text)
        .map_err(e)?
        .compile(&args, Some(O::TYPE))
        .map_err(e)?;
    let dev = ins
        .iter()
        .map(|i| {
            DeviceTensor::from_slice(gpu, &i.host, &[i.host.len()])?.with_layout(i.layout.clone())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(e)?;
    let dargs: Vec<DeviceArg> = dev.iter().map(DeviceArg::from).collect();
    let n = out.numel();
    let run = |tier: Tier| -> Result<Vec<O>, String> {
        let mut o = DeviceTensor::from_slice(gpu, &vec![poison; n], &[n])
            .map_err(e)?
            .with_layout(out.clone())
            .map_err(e)?;
        f.clone()
            .with_tier(tier)
            .run(gpu, &mut o, &dargs, &[])
            .map_err(e)?;
        o.buffer_to_vec(gpu).map_err(e)
    };
    let interp = run(Tier::Interpret)?;
    let before = tier1_launches();
    let comp = run(Tier::Compile)?;
    let launched = tier1_launches() - before;
    if compiled && launched == 0 {
        return Err(format!(
            "{text} over {:?}: tier 1 did not launch",
            out.shape()
        ));
    }
    if let Some(m) = first_mismatch(&comp, &interp, ops::Tolerance::Exact) {
        return Err(format!(
            "{text} over {:?}: tier 1 against tier 0: {m}",
            out.shape()
        ));
    }
    let mut want = vec![poison; n];
    let hosts: Vec<HostTensor> = ins
        .iter()
        .map(|i| HostTensor::new(bytemuck::cast_slice(&i.host), T::TYPE, &i.layout))
        .collect();
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), O::TYPE, out),
        &hosts,
        &[],
    )
    .map_err(e)?;
    // Transcendental functions: the interpreter's bits (above); the CPU twin's `std` and
    // `libm` differ by a few ulp per function, which sums and quotients magnify.
    if let (true, Some(m)) = (exact, first_mismatch(&comp, &want, ops::Tolerance::Exact)) {
        return Err(format!(
            "{text} over {:?}: tier 1 against the CPU twin: {m}",
            out.shape()
        ));
    }
    Ok(format!(
        "{text} {}→{} {:?} ({launched} compiled launches)",
        T::NAME,
        O::NAME,
        out.shape()
    ))
}

/// `ins` with their values converted by `from`.
fn converted<T: Elem>(ins: &[Input<f64>], from: impl Fn(f64) -> T) -> Vec<Input<T>> {
    ins.iter()
        .map(|i| Input {
            host: i.host.iter().map(|&v| from(v)).collect(),
            layout: i.layout.clone(),
        })
        .collect()
}

/// A layout class: its name, the inputs, the output, whether tier 1 compiles it.
type Class<T> = (&'static str, Vec<Input<T>>, Layout, bool);

/// Values in [-2, 2] with some NaN, infinities and signed zeros.
fn values<T: Elem>(n: usize, seed: u64, from: impl Fn(f64) -> T) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match i % 97 {
                5 => f64::NAN,
                17 => f64::INFINITY,
                29 => f64::NEG_INFINITY,
                41 => -0.0,
                53 => 0.0,
                _ => (x >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0,
            };
            from(v)
        })
        .collect()
}

/// The layout classes over an output of `rows × cols`: dense; a row, a column and a full
/// input; a step-2 slice; a transposed input (the tiled shape: paired for 2-byte types);
/// the same one element off a 4-byte boundary (tiles of single elements); a batch of two
/// transposed inputs against a reversed one; a 3-D permutation.
fn layouts<T: Elem>(
    rows: usize,
    cols: usize,
    from: impl Fn(f64) -> T + Copy,
) -> Result<Vec<Class<T>>, String> {
    layouts_of(rows, cols, &|n, seed| values(n, seed, from))
}

/// [`layouts`] with the inputs' values from `values(n, seed)`.
fn layouts_of<T: Elem>(
    rows: usize,
    cols: usize,
    values: &dyn Fn(usize, u64) -> Vec<T>,
) -> Result<Vec<Class<T>>, String> {
    let e = |e: Error| e.to_string();
    let out = Layout::contiguous(&[rows, cols]).map_err(e)?;
    let full = |seed| Input {
        host: values(rows * cols, seed),
        layout: out.clone(),
    };
    let mut v = vec![("dense", vec![full(1), full(2), full(3)], out.clone(), true)];
    let row = Input {
        host: values(cols, 4),
        layout: Layout::contiguous(&[1, cols])
            .map_err(e)?
            .broadcast_to(&[rows, cols])
            .map_err(e)?,
    };
    let col = Input {
        host: values(rows, 5),
        layout: Layout::contiguous(&[rows, 1])
            .map_err(e)?
            .broadcast_to(&[rows, cols])
            .map_err(e)?,
    };
    v.push((
        "row, column, full",
        vec![row, col, full(6)],
        out.clone(),
        true,
    ));
    let wide = Layout::contiguous(&[rows, 2 * cols]).map_err(e)?;
    let sliced = Input {
        host: values(2 * rows * cols, 7),
        layout: wide
            .slice(1, Some(0), Some(2 * cols as isize), 2)
            .map_err(e)?,
    };
    v.push((
        "step-2 slice",
        vec![full(8), sliced, full(9)],
        out.clone(),
        true,
    ));
    let t = Input {
        host: values(rows * cols, 10),
        layout: Layout::contiguous(&[cols, rows])
            .map_err(e)?
            .transpose(0, 1)
            .map_err(e)?,
    };
    v.push(("transposed", vec![full(11), t, full(12)], out.clone(), true));
    // The transposed input starting one element into its buffer: for 2-byte types its
    // pairs are not aligned words.
    let t_off = Input {
        host: values(rows * cols + 1, 16),
        layout: Layout::new(&[cols, rows], &[rows as isize, 1], 1)
            .map_err(e)?
            .transpose(0, 1)
            .map_err(e)?,
    };
    v.push((
        "transposed, one element off",
        vec![full(17), t_off, full(18)],
        out.clone(),
        true,
    ));
    // [2, rows, cols]: two inputs transposed in their last two axes, one reversed along
    // the batch axis.
    let out_b = Layout::contiguous(&[2, rows, cols]).map_err(e)?;
    let tb = |seed| -> Result<Input<T>, String> {
        Ok(Input {
            host: values(2 * rows * cols, seed),
            layout: Layout::contiguous(&[2, cols, rows])
                .map_err(e)?
                .transpose(1, 2)
                .map_err(e)?,
        })
    };
    let rev = Input {
        host: values(2 * rows * cols, 19),
        layout: out_b.flip(0).map_err(e)?,
    };
    v.push((
        "batched transposed",
        vec![tb(20)?, rev, tb(21)?],
        out_b,
        true,
    ));
    // 3-D: [4, rows/4, cols] with the two outer axes swapped (no unit-stride disagreement).
    if rows.is_multiple_of(4) {
        let out3 = Layout::contiguous(&[4, rows / 4, cols]).map_err(e)?;
        let p = Input {
            host: values(rows * cols, 13),
            layout: Layout::contiguous(&[rows / 4, 4, cols])
                .map_err(e)?
                .transpose(0, 1)
                .map_err(e)?,
        };
        let f3 = |seed| Input {
            host: values(rows * cols, seed),
            layout: out3.clone(),
        };
        v.push(("3-D permuted", vec![f3(14), p, f3(15)], out3, true));
    }
    Ok(v)
}

const EXACT: &[&str] = &[
    "((a*b + c) * (b - c) + minimum(a, b) * maximum(b, c) / fma(a, c, 2.0) - 0.25) * a",
    "where(isnan(a), 0.0, a) + clamp(b, -1.0, 1.0) * relu(c) - abs(a) / sqrt(abs(b)) + rsqrt(abs(c))",
    "where(logical_or(lt(a, b), isinf(c)), fmin(a, c), fmax(b, c)) + copysign(a, b) + sign(c) + floor(a) + round(b) - trunc(c) + ceil(a)",
];
const INEXACT: &[&str] = &[
    "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)",
    "tanh(a) * sigmoid(b) + erf(c) + exp(a) + pow(abs(b), c) + atan2(a, b) + fmod(a, c) + remainder(b, c) + lgamma(c)",
];

/// Programs of one input read as vectors (and a broadcast one): text, inputs, exact.
const LONG: [(&str, usize, bool); 3] = [
    (
        "(tanh((a * a * a * 0.044715 + a) * 0.7978845608028654) + 1) * (a * 0.5)",
        1,
        false,
    ),
    (
        "where(isnan(a), 0.0, a) * 3.0 - abs(a) / (a * a + 1.0)",
        1,
        true,
    ),
    ("clamp(a * b, -1.0, 1.0) + sqrt(abs(a)) * b", 2, true),
];

pub fn tiers_agree(gpu: &Gpu) -> TestResult {
    let mut lines = Vec::new();
    for &(rows, cols) in &[(64usize, 256usize), (36, 1001)] {
        for (i, text) in EXACT.iter().chain(INEXACT).enumerate() {
            let exact = i < EXACT.len();
            for (name, ins, out, compiled) in layouts(rows, cols, |v| v as f32)? {
                let l = case::<f32, f32>(gpu, text, &ins, &out, f32::NAN, exact, compiled)
                    .map_err(|m| format!("{name}: {m}"))?;
                lines.push(l);
            }
            for (name, ins, out, compiled) in layouts(rows, cols, |v| v)? {
                let l = case::<f64, f64>(gpu, text, &ins, &out, f64::NAN, exact, compiled)
                    .map_err(|m| format!("{name}: {m}"))?;
                lines.push(l);
            }
            for (name, ins, out, compiled) in layouts(rows, cols, bf16::from_f64)? {
                let l = case::<bf16, bf16>(gpu, text, &ins, &out, bf16::NAN, exact, compiled)
                    .map_err(|m| format!("{name}: {m}"))?;
                lines.push(l);
            }
            for (name, ins, out, compiled) in layouts(rows, cols, f16::from_f64)? {
                let l = case::<f16, f32>(gpu, text, &ins, &out, f32::NAN, exact, compiled)
                    .map_err(|m| format!("{name}: {m}"))?;
                lines.push(l);
            }
        }
    }
    // One dimension long enough for several vectors a thread (`tier1::vector_per`: programs
    // reading one input as vectors, 4 or 8 vectors a thread of 2048 threads an SM): bf16
    // takes 4 (8 lanes), f32 and f64 8; the last block partly filled, a tail of one element;
    // the second program's `b` broadcast from one element.
    let n = 6 * 2048 * gpu.sm_count() as usize * 8 + 1001;
    let long = Layout::contiguous(&[n]).map_err(|e| e.to_string())?;
    let one = Layout::contiguous(&[1])
        .and_then(|l| l.broadcast_to(&[n]))
        .map_err(|e| e.to_string())?;
    let ins = [
        Input {
            host: values(n, 30, |v| v),
            layout: long.clone(),
        },
        Input {
            host: vec![0.75],
            layout: one,
        },
    ];
    for (text, k, exact) in LONG {
        let at = |m: String| format!("one dimension of {n}: {m}");
        let f = converted(&ins[..k], |v| v as f32);
        let h = converted(&ins[..k], bf16::from_f64);
        let d = &ins[..k];
        lines.push(case::<f64, f64>(gpu, text, d, &long, f64::NAN, exact, true).map_err(at)?);
        lines.push(case::<f32, f32>(gpu, text, &f, &long, f32::NAN, exact, true).map_err(at)?);
        lines.push(case::<bf16, bf16>(gpu, text, &h, &long, bf16::NAN, exact, true).map_err(at)?);
    }
    integer_cases(gpu, &mut lines)?;
    Ok(format!(
        "{} cases, tier 1 = tier 0 bit for bit; e.g. {}",
        lines.len(),
        lines[0]
    ))
}

/// Integer bits for a type of `width` bits (as `from` wraps them to it): 0, -1, the signed
/// minimum and maximum, the width and one less (shift amounts at and inside the range),
/// 2^32 and -2^32 (64-bit shift amounts out of range whose low word is 0), random bits, and
/// small numbers in [-9, 9] most often.
fn int_values<T: Elem>(n: usize, seed: u64, width: u32, from: impl Fn(u64) -> T) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let top = 1u64 << (width - 1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bits = match x >> 59 {
                0 | 1 => 0,
                2 | 3 => u64::MAX,
                4 => top,
                5 => top - 1,
                6 => width as u64,
                7 => width as u64 - 1,
                8..=11 => x.wrapping_mul(0x2545_f491_4f6c_dd1d),
                12 => 1 << 32,
                13 => !0 << 32,
                _ => (((x >> 20) % 19) as i64 - 9) as u64,
            };
            from(bits)
        })
        .collect()
}

/// Integer programs of one type: wrapping arithmetic, division and remainders (by 0, and
/// `MIN / -1`), shifts (by negative amounts and the width or more), bitwise ops,
/// comparisons and `where`, minimum, maximum, clamp, the value tests.
const INT_EXACT: &[&str] = &[
    "a * b + c - neg(a) + abs(b) * sign(c) + relu(a) - bitwise_not(c)",
    "trunc_div(a, b) + remainder(a, c) + floor_divide(b, c) + fmod(c, a)",
    "bitwise_left_shift(a, b) + bitwise_right_shift(c, b) + bitwise_xor(bitwise_and(a, b), bitwise_or(b, c))",
    "where(logical_and(lt(a, b), ge(b, c)), a, where(logical_or(ne(a, c), le(a, b)), b, c)) + clamp(a, minimum(b, c), maximum(b, c)) + fma(a, b, c)",
    "where(signbit(a), b, c) + where(isfinite(b), trunc_div(a, 3), 7) + fmin(a, c) * fmax(b, 2) + floor(c)",
];

/// Comparisons of integers to a bool output.
const INT_TO_BOOL: &str = "logical_or(lt(a, b), logical_and(eq(b, c), ge(a, c)))";

/// Runs `texts` over integer inputs of `T` (`width` bits, `from` wrapping bits to it) into
/// outputs of `T`, on every layout class, and [`INT_TO_BOOL`] into bool.
fn int_type<T: Elem + Distance>(
    gpu: &Gpu,
    lines: &mut Vec<String>,
    width: u32,
    from: fn(u64) -> T,
) -> Result<(), String> {
    let poison = from(0x5a5a_5a5a_5a5a_5a5a);
    let classes = layouts_of(36, 1001, &|n, seed| int_values(n, seed, width, from))?;
    for (name, ins, out, compiled) in classes {
        for text in INT_EXACT {
            let l = case::<T, T>(gpu, text, &ins, &out, poison, true, compiled)
                .map_err(|m| format!("{name}: {m}"))?;
            lines.push(l);
        }
        let l = case::<T, Bool>(
            gpu,
            INT_TO_BOOL,
            &ins,
            &out,
            Bool::from(true),
            true,
            compiled,
        )
        .map_err(|m| format!("{name}: {m}"))?;
        lines.push(l);
    }
    Ok(())
}

/// Runs `text` over the layout classes of inputs `ins` into outputs of `O`, on tier 1 where
/// the class compiles, against the interpreter and the CPU twin.
fn conversions<T: Elem, O: Elem + Distance>(
    gpu: &Gpu,
    lines: &mut Vec<String>,
    text: &str,
    classes: &[Class<T>],
    poison: O,
) -> Result<(), String> {
    for (name, ins, out, compiled) in classes {
        let l = case::<T, O>(gpu, text, ins, out, poison, true, *compiled)
            .map_err(|m| format!("{name}: {m}"))?;
        lines.push(l);
    }
    Ok(())
}

/// [`int_type`] over every integer element type.
fn for_each_int(gpu: &Gpu, lines: &mut Vec<String>) -> Result<(), String> {
    int_type::<i32>(gpu, lines, 32, |b| b as i32)?;
    int_type::<i64>(gpu, lines, 64, |b| b as i64)?;
    int_type::<u8>(gpu, lines, 8, |b| b as u8)?;
    int_type::<u32>(gpu, lines, 32, |b| b as u32)?;
    int_type::<u64>(gpu, lines, 64, |b| b)?;
    int_type::<i8>(gpu, lines, 8, |b| b as i8)?;
    int_type::<i16>(gpu, lines, 16, |b| b as i16)?;
    int_type::<u16>(gpu, lines, 16, |b| b as u16)
}

/// The integer cases of [`tiers_agree`]: every integer element type's programs
/// ([`int_type`]), then conversions: floats (NaN, infinities, values past each type's
/// range) to every integer type, integers to floats (rounded to nearest), narrowing and
/// widening between integer types, bool both ways, and programs mixing integer and float
/// math.
fn integer_cases(gpu: &Gpu, lines: &mut Vec<String>) -> Result<(), String> {
    for_each_int(gpu, lines)?;
    let (rows, cols) = (36, 1001);
    let f32s = layouts(rows, cols, |v| v as f32)?;
    let f64s = layouts(rows, cols, |v| v)?;
    conversions(
        gpu,
        lines,
        "i32(a * 3e9) + i32(b * 100.0) - i32(c)",
        &f32s,
        0x5a5a_5a5ai32,
    )?;
    conversions(
        gpu,
        lines,
        "i64(a * 1e19) + i64(b * 1e3) + i64(u8(c * 200.0))",
        &f64s,
        0x5a5ai64,
    )?;
    conversions(
        gpu,
        lines,
        "u8(a * 200.0) + u8(b * 1e3) + u8(c)",
        &f32s,
        0x5au8,
    )?;
    conversions(
        gpu,
        lines,
        "i8(a * 100.0) + i8(b * 1e5) + i8(c)",
        &f32s,
        0x5ai8,
    )?;
    conversions(
        gpu,
        lines,
        "u64(a * 1e19) + u64(b * 1e3) + u64(i8(c * 1e3))",
        &f64s,
        0x5a5au64,
    )?;
    conversions(
        gpu,
        lines,
        "u16(a * 4e4) + u16(b * 1e6) + u16(i16(c * 2e4))",
        &f32s,
        0x5a5au16,
    )?;
    conversions(
        gpu,
        lines,
        "i16(a * 3e4) - i16(b * 1e9) + i16(u32(c * 3e9))",
        &f64s,
        0x5a5ai16,
    )?;
    conversions(
        gpu,
        lines,
        "u32(a * 3e9) + u32(b) + u32(i64(c * 1e12))",
        &f64s,
        0x5a5a_5a5au32,
    )?;
    let from_i64 = layouts_of(rows, cols, &|n, seed| int_values(n, seed, 64, |b| b as i64))?;
    let from_u64 = layouts_of(rows, cols, &|n, seed| int_values(n, seed, 64, |b| b))?;
    let from_i32 = layouts_of(rows, cols, &|n, seed| int_values(n, seed, 32, |b| b as i32))?;
    let from_u8 = layouts_of(rows, cols, &|n, seed| int_values(n, seed, 8, |b| b as u8))?;
    let from_i16 = layouts_of(rows, cols, &|n, seed| int_values(n, seed, 16, |b| b as i16))?;
    conversions(
        gpu,
        lines,
        "f32(a) * 0.5 + f32(b) + f64(c)",
        &from_i64,
        f32::NAN,
    )?;
    conversions(
        gpu,
        lines,
        "i32(i8(a)) + i32(i16(b)) + i32(u16(c)) + i32(u8(a))",
        &from_i64,
        0x5a5ai32,
    )?;
    conversions(gpu, lines, "f64(a) + f32(b) * 2.0 - c", &from_u64, f64::NAN)?;
    // 64-bit shifts on the general interpreter (two math classes), amounts of every range.
    conversions(
        gpu,
        lines,
        "f64(bitwise_left_shift(a, b)) + f64(bitwise_right_shift(c, b)) * 0.5",
        &from_i64,
        f64::NAN,
    )?;
    conversions(
        gpu,
        lines,
        "f64(bitwise_left_shift(a, b)) - f64(bitwise_right_shift(c, b))",
        &from_u64,
        f64::NAN,
    )?;
    conversions(
        gpu,
        lines,
        "i32(a) + i32(u8(b)) + i32(i64(c)) + i32(bool(a))",
        &from_u64,
        0x5a5ai32,
    )?;
    conversions(
        gpu,
        lines,
        "a * 0.75 + b / c + where(gt(a, b), f32(c) * 0.5, sqrt(abs(f32(a))))",
        &from_i32,
        f32::NAN,
    )?;
    conversions(
        gpu,
        lines,
        "u8(a) + u8(bool(b)) * 3 + u8(i64(c) * 1000)",
        &from_i32,
        0x5au8,
    )?;
    conversions(
        gpu,
        lines,
        "a * 1.5 - b / c + f32(i8(a))",
        &from_u8,
        f32::NAN,
    )?;
    conversions(
        gpu,
        lines,
        "i64(a) * 3 + i64(u32(b)) + i64(i16(c))",
        &from_u8,
        0x5ai64,
    )?;
    conversions(
        gpu,
        lines,
        "logical_or(lt(a, b), bool(c))",
        &from_i16,
        Bool::from(true),
    )?;
    conversions(
        gpu,
        lines,
        "f64(a) / 7 + f64(u16(b)) + f64(logical_not(bool(c)))",
        &from_i16,
        f64::NAN,
    )?;
    // Comparisons and bitwise ops of bools (false < true).
    let bools = layouts_of(rows, cols, &|n, seed| {
        int_values(n, seed, 8, |b| Bool::from(b & 1 == 1))
    })?;
    conversions(
        gpu,
        lines,
        "logical_or(logical_xor(lt(a, b), ge(b, c)), logical_and(gt(a, c), le(c, b)))",
        &bools,
        Bool::from(true),
    )?;
    conversions(
        gpu,
        lines,
        "bitwise_not(bitwise_and(a, bitwise_or(b, bitwise_xor(a, c))))",
        &bools,
        Bool::from(false),
    )?;
    Ok(())
}

/// A CUDA graph capture records tier 1 for an expression compiled before it and the
/// interpreter for one not yet compiled (no compile starts inside a capture, in either
/// tier); both replay to the CPU twin's bits.
pub fn graph_capture(gpu: &Gpu) -> TestResult {
    use strided_apply::cudarc::driver::sys;
    let e = |e: Error| e.to_string();
    let d = |e: strided_apply::cudarc::driver::DriverError| e.to_string();
    let n = 4099usize;
    let a: Vec<f32> = values(n, 21, |v| v as f32);
    let b: Vec<f32> = values(n, 22, |v| v as f32);
    let args = [("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32))];
    // A constant no other test uses: the in-process cache has neither program yet.
    let before_text = "a * b + 1.0625 * minimum(a, b)";
    let during_text = "a * b - 2.0625 * maximum(a, b)";
    let before = Expr::parse(before_text)
        .map_err(e)?
        .compile(&args, None)
        .map_err(e)?
        .with_tier(Tier::Auto);
    let during = Expr::parse(during_text)
        .map_err(e)?
        .compile(&args, None)
        .map_err(e)?
        .with_tier(Tier::Compile);
    let da = DeviceTensor::from_slice(gpu, &a, &[n]).map_err(e)?;
    let db = DeviceTensor::from_slice(gpu, &b, &[n]).map_err(e)?;
    let mut o1 = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(e)?;
    let mut o2 = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(e)?;
    let ins = [DeviceArg::from(&da), DeviceArg::from(&db)];
    // Compiled before the capture (then launched from the capture on the default tier).
    before
        .clone()
        .with_tier(Tier::Compile)
        .run(gpu, &mut o1, &ins, &[])
        .map_err(e)?;
    gpu.synchronize().map_err(e)?;
    let stream = gpu.stream().clone();
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        .map_err(d)?;
    let at = tier1_launches();
    let queued: Result<(), Error> = (|| {
        before.run(gpu, &mut o1, &ins, &[])?;
        during.run(gpu, &mut o2, &ins, &[])
    })();
    let recorded = tier1_launches() - at;
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        .map_err(d)?;
    queued.map_err(|x| format!("while capturing: {x}"))?;
    let graph = graph.ok_or("the capture recorded no graph")?;
    if recorded != 1 {
        return Err(format!(
            "the capture recorded {recorded} compiled launches, not 1"
        ));
    }
    let l = Layout::contiguous(&[n]).map_err(e)?;
    // Outputs cleared (outside the graph): the replay must write them.
    let zero = DeviceTensor::<f32>::zeros(gpu, &[n]).map_err(e)?;
    for o in [&o1, &o2] {
        o.buffer().copy_from(gpu, zero.buffer(), n * 4).map_err(e)?;
    }
    graph.launch().map_err(d)?;
    gpu.synchronize().map_err(e)?;
    for (text, f, o) in [(before_text, &before, &o1), (during_text, &during, &o2)] {
        let mut want = vec![0f32; n];
        f.run_cpu(
            HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), F32, &l),
            &[
                HostTensor::new(bytemuck::cast_slice(&a), F32, &l),
                HostTensor::new(bytemuck::cast_slice(&b), F32, &l),
            ],
            &[],
        )
        .map_err(e)?;
        let got = o.to_vec(gpu).map_err(e)?;
        if let Some(m) = first_mismatch(&got, &want, ops::Tolerance::Exact) {
            return Err(format!("{text} replayed: {m}"));
        }
    }
    Ok(
        "a capture recorded 1 compiled launch and 1 interpreted one; both replay bit for bit"
            .into(),
    )
}

/// Failures: a corrupt cache file is compiled again, an unwritable cache folder only means
/// no cache, PTX the driver refuses is an `ExprCompile` error with the tier forced and a
/// silent fall back to the interpreter otherwise; every result right. Each case on a fresh
/// `Gpu` (a context of its own, so nothing compiled earlier is reused).
pub fn failures(_gpu: &Gpu) -> TestResult {
    let e = |e: Error| e.to_string();
    let n = 1000usize;
    let a: Vec<f32> = values(n, 31, |v| v as f32);
    let b: Vec<f32> = values(n, 32, |v| v as f32);
    let text = "fma(a, b, 3.5) / (abs(b) + 0.75) - maximum(a, b)";
    let args = [("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32))];
    let f = Expr::parse(text)
        .map_err(e)?
        .compile(&args, None)
        .map_err(e)?;
    let l = Layout::contiguous(&[n]).map_err(e)?;
    let mut want = vec![0f32; n];
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), F32, &l),
        &[
            HostTensor::new(bytemuck::cast_slice(&a), F32, &l),
            HostTensor::new(bytemuck::cast_slice(&b), F32, &l),
        ],
        &[],
    )
    .map_err(e)?;
    // On a fresh Gpu with `tier`: the output, or the error.
    let run = |tier: Tier| -> Result<Result<Vec<f32>, Error>, String> {
        let g = strided_apply::open(0).map_err(e)?;
        let da = DeviceTensor::from_slice(&g, &a, &[n]).map_err(e)?;
        let db = DeviceTensor::from_slice(&g, &b, &[n]).map_err(e)?;
        let mut o = DeviceTensor::from_slice(&g, &vec![f32::NAN; n], &[n]).map_err(e)?;
        let ins = [DeviceArg::from(&da), DeviceArg::from(&db)];
        Ok(match f.clone().with_tier(tier).run(&g, &mut o, &ins, &[]) {
            Ok(()) => Ok(o.to_vec(&g).map_err(e)?),
            Err(err) => Err(err),
        })
    };
    let right = |what: &str, got: Result<Vec<f32>, Error>| -> Result<(), String> {
        let got = got.map_err(|x| format!("{what}: {x}"))?;
        match first_mismatch(&got, &want, ops::Tolerance::Exact) {
            Some(m) => Err(format!("{what}: {m}")),
            None => Ok(()),
        }
    };
    let dir = std::env::temp_dir().join(format!("sa-t1-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cubins = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir)
            .map(|r| {
                r.flatten()
                    .map(|x| x.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "cubin"))
                    .collect()
            })
            .unwrap_or_default()
    };
    // The variables are this test's own (the harness runs tests one at a time).
    std::env::set_var("STRIDED_APPLY_EXPR_CACHE", &dir);
    let outcome = (|| -> Result<String, String> {
        right("first compile", run(Tier::Compile)?)?;
        let files = cubins();
        if files.len() != 1 {
            return Err(format!("{} cache files after one compile", files.len()));
        }
        let at = tier1_launches();
        right("from the cache, default tier", run(Tier::Auto)?)?;
        if tier1_launches() == at {
            return Err("a cached cubin did not run compiled on its first call".into());
        }
        std::fs::write(&files[0], b"not a cubin").map_err(|x| x.to_string())?;
        right("after a corrupt cache file", run(Tier::Compile)?)?;
        let len = std::fs::metadata(&files[0])
            .map_err(|x| x.to_string())?
            .len();
        if len <= 11 {
            return Err("the corrupt cache file was not replaced".into());
        }
        let cleared = strided_apply::expr::clear_compiled_cache().map_err(|x| x.to_string())?;
        if cleared != 1 || !cubins().is_empty() {
            return Err(format!("clearing the cache removed {cleared} files"));
        }
        // A cache folder under a regular file cannot be made.
        let blocked = dir.join("file");
        std::fs::write(&blocked, b"x").map_err(|x| x.to_string())?;
        std::env::set_var("STRIDED_APPLY_EXPR_CACHE", blocked.join("sub"));
        right("with an unwritable cache", run(Tier::Compile)?)?;
        std::env::set_var("STRIDED_APPLY_EXPR_CACHE", dir.join("empty"));
        std::env::set_var("STRIDED_APPLY_EXPR_TIER1_FAULT", "ptx");
        match run(Tier::Compile)? {
            Err(Error::ExprCompile { reason }) if reason.contains("PTX") => {}
            other => {
                return Err(format!(
                    "refused PTX, tier forced: {:?}",
                    other.map(|v| v.len())
                ))
            }
        }
        let at = tier1_launches();
        right("refused PTX, default tier", run(Tier::Auto)?)?;
        if tier1_launches() != at {
            return Err("refused PTX still ran compiled".into());
        }
        Ok("a corrupt cache file recompiled, an unwritable cache ignored, refused PTX a typed error (forced) or the interpreter (default); every result bit-identical to the CPU twin".into())
    })();
    std::env::remove_var("STRIDED_APPLY_EXPR_TIER1_FAULT");
    std::env::remove_var("STRIDED_APPLY_EXPR_CACHE");
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}
