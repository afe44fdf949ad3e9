"""The paged KV cache (host) and attention over it.

    cache = llmk.KvCache(n_layers=1, n_kv_heads=2, head_dim=64, budget_bytes=1 << 20, k_type="int8")
    # k_rotate=True stores K Hadamard-rotated (attention rotates q to match; docs/kv_cache.md)
    s = cache.add_sequence()
    slots = cache.append(s, token_ids)          # None when out of blocks
    cache.write(0, slots, k, v)                 # k, v: float32 [T, n_kv_heads * head_dim]
    out = llmk.kv_decode(cache, 0, [s], q, n_heads, scale)        # q: [B, n_heads, head_dim]
    out = llmk.kv_prefill(cache, 0, [s], qo_indptr, q, n_heads, scale)  # q: [T, n_heads, head_dim]
"""
from ._alloc import empty
from ._args import array as _array, fail as _fail, real as _real
from ._llmk import KvCache


def _ids(fn, name, v):
    if v is None or isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        _fail(fn, name, v, "must be a list of integers", TypeError)
    return list(v)


def kv_decode(cache, layer, seqs, q, n_heads, scale):
    q = _array("kv_decode", "q", q)
    out = empty(q, tuple(q.shape), "float32")
    cache.decode_out(layer, _ids("kv_decode", "seqs", seqs), q, n_heads, _real("kv_decode", "scale", scale), out)
    return out


def kv_prefill(cache, layer, seqs, qo_indptr, q, n_heads, scale):
    q = _array("kv_prefill", "q", q)
    out = empty(q, tuple(q.shape), "float32")
    cache.prefill_out(layer, _ids("kv_prefill", "seqs", seqs), _ids("kv_prefill", "qo_indptr", qo_indptr), q,
                      n_heads, _real("kv_prefill", "scale", scale), out)
    return out


__all__ = ["KvCache", "kv_decode", "kv_prefill"]
