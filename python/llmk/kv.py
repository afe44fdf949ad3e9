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
from ._llmk import KvCache


def kv_decode(cache, layer, seqs, q, n_heads, scale):
    out = empty(q, tuple(q.shape), "float32")
    cache.decode_out(layer, list(seqs), q, n_heads, scale, out)
    return out


def kv_prefill(cache, layer, seqs, qo_indptr, q, n_heads, scale):
    out = empty(q, tuple(q.shape), "float32")
    cache.prefill_out(layer, list(seqs), list(qo_indptr), q, n_heads, scale, out)
    return out


__all__ = ["KvCache", "kv_decode", "kv_prefill"]
