"""Stencils by id (``sa.lap2``, ``sa.fdiff``, ``sa.shift_xp``, …) against a NumPy reference
that gathers clamped neighbours: NumPy arrays on the CPU twin, and torch tensors on the GPU
and the CPU when torch is present. Inputs are small integers stored as floats, so every
summation order gives the exact value and comparisons are exact (bit for bit). Layouts:
contiguous, transposed, reversed, ``[::2]``, and frames on any axes; then bad calls."""

import zlib

import numpy as np
import pytest

import strided_apply as sa
from casecount import count_case

# Each stencil as taps (dx, dy, dz) with weights, along the frame axes x, y, z.
TAPS = {
    "shift_xp": [((1, 0, 0), 1)],
    "shift_xm": [((-1, 0, 0), 1)],
    "shift_yp": [((0, 1, 0), 1)],
    "shift_ym": [((0, -1, 0), 1)],
    "shift_zp": [((0, 0, 1), 1)],
    "shift_zm": [((0, 0, -1), 1)],
    "fdiff": [((1, 0, 0), 1), ((0, 0, 0), -1)],
    "bdiff": [((0, 0, 0), 1), ((-1, 0, 0), -1)],
    "lap2": [((1, 0, 0), 1), ((-1, 0, 0), 1), ((0, 1, 0), 1), ((0, -1, 0), 1), ((0, 0, 0), -4)],
    "lap3": [
        ((1, 0, 0), 1),
        ((-1, 0, 0), 1),
        ((0, 1, 0), 1),
        ((0, -1, 0), 1),
        ((0, 0, 1), 1),
        ((0, 0, -1), 1),
        ((0, 0, 0), -6),
    ],
}

SHAPE = (6, 5, 4)
AXES = [(0,), (2,), (1, 0), (2, 0, 1)]
WIDE = (3, 4, 40)
NP_TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def reference(stencil_id, x, axes):
    """The stencil over ``x`` (float64) along ``axes``, borders clamped to the edge."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    for offsets, weight in TAPS[stencil_id]:
        index = [np.arange(n) for n in x.shape]
        for k, d in enumerate(offsets):
            if k < len(axes):
                ax = axes[k]
                index[ax] = np.clip(index[ax] + d, 0, x.shape[ax] - 1)
        out += weight * x[np.ix_(*index)]
    return out


def small_ints(shape, seed):
    g = np.random.default_rng(seed)
    return g.integers(-16, 17, size=shape).astype(np.float64)


def np_layouts(base):
    """(name, view) pairs of ``base`` (shape ``SHAPE``, or larger for ``[::2]``)."""
    return [
        ("contiguous", lambda: base.copy()),
        ("transposed", lambda: np.ascontiguousarray(base.transpose(2, 1, 0)).transpose(2, 1, 0)),
        ("reversed", lambda: np.ascontiguousarray(base[::-1, :, ::-1])[::-1, :, ::-1]),
        ("step2", lambda: np.repeat(base, 2, axis=1)[:, ::2]),
    ]


def test_stencil_ids_are_functions():
    ids = sa.stencil_ids()
    assert sorted(TAPS) == ids
    for i in ids:
        assert callable(getattr(sa, i)) and i in sa.__all__


@pytest.mark.parametrize("stencil_id", sorted(TAPS))
@pytest.mark.parametrize("t", sorted(NP_TYPES))
@pytest.mark.parametrize("axes", AXES, ids=str)
def test_numpy_matches_reference(stencil_id, t, axes):
    base = small_ints(SHAPE, zlib.crc32(repr((stencil_id, t, axes)).encode()))
    want = reference(stencil_id, base, axes).astype(NP_TYPES[t])
    for name, make in np_layouts(base.astype(NP_TYPES[t])):
        x = make()
        assert x.shape == SHAPE
        got = getattr(sa, stencil_id)(x, axes=axes)
        assert got.dtype == NP_TYPES[t] and got.shape == SHAPE
        np.testing.assert_array_equal(got, want, err_msg=f"{stencil_id} {t} {name} {axes}")
        # Into a transposed output.
        out = np.full(SHAPE[::-1], np.nan, NP_TYPES[t]).T
        assert sa.stencil(stencil_id, x, axes=axes, out=out) is out
        np.testing.assert_array_equal(out, want, err_msg=f"{stencil_id} {t} {name} out.T")
        count_case("stencil", "cpu")


def test_bad_stencil_calls_raise_and_leave_out_untouched():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    out = np.full((4, 5), 7.0, np.float32)
    with pytest.raises(sa.OpError, match="lap9"):
        sa.stencil("lap9", x, axes=(0,), out=out)
    with pytest.raises(sa.DtypeError, match="not instantiated"):
        sa.lap2(np.zeros((4, 5), np.int32), axes=(1, 0))
    with pytest.raises(sa.LayoutError, match="axes"):
        sa.lap2(x, axes=(2,), out=out)
    with pytest.raises(sa.LayoutError, match="axes"):
        sa.lap2(x, axes=(1, 1), out=out)
    with pytest.raises(sa.LayoutError, match="input"):
        sa.fdiff(x, axes=(0,), out=x[:2])
    with pytest.raises(sa.DtypeError, match="input"):
        sa.fdiff(x.astype(np.float64), axes=(0,), out=out)
    with pytest.raises(sa.LayoutError, match="share|overlap"):
        sa.fdiff(x, axes=(0,), out=x)
    assert (out == 7.0).all()


# ----------------------------------------------------------------------------------------
# torch: CUDA tensors (on torch's stream) and CPU tensors, every type including bf16.

try:
    import torch  # noqa: F811
except ImportError:  # pragma: no cover - CI has no torch
    torch = None

TORCH_TYPES = ["f32", "f64", "f16", "bf16"]


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
        ("expanded", lambda: base[:, :1].expand(base.shape)),
    ]


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", _devices() or ["cpu"])
@pytest.mark.parametrize("t", TORCH_TYPES)
@pytest.mark.parametrize("stencil_id", sorted(TAPS))
def test_torch_matches_reference(device, t, stencil_id):
    dtype = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
             "bf16": torch.bfloat16}[t]
    # WIDE's last axis as x (40 positions) takes the tiled kernel on CUDA.
    for shape, axes in [(s, a) for s in (SHAPE, WIDE) for a in AXES]:
        base64 = small_ints(shape, zlib.crc32(repr((stencil_id, t, axes, device, shape)).encode()))
        base = torch.tensor(base64, dtype=dtype, device=device)
        for name, make in torch_layouts(base):
            x = make()
            want = torch.tensor(reference(stencil_id, x.double().cpu().numpy(), axes),
                                dtype=dtype)
            got = getattr(sa, stencil_id)(x, axes=axes)
            assert got.device == x.device and got.dtype == dtype
            # A later torch op on the same stream reads the result without a sync.
            got = (got + 0).cpu()
            assert torch.equal(got, want), f"{stencil_id} {t} {device} {name} {axes} {shape}"
            count_case("stencil", device)
