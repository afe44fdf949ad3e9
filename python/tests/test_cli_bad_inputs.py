"""The CLI on bad options and files: an error (exit 2) naming the option and the value,
never a crash, a silently changed value, or an option dropped on the floor. Runs on a
tiny fixture model; no benchmark and no measurement runs here."""
import os
import resource
import subprocess
from pathlib import Path

import pytest

from gguf_fixtures import write_llama

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(write_llama(tmp_path_factory.mktemp("cli") / "tiny.gguf"))


def run(*args, preexec_fn=None):
    return subprocess.run([str(LLMK), *map(str, args)], capture_output=True, text=True, timeout=120,
                          preexec_fn=preexec_fn)


def error(*args):
    p = run(*args)
    assert p.returncode == 2, (args, p.returncode, p.stdout[-300:], p.stderr)
    return p.stderr


def test_thread_counts_are_checked_before_the_cast(model):
    # checked as given: 100000 would crash libgomp (SIGSEGV), 4294967297 must not wrap to 1 thread
    for t in ("100000", "4294967297", "0"):
        assert f"argument '--threads' = {t}: must be an integer in [1, 1024]" in error(
            "generate", "--model", model, "-n", "1", "--threads", t, "hi")


def test_top_k_beyond_int32_is_off_not_greedy(model):
    def text(k):
        p = run("generate", "--model", model, "-n", "8", "--temp", "1", "--seed", "5", "--top-k", k, "hi")
        assert p.returncode == 0, p.stderr
        return p.stdout
    assert text("4294967297") == text("0")  # no wrap to int32_t(4294967297) = 1 (greedy)
    assert "argument '--top-k' = -1: must be an integer >= 0" in error(
        "generate", "--model", model, "-n", "1", "--top-k", "-1", "hi")


def test_integers_out_of_range_are_named_not_saturated(model):
    big = "99999999999999999999"
    # named as given, never clamped to 2^63 - 1 (whose KV size would overflow)
    assert f"argument '-n' = {big}: must be a 64-bit integer" in error("generate", "--model", model, "-n", big, "hi")
    assert "argument '-n' = 9223372036854775807: must be in [1, 2^31]" in error(
        "generate", "--model", model, "-n", "9223372036854775807", "hi")
    assert "argument '-n' = : must be an integer" in error("generate", "--model", model, "-n", "", "hi")  # not 0
    assert f"argument '--seed' = {big}" in error("generate", "--model", model, "-n", "1", "--seed", big, "hi")
    assert "argument '--seed' = -1: must be an integer >= 0" in error(  # not 2^64 - 1
        "generate", "--model", model, "-n", "1", "--seed", "-1", "hi")
    assert "argument '--kv-tokens' = -5: must be an integer >= 0" in error(  # not ignored
        "generate", "--model", model, "-n", "1", "--kv-tokens", "-5", "hi")
    assert "argument '--temp' = 1e400: is beyond the range of a double" in error(
        "generate", "--model", model, "-n", "1", "--temp", "1e400", "hi")
    assert "argument '--chunks' = -1: must be an integer >= 0" in error(
        "perplexity", "--model", model, "--file", __file__, "--chunks", "-1")


def test_a_second_n_is_not_prompt_text(model):
    assert "argument '-n' = 2: is given twice" in error("generate", "--model", model, "-n", "1", "-n", "2", "hi")


def test_files_that_hold_nothing_are_named(model, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert f"argument '--prompts' = {empty}: holds no prompt" in error(
        "generate", "--model", model, "-n", "1", "--prompts", empty)
    # a directory read as an empty text: "--prompt (missing)", "0 tokens", "holds 0 tokens"
    assert f"argument '--prompts' = {tmp_path}: is a directory" in error(
        "generate", "--model", model, "-n", "1", "--prompts", tmp_path)
    assert f"argument '--file' = {tmp_path}: is a directory" in error("tokenize", "--model", model, "--file", tmp_path)
    assert f"argument '--file' = {tmp_path}: is a directory" in error("perplexity", "--model", model, "--file", tmp_path)
    assert "argument '--dump-logits' = \"\": needs a file name" in error(  # not ignored
        "generate", "--model", model, "-n", "1", "--dump-logits", "", "hi")


def test_ignored_arguments_are_errors(model):
    assert "argument 'positional' = extra: unexpected" in error("info", "extra")
    assert "argument 'positional' = extra: unexpected" in error(
        "perplexity", "--model", model, "--file", __file__, "extra")
    assert "argument 'positional' = extra: unexpected" in error("analyze", "--device", "h100", "extra")
    # the unknown option, not the missing prompt it may have swallowed
    assert "argument '--bogus': unknown option" in error("generate", "--model", model, "--bogus")


def test_analyze_rates_must_be_finite():
    assert "argument '--act-bytes' = inf: must be finite and > 0" in error("analyze", "--device", "h100",
                                                                           "--act-bytes", "inf")
    assert "argument '--bandwidth' = inf" in error("analyze", "--device", "cpu", "--bandwidth", "inf",
                                                   "--peak-tflops", "1")


def test_out_of_memory_says_so(model):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    p = run("generate", "--model", model, "-n", "1", "--kv-tokens", "100000000", "hi", preexec_fn=limit)
    assert p.returncode == 3 and p.stderr.startswith("error: out of memory"), p.stderr  # not "error: std::bad_alloc"


def test_passing_a_rope_models_trained_context_warns(model):
    # The fixture's llama has a trained context of n_ctx tokens; asking for more still runs
    # (RoPE has no learned positions) but says so on stderr, naming the numbers.
    p = run("generate", "--model", model, "-n", "300", "--kv-tokens", "512", "hi")  # n_ctx 256
    assert p.returncode == 0, p.stderr
    assert "passes the model's trained context (n_ctx = " in p.stderr, p.stderr
    q = run("generate", "--model", model, "-n", "4", "hi")
    assert q.returncode == 0 and "trained context" not in q.stderr, q.stderr


def test_flag_values_are_true_or_false(model):
    # --kv-rotate=maybe was on
    assert "argument '--kv-rotate' = maybe: must be 1, true, 0 or false" in error(
        "generate", "--model", model, "-n", "1", "--kv-rotate=maybe", "hi")
    p = run("generate", "--model", model, "-n", "1", "--json=false", "hi")
    assert p.returncode == 0 and not p.stdout.startswith("{"), p.stdout


def test_an_option_given_twice_is_an_error(model):
    # neither is silently dropped
    assert "argument '--temp' = 0.7: is given twice (first as --temp 0.5)" in error(
        "generate", "--model", model, "-n", "1", "--temp", "0.5", "--temp", "0.7", "hi")
    assert "argument '-n' = 3: is given twice (first as --n 2)" in error(
        "generate", "--model", model, "--n", "2", "-n", "3", "hi")
    assert "argument '--device' = l4: is given twice" in error("analyze", "--device", "h100", "--device", "l4")


def test_short_options_are_not_prompt_text(model):
    # llama.cpp's "-m F -p TEXT" generated from the prompt "-m F -p TEXT"
    assert "argument '-m': unknown option" in error("generate", "--model", model, "-n", "1", "-m", "x.gguf", "-p", "hi")
    assert "argument '-n': unknown option for this command" in error("tokenize", "--model", model, "-n", "3", "hi")
    # after "--" every word is text ("--" itself was prompt text)
    p = run("generate", "--model", model, "-n", "1", "--json", "--", "-m", "-n")
    assert p.returncode == 0 and '"prompt": "-m -n"' in p.stdout, (p.stdout, p.stderr)


def test_an_option_is_not_the_value_of_the_one_before(model):
    # --stop took "--json" as its text, and the output was not JSON
    assert "argument '--stop' = (missing): this option takes a value (--stop=VALUE" in error(
        "generate", "--model", model, "-n", "1", "--stop", "--json", "hi")
    assert "argument '--system' = (missing)" in error("chat", "--model", model, "-n", "1", "--system", "--prompt", "hi")
    assert "argument '-x': unknown option" in error("chat", "--model", model, "-n", "1", "--prompt", "-x")
    p = run("chat", "--model", model, "-n", "1", "--prompt=-x")
    assert p.returncode == 0, p.stderr


def test_a_bad_option_is_named_before_the_default_model_is_fetched(tmp_path):
    # Options are checked before the default model is fetched (a 90 MB download when missing).
    # An unwritable cache makes scripts/fetch-model fail at once if it runs.
    env = {k: v for k, v in os.environ.items() if k != "LLMK_MODEL"}
    env["LLMK_CACHE"] = "/proc/llmk-no-cache"
    for args in (["generate", "--bogus", "hi"], ["chat", "--bogus"], ["tokenize", "--bogus", "hi"],
                 ["perplexity", "--file", __file__, "--bogus"]):
        p = subprocess.run([str(LLMK), *args], capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 2 and "argument '--bogus': unknown option" in p.stderr, (args, p.stderr)
        assert "fetch" not in p.stderr, (args, p.stderr)


def test_a_model_path_is_named(model, tmp_path):
    for path, why in ((tmp_path / "none.gguf", "cannot be opened"), (tmp_path, "is a directory")):
        assert f"argument '--model' = {path}: {why}" in error("generate", "--model", path, "-n", "1", "hi")
    assert "argument '--model' = \"\": needs a path" in error("tokenize", "--model", "", "hi")


def test_empty_values_are_named(model):
    # chat answered an empty message; the others said "(missing)" or named TEXT
    assert "argument '--prompt' = \"\": must not be empty" in error("chat", "--model", model, "-n", "1", "--prompt", "")
    assert "argument '--file' = \"\": needs a file name" in error("tokenize", "--model", model, "--file", "")
    assert "argument '--file' = \"\": give the text" in error("perplexity", "--model", model, "--file", "")
    assert "argument '--prompts' = \"\": needs a file name" in error("generate", "--model", model, "--prompts", "")


def test_sampling_values_are_named_as_options(model):
    # the engine named 'temperature (request.sampling)' = inf, float(1e39); and 'top_p' = 0 for 1e-50
    for opt, v in (("--temp", "1e39"), ("--temp", "nan"), ("--temp", "-1"), ("--top-p", "1e-50"),
                   ("--top-p", "1.5"), ("--top-p", "nan")):
        assert f"argument '{opt}' = {v}: must be" in error("generate", "--model", model, "-n", "1", opt, v, "hi")
        assert f"argument '{opt}' = {v}: must be" in error("chat", "--model", model, "-n", "1", opt, v,
                                                           "--prompt", "hi")


def test_bench_options_are_checked_before_any_bench_runs():
    # --only is refused by the benches that do not read it and without a NAME, and every NAME
    # is checked before the first bench runs
    for args, msg in ((["triad", "--only", "x", "--quick"], "argument '--only' = x: bench triad takes no --only"),
                      (["--only", "x"], "argument '--only' = x: needs a bench NAME"),
                      (["attention", "--only", "a,,b", "--quick"], "argument '--only' = a,,b: holds an empty item"),
                      (["triad", "nonexistent", "--quick"], "argument 'NAME' = nonexistent: no such bench"),
                      (["triad", "--model", "gemma-3-270m", "--quick"],
                       "argument '--model' = gemma-3-270m: is read by bench generate and speculative only (not triad)"),
                      # ran nothing and exited 0
                      (["attention", "--only", "llama4", "--quick"], "argument '--only' = llama4: matches no shape"),
                      (["attention", "--only", "int8,B32", "--quick"], "argument '--only' = int8,B32: matches no shape")):
        p = run("bench", *args)
        assert p.returncode == 2 and msg in p.stderr, (args, p.stderr)
        assert p.stdout == "", (args, "a bench ran before the error")


def test_analyze_options_are_named(tmp_path):
    # the option's own name and its whole value
    assert "argument '--kv-type' = f16,f16,f16: must be T or K,V" in error("analyze", "--device", "h100",
                                                                           "--kv-type", "f16,f16,f16")
    assert "argument '--weights' = q3: must be one of" in error("analyze", "--device", "h100", "--weights", "q3")
    # an empty --config is not the default model, and a directory is not an empty JSON text
    assert "argument '--config' = \"\": needs a file name" in error("analyze", "--device", "h100", "--config", "")
    assert f"argument '--config' = {tmp_path}: is a directory" in error("analyze", "--device", "h100",
                                                                          "--config", tmp_path)
    # device names are case-insensitive for the host checks too
    p = run("analyze", "--device", "CPU", "--bandwidth", "10", "--peak-tflops", "1", "--json")
    assert p.returncode == 0 and '"key": "cpu"' in p.stdout, p.stderr


def test_analyze_prints_nothing_when_a_figure_overflows():
    # the tables before the overflowing one were printed, as if the run had succeeded
    for args in (["--batch", "1000000000000"], ["--block", "9223372036854775807"]):
        p = run("analyze", "--device", "h100", *args)
        assert p.returncode == 2 and "overflows a 64-bit integer" in p.stderr, (args, p.stderr)
        assert p.stdout == "", args


def test_kv_type_names_are_the_same_in_every_command(model):
    # generate took q8 / q4 only and analyze int8 / int4 only
    p = run("generate", "--model", model, "-n", "1", "--kv-type", "int8", "--kv-v-type", "int4", "--json", "hi")
    assert p.returncode == 0, p.stderr
    a = run("analyze", "--model", "llama-3-8b", "--device", "h100", "--kv-type", "q8,q4", "--json")
    b = run("analyze", "--model", "llama-3-8b", "--device", "h100", "--kv-type", "int8,int4", "--json")
    assert a.returncode == 0 and a.stdout == b.stdout, a.stderr
    assert "argument '--kv-type' = q3: must be f32|f16|bf16|q8|q4 (or int8|int4)" in error(
        "generate", "--model", model, "-n", "1", "--kv-type", "q3", "hi")


def test_logits_names_bad_ids_and_missing_out(model, tmp_path):
    out = str(tmp_path / "o.f32")
    assert "argument '--ids' = x: must be token ids >= 0" in error("logits", "--model", model, "--ids", "1,2 x", "--out", out)
    assert "argument '--ids' = -3: must be token ids >= 0" in error("logits", "--model", model, "--ids", "-3", "--out", out)
    assert "argument '--ids[1]' = 999: must be < n_vocab = " in error("logits", "--model", model, "--ids", "1 999", "--out", out)
    assert "argument '--ids' = \"\": must hold at least one token id" in error("logits", "--model", model, "--out", out)
    assert "argument '--out' = (missing): give the file the logits go to" in error("logits", "--model", model, "--ids", "1")
