"""The CLI's declared option tables: `llmk <cmd> --help` lists every option with its default,
and the one parser refuses an unknown option, a repeated one, a value out of range and a
non-number for a numeric option, naming the option and the value, in every command. These
errors come before any model is read, so most cases here need no model at all."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from gguf_fixtures import write_llama

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")

KV = {"--kv-type", "--kv-v-type", "--kv-rotate"}
SAMPLING = {"-n", "--temp", "--top-k", "--top-p", "--seed"}
# Every command's options, as declared in tools/llmk/cmd_<name>.cpp.
DECLARED = {
    "analyze": {"--model", "--config", "--device", "--kv-type", "--weights", "--batch", "--context", "--block",
                "--reserve", "--act-bytes", "--bandwidth", "--peak-tflops", "--threads", "--json", "--list"},
    "bench": {"--json", "--quick", "--threads", "--only", "--model", "--replicas", "--router", "--fault", "--weights"},
    "chat": {"--model", "--system", "--prompt", "--chat-template", "--kv-tokens", "--no-prefix-cache",
             "--threads"} | SAMPLING | KV,
    "generate": {"--model", "--prompt", "--prompts", "--stop", "--json", "--kv-tokens", "--max-seqs",
                 "--dump-logits", "--threads", "--spec", "--json-schema", "--grammar"} | SAMPLING | KV,
    "info": {"--model"},
    "logits": {"--model", "--ids", "--out", "--threads"} | KV,
    "perplexity": {"--file", "--model", "--ctx", "--chunks", "--json", "--threads"} | KV,
    "serve": {"--model", "--host", "--port", "--kv-tokens", "--max-seqs", "--max-queue", "--api-key",
              "--chat-template", "--tool-parser", "--reasoning-format", "--no-prefix-cache", "--threads",
              "--drain-timeout", "--spec"} | KV,
    "tokenize": {"--model", "--file", "--lines", "--null", "--json", "--no-special", "--bos", "--chat",
                 "--chat-template", "--vocab"},
}
# The defaults the commands had before they were declared; --help must show the same.
DEFAULTS = {
    ("generate", "-n"): "128", ("chat", "-n"): "256",
    ("generate", "--temp"): "0", ("chat", "--temp"): "0.7",
    ("generate", "--top-k"): "40 with --temp > 0, else 0", ("chat", "--top-k"): "40",
    ("generate", "--top-p"): "1", ("chat", "--top-p"): "0.95", ("generate", "--seed"): "0",
    ("generate", "--kv-type"): "f16", ("chat", "--kv-type"): "f16", ("serve", "--kv-type"): "f16",
    ("perplexity", "--kv-type"): "f32", ("logits", "--kv-type"): "f32",
    ("generate", "--kv-tokens"): "0", ("chat", "--kv-tokens"): "8192", ("serve", "--kv-tokens"): "16384",
    ("generate", "--max-seqs"): "64", ("serve", "--max-seqs"): "32", ("serve", "--max-queue"): "256",
    ("serve", "--host"): "127.0.0.1", ("serve", "--port"): "8080",
    ("perplexity", "--ctx"): "512", ("perplexity", "--chunks"): "0", ("bench", "--threads"): "0",
    ("analyze", "--model"): "smollm2-135m", ("analyze", "--device"): "all", ("analyze", "--kv-type"): "f16",
    ("analyze", "--weights"): "f16", ("analyze", "--batch"): "1", ("analyze", "--block"): "16",
    ("analyze", "--reserve"): "0.1", ("analyze", "--act-bytes"): "2",
    ("generate", "--json"): "off", ("generate", "--kv-rotate"): "off", ("generate", "--threads"): "all cores",
}


def run(*args, **kw):
    return subprocess.run([str(LLMK), *map(str, args)], capture_output=True, text=True, timeout=120, **kw)


def error(*args):
    p = run(*args)
    assert p.returncode == 2, (args, p.returncode, p.stdout[-300:], p.stderr)
    assert p.stdout == "", (args, p.stdout[-300:])
    return p.stderr


def commands():
    return [l.split()[0] for l in run("help").stdout.splitlines() if l.startswith("  ")]


def help_options(cmd):
    """{option: (metavar, help line)} from `llmk cmd --help`'s "options:" section."""
    p = run(cmd, "--help")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("\noptions:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    out = {}
    for l in lines:
        m = re.match(r"  (-h, --help|-?-[a-z][a-z0-9-]*)(?: (\S+))? +(.*)$", l)
        assert m, (cmd, l)
        out[m.group(1)] = (m.group(2), m.group(3))
    return out


def test_every_commands_help_lists_every_declared_option_with_its_default():
    names = commands()
    assert set(names) <= DECLARED.keys(), set(names) - DECLARED.keys()
    for cmd in names:
        opts = help_options(cmd)
        assert opts.pop("-h, --help")[1] == "print this help", cmd
        assert set(opts) == DECLARED[cmd], (cmd, set(opts) ^ DECLARED[cmd])
        for name, (_, line) in opts.items():
            assert re.search(r"; default: \S", line), (cmd, name, line)
    for (cmd, name), default in DEFAULTS.items():
        if cmd in names:
            assert help_options(cmd)[name][1].endswith(f"default: {default}"), (cmd, name, help_options(cmd)[name])


def test_help_shows_ranges_and_value_placeholders():
    opts = help_options("generate")
    assert opts["-n"] == ("N", "new tokens at most; in [1, 2^31]; default: 128")
    assert opts["--threads"][1].endswith("; an integer in [1, 1024]; default: all cores")
    assert opts["--top-p"][1].endswith("; in (0, 1] (and >= 1e-45, a float); default: 1")
    assert opts["--json"][0] is None and opts["--kv-rotate"][0] is None  # flags take no value
    assert "; one of h100, " in help_options("analyze")["--device"][1]
    # --help wins over values the parser would refuse
    p = run("generate", "-n", "0", "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: llmk generate [options]\n"), p.stderr


def test_an_unknown_option_is_named_in_every_command():
    for cmd in commands():
        assert f"error: llmk::cli: argument '--no-such-option': unknown option for this command (see --help)\n" == \
            error(cmd, "--no-such-option", "3"), cmd
        assert "argument '--no-such-option': unknown option" in error(cmd, "--no-such-option=3"), cmd


@pytest.mark.parametrize("args, opt, first, second", [
    (["generate", "--seed", "1", "--seed", "2", "hi"], "--seed", "1", "2"),
    (["chat", "--temp", "0.1", "--temp=0.2"], "--temp", "0.1", "0.2"),
    (["perplexity", "--ctx", "64", "--ctx", "128"], "--ctx", "64", "128"),
    (["logits", "--ids", "1", "--ids", "2"], "--ids", "1", "2"),
    (["tokenize", "--json", "--json", "hi"], "--json", "1", "1"),
    (["analyze", "--batch", "1", "--batch", "8"], "--batch", "1", "8"),
    (["bench", "--threads", "1", "--threads", "2"], "--threads", "1", "2"),
    (["serve", "--port", "1", "--port", "2"], "--port", "1", "2"),
])
def test_a_repeated_option_is_named_with_both_values(args, opt, first, second):
    if args[0] not in commands():
        pytest.skip(f"skipped: no {args[0]} command in this build")
    assert f"argument '{opt}' = {second}: is given twice (first as {opt} {first})" in error(*args)


@pytest.mark.parametrize("args, opt, value, why", [
    (["generate", "--top-p", "2", "hi"], "--top-p", "2", "must be in (0, 1]"),
    (["generate", "--threads", "1025", "hi"], "--threads", "1025", "must be an integer in [1, 1024]"),
    (["chat", "--kv-tokens", "0"], "--kv-tokens", "0", "must be an integer in [1, 65536]"),
    (["chat", "-n", "0"], "-n", "0", "must be in [1, 2^31]"),
    (["perplexity", "--ctx", "3"], "--ctx", "3", "must be an integer >= 4"),
    (["logits", "--threads", "0"], "--threads", "0", "must be an integer in [1, 1024]"),
    (["serve", "--port", "65536"], "--port", "65536", "must be an integer in [0, 65535]"),
    (["serve", "--max-seqs", "4097"], "--max-seqs", "4097", "must be an integer in [1, 4096]"),
    (["bench", "--threads", "-1"], "--threads", "-1", "must be an integer in [0, 1024]"),
    (["analyze", "--reserve", "1"], "--reserve", "1", "must be in [0, 1)"),
    (["analyze", "--bandwidth", "-1"], "--bandwidth", "-1", "must be finite and >= 0"),
    (["analyze", "--device", "tpu"], "--device", "tpu", "must be one of h100, "),
])
def test_a_value_out_of_range_is_named(args, opt, value, why):
    if args[0] not in commands():
        pytest.skip(f"skipped: no {args[0]} command in this build")
    assert f"argument '{opt}' = {value}: {why}" in error(*args)


@pytest.mark.parametrize("args, opt, value, why", [
    (["generate", "--seed", "x", "hi"], "--seed", "x", "must be an integer"),
    (["generate", "-n", "1.5", "hi"], "-n", "1.5", "must be an integer"),
    (["chat", "--temp", "warm"], "--temp", "warm", "must be a number"),
    (["perplexity", "--chunks", "2x"], "--chunks", "2x", "must be an integer"),
    (["serve", "--max-queue", "1e3"], "--max-queue", "1e3", "must be an integer"),
    (["analyze", "--act-bytes", "two"], "--act-bytes", "two", "must be a number"),
    (["bench", "--threads", "all"], "--threads", "all", "must be an integer"),
])
def test_a_non_number_for_a_numeric_option_is_named(args, opt, value, why):
    if args[0] not in commands():
        pytest.skip(f"skipped: no {args[0]} command in this build")
    assert f"argument '{opt}' = {value}: {why}" in error(*args)


def test_an_option_a_mode_does_not_read_is_named():
    assert "argument '--json' = 1: is not used with the other arguments given" in error("analyze", "--list", "--json")


def test_every_kv_command_takes_kv_rotate_as_a_flag(tmp_path):
    # --kv-rotate is declared with the KV options: logits, which did not list it among its
    # flags, took the next word as its value.
    for cmd in ("generate", "chat", "perplexity", "logits", "serve"):
        if cmd in commands():
            assert help_options(cmd)["--kv-rotate"][0] is None, cmd
    model = write_llama(tmp_path / "tiny.gguf")
    out = tmp_path / "o.f32"
    p = run("logits", "--model", model, "--kv-type", "q4", "--kv-rotate", "--ids", "1 2 3", "--out", out)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["kv_type"] == "q4 (K rotated)", p.stdout
