"""Fused softmax + top-k and the sampler on it (see include/llmk/topk.hpp and sample.hpp).

logits are [B, V] (or [V], one row) numpy arrays or DLPack tensors in float32,
float16 or bfloat16, last dimension contiguous, any row stride. Outputs are new
arrays of the caller's library on the caller's device. CUDA tensors run on
torch's current stream.
"""
from . import _llmk
from ._alloc import empty, rows as _rows, stream as _stream
from ._args import array as _array, integer as _integer, real as _real, token_lists as _token_lists

__all__ = ["softmax_topk", "sample", "uniform01"]

_U64 = (1 << 64) - 1


def uniform01(seed, step, row):
    """The uniform double in [0, 1) of draw (seed, step, row) (Philox4x32-10; see sample.hpp)."""
    return _llmk.uniform01(_integer("uniform01", "seed", seed, 0, _U64), _integer("uniform01", "step", step, 0, _U64),
                           _integer("uniform01", "row", row, 0, _U64))


def softmax_topk(logits, k, temperature=1.0):
    """Returns (probs [B, k] float32, indices [B, k] int32, row_max [B], lse [B]):
    the k largest of softmax(logits / temperature) per row, descending, ties to the
    lower index; log p = logits / T - lse. Rows with NaN / +inf / all -inf give NaN
    probs and indices 0..k-1, with row_max NaN / +inf / -inf."""
    fn = "softmax_topk"
    logits, k, temperature = _array(fn, "logits", logits), _integer(fn, "k", k), _real(fn, "temperature", temperature)
    # outputs of min(k, V) columns: a k outside [1, V] is named by the extension, not by a failed allocation
    b, kk = _rows(logits), min(max(k, 0), logits.shape[-1] if len(logits.shape) else 0)
    probs, idx = empty(logits, (b, kk), "float32"), empty(logits, (b, kk), "int32")
    row_max, lse = empty(logits, (b,), "float32"), empty(logits, (b,), "float32")
    _llmk.softmax_topk_out(logits, k, temperature, probs, idx, row_max, lse, _stream(logits))
    if len(logits.shape) == 1:
        return probs[0], idx[0], row_max[0], lse[0]
    return probs, idx, row_max, lse


def sample(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
           presence_penalty=0.0, history=None, seed=0, step=0):
    """Draws one token per row of float32 CPU logits [B, V] (same parameters for every
    row; history: one list of previous tokens per row, or None). Returns int32 [B].
    The draw for (seed, step, row) is deterministic; seed and step are in [0, 2^64)."""
    fn = "sample"
    logits = _array(fn, "logits", logits)
    tokens = empty(logits, (_rows(logits),), "int32")
    hist = _token_lists(fn, "history", history, _rows(logits))
    _llmk.sample_out(logits, _real(fn, "temperature", temperature), _integer(fn, "top_k", top_k),
                     _real(fn, "top_p", top_p), _real(fn, "min_p", min_p),
                     _real(fn, "repetition_penalty", repetition_penalty),
                     _real(fn, "presence_penalty", presence_penalty), hist, _integer(fn, "seed", seed, 0, _U64),
                     _integer(fn, "step", step, 0, _U64), tokens)
    return tokens
