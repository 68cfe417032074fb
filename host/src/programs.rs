//! Op ids as expression programs: the run-time dispatch of an op over element types that no
//! kernel crate instantiates (`add` of a `bf16` and an `f64` tensor, `sqrt` of an `i32` one
//! into `f32`, a comparison of `u8` with `f16`) compiles the op's expression for those
//! types and runs it on the expression interpreter (the GPU's tier 0 and the CPU twin).
//! The expression computes as the op's kernels do, in the promoted math type
//! (`torch.result_type`, [`promote_types`](crate::expr::promote_types)), and rounds once to
//! the output's element type.
//!
//! [`OPS`] is the one list: adding an op id here makes it run over every type combination
//! of the expression language. The typed API runs the same programs for the ops that the
//! kernel image leaves out (`kernels!` lines marked `@program`: [`launch`]), and the raw
//! launch that the raw API and run-time dispatch share ([`launch_raw`]) sends such an op to
//! its program, every other op to its kernels.

use crate::error::Error;
use crate::expr::{Arg, Compiled, DeviceArg, Expr, Opcode, Scalar, ScalarKind};
use crate::gpu::Gpu;
use crate::operand::{launch_kernels, RawTensor};
use crate::tensor::DeviceTensor;
use crate::Result;
use cudarc::driver::sys::CUstream;
use gpu_kernels::elem::ElemType;
use gpu_kernels::{Elem, KernelNames, ProgramOf};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::Arc;

/// An op id's expression: over inputs `a`, `b`, `c` (in that order, as the op's operands
/// after the output) and scalars `s0`, `s1` (the op's scalars, in order). Without run-time
/// dispatch only the program families of the typed API read the list (op id, expression).
#[derive(Debug)]
#[cfg_attr(not(feature = "dispatch"), allow(dead_code))]
pub(crate) struct OpProgram {
    pub(crate) op: &'static str,
    pub(crate) inputs: usize,
    pub(crate) scalars: usize,
    /// The scalars' names (PyTorch's argument names; `s0`, `s1` where the op's kernels
    /// name them).
    pub(crate) scalar_names: &'static [&'static str],
    /// The expression (an error only for a list entry whose text does not parse, which the
    /// tests rule out).
    pub(crate) expr: fn() -> Result<Expr>,
}

/// The operand and scalar names of an op's expression.
pub(crate) const INPUTS: [&str; 3] = ["a", "b", "c"];
pub(crate) const SCALARS: [&str; 2] = ["s0", "s1"];

fn a() -> Expr {
    Expr::var("a")
}
fn b() -> Expr {
    Expr::var("b")
}
fn c() -> Expr {
    Expr::var("c")
}
fn s0() -> Expr {
    Expr::var("s0")
}
fn s1() -> Expr {
    Expr::var("s1")
}
fn op(code: Opcode, args: Vec<Expr>) -> Expr {
    Expr::op(code, args)
}

macro_rules! op_programs {
    ($($name:literal ($inputs:literal, $scalars:literal) => $e:expr;)*
     text: $($tname:literal ($tinputs:literal $(; $sname:ident)*) => $text:literal;)*) => {
        /// Every op id that runs as a program where no kernel is instantiated for its types
        /// (the op set of PyTorch's pointwise ops beyond the kernels: every one runs as a
        /// program). Not listed: the in-place updates (`add_assign`, …, `recip_update`: the
        /// output is an input), `fill` and `cast` (instantiated for every element type), the
        /// stencils and the reductions (their own dispatch).
        pub(crate) static OPS: &[OpProgram] = &[
            $(OpProgram {
                op: $name,
                inputs: $inputs,
                scalars: $scalars,
                scalar_names: SCALARS.split_at($scalars).0,
                expr: || Ok($e),
            },)*
            $(OpProgram {
                op: $tname,
                inputs: $tinputs,
                scalars: <[&str]>::len(&[$(stringify!($sname)),*]),
                scalar_names: &[$(stringify!($sname)),*],
                expr: || Expr::parse($text),
            },)*
        ];
    };
}

op_programs! {
    // Elementwise binary ops: `div` truncates integers (and by zero gives 0), as the
    // library's `div`; `min`/`max` propagate NaN.
    "add" (2, 0) => op(Opcode::Add, vec![a(), b()]);
    "sub" (2, 0) => op(Opcode::Sub, vec![a(), b()]);
    "mul" (2, 0) => op(Opcode::Mul, vec![a(), b()]);
    "div" (2, 0) => op(Opcode::Div, vec![a(), b()]);
    "min" (2, 0) => op(Opcode::Min, vec![a(), b()]);
    "max" (2, 0) => op(Opcode::Max, vec![a(), b()]);
    "pow" (2, 0) => op(Opcode::Pow, vec![a(), b()]);
    "eq" (2, 0) => op(Opcode::Eq, vec![a(), b()]);
    "ne" (2, 0) => op(Opcode::Ne, vec![a(), b()]);
    "lt" (2, 0) => op(Opcode::Lt, vec![a(), b()]);
    "le" (2, 0) => op(Opcode::Le, vec![a(), b()]);
    "gt" (2, 0) => op(Opcode::Gt, vec![a(), b()]);
    "ge" (2, 0) => op(Opcode::Ge, vec![a(), b()]);
    // A scalar on the right (`_s`) or on the left (`rsub_s`, `rdiv_s`).
    "eq_s" (1, 1) => op(Opcode::Eq, vec![a(), s0()]);
    "ne_s" (1, 1) => op(Opcode::Ne, vec![a(), s0()]);
    "lt_s" (1, 1) => op(Opcode::Lt, vec![a(), s0()]);
    "le_s" (1, 1) => op(Opcode::Le, vec![a(), s0()]);
    "gt_s" (1, 1) => op(Opcode::Gt, vec![a(), s0()]);
    "ge_s" (1, 1) => op(Opcode::Ge, vec![a(), s0()]);
    "add_s" (1, 1) => op(Opcode::Add, vec![a(), s0()]);
    "sub_s" (1, 1) => op(Opcode::Sub, vec![a(), s0()]);
    "mul_s" (1, 1) => op(Opcode::Mul, vec![a(), s0()]);
    "div_s" (1, 1) => op(Opcode::Div, vec![a(), s0()]);
    "min_s" (1, 1) => op(Opcode::Min, vec![a(), s0()]);
    "max_s" (1, 1) => op(Opcode::Max, vec![a(), s0()]);
    "pow_s" (1, 1) => op(Opcode::Pow, vec![a(), s0()]);
    "rsub_s" (1, 1) => op(Opcode::Sub, vec![s0(), a()]);
    "rdiv_s" (1, 1) => op(Opcode::Div, vec![s0(), a()]);
    // Unary ops.
    "neg" (1, 0) => op(Opcode::Neg, vec![a()]);
    "abs" (1, 0) => op(Opcode::Abs, vec![a()]);
    "relu" (1, 0) => op(Opcode::Relu, vec![a()]);
    "sqrt" (1, 0) => op(Opcode::Sqrt, vec![a()]);
    "rsqrt" (1, 0) => op(Opcode::Rsqrt, vec![a()]);
    "exp" (1, 0) => op(Opcode::Exp, vec![a()]);
    "log" (1, 0) => op(Opcode::Log, vec![a()]);
    "sin" (1, 0) => op(Opcode::Sin, vec![a()]);
    "cos" (1, 0) => op(Opcode::Cos, vec![a()]);
    "tanh" (1, 0) => op(Opcode::Tanh, vec![a()]);
    "sigmoid" (1, 0) => op(Opcode::Sigmoid, vec![a()]);
    "clamp" (1, 2) => op(Opcode::Clamp, vec![a(), s0(), s1()]);
    // Ternary ops: `where` takes the condition first.
    "fma" (3, 0) => op(Opcode::Fma, vec![a(), b(), c()]);
    "where" (3, 0) => op(Opcode::Where, vec![a(), b(), c()]);
    // The fused ops (`gpu_kernels::fused`), written as their kernels compute them.
    "axpy" (2, 1) => op(Opcode::Add, vec![op(Opcode::Mul, vec![s0(), a()]), b()]);
    "axpby" (2, 2) => op(
        Opcode::Add,
        vec![op(Opcode::Mul, vec![s0(), a()]), op(Opcode::Mul, vec![s1(), b()])],
    );
    "bias_relu" (2, 0) => op(Opcode::Relu, vec![op(Opcode::Add, vec![a(), b()])]);
    "silu" (1, 0) => op(Opcode::Mul, vec![a(), op(Opcode::Sigmoid, vec![a()])]);
    "divmul" (2, 2) => op(
        Opcode::Mul,
        vec![op(Opcode::Div, vec![a(), s0()]), op(Opcode::Div, vec![b(), s1()])],
    );
    "lerp" (3, 0) => op(
        Opcode::Add,
        vec![a(), op(Opcode::Mul, vec![c(), op(Opcode::Sub, vec![b(), a()])])],
    );
    // PyTorch's pointwise ops and activations, in the expression language; where PyTorch's
    // CUDA kernel has a formula of its own (the activations, `logaddexp`, `xlogy`), the
    // same formula. Names are PyTorch's; after the input count, the scalars' names (the
    // expression's `s0`, `s1`, in order). `a / 1` is `a` as a float (integers to `f32`):
    // PyTorch converts before `logit`'s and `softsign`'s arithmetic. `gelu_tanh` is
    // PyTorch's `0.5 * x * (1 + tanh(β * (x + κ * x³)))` with the operands of its
    // additions and products swapped (the same roundings), so that its stack stays within
    // the fast path's four slots (as written it needs seven, and ran 100× slower on the
    // general interpreter).
    text:
    // `cast` over the types without a cast kernel (the 8-bit floats, `i8`, `i16`, `u16`,
    // `u64`): the store rounds once to the output type.
    "cast" (1) => "a";
    "positive" (1) => "a";
    "sign" (1) => "sign(a)";
    "sgn" (1) => "sign(a)";
    "signbit" (1) => "signbit(a)";
    "reciprocal" (1) => "1 / a";
    "square" (1) => "a * a";
    "exp2" (1) => "exp2(a)";
    "expm1" (1) => "expm1(a)";
    "log2" (1) => "log2(a)";
    "log10" (1) => "log10(a)";
    "log1p" (1) => "log1p(a)";
    "tan" (1) => "tan(a)";
    "asin" (1) => "asin(a)";
    "acos" (1) => "acos(a)";
    "atan" (1) => "atan(a)";
    "sinh" (1) => "sinh(a)";
    "cosh" (1) => "cosh(a)";
    "asinh" (1) => "asinh(a)";
    "acosh" (1) => "acosh(a)";
    "atanh" (1) => "atanh(a)";
    "erf" (1) => "erf(a)";
    "erfc" (1) => "erfc(a)";
    "erfinv" (1) => "erfinv(a)";
    "lgamma" (1) => "lgamma(a)";
    "floor" (1) => "floor(a)";
    "ceil" (1) => "ceil(a)";
    "round" (1) => "round(a)";
    "trunc" (1) => "trunc(a)";
    "frac" (1) => "a - trunc(a)";
    "isnan" (1) => "isnan(a)";
    "isinf" (1) => "isinf(a)";
    "isfinite" (1) => "isfinite(a)";
    "isposinf" (1) => "isposinf(a)";
    "isneginf" (1) => "isneginf(a)";
    "logical_not" (1) => "logical_not(a)";
    "bitwise_not" (1) => "bitwise_not(a)";
    "logit" (1) => "log((a / 1) / (1 - a / 1))";
    "deg2rad" (1) => "a * 0.017453292519943295";
    "rad2deg" (1) => "a * 57.29577951308232";
    "sinc" (1) => "where(a == 0, 1.0, sin(a * 3.141592653589793) / (a * 3.141592653589793))";
    "relu6" (1) => "clamp(a, 0, 6)";
    "elu" (1; alpha) => "where(a > 0, a, s0 * expm1(a))";
    "selu" (1) => "where(a > 0, a * 1.0507009873554805, expm1(a) * 1.7580993408473766)";
    "celu" (1; alpha) => "where(a > 0, a, expm1(a * (1 / s0)) * s0)";
    "leaky_relu" (1; negative_slope) => "where(a > 0, a, a * s0)";
    "gelu" (1) => "a * 0.5 * (1 + erf(a * 0.7071067811865476))";
    "gelu_tanh" (1) => "(tanh((a * a * a * 0.044715 + a) * 0.7978845608028654) + 1) * (a * 0.5)";
    "mish" (1) => "a * tanh(log1p(exp(a)))";
    "softplus" (1; beta; threshold) => "where(a * s0 > s1, a, log1p(exp(a * s0)) / s0)";
    "softsign" (1) => "(a / 1) / (1 + abs(a / 1))";
    "hardtanh" (1; min_val; max_val) => "clamp(a, s0, s1)";
    "hardsigmoid" (1) => "clamp(a + 3, 0, 6) * 0.16666666666666666";
    "hardswish" (1) => "a * clamp(a + 3, 0, 6) * 0.16666666666666666";
    "logsigmoid" (1) => "minimum(a, 0) - log1p(exp(-abs(a)))";
    "tanhshrink" (1) => "a - tanh(a)";
    "threshold" (1; threshold; value) => "where(a <= s0, s1, a)";
    "true_divide" (2) => "a / b";
    "floor_divide" (2) => "floor_divide(a, b)";
    "fmod" (2) => "fmod(a, b)";
    "remainder" (2) => "remainder(a, b)";
    "float_power" (2) => "pow(f64(a), f64(b))";
    "atan2" (2) => "atan2(a, b)";
    "hypot" (2) => "hypot(a, b)";
    "copysign" (2) => "copysign(a, b)";
    "nextafter" (2) => "nextafter(a, b)";
    "logaddexp" (2) => "where(isinf(a) & (a == b), a, maximum(a, b) + log1p(exp(-abs(a - b))))";
    "logaddexp2" (2) => "where(isinf(a) & (a == b), a, maximum(a, b) + log1p(exp2(-abs(a - b))) * 1.4426950408889634)";
    "xlogy" (2) => "where(isnan(b), b, where(a == 0, 0, a * log(b)))";
    "maximum" (2) => "maximum(a, b)";
    "minimum" (2) => "minimum(a, b)";
    "fmax" (2) => "fmax(a, b)";
    "fmin" (2) => "fmin(a, b)";
    "logical_and" (2) => "logical_and(a, b)";
    "logical_or" (2) => "logical_or(a, b)";
    "logical_xor" (2) => "logical_xor(a, b)";
    "bitwise_and" (2) => "bitwise_and(a, b)";
    "bitwise_or" (2) => "bitwise_or(a, b)";
    "bitwise_xor" (2) => "bitwise_xor(a, b)";
    "bitwise_left_shift" (2) => "bitwise_left_shift(a, b)";
    "bitwise_right_shift" (2) => "bitwise_right_shift(a, b)";
    "ldexp" (2) => "a * pow(2.0, b)";
    "addcmul" (3; value) => "a + s0 * b * c";
    "addcdiv" (3; value) => "a + s0 * (b / c)";
    "clamp_tensor" (3) => "clamp(a, b, c)";
}

/// `op`'s program entry, if it has one.
pub(crate) fn find(op: &str) -> Option<&'static OpProgram> {
    OPS.iter().find(|p| p.op == op)
}

/// The kind a scalar binds as: a Python-like number of its own kind (weak in promotion).
pub(crate) fn scalar_kind(s: &crate::expr::Scalar) -> ScalarKind {
    use crate::expr::Scalar;
    match s {
        Scalar::F64(_) => ScalarKind::Float,
        Scalar::I64(_) | Scalar::U64(_) => ScalarKind::Int,
        Scalar::Bool(_) => ScalarKind::Bool,
    }
}

/// The arguments to compile an op's expression with: its inputs as tensors of `inputs`'
/// types, its scalars of the given values' kinds.
pub(crate) fn args(
    inputs: &[ElemType],
    scalars: &[crate::expr::Scalar],
) -> Vec<(&'static str, Arg)> {
    let tensors = INPUTS
        .iter()
        .zip(inputs)
        .map(|(&n, &t)| (n, Arg::Tensor(t)));
    let scalars = SCALARS
        .iter()
        .zip(scalars)
        .map(|(&n, s)| (n, Arg::Scalar(scalar_kind(s))));
    tensors.chain(scalars).collect()
}

/// A compiled op: the op id, the output's and inputs' element type codes (0: none, else the
/// type's discriminant + 1) and the scalars' kinds.
type CacheKey = (&'static str, [u8; 4], [u8; 2]);

/// Entries kept per thread before the cache starts over.
const CACHE_ENTRIES: usize = 256;

thread_local! {
    /// This thread's compiled op programs: a framework calls the same op over the same types
    /// again and again, and compiling costs about 2 µs (`DynOp::new` of an instantiated op
    /// about 0.02).
    static CACHE: RefCell<rustc_hash::FxHashMap<CacheKey, Arc<Compiled>>> =
        RefCell::new(Default::default());
}

/// `p`'s expression compiled for `inputs` (output `out`, or its own type) and scalars of
/// the kinds of `scalars`, from this thread's cache when it was compiled before; a typed
/// error when `scalars` is not the op's count.
pub(crate) fn compiled(
    p: &'static OpProgram,
    inputs: &[ElemType],
    out: Option<ElemType>,
    scalars: &[crate::expr::Scalar],
) -> Result<Arc<Compiled>> {
    if scalars.len() != p.scalars {
        let names: Vec<&str> = inputs.iter().map(|t| t.name()).collect();
        return Err(Error::BadScalars {
            op: p.op,
            types: format!("({})", names.join(", ")),
            expected: format!("{} scalar(s)", p.scalars),
            got: format!("{scalars:?}"),
        });
    }
    let mut types = [0u8; 4];
    types[0] = out.map_or(0, |t| t as u8 + 1);
    for (k, t) in types[1..].iter_mut().zip(inputs) {
        *k = *t as u8 + 1;
    }
    let mut kinds = [0u8; 2];
    for (k, s) in kinds.iter_mut().zip(scalars) {
        *k = scalar_kind(s) as u8 + 1;
    }
    let key = (p.op, types, kinds);
    if let Some(c) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(c);
    }
    let c = Arc::new((p.expr)()?.compile(&args(inputs, scalars), out)?);
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, c.clone());
    });
    Ok(c)
}

/// The program of an op without kernels (`ProgramOf`: a `kernels!` line marked `@program`),
/// compiled for its types and the kinds of the op value's `scalars`, from this thread's
/// cache, and the operand each of its inputs reads (`order[i]`: input `i` of the program, in
/// its order of first appearance, is operand `1 + order[i]`; `lerp`'s `a + c * (b - a)`
/// reads `a`, `c`, `b`).
pub(crate) fn of(prog: &ProgramOf, scalars: &[Scalar]) -> Result<(Arc<Compiled>, [usize; 3])> {
    // `where_` is the kernels' op id for `where` (a keyword in Rust).
    let entry = find(prog.op).or_else(|| prog.op.strip_suffix('_').and_then(find));
    let (Some(entry), Some((&out, inputs))) = (entry, prog.types.split_first()) else {
        return Err(Error::UnknownOp {
            op: prog.op.to_string(),
            known: OPS.iter().map(|p| p.op).collect::<Vec<_>>().join(", "),
        });
    };
    let c = compiled(entry, inputs, Some(out), scalars)?;
    let bad = || Error::InputCount {
        op: entry.op,
        expected: inputs.len(),
        got: c.inputs().len(),
    };
    if c.inputs().len() != inputs.len() {
        return Err(bad());
    }
    let mut order = [0usize; 3];
    let mut seen = [false; 3];
    for (i, name) in c.inputs().iter().enumerate() {
        match INPUTS[..inputs.len()].iter().position(|m| m == name) {
            Some(k) if i < 3 && !seen[k] => {
                order[i] = k;
                seen[k] = true;
            }
            _ => return Err(bad()),
        }
    }
    Ok((c, order))
}

/// Scalars under the program's names (`s0`, `s1`), in order.
pub(crate) fn named(scalars: &[Scalar]) -> Vec<(&'static str, Scalar)> {
    SCALARS
        .iter()
        .copied()
        .zip(scalars.iter().copied())
        .collect()
}

/// Runs the program of an op without kernels over the typed API's tensors on the gpu's
/// stream, with the op value's `scalars`: what `api::apply1`…`apply4` do for such an op (the
/// expression's own checks, hoisting and tier, as `Compiled::run`).
pub(crate) fn run<O: Elem>(
    gpu: &Gpu,
    prog: &ProgramOf,
    scalars: &[Scalar],
    out: &mut DeviceTensor<O>,
    inputs: &[DeviceArg<'_>],
) -> Result<()> {
    let (c, order) = of(prog, scalars)?;
    let ordered: Vec<DeviceArg<'_>> = order[..inputs.len()].iter().map(|&k| inputs[k]).collect();
    c.run(gpu, out, &ordered, &named(scalars))
}

/// Launches the program of an op without kernels over raw tensors (output first) on
/// `stream`, with the op value's `scalars`: what the raw API and run-time dispatch do for
/// such an op (as `Compiled::launch`).
///
/// # Safety
/// As [`raw::apply3`](crate::raw::apply3): every tensor's memory is one live allocation of
/// this `gpu`'s context holding values of its element type, kept until the work queued on
/// `stream` completes; `stream` is a live stream of that context.
pub(crate) unsafe fn launch(
    gpu: &Gpu,
    stream: CUstream,
    prog: &ProgramOf,
    scalars: &[Scalar],
    t: &[RawTensor<'_>],
) -> Result<()> {
    let (c, order) = of(prog, scalars)?;
    let Some((&out, inputs)) = t.split_first() else {
        return Err(Error::InputCount {
            op: prog.op,
            expected: prog.types.len().saturating_sub(1),
            got: 0,
        });
    };
    let ordered: Vec<RawTensor<'_>> = order[..inputs.len()].iter().map(|&k| inputs[k]).collect();
    // SAFETY: forwarded contract; the same tensors in the program's input order.
    unsafe { c.launch(gpu, Some(stream), out, &ordered, &named(scalars)) }
}

/// The raw launch shared by the typed raw API and run-time dispatch: checks every tensor
/// against its element type in `types` (output first), plans, checks the aliasing rules and
/// launches the kernels `names` with the kernel argument `op` (an op without kernels: its
/// program, with the op value's `scalars`).
///
/// # Safety
/// The raw API's conditions 1–3 for every tensor and `stream`; `op` points to the `OpArg`
/// of the op whose kernels `names` names, for the element types `types`.
pub(crate) unsafe fn launch_raw<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    names: &KernelNames,
    op: *const c_void,
    scalars: &[Scalar],
    types: &[ElemType],
    t: [RawTensor<'_>; N],
) -> Result<()> {
    if let Some(prog) = &names.program {
        // An op without kernels of its own: its expression program, checked and launched
        // as an expression (the same rules).
        // SAFETY: forwarded contract.
        return unsafe { launch(gpu, stream, prog, scalars, &t) };
    }
    // SAFETY: forwarded contract.
    unsafe { launch_kernels(gpu, stream, names, op, types, t) }
}
