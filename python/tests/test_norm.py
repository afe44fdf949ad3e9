"""llmk.layer_norm / rms_norm and their backwards against torch autograd.

The oracle is torch autograd in float64 on the very values llmk sees (inputs
rounded to the test dtype first), so only llmk's own rounding is measured.
Tolerances per dtype (eps_T: 2^-23 f32, 2^-10 f16, 2^-7 bf16): outputs stored
in T are off by half an ulp (rtol = eps_T), and f32 arithmetic over a row of
D adds ~ 8 sqrt(D) u32 times the output scale (atol); f32 weight gradients
sum N rows: 8 sqrt(N D) u32 times their scale. torch's own result in the
test dtype (where torch 1.13 has a CPU kernel for it) is checked against the
same oracle: llmk's worst error must not exceed torch's (or a few ulps).
"""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import llmk

EPS_T = {torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}
U32 = 2.0 ** -23
SHAPES = [(1, 1), (3, 7), (4, 576), (5, 1023), (2, 1024), (3, 1025), (2, 4097)]


def inputs(n, d, dtype, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, d, generator=g) * 2 + 0.5).to(dtype)
    dy = torch.randn(n, d, generator=g).to(dtype)
    w = (1 + 0.5 * torch.randn(d, generator=g)).to(dtype)
    b = (0.5 * torch.randn(d, generator=g)).to(dtype)
    return [t.to(device) for t in (x, dy, w, b)]


def torch_ln(x, dy, w, b, eps, dtype):
    """y and the gradients by torch autograd, computed in `dtype`."""
    xs, ws, bs = (t.detach().to(dtype).requires_grad_() for t in (x, w, b))
    y = F.layer_norm(xs, (x.shape[-1],), ws, bs, eps)
    y.backward(dy.to(dtype))
    return y.detach(), xs.grad, ws.grad, bs.grad


def torch_rms(x, dy, w, eps, dtype):
    xs, ws = (t.detach().to(dtype).requires_grad_() for t in (x, w))
    y = xs * torch.rsqrt((xs * xs).mean(-1, keepdim=True) + eps) * ws
    y.backward(dy.to(dtype))
    return y.detach(), xs.grad, ws.grad


def err_ok(got, ref, atol, rtol):
    got, ref = got.double().cpu(), ref.double().cpu()
    return bool(((got - ref).abs() <= atol + rtol * ref.abs()).all())


def dx_scale(x, dy, w, eps, rms):
    """The magnitude of the terms of dx = rstd (g - mean(g) - x_hat mean(g x_hat)), g = dy w:
    dx itself can be ~0 (D = 1) while its terms are not."""
    x, g = x.double(), dy.double() * w.double()
    xc = x if rms else x - x.mean(-1, keepdim=True)
    rstd = torch.rsqrt((xc * xc).mean(-1, keepdim=True) + eps)
    xh = xc * rstd
    return (rstd * (g.abs() + g.abs().mean(-1, keepdim=True) + xh.abs() * (g * xh).abs().mean(-1, keepdim=True))).max()


def check(got, ref, dtype, sums, what, scale=None):
    """got vs the float64 oracle; `sums` is the length of the f32 sums behind it, `scale` the
    magnitude of the terms (default: of the result)."""
    if scale is None:
        scale = ref.abs().max().item() if ref.numel() else 0.0
    atol = (8 * math.sqrt(sums) + 16) * U32 * max(scale, 1.0)
    rtol = EPS_T[dtype] if got.dtype != torch.float32 else U32 * 4
    worst = ((got.double().cpu() - ref.double().cpu()).abs() - rtol * ref.double().cpu().abs()).max().item()
    assert err_ok(got, ref, atol, rtol), f"{what}: worst excess {worst:.3g} over atol {atol:.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n,d", SHAPES)
def test_layer_norm_matches_torch_autograd(n, d, dtype):
    x, dy, w, b = inputs(n, d, dtype, seed=n * 7 + d)
    y, mean, rstd = llmk.layer_norm(x, w, b, 1e-5)
    dx, dw, db = llmk.layer_norm_backward(dy, x, w, mean, rstd)
    ry, rdx, rdw, rdb = torch_ln(x, dy, w, b, 1e-5, torch.float64)
    assert y.dtype == dtype and dx.dtype == dtype and mean.dtype == torch.float32
    check(y, ry, dtype, d, "y")
    check(dx, rdx, dtype, d, "dx", dx_scale(x, dy, w, 1e-5, False))
    check(dw, rdw, torch.float32, n * d, "dweight")
    check(db, rdb, torch.float32, n, "dbias")
    if dtype != torch.float16:  # torch 1.13 has no f16 LayerNorm on the CPU
        ty, tdx, _, _ = torch_ln(x, dy, w, b, 1e-5, dtype)
        for what, ours, theirs, ref in (("y", y, ty, ry), ("dx", dx, tdx, rdx)):
            err = (ours.double() - ref).abs().max().item()
            torch_err = (theirs.double() - ref).abs().max().item()
            assert err <= max(torch_err, 4 * EPS_T[dtype] * ref.abs().max().item()), (what, err, torch_err)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n,d", SHAPES)
def test_rms_norm_matches_torch_autograd(n, d, dtype):
    x, dy, w, _ = inputs(n, d, dtype, seed=n * 11 + d)
    y, rstd = llmk.rms_norm(x, w, 1e-5)
    dx, dw = llmk.rms_norm_backward(dy, x, w, rstd)
    ry, rdx, rdw = torch_rms(x, dy, w, 1e-5, torch.float64)
    check(y, ry, dtype, d, "y")
    check(dx, rdx, dtype, d, "dx", dx_scale(x, dy, w, 1e-5, True))
    check(dw, rdw, torch.float32, n * d, "dweight")


def test_numpy_in_numpy_out_and_no_parameters():
    x = np.random.default_rng(0).standard_normal((6, 33)).astype(np.float32)
    y, mean, rstd = llmk.layer_norm(x)
    assert isinstance(y, np.ndarray) and y.shape == x.shape and mean.shape == (6,)
    ref = F.layer_norm(torch.from_numpy(x).double(), (33,)).numpy()
    np.testing.assert_allclose(y, ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(1), atol=1e-6, rtol=1e-6)


def test_strided_rows_and_one_row_vectors():
    wide = torch.randn(8, 100)
    x = wide[:, :64]  # row stride 100
    y, _, _ = llmk.layer_norm(x, None, None, 1e-5)
    assert torch.allclose(y, F.layer_norm(x, (64,)), atol=1e-5)
    v = torch.randn(576)
    yv, rstd = llmk.rms_norm(v, torch.ones(576), 1e-5)
    assert yv.shape == (576,) and rstd.shape == (1,)
    assert torch.allclose(yv, v * torch.rsqrt((v * v).mean() + 1e-5), atol=1e-5)


def test_empty_batch_gives_zero_gradients():
    x = torch.empty(0, 16)
    y, mean, rstd = llmk.layer_norm(x, torch.ones(16), torch.zeros(16))
    dx, dw, db = llmk.layer_norm_backward(torch.empty(0, 16), x, torch.ones(16), mean, rstd)
    assert y.shape == (0, 16) and dx.shape == (0, 16)
    assert (dw == 0).all() and (db == 0).all()


def test_special_values_propagate_as_in_torch():
    x = torch.randn(4, 9)
    x[1, 3] = float("nan")
    x[2, 0] = float("inf")
    x[3] = 2.5  # constant row
    for eps in (1e-5, 0.0):
        y, _, rstd = llmk.layer_norm(x, None, None, eps)
        ref = F.layer_norm(x, (9,), eps=eps)
        assert torch.equal(torch.isnan(y), torch.isnan(ref)), (eps, y, ref)
        finite = ~torch.isnan(ref)
        assert torch.allclose(y[finite], ref[finite], atol=1e-5)
    assert rstd[3].item() == float("inf")  # eps = 0 on a constant row: rstd = inf, y = NaN, as torch


def test_large_mean_rows_stay_accurate():
    base = torch.randn(4, 4096, dtype=torch.float64)
    for center in (1e4, 1e6):
        x = (base + center).float()
        y, _, _ = llmk.layer_norm(x, None, None, 1e-5)
        ref = F.layer_norm(x.double(), (4096,), eps=1e-5)
        assert (y.double() - ref).abs().max().item() < 1e-3, center


def test_bad_arguments_name_argument_and_value():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match=r"'eps' = -1"):
        llmk.layer_norm(x, None, None, -1.0)
    with pytest.raises(ValueError, match=r"'weight' = f32\[7\]"):
        llmk.layer_norm(x, torch.ones(7))
    with pytest.raises(ValueError, match=r"'x'.*i32"):
        llmk.rms_norm(torch.zeros(2, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"'rstd'"):
        llmk.rms_norm_backward(x, x, None, torch.ones(3))


@pytest.mark.skipif(not (llmk.cuda_device_count() > 0 and torch.cuda.is_available()),
                    reason="skipped: no CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_tensors_match_torch(dtype):
    x, dy, w, b = inputs(64, 4096, dtype, device="cuda")
    y, mean, rstd = llmk.layer_norm(x, w, b, 1e-5)
    dx, dw, db = llmk.layer_norm_backward(dy, x, w, mean, rstd)
    ry, rdx, rdw, rdb = torch_ln(x, dy, w, b, 1e-5, torch.float64)
    assert y.is_cuda and dw.is_cuda
    check(y, ry, dtype, 4096, "y")
    check(dx, rdx, dtype, 4096, "dx", dx_scale(x.cpu(), dy.cpu(), w.cpu(), 1e-5, False))
    check(dw, rdw, torch.float32, 64 * 4096, "dweight")
    check(db, rdb, torch.float32, 64, "dbias")
