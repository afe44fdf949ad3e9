"""llmk's Jinja interpreter (include/llmk/jinja.hpp) against jinja2 rendering the same template
as llama-cpp-python 0.3.36's Jinja2ChatFormatter does (ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loopcontrols and the {% generation %} pass-through; its tojson;
raise_exception, strftime_now; messages, bos/eos, add_generation_prompt, tools, and the extra
template kwargs passed through).

Every template file of llama.cpp's models/templates/ (scripts/fetch-llamacpp-vocab), the
templates inside the GGUFs at hand and llmk's built-in ones render CONVERSATIONS (with and
without a system message, multi-turn, tools, tool calls with arguments as objects and as JSON
strings, tool results, <think> content, template kwargs) and RANDOM_CASES random ones
(fixed seed), with and without the generation prompt: byte-identical, or an error from llmk
where jinja2 raises. Skips, saying why, when jinja2 / llama_cpp or the templates are missing.
"""
import datetime
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

import llmk
from llmk import _llmk
from gguf_fixtures import default_model, gemma_model

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
pytest.importorskip("jinja2", reason="jinja2 not installed (scripts/setup-peers)")
chat_format = pytest.importorskip("llama_cpp.llama_chat_format", reason="llama_cpp not installed (scripts/setup-peers)")

BOS, EOS = "<|bos|>", "<|eos|>"
NOW = 1756900800  # what strftime_now sees on both sides (2025-09-03, local time)
DATE = datetime.datetime.fromtimestamp(NOW)
RANDOM_CASES = 300


def _m(role, content, **kw):
    return {"role": role, "content": content, **kw}


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                        "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers <a> & 'b' (ü).",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}},
]


def _call(i, name, args, as_json_string):
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args) if as_json_string else args}}


def _conversations():
    c = [
        ([_m("user", "Hello!")], {}),
        ([_m("system", "You are a terse assistant."), _m("user", "What is 2+2?")], {}),
        ([_m("user", "Hi"), _m("assistant", "Hello! How can I help?"), _m("user", "Tell me a joke.")], {}),
        ([_m("system", "Be kind."), _m("user", "One"), _m("assistant", "Two"), _m("user", "Three"),
          _m("assistant", "Four")], {}),
        ([_m("system", ""), _m("user", ""), _m("assistant", ""), _m("user", "")], {}),
        ([_m("user", "Grüße, 世界! 🙂🚀 «ça» — naïve \u00a0nbsp\u3000ideographic"),
          _m("assistant", "日本語で答えます。\u2028line sep 👩‍💻"), _m("user", "e\u0301 {{ not a tag }} {% raw %} 'q' \"dq\" \\n")],
         {}),
        ([_m("system", "\n  padded system \t\n"), _m("user", "  leading and trailing  \n\n"),
          _m("assistant", "\u3000\u00a0answer\u2003\n"), _m("user", "\n\nlast\u0085")], {}),
        ([_m("user", "Solve x+1=3."), _m("assistant", "<think>\nx = 3 - 1\n</think>\n\nx = 2"), _m("user", "And x+2=3?"),
          _m("assistant", "<think>\n\nx = 1\n\n</think>\n\n\nx = 1")], {}),
        ([_m("user", "first"), _m("user", "second in a row"), _m("assistant", "<think>\nr1\n</think>\n\na1"),
          _m("assistant", "a2")], {}),
        ([_m("user", "Hi"), _m("assistant", "Hello"), _m("system", "Switch to French."), _m("user", "Bonjour")], {}),
        ([_m("user", "Weather in Paris?")], {"tools": TOOLS}),
        ([_m("system", "Use tools."), _m("user", "Weather in Paris?")], {"tools": TOOLS}),
        ([_m("user", "Think first.")], {"enable_thinking": False}),
        ([_m("user", "Think."), _m("assistant", "<think>\nhmm\n</think>\n\nok"), _m("user", "again")],
         {"enable_thinking": True, "reasoning_effort": "high"}),
        ([_m("user", "Hi"), _m("assistant", "ok", reasoning_content="I thought")], {}),
    ]
    for as_str in (False, True):
        c.append(([_m("system", "Use tools."), _m("user", "Weather in Paris and 2+3?"),
                   _m("assistant", None if as_str else "", tool_calls=[_call(1, "get_weather", {"city": "Paris"}, as_str),
                                                                      _call(2, "add", {"a": 2, "b": 3}, as_str)]),
                   _m("tool", "{\"temp\": 21}", tool_call_id="call_1", name="get_weather"),
                   _m("tool", "5", tool_call_id="call_2", name="add"),
                   _m("assistant", "It is 21C; 2+3=5."), _m("user", "Thanks")], {"tools": TOOLS}))
        c.append(([_m("user", "Weather?"),
                   _m("assistant", "", tool_calls=[_call(3, "get_weather", {"city": "Oslo", "unit": "c"}, as_str)]),
                   _m("tool", "cold", tool_call_id="call_3")], {"tools": TOOLS}))
    return c


CONVERSATIONS = _conversations()
PIECES = ["", " ", "\n", "\n\n", "\t", "\u00a0", "\u3000", "\u2028", "\x85", "hi", "Grüße", "日本", "🙂", "<think>",
          "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "{{ x }}", "'", '"', "\\", "[INST]",
          "<|im_end|>", "{", "}", "<", "&"]


def random_case(rng):
    """Roles in any order (tool results included), contents built from whitespace, Unicode
    spaces, tags and template-like text, tool calls, tools, enable_thinking."""
    msgs = []
    for _ in range(rng.randrange(1, 6)):
        role = rng.choice(["system", "user", "assistant", "user", "assistant", "tool"])
        m = _m(role, "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 6))))
        if role == "assistant" and rng.random() < 0.25:
            m["tool_calls"] = [_call(k, rng.choice(["get_weather", "add"]), {"city": rng.choice(PIECES)},
                                     rng.random() < 0.5) for k in range(rng.randrange(1, 3))]
        if role == "tool":
            m["tool_call_id"] = "call_0"
        msgs.append(m)
    kw = {}
    if rng.random() < 0.3:
        kw["tools"] = TOOLS
    if rng.random() < 0.2:
        kw["enable_thinking"] = rng.random() < 0.5
    return msgs, kw, rng.random() < 0.5


def _formatters(template):
    """The oracle: Jinja2ChatFormatter for each add_generation_prompt; the exception when the
    template does not compile."""
    try:
        return {agp: chat_format.Jinja2ChatFormatter(template=template, eos_token=EOS, bos_token=BOS,
                                                     add_generation_prompt=agp) for agp in (True, False)}
    except Exception as e:  # noqa: BLE001 - any compile error
        return e


@pytest.fixture(autouse=True)
def fixed_strftime_now(monkeypatch):
    monkeypatch.setattr(chat_format.Jinja2ChatFormatter, "strftime_now", staticmethod(lambda f: DATE.strftime(f)))


def jinja_render(fmts, messages, kw, agp):
    """jinja2's prompt, None where it raises."""
    if isinstance(fmts, Exception):
        return None
    try:
        return fmts[agp](messages=messages, **kw).prompt
    except Exception:  # noqa: BLE001 - raise_exception, or a template error on this input
        return None


def context_json(messages, kw, agp):
    """The variables Jinja2ChatFormatter passes (raise_exception and strftime_now are llmk's own)."""
    ctx = dict(messages=messages, eos_token=EOS, bos_token=BOS, add_generation_prompt=agp, functions=None,
               function_call=None, tools=None, tool_choice=None)
    ctx.update(kw)
    return json.dumps(ctx)


def jinja_render_llmk(template, ctx_json):
    """llmk's prompt, or the ValueError."""
    try:
        if isinstance(template, str):
            template = _llmk.JinjaTemplate(template)
        return template.render(ctx_json, NOW).decode()
    except ValueError as e:
        return e


def _cases(n_random):
    cases = [(m, kw, agp) for m, kw in CONVERSATIONS for agp in (True, False)]
    rng = random.Random(1234)
    cases += [random_case(rng) for _ in range(n_random)]
    return [(m, kw, agp, context_json(m, kw, agp)) for m, kw, agp in cases]


CASES = _cases(RANDOM_CASES)


def compare(label, template, n_random=RANDOM_CASES):
    """(number of cases jinja2 renders, first difference or None)."""
    fmts = _formatters(template)
    try:
        compiled = _llmk.JinjaTemplate(template)
    except ValueError as e:
        compiled = e
    rendered = 0
    for i, (m, kw, agp, ctx) in enumerate(CASES[:len(CONVERSATIONS) * 2 + n_random]):
        want = jinja_render(fmts, m, kw, agp)
        got = compiled if isinstance(compiled, ValueError) else jinja_render_llmk(compiled, ctx)
        if want is None:
            if not isinstance(got, ValueError):
                return rendered, f"{label}, case {i}: jinja2 raises, llmk rendered {got!r:.300}"
            continue
        rendered += 1
        if got != want:
            return rendered, f"{label}, case {i} {m!r:.300} {kw.keys()} agp={agp}:\n llmk   {got!r:.2000}\n jinja2 {want!r:.2000}"
    return rendered, None


@pytest.fixture(scope="module")
def templates_dir():
    r = subprocess.run([str(ROOT / "scripts" / "fetch-llamacpp-vocab")], capture_output=True, text=True, timeout=1200)
    d = Path(r.stdout.strip()) / "templates" if r.returncode == 0 else None
    if d is None or not d.is_dir():
        pytest.skip(f"skipped: llama.cpp's templates cannot be had (scripts/fetch-llamacpp-vocab: {r.stderr.strip()[-200:]})")
    return d


def test_every_llamacpp_template_matches_jinja2(templates_dir):
    """All of llama.cpp's models/templates/*.jinja: byte-identical on every case, or an error on
    both sides. Prints N/M identical and the files jinja2 raises on for every case."""
    files = sorted(templates_dir.glob("*.jinja"))
    assert len(files) >= 70, [f.name for f in files]
    failures, never = [], []
    for path in files:
        rendered, diff = compare(path.name, path.read_text())
        if diff:
            failures.append(diff)
        if rendered == 0:
            never.append(path.name)
    print(f"\nidentical: {len(files) - len(failures)}/{len(files)}; jinja2 raises on every case of: {never}")
    assert not failures, "\n".join(failures)
    assert len(never) <= 2, never  # the cases reach the templates' rendering paths


def _gguf_templates():
    paths = [m for m in (default_model(), gemma_model()) if m is not None]
    r = subprocess.run([str(ROOT / "scripts" / "fetch-llamacpp-vocab")], capture_output=True, text=True, timeout=1200)
    if r.returncode == 0:
        paths += sorted(Path(r.stdout.strip()).glob("ggml-vocab-*.gguf"))
    return {p.name: t for p in paths if (t := _llmk.gguf_chat_template(str(p)))}


def test_gguf_and_builtin_templates_match_jinja2():
    """The templates inside the GGUFs at hand (SmolLM2; Gemma-3-270M is a base model without
    one; the vocab files that carry one) and llmk's built-in ones (chatml, gemma3)."""
    templates = _gguf_templates()
    for name in _llmk.chat_template_names():
        templates[f"built-in {name}"] = _llmk.chat_template_source(name)
    assert "built-in gemma3" in templates and "built-in chatml" in templates
    for label, template in sorted(templates.items()):
        rendered, diff = compare(label, template, n_random=100)
        assert diff is None, diff
        assert rendered > 0, label
    print(f"\n{len(templates)} templates: {sorted(templates)}")


def test_chat_template_api_renders_as_jinja2():
    """render_chat_template (ChatTemplate::render_json): messages, tools and kwargs as JSON."""
    template = chat_format.CHATML_CHAT_TEMPLATE
    assert _llmk.chat_template_source("chatml") == template
    conv = [_m("system", "S"), _m("user", "Hi")]
    for agp in (True, False):
        want = jinja_render(_formatters(template), conv, {}, agp)
        name, got = _llmk.render_chat_template(template, "", json.dumps(conv), agp, BOS, EOS, NOW)
        assert got.decode() == want
    qwen_like = "{{ tools | map(attribute='function') | map(attribute='name') | join(',') }}|{{ enable_thinking }}"
    _, got = _llmk.render_chat_template(qwen_like, "", json.dumps(conv), True, BOS, EOS, NOW, json.dumps(TOOLS),
                                        json.dumps({"enable_thinking": False}))
    assert got.decode() == "get_weather,add|False"


@pytest.mark.parametrize("template,error", [
    ("a\n{% frobnicate %}", "line 2: unknown tag 'frobnicate'"),
    ("{% extends 'base' %}", "line 1: the 'extends' tag is not supported"),
    ("\n{{ x | nosuch }}", "line 2: no filter named 'nosuch'"),
    ("{{ 'a' | wordwrap }}", "line 1: the filter 'wordwrap' is not supported"),
    ("{% for x in [1] %}\n{{ x is nosuchtest }}{% endfor %}", "line 2: no test named 'nosuchtest'"),
    ("{{ raise_exception('roles must alternate') }}", "roles must alternate"),
    ("{% set l = [] %}{{ l.append(1) }}", "immutable sandbox"),
    ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "max_steps"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "max_depth"),
    ("{{ 'x' * 100000000 }}", "max_output"),
])
def test_unsupported_and_hostile_templates_are_errors(template, error):
    with pytest.raises(ValueError, match=error):
        _llmk.JinjaTemplate(template).render("{}", NOW)


needs_cli = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")


@needs_cli
def test_base_model_without_template(tmp_path):
    """Gemma-3-270M (a base model) has no chat template: `llmk chat` says so and suggests
    --chat-template; --chat-template gemma or a template file chats; llmk.LLM the same."""
    model = gemma_model()
    if model is None:
        pytest.skip("skipped: gemma-3-270m not available (scripts/fetch-model gemma-3-270m)")
    r = subprocess.run([str(LLMK), "chat", "--model", str(model), "--prompt", "Hi", "-n", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "has no chat template" in r.stderr and "--chat-template" in r.stderr, r.stderr
    tpl = tmp_path / "t.jinja"
    tpl.write_text(_llmk.chat_template_source("gemma3"))
    for choice in ("gemma", str(tpl)):
        r = subprocess.run([str(LLMK), "chat", "--model", str(model), "--prompt", "Hi", "-n", "2", "--temp", "0",
                            "--chat-template", choice], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    r = subprocess.run([str(LLMK), "chat", "--model", str(model), "--prompt", "Hi", "--chat-template", "vicuna"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "vicuna" in r.stderr and "gemma3" in r.stderr, r.stderr
    llm = llmk.LLM(str(model), kv_tokens=256, max_seqs=1, chat_template="gemma")
    # one <bos>: the template writes it, so encoding adds none
    ids = llm._llm.encode_chat(llm._llm.render_chat([("user", "Hi")], "gemma"))
    assert ids[0] == llm.config["bos_id"] and ids[1] != ids[0]
    assert llm.chat([_m("user", "Hi")], max_tokens=2, temperature=0).finish_reason in ("length", "stop")
    with pytest.raises(ValueError, match="has no chat template"):
        llmk.LLM(str(model), kv_tokens=256, max_seqs=1).chat([_m("user", "Hi")], max_tokens=2)
    with pytest.raises(ValueError, match="chat_template"):
        llmk.LLM(str(model), kv_tokens=256, max_seqs=1, chat_template="vicuna")


def _post(port, path, body):
    import http.client

    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())


@needs_cli
def test_serve_chat_template():
    """`llmk serve` on a model without a template serves completions and answers chat requests
    with a 400 that says why; --chat-template gemma renders them; a bad name stops it."""
    from serve_util import Server

    model = gemma_model()
    if model is None:
        pytest.skip("skipped: gemma-3-270m not available (scripts/fetch-model gemma-3-270m)")
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}
    for extra, chat_status in (([], 400), (["--chat-template", "gemma"], 200)):
        s = Server("--model", str(model), "--kv-tokens", "256", "--max-seqs", "1", *extra)
        try:
            status, body = _post(s.port, "/v1/chat/completions", chat)
            assert status == chat_status, body
            if status == 400:
                assert body["error"]["param"] == "messages" and "has no chat template" in body["error"]["message"], body
            else:  # the prompt: <bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n, one bos
                assert body["usage"]["prompt_tokens"] == len(llmk.LLM(str(model), kv_tokens=256, max_seqs=1).tokenize(
                    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", add_bos=False)) + 1, body
                status, body = _post(s.port, "/v1/chat/completions",
                                     {"messages": [{"role": "assistant", "content": "x"}], "max_tokens": 1})
                assert status == 400 and "Conversation roles must alternate" in body["error"]["message"], body
            status, body = _post(s.port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
            assert status == 200, body
        finally:
            s.stop()
    r = subprocess.run([str(LLMK), "serve", "--port", "0", "--model", str(model), "--chat-template", "vicuna"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "'name' = vicuna" in r.stderr, r.stderr
