"""Timing helpers shared by the PyTorch bench peers (bench/*/peer_torch.py).

time_cpu: median wall time in ms over at least 5 calls and min_seconds (one warm-up).
time_cuda: median CUDA-event time in ms over reps calls, each after flushing the L2
(cold-L2 numbers, like llmk's bench/common/gpu.cuh)."""
import statistics
import time

import torch


def time_cpu(fn, min_seconds):
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < min_seconds and len(times) < 1000):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_cuda(fn, reps=20):
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 64 << 20)
    flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
