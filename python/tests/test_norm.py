"""Normalisation programs (``sa.norm``) and the library functions built on them
(``sa.softmax``, ``sa.log_softmax``, ``sa.logsumexp``, ``sa.rms_norm``, ``sa.layer_norm``,
``sa.normalize``).

On the CPU twin through NumPy (no torch, no GPU): float32 and float64 arrays of shapes
(4, 7), (3, 1000) and (2, 3, 50), normalised over dim -1, 0 and 1, contiguous, transposed,
reversed (``x[:, ::-1]``) and every second row (``x[::2]``), against a NumPy float64
reference: float64 within rtol 1e-12, atol 1e-13, float32 within rtol 1e-5, atol 1e-6,
relative to the output's magnitude (for ``layer_norm``, whose ``x - mean`` cancels in rows
of close values, to that of its terms). ``rms_norm`` and ``layer_norm``
normalise the trailing axes (``normalized_shape``), so "over dim d" means over the last axis
of ``np.moveaxis(x, d, -1)``, a strided view. Then ``-inf`` and NaN in rows as torch treats
them; ``sa.norm`` itself (binding by keyword and by position, Python-number scalars, a
broadcast row, one value a row with and without ``keepdim``, ``out=``, ``dtype=``, the
limit of 8 reductions); bad calls as typed exceptions with ``out`` untouched.

On CUDA torch tensors (skipped without torch or without a CUDA device): each library
function in float32, bfloat16, float16 and float64 over rows of 1000, 4096 and 140 000
elements against torch's own function, and bit for bit against the CPU twin (the same call
on ``.cpu()`` copies). For 16-bit types the reference is torch's function on float32 copies,
rounded once to the type: the library computes in f32 and rounds once, while some of
torch's 16-bit paths (``logsumexp``, ``normalize``) round between ops.
"""

import zlib

import numpy as np
import pytest

import strided_apply as sa
from casecount import count_case

FUNCS = ["softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm", "normalize"]
NP_TYPES = {"f32": np.float32, "f64": np.float64}
TOL = {"f32": (1e-5, 1e-6), "f64": (1e-12, 1e-13)}
SHAPES = [(4, 7), (3, 1000), (2, 3, 50)]
DIMS = [-1, 0, 1]
LAYOUTS = ["contiguous", "transposed", "reversed", "step2"]
EPS = {"rms_norm": 1e-6, "layer_norm": 1e-5, "normalize": 1e-12}

SOFTMAX = "m = amax(a); e = exp(a - m); e / sum(e)"
LSE = "m = amax(a); m + log(sum(exp(a - m)))"
USER = "x = a * s + mask; m = amax(x); e = exp(x - m); e / sum(e)"


def rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def view(layout, shape, dt, g):
    """An array of `shape` in `layout`, values 2 × standard normal."""
    def draw(s):
        return (2 * g.standard_normal(s)).astype(dt)

    if layout == "contiguous":
        return draw(shape)
    if layout == "transposed":
        return draw(shape[::-1]).T
    if layout == "reversed":
        return draw(shape)[:, ::-1]
    return draw((2 * shape[0],) + shape[1:])[::2]  # step2: every second row


def reference(name, x, dim, w=None, b=None, eps=None):
    """`name` over axis `dim` (rms_norm, layer_norm: the last axis) in float64."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if name in ("softmax", "log_softmax", "logsumexp"):
            m = x.max(dim, keepdims=True)
            d = x - m
            s = np.exp(d).sum(dim, keepdims=True)
            if name == "softmax":
                return np.exp(d) / s
            if name == "log_softmax":
                return d - np.log(s)
            return np.squeeze(m + np.log(s), dim)
        if name == "normalize":
            return x / np.maximum(np.sqrt((x * x).sum(dim, keepdims=True)), eps)
        if name == "rms_norm":
            y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
        else:
            d = x - x.mean(-1, keepdims=True)
            y = d / np.sqrt((d * d).mean(-1, keepdims=True) + eps)
        if w is not None:
            y = y * np.asarray(w, np.float64)
        if b is not None:
            y = y + np.asarray(b, np.float64)
        return y


def run(name, x, dim, g):
    """`name` over axis `dim` of `x` by the library: its result, the float64 reference and
    the magnitude of the reference's terms (see `assert_near`)."""
    if name in ("rms_norm", "layer_norm"):
        x = np.moveaxis(x, dim, -1)
        n = x.shape[-1]
        w = (0.5 + g.random(n)).astype(x.dtype)
        if name == "rms_norm":
            want = reference(name, x, -1, w, eps=EPS[name])
            return sa.rms_norm(x, (n,), w, EPS[name]), want, np.abs(want)
        b = g.standard_normal(n).astype(x.dtype)
        want = reference(name, x, -1, w, b, EPS[name])
        # (x - mean) * rstd cancels where a row's values are close (a short row, say): its
        # rounding error is relative to |x| + |mean|, not to the difference.
        x64 = x.astype(np.float64)
        mu = x64.mean(-1, keepdims=True)
        rstd = 1 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + EPS[name])
        scale = (np.abs(x64) + np.abs(mu)) * rstd * np.abs(w.astype(np.float64)) + np.abs(b.astype(np.float64))
        return sa.layer_norm(x, (n,), w, b, EPS[name]), want, scale
    if name == "normalize":
        want = reference(name, x, dim, eps=EPS[name])
        return sa.normalize(x, 2.0, dim, EPS[name]), want, np.abs(want)
    want = reference(name, x, dim)
    return getattr(sa, name)(x, dim), want, np.abs(want)


def assert_near(got, want, scale, dt, what=""):
    """|got - want| <= atol + rtol * scale (TOL[dt]) where `want` is finite; NaN and
    infinities where `want` has them."""
    rtol, atol = TOL[dt]
    assert got.shape == want.shape, what
    got = np.asarray(got, np.float64)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=what)
    err = np.abs(got - want)[finite]
    bound = (atol + rtol * np.nan_to_num(np.broadcast_to(scale, want.shape)))[finite]
    bad = ~(err <= bound)  # a NaN counts as bad
    if bad.any():
        k = int(np.argmax(bad))
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements off (rtol {rtol}, atol {atol}); "
                             f"first: {got[finite][k]!r} vs {want[finite][k]!r}")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dt", list(NP_TYPES))
@pytest.mark.parametrize("name", FUNCS)
def test_library_functions_match_numpy_on_the_cpu_twin(name, dt, shape, dim, layout):
    x = view(layout, shape, NP_TYPES[dt], rng(name, dt, shape, dim, layout))
    got, want, scale = run(name, x, dim, rng("weights", name, dt, shape, dim))
    assert isinstance(got, np.ndarray) and got.dtype == NP_TYPES[dt]
    assert_near(got, want, scale, dt, f"{name} {dt} {layout} dim {dim}")
    count_case("norm")


@pytest.mark.parametrize("dt", list(NP_TYPES))
def test_minus_inf_and_nan_in_rows_as_torch(dt):
    x = (2 * rng("special", dt).standard_normal((5, 9))).astype(NP_TYPES[dt])
    x[0, [1, 4]] = -np.inf  # softmax 0 there, log_softmax -inf
    x[1] = -np.inf  # softmax, log_softmax: a NaN row (as torch)
    x[2, 3] = np.nan  # a NaN row
    rtol, atol = TOL[dt]
    finite = [0, 3, 4]
    # Along rows (dim 1) and along the columns of the transpose (dim 0, a strided axis).
    for xv, dim, row in ((x, 1, lambda y, r: y[r]), (x.T, 0, lambda y, r: y[:, r])):
        sm = sa.softmax(xv, dim)
        np.testing.assert_allclose(sm, reference("softmax", xv, dim), rtol=rtol, atol=atol)
        assert (row(sm, 0)[[1, 4]] == 0).all()
        assert np.isnan(row(sm, 1)).all() and np.isnan(row(sm, 2)).all()
        assert np.isfinite(row(sm, finite)).all()
        ls = sa.log_softmax(xv, dim)
        np.testing.assert_allclose(ls, reference("log_softmax", xv, dim), rtol=rtol, atol=atol)
        assert (row(ls, 0)[[1, 4]] == -np.inf).all()
        assert np.isnan(row(ls, 1)).all() and np.isnan(row(ls, 2)).all()
        # logsumexp of a row of -inf only is not checked: torch gives -inf there, and the
        # program `m + log(sum(exp(a - m)))` taken literally gives NaN.
        lse = sa.logsumexp(xv, dim)
        assert lse.shape == (5,)
        np.testing.assert_allclose(lse[finite], reference("logsumexp", xv, dim)[finite], rtol=rtol, atol=atol)
        assert np.isnan(lse[2])


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm", "normalize"])
@pytest.mark.parametrize("dt", list(NP_TYPES))
def test_a_nan_makes_a_nan_row(name, dt):
    g = rng("nan", name, dt)
    x = (2 * g.standard_normal((4, 30))).astype(NP_TYPES[dt])
    x[2, 7] = np.nan
    got, want, scale = run(name, x, 1, g)
    assert np.isnan(got[2]).all() and np.isfinite(got[[0, 1, 3]]).all()
    assert_near(got, want, scale, dt, f"{name} {dt} NaN row")


@pytest.mark.parametrize("dt", list(NP_TYPES))
def test_rms_norm_eps_defaults_to_finfo_eps_and_layer_norm_takes_no_weight(dt):
    t = NP_TYPES[dt]
    x = (2 * rng("defaults", dt).standard_normal((6, 40))).astype(t)
    # For f32 and f64, finfo(dtype).eps is torch's default too (16-bit types: the GPU test).
    np.testing.assert_array_equal(sa.rms_norm(x, (40,)), sa.rms_norm(x, (40,), eps=float(np.finfo(t).eps)))
    np.testing.assert_allclose(sa.rms_norm(x, (40,)), reference("rms_norm", x, -1, eps=float(np.finfo(t).eps)),
                               rtol=TOL[dt][0], atol=TOL[dt][1])
    np.testing.assert_allclose(sa.layer_norm(x, (40,)), reference("layer_norm", x, -1, eps=1e-5),
                               rtol=TOL[dt][0], atol=TOL[dt][1])
    np.testing.assert_allclose(sa.normalize(x), reference("normalize", x, 1, eps=1e-12),
                               rtol=TOL[dt][0], atol=TOL[dt][1])
    # normalized_shape of two axes normalises both.
    y = x.reshape(3, 2, 40)
    want = reference("rms_norm", y.reshape(3, 80), -1, eps=1e-6).reshape(3, 2, 40)
    np.testing.assert_allclose(sa.rms_norm(y, (2, 40), eps=1e-6), want, rtol=TOL[dt][0], atol=TOL[dt][1])


def test_norm_binds_by_keyword_and_position_with_scalars_and_a_broadcast_row():
    g = rng("bind")
    a = g.standard_normal((6, 40)).astype(np.float32)
    mask = g.standard_normal(40).astype(np.float32)  # a row, broadcast over the 6 rows
    mask[[3, 17]] = -np.inf
    f = sa.norm(USER)
    got = f(a=a, s=0.125, mask=mask)
    assert got.dtype == np.float32 and got.shape == (6, 40)
    # Positional: in order of first appearance (a, s, mask); mixed: the rest by keyword.
    np.testing.assert_array_equal(f(a, 0.125, mask), got)
    np.testing.assert_array_equal(f(a, mask=mask, s=0.125), got)
    np.testing.assert_array_equal(f(a=a, s=0.125, mask=mask, dim=-1), got)
    np.testing.assert_allclose(got, reference("softmax", a * np.float64(0.125) + mask, 1), rtol=1e-5, atol=1e-6)
    assert (got[:, [3, 17]] == 0).all()
    # A scalar is a run-time value: new values, the same program.
    for s in (1.0, -2.5, 3, 0.5):
        np.testing.assert_allclose(f(a, s, mask), reference("softmax", a * np.float64(s) + mask, 1),
                                   rtol=1e-5, atol=1e-6)
    # Over several axes at once.
    x = (2 * g.standard_normal((2, 3, 50))).astype(np.float64)
    np.testing.assert_allclose(sa.norm(SOFTMAX)(x, dim=(1, 2)), reference("softmax", x, (1, 2)),
                               rtol=1e-12, atol=1e-13)


def test_a_program_of_the_reductions_alone_is_one_value_a_row_and_keepdim_keeps_the_axes():
    x = (2 * rng("keepdim").standard_normal((2, 3, 50))).astype(np.float64)
    f = sa.norm(LSE)
    for dim, kept, dropped in ((-1, (2, 3, 1), (2, 3)), (1, (2, 1, 50), (2, 50)), ((0, 2), (1, 3, 1), (3,))):
        got = f(x, dim=dim)
        assert got.shape == dropped and got.dtype == np.float64
        np.testing.assert_allclose(got, reference("logsumexp", x, dim), rtol=1e-12, atol=1e-13)
        k = f(x, dim=dim, keepdim=True)
        assert k.shape == kept
        np.testing.assert_array_equal(k.reshape(dropped), got)
        np.testing.assert_array_equal(sa.logsumexp(x, dim), got)
        assert sa.logsumexp(x, dim, keepdim=True).shape == kept


def test_out_is_written_in_place_and_returned_and_dtype_chooses_the_type():
    x = (2 * rng("out").standard_normal((5, 33))).astype(np.float32)
    f = sa.norm(SOFTMAX)
    want = f(x)
    out = np.full((5, 33), 7.0, np.float32)
    assert f(x, out=out) is out
    np.testing.assert_array_equal(out, want)
    # A strided out: its elements written, the others of its buffer untouched.
    base = np.full((5, 66), 7.0, np.float32)
    v = base[:, ::2]
    assert f(x, out=v) is v
    np.testing.assert_array_equal(base[:, ::2], want)
    assert (base[:, 1::2] == 7.0).all()
    # The library functions take out= too; a one-value-a-row out has the reduced shape.
    out[:] = 7.0
    assert sa.softmax(x, -1, out=out) is out
    np.testing.assert_array_equal(out, sa.softmax(x, -1))
    row = np.full(5, 7.0, np.float32)
    assert sa.norm(LSE)(x, out=row) is row
    np.testing.assert_array_equal(row, sa.norm(LSE)(x))
    # dtype= chooses the output type when out is omitted.
    ref = reference("softmax", x, 1)
    d = f(x, dtype=np.float64)
    assert d.dtype == np.float64
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-6)
    h = f(x, dtype="float16")
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, ref, rtol=1e-3, atol=1e-4)


def test_eight_reductions_are_the_limit():
    a = rng("limit").integers(-8, 8, (4, 10)).astype(np.float32)  # every sum exact
    got = sa.norm(" + ".join(["sum(a)"] * 8))(a)
    assert got.shape == (4,)
    np.testing.assert_array_equal(got, 8 * a.sum(1))


def test_bad_calls_are_typed_errors_and_out_stays_untouched():
    x = np.float32([[1, 2, 3], [4, 5, 6]])
    out = np.full((2, 3), 7.0, np.float32)
    row = np.full(2, 7.0, np.float32)
    nine = " + ".join(["sum(a)"] * 9)
    cases = [
        (lambda: sa.expr("a / sum(a)")(x, out=out), sa.ExprError, "normalisation program"),
        (lambda: sa.norm(SOFTMAX)(x, dim=2, out=out), IndexError, "out of range"),
        (lambda: sa.norm(SOFTMAX)(x, dim=-3, out=out), IndexError, "out of range"),
        (lambda: sa.softmax(x, 2, out=out), IndexError, "out of range"),
        (lambda: sa.norm(SOFTMAX)(x, dim=(1, 1), out=out), ValueError, "named twice"),
        (lambda: sa.norm(SOFTMAX)(x, dim=(1, -1), out=out), ValueError, "named twice"),
        (lambda: sa.logsumexp(x, (0, 0), out=row), ValueError, "named twice"),
        (lambda: sa.norm(SOFTMAX)(x, out=out[:, :2]), sa.LayoutError, "shape"),
        (lambda: sa.norm(LSE)(x, out=out), sa.LayoutError, "reduced shape"),
        (lambda: sa.norm(LSE)(x, dim=1, out=row[:1]), sa.LayoutError, "reduced shape"),
        (lambda: sa.norm(nine)(x, out=row), sa.ExprError, "over the limit of 8"),
        (lambda: sa.norm(SOFTMAX)(a=x, b=x, out=out), sa.ExprError, "not a name"),
        (lambda: sa.norm(SOFTMAX)(x, a=x, out=out), sa.ExprError, "given twice"),
        (lambda: sa.norm(SOFTMAX)(out=out), sa.ExprError, "missing"),
        (lambda: sa.norm("m = amax(a) m")(x, out=out), sa.ExprError, "byte"),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text):
            call()
        assert (out == 7.0).all() and (row == 7.0).all()


# ---------------------------------------------------------------------------------------
# CUDA torch tensors: against torch, and bit for bit against the CPU twin

GPU_TYPES = ["float32", "bfloat16", "float16", "float64"]
GPU_TOL = {"float32": (1e-5, 1e-6), "bfloat16": (1.6e-2, 1e-3), "float16": (1e-3, 1e-4), "float64": (1e-12, 1e-12)}
GPU_SHAPES = [(64, 1000), (8, 4096), (4, 140000)]


@pytest.fixture
def torch():
    """torch with a CUDA device, or the test is skipped."""
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False (normalisations on the GPU are not tested)")
    return t


def torch_pair(torch, name, n):
    """(the library's call, torch's), each of (x, w, b) over the last axis of rows of n."""
    F = torch.nn.functional
    return {
        "softmax": (lambda x, w, b: sa.softmax(x, -1), lambda x, w, b: torch.softmax(x, -1)),
        "log_softmax": (lambda x, w, b: sa.log_softmax(x, -1), lambda x, w, b: F.log_softmax(x, -1)),
        "logsumexp": (lambda x, w, b: sa.logsumexp(x, -1), lambda x, w, b: torch.logsumexp(x, -1)),
        "rms_norm": (lambda x, w, b: sa.rms_norm(x, (n,), w, 1e-6), lambda x, w, b: F.rms_norm(x, (n,), w, 1e-6)),
        "layer_norm": (lambda x, w, b: sa.layer_norm(x, (n,), w, b, 1e-5),
                       lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5)),
        "normalize": (lambda x, w, b: sa.normalize(x, 2.0, -1, 1e-12),
                      lambda x, w, b: F.normalize(x, 2.0, -1, 1e-12)),
    }[name]


def torch_inputs(torch, shape, dtype, key, scale=2.0):
    """x (scale × standard normal), w and b on the CPU (drawn in f64, so every device sees
    the same values)."""
    g = torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))
    n = shape[-1]
    x = (scale * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
    w = (0.5 + torch.rand(n, generator=g, dtype=torch.float64)).to(dtype)
    b = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    return x, w, b


def reference_of(torch, fn, args, dtype):
    """torch's `fn`; for 16-bit types on f32 copies, rounded once to `dtype`."""
    if dtype in (torch.bfloat16, torch.float16):
        return fn(*(a.float() for a in args)).to(dtype)
    return fn(*args)


# The functions whose programs call exp or log: those are within 1 ulp of an f64 reference
# on each side but not bit-identical across GPU and CPU (docs/numerics.md), so the GPU and
# the twin agree within TWIN_ULPS of the output type; the other programs (+ - * /, sqrt,
# rsqrt, amax, ...) bit for bit.
INEXACT = {"softmax", "log_softmax", "logsumexp", "cross_entropy", "user"}
TWIN_ULPS = 4


def ulp_distance(torch, got, twin):
    """|got - twin| in ulps of their type, elementwise (the bits as sign-magnitude integers)."""
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
    mask = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FFFFFFFFFFFFFFF}[got.element_size()]

    def key(t):
        i = t.contiguous().view(bits).to(torch.int64)
        return torch.where(i < 0, -(i & mask), i)

    return (key(got.cpu()) - key(twin.cpu())).abs()


def assert_same_bits(torch, got, twin, what, name=None):
    """The GPU's result against the CPU twin's: the same bits, or within TWIN_ULPS for the
    programs of INEXACT (``name``)."""
    assert got.dtype == twin.dtype and tuple(got.shape) == tuple(twin.shape), what
    bound = TWIN_ULPS if name in INEXACT else 0
    d = ulp_distance(torch, got, twin)
    if bool((d > bound).any()):
        k = int((d > bound).flatten().nonzero()[0][0])
        raise AssertionError(f"{what}: {int((d > bound).sum())} of {d.numel()} elements differ from the CPU twin "
                             f"by more than {bound} ulp (at most {int(d.max())}); first at flat index {k}: "
                             f"{got.flatten()[k].item()!r} vs {twin.flatten()[k].item()!r}")


@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dt", GPU_TYPES)
@pytest.mark.parametrize("name", FUNCS)
def test_gpu_matches_torch_and_the_cpu_twin_bit_for_bit(torch, name, dt, shape):
    dtype = getattr(torch, dt)
    host = torch_inputs(torch, shape, dtype, (name, dt, shape))
    dev = [t.cuda() for t in host]
    ours, theirs = torch_pair(torch, name, shape[-1])
    got = ours(*dev)
    assert isinstance(got, torch.Tensor) and got.device == dev[0].device and got.dtype == dtype
    rtol, atol = GPU_TOL[dt]
    torch.testing.assert_close(got, reference_of(torch, theirs, dev, dtype), rtol=rtol, atol=atol)
    twin = ours(*host)  # CPU torch tensors: the CPU twin
    assert twin.device.type == "cpu"
    assert_same_bits(torch, got, twin, f"{name} {dt} {shape}", name)
    count_case("norm", "cuda")


@pytest.mark.parametrize("dt", GPU_TYPES)
def test_gpu_other_axes_strided_rows_and_a_user_program(torch, dt):
    dtype = getattr(torch, dt)
    rtol, atol = GPU_TOL[dt]
    x = torch_inputs(torch, (1000, 64), dtype, ("axes", dt))[0]
    xd = x.cuda()
    # Over dim 0 (rows of stride 64), and over the last axis of the transpose (the same rows).
    pairs = [
        (lambda t: sa.softmax(t, 0), lambda t: torch.softmax(t, 0)),
        (lambda t: sa.log_softmax(t.t(), -1), lambda t: torch.log_softmax(t.t(), -1)),
        (lambda t: sa.logsumexp(t, 0, keepdim=True), lambda t: torch.logsumexp(t, 0, keepdim=True)),
    ]
    for ours, theirs in pairs:
        got = ours(xd)
        torch.testing.assert_close(got, reference_of(torch, theirs, [xd], dtype), rtol=rtol, atol=atol)
        assert_same_bits(torch, got, ours(x), f"{dt} other axes", "softmax")
    # The scaled, masked softmax that bench_norm.py runs: a Python-number scalar and a mask
    # row broadcast over the rows.
    a, _, mask = torch_inputs(torch, (8, 4096), dtype, ("user", dt))
    f = sa.norm(USER)
    got = f(a=a.cuda(), s=0.125, mask=mask.cuda(), dim=-1)
    ref = reference_of(torch, lambda t, mk: torch.softmax(t * 0.125 + mk, -1), [a.cuda(), mask.cuda()], dtype)
    torch.testing.assert_close(got, ref, rtol=rtol, atol=atol)
    assert_same_bits(torch, got, f(a, 0.125, mask), f"{dt} user program", "user")


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "float32"])
def test_gpu_rms_norm_default_eps_is_torchs(torch, dt):
    """With no eps, torch's rms_norm adds ``finfo(opmath).eps``: float32's for bf16, f16 and
    f32 inputs (not ``finfo(bfloat16).eps``). Inputs of magnitude 1e-3 make mean(x²) about
    1e-6, so that the eps shows in the result."""
    dtype = getattr(torch, dt)
    x, w, _ = (t.cuda() for t in torch_inputs(torch, (8, 4096), dtype, ("eps", dt), scale=1e-3))
    got = sa.rms_norm(x, (4096,), w)
    rtol, atol = GPU_TOL[dt]
    torch.testing.assert_close(got, torch.nn.functional.rms_norm(x, (4096,), w), rtol=rtol, atol=atol)
    assert_same_bits(torch, got, sa.rms_norm(x, (4096,), w, torch.finfo(torch.float32).eps), f"{dt} default eps")


def ce_reference(x, t, weight=None, ignore_index=-100, reduction="mean", ls=0.0):
    """torch's cross-entropy in f64 (class axis 1, or 0 for a 1-D input)."""
    x = np.asarray(x, np.float64)
    axis = 0 if x.ndim == 1 else 1
    c = x.shape[axis]
    xm = np.moveaxis(x, axis, -1)
    m = xm.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(xm - m).sum(-1, keepdims=True)))[..., 0]
    w = np.ones(c) if weight is None else np.asarray(weight, np.float64)
    keep = t != ignore_index
    tc = np.where(keep, t, 0)
    xt = np.take_along_axis(xm, tc[..., None], -1)[..., 0]
    wt = w[tc]
    loss = (1 - ls) * wt * (lse - xt) + ls / c * (lse * w.sum() - (xm * w).sum(-1))
    loss = np.where(keep, loss, 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / np.where(keep, wt, 0.0).sum()


CE_CASES = [
    dict(),
    dict(reduction="none"),
    dict(reduction="sum"),
    dict(ignore_index=1),
    dict(label_smoothing=0.1),
    dict(weighted=True),
    dict(weighted=True, label_smoothing=0.2, reduction="none"),
    dict(weighted=True, ignore_index=0, reduction="mean"),
]


@pytest.mark.parametrize("shape", [(5, 7), (3, 1000), (2, 4, 3), (6,)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dt", list(NP_TYPES))
@pytest.mark.parametrize("case", range(len(CE_CASES)))
def test_cross_entropy_matches_an_f64_reference_on_the_cpu_twin(case, dt, shape):
    kw = dict(CE_CASES[case])
    g = rng("ce", case, dt, shape)
    c = shape[0] if len(shape) == 1 else shape[1]
    x = (3 * g.standard_normal(shape)).astype(NP_TYPES[dt])
    tshape = shape[:1][:0] if len(shape) == 1 else shape[:1] + shape[2:]
    t = g.integers(0, c, tshape).astype(np.int64)
    if len(shape) > 1:
        t.flat[0] = kw.get("ignore_index", -100)  # one ignored sample
    weight = (0.5 + g.random(c)).astype(NP_TYPES[dt]) if kw.pop("weighted", False) else None
    got = sa.cross_entropy(x, t, weight=weight, **kw)
    want = ce_reference(x, t, weight, kw.get("ignore_index", -100), kw.get("reduction", "mean"),
                        kw.get("label_smoothing", 0.0))
    got = np.asarray(got)
    assert got.dtype == NP_TYPES[dt] and got.shape == np.shape(want)
    rtol, atol = TOL[dt]
    np.testing.assert_allclose(got, want, rtol=10 * rtol, atol=10 * atol)
    count_case("norm", "cpu")


def test_cross_entropy_all_ignored_is_nan_and_bad_calls_are_typed():
    x = np.float32([[1, 2], [3, 4]])
    t = np.int64([-100, -100])
    assert np.isnan(sa.cross_entropy(x, t))
    assert sa.cross_entropy(x, t, reduction="sum") == 0
    with pytest.raises(ValueError, match="reduction"):
        sa.cross_entropy(x, np.int64([0, 1]), reduction="avg")
    with pytest.raises(ValueError, match="target of shape"):
        sa.cross_entropy(x, np.int64([0, 1, 1]))
    with pytest.raises(ValueError, match="class indices are integers"):
        sa.cross_entropy(x, np.float32([0, 1]))
    with pytest.raises(ValueError, match="label_smoothing"):
        sa.cross_entropy(x, np.int64([0, 1]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="weight of shape"):
        sa.cross_entropy(x, np.int64([0, 1]), weight=np.float32([1, 2, 3]))


@pytest.mark.parametrize("dt", GPU_TYPES)
def test_gpu_cross_entropy_matches_torch_and_the_twin(torch, dt):
    dtype = getattr(torch, dt)
    F = torch.nn.functional
    for shape, kw in [((64, 1000), {}), ((8, 5000), dict(label_smoothing=0.1)),
                      ((4, 10, 6), dict(reduction="none")), ((32, 300), dict(weighted=True, ignore_index=3))]:
        kw = dict(kw)
        x, w, _ = torch_inputs(torch, shape, dtype, ("ce", dt, shape))
        t = torch.randint(0, shape[1], shape[:1] + shape[2:], generator=torch.Generator().manual_seed(7))
        t.view(-1)[0] = kw.get("ignore_index", -100)
        weight = w[: shape[1]] if kw.pop("weighted", False) else None
        args = dict(weight=None if weight is None else weight.cuda(), **kw)
        got = sa.cross_entropy(x.cuda(), t.cuda(), **args)
        theirs = lambda *a: F.cross_entropy(*a, **args)
        want = F.cross_entropy(x.cuda().float(), t.cuda(), **{**args, "weight": None if weight is None else weight.cuda().float()}).to(dtype)
        rtol, atol = GPU_TOL[dt]
        torch.testing.assert_close(got, want, rtol=2 * rtol, atol=2 * atol)
        twin = sa.cross_entropy(x, t, **{**args, "weight": weight})
        assert_same_bits(torch, got, twin, f"cross_entropy {dt} {shape} {kw}", "cross_entropy")
        del theirs
    count_case("norm", "cuda")
