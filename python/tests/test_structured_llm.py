"""Structured output through llmk.LLM.generate (json_schema=, regex=, grammar=, choice=) and
`llmk generate --json-schema / --grammar` on SmolLM2-135M: outputs validate with the `jsonschema`
package, match the regex / grammar / choice, in greedy and sampling modes and in a batch; bad
arguments are errors naming them."""
import json
import re
import subprocess

import pytest

import llmk
from test_llm import LLMK, MODEL, needs_cli

jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.skipif(MODEL is None, reason="default model not available (scripts/fetch-model)")

SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string", "pattern": "^[A-Z][a-z]{2,9}$"},
                         "population": {"type": "integer", "minimum": 0, "maximum": 100000000},
                         "capital": {"type": "boolean"}},
          "required": ["city", "population", "capital"], "additionalProperties": False}


@pytest.fixture(scope="module")
def llm():
    return llmk.LLM(str(MODEL))


@pytest.mark.parametrize("kw", [dict(), dict(temperature=1.0, seed=4), dict(temperature=1.2, top_k=3, top_p=0.8,
                                                                           min_p=0.1, seed=2)])
def test_json_schema_batch_validates(llm, kw):
    outs = llm.generate(["The biggest city of France as JSON:", "A city:"], max_tokens=60, json_schema=SCHEMA, **kw)
    for o in outs:
        assert o.finish_reason == "stop", o
        jsonschema.validate(json.loads(o.text), SCHEMA)


def test_regex_grammar_choice_and_logprobs(llm):
    o = llm.generate("Date:", max_tokens=20, regex="20[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]", temperature=0.9, seed=1)
    assert re.fullmatch(r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]", o.text) and o.finish_reason == "stop", o
    o = llm.generate("Sum:", max_tokens=20, grammar='root ::= num " + " num\nnum ::= [1-9] [0-9]?\n')
    assert re.fullmatch(r"[1-9][0-9]? \+ [1-9][0-9]?", o.text), o
    o = llm.generate("Is water wet? Answer:", max_tokens=8, choice=["yes", "no", "it \"depends\""], logprobs=2)
    assert o.text in ("yes", "no", 'it "depends"') and o.finish_reason == "stop", o
    assert len(o.logprobs) == len(o.tokens)  # logprobs of the unmasked logits, one per token


def test_bad_structured_arguments_are_named(llm):
    with pytest.raises(ValueError, match="json_schema.*'not'.*#/not"):
        llm.generate("x", max_tokens=2, json_schema={"not": {"type": "null"}})
    with pytest.raises(ValueError, match="regex.*lookaround"):
        llm.generate("x", max_tokens=2, regex="a(?=b)")
    with pytest.raises(ValueError, match="grammar.*root"):
        llm.generate("x", max_tokens=2, grammar='start ::= "a"\n')
    with pytest.raises(ValueError, match="choice.*cannot be combined with regex"):
        llm.generate("x", max_tokens=2, regex="a", choice=["a"])
    with pytest.raises(TypeError, match="choice"):
        llm.generate("x", max_tokens=2, choice="yes")


@needs_cli
def test_cli_json_schema_and_grammar(tmp_path):
    sf = tmp_path / "s.json"
    sf.write_text(json.dumps(SCHEMA))
    r = subprocess.run([str(LLMK), "generate", "--json-schema", str(sf), "-n", "60", "A city as JSON:"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    jsonschema.validate(json.loads(r.stdout.strip().splitlines()[0]), SCHEMA)
    gf = tmp_path / "g.gbnf"
    gf.write_text('root ::= ("yes" | "no") "!"\n')
    r = subprocess.run([str(LLMK), "generate", "--grammar", str(gf), "-n", "8", "Answer:"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[0] in ("yes!", "no!"), (r.stdout, r.stderr)
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "array", "uniqueItems": true}')
    r = subprocess.run([str(LLMK), "generate", "--json-schema", str(bad), "-n", "8", "x"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode != 0 and "--json-schema" in r.stderr and "uniqueItems" in r.stderr, r.stderr
