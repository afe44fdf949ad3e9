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
