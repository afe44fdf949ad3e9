"""llama.cpp peer of `llmk bench generate`, through llama-cpp-python's low-level API (one
context with n_seq_max sequences, so batched decode is llama.cpp's own multi-sequence batch).

usage: peer_llamacpp.py MODEL IDS_FILE THREADS PROMPT_LEN DECODE_N BATCHES(comma) BATCH_N [LONG_LEN LONG_N]
Prints JSON lines like llmk's rows: prefill of PROMPT_LEN tokens (one batch), decode at batch 1
(DECODE_N steps) and at each batch size B (B sequences with a 16-token prompt, BATCH_N steps),
and, when LONG_LEN > 0, LONG_N decode steps of one sequence after a LONG_LEN-token prompt,
greedy, f16 KV cache (llama.cpp's default); each row carries the peak RSS so far and the weight
buffers llama.cpp's load log names (CPU_Mapped, CPU_REPACK: repacked for its SIMD kernels, AMX). Bytes: the model's weight bytes per
forward (WEIGHT_BYTES env), as llmk counts them.
"""
import ctypes
import json
import os
import re
import resource
import sys
import time

try:
    import numpy as np
    import llama_cpp as L
except ImportError as e:
    print(json.dumps({"skipped": f"llama_cpp not installed ({e}); run scripts/setup-peers"}))
    sys.exit(0)

model_path, ids_file, threads, plen, dn, batches, bn = sys.argv[1:8]
threads, plen, dn, bn = int(threads), int(plen), int(dn), int(bn)
lplen, ln = (int(sys.argv[8]), int(sys.argv[9])) if len(sys.argv) > 9 else (0, 0)
batches = [int(b) for b in batches.split(",") if b]
ids = [int(t) for t in open(ids_file).read().split()]
wbytes = float(os.environ.get("WEIGHT_BYTES", "0"))

_log = []


@L.llama_log_callback
def _keep_log(level, text, user_data):
    _log.append(text.decode(errors="replace") if text else "")


L.llama_log_set(_keep_log, None)  # the load log names the weight buffers (CPU_Mapped, CPU_REPACK, AMX)
L.llama_backend_init()
mp = L.llama_model_default_params()
model = L.llama_model_load_from_file(model_path.encode(), mp)
vocab = L.llama_model_get_vocab(model)
n_vocab = L.llama_vocab_n_tokens(vocab)
max_b = max(batches + [1])
cp = L.llama_context_default_params()
cp.n_ctx = max(plen + dn, (16 + bn) * max_b, lplen + ln) + 64
cp.n_batch = max(plen, 16 * max_b, lplen)
cp.n_ubatch = cp.n_batch
cp.n_seq_max = max_b
cp.kv_unified = True  # one KV pool shared by all sequences, like llmk's paged cache
cp.n_threads = threads
cp.n_threads_batch = threads
ctx = L.llama_init_from_model(model, cp)
batch = L.llama_batch_init(cp.n_batch, 0, max_b)


def decode(tokens, positions, seqs, want):
    batch.n_tokens = len(tokens)
    for i, (t, p, s, w) in enumerate(zip(tokens, positions, seqs, want)):
        batch.token[i] = t
        batch.pos[i] = p
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = s
        batch.logits[i] = 1 if w else 0
    rc = L.llama_decode(ctx, batch)
    assert rc == 0, rc


def argmax(i):
    row = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,))
    return int(row.argmax())


def clear():
    L.llama_memory_clear(L.llama_get_memory(ctx), True)


# the x86 features llama.cpp was compiled with ("AVX2 = 1 | ..." in its system info)
isa = "+".join(f.split("=")[0].strip() for f in L.llama_print_system_info().decode().replace("|", "\n").split("\n")
               if f.strip().endswith("= 1") and any(x in f for x in ("AVX", "FMA", "F16C"))) or "?"


# "CPU_REPACK model buffer size = ..." lines: where llama.cpp put the weights
buffers = "+".join(sorted({m.group(1) for m in re.finditer(r"(\S+) model buffer size", "".join(_log))})) or "?"


def row(op, shape, seconds, tokens, steps):
    print(json.dumps({"kernel": "generate", "impl": "llama.cpp", "op": op, "shape": shape, "dtype": "kv f16",
                      "median_ms": 1e3 * seconds / steps, "gbps": wbytes * steps / seconds / 1e9,
                      "tok_s": tokens / seconds, "threads": threads, "isa": isa, "buffers": buffers,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)


def prompt_then_decode(n_prompt, n_decode):
    """Prefills ids[:n_prompt] as one sequence, then times n_decode greedy steps;
    returns (prefill seconds, decode seconds)."""
    clear()
    t = time.perf_counter()
    decode(ids[:n_prompt], list(range(n_prompt)), [0] * n_prompt, [i == n_prompt - 1 for i in range(n_prompt)])
    t_prefill = time.perf_counter() - t
    tok, pos = argmax(n_prompt - 1), n_prompt
    t = time.perf_counter()
    for _ in range(n_decode):
        decode([tok], [pos], [0], [True])
        tok, pos = argmax(0), pos + 1
    return t_prefill, time.perf_counter() - t


t_prefill, t_decode = prompt_then_decode(plen, dn)
row("prefill", f"{plen}", t_prefill, plen, 1)
row("decode_b1", f"1x{dn}", t_decode, dn, dn)

for b in batches:
    clear()
    toks, poss, seqs = [], [], []
    for s in range(b):
        toks += ids[s * 16:(s + 1) * 16]
        poss += list(range(16))
        seqs += [s] * 16
    decode(toks, poss, seqs, [(i % 16) == 15 for i in range(len(toks))])
    cur = [argmax(s * 16 + 15) for s in range(b)]
    t = time.perf_counter()
    for step in range(bn):
        decode(cur, [16 + step] * b, list(range(b)), [True] * b)
        cur = [argmax(s) for s in range(b)]
    row(f"decode_b{b}", f"{b}x{bn}", time.perf_counter() - t, b * bn, bn)

if lplen > 0:
    _, t_decode = prompt_then_decode(lplen, ln)
    row("decode_b1_long", f"1x{ln}@{lplen}", t_decode, ln, ln)

L.llama_batch_free(batch)
L.llama_free(ctx)
L.llama_model_free(model)
