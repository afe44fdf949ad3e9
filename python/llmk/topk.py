"""Fused softmax + top-k and the sampler on it (see include/llmk/topk.hpp and sample.hpp).

logits are [B, V] (or [V], one row) numpy arrays or DLPack tensors in float32,
float16 or bfloat16, last dimension contiguous, any row stride. Outputs are new
arrays of the caller's library on the caller's device. CUDA tensors run on
torch's current stream.
"""
from . import _llmk
from ._alloc import empty, rows as _rows, stream as _stream

__all__ = ["softmax_topk", "sample", "uniform01"]

uniform01 = _llmk.uniform01


def softmax_topk(logits, k, temperature=1.0):
    """Returns (probs [B, k] float32, indices [B, k] int32, row_max [B], lse [B]):
    the k largest of softmax(logits / temperature) per row, descending, ties to the
    lower index; log p = logits / T - lse. Rows with NaN / +inf / all -inf give NaN
    probs and indices 0..k-1, with row_max NaN / +inf / -inf."""
    b, kk = _rows(logits), max(int(k), 0)
    probs, idx = empty(logits, (b, kk), "float32"), empty(logits, (b, kk), "int32")
    row_max, lse = empty(logits, (b,), "float32"), empty(logits, (b,), "float32")
    _llmk.softmax_topk_out(logits, int(k), float(temperature), probs, idx, row_max, lse, _stream(logits))
    if len(logits.shape) == 1:
        return probs[0], idx[0], row_max[0], lse[0]
    return probs, idx, row_max, lse


def sample(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
           presence_penalty=0.0, history=None, seed=0, step=0):
    """Draws one token per row of float32 CPU logits [B, V] (same parameters for every
    row; history: one list of previous tokens per row, or None). Returns int32 [B].
    The draw for (seed, step, row) is deterministic."""
    tokens = empty(logits, (_rows(logits),), "int32")
    hist = [list(map(int, h)) for h in history] if history is not None else []
    _llmk.sample_out(logits, float(temperature), int(top_k), float(top_p), float(min_p),
                     float(repetition_penalty), float(presence_penalty), hist, int(seed), int(step), tokens)
    return tokens
