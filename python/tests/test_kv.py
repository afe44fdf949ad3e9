"""The KV cache from Python: decode and causal prefill against torch's softmax attention
on the dense cache (f32, 1e-5 abs + rel), also with K stored Hadamard-rotated (k_rotate),
out of blocks, and bad arguments named."""
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
