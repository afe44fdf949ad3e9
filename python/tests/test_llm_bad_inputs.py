"""llmk.LLM on bad arguments: a ValueError or TypeError naming the argument and its value,
never a crash, another exception type, or a value silently changed; after any of them the
LLM still works. Runs on a tiny random model written by the PyPI gguf package."""
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import llmk
from gguf_fixtures import write_llama


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return str(write_llama(tmp_path_factory.mktemp("llm") / "tiny.gguf"))


@pytest.fixture(scope="module")
def llm(path):
    return llmk.LLM(path)


def raises(exc, text, f, *a, **kw):
    with pytest.raises(exc) as e:
        f(*a, **kw)
    assert text in str(e.value), str(e.value)


def test_constructor_arguments_are_named(path, tmp_path):
    L = llmk.LLM
    raises(TypeError, "llmk.LLM: argument 'model' = int: must be a path", L, 123)
    raises(TypeError, "argument 'model' = b'x.gguf'", L, b"x.gguf")
    raises(ValueError, "argument 'model' = '': needs a path or a name", L, "")
    raises(ValueError, "argument 'model' = 'nope.gguf': is neither a file nor a model name (smollm2-135m",
           L, "nope.gguf")
    raises(ValueError, f"argument 'model' = {str(tmp_path)!r}: is a directory", L, tmp_path)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\0" * 60)
    raises(ValueError, f"llmk.LLM: argument 'model' = {junk}: is not a usable GGUF model", L, junk)
    raises(ValueError, "argument 'kv_type' = 'q5': must be f32, f16, bf16, q8 or q4", L, path, kv_type="q5")
    raises(TypeError, "argument 'kv_type' = int: must be a str", L, path, kv_type=8)
    raises(ValueError, "argument 'kv_v_type' = 'F16'", L, path, kv_v_type="F16")
    raises(TypeError, "argument 'kv_rotate' = 1: must be True or False", L, path, kv_rotate=1)
    raises(ValueError, "argument 'threads' = 0: must be in [1, 1024]", L, path, threads=0)
    raises(ValueError, "argument 'threads' = 4294967297", L, path, threads=2**32 + 1)
    raises(TypeError, "argument 'threads' = 2.0: must be an integer", L, path, threads=2.0)
    raises(TypeError, "argument 'threads' = True: must be an integer", L, path, threads=True)
    raises(ValueError, "argument 'max_seqs' = 0", L, path, max_seqs=0)
    raises(ValueError, "argument 'kv_tokens' = -5", L, path, kv_tokens=-5)
    raises(TypeError, "argument 'kv_tokens' = None", L, path, kv_tokens=None)
    raises(TypeError, "argument 'kv_tokens' = '8'", L, path, kv_tokens="8")
    raises(ValueError, "argument 'chat_template' = 'vicuna': must be None, one of chatml, gemma3, gemma or the path", L, path,
           chat_template="vicuna")
    raises(TypeError, "argument 'chat_template' = int: must be a str", L, path, chat_template=3)
    raises(TypeError, "unexpected keyword argument 'kv'", L, path, kv="f16")


def test_generate_arguments_are_named(llm):
    g = llm.generate
    raises(TypeError, "llmk.LLM.generate: argument 'prompts' = None: must be a str or a list of str", g, None)
    raises(TypeError, "argument 'prompts' = bytes", g, b"hi")
    raises(ValueError, "argument 'prompts' = []: must hold at least one prompt", g, [])
    raises(TypeError, "argument 'prompts[1]' = int: must be a str", g, ["a", 3])
    raises(ValueError, "argument 'prompts' = '': encodes to no tokens", g, "")
    raises(ValueError, "argument 'max_tokens' = 0: must be in [1, 2147483648]", g, "hi", max_tokens=0)
    raises(ValueError, "argument 'max_tokens' = 2147483649", g, "hi", max_tokens=2**31 + 1)
    raises(TypeError, "argument 'max_tokens' = 4.0: must be an integer", g, "hi", max_tokens=4.0)
    raises(ValueError, "argument 'temperature' = -1: must be finite and >= 0", g, "hi", temperature=-1)
    raises(ValueError, "argument 'temperature' = nan", g, "hi", temperature=math.nan)
    raises(ValueError, "argument 'temperature' = inf", g, "hi", temperature=math.inf)
    raises(ValueError, "argument 'temperature' = 1e+39: must be within float32's range", g, "hi", temperature=1e39)
    raises(TypeError, "argument 'temperature' = '0.5': must be a real number", g, "hi", temperature="0.5")
    raises(ValueError, "argument 'top_k' = -1", g, "hi", top_k=-1)
    raises(ValueError, "argument 'top_p' = 0: must be in (0, 1]", g, "hi", top_p=0)
    raises(ValueError, "argument 'top_p' = 1e-50", g, "hi", top_p=1e-50)
    raises(ValueError, "argument 'top_p' = 1.5", g, "hi", top_p=1.5)
    raises(ValueError, "argument 'min_p' = 1", g, "hi", min_p=1)
    raises(ValueError, "argument 'repetition_penalty' = 0", g, "hi", repetition_penalty=0)
    raises(ValueError, "argument 'presence_penalty' = nan", g, "hi", presence_penalty=math.nan)
    raises(ValueError, "argument 'seed' = -1: must be in [0, 18446744073709551615]", g, "hi", seed=-1)
    raises(ValueError, "argument 'seed' = 18446744073709551616", g, "hi", seed=2**64)
    raises(ValueError, "argument 'stop' = '': must not be empty", g, "hi", stop="")
    raises(ValueError, "argument 'stop[1]' = ''", g, "hi", stop=["a", ""])
    raises(TypeError, "argument 'stop[0]' = int: must be a str", g, "hi", stop=[1])
    raises(TypeError, "argument 'stop' = dict", g, "hi", stop={"a": 1})
    raises(ValueError, "argument 'logprobs' = 21: must be in [0, 20]", g, "hi", logprobs=21)
    raises(ValueError, "argument 'logprobs' = -1", g, "hi", logprobs=-1)
    raises(TypeError, "argument 'logprobs' = True", g, "hi", logprobs=True)
    raises(TypeError, "unexpected keyword argument 'n'", g, "hi", n=3)


def test_fixed_kv_tokens_bound_the_prompt(path):
    small = llmk.LLM(path, kv_tokens=8)
    n = len(small.tokenize("hello world the end"))
    assert n > 8
    raises(ValueError, f"argument 'prompts[1]' = {n} tokens: does not fit in kv_tokens = 8", small.generate,
           ["hi", "hello world the end"])
    with pytest.raises(ValueError, match=r"argument 'messages' = \d+ tokens: does not fit in kv_tokens = 8"):
        small.chat([{"role": "user", "content": "hi"}])  # SmolLM2's default system prompt alone is longer
    out = small.generate("hi", max_tokens=50)
    assert out.finish_reason in ("length", "eos") and len(out.tokens) <= 50


def test_other_methods_name_their_arguments(llm):
    raises(TypeError, "llmk.LLM.stream: argument 'prompt' = list: must be a str", llm.stream, ["a"])
    raises(ValueError, "llmk.LLM.stream: argument 'temperature' = -0.5", llm.stream, "a", temperature=-0.5)
    raises(TypeError, "llmk.LLM.chat: argument 'messages' = str", llm.chat, "hi")
    raises(ValueError, "argument 'messages' = []", llm.chat, [])
    raises(TypeError, "argument 'messages[0]' = tuple", llm.chat, [("user", "hi")])
    raises(ValueError, "argument 'messages[0]' = {'role': 'user'}: has no 'content'", llm.chat, [{"role": "user"}])
    raises(TypeError, "argument 'messages[0]['content']' = None", llm.chat, [{"role": "user", "content": None}])
    raises(ValueError, "argument 'messages[0]['role']' = 'bot'", llm.chat, [{"role": "bot", "content": "x"}])
    raises(TypeError, "llmk.LLM.tokenize: argument 'text' = None: must be a str", llm.tokenize, None)
    raises(TypeError, "argument 'add_bos' = 'yes'", llm.tokenize, "a", add_bos="yes")
    raises(TypeError, "llmk.LLM.detokenize: argument 'ids' = str", llm.detokenize, "abc")
    raises(ValueError, "argument 'ids[1]' = 100000: must be in [0, 271]", llm.detokenize, [1, 100000])
    raises(ValueError, "argument 'ids[0]' = -1", llm.detokenize, [-1])
    raises(TypeError, "argument 'ids[0]' = 1.0: must be an integer", llm.detokenize, [1.0])
    raises(ValueError, "llmk.LLM.logits: argument 'ids' = []: must hold at least one token", llm.logits, [])
    raises(ValueError, "argument 'ids[2]' = 272", llm.logits, [1, 2, 272])
    raises(ValueError, "argument 'ids' = 2-d array: must be 1-d", llm.logits, np.zeros((2, 2), np.int32))
    raises(TypeError, "argument 'ids' = array of float32: must hold integers", llm.logits, np.zeros(2, np.float32))
    raises(TypeError, "argument 'ids' = None", llm.logits, None)
    raises(ValueError, "llmk.LLM.perplexity: argument 'ctx' = 3: must be in [4,", llm.perplexity, "a b c", ctx=3)
    raises(ValueError, "argument 'text' = 3 tokens: holds fewer tokens than ctx = 512", llm.perplexity, "abc")
    raises(ValueError, "argument 'chunks' = 0", llm.perplexity, "abc", chunks=0)
    # every call above left the LLM usable
    assert len(llm.generate("hi", max_tokens=3).tokens) == 3


# Every argument of every method given values of every kind, in a child process so that a
# crash fails the test instead of ending pytest: each call returns or raises ValueError /
# TypeError, with the argument's name in the message.
FUZZ = textwrap.dedent("""
    import itertools, math, sys
    import numpy as np, llmk
    llm = llmk.LLM(sys.argv[1], threads=1)
    values = [None, True, -1, 0, 1, 3, 2**31 + 1, 2**63, 2**64, -2**63 - 1, 0.5, -0.0, 1e39, math.nan, math.inf,
              -math.inf, "", "x", "<|im_end|>", "\\udcff", b"x", [], [0], [None], [-1], [2**40], ["a"], {},
              object(), np.int64(2), np.float32(math.nan), np.array([1, 2]), np.zeros((2, 2))]
    calls = {
        "generate": (llm.generate, dict(prompts="hi", max_tokens=2, temperature=0.5, top_k=3, top_p=0.9,
                                        min_p=0.1, repetition_penalty=1.1, presence_penalty=0.1, seed=1, stop="x",
                                        logprobs=2)),
        "stream": (lambda **k: list(llm.stream(**k)), dict(prompt="hi", max_tokens=2, temperature=0.5, seed=1)),
        "chat": (llm.chat, dict(messages=[{"role": "user", "content": "hi"}], max_tokens=2, seed=1, logprobs=1)),
        "tokenize": (llm.tokenize, dict(text="hi", add_bos=True, special=True)),
        "detokenize": (llm.detokenize, dict(ids=[1, 2], skip_special=False)),
        "logits": (llm.logits, dict(ids=[1, 2])),
        "perplexity": (llm.perplexity, dict(text="hello world " * 20, ctx=8, chunks=2)),
        "LLM": (lambda **k: llmk.LLM(**k), dict(model=sys.argv[1], kv_type="f16", kv_v_type=None, kv_rotate=False,
                                             threads=1, max_seqs=2, kv_tokens=64)),
    }
    n = 0
    for name, (f, good) in calls.items():
        for arg in good:
            for v in values:
                kw = dict(good, **{arg: v})
                try:
                    f(**kw)
                except (ValueError, TypeError) as e:
                    if f"argument '{arg}" not in str(e):
                        sys.exit(f"{name}({arg}={v!r}): {type(e).__name__} without the argument's name: {e}")
                except Exception as e:
                    sys.exit(f"{name}({arg}={v!r}): {type(e).__name__}: {e}")
                n += 1
    assert llm.generate("hi", max_tokens=2).tokens == llm.generate("hi", max_tokens=2).tokens
    print("calls", n)
""")


def test_no_value_of_any_kind_crashes_or_raises_unnamed(path):
    r = subprocess.run([sys.executable, "-c", FUZZ, path], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert r.stdout.startswith("calls "), r.stdout
