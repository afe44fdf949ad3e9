"""llmk's tokenizer against llama.cpp (llama-cpp-python, scripts/setup-peers) on the same GGUF:
identical token ids for a text set with Unicode (accents, CJK, emoji, combining marks, other
scripts and number systems), digits, runs of whitespace and newlines, code, and special tokens;
for 2000 random strings; for the ChatML prompt rendered by the GGUF's own Jinja template; and
on a small random vocabulary written with the gguf package (fixtures); and checks that the
fixtures' random models load and run in llama.cpp. The SentencePiece tokenizer the same way on
Gemma-3-270M's vocabulary (the text set, 2000 random strings with invalid UTF-8, a long text,
add_bos). On llama.cpp's own vocabulary files (ggml-vocab-*.gguf: Llama 3, Qwen2, DeepSeek LLM and
Coder, GPT-2, StarCoder, Refact, Llama SPM, Phi-3): their .inp/.out test vectors, the text set
with each family's special tokens, 2000 random strings with newlines and invalid UTF-8, a long
text, and the BOS / EOS / add_bos / end-of-generation ids. llmk runs through `llmk tokenize
--json`. Skips, saying why, when llama_cpp, the CLI, a model or the vocabulary files are missing.
"""
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from gguf_fixtures import byte_level_vocab, default_model, gemma_model, llamacpp_vocab, write_gpt2, write_llama

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
llama_cpp = pytest.importorskip("llama_cpp", reason="llama_cpp not installed (run scripts/setup-peers)")
pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")

TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "naïve café résumé Ångström façade jalapeño",
    "Größe Straße Übermaß ÆØÅ œuvre",
    "日本語のテキストと中文文本，还有한국어。",
    "Emoji: 🙂🚀👩‍💻🇫🇷 ❤️ 👍🏽",
    "e\u0301 a\u0300 n\u0303 (combining marks)",
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी, ไทย",
    "1234567890 3.14159 -42 1e-9 0x1F 1,000,000",
    "٠١٢٣٤٥٦٧٨٩ ½ ¾ Ⅻ ² ₃ 𝟘𝟙",
    "    four leading spaces",
    "trailing spaces    ",
    "tabs\tand\t\ttabs",
    "line1\nline2\n\nline4\n\n\n",
    "\r\nWindows\r\nline endings\r\n",
    "mixed \t \n \u00a0 \u2003 \u3000 whitespace",
    "  \n  \n",
    " ",
    "",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "<html><body class=\"main\">&amp; &lt;tag&gt;</body></html>",
    "import numpy as np\nnp.zeros((3, 4), dtype=np.float32)\n",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "it's don't we'll they're I've she'd you'm IT'S DON'T",
    "'quoted' \"double\" `backtick` «guillemets» „low“",
    "!!!??? ... --- *** ### @@@ $$$ %%% ^^^ &&& (((]]]",
    "https://example.com/path?q=1&r=two#frag user@example.org",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_end|><|endoftext|>text<|im_start|><repo_name>",
    "<|im_start <|im_start|| <|im_start|>>",
    "\u200b zero\u200dwidth \ufeff bom",
    "\U0001F600\U0001F601 \U00010348 \U0002A6A5",
    "a" * 300,
    "ab " * 100,
    " " * 50 + "x",
    "\n" * 20,
    "x" + "\t" * 7 + "y",
    "Mr. O'Neil's 3rd-place finish (2:03.45) beat 2nd's by 0.5s.",
    "$ ls -la | grep '.gguf' && echo \"done\" > /dev/null 2>&1",
]


def llmk_ids(model, text, *flags):
    p = subprocess.run([str(LLMK), "tokenize", "--model", str(model), "--json", *flags, "--file", "-"],
                       input=text.encode(), capture_output=True, check=True, timeout=120)
    return json.loads(p.stdout)["ids"]


def llmk_ids_lines(model, texts):
    raw = [t if isinstance(t, bytes) else t.encode() for t in texts]
    assert not any(b"\n" in t for t in raw)
    p = subprocess.run([str(LLMK), "tokenize", "--model", str(model), "--json", "--lines", "--file", "-"],
                       input=b"".join(t + b"\n" for t in raw), capture_output=True, check=True, timeout=300)
    return [json.loads(l)["ids"] for l in p.stdout.decode().split("\n") if l]


def vocab_only(model):
    return llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)


@pytest.fixture(scope="module")
def smollm():
    model = default_model()
    if model is None:
        pytest.skip("default model not found (run scripts/fetch-model or set LLMK_MODEL)")
    return model, vocab_only(model)


def test_text_set_matches_llamacpp(smollm):
    model, ref = smollm
    bad = []
    for t in TEXTS:
        want = ref.tokenize(t.encode(), add_bos=False, special=True)
        got = llmk_ids(model, t)
        if got != want:
            bad.append((t, want, got))
    print(f"\nllama.cpp agreement: {len(TEXTS) - len(bad)}/{len(TEXTS)} texts identical")
    assert not bad, "\n".join(f"{t!r}:\n  llama.cpp {w}\n  llmk      {g}" for t, w, g in bad[:5])


def test_special_tokens_as_text_match_llamacpp(smollm):
    model, ref = smollm
    for t in ["<|im_start|>user\nhi<|im_end|>", "<|endoftext|><file_sep>"]:
        assert llmk_ids(model, t, "--no-special") == ref.tokenize(t.encode(), add_bos=False, special=False), t


def test_random_strings_match_llamacpp(smollm):
    model, ref = smollm
    rng = random.Random(0)
    pool = (list("aeiouxyzAEZ      .,;:!?'\"-_()[]{}<>|/\\#@$%&*+=~`^0123456789\t\r")
            + ["'s", "'ll", "'RE", "é", "ß", "ñ", "日", "本", "語", "한", "ا", "ф", "Ω", "🙂", "🚀", "👍🏽", "\u0301",
               "\u00a0", "\u2003", "\u3000", "\u200b", "½", "٣", "Ⅻ", "²", "\U0001d7d8", "<|im_start|>", "<|im_end|>",
               "<|", "|>", "\u0085", "\u2028", "\x0b", "\x0c", "\x1c", "\x7f", "\ufffd"])
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(2000)]
    got = llmk_ids_lines(model, texts)
    assert len(got) == len(texts)
    bad = [(t, w, g) for t, g in zip(texts, got)
           if g != (w := ref.tokenize(t.encode(), add_bos=False, special=True))]
    print(f"\nllama.cpp agreement on random strings: {len(texts) - len(bad)}/{len(texts)} identical")
    assert not bad, "\n".join(f"{t!r}:\n  llama.cpp {w}\n  llmk      {g}" for t, w, g in bad[:5])


def test_long_text_matches_llamacpp(smollm):
    model, ref = smollm
    path = Path("/usr/share/common-licenses/GPL-3")
    if not path.exists():
        pytest.skip(f"{path} not found")
    text = path.read_text()
    assert llmk_ids(model, text) == ref.tokenize(text.encode(), add_bos=False, special=True)


def test_chat_prompt_matches_gguf_template(smollm):
    """`llmk tokenize --chat` (render_chatml + the template's default system prompt) gives the
    ids of the GGUF's own Jinja chat template rendered by Jinja2 and tokenized by llama.cpp."""
    jinja2 = pytest.importorskip("jinja2")
    import gguf

    model, ref = smollm
    reader = gguf.GGUFReader(str(model))
    template = reader.fields["tokenizer.chat_template"].contents()
    for user in ["Hi there", "What is 2+2?\nAnswer briefly.", "日本語で 🙂"]:
        prompt = jinja2.Template(template).render(messages=[{"role": "user", "content": user}],
                                                  add_generation_prompt=True)
        assert llmk_ids(model, user, "--chat") == ref.tokenize(prompt.encode(), add_bos=False, special=True), user


@pytest.mark.parametrize("pre", ["smollm", "gpt-2"])
def test_fixture_vocabulary_matches_llamacpp(tmp_path, pre):
    """A small byte-level vocabulary (3 control tokens, 256 bytes, 13 merges) in a random
    llama model written by the gguf package: llmk and llama.cpp agree on it too."""
    model = write_llama(tmp_path / f"tiny-{pre}.gguf", pre=pre, vocab=byte_level_vocab())
    ref = vocab_only(model)
    texts = [t for t in TEXTS if "\n" not in t]
    got = llmk_ids_lines(model, texts)
    for t, g in zip(texts, got):
        assert g == ref.tokenize(t.encode(), add_bos=False, special=True), t


@pytest.mark.parametrize("ggml_type", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"])
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_fixture_models_run_in_llamacpp(tmp_path, arch, ggml_type):
    """The random models of gguf_fixtures are valid for llama.cpp: it loads them and computes
    finite logits over the whole vocabulary (what the engine's tests compare against)."""
    import numpy as np

    write = write_llama if arch == "llama" else write_gpt2
    path = write(tmp_path / f"{arch}-{ggml_type}.gguf", ggml_type=ggml_type)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False)
    llm.eval([5, 6, 7, 8])
    logits = np.array(llm.scores[:4])
    assert logits.shape == (4, len(byte_level_vocab()[0]))
    assert np.isfinite(logits).all() and np.abs(logits).max() > 0


# ---- SentencePiece: Gemma-3-270M's vocabulary (262144 tokens, add_bos, no space prefix) ----

@pytest.fixture(scope="module")
def gemma():
    model = gemma_model()
    if model is None:
        pytest.skip("gemma-3-270m not cached (run scripts/fetch-model gemma-3-270m)")
    return model, vocab_only(model)


def test_gemma_text_set_matches_llamacpp(gemma):
    model, ref = gemma
    bad = []
    for t in TEXTS + ["<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<bos>x<eos><pad>"]:
        want = ref.tokenize(t.encode(), add_bos=False, special=True)
        got = llmk_ids(model, t)
        if got != want:
            bad.append((t, want, got))
    print(f"\nllama.cpp agreement (Gemma): {len(TEXTS) + 2 - len(bad)}/{len(TEXTS) + 2} texts identical")
    assert not bad, "\n".join(f"{t!r}:\n  llama.cpp {w}\n  llmk      {g}" for t, w, g in bad[:5])


def test_gemma_bos_and_no_special_match_llamacpp(gemma):
    model, ref = gemma
    for t in ["Hello", " leading space", "<start_of_turn>user\nhi<end_of_turn>"]:
        assert llmk_ids(model, t, "--bos") == ref.tokenize(t.encode(), add_bos=True, special=True), t
        assert llmk_ids(model, t, "--no-special") == ref.tokenize(t.encode(), add_bos=False, special=False), t


def test_gemma_random_strings_match_llamacpp(gemma):
    """2000 random strings of characters, spaces, special-token text and stray bytes (invalid
    UTF-8: lone continuation bytes, truncated sequences, 0xC0, 0xFF), which become byte tokens."""
    model, ref = gemma
    rng = random.Random(1)
    pool = ([c.encode() for c in "aeiouxyzAEZ      .,;:!?'\"-_()[]{}<>|/\\#@$%&*+=~`^0123456789\t\r"]
            + [c.encode() for c in ["é", "ß", "日", "本", "한", "ф", "Ω", "🙂", "👍🏽", "\u0301", "\u00a0", "\u3000",
                                    "\u200b", "▁", "<start_of_turn>", "<end_of_turn>", "<bos>", "<0x41>", "\ufffd"]]
            + [b"\x80", b"\xbf", b"\xc0", b"\xff", b"\xe6\x97", b"\xf0\x9f", b"\xc3", b"\xed\xa0\x80"])
    texts = [b"".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(2000)]
    got = llmk_ids_lines(model, texts)
    assert len(got) == len(texts)
    bad = [(t, w, g) for t, g in zip(texts, got) if g != (w := ref.tokenize(t, add_bos=False, special=True))]
    print(f"\nllama.cpp agreement on random strings (Gemma): {len(texts) - len(bad)}/{len(texts)} identical")
    assert not bad, "\n".join(f"{t!r}:\n  llama.cpp {w}\n  llmk      {g}" for t, w, g in bad[:5])


def test_gemma_long_text_matches_llamacpp(gemma):
    model, ref = gemma
    path = Path("/usr/share/common-licenses/GPL-3")
    if not path.exists():
        pytest.skip(f"{path} not found")
    text = path.read_text()
    assert llmk_ids(model, text) == ref.tokenize(text.encode(), add_bos=False, special=True)


SPM_VOCABS = ["llama-spm", "phi-3"]
# llama.cpp's byte-level BPE vocabularies llmk reads: Llama 3 ("llama-bpe"), Qwen2, DeepSeek LLM and
# Coder, GPT-2 and the StarCoder family ("digits then gpt2").
BPE_VOCABS = ["llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "gpt-2", "starcoder", "refact"]
# Each family's special tokens, written into texts.
FAMILY_TEXTS = {
    "llama-bpe": ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eom_id|>x<|end_of_text|><|python_tag|>",
                  "<|begin_of_text <|eot_id||>"],
    "deepseek-llm": ["<｜begin▁of▁sentence｜>User: hi\n\nAssistant: ok<｜end▁of▁sentence｜>", "，。！“” µᎠＡ ａ１",
                     "<｜begin▁of▁sentence <｜end▁of▁sentence｜｜>"],
    "deepseek-coder": ["<｜begin▁of▁sentence｜>### Instruction:\nhi\n### Response:\n<|EOT|>", "<｜fim▁begin｜>a<｜fim▁hole｜>b<｜fim▁end｜>",
                       "<｜begin▁of▁sentence <|EOT||>"],
    "qwen2": ["<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
              "<|endoftext|><|fim_prefix|>a<|fim_suffix|>b<|fim_middle|><|file_sep|><|repo_name|>", "<|im_start <|im_end||>"],
}
NEWLINE_TEXTS = ["a\nb", "a\r\nb", "\n\n\n", " \n \n ", "x \n\n  y", "x\t\r\n\ty", "!!\n\n??\r\n",
                 "1234\n5678", "it's\nIT'S\r'll", "end with newline\n", "\r\r\n\n\r", "  \u00a0\n\u3000\n"]


def random_bytes_texts(seed, n, specials, newlines):
    """n random byte strings from a pool of characters, whitespace (newlines when asked), the
    vocabulary's special-token text and invalid UTF-8 (lone continuation bytes, truncated
    sequences, 0xC0, 0xFF, an overlong form, a surrogate). Sequences that decode above U+10FFFF
    are left out: llama.cpp aborts on them."""
    rng = random.Random(seed)
    pool = ([c.encode() for c in "aeiouxyzAEZ      .,;:!?'\"-_()[]{}<>|/\\#@$%&*+=~`^0123456789\t\r"]
            + [c.encode() for c in ["'s", "'ll", "'RE", "'T", "é", "ß", "ñ", "日", "本", "한", "ا", "ф", "Ω", "🙂",
                                    "👍🏽", "\u0301", "\u00a0", "\u2003", "\u3000", "\u200b", "½", "٣", "Ⅻ", "²",
                                    "\U0001d7d8", "\u0085", "\u2028", "\x0b", "\x0c", "\x7f", "\ufffd", "<|", "|>", "，",
                                    "。", "“", "µ", "Ꭰ", "Ａ", "\u3001", "\u1680", "\u180e"]]
            + [t.encode() for t in specials]
            + [b"\x80", b"\xbf", b"\xc0", b"\xff", b"\xe6\x97", b"\xf0\x9f", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"]
            + ([b"\n", b"\r\n", b"\n\n"] if newlines else []))
    return [b"".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def llmk_ids_records(model, texts):
    """llmk's ids of each text (bytes, may hold newlines), NUL-separated through --lines --null."""
    assert not any(b"\0" in t for t in texts)
    p = subprocess.run([str(LLMK), "tokenize", "--model", str(model), "--json", "--lines", "--null", "--file", "-"],
                       input=b"".join(t + b"\0" for t in texts), capture_output=True, check=True, timeout=300)
    return [json.loads(l)["ids"] for l in p.stdout.decode().split("\n") if l]


def vocab_file(name):
    got = llamacpp_vocab(name)
    if got is None:
        pytest.skip("skipped: llama.cpp's vocab files could not be fetched (scripts/fetch-llamacpp-vocab)")
    return got


@pytest.fixture(scope="module", params=BPE_VOCABS)
def bpe_vocab(request):
    model, cases = vocab_file(request.param)
    return request.param, model, vocab_only(model)


def compare(name, model, ref, texts, label):
    got = llmk_ids_records(model, texts)
    assert len(got) == len(texts)
    bad = [(t, w, g) for t, g in zip(texts, got) if g != (w := ref.tokenize(t, add_bos=False, special=True))]
    print(f"\n{name}: llama.cpp agreement on {label}: {len(texts) - len(bad)}/{len(texts)} identical")
    assert not bad, "\n".join(f"{t!r}:\n  llama.cpp {w}\n  llmk      {g}" for t, w, g in bad[:5])


def test_bpe_vocab_text_set_matches_llamacpp(bpe_vocab):
    name, model, ref = bpe_vocab
    texts = [t.encode() for t in TEXTS + NEWLINE_TEXTS + FAMILY_TEXTS.get(name, [])]
    compare(name, model, ref, texts, "the text set")
    for t in texts[-3:]:  # special tokens as text
        assert llmk_ids(model, t.decode(), "--no-special") == ref.tokenize(t, add_bos=False, special=False), t


def test_bpe_vocab_random_strings_match_llamacpp(bpe_vocab):
    name, model, ref = bpe_vocab
    specials = [t for t in FAMILY_TEXTS.get(name, [])[:1]]
    compare(name, model, ref, random_bytes_texts(2, 2000, specials, newlines=True), "2000 random strings")


def test_bpe_vocab_long_text_matches_llamacpp(bpe_vocab):
    name, model, ref = bpe_vocab
    path = Path("/usr/share/common-licenses/GPL-3")
    if not path.exists():
        pytest.skip(f"{path} not found")
    text = path.read_bytes()
    assert llmk_ids(model, text.decode()) == ref.tokenize(text, add_bos=False, special=True)


def check_metadata(name, model, ref):
    """BOS / EOS ids, add_bos / add_eos (what --bos adds) and the end-of-generation set, as
    llama.cpp reads them from the same file."""
    info = json.loads(subprocess.run([str(LLMK), "tokenize", "--model", str(model), "--vocab"], capture_output=True,
                                     check=True, timeout=120).stdout)
    vocab = llama_cpp.llama_model_get_vocab(ref.model)
    n = llama_cpp.llama_vocab_n_tokens(vocab)
    assert info["n_vocab"] == n
    assert info["bos"] == llama_cpp.llama_vocab_bos(vocab) and info["eos"] == llama_cpp.llama_vocab_eos(vocab)
    assert info["add_bos"] == llama_cpp.llama_vocab_get_add_bos(vocab)
    assert info["add_eos"] == llama_cpp.llama_vocab_get_add_eos(vocab)
    assert info["eog"] == [i for i in range(n) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    for t in ["Hello", " leading space", "x\ny"]:
        assert llmk_ids(model, t, "--bos") == ref.tokenize(t.encode(), add_bos=True, special=True), t
    print(f"\n{name}: bos {info['bos']} eos {info['eos']} add_bos {info['add_bos']} eog {info['eog']}")


@pytest.mark.parametrize("name", BPE_VOCABS + SPM_VOCABS)
def test_vocab_metadata_matches_llamacpp(name):
    model, _ = vocab_file(name)
    check_metadata(name, model, vocab_only(model))


def test_model_vocab_metadata_matches_llamacpp(smollm):
    check_metadata("SmolLM2", *smollm)


def test_gemma_vocab_metadata_matches_llamacpp(gemma):
    check_metadata("Gemma-3", *gemma)


@pytest.mark.parametrize("name", SPM_VOCABS + BPE_VOCABS)
def test_llamacpp_vocab_test_vectors(name):
    """llama.cpp's own test vectors (test-tokenizer-0: no BOS, special tokens as text): llmk
    gives the .out ids, and so does llama.cpp on the same file."""
    model, cases = vocab_file(name)
    ref = vocab_only(model)
    assert len(cases) > 20
    bad = []
    for text, want in cases:
        ids = llmk_ids(model, text, "--no-special")
        if ids != want or ref.tokenize(text.encode(), add_bos=False, special=False) != want:
            bad.append((text, want, ids))
    print(f"\n{name}: {len(cases) - len(bad)}/{len(cases)} test vectors identical")
    assert not bad, "\n".join(f"{t!r}:\n  expected {w}\n  llmk     {g}" for t, w, g in bad[:5])
