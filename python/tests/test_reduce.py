"""Reductions by id (``sa.sum``, ``sa.amax``, ``sa.mean``, …): NumPy arrays on the CPU twin
against NumPy, and torch tensors against torch and against the CPU twin.

- Inputs of small integers stored as floats make every summation order exact, so sums,
  means of power-of-two counts, min and max compare bit for bit with NumPy and torch.
- Random floats compare within a relative bound with torch (other order), and **bit for
  bit between the GPU and the CPU twin** (the same order on both: the library's promise).
Layouts: contiguous, transposed, reversed, ``[::2]``, expanded; axes: last, first, several,
all, none given (every axis), negative; ``keepdim``; then bad calls.

Arg reductions (``argmin``, ``argmax``: int64, first index on ties, NaN wins), ``all`` and
``any`` (bool; NaN counts as true) compare exactly; the two-input reductions (``sqdiff``,
``dot``) over small integers exactly, their inputs broadcast to one shape."""

import zlib

import numpy as np
import pytest

import strided_apply as sa
from casecount import count_case

SHAPE = (6, 8, 4)
DIMS = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2)]
NP_TYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
NP_REF = {"sum": np.sum, "prod": np.prod, "amin": np.min, "amax": np.max, "mean": np.mean}
FLOAT_ONLY = {"mean", "sumsq", "norm2"}
ARG = ["argmax", "argmin"]
BOOL = ["all", "any"]
MAP = ["dot", "sqdiff"]
# Element types of the new reductions on the NumPy path (NumPy has no bfloat16).
NP_ARG_TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32,
                "i64": np.int64, "u32": np.uint32, "u8": np.uint8}
NP_BOOL_TYPES = dict(NP_ARG_TYPES, bool=np.bool_)
NP_MAP_TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def small_ints(shape, seed, lo=-4, hi=5):
    g = np.random.default_rng(seed)
    return g.integers(lo, hi, size=shape).astype(np.float64)


def np_layouts(base):
    return [
        ("contiguous", lambda: base.copy()),
        ("transposed", lambda: np.ascontiguousarray(base.transpose(2, 1, 0)).transpose(2, 1, 0)),
        ("reversed", lambda: np.ascontiguousarray(base[::-1, :, ::-1])[::-1, :, ::-1]),
        ("step2", lambda: np.repeat(base, 2, axis=1)[:, ::2]),
        ("expanded", lambda: np.broadcast_to(base[:, :1], SHAPE)),
    ]


def reference(rid, x, dim, keepdim, t="f64"):
    axis = dim if dim is None or isinstance(dim, tuple) else (dim,)
    x = np.asarray(x, np.float64)
    if rid == "mean":
        # The exact sum divided once in the type (f32 for narrower ones), as the library.
        s = np.sum(x, axis=axis, keepdims=keepdim)
        n = x.size // max(np.size(s), 1) if x.size else 0
        ft = np.float64 if t == "f64" else np.float32
        with np.errstate(invalid="ignore"):
            return np.asarray(s, ft) / ft(n)
    if rid == "sumsq":
        return np.sum(x * x, axis=axis, keepdims=keepdim)
    if rid == "norm2":
        return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdim))
    return NP_REF[rid](x, axis=axis, keepdims=keepdim)


def test_reduce_ids_are_functions():
    ids = sa.reduce_ids()
    assert ids == sorted(["sum", "prod", "amin", "amax", "mean", "sumsq", "norm2",
                          "argmin", "argmax", "all", "any", "sqdiff", "dot"])
    for i in ids:
        assert callable(getattr(sa, i)) and i in sa.__all__
    assert callable(sa.map_reduce) and "map_reduce" in sa.__all__


def test_reduce_families_types():
    fam = {(r, t): (k, o) for r, t, k, o in sa.reduce_families()}
    assert {r for r, _ in fam} == set(sa.reduce_ids())
    numeric = {"f32", "f64", "i32", "i64", "u32", "u8", "f16", "bf16"}
    for r in ARG:
        assert {t for q, t in fam if q == r} == numeric
        assert all(fam[r, t] == (1, "i64") for t in numeric)
    for r in BOOL:
        assert {t for q, t in fam if q == r} == numeric | {"bool"}
        assert all(fam[r, t] == (1, "bool") for t in numeric | {"bool"})
    for r in MAP:
        assert {t for q, t in fam if q == r} == {"f32", "f64", "f16", "bf16"}
        assert all(fam[r, t] == (2, t) for t in ("f32", "f64", "f16", "bf16"))
    assert fam["sum", "f32"] == (1, "f32")


@pytest.mark.parametrize("rid", sorted(["sum", "prod", "amin", "amax", "mean", "sumsq"]))
@pytest.mark.parametrize("t", sorted(NP_TYPES))
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_numpy_matches_reference(rid, t, dim, keepdim):
    if rid in FLOAT_ONLY and t not in ("f32", "f64"):
        pytest.skip("float-only reduction")
    # Products of up to 192 values in [-1, 1]: exact in every type.
    lo, hi = (-1, 2) if rid == "prod" else (-4, 5)
    base = small_ints(SHAPE, zlib.crc32(repr((rid, t, dim)).encode()), lo, hi)
    for name, make in np_layouts(base.astype(NP_TYPES[t])):
        x = make()
        want = reference(rid, x, dim, keepdim, t)
        got = getattr(sa, rid)(x, dim, keepdim)
        assert got.dtype == NP_TYPES[t], f"{rid} {t} {name}"
        assert got.shape == np.shape(want), f"{rid} {t} {name} {dim} {keepdim}"
        np.testing.assert_array_equal(got, np.asarray(want).astype(NP_TYPES[t]),
                                      err_msg=f"{rid} {t} {name} {dim} {keepdim}")
        count_case("reduce", "cpu")


def test_norm2_and_random_sums_are_close_to_float64():
    g = np.random.default_rng(7)
    x = g.standard_normal((300, 1000)).astype(np.float32)
    for dim in (0, 1, None):
        want = np.sqrt((x.astype(np.float64) ** 2).sum(axis=dim))
        np.testing.assert_allclose(sa.norm2(x, dim), want, rtol=2e-6)
        np.testing.assert_allclose(sa.sum(x, dim), x.astype(np.float64).sum(axis=dim),
                                   rtol=1e-5, atol=1e-3)
        count_case("reduce", "cpu")


def test_same_values_any_layout_same_bits():
    g = np.random.default_rng(3)
    x = g.standard_normal((64, 33, 40)).astype(np.float32)
    xt = np.ascontiguousarray(x.transpose(2, 0, 1)).transpose(1, 2, 0)
    assert np.array_equal(x, xt) and not xt.flags.c_contiguous
    for dim in (0, 1, 2, (0, 2), None):
        a, b = sa.sum(x, dim), sa.sum(xt, dim)
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), dim


def test_amax_amin_order_signed_zeros():
    """``amax`` is +0 and ``amin`` -0 whenever a row holds both zeros, wherever they are
    (IEEE 754-2019 maximum/minimum: the GPU's ``max.NaN`` and the twin agree); a row of one
    zero gives that zero; a NaN still wins."""
    for t in (np.float32, np.float64, np.float16):
        x = np.array([[-0.0, 0.0, -0.0], [0.0, -0.0, -0.0], [-0.0, -0.0, -0.0],
                      [0.0, 0.0, 0.0], [0.0, np.nan, -0.0]], t)
        hi, lo = sa.amax(x, 1), sa.amin(x, 1)
        assert np.signbit(hi[:4]).tolist() == [False, False, True, False]
        assert np.signbit(lo[:4]).tolist() == [True, True, True, False]
        assert np.isnan(hi[4]) and np.isnan(lo[4])


def test_empty_reductions():
    z = np.zeros((0, 3), np.float32)
    assert sa.sum(z, 0).tolist() == [0.0, 0.0, 0.0]
    assert sa.prod(z, 0).tolist() == [1.0, 1.0, 1.0]
    assert np.isnan(sa.mean(z, 0)).all()
    with pytest.raises(sa.OpError, match="no elements"):
        sa.amax(z, 0)
    assert sa.sum(np.zeros((3, 0), np.float32), 0).shape == (0,)


def test_bad_reduce_calls_raise_and_leave_out_untouched():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    out = np.full(4, 7.0, np.float32)
    with pytest.raises(sa.OpError, match="median"):
        sa.reduce("median", x, 1, out=out)
    with pytest.raises(sa.DtypeError, match="not instantiated"):
        sa.mean(np.zeros((4, 5), np.int32), 1)
    with pytest.raises(IndexError, match="dim"):
        sa.sum(x, 2, out=out)
    with pytest.raises(ValueError, match="twice"):
        sa.sum(x, (1, -1), out=out)
    with pytest.raises(sa.LayoutError, match="reduced shape"):
        sa.sum(x, 0, out=out)
    with pytest.raises(sa.DtypeError, match="out"):
        sa.sum(x, 1, out=out.astype(np.float64))
    with pytest.raises(sa.LayoutError, match="share"):
        sa.sum(x, 1, out=x[:, 0])
    assert (out == 7.0).all()


def axes_of(dim, ndim):
    """``dim`` (None, an int or a tuple, negative from the end) as sorted non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    d = (dim,) if isinstance(dim, int) else dim
    return tuple(sorted(a % ndim for a in d))


def np_arg_reference(rid, x, dim, keepdim):
    """argmin/argmax over the axes of ``dim``: the position in the row-major order of the
    reduced axes (NumPy's argmax over those axes moved last and flattened: first index on
    ties, the first NaN wins)."""
    x = np.asarray(x)
    axes = axes_of(dim, x.ndim)
    kept = [a for a in range(x.ndim) if a not in axes]
    y = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [-1])
    r = (np.argmax if rid == "argmax" else np.argmin)(y, axis=-1).astype(np.int64)
    if keepdim:
        r = r.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
    return r


def np_bool_reference(rid, x, dim, keepdim):
    """all/any: NumPy's, over ``x != 0`` (a NaN is nonzero)."""
    x = np.asarray(x)
    f = np.all if rid == "all" else np.any
    return f(x != 0, axis=axes_of(dim, x.ndim), keepdims=keepdim)


def ties_and_nans(seed, t, shape=SHAPE, nan_frac=0.04):
    """Small integers (many ties) in the type; for float types a few NaNs, some rows several."""
    g = np.random.default_rng(seed)
    x = g.integers(0 if t.startswith("u") else -3, 4, size=shape).astype(np.float64)
    if t.startswith("f") or t == "bf16":
        x[g.random(shape) < nan_frac] = np.nan
    return x


@pytest.mark.parametrize("rid", ARG)
@pytest.mark.parametrize("t", sorted(NP_ARG_TYPES))
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_numpy_arg_reductions(rid, t, dim, keepdim):
    base = ties_and_nans(zlib.crc32(repr((rid, t, dim)).encode()), t).astype(NP_ARG_TYPES[t])
    for name, make in np_layouts(base):
        x = make()
        want = np_arg_reference(rid, x, dim, keepdim)
        got = getattr(sa, rid)(x, dim, keepdim)
        assert got.dtype == np.int64, f"{rid} {t} {name}"
        assert got.shape == want.shape, f"{rid} {t} {name} {dim} {keepdim}"
        np.testing.assert_array_equal(got, want, err_msg=f"{rid} {t} {name} {dim} {keepdim}")
        count_case("reduce", "cpu")


def test_numpy_arg_nan_and_ties():
    x = np.array([[1, 5, 5, 0], [np.nan, 7, np.nan, 7], [2, 2, 2, 2], [-1, np.nan, -9, -9]],
                 np.float32)
    assert sa.argmax(x, 1).tolist() == [1, 0, 0, 1]
    assert sa.argmin(x, 1).tolist() == [3, 0, 0, 1]
    assert sa.argmax(x, 0).tolist() == [1, 3, 1, 1]
    assert sa.argmin(x, 0).tolist() == [1, 3, 1, 3]
    assert sa.argmax(x).item() == 4 and sa.argmin(x).item() == 4  # the first NaN, flattened
    assert sa.argmax(x[:, ::-1], 1).tolist() == [1, 1, 0, 2]
    assert sa.argmax(np.full((3, 5), 2.5, np.float64), 1, keepdim=True).tolist() == [[0]] * 3
    assert sa.argmin(np.float32([np.inf, -np.inf, -np.inf])).item() == 1
    out = np.full((4, 1), -7, np.int64)
    assert sa.argmax(x, 1, keepdim=True, out=out) is out
    assert out.ravel().tolist() == [1, 0, 0, 1]


@pytest.mark.parametrize("rid", BOOL)
@pytest.mark.parametrize("t", sorted(NP_BOOL_TYPES))
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_numpy_all_any(rid, t, dim, keepdim):
    g = np.random.default_rng(zlib.crc32(repr((rid, t, dim)).encode()))
    # Mostly nonzero for `all`, mostly zero for `any`: both outcomes along every axis.
    p_zero = 0.03 if rid == "all" else 0.97
    vals = np.where(g.random(SHAPE) < p_zero, 0.0, g.integers(1, 4, size=SHAPE))
    if t.startswith("f"):
        vals[g.random(SHAPE) < 0.02] = np.nan
    base = vals.astype(NP_BOOL_TYPES[t]) if t != "bool" else vals != 0
    for name, make in np_layouts(base):
        x = make()
        want = np_bool_reference(rid, x, dim, keepdim)
        got = getattr(sa, rid)(x, dim, keepdim)
        assert got.dtype == np.bool_, f"{rid} {t} {name}"
        assert got.shape == np.shape(want), f"{rid} {t} {name} {dim} {keepdim}"
        np.testing.assert_array_equal(got, want, err_msg=f"{rid} {t} {name} {dim} {keepdim}")
        count_case("reduce", "cpu")


def test_numpy_all_any_nan_and_empty():
    x = np.float32([[np.nan, 1], [0, np.nan], [0, 0]])
    assert sa.all(x, 1).tolist() == [True, False, False]
    assert sa.any(x, 1).tolist() == [True, True, False]
    assert sa.all(np.float32([np.nan])).item() is True
    z = np.zeros((0, 3), np.float32)
    assert sa.all(z, 0).tolist() == [True] * 3 and sa.any(z, 0).tolist() == [False] * 3
    assert sa.all(z).item() is True and sa.any(z).item() is False
    assert sa.any(z, 1).shape == (0,)


def map_reference(rid, a, b, dim, keepdim):
    """sqdiff / dot in float64 (exact over small integers), over the broadcast shape."""
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    v = (a - b) ** 2 if rid == "sqdiff" else a * b
    return np.sum(v, axis=axes_of(dim, v.ndim), keepdims=keepdim)


def map_operands(base_a, base_b):
    """(name, a, b): both of SHAPE in several layouts, then b broadcast from a row, a column
    and a scalar, and a broadcast a."""
    la, lb = np_layouts(base_a), np_layouts(base_b)
    pairs = [(f"{na}/{nb}", ma(), mb()) for (na, ma), (nb, mb) in zip(la, lb[1:] + lb[:1])]
    pairs += [
        ("b row", base_a, base_b[0, 0].copy()),  # shape (4,)
        ("b column", base_a[:, ::-1], base_b[:, :, :1]),  # shape (6, 8, 1)
        ("b scalar", base_a, base_b[0, :1, :1].copy()),  # shape (1, 1)
        ("a broadcast", base_a[:1], base_b),  # a of shape (1, 8, 4)
    ]
    return pairs


@pytest.mark.parametrize("rid", MAP)
@pytest.mark.parametrize("t", sorted(NP_MAP_TYPES))
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_numpy_map_reduce_matches_reference(rid, t, dim, keepdim):
    seed = zlib.crc32(repr((rid, t, dim)).encode())
    nt = NP_MAP_TYPES[t]
    base_a, base_b = small_ints(SHAPE, seed).astype(nt), small_ints(SHAPE, seed + 1).astype(nt)
    for name, a, b in map_operands(base_a, base_b):
        want = map_reference(rid, a, b, dim, keepdim)
        got = getattr(sa, rid)(a, b, dim, keepdim)
        assert got.dtype == nt, f"{rid} {t} {name}"
        assert got.shape == np.shape(want), f"{rid} {t} {name} {dim} {keepdim}"
        # Every difference, product and partial sum is an integer the accumulator holds:
        # one rounding, of the exact value, into the type.
        np.testing.assert_array_equal(got, np.asarray(want).astype(nt),
                                      err_msg=f"{rid} {t} {name} {dim} {keepdim}")
        assert np.array_equal(sa.map_reduce(rid, a, b, dim, keepdim), got)
        count_case("reduce", "cpu")


def test_numpy_map_reduce_random_floats():
    g = np.random.default_rng(11)
    a = g.standard_normal((300, 1000)).astype(np.float32)
    b = g.standard_normal((300, 1000)).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for dim in (0, 1, None, (0, 1)):
        np.testing.assert_allclose(sa.sqdiff(a, b, dim), ((a64 - b64) ** 2).sum(axis=dim),
                                   rtol=1e-5)
        np.testing.assert_allclose(sa.dot(a, b, dim), (a64 * b64).sum(axis=dim),
                                   rtol=1e-4, atol=1e-3)
        count_case("reduce", "cpu")
    # One order whatever the layout: the same bits for a transposed copy.
    at, bt = np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    for f in (sa.sqdiff, sa.dot):
        for dim in (0, 1, None):
            assert np.array_equal(f(a, b, dim).view(np.uint32), f(at, bt, dim).view(np.uint32))
    # The difference and the product are rounded to f32 (NumPy's a - b and a * b), then
    # accumulated as sumsq and sum do, in the same order: the same bits as the two passes.
    for dim in (0, 1, None):
        assert np.array_equal(sa.sqdiff(a, b, dim).view(np.uint32),
                              sa.sumsq(a - b, dim).view(np.uint32))
        assert np.array_equal(sa.dot(a, b, dim).view(np.uint32),
                              sa.sum(a * b, dim).view(np.uint32))


def test_f16_sqdiff_rounds_the_difference_then_accumulates_in_f32():
    # 1 - (-2^-11) = 1 + 2^-11 rounds to 1 in f16 (a tie, to even): squared, 1; unrounded it
    # would square to 1 + 2^-10 + 2^-22, which is 1 + 2^-10 in f16.
    a, b = np.float16([1.0]), np.float16([-(2.0 ** -11)])
    assert sa.sqdiff(a, b).item() == 1.0
    # A square past f16's largest finite value (65504): inf in the f16 output.
    assert np.isinf(sa.sqdiff(np.float16([256.0]), np.float16([0.0])).item())
    # Many small squares summed in f32: exact where an f16 running sum would stall at 2048.
    x = np.ones(5000, np.float16)
    assert sa.sqdiff(x, np.zeros(1, np.float16)).item() == 5000.0
    assert sa.dot(x, x).item() == 5000.0


def test_new_reductions_empty_and_bad_calls():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    z = np.zeros((3, 0), np.float32)
    with pytest.raises(sa.OpError, match="no elements"):
        sa.argmax(z, 1)
    with pytest.raises(sa.OpError, match="no elements"):
        sa.argmin(z)
    assert sa.argmax(z, 0).shape == (0,)  # no outputs: nothing to reduce
    assert sa.sqdiff(z, z, 1).tolist() == [0.0] * 3 and sa.dot(z, z).item() == 0.0
    out = np.full(4, 7.0, np.float32)
    with pytest.raises(sa.DtypeError, match="^out: .*i64"):
        sa.argmax(x, 1, out=out)  # a float out for an index
    with pytest.raises(sa.DtypeError, match="^out: .*bool"):
        sa.any(x, 1, out=out)
    with pytest.raises(sa.DtypeError, match="^out: "):
        sa.argmax(x, 1, out=np.zeros(4, np.int32))
    with pytest.raises(sa.LayoutError, match="reduced shape"):
        sa.argmax(x, 0, out=np.zeros(4, np.int64))
    with pytest.raises(sa.DtypeError, match="^input: .*not instantiated"):
        sa.argmax(np.zeros(3, np.bool_))
    # Two inputs: not broadcastable, mixed types, integers, the wrong call.
    with pytest.raises(sa.LayoutError, match="^b: .*broadcast"):
        sa.sqdiff(x, x[:3], 1, out=out)
    with pytest.raises(sa.LayoutError, match="^b: .*broadcast"):
        sa.dot(x, np.ones(4, np.float32), 1, out=out)
    with pytest.raises(sa.DtypeError, match="^b: .*f64"):
        sa.dot(x, x.astype(np.float64), 1, out=out)
    with pytest.raises(sa.DtypeError, match="^a: .*not instantiated"):
        sa.sqdiff(x.astype(np.int32), x, 1)
    with pytest.raises(sa.OpError, match="map_reduce"):
        sa.reduce("sqdiff", x, 1, out=out)
    with pytest.raises(sa.OpError, match="one input"):
        sa.map_reduce("sum", x, x, 1, out=out)
    with pytest.raises(sa.OpError, match="median"):
        sa.map_reduce("median", x, x, 1, out=out)
    with pytest.raises(sa.LayoutError, match="share"):
        sa.dot(x, x, 1, out=x[:, 0])
    with pytest.raises(IndexError, match="dim"):
        sa.dot(x, x, 2, out=out)
    assert (out == 7.0).all()


# ----------------------------------------------------------------------------------------
# torch: CUDA tensors (on torch's stream) and CPU tensors, bf16 and f16 included.

try:
    import torch  # noqa: F811
except ImportError:  # pragma: no cover - CI has no torch
    torch = None

TORCH_TYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
               "i32": "int32", "i64": "int64"}
TORCH_REF = {"sum": "sum", "prod": "prod", "amin": "amin", "amax": "amax", "mean": "mean"}


def _devices():
    if torch is None:
        return []
    devs = ["cpu"]
    if torch.cuda.is_available():
        devs.append("cuda")
    return devs


def torch_layouts(base):
    return [
        ("contiguous", lambda: base.clone()),
        ("transposed", lambda: base.permute(2, 1, 0).contiguous().permute(2, 1, 0)),
        ("flipped", lambda: base.flip(0, 2).contiguous().flip(0, 2)),
        ("step2", lambda: base.repeat_interleave(2, dim=1)[:, ::2]),
        ("expanded", lambda: base[:, :1].expand(SHAPE)),
    ]


def torch_reference(rid, x, dim, keepdim):
    """The reduction of ``x`` in float64 on the host; divisions and square roots in NumPy,
    correctly rounded (torch divides by a scalar on CUDA as a multiplication by its
    reciprocal, and its vectorised CPU square root may be one ulp off)."""
    x = x.double().cpu()
    d = tuple(range(x.dim())) if dim is None else dim
    if rid == "prod":
        # torch.prod takes one dim: reduce them one by one, outermost last.
        y = x
        axes = sorted(((d,) if isinstance(d, int) else d), key=lambda a: a % x.dim(),
                      reverse=True)
        for a in axes:
            y = y.prod(dim=a, keepdim=keepdim)
        return y
    if rid == "sumsq":
        return (x * x).sum(dim=d, keepdim=keepdim)
    if rid == "norm2":
        return torch.from_numpy(np.asarray(np.sqrt((x * x).sum(dim=d, keepdim=keepdim).numpy())))
    if rid == "mean":
        s = x.sum(dim=d, keepdim=keepdim).numpy()
        n = x.numel() // max(s.size, 1)
        # Divided once in the accumulator type, as the library.
        return s, n
    return getattr(torch, TORCH_REF[rid])(x, dim=d, keepdim=keepdim)


def torch_expected(rid, x, dim, keepdim, dtype):
    """``torch_reference`` in ``dtype`` (a mean divided in f64 for f64, else in f32)."""
    r = torch_reference(rid, x, dim, keepdim)
    if rid == "mean":
        s, n = r
        if dtype == torch.float64:
            q = np.asarray(s, np.float64) / np.float64(n)
        else:
            with np.errstate(invalid="ignore"):
                q = np.asarray(s, np.float32) / np.float32(n)
        return torch.from_numpy(np.asarray(q)).to(dtype)
    return r.to(dtype)


def _bits(t):
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", _devices() or ["cpu"])
@pytest.mark.parametrize("t", sorted(TORCH_TYPES))
@pytest.mark.parametrize("rid", sorted(["sum", "prod", "amin", "amax", "mean", "sumsq", "norm2"]))
def test_torch_small_ints_match_torch(device, t, rid):
    if rid in FLOAT_ONLY and t.startswith("i"):
        pytest.skip("float-only reduction")
    dtype = getattr(torch, TORCH_TYPES[t])
    for dim in DIMS:
        for keepdim in (False, True):
            lo, hi = (-1, 2) if rid == "prod" else (-4, 5)
            seed = zlib.crc32(repr((rid, t, dim, device)).encode())
            base = torch.tensor(small_ints(SHAPE, seed, lo, hi), dtype=dtype, device=device)
            for name, make in torch_layouts(base):
                x = make()
                want = torch_expected(rid, x, dim, keepdim, dtype)
                got = getattr(sa, rid)(x, dim, keepdim)
                assert got.device == x.device and got.dtype == dtype
                # A later torch op on the same stream reads the result without a sync.
                got = (got + 0).cpu()
                if rid == "norm2":
                    # A square root of an integer: correctly rounded on both sides.
                    torch.testing.assert_close(got, want, rtol=0, atol=0)
                else:
                    assert torch.equal(got, want), f"{rid} {t} {device} {name} {dim} {keepdim}"
                count_case("reduce", device)


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="no CUDA torch")
@pytest.mark.parametrize("t", ["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("rid", sorted(["sum", "mean", "sumsq", "norm2", "amax"]))
def test_torch_gpu_equals_cpu_twin_bit_for_bit(t, rid):
    """Random floats: the GPU result equals the CPU twin's bit for bit (one order), and is
    close to torch's (another order). Lengths cross the slot and group boundaries."""
    dtype = getattr(torch, TORCH_TYPES[t])
    g = torch.Generator().manual_seed(zlib.crc32(repr((t, rid)).encode()))
    for shape, dim in [((64, 1000), 1), ((1000, 64), 0), ((8, 9, 300), (0, 2)),
                       ((300_007,), None), ((3, 200_001), 1)]:
        base = torch.randn(shape, generator=g).to(dtype)
        for name, x in [("contiguous", base.cuda()),
                        ("transposed", base.cuda().mT.contiguous().mT if base.dim() > 1
                         else base.cuda()),
                        ("flipped", base.cuda().flip(0).contiguous().flip(0))]:
            got = getattr(sa, rid)(x, dim).cpu()
            twin = getattr(sa, rid)(x.cpu(), dim)
            assert _bits(got).equal(_bits(twin)), \
                f"{rid} {t} {name} {shape} {dim}: GPU and CPU twin differ"
            # In the type first: a sum of squares of f16 overflows to inf as it should.
            want = torch_expected(rid, x, dim, False, dtype).to(torch.float64)
            tol = {"f32": 1e-4, "f64": 1e-10, "f16": 2e-2, "bf16": 2e-2}[t]
            torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * 10)
            count_case("reduce", "cuda")


# ----------------------------------------------------------------------------------------
# torch: argmin/argmax, all/any and the two-input reductions against torch, and the GPU
# against the CPU twin.

TORCH_ARG_TYPES = dict(TORCH_TYPES, u8="uint8")
TORCH_BOOL_TYPES = dict(TORCH_ARG_TYPES, bool="bool")
TORCH_FLOATS = ["f32", "f64", "f16", "bf16"]
# torch.argmax takes one dim or None; the library also takes several (positions in the
# row-major order of the reduced axes), compared through a permuted, flattened view.
ARG_DIMS = [None, 0, 1, 2, -1, (0, 2), (1, 2)]


def torch_arg_reference(rid, x, dim, keepdim):
    """torch.argmax/argmin on ``x``'s own device and type: over one dim directly, over None or
    several dims through the reduced axes moved last and flattened (torch's argmax of the
    flattened view is the row-major position)."""
    f = getattr(torch, rid)
    if isinstance(dim, int):
        return f(x, dim=dim, keepdim=keepdim)
    axes = axes_of(dim, x.dim())
    kept = [a for a in range(x.dim()) if a not in axes]
    y = x.permute(*kept, *axes).reshape([x.shape[a] for a in kept] + [-1])
    r = f(y, dim=-1)
    if keepdim:
        r = r.reshape([1 if a in axes else x.shape[a] for a in range(x.dim())])
    return r


def torch_bool_reference(rid, x, dim, keepdim):
    """torch.all/torch.any, one reduced axis at a time (torch.all over a tuple of dims is
    recent), the last axis first."""
    y = x
    for a in sorted(axes_of(dim, x.dim()), reverse=True):
        y = getattr(torch, rid)(y, dim=a, keepdim=True)
    if not keepdim:
        y = y.reshape([x.shape[a] for a in range(x.dim()) if a not in axes_of(dim, x.dim())])
    return y.to(torch.bool)  # torch.all of uint8 is uint8


def torch_map_reference(rid, a, b, dim, keepdim):
    """((a - b)**2).sum(dim) / (a * b).sum(dim) as torch computes them in the inputs' type
    (the difference or product rounded to the type), the sum in float64 on the host."""
    v = (a - b) if rid == "sqdiff" else (a * b)
    v = v.double().cpu()
    if rid == "sqdiff":
        v = v * v
    return v.sum(dim=axes_of(dim, v.dim()), keepdim=keepdim)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", _devices() or ["cpu"])
@pytest.mark.parametrize("t", sorted(TORCH_ARG_TYPES))
@pytest.mark.parametrize("rid", ARG)
def test_torch_arg_reductions_match_torch(device, t, rid):
    """Small integers (ties everywhere) and, for floats, NaNs: the index torch gives, exactly
    (first on ties, the first NaN wins), in every layout, with and without keepdim."""
    dtype = getattr(torch, TORCH_ARG_TYPES[t])
    for dim in ARG_DIMS:
        seed = zlib.crc32(repr((rid, t, dim, device)).encode())
        base = torch.tensor(ties_and_nans(seed, t), dtype=dtype, device=device)
        for keepdim in (False, True):
            for name, make in torch_layouts(base):
                x = make()
                want = torch_arg_reference(rid, x, dim, keepdim)
                got = getattr(sa, rid)(x, dim, keepdim)
                assert got.device == x.device and got.dtype == torch.int64
                assert got.shape == want.shape, f"{rid} {t} {device} {name} {dim} {keepdim}"
                # A later torch op on the same stream reads the result without a sync.
                assert torch.equal((got + 0).cpu(), want.cpu()), \
                    f"{rid} {t} {device} {name} {dim} {keepdim}"
                count_case("reduce", device)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", _devices() or ["cpu"])
def test_torch_arg_nan_ties_and_views(device):
    x = torch.tensor([[1, 5, 5, 0], [float("nan"), 7, float("nan"), 7], [2, 2, 2, 2],
                      [-1, float("nan"), -9, -9]], device=device)
    for rid in ARG:
        f = getattr(torch, rid)
        for view in (x, x.t(), x.flip(1), x[::2], x[:, ::2], x[:1].expand(5, 4), x.t()[1:]):
            for dim in (0, 1):
                for keepdim in (False, True):
                    assert torch.equal(getattr(sa, rid)(view, dim, keepdim).cpu(),
                                       f(view, dim=dim, keepdim=keepdim).cpu()), \
                        f"{rid} {view.shape} {view.stride()} {dim} {keepdim}"
            assert getattr(sa, rid)(view).item() == f(view).item()
            count_case("reduce", device)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", _devices() or ["cpu"])
@pytest.mark.parametrize("t", sorted(TORCH_BOOL_TYPES))
@pytest.mark.parametrize("rid", BOOL)
def test_torch_all_any_match_torch(device, t, rid):
    dtype = getattr(torch, TORCH_BOOL_TYPES[t])
    for dim in DIMS:
        g = np.random.default_rng(zlib.crc32(repr((rid, t, dim, device)).encode()))
        p_zero = 0.03 if rid == "all" else 0.97
        vals = np.where(g.random(SHAPE) < p_zero, 0.0, g.integers(1, 4, size=SHAPE))
        if t in TORCH_FLOATS:
            vals[g.random(SHAPE) < 0.02] = np.nan
        base = torch.tensor(vals != 0 if t == "bool" else vals, device=device).to(dtype)
        for keepdim in (False, True):
            for name, make in torch_layouts(base):
                x = make()
                want = torch_bool_reference(rid, x, dim, keepdim)
                got = getattr(sa, rid)(x, dim, keepdim)
                assert got.device == x.device and got.dtype == torch.bool
                assert torch.equal(got.cpu(), want.cpu()), \
                    f"{rid} {t} {device} {name} {dim} {keepdim}"
                count_case("reduce", device)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", _devices() or ["cpu"])
@pytest.mark.parametrize("t", TORCH_FLOATS)
@pytest.mark.parametrize("rid", MAP)
def test_torch_map_reduce_small_ints_match_torch(device, t, rid):
    """Small integers: every difference, product and partial sum exact, so the result is
    torch's ((a - b)**2).sum(dim) / (a * b).sum(dim) bit for bit, in every layout pair and
    broadcast."""
    dtype = getattr(torch, TORCH_TYPES[t])
    for dim in DIMS:
        seed = zlib.crc32(repr((rid, t, dim, device)).encode())
        ta = torch.tensor(small_ints(SHAPE, seed), dtype=dtype, device=device)
        tb = torch.tensor(small_ints(SHAPE, seed + 1), dtype=dtype, device=device)
        la, lb = torch_layouts(ta), torch_layouts(tb)
        pairs = [(f"{na}/{nb}", ma(), mb()) for (na, ma), (nb, mb) in zip(la, lb[1:] + lb[:1])]
        pairs += [("b row", ta, tb[0, 0].clone()), ("b column", ta.flip(1), tb[:, :, :1]),
                  ("b expanded", ta, tb[:1, :1].expand(SHAPE)), ("a broadcast", ta[:1], tb)]
        for keepdim in (False, True):
            for name, a, b in pairs:
                want = torch_map_reference(rid, a, b, dim, keepdim).to(dtype)
                got = getattr(sa, rid)(a, b, dim, keepdim)
                assert got.device == a.device and got.dtype == dtype
                assert torch.equal((got + 0).cpu(), want), \
                    f"{rid} {t} {device} {name} {dim} {keepdim}"
                count_case("reduce", device)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", _devices() or ["cpu"])
def test_torch_new_reductions_bad_calls(device):
    x = torch.arange(20, dtype=torch.float32, device=device).reshape(4, 5)
    out = torch.full((4,), 7.0, device=device)
    with pytest.raises(sa.OpError, match="no elements"):
        sa.argmax(x[:, :0], 1)
    with pytest.raises(sa.DtypeError, match="^out: "):
        sa.argmax(x, 1, out=out)
    with pytest.raises(sa.DtypeError, match="^out: "):
        sa.all(x, 1, out=out)
    with pytest.raises(sa.LayoutError, match="^b: .*broadcast"):
        sa.sqdiff(x, x[:3], 1, out=out)
    with pytest.raises(sa.DtypeError, match="^b: "):
        sa.dot(x, x.double(), 1, out=out)
    assert (out == 7.0).all()
    if device == "cuda":
        with pytest.raises(sa.DeviceError, match="^b: "):
            sa.dot(x, x.cpu(), 1)


def _torch_map_operands(base, other):
    """Two-input operand pairs for the GPU-vs-twin test: equal layouts, mixed layouts and a
    broadcast b."""
    pairs = [("contiguous", base, other),
             ("flipped/contiguous", base.flip(0).contiguous().flip(0), other)]
    if base.dim() > 1:
        pairs += [("transposed/flipped", base.mT.contiguous().mT,
                   other.flip(0).contiguous().flip(0)),
                  ("b row", base, other[:1].contiguous())]
    return pairs


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="no CUDA torch")
@pytest.mark.parametrize("t", TORCH_FLOATS)
@pytest.mark.parametrize("rid", sorted(ARG + BOOL + MAP))
def test_torch_gpu_equals_cpu_twin_new_reductions(t, rid):
    """Random floats: the GPU's argmin/argmax, all/any, sqdiff and dot equal the CPU twin's
    bit for bit; indices and booleans equal torch's, sums are close to torch's. Lengths cross
    the slot and group boundaries."""
    dtype = getattr(torch, TORCH_TYPES[t])
    g = torch.Generator().manual_seed(zlib.crc32(repr((t, rid, "new")).encode()))
    for shape, dim in [((64, 1000), 1), ((1000, 64), 0), ((8, 9, 300), (0, 2)),
                       ((300_007,), None), ((3, 200_001), 1)]:
        base = torch.randn(shape, generator=g).to(dtype).cuda()
        if rid in BOOL:
            # Rare zeros for `all`, rare nonzeros for `any`: both outcomes over the short axes.
            cut = 0.01 if rid == "all" else 2.5
            base = torch.where(base.abs() < cut, torch.zeros_like(base), base)
        if rid in MAP:
            other = torch.randn(shape, generator=g).to(dtype).cuda()
            cases = _torch_map_operands(base, other)
        else:
            cases = [("contiguous", base, None),
                     ("transposed", base.mT.contiguous().mT if base.dim() > 1 else base, None),
                     ("flipped", base.flip(0).contiguous().flip(0), None)]
        for name, a, b in cases:
            args = (a,) if b is None else (a, b)
            got = getattr(sa, rid)(*args, dim).cpu()
            twin = getattr(sa, rid)(*(x.cpu() for x in args), dim)
            if rid in MAP:
                assert _bits(got).equal(_bits(twin)), \
                    f"{rid} {t} {name} {shape} {dim}: GPU and CPU twin differ"
                # The reference rounded to the output type: f16 sums of squares of 300 007
                # normal differences (~6e5) overflow to inf on both sides.
                want = torch_map_reference(rid, a, b, dim, False).to(got.dtype).double()
                tol = {"f32": 1e-4, "f64": 1e-10, "f16": 2e-2, "bf16": 2e-2}[t]
                torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * 10)
            else:
                assert got.equal(twin), f"{rid} {t} {name} {shape} {dim}: GPU and CPU twin differ"
                ref = torch_arg_reference if rid in ARG else torch_bool_reference
                assert got.equal(ref(rid, a, dim, False).cpu()), f"{rid} {t} {name} {shape} {dim}"
            count_case("reduce", "cuda")


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="no CUDA torch")
def test_reductions_preloaded_run_inside_a_cuda_graph():
    """`sa.preload` loads reduction (and stencil) families, so a capture may record them: a
    multi-group sum (scratch allocated in the stream's order) and an argmax, replayed on new
    data, give the eager results bit for bit."""
    sa.preload(["sum", "argmax", "sqdiff", "lap2"])
    x = torch.randn(4, 300_001, device="cuda")
    y = torch.randn(4, 300_001, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            total = sa.sum(x, 1)
            where = sa.argmax(x, 1)
            dist = sa.sqdiff(x, y, 1)
    torch.cuda.current_stream().wait_stream(s)
    x.copy_(torch.randn(4, 300_001, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert _bits(total.cpu()).equal(_bits(sa.sum(x.cpu(), 1)))
    assert where.cpu().equal(torch.argmax(x, 1).cpu())
    assert _bits(dist.cpu()).equal(_bits(sa.sqdiff(x.cpu(), y.cpu(), 1)))
    count_case("reduce", "cuda")
