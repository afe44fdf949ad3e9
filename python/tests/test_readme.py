"""The README's Python examples run as written against the built module: the kernels' block,
and the llmk.LLM block on the default model (skipped, saying so, when it is not there)."""
import pathlib
import re

import pytest

from gguf_fixtures import default_model

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def run(code):
    scope = {}
    exec(compile(code, str(README), "exec"), scope)  # any exception fails the test
    return scope


def test_readme_kernel_example_runs():
    blocks = [b for b in python_blocks() if "llmk.LLM" not in b]
    assert blocks, "README.md has no ```python block of the kernels"
    for code in blocks:
        scope = run(code)
    # The kernels' last block returns the op's four outputs for 4 rows, K = 50.
    probs, idx = scope["probs"], scope["idx"]
    assert probs.shape == (4, 50) and idx.shape == (4, 50)
    assert (probs[:, :-1] >= probs[:, 1:]).all()


def test_readme_llm_example_runs(capsys):
    blocks = [b for b in python_blocks() if "llmk.LLM" in b]
    assert len(blocks) == 1, "README.md should hold one ```python block with llmk.LLM"
    if default_model() is None:
        pytest.skip("default model not available (scripts/fetch-model)")
    s = run(blocks[0])
    assert s["out"].text and s["out"].finish_reason in ("length", "eos", "stop")
    assert len(s["outs"]) == 2 and all(o.tokens for o in s["outs"])
    assert s["reply"].text
    assert s["logits"].shape == (len(s["llm"].tokenize("Hello")), s["llm"].config["n_vocab"])
    printed = capsys.readouterr().out
    assert printed.startswith(s["out"].text)
