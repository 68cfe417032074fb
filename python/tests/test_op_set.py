"""The op set (the op ids of ``host/src/dispatch/programs.rs`` after ``text:``, which run as
expression programs) and the new element types, compared with torch: every op id over
every element type torch defines it for and four layout classes (contiguous, transposed,
a broadcast row ``[1, n]`` against ``[m, n]``, sliced with a step ``x[:, ::2]``), on the
CPU (the CPU twin) and on CUDA (the GPU's interpreter kernels); the integer types
``int8 int16 uint16 uint64`` wrapping as torch's; ``float8_e4m3fn``/``float8_e5m2``
conversions bit for bit; mixed-type promotion and the errors of types an op does not take.

The CUDA half skips (by name: ``[cuda-...]``) where ``torch.cuda.is_available()`` is
false; the CPU half runs anywhere torch is installed.  An op × dtype case skips (naming
torch's message) only where torch itself refuses the op for that dtype ("not implemented
for 'UInt16'"); where torch computes a result, the library must compute the same.

How each op is compared:

* Exact ops (``positive sign sgn signbit reciprocal square floor ceil round trunc frac
  isnan isinf isfinite isposinf isneginf logical_not bitwise_not relu6 leaky_relu hardtanh
  threshold true_divide floor_divide fmod remainder copysign nextafter maximum minimum fmax
  fmin logical_* bitwise_* bitwise_*_shift clamp_tensor``, and ``addcmul`` of integers):
  torch's result from the same operands, bit for bit (NaN matches NaN whatever its
  payload), same dtype.  ``reciprocal``, ``true_divide``, ``square`` and ``leaky_relu``
  (slope 0.125) are one correctly rounded IEEE operation in the op math type on both
  sides, so they are exact too.
* Inexact ops (the transcendental functions and the activations built on them, and
  ``deg2rad rad2deg ldexp addcmul addcdiv``): torch computes the op in float64 from the
  same operands (an integer operand first converted to the op's float type, as both
  sides compute), the result rounded to the output dtype is the reference, and the
  library must be within ``tol`` units of ``eps(dtype) * max(|ref|, 1)`` of it (eps: the
  dtype's machine epsilon, 2^-23 for float32; this is at least one ulp of ``ref``, so a
  bound of N units admits every result within N ulp, and below 1 it is an absolute
  bound: functions whose result cancels to near zero, ``gelu(-4)``, ``tanhshrink(1e-3)``,
  are held to the precision of their operands).  NaN must match NaN, an infinity the same
  infinity.  Bounds (``Spec.tol``): 4 for the one-function ops (libdevice's functions are
  within 1 to 3 ulp, the CPU twin's float32 ones within 1: they compute in float64 and
  round once), 6 for ``tan``/``acosh`` (libdevice's ``tanf``/``acoshf``: 4 ulp), 2 for
  ``deg2rad``/``rad2deg``/``ldexp`` (one multiplication by a rounded constant), 8 for
  ``erfc lgamma`` (libdevice: ``erfc`` 5 ulp in float64, ``lgammaf`` 6 ulp) and for the
  activations written as several rounded steps in the op math type (``gelu gelu_tanh
  mish softplus elu celu selu logsigmoid tanhshrink hardswish hardsigmoid softsign logit
  sinc logaddexp logaddexp2 xlogy``: each step rounds, and ``1 + erf(x)`` /
  ``1 + tanh(u)`` cancel for negative x, where the function's own error of a few ulp of 1
  becomes a few units of the result's bound), 4 for ``addcmul``/``addcdiv`` of floats,
  whose data are positive (three roundings, no cancellation).  A ``float16``/``bfloat16``
  result is held to 1 unit whatever the op: it is the float32 value (a few float32 ulp
  from the exact one) rounded once, so at most one 16-bit ulp from the reference.

Where the library and torch legitimately differ, the data avoid it (or the comparison
allows it); each such place:

* Integer ``floor_divide``, ``fmod``, ``remainder`` by zero give 0 in the library (torch
  raises on the CPU, gives garbage on CUDA), and ``MIN // -1`` wraps: integer divisors are
  never zero and dividends never ``MIN``.
* float -> int casts saturate, NaN -> 0 (torch: undefined): no op here casts floats to
  integers.
* Transcendental functions are libdevice's on the GPU and Rust's ``std``/``libm`` (f32
  through f64, rounded once) on the CPU, not torch's (SLEEF, glibc): within the bounds
  above, not bit-identical.  ``float_power`` (f64 ``pow``) is compared with torch's own
  float64 result within 4 units.
* Signed zeros of the ops that pick one of two equal operands (``maximum minimum fmax
  fmin relu6 hardtanh clamp_tensor``): the library returns the first operand on ties
  (``maximum(-0.0, 0.0)`` is ``-0.0``), torch's vectorised and scalar paths disagree
  among themselves (as in test_torch.py); these compare -0.0 equal to +0.0.
* 16-bit floats (``float16``, ``bfloat16``) and 8/16-bit integers compute in float32 /
  int32 and round (wrap) once to the output, as torch's op math does.  Except torch's
  CPU ``floor_divide`` of ``float16``/``bfloat16``, which rounds its intermediate steps to
  the 16-bit type (seen: bf16 ``-2.84375 // -0.024658203125`` gives 114, the quotient is
  115.3); its CUDA kernel computes in float32 as the library does, so the reference for
  these two types is torch's float32 result rounded to the type.
* Scalars (``elu``'s alpha, ``softplus``'s beta, ...) are exactly representable in every
  float type; integer dtypes get integer scalars where torch keeps the integer dtype
  (``threshold``, ``hardtanh``, ``addcmul``), as a float scalar promotes an integer
  tensor to float32 in the library (``torch.result_type``).
* Integer operands of float functions convert to float32 first on both sides; the
  reference converts them the same way before going to float64.
* Element-type test: torch 2.x has no kernels for ``add``, ``sub``, ``floor_divide`` of
  ``uint16``/``uint32``/``uint64`` (it raises); there the reference is the same
  computation on int64, wrapped to the type's width (for ``uint64`` ``floor_divide`` the
  operands stay below 2^63).  Where torch has the kernel, torch's own result.
* ``float8_e4m3fn``/``float8_e5m2`` are storage types: the ``cast`` op has no kernel for
  them (its families cover the nine older types; ``sa.cast`` raises ``sa.DtypeError``),
  so conversions run as expressions (``sa.expr("f8e4m3fn(a)")``, ``sa.expr("f32(a)")``);
  arithmetic on them raises ``sa.DtypeError`` (the library's ``Error::ExprType``), as
  torch raises.  The float32 -> float8 test is split into the values that round to a
  finite code (and NaN), and the overflow region (beyond the tie above the largest
  finite value, and the infinities), where float8_e4m3fn's conventions differ between
  torch versions (c10's ``fp8e4m3fn_from_fp32_value`` gave NaN, newer torch saturates to
  ±448): the test asserts the installed torch's.
"""

import re
import zlib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import strided_apply as sa  # noqa: E402
from casecount import count_case  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
NO_CUDA = "no CUDA device: torch.cuda.is_available() is False"
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA)
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]

PROGRAMS_RS = Path(__file__).resolve().parents[2] / "host" / "src" / "dispatch" / "programs.rs"

TD = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "u16": torch.uint16,
    "u32": torch.uint32,
    "u64": torch.uint64,
    "bool": torch.bool,
}
FLOATS = ("f32", "f64", "f16", "bf16")
SIGNED = ("i8", "i16", "i32", "i64")
UNSIGNED = ("u8", "u16", "u32", "u64")
INTS = SIGNED + UNSIGNED
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
# A signed integer type of each width: bit patterns are made and compared through it.
SIGNED_OF_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
EPS = {torch.float32: 2.0**-23, torch.float64: 2.0**-52, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}

M, N = 64, 48
LAYOUTS = ("contiguous", "transposed", "broadcast_row", "step2")


# ----------------------------------------------------------------------------------------
# The op set: each op id's torch function, comparison and data.


# (op, dtype) pairs where the library refuses what torch computes (README's list).
DIFFERENCES = {("square", "bool"): "square of bools is refused (torch gives int64)"}


def _floats_only(f):
    """`f`, raising as torch's activations do for integer and bool tensors."""

    def g(x, *rest):
        if not x.is_floating_point():
            raise RuntimeError(f"not implemented for '{x.dtype}'")
        return f(x, *rest)

    return g


class Spec:
    """How op `id` is compared.

    fn: torch's function of (tensors..., scalars...).  tol: None for exact ops, else the
    bound in units of eps * max(|ref|, 1) (module docstring).  arity: tensor inputs.
    domain: per input, the (low, high) of random float data.  specials: whether float
    data include NaN, ±inf, ±0 (plus `extra` values).  ints: per input, what integer data
    must avoid ("any", "divisor": no zero and no MIN, "dividend": no MIN, "shift": shift
    amounts, "small": small values only).  scalars: (float scalars, integer scalars) or
    None.  zeros_equal: -0.0 equals +0.0 (module docstring).  ties: the second input
    equals the first at some places.  int_exact: integer results are compared exactly
    (addcmul of integers wraps; of floats it is inexact)."""

    def __init__(
        self,
        fn,
        tol=None,
        arity=1,
        domain=None,
        specials=True,
        extra=(),
        ints=None,
        scalars=None,
        zeros_equal=False,
        ties=False,
        int_exact=False,
    ):
        self.fn = fn
        self.arity = arity
        self.tol = tol
        self.domain = domain or [(-8.0, 8.0)] * arity
        self.specials = specials
        self.extra = extra
        self.ints = ints or ["any"] * arity
        self.scalars = scalars
        self.zeros_equal = zeros_equal
        self.ties = ties
        self.int_exact = int_exact


def _t(name):
    return getattr(torch, name)


ONE_FN = 4  # one library function (libdevice: 1-3 ulp; CPU: 1)
WIDE_FN = 6  # one function that libdevice computes within 4 ulp (tanf, acoshf)
COMPOSITE = 8  # several rounded steps, or a function with a larger libdevice bound
SCALED = 2  # one multiplication by a rounded constant

POS = (0.01, 50.0)
UNIT = (-1.0, 1.0)

SPECS = {
    # Unary, exact.
    "positive": Spec(torch.positive),
    "sign": Spec(torch.sign),
    "sgn": Spec(torch.sgn),
    "signbit": Spec(torch.signbit),
    "reciprocal": Spec(torch.reciprocal),
    "square": Spec(torch.square),
    "floor": Spec(torch.floor, domain=[(-100.0, 100.0)]),
    "ceil": Spec(torch.ceil, domain=[(-100.0, 100.0)]),
    "round": Spec(torch.round, domain=[(-20.0, 20.0)], extra=(0.5, 1.5, 2.5, -0.5, -2.5, 1e30)),
    "trunc": Spec(torch.trunc, domain=[(-100.0, 100.0)]),
    "frac": Spec(torch.frac, domain=[(-100.0, 100.0)]),
    "isnan": Spec(torch.isnan),
    "isinf": Spec(torch.isinf),
    "isfinite": Spec(torch.isfinite),
    "isposinf": Spec(torch.isposinf),
    "isneginf": Spec(torch.isneginf),
    "logical_not": Spec(torch.logical_not),
    "bitwise_not": Spec(torch.bitwise_not),
    "relu6": Spec(F.relu6, zeros_equal=True),
    "leaky_relu": Spec(lambda x, s: F.leaky_relu(x, s), scalars=((0.125,), None)),
    "hardtanh": Spec(
        lambda x, lo, hi: F.hardtanh(x, lo, hi), scalars=((-2.0, 3.5), (2, 100)), zeros_equal=True
    ),
    "threshold": Spec(lambda x, th, v: F.threshold(x, th, v), scalars=((0.5, -3.25), (2, 7))),
    # Unary, inexact.
    "exp2": Spec(torch.exp2, ONE_FN, domain=[(-30.0, 30.0)]),
    "expm1": Spec(torch.expm1, ONE_FN),
    "log2": Spec(torch.log2, ONE_FN, domain=[POS]),
    "log10": Spec(torch.log10, ONE_FN, domain=[POS]),
    "log1p": Spec(torch.log1p, ONE_FN, domain=[(-0.99, 20.0)]),
    "tan": Spec(torch.tan, WIDE_FN, domain=[(-1.5, 1.5)]),
    "asin": Spec(torch.asin, ONE_FN, domain=[UNIT], extra=(1.0, -1.0)),
    "acos": Spec(torch.acos, ONE_FN, domain=[UNIT], extra=(1.0, -1.0)),
    "atan": Spec(torch.atan, ONE_FN, domain=[(-20.0, 20.0)]),
    "sinh": Spec(torch.sinh, ONE_FN),
    "cosh": Spec(torch.cosh, ONE_FN),
    "asinh": Spec(torch.asinh, ONE_FN, domain=[(-50.0, 50.0)]),
    "acosh": Spec(torch.acosh, WIDE_FN, domain=[(1.0, 50.0)], extra=(1.0,)),
    "atanh": Spec(torch.atanh, ONE_FN, domain=[(-0.99, 0.99)], extra=(1.0, -1.0, 0.999999, -0.999999)),
    "erf": Spec(torch.erf, ONE_FN, domain=[(-4.0, 4.0)]),
    "erfc": Spec(torch.erfc, COMPOSITE, domain=[(-4.0, 9.0)]),
    "erfinv": Spec(torch.erfinv, ONE_FN, domain=[(-0.999, 0.999)], extra=(1.0, -1.0)),
    "lgamma": Spec(torch.lgamma, COMPOSITE, domain=[(0.05, 30.0)]),
    "logit": Spec(torch.logit, COMPOSITE, domain=[(0.001, 0.999)], extra=(1.0,)),
    "deg2rad": Spec(torch.deg2rad, SCALED, domain=[(-720.0, 720.0)]),
    "rad2deg": Spec(torch.rad2deg, SCALED),
    "sinc": Spec(torch.sinc, COMPOSITE, domain=[(-4.0, 4.0)]),
    "elu": Spec(lambda x, a: F.elu(x, a), COMPOSITE, scalars=((1.5,), None)),
    "selu": Spec(F.selu, COMPOSITE),
    "celu": Spec(lambda x, a: F.celu(x, a), COMPOSITE, scalars=((1.25,), None)),
    "gelu": Spec(F.gelu, COMPOSITE),
    "gelu_tanh": Spec(lambda x: F.gelu(x, approximate="tanh"), COMPOSITE),
    "mish": Spec(F.mish, COMPOSITE),
    "softplus": Spec(lambda x, b, t: F.softplus(x, b, t), COMPOSITE, scalars=((2.0, 10.0), None)),
    "softsign": Spec(F.softsign, COMPOSITE),
    # Not torch's own as the reference: its CUDA kernel multiplies by `1.0f / 6.0f`, a float32
    # constant, for float64 too (hardsigmoid(3) is 1.0000000298 there): the exact formula.
    "hardsigmoid": Spec(_floats_only(lambda x: torch.clamp(x + 3, 0, 6) / 6), COMPOSITE),
    "hardswish": Spec(_floats_only(lambda x: x * torch.clamp(x + 3, 0, 6) / 6), COMPOSITE),
    "logsigmoid": Spec(F.logsigmoid, COMPOSITE),
    "tanhshrink": Spec(F.tanhshrink, COMPOSITE),
    # Binary, exact.
    "true_divide": Spec(torch.true_divide, arity=2),
    "floor_divide": Spec(torch.floor_divide, arity=2, ints=["dividend", "divisor"]),
    "fmod": Spec(torch.fmod, arity=2, ints=["dividend", "divisor"]),
    "remainder": Spec(torch.remainder, arity=2, ints=["dividend", "divisor"]),
    "copysign": Spec(torch.copysign, arity=2),
    "nextafter": Spec(torch.nextafter, arity=2, ties=True),
    "maximum": Spec(torch.maximum, arity=2, zeros_equal=True, ties=True),
    "minimum": Spec(torch.minimum, arity=2, zeros_equal=True, ties=True),
    "fmax": Spec(torch.fmax, arity=2, zeros_equal=True, ties=True),
    "fmin": Spec(torch.fmin, arity=2, zeros_equal=True, ties=True),
    "logical_and": Spec(torch.logical_and, arity=2),
    "logical_or": Spec(torch.logical_or, arity=2),
    "logical_xor": Spec(torch.logical_xor, arity=2),
    "bitwise_and": Spec(torch.bitwise_and, arity=2),
    "bitwise_or": Spec(torch.bitwise_or, arity=2),
    "bitwise_xor": Spec(torch.bitwise_xor, arity=2),
    "bitwise_left_shift": Spec(torch.bitwise_left_shift, arity=2, ints=["any", "shift"]),
    "bitwise_right_shift": Spec(torch.bitwise_right_shift, arity=2, ints=["any", "shift"]),
    # Binary, inexact.
    "float_power": Spec(torch.float_power, ONE_FN, arity=2, domain=[(0.25, 4.0), (-4.0, 4.0)], ints=["small", "small"]),
    "atan2": Spec(torch.atan2, ONE_FN, arity=2),
    "hypot": Spec(torch.hypot, ONE_FN, arity=2),
    "logaddexp": Spec(torch.logaddexp, COMPOSITE, arity=2, ties=True),
    "logaddexp2": Spec(torch.logaddexp2, COMPOSITE, arity=2, ties=True),
    "xlogy": Spec(torch.xlogy, COMPOSITE, arity=2, domain=[(-8.0, 8.0), POS]),
    "ldexp": Spec(torch.ldexp, SCALED, arity=2, domain=[(-8.0, 8.0), (-12.0, 12.0)], ints=["small", "small"]),
    # Ternary.
    "addcmul": Spec(
        lambda a, b, c, v: torch.addcmul(a, b, c, value=v),
        ONE_FN,
        arity=3,
        domain=[(0.5, 2.0)] * 3,
        specials=False,
        ints=["small"] * 3,
        scalars=((0.5,), (3,)),
        int_exact=True,
    ),
    "addcdiv": Spec(
        lambda a, b, c, v: torch.addcdiv(a, b, c, value=v),
        ONE_FN,
        arity=3,
        domain=[(0.5, 2.0)] * 3,
        specials=False,
        ints=["small", "small", "divisor"],
        scalars=((0.5,), (3,)),
    ),
    "clamp_tensor": Spec(lambda a, b, c: torch.clamp(a, b, c), arity=3, zeros_equal=True, ties=True),
}

# ldexp: integer-valued exponents (torch.ldexp's meaning); the float data are rounded.
INTEGRAL_INPUTS = {"ldexp": (1,)}


def program_text_ops():
    """(op id, input count, scalar names) of every entry after `text:` in programs.rs."""
    text = PROGRAMS_RS.read_text()
    section = text.split("\n    text:\n", 1)[1]
    section = section.split("\n}\n", 1)[0]
    pat = re.compile(r'^\s*"(\w+)"\s*\((\d+)((?:\s*;\s*\w+)*)\)\s*=>\s*"', re.M)
    out = []
    for m in pat.finditer(section):
        names = [s.strip() for s in m.group(3).split(";") if s.strip()]
        out.append((m.group(1), int(m.group(2)), names))
    return out


# ----------------------------------------------------------------------------------------
# Data (made on the CPU with a seeded generator, then moved).

SPECIALS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0]


def _rand(shape, g):
    return torch.rand(shape, generator=g, dtype=torch.float64)


def int_bits(values, t):
    """int64 values wrapped to integer type `t` (two's complement), as a tensor of `t`."""
    if t == "i64":
        return values
    if t == "u64":
        return values.view(torch.uint64)
    w = BITS[t]
    v = values & ((1 << w) - 1)
    if t in SIGNED:
        v = torch.where(v >= (1 << (w - 1)), v - (1 << w), v)
        return v.to(TD[t])
    # Unsigned: through the signed type of the width (uint16/uint32 casts are not in every build).
    signed = torch.where(v >= (1 << (w - 1)), v - (1 << w), v).to(SIGNED_OF_WIDTH[w // 8])
    return signed.view(TD[t])


def int_range(t):
    w = BITS[t]
    if t in SIGNED:
        return -(1 << (w - 1)), (1 << (w - 1)) - 1
    return 0, (1 << w) - 1


def gen(spec, op, i, t, shape, g):
    """Data for input `i` of type `t`, on the CPU."""
    if t == "bool":
        return _rand(shape, g) < 0.5
    if t in INTS:
        kind = spec.ints[i]
        lo, hi = int_range(t)
        w = BITS[t]
        if kind == "shift":
            top = w + 2
            v = (_rand(shape, g) * (top + 1)).floor().to(torch.int64)
            if t in SIGNED:
                neg = _rand(shape, g) < 0.1
                v = torch.where(neg, -(_rand(shape, g) * 4 + 1).floor().to(torch.int64), v)
            return int_bits(v, t)
        span = 20
        small = ((_rand(shape, g) * (2 * span + 1)).floor() - span).to(torch.int64)
        if t in UNSIGNED:
            small = small.abs()
        if kind == "small":
            return int_bits(small, t)
        # Extremes as int64 bit patterns of `t` (the unsigned maxima wrap to -1 for uint64).
        hi64 = hi if hi < 2**63 else -1
        extremes = [lo, hi64, lo + 1, hi64 - 1 if hi64 != -1 else -2, 0, 1, (hi // 2) + 1 if hi < 2**63 else -(2**63)]
        if t in SIGNED:
            extremes.append(-1)
        ext = torch.tensor(extremes, dtype=torch.int64)
        pick = _rand(shape, g) < 0.25
        idx = (_rand(shape, g) * len(ext)).long().clamp_max(len(ext) - 1)
        v = torch.where(pick, ext[idx], small)
        if kind in ("divisor", "dividend") and t in SIGNED:
            v = torch.where(v == lo, torch.full_like(v, lo + 1), v)
        if kind == "divisor":
            v = torch.where(v == 0, torch.ones_like(v), v)
        return int_bits(v, t)
    lo, hi = spec.domain[i]
    v = _rand(shape, g) * (hi - lo) + lo
    if i in INTEGRAL_INPUTS.get(op, ()):
        v = v.round()
    if spec.specials:
        vals = torch.tensor(SPECIALS + list(spec.extra), dtype=torch.float64)
        pick = _rand(shape, g) < 0.15
        idx = (_rand(shape, g) * len(vals)).long().clamp_max(len(vals) - 1)
        v = torch.where(pick, vals[idx], v)
    return v.to(TD[t])


def make_inputs(spec, op, t, layout, g, device):
    """The op's inputs in `layout` (made on the CPU, moved, then viewed on the device, so
    the views keep their strides there)."""
    ins = []
    for i in range(spec.arity):
        def make(shape, i=i):
            return gen(spec, op, i, t, shape, g).to(device)

        if layout == "contiguous":
            x = make((M, N))
        elif layout == "transposed":
            x = make((N, M)).t()
        elif layout == "broadcast_row":
            # The last input is a row broadcast along the first axis (a unary op's only one).
            x = make((1, N)) if i == spec.arity - 1 else make((M, N))
        else:
            x = make((M, 2 * N))[:, ::2]
        if layout in ("transposed", "step2"):
            assert not x.is_contiguous(), (layout, x.stride())
        ins.append(x)
    if spec.ties and layout != "broadcast_row":
        # Equal operands at some places (ties of max/min/nextafter/logaddexp, signed
        # zeros), written into the second input in place (its layout kept); unsigned
        # types through signed views (torch has no index_put for them).
        tie = (_rand((M, N), g) < 0.2).to(device)
        a, b = ins[0], ins[1]
        if t in UNSIGNED:
            s = SIGNED_OF_WIDTH[a.element_size()]
            a, b = a.view(s), b.view(s)
        b[tie] = a[tie]
    return ins


def scalars_for(spec, t):
    if spec.scalars is None:
        return ()
    floats, ints = spec.scalars
    if t in INTS and ints is not None:
        return ints
    return floats


# ----------------------------------------------------------------------------------------
# Comparison.


def bits_of(x):
    if x.dtype == torch.bool:
        return x.clone()
    return x.contiguous().view(SIGNED_OF_WIDTH[x.element_size()]).clone()


def _show(x, i):
    v = x[i]
    if v.dtype in (torch.uint16, torch.uint32, torch.uint64):
        return int(v.view(SIGNED_OF_WIDTH[v.element_size()]).item()) % (1 << (8 * v.element_size()))
    return v.item()


def _report(bad, got, want, inputs, ctx, kind):
    idx = bad.nonzero()[:6].tolist()
    lines = []
    for i in idx:
        i = tuple(i)
        ins = []
        for x in inputs:
            xe = x.expand(got.shape)
            ins.append(repr(_show(xe, i)))
        lines.append(f"  at {i}: inputs ({', '.join(ins)}): got {_show(got, i)!r}, want {_show(want, i)!r}")
    return f"{ctx}: {int(bad.sum())} of {bad.numel()} elements differ ({got.dtype}, {kind}):\n" + "\n".join(lines)


def assert_exact(got, want, inputs, ctx, zeros_equal=False):
    """Bit for bit (NaN matches NaN; -0.0 equals 0.0 with `zeros_equal`), same dtype."""
    assert got.dtype == want.dtype, f"{ctx}: dtype {got.dtype}, torch gives {want.dtype}"
    assert got.shape == want.shape, f"{ctx}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.device == want.device, f"{ctx}: device {got.device} != {want.device}"
    same = bits_of(got) == bits_of(want)
    if got.dtype.is_floating_point:
        g, w = got.to(torch.float64), want.to(torch.float64)
        same |= torch.isnan(g) & torch.isnan(w)
        if zeros_equal:
            same |= (g == 0) & (w == 0)
    bad = ~same
    assert not bool(bad.any()), _report(bad, got, want, inputs, ctx, "bit-identical")


def ulp_errors(got, ref):
    """|got - ref| in units of eps(dtype) * max(|ref|, 1); NaN against NaN and equal
    infinities are 0, NaN against a number or a wrong infinity is inf."""
    g, r = got.to(torch.float64), ref.to(torch.float64)
    scale = EPS[ref.dtype] * r.abs().clamp_min(1.0)
    err = (g - r).abs() / scale
    gn, rn = torch.isnan(g), torch.isnan(r)
    err = torch.where(g == r, torch.zeros_like(err), err)
    err = torch.where(gn & rn, torch.zeros_like(err), err)
    err = torch.where(torch.isnan(err) | (gn ^ rn), torch.full_like(err, float("inf")), err)
    return err


def assert_within(got, ref, tol, inputs, ctx):
    assert got.dtype == ref.dtype, f"{ctx}: dtype {got.dtype}, torch gives {ref.dtype}"
    assert got.shape == ref.shape, f"{ctx}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    err = ulp_errors(got, ref)
    bad = err > tol
    if bool(bad.any()):
        msg = _report(bad, got, ref, inputs, ctx, f"within {tol} units of eps*max(|ref|,1)")
        finite = err[~torch.isinf(err)]
        largest = f"{finite.max().item():.3g}" if finite.numel() else "inf"
        raise AssertionError(msg + f"\n  largest finite error: {largest} units")


# ----------------------------------------------------------------------------------------
# Every op id of the op set × dtype × layout class × device, compared with torch.


def _torch_call(spec, inputs, scalars):
    """torch's result, or the reason torch refuses (pytest.skip names it)."""
    try:
        return spec.fn(*inputs, *scalars), None
    except (RuntimeError, TypeError, NotImplementedError, ValueError) as e:
        return None, str(e).splitlines()[0]


def _f64_operand(x, out_dtype):
    """An operand as float64, converted as the op converts it: an integer or bool through
    the op's float type (float32 for float functions of integers)."""
    if x.dtype.is_floating_point:
        return x.to(torch.float64)
    return x.to(out_dtype).to(torch.float64)


def poisoned(shape, dtype, device, transposed=False):
    if transposed:
        return poisoned(tuple(reversed(shape)), dtype, device).t()
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        return torch.full(shape, 1234.5, dtype=dtype, device=device)
    s = SIGNED_OF_WIDTH[torch.empty((), dtype=dtype).element_size()]
    return torch.full(shape, 0x5A, dtype=s, device=device).view(dtype)


OP_IDS = sorted(SPECS)
DTYPE_NAMES = list(TD)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("op", OP_IDS)
@pytest.mark.parametrize("device", DEVICES)
def test_op_matches_torch(device, op, dtype):
    spec = SPECS[op]
    t = dtype
    if (op, t) in DIFFERENCES:
        # A documented difference (the README's list): the library refuses with a typed error.
        x = make_inputs(spec, op, t, LAYOUTS[0], torch.Generator().manual_seed(0), device)
        with pytest.raises(sa.DtypeError):
            getattr(sa, op)(*x)
        pytest.skip(f"documented difference: {DIFFERENCES[(op, t)]}")
    scalars = scalars_for(spec, t)
    compared = 0
    for layout in LAYOUTS:
        g = torch.Generator().manual_seed(zlib.crc32(f"{op} {t} {layout}".encode()))
        inputs = make_inputs(spec, op, t, layout, g, device)
        ctx = f"{op}({t}) {layout} on {device}"
        want, refused = _torch_call(spec, inputs, scalars)
        if refused is not None:
            assert compared == 0, f"{ctx}: torch refuses one layout after accepting another: {refused}"
            pytest.skip(f"torch refuses {op} of {TD[t]}: {refused[:160]}")
        before = [bits_of(x) for x in inputs]
        fn = getattr(sa, op)
        try:
            got = fn(*inputs, *scalars)
        except sa.Error as e:
            raise AssertionError(f"{ctx}: torch computes {want.dtype}, the library raises {type(e).__name__}: {e}")
        assert isinstance(got, torch.Tensor), f"{ctx}: {type(got)}"
        out = poisoned((M, N), want.dtype, device, transposed=(layout == "transposed"))
        ret = fn(*inputs, *scalars, out=out)
        assert ret is out, f"{ctx}: with out= the call returns out itself"
        for x, b in zip(inputs, before):
            assert torch.equal(bits_of(x), b), f"{ctx}: an input changed"

        exact = spec.tol is None or (spec.int_exact and t in INTS)
        if op == "floor_divide" and t in ("f16", "bf16"):
            # torch's CPU kernel rounds its intermediate steps to the 16-bit type; its CUDA
            # kernel and the library compute in float32 and round once (module docstring).
            want = torch.floor_divide(*(x.float() for x in inputs)).to(want.dtype)
        if exact:
            assert_exact(got, want, inputs, ctx + " (out omitted)", spec.zeros_equal)
            assert_exact(out, want.expand(M, N), inputs, ctx + " (out=)", spec.zeros_equal)
        else:
            assert want.dtype.is_floating_point, f"{ctx}: an inexact op with a {want.dtype} result"
            ref = spec.fn(*[_f64_operand(x, want.dtype) for x in inputs], *scalars).to(want.dtype)
            # A 16-bit result is the float32 value rounded once: within an ulp.
            tol = 1 if want.dtype in (torch.float16, torch.bfloat16) else spec.tol
            assert_within(got, ref, tol, inputs, ctx + " (out omitted)")
            assert_within(out, ref.expand(M, N), tol, inputs, ctx + " (out=)")
        compared += 1
    assert compared == len(LAYOUTS)
    count_case("op set", device)


def test_every_op_of_the_set_is_compared():
    """The op ids after `text:` in programs.rs are exactly those compared here, with
    the input counts and scalar names of SPECS, and each is a function of the module."""
    if not PROGRAMS_RS.exists():
        pytest.skip(f"{PROGRAMS_RS} is not in this checkout (an installed copy of the tests)")
    # `cast` over the new types is a program too; the float8 and integer tests cover it.
    listed = [x for x in program_text_ops() if x[0] != "cast"]
    assert len(listed) > 50, listed
    ids = [op for op, _, _ in listed]
    assert sorted(ids) == OP_IDS, (sorted(set(ids) - set(OP_IDS)), sorted(set(OP_IDS) - set(ids)))
    for op, inputs, names in listed:
        spec = SPECS[op]
        assert spec.arity == inputs, (op, spec.arity, inputs)
        n_scalars = len(spec.scalars[0]) if spec.scalars else 0
        assert n_scalars == len(names), (op, names)
        f = getattr(sa, op)
        assert f.inputs == inputs and f.scalar_names == names, (op, f.inputs, f.scalar_names)
    assert set(ids) <= set(sa.op_ids())


@pytest.mark.parametrize("device", DEVICES)
def test_scalars_by_name(device):
    """Scalars are positional after the inputs or named by their names in programs.rs."""
    x = torch.linspace(-6, 6, 97, dtype=torch.float32, device=device)
    a = sa.softplus(x, 2.0, 10.0)
    b = sa.softplus(x, beta=2.0, threshold=10.0)
    c = sa.hardtanh(x, min_val=-2.0, max_val=3.5)
    assert torch.equal(a, b)
    assert torch.equal(c, F.hardtanh(x, -2.0, 3.5))
    assert torch.equal(sa.threshold(x, threshold=0.5, value=-3.25), F.threshold(x, 0.5, -3.25))
    with pytest.raises(sa.OpError):
        sa.elu(x)  # no defaults: the scalars are always given


# ----------------------------------------------------------------------------------------
# The new integer types wrap and compare as torch's.

NEW_INTS = ("i8", "i16", "u16", "u64")
INT_OPS = ("add", "sub", "mul", "neg", "floor_divide", "bitwise_and", "eq")


def _int_data(t, shape, g, op):
    """Values over `t`'s whole range (int64 bit patterns for the 64-bit types) with its
    extremes; for floor_divide no zero divisor, no MIN, and uint64 below 2^63."""
    lo, hi = int_range(t)
    if BITS[t] == 64:
        v = torch.randint(-(2**63), 2**63 - 1, shape, generator=g, dtype=torch.int64)
    else:
        v = (_rand(shape, g) * (hi - lo + 1)).floor().to(torch.int64) + lo
    ext = [lo, lo + 1, hi if hi < 2**63 else -1, 0, 1, 2, 100, 127]
    if lo < 0:
        ext += [-1, -100]
    ext = torch.tensor(ext, dtype=torch.int64)
    pick = _rand(shape, g) < 0.3
    idx = (_rand(shape, g) * len(ext)).long().clamp_max(len(ext) - 1)
    v = torch.where(pick, ext[idx], v)
    if op == "floor_divide":
        if t == "u64":
            v = v & (2**63 - 1)  # the int64 reference divides these exactly
        elif lo < 0:
            v = torch.where(v == lo, torch.full_like(v, lo + 1), v)
        v = torch.where(v == 0, torch.full_like(v, 7), v)
    return int_bits(v, t)


def _emulated(op, t, a, b=None):
    """`op` on int64 wrapped to `t`'s width (torch has no kernel for the type)."""
    w = BITS[t]

    def as_i64(v):
        if v is None:
            return None
        v = v.view(SIGNED_OF_WIDTH[w // 8]).to(torch.int64)
        return v & ((1 << w) - 1) if t in UNSIGNED and w < 64 else v

    x, y = as_i64(a), as_i64(b)
    if op == "eq":
        return x == y
    r = {
        "add": lambda: x + y,
        "sub": lambda: x - y,
        "mul": lambda: x * y,
        "neg": lambda: -x,
        "floor_divide": lambda: torch.floor_divide(x, y),
        "bitwise_and": lambda: x & y,
    }[op]()
    return int_bits(r, t)


@pytest.mark.parametrize("op", INT_OPS)
@pytest.mark.parametrize("dtype", NEW_INTS)
@pytest.mark.parametrize("device", DEVICES)
def test_new_integer_types_wrap_as_torch(device, dtype, op):
    t = dtype
    g = torch.Generator().manual_seed(zlib.crc32(f"ints {op} {t}".encode()))
    for layout in ("contiguous", "transposed", "broadcast_row"):
        if layout == "contiguous":
            a, b = _int_data(t, (M, N), g, op), _int_data(t, (M, N), g, op)
        elif layout == "transposed":
            a, b = _int_data(t, (N, M), g, op).t(), _int_data(t, (M, N), g, op)
        else:
            a, b = _int_data(t, (M, N), g, op), _int_data(t, (1, N), g, op)
        a, b = a.to(device), b.to(device)
        ins = (a,) if op == "neg" else (a, b)
        ctx = f"{op}({t}) {layout} on {device}"
        try:
            want = getattr(torch, op)(*ins)
            how = "torch"
        except (RuntimeError, TypeError, NotImplementedError) as e:
            if "not implemented for" not in str(e):
                raise
            if op == "neg":  # unsigned negation: torch defines none, nothing to compare with
                pytest.skip(f"torch refuses neg of {TD[t]}: {str(e).splitlines()[0]}")
            shape = torch.broadcast_shapes(*(x.shape for x in ins))
            want = _emulated(op, t, *(x.expand(shape) for x in ins))
            how = f"int64 emulation (torch: {str(e).splitlines()[0]})"
        got = getattr(sa, op)(*ins)
        assert_exact(got, want, list(ins), f"{ctx}, reference: {how}")
    # The wrap itself, spelled out.
    lo, hi = int_range(t)
    if op == "add":
        x = int_bits(torch.tensor([100, hi if hi < 2**63 else -1, lo]), t).to(device)
        y = int_bits(torch.tensor([100, 1, -1 if lo < 0 else 0]), t).to(device)
        got = sa.add(x, y)
        want_vals = [(100 + 100), (hi + 1), (lo - 1 if lo < 0 else lo)]
        w = BITS[t]
        want_vals = [((v - lo) % (1 << w)) + lo for v in want_vals]
        got_vals = [_show(got, (i,)) for i in range(3)]
        assert got_vals == want_vals, (t, got_vals, want_vals)
        if t == "i8":
            assert got_vals[0] == -56
    count_case("op set", device)


# ----------------------------------------------------------------------------------------
# float8: conversions bit for bit, no arithmetic.

# name in expressions, largest finite value, the tie above it (the smallest magnitude
# that rounds past it: 464 rounds to even, down to 448; 61440 rounds to even, up to inf).
F8 = {"float8_e4m3fn": ("f8e4m3fn", 448.0, 464.0), "float8_e5m2": ("f8e5m2", 57344.0, 61440.0)}


def _f32_probe_values():
    """Every f32 whose low 16 bits are zero (all bf16 values: both signs, every exponent,
    NaNs and infinities), values around float8's overflow thresholds and subnormal
    boundaries (each with its neighbours, both signs), and random bit patterns."""
    grid = (torch.arange(2**16, dtype=torch.int32) << 16).view(torch.float32)
    centres = [448.0, 464.0, 480.0, 496.0, 512.0, 57344.0, 61440.0, 65536.0, 1.0625, 1.1875, 1.0]
    for e in range(-20, -4):
        centres += [2.0**e, 1.5 * 2.0**e, 1.25 * 2.0**e, 1.75 * 2.0**e]
    c = torch.tensor(centres, dtype=torch.float32)
    near = [c]
    up, down = c.clone(), c.clone()
    for _ in range(3):
        up = torch.nextafter(up, torch.full_like(up, float("inf")))
        down = torch.nextafter(down, torch.zeros_like(down))
        near += [up, down]
    near = torch.cat(near)
    g = torch.Generator().manual_seed(8)
    rnd = torch.randint(-(2**31), 2**31 - 1, (1 << 15,), generator=g, dtype=torch.int64)
    rnd = rnd.to(torch.int32).view(torch.float32)
    return torch.cat([grid, near, -near, rnd])


def _f8_region(x, f8, region):
    """`in_range`: finite values that round to a finite code, and NaNs; `overflow`:
    finite values beyond the tie above the largest finite value, and infinities."""
    _, _, tie = F8[f8]
    m = x.abs()
    if f8 == "float8_e4m3fn":
        inside = (m <= tie) | torch.isnan(x)
    else:
        inside = (m < tie) | torch.isnan(x)
    return x[inside] if region == "in_range" else x[~inside]


@pytest.mark.parametrize("region", ["in_range", "overflow"])
@pytest.mark.parametrize("f8", list(F8))
@pytest.mark.parametrize("device", DEVICES)
def test_float8_from_float32_bit_for_bit(device, f8, region):
    name, _, _ = F8[f8]
    dt = getattr(torch, f8)
    x = _f8_region(_f32_probe_values(), f8, region).to(device)
    assert x.numel() > 1000, x.numel()
    want = x.to(dt)
    # `sa.cast` has no kernel for float8 (the cast families cover the nine older types):
    # the conversion is an expression.
    conv = sa.expr(f"{name}(a)")
    got = conv(a=x)
    assert got.dtype == dt, got.dtype
    gb, wb = got.view(torch.uint8), want.view(torch.uint8)
    bad = gb != wb
    assert not bool(bad.any()), _report(bad, gb, wb, [x], f"f32 -> {f8} ({region}) on {device}", "bit-identical codes")
    # Into a given output, strided (every other element of a buffer).
    buf = torch.full((2 * x.numel(),), 0x55, dtype=torch.uint8, device=device).view(dt)
    out = buf[::2]
    assert conv(a=x, out=out) is out
    assert torch.equal(out.view(torch.uint8), wb)
    assert bool((buf.view(torch.uint8)[1::2] == 0x55).all()), "wrote outside out"
    count_case("op set", device)


@pytest.mark.parametrize("f8", list(F8))
@pytest.mark.parametrize("device", DEVICES)
def test_float8_to_float32_all_codes(device, f8):
    dt = getattr(torch, f8)
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(device)
    x = codes.view(dt)
    want = x.to(torch.float32)
    got = sa.expr("f32(a)")(a=x)
    assert_exact(got, want, [codes], f"{f8} -> f32 on {device}")
    # And through float64, and arithmetic after the widening (an expression).
    assert_exact(sa.expr("f64(a)")(a=x), x.to(torch.float64), [codes], f"{f8} -> f64 on {device}")
    assert_exact(sa.expr("f32(a) * 2")(a=x), want * 2, [codes], f"f32({f8}) * 2 on {device}")
    count_case("op set", device)


@pytest.mark.parametrize("f8", list(F8))
@pytest.mark.parametrize("device", DEVICES)
def test_float8_arithmetic_raises(device, f8):
    dt = getattr(torch, f8)
    x = torch.linspace(-4, 4, 12, device=device).to(dt)
    out = torch.full((12,), 0x33, dtype=torch.uint8, device=device).view(dt)
    same = _untouched(out)
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.add(x.cpu(), x.cpu())  # torch: "add_stub" not implemented for 'Float8_...'
    with pytest.raises(sa.DtypeError) as e:
        sa.add(x, x, out=out)
    assert "8-bit" in str(e.value) or "f8" in str(e.value), str(e.value)
    with pytest.raises(sa.DtypeError):
        sa.erf(x, out=out)
    with pytest.raises(sa.DtypeError):
        sa.expr("a * 2")(a=x, out=out)
    assert same()


# ----------------------------------------------------------------------------------------
# Mixed types: promotion as torch.result_type, refusals as torch's, out untouched.


def _untouched(out):
    before = bits_of(out)
    return lambda: torch.equal(bits_of(out), before)


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_type_promotion(device):
    g = torch.Generator().manual_seed(5)
    a = (torch.randn(M, N, generator=g) * 10).to(device)
    b = (torch.randn(1, N, generator=g) * 10).to(device)
    i8 = (torch.rand(M, N, generator=g) * 256 - 128).floor().to(torch.int8).to(device)
    u8 = (torch.rand(M, N, generator=g) * 256).floor().to(torch.uint8).to(device)
    i16 = (torch.rand(M, N, generator=g) * 60000 - 30000).floor().to(torch.int16).to(device)
    cases = [
        ("add", a.to(torch.bfloat16), b, torch.float32),
        ("add", i8, u8, torch.int16),
        ("mul", u8, i8.t().contiguous().t(), torch.int16),
        ("sub", i16, u8, torch.int16),
        ("add", i8, a.to(torch.float16), torch.float16),
        ("maximum", i16, a.to(torch.bfloat16), torch.bfloat16),
        ("true_divide", i8, u8, torch.float32),
        ("bitwise_and", i8, u8, torch.int16),
        ("eq", i8, u8, torch.bool),
    ]
    for op, x, y, dt in cases:
        fn = getattr(torch, op)
        if op == "true_divide":
            y = torch.where(y == 0, torch.ones_like(y), y)
        want = fn(x, y)
        assert want.dtype == dt, (op, x.dtype, y.dtype, want.dtype)
        got = getattr(sa, op)(x, y)
        assert_exact(got, want, [x, y], f"{op}({x.dtype}, {y.dtype}) on {device}")
    # Python scalars are weak (torch.result_type): int8 tensor with an int stays int8.
    assert_exact(sa.add_s(i8, 3), i8 + 3, [i8], "add_s(int8, 3)")
    count_case("op set", device)


@pytest.mark.parametrize("device", DEVICES)
def test_refused_types_name_the_op_and_leave_out_untouched(device):
    x = torch.linspace(-3, 3, 40, device=device).view(5, 8)
    f8 = x.to(torch.float8_e4m3fn)
    out = torch.full((5, 8), 7.0, device=device)
    same = _untouched(out)

    xc = x.cpu()
    with pytest.raises(RuntimeError):
        torch.add(f8.cpu(), xc)  # torch: "Promotion for Float8 Types is not supported"
    with pytest.raises(sa.DtypeError) as e:
        sa.add(f8, x, out=out)
    assert "f8e4m3fn" in str(e.value) or "float8" in str(e.value), str(e.value)
    assert same()

    with pytest.raises(RuntimeError):
        torch.bitwise_and(xc, xc)
    with pytest.raises(sa.DtypeError) as e:
        sa.bitwise_and(x, x, out=out)
    msg = str(e.value)
    assert "bitwise_and" in msg and ("f32" in msg or "float32" in msg), msg
    assert same()

    for op in ("bitwise_left_shift", "bitwise_right_shift", "bitwise_or", "bitwise_xor", "bitwise_not"):
        args = (x,) if op == "bitwise_not" else (x, x)
        with pytest.raises(RuntimeError):
            getattr(torch, op)(*(a.cpu() for a in args))
        with pytest.raises(sa.DtypeError) as e:
            getattr(sa, op)(*args, out=out)
        assert op in str(e.value) or op.replace("bitwise_", "") in str(e.value), (op, str(e.value))
        assert same(), op

    i = torch.arange(40, dtype=torch.int32, device=device).view(5, 8)
    with pytest.raises(sa.DtypeError):
        sa.bitwise_left_shift(i, x, out=out)  # float shift amounts
    with pytest.raises(RuntimeError):
        torch.nextafter(i.cpu(), i.cpu())
    with pytest.raises(sa.DtypeError):
        sa.nextafter(i, i, out=out)
    assert same()
    count_case("op set", device)
