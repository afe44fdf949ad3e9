"""The CLI: every bench runs in --quick mode and speaks the JSON-lines format."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
REQUIRED = {"kernel", "impl", "op", "shape", "dtype", "median_ms", "gbps"}


def run(*args, check=True):
    return subprocess.run([str(LLMK), *args], capture_output=True, text=True, check=check, timeout=900)


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_every_bench_emits_valid_json_lines():
    listing = run("bench").stdout
    names = [l.split()[0] for l in listing.splitlines() if l.startswith("  ")]
    assert "triad" in names
    for name in names:
        if name.endswith("-gpu"):
            continue  # GPU benches run in scripts/gpu-check
        out = run("bench", name, "--quick", "--json").stdout
        rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        measured = [r for r in rows if "type" not in r]
        assert measured, f"bench {name} printed no measurement"
        for r in measured:
            assert REQUIRED <= r.keys(), f"bench {name}: row lacks {REQUIRED - r.keys()}: {r}"
            assert r["median_ms"] > 0, r


def _vocab_cached(name):
    cache = Path(os.environ.get("LLMK_CACHE", Path.home() / ".cache" / "llmk"))
    return (cache / "llamacpp-vocab" / f"ggml-vocab-{name}.gguf").is_file()


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_generate_bench_of_a_real_shape():
    """`bench generate --model llama3-8b --quick`: the shape with 1 layer (a ~0.85 GB file
    written once into the cache), every row with its bandwidth fraction and peak RSS, and
    llama.cpp's rows beside llmk's when the peer is installed."""
    for args, msg in ((["--weights", "q5_k"], "argument '--weights' = q5_k: must be q4_k_m, q4_0 or q8_0"),
                      (["--only", "decode_b9"], "argument '--only' = decode_b9: must be decode_b8,")):
        p = run("bench", "generate", "--model", "llama3-8b", "--quick", *args, check=False)
        assert p.returncode == 2 and msg in p.stderr, p.stderr
    p = run("bench", "generate", "--model", "smollm2-135m", "--weights", "q4_0", check=False)
    assert p.returncode == 2 and "argument '--weights' = q4_0: needs --model SHAPE" in p.stderr, p.stderr
    if not _vocab_cached("llama-bpe"):
        pytest.skip("ggml-vocab-llama-bpe.gguf not cached (scripts/fetch-llamacpp-vocab)")
    out = run("bench", "generate", "--model", "llama3-8b", "--quick", "--json").stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{") and "type" not in json.loads(l)]
    assert any(r["op"] == "triad" and r["gbps"] > 0 for r in rows), rows
    gen = [r for r in rows if r["op"] != "triad" and r["impl"] in ("llmk", "llama.cpp")]
    ops = {(r["impl"], r["op"]) for r in gen}
    assert {("llmk", "prefill"), ("llmk", "decode_b1"), ("llmk", "decode_b8")} <= ops, ops
    for r in gen:
        assert r["median_ms"] > 0 and r["bw_frac"] > 0 and r["peak_rss_mb"] > 0, r
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return
    assert {("llama.cpp", "prefill"), ("llama.cpp", "decode_b1"), ("llama.cpp", "decode_b8")} <= ops, out


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_softmax_topk_only_takes_any_shape_and_names_a_bad_one():
    for bad in ("16x50257", "16x50257x0", "16x8x9", "0x8x2", "4x8x2x", "4x8xtwo"):
        p = run("bench", "softmax-topk", "--only", bad, check=False)
        assert p.returncode == 2, (bad, p.returncode, p.stderr)
        assert f"argument '--only' = {bad}: must be BxVxK" in p.stderr, p.stderr
        assert p.stdout == "", "the bench started before rejecting its --only"
    out = run("bench", "softmax-topk", "--quick", "--json", "--only", "3x1000x7").stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    impls = {r["impl"] for r in rows if r.get("shape") == "3x1000" and r.get("op") == "softmax_topk_k7"}
    assert {"llmk", "llmk_warm", "naive"} <= impls, rows


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_unknown_option_is_named():
    p = run("bench", "triad", "--bogus", "3", check=False)
    assert p.returncode == 2
    assert "argument '--bogus': unknown option" in p.stderr


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_unknown_option_is_reported_without_the_next_token():
    # The parser cannot tell whether --bogus takes a value, so "-n" after it must
    # not be shown as its value; --model names a file that is never opened.
    p = run("generate", "Hi", "--model", "unused.gguf", "--bogus", "-n", "2", check=False)
    assert p.returncode == 2
    assert "error: llmk::cli: argument '--bogus': unknown option for this command (see --help)\n" == p.stderr
    # A last unknown option with nothing after it is unknown, not "missing a value".
    p = run("generate", "Hi", "--model", "unused.gguf", "--bogus", check=False)
    assert p.returncode == 2
    assert "argument '--bogus': unknown option" in p.stderr


def command_names():
    listing = run("help").stdout
    return [l.split()[0] for l in listing.splitlines() if l.startswith("  ")]


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
@pytest.mark.parametrize("opt", ["--help", "-h"])
def test_every_command_prints_its_usage_for_help(opt):
    names = command_names()
    assert {"generate", "bench", "tokenize"} <= set(names)
    help_lines = {l.split()[0]: l for l in run("help").stdout.splitlines() if l.startswith("  ")}
    for name in names:
        p = run(name, opt, check=False)
        assert p.returncode == 0, f"llmk {name} {opt}: {p.stderr}"
        assert p.stdout.startswith(f"usage: llmk {name} [options]\n"), p.stdout
        assert help_lines[name] in p.stdout.splitlines(), p.stdout
    # The flags a command lists are named in its usage.
    assert "options that take no value: --json --kv-rotate" in run("generate", opt).stdout


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_model_short_names():
    """--model takes a known model's short name (fetched into the cache) or a path; anything
    else is named with the known names."""
    p = run("tokenize", "--model", "no-such-model", "hi", check=False)
    assert p.returncode == 2 and "cannot be opened: no such file, nor a known model name (smollm2-135m, gemma-3-270m)" in p.stderr, p.stderr
    from gguf_fixtures import gemma_model

    path = gemma_model()
    if path is None:
        pytest.skip("skipped: gemma-3-270m not cached (scripts/fetch-model gemma-3-270m)")
    by_name = json.loads(run("tokenize", "--model", "gemma-3-270m", "--json", "Hello world").stdout)
    by_path = json.loads(run("tokenize", "--model", str(path), "--json", "Hello world").stdout)
    assert by_name == by_path and by_name["ids"] == [9259, 1902]


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_info_describes_a_model_file(tmp_path):
    """`llmk info --model F`: architecture, shapes, tensor types, tokenizer and template of the file."""
    from gguf_fixtures import write_llama

    path = write_llama(tmp_path / "tiny.gguf", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=96, ggml_type="Q8_0")
    out = run("info", "--model", str(path)).stdout.splitlines()
    assert "architecture: llama" in out, out
    assert any(l.startswith("shapes: n_vocab 272, n_ctx 256, d_model 64, n_layer 2, n_head 4, n_head_kv 2, d_head 16, d_ff 96")
               for l in out), out
    assert any(l.startswith("tensor types: F32 x5 ") and " Q8_0 x15 " in l for l in out), out
    assert "tokenizer: gpt2, pre-tokenizer smollm, 272 tokens, bos 1, eos 2" in out, out
    assert any(l.startswith("chat template: 199 bytes: {% for message in messages %}") for l in out), out
