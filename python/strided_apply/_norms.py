"""The normalisations, spelled as ``torch.nn.functional`` spells them, each a
normalisation program (:func:`strided_apply.norm`): one kernel a call where the rows fit the
row kernel (one read of the row), the GPU and the CPU twin giving the same bits. Math in
``f32`` for 16-bit floats (``f64`` for ``f64``), one rounding at the store.

>>> import numpy as np, strided_apply as sa
>>> x = np.float32([[1, 2, 3], [0, 0, 0]])
>>> sa.softmax(x, dim=1).round(4).tolist()
[[0.09, 0.2447, 0.6652], [0.3333, 0.3333, 0.3333]]
>>> sa.logsumexp(x, 1).round(4).tolist()
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
    try:
        import torch

        if isinstance(input, torch.Tensor):
            wide = input.dtype in (torch.float16, torch.bfloat16)
            return torch.finfo(torch.float32 if wide else input.dtype).eps
    except ImportError:
        pass
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


__all__ = ["softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm", "normalize"]
