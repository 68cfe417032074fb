"""strided-apply from Python: strided and broadcast pointwise GPU kernels written in Rust.

Operands are torch tensors, any object with ``__dlpack__`` (CuPy, JAX, NumPy) or DLPack
capsules, in any layout (strided, sliced, transposed, expanded, flipped). CUDA operands run
on the producer's current stream (``torch.cuda.current_stream()``, CuPy's current stream,
or ``stream=``) with no synchronisation; host operands (NumPy, torch CPU tensors) run on the
CPU twin, the same op code on the CPU.

>>> import numpy as np, strided_apply as sa
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> sa.add(a, a[::-1]).tolist()                   # out omitted: a new NumPy array
[[3.0, 5.0, 7.0], [3.0, 5.0, 7.0]]
>>> out = np.empty((2, 3), np.float32)
>>> _ = sa.apply(sa.ops.Axpy(2.0), a, a, out=out)  # out = 2 a + a
>>> out[1].tolist()
[9.0, 12.0, 15.0]

Every op of the library is a function here (``sa.op_ids()``): its inputs, then its scalars
(``sa.add_s(a, 2.5)``, ``sa.clamp(a, 0, 1)``), then ``out=``, ``dtype=`` (the output type
when ``out`` is omitted and the inputs allow several) and ``stream=``.

Every stencil is a function too (``sa.stencil_ids()``): its input, then ``axes=`` (the tensor
axes of the stencil's x, y and z: one to three), ``out=`` (the input's shape and type when
omitted; it may not share memory with the input) and ``stream=``. Borders clamp to the edge:

>>> x = np.array([0, 1, 4, 9, 16], np.float32)
>>> sa.fdiff(x, axes=(0,)).tolist()               # x[i + 1] - x[i], clamped at the end
[1.0, 3.0, 5.0, 7.0, 0.0]

Every reduction is a function too (``sa.reduce_ids()``: ``sum``, ``prod``, ``amin``, ``amax``,
``mean``, ``sumsq``, ``norm2``, ``argmin``, ``argmax``, ``all``, ``any``): its input, ``dim``
(None for every axis, an axis or a sequence of axes), ``keepdim``, then ``out=`` and
``stream=``. An omitted ``out`` has the reduction's output type: the input's, int64 for
``argmin``/``argmax``, bool for ``all``/``any``. The GPU and the CPU twin reduce in one order,
fixed by the reduction length, so they give the same bits:

>>> sa.sum(a, 1).tolist(), sa.amax(a, dim=0, keepdim=True).tolist()
([3.0, 12.0], [[3.0, 4.0, 5.0]])
>>> sa.argmax(a, 1).tolist(), sa.any(a, 0).tolist()
([2, 2], [True, True, True])

Reductions of two inputs (``sqdiff``, ``dot``; :func:`map_reduce`) take ``a`` and ``b`` of one
element type, broadcast to one shape, then ``dim`` and ``keepdim``:

>>> sa.sqdiff(a, a[::-1]).item(), sa.dot(a, np.float32([1, 0, 1]), 1).tolist()
(54.0, [2.0, 8.0])

Any elementwise expression is one call too (:func:`expr`): parsed once, its names bound by
keyword or in order of first appearance (``f.names``); a Python number passed for a name is
a run-time scalar, so new values compile nothing new. Types promote as
``torch.result_type`` (numbers are weak) and the result rounds once. Expressions run on the
GPU's interpreter kernels for CUDA operands (nothing is compiled at run time) and on the CPU
twin for host ones:

>>> f = sa.expr("where(a > 0, a * s, b) + 1")
>>> f.names
['a', 's', 'b']
>>> f(a=a - 2, b=a, s=10).tolist()
[[1.0, 2.0, 3.0], [11.0, 21.0, 31.0]]

An expression's values reduce over axes in one pass, with no temporary (``sum``, ``prod``,
``amin``, ``amax``, ``mean``; the arguments of a call, then ``dim``, ``keepdim``, ``out=``,
``dtype=``, ``stream=``). Each value rounds once to the output type, then the reduction runs
in the library's order, so the GPU and the CPU twin give the same bits:

>>> g = sa.expr("(a - b) * (a - b)")
>>> g.sum(a, b=np.float32([1, 1, 1]), dim=1).tolist()
[2.0, 29.0]
>>> g.amax(a, np.float32([1, 1, 1]), dim=None).item()
16.0
"""

from ._native import (  # noqa: F401
    CudaError,
    DeviceError,
    DlpackError,
    DtypeError,
    Error,
    Expr,
    ExprError,
    LayoutError,
    Op,
    OpError,
    expr,
    Norm,
    norm,
    instances,
    module_info,
    op_ids,
    map_reduce,
    preload,
    reduce,
    reduce_families,
    reduce_ids,
    stencil,
    stencil_ids,
    wait_compiles,
)

__all__ = [
    "Op",
    "Expr",
    "expr",
    "Norm",
    "norm",
    "apply",
    "ops",
    "instances",
    "op_ids",
    "module_info",
    "preload",
    "stencil",
    "stencil_ids",
    "reduce",
    "map_reduce",
    "reduce_ids",
    "wait_compiles",
    "reduce_families",
    "Error",
    "LayoutError",
    "DtypeError",
    "DeviceError",
    "OpError",
    "ExprError",
    "DlpackError",
    "CudaError",
]


def apply(op, *inputs, out=None, dtype=None, stream=None):
    """``out = op(*inputs)``: ``op`` an :class:`Op` (scalars bound) or an op id."""
    if isinstance(op, str):
        op = Op(op)
    return op(*inputs, out=out, dtype=dtype, stream=stream)


def _key(name):
    return name.replace("_", "").lower()


class _Ops:
    """The op library by class-like name: ``sa.ops.DivMul(3, 7)``, ``sa.ops.AddS(2.5)``
    (case and underscores ignored), each an :class:`Op` with its scalars bound."""

    def __init__(self):
        self._by_key = {_key(i): i for i in op_ids()}

    def __getattr__(self, name):
        op_id = self._by_key.get(_key(name))
        if op_id is None:
            raise AttributeError(f"strided_apply.ops has no op {name!r}; op ids: {op_ids()}")
        return lambda *scalars, **named: Op(op_id, *scalars, **named)

    def __dir__(self):
        return sorted(self._by_key.values())


ops = _Ops()

# One function per op id: `sa.add`, `sa.where`, `sa.cast`, ...
for _id in op_ids():
    if _id not in globals():
        globals()[_id] = Op(_id)
        __all__.append(_id)


def _stencil_fn(stencil_id):
    def run(input, *, axes, out=None, stream=None):
        return stencil(stencil_id, input, axes=axes, out=out, stream=stream)

    run.__name__ = run.__qualname__ = stencil_id
    run.__doc__ = f"``out = {stencil_id}(input)`` along ``axes`` (see :func:`stencil`)."
    return run


# One function per stencil id: `sa.lap2`, `sa.fdiff`, `sa.shift_xp`, ...
for _id in stencil_ids():
    if _id not in globals():
        globals()[_id] = _stencil_fn(_id)
        __all__.append(_id)


def _reduce_fn(reduce_id):
    def run(input, dim=None, keepdim=False, *, out=None, stream=None):
        return reduce(reduce_id, input, dim, keepdim, out=out, stream=stream)

    run.__name__ = run.__qualname__ = reduce_id
    run.__doc__ = f"``out = {reduce_id}(input over dim)`` (see :func:`reduce`)."
    return run


def _map_reduce_fn(reduce_id):
    def run(a, b, dim=None, keepdim=False, *, out=None, stream=None):
        return map_reduce(reduce_id, a, b, dim, keepdim, out=out, stream=stream)

    run.__name__ = run.__qualname__ = reduce_id
    run.__doc__ = f"``out = {reduce_id}(a, b over dim)`` (see :func:`map_reduce`)."
    return run


def argmin(input, dim=None, keepdim=False, *, out=None, stream=None):
    """The position of the smallest element over ``dim``, as int64: the first on ties, and a
    NaN wins (as ``torch.argmin``). Over several axes (``dim`` a sequence, or None for all)
    the position counts in the row-major order of the reduced axes, so ``dim=None`` gives the
    index into the flattened input. A reduction over no elements raises :class:`OpError`.

    >>> import numpy as np, strided_apply as sa
    >>> x = np.array([[3, 1, 1], [2, np.nan, 0]], np.float32)
    >>> sa.argmin(x, 1).tolist(), sa.argmin(x).item(), sa.argmin(x, 0, keepdim=True).tolist()
    ([1, 1], 4, [[1, 1, 1]])
    """
    return reduce("argmin", input, dim, keepdim, out=out, stream=stream)


def argmax(input, dim=None, keepdim=False, *, out=None, stream=None):
    """The position of the largest element over ``dim``, as int64: the first on ties, and a
    NaN wins (as ``torch.argmax``). Over several axes (``dim`` a sequence, or None for all)
    the position counts in the row-major order of the reduced axes, so ``dim=None`` gives the
    index into the flattened input. A reduction over no elements raises :class:`OpError`.

    >>> import numpy as np, strided_apply as sa
    >>> x = np.array([[1, 5, 5], [7, 2, np.nan]], np.float32)
    >>> sa.argmax(x, 1).tolist(), sa.argmax(x[:, :2]).item()
    ([1, 2], 2)
    """
    return reduce("argmax", input, dim, keepdim, out=out, stream=stream)


def all(input, dim=None, keepdim=False, *, out=None, stream=None):
    """Whether every element over ``dim`` is nonzero, as bool (NaN counts as true; over no
    elements: True), as ``torch.all``.

    >>> import numpy as np, strided_apply as sa
    >>> x = np.array([[1, 2], [0, 3]], np.int32)
    >>> sa.all(x, 1).tolist(), sa.all(np.float32([1, np.nan])).item()
    ([True, False], True)
    """
    return reduce("all", input, dim, keepdim, out=out, stream=stream)


def any(input, dim=None, keepdim=False, *, out=None, stream=None):
    """Whether some element over ``dim`` is nonzero, as bool (NaN counts as true; over no
    elements: False), as ``torch.any``.

    >>> import numpy as np, strided_apply as sa
    >>> x = np.array([[0, 0], [0, 3]], np.int32)
    >>> sa.any(x, 1).tolist(), sa.any(np.zeros((0, 2), bool), 0).tolist()
    ([False, True], [False, False])
    """
    return reduce("any", input, dim, keepdim, out=out, stream=stream)


def sqdiff(a, b, dim=None, keepdim=False, *, out=None, stream=None):
    """The sum of squared differences ``((a - b) ** 2).sum(dim)`` in one pass, without the
    temporary: ``a`` and ``b`` of one floating type (f32, f64, f16, bf16), broadcast to one
    shape that ``dim`` refers to. Each difference is rounded to the type, then squared and
    summed (f16 and bf16 accumulate in f32); the output has the inputs' type.

    >>> import numpy as np, strided_apply as sa
    >>> a = np.float32([[1, 2, 3], [4, 5, 6]])
    >>> sa.sqdiff(a, np.float32([1, 0, 1])).item(), sa.sqdiff(a, a[::-1], 1).tolist()
    (67.0, [27.0, 27.0])
    """
    return map_reduce("sqdiff", a, b, dim, keepdim, out=out, stream=stream)


def dot(a, b, dim=None, keepdim=False, *, out=None, stream=None):
    """The sum of products ``(a * b).sum(dim)`` in one pass, without the temporary: ``a`` and
    ``b`` of one floating type (f32, f64, f16, bf16), broadcast to one shape that ``dim``
    refers to (default: every axis, a dot product of the flattened inputs). Each product is
    rounded to the type, then summed (f16 and bf16 accumulate in f32); the output has the
    inputs' type. Batched dot products and matrix-vector products are a ``dim`` away:

    >>> import numpy as np, strided_apply as sa
    >>> m = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> v = np.float32([1, 0, 1])
    >>> sa.dot(v, v).item(), sa.dot(m, v, 1).tolist(), sa.dot(m, m, -1, keepdim=True).tolist()
    (2.0, [2.0, 8.0], [[5.0], [50.0]])
    """
    return map_reduce("dot", a, b, dim, keepdim, out=out, stream=stream)


__all__ += ["argmin", "argmax", "all", "any", "sqdiff", "dot"]

from ._norms import cross_entropy, layer_norm, log_softmax, logsumexp, normalize, rms_norm, softmax  # noqa: E402

__all__ += ["softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm", "normalize", "cross_entropy"]

# One function per reduction id: `sa.sum`, `sa.amax`, `sa.mean`, ... (`sa.sqdiff`-like ones
# for the ids of two inputs).
_inputs = {f[0]: f[2] for f in reduce_families()}
for _id in reduce_ids():
    if _id not in globals():
        globals()[_id] = (_map_reduce_fn if _inputs[_id] == 2 else _reduce_fn)(_id)
        __all__.append(_id)
del _id, _inputs
