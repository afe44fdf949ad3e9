"""llmk.LLM on the real default model (SmolLM2-135M-Instruct Q4_1), against the CLI on the
same file: the same prompts and parameters give the same tokens (generate, batched, sampled,
stop strings, a quantized KV cache), the same chat reply, the same logits bits and the same
perplexity. Streaming pieces concatenate to the non-streamed text; generation releases the
GIL; Ctrl-C ends a call and the LLM stays usable. Both sides run 2 threads. Skips, saying
why, when the model or the CLI is missing.
"""
import json
import os
import pydoc
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import llmk
from gguf_fixtures import default_model

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
MODEL = default_model()
pytestmark = pytest.mark.skipif(MODEL is None, reason="default model not available (scripts/fetch-model)")
needs_cli = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "La tour Eiffel se trouve à",
    "日本の首都は",
]


@pytest.fixture(scope="module")
def llm():
    llmk.set_num_threads(2)
    return llmk.LLM(str(MODEL))


def cli(*args):
    r = subprocess.run([str(LLMK), *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


def cli_generate(prompts, *opts):
    """{prompt: parsed --json row} from one batched `llmk generate --prompts FILE` run."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(prompts) + "\n")
    try:
        out = cli("generate", "--model", MODEL, "--prompts", f.name, "--threads", 2, "--json", *opts)
    finally:
        os.unlink(f.name)
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{") and '"tokens"' in l]
    assert [r["prompt"] for r in rows] == prompts
    return rows


@needs_cli
@pytest.mark.parametrize("case", [
    dict(py=dict(max_tokens=32), cli=["-n", 32]),  # the other defaults: greedy
    dict(py=dict(max_tokens=24, temperature=0.8, seed=7), cli=["-n", 24, "--temp", 0.8, "--seed", 7]),
    dict(py=dict(max_tokens=24, temperature=1.1, top_k=5, top_p=0.9, seed=3),
         cli=["-n", 24, "--temp", 1.1, "--top-k", 5, "--top-p", 0.9, "--seed", 3]),
    dict(py=dict(max_tokens=24, stop=","), cli=["-n", 24, "--stop", ","]),
], ids=["greedy", "temp0.8", "topk-topp", "stop"])
def test_generate_gives_the_clis_tokens(llm, case):
    rows = cli_generate(PROMPTS, *case["cli"])
    outs = llm.generate(PROMPTS, **case["py"])
    assert len(outs) == len(PROMPTS)
    for r, o in zip(rows, outs):
        assert o.tokens == r["tokens"], r["prompt"]
        assert o.text == r["text"], r["prompt"]
        assert o.finish_reason == r["finish"], r["prompt"]
        assert o.prompt_tokens == r["prompt_tokens"], r["prompt"]
    if "stop" in case["py"]:
        assert any(o.finish_reason == "stop" for o in outs)


@needs_cli
@pytest.mark.parametrize("kv", ["q8", "q4"])
def test_quantized_kv_gives_the_clis_tokens(kv):
    llm = llmk.LLM(str(MODEL), kv_type=kv, threads=2)
    assert llm.config["kv_type"] == {"q8": "int8", "q4": "int4"}[kv]
    rows = cli_generate(PROMPTS[:2], "-n", 16, "--kv-type", kv)
    for r, o in zip(rows, llm.generate(PROMPTS[:2], max_tokens=16)):
        assert o.tokens == r["tokens"], (kv, r["prompt"])


@needs_cli
def test_a_single_prompt_with_a_newline_gives_the_clis_tokens(llm):
    prompt = "<|im_start|>user\nWhat is 12 times 7?<|im_end|>\n<|im_start|>assistant\n"
    out = cli("generate", "--model", MODEL, "--prompt", prompt, "-n", 16, "--threads", 2, "--json")
    row = next(json.loads(l) for l in out.splitlines() if '"tokens"' in l)
    o = llm.generate(prompt, max_tokens=16)
    assert isinstance(o, llmk.Completion)
    assert o.tokens == row["tokens"] and o.text == row["text"]


@needs_cli
@pytest.mark.parametrize("sampled", [False, True])
def test_chat_gives_the_clis_reply(llm, sampled):
    msg = "What is 12 times 7?"
    opts = ["--seed", 5] if sampled else ["--temp", 0]
    out = cli("chat", "--model", MODEL, "--prompt", msg, "-n", 24, "--threads", 2, *opts)
    kw = dict(seed=5) if sampled else dict(temperature=0)
    o = llm.chat([{"role": "user", "content": msg}], max_tokens=24, **kw)
    assert out == o.text + "\n"
    assert o.text


def test_chat_renders_the_clis_template(llm):
    # The default system prompt is inserted unless the first message is a system one.
    msgs = [{"role": "user", "content": "Hi"}]
    tpl_default = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    assert llm._llm.render_chat([("user", "Hi")]) == tpl_default + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert llm._llm.render_chat([("system", "S"), ("user", "Hi")]) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert llm.chat(msgs, max_tokens=4, temperature=0).prompt_tokens == len(
        llm.tokenize(tpl_default + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"))


@pytest.mark.parametrize("kw", [dict(max_tokens=32), dict(max_tokens=32, temperature=0.9, seed=11),
                                dict(max_tokens=32, stop=["\n\n", "。"])])
def test_stream_pieces_concatenate_to_the_generated_text(llm, kw):
    for p in PROMPTS:
        pieces = list(llm.stream(p, **kw))
        assert all(isinstance(s, str) and s for s in pieces)
        assert "".join(pieces) == llm.generate(p, **kw).text, p


def test_stream_checks_its_arguments_before_the_first_step(llm):
    with pytest.raises(ValueError, match="argument 'max_tokens' = 0"):
        llm.stream("Hi", max_tokens=0)
    g = llm.stream("Hi", max_tokens=3)
    assert isinstance(next(g), str)
    g.close()  # ending a stream early cancels it and leaves the LLM usable
    assert llm.generate("Hi", max_tokens=3).tokens == llm.generate("Hi", max_tokens=3).tokens


@needs_cli
def test_logits_are_the_clis_bits(llm, tmp_path):
    p = "The capital of France is"
    dump = tmp_path / "z.f32"
    cli("generate", "--model", MODEL, "--prompt", p, "-n", 1, "--threads", 2, "--dump-logits", dump)
    ids = llm.tokenize(p)
    z = llm.logits(ids)
    assert z.shape == (len(ids), llm.config["n_vocab"]) and z.dtype == np.float32
    assert np.array_equal(z[-1], np.fromfile(dump, dtype=np.float32))
    assert int(z[-1].argmax()) == llm.generate(p, max_tokens=1).tokens[0]
    assert np.array_equal(llm.logits(np.array(ids, dtype=np.int64)), z)


@needs_cli
def test_perplexity_is_the_clis(llm, tmp_path):
    text = Path("/usr/share/common-licenses/GPL-3").read_text() if Path(
        "/usr/share/common-licenses/GPL-3").exists() else (ROOT / "README.md").read_text()
    f = tmp_path / "t.txt"
    f.write_text(text)
    out = cli("perplexity", "--model", MODEL, "--file", f, "--kv-type", "f16", "--ctx", 64, "--chunks", 2,
              "--threads", 2, "--json")
    want = json.loads(out.splitlines()[-1])["ppl"]
    got = llm.perplexity(text, ctx=64, chunks=2)
    assert abs(got - want) <= 1e-6 * want + 5e-7, (got, want)  # the CLI prints 6 decimals


def test_tokenize_round_trips_and_matches_the_prompt_encoding(llm):
    for p in PROMPTS:
        ids = llm.tokenize(p)
        assert all(isinstance(i, int) for i in ids)
        assert llm.detokenize(ids) == p
        assert llm.generate(p, max_tokens=1).prompt_tokens == len(ids)
    im_end = llm.tokenize("<|im_end|>")
    assert len(im_end) == 1 and llm.tokenize("<|im_end|>", special=False) != im_end
    assert llm.detokenize(im_end, skip_special=True) == ""
    assert llm.detokenize(llm.tokenize("é")[:0]) == ""


def test_config_agrees_with_the_gguf_package(llm):
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(str(MODEL))

    def field(k):
        f = r.fields[k]
        return f.parts[f.data[0]].tolist()[0]

    c = llm.config
    assert c["architecture"] == "llama" and c["path"] == str(MODEL)
    assert c["n_layer"] == field("llama.block_count")
    assert c["d_model"] == field("llama.embedding_length")
    assert c["n_head"] == field("llama.attention.head_count")
    assert c["n_head_kv"] == field("llama.attention.head_count_kv")
    assert c["d_ff"] == field("llama.feed_forward_length")
    assert c["n_ctx"] == field("llama.context_length")
    assert c["n_vocab"] == len(r.fields["tokenizer.ggml.tokens"].data)
    types = {}
    for t in r.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    assert c["weight_types"] == types
    assert "<|im_start|>" in c["chat_template"]
    assert c["kv_type"] == "f16" and c["kv_tokens"] == 8192 and c["max_seqs"] == 64


def test_threads_set_the_process_count_and_do_not_change_tokens(llm):
    want = llm.generate("Hi", max_tokens=6).tokens
    try:
        one = llmk.LLM(str(MODEL), threads=1)
        assert llmk.num_threads() == 1
        assert one.generate("Hi", max_tokens=6).tokens == want
    finally:
        llmk.set_num_threads(2)


def log_softmax(z):
    z = np.asarray(z, np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("kw", [dict(), dict(temperature=0.9, seed=4, top_k=20)])
def test_logprobs_are_the_log_softmax_of_the_logits(llm, kw):
    # Temperature-1 log-softmax of the sequence's logits (the same bits through logits():
    # the kernels are batch-invariant), whatever the sampling parameters.
    p = "The capital of France is"
    o = llm.generate(p, max_tokens=12, logprobs=5, **kw)
    assert len(o.logprobs) == len(o.tokens)
    ids = llm.tokenize(p)
    ref = log_softmax(llm.logits(ids + o.tokens)[len(ids) - 1:-1])
    for i, (lp, tok) in enumerate(zip(o.logprobs, o.tokens)):
        assert lp.token == tok and len(lp.top) == 5
        assert abs(lp.logprob - ref[i, tok]) < 1e-4, (i, lp.logprob, ref[i, tok])
        order = np.argsort(-ref[i], kind="stable")[:5]
        assert [t for t, _ in lp.top] == order.tolist(), i
        assert np.allclose([l for _, l in lp.top], ref[i, order], atol=1e-4)
    assert llm.generate(p, max_tokens=12, **kw).logprobs is None
    assert llm.generate(p, max_tokens=12, logprobs=0, **kw).logprobs[0].top == []


def test_a_repeated_prompt_reuses_the_prefix_cache_with_the_same_tokens(llm):
    msgs = [{"role": "user", "content": "Name three colors."}]
    a = llm.chat(msgs, max_tokens=16, seed=2)
    b = llm.chat(msgs, max_tokens=16, seed=2)
    assert b.tokens == a.tokens
    assert b.cached_tokens >= 16 and b.cached_tokens < b.prompt_tokens


def test_closing_a_stream_cancels_its_request(llm):
    import time
    before = llm._llm.stats()["cancelled"]
    g = llm.stream("1, 2, 3, 4,", max_tokens=4000)
    next(g)
    g.close()
    deadline = time.time() + 120
    while llm._llm.stats()["cancelled"] == before and time.time() < deadline:
        time.sleep(0.01)
    assert llm._llm.stats()["cancelled"] == before + 1


def test_generation_releases_the_gil(llm):
    # With a huge switch interval Python never takes the GIL from a thread that holds it, so
    # the other thread runs during generate() only if generate releases the GIL.
    running, seen, done = threading.Event(), threading.Event(), threading.Event()

    def watch():
        while not done.is_set():
            if running.is_set():
                seen.set()
            done.wait(0.0005)

    old = sys.getswitchinterval()
    t = threading.Thread(target=watch)
    t.start()
    sys.setswitchinterval(1000.0)
    try:
        running.set()
        llm.generate("Once upon a time", max_tokens=16)
        running.clear()
    finally:
        sys.setswitchinterval(old)
        done.set()
        t.join()
    assert seen.is_set()


def test_concurrent_calls_from_threads_give_the_sequential_results(llm):
    want = [llm.generate(p, max_tokens=12).tokens for p in PROMPTS[:4]]
    got = [None] * 4

    def run(i):
        got[i] = llm.generate(PROMPTS[i], max_tokens=12).tokens

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == want


CTRL_C = textwrap.dedent("""
    import os, signal, sys, threading, time, llmk
    # A shell's background job starts with SIGINT ignored, and Python then installs no handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    llm = llmk.LLM(sys.argv[1], threads=2)
    want = llm.generate("Hi", max_tokens=8).tokens
    for mode in ("stream", "generate"):
        started = threading.Event()
        def interrupt():
            started.wait()
            time.sleep(0.2)  # into the step loop (4000 tokens take far longer)
            os.kill(os.getpid(), signal.SIGINT)
        t = threading.Thread(target=interrupt)
        t.start()
        n = 0
        try:
            if mode == "stream":
                for piece in llm.stream("1, 2, 3, 4,", max_tokens=4000):
                    n += 1
                    started.set()
            else:
                started.set()
                llm.generate(["1, 2, 3, 4,", "a, b, c,"], max_tokens=4000)
            print(mode, "finished", flush=True)
        except KeyboardInterrupt:
            print(mode, "interrupted", flush=True)
        t.join()
    print("after", llm.generate("Hi", max_tokens=8).tokens == want, flush=True)
""")


def test_ctrl_c_interrupts_and_the_llm_stays_usable(tmp_path):
    r = subprocess.run([sys.executable, "-c", CTRL_C, str(MODEL)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["stream interrupted", "generate interrupted", "after True"], r.stdout


def test_help_shows_numpy_docstrings():
    text = pydoc.render_doc(llmk.LLM, renderer=pydoc.plaintext)
    for section in ("Parameters", "Returns", "Examples", "Raises"):
        assert section in text, section
    for name in ("generate", "stream", "chat", "tokenize", "detokenize", "logits", "perplexity", "config"):
        doc = getattr(llmk.LLM, name).__doc__
        assert doc and "Examples" in doc, name
