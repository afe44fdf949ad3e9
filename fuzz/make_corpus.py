#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (committed; re-run only to change it):
  fuzz/corpus/gguf/       small GGUF files: random tiny llama/gpt2 models in each tensor type
                          (gguf package, python/tests/gguf_fixtures.py), v2 and v3 headers,
                          every metadata type, nested arrays, alignment 64, no tensors;
  fuzz/corpus/tokenizer/  texts: Unicode, digits, whitespace runs, code, special tokens, Llama 3 patterns;
  fuzz/corpus/chat_template/  a template text, a context (JSON), then messages (role byte % 4:
                          system, user, assistant, tool; then the content), separated by 0x00;
                          the templates from llama.cpp's models/templates/ (scripts/fetch-llamacpp-vocab).
Run: .venv/bin/python fuzz/make_corpus.py"""
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python" / "tests"))
from gguf_fixtures import write_gpt2, write_llama  # noqa: E402


def s(x: bytes) -> bytes:
    return struct.pack("<Q", len(x)) + x


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key.encode()) + struct.pack("<I", vtype) + payload


def header(version: int, n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def main():
    g = HERE / "corpus" / "gguf"
    t = HERE / "corpus" / "tokenizer"
    g.mkdir(parents=True, exist_ok=True)
    t.mkdir(parents=True, exist_ok=True)
    # A tiny vocabulary (not all 256 bytes: unknown bytes then exercise the fallback), so the
    # embedding stays small and the files short.
    merges = ["Ġ t", "h e", "Ġt he"]
    vocab = (["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + list("abcdehnotĠĊ") + [m.replace(" ", "") for m in merges],
             [3, 3, 3] + [1] * 11 + [1] * len(merges), merges)
    small = dict(n_layer=1, n_embd=32, n_head=2, n_head_kv=1, n_ff=32, ctx=16, vocab=vocab)
    for ty in ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"]:
        write_llama(g / f"llama-{ty.lower()}.gguf", ggml_type=ty, **small)
    write_gpt2(g / "gpt2-q8_0.gguf", n_layer=1, n_embd=32, n_head=2, n_ff=32, ctx=16, ggml_type="Q8_0", vocab=vocab)
    # Every metadata type, by hand, in v2 and v3; a nested array; no tensors.
    kvs = [kv("u8", 0, b"\x07"), kv("i8", 1, b"\xff"), kv("u16", 2, b"\x01\x02"), kv("i16", 3, b"\xfe\xff"),
           kv("u32", 4, struct.pack("<I", 7)), kv("i32", 5, struct.pack("<i", -7)), kv("f32", 6, struct.pack("<f", 1.5)),
           kv("bool", 7, b"\x01"), kv("str", 8, s("caf\xc3\xa9".encode("latin-1"))),
           kv("u64", 10, struct.pack("<Q", 1 << 40)), kv("i64", 11, struct.pack("<q", -(1 << 40))),
           kv("f64", 12, struct.pack("<d", 0.25)),
           kv("arr.i32", 9, struct.pack("<IQ", 5, 3) + struct.pack("<3i", 1, -2, 3)),
           kv("arr.str", 9, struct.pack("<IQ", 8, 2) + s(b"a") + s(b"bc")),
           kv("arr.nested", 9, struct.pack("<IQ", 9, 2) + struct.pack("<IQ", 0, 2) + b"\x01\x02"
              + struct.pack("<IQ", 8, 1) + s(b"x"))]
    for v in (2, 3):
        (g / f"metadata-v{v}.gguf").write_bytes(header(v, 0, len(kvs)) + b"".join(kvs))
    # Alignment 64 and one F32 tensor [8, 2] at offset 0.
    body = header(3, 1, 1) + kv("general.alignment", 4, struct.pack("<I", 64))
    body += s(b"w") + struct.pack("<I", 2) + struct.pack("<QQ", 8, 2) + struct.pack("<IQ", 0, 0)
    body += b"\0" * (-len(body) % 64) + struct.pack("<16f", *range(16))
    (g / "align64.gguf").write_bytes(body)
    (g / "empty.gguf").write_bytes(header(3, 0, 0))
    texts = {
        "ascii.txt": "Hello, world! The quick brown fox.",
        "unicode.txt": "naïve café 日本語 🙂👍🏽 e\u0301 Ελληνικά ٣٤ ½ Ⅻ",
        "whitespace.txt": "  a\n\n  b\t\t c   \r\n\u00a0\u3000 ",
        "code.txt": "def f(x):\n    return x ** 2  # it's 100%\n",
        "special.txt": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "digits.txt": "1234567890 3.14 1e-9 0x1F",
        "llama3.txt": "<|begin_of_text|>It'S 12345 world\n\n  y\r\n!!\n\n?<|eot_id|>\u00a0b e\u0301t 'LL\n",
    }
    for name, text in texts.items():
        (t / name).write_text(text, encoding="utf-8")
    (t / "invalid.bin").write_bytes(b"a\xff\xe6\x97 b\xc0\xaf\xed\xa0\x80\xf0\x9f\x99")
    chat_template_corpus()
    for p in sorted(g.iterdir()):
        print(f"{p.relative_to(HERE)}: {p.stat().st_size} bytes")


def chat_template_corpus():
    import subprocess

    c = HERE / "corpus" / "chat_template"
    c.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([str(HERE.parent / "scripts" / "fetch-llamacpp-vocab")], capture_output=True, text=True, check=True)
    templates = Path(r.stdout.strip()) / "templates"
    smollm2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
               "system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}"
               "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}").encode()
    seeds = {
        "smollm2": (smollm2, b"\x00\x01Hello\x00\x02Hi there\x00\x01again"),
        "llama3": ("meta-llama-Llama-3.2-3B-Instruct.jinja", b"\x00\x00 sys \x00\x01\xe3\x80\x80x\xc2\xa0"),
        "qwen3": ("Qwen-Qwen3-0.6B.jinja", b"\x00\x01q\x00\x02<think>\nr\n</think>\n\na\x00\x01q2\x00\x02b"),
        "deepseek": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", b"\x00\x00S\x00\x01u\x00\x02</think>a"),
        "gemma": ("google-gemma-2-2b-it.jinja", b"\x00\x01u\x00\x02a\x00\x02b"),
    }
    import json

    ctx = json.dumps({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": None,
                                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
                                   {"role": "tool", "content": "ok", "tool_call_id": "c1"}],
                      "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True,
                      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                      "enable_thinking": False}).encode()
    seeds["qwen3-coder"] = ("Qwen3-Coder.jinja", b"\x00\x01q\x00\x03tool result")
    seeds["gpt-oss"] = ("openai-gpt-oss-120b.jinja", b"\x00\x00sys\x00\x01q")
    for name, (template, messages) in seeds.items():
        text = template if isinstance(template, bytes) else (templates / template).read_bytes()
        (c / name).write_bytes(text + b"\x00" + ctx + messages)


if __name__ == "__main__":
    main()
