"""Expressions (``sa.expr``) on CUDA operands: the GPU's interpreter kernels (tier 0)
against torch computing the same expression with its eager ops, and against the CPU twin
(the same expression called with ``.cpu()`` copies of the inputs).

How results are compared (docs/numerics.md):

* Exact ops (``+ - * /``, ``minimum``, ``maximum``, ``abs``, ``neg``, ``relu``,
  ``clamp``, comparisons, logical ops, ``where``, integer arithmetic, casts and the one
  rounding into the output type): bit for bit with torch, whose eager ops round each op
  once in the same op math type as the interpreter (f32 for 16-bit floats), and bit for
  bit with the CPU twin. NaNs are compared as NaNs (positions, not payloads).
* ``sqrt``, ``rsqrt`` and ``fma`` are bit-identical between the GPU and the CPU twin;
  torch is not the reference for them (its ``rsqrt`` is an approximation and it has no
  fused multiply-add): ``fma`` is checked against an exact reference on data where
  ``a * b + c`` is exact in f64.
* Transcendental functions (``sin cos exp log tanh sigmoid pow``) come from libdevice on
  the GPU, from Rust's ``std`` on the CPU twin and from CUDA's math library in torch; each
  is within a few ulp of the exact result, so GPU, torch and twin may differ in the last
  bits. The seed expression is compared with a bound relative to the magnitude of its
  terms (f32: rtol 1e-5, atol 1e-6; f64: rtol 1e-12), which a sum that cancels to near
  zero cannot make flaky.

torch has no negative strides: ``flip`` copies, so the "reversed" operand below is a
contiguous copy (CuPy's export of reversed views is covered, as a refusal, in
test_cupy.py).

The module skips without torch or without a CUDA device; the CuPy test also needs CuPy.
Every tensor has at most about 1e6 elements.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip(
        "no CUDA device: torch.cuda.is_available() is False (expressions on the GPU are not tested)",
        allow_module_level=True,
    )

import strided_apply as sa  # noqa: E402

DEV = "cuda"
SEED = "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)"
FLOATS = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
INTS = {"i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}
SEED_TOL = {"f32": (1e-5, 1e-6), "f64": (1e-12, 1e-12)}


def gen(seed):
    return torch.Generator().manual_seed(seed)


def normal(shape, dtype=torch.float32, seed=0):
    """Standard normal values (drawn on the CPU, so every device sees the same data)."""
    return torch.randn(shape, generator=gen(seed), dtype=torch.float64).to(dtype).to(DEV)


def uniform(shape, lo, hi, dtype=torch.float32, seed=0):
    x = torch.rand(shape, generator=gen(seed), dtype=torch.float64) * (hi - lo) + lo
    return x.to(dtype).to(DEV)


def integers(shape, lo, hi, dtype, seed=0):
    return torch.randint(lo, hi, shape, generator=gen(seed), dtype=torch.int64).to(dtype).to(DEV)


def assert_same(got, want, what=""):
    """Same dtype, shape and bits (NaNs compared as NaNs; -0.0 equals 0.0, as torch.equal)."""
    assert isinstance(got, torch.Tensor), what
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)}, want {tuple(want.shape)}"
    got, want = got.cpu(), want.cpu()
    if got.is_floating_point():
        gn, wn = got.isnan(), want.isnan()
        assert torch.equal(gn, wn), f"{what}: NaN positions differ ({int((gn != wn).sum())} elements)"
        got, want = got[~gn], want[~wn]
    if not torch.equal(got, want):
        got, want = got.flatten(), want.flatten()
        diff = got != want
        k = int(diff.nonzero()[0][0])
        raise AssertionError(
            f"{what}: {int(diff.sum())} of {diff.numel()} elements differ; "
            f"first at flat index {k}: {got[k].item()!r} vs {want[k].item()!r}"
        )


def assert_close(got, want, scale, rtol, atol, what=""):
    """|got - want| <= atol + rtol * scale everywhere, where `scale` is the magnitude of the
    terms of the expression (so a result that cancels to near zero keeps an absolute bound)."""
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), what
    err = (got.cpu().double() - want.cpu().double()).abs()
    bound = atol + rtol * scale.cpu().double().expand(err.shape)
    bad = ~(err <= bound)  # a NaN counts as bad
    if bad.any():
        k = int(bad.flatten().nonzero()[0][0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} elements off (rtol {rtol}, atol {atol}); "
            f"max error {err.max().item():.3g}; first at flat index {k}: "
            f"{got.flatten()[k].item()!r} vs {want.flatten()[k].item()!r}"
        )


def cpu_copies(*xs):
    return [x.cpu() if isinstance(x, torch.Tensor) else x for x in xs]


def seed_torch(a, b, c):
    return torch.sin(a * b) + torch.sqrt(c) + torch.cos(a) / torch.log(torch.cos(b) + 2)


def seed_scale(a, b, c):
    """The magnitude of the seed's terms, in f64."""
    a, b, c = (x.double() for x in (a, b, c))
    return torch.sin(a * b).abs() + torch.sqrt(c) + (torch.cos(a) / torch.log(torch.cos(b) + 2)).abs()


def seed_inputs(layout, dtype, m=600, n=900):
    shapes = {"dense": [(m, n)] * 3, "broadcast": [(1, n), (m, 1), (m, n)]}[layout]
    a = normal(shapes[0], dtype, seed=1)
    # |b| < 2: log(cos(b) + 2) stays above 0.46, so rounding is not amplified by the quotient.
    b = uniform(shapes[1], -2, 2, dtype, seed=2)
    c = uniform(shapes[2], 0, 1, dtype, seed=3)
    return a, b, c


@pytest.mark.parametrize("layout", ["dense", "broadcast"])
@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_seed_expression_matches_torch_and_the_cpu_twin(dt, layout):
    dtype = FLOATS[dt]
    a, b, c = seed_inputs(layout, dtype)
    f = sa.expr(SEED)
    got = f(a=a, b=b, c=c)
    assert isinstance(got, torch.Tensor) and got.device == a.device
    assert got.dtype == dtype and tuple(got.shape) == (600, 900)
    rtol, atol = SEED_TOL[dt]
    scale = seed_scale(a, b, c)
    assert_close(got, seed_torch(a, b, c), scale, rtol, atol, f"{dt} {layout} vs torch")
    twin = f(*cpu_copies(a, b, c))
    assert twin.device.type == "cpu"
    assert_close(got.cpu(), twin, scale, rtol, atol, f"{dt} {layout} vs the CPU twin")
    # Positional binding, a second run of the cached program: the same bits.
    assert_same(f(a, b, c), got, "second run")
    # The exact part of the seed: bit for bit with torch and with the twin.
    g = sa.expr("a*b + c - a/(b + 3)")
    exact = g(a, b, c)
    assert_same(exact, a * b + c - a / (b + 3), f"{dt} {layout} exact part vs torch")
    assert_same(exact.cpu(), g(*cpu_copies(a, b, c)), f"{dt} {layout} exact part vs the CPU twin")


EXACT = [
    ("a + b", lambda a, b, c: a + b),
    ("a * b - c", lambda a, b, c: a * b - c),
    ("a / b + c", lambda a, b, c: a / b + c),
    ("where(a > b, a, b)", lambda a, b, c: torch.where(a > b, a, b)),
    ("minimum(a, b) - maximum(b, c)", lambda a, b, c: torch.minimum(a, b) - torch.maximum(b, c)),
    ("abs(a) * neg(b) + relu(c)", lambda a, b, c: torch.abs(a) * torch.neg(b) + torch.relu(c)),
    ("clamp(a, -0.5, 0.5) * 3", lambda a, b, c: torch.clamp(a, -0.5, 0.5) * 3),
    ("(a < b) | (c >= 0.5)", lambda a, b, c: (a < b) | (c >= 0.5)),
    ("(a != c) & !(b <= 0)", lambda a, b, c: (a != c) & ~(b <= 0)),
    ("where(a == a, -a, c) * c", lambda a, b, c: torch.where(a == a, -a, c) * c),
]


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("text", [t for t, _ in EXACT])
def test_exact_ops_are_bit_identical_to_torch_and_the_cpu_twin(text, dt):
    dtype = FLOATS[dt]
    ref = dict(EXACT)[text]
    shape = (1001, 997) if text == "a + b" else (300, 500)  # an odd count near 1e6 once
    a, b, c = (normal(shape, dtype, seed=s) for s in (4, 5, 6))
    # A NaN and infinities travel through every op as torch's do.
    a[0, 0], b[0, 1], c[0, 2] = float("nan"), float("inf"), float("-inf")
    f = sa.expr(text)
    env = {"a": a, "b": b, "c": c}
    got = f(**{n: env[n] for n in f.names})  # by keyword: `f.names` is in order of first use
    assert got.device == a.device
    assert_same(got, ref(a, b, c), f"{text} {dt} vs torch")
    twin = f(**{n: env[n].cpu() for n in f.names})
    assert_same(got.cpu(), twin, f"{text} {dt} vs the CPU twin")


FUNCS = [
    ("exp(a)", torch.exp, "a"),
    ("log(c)", torch.log, "c"),
    ("sin(a)", torch.sin, "a"),
    ("cos(a)", torch.cos, "a"),
    ("tanh(a)", torch.tanh, "a"),
    ("sigmoid(a)", torch.sigmoid, "a"),
    ("c ** 1.5", lambda x: torch.pow(x, 1.5), "c"),
    ("pow(c, a)", None, "ca"),
    ("sqrt(c)", torch.sqrt, "c"),
    ("rsqrt(c)", torch.rsqrt, "c"),
]


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("text", [t for t, _, _ in FUNCS])
def test_functions_are_close_to_torch_and_the_cpu_twin(text, dt):
    dtype = FLOATS[dt]
    fn, args = {t: (f, a) for t, f, a in FUNCS}[text]
    a = normal((200, 300), dtype, seed=7)
    c = uniform((200, 300), 0.01, 4, dtype, seed=8)
    x = {"a": a, "c": c}
    ins = [x[k] for k in args]
    want = torch.pow(c, a) if fn is None else fn(ins[0])
    f = sa.expr(text)
    got = f(*ins)
    # Each side within a few ulp of the exact result: a relative bound of 16 ulp.
    rtol = 16 * torch.finfo(dtype).eps
    assert_close(got, want, want.abs(), rtol, 0.0, f"{text} {dt} vs torch")
    twin = f(*cpu_copies(*ins))
    if text.startswith(("sqrt", "rsqrt")):  # correctly rounded steps: the same bits
        assert_same(got.cpu(), twin, f"{text} {dt} vs the CPU twin")
    else:
        assert_close(got.cpu(), twin, want.abs(), rtol, 0.0, f"{text} {dt} vs the CPU twin")


def test_fma_rounds_once():
    shape = (400, 500)
    sign = lambda s: integers(shape, 0, 2, torch.float32, seed=s) * 2 - 1  # noqa: E731
    # |a|, |b| in [0.5, 2) and |c| in [0.5, 4): a*b + c is a multiple of 2^-48 below 8, so
    # it is exact in f64 and the f64 result rounded to f32 is the correctly rounded fma.
    a = uniform(shape, 0.5, 2, seed=9) * sign(10)
    b = uniform(shape, 0.5, 2, seed=11) * sign(12)
    c = uniform(shape, 0.5, 4, seed=13) * sign(14)
    f = sa.expr("fma(a, b, c)")
    got = f(a, b, c)
    exact = (a.double() * b.double() + c.double()).float()
    assert_same(got, exact, "fma vs the exact result")
    assert bool((got != a * b + c).any()), "fma gave the bits of a*b+c rounded twice everywhere"
    assert_same(got.cpu(), f(*cpu_copies(a, b, c)), "fma vs the CPU twin")
    # Integer-valued data, where both roundings are exact: equal to torch's a*b + c.
    ai, bi = (integers(shape, -2000, 2000, torch.float32, seed=s) for s in (15, 16))
    ci = integers(shape, -(10**6), 10**6, torch.float32, seed=17)
    assert_same(f(ai, bi, ci), ai * bi + ci, "fma on integers vs torch")
    # f64: bit for bit with the twin.
    a64, b64, c64 = (normal(shape, torch.float64, seed=s) for s in (18, 19, 20))
    assert_same(f(a64, b64, c64).cpu(), f(*cpu_copies(a64, b64, c64)), "f64 fma vs the CPU twin")


@pytest.mark.parametrize("dt", ["i32", "i64", "u8"])
def test_integer_ops_match_torch(dt):
    dtype = INTS[dt]
    shape = (300, 400)
    lo, hi = {"i32": (-30000, 30000), "i64": (-(2**31), 2**31), "u8": (0, 256)}[dt]
    a = integers(shape, lo, hi, dtype, seed=21)
    b = integers(shape, lo, hi, dtype, seed=22)
    # A nonzero divisor (of either sign for the signed types).
    d = integers(shape, 1, 200 if dt == "u8" else 1000, dtype, seed=23)
    if dt != "u8":
        d = d * (integers(shape, 0, 2, dtype, seed=24) * 2 - 1)
    small = 2**20  # exact in f32, so `/` compares bit for bit
    cases = [
        ("a + b", lambda: a + b),  # u8 wraps at its width, as torch
        ("a - b", lambda: a - b),
        ("a * b", lambda: a * b),  # no signed overflow: |a|, |b| < 2^31 (i64), < 30000 (i32)
        ("a % d", lambda: torch.remainder(a, d)),  # the sign of the divisor
        ("b % d + a", lambda: torch.remainder(b, d) + a),
        ("where(a < b, a, b) - d", lambda: torch.where(a < b, a, b) - d),
        ("maximum(a, b) + minimum(a, d)", lambda: torch.maximum(a, b) + torch.minimum(a, d)),
        ("a == b | a > d", lambda: (a == b) | (a > d)),
        ("a + 7", lambda: a + 7),  # a weak integer keeps the type
        ("a * 2.5", lambda: a * 2.5),  # a weak float makes f32
    ]
    for text, ref in cases:
        f = sa.expr(text)
        args = {"a": a, "b": b, "d": d}
        ins = [args[n] for n in f.names]
        got = f(*ins)
        if text == "a * 2.5" and dt != "u8":
            ins = [x % 4096 for x in ins]  # exact in f32
            got, want = f(*ins), ins[0] * 2.5
        else:
            want = ref()
        assert_same(got, want, f"{text} {dt} vs torch")
        assert_same(got.cpu(), f(*cpu_copies(*ins)), f"{text} {dt} vs the CPU twin")
    a_s = a if dt == "u8" else a % small  # |d| < 1000 already
    got = sa.expr("a / d")(a_s, d)
    assert_same(got, a_s / d, f"a / d {dt}: true division in f32")


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_16_bit_floats(dt):
    dtype = FLOATS[dt]
    shape = (300, 400)
    a, b, c = (normal(shape, dtype, seed=s) for s in (25, 26, 27))
    # One op: computed in f32, rounded once to the type, as torch's eager op.
    assert_same(sa.expr("a + b")(a, b), a + b, f"{dt} a + b")
    assert_same(sa.expr("a * b")(a, b), a * b, f"{dt} a * b")
    assert_same(sa.expr("a * 2.5")(a), a * 2.5, f"{dt} a * 2.5 (a weak float keeps the type)")
    assert_same(sa.expr("where(a > b, a, c)")(a, b, c), torch.where(a > b, a, c), f"{dt} where")
    # A chain is computed in f32 and rounded once (as fused kernels do; eager torch rounds
    # after every op).
    f = sa.expr("a * b + c")
    got = f(a, b, c)
    assert_same(got, (a.float() * b.float() + c.float()).to(dtype), f"{dt} a * b + c rounded once")
    assert_same(got.cpu(), f(*cpu_copies(a, b, c)), f"{dt} a * b + c vs the CPU twin")


def test_mixed_dtypes_promote_as_torch():
    shape = (200, 300)
    f32 = normal(shape, torch.float32, seed=28)
    bf = normal(shape, torch.bfloat16, seed=29)
    h = normal(shape, torch.float16, seed=30)
    u8 = integers(shape, 0, 256, torch.uint8, seed=31)
    i32 = integers(shape, -(2**20), 2**20, torch.int32, seed=32)
    m = normal(shape, seed=33) > 0
    cases = [
        ("a + b", (bf, f32)),  # bf16 + f32 -> f32
        ("a + b", (f32, bf)),
        ("a * b", (h, bf)),  # f16 * bf16 -> f32
        ("a + b", (u8, i32)),  # u8 + i32 -> i32
        ("a - b", (u8, h)),  # u8 - f16 -> f16 (u8 is exact in f16)
        ("a + b", (m, u8)),  # bool + u8 -> u8
        ("a < b", (i32, u8)),  # compared as i32
        ("a * 2.5", (i32,)),  # i32 * weak float -> f32 (|i32| < 2^20: exact in f32)
        ("where(c, a, b)", (m, bf, f32)),  # -> f32
    ]
    for text, ins in cases:
        f = sa.expr(text)
        got = f(*ins)
        env = dict(zip(f.names, ins))
        if text.startswith("where"):
            want = torch.where(env["c"], env["a"], env["b"])
        else:
            want = eval(text, {}, env)  # torch's own operators on the same tensors
        assert_same(got, want, f"{text} over {[x.dtype for x in ins]}")
        assert_same(got.cpu(), f(*cpu_copies(*ins)), f"{text} over {[x.dtype for x in ins]} vs the CPU twin")


def test_python_numbers_are_run_time_scalars():
    f = sa.expr("a * s + b")
    x, y = normal((300, 400), seed=34), normal((300, 400), seed=35)
    for s in (2.5, -0.75, 0.1, 3, True):
        assert_same(f(a=x, b=y, s=s), x * s + y, f"s = {s!r}")
        assert_same(f(x, s, y), x * s + y, f"s = {s!r}, positional")
    u8 = integers((300, 400), 0, 256, torch.uint8, seed=36)
    assert_same(sa.expr("a + s")(u8, s=7), u8 + 7, "u8 + 7 wraps")
    x64 = normal((300, 400), torch.float64, seed=37)
    assert_same(f(x64, 0.1, x64), x64 * 0.1 + x64, "an f64 tensor keeps the scalar in f64")


def test_strided_views_match_torch():
    x = normal((96, 128), seed=38)
    views = {
        "transposed": x.t(),
        "step-2 slice": x[:, ::2],
        "offset slice": x[5:, 7:],
        "reversed (flip copies)": x.flip(0),
        "expanded row (stride 0)": x[:1].expand(96, 128),
        "permuted 4-d": x.reshape(4, 24, 8, 16).permute(3, 1, 0, 2),
        "transposed step-2": x.t()[::2, 1::3],
    }
    f = sa.expr("a * b - c")
    for name, v in views.items():
        w = normal(v.shape, seed=39)
        u = normal(v.shape, seed=40)
        for ins in ((v, w, u), (w, u, v), (v, v, v)):
            got = f(*ins)
            assert_same(got, ins[0] * ins[1] - ins[2], f"{name} vs torch")
            assert_same(got.cpu(), f(*cpu_copies(*ins)), f"{name} vs the CPU twin")
    # A zero-dimensional tensor broadcasts as a scalar; three of them give shape [].
    s0 = torch.tensor(1.5, device=DEV)
    assert_same(f(x, s0, x.t().t()), x * s0 - x, "a shape-[] tensor")
    assert_same(f(s0, s0, s0), s0 * s0 - s0, "all shape []")


def test_zero_size_tensors():
    f = sa.expr("a + b * 2")
    e = torch.empty((0, 5), device=DEV)
    got = f(e, e)
    assert got.shape == (0, 5) and got.dtype == torch.float32 and got.device == e.device
    got = f(torch.empty((0, 1), device=DEV), torch.ones((1, 5), device=DEV))
    assert got.shape == (0, 5)
    out = torch.empty((3, 0), device=DEV)
    assert f(torch.empty((3, 0), device=DEV), torch.ones((3, 1), device=DEV), out=out) is out


def test_non_contiguous_out_views():
    a, b = normal((64, 48), seed=41), normal((64, 48), seed=42)
    f = sa.expr("a - b * 3")
    big = torch.full((64, 96), 7.0, device=DEV)
    assert f(a, b, out=big[:, ::2]) is not None
    assert_same(big[:, ::2], a - b * 3, "step-2 out")
    assert bool((big[:, 1::2] == 7).all()), "the other columns stay untouched"
    t = torch.full((48, 64), 7.0, device=DEV)
    out = t.t()
    assert f(a, b, out=out) is out
    assert_same(t.t(), a - b * 3, "transposed out")


def test_in_place_out():
    a, b = normal((300, 400), seed=43), normal((300, 400), seed=44)
    a0 = a.clone()
    sa.expr("a * 2 + b")(a, b, out=a)
    assert_same(a, a0 * 2 + b, "out=a")
    # The same view as an input and as out (same offsets): in place too.
    x = a0.clone().t()
    sa.expr("abs(x) * 3 - x")(x, out=x)
    assert_same(x, torch.abs(a0.t()) * 3 - a0.t(), "out=x of a transposed view")


def test_out_keeps_its_dtype_and_dtype_chooses_a_new_one():
    a, b, c = (normal((200, 300), seed=s) for s in (45, 46, 47))
    f = sa.expr("a * b + c")
    want32 = a * b + c
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        out = torch.full((200, 300), 7.0, device=DEV, dtype=dtype)
        assert f(a, b, c, out=out) is out
        assert_same(out, want32.to(dtype), f"out {dtype}: the f32 result rounded once")
    got = f(a, b, c, dtype=torch.float16)
    assert got.device == a.device
    assert_same(got, want32.half(), "dtype=torch.float16")
    assert_same(f(a, b, c, dtype="bfloat16"), want32.bfloat16(), "dtype='bfloat16'")
    # bf16 inputs into an f32 out: the sum is not rounded to bf16 first.
    x, y = normal((200, 300), torch.bfloat16, seed=48), normal((200, 300), torch.bfloat16, seed=49)
    out = torch.empty((200, 300), device=DEV)
    sa.expr("a + b")(x, y, out=out)
    assert_same(out, x.float() + y.float(), "bf16 + bf16 into f32")
    assert not torch.equal(out, (x + y).float())


def test_streams():
    f = sa.expr("a * 2 + 1")
    n = 1 << 20
    s = torch.cuda.Stream()
    sleep = getattr(torch.cuda, "_sleep", None)
    for mode in ("current stream", "stream=Stream", "stream=handle", "new out on the current stream"):
        x = torch.zeros(n, device=DEV)
        out = torch.full((n,), -1.0, device=DEV)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            if sleep is not None:
                sleep(50_000_000)  # the fill below runs late on `s`: a launch elsewhere reads zeros
            x.fill_(3.0)
            if mode == "current stream":
                f(x, out=out)
            elif mode == "new out on the current stream":
                out = f(x)
        if mode == "stream=Stream":
            f(x, out=out, stream=s)
        elif mode == "stream=handle":
            f(x, out=out, stream=s.cuda_stream)
        s.synchronize()
        assert bool((out == 7.0).all()), f"{mode}: {out[:4].tolist()}"
    torch.cuda.synchronize()


def test_errors_are_typed_and_out_stays_untouched():
    a = normal((16,), seed=50)
    u8 = integers((16,), 0, 256, torch.uint8, seed=51)
    out = torch.full((16,), 7.0, device=DEV)
    x = torch.arange(16.0, device=DEV)
    cases = [
        (lambda: sa.expr("a + b")(a, a.cpu(), out=out), sa.DeviceError, "b: on the CPU"),
        (lambda: sa.expr("a + b")(a, a, out=out.cpu()), sa.DeviceError, "out: on the CPU"),
        # int8, int16 and float remainders are of the language now; float8 arithmetic is
        # refused (as PyTorch refuses it).
        (lambda: sa.expr("a + b")(a.to(torch.float8_e4m3fn), a, out=out), sa.DtypeError, "8-bit float"),
        (lambda: sa.expr("a + 1")(a.to(torch.float8_e5m2), out=out), sa.DtypeError, "f8e5m2"),
        (lambda: sa.expr("bitwise_and(a, b)")(a, a, out=out), sa.DtypeError, "bitwise_and"),
        (lambda: sa.expr("a + 300")(u8, out=out), sa.DtypeError, "does not fit u8"),
        (lambda: sa.expr("a + s")(u8, s=300, out=out), sa.ExprError, "does not fit"),
        (lambda: sa.expr("a + b")(a, a[:8], out=out), sa.LayoutError, None),
        (lambda: sa.expr("a + b")(a, a, out=out[:8]), sa.LayoutError, None),
        (lambda: sa.expr("a + b")(a, b=a, c=a, out=out), sa.ExprError, "c: not a name"),
        (lambda: sa.expr("a + b")(a, out=out), sa.ExprError, "b: missing"),
        (lambda: sa.expr("a + 1")(a, out=out, stream="x"), sa.Error, "stream"),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text):
            call()
        torch.cuda.synchronize()
        assert out.tolist() == [7.0] * 16
    assert issubclass(sa.DtypeError, sa.Error) and issubclass(sa.DeviceError, sa.Error)
    # out sharing memory with an input at other offsets (a partial overlap) is refused.
    with pytest.raises(sa.LayoutError):
        sa.expr("a + 1")(x[:-1], out=x[1:])
    torch.cuda.synchronize()
    assert x.tolist() == [float(k) for k in range(16)]


def test_eight_inputs_and_a_bool_mask():
    xs = [normal((33, 65), seed=60 + k) for k in range(8)]
    f = sa.expr("a + b * c - d / e + f * g - h")
    a, b, c, d, e, f_, g, h = xs
    got = f(*xs)
    assert_same(got, a + b * c - d / e + f_ * g - h, "eight inputs vs torch")
    assert_same(got.cpu(), f(*cpu_copies(*xs)), "eight inputs vs the CPU twin")
    m = a > b
    w = sa.expr("where(m, x, y * 2)")
    assert w.names == ["m", "x", "y"]
    assert_same(w(m, c, d), torch.where(m, c, d * 2), "a bool mask")
    # One expression object, several signatures: each compiled on first use.
    k = sa.expr("x * y + 1")
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int32):
        p, q = a.to(dtype), b.to(dtype)
        assert_same(k(p, q), p * q + 1 if dtype != torch.bfloat16 else (p.float() * q.float() + 1).to(dtype), str(dtype))


def test_cupy_arrays():
    cp = pytest.importorskip("cupy")
    try:
        has_gpu = cp.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver
        has_gpu = False
    if not has_gpu:
        pytest.skip("no CUDA device for CuPy")
    a = cp.arange(12 * 16, dtype=cp.float32).reshape(12, 16) / 7
    b = cp.arange(16, dtype=cp.float32) - 8  # a row, broadcast
    f = sa.expr("where(a > 10, a * b, a - b)")
    got = f(a, b)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32 and got.shape == (12, 16)
    na, nb = cp.asnumpy(a), cp.asnumpy(b)
    want = np.where(na > 10, na * nb, na - nb)
    np.testing.assert_array_equal(cp.asnumpy(got), want)
    # The host twin on the NumPy copies: the same bits.
    np.testing.assert_array_equal(cp.asnumpy(got), f(na, nb))
    # A transposed out, and CuPy's stream passed as stream=.
    out = cp.full((16, 12), cp.nan, dtype=cp.float32).T
    s = cp.cuda.Stream(non_blocking=True)
    assert f(a, b, out=out, stream=s) is out
    s.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), want)
    # The seed expression against NumPy in f64.
    r = np.random.default_rng(0)
    x = r.standard_normal((64, 33)).astype(np.float32)
    y = r.uniform(-2, 2, (64, 33)).astype(np.float32)
    z = r.random((64, 33)).astype(np.float32)
    g = sa.expr(SEED)(cp.asarray(x), cp.asarray(y), cp.asarray(z))
    x, y, z = (v.astype(np.float64) for v in (x, y, z))
    ref = np.sin(x * y) + np.sqrt(z) + np.cos(x) / np.log(np.cos(y) + 2)
    scale = np.abs(np.sin(x * y)) + np.sqrt(z) + np.abs(np.cos(x) / np.log(np.cos(y) + 2))
    assert np.all(np.abs(cp.asnumpy(g) - ref) <= 1e-6 + 1e-5 * scale)


@pytest.mark.parametrize("dt", ["f32", "f64", "bf16"])
def test_reductions_of_expressions_match_torch_and_the_cpu_twin(dt):
    """One pass on the GPU: the CPU twin's bits for exact ops (same order; the seed's
    transcendentals within a few ulp), the bits of the two steps it fuses (the expression's
    run, then the library's reduction), and torch within the rounding of a different
    order."""
    dtype = FLOATS[dt]
    cases = [
        ("(a - b) * (a - b)", [(4096, 64), (64,)], [1, 0, None]),  # short rows, columns
        ("a * b + 1", [(3, 200_000), (3, 1)], [1, (0, 1)]),  # several groups per output
        (SEED, [(1, 900), (600, 1), (600, 900)], [1, 0, None]),  # the seed, broadcast
    ]
    for text, shapes, dims in cases:
        ins = [uniform(s, 0.1, 2, dtype, seed=60 + k) for k, s in enumerate(shapes)]
        f = sa.expr(text)
        for op in ("sum", "amax", "mean", "prod", "amin"):
            for dim in dims:
                got = getattr(f, op)(*ins, dim=dim)
                what = f"{op} of `{text}` over {dim} in {dt}"
                twin = getattr(f, op)(*cpu_copies(*ins), dim=dim)
                if text == SEED:
                    # Transcendentals: libdevice on the GPU, Rust's std on the twin (within
                    # a few ulp of each other, not bit-identical); products of hundreds of
                    # factors overflow alike and compound the ulps.
                    g_, t_ = got.cpu().double(), twin.double()
                    assert torch.equal(g_.isinf(), t_.isinf()) and torch.equal(g_.isnan(), t_.isnan()), what
                    fin = t_.isfinite()
                    tol = {"f32": 1e-5, "f64": 1e-12, "bf16": 1e-2}[dt] * (1000 if op == "prod" else 1)
                    assert_close(g_[fin], t_[fin], t_[fin].abs() + 1, tol, tol, what + " (twin)")
                else:
                    assert_same(got.cpu(), twin, what + " (twin)")
                assert_same(got, sa.reduce(op, f(*ins), dim=dim), what + " (two steps)")
                if op == "prod":
                    continue  # overflows to inf or 0 at these lengths; the bits above hold
                want = getattr(torch, op)(f(*ins).double(), dim=dim) if dim is not None else getattr(torch, op)(f(*ins).double())
                tol = {"f32": 1e-4, "f64": 1e-10, "bf16": 2e-2}[dt]
                assert_close(got.double(), want, want.abs() + 1, tol, tol, what + " (torch)")


def test_reductions_of_expressions_errors_launch_nothing():
    a = normal((4, 16), seed=70)
    out = torch.full((4,), 7.0, device=DEV)
    cases = [
        (lambda: sa.expr("a + b").sum(a, a.cpu(), dim=1, out=out), sa.DeviceError, "b: on the CPU"),
        (lambda: sa.expr("a + 1").sum(a, dim=0, out=out), sa.LayoutError, "not the reduced shape"),
        (lambda: sa.expr("i32(a)").mean(a, dim=1, out=out.to(torch.int32)), sa.DtypeError, "`mean` reduces float"),
        (lambda: sa.expr("a + 1").sum(a, dim=1, out=a[:, 0]), sa.Error, "shares memory"),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text):
            call()
        torch.cuda.synchronize()
        assert out.tolist() == [7.0] * 4
