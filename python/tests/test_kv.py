"""The KV cache from Python: decode and causal prefill against torch's softmax attention
on the dense cache (f32, 1e-5 abs + rel), also with K stored Hadamard-rotated (k_rotate),
out of blocks, bad arguments named, and fork / truncate / reuse_prefix by the blocks they
share, free or attach and the rows attention then sees."""
import numpy as np
import pytest
import torch

import llmk


def dense_attention(q, k, v, causal_offset):
    # q [T, Hq, D], k/v [L, Hkv, D]; query i sees positions 0 .. causal_offset + i
    T, Hq, D = q.shape
    G = Hq // k.shape[1]
    qt, kt, vt = (torch.from_numpy(x).double() for x in (q, k, v))
    kt, vt = kt.repeat_interleave(G, dim=1), vt.repeat_interleave(G, dim=1)
    s = torch.einsum("thd,lhd->htl", qt, kt) / np.sqrt(D)
    mask = torch.arange(k.shape[0])[None, :] > (causal_offset + torch.arange(T))[:, None]
    s = s.masked_fill(mask[None], float("-inf"))
    return torch.einsum("htl,lhd->thd", torch.softmax(s, -1), vt).numpy()


def test_prefill_then_decode_match_torch():
    rng = np.random.default_rng(0)
    Hq, Hkv, D, n = 6, 2, 64, 37
    cache = llmk.KvCache(n_layers=1, n_kv_heads=Hkv, head_dim=D, budget_bytes=1 << 20)
    s = cache.add_sequence()
    k = rng.standard_normal((n + 1, Hkv, D), dtype=np.float32)
    v = rng.standard_normal((n + 1, Hkv, D), dtype=np.float32)
    q = rng.standard_normal((n + 1, Hq, D), dtype=np.float32)
    slots = cache.append(s, list(range(n)))
    cache.write(0, slots, k[:n].reshape(n, -1).copy(), v[:n].reshape(n, -1).copy())
    out = llmk.kv_prefill(cache, 0, [s], [0, n], q[:n].copy(), Hq, 1 / np.sqrt(D))
    np.testing.assert_allclose(out, dense_attention(q[:n], k[:n], v[:n], 0), atol=1e-5, rtol=1e-5)
    slots = cache.append(s, [n])
    cache.write(0, slots, k[n:].reshape(1, -1).copy(), v[n:].reshape(1, -1).copy())
    out = llmk.kv_decode(cache, 0, [s], q[n:].copy(), Hq, 1 / np.sqrt(D))
    np.testing.assert_allclose(out, dense_attention(q[n:], k, v, n), atol=1e-5, rtol=1e-5)
    assert cache.stats()["tokens_stored"] == n + 1


def test_k_rotate_f32_matches_torch_on_the_unrotated_rows():
    # k_rotate stores H k and scores H q: (H q).(H k) = q.k, up to the f32 rounding of the two
    # rotations. Each rotated element is off by <= (gamma_L + 2.01 u) |x|_1 / sqrt(D) (L = log2 D
    # rounded sums, u = 2^-24, gamma_L ~ L u), so a score moves by at most
    # delta = scale (gamma_L + 2.01 u) (|q|_1 |k|_2 + |q|_2 |k|_1) (1 + 1e-6), an output by
    # (e^(2 delta) - 1) max|v| on top of the kernel's 1e-5.
    rng = np.random.default_rng(1)
    Hq, Hkv, D, n = 4, 2, 128, 50
    cache = llmk.KvCache(n_layers=1, n_kv_heads=Hkv, head_dim=D, budget_bytes=1 << 20, k_rotate=True)
    s = cache.add_sequence()
    k = rng.standard_normal((n, Hkv, D), dtype=np.float32)
    k[:, :, 5] *= 30  # an outlier channel
    v = rng.standard_normal((n, Hkv, D), dtype=np.float32)
    q = rng.standard_normal((1, Hq, D), dtype=np.float32)
    q0 = q.copy()
    cache.write(0, cache.append(s, list(range(n))), k.reshape(n, -1).copy(), v.reshape(n, -1).copy())
    out = llmk.kv_decode(cache, 0, [s], q, Hq, 1 / np.sqrt(D))
    assert np.array_equal(q, q0)  # the caller's q is not rotated in place
    u, L = 2.0**-24, np.log2(D)
    eps = L * u / (1 - L * u) + 2.01 * u
    qn1, qn2 = np.abs(q).sum(-1).max(), np.sqrt((q.astype(np.float64) ** 2).sum(-1)).max()
    kn1, kn2 = np.abs(k).sum(-1).max(), np.sqrt((k.astype(np.float64) ** 2).sum(-1)).max()
    delta = eps * (qn1 * kn2 + qn2 * kn1) * (1 + 1e-6) / np.sqrt(D)
    tol = 1e-5 + np.expm1(2 * delta) * np.abs(v).max()
    np.testing.assert_allclose(out, dense_attention(q, k, v, n - 1), atol=tol, rtol=1e-5)


def test_out_of_blocks_and_bad_arguments():
    cache = llmk.KvCache(n_layers=1, n_kv_heads=1, head_dim=64, budget_bytes=2 * 16 * 64 * 4 * 2)
    s = cache.add_sequence()
    assert cache.append(s, list(range(32))) is not None
    assert cache.append(s, [1]) is None  # the scheduler would preempt
    with pytest.raises(ValueError, match="k_type"):
        llmk.KvCache(n_layers=1, n_kv_heads=1, head_dim=64, budget_bytes=1 << 20, k_type="q3")
    with pytest.raises(ValueError, match="'seq' = 9"):
        cache.free_sequence(9)


# fork, truncate and reuse_prefix (llmk/kv_cache.hpp, "Manager rules"): blocks of
# BT tokens, f32 rows, so attention over the cache equals dense attention over the
# rows each sequence holds.
BT, HKV, HQ, D = 16, 2, 4, 64


def rows(rng, n):
    return rng.standard_normal((n, HKV, D), dtype=np.float32)


def put(cache, seq, tokens, k, v):
    slots = cache.append(seq, tokens)
    cache.write(0, slots, k.reshape(len(tokens), -1).copy(), v.reshape(len(tokens), -1).copy())
    return slots


def decode_matches(cache, seq, q, k, v):
    out = llmk.kv_decode(cache, 0, [seq], q, HQ, 1 / np.sqrt(D))
    np.testing.assert_allclose(out, dense_attention(q, k, v, len(k) - 1), atol=1e-5, rtol=1e-5)


def small_cache(rng):
    """A one-layer cache of BT-token blocks and one decode query [1, HQ, D]."""
    cache = llmk.KvCache(n_layers=1, n_kv_heads=HKV, head_dim=D, budget_bytes=1 << 20, block_tokens=BT)
    return cache, rng.standard_normal((1, HQ, D), dtype=np.float32)


def test_fork_shares_blocks_and_copy_on_write_keeps_the_parents_rows():
    rng = np.random.default_rng(2)
    cache, q = small_cache(rng)
    k, v = rows(rng, 20), rows(rng, 20)
    p = cache.add_sequence()
    parent_slots = put(cache, p, list(range(20)), k, v)  # one full block and 4 tokens of a second
    c = cache.fork(p)
    assert c != p and cache.length(c) == 20
    st = cache.stats()
    assert (st["blocks_used"], st["tokens_stored"]) == (2, 20)  # every block shared, none copied
    decode_matches(cache, c, q, k, v)
    # The child's append copies the shared partial block (its 4 rows) into a block of its own ...
    kc, vc = rows(rng, 1), rows(rng, 1)
    child_slot = put(cache, c, [100], kc, vc)[0]
    assert child_slot % BT == 20 % BT
    assert child_slot // BT not in {s // BT for s in parent_slots}
    assert cache.stats()["blocks_used"] == 3
    # ... so the parent, now the partial block's only holder, appends in place.
    kp, vp = rows(rng, 1), rows(rng, 1)
    parent_slot = put(cache, p, [200], kp, vp)[0]
    assert parent_slot == parent_slots[-1] + 1
    assert cache.stats()["blocks_used"] == 3
    decode_matches(cache, p, q, np.concatenate([k, kp]), np.concatenate([v, vp]))
    decode_matches(cache, c, q, np.concatenate([k, kc]), np.concatenate([v, vc]))


def test_truncate_drops_tokens_and_frees_blocks():
    rng = np.random.default_rng(3)
    cache, q = small_cache(rng)
    k, v = rows(rng, 40), rows(rng, 40)
    s = cache.add_sequence()
    slots = put(cache, s, list(range(40)), k, v)
    assert cache.stats()["blocks_used"] == 3
    cache.truncate(s, 10)
    assert cache.length(s) == 10
    st = cache.stats()
    assert (st["blocks_used"], st["tokens_stored"]) == (1, 10)
    assert st["blocks_free"] + st["blocks_cached"] == st["blocks_total"] - 1
    decode_matches(cache, s, q, k[:10], v[:10])  # the cut rows are not attended
    # The next tokens go right after the kept ones, into the kept block.
    k2, v2 = rows(rng, 3), rows(rng, 3)
    assert put(cache, s, [7, 8, 9], k2, v2) == [slots[0] + 10, slots[0] + 11, slots[0] + 12]
    decode_matches(cache, s, q, np.concatenate([k[:10], k2]), np.concatenate([v[:10], v2]))
    with pytest.raises(ValueError, match="'length' = 14"):
        cache.truncate(s, 14)


def test_reuse_prefix_attaches_the_cached_whole_blocks_of_a_repeated_prompt():
    rng = np.random.default_rng(4)
    cache, q = small_cache(rng)
    prompt = [int(t) for t in rng.integers(0, 1000, 40)]
    k, v = rows(rng, 40), rows(rng, 40)
    a = cache.add_sequence()
    put(cache, a, prompt, k, v)
    cache.free_sequence(a)  # its full blocks stay cached
    assert cache.stats()["blocks_used"] == 0 and cache.stats()["blocks_cached"] == 2
    b = cache.add_sequence()
    assert cache.reuse_prefix(b, prompt) == 32  # whole blocks only: 2 of 16, not the last 8 tokens
    assert cache.length(b) == 32
    assert cache.stats()["blocks_cached"] == 0 and cache.stats()["blocks_used"] == 2
    # The attached blocks hold a's rows: b only appends and writes the rest.
    k2, v2 = rows(rng, 8), rows(rng, 8)
    put(cache, b, prompt[32:], k2, v2)
    decode_matches(cache, b, q, np.concatenate([k[:32], k2]), np.concatenate([v[:32], v2]))
    # A prompt that differs inside the second block reuses the first only; a shorter
    # prompt than a block reuses nothing; only an empty sequence can take a prefix.
    other = prompt[:20] + [1001] + prompt[21:]
    assert cache.reuse_prefix(cache.add_sequence(), other) == 16
    assert cache.reuse_prefix(cache.add_sequence(), prompt[:15]) == 0
    with pytest.raises(ValueError, match="empty sequence"):
        cache.reuse_prefix(b, prompt)
