"""`llmk serve` through the official `openai` client: completions, chat, streaming,
logprobs, usage; determinism alone vs among 31 concurrent requests and after the
prefix was cached; 64 concurrent streaming clients. SmolLM2-135M (the default model)."""
import threading

import pytest

from serve_util import LLMK, Server, metrics

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")

SYSTEM = ("You are a terse assistant. Answer every question in one short sentence, "
          "without lists, and never repeat the question. ") * 4


@pytest.fixture(scope="module")
def server():
    s = Server("--max-seqs", "32", "--kv-tokens", "16384")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def chat(client, question, **kw):
    kw.setdefault("max_tokens", 24)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(
        model="llmk", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}], **kw)


def test_models_and_health(server, client):
    models = client.models.list()
    assert len(models.data) == 1 and models.data[0].id
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    c.request("GET", "/health")
    assert c.getresponse().status == 200


def test_completion_and_its_stream_agree(client):
    r = client.completions.create(model="llmk", prompt="The capital of France is", max_tokens=12, temperature=0)
    c = r.choices[0]
    assert c.finish_reason in ("length", "stop") and c.text
    assert r.usage.completion_tokens <= 12 and r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    chunks = list(client.completions.create(model="llmk", prompt="The capital of France is", max_tokens=12,
                                            temperature=0, stream=True))
    assert "".join(ch.choices[0].text for ch in chunks) == c.text
    assert chunks[-1].choices[0].finish_reason == c.finish_reason
    # token ids and a list of prompts
    r2 = client.completions.create(model="llmk", prompt=[[504, 3575, 282], "Hello"], max_tokens=4, temperature=0)
    assert [c.index for c in r2.choices] == [0, 1]
    assert r2.usage.completion_tokens <= 8 and all(c.text for c in r2.choices)


def test_chat_and_stream_with_usage(client):
    r = chat(client, "What is the capital of France?")
    text = r.choices[0].message.content
    assert r.choices[0].message.role == "assistant" and text
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
    stream = chat(client, "What is the capital of France?", stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens
    assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1]) == text
    assert chunks[-2].choices[0].finish_reason == r.choices[0].finish_reason
    # the second identical request found the shared system prompt cached
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= 64


def test_stop_strings_and_max_tokens(client):
    r = client.completions.create(model="llmk", prompt="1, 2, 3, 4,", max_tokens=30, temperature=0, stop=[" 7"])
    assert r.choices[0].finish_reason == "stop" and " 7" not in r.choices[0].text
    r = client.completions.create(model="llmk", prompt="1, 2, 3, 4,", max_tokens=3, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_logprobs(client):
    r = chat(client, "Name a color.", logprobs=True, top_logprobs=5, max_tokens=8)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 5
        lps = [a.logprob for a in t.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        assert t.token == t.top_logprobs[0].token and t.logprob == lps[0]  # greedy takes the most likely
        assert t.bytes and all(0 <= b < 256 for b in t.bytes)
    c = client.completions.create(model="llmk", prompt="Colors:", max_tokens=5, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
    assert all(len(t) == 2 for t in lp.top_logprobs) and lp.text_offset[0] == 0


def test_same_text_alone_among_31_others_and_after_caching(server, client):
    questions = [f"Give me fact number {i} about the sea." for i in range(32)]

    def ask(q, seed):
        kw = {"temperature": 0} if seed is None else {"temperature": 0.8, "seed": seed}
        r = chat(client, q, max_tokens=12, **kw)
        return r.choices[0].message.content, r.usage.prompt_tokens_details.cached_tokens

    for seed in (None, 1234):
        alone = ask(questions[0], seed)[0]
        out = [None] * 32

        def worker(i):
            out[i] = ask(questions[i], seed)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert out[0][0] == alone, (seed, out[0][0], alone)
        again, cached = ask(questions[0], seed)
        assert again == alone and cached >= 64, (seed, again, alone, cached)
    m = metrics(server.port)
    assert m["llmk_cached_prompt_tokens_total"] > 0


def test_64_concurrent_streams_complete(server, client):
    results = [None] * 64

    def worker(i):
        try:
            chunks = list(client.chat.completions.create(
                model="llmk", messages=[{"role": "user", "content": f"Count to {i % 7 + 2}."}], max_tokens=8,
                temperature=0.7, seed=i, stream=True, stream_options={"include_usage": True}))
            finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            results[i] = (finish, chunks[-1].usage.completion_tokens,
                          sum(1 for c in chunks if c.choices and c.choices[0].delta.content))
        except Exception as e:  # noqa: BLE001 (reported below)
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        assert not isinstance(r, Exception), (i, r)
        finish, n, pieces = r
        assert len(finish) == 1 and finish[0] in ("stop", "length"), (i, finish)
        assert 1 <= n <= 8 and pieces <= n, (i, r)
    m = metrics(server.port)
    assert m['llmk_kv_blocks{state="used"}'] == 0
    assert m["llmk_running_sequences"] == 0
