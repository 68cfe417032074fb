"""Expressions (``sa.expr``) on the CPU twin through NumPy: results against NumPy, binding
by keyword and position, run-time scalars, type promotion, ``out=`` and ``dtype=``,
broadcast and strided operands, and every bad input as a typed exception with ``out``
untouched. CUDA operands run on the GPU's interpreter kernels (tier 0): those are tested in
``test_expr_gpu.py``, against torch and against this CPU twin."""

import numpy as np
import pytest

import strided_apply as sa

SEED = "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)"


def rng(seed=0):
    return np.random.default_rng(seed)


def seed_reference(a, b, c):
    a, b, c = (x.astype(np.float64) for x in (a, b, c))
    return np.sin(a * b) + np.sqrt(c) + np.cos(a) / np.log(np.cos(b) + 2)


def test_the_seed_expression_matches_numpy_in_f32_and_f64():
    r = rng(1)
    for dt, tol in ((np.float32, 2e-6), (np.float64, 1e-14)):
        # |b| < 2: log(cos(b) + 2) stays above 0.46, so f32 rounding is not amplified.
        a = r.standard_normal((64, 33)).astype(dt)
        b = r.uniform(-2, 2, (64, 33)).astype(dt)
        c = r.random((64, 33)).astype(dt)
        got = sa.expr(SEED)(a=a, b=b, c=c)
        assert got.dtype == dt and got.shape == (64, 33)
        np.testing.assert_allclose(got, seed_reference(a, b, c), rtol=tol, atol=tol)


def test_broadcast_row_and_column_and_strided_views():
    r = rng(2)
    a = r.standard_normal(40).astype(np.float32)  # a row
    b = r.uniform(-2, 2, (30, 1)).astype(np.float32)  # a column
    c = r.random((60, 40)).astype(np.float32)[::2]  # every second row
    got = sa.expr(SEED)(a, b, c)
    want = seed_reference(np.broadcast_to(a, (30, 40)), np.broadcast_to(b, (30, 40)), c)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    t = r.standard_normal((16, 24)).astype(np.float32)
    got = sa.expr("a - b")(t.T, t[::-1].T[:, ::-1])
    np.testing.assert_array_equal(got, t.T - t[::-1].T[:, ::-1])


def test_names_bind_by_keyword_and_by_first_appearance():
    f = sa.expr("where(a > 0, a * s, b) + 1")
    assert f.names == ["a", "s", "b"]
    assert "where(a > 0" in repr(f)
    a = np.float32([-1, 2, -3, 4])
    b = np.float32([10, 20, 30, 40])
    want = [11.0, 21.0, 31.0, 9.0]
    assert f(a, 2.5, b).tolist() == [11.0, 6.0, 31.0, 11.0]
    assert f(a=a, s=2.5, b=b).tolist() == [11.0, 6.0, 31.0, 11.0]
    assert f(a, b=b, s=2).tolist() == [11.0, 5.0, 31.0, 9.0]
    assert f(a, 0.5, b=np.float32(0) + b).tolist() == [11.0, 2.0, 31.0, 3.0]
    assert len(want) == 4


def test_scalars_are_run_time_values_of_one_program():
    f = sa.expr("a * s + b")
    a = np.arange(5, dtype=np.float32)
    b = np.ones(5, np.float32)
    for s in (2.5, -1.0, 3, True):
        np.testing.assert_array_equal(f(a=a, b=b, s=s), a * np.float32(s) + b)


def test_promotion_follows_torch_result_type():
    u8 = np.uint8([250, 3, 7])
    i32 = np.int32([-5, 6, 7])
    f16 = np.float16([0.5, 1.5, -2])
    assert sa.expr("a + b")(u8, i32).dtype == np.int32
    assert sa.expr("a + 1")(u8).dtype == np.uint8  # a weak integer keeps u8
    assert sa.expr("a + 1")(u8).tolist() == [251, 4, 8]
    assert sa.expr("a + 10")(u8).tolist() == [4, 13, 17]  # u8 wraps at its width
    assert sa.expr("a * 2.5")(i32).dtype == np.float32  # a weak float makes f32
    assert sa.expr("a / b")(i32, np.int32([2, 4, 2])).dtype == np.float32
    assert sa.expr("a / b")(i32, np.int32([2, 4, 2])).tolist() == [-2.5, 1.5, 3.5]
    assert sa.expr("a % b")(i32, np.int32([3, 4, -2])).tolist() == [1, 2, -1]
    assert sa.expr("trunc_div(a, b)")(i32, np.int32([2, 0, 2])).tolist() == [-2, 0, 3]
    assert sa.expr("a + b")(f16, np.float32([1, 1, 1])).dtype == np.float32
    assert sa.expr("a < b")(i32, u8).dtype == np.bool_


def test_out_keeps_its_type_with_one_rounding_and_dtype_chooses_a_new_one():
    a = np.float32([1.0, 2.0 ** -12, 3.0])
    out = np.empty(3, np.float16)
    r = sa.expr("a + 1")(a, out=out)
    assert r is out
    np.testing.assert_array_equal(out, (a + 1).astype(np.float16))
    d = sa.expr("a * 2")(a, dtype="float64")
    assert d.dtype == np.float64 and d.tolist() == [2.0, 2.0 ** -11, 6.0]
    s = sa.expr("i32(a * 2) + 1")(a)
    assert s.dtype == np.int32 and s.tolist() == [3, 1, 7]


def test_bad_inputs_are_typed_errors_and_out_stays_untouched():
    a = np.float32([1, 2, 3])
    u8 = np.uint8([1, 2, 3])
    out = np.full(3, 7.0, np.float32)
    cases = [
        (lambda: sa.expr("a + * b"), sa.ExprError, "byte 4"),
        (lambda: sa.expr("sinn(a)"), sa.ExprError, "unknown function `sinn`"),
        (lambda: sa.expr("(a + b"), sa.ExprError, "expected `)`"),
        (lambda: sa.expr("a + b")(a, out=out), sa.ExprError, "b: missing"),
        (lambda: sa.expr("a + b")(a, a, a, out=out), sa.ExprError, "takes 2 argument"),
        (lambda: sa.expr("a + b")(a, b=a, c=a, out=out), sa.ExprError, "c: not a name"),
        (lambda: sa.expr("a + b")(a, a, b=a, out=out), sa.ExprError, "given twice"),
        (lambda: sa.expr("a + s")(u8, s=300), sa.ExprError, "does not fit"),
        (lambda: sa.expr("a + 300")(u8), sa.DtypeError, "does not fit u8"),
        (lambda: sa.expr("bitwise_and(a, b)")(a, a, out=out), sa.DtypeError, "bitwise_and"),
        (lambda: sa.expr("a + b")(a, np.float32([1, 2]), out=out), sa.LayoutError, "broadcast"),
        (lambda: sa.expr("a + b")(a, a, out=out[:2]), sa.LayoutError, "broadcast"),
        (lambda: sa.expr("a + s")(a, s="x", out=out), sa.Error, "s: expected a tensor"),
        (lambda: sa.expr(" + ".join(["a"] * 70))(a, out=out), sa.ExprError, "instructions"),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text.replace("(", r"\(").replace(")", r"\)")):
            call()
        assert out.tolist() == [7.0, 7.0, 7.0]
    assert issubclass(sa.ExprError, sa.Error)


def test_in_place_output_reads_its_old_values():
    a = np.arange(6, dtype=np.float32)
    b = np.ones(6, np.float32)
    sa.expr("a * 2 + b")(a, b, out=a)
    assert a.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = sa.expr("x * x - 1")(x.t())
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu"
    assert y.tolist() == (x.t() * x.t() - 1).tolist()
    out = torch.full((3, 2), 7.0, dtype=torch.float64)
    assert sa.expr("x * s + 1")(x.t(), s=0.5, out=out) is out
    assert out.tolist() == (x.t().double() * 0.5 + 1).tolist()


def test_up_to_eight_tensor_inputs():
    r = rng(3)
    xs = [r.standard_normal((5, 7)).astype(np.float32) for _ in range(8)]
    f = sa.expr("a + b * c - d / e + f * g - h")
    assert f.names == ["a", "b", "c", "d", "e", "f", "g", "h"]
    a, b, c, d, e, f_, g, h = xs
    want = a + b * c - d / e + f_ * g - h
    np.testing.assert_allclose(f(*xs), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(sa.ExprError, match="tensor inputs"):
        sa.expr("a + b + c + d + e + f + g + h + i")(*xs, xs[0])


def test_reductions_of_expressions_match_numpy_and_the_two_steps_they_fuse():
    r = rng(7)
    a = r.integers(-8, 8, (37, 300)).astype(np.float32)
    b = r.integers(-8, 8, 300).astype(np.float32)  # a row, broadcast
    f = sa.expr("(a - b) * (a - b)")
    sq = (a - b) ** 2  # small integers: every sum is exact, in any order
    for dim, want in ((1, sq.sum(1)), (0, sq.sum(0)), (None, sq.sum()), ((0, 1), sq.sum())):
        got = f.sum(a=a, b=b, dim=dim)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, np.asarray(want, np.float32))
    np.testing.assert_array_equal(f.sum(a, b, dim=1, keepdim=True), sq.sum(1, keepdims=True))
    np.testing.assert_array_equal(f.amax(a, b, dim=0), sq.max(0))
    np.testing.assert_array_equal(f.amin(a, b, dim=0), sq.min(0))
    np.testing.assert_array_equal(sa.expr("a * 0 + 1.5")(a).astype(np.float64).prod(1), sa.expr("a * 0 + 1.5").prod(a, dim=1, dtype=np.float64))
    # Any values: the one pass gives the bits of the expression's run, then the library's
    # reduction of it (one order on both).
    x = r.standard_normal((3, 5, 7000)).astype(np.float32)
    y = r.standard_normal(7000).astype(np.float32)[::-1]
    g = sa.expr("sin(x) * y + x")
    for op in ("sum", "prod", "amin", "amax", "mean"):
        for dim in (2, 0, (0, 2), None):
            got = getattr(g, op)(x, y, dim=dim)
            want = sa.reduce(op, g(x, y), dim=dim)
            np.testing.assert_array_equal(got, want, err_msg=f"{op} over {dim}")
    np.testing.assert_allclose(g.mean(x, y, dim=2), (np.sin(x.astype(np.float64)) * y + x).mean(2), rtol=1e-4, atol=1e-5)
    # Scalars, `dtype=`, `out=`, strided and transposed inputs.
    got = sa.expr("a * s").sum(a[:, ::3].T, s=0.5, dim=0, dtype=np.float64)
    np.testing.assert_array_equal(got, (a[:, ::3].T.astype(np.float64) * 0.5).sum(0))
    out = np.full(37, 9.0, np.float32)
    assert sa.expr("a + 1").sum(a, dim=1, out=out) is out
    np.testing.assert_array_equal(out, (a + 1).sum(1))
    ints = r.integers(-100, 100, (4, 50)).astype(np.int32)
    np.testing.assert_array_equal(sa.expr("a * a - 3").sum(ints, dim=1), (ints * ints - 3).sum(1).astype(np.int32))


def test_reductions_of_expressions_refuse_bad_input_with_out_untouched():
    a = np.float32([[1, 2, 3], [4, 5, 6]])
    i = np.int32([[1, 2, 3], [4, 5, 6]])
    out = np.full(2, 7.0, np.float32)
    cases = [
        (lambda: sa.expr("a + 1").mean(i, dim=1), sa.DtypeError, "`mean` reduces float values"),
        (lambda: sa.expr("a > 1").sum(a, dim=1), sa.DtypeError, "gives bool"),
        (lambda: sa.expr("a + 1").sum(a, dim=2), IndexError, "out of range"),
        (lambda: sa.expr("a + 1").sum(a, dim=(1, 1)), ValueError, "named twice"),
        (lambda: sa.expr("a + 1").sum(a, dim=0, out=out), sa.LayoutError, "not the reduced shape"),
        (lambda: sa.expr("a + b").sum(a, dim=1, out=out), sa.ExprError, "b: missing"),
        (lambda: sa.expr("a + 1").amax(np.zeros((2, 0), np.float32), dim=1, out=out), sa.Error, "nothing"),
        (lambda: sa.expr("a + 1").sum(a, dim=1, out=a[:, 0]), sa.Error, "shares memory"),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text):
            call()
        assert out.tolist() == [7.0, 7.0]
