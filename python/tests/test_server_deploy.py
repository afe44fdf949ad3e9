"""`llmk serve` behind a router: /health through loading, ready and draining; SIGTERM drains
in-flight requests up to --drain-timeout; /v1/models' metadata against the `gguf` package;
/get_load; vLLM's metric names beside llmk's, checked by `promtool check metrics`; an IPv6
loopback bind. Loopback only."""
import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from serve_util import LLMK, Server, metrics, wait_for

pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
MODEL = Path.home() / ".cache/llmk/models/SmolLM2-135M-Instruct.Q4_1.gguf"


def get(port, path, host="127.0.0.1"):
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    try:
        return r.status, json.loads(body)
    except ValueError:
        return r.status, body.decode()


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())


def stream(port, body):
    k = socket.create_connection(("127.0.0.1", port), timeout=120)
    data = json.dumps({**body, "stream": True}).encode()
    k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return k


def read_until(k, marker, limit=60):
    buf, t = b"", time.time()
    while marker not in buf and time.time() - t < limit:
        chunk = k.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health_is_503_while_loading_then_200():
    port = free_port()
    p = subprocess.Popen([str(LLMK), "serve", "--port", str(port), "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert "listening on http://127.0.0.1:%d" % port in p.stderr.readline()
        seen = []
        t = time.time()
        while time.time() - t < 60:  # polled from the moment the socket listens
            st, body = get(port, "/health")
            seen.append((st, body.get("status")))
            if st == 200:
                break
            st2, err = get(port, "/v1/models")  # 200 once the load has ended meanwhile
            assert st2 == 200 or (st2 == 503 and err["error"]["code"] == "loading"), err
        # 503 "loading" any number of times (the model loads fast), then 200 "ok"
        assert seen[-1] == (200, "ok") and all(s == (503, "loading") for s in seen[:-1]), seen
        assert "on http://127.0.0.1:%d" % port in p.stdout.readline()
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0


def test_sigterm_drains_in_flight_requests_and_refuses_new_ones():
    s = Server("--max-seqs", "4", "--drain-timeout", "8", "--threads", "1")
    short = stream(s.port, {"prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": True})
    long = stream(s.port, {"prompt": "The history of", "max_tokens": 4000, "ignore_eos": True})
    for k in (short, long):
        assert b"data: {" in read_until(k, b"data: {")
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert wait_for(lambda: get(s.port, "/health") == (503, {"status": "draining"}), 5)
    st, err = post(s.port, "/v1/completions", {"prompt": "hi", "max_tokens": 2})
    assert st == 503 and err["error"]["code"] == "shutting_down", err
    assert get(s.port, "/get_load")[1]["load"] >= 1  # a router may still read the load and metrics
    assert get(s.port, "/metrics")[0] == 200
    rest = read_until(short, b"data: [DONE]")
    assert b"\"finish_reason\":\"length\"" in rest, rest[-300:]  # finished, not cut short
    rest = read_until(long, b"data: [DONE]")
    assert b"\"finish_reason\":\"abort\"" in rest and time.time() - t0 >= 7, rest[-300:]  # cut at the timeout
    assert s.proc.wait(20) == 0
    assert time.time() - t0 < 20


def test_second_signal_ends_the_drain():
    s = Server("--max-seqs", "2", "--drain-timeout", "60", "--threads", "1")
    k = stream(s.port, {"prompt": "The history of", "max_tokens": 4000, "ignore_eos": True})
    assert b"data: {" in read_until(k, b"data: {")
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert wait_for(lambda: get(s.port, "/health")[0] == 503, 5)
    s.proc.send_signal(signal.SIGINT)
    assert b"\"finish_reason\":\"abort\"" in read_until(k, b"data: [DONE]")
    assert s.proc.wait(20) == 0 and time.time() - t0 < 15


@pytest.fixture(scope="module")
def server():
    s = Server("--max-seqs", "4", "--kv-tokens", "4096", "--threads", "1")
    yield s
    assert s.stop() == 0


def test_models_metadata_matches_the_gguf(server):
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(str(MODEL))
    elems = {}
    for t in r.tensors:
        elems[t.tensor_type.name] = elems.get(t.tensor_type.name, 0) + int(t.n_elements)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    n_ctx = int(r.fields[f"{arch}.context_length"].parts[-1][0])
    st, body = get(server.port, "/v1/models")
    m = body["data"][0]
    meta = m["meta"]
    assert meta["quantization"].upper() == max(elems, key=elems.get)
    assert meta["architecture"] == arch and meta["n_ctx_train"] == n_ctx
    assert meta["n_params"] == sum(elems.values())
    assert m["max_model_len"] == meta["context_length"] == min(n_ctx, 4096)
    assert meta["kv_tokens"] == 4096 and meta["block_size"] == 16 and meta["kv_type"] == "f16"


def test_get_load_counts_in_flight_requests(server):
    assert get(server.port, "/get_load") == (200, {"load": 0})
    k = stream(server.port, {"prompt": "Once", "max_tokens": 4000, "ignore_eos": True})
    assert b"data: {" in read_until(k, b"data: {")
    assert get(server.port, "/get_load") == (200, {"load": 1})
    k.close()
    assert wait_for(lambda: get(server.port, "/get_load")[1]["load"] == 0)


def test_vllm_metrics_beside_llmk_ones_pass_promtool(server):
    prompt = "A shared prefix that fills more than one block of sixteen tokens, so that a second request " * 2
    for q in ("hits it.", "hits it again."):
        st, _ = post(server.port, "/v1/completions", {"prompt": prompt + q, "max_tokens": 3, "temperature": 0})
        assert st == 200
    st, text = get(server.port, "/metrics")
    assert st == 200
    promtool = shutil.which("promtool")
    if promtool:  # Debian's prometheus package (scripts/setup)
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        problems = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
        # vLLM's names have colons, which promtool's linter flags; nothing else may be flagged
        assert all(re.fullmatch(r"vllm:\w+ metric names should not contain ':'", ln) for ln in problems), problems
        assert len(problems) >= 9
    m = metrics(server.port)
    name = 'model_name="SmolLM2-135M-Instruct.Q4_1"'
    assert m[f"vllm:num_requests_waiting{{{name}}}"] == m["llmk_queue_depth"] == 0
    assert m[f"vllm:num_requests_running{{{name}}}"] == m["llmk_running_sequences"] == 0
    assert 0 <= m[f"vllm:kv_cache_usage_perc{{{name}}}"] <= 1
    q, h = m[f"vllm:prefix_cache_queries_total{{{name}}}"], m[f"vllm:prefix_cache_hits_total{{{name}}}"]
    assert q == m["llmk_prompt_tokens_total"] and h == m["llmk_cached_prompt_tokens_total"] and 16 <= h < q
    info = [k for k in m if k.startswith("vllm:cache_config_info{")]
    assert len(info) == 1 and 'block_size="16"' in info[0] and 'num_gpu_blocks="256"' in info[0], info
    n = m[f"vllm:e2e_request_latency_seconds_count{{{name}}}"]
    assert n >= 2 and m[f'vllm:e2e_request_latency_seconds_bucket{{{name},le="+Inf"}}'] == n
    assert m[f"vllm:time_to_first_token_seconds_count{{{name}}}"] == m["llmk_time_to_first_token_seconds_count"]


def test_ipv6_loopback_and_no_warning_on_loopback():
    s = Server("--host", "::1", "--threads", "1")
    try:
        assert s.url.startswith("http://[::1]:")
        assert get(s.port, "/health", host="::1") == (200, {"status": "ok"})
    finally:
        assert s.stop() == 0
    assert "warning" not in s.proc.stderr.read()


# --- API additions through the official client ---

@pytest.fixture(scope="module")
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_n_choices_use_seed_plus_i(client):
    kw = dict(model="llmk", prompt="Once upon a time", max_tokens=8, temperature=1.0)
    r = client.completions.create(n=3, seed=5, **kw)
    assert [c.index for c in r.choices] == [0, 1, 2]
    alone = [client.completions.create(seed=5 + i, **kw) for i in range(3)]
    assert [c.text for c in r.choices] == [a.choices[0].text for a in alone]
    assert len({a.choices[0].text for a in alone}) > 1  # independent draws
    assert r.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)
    assert r.usage.prompt_tokens == alone[0].usage.prompt_tokens  # counted once
    # two prompts x n = 2: prompt p's choice j is index 2 p + j
    r2 = client.completions.create(model="llmk", prompt=["Hello", "The sky is"], n=2, seed=9, max_tokens=4,
                                   temperature=1.0)
    assert [c.index for c in r2.choices] == [0, 1, 2, 3]
    assert r2.choices[3].text == client.completions.create(model="llmk", prompt="The sky is", seed=10, max_tokens=4,
                                                           temperature=1.0).choices[0].text
    # chat, streamed: each index's deltas make the non-streamed choice
    msgs = [{"role": "user", "content": "Name a color."}]
    full = client.chat.completions.create(model="llmk", messages=msgs, n=2, seed=3, max_tokens=6, temperature=1.0)
    got = {0: "", 1: ""}
    for ch in client.chat.completions.create(model="llmk", messages=msgs, n=2, seed=3, max_tokens=6,
                                             temperature=1.0, stream=True):
        for c in ch.choices:
            got[c.index] += c.delta.content or ""
    assert [got[0], got[1]] == [c.message.content for c in full.choices]


def test_n_is_validated(client):
    openai = pytest.importorskip("openai")
    for n, prompts in ((0, "hi"), (65, "hi"), (33, ["a", "b"])):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="llmk", prompt=prompts, n=n, max_tokens=1)
        assert e.value.body["param"] == "n" and str(n) in e.value.body["message"], e.value.body


def test_echo_puts_the_prompt_before_the_completion(client):
    openai = pytest.importorskip("openai")
    prompt = "The capital of France is"
    plain = client.completions.create(model="llmk", prompt=prompt, max_tokens=6, temperature=0).choices[0].text
    echoed = client.completions.create(model="llmk", prompt=prompt, max_tokens=6, temperature=0, echo=True)
    assert echoed.choices[0].text == prompt + plain
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="llmk", prompt=prompt, max_tokens=6, temperature=0, echo=True, stream=True))
    assert streamed == prompt + plain
    ids = client.completions.create(model="llmk", prompt=[504, 3575, 282], max_tokens=2, temperature=0, echo=True)
    assert ids.choices[0].text.startswith("The")  # token ids echo as their text
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="llmk", prompt=prompt, max_tokens=2, echo=True, logprobs=1)
    assert e.value.body["param"] == "echo"


def test_continuous_usage_stats_on_every_chunk(client):
    chunks = list(client.completions.create(
        model="llmk", prompt="Once upon a time", max_tokens=6, temperature=0, stream=True, extra_body={
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}))
    with_text = [c for c in chunks if c.choices and c.choices[0].text]
    assert with_text and all(c.usage is not None for c in chunks)
    done = [c.usage.completion_tokens for c in with_text]
    assert done == sorted(done) and done[-1] <= 6
    assert chunks[-1].usage.completion_tokens == 6 and not chunks[-1].choices  # the final usage chunk
    assert all(c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens for c in chunks)


def test_a_second_server_cannot_take_a_used_port(server):
    p = subprocess.run([str(LLMK), "serve", "--port", str(server.port), "--threads", "1"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and f"cannot listen on 127.0.0.1:{server.port}" in p.stderr, p.stderr
