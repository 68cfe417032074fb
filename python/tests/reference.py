"""Reference results for every op of ``strided_apply``, computed with numpy in float64
(or with exact Python integers), then rounded or cast to the op's output type the way
the library documents it (docs/numerics.md, "Tolerance policy", gpu-kernels/src/ops.rs, math.rs,
narrow.rs, fused.rs).

Representation: every array is a numpy array of the type's numpy dtype, except ``bf16``,
which numpy lacks: a ``bf16`` array is a ``uint16`` array of bf16 bit patterns (see
``bf16_from_f32``/``bf16_to_f32``, round to nearest even written with integer bit
operations; no ``ml_dtypes``).

``reference(op_id, types, inputs, scalars, out_init=None)`` returns the expected output
(``types`` is output first, then one type per input, as ``sa.instances()`` gives it;
``out_init`` is the output's contents before the call, for the ops that read it:
``*_assign``, ``*_assign_s``, ``recip_update``).  ``assert_matches(got, want, out_type,
tolerance)`` compares: ``tolerance`` ``None`` means bit-identical (NaN equals NaN whatever
its payload), an int N means within N ulp of the output type.

How the reference is computed, op by op:

* ``+ - * /``, ``sqrt``, ``min``, ``max``, ``abs``, ``neg``, ``relu``, ``clamp``,
  comparisons: the f64 result, rounded to ``f32`` and then to the 16-bit type.  For
  ``f32``/``f16``/``bf16`` operands this is the correctly rounded result (f64 has at least
  2p+2 bits for p = 24, and f32 for p = 11 and 8), i.e. what the library computes.
* Mixed ``f16``/``bf16`` with ``f32`` inputs and a 16-bit output: f64 -> f32 -> 16 bits,
  as the library does (it computes in f32 and rounds once more).  *Documented
  difference*: docs/numerics.md calls mixed ops "correctly rounded, equal to the exact result
  rounded once"; with an f32 operand of 24 bits the f32 sum is not always the exact
  result, so ``bf16 = bf16 + f32`` can differ from the exact sum rounded once to bf16
  (e.g. 1 + (2^-8 + 2^-31) gives 1, exact rounding gives 1 + 2^-7).  The reference
  follows the library (and PyTorch, which does the same), not that sentence.
* ``rsqrt``: ``1 / sqrt(x)`` with two roundings in the op math type (f32 for 16-bit
  types and f32, f64 for f64), as ``ops.rs`` computes it (not the correctly rounded
  reciprocal square root).
* ``fma``: exact ``a*b + c`` (Python ``Fraction``) rounded once for f32/f64; for 16-bit
  types rounded to f32 first and then to 16 bits ("fma rounds twice, as PyTorch's
  opmath does", math.rs).  Integers wrap.
* ``exp log sin cos tanh pow sigmoid`` and the fused ops (``axpy axpby bias_relu silu
  divmul lerp recip_update``): the f64 value of the expression rounded once (correctly)
  to the output type; the library is only required to be within the tolerance that
  ``sa.instances()`` reports.  Fused ops evaluate their whole expression in the op math
  type (f32 for f16/bf16/f32) with several roundings: tests must use data without
  cancellation (positive operands) for the bound to hold; that is a property of the
  data, not a library defect.
* Scalars are converted to the op's element type first (``FromScalar``): floats round to
  nearest even (here: correctly rounded from the f64 value), integers must be integral
  and in range (``ValueError`` otherwise, the library raises ``sa.OpError``).
  *Documented difference*: the library converts f16/bf16 scalars with the ``half``
  crate's ``from_f64``, which truncates the f64 to its upper 32 bits before rounding
  (and so may round a value just above a tie to even, downwards); the reference rounds
  correctly.  The tests use scalars exactly representable in every float type, except
  one test that checks this case on purpose.
* Integer arithmetic wraps; integer division truncates toward zero and division by zero
  gives 0 (``MIN / -1`` wraps to ``MIN``); ``neg``/``abs`` wrap.
* ``min``/``max`` (and ``clamp``, ``relu``, ``bias_relu``) propagate NaN, and on equal
  operands return the first one (``max(-0.0, 0.0)`` is ``-0.0``, ``relu(-0.0)`` is
  ``-0.0``), as ``math.rs`` does.
* ``cast``: Rust ``as`` semantics: float to int truncates and saturates, NaN gives 0;
  int to int wraps (two's complement); to ``bool``: ``x != 0`` (NaN is true); from
  ``bool``: 0 or 1; to a float type: correctly rounded (wide sources round to odd first
  in the library, so ``f64 -> bf16`` and ``i64 -> f16`` round once).
* NaN payloads and signs are not compared (GPU and CPU produce different NaN bits).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

FLOAT_TYPES = ("f32", "f64", "f16", "bf16")
INT_TYPES = ("i32", "i64", "u32", "u8")
ALL_TYPES = FLOAT_TYPES + INT_TYPES + ("bool",)

NP_DTYPE = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),  # bit patterns
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u32": np.dtype(np.uint32),
    "u8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
}

INT_RANGE = {
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u32": (0, 2**32 - 1),
    "u8": (0, 255),
}
INT_BITS = {"i32": 32, "i64": 64, "u32": 32, "u8": 8}

# Significand bits (with the implicit one) and largest finite value.
MANT_BITS = {"f64": 53, "f32": 24, "f16": 11, "bf16": 8}
MAX_FINITE = {
    "f64": float(np.finfo(np.float64).max),
    "f32": float(np.finfo(np.float32).max),
    "f16": 65504.0,
    "bf16": float.fromhex("0x1.fep127"),
}

# Ops grouped by what they compute.
BINARY = ("add", "sub", "mul", "div", "min", "max", "pow")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY_EXACT = ("neg", "abs", "relu", "sqrt", "rsqrt")
UNARY_TRANSCENDENTAL = ("exp", "log", "sin", "cos", "tanh", "sigmoid")
FUSED = ("axpy", "axpby", "bias_relu", "silu", "divmul", "lerp", "recip_update")


def reads_out(op_id: str) -> bool:
    """Whether the op reads its output before writing it (in-place updates)."""
    return op_id.endswith("_assign") or op_id.endswith("_assign_s") or op_id == "recip_update"


def base_op(op_id: str) -> str:
    """``add_s`` -> ``add``, ``add_assign_s`` -> ``add``, ``eq_s`` -> ``eq``."""
    for suffix in ("_assign_s", "_assign", "_s"):
        if op_id.endswith(suffix):
            return op_id[: -len(suffix)]
    return op_id


# ----------------------------------------------------------------------------------------
# bf16 and rounding helpers (numpy bit operations).


def bf16_to_f32(bits) -> np.ndarray:
    """bf16 bit patterns (uint16) to float32, exactly."""
    b = np.asarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)


def bf16_from_f32(x) -> np.ndarray:
    """float32 to bf16 bit patterns, rounded to nearest even; NaN gives 0x7fff."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FFF), r).astype(np.uint16)


def bf16_is_nan(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16) & np.uint16(0x7FFF)) > np.uint16(0x7F80)


def f64_to_f32_odd(x) -> np.ndarray:
    """float64 to float32 rounded to odd (truncate, set the last bit when inexact)."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != x) & ~np.isnan(x)
    away = np.abs(back) > np.abs(x)
    bits = np.ascontiguousarray(f).view(np.uint32).copy()
    bits = np.where(inexact & away, bits - np.uint32(1), bits).astype(np.uint32)
    bits = np.where(inexact, bits | np.uint32(1), bits).astype(np.uint32)
    return bits.view(np.float32)


def round_f64(x, t: str) -> np.ndarray:
    """float64 values correctly rounded (to nearest even) to float type ``t``."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if t == "f64":
            return x.copy()
        if t == "f32":
            return x.astype(np.float32)
        odd = f64_to_f32_odd(x)
        if t == "f16":
            return odd.astype(np.float16)
        if t == "bf16":
            return bf16_from_f32(odd)
    raise ValueError(t)


def round_via_f32(x, t: str) -> np.ndarray:
    """float64 values rounded to f32, then (for 16-bit types) to ``t``: what the
    library's f32 op math gives (``from_acc(f32 result)``)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if t == "f64":
            return x.copy()
        f = x.astype(np.float32)
        if t == "f32":
            return f
        if t == "f16":
            return f.astype(np.float16)
        if t == "bf16":
            return bf16_from_f32(f)
    raise ValueError(t)


def to_f64(arr, t: str) -> np.ndarray:
    """Values of an array of type ``t`` as float64 (exact for the float types)."""
    a = np.asarray(arr)
    if t == "bf16":
        return bf16_to_f32(a).astype(np.float64)
    return a.astype(np.float64)


def to_ints(arr) -> np.ndarray:
    """An integer or bool array as an object array of Python ints (exact arithmetic)."""
    a = np.asarray(arr)
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(a.reshape(-1).tolist()):
        flat[i] = int(v)
    return out


def wrap(values, t: str) -> np.ndarray:
    """Python ints wrapped (two's complement) to integer type ``t`` (or to bool: != 0)."""
    v = np.asarray(values, dtype=object)
    if t == "bool":
        return np.array([bool(x) for x in v.reshape(-1)], dtype=np.bool_).reshape(v.shape)
    lo, _ = INT_RANGE[t]
    m = 1 << INT_BITS[t]
    w = [((int(x) - lo) % m) + lo for x in v.reshape(-1)]
    return np.array(w, dtype=NP_DTYPE[t]).reshape(v.shape)


def from_f64_exact(x, t: str) -> np.ndarray:
    """float64 values exactly representable in float type ``t`` to an array of ``t``."""
    x = np.asarray(x, dtype=np.float64)
    if t == "bf16":
        return bf16_from_f32(x.astype(np.float32))
    return x.astype(NP_DTYPE[t])


def int_to_float(n: int, t: str) -> float:
    """A Python int correctly rounded (nearest even) to float type ``t``, as a float."""
    if n == 0:
        return 0.0
    sign = -1.0 if n < 0 else 1.0
    m = abs(n)
    p = MANT_BITS[t]
    shift = m.bit_length() - p
    if shift > 0:
        q, r = divmod(m, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        m = q << shift
    v = float(m)
    if v > MAX_FINITE[t]:
        v = math.inf
    return sign * v


def float_to_int(x: float, t: str) -> int:
    """Rust ``as``: truncate toward zero, saturate, NaN gives 0."""
    lo, hi = INT_RANGE[t]
    if math.isnan(x):
        return 0
    if x == math.inf:
        return hi
    if x == -math.inf:
        return lo
    return max(lo, min(hi, math.trunc(x)))


# ----------------------------------------------------------------------------------------
# Scalars.


def scalar_to_type(s, t: str):
    """An op scalar converted to element type ``t`` as ``FromScalar`` does: a float64
    value (exactly representable in ``t``) for float types, a Python int for integer
    types, a bool for bool.  Raises ``ValueError`` where the library refuses it."""
    if t == "bool":
        if isinstance(s, (bool, np.bool_)):
            return bool(s)
        if isinstance(s, (int, np.integer)) and int(s) in (0, 1):
            return bool(s)
        raise ValueError(f"bool scalar {s!r}")
    if t in INT_TYPES:
        if isinstance(s, (bool, np.bool_)):
            return int(s)
        if isinstance(s, (int, np.integer)):
            v = int(s)
        else:
            f = float(s)
            if not math.isfinite(f) or f != math.floor(f):
                raise ValueError(f"{s!r} is not an integer")
            v = int(f)
        lo, hi = INT_RANGE[t]
        if not lo <= v <= hi:
            raise ValueError(f"{s!r} out of range of {t}")
        return v
    if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
        f = float(int(s))  # Scalar::I64(x) -> x as f64
    else:
        f = float(s)
    return float(to_f64(round_f64(np.array([f]), t), t)[0])


# ----------------------------------------------------------------------------------------
# Element-wise semantics on float64 values.


def _max(x, y):
    """NaN-propagating max that returns the first operand on ties (math.rs)."""
    x, y = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    r = np.where(y > x, y, x)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, r)


def _min(x, y):
    x, y = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    r = np.where(y < x, y, x)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, r)


def _relu(x):
    x = np.asarray(x, np.float64)
    return np.where(np.isnan(x), x, _max(x, 0.0))


def _float_binary(op: str, a, b):
    with np.errstate(all="ignore"):
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":
            return a / b
        if op == "min":
            return _min(a, b)
        if op == "max":
            return _max(a, b)
        if op == "pow":
            return np.power(a, b)
    raise KeyError(op)


def _int_binary(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        if b == 0:
            return 0
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    if op == "min":
        return b if b < a else a
    if op == "max":
        return b if b > a else a
    raise KeyError(op)


def _compare(op: str, a, b):
    with np.errstate(all="ignore"):
        return {
            "eq": lambda: a == b,
            "ne": lambda: a != b,
            "lt": lambda: a < b,
            "le": lambda: a <= b,
            "gt": lambda: a > b,
            "ge": lambda: a >= b,
        }[op]()


def _transcendental(op: str, x):
    with np.errstate(all="ignore"):
        if op == "exp":
            return np.exp(x)
        if op == "log":
            return np.log(x)
        if op == "sin":
            return np.sin(x)
        if op == "cos":
            return np.cos(x)
        if op == "tanh":
            return np.tanh(x)
        if op == "sigmoid":
            return 1.0 / (1.0 + np.exp(-x))
    raise KeyError(op)


def _fraction_to_f64_odd(x: Fraction) -> float:
    """A rational rounded to float64 to odd (so that a later rounding to a type of at most
    51 bits is the correct rounding of ``x``)."""
    try:
        d = x.numerator / x.denominator  # correctly rounded (CPython int true division)
    except OverflowError:
        return math.copysign(math.inf, x)
    if math.isinf(d):
        return d
    if Fraction(d) == x:
        return d
    mant = struct_bits(d)
    if mant & 1:
        return d
    # Even and inexact: step one ulp toward the exact value (truncation), which is odd.
    return math.nextafter(d, math.inf if Fraction(d) < x else -math.inf)


def struct_bits(d: float) -> int:
    return int(np.array([d], dtype=np.float64).view(np.uint64)[0])


def _fma_exact(a: float, b: float, c: float, t: str) -> float:
    """``a*b + c`` with one rounding to ``t`` (f32 or f64)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        with np.errstate(all="ignore"):
            return float(np.float64(a) * np.float64(b) + np.float64(c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        prod_zero = a == 0 or b == 0
        if prod_zero and c == 0:
            prod_neg = (math.copysign(1, a) * math.copysign(1, b)) < 0
            c_neg = math.copysign(1, c) < 0
            return -0.0 if (prod_neg and c_neg) else 0.0
        return 0.0
    if t == "f64":
        try:
            return exact.numerator / exact.denominator
        except OverflowError:
            return math.copysign(math.inf, exact)
    with np.errstate(over="ignore"):
        return float(np.float64(_fraction_to_f64_odd(exact)).astype(np.float32))


# ----------------------------------------------------------------------------------------
# The reference.


def _finish_float(r, t: str, mode: str):
    """float64 results to type ``t``: ``mode`` 'via32' (exact ops: what f32 op math
    gives) or 'correct' (tolerance ops: correctly rounded)."""
    return round_via_f32(r, t) if mode == "via32" else round_f64(r, t)


def reference(op_id: str, types, inputs, scalars=(), out_init=None, shape=None) -> np.ndarray:
    """The expected output of ``op_id`` with type combination ``types`` (output first)
    on numpy ``inputs`` (bf16 as uint16 bits) and ``scalars``; ``out_init`` is the output
    before the call (required for ops that read it, and ``fill`` uses its shape);
    ``shape`` the output's shape when the inputs broadcast to a larger one."""
    types = tuple(types)
    out_t, in_ts = types[0], types[1:]
    if len(inputs) != len(in_ts):
        raise ValueError(f"{op_id} {types}: {len(inputs)} inputs")
    ins = [np.asarray(x) for x in inputs]
    if shape is not None:
        ins = [np.broadcast_to(x, shape) for x in ins]
    if reads_out(op_id) or op_id == "fill":
        if out_init is None:
            raise ValueError(f"{op_id} needs out_init")
        ins_b = np.broadcast_arrays(np.asarray(out_init), *ins) if ins else [np.asarray(out_init)]
        cur, ins = ins_b[0], list(ins_b[1:])
    else:
        cur = None
        ins = list(np.broadcast_arrays(*ins)) if len(ins) > 1 else ins
    scalars = list(scalars)

    def sc(i, t=None):
        return scalar_to_type(scalars[i], t or out_t)

    nscal = {
        "clamp": 2, "axpy": 1, "axpby": 2, "divmul": 2, "fill": 1,
    }.get(op_id, 1 if op_id.endswith("_s") else 0)
    if len(scalars) != nscal:
        raise ValueError(f"{op_id}: {len(scalars)} scalars, wants {nscal}")

    # --- fill ---
    if op_id == "fill":
        v = sc(0)
        shape = cur.shape
        if out_t == "bool":
            return np.full(shape, v, dtype=np.bool_)
        if out_t in INT_TYPES:
            return np.full(shape, v, dtype=NP_DTYPE[out_t])
        return from_f64_exact(np.full(shape, v), out_t)

    # --- in-place updates: out = op(out, a) / op(out, s) ---
    if op_id.endswith("_assign"):
        return _binary(base_op(op_id), (out_t, out_t, in_ts[0]), cur, ins[0])
    if op_id.endswith("_assign_s"):
        s = sc(0)
        return _binary_scalar(base_op(op_id), out_t, out_t, cur, s, left=False)

    # --- scalar on the right / left ---
    if op_id in ("rsub_s", "rdiv_s"):
        return _binary_scalar({"rsub_s": "sub", "rdiv_s": "div"}[op_id], out_t, in_ts[0], ins[0], sc(0, in_ts[0]), left=True)
    if op_id.endswith("_s") and base_op(op_id) in BINARY + COMPARE:
        return _binary_scalar(base_op(op_id), out_t, in_ts[0], ins[0], sc(0, in_ts[0]), left=False)

    if op_id in BINARY or op_id in COMPARE:
        return _binary(op_id, types, ins[0], ins[1])

    if op_id in UNARY_EXACT:
        return _unary_exact(op_id, out_t, ins[0])
    if op_id in UNARY_TRANSCENDENTAL:
        return round_f64(_transcendental(op_id, to_f64(ins[0], in_ts[0])), out_t)

    if op_id == "clamp":
        lo, hi = sc(0), sc(1)
        if out_t in INT_TYPES:
            a = to_ints(ins[0])
            r = np.empty(a.shape, dtype=object)
            rf, af = r.reshape(-1), a.reshape(-1)
            for i in range(af.size):
                x = af[i]
                x = lo if lo > x else x
                x = hi if hi < x else x
                rf[i] = x
            return wrap(r, out_t)
        x = to_f64(ins[0], in_ts[0])
        r = np.where(np.isnan(x), x, _min(_max(x, lo), hi))
        return round_via_f32(r, out_t)

    if op_id == "fma":
        if out_t in INT_TYPES:
            a, b, c = (to_ints(v) for v in ins)
            return wrap(a * b + c, out_t)
        a, b, c = (to_f64(v, t) for v, t in zip(ins, in_ts))
        r = np.empty(a.shape, dtype=np.float64)
        rf, af, bf, cf = r.reshape(-1), a.reshape(-1), b.reshape(-1), c.reshape(-1)
        acc = "f64" if out_t == "f64" else "f32"
        for i in range(rf.size):
            rf[i] = _fma_exact(float(af[i]), float(bf[i]), float(cf[i]), acc)
        return round_via_f32(r, out_t)

    if op_id == "where":
        cond = np.asarray(ins[0]).astype(np.bool_)
        return np.where(cond, ins[1], ins[2]).astype(NP_DTYPE[out_t])

    if op_id == "cast":
        return cast(ins[0], in_ts[0], out_t)

    if op_id in FUSED:
        return _fused(op_id, out_t, in_ts, ins, cur, [sc(i) for i in range(nscal)])

    raise KeyError(f"no reference for op {op_id!r}")


def _binary(op: str, types, a, b) -> np.ndarray:
    out_t, ta, tb = types
    if op in COMPARE:
        if ta in FLOAT_TYPES or tb in FLOAT_TYPES:
            return np.asarray(_compare(op, to_f64(a, ta), to_f64(b, tb)), dtype=np.bool_)
        r = _compare(op, to_ints(a), to_ints(b))
        return np.asarray(r, dtype=object).astype(np.bool_)
    if out_t in INT_TYPES:
        ai, bi = to_ints(a), to_ints(b)
        r = np.empty(ai.shape, dtype=object)
        rf, af, bf = r.reshape(-1), ai.reshape(-1), bi.reshape(-1)
        for i in range(rf.size):
            rf[i] = _int_binary(op, af[i], bf[i])
        return wrap(r, out_t)
    r = _float_binary(op, to_f64(a, ta), to_f64(b, tb))
    return _finish_float(r, out_t, "correct" if op == "pow" else "via32")


def _binary_scalar(op: str, out_t: str, t: str, a, s, left: bool) -> np.ndarray:
    """``op(a, s)`` (or ``op(s, a)`` when ``left``) with ``s`` already of type ``t``."""
    a = np.asarray(a)
    if t in FLOAT_TYPES:
        sv = np.full(a.shape, s, dtype=np.float64)
        sarr = from_f64_exact(sv, t)
    elif t == "bool":
        sarr = np.full(a.shape, s, dtype=np.bool_)
    else:
        sarr = np.full(a.shape, s, dtype=NP_DTYPE[t])
    x, y = (sarr, a) if left else (a, sarr)
    return _binary(op, (out_t, t, t), x, y)


def _unary_exact(op: str, out_t: str, a) -> np.ndarray:
    if out_t in INT_TYPES:
        ai = to_ints(a)
        if op == "neg":
            return wrap(-ai, out_t)
        if op == "abs":
            return wrap(np.array([abs(v) for v in ai.reshape(-1)], dtype=object).reshape(ai.shape), out_t)
        if op == "relu":
            return wrap(np.array([v if v > 0 else 0 for v in ai.reshape(-1)], dtype=object).reshape(ai.shape), out_t)
        raise KeyError(op)
    if op in ("neg", "abs") and out_t == "bf16":
        bits = np.asarray(a, dtype=np.uint16)
        return (bits ^ np.uint16(0x8000)) if op == "neg" else (bits & np.uint16(0x7FFF))
    x = to_f64(a, out_t)
    with np.errstate(all="ignore"):
        if op == "neg":
            return from_f64_exact(-x, out_t)
        if op == "abs":
            return from_f64_exact(np.abs(x), out_t)
        if op == "relu":
            return from_f64_exact(_relu(x), out_t)
        if op == "sqrt":
            return round_via_f32(np.sqrt(x), out_t)
        if op == "rsqrt":
            if out_t == "f64":
                return 1.0 / np.sqrt(x)
            root = np.sqrt(x).astype(np.float32).astype(np.float64)
            return round_via_f32(1.0 / root, out_t)
    raise KeyError(op)


def _fused(op: str, out_t: str, in_ts, ins, cur, s) -> np.ndarray:
    v = [to_f64(x, t) for x, t in zip(ins, in_ts)]
    with np.errstate(all="ignore"):
        if op == "axpy":
            x, y = v
            r = s[0] * x + y
        elif op == "axpby":
            x, y = v
            r = s[0] * x + s[1] * y
        elif op == "bias_relu":
            x, bias = v
            r = _relu(x + bias)
        elif op == "silu":
            (x,) = v
            r = x * (1.0 / (1.0 + np.exp(-x)))
        elif op == "divmul":
            a, b = v
            r = (a / s[0]) * (b / s[1])
        elif op == "lerp":
            a, b, w = v
            r = a + w * (b - a)
        elif op == "recip_update":
            (b,) = v
            a = to_f64(cur, out_t)
            r = a + 1.0 / a + 2.0 * a * b
        else:
            raise KeyError(op)
    return round_f64(r, out_t)


def cast(a, src: str, dst: str) -> np.ndarray:
    """Rust ``as`` conversion of an array of type ``src`` to type ``dst``."""
    a = np.asarray(a)
    if src in FLOAT_TYPES:
        x = to_f64(a, src)
        if dst == "bool":
            return x != 0
        if dst in FLOAT_TYPES:
            return round_f64(x, dst)
        flat = [float_to_int(float(v), dst) for v in x.reshape(-1)]
        return np.array(flat, dtype=NP_DTYPE[dst]).reshape(x.shape)
    ints = to_ints(a)
    if dst == "bool":
        return np.array([v != 0 for v in ints.reshape(-1)], dtype=np.bool_).reshape(ints.shape)
    if dst in INT_TYPES:
        return wrap(ints, dst)
    vals = np.array([int_to_float(int(v), dst) for v in ints.reshape(-1)], dtype=np.float64).reshape(ints.shape)
    return from_f64_exact(vals, dst)


# ----------------------------------------------------------------------------------------
# Comparison.


def _float_bits_signed(arr, t: str) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(arr, dtype=NP_DTYPE[t]))
    view = {"f64": np.int64, "f32": np.int32, "f16": np.int16, "bf16": np.int16}[t]
    return a.view(view)


def _is_nan(arr, t: str) -> np.ndarray:
    if t == "bf16":
        return bf16_is_nan(arr)
    return np.isnan(np.asarray(arr, dtype=NP_DTYPE[t]))


def ulp_distance(got, want, t: str) -> np.ndarray:
    """Distance in ulps of type ``t`` (object array of Python ints); NaN against NaN is 0,
    NaN against a number is a huge number."""
    g = _float_bits_signed(got, t).astype(np.int64).reshape(-1).tolist()
    w = _float_bits_signed(want, t).astype(np.int64).reshape(-1).tolist()
    gn = _is_nan(got, t).reshape(-1).tolist()
    wn = _is_nan(want, t).reshape(-1).tolist()
    bits = {"f64": 64, "f32": 32, "f16": 16, "bf16": 16}[t]
    lo = -(1 << (bits - 1))

    def key(i):
        return lo - i if i < 0 else i

    d = []
    for gi, wi, gnan, wnan in zip(g, w, gn, wn):
        if gnan and wnan:
            d.append(0)
        elif gnan or wnan:
            d.append(1 << 80)
        else:
            d.append(abs(key(gi) - key(wi)))
    return np.array(d, dtype=object).reshape(np.shape(got))


def show(arr, t: str):
    """Readable values of an array of type ``t`` (bf16 decoded)."""
    if t == "bf16":
        return bf16_to_f32(arr)
    return np.asarray(arr)


def assert_matches(got, want, out_type: str, tolerance, context: str = "") -> None:
    """``got`` equals ``want`` (same shape, numpy arrays of ``out_type``'s numpy dtype;
    bf16 as uint16 bits): bit-identical for ``tolerance`` None (NaN equals NaN, any
    payload), within ``tolerance`` ulps of the output type otherwise."""
    got = np.asarray(got)
    want = np.asarray(want)
    prefix = f"{context}: " if context else ""
    assert got.shape == want.shape, f"{prefix}shape {got.shape} != expected {want.shape}"
    assert got.dtype == NP_DTYPE[out_type], f"{prefix}dtype {got.dtype} != {NP_DTYPE[out_type]} ({out_type})"
    if out_type in FLOAT_TYPES:
        if tolerance is None:
            gb = _float_bits_signed(got, out_type)
            wb = _float_bits_signed(want, out_type)
            both_nan = _is_nan(got, out_type) & _is_nan(want, out_type)
            bad = (gb != wb) & ~both_nan
            dist = None
        else:
            dist = ulp_distance(got, want, out_type)
            bad = np.array([d > tolerance for d in dist.reshape(-1)], dtype=bool).reshape(got.shape)
    else:
        bad = got != want
        dist = None
    if bad.any():
        idx = list(zip(*np.nonzero(bad)))[:8]
        gs, ws = show(got, out_type), show(want, out_type)
        lines = []
        for i in idx:
            extra = f" ({dist[i]} ulp)" if dist is not None else ""
            lines.append(f"  at {tuple(int(j) for j in i)}: got {gs[i]!r}, want {ws[i]!r}{extra}")
        tol = "bit-identical" if tolerance is None else f"within {tolerance} ulp"
        raise AssertionError(
            f"{prefix}{int(bad.sum())} of {bad.size} elements differ ({out_type}, {tol}):\n" + "\n".join(lines)
        )


# Domains (low, high) of float data for the ops with a tolerance: no specials, and for
# the fused ops no cancellation (their f32 op math rounds several times).
DOMAINS = {
    "exp": (-5, 5),
    "log": (0.05, 20),
    "sin": (-4, 4),
    "cos": (-4, 4),
    "tanh": (-4, 4),
    "sigmoid": (-8, 8),
    "pow": (0.25, 4),
    "pow_s": (0.25, 4),
    "axpy": (0.5, 2),
    "axpby": (0.5, 2),
    "lerp": (1, 2),
    "recip_update": (0.5, 2),
    "silu": (-4, 4),
    "divmul": (-4, 4),
    "bias_relu": (-4, 4),
}
