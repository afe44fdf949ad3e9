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


@pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")
def test_unknown_option_is_named():
    p = run("bench", "triad", "--bogus", "3", check=False)
    assert p.returncode == 2
    assert "'--bogus' = 3" in p.stderr
