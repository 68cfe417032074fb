//! Normalisation programs (`expr::Norm`): softmax, log-softmax, logsumexp, RMS and layer
//! norm, and a user's scaled, masked softmax, over rows of 1 to 140 000 elements (one and
//! several groups), normalised along a unit-stride axis, a strided one, a reversed one and
//! a middle one, misaligned, in `f32`, `bf16`, `f16` and `f64`: the fused row kernel (read
//! once into registers and looping), the composition on tier 1 and on the interpreter, and
//! the CPU twin give the same bits (within [`TWIN_ULPS`] for the programs that call `exp`
//! or `log`, which are not bit-identical across GPU and CPU: `docs/numerics.md`), and the
//! fused kernel is what ran.

use crate::harness::{knob, TestResult};
use strided_apply::expr::{tier1_launches, Arg, DeviceArg, HostTensor, HostTensorMut, Norm, Tier};
use strided_apply::gpu_kernels::{bf16, f16};
use strided_apply::verify::{first_mismatch, Distance};
use strided_apply::{ops, DeviceTensor, Elem, Error, Gpu, Layout};

/// The programs: text, the tensors it reads besides `a` (each a row broadcast over the
/// kept axes), whether it takes the scalar `s`.
const PROGRAMS: [(&str, &[&str], bool); 6] = [
    ("m = amax(a); e = exp(a - m); e / sum(e)", &[], false),
    ("m = amax(a); d = a - m; d - log(sum(exp(d)))", &[], false),
    ("m = amax(a); m + log(sum(exp(a - m)))", &[], false),
    ("a * rsqrt(mean(a * a) + 1e-6) * w", &["w"], false),
    (
        "mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + 1e-5) * w + b",
        &["w", "b"],
        false,
    ),
    (
        "x = a * s + mask; m = amax(x); e = exp(x - m); e / sum(e)",
        &["mask"],
        true,
    ),
];

/// The GPU's distance from the CPU twin, in ulps of the output type, for programs that
/// call `exp` or `log` (each within 1 ulp of an f64 reference on each side, at most 1 ulp
/// apart; a softmax's quotient of them a few).
const TWIN_ULPS: u32 = 4;

/// Whether program `prog` of [`PROGRAMS`] calls `exp` or `log`.
fn inexact(prog: usize) -> bool {
    let text = PROGRAMS[prog].0;
    text.contains("exp(") || text.contains("log(")
}

/// Where the normalised axis is: the input's view of `rows × n` elements, the full shape
/// and the axis.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// `[rows, n]`, axis 1.
    Rows,
    /// `[n, rows]`, axis 0 (row stride `rows`).
    Cols,
    /// `[rows, n]` with axis 1 reversed.
    Reversed,
    /// `[2, n, rows / 2]`, axis 1.
    Middle,
    /// `[rows, n]` one element into its buffer.
    Misaligned,
}

impl Place {
    fn shape(self, rows: usize, n: usize) -> (Vec<usize>, usize) {
        match self {
            Place::Rows | Place::Reversed | Place::Misaligned => (vec![rows, n], 1),
            Place::Cols => (vec![n, rows], 0),
            Place::Middle => (vec![2, n, rows / 2], 1),
        }
    }
    /// The input's buffer length and view.
    fn view(self, rows: usize, n: usize) -> Result<(usize, Layout), Error> {
        let (shape, axis) = self.shape(rows, n);
        let dense = Layout::contiguous(&shape)?;
        Ok(match self {
            Place::Reversed => (dense.numel(), dense.flip(axis)?),
            Place::Misaligned => {
                let st = dense.strides().to_vec();
                (dense.numel() + 1, Layout::new(&shape, &st, 1)?)
            }
            _ => (dense.numel(), dense),
        })
    }
}

/// Values in [-3, 3], some of them repeated (ties for `amax`), from `seed`.
fn values<T: Elem>(n: usize, seed: u64, from: fn(f64) -> T) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = if i % 31 == 3 {
                1.5
            } else {
                (x >> 11) as f64 / (1u64 << 53) as f64 * 6.0 - 3.0
            };
            from(v)
        })
        .collect()
}

/// One program over one place and row length, every GPU form against the CPU twin.
#[allow(clippy::too_many_arguments)]
fn case<T: Elem + Distance>(
    gpu: &Gpu,
    prog: usize,
    place: Place,
    rows: usize,
    n: usize,
    from: fn(f64) -> T,
    poison: T,
    interpret: bool,
) -> TestResult {
    let (text, extra, scalar) = PROGRAMS[prog];
    let what = format!("{text} ({}) over {place:?} {rows}×{n}", T::NAME);
    let e = |e: Error| format!("{what}: {e}");
    let mut args: Vec<(&str, Arg)> = vec![("a", Arg::Tensor(T::TYPE))];
    args.extend(extra.iter().map(|&x| (x, Arg::Tensor(T::TYPE))));
    if scalar {
        args.push(("s", Arg::Scalar(strided_apply::expr::ScalarKind::Float)));
    }
    let f = Norm::parse(text)
        .map_err(e)?
        .compile(&args, None)
        .map_err(e)?;
    let scalars: Vec<(&str, strided_apply::expr::Scalar)> = if scalar {
        vec![("s", 0.75.into())]
    } else {
        vec![]
    };
    let (full, axis) = place.shape(rows, n);
    let (len, la) = place.view(rows, n).map_err(e)?;
    // The row operands: `n` values along the axis, size 1 elsewhere.
    let row_shape: Vec<usize> = (0..full.len())
        .map(|d| if d == axis { n } else { 1 })
        .collect();
    let lrow = Layout::contiguous(&row_shape).map_err(e)?;
    let mut host: Vec<(Vec<T>, Layout)> = Vec::new();
    for name in f.inputs() {
        let seed = name.bytes().map(u64::from).sum::<u64>() + (prog * 1000 + n) as u64;
        if name == "a" {
            host.push((values(len, seed, from), la.clone()));
        } else {
            host.push((values(n, seed, from), lrow.clone()));
        }
    }
    let out_shape: Vec<usize> = if f.is_rowwise() {
        full.clone()
    } else {
        (0..full.len())
            .map(|d| if d == axis { 1 } else { full[d] })
            .collect()
    };
    let lo = Layout::contiguous(&out_shape).map_err(e)?;
    let numel = lo.numel();
    let mut want = vec![poison; numel];
    let hosts: Vec<HostTensor> = host
        .iter()
        .map(|(v, l)| HostTensor::new(bytemuck::cast_slice(v), T::TYPE, l))
        .collect();
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), T::TYPE, &lo),
        &hosts,
        &scalars,
        &[axis],
    )
    .map_err(e)?;
    let dev = host
        .iter()
        .map(|(v, l)| DeviceTensor::from_slice(gpu, v, &[v.len()])?.with_layout(l.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(e)?;
    let dargs: Vec<DeviceArg> = dev.iter().map(DeviceArg::from).collect();
    let mut forms = vec![
        ("fused, read once", f.clone().with_tier(Tier::Compile), true),
        (
            "fused, rereading",
            f.clone().with_tier(Tier::Compile).with_cached_rows(false),
            true,
        ),
        (
            "composed, tier 1",
            f.clone().with_tier(Tier::Compile).with_fused(false),
            false,
        ),
    ];
    if interpret {
        forms.push((
            "composed, interpreter",
            f.clone().with_tier(Tier::Interpret),
            false,
        ));
    }
    for (form, g, fused) in forms {
        let mut o = DeviceTensor::from_slice(gpu, &vec![poison; numel], &out_shape).map_err(e)?;
        let before = tier1_launches();
        g.run(gpu, &mut o, &dargs, &scalars, &[axis]).map_err(e)?;
        let launched = tier1_launches() - before;
        if fused && launched != 1 {
            return Err(format!(
                "{what}, {form}: {launched} compiled launches, not the one row kernel"
            ));
        }
        let got = o.buffer_to_vec(gpu).map_err(e)?;
        let tol = if inexact(prog) {
            ops::Tolerance::Ulp(TWIN_ULPS)
        } else {
            ops::Tolerance::Exact
        };
        if let Some(m) = first_mismatch(&got, &want, tol) {
            return Err(format!("{what}, {form}, against the CPU twin: {m}"));
        }
    }
    Ok(what)
}

/// Every program, place, row length and type: the GPU's forms give the CPU twin's bits.
pub fn programs_match_cpu_twin(gpu: &Gpu) -> TestResult {
    let lens: Vec<usize> = vec![1, 3, 256, 1000, 4096, 5003, 16384, 140_000];
    let cap = knob("STRIDED_APPLY_NORM_ELEMS", 1 << 19);
    let mut cases = 0;
    for prog in 0..PROGRAMS.len() {
        for &n in &lens {
            let rows = (cap / n).clamp(2, 24) & !1;
            let places: &[Place] = if [3, 1000, 5003].contains(&n) {
                &[
                    Place::Rows,
                    Place::Cols,
                    Place::Reversed,
                    Place::Middle,
                    Place::Misaligned,
                ]
            } else {
                &[Place::Rows]
            };
            for &place in places {
                let interpret = n == 1000;
                case(gpu, prog, place, rows, n, |v| v as f32, f32::NAN, interpret)?;
                case(
                    gpu,
                    prog,
                    place,
                    rows,
                    n,
                    bf16::from_f64,
                    bf16::from_f64(f64::NAN),
                    false,
                )?;
                cases += 2;
                if n <= 5003 {
                    case(gpu, prog, place, rows, n, |v| v, f64::NAN, false)?;
                    case(
                        gpu,
                        prog,
                        place,
                        rows,
                        n,
                        f16::from_f64,
                        f16::from_f64(f64::NAN),
                        false,
                    )?;
                    cases += 2;
                }
            }
        }
    }
    let first = background_compile_then_fused(gpu)?;
    Ok(format!(
        "{cases} program × place × length × type cases, four GPU forms each, the CPU twin's \
         bits (exp and log within {TWIN_ULPS} ulp); {first}"
    ))
}

/// The automatic tier: a new program's first call runs while its row kernel compiles on
/// a thread of its own (the composition: the CPU twin's bits), and once `wait_compiles`
/// returns, a call is the one row kernel, with the same bits.
fn background_compile_then_fused(gpu: &Gpu) -> Result<String, String> {
    let e = |e: Error| e.to_string();
    // A program no other case compiles (its row kernel is new to this process).
    let f = Norm::parse("mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + 0.25) - 3")
        .and_then(|p| p.compile(&[("a", Arg::Tensor(strided_apply::ElemType::F32))], None))
        .map_err(e)?
        .with_tier(Tier::Auto);
    let (rows, n) = (6usize, 777usize);
    let host: Vec<f32> = (0..rows * n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    let l = Layout::contiguous(&[rows, n]).map_err(e)?;
    let mut want = vec![0f32; rows * n];
    f.run_cpu(
        HostTensorMut::new(
            bytemuck::cast_slice_mut(&mut want),
            strided_apply::ElemType::F32,
            &l,
        ),
        &[HostTensor::new(
            bytemuck::cast_slice(&host),
            strided_apply::ElemType::F32,
            &l,
        )],
        &[],
        &[1],
    )
    .map_err(e)?;
    let a = DeviceTensor::from_slice(gpu, &host, &[rows, n]).map_err(e)?;
    let ins = [DeviceArg::from(&a)];
    let mut launched = Vec::new();
    for call in ["first call", "after wait_compiles"] {
        if call != "first call" {
            strided_apply::expr::wait_compiles();
        }
        let mut o =
            DeviceTensor::from_slice(gpu, &vec![f32::NAN; rows * n], &[rows, n]).map_err(e)?;
        let before = tier1_launches();
        f.run(gpu, &mut o, &ins, &[], &[1]).map_err(e)?;
        launched.push(tier1_launches() - before);
        let got = o.buffer_to_vec(gpu).map_err(e)?;
        if let Some(m) = first_mismatch(&got, &want, ops::Tolerance::Exact) {
            return Err(format!("automatic tier, {call}, against the CPU twin: {m}"));
        }
    }
    if launched[1] != 1 {
        return Err(format!(
            "automatic tier: after wait_compiles a call launched {} compiled kernels, not the one row kernel",
            launched[1]
        ));
    }
    Ok(format!(
        "automatic tier: first call {} compiled launch(es) while the row kernel compiled, then the row kernel",
        launched[0]
    ))
}

/// Bad calls are typed errors and launch nothing: axes out of range or named twice, an
/// output of the wrong shape or type, a wrong tensor count.
pub fn bad_calls_are_typed_errors(gpu: &Gpu) -> TestResult {
    let f = Norm::parse(PROGRAMS[0].0)
        .and_then(|p| p.compile(&[("a", Arg::Tensor(strided_apply::ElemType::F32))], None))
        .map_err(|e| e.to_string())?;
    let a = DeviceTensor::from_slice(gpu, &[1.0f32; 6], &[2, 3]).map_err(|e| e.to_string())?;
    let poison = [7.0f32; 6];
    let mut o = DeviceTensor::from_slice(gpu, &poison, &[2, 3]).map_err(|e| e.to_string())?;
    let ins = [DeviceArg::from(&a)];
    let mut seen = Vec::new();
    for axes in [&[2usize][..], &[1, 1], &[]] {
        match f.run(gpu, &mut o, &ins, &[], axes) {
            Err(Error::InvalidView {
                operand: "axes", ..
            }) => seen.push(format!("{axes:?}")),
            r => return Err(format!("axes {axes:?}: {r:?}")),
        }
    }
    let mut small =
        DeviceTensor::from_slice(gpu, &[0.0f32; 2], &[2, 1]).map_err(|e| e.to_string())?;
    if !matches!(
        f.run(gpu, &mut small, &ins, &[], &[1]),
        Err(Error::Broadcast { .. })
    ) {
        return Err("an output of the reduced shape was taken for a rowwise program".into());
    }
    let mut wrong =
        DeviceTensor::from_slice(gpu, &[0.0f64; 6], &[2, 3]).map_err(|e| e.to_string())?;
    if !matches!(
        f.run(gpu, &mut wrong, &ins, &[], &[1]),
        Err(Error::TypeMismatch { .. })
    ) {
        return Err("an f64 output was taken for an f32 program".into());
    }
    if !matches!(
        f.run(gpu, &mut o, &[], &[], &[1]),
        Err(Error::ExprBind { .. })
    ) {
        return Err("a call without its tensor was taken".into());
    }
    if o.to_vec(gpu).map_err(|e| e.to_string())? != poison {
        return Err("a refused call wrote the output".into());
    }
    Ok(format!(
        "axes {} refused, shapes, types and counts refused, output untouched",
        seen.join(" ")
    ))
}
