"""Reductions by id (``sa.sum``, ``sa.amax``, ``sa.mean``, …): NumPy arrays on the CPU twin
against NumPy, and torch tensors against torch and against the CPU twin.

- Inputs of small integers stored as floats make every summation order exact, so sums,
  means of power-of-two counts, min and max compare bit for bit with NumPy and torch.
- Random floats compare within a relative bound with torch (other order), and **bit for
  bit between the GPU and the CPU twin** (the same order on both: the library's promise).
Layouts: contiguous, transposed, reversed, ``[::2]``, expanded; axes: last, first, several,
all, none given (every axis), negative; ``keepdim``; then bad calls."""

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
    assert ids == sorted(["sum", "prod", "amin", "amax", "mean", "sumsq", "norm2"])
    for i in ids:
        assert callable(getattr(sa, i)) and i in sa.__all__


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
