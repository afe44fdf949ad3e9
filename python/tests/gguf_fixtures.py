"""Small random GGUF models for tests, written with the PyPI `gguf` package (an independent
writer: llmk's own C++ writer is tested against its reader, this one against llama.cpp).

- byte_level_vocab(): a GPT-2 byte-level BPE vocabulary (256 byte symbols, a few merges,
  ChatML control tokens), small enough for random models;
- write_llama(path, ...): llama-arch model (RMSNorm, RoPE, GQA, SwiGLU), tied or untied;
- write_gpt2(path, ...): gpt2-arch model (LayerNorm, GELU, learned positions, fused QKV);
- DEFAULT_MODEL / default_model(): the real SmolLM2 GGUF, or None (tests then skip);
- gemma_model(): the real Gemma-3-270M Q4_K_M GGUF, or None.

Weights are normal(0, scale) in f32, stored as `ggml_type` ("F32", "F16", "BF16", "Q8_0",
"Q4_0", "Q4_1"; norms and biases stay F32, as llama.cpp's converter keeps them). numpy
shapes are [out, in]; the gguf package writes them in ggml order (ne0 = in).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _byte_symbols() -> list[str]:
    """GPT-2's bytes_to_unicode, in byte order."""
    out, nxt = [], 256
    for b in range(256):
        if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF:
            out.append(chr(b))
        else:
            out.append(chr(nxt))
            nxt += 1
    return out


def byte_level_vocab(merges: list[str] | None = None):
    """(tokens, token_types, merges): 3 control tokens (<|endoftext|>=0, <|im_start|>=1,
    <|im_end|>=2), the 256 byte symbols, then one token per merge."""
    if merges is None:
        merges = ["Ġ t", "h e", "i n", "Ġt he", "e r", "o n", "Ġ a", "r e", "a t", "e n", "l l", "Ġ w", "o u"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + _byte_symbols()
    types = [3, 3, 3] + [1] * 256
    for m in merges:
        tokens.append(m.replace(" ", ""))
        types.append(1)
    return tokens, types, merges


def _quantize(a: np.ndarray, ggml_type: str):
    import gguf

    qt = getattr(gguf.GGMLQuantizationType, ggml_type)
    if ggml_type == "F32":
        return a.astype(np.float32), None
    if ggml_type == "F16":
        return a.astype(np.float16), None
    return gguf.quants.quantize(a.astype(np.float32), qt), qt


def _add_tokenizer(w, pre: str, tokens, types, merges):
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)


def _write(w, tensors: dict[str, np.ndarray], ggml_type: str):
    for name, a in tensors.items():
        t = "F32" if a.ndim == 1 else ggml_type  # norms and biases stay f32
        data, qt = _quantize(a, t)
        if qt is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=qt)  # data: bytes [rows, row bytes]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_llama(path, *, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=96, ctx=256,
                ggml_type="F32", tied=True, seed=0, scale=0.05, rope_base=10000.0, eps=1e-5,
                pre="smollm", vocab=None) -> Path:
    import gguf

    tokens, types, merges = vocab or byte_level_vocab()
    n_vocab, hd = len(tokens), n_embd // n_head
    rng = np.random.default_rng(seed)
    rnd = lambda *shape: (rng.standard_normal(shape) * scale).astype(np.float32)
    norm = lambda n: (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(rope_base)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(eps)
    w.add_vocab_size(n_vocab)
    _add_tokenizer(w, pre, tokens, types, merges)
    t = {"token_embd.weight": rnd(n_vocab, n_embd), "output_norm.weight": norm(n_embd)}
    if not tied:
        t["output.weight"] = rnd(n_vocab, n_embd)
    for i in range(n_layer):
        b = f"blk.{i}."
        t[b + "attn_norm.weight"] = norm(n_embd)
        t[b + "attn_q.weight"] = rnd(n_head * hd, n_embd)
        t[b + "attn_k.weight"] = rnd(n_head_kv * hd, n_embd)
        t[b + "attn_v.weight"] = rnd(n_head_kv * hd, n_embd)
        t[b + "attn_output.weight"] = rnd(n_embd, n_head * hd)
        t[b + "ffn_norm.weight"] = norm(n_embd)
        t[b + "ffn_gate.weight"] = rnd(n_ff, n_embd)
        t[b + "ffn_up.weight"] = rnd(n_ff, n_embd)
        t[b + "ffn_down.weight"] = rnd(n_embd, n_ff)
    _write(w, t, ggml_type)
    return Path(path)


def write_gpt2(path, *, n_layer=2, n_embd=64, n_head=4, n_ff=256, ctx=128, ggml_type="F32",
               seed=0, scale=0.05, eps=1e-5, pre="gpt-2", vocab=None) -> Path:
    import gguf

    tokens, types, merges = vocab or byte_level_vocab()
    n_vocab = len(tokens)
    rng = np.random.default_rng(seed)
    rnd = lambda *shape: (rng.standard_normal(shape) * scale).astype(np.float32)
    norm = lambda n: (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_context_length(ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_layer_norm_eps(eps)
    _add_tokenizer(w, pre, tokens, types, merges)
    t = {"token_embd.weight": rnd(n_vocab, n_embd), "position_embd.weight": rnd(ctx, n_embd),
         "output_norm.weight": norm(n_embd), "output_norm.bias": rnd(n_embd),
         "output.weight": rnd(n_vocab, n_embd)}
    for i in range(n_layer):
        b = f"blk.{i}."
        t[b + "attn_norm.weight"], t[b + "attn_norm.bias"] = norm(n_embd), rnd(n_embd)
        t[b + "attn_qkv.weight"], t[b + "attn_qkv.bias"] = rnd(3 * n_embd, n_embd), rnd(3 * n_embd)
        t[b + "attn_output.weight"], t[b + "attn_output.bias"] = rnd(n_embd, n_embd), rnd(n_embd)
        t[b + "ffn_norm.weight"], t[b + "ffn_norm.bias"] = norm(n_embd), rnd(n_embd)
        t[b + "ffn_up.weight"], t[b + "ffn_up.bias"] = rnd(n_ff, n_embd), rnd(n_ff)
        t[b + "ffn_down.weight"], t[b + "ffn_down.bias"] = rnd(n_embd, n_ff), rnd(n_embd)
    _write(w, t, ggml_type)
    return Path(path)


def default_model() -> Path | None:
    """The real SmolLM2-135M-Instruct Q4_1 GGUF: $LLMK_MODEL, else the cache, else fetched by
    scripts/fetch-model when LLMK_FETCH_MODEL=1; None when it cannot be had."""
    if os.environ.get("LLMK_MODEL"):
        p = Path(os.environ["LLMK_MODEL"])
        return p if p.is_file() else None
    cache = Path(os.environ.get("LLMK_CACHE", Path.home() / ".cache" / "llmk"))
    p = cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if p.is_file():
        return p
    if os.environ.get("LLMK_FETCH_MODEL") == "1":
        r = subprocess.run([str(ROOT / "scripts" / "fetch-model")], capture_output=True, text=True)
        if r.returncode == 0 and Path(r.stdout.strip()).is_file():
            return Path(r.stdout.strip())
    return None


def gemma_model() -> Path | None:
    """The real Gemma-3-270M Q4_K_M GGUF from the cache, fetched by `scripts/fetch-model
    gemma-3-270m` when LLMK_FETCH_MODEL=1; None when it cannot be had."""
    cache = Path(os.environ.get("LLMK_CACHE", Path.home() / ".cache" / "llmk"))
    p = cache / "models" / "gemma-3-270m-q4_k_m.gguf"
    if p.is_file():
        return p
    if os.environ.get("LLMK_FETCH_MODEL") == "1":
        r = subprocess.run([str(ROOT / "scripts" / "fetch-model"), "gemma-3-270m"], capture_output=True, text=True)
        if r.returncode == 0 and Path(r.stdout.strip()).is_file():
            return Path(r.stdout.strip())
    return None


def llamacpp_vocab(name: str):
    """(gguf path, [(input text, expected ids)]) of llama.cpp's ggml-vocab-<name>.gguf test
    vectors (.inp texts separated by '\\n__ggml_vocab_test__\\n', .out one line of ids each),
    fetched from the llama-cpp-python sdist by scripts/fetch-llamacpp-vocab; None when they
    cannot be had."""
    r = subprocess.run([str(ROOT / "scripts" / "fetch-llamacpp-vocab")], capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        return None
    d = Path(r.stdout.strip())
    model = d / f"ggml-vocab-{name}.gguf"
    raw = (d / f"ggml-vocab-{name}.gguf.inp").read_bytes().decode()
    texts = raw.split("\n__ggml_vocab_test__\n")
    if texts and texts[-1] == "":  # the file ends with a separator
        texts.pop()
    outs = [[int(x) for x in l.split()] for l in (d / f"ggml-vocab-{name}.gguf.out").read_text().split("\n")[: len(texts)]]
    return model, list(zip(texts, outs))


# The families of issue 31 as small random-weight models carrying the real tokenizer of the
# family (llama.cpp's vocab-only files, scripts/fetch-llamacpp-vocab). Each entry: the
# general.architecture, the vocab file, the head layout and what differs from Llama 2.
FAMILIES = {
    # Llama 3.x: llama-bpe vocabulary (128,256), GQA, llama3 RoPE divisors in rope_freqs.weight
    "llama3": dict(arch="llama", vocab="llama-bpe", n_head=4, n_head_kv=2, rope_base=500000.0, rope_freqs=True),
    # Mistral: llama arch, SentencePiece, GQA 4:1, a sliding window longer than the tested prompt
    "mistral": dict(arch="llama", vocab="llama-spm", n_head=4, n_head_kv=1, rope_base=1e6, sliding_window=4096),
    # Qwen2 / 2.5: q, k, v biases, NEOX RoPE
    "qwen2": dict(arch="qwen2", vocab="qwen2", n_head=4, n_head_kv=2, rope_base=1e6, qkv_bias=True),
    # Qwen3: q/k head RMSNorm, no biases, head_dim (key_length) != d_model / n_head
    "qwen3": dict(arch="qwen3", vocab="qwen2", n_head=4, n_head_kv=2, rope_base=1e6, qk_norm=True, head_scale=2),
    # Phi-3: fused QKV and gate|up, LongRoPE short/long factors and attention factor
    "phi3": dict(arch="phi3", vocab="phi-3", n_head=4, n_head_kv=2, rope_base=10000.0, fused=True, longrope=True),
    # Qwen3-MoE: qwen3's attention, a mixture of 8 experts (2 a token) d_model wide
    # (expert_feed_forward_length) for the FFN
    "qwen3moe": dict(arch="qwen3moe", vocab="qwen2", n_head=4, n_head_kv=2, rope_base=1e6, qk_norm=True, head_scale=2,
                     experts=(8, 2)),
    # Mixtral: Mistral's llama arch with 8 experts (2 a token) of width feed_forward_length
    "mixtral": dict(arch="llama", vocab="llama-spm", n_head=4, n_head_kv=1, rope_base=1e6, experts=(8, 2)),
}
# Q4_K needs rows of 256 values: those files get d_model 256.
WEIGHT_TYPES = ["F32", "F16", "Q8_0", "Q4_K"]


def vocab_path(name: str) -> Path | None:
    """llama.cpp's ggml-vocab-<name>.gguf from the cache (scripts/fetch-llamacpp-vocab), or None."""
    cache = Path(os.environ.get("LLMK_CACHE", Path.home() / ".cache" / "llmk"))
    p = cache / "llamacpp-vocab" / f"ggml-vocab-{name}.gguf"
    return p if p.is_file() else None


def _copy_tokenizer(w, vocab_file: Path) -> int:
    """Every tokenizer.* key of vocab_file into writer w, types kept; returns the vocabulary size."""
    import gguf

    r = gguf.GGUFReader(str(vocab_file))
    n = 0
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, f.contents(), vt, sub_type=f.types[1])
        else:
            w.add_key_value(key, f.contents(), vt)
        if key == "tokenizer.ggml.tokens":
            n = len(f.data)
    return n


def _quantize_any(a: np.ndarray, ggml_type: str):
    """(data, raw_dtype) for the gguf writer: the gguf package quantizes what it can; Q4_K and Q6_K
    go through llmk's reference quantizers (the gguf package has none)."""
    if ggml_type in ("Q4_K", "Q6_K"):
        import gguf
        import llmk

        q = llmk.quantize(ggml_type.lower(), a.astype(np.float32).ravel())
        return q.reshape(*a.shape[:-1], -1), getattr(gguf.GGMLQuantizationType, ggml_type)
    return _quantize(a, ggml_type)


def write_family(path, family: str, ggml_type: str = "F32", *, n_layer=2, seed=0, ctx=2048, omit=()) -> Path:
    """A random-weight `family` model (FAMILIES) with the family's real tokenizer metadata.
    Weights N(0, 1/sqrt(fan_in)) stored as ggml_type (norms, biases and RoPE factors F32);
    untied output; d_model 64 (256 for Q4_K), d_ff 2 d_model. With `experts` (E, K) in the
    family: the router ffn_gate_inp [E, d] (F32, as llama.cpp's quantizer leaves it) and the
    3-D ffn_{gate,up,down}_exps [E, F, d], [E, F, d], [E, d, F] in place of the dense FFN
    (F: d_ff for llama, expert_feed_forward_length = d_model for qwen3moe). A mixture of experts
    in Q4_K gets one layer with F32 attention: its router then sees the same input on both
    sides to f32 rounding (the Q4_K embeddings are dequantized alike), as a token's experts are
    a discontinuous function of that input; see test_families_llamacpp.py. `omit`: metadata
    keys left out (tests of a missing key)."""
    import gguf

    spec = FAMILIES[family]
    vf = vocab_path(spec["vocab"])
    if vf is None:
        raise FileNotFoundError(f"ggml-vocab-{spec['vocab']}.gguf not cached (scripts/fetch-llamacpp-vocab)")
    arch = spec["arch"]
    d = 256 if ggml_type == "Q4_K" else 64
    n_ff, nh, nkv = 2 * d, spec["n_head"], spec["n_head_kv"]
    hd = d // nh * spec.get("head_scale", 1)
    dq, dkv = nh * hd, nkv * hd
    rng = np.random.default_rng(seed)
    rnd = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    vec = lambda n, mean, sd: (mean + sd * rng.standard_normal(n)).astype(np.float32)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"random {family} {ggml_type}")
    n_vocab = _copy_tokenizer(w, vf)
    w.add_context_length(ctx)
    w.add_embedding_length(d)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(spec["rope_base"])
    w.add_rope_dimension_count(hd)
    if hd * nh != d:
        w.add_key_length(hd)
        w.add_value_length(hd)
    if spec.get("sliding_window"):
        w.add_sliding_window(spec["sliding_window"])
    n_exp, n_used = spec.get("experts", (0, 0))
    n_ff_exp = d if arch == "qwen3moe" else n_ff
    f32_attn = bool(n_exp) and ggml_type == "Q4_K"
    if f32_attn:
        n_layer = 1
    w.add_block_count(n_layer)
    if n_exp:
        w.add_expert_count(n_exp)
        w.add_expert_used_count(n_used)
        if arch == "qwen3moe":
            w.add_expert_feed_forward_length(n_ff_exp)
    t = {"token_embd.weight": rnd(n_vocab, d) * np.sqrt(d) * 0.5, "output_norm.weight": vec(d, 1.0, 0.1),
         "output.weight": rnd(n_vocab, d) * 4}
    if spec.get("rope_freqs"):  # Llama 3.1's scaling (factor 8, low/high freq factors 1 and 4, 8192 original)
        t["rope_freqs.weight"] = llama3_rope_freqs(hd, spec["rope_base"])
    if spec.get("longrope"):
        w.add_key_value(f"{arch}.rope.scaling.original_context_length", ctx // 2, gguf.GGUFValueType.UINT32)
        w.add_key_value(f"{arch}.rope.scaling.attn_factor", 1.19, gguf.GGUFValueType.FLOAT32)
        t["rope_factors_long.weight"] = vec(hd // 2, 8.0, 2.0).clip(1.0, None)
        t["rope_factors_short.weight"] = vec(hd // 2, 1.5, 0.3).clip(1.0, None)
    for i in range(n_layer):
        b = f"blk.{i}."
        t[b + "attn_norm.weight"] = vec(d, 1.0, 0.1)
        if spec.get("fused"):
            t[b + "attn_qkv.weight"] = rnd(dq + 2 * dkv, d)
        else:
            t[b + "attn_q.weight"], t[b + "attn_k.weight"], t[b + "attn_v.weight"] = rnd(dq, d), rnd(dkv, d), rnd(dkv, d)
        if spec.get("qkv_bias"):
            t[b + "attn_q.bias"], t[b + "attn_k.bias"], t[b + "attn_v.bias"] = vec(dq, 0, 0.5), vec(dkv, 0, 0.5), vec(dkv, 0, 0.5)
        if spec.get("qk_norm"):
            t[b + "attn_q_norm.weight"], t[b + "attn_k_norm.weight"] = vec(hd, 1.0, 0.1), vec(hd, 1.0, 0.1)
        t[b + "attn_output.weight"] = rnd(d, dq)
        t[b + "ffn_norm.weight"] = vec(d, 1.0, 0.1)
        if n_exp:
            t[b + "ffn_gate_inp.weight"] = rnd(n_exp, d)
            t[b + "ffn_gate_exps.weight"], t[b + "ffn_up_exps.weight"] = rnd(n_exp, n_ff_exp, d), rnd(n_exp, n_ff_exp, d)
            t[b + "ffn_down_exps.weight"] = rnd(n_exp, d, n_ff_exp)
            continue
        if spec.get("fused"):
            t[b + "ffn_up.weight"] = rnd(2 * n_ff, d)
        else:
            t[b + "ffn_gate.weight"], t[b + "ffn_up.weight"] = rnd(n_ff, d), rnd(n_ff, d)
        t[b + "ffn_down.weight"] = rnd(d, n_ff)
    for name, a in t.items():
        f32 = a.ndim == 1 or "ffn_gate_inp" in name or (f32_attn and ".attn_" in name)
        data, qt = _quantize_any(a, "F32" if f32 else ggml_type)
        if qt is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=qt)
    for key in omit:
        del w.kv_data[0][key]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def llama3_rope_freqs(head_dim: int, base: float, factor=8.0, low=1.0, high=4.0, orig_ctx=8192) -> np.ndarray:
    """rope_freqs.weight as llama.cpp's converter computes it for rope_type llama3
    (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors): a divisor per frequency."""
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    low_wl, high_wl = orig_ctx / low, orig_ctx / high
    out = []
    for f in freqs:
        wl = 2 * np.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (orig_ctx / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# Qwen3-30B-A3B's shape (its config.json / GGUF metadata): 48 layers, d_model 2048, 32 query
# heads and 4 KV heads of 128, 128 experts of width 768, 8 a token, vocabulary 151,936.
QWEN3_30B_A3B = dict(n_layer=48, d=2048, n_head=32, n_head_kv=4, head_dim=128, n_expert=128, n_expert_used=8,
                     n_ff_exp=768, n_ff=6144, ctx=40960, rope_base=1e6)


def write_qwen3moe(path, ggml_type: str = "Q4_K", *, n_expert: int | None = None, seed=0, **shape) -> Path:
    """A random-weight qwen3moe GGUF of QWEN3_30B_A3B's shape (any field overridden by `shape`),
    `n_expert` experts a layer (fewer than 128 keeps the bytes a token reads, attention, router and
    its n_expert_used experts, and shrinks the file), the qwen2 tokenizer of llama.cpp's vocab
    file. Matrices N(0, 1/fan_in) in ggml_type; with "Q4_K", llama.cpp's Q4_K_M choice for the
    output (Q6_K); router and norms F32. Tensors are quantized one at a time (peak memory about
    the file's size)."""
    import gguf

    s = dict(QWEN3_30B_A3B, **shape)
    if n_expert is not None:
        s["n_expert"] = n_expert
    vf = vocab_path("qwen2")
    if vf is None:
        raise FileNotFoundError("ggml-vocab-qwen2.gguf not cached (scripts/fetch-llamacpp-vocab)")
    d, nh, nkv, hd, E, F = s["d"], s["n_head"], s["n_head_kv"], s["head_dim"], s["n_expert"], s["n_ff_exp"]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_name(f"random qwen3moe {E} experts {ggml_type}")
    n_vocab = _copy_tokenizer(w, vf)
    w.add_context_length(s["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(s["n_ff"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(s["rope_base"])
    w.add_expert_count(E)
    w.add_expert_used_count(s["n_expert_used"])
    w.add_expert_feed_forward_length(F)

    def add(name, shape, qtype, sd=None, mean=0.0):
        a = rng.standard_normal(shape, dtype=np.float32)
        a *= np.float32(sd if sd is not None else 1 / np.sqrt(shape[-1]))
        a += np.float32(mean)
        data, qt = _quantize_any(a, qtype)
        if qt is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=qt)

    out_type = "Q6_K" if ggml_type == "Q4_K" else ggml_type
    add("token_embd.weight", (n_vocab, d), ggml_type, sd=0.5)
    add("output_norm.weight", (d,), "F32", sd=0.1, mean=1.0)
    add("output.weight", (n_vocab, d), out_type, sd=4 / np.sqrt(d))
    for i in range(s["n_layer"]):
        b = f"blk.{i}."
        add(b + "attn_norm.weight", (d,), "F32", sd=0.1, mean=1.0)
        add(b + "attn_q.weight", (nh * hd, d), ggml_type)
        add(b + "attn_k.weight", (nkv * hd, d), ggml_type)
        add(b + "attn_v.weight", (nkv * hd, d), ggml_type)
        add(b + "attn_q_norm.weight", (hd,), "F32", sd=0.1, mean=1.0)
        add(b + "attn_k_norm.weight", (hd,), "F32", sd=0.1, mean=1.0)
        add(b + "attn_output.weight", (d, nh * hd), ggml_type)
        add(b + "ffn_norm.weight", (d,), "F32", sd=0.1, mean=1.0)
        add(b + "ffn_gate_inp.weight", (E, d), "F32")
        add(b + "ffn_gate_exps.weight", (E, F, d), ggml_type)
        add(b + "ffn_up_exps.weight", (E, F, d), ggml_type)
        add(b + "ffn_down_exps.weight", (E, d, F), ggml_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)
