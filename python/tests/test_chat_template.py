"""llmk's chat templates (include/llmk/chat_template.hpp) against Jinja2 rendering the same
template string as llama-cpp-python does (its Jinja2ChatFormatter: a sandboxed environment
with trim_blocks and lstrip_blocks, raise_exception, strftime_now, bos/eos, tools None).

Every template in llama.cpp's models/templates/ (fetched by scripts/fetch-llamacpp-vocab) is
tried: one llmk recognises must render all CONVERSATIONS byte-identically, with and without
the generation prompt, or fail where Jinja2 raises; one it does not must be refused with an
error that says so. The families the project supports must be recognised, under the names
listed in SUPPORTED. Skips, saying why, when jinja2 / llama_cpp or the templates are missing.
"""
import datetime
import functools
import os
import subprocess
from pathlib import Path

import pytest

import llmk
from llmk import _llmk
from gguf_fixtures import default_model, gemma_model

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
jinja2 = pytest.importorskip("jinja2", reason="jinja2 not installed (scripts/setup)")
chat_format = pytest.importorskip("llama_cpp.llama_chat_format", reason="llama_cpp not installed (scripts/setup-peers)")

BOS, EOS = "<|bos|>", "<|eos|>"
DATE = datetime.datetime(2025, 9, 3, 12, 0, 0)  # what strftime_now sees in the oracle

# Template file (llama.cpp's models/templates/) -> the name llmk must recognise it as.
SUPPORTED = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "chatml",
    "Qwen-Qwen3-0.6B.jinja": "qwen3",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral-nemo",
    "microsoft-Phi-3.5-mini-instruct.jinja": "phi3",
    "google-gemma-2-2b-it.jinja": "gemma2",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-r1-qwen",
}

# Gemma 3's instruct template (google/gemma-3-*-it tokenizer_config.json; gemma-3-270m is a
# base model whose GGUF carries none, and llama.cpp's models/templates/ has no Gemma 3 file).
GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""

# Templates from elsewhere: llama-cpp-python's built-in ones and Gemma 3's.
EXTRA = {
    "llama-cpp-python CHATML_CHAT_TEMPLATE": (chat_format.CHATML_CHAT_TEMPLATE, "chatml"),
    "llama-cpp-python MISTRAL_INSTRUCT_CHAT_TEMPLATE": (chat_format.MISTRAL_INSTRUCT_CHAT_TEMPLATE, "mistral-v0.1"),
    "llama-cpp-python MIXTRAL_INSTRUCT_CHAT_TEMPLATE": (chat_format.MIXTRAL_INSTRUCT_CHAT_TEMPLATE, "mistral-v0"),
    "gemma-3 instruct": (GEMMA3_TEMPLATE, "gemma3"),
}


def _m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    [_m("user", "Hello!")],
    [_m("system", "You are a terse assistant."), _m("user", "What is 2+2?")],
    [_m("user", "Hi"), _m("assistant", "Hello! How can I help?"), _m("user", "Tell me a joke.")],
    [_m("system", "Be kind."), _m("user", "One"), _m("assistant", "Two"), _m("user", "Three"), _m("assistant", "Four")],
    [_m("system", ""), _m("user", ""), _m("assistant", ""), _m("user", "")],
    [_m("user", "Grüße, 世界! 🙂🚀 «ça» — naïve \u00a0nbsp\u3000ideographic"),
     _m("assistant", "日本語で答えます。\u2028line sep 👩‍💻"), _m("user", "e\u0301 {{ not a tag }} {% raw %} 'q' \"dq\" \\n")],
    [_m("system", "\n  padded system \t\n"), _m("user", "  leading and trailing  \n\n"),
     _m("assistant", "\u3000\u00a0answer\u2003\n"), _m("user", "\n\nlast\u0085")],
    [_m("user", "Solve x+1=3."), _m("assistant", "<think>\nx = 3 - 1\n</think>\n\nx = 2"), _m("user", "And x+2=3?"),
     _m("assistant", "<think>\n\nx = 1\n\n</think>\n\n\nx = 1")],
    [_m("user", "first"), _m("user", "second in a row"), _m("assistant", "<think>\nr1\n</think>\n\na1"),
     _m("assistant", "a2")],
    [_m("user", "Hi"), _m("assistant", "Hello"), _m("system", "Switch to French."), _m("user", "Bonjour")],
]


@functools.lru_cache(maxsize=None)
def _formatter(template, add_generation_prompt):
    return chat_format.Jinja2ChatFormatter(template=template, eos_token=EOS, bos_token=BOS,
                                           add_generation_prompt=add_generation_prompt)


def jinja_render(template, messages, add_generation_prompt):
    """The oracle: llama-cpp-python's formatter, its strftime_now fixed to DATE. None when the
    template raises."""
    fmt = _formatter(template, add_generation_prompt)
    saved = chat_format.Jinja2ChatFormatter.strftime_now
    chat_format.Jinja2ChatFormatter.strftime_now = staticmethod(lambda f: DATE.strftime(f))
    try:
        return fmt(messages=messages).prompt
    except Exception:  # raise_exception, or a template error on this input
        return None
    finally:
        chat_format.Jinja2ChatFormatter.strftime_now = saved


def llmk_render(template, messages, add_generation_prompt, name=""):
    """(template name, prompt), or (None, error text) when llmk refuses."""
    pairs = [(m["role"], m["content"]) for m in messages]
    try:
        got_name, text = _llmk.render_chat_template(template, name, pairs, add_generation_prompt, BOS, EOS,
                                                    DATE.strftime("%d %b %Y"))
    except ValueError as e:
        return None, str(e)
    return got_name, text.decode()


def check_template(label, template, expect_name):
    """Renders every conversation both ways; returns the number of prompts compared."""
    compared = 0
    for i, conv in enumerate(CONVERSATIONS):
        for agp in (True, False):
            want = jinja_render(template, conv, agp)
            name, got = llmk_render(template, conv, agp)
            where = f"{label}, conversation {i}, add_generation_prompt={agp}"
            if want is None:
                assert name is None, f"{where}: Jinja2 raises, llmk rendered {got!r}"
                continue
            assert name == expect_name, f"{where}: {got}"
            assert got == want, f"{where}:\n llmk   {got!r}\n jinja2 {want!r}"
            compared += 1
    return compared


@pytest.fixture(scope="module")
def templates_dir():
    r = subprocess.run([str(ROOT / "scripts" / "fetch-llamacpp-vocab")], capture_output=True, text=True, timeout=1200)
    d = Path(r.stdout.strip()) / "templates" if r.returncode == 0 else None
    if d is None or not d.is_dir():
        pytest.skip(f"skipped: llama.cpp's templates cannot be had (scripts/fetch-llamacpp-vocab: {r.stderr.strip()[-200:]})")
    return d


@pytest.mark.parametrize("fname", sorted(SUPPORTED))
def test_supported_templates_match_jinja2(templates_dir, fname):
    template = (templates_dir / fname).read_text()
    # each supported template renders most conversations (the rest raise in Jinja2 too)
    assert check_template(fname, template, SUPPORTED[fname]) >= 8


@pytest.mark.parametrize("label", sorted(EXTRA))
def test_other_templates_match_jinja2(label):
    template, name = EXTRA[label]
    assert check_template(label, template, name) >= 8


PIECES = ["", " ", "\n", "\n\n", "\t", "\u00a0", "\u3000", "\u2028", "\x85", "hi", "Grüße", "日本", "🙂", "<think>",
          "</think>", "<tool_response>", "</tool_response>", "{{ x }}", "'", '"', "\\", "[INST]", "<|im_end|>"]


def random_conversation(rng):
    roles = ["system", "user", "assistant"]
    return [_m(rng.choice(roles), "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 6))))
            for _ in range(rng.randrange(1, 6))]


def test_random_conversations_match_jinja2(templates_dir):
    """Random roles (alternating or not) and contents built from whitespace, Unicode spaces,
    <think> / tool-response tags and template-like text, with and without the generation
    prompt: byte-identical to Jinja2, or an error on both sides. Fixed seed, 150 per template."""
    import random

    templates = {f: ((templates_dir / f).read_text(), n) for f, n in SUPPORTED.items()}
    templates.update(EXTRA)
    for label, (template, name) in sorted(templates.items()):
        rng = random.Random(1234)
        for case in range(150):
            conv, agp = random_conversation(rng), rng.random() < 0.5
            want = jinja_render(template, conv, agp)
            got_name, got = llmk_render(template, conv, agp)
            where = f"{label}, case {case}: {conv!r}, add_generation_prompt={agp}"
            if want is None:
                assert got_name is None, f"{where}: Jinja2 raises, llmk rendered {got!r}"
            else:
                assert got_name == name and got == want, f"{where}:\n llmk   {got!r}\n jinja2 {want!r}"


def test_every_llamacpp_template_is_exact_or_refused(templates_dir):
    """No template is misrendered: each one llmk recognises matches Jinja2 on every
    conversation; the others are refused with an error naming what was found."""
    refused, recognised = [], []
    for path in sorted(templates_dir.glob("*.jinja")):
        template = path.read_text()
        name, text = llmk_render(template, CONVERSATIONS[0], True)
        if name is None:
            assert "is not a chat template llmk knows" in text and f"{len(template.encode())} bytes" in text, (path.name, text)
            refused.append(path.name)
            continue
        recognised.append(path.name)
        check_template(path.name, template, name)
    assert set(SUPPORTED) <= set(recognised), sorted(set(SUPPORTED) - set(recognised))
    print(f"recognised {len(recognised)}: {recognised}\nrefused {len(refused)}: {refused}")


def test_names_render_their_family():
    """--chat-template NAME renders as the recognised template of that family does."""
    conv = CONVERSATIONS[2]
    for label, (template, name) in EXTRA.items():
        assert llmk_render("", conv, True, name)[1] == llmk_render(template, conv, True)[1], label
    assert llmk_render("", conv, True, "gemma")[0] == "gemma3"
    name, err = llmk_render("", conv, True, "vicuna")
    assert name is None and "'name' = vicuna" in err and "chatml" in err and "gemma3" in err


def test_unknown_and_empty_templates_are_errors():
    name, err = llmk_render("{% for m in messages %}{{ m.content }}{% endfor %}", CONVERSATIONS[0], True)
    assert name is None and "is not a chat template llmk knows" in err and "{% for m in messages %}" in err
    name, err = llmk_render("", CONVERSATIONS[0], True)
    assert name is None and "must not be empty" in err


def test_bad_messages_are_errors():
    t = chat_format.CHATML_CHAT_TEMPLATE
    name, err = llmk_render(t, [], True)
    assert name is None and "'messages' = []" in err
    name, err = llmk_render(t, [_m("tool", "x")], True)
    assert name is None and "'messages[0].role' = tool" in err


def test_smollm2_gguf_template():
    """The default model's own template (from the file), its default system prompt included."""
    import gguf

    model = default_model()
    if model is None:
        pytest.skip("skipped: default model not available (scripts/fetch-model)")
    template = gguf.GGUFReader(str(model)).fields["tokenizer.chat_template"].contents()
    assert check_template("SmolLM2 GGUF", template, "chatml") >= 8
    assert llmk_render(template, CONVERSATIONS[0], True)[1].startswith(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n")


needs_cli = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")


@needs_cli
def test_base_model_without_template():
    """Gemma-3-270M (a base model) has no chat template: `llmk chat` says so and suggests
    --chat-template; with --chat-template gemma it chats, and llmk.LLM does the same."""
    model = gemma_model()
    if model is None:
        pytest.skip("skipped: gemma-3-270m not available (scripts/fetch-model gemma-3-270m)")
    r = subprocess.run([str(LLMK), "chat", "--model", str(model), "--prompt", "Hi", "-n", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "has no chat template" in r.stderr and "--chat-template" in r.stderr, r.stderr
    r = subprocess.run([str(LLMK), "chat", "--model", str(model), "--prompt", "Hi", "-n", "2", "--temp", "0",
                        "--chat-template", "gemma"], capture_output=True, text=True, timeout=120)
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
    import json

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
