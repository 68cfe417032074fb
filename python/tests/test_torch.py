"""torch operands: every op × type combination × layout class compared with the same
computation done by torch, on the CPU (the CPU twin) and on CUDA (the GPU kernels), plus
stream ordering, CUDA graph capture and bad inputs on the GPU.

The CUDA half skips (by name: ``[cuda-...]``) where ``torch.cuda.is_available()`` is
false; the CPU half runs anywhere torch is installed.

Where the library and torch legitimately differ, the data avoid it (or the comparison
allows it); each such place:

* Integer division by zero (library: 0; torch: raises on the CPU, garbage on CUDA) and
  ``MIN / -1``: the data have no zero divisor and no ``MIN`` dividend.  ``neg``/``abs``
  of ``MIN`` (wraps in the library, undefined in torch): not in the data.  (The NumPy
  suite covers these against the reference.)
* float -> int casts of NaN, infinities, negative values to unsigned types and values out
  of range (library: Rust ``as``, saturating, NaN -> 0; torch: undefined): cast data to
  integer types are in range.
* Casts from wide types (``f64``, ``i32``, ``i64``, ``u32``) to ``f16``/``bf16``: the
  library rounds once (round to odd through f32), torch converts to f32 first and rounds
  twice; the data are exactly representable in f32, where both agree.
* Signed zeros of ``min``, ``max``, ``min_s``, ``max_s``, ``relu``, ``clamp``: the library
  returns the first operand on ties (``max(-0.0, 0.0)`` is ``-0.0``), torch's vectorised
  and scalar paths disagree among themselves; these ops compare -0.0 equal to +0.0.
* ``sqrt``: torch 2.11's CPU ``sqrt`` is not correctly rounded (seen: f32 ``sqrt(7.3)``
  gives 2.70185113, the nearest f32 is 2.70185137; f64 is off by an ulp at times), so
  the square root is computed correctly rounded from torch's f64 one (the neighbour with
  the smallest exact residual), then rounded to the output type.
* ``rsqrt``: torch's CUDA ``rsqrt`` is an approximation; the library computes
  ``1 / sqrt(x)`` rounding twice in the op math type, which is compared with torch's
  ``1 / sqrt(x)`` computed by torch (f32 op math for 16-bit types, the square root as for
  ``sqrt``).
* ``fma``: torch has no fused multiply-add; ``a * b + c`` is computed by torch exactly
  (products in f64, the sum with TwoSum and rounding to odd, double-double for f64) and
  rounded once to f32/f64 (for 16-bit types then once more, as the library does).
* Ops with a tolerance (``exp log sin cos tanh sigmoid pow pow_s`` and the fused ops
  ``axpy axpby bias_relu silu divmul lerp recip_update``): torch computes in float64,
  the result is rounded to the output type and the library must be within the op's
  ulp bound of it; data for the fused ops have no cancellation.
* Scalars are exactly representable in every float type (the library rounds scalars to
  the element type first, torch keeps them in f32 op math for 16-bit tensors).
"""

import os
import re
import zlib

import pytest

torch = pytest.importorskip("torch")

import strided_apply as sa  # noqa: E402
from casecount import count_case  # noqa: E402
from reference import DOMAINS  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
READER = os.environ.get("STRIDED_APPLY_TORCH_READER")
NO_CUDA = "no CUDA device: torch.cuda.is_available() is False"
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA)
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]

TD = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u32": torch.uint32,
    "u8": torch.uint8,
    "bool": torch.bool,
}
FLOATS = ("f32", "f64", "f16", "bf16")
INTS = ("i32", "i64", "u32", "u8")
INT_RANGE = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1), "u32": (0, 2**32 - 1), "u8": (0, 255)}
BITS_VIEW = {"f32": torch.int32, "f64": torch.int64, "f16": torch.int16, "bf16": torch.int16}

INSTANCES = sorted(
    ((op, tuple(types), tuple(names), tol) for op, types, names, tol in sa.instances()), key=lambda i: (i[0], i[1])
)
OUT_TYPES = {}
for _op, _types, _names, _tol in INSTANCES:
    OUT_TYPES.setdefault((_op, _types[1:]), set()).add(_types[0])

TRANSCENDENTAL = ("exp", "log", "sin", "cos", "tanh", "sigmoid", "pow", "pow_s")
FUSED = ("axpy", "axpby", "bias_relu", "silu", "divmul", "lerp", "recip_update")
ZEROS_EQUAL = ("min", "max", "min_s", "max_s", "relu", "clamp")
DIVISION = ("div", "div_s", "rdiv_s", "div_assign", "div_assign_s")


def reads_out(op):
    return op.endswith("_assign") or op.endswith("_assign_s") or op == "recip_update"


def base_op(op):
    for suffix in ("_assign_s", "_assign", "_s"):
        if op.endswith(suffix):
            return op[: -len(suffix)]
    return op


# ----------------------------------------------------------------------------------------
# Data (generated on the CPU with a seeded generator, then moved).

SPECIALS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0, -1.0, 1e-40, 3e-6]
CAST_INT_DOMAIN = {"u8": (0, 250), "i32": (-2e9, 2e9), "u32": (0, 4e9), "i64": (-9e18, 9e18)}


def _rand(shape, g):
    return torch.rand(shape, generator=g, dtype=torch.float64)


def from_i64(x, t):
    """int64 values wrapped to integer type `t` (two's complement)."""
    if t == "i64":
        return x
    if t == "u32":
        return (x & 0xFFFFFFFF).to(torch.uint32)
    if t == "u8":
        return (x & 0xFF).to(torch.uint8)
    if t == "i32":
        return ((x + 2**31) & 0xFFFFFFFF).sub(2**31).to(torch.int32)
    if t == "bool":
        return x != 0
    raise KeyError(t)


def as_i64(x):
    return x.to(torch.int64)


def gen(op, types, role, t, shape, g):
    """Data for operand `role` (input index, or "out") of type `t`, on the CPU."""
    if t == "bool":
        return (_rand(shape, g) < 0.5)
    if t in INTS:
        lo, hi = INT_RANGE[t]
        small = (_rand(shape, g) * 41 - 20).round().to(torch.int64)
        if lo == 0:
            small = small.abs()
        extremes = torch.tensor([lo, hi, lo + 1, hi - 1, 0, 1, hi // 2 + 1] + ([-1] if lo < 0 else []), dtype=torch.int64)
        pick = _rand(shape, g) < 0.35
        idx = (_rand(shape, g) * len(extremes)).long().clamp_max(len(extremes) - 1)
        v = torch.where(pick, extremes[idx], small)
        if t == "u8":
            v = (_rand(shape, g) * 256).long().clamp_max(255)
        # Values torch does not define the library's way (module docstring).
        if op in DIVISION or op in ("neg", "abs"):
            v = torch.where(v == lo, torch.full_like(v, lo + 1), v) if lo < 0 else v
        divisor = (op == "div" and role == 1) or (op in ("div_assign", "rdiv_s") and role == 0)
        if divisor:
            v = torch.where(v == 0, torch.ones_like(v), v)
        if op == "cast" and types[0] in ("f16", "bf16", "f32"):
            v = v.clamp(-(2**24) + 1, 2**24 - 1) if lo < 0 else v.clamp(0, 2**24 - 1)
        return from_i64(v, t)
    # Floats.
    if op == "cast" and types[0] in INTS:
        # In range of the integer type, with a margin for the rounding to `t`.
        lo, hi = CAST_INT_DOMAIN[types[0]]
        if t == "f16":
            lo, hi = max(lo, -65504.0), min(hi, 65504.0)
        return (_rand(shape, g) * (hi - lo) + lo).to(TD[t])
    if op == "lerp" and role == 2:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = DOMAINS.get(op, (-8, 8))
    v = _rand(shape, g) * (hi - lo) + lo
    if op not in DOMAINS:
        pick = _rand(shape, g) < 0.3
        idx = (_rand(shape, g) * len(SPECIALS)).long().clamp_max(len(SPECIALS) - 1)
        v = torch.where(pick, torch.tensor(SPECIALS, dtype=torch.float64)[idx], v)
    if op == "cast" and t == "f64" and types[0] in ("f16", "bf16"):
        v = v.to(torch.float32).to(torch.float64)  # f32-representable (module docstring)
    return v.to(TD[t])


def scalars_for(op, t, names):
    if not names:
        return []
    if t == "bool":
        return [True]
    if t in FLOATS:
        table = {"clamp": [-1.0, 1.5], "axpy": [2.5], "axpby": [1.5, 0.75], "divmul": [3.0, 7.0], "fill": [-3.25], "pow_s": [1.5]}
        return table.get(op, [2.5])
    signed = INT_RANGE[t][0] < 0
    table = {"clamp": [-5, 100] if signed else [2, 100], "fill": [7], "rsub_s": [5]}
    return table.get(op, [3])


def scalar_type(op, types):
    if op.endswith("_s") and not op.endswith("_assign_s") and len(types) > 1:
        return types[1]
    return types[0]


# ----------------------------------------------------------------------------------------
# Layout classes.  A class builds an input operand of `shape` from data made by
# `make(base_shape)` (a CPU tensor), and an output view of a poisoned buffer.

SHAPE2 = (8, 12)
SHAPE3 = (4, 6, 5)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def in_contiguous(shape, i, make, dev):
    return make(shape).to(dev)


def in_noncontiguous(shape, i, make, dev):
    vals = make(shape).to(dev)
    if vals.dtype == torch.uint32:  # made as int32 (random uint32 is not in every build)
        t = torch.testing.make_tensor(shape, dtype=torch.int32, device=dev, noncontiguous=True).view(torch.uint32)
    else:
        t = torch.testing.make_tensor(shape, dtype=vals.dtype, device=dev, noncontiguous=True)
    t.copy_(vals)
    assert not t.is_contiguous()
    return t


def in_expand(shape, i, make, dev):
    small = list(shape)
    small[i % len(shape)] = 1
    return make(tuple(small)).to(dev).expand(shape)


def in_transpose(shape, i, make, dev):
    return make(tuple(reversed(shape))).to(dev).t()


def in_flip(shape, i, make, dev):
    x = make(shape).to(dev)
    if x.dtype == torch.uint32:  # no flip for uint32 in torch: through an int32 view
        return torch.flip(x.view(torch.int32), dims=(0, 1)).view(torch.uint32)
    return torch.flip(x, dims=(0, 1))  # torch.flip copies


def in_step2(shape, i, make, dev):
    if i % 2 == 0:
        return make((2 * shape[0],) + tuple(shape[1:])).to(dev)[::2]
    return make(tuple(shape[:-1]) + (2 * shape[-1],)).to(dev)[:, ::2]


def in_permute(shape, i, make, dev):
    perm = (1, 2, 0) if i % 2 == 0 else (2, 0, 1)
    base = [0] * 3
    for k, a in enumerate(perm):
        base[a] = shape[k]
    return make(tuple(base)).to(dev).permute(perm)


def in_as_strided(shape, i, make, dev):
    # Overlapping windows (an input may overlap itself): view[r, c] = base[r + c].
    base = make((shape[0] + shape[1] + 1,)).to(dev)
    return base.as_strided(shape, (1, 1), storage_offset=1)


def in_offset(shape, i, make, dev):
    return make((_numel(shape) + 3 + i,)).to(dev)[3 + i :].view(shape)


# Output views: (buffer size, view function on a 1-D buffer).
def out_contiguous(shape):
    return _numel(shape), lambda b: b.view(shape)


def out_transpose(shape):
    return _numel(shape), lambda b: b.view(tuple(reversed(shape))).t()


def out_step2(shape):
    return 2 * _numel(shape), lambda b: b.view((2 * shape[0],) + tuple(shape[1:]))[::2]


def out_noncontiguous(shape):
    return 2 * _numel(shape), lambda b: b.view(tuple(shape[:-1]) + (2 * shape[-1],))[..., ::2]


def out_offset(shape):
    return _numel(shape) + 7, lambda b: b[5 : 5 + _numel(shape)].view(shape)


def out_as_strided(shape):
    # Column-major without overlap: element (r, c) at r + c * rows, offset 2.
    return _numel(shape) + 2, lambda b: b.as_strided(shape, (1, shape[0]), storage_offset=2)


def out_permute(shape):
    return _numel(shape), lambda b: b.view((shape[2], shape[0], shape[1])).permute(1, 2, 0)


# name -> (shape, input builder, output builder, inputs can be written for injections)
LAYOUTS = {
    "contiguous": (SHAPE2, in_contiguous, out_contiguous, True),
    "noncontiguous": (SHAPE2, in_noncontiguous, out_noncontiguous, True),
    "expand": (SHAPE2, in_expand, out_contiguous, False),
    "transpose": (SHAPE2, in_transpose, out_contiguous, True),
    "out_transpose": (SHAPE2, in_contiguous, out_transpose, True),
    "flip": (SHAPE2, in_flip, out_offset, True),
    "step2": (SHAPE2, in_step2, out_step2, True),
    "permute": (SHAPE3, in_permute, out_permute, True),
    "as_strided": (SHAPE2, in_as_strided, out_as_strided, False),
    "storage_offset": (SHAPE2, in_offset, out_offset, True),
}

POISON = {"bool": 1, "u8": 0x5A, "u32": 0x5A5A5A5A, "i32": -0x5A5A5A5A, "i64": -0x5A5A5A5A5A5A, "f32": 1234.5, "f64": 1234.5, "f16": 1234.5, "bf16": 1234.5}


def poisoned(n, t, dev):
    if t == "u32":
        return torch.full((n,), POISON[t], dtype=torch.int64, device=dev).to(torch.uint32)
    if t == "bool":
        return torch.ones((n,), dtype=torch.bool, device=dev)
    return torch.full((n,), POISON[t], dtype=TD[t], device=dev)


# ----------------------------------------------------------------------------------------
# torch's results.


def _f64(x):
    return x.to(torch.float64)


def _exact_fma_f32(a, b, c):
    """a*b + c for f32 (or narrower) values, rounded once to f32: the product is exact in
    f64, the f64 sum is rounded to odd with TwoSum's error term."""
    p = _f64(a) * _f64(b)
    c = _f64(c)
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    odd_bits = s.view(torch.int64) & 1
    finite = torch.isfinite(s)
    need = (err != 0) & (odd_bits == 0) & finite
    toward = torch.where(err > 0, torch.full_like(s, float("inf")), torch.full_like(s, float("-inf")))
    s = torch.where(need, torch.nextafter(s, toward), s)
    return s.to(torch.float32)


def _two_prod(a, b):
    split = 134217729.0  # 2^27 + 1
    def halves(x):
        t = split * x
        hi = t - (t - x)
        return hi, x - hi
    p = a * b
    ah, al = halves(a)
    bh, bl = halves(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _exact_fma_f64(a, b, c):
    """a*b + c for f64 in double-double arithmetic (exact product, TwoSum), rounded once
    but for sums within 2^-100 of a tie."""
    p, e = _two_prod(a, b)
    s = p + c
    bb = s - p
    t = (p - (s - bb)) + (c - bb)
    r = s + (t + e)
    naive = a * b + c
    r = torch.where(r == 0, p + c, r)  # an exact zero: its sign as IEEE's p + c gives it
    return torch.where(torch.isfinite(r), r, naive)


def _sqrt_f64(x):
    """Correctly rounded f64 square root.  (torch 2.11's CPU sqrt is not: it gives
    sqrt(7.3f) = 2.70185113 in f32 where the nearest f32 is 2.70185137.)  The candidate
    among torch.sqrt's result and its neighbours with the smallest exact residual."""
    tiny = x < 2.0**-900
    xs = torch.where(tiny, x * 2.0**200, x)
    r = torch.sqrt(xs)
    best, best_res = r, None
    for cand in (r, torch.nextafter(r, torch.full_like(r, float("inf"))), torch.nextafter(r, torch.zeros_like(r))):
        p, e = _two_prod(cand, cand)
        res = ((p - xs) + e).abs()
        if best_res is None:
            best_res = res
        else:
            better = res < best_res
            best = torch.where(better, cand, best)
            best_res = torch.where(better, res, best_res)
    ok = torch.isfinite(r) & (xs > 0)
    out = torch.where(ok, best, r)
    return torch.where(tiny & ok, out * 2.0**-100, out)


def _full(like, v, t):
    if t == "u32":
        return torch.full(like.shape, v, dtype=torch.int64, device=like.device).to(torch.uint32)
    return torch.full(like.shape, v, dtype=TD[t], device=like.device)


def _binary_torch(op, out_t, ta, tb, a, b):
    """torch's `op(a, b)` with the library's output type."""
    cmp = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
    if op in cmp:
        if ta in INTS:
            return cmp[op](as_i64(a), as_i64(b))
        return cmp[op](a, b)
    if out_t in INTS:
        x, y = as_i64(a), as_i64(b)
        r = {
            "add": lambda: x + y,
            "sub": lambda: x - y,
            "mul": lambda: x * y,
            "div": lambda: torch.div(x, y, rounding_mode="trunc"),
            "min": lambda: torch.minimum(x, y),
            "max": lambda: torch.maximum(x, y),
        }[op]()
        return from_i64(r, out_t)
    fn = {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "min": torch.minimum,
        "max": torch.maximum,
    }[op]
    if ta != tb:  # mixed: torch promotes to f32 and computes there; then rounds to out
        return fn(a, b).to(TD[out_t])
    return fn(a, b)


def expected(op, types, inputs, scalars, out_init):
    """(torch's result with dtype types[0], comparison mode: 'exact' or an ulp count)."""
    out_t, in_ts = types[0], types[1:]
    bop = base_op(op)

    if op == "fill":
        return _full(out_init, scalars[0], out_t), "exact"
    if op.endswith("_assign"):
        return _binary_torch(bop, out_t, out_t, in_ts[0], out_init, inputs[0]), "exact"
    if op.endswith("_assign_s"):
        return _binary_torch(bop, out_t, out_t, out_t, out_init, _full(out_init, scalars[0], out_t)), "exact"
    if op in ("rsub_s", "rdiv_s"):
        a = inputs[0]
        bop = {"rsub_s": "sub", "rdiv_s": "div"}[op]
        return _binary_torch(bop, out_t, in_ts[0], in_ts[0], _full(a, scalars[0], in_ts[0]), a), "exact"
    if op == "pow_s":
        return torch.pow(_f64(inputs[0]), scalars[0]).to(TD[out_t]), "ulp"
    if op.endswith("_s"):
        a = inputs[0]
        return _binary_torch(bop, out_t, in_ts[0], in_ts[0], a, _full(a, scalars[0], in_ts[0])), "exact"
    if op == "pow":
        return torch.pow(_f64(inputs[0]), _f64(inputs[1])).to(TD[out_t]), "ulp"
    if len(in_ts) == 2 and op in ("add", "sub", "mul", "div", "min", "max", "eq", "ne", "lt", "le", "gt", "ge"):
        return _binary_torch(op, out_t, in_ts[0], in_ts[1], inputs[0], inputs[1]), "exact"

    if op in ("neg", "abs", "relu"):
        a = inputs[0]
        if out_t in INTS:
            x = as_i64(a)
            r = {"neg": torch.neg, "abs": torch.abs, "relu": lambda v: torch.clamp_min(v, 0)}[op](x)
            return from_i64(r, out_t), "exact"
        return {"neg": torch.neg, "abs": torch.abs, "relu": torch.relu}[op](a), "exact"
    if op == "sqrt":
        return _sqrt_f64(_f64(inputs[0])).to(TD[out_t]), "exact"
    if op == "rsqrt":
        # 1 / sqrt(x) in the op math type (f64 for f64, f32 otherwise), rounding twice.
        math_t = torch.float64 if out_t == "f64" else torch.float32
        root = _sqrt_f64(_f64(inputs[0])).to(math_t)
        return (torch.ones_like(root) / root).to(TD[out_t]), "exact"
    if op in ("exp", "log", "sin", "cos", "tanh", "sigmoid"):
        fn = getattr(torch, op)
        return fn(_f64(inputs[0])).to(TD[out_t]), "ulp"
    if op == "clamp":
        lo, hi = scalars
        if out_t in INTS:
            return from_i64(torch.clamp(as_i64(inputs[0]), lo, hi), out_t), "exact"
        return torch.clamp(inputs[0], lo, hi), "exact"
    if op == "fma":
        a, b, c = inputs
        if out_t in INTS:
            return from_i64(as_i64(a) * as_i64(b) + as_i64(c), out_t), "exact"
        if out_t == "f64":
            return _exact_fma_f64(a, b, c), "exact"
        return _exact_fma_f32(a, b, c).to(TD[out_t]), "exact"
    if op == "where":
        cond, a, b = inputs
        if out_t == "u32":
            return from_i64(torch.where(cond, as_i64(a), as_i64(b)), out_t), "exact"
        return torch.where(cond, a, b), "exact"
    if op == "cast":
        a = inputs[0]
        if out_t == "u32" and in_ts[0] in FLOATS:
            return a.to(torch.float64).to(torch.int64).to(torch.uint32), "exact"  # in range
        return a.to(TD[out_t]), "exact"
    if op in FUSED:
        s = [float(_full(inputs[0] if inputs else out_init, v, out_t).to(torch.float64).flatten()[0]) for v in scalars]
        v = [_f64(x) for x in inputs]
        if op == "axpy":
            r = s[0] * v[0] + v[1]
        elif op == "axpby":
            r = s[0] * v[0] + s[1] * v[1]
        elif op == "bias_relu":
            r = torch.relu(v[0] + v[1])
        elif op == "silu":
            r = torch.nn.functional.silu(v[0])
        elif op == "divmul":
            r = (v[0] / s[0]) * (v[1] / s[1])
        elif op == "lerp":
            r = torch.lerp(v[0], v[1], v[2])
        else:  # recip_update
            a = _f64(out_init)
            r = a + 1.0 / a + 2.0 * a * v[0]
        return r.to(TD[out_t]), "ulp"
    raise KeyError(op)


# ----------------------------------------------------------------------------------------
# Comparison in torch (no NumPy needed).


def _float_key(x, t):
    i = x.contiguous().view(BITS_VIEW[t]).to(torch.int64)
    lo = -(2 ** (8 * x.element_size() - 1))
    return torch.where(i < 0, lo - i, i)


def assert_same(got, want, t, tol, zeros_equal=False, ctx=""):
    """Bit-identical (NaN equals NaN; -0.0 equals 0.0 with `zeros_equal`) when `tol` is
    None, else within `tol` ulps of type `t`."""
    assert got.shape == want.shape, f"{ctx}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == TD[t], f"{ctx}: dtype {got.dtype} != {TD[t]}"
    assert got.device == want.device, f"{ctx}: device {got.device} != {want.device}"
    if t in FLOATS:
        gn, wn = torch.isnan(got), torch.isnan(want)
        if tol is None:
            same = got.contiguous().view(BITS_VIEW[t]) == want.contiguous().view(BITS_VIEW[t])
            if zeros_equal:
                same |= (got == 0) & (want == 0)
            bad = ~(same | (gn & wn))
        else:
            d = (_float_key(got, t) - _float_key(want, t)).abs()
            d = torch.where(d < 0, torch.full_like(d, 2**62), d)
            d = torch.where(gn & wn, torch.zeros_like(d), d)
            d = torch.where(gn ^ wn, torch.full_like(d, 2**62), d)
            bad = d > tol
    else:
        g, w = (got.to(torch.int64), want.to(torch.int64)) if t != "bool" else (got, want)
        bad = g != w
    if bool(bad.any()):
        idx = bad.nonzero()[:6].tolist()
        lines = []
        for i in idx:
            i = tuple(i)
            gv, wv = got[i].item(), want[i].item()
            lines.append(f"  at {i}: got {gv!r}, want {wv!r}")
        kind = "bit-identical" if tol is None else f"within {tol} ulp"
        raise AssertionError(f"{ctx}: {int(bad.sum())} of {bad.numel()} elements differ ({t}, {kind}):\n" + "\n".join(lines))


def bits_of(t):
    """Comparable bit patterns of a whole buffer."""
    if t.dtype == torch.bool:
        return t.clone()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(view).clone()


# ----------------------------------------------------------------------------------------
# Every op × type combination × layout class × device, compared with torch.


def case_id(inst):
    op, types, _, _ = inst
    return f"{op}-{'_'.join(types)}"


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("inst", INSTANCES, ids=case_id)
@pytest.mark.parametrize("device", DEVICES)
def test_op_matches_torch(device, inst, layout):
    op, types, names, tol = inst
    out_t, in_ts = types[0], types[1:]
    shape, in_make, out_make, writable = LAYOUTS[layout]
    g = torch.Generator().manual_seed(zlib.crc32(f"{op} {types} {layout}".encode()))

    inputs = []
    for i, t in enumerate(in_ts):
        inputs.append(in_make(shape, i, lambda s, i=i, t=t: gen(op, types, i, t, s, g), device))
    if writable and len(inputs) >= 2 and in_ts[0] == in_ts[1] and not (op == "div" and in_ts[0] in INTS):
        tie = (_rand(shape, g) < 0.3).to(device)
        if in_ts[0] == "u32":  # no index_put for uint32 in torch: through int32 views
            inputs[1].view(torch.int32)[tie] = inputs[0].view(torch.int32)[tie]
        else:
            inputs[1][tie] = inputs[0][tie]
    scalars = scalars_for(op, scalar_type(op, types), names)
    if writable and op.endswith("_s") and inputs and in_ts[0] != "bool":
        first = (0,) * len(shape)
        if in_ts[0] == "u32":
            inputs[0].view(torch.int32)[first] = from_i64(torch.tensor(scalars[0]), "u32").view(torch.int32)
        else:
            inputs[0][first] = scalars[0]  # the scalar among the data (eq_s, ...)

    n, out_view = out_make(shape)
    if reads_out(op):
        buf = gen(op, types, "out", out_t, (n,), g).to(device)
    else:
        buf = poisoned(n, out_t, device)
    out = out_view(buf)
    out_init = out.clone()
    buf_before = bits_of(buf)
    inputs_before = [x.clone() for x in inputs]

    want, mode = expected(op, types, inputs, scalars, out_init)
    got = getattr(sa, op)(*inputs, *scalars, out=out)
    assert got is out, "with out= the call returns out itself"
    ctx = f"{op} {types} {layout} {device}"
    tol_cmp = None if mode == "exact" else tol
    if mode == "ulp":
        assert tol is not None, f"{ctx}: torch is compared within a tolerance but the op has none"
    assert_same(out, want, out_t, tol_cmp, zeros_equal=op in ZEROS_EQUAL or op == "clamp", ctx=ctx)
    idx = torch.arange(n, device=device)
    covered = torch.zeros(n, dtype=torch.bool, device=device)
    covered[out_view(idx).reshape(-1)] = True
    after = bits_of(buf)
    assert bool((after[~covered] == buf_before[~covered]).all()), f"{ctx}: wrote outside out"
    for x, before in zip(inputs, inputs_before):
        assert bool((bits_of(x) == bits_of(before)).all()), f"{ctx}: an input changed"

    if inputs and not reads_out(op):
        kwargs = {}
        if len(OUT_TYPES[(op, in_ts)]) > 1:
            kwargs["dtype"] = TD[out_t]
        new = getattr(sa, op)(*inputs, *scalars, **kwargs)
        assert isinstance(new, torch.Tensor), type(new)
        assert new.device == inputs[0].device
        assert tuple(new.shape) == tuple(torch.broadcast_shapes(*(x.shape for x in inputs)))
        assert_same(new, want, out_t, tol_cmp, zeros_equal=op in ZEROS_EQUAL, ctx=ctx + " (out omitted)")
    count_case("torch", device)


# ----------------------------------------------------------------------------------------
# Streams and CUDA graphs.


@needs_cuda
def test_result_used_by_torch_on_the_same_stream_without_sync():
    s = torch.cuda.Stream()
    n = 1 << 22
    with torch.cuda.stream(s):
        a = torch.empty(n, device="cuda")
        b = torch.rand(n, device="cuda")
        # A long kernel queued before the one that writes `a`: if our call ran on another
        # stream, it would read `a` before it is written.
        torch.cuda._sleep(50_000_000)
        a.fill_(2.0)
        c = sa.add(a, b)
        d = c * 2
        e = sa.mul_s(d, 0.5)
    s.synchronize()
    want = (2.0 + b) * 2
    assert torch.equal(d, want)
    assert torch.equal(e, want * 0.5)
    assert torch.cuda.current_stream() == torch.cuda.default_stream()


@needs_cuda
def test_explicit_stream_argument():
    s = torch.cuda.Stream()
    a = torch.rand(1 << 20, device="cuda")
    out = torch.empty_like(a)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        a.mul_(3.0)
    sa.add_s(a, 1.0, out=out, stream=s)  # queued on s, after the multiply
    s.synchronize()
    torch.cuda.synchronize()
    assert torch.equal(out, a + 1.0)


@needs_cuda
def test_cuda_graph_capture_and_replay():
    a = torch.rand(4096, device="cuda")
    b = torch.rand(64, 64, device="cuda")
    c = torch.empty(4096, device="cuda")
    d = torch.empty(64, 64, device="cuda")
    # Warm up on a side stream before capture (torch.cuda.graph's documented recipe).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            sa.add_s(a, 1.0, out=c)
            sa.add(b, b.t(), out=d)
            sa.mul_s(a, 2.0)
    torch.cuda.current_stream().wait_stream(side)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        sa.add_s(a, 1.0, out=c)
        sa.add(b, b.t(), out=d)
        e = sa.mul_s(a, 2.0)  # output allocated inside the capture (graph pool)
    for k in range(3):
        a.copy_(torch.rand(4096, device="cuda"))
        b.copy_(torch.rand(64, 64, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(c, a + 1.0), k
        assert torch.equal(d, b + b.t()), k
        assert torch.equal(e, a * 2.0), k


# ----------------------------------------------------------------------------------------
# Bad input (GPU): the right exception, and `out` untouched.


def _names(msg, name):
    """Whether an error message names argument `name` (as a word)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", msg) is not None


def _untouched(out):
    before = bits_of(out)
    return lambda: torch.equal(bits_of(out), before)


@needs_cuda
def test_cpu_tensor_mixed_with_cuda_tensor():
    a = torch.rand(3, 5, device="cuda")
    b = torch.rand(3, 5)
    out = torch.full((3, 5), 7.0, device="cuda")
    same = _untouched(out)
    with pytest.raises(sa.DeviceError):
        sa.add(a, b, out=out)
    with pytest.raises(sa.DeviceError):
        sa.add(a, a, out=torch.zeros(3, 5))
    with pytest.raises(sa.DeviceError):
        sa.add(b, a)
    assert same()


@needs_cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2 if HAS_CUDA else True, reason="fewer than two CUDA devices")
def test_two_gpus():
    a = torch.rand(3, 5, device="cuda:0")
    b = torch.rand(3, 5, device="cuda:1")
    out = torch.zeros(3, 5, device="cuda:0")
    same = _untouched(out)
    with pytest.raises(sa.DeviceError):
        sa.add(a, b, out=out)
    assert same()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["complex64", "float8_e4m3fn"])
@pytest.mark.parametrize("which", ["a", "out"])
def test_unsupported_dtype(device, dtype, which):
    bad_dtype = getattr(torch, dtype)
    a = torch.rand(3, 5, device=device)
    out = torch.full((3, 5), 7.0, device=device)
    if which == "a":
        a = a.to(bad_dtype)
    else:
        out = out.to(bad_dtype)
    same = _untouched(out)
    with pytest.raises(sa.DtypeError) as e:
        sa.neg(a, out=out)
    assert _names(str(e.value), which), str(e.value)
    assert same()


@pytest.mark.parametrize("device", DEVICES)
def test_out_partially_overlapping_an_input(device):
    base = torch.arange(20, dtype=torch.float32, device=device)
    a = base[0:15].view(3, 5)
    out = base[1:16].view(3, 5)
    same = _untouched(base)
    with pytest.raises(sa.LayoutError):
        sa.add_s(a, 1.0, out=out)
    with pytest.raises(sa.LayoutError):
        sa.add(torch.ones(3, 5, device=device), a, out=out)
    assert same()


@pytest.mark.parametrize("device", DEVICES)
def test_out_expanded(device):
    base = torch.arange(5, dtype=torch.float32, device=device)
    out = base.expand(3, 5)
    same = _untouched(base)
    with pytest.raises(sa.LayoutError) as e:
        sa.neg(torch.ones(3, 5, device=device), out=out)
    assert _names(str(e.value), "out"), str(e.value)
    assert same()


@pytest.mark.parametrize("device", DEVICES)
def test_dlpack_capsule_consumed_twice(device):
    a = torch.rand(3, 5, device=device)
    out = torch.full((3, 5), 7.0, device=device)
    same = _untouched(out)
    cap = a.__dlpack__()
    with pytest.raises(sa.DlpackError):
        sa.add(cap, cap, out=out)
    assert same()


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_same_layout(device):
    a = torch.rand(6, 4, device=device)
    want = a * 3
    sa.mul_s(a, 3.0, out=a)
    assert torch.equal(a, want)
    t = a.t()
    want = t + 1
    sa.add_s(t, 1.0, out=t)
    assert torch.equal(t, want)


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_argument_forms(device):
    a = torch.arange(6, dtype=torch.int32, device=device)
    for dtype in (torch.float32, "f32", "float32", "torch.float32"):
        r = sa.cast(a, dtype=dtype)
        assert r.dtype == torch.float32 and r.device == a.device
        assert torch.equal(r, a.float())
    with pytest.raises(sa.OpError):
        sa.cast(a)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_scalar_rounds_to_nearest(device):
    """A float scalar converts to the element type rounded to nearest even (FromScalar):
    1 + 2^-8 + 2^-40 is just above the tie between 1 and 1 + 2^-7, so it rounds up."""
    s = 1 + 2**-8 + 2**-40
    want = 1 + 2**-7  # rounded once; torch's f64 -> f32 -> bf16 rounds twice and gives 1.0
    assert torch.tensor(want, dtype=torch.bfloat16).item() == want
    z = torch.zeros(4, dtype=torch.bfloat16, device=device)
    assert sa.add_s(z, s).tolist() == [want] * 4
    assert sa.fill(s, out=z).tolist() == [want] * 4


@needs_cuda
def test_cuda_tensors_are_read_through_libtorchs_c_shim():
    """torch.Tensor and Parameter operands on CUDA are read by libtorch's C shim, with the
    TensorImpl pointer and the negative bit read without Python (both calibrated on probes),
    not by six Python calls: the per-call host-time figure depends on it."""
    sa.add(torch.ones(2, device="cuda"), torch.ones(2, device="cuda"))
    r = sa._native._torch_reader()
    if READER == "python":
        assert r == "python: STRIDED_APPLY_TORCH_READER=python", r
    elif READER == "shim":
        assert r.startswith("shim, _cdata by attribute, is_neg() by Python"), r
    else:
        assert re.fullmatch(r"shim, TensorImpl pointer at offset \d+, at::native::is_neg", r), r


@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint8", "int64"])
def test_views_read_by_the_shim_match_torch(dtype):
    """Storage offsets, transposes, steps, expands and zero-size views, each element type's
    code: through the shim (torch.Tensor, Parameter) and the Python reads (a subclass)."""
    dt = getattr(torch, dtype)
    base = (torch.arange(4 * 6 * 10, device="cuda") % 97).to(dt).view(4, 6, 10)

    class Sub(torch.Tensor):
        pass

    views = [
        base[1:, 2:5, ::3],
        base.permute(2, 0, 1)[3:7],
        base[2, :, 4:5].expand(6, 3),
        base.as_strided((3, 4), (7, 2), 11),
        base[:, 3:3],
        torch.nn.Parameter(base[1], requires_grad=False),
        base[0].as_subclass(Sub),
    ]
    for v in views:
        got = sa.add(v, v)
        assert torch.equal(got.as_subclass(torch.Tensor), (v + v).as_subclass(torch.Tensor)), v.shape


@needs_cuda
def test_negative_bit_view_is_refused():
    """A lazy negation view (torch's negative bit: memory holds -x) is a LayoutError naming
    the operand, through the shim and the Python reads, and out stays untouched."""
    a = torch.rand(3, 5, device="cuda")
    out = torch.full((3, 5), 7.0, device="cuda")
    same = _untouched(out)

    class Sub(torch.Tensor):
        pass

    z = torch.rand(3, 5, dtype=torch.complex64, device="cuda")
    for neg in (torch._neg_view(a), z.conj().imag, torch._neg_view(a).as_subclass(Sub)):
        assert neg.is_neg()
        with pytest.raises(sa.LayoutError) as e:
            sa.add(a, neg, out=out)
        assert _names(str(e.value), "b"), str(e.value)
    with pytest.raises(sa.LayoutError) as e:
        sa.neg(a, out=torch._neg_view(out))
    assert _names(str(e.value), "out"), str(e.value)
    assert same()


@pytest.mark.parametrize("device", DEVICES)
def test_other_type_combinations_promote_as_torch(device):
    # Element types no kernel is instantiated for run as the op's program, promoted as
    # torch.result_type and rounded once: torch's own result, bit for bit, for exact ops.
    g = torch.Generator().manual_seed(7)
    a = torch.randn(33, 65, generator=g).to(device)
    cases = [
        (sa.add, torch.add, a.to(torch.bfloat16), a.t().contiguous().t() * 3),
        (sa.mul, torch.mul, a.to(torch.float16), a.to(torch.float64)),
        (sa.sub, torch.sub, (a * 10).to(torch.int32), a.to(torch.bfloat16)),
        (sa.max, torch.maximum, (a * 5).to(torch.uint8), a),
    ]
    for ours, theirs, x, y in cases:
        want = theirs(x, y)
        got = ours(x, y)
        assert got.dtype == want.dtype, (ours, x.dtype, y.dtype, got.dtype, want.dtype)
        assert torch.equal(got, want), (ours, x.dtype, y.dtype)
    # A comparison of two types, and a float op of integers (the default float).
    assert torch.equal(sa.lt(a.to(torch.float16), a.to(torch.bfloat16)), torch.lt(a.to(torch.float16), a.to(torch.bfloat16)))
    i = (a * 10).to(torch.int32).abs()
    got = sa.sqrt(i)
    assert got.dtype == torch.float32
    assert torch.allclose(got, torch.sqrt(i), rtol=0, atol=0)
