"""LayerNorm and RMSNorm, forward and backward (see include/llmk/norm.hpp).

x and dy are [N, D] (or [D], one row) numpy arrays or DLPack tensors in
float32, float16 or bfloat16, last dimension contiguous, any row stride.
weight and bias are [D] (float32 or x's dtype) or None. Outputs are new arrays
of the caller's library on the caller's device: y and dx in x's dtype, the
statistics and the weight gradients in float32. The weight gradients are
sums over the rows (written, not accumulated). CUDA tensors run on torch's
current stream.
"""
from . import _llmk
from ._alloc import empty, rows as _rows, stream as _stream
from ._args import array as _array, real as _real

__all__ = ["layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward"]


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """Returns (y, mean, rstd): y = (x - mean) * rstd * weight + bias per row."""
    x, eps = _array("layer_norm", "x", x), _real("layer_norm", "eps", eps)
    y, mean, rstd = empty(x, x.shape), empty(x, (_rows(x),), "float32"), empty(x, (_rows(x),), "float32")
    _llmk.layer_norm_out(x, weight, bias, eps, y, mean, rstd, _stream(x))
    return y, mean, rstd


def layer_norm_backward(dy, x, weight, mean, rstd, need_weight_grads=True):
    """Returns (dx, dweight, dbias) from the mean and rstd saved by layer_norm
    (dweight and dbias are None when need_weight_grads is False)."""
    dy, x = _array("layer_norm_backward", "dy", dy), _array("layer_norm_backward", "x", x)
    dx = empty(x, x.shape)
    d = x.shape[-1]
    dw = empty(x, (d,), "float32") if need_weight_grads else None
    db = empty(x, (d,), "float32") if need_weight_grads else None
    _llmk.layer_norm_backward_out(dy, x, weight, mean, rstd, dx, dw, db, _stream(x))
    return dx, dw, db


def rms_norm(x, weight=None, eps=1e-5):
    """Returns (y, rstd): y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps) per row."""
    x, eps = _array("rms_norm", "x", x), _real("rms_norm", "eps", eps)
    y, rstd = empty(x, x.shape), empty(x, (_rows(x),), "float32")
    _llmk.rms_norm_out(x, weight, eps, y, rstd, _stream(x))
    return y, rstd


def rms_norm_backward(dy, x, weight, rstd, need_weight_grad=True):
    """Returns (dx, dweight) from the rstd saved by rms_norm."""
    dy, x = _array("rms_norm_backward", "dy", dy), _array("rms_norm_backward", "x", x)
    dx = empty(x, x.shape)
    dw = empty(x, (x.shape[-1],), "float32") if need_weight_grad else None
    _llmk.rms_norm_backward_out(dy, x, weight, rstd, dx, dw, _stream(x))
    return dx, dw
