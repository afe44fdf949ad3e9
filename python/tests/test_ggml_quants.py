"""The storage-type traits table's reference dequantizers against the gguf package's
gguf.quants.dequantize, bit for bit, on random blocks of every quantized type (and on
every tensor of the Gemma-3 file when it is cached); the 32-value quantizers against
gguf.quants.quantize byte for byte; the K-quant quantizers (plain min/max, not ggml's)
by their round-trip error."""
from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
import llmk  # noqa: E402

# llmk type -> (gguf type, byte offsets of the block's f16 scales)
TYPES = {
    "q8_0": ("Q8_0", [0]),
    "q4_0": ("Q4_0", [0]),
    "q4_1": ("Q4_1", [0, 2]),
    "q5_0": ("Q5_0", [0]),
    "q5_1": ("Q5_1", [0, 2]),
    "q2_k": ("Q2_K", [80, 82]),
    "q3_k": ("Q3_K", [108]),
    "q4_k": ("Q4_K", [0, 2]),
    "q5_k": ("Q5_K", [0, 2]),
    "q6_k": ("Q6_K", [208]),
}


def _random_blocks(qt, offsets, n_blocks, rng):
    block_size, type_size = gguf.GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in offsets:  # finite halves of every magnitude, subnormals and zeros included
        halves = rng.integers(0, 1 << 16, size=n_blocks, dtype=np.uint32).astype(np.uint16) & np.uint16(0x7BFF)
        raw[:, off:off + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
    return raw, block_size


@pytest.mark.parametrize("name", sorted(TYPES))
def test_dequantize_bitwise_equal_to_gguf(name):
    qt = getattr(gguf.GGMLQuantizationType, TYPES[name][0])
    raw, block_size = _random_blocks(qt, TYPES[name][1], 4096, np.random.default_rng(len(name) * 7 + ord(name[1])))
    want = gguf.quants.dequantize(raw.reshape(1, -1), qt).reshape(-1).astype(np.float32)
    got = llmk.dequantize(name, raw)
    assert got.shape == (4096 * block_size,)
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert diff.size == 0, f"{name}: {diff.size} values differ, first at {diff[0]}: {got[diff[0]]} vs {want[diff[0]]}"


def test_a_planted_layout_error_is_caught():
    """The comparison can fail: one bit flipped in a Q6_K block changes llmk's values only."""
    qt = gguf.GGMLQuantizationType.Q6_K
    raw, _ = _random_blocks(qt, [208], 4, np.random.default_rng(3))
    want = gguf.quants.dequantize(raw.reshape(1, -1), qt).reshape(-1)
    bad = raw.copy()
    bad[1, 140] ^= 0x10
    assert not np.array_equal(llmk.dequantize("q6_k", bad).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"])
def test_quantize_bytes_equal_to_gguf(name):
    qt = getattr(gguf.GGMLQuantizationType, TYPES[name][0])
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.standard_normal(32 * 500), rng.uniform(-3, 5, 32 * 500), np.full(64, 0.75),
                        np.zeros(32)]).astype(np.float32)
    want = gguf.quants.quantize(x.reshape(1, -1), qt).reshape(-1)
    got = llmk.quantize(name, x)
    assert got.tobytes() == want.tobytes(), f"{name}: {np.count_nonzero(got != want)} bytes differ"


# K-quants: relative RMS round-trip error on normal values, each well above the format's
# own (bits per value 2.6 / 3.4 / 4.5 / 5.5 / 6.6), and the largest error within one step of
# the block's largest sub-block scale.
K_RMS = {"q2_k": 0.45, "q3_k": 0.25, "q4_k": 0.12, "q5_k": 0.06, "q6_k": 0.03}


@pytest.mark.parametrize("name", sorted(K_RMS))
def test_k_quantizers_round_trip(name):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(256 * 200) * np.repeat(rng.uniform(0.01, 3, 200), 256)).astype(np.float32)
    x[:256] = 0  # an all-zero super-block
    q = llmk.quantize(name, x)
    y = llmk.dequantize(name, q)
    qt = getattr(gguf.GGMLQuantizationType, TYPES[name][0])
    np.testing.assert_array_equal(y, gguf.quants.dequantize(q.reshape(1, -1), qt).reshape(-1))
    assert np.all(y[:256] == 0)
    xs, ys = x[256:].reshape(-1, 256), y[256:].reshape(-1, 256)
    rms = np.sqrt(np.mean((xs - ys) ** 2, axis=1)) / np.sqrt(np.mean(xs ** 2, axis=1))
    assert rms.max() < K_RMS[name], f"{name}: relative RMS error {rms.max():.4f}"
    # one step of the largest sub-block: its range over the code count (2^bits - 1)
    bits = {"q2_k": 2, "q3_k": 3, "q4_k": 4, "q5_k": 5, "q6_k": 6}[name]
    sub = 16 if name in ("q2_k", "q3_k", "q6_k") else 32
    span = (xs.reshape(xs.shape[0], -1, sub).max(axis=2) - np.minimum(xs.reshape(xs.shape[0], -1, sub).min(axis=2), 0))
    step = span.max(axis=1) / (2 ** bits - 1)
    assert np.all(np.abs(xs - ys).max(axis=1) <= 1.5 * step + 1e-6), name


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="'type'"):
        llmk.dequantize("q7_k", b"")
    with pytest.raises(ValueError, match="'data'"):
        llmk.dequantize("q4_k", bytes(100))
    with pytest.raises(ValueError, match="'x'"):
        llmk.quantize("q6_k", np.zeros(100, np.float32))


def test_every_tensor_of_the_gemma_file():
    """Every quantized tensor of the real Gemma-3-270M Q4_K_M file, dequantized by llmk and by
    the gguf package: bitwise equal."""
    from gguf_fixtures import gemma_model

    path = gemma_model()
    if path is None:
        pytest.skip("skipped: gemma-3-270m not cached (scripts/fetch-model gemma-3-270m)")
    r = gguf.GGUFReader(path)
    seen = set()
    for t in r.tensors:
        name = t.tensor_type.name.lower()
        if name not in TYPES:
            continue
        seen.add(name)
        data = np.asarray(t.data).reshape(-1).view(np.uint8)
        want = gguf.quants.dequantize(data.reshape(1, -1), t.tensor_type).reshape(-1)
        got = llmk.dequantize(name, data)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), t.name
    assert {"q4_k", "q6_k", "q5_0", "q8_0"} <= seen
