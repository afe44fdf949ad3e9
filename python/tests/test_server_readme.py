"""README's serving examples run as written against `llmk serve`: the curl command and
the ```python3 block, with the server on a free port put where they say 8080."""
import json
import re
import subprocess

import pytest

from serve_util import LLMK, ROOT, Server

pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
README = (ROOT / "README.md").read_text()
SERVING = README[README.index("## Serving"):README.index("## Python")]


def test_readme_curl_and_openai_examples_run():
    pytest.importorskip("openai")
    curl = re.findall(r"```sh\n(.*?)```", SERVING, re.S)
    code = re.findall(r"```python3\n(.*?)```", SERVING, re.S)
    assert len(curl) == 1 and len(code) == 1, "README's Serving section has one sh and one python3 block"
    s = Server()
    try:
        port = str(s.port)
        out = subprocess.run(["bash", "-c", curl[0].replace("8080", port)], capture_output=True, text=True,
                             check=True, timeout=300).stdout
        body = json.loads(out)
        assert body["choices"][0]["message"]["content"], body
        exec(compile(code[0].replace("8080", port), "README.md", "exec"), {})  # any exception fails the test
    finally:
        assert s.stop() == 0
