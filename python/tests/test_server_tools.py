"""Tools, tool calls and reasoning through `llmk serve` with the official openai client
(serve_chat.hpp, llmk/tool_calls.hpp); /apply-template, /tokenize, /detokenize.

The model's reply is forced with LLMK_TEST_FORCED_REPLY (a test-only hook: the server parses
that text instead of what the model wrote), so the parsing, finish_reason and the streamed
deltas are checked deterministically; the prompt still comes from the model (SmolLM2) with a
Hermes-style template (HERMES) that renders tools, tool calls and tool results. tool_choice
"required" and a named function are checked on what SmolLM2 writes under the constraint: the
calls parse and their arguments validate with jsonschema against the tools' schemas.
"""
import http.client
import json

import pytest

from gguf_fixtures import default_model
from serve_util import Server, has_serve

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.skipif(not has_serve(), reason="no `llmk serve` (cpp-httplib missing)")

# Qwen 2.5's way with tools, shortened: tools in the system turn, <tool_call> JSON, tool results
# as <tool_response> in a user turn.
HERMES = """{#- a reasoning model's template: <think> #}
{%- if tools %}<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else 'You are helpful.' }}

# Tools
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
For each call return <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{%- if message.content %}
{{ message.content }}
{%- endif %}
{%- for tc in message.tool_calls %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}},
         {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
CALLS = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
         '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>')


@pytest.fixture(scope="module")
def model():
    m = default_model()
    if m is None:
        pytest.skip("skipped: default model not available (scripts/fetch-model)")
    return m


def serve(model, tmp_path_factory, forced, *extra):
    import os

    tpl = tmp_path_factory.mktemp("tpl") / "hermes.jinja"
    tpl.write_text(HERMES)
    old = os.environ.get("LLMK_TEST_FORCED_REPLY")
    if forced is not None:
        os.environ["LLMK_TEST_FORCED_REPLY"] = forced
    try:
        return Server("--model", str(model), "--kv-tokens", "2048", "--max-seqs", "2", "--chat-template", str(tpl), *extra)
    finally:
        if old is None:
            os.environ.pop("LLMK_TEST_FORCED_REPLY", None)
        else:
            os.environ["LLMK_TEST_FORCED_REPLY"] = old


def client(s):
    return openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)


def ask(c, **kw):
    return c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Weather in Paris and 2+3?"}],
                                     max_tokens=3, temperature=0, **kw)


def stream(c, **kw):
    """The streamed reply, its deltas put together."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in ask(c, stream=True, **kw):
        ch = chunk.choices[0]
        d = ch.delta
        content += d.content or ""
        reasoning += (d.model_extra or {}).get("reasoning_content") or ""
        for tc in d.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] += tc.id or ""
            slot["name"] += tc.function.name or ""
            slot["arguments"] += tc.function.arguments or ""
        finish = ch.finish_reason or finish
    return content, reasoning, [calls[k] for k in sorted(calls)], finish


def test_tool_calls_parsed_streamed_and_not(model, tmp_path_factory):
    s = serve(model, tmp_path_factory, "I will look.\n" + CALLS)
    try:
        c = client(s)
        r = ask(c, tools=TOOLS)
        m = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls"
        assert m.content == "I will look."
        assert [(t.function.name, json.loads(t.function.arguments)) for t in m.tool_calls] == [
            ("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": 3})]
        assert len({t.id for t in m.tool_calls}) == 2 and all(t.type == "function" for t in m.tool_calls)
        content, _, calls, finish = stream(c, tools=TOOLS)
        assert finish == "tool_calls" and content == "I will look."
        assert [(t["name"], json.loads(t["arguments"])) for t in calls] == [
            ("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": 3})]
        r = ask(c, tools=TOOLS, parallel_tool_calls=False)
        assert [t.function.name for t in r.choices[0].message.tool_calls] == ["get_weather"]
        r = ask(c, tools=TOOLS, tool_choice="none")  # no parsing: the text is the content
        assert r.choices[0].message.tool_calls is None and "<tool_call>" in r.choices[0].message.content
        with pytest.raises(openai.BadRequestError, match=r"tools\[0\]"):
            ask(c, tools=[{"type": "function"}])
    finally:
        s.stop()


def test_malformed_call_is_content(model, tmp_path_factory):
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'  # truncated
    s = serve(model, tmp_path_factory, text)
    try:
        c = client(s)
        r = ask(c, tools=TOOLS)
        assert r.choices[0].finish_reason == "stop" and r.choices[0].message.content == text
        assert r.choices[0].message.tool_calls is None
        content, _, calls, finish = stream(c, tools=TOOLS)
        assert (content, calls, finish) == (text, [], "stop")
    finally:
        s.stop()


def test_reasoning_content(model, tmp_path_factory):
    s = serve(model, tmp_path_factory, "<think>\n2+3 is 5\n</think>\n\nIt is 5.")
    try:
        c = client(s)
        m = ask(c).choices[0].message
        assert m.content == "It is 5." and m.model_extra["reasoning_content"] == "2+3 is 5"
        content, reasoning, calls, finish = stream(c)
        assert (content, reasoning, calls) == ("It is 5.", "2+3 is 5", [])
    finally:
        s.stop()
    s = serve(model, tmp_path_factory, "<think>r</think>a", "--reasoning-format", "none")
    try:
        m = ask(client(s)).choices[0].message
        assert m.content == "<think>r</think>a" and "reasoning_content" not in (m.model_extra or {})
    finally:
        s.stop()


def _post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())


def test_apply_template_tokenize_detokenize(model, tmp_path_factory):
    """/apply-template renders tool calls and results as jinja2 does (arguments sent as JSON
    strings reach the template as objects); /tokenize and /detokenize round-trip."""
    chat_format = pytest.importorskip("llama_cpp.llama_chat_format")
    msgs = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "cold"}]
    s = serve(model, tmp_path_factory, None)
    try:
        # SmolLM2 writing for itself: with tools offered, a normal choice comes back (content, or
        # parsed calls when it happens to write one)
        r = ask(client(s), tools=TOOLS)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
        assert r.choices[0].message.content is not None or r.choices[0].message.tool_calls
        status, body = _post(s.port, "/apply-template", {"messages": msgs, "tools": TOOLS})
        assert status == 200, body
        as_objects = json.loads(json.dumps(msgs))
        as_objects[1]["tool_calls"][0]["function"]["arguments"] = {"city": "Oslo"}
        want = chat_format.Jinja2ChatFormatter(HERMES, "<|endoftext|>", "<|im_start|>")(messages=as_objects,
                                                                                         tools=TOOLS).prompt
        assert body["prompt"] == want
        assert '{"name": "get_weather", "arguments": {"city": "Oslo"}}' in want and "<tool_response>\ncold" in want
        status, body = _post(s.port, "/tokenize", {"content": "Hello <|im_start|>"})
        assert status == 200 and len(body["tokens"]) >= 2, body
        status, back = _post(s.port, "/detokenize", {"tokens": body["tokens"]})
        assert status == 200 and back["content"] == "Hello <|im_start|>", back
        status, body = _post(s.port, "/tokenize", {"content": "Hi", "with_pieces": True})
        assert status == 200 and "".join(t["piece"] for t in body["tokens"]) == "Hi", body
        status, body = _post(s.port, "/detokenize", {"tokens": [10 ** 9]})
        assert status == 400 and body["error"]["param"] == "tokens[0]", body
        status, body = _post(s.port, "/apply-template", {"messages": [{"role": "robot", "content": "x"}]})
        assert status == 400 and body["error"]["param"] == "messages[0].role", body
    finally:
        s.stop()


# tool_choice "required" / a named function: the reply is constrained to calls whose arguments fit
# each tool's schema (bounded strings and integers, so that greedy decoding on SmolLM2 ends).
FORCED_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "maxLength": 24},
                                          "unit": {"enum": ["celsius", "fahrenheit"]}},
                                          "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add", "description": "Add two numbers",
                                      "parameters": {"type": "object", "properties": {
                                          "a": {"type": "integer", "minimum": 0, "maximum": 999},
                                          "b": {"type": "integer", "minimum": 0, "maximum": 999}},
                                          "required": ["a", "b"], "additionalProperties": False}}}]


def check_calls(calls, names):
    """Each call names one of `names` and its arguments validate against that tool's schema."""
    jsonschema = pytest.importorskip("jsonschema")
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in FORCED_TOOLS}
    assert calls
    for name, args in calls:
        assert name in names
        jsonschema.validate(json.loads(args), schemas[name])


def test_tool_choice_forces_schema_valid_calls(model, tmp_path_factory):
    s = serve(model, tmp_path_factory, None)
    try:
        c = client(s)
        # One call: the grammar is done after it, so the reply ends there whatever the model prefers.
        for choice, names in (("required", {"get_weather", "add"}),
                              ({"type": "function", "function": {"name": "add"}}, {"add"}),
                              ({"type": "function", "function": {"name": "get_weather"}}, {"get_weather"})):
            r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Weather in Paris?"}],
                                          max_tokens=256, temperature=0, tools=FORCED_TOOLS, tool_choice=choice,
                                          parallel_tool_calls=False)
            m = r.choices[0].message
            assert r.choices[0].finish_reason == "tool_calls" and len(m.tool_calls) == 1, m
            check_calls([(t.function.name, t.function.arguments) for t in m.tool_calls], names)
        # Parallel calls: the model decides when to stop calling; if it runs out of tokens first, the
        # unfinished reply comes back as content, and it is still calls.
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Weather in Paris?"}],
                                      max_tokens=400, temperature=0, tools=FORCED_TOOLS, tool_choice="required")
        m = r.choices[0].message
        if r.choices[0].finish_reason == "tool_calls":
            check_calls([(t.function.name, t.function.arguments) for t in m.tool_calls], {"get_weather", "add"})
        else:
            assert r.choices[0].finish_reason == "length" and m.content.startswith("<tool_call>\n{\"name\": "), m
        content, _, calls, finish = stream(c, tools=FORCED_TOOLS, tool_choice="required", parallel_tool_calls=False,
                                           max_completion_tokens=256)
        assert finish == "tool_calls" and len(calls) == 1
        check_calls([(t["name"], t["arguments"]) for t in calls], {"get_weather", "add"})

        named = {"type": "function", "function": {"name": "add"}}
        for kw, param in (({"tool_choice": "required"}, "tool_choice"),  # no tools
                          ({"tools": FORCED_TOOLS, "tool_choice": {"type": "function", "function": {"name": "sub"}}},
                           "tool_choice.function.name"),
                          ({"tools": FORCED_TOOLS, "tool_choice": "always"}, "tool_choice"),
                          ({"tools": FORCED_TOOLS, "tool_choice": named, "response_format": {"type": "json_object"}},
                           "tool_choice"),
                          ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
                              "type": "object", "properties": {"x": {"not": {}}}}}}], "tool_choice": "required"},
                           r"tools\[0\]\.function\.parameters.*'not'")):
            with pytest.raises(openai.BadRequestError, match=param):
                ask(c, **kw)
    finally:
        s.stop()


@pytest.mark.parametrize("fmt", ["llama3", "mistral", "deepseek-r1"])
def test_tool_choice_formats(model, tmp_path_factory, fmt):
    """The other formats' call syntax (--tool-parser) under a named function: one call that parses."""
    s = serve(model, tmp_path_factory, None, "--tool-parser", fmt)
    try:
        r = client(s).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "2+3?"}], max_tokens=256, temperature=0,
            tools=FORCED_TOOLS, tool_choice={"type": "function", "function": {"name": "add"}},
            parallel_tool_calls=False)
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
        check_calls([(t.function.name, t.function.arguments) for t in r.choices[0].message.tool_calls], {"add"})
    finally:
        s.stop()
