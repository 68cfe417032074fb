"""CPU-twin tests through NumPy (no GPU, no torch): every op id × every instantiated type
combination NumPy can express (everything but ``bf16``, which NumPy lacks) × NumPy
layouts (contiguous, transposed, ``[::2]``, reversed, ``np.broadcast_to``, implicit
broadcasting, storage offsets, permuted 3-D), compared with ``reference.reference``; then
the API surface and bad inputs (``out`` untouched after every error)."""

import re
import zlib

import numpy as np
import pytest

import strided_apply as sa
from casecount import count_case
from reference import (
    DOMAINS,
    FLOAT_TYPES,
    INT_RANGE,
    INT_TYPES,
    NP_DTYPE,
    assert_matches,
    reads_out,
    reference,
)

INSTANCES = [(op, tuple(types), tuple(names), tol) for op, types, names, tol in sa.instances()]
OUT_TYPES = {}  # (op, input types) -> output types instantiated for them
for _op, _types, _names, _tol in INSTANCES:
    OUT_TYPES.setdefault((_op, _types[1:]), set()).add(_types[0])

NUMPY_INSTANCES = sorted((i for i in INSTANCES if "bf16" not in i[1]), key=lambda i: (i[0], i[1]))

SHAPE2 = (3, 5)
SHAPE3 = (4, 3, 2)

# ----------------------------------------------------------------------------------------
# Layouts: a layout maps (shape, input index) to (base shape, view function); the operand
# is view_fn(base), a view of shape `shape` (or of a broadcastable shape for "implicit").


def _contig(shape, i):
    return shape, lambda b: b


def _transposed(shape, i):
    return tuple(reversed(shape)), lambda b: b.T


def _step(shape, i):
    # [::2] on the first axis for even inputs, on the last axis for odd ones.
    if i % 2 == 0:
        return (2 * shape[0],) + tuple(shape[1:]), lambda b: b[::2]
    return tuple(shape[:-1]) + (2 * shape[-1],), lambda b: b[..., ::2]


def _reversed(shape, i):
    return shape, lambda b: b[tuple(slice(None, None, -1) for _ in shape)]


def _small(shape, i):
    small = list(shape)
    small[i % len(shape)] = 1
    return tuple(small)


def _broadcast_to(shape, i):
    return _small(shape, i), lambda b: np.broadcast_to(b, shape)


def _implicit(shape, i):
    # Passed as is (no view): the library broadcasts it; the third input also lacks the
    # leading dimension.
    small = _small(shape, i % 2)
    if i % 3 == 2:
        small = tuple(shape[1:])
    return small, lambda b: b


def _offset(shape, i):
    n = int(np.prod(shape))
    return (n + 3 + i,), lambda b: b[3 + i : 3 + i + n].reshape(shape)


def _window(shape, i):
    return tuple(s + 2 for s in shape), lambda b: b[tuple(slice(1, 1 + s) for s in shape)]


def _permuted(shape, i):
    axes = (1, 2, 0) if i % 2 == 0 else (2, 0, 1)
    base = [0] * len(shape)
    for k, a in enumerate(axes):
        base[a] = shape[k]
    return tuple(base), lambda b: b.transpose(axes)


# name -> (shape, input layout, output layout)
LAYOUTS = {
    "contiguous": (SHAPE2, _contig, _contig),
    "contiguous_3d": (SHAPE3, _contig, _contig),
    "transposed": (SHAPE2, _transposed, _contig),
    "out_transposed": (SHAPE2, _contig, _transposed),
    "step2": (SHAPE2, _step, _step),
    "reversed": (SHAPE2, _reversed, _reversed),
    "broadcast_to": (SHAPE2, _broadcast_to, _contig),
    "implicit_broadcast": (SHAPE2, _implicit, _window),
    "offset": (SHAPE2, _offset, _window),
    "permuted_3d": (SHAPE3, _permuted, _offset),
}

# ----------------------------------------------------------------------------------------
# Data.

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e30]
CAST_SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e10, -1e10, 3.5e9, 255.5, 256.0, -1.5, 2.5, 65519.0, 65520.0, 3e38, -2.6e9]


def int_values(t, n, rng):
    lo, hi = INT_RANGE[t]
    if t == "u8":
        return rng.integers(0, 256, n).astype(np.uint8)
    small = rng.integers(max(lo, -20), 21, n)
    extremes = np.array([lo, hi, lo + 1, hi - 1, 0, 1, hi // 2 + 1] + ([-1] if lo < 0 else []), dtype=object)
    pick = rng.random(n) < 0.35
    vals = [int(extremes[rng.integers(len(extremes))]) if p else int(s) for p, s in zip(pick, small)]
    return np.array(vals, dtype=object).astype(NP_DTYPE[t])


def float_values(op, t, n, rng, role):
    if op == "lerp" and role == 2:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = DOMAINS.get(op, (-8, 8))
    v = rng.uniform(lo, hi, n)
    if op in DOMAINS:
        return v.astype(NP_DTYPE[t])
    specials = CAST_SPECIALS if op == "cast" else SPECIALS
    pick = rng.random(n) < 0.3
    for k in np.nonzero(pick)[0]:
        v[k] = specials[rng.integers(len(specials))]
    if op == "cast":
        v = np.where(rng.random(n) < 0.3, v * 1e3, v)
    with np.errstate(over="ignore"):
        return v.astype(NP_DTYPE[t])


def values(op, t, shape, rng, role):
    n = int(np.prod(shape))
    if t == "bool":
        v = rng.random(n) < 0.5
    elif t in INT_TYPES:
        v = int_values(t, n, rng)
    else:
        v = float_values(op, t, n, rng, role)
    return v.reshape(shape)


def scalars_for(op, t, names):
    """Scalar values for op `op` whose scalars have element type `t` (exactly
    representable in every float type)."""
    if not names:
        return []
    if t == "bool":
        return [True]
    if t in FLOAT_TYPES:
        table = {
            "clamp": [-1.0, 1.5],
            "axpy": [2.5],
            "axpby": [1.5, 0.75],
            "divmul": [3.0, 7.0],
            "fill": [-3.25],
            "pow_s": [1.5],
        }
        return table.get(op, [2.5])
    signed = INT_RANGE[t][0] < 0
    table = {
        "clamp": [-5, 100] if signed else [2, 100],
        "fill": [7],
        "rsub_s": [5],
    }
    return table.get(op, [3])


def scalar_type(op, types):
    """The element type of the op's scalars: the input's for `*_s` ops, else the output's."""
    if op.endswith("_s") and not op.endswith("_assign_s") and len(types) > 1:
        return types[1]
    return types[0]


POISON = {"bool": True, "u8": 0x5A, "u32": 0x5A5A5A5A, "i32": -0x5A5A5A5A, "i64": -0x5A5A5A5A5A5A, "f32": 1234.5, "f64": 1234.5, "f16": 1234.5}


def make_operand(values_base, view_fn):
    return view_fn(values_base)


def covered_mask(base_shape, view_fn):
    idx = np.arange(int(np.prod(base_shape))).reshape(base_shape)
    mask = np.zeros(idx.size, dtype=bool)
    mask[np.asarray(view_fn(idx)).reshape(-1)] = True
    return mask.reshape(base_shape)


def bits(a):
    """The array's bit patterns (so that NaNs and signed zeros compare exactly)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}[a.dtype.itemsize])


def case_id(inst):
    op, types, _, _ = inst
    return f"{op}-{'_'.join(types)}"


# ----------------------------------------------------------------------------------------
# Every op × type combination × layout against the reference.


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("inst", NUMPY_INSTANCES, ids=case_id)
def test_op_matches_reference(inst, layout):
    op, types, names, tol = inst
    out_t, in_ts = types[0], types[1:]
    shape, in_layout, out_layout = LAYOUTS[layout]
    rng = np.random.default_rng(zlib.crc32(f"{op} {types} {layout}".encode()))

    inputs = []
    for i, t in enumerate(in_ts):
        base_shape, view_fn = in_layout(shape, i)
        base = values(op, t, base_shape, rng, i)
        inputs.append(view_fn(base))
    # Equal operands at some positions (ties for comparisons, min/max, where).
    if len(inputs) >= 2 and in_ts[0] == in_ts[1] and inputs[0].shape == inputs[1].shape and inputs[1].flags.writeable:
        tie = rng.random(inputs[0].shape) < 0.3
        inputs[1][tie] = inputs[0][tie]
    # Signed MIN / -1 (wraps) for integer division.
    if op == "div" and in_ts[0] in ("i32", "i64") and inputs[0].flags.writeable and inputs[1].flags.writeable:
        inputs[0].flat[0] = INT_RANGE[in_ts[0]][0]
        inputs[1].flat[0] = -1
    scalars = scalars_for(op, scalar_type(op, types), names)
    # The scalar itself among the data (comparisons with a scalar).
    if op.endswith("_s") and inputs and inputs[0].flags.writeable and in_ts[0] != "bool":
        inputs[0].flat[1] = scalars[0]

    out_base_shape, out_view = out_layout(shape, 0)
    if reads_out(op):
        out_base = values(op, out_t, out_base_shape, rng, "out")
    else:
        out_base = np.full(out_base_shape, POISON[out_t], dtype=NP_DTYPE[out_t])
    out = out_view(out_base)
    out_init = out.copy()
    base_before = out_base.copy()

    want = reference(op, types, [np.array(x) for x in inputs], scalars, out_init=out_init, shape=out.shape)
    got = getattr(sa, op)(*inputs, *scalars, out=out)
    assert got is out, "with out= the call returns out itself"
    ctx = f"{op} {types} {layout}"
    assert_matches(out, want, out_t, tol, ctx)
    outside = ~covered_mask(out_base_shape, out_view)
    assert np.array_equal(bits(out_base)[outside], bits(base_before)[outside]), f"{ctx}: wrote outside out"
    for x, orig in zip(inputs, [np.array(x) for x in inputs]):
        assert np.array_equal(bits(x), bits(orig)), f"{ctx}: an input changed"

    # Out omitted: a new NumPy array of the broadcast shape and the op's output type.
    if inputs and not reads_out(op):
        kwargs = {}
        if len(OUT_TYPES[(op, in_ts)]) > 1:
            kwargs["dtype"] = out_t
        new = getattr(sa, op)(*inputs, *scalars, **kwargs)
        assert isinstance(new, np.ndarray), type(new)
        new_shape = np.broadcast_shapes(*(x.shape for x in inputs))
        assert new.shape == new_shape
        assert new.dtype == NP_DTYPE[out_t]
        if new_shape != out.shape:
            want = reference(op, types, [np.array(x) for x in inputs], scalars)
        assert_matches(new, want, out_t, tol, ctx + " (out omitted)")
    count_case("numpy")


# ----------------------------------------------------------------------------------------
# The API surface.


def test_instances_and_op_ids():
    raw = sa.instances()
    assert len(raw) == len(INSTANCES) > 400
    names = set(NP_DTYPE)
    for op, types, scalar_names, tol in raw:
        assert isinstance(op, str)
        assert set(types) <= names and len(types) >= 1
        assert tol is None or (isinstance(tol, int) and tol > 0)
        assert all(isinstance(s, str) for s in scalar_names)
    # Every instantiated op, and the op set's ids that run as programs only (`sa.erf`, …).
    assert set(sa.op_ids()) >= {i[0] for i in raw}
    assert len(set(sa.op_ids()) - {i[0] for i in raw}) >= 80
    assert sa.op_ids() == sorted(sa.op_ids())
    for op in sa.op_ids():
        assert callable(getattr(sa, op)), op


def test_instances_fields_are_tuples():
    """The spec: ``(op_id: str, types: tuple[str, ...], scalar_names: tuple[str, ...], tolerance)``."""
    for inst in sa.instances():
        assert isinstance(inst, tuple), type(inst)
        assert isinstance(inst[1], tuple), f"types is a {type(inst[1]).__name__}: {inst}"
        assert isinstance(inst[2], tuple), f"scalar_names is a {type(inst[2]).__name__}: {inst}"


def test_exception_hierarchy():
    assert issubclass(sa.Error, RuntimeError)
    for e in (sa.LayoutError, sa.DtypeError, sa.DeviceError, sa.OpError, sa.DlpackError):
        assert issubclass(e, sa.Error)


def test_scalars_positional_and_by_name():
    a = np.linspace(-3, 3, 15, dtype=np.float32).reshape(3, 5)
    want = np.clip(a, -1.0, 1.5)
    assert np.array_equal(sa.clamp(a, -1.0, 1.5), want)
    assert np.array_equal(sa.clamp(a, lo=-1.0, hi=1.5), want)
    assert np.array_equal(sa.clamp(a, -1.0, hi=1.5), want)
    out = np.zeros((3, 5), np.float32)
    assert sa.axpy(a, a, alpha=2.0, out=out) is out
    assert np.array_equal(out, 3 * a)


def test_op_objects_apply_and_ops_namespace():
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    b = np.full((3, 5), 3.0, np.float32)
    assert np.array_equal(sa.ops.AddS(2.0)(a), a + 2)
    assert np.array_equal(sa.ops.add_s(2.0)(a), a + 2)
    assert np.array_equal(sa.ops.ADDS(2.0)(a), a + 2)
    dm = sa.ops.DivMul(3, 7)
    out = np.empty((3, 5), np.float32)
    assert sa.apply(dm, a, b, out=out) is out
    assert_matches(out, reference("divmul", ("f32", "f32", "f32"), [a, b], [3, 7]), "f32", 4)
    assert np.array_equal(sa.apply("add", a, b), a + b)
    bound = sa.Op("clamp", lo=0.0, hi=4.0)
    assert np.array_equal(bound(a), np.clip(a, 0, 4))
    assert np.array_equal(sa.Op("add_s", 1.5)(a), a + 1.5)


def test_no_input_ops_need_out():
    t = np.zeros((3, 5), np.float32)
    assert sa.fill(7.0, out=t) is t
    assert np.all(t == 7)
    sa.add_assign_s(2.0, out=t)
    assert np.all(t == 9)
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    sa.add_assign(a, out=t)
    assert np.array_equal(t, 9 + a)
    sa.add_assign(a[0], out=t)  # a broadcast input
    assert np.array_equal(t, 9 + a + a[0])
    with pytest.raises(sa.Error):
        sa.fill(7.0)


def test_in_place_same_layout_is_allowed():
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    b = np.full((3, 5), 0.5, np.float32)
    want = a + b
    assert sa.add(a, b, out=a) is a
    assert np.array_equal(a, want)
    t = a.T  # in place through a strided view: same layout as the output
    sa.mul_s(t, 2.0, out=t)
    assert np.array_equal(a, 2 * want)


@pytest.mark.parametrize(
    "dtype", ["f32", "float32", np.float32, np.dtype(np.float32)], ids=["f32", "float32", "np.float32", "np.dtype"]
)
def test_dtype_forms(dtype):
    a = np.arange(6, dtype=np.int32)
    got = sa.cast(a, dtype=dtype)
    assert got.dtype == np.float32
    assert np.array_equal(got, a.astype(np.float32))


def test_out_omitted_shape_and_dtype():
    a = np.ones((3, 1), np.float16)
    b = np.ones((1, 5), np.float16)
    r = sa.add(a, b)
    assert isinstance(r, np.ndarray) and r.shape == (3, 5) and r.dtype == np.float16
    c = sa.lt(a, b)
    assert c.shape == (3, 5) and c.dtype == np.bool_
    f = np.ones((5,), np.float32)
    m = sa.add(np.ones((3, 5), np.float16), f, dtype="f32")
    assert m.dtype == np.float32 and m.shape == (3, 5)
    m16 = sa.add(np.ones((3, 5), np.float16), f, dtype="float16")
    assert m16.dtype == np.float16


def test_out_with_broadcast_inputs():
    """Inputs of smaller shapes broadcast to ``out``'s shape."""
    a = np.arange(5, dtype=np.float32)
    out = np.zeros((3, 5), np.float32)
    sa.add(a, a[None, :], out=out)
    assert np.array_equal(out, np.broadcast_to(2 * a, (3, 5)))


def test_scalar_is_converted_to_the_element_type():
    a = np.full(4, 0.1, np.float32)
    assert sa.eq_s(a, 0.1).all()  # 0.1 rounds to f32 first, as a's elements did
    z = np.zeros(4, np.float16)
    # Just above the tie between 1 and 1 + 2^-10: nearest is 1 + 2^-10 (FromScalar: "floats
    # round to nearest even").
    s = 1 + 2**-11 + 2**-40
    assert sa.add_s(z, s)[0] == np.float16(s) == np.float16(1 + 2**-10)


def test_integer_division_by_zero_gives_zero():
    a = np.array([7, -7, 0, 5], np.int32)
    assert np.array_equal(sa.div_s(a, 0), np.zeros(4, np.int32))
    assert np.array_equal(sa.div(a, np.zeros(4, np.int32)), np.zeros(4, np.int32))
    assert np.array_equal(sa.rdiv_s(np.array([0, 2], np.uint8), 9), np.array([0, 4], np.uint8))


def test_dlpack_capsule_operand():
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    out = np.zeros((3, 5), np.float32)
    sa.neg(a.__dlpack__(), out=out)
    assert np.array_equal(out, -a)


# ----------------------------------------------------------------------------------------
# Bad inputs: the right exception, naming the argument, and `out` untouched.


def _names(msg, name):
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", msg) is not None


class Untouched:
    """Checks that a buffer (the whole base array behind `out`) is bit-identical after."""

    def __init__(self, *arrays):
        self.arrays = arrays
        self.before = [np.array(bits(a)) for a in arrays]

    def check(self):
        for a, b in zip(self.arrays, self.before):
            assert np.array_equal(bits(a), b), "out was modified by a failing call"


def _f32(shape=(3, 5), start=0.0):
    return (np.arange(int(np.prod(shape)), dtype=np.float32) + start).reshape(shape)


def test_unknown_op():
    a, out = _f32(), _f32(start=100)
    u = Untouched(out)
    with pytest.raises(sa.OpError):
        sa.apply("no_such_op", a, out=out)
    with pytest.raises(sa.OpError):
        sa.Op("no_such_op")
    with pytest.raises(AttributeError):
        sa.ops.NoSuchOp
    u.check()


@pytest.mark.parametrize(
    "call",
    [
        lambda a, out: sa.add_s(a, out=out),  # missing scalar
        lambda a, out: sa.add_s(a, 1.0, 2.0, out=out),  # one too many
        lambda a, out: sa.clamp(a, 1.0, out=out),
        lambda a, out: sa.clamp(a, lo=1.0, high=2.0, out=out),  # wrong name
        lambda a, out: sa.axpby(a, a, 1.0, out=out),
    ],
    ids=["missing", "extra", "clamp_one", "clamp_bad_name", "axpby_one"],
)
def test_wrong_scalars(call):
    a, out = _f32(), _f32(start=100)
    u = Untouched(out)
    with pytest.raises(sa.OpError):
        call(a, out)
    u.check()


@pytest.mark.parametrize(
    "op,dtype,scalar",
    [("add_s", np.uint8, 300), ("add_s", np.int32, 2.5), ("sub_s", np.uint32, -1), ("fill", np.bool_, 2)],
    ids=["u8_300", "i32_2.5", "u32_-1", "bool_2"],
)
def test_scalar_not_representable(op, dtype, scalar):
    out = np.ones((3, 5), dtype)
    u = Untouched(out)
    args = () if op == "fill" else (np.zeros((3, 5), dtype),)
    with pytest.raises(sa.OpError):
        getattr(sa, op)(*args, scalar, out=out)
    u.check()


def test_number_where_an_input_goes():
    """``sa.add(a, 3.0)``: add has two inputs and no scalar; the float is taken as input b
    and refused (the spec names no class for this: any ``sa.Error`` naming "b")."""
    a, out = _f32(), _f32(start=100)
    u = Untouched(out)
    with pytest.raises(sa.Error) as e:
        sa.add(a, 3.0, out=out)
    assert _names(str(e.value), "b"), str(e.value)
    u.check()


def test_wrong_input_count():
    a, out = _f32(), _f32(start=100)
    u = Untouched(out)
    with pytest.raises(sa.OpError):
        sa.add(a, out=out)
    with pytest.raises(sa.OpError):
        sa.neg(a, a, out=out)
    u.check()


def test_shapes_do_not_broadcast():
    a, b, out = _f32((3, 5)), _f32((4, 5)), _f32((3, 5), 100)
    u = Untouched(out)
    with pytest.raises(sa.LayoutError):
        sa.add(a, b, out=out)
    with pytest.raises(sa.LayoutError):
        sa.add(a, b)
    u.check()


def test_out_shape_mismatch():
    a, out = _f32((3, 5)), _f32((2, 5), 100)
    u = Untouched(out)
    with pytest.raises(sa.LayoutError) as e:
        sa.neg(a, out=out)
    u.check()


def test_out_partially_overlaps_input():
    base = np.arange(20, dtype=np.float32)
    a = base[0:15].reshape(3, 5)
    out = base[1:16].reshape(3, 5)
    u = Untouched(base)
    with pytest.raises(sa.LayoutError) as e:
        sa.add_s(a, 1.0, out=out)
    assert _names(str(e.value), "out") or _names(str(e.value), "a"), str(e.value)
    with pytest.raises(sa.LayoutError):
        sa.add(_f32(), a, out=out)
    u.check()


def test_out_zero_strides():
    base = np.arange(5, dtype=np.float32)
    out = np.lib.stride_tricks.as_strided(base, shape=(3, 5), strides=(0, 4))  # writable
    assert out.flags.writeable
    u = Untouched(base)
    with pytest.raises(sa.LayoutError) as e:
        sa.neg(_f32(), out=out)
    assert _names(str(e.value), "out"), str(e.value)
    u.check()


def test_out_broadcast_to_view():
    base = np.arange(5, dtype=np.float32)
    out = np.broadcast_to(base, (3, 5))  # zero strides and read-only
    u = Untouched(base)
    with pytest.raises((sa.LayoutError, sa.DlpackError)) as e:
        sa.neg(_f32(), out=out)
    assert _names(str(e.value), "out"), str(e.value)
    u.check()


def test_out_overlapping_itself():
    base = np.arange(8, dtype=np.float32)
    out = np.lib.stride_tricks.as_strided(base, shape=(3, 5), strides=(4, 4))
    u = Untouched(base)
    with pytest.raises(sa.LayoutError):
        sa.neg(_f32(), out=out)
    u.check()


def test_read_only_out():
    out = _f32(start=100)
    out.flags.writeable = False
    u = Untouched(out)
    with pytest.raises(sa.DlpackError) as e:
        sa.neg(_f32(), out=out)
    assert _names(str(e.value), "out"), str(e.value)
    u.check()


def test_read_only_inputs_are_fine():
    a = _f32()
    a.flags.writeable = False
    out = np.zeros((3, 5), np.float32)
    sa.neg(a, out=out)
    assert np.array_equal(out, -a)


@pytest.mark.parametrize("which", ["a", "b", "out"])
def test_complex_dtype(which):
    ops = {"a": _f32().astype(np.complex64), "b": _f32(), "out": _f32(start=100)}
    if which == "b":
        ops["a"], ops["b"] = _f32(), _f32().astype(np.complex64)
    if which == "out":
        ops["a"], ops["out"] = _f32(), _f32(start=100).astype(np.complex64)
    u = Untouched(ops["out"])
    with pytest.raises(sa.DtypeError) as e:
        sa.add(ops["a"], ops["b"], out=ops["out"])
    assert _names(str(e.value), which), str(e.value)
    u.check()


def test_other_type_combinations_run_as_programs():
    # No kernel is instantiated for these element types: the op's expression program runs,
    # promoted as torch.result_type, rounded once to the output.
    i32 = np.arange(15, dtype=np.int32).reshape(3, 5) - 7
    f32 = _f32() * 0.5
    out = np.full((3, 5), 5.0, np.float64)
    sa.add(i32, f32, out=out)
    np.testing.assert_array_equal(out, (i32.astype(np.float32) + f32).astype(np.float64))
    sa.sqrt(np.abs(i32), out=out)
    np.testing.assert_array_equal(out, np.sqrt(np.abs(i32).astype(np.float32)).astype(np.float64))
    sa.add(f32, f32, out=out)
    np.testing.assert_array_equal(out, (f32 + f32).astype(np.float64))
    # Without out=: the promoted type (an int tensor with a float one, a float op of
    # integers, a weak float scalar with an int tensor).
    got = sa.add(i32, f32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, i32.astype(np.float32) + f32)
    assert sa.sqrt(np.abs(i32)).dtype == np.float32
    got = sa.mul_s(i32, 2.5)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, i32.astype(np.float32) * np.float32(2.5))
    got = sa.where(i32 > 0, f32.astype(np.float16), f32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.where(i32 > 0, f32.astype(np.float16).astype(np.float32), f32))
    got = sa.lt(i32.astype(np.uint8), f32.astype(np.float16))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, i32.astype(np.uint8).astype(np.float32) < f32.astype(np.float16).astype(np.float32))


def test_type_combination_not_instantiated():
    # In-place ops have no program: other types stay an error; nothing is written.
    out = np.full((3, 5), 5.0, np.float64)
    u = Untouched(out)
    with pytest.raises(sa.DtypeError):
        sa.add_assign(np.zeros((3, 5), np.int32), out=out)
    u.check()


def test_promoted_output_dtype():
    a16, b32 = _f32().astype(np.float16), _f32()
    got = sa.add(a16, b32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, a16.astype(np.float32) + b32)
    with pytest.raises(sa.OpError):
        sa.cast(np.zeros(3, np.int32))


def test_dlpack_capsule_consumed_twice():
    a = _f32()
    out = _f32(start=100)
    u = Untouched(out)
    cap = a.__dlpack__()
    with pytest.raises(sa.DlpackError):
        sa.add(cap, cap, out=out)
    u.check()
    with pytest.raises(sa.DlpackError):
        sa.neg(cap, out=out)  # consumed by the failed call (or by the first operand)
    u.check()


def test_errors_leave_out_untouched_after_valid_prefix():
    """An error found late (the third operand) still leaves ``out`` as it was."""
    out = _f32(start=100)
    u = Untouched(out)
    with pytest.raises(sa.Error):
        sa.fma(_f32(), _f32(), np.zeros((4, 5), np.float32), out=out)
    with pytest.raises(sa.Error):
        sa.lerp(_f32(), _f32(), _f32().astype(np.complex64), out=out)
    u.check()


# ----------------------------------------------------------------------------------------
# Hand-picked edge values (the documented semantics), against the reference.

BIG = 2**63 - 1
EDGES = [
    # Rust `as`: saturate, NaN -> 0, truncate toward zero.
    ("cast", ("u8", "f32"), [np.array([np.nan, -1.5, 300.7, 255.9, np.inf, -np.inf, 0.99], np.float32)]),
    ("cast", ("i32", "f64"), [np.array([np.nan, 3e9, -3e9, -2.5, 2147483647.9, -2147483648.9], np.float64)]),
    ("cast", ("i64", "f32"), [np.array([9.3e18, -9.3e18, np.nan, -0.0], np.float32)]),
    ("cast", ("u32", "f16"), [np.array([np.nan, -1.0, 65504.0, np.inf], np.float16)]),
    # Wrapping int -> int, exact int -> float rounding, wide -> 16-bit rounded once.
    ("cast", ("u8", "i64"), [np.array([-1, 256, 257, -(2**63), BIG], np.int64)]),
    ("cast", ("i32", "u32"), [np.array([2**32 - 1, 2**31, 5], np.uint32)]),
    ("cast", ("f32", "i64"), [np.array([BIG, 2**24 + 1, -(2**63), 2**53 + 1], np.int64)]),
    ("cast", ("f16", "i64"), [np.array([65519, 65520, 2049, 2051, -(2**63), 4097], np.int64)]),
    ("cast", ("f16", "f64"), [np.array([1 + 2**-11 + 2**-40, 1 + 2**-11, 65519.99, 65520.0, 2**-25 + 2**-60, -0.0], np.float64)]),
    ("cast", ("f16", "u32"), [np.array([2049, 2051, 2**32 - 1], np.uint32)]),
    ("cast", ("bool", "f32"), [np.array([np.nan, 0.0, -0.0, 1e-45], np.float32)]),
    ("cast", ("f64", "bool"), [np.array([True, False])]),
    # Integer arithmetic wraps, division truncates, by zero gives 0, MIN / -1 wraps.
    ("div", ("i32", "i32", "i32"), [np.array([-(2**31), 7, -7, 7, 0], np.int32), np.array([-1, -2, 2, 0, 0], np.int32)]),
    ("div", ("i64", "i64", "i64"), [np.array([-(2**63), -9], np.int64), np.array([-1, 4], np.int64)]),
    ("add", ("u8", "u8", "u8"), [np.array([255, 200], np.uint8), np.array([1, 100], np.uint8)]),
    ("mul", ("i64", "i64", "i64"), [np.array([2**62, BIG], np.int64), np.array([4, BIG], np.int64)]),
    ("neg", ("i32", "i32"), [np.array([-(2**31), 5], np.int32)]),
    ("abs", ("i64", "i64"), [np.array([-(2**63), -5], np.int64)]),
    ("fma", ("u32", "u32", "u32", "u32"), [np.array([2**31], np.uint32), np.array([3], np.uint32), np.array([2**31 + 1], np.uint32)]),
    # NaN-propagating min/max returning the first operand on ties; relu keeps -0.0 and NaN.
    ("max", ("f32", "f32", "f32"), [np.array([-0.0, 0.0, np.nan, 1.0], np.float32), np.array([0.0, -0.0, 1.0, np.nan], np.float32)]),
    ("min", ("f64", "f64", "f64"), [np.array([-0.0, 0.0, np.nan, 1.0]), np.array([0.0, -0.0, 1.0, np.nan])]),
    ("relu", ("f16", "f16"), [np.array([-0.0, np.nan, -np.inf, 3.0], np.float16)]),
    # 16-bit arithmetic rounds once; fma rounds in f32, then to 16 bits.
    ("add", ("f16", "f16", "f16"), [np.array([2048.0, 1.0, 65504.0], np.float16), np.array([1.0, 2**-11, 16.0], np.float16)]),
    ("fma", ("f16", "f16", "f16", "f16"), [np.array([1 + 2**-10], np.float16), np.array([1 + 2**-10], np.float16), np.array([2**-24], np.float16)]),
    ("fma", ("f32", "f32", "f32", "f32"), [np.array([1 + 2**-23], np.float32), np.array([1 - 2**-23], np.float32), np.array([-1.0], np.float32)]),
    ("fma", ("f64", "f64", "f64", "f64"), [np.array([1 + 2**-52, 0.1]), np.array([1 - 2**-52, 10.0]), np.array([-1.0, -1.0])]),
    ("rsqrt", ("f32", "f32"), [np.array([0.0, -1.0, np.inf, 2.0, 3.0, 1e-40], np.float32)]),
    ("rsqrt", ("f16", "f16"), [np.array([0.0, 2.0, 3.0, 6e-8], np.float16)]),
    ("sqrt", ("f16", "f16"), [np.array([2.0, 3.0, -0.0, -1.0], np.float16)]),
    # Mixed: f16 with f32, computed in f32; a 16-bit output rounds that f32 result again.
    ("add", ("f16", "f16", "f32"), [np.array([1.0], np.float16), np.array([2**-11 + 2**-30], np.float32)]),
    ("add", ("f32", "f16", "f32"), [np.array([1.0], np.float16), np.array([2**-11 + 2**-30], np.float32)]),
]


@pytest.mark.parametrize("op,types,inputs", EDGES, ids=[f"{e[0]}-{'_'.join(e[1])}" for e in EDGES])
def test_edge_values(op, types, inputs):
    tol = {(i[0], i[1]): i[3] for i in INSTANCES}[(op, types)]
    want = reference(op, types, inputs)
    out = np.empty(want.shape, NP_DTYPE[types[0]])
    getattr(sa, op)(*inputs, out=out)
    assert_matches(out, want, types[0], tol, f"{op} {types}")
