"""The extension loads and reports its build."""
import llmk


def test_module_reports_build():
    assert llmk.simd_level() in ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512vbmi")
    assert llmk.num_threads() >= 1
    assert llmk.cuda_device_count() >= 0


def test_bad_thread_count_names_argument():
    import pytest
    with pytest.raises(ValueError, match="'n' = 0"):
        llmk.set_num_threads(0)


def test_llmk_simd_caps_the_process():
    # LLMK_SIMD stands in for a smaller machine: set_simd_limit cannot lift the level above it.
    import os, subprocess, sys
    code = "import llmk; llmk.set_simd_limit('avx512vbmi'); print(llmk.simd_level())"
    for cap in ("scalar", "avx2"):
        env = dict(os.environ, LLMK_SIMD=cap)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        allowed = ("scalar",) if cap == "scalar" else ("scalar", "avx2")  # a CPU without AVX2 stays scalar
        assert out.stdout.strip() in allowed, (cap, out.stdout, out.stderr)
