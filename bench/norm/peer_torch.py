"""PyTorch peer of `llmk bench layernorm` and `llmk bench layernorm-gpu`.

Times torch's own LayerNorm kernels on the same shapes and prints one JSON line
per measurement in the bench format (kernel, impl, op, shape, dtype, median_ms,
gbps). fwd is aten.native_layer_norm (y, mean, rstd), bwd is
aten.native_layer_norm_backward (dx, dweight, dbias) from saved mean/rstd, so
neither includes autograd bookkeeping. Bytes: fwd 2*N*D*s, bwd 3*N*D*s.
On CUDA, times with CUDA events after flushing the L2 (cold-L2, like llmk's
GPU bench). If torch cannot be imported, prints {"skipped": why}.

usage: peer_torch.py --shapes 16384x4096,... --dtype f32|f16|bf16 [--device cpu|cuda]
                     [--threads T] [--min-seconds S] [--eps E]
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

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--min-seconds", type=float, default=0.3)
    ap.add_argument("--eps", type=float, default=1e-5)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch has no CUDA device"}))
        return
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dt = DTYPES[args.dtype]
    size = torch.finfo(dt).bits // 8
    gen = torch.Generator().manual_seed(0)
    for shape in args.shapes.split(","):
        n, d = (int(v) for v in shape.split("x"))
        x = torch.randn(n, d, generator=gen).to(dt).to(args.device)
        dy = torch.randn(n, d, generator=gen).to(dt).to(args.device)
        w = (1 + 0.5 * torch.randn(d, generator=gen)).to(dt).to(args.device)
        b = (0.5 * torch.randn(d, generator=gen)).to(dt).to(args.device)
        y, mean, rstd = torch.ops.aten.native_layer_norm(x, [d], w, b, args.eps)

        def fwd():
            torch.ops.aten.native_layer_norm(x, [d], w, b, args.eps)

        def bwd():
            torch.ops.aten.native_layer_norm_backward(dy, x, [d], mean, rstd, w, b, [True, True, True])

        for op, fn, nbytes in (("fwd", fwd, 2 * n * d * size), ("bwd", bwd, 3 * n * d * size)):
            ms = time_cuda(fn) if args.device == "cuda" else time_cpu(fn, args.min_seconds)
            print(json.dumps({"kernel": "layernorm-gpu" if args.device == "cuda" else "layernorm", "impl": "torch",
                              "op": op, "shape": shape, "dtype": args.dtype, "median_ms": ms,
                              "gbps": nbytes / (ms * 1e6), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
