"""llmk.softmax_topk against torch.softmax + torch.topk, and llmk.sample."""
import math

import numpy as np
import pytest

import llmk

torch = pytest.importorskip("torch")


def torch_ref(x, k, t=1.0):
    p = torch.softmax(x.float() / t, dim=-1)
    return torch.topk(p, k, dim=-1)


@pytest.mark.parametrize("v,k", [(8, 2), (1025, 50), (50257, 256), (128256, 1024)])
def test_matches_torch_f32(v, k):
    g = torch.Generator().manual_seed(v)
    x = torch.randn(3, v, generator=g)
    probs, idx, row_max, lse = llmk.softmax_topk(x, k)
    ref = torch_ref(x, k)
    assert idx.dtype == torch.int32 and probs.dtype == torch.float32
    # Distinct random logits: the order is unambiguous. torch's f32 softmax is itself
    # off by a few ulp, so 4e-6 relative covers both sides.
    assert torch.equal(idx.long(), ref.indices)
    torch.testing.assert_close(probs, ref.values, rtol=4e-6, atol=1e-12)
    torch.testing.assert_close(row_max, x.max(dim=-1).values, rtol=0, atol=0)
    torch.testing.assert_close(lse, torch.logsumexp(x.double(), dim=-1).float(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types_by_value(dtype):
    x = torch.randn(4, 5000).to(dtype)
    probs, idx, _, _ = llmk.softmax_topk(x, 64)
    ref = torch_ref(x, 64)
    # Half types tie often and torch.topk orders ties arbitrarily: compare the sorted
    # values, and check every returned index has the returned probability.
    torch.testing.assert_close(probs, ref.values, rtol=4e-6, atol=1e-12)
    full = torch.softmax(x.float(), dim=-1)
    torch.testing.assert_close(torch.gather(full, 1, idx.long()), probs, rtol=4e-6, atol=1e-12)
    # Ties to the lower index: within equal logits, indices ascend.
    xi = torch.gather(x.float(), 1, idx.long())
    same = xi[:, 1:] == xi[:, :-1]
    assert bool((idx[:, 1:][same] > idx[:, :-1][same]).all())


def test_temperature_stride_numpy():
    base = torch.randn(3, 1100)
    x = base[:, :1025]  # row stride 1100
    probs, idx, row_max, _ = llmk.softmax_topk(x, 8, temperature=0.7)
    ref = torch_ref(x, 8, 0.7)
    assert torch.equal(idx.long(), ref.indices)
    torch.testing.assert_close(probs, ref.values, rtol=4e-6, atol=1e-12)
    n = x.numpy()
    p2, i2, _, _ = llmk.softmax_topk(n, 8, temperature=0.7)
    assert isinstance(p2, np.ndarray) and np.array_equal(i2, idx.numpy())
    p1, i1, m1, _ = llmk.softmax_topk(x[1], 8, temperature=0.7)  # one row
    assert torch.equal(i1, idx[1]) and float(m1) == float(row_max[1])


def test_special_rows_like_torch_softmax():
    x = torch.randn(5, 300)
    x[0, 7] = float("nan")
    x[1, 3] = float("inf")
    x[2, :] = float("-inf")
    x[3, ::2] = float("-inf")
    probs, idx, row_max, lse = llmk.softmax_topk(x, 4)
    tp = torch.softmax(x, dim=-1)
    for r in range(3):  # torch.softmax gives NaN for the whole row, like llmk
        assert torch.isnan(tp[r]).all() and torch.isnan(probs[r]).all()
        assert idx[r].tolist() == [0, 1, 2, 3]
    assert math.isnan(row_max[0]) and row_max[1] == math.inf and row_max[2] == -math.inf
    assert math.isnan(lse[0]) and lse[1] == math.inf and lse[2] == -math.inf
    ref = torch_ref(x[3:], 4)
    torch.testing.assert_close(probs[3:], ref.values, rtol=4e-6, atol=1e-12)


def test_bad_arguments_name_the_argument():
    x = torch.randn(2, 10)
    with pytest.raises(ValueError, match="'k' = 0"):
        llmk.softmax_topk(x, 0)
    with pytest.raises(ValueError, match="'k' = 11"):
        llmk.softmax_topk(x, 11)
    with pytest.raises(ValueError, match="'temperature' = 0"):
        llmk.softmax_topk(x, 2, temperature=0.0)
    with pytest.raises(ValueError, match="logits"):
        llmk.softmax_topk(torch.zeros(2, 10, dtype=torch.int32), 2)


def test_sample_greedy_and_deterministic():
    x = torch.randn(4, 49152)
    greedy = llmk.sample(x, temperature=0.0)
    assert torch.equal(greedy.long(), x.argmax(dim=-1))
    a = llmk.sample(x, temperature=0.8, top_k=50, top_p=0.9, seed=3, step=11)
    b = llmk.sample(x, temperature=0.8, top_k=50, top_p=0.9, seed=3, step=11)
    assert torch.equal(a, b)
    top50 = torch.topk(x, 50, dim=-1).indices
    assert all(int(a[r]) in top50[r].tolist() for r in range(4))
    hist = [[int(greedy[r])] for r in range(4)]
    pen = llmk.sample(x, temperature=0.0, presence_penalty=100.0, history=hist)
    assert not torch.equal(pen, greedy)
    u = llmk.uniform01(3, 11, 0)
    assert 0.0 <= u < 1.0
    with pytest.raises(ValueError, match="top_p"):
        llmk.sample(x, top_p=0.0)


@pytest.mark.skipif(not (torch.cuda.is_available() and llmk.cuda_device_count() > 0), reason="no CUDA device")
def test_cuda_matches_cpu():
    x = torch.randn(64, 131072, device="cuda")
    for k in (1, 8, 50, 256):
        p, i, m, lse = llmk.softmax_topk(x, k)
        torch.cuda.synchronize()
        pc, ic, mc, lc = llmk.softmax_topk(x.cpu(), k)
        assert p.is_cuda and torch.equal(i.cpu(), ic)
        torch.testing.assert_close(p.cpu(), pc, rtol=1e-6, atol=1e-12)
        torch.testing.assert_close(lse.cpu(), lc, rtol=1e-6, atol=1e-6)
