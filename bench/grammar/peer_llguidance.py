"""The llguidance peer of `llmk bench grammar`: the same schemas and token sequences, the same
(llama.cpp) vocabulary. Per case: compile time (grammar_from_json_schema + LLMatcher), then at each
token the mask time (compute into a bitmask, through llguidance.numpy) and the token consumed; a
token llguidance refuses is counted, and from there it walks on its own (a random allowed token
per step, as llmk's walk draws them) for the rest of the walk's length: llguidance refuses some
tokens llmk allows (it keeps to canonical tokenizations, e.g. `{` where `{"` is one token). Prints JSON lines in the bench's row format.
Usage: peer_llguidance.py VOCAB_GGUF CASES_JSONL"""
import json
import random
import sys
import time


def main():
    try:
        import llama_cpp
        import numpy as np
        from llguidance import LLMatcher
        from llguidance.llamacpp import lltokenizer_from_vocab
        from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"skipped": f"llguidance / llama_cpp cannot be imported: {e}"}))
        return
    vocab_path, cases_path = sys.argv[1], sys.argv[2]
    llm = llama_cpp.Llama(model_path=vocab_path, vocab_only=True, verbose=False)
    tok = lltokenizer_from_vocab(llama_cpp.llama_model_get_vocab(llm.model))
    opts = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
    bm = allocate_token_bitmask(1, tok.vocab_size)
    masks, compiles = [], []
    failed = refused = 0
    cases = [json.loads(line) for line in open(cases_path)]
    for c in cases:
        t0 = time.perf_counter()
        m = LLMatcher(tok, LLMatcher.grammar_from_json_schema(c["schema"], defaults=opts), log_level=0)
        compiles.append(time.perf_counter() - t0)
        if m.is_error():
            failed += 1
            continue
        rng = random.Random(len(masks))
        own = False  # walking on its own since it refused one of llmk's tokens
        for t in c["tokens"]:
            t0 = time.perf_counter()
            fill_next_token_bitmask(m, bm, 0)
            masks.append(time.perf_counter() - t0)
            if own or not (bm[0, t >> 5] >> (t & 31)) & 1:
                refused += not own
                own = True
                bits = np.unpackbits(bm[0].view(np.uint8), bitorder="little")[:tok.vocab_size]
                allowed = [int(x) for x in np.flatnonzero(bits) if int(x) not in tok.eos_tokens]
                if not allowed:
                    break
                t = rng.choice(allowed)
            if not m.consume_token(t):
                break
    masks.sort()
    n = len(masks)
    stats = {"mask_mean": sum(masks) / max(n, 1), "mask_p50": masks[n // 2] if n else 0,
             "mask_p99": masks[min(n - 1, int(n * 0.99))] if n else 0, "mask_max": masks[-1] if n else 0,
             "compile_mean": sum(compiles) / max(len(compiles), 1)}
    for op, s in stats.items():
        print(json.dumps({"kernel": "grammar", "impl": "llguidance", "op": op, "shape": f"{len(cases)} schemas",
                          "dtype": "llama3", "median_ms": s * 1e3, "gbps": 0, "masks": n, "failed": failed,
                          "refused_llmk_token": refused}))


if __name__ == "__main__":
    main()
