"""Bad inputs to every function of the module: each is an error that names the
argument and its value (TypeError for a non-array or a non-number, ValueError for
a bad value), never a crash, a wrong argument's name, or a silently changed value."""
import numpy as np
import pytest
import torch

import llmk
from llmk import _llmk

X = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)


def small_cache():
    return llmk.KvCache(n_layers=1, n_kv_heads=2, head_dim=16, budget_bytes=1 << 16, block_tokens=4)


def cache_with_tokens(n=3):
    c = small_cache()
    s = c.add_sequence()
    kv = np.ones((n, 32), np.float32)
    c.write(0, c.append(s, list(range(n))), kv, kv)
    return c, s


@pytest.mark.parametrize("bad", [None, [[1.0, 2.0]], 3.0])
def test_non_arrays_are_type_errors_naming_the_argument(bad):
    for call, name in [(lambda: llmk.layer_norm(bad), "x"), (lambda: llmk.rms_norm(bad), "x"),
                       (lambda: llmk.softmax_topk(bad, 1), "logits"), (lambda: llmk.sample(bad), "logits"),
                       (lambda: llmk.rms_norm_backward(bad, X, None, np.ones(4, np.float32)), "dy"),
                       (lambda: llmk.kv_decode(small_cache(), 0, [0], bad, 2, 0.25), "q")]:
        with pytest.raises(TypeError, match=rf"argument '{name}' = "):
            call()


def test_optional_and_saved_arguments_that_are_not_arrays_are_named():
    with pytest.raises(TypeError, match=r"llmk.layer_norm: argument 'weight' = list"):
        llmk.layer_norm(X, [1.0] * 8)
    _, mean, rstd = llmk.layer_norm(X)
    with pytest.raises(TypeError, match=r"argument 'mean' = None"):
        llmk.layer_norm_backward(X, X, None, None, rstd)
    with pytest.raises(TypeError, match=r"argument 'rstd' = None"):
        llmk.rms_norm_backward(X, X, None, None)
    c, s = cache_with_tokens()
    with pytest.raises(TypeError, match=r"KvCache.write: argument 'k' = None"):
        c.write(0, [0], None, np.ones((1, 32), np.float32))


@pytest.mark.parametrize("make", [lambda: np.ones((4, 8), dtype=object),
                                  lambda: torch.empty(4, 8, device="meta"),
                                  lambda: torch.ones(4, 8).to_sparse(),
                                  lambda: torch.ones(4, 8, dtype=torch.bool)])
def test_arrays_that_cannot_be_viewed_are_named_with_what_they_are(make):
    a = make()
    for call, name in [(lambda: llmk.rms_norm(a), "x"), (lambda: llmk.softmax_topk(a, 1), "logits")]:
        with pytest.raises(ValueError, match=rf"argument '{name}' = \w+(\.Tensor)? \(dtype .*: must be a numpy array"):
            call()


def test_a_wrong_dtype_names_the_input_and_the_dtype():
    # the input is named, never the output allocated like it
    with pytest.raises(ValueError, match=r"llmk.rms_norm: argument 'x' = dtype float64"):
        llmk.rms_norm(X.astype(np.float64))
    with pytest.raises(ValueError, match=r"argument 'x' = dtype bool"):
        llmk.layer_norm(X.astype(bool))
    with pytest.raises(ValueError, match=r"argument 'logits' = dtype int64"):
        llmk.softmax_topk(torch.ones(2, 8, dtype=torch.int64), 1)
    with pytest.raises(ValueError) as e:
        llmk.layer_norm(X, None, None, -1.0)
    assert "llmk::llmk" not in str(e.value) and str(e.value).startswith("llmk::layer_norm: argument 'eps' = -1")


def test_a_read_only_output_is_named():
    y = np.empty_like(X)
    y.setflags(write=False)
    with pytest.raises(ValueError, match=r"argument 'y' = ndarray \(dtype float32\), read-only: must be writable"):
        _llmk.rms_norm_out(X, None, 1e-5, y, np.empty(4, np.float32))


def test_numbers_are_checked_as_given():
    with pytest.raises(TypeError, match=r"argument 'eps' = None: must be a real number"):
        llmk.rms_norm(X, None, None)
    with pytest.raises(TypeError, match=r"argument 'temperature' = '1'"):
        llmk.softmax_topk(X, 2, "1")
    # beyond float32: named with the value passed, not the inf it would have become
    with pytest.raises(ValueError, match=r"argument 'eps' = 1e\+300: must be within float32's range"):
        llmk.layer_norm(X, None, None, 1e300)
    with pytest.raises(TypeError, match=r"argument 'k' = 1.5: must be an integer"):  # not truncated to 1
        llmk.softmax_topk(X, 1.5)


def test_softmax_topk_k_beyond_v_is_named_before_any_allocation():
    # k = 2^31 tried to allocate B x 2^31 outputs first (MemoryError), 2^64 failed in numpy
    with pytest.raises(ValueError, match=r"argument 'k' = 2147483648: must be <= V = 8"):
        llmk.softmax_topk(X, 1 << 31)
    with pytest.raises(ValueError, match=r"argument 'k' = 18446744073709551616"):
        llmk.softmax_topk(X, 1 << 64)
    with pytest.raises(ValueError, match=r"argument 'k' = 0: must be >= 1"):
        llmk.softmax_topk(X, 0)


def test_sample_integer_arguments():
    off = llmk.sample(X, top_k=0, seed=3)
    assert np.array_equal(llmk.sample(X, top_k=1 << 40, seed=3), off)  # >= V is off, as documented
    with pytest.raises(ValueError, match=r"argument 'top_k' = -1099511627776: must be >= 0"):
        llmk.sample(X, top_k=-(1 << 40))
    with pytest.raises(TypeError, match=r"argument 'top_k' = 1.7"):
        llmk.sample(X, top_k=1.7)
    with pytest.raises(ValueError, match=r"argument 'seed' = -1: must be in \[0, 18446744073709551615\]"):
        llmk.sample(X, seed=-1)
    with pytest.raises(ValueError, match=r"argument 'step' = 18446744073709551616"):
        llmk.sample(X, step=1 << 64)
    with pytest.raises(ValueError, match=r"argument 'seed' = -1"):
        llmk.uniform01(-1, 0, 0)
    with pytest.raises(TypeError, match=r"argument 'row' = 1.5"):
        llmk.uniform01(0, 0, 1.5)
    assert llmk.uniform01(2**64 - 1, 0, 0) == _llmk.uniform01(2**64 - 1, 0, 0)


def test_sample_history_entries_are_named():
    with pytest.raises(TypeError, match=r"argument 'history\[0\]\[0\]' = 1.5: must be an integer"):
        llmk.sample(X, history=[[1.5], [], [], []])
    with pytest.raises(ValueError, match=r"argument 'history\[1\]\[0\]' = 2147483648"):
        llmk.sample(X, history=[[], [1 << 31], [], []])
    with pytest.raises(TypeError, match=r"argument 'history' = str"):
        llmk.sample(X, history="abc")
    with pytest.raises(TypeError, match=r"argument 'history\[2\]' = None"):
        llmk.sample(X, history=[[], [], None, []])
    with pytest.raises(ValueError, match=r"argument 'history' = 2 lists: must hold one list per row \(4 rows\)"):
        llmk.sample(X, history=[[], []])
    hist = np.zeros((4, 2), np.int64)  # numpy rows are fine
    assert llmk.sample(X, history=hist, repetition_penalty=1.5).shape == (4,)


def test_sample_of_an_empty_batch_is_empty():
    # a batch of 0 rows needs no params buffer: no "'params' = 0: must not be null"
    t = llmk.sample(np.ones((0, 10), np.float32))
    assert t.shape == (0,) and t.dtype == np.int32


def test_kv_cache_shapes_whose_bytes_overflow_are_named():
    # n_layers x n_kv_heads wrapped int64 to 0: SIGFPE in the block count
    with pytest.raises(ValueError, match=r"'n_layers x n_kv_heads x block_tokens' = 4611686018427387904 x 4 x 16"):
        llmk.KvCache(n_layers=1 << 62, n_kv_heads=4, head_dim=16, budget_bytes=1 << 62)
    with pytest.raises(ValueError, match=r"argument 'budget_bytes' = 9223372036854775807: must hold fewer than 2\^31"):
        llmk.KvCache(n_layers=1, n_kv_heads=1, head_dim=16, budget_bytes=2**63 - 1)


def test_kv_write_to_a_freed_slot_is_named():
    c, s = small_cache(), None
    s = c.add_sequence()
    slots = c.append(s, [1, 2, 3, 4])
    c.free_sequence(s)  # the full block stays cached for prefix reuse: must not change
    with pytest.raises(ValueError, match=rf"'slot' = {slots[0]}: must be in a block a live sequence holds"):
        c.write(0, slots, np.ones((4, 32), np.float32), np.ones((4, 32), np.float32))


def test_kv_attention_names_heads_and_queries_before_sizing_outputs():
    c, s = cache_with_tokens()
    q = np.ones((1, 2, 16), np.float32)
    with pytest.raises(ValueError, match=r"argument 'n_heads' = -2: must be a multiple of n_kv_heads = 2"):
        llmk.kv_decode(c, 0, [s], q, -2, 0.25)  # the heads first, not "'out' = 32: must hold -32 elements"
    with pytest.raises(ValueError, match=r"KvCache.decode: argument 'q' = 32 elements: must hold 64 elements"):
        llmk.kv_decode(c, 0, [s], q, 4, 0.25)
    with pytest.raises(ValueError, match=r"argument 'q' = dtype float64"):
        llmk.kv_decode(c, 0, [s], q.astype(np.float64), 2, 0.25)
    with pytest.raises(ValueError, match=r"argument 'qo_indptr\[1\]' = -3: must be >= qo_indptr\[0\]"):
        llmk.kv_prefill(c, 0, [s], [0, -3], q, 2, 0.25)
    with pytest.raises(ValueError, match=r"argument 'qo_indptr\[-1\]' = 576460752303423488: must be < 2\^31"):
        llmk.kv_prefill(c, 0, [s], [0, 1 << 59], np.ones((0, 2, 16), np.float32), 2, 0.25)
    with pytest.raises(TypeError, match=r"llmk.kv_prefill: argument 'qo_indptr' = None"):
        llmk.kv_prefill(c, 0, [s], None, q, 2, 0.25)


def test_kv_decode_of_an_empty_sequence_names_it_and_an_empty_batch_is_empty():
    c = small_cache()
    s = c.add_sequence()
    with pytest.raises(ValueError, match=r"'pages' = sequence 0 empty"):  # not "'pages' = null array"
        llmk.kv_decode(c, 0, [s], np.ones((1, 2, 16), np.float32), 2, 0.25)
    out = llmk.kv_decode(c, 0, [], np.ones((0, 2, 16), np.float32), 2, 0.25)
    assert out.shape == (0, 2, 16)


def test_thread_count_is_capped():
    before = llmk.num_threads()
    with pytest.raises(ValueError, match=r"'n' = 100000: must be in \[1, 1024\]"):  # crashed OpenMP
        llmk.set_num_threads(100000)
    with pytest.raises(ValueError, match=r"llmk.set_num_threads: argument 'n' = 4294967297"):
        llmk.set_num_threads(2**32 + 1)
    assert llmk.num_threads() == before


def test_simd_limit_names_its_argument():
    # named the environment variable: "argument 'LLMK_SIMD' = bogus"
    with pytest.raises(ValueError, match=r"llmk.set_simd_limit: argument 'level' = bogus: must be scalar, avx2, avxvnni, avx512, avx512vnni or avx512vbmi"):
        llmk.set_simd_limit("bogus")
