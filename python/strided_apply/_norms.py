"""The normalisations, spelled as ``torch.nn.functional`` spells them, each a
normalisation program (:func:`strided_apply.norm`): one kernel a call where the rows fit the
row kernel (one read of the row), the GPU and the CPU twin giving the same bits. Math in
``f32`` for 16-bit floats (``f64`` for ``f64``), one rounding at the store.

>>> import numpy as np, strided_apply as sa
>>> x = np.float32([[1, 2, 3], [0, 0, 0]])
>>> sa.softmax(x, dim=1).astype(np.float64).round(4).tolist()
[[0.09, 0.2447, 0.6652], [0.3333, 0.3333, 0.3333]]
>>> sa.logsumexp(x, 1).astype(np.float64).round(4).tolist()
[3.4076, 1.0986]
"""

from ._native import norm

_SOFTMAX = norm("m = amax(a); e = exp(a - m); e / sum(e)")
_LOG_SOFTMAX = norm("m = amax(a); d = a - m; d - log(sum(exp(d)))")
# The maximum, 0 where infinite (a row of -inf gives -inf, as torch, not NaN).
_LOGSUMEXP = norm("m = amax(a); c = where(isinf(m), 0, m); c + log(sum(exp(a - c)))")
_RMS = norm("a * rsqrt(mean(a * a) + eps)")
_RMS_W = norm("a * rsqrt(mean(a * a) + eps) * w")
_LN = norm("mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + eps)")
_LN_W = norm("mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + eps) * w")
_LN_B = norm("mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + eps) + b")
_LN_WB = norm("mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + eps) * w + b")
_L2 = norm("a / max(sqrt(sum(a * a)), eps)")


def _torch_for(x):
    """The torch module where ``x`` is a torch tensor, else None (torch not imported here
    unless it is installed)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if isinstance(x, torch.Tensor) else None


def _cast(x, dtype):
    """``x`` converted to ``dtype`` first, as torch's ``dtype=`` argument does."""
    return x if dtype is None else x.to(dtype) if hasattr(x, "to") else x.astype(dtype)


def softmax(input, dim=-1, dtype=None, *, out=None, stream=None):
    """``torch.softmax(input, dim)``: ``exp(x - max) / sum(exp(x - max))`` along ``dim``."""
    return _SOFTMAX(_cast(input, dtype), dim=dim, out=out, stream=stream)


def log_softmax(input, dim=-1, dtype=None, *, out=None, stream=None):
    """``torch.log_softmax(input, dim)``: ``(x - max) - log(sum(exp(x - max)))``."""
    return _LOG_SOFTMAX(_cast(input, dtype), dim=dim, out=out, stream=stream)


def logsumexp(input, dim, keepdim=False, *, out=None, stream=None):
    """``torch.logsumexp(input, dim, keepdim)``: ``max + log(sum(exp(x - max)))``, one value
    a row (the axes dropped, or kept as 1 with ``keepdim``)."""
    return _LOGSUMEXP(input, dim=dim, keepdim=keepdim, out=out, stream=stream)


def _normalized_dims(input, normalized_shape):
    """The last ``len(normalized_shape)`` axes, after checking they are ``normalized_shape``."""
    shape = tuple(normalized_shape) if hasattr(normalized_shape, "__len__") else (normalized_shape,)
    k = len(shape)
    if k == 0 or tuple(input.shape[-k:]) != shape:
        raise ValueError(
            f"normalized_shape {list(shape)} is not the last axes of an input of shape {list(input.shape)}"
        )
    return tuple(range(input.ndim - k, input.ndim))


def _eps_of(input):
    """torch's default ``eps`` of ``rms_norm``: ``finfo(dtype).eps`` of the input's type, of
    ``float32`` for 16-bit floats (their math type)."""
    torch = _torch_for(input)
    if torch is not None:
        wide = input.dtype in (torch.float16, torch.bfloat16)
        return torch.finfo(torch.float32 if wide else input.dtype).eps
    import numpy as np

    return float(np.finfo(input.dtype).eps)


def rms_norm(input, normalized_shape, weight=None, eps=None, *, out=None, stream=None):
    """``torch.nn.functional.rms_norm``: ``x * rsqrt(mean(x²) + eps) [* weight]`` over the
    last axes ``normalized_shape`` (``eps`` by default the input type's ``finfo.eps``)."""
    dims = _normalized_dims(input, normalized_shape)
    eps = _eps_of(input) if eps is None else float(eps)
    if weight is None:
        return _RMS(a=input, eps=eps, dim=dims, out=out, stream=stream)
    return _RMS_W(a=input, w=weight, eps=eps, dim=dims, out=out, stream=stream)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, *, out=None, stream=None):
    """``torch.nn.functional.layer_norm``: ``(x - mean) * rsqrt(var + eps) [* weight] [+ bias]``
    over the last axes ``normalized_shape`` (the biased variance, as torch's)."""
    dims = _normalized_dims(input, normalized_shape)
    eps = float(eps)
    if weight is None and bias is None:
        return _LN(a=input, eps=eps, dim=dims, out=out, stream=stream)
    if bias is None:
        return _LN_W(a=input, w=weight, eps=eps, dim=dims, out=out, stream=stream)
    if weight is None:
        return _LN_B(a=input, b=bias, eps=eps, dim=dims, out=out, stream=stream)
    return _LN_WB(a=input, w=weight, b=bias, eps=eps, dim=dims, out=out, stream=stream)


def normalize(input, p=2.0, dim=1, eps=1e-12, *, out=None, stream=None):
    """``torch.nn.functional.normalize`` for ``p = 2``: ``x / max(‖x‖₂, eps)`` along ``dim``."""
    if p != 2 and p != 2.0:
        raise ValueError(f"normalize: p = {p}; only p = 2 is a normalisation program here")
    return _L2(a=input, eps=float(eps), dim=dim, out=out, stream=stream)


# Cross-entropy, one value a row: the row's logsumexp, the target's logit picked by the
# class index `i` (an [C] int32 row broadcast over the samples; `t` the sample's target,
# broadcast along the classes), `k` the keep flag (0 where `t` is `ig`); `wv` the target's
# class weight `wt` (a stage: a result that reads a tensor is one value an element), `sw` and `swa` the sums of the weights and of the weighted logits over the
# classes for label smoothing `ls` over `nc` classes.
_LSE = "m = amax(a); c = where(isinf(m), 0, m); lse = c + log(sum(exp(a - c)));"
_PICK = " xt = sum(where(i == t, a, 0)); k = amax(where(t == ig, 0, 1));"
_CE = {
    (False, False): norm(_LSE + _PICK + " where(k > 0, lse - xt, 0)"),
    (True, False): norm(_LSE + _PICK + " wv = amax(wt); where(k > 0, wv * (lse - xt), 0)"),
    (False, True): norm(
        _LSE + _PICK + " sa = sum(a);"
        " where(k > 0, (1 - ls) * (lse - xt) + ls / nc * (lse * nc - sa), 0)"
    ),
    (True, True): norm(
        _LSE + _PICK + " wv = amax(wt); sw = sum(w); swa = sum(w * a);"
        " where(k > 0, (1 - ls) * wv * (lse - xt) + ls / nc * (lse * sw - swa), 0)"
    ),
}
# The mean over the kept samples: the losses' sum over the kept samples' weights (1 each
# unweighted), one value.
_CE_MEAN = norm("sum(l) / sum(where(t == ig, 0, 1))")
_CE_MEAN_W = norm("sum(l) / sum(where(t == ig, 0, wt))")
_CE_SUM = norm("sum(l)")


def _arange(n, like):
    """``[0, n)`` as int32 on ``like``'s device: a torch tensor for torch, else NumPy."""
    torch = _torch_for(like)
    if torch is not None:
        key = (n, str(like.device))
        r = _ARANGES.get(key)
        if r is None:
            r = _ARANGES[key] = torch.arange(n, dtype=torch.int32, device=like.device)
        return r
    import numpy as np

    return np.arange(n, dtype=np.int32)


_ARANGES = {}


def cross_entropy(
    input,
    target,
    weight=None,
    ignore_index=-100,
    reduction="mean",
    label_smoothing=0.0,
    *,
    stream=None,
):
    """``torch.nn.functional.cross_entropy`` with class-index targets: ``input`` of shape
    ``[C]``, ``[N, C]`` or ``[N, C, d1, ...]`` (classes on axis 1), ``target`` of integers of
    the shape without the class axis. Per sample, ``weight[t] * (logsumexp(x) - x[t])``
    (``weight`` a ``[C]`` row, 1 when omitted), 0 where ``t == ignore_index``; with
    ``label_smoothing`` ``ε``, ``(1 - ε)`` of that plus ``ε / C * Σ_c weight[c] *
    (logsumexp(x) - x[c])``, as torch. ``reduction``: ``"none"`` (the per-sample losses, of
    the input's type), ``"sum"``, or ``"mean"`` (the sum over the kept samples' weights:
    NaN where every sample is ignored, as torch). One kernel reads each row once; the
    reductions over the samples are a second. Math in ``f32`` for 16-bit inputs.

    >>> import numpy as np, strided_apply as sa
    >>> x = np.float32([[2, 1, 0], [0, 0, 0]])
    >>> round(float(sa.cross_entropy(x, np.int64([0, 2]))), 4)
    0.7531
    >>> sa.cross_entropy(x, np.int64([0, -100]), reduction="none").astype(np.float64).round(4).tolist()
    [0.4076, 0.0]
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"cross_entropy: reduction {reduction!r}; expected 'none', 'mean' or 'sum'")
    ls = float(label_smoothing)
    if not 0.0 <= ls <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing {label_smoothing} is not in [0, 1]")
    nd = input.ndim
    if nd < 1:
        raise ValueError("cross_entropy: input has no class axis (a 0-d input)")
    axis = 0 if nd == 1 else 1
    c = int(input.shape[axis])
    want = tuple(input.shape[:axis]) + tuple(input.shape[axis + 1 :])
    if tuple(target.shape) != want:
        raise ValueError(
            f"cross_entropy: target of shape {list(target.shape)}; an input of shape "
            f"{list(input.shape)} takes targets of shape {list(want)}"
        )
    if str(target.dtype).split(".")[-1] not in ("int64", "int32", "int16", "int8", "uint8"):
        raise ValueError(f"cross_entropy: target of type {target.dtype}; class indices are integers")
    # Axis 1's [C] row (trailing axes of size 1) and the targets with a class axis of 1.
    trail = (1,) * (nd - axis - 1)
    i = _arange(c, input).reshape((c,) + trail)
    t = target.reshape(tuple(input.shape[:axis]) + (1,) + tuple(input.shape[axis + 1 :]))
    args = dict(a=input, i=i, t=t, ig=int(ignore_index))
    wt = None
    if weight is not None:
        if tuple(weight.shape) != (c,):
            raise ValueError(f"cross_entropy: weight of shape {list(weight.shape)}; expected [{c}]")
        # The targets' weights (an ignored target's index clamped; its loss is 0).
        wt = weight[t.clip(0, c - 1)]
        args["wt"] = wt
        if ls > 0:
            args["w"] = weight.reshape((c,) + trail)
    if ls > 0:
        args.update(ls=ls, nc=float(c))
    f = _CE[(weight is not None, ls > 0)]
    if reduction == "none":
        return f(**args, dim=axis, stream=stream)
    # Per-sample losses in the math type, then one value in the input's type.
    f32 = "float64" if str(input.dtype).split(".")[-1] == "float64" else "float32"
    dt = _dtype(input, f32)
    losses = f(**args, dim=axis, dtype=dt, stream=stream)
    if losses.ndim == 0:  # one sample (a 1-D input): reduce over an axis of 1
        losses, target = losses.reshape((1,)), target.reshape((1,))
        wt = None if wt is None else wt.reshape((1,))
    every = tuple(range(losses.ndim))
    out_dt = _dtype(input, None)
    if reduction == "sum":
        return _CE_SUM(l=losses, dim=every, dtype=out_dt, stream=stream)
    if wt is None:
        return _CE_MEAN(l=losses, t=target, ig=int(ignore_index), dim=every, dtype=out_dt, stream=stream)
    return _CE_MEAN_W(
        l=losses, t=target, ig=int(ignore_index), wt=wt.reshape(target.shape), dim=every, dtype=out_dt, stream=stream
    )


def _dtype(like, name):
    """``name`` (or ``like``'s own type) in ``like``'s framework: a torch dtype for torch."""
    torch = _torch_for(like)
    if torch is not None:
        return getattr(torch, name) if name else like.dtype
    import numpy as np

    return np.dtype(name) if name else like.dtype


__all__ = ["softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm", "normalize", "cross_entropy"]
