"""Speculative decoding through llmk.LLM on the real default model (SmolLM2-135M-Instruct Q4_1):
with n-gram drafts (``spec="ngram"``, the LLM's or per call) the tokens, text, finish reasons and
logprobs are the same bits as with ``spec="off"``, greedy and sampled with a seed, for a batch of
grounded and open prompts, and the drafts were both kept and rejected. Skips, saying why, when
the model is missing.
"""
import numpy as np
import pytest

import llmk
from gguf_fixtures import default_model

MODEL = default_model()
pytestmark = pytest.mark.skipif(MODEL is None, reason="default model not available (scripts/fetch-model)")

TEXT = ("The mill that gave the town its name was built in 1824 on the northern bank, where the current was "
        "strongest. Farmers brought their grain from as far as thirty miles away, and the road they used became "
        "the main street.")
PROMPTS = [
    "Repeat this text word for word: " + TEXT + "\nRepeated text: The mill",
    "Copy the list: apples, pears, plums, cherries, apples, pears, plums, cherries. Copy:",
    "Once upon a time",
]


@pytest.fixture(scope="module")
def llm():
    llmk.set_num_threads(2)
    return llmk.LLM(str(MODEL), kv_type="q8", spec="ngram")


def same(a, b):
    assert [o.tokens for o in a] == [o.tokens for o in b]
    assert [o.text for o in a] == [o.text for o in b]
    assert [o.finish_reason for o in a] == [o.finish_reason for o in b]
    for x, y in zip(a, b):
        lx = np.array([t.logprob for t in x.logprobs], np.float32)
        ly = np.array([t.logprob for t in y.logprobs], np.float32)
        assert lx.tobytes() == ly.tobytes()
        assert [t.top for t in x.logprobs] == [t.top for t in y.logprobs]


@pytest.mark.parametrize("temperature", [0.0, 0.5])
def test_spec_is_the_same_bits_as_plain(llm, temperature):
    kw = dict(max_tokens=40, temperature=temperature, seed=7, logprobs=2)
    spec = llm.generate(PROMPTS, **kw)
    st = llm.last_stats
    plain = llm.generate(PROMPTS, spec="off", **kw)
    assert llm.last_stats["drafted_tokens"] == 0
    same(spec, plain)
    assert st["accepted_tokens"] > 0, st
    assert st["drafted_tokens"] > st["accepted_tokens"], st
    if temperature == 0:
        assert st["steps"] < llm.last_stats["steps"], (st, llm.last_stats)


def test_spec_argument_is_checked(llm):
    with pytest.raises(ValueError, match="spec"):
        llm.generate("x", max_tokens=1, spec="eagle")
    with pytest.raises(TypeError, match="spec"):
        llm.generate("x", max_tokens=1, spec=1)
    with pytest.raises(ValueError, match="spec"):
        llmk.LLM(str(MODEL), spec="on")
