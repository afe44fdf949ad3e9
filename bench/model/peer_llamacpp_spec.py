"""llama.cpp peer of `llmk bench speculative`, through llama-cpp-python's high-level Llama:
plain greedy decode and decode with llama.cpp's prompt-lookup drafts
(llama_cpp.llama_speculative.LlamaPromptLookupDecoding as draft_model), one Llama each.

usage: peer_llamacpp_spec.py MODEL IDS_FILE THREADS MAX_TOKENS MODEL_NAME
IDS_FILE: one workload a line, "name id id ...". Each workload's prompt is evaluated by a
1-token completion first, so the timed completion reuses its KV prefix and times decode;
tok/s = completion tokens / its time (as many forwards without drafts: the prompt's last
token's, then one a token but the last). Bytes and the
bandwidth limit: WEIGHT_BYTES and TRIAD_GBPS from the environment, as llmk counts them.
"""
import json
import os
import sys
import time

try:
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
except ImportError as e:
    print(json.dumps({"skipped": f"llama_cpp not installed ({e}); run scripts/setup-peers"}))
    sys.exit(0)

model_path, ids_file, threads, n, mname = sys.argv[1:6]
threads, n = int(threads), int(n)
wbytes = float(os.environ.get("WEIGHT_BYTES", "0"))
triad = float(os.environ.get("TRIAD_GBPS", "0"))
work = []
for line in open(ids_file):
    parts = line.split()
    if parts:
        work.append((parts[0], [int(t) for t in parts[1:]]))
n_ctx = max(len(ids) for _, ids in work) + n + 64


def make(draft):
    return llama_cpp.Llama(model_path=model_path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                           n_batch=512, verbose=False, draft_model=draft)


def timed(llm, ids, max_tokens):
    t0 = time.perf_counter()
    out = llm.create_completion(ids, max_tokens=max_tokens, temperature=0.0, top_k=1)
    return time.perf_counter() - t0, out["usage"]["completion_tokens"], out["choices"][0]["text"]


for impl, draft in (("llama.cpp", None), ("llama.cpp-lookup", LlamaPromptLookupDecoding(num_pred_tokens=10))):
    llm = make(draft)
    for name, ids in work:
        llm.reset()
        timed(llm, ids, 1)  # the prompt's prefill
        # reuses the prompt's KV: one forward of its last token, then one a token (fewer with drafts)
        t, toks, _ = timed(llm, ids, n)
        tok_s = toks / t
        row = {"kernel": "speculative", "impl": impl, "op": name, "shape": mname, "dtype": "kv f16",
               "median_ms": 1e3 / tok_s if tok_s else 0.0, "gbps": wbytes * tok_s / 1e9, "tok_s": tok_s,
               "tokens": toks, "threads": threads}
        if wbytes and triad:
            row["x_bw_limit"] = tok_s / (triad * 1e9 / wbytes)
        print(json.dumps(row), flush=True)
    del llm
