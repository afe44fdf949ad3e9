"""`llmk analyze`: the JSON it prints, its errors, and the plots made from it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")

# f16 KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x 2, with the shapes of each
# model's published Hugging Face config.json (worked out in tests/analyze/test_analyze.cpp).
F16_KIB = {"gpt2-124m": 36, "llama-2-7b": 512, "llama-2-13b": 800, "llama-3-8b": 128, "mistral-7b": 128,
           "llama-3-70b": 320, "smollm2-135m": 22.5}


def analyze(*args, check=True):
    return subprocess.run([str(LLMK), "analyze", *args], capture_output=True, text=True, check=check, timeout=120)


def analyze_json(*args):
    return json.loads(analyze(*args, "--json").stdout)


@pytest.mark.parametrize("model,kib", F16_KIB.items())
def test_kv_table(model, kib):
    a = analyze_json("--model", model, "--device", "h100")
    per = a["kv_bytes_per_token"]
    assert per["f16"] == kib * 1024
    assert per["f32"] == 2 * per["f16"] and per["bf16"] == per["f16"]
    m = a["model"]
    groups = -(-m["head_dim"] // 32)
    assert per["int8"] == 2 * m["n_layers"] * m["n_kv_heads"] * groups * 34
    assert per["int4"] == 2 * m["n_layers"] * m["n_kv_heads"] * groups * 20


def test_capacity_llama3_8b_h100():
    a = analyze_json("--model", "llama-3-8b", "--device", "h100", "--context", "8192")
    (d,) = a["devices"]
    # (80e9 - 8e9 - 2 * 8030261248) // (16 * 131072) = 26674 blocks (hand: see tests/analyze).
    assert d["capacity"] == {"fits": True, "reserve": 8_000_000_000, "weights": 16_060_522_496,
                             "kv_budget": 55_939_477_504, "block_bytes": 2_097_152, "blocks": 26674,
                             "max_context": 426784, "max_batch": 52}
    assert d["ridge"] == pytest.approx(989.4e12 / 3350e9)


def test_does_not_fit_is_said():
    p = analyze("--model", "llama-3-70b", "--device", "h200")
    assert "does not fit" in p.stdout
    a = analyze_json("--model", "llama-3-70b", "--device", "h200")
    assert a["devices"][0]["capacity"]["fits"] is False
    assert a["devices"][0]["capacity"]["max_context"] == 0


def test_config_file_and_its_errors(tmp_path):
    cfg = {"name": "mine", "n_layers": 30, "hidden": 576, "n_heads": 9, "n_kv_heads": 3, "head_dim": 64,
           "ffn": 1536, "vocab": 49152, "tied_embeddings": True, "gated_ffn": True, "params": 134515008}
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps(cfg))
    a = analyze_json("--config", str(f), "--device", "l4", "--context", "4096")
    assert a["model"]["name"] == "mine"
    assert a["kv_bytes_per_token"]["f16"] == 23040
    assert a["model"]["estimated_params"] == 134515008

    bad = dict(cfg, n_head=9)
    f.write_text(json.dumps(bad))
    p = analyze("--config", str(f), "--device", "l4", check=False)
    assert p.returncode == 2 and "'n_head' = 9: unknown key" in p.stderr, p.stderr
    del cfg["vocab"]
    f.write_text(json.dumps(cfg))
    p = analyze("--config", str(f), "--device", "l4", check=False)
    assert p.returncode == 2 and "'vocab' = (missing)" in p.stderr, p.stderr
    p = analyze("--config", str(f), "--model", "gpt2-124m", check=False)
    assert p.returncode == 2 and "not both" in p.stderr
    p = analyze("--model", "llama-9", check=False)
    assert p.returncode == 2 and "'model' = llama-9" in p.stderr
    p = analyze("--device", "h100", "--bandwidth", "5", check=False)
    assert p.returncode == 2 and "'--device' = h100" in p.stderr and "this machine" in p.stderr
    p = analyze("--kv-type", "int3", "--device", "h100", check=False)
    assert p.returncode == 2 and "int3" in p.stderr


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    a = tmp_path / "a.json"
    a.write_text(analyze("--model", "smollm2-135m", "--bandwidth", "10", "--peak-tflops", "0.1", "--json").stdout)
    bench = tmp_path / "triad.json"
    bench.write_text('{"type":"note","kernel":"triad","note":"x"}\n'
                     '{"kernel":"triad","impl":"stream","op":"triad","shape":"768MiB","dtype":"f64",'
                     '"median_ms":80,"gbps":9.5}\n')
    p = subprocess.run([sys.executable, str(ROOT / "scripts/plot_capacity.py"), str(a), "--bench", f"cpu={bench}",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for name in ("smollm2-135m_memory.png", "smollm2-135m_roofline.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    p = subprocess.run([sys.executable, str(ROOT / "scripts/plot_capacity.py"), str(a), "--bench", f"tpu={bench}",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "'tpu' is not in the analysis" in p.stderr
