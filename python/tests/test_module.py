"""The extension loads and reports its build."""
import llmk


def test_module_reports_build():
    assert llmk.simd_level() in ("scalar", "avx2", "avx512", "avx512vnni", "avx512vbmi")
    assert llmk.num_threads() >= 1
    assert llmk.cuda_device_count() >= 0


def test_bad_thread_count_names_argument():
    import pytest
    with pytest.raises(ValueError, match="'n' = 0"):
        llmk.set_num_threads(0)
