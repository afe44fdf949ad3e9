"""llmk: hot paths of transformer inference and training (C++/CUDA), from Python.

``llmk.LLM`` loads a GGUF model and generates with the engine of the ``llmk``
CLI (``help(llmk.LLM)``).

The kernel functions accept numpy arrays and any DLPack tensor (torch CPU tensors, and
CUDA tensors when llmk was built with CUDA and a device is present). Outputs
are allocated with the caller's library, on the caller's device.
"""
from . import _llmk
from .kv import KvCache, kv_decode, kv_prefill
from .llm import LLM, Completion, TokenLogprobs
from .quants import dequantize, quantize
from .norm import layer_norm, layer_norm_backward, rms_norm, rms_norm_backward
from .topk import sample, softmax_topk, uniform01
from ._llmk import (cuda_compiled, cuda_device_count, num_threads, set_num_threads, set_simd_limit,
                    simd_level)

__all__ = ["Completion", "KvCache", "LLM", "TokenLogprobs", "cuda_compiled", "cuda_device_count", "dequantize",
           "kv_decode", "kv_prefill", "layer_norm", "layer_norm_backward", "num_threads", "quantize", "rms_norm",
           "rms_norm_backward", "sample", "set_num_threads",
           "set_simd_limit", "simd_level", "softmax_topk", "uniform01"]
