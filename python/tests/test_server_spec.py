"""`llmk serve` with speculative decoding (on by default, `--spec ngram`): a completion with the
request field "spec": "off" gives the same tokens and logprobs as the default; /metrics counts
the drafted and accepted tokens; a bad "spec" value is a 400 naming it."""
import http.client
import json

import pytest

from serve_util import LLMK, Server, metrics

pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")

PROMPT = ("Copy the list: apples, pears, plums, cherries, apples, pears, plums, cherries, apples, pears, plums, "
          "cherries. Copy:")


@pytest.fixture(scope="module")
def server():
    s = Server("--max-seqs", "4", "--threads", "2")
    yield s
    assert s.stop() == 0


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())


def test_spec_field_gives_the_same_output_and_is_counted(server):
    body = {"prompt": PROMPT, "max_tokens": 32, "temperature": 0.7, "seed": 3, "logprobs": 2}
    before = metrics(server.port)
    st, on = post(server.port, body)
    assert st == 200, on
    mid = metrics(server.port)
    st, off = post(server.port, {**body, "spec": "off"})
    assert st == 200, off
    after = metrics(server.port)
    assert on["choices"][0]["text"] == off["choices"][0]["text"]
    assert on["choices"][0]["logprobs"] == off["choices"][0]["logprobs"]
    drafted = mid["llmk_spec_drafted_tokens_total"] - before["llmk_spec_drafted_tokens_total"]
    accepted = mid["llmk_spec_accepted_tokens_total"] - before["llmk_spec_accepted_tokens_total"]
    assert drafted > 0 and 0 < accepted <= drafted, (drafted, accepted)
    assert after["llmk_spec_drafted_tokens_total"] == mid["llmk_spec_drafted_tokens_total"]


@pytest.mark.parametrize("bad", ["on", 1, ["ngram"]])
def test_bad_spec_is_400_naming_it(server, bad):
    st, js = post(server.port, {"prompt": "hi", "max_tokens": 1, "spec": bad})
    assert st == 400, js
    assert js["error"]["param"] == "spec" and "spec" in js["error"]["message"], js
