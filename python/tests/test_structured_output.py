"""Structured output through the official `openai` client on `llmk serve` (SmolLM2-135M):
response_format json_object / json_schema on both endpoints, vLLM's guided_* fields, the outputs
validated with the `jsonschema` package in greedy and sampling modes, `beta.chat.completions.parse`
with a Pydantic model; a field, type or keyword the server does not honour is a 400 naming it and
its value."""
import json
import re
from typing import Annotated, List, Optional

import pytest

from serve_util import LLMK, Server

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pydantic = pytest.importorskip("pydantic")
pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")

MSGS = [{"role": "user", "content": "Give me a person as JSON."}]

# Strings bounded by patterns, bounded arrays: the whole document fits in max_tokens, so every request
# ends with "stop".
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]{1,7}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "alive": {"type": ["boolean", "null"]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
        "kind": {"anyOf": [{"const": "x"}, {"$ref": "#/$defs/code"}]},
    },
    "required": ["name", "age", "alive", "tags", "kind"],
    "additionalProperties": False,
    "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{1,3}$"}},
}


@pytest.fixture(scope="module")
def server():
    s = Server("--max-seqs", "8")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def refused(call, param, *words):
    with pytest.raises(openai.BadRequestError) as ei:
        call()
    err = ei.value.body
    assert err["param"] == param, err
    for w in words:
        assert w in err["message"], (w, err)


def legacy(kw):
    """The client's completions.create takes no response_format: it goes in extra_body."""
    kw = dict(kw)
    if "response_format" in kw:
        kw["extra_body"] = {**kw.get("extra_body", {}), "response_format": kw.pop("response_format")}
    return kw


def both(client, **extra):
    """The two endpoints with the same extra fields."""
    return [lambda: client.chat.completions.create(model="llmk", messages=MSGS, max_tokens=4, **extra),
            lambda: client.completions.create(model="llmk", prompt="A person:", max_tokens=4, **legacy(extra))]


@pytest.mark.parametrize("field,value", [("guided_grammar", "root ::= \"x\""), ("structural_tag", {"a": 1}),
                                         ("guided_decoding_backend", "xgrammar")])
def test_other_structured_fields_are_refused(client, field, value):
    for call in both(client, extra_body={field: value}):
        refused(call, field, "not supported")


def test_unknown_response_format_type_is_refused(client):
    for call in both(client, response_format={"type": "yaml"}):
        refused(call, "response_format.type", "yaml")
    for call in both(client, extra_body={"response_format": "json"}):
        refused(call, "response_format", "\"json\"")
    rf = {"type": "json_schema", "json_schema": {"name": "bad name!", "schema": PERSON}}
    for call in both(client, response_format=rf):
        refused(call, "response_format.json_schema.name", "bad name!")
    for call in both(client, response_format={"type": "json_object"}, extra_body={"guided_regex": "a+"}):
        refused(call, "guided_regex", "cannot be combined")


@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}, "not", "#/properties/a/not"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems", "#/uniqueItems"),
    ({"type": "object", "if": {}, "then": {}}, "if", "#/if"),
    ({"type": "string", "pattern": "(?<=a)b"}, "pattern", "#/pattern"),
])
def test_unsupported_schema_keywords_name_keyword_and_pointer(client, schema, keyword, pointer):
    rf = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema, "strict": True}}
    for call in both(client, response_format=rf):
        refused(call, "response_format.json_schema.schema", f"'{keyword}'", pointer)


def test_text_response_format_is_plain_generation(client):
    r = client.chat.completions.create(model="llmk", messages=MSGS, max_tokens=4, temperature=0,
                                       response_format={"type": "text"})
    assert r.choices[0].message.content


SAMPLING = [dict(temperature=1.0, top_p=0.9, seed=1), dict(temperature=0.8, seed=2),
            dict(temperature=1.3, seed=3, extra_body={"top_k": 5, "min_p": 0.05})]
RF = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}


def test_json_schema_greedy_on_both_endpoints(client):
    r = client.chat.completions.create(model="llmk", messages=MSGS, max_tokens=100, temperature=0, response_format=RF)
    c = r.choices[0]
    assert c.finish_reason == "stop", c
    jsonschema.validate(json.loads(c.message.content), PERSON)
    # a batch of two prompts on /v1/completions: each its own matcher
    r = client.completions.create(model="llmk", prompt=["Person:", "Someone else:"], max_tokens=100, temperature=0,
                                  extra_body={"response_format": RF})
    for c in r.choices:
        assert c.finish_reason == "stop", c
        jsonschema.validate(json.loads(c.text), PERSON)


@pytest.mark.parametrize("kw", SAMPLING)
def test_json_schema_outputs_validate_when_sampling(client, kw):
    r = client.completions.create(model="llmk", prompt=["Person:", "A user record:"], max_tokens=100,
                                  **legacy(dict(kw, response_format=RF)))
    for c in r.choices:
        assert c.finish_reason == "stop", c
        jsonschema.validate(json.loads(c.text), PERSON)


def test_json_object_and_logprobs(client):
    r = client.chat.completions.create(model="llmk", messages=MSGS, max_tokens=24, temperature=0,
                                       response_format={"type": "json_object"}, logprobs=True, top_logprobs=2)
    c = r.choices[0]
    if c.finish_reason == "stop":
        assert isinstance(json.loads(c.message.content), dict)
    else:  # cut at max_tokens: still a prefix of a JSON object
        assert c.message.content.startswith("{")
    assert len(c.logprobs.content) == r.usage.completion_tokens
    r = client.completions.create(model="llmk", prompt="JSON:", max_tokens=12, temperature=0.9, seed=5,
                                  extra_body={"response_format": {"type": "json_object"}})
    assert r.choices[0].text.startswith("{")


def test_guided_regex_and_choice(client):
    r = client.completions.create(model="llmk", prompt="Phone:", max_tokens=30, temperature=0.7, seed=3,
                                  extra_body={"guided_regex": "\\([0-9]{3}\\) [0-9]{3}-[0-9]{4}"})
    assert re.fullmatch(r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}", r.choices[0].text), r.choices[0].text
    assert r.choices[0].finish_reason == "stop"
    r = client.chat.completions.create(model="llmk", messages=[{"role": "user", "content": "Is the sky blue?"}],
                                       max_tokens=10, temperature=0, extra_body={"guided_choice": ["yes", "no"]})
    assert r.choices[0].message.content in ("yes", "no")


Short = Annotated[str, pydantic.Field(pattern="^[A-Z][a-z]{1,7}$")]


class Address(pydantic.BaseModel):
    city: Short
    zip: Optional[Annotated[str, pydantic.Field(pattern="^[0-9]{5}$")]]


class Person(pydantic.BaseModel):
    name: Short
    age: int = pydantic.Field(ge=0, le=150)
    friends: List[Short] = pydantic.Field(max_length=2)
    address: Address


def test_beta_parse_with_pydantic(client):
    r = client.beta.chat.completions.parse(model="llmk", messages=MSGS, max_tokens=120, temperature=0,
                                           response_format=Person)
    c = r.choices[0]
    assert c.finish_reason == "stop", c
    assert isinstance(c.message.parsed, Person), c.message
