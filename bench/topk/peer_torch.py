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
import sys
from pathlib import Path

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means: skip, visibly
    print(json.dumps({"skipped": f"torch cannot be imported: {e}"}))
    raise SystemExit(0)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from torch_timing import time_cpu, time_cuda  # noqa: E402


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
        # CPU: copies cycled through call by call, >= 256 MiB in all, as llmk's
        # bench does, so no shape is timed from the last-level cache.
        xs = [x] + ([x.clone() for _ in range(-(-(256 << 20) // (4 * b * v)) - 1)] if a.device == "cpu" else [])
        calls = [0]

        def fn():
            calls[0] += 1
            return torch.topk(torch.softmax(xs[calls[0] % len(xs)], dim=-1), k, dim=-1)

        ms = time_cuda(fn) if a.device == "cuda" else time_cpu(fn, a.min_seconds)
        kernel = "softmax-topk-gpu" if a.device == "cuda" else "softmax-topk"
        print(json.dumps({"kernel": kernel, "impl": "torch", "op": f"softmax_topk_k{k}", "shape": f"{b}x{v}",
                          "dtype": "f32", "median_ms": ms, "gbps": 4.0 * b * v / (ms * 1e6),
                          "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
