"""`llmk serve` over raw HTTP: malformed requests get OpenAI-style errors naming the field
and value (400), a wrong key 401, an unknown route 404, a 10 MB body 413, a full queue 503
with Retry-After; a slow client does not hold the others up; a client that disconnects
mid-stream frees its blocks (checked in /metrics); SIGTERM ends the in-flight stream with a
final event and the process exits 0."""
import http.client
import json
import signal
import socket
import threading
import time

import pytest

from serve_util import LLMK, Server, metrics, wait_for

pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")


@pytest.fixture(scope="module")
def server():
    s = Server("--max-seqs", "8")
    yield s
    assert s.stop() == 0


def post(port, path, body, headers=None, raw=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    data = body if raw else json.dumps(body).encode()
    c.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    text = r.read()
    try:
        return r.status, json.loads(text), r
    except ValueError:
        return r.status, text, r


def error_of(port, body, path="/v1/completions", raw=False, status=400):
    st, js, _ = post(port, path, body, raw=raw)
    assert st == status, (st, js)
    e = js["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    return e


def test_bad_requests_name_the_field_and_value(server):
    p = server.port
    assert "not valid JSON" in error_of(p, b"{\"prompt\": ", raw=True)["message"]
    assert "not valid JSON" in error_of(p, b"{\"prompt\": \"\xff\xfe\"}", raw=True)["message"]  # invalid UTF-8
    assert "JSON object" in error_of(p, [1, 2])["message"]
    e = error_of(p, {"prompt": "hi", "max_tokens": -5})
    assert e["param"] == "max_tokens" and "-5" in e["message"]
    e = error_of(p, {"prompt": "hi", "max_tokens": 10**15})
    assert "1000000000000000" in e["message"] and "8192" in e["message"], e  # both numbers
    e = error_of(p, {"prompt": "hi", "temperature": -1})
    assert e["param"] == "temperature" and "-1" in e["message"]
    e = error_of(p, {"prompt": "hi", "top_p": 0})
    assert e["param"] == "top_p"
    e = error_of(p, {"prompt": "hi", "max_tokens": "ten"})
    assert e["param"] == "max_tokens" and "\"ten\"" in e["message"]
    e = error_of(p, {"prompt": 5})
    assert e["param"] == "prompt"
    e = error_of(p, {"prompt": [1, 2, 10**9]})
    assert "1000000000" in e["message"]
    e = error_of(p, {"prompt": "hi", "stop": ["ok", ""]})
    assert e["param"] == "stop[1]"
    e = error_of(p, {"prompt": "hi", "frequency_penalty": 0.5})
    assert e["param"] == "frequency_penalty" and "not supported" in e["message"]
    e = error_of(p, {"prompt": "hi", "n": 65})
    assert e["param"] == "n" and "65" in e["message"]
    e = error_of(p, {"prompt": "word " * 9000, "max_tokens": 1})
    assert "9001" in e["message"] or "tokens" in e["message"], e
    e = error_of(p, {"messages": [{"role": "robot", "content": "x"}]}, path="/v1/chat/completions")
    assert e["param"] == "messages[0].role" and "robot" in e["message"]
    e = error_of(p, {"messages": []}, path="/v1/chat/completions")
    assert e["param"] == "messages"
    e = error_of(p, {"model": "x"}, path="/v1/completions")
    assert e["param"] == "prompt"
    # unknown fields are ignored, as OpenAI does
    st, js, _ = post(p, "/v1/completions", {"prompt": "hi", "max_tokens": 2, "temperature": 0, "whatever": [1]})
    assert st == 200 and js["usage"]["completion_tokens"] <= 2
    e = error_of(p, {}, path="/v1/nothing-here", status=404)
    assert "/v1/nothing-here" in e["message"]
    assert metrics(p)['llmk_kv_blocks{state="used"}'] == 0


def test_body_over_the_limit_is_413(server):
    st, js, _ = post(server.port, "/v1/completions", b"{\"prompt\": \"" + b"a" * (10 << 20) + b"\"}", raw=True)
    assert st == 413 and js["error"]["code"] == "body_too_large", js


def test_slow_client_does_not_block_others(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro")
    st, js, _ = post(server.port, "/v1/completions", {"prompt": "hi", "max_tokens": 2})
    assert st == 200
    s.close()


def stream_request(port, body, path="/v1/completions"):
    s = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


def read_until(s, needle, limit=5_000_000):
    buf = b""
    while needle not in buf and len(buf) < limit:
        got = s.recv(65536)
        if not got:
            break
        buf += got
    return buf


def test_disconnect_cancels_and_frees_blocks(server):
    before = metrics(server.port).get('llmk_requests_total{outcome="cancelled"}', 0)
    s = stream_request(server.port, {"prompt": "Once upon a time", "max_tokens": 4000, "stream": True,
                                     "temperature": 0.9, "seed": 1})
    assert b"data: {" in read_until(s, b"data: {")
    assert metrics(server.port)["llmk_running_sequences"] == 1
    s.close()
    assert wait_for(lambda: metrics(server.port)["llmk_running_sequences"] == 0)
    m = metrics(server.port)
    assert m['llmk_kv_blocks{state="used"}'] == 0
    assert m['llmk_requests_total{outcome="cancelled"}'] == before + 1


def test_api_key_and_full_queue():
    s = Server("--max-seqs", "1", "--max-queue", "1", "--api-key", "sekrit")
    try:
        st, js, _ = post(s.port, "/v1/completions", {"prompt": "hi"})
        assert st == 401 and js["error"]["code"] == "invalid_api_key"
        st, js, _ = post(s.port, "/v1/completions", {"prompt": "hi"}, {"Authorization": "Bearer nope"})
        assert st == 401
        auth = {"Authorization": "Bearer sekrit"}
        st, js, _ = post(s.port, "/v1/completions", {"prompt": "hi", "max_tokens": 1}, auth)
        assert st == 200
        # one running, one queued: the third is refused
        body = {"prompt": "Once upon a time", "max_tokens": 4000, "stream": True}
        data = json.dumps(body).encode()
        socks = []
        for _ in range(2):
            k = socket.create_connection(("127.0.0.1", s.port))
            k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekrit\r\n"
                      b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
            socks.append(k)
            if len(socks) == 1:
                assert b"data: {" in read_until(k, b"data: {")
        assert wait_for(lambda: metrics(s.port)["llmk_queue_depth"] == 1)
        st, js, r = post(s.port, "/v1/completions", {"prompt": "hi"}, auth)
        assert st == 503 and js["error"]["code"] == "queue_full" and r.getheader("Retry-After") == "1", js
        for k in socks:
            k.close()
        assert wait_for(lambda: metrics(s.port)['llmk_kv_blocks{state="used"}'] == 0)
    finally:
        assert s.stop() == 0


def test_sigterm_ends_streams_and_exits_zero():
    # Four streams at once: each must still get its final event after the signal, however the
    # writers and the shutdown interleave.
    s = Server("--max-seqs", "4")
    socks = []
    for i in range(4):
        body = ({"messages": [{"role": "user", "content": f"Tell story {i}"}]} if i % 2
                else {"prompt": f"Once upon a time {i}"})
        socks.append(stream_request(s.port, {**body, "max_tokens": 4000, "stream": True},
                                    "/v1/chat/completions" if i % 2 else "/v1/completions"))
    for k in socks:
        assert b"data: {" in read_until(k, b"data: {")
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    for k in socks:
        rest = read_until(k, b"data: [DONE]")
        assert b"\"finish_reason\":\"abort\"" in rest and b"data: [DONE]" in rest, rest[-300:]
    assert s.proc.wait(20) == 0
    assert time.time() - t0 < 10
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2).sendall(b"GET /health HTTP/1.1\r\n\r\n")

