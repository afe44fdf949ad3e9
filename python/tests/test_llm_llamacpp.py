"""llmk.LLM against llama.cpp (llama-cpp-python's Llama) on the same GGUF, with the checks the
CLI's comparison makes (test_model_llamacpp.py, whose prompts, near-tie rule and KL bound are
used here as they are): greedy continuations of its 8 prompts, generated as one batch through
llmk.LLM, part from llama.cpp's only at near-ties, where llmk picks llama.cpp's second choice;
the next-token logits (LLM.logits) keep KL(llama.cpp || llmk) under 0.01 nats with the same
argmax; the prompts tokenize to llama.cpp's ids. f16 KV cache and 2 threads on both sides."""
import numpy as np
import pytest

import llmk
from gguf_fixtures import default_model

llama_cpp = pytest.importorskip("llama_cpp", reason="llama_cpp not installed (run scripts/setup-peers)")
from test_model_llamacpp import N, PROMPTS, count_identical_and_check_partings, kl_and_maxdiff, llama_greedy  # noqa: E402

MODEL = default_model()
pytestmark = pytest.mark.skipif(MODEL is None, reason="default model not available (scripts/fetch-model)")


@pytest.fixture(scope="module")
def llama():
    return llama_cpp.Llama(model_path=str(MODEL), n_ctx=512, n_threads=2, n_batch=512, logits_all=True,
                           verbose=False, seed=0)


@pytest.fixture(scope="module")
def llm():
    return llmk.LLM(str(MODEL), kv_type="f16", threads=2)


@pytest.fixture(scope="module")
def both(llama, llm):
    outs = llm.generate(PROMPTS, max_tokens=N, temperature=0.0)  # one batch
    logits = [llm.logits(llm.tokenize(p))[-1] for p in PROMPTS]
    ref = [llama_greedy(llama, p) for p in PROMPTS]
    return [dict(prompt_tokens=o.prompt_tokens, tokens=o.tokens) for o in outs], logits, ref


def test_prompts_tokenize_as_llamacpp(llama, llm):
    for p in PROMPTS:
        assert llm.tokenize(p) == llama.tokenize(p.encode(), add_bos=False, special=True), p


def test_greedy_parts_only_at_near_ties(both):
    identical = count_identical_and_check_partings(both)
    print(f"{identical} of {len(PROMPTS)} continuations identical for {N} tokens")


def test_next_token_logits_close(both):
    _, logits, ref = both
    for p, lg, (_, _, first, _) in zip(PROMPTS, logits, ref):
        kl, mad = kl_and_maxdiff(first, lg)
        print(f"{p[:30]!r}: max|dlogit| = {mad:.4f}, KL = {kl:.2e}")
        assert int(np.argmax(first)) == int(np.argmax(lg)), p
        assert kl < 1e-2, (p, kl, mad)
