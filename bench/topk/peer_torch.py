"""PyTorch peer of `llmk bench softmax-topk` and `llmk bench softmax-topk-gpu`.

Times torch.softmax followed by torch.topk (the usual two-step) on the same
shapes and prints one JSON line per measurement in the bench format. Bytes:
4 * B * V (the f32 logits, read once by a fused op). On CUDA, times with CUDA
events after flushing the L2 (cold-L2, like llmk's GPU bench). If torch cannot
be imported, prints {"skipped": why}.

usage: peer_torch.py --shapes BxVxK,... [--device cpu|cuda] [--threads T] [--min-seconds S]
"""
import argparse
import json
import statistics
import time

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means: skip, visibly
    print(json.dumps({"skipped": f"torch cannot be imported: {e}"}))
    raise SystemExit(0)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--min-seconds", type=float, default=0.3)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch sees no CUDA device"}))
        return
    g = torch.Generator().manual_seed(0)
    for s in a.shapes.split(","):
        b, v, k = (int(t) for t in s.split("x"))
        x = torch.randn(b, v, generator=g).to(a.device)

        def fn():
            return torch.topk(torch.softmax(x, dim=-1), k, dim=-1)

        ms = time_cuda(fn) if a.device == "cuda" else time_cpu(fn, a.min_seconds)
        kernel = "softmax-topk-gpu" if a.device == "cuda" else "softmax-topk"
        print(json.dumps({"kernel": kernel, "impl": "torch", "op": f"softmax_topk_k{k}", "shape": f"{b}x{v}",
                          "dtype": "f32", "median_ms": ms, "gbps": 4.0 * b * v / (ms * 1e6),
                          "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
