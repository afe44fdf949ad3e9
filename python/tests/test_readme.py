"""The README's Python example runs as written against the built module."""
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_python_example_runs():
    blocks = python_blocks()
    assert blocks, "README.md has no ```python block"
    for code in blocks:
        scope = {}
        exec(compile(code, str(README), "exec"), scope)  # any exception fails the test
    # The example's last block returns the op's four outputs for 4 rows, K = 50.
    probs, idx = scope["probs"], scope["idx"]
    assert probs.shape == (4, 50) and idx.shape == (4, 50)
    assert (probs[:, :-1] >= probs[:, 1:]).all()
