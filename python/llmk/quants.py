"""ggml's storage types (include/llmk/ggml_quants.hpp): the reference dequantizer and
quantizer of each, by llmk's type name ("q8_0", "q4_k", ..., "f16"; the gguf package's
names such as "Q4_K" are accepted too)."""
import numpy as np

from . import _llmk

__all__ = ["dequantize", "quantize"]


def dequantize(type, data):
    """Blocks of `type` (bytes or a uint8 array, whole blocks) -> float32 array."""
    raw = bytes(np.ascontiguousarray(data, dtype=np.uint8)) if not isinstance(data, bytes) else data
    return np.frombuffer(_llmk.dequantize_bytes(str(type).lower(), raw), dtype=np.float32)


def quantize(type, x):
    """float32 values (whole blocks, finite) -> the blocks of `type` as a uint8 array."""
    raw = bytes(np.ascontiguousarray(x, dtype=np.float32))
    return np.frombuffer(_llmk.quantize_bytes(str(type).lower(), raw), dtype=np.uint8)
