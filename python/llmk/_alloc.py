"""Output allocation in the caller's array library (numpy or torch), on the caller's device,
and the small facts about an input that every wrapper needs (rows, CUDA stream)."""
import numpy as np


def is_torch(x):
    return type(x).__module__.startswith("torch")


def empty(like, shape, dtype=None):
    """An uninitialized array of `shape` in like's library and device; dtype defaults to like's
    dtype, and the string "float32" or "int32" picks those."""
    if is_torch(like):
        import torch
        tdt = {None: like.dtype, "float32": torch.float32, "int32": torch.int32}[dtype]
        return torch.empty(shape, dtype=tdt, device=like.device)
    ndt = {None: like.dtype, "float32": np.float32, "int32": np.int32}[dtype]
    return np.empty(shape, dtype=ndt)


def rows(x):
    """Rows of a 1-d (one row) or 2-d array."""
    return x.shape[0] if len(x.shape) == 2 else 1


def stream(x):
    """The current CUDA stream of a torch CUDA tensor as an integer; 0 otherwise."""
    if is_torch(x) and x.is_cuda:
        import torch
        return torch.cuda.current_stream(x.device).cuda_stream
    return 0
