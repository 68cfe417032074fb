"""CuPy operands through ``__dlpack__`` on the GPU: strided views, outputs allocated by
CuPy, CuPy's current stream, bad input. Skipped (by name) without CuPy or without a CUDA
device.

CuPy's DLPack export of a view with a negative stride gives a huge positive stride (seen
with the CuPy of the GPU machine: ``a[::-1]`` of a (64, 96) float32 array exports strides
``[2**62 - 96, 1]``, the byte stride divided as an unsigned number), so such views are
refused with ``LayoutError`` (offset arithmetic overflows) instead of being read; the
test checks that refusal."""

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import strided_apply as sa  # noqa: E402

try:
    HAS_GPU = cp.cuda.runtime.getDeviceCount() > 0
except Exception:  # no driver
    HAS_GPU = False
pytestmark = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device for CuPy")


def _rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return cp.asarray(rng.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_cupy_views_match_cupy(dtype):
    a = _rand((64, 96), dtype, 1)
    b = _rand((96, 64), dtype, 2)
    views = {
        "contiguous": (a, b.T.copy()),
        "transposed": (a, b.T),
        "step2": (a[::2], b.T[::2]),
        "broadcast_row": (a, b.T[:1]),
        "offset": (a[3:, 5:], b.T[3:, 5:]),
    }
    for name, (x, y) in views.items():
        got = sa.add(x, y)
        assert isinstance(got, cp.ndarray), name
        want = x + y
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert cp.array_equal(got, want), name
        out = cp.full(want.shape, cp.nan, dtype=dtype)
        assert sa.mul(x, y, out=out) is out
        assert cp.array_equal(out, x * y), name


def test_cupy_ops_with_scalars_where_and_cast():
    a = _rand((33, 17), "float32", 3)
    assert cp.array_equal(sa.add_s(a, 2.5), a + cp.float32(2.5))
    assert cp.array_equal(sa.clamp(a, -0.5, 0.5), cp.clip(a, -0.5, 0.5))
    assert cp.array_equal(sa.where(a > 0, a, -a), cp.abs(a))
    c = sa.cast(a[:, ::2], dtype="float64")
    assert c.dtype == cp.float64 and cp.array_equal(c, a[:, ::2].astype(cp.float64))


def test_cupy_negative_strides_are_right_or_refused():
    a = _rand((64, 96), "float32", 7)
    out = cp.zeros((64, 96), cp.float32)
    try:
        sa.add(a[::-1], a, out=out)
    except sa.LayoutError:
        assert cp.all(out == 0)  # refused before launching: out untouched
    else:
        assert cp.array_equal(out, a[::-1] + a)


def test_cupy_current_stream_orders_the_work():
    a = _rand((1 << 20,), "float32", 4)
    b = _rand((1 << 20,), "float32", 5)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        c = sa.add(a, b)  # on CuPy's current stream: s
        d = c * 2  # CuPy, same stream, no synchronisation in between
    s.synchronize()
    assert cp.array_equal(d, (a + b) * 2)


def test_cupy_bad_input_leaves_out_untouched():
    a = _rand((8, 8), "float32", 6)
    out = cp.zeros((8, 8), cp.float32)
    with pytest.raises(sa.DeviceError, match="b"):
        sa.add(a, np.ones((8, 8), np.float32), out=out)
    with pytest.raises(sa.LayoutError):
        sa.add(a, a[:, :4], out=out)
    with pytest.raises(sa.DtypeError):
        sa.add(a.astype(cp.complex64), a.astype(cp.complex64))
    assert cp.all(out == 0)
