"""PyTorch peer of `llmk bench sample-gpu`: the sampling step on CUDA.

For each shape BxV and the same four ops as the llmk bench, times on the
device: greedy = argmax; topk50_topp0.9 = softmax(x / 0.8) -> topk(50) ->
top-p 0.9 cut (cumsum, mask, renormalize) -> torch.multinomial -> gather;
topp0.9 = the same with topk(1024) (llmk's cap); full = softmax(x) ->
torch.multinomial over the whole row. Bytes: 4 * B * V (the f32 logits, read
once). CUDA-event timing after an L2 flush (bench/common/torch_timing.py).
Prints one JSON line per measurement, or {"skipped": why} without torch/CUDA.

usage: peer_torch.py --shapes BxV,...
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
from torch_timing import time_cuda  # noqa: E402


def top_p_draw(x, t, k, p):
    v, i = torch.topk(torch.softmax(x / t, dim=-1), k, dim=-1)
    cum = torch.cumsum(v, dim=-1)
    v = v.masked_fill(cum - v >= p, 0.0)  # keep the shortest prefix reaching p
    j = torch.multinomial(v / v.sum(dim=-1, keepdim=True), 1)
    return torch.gather(i, -1, j)


OPS = {
    "greedy": lambda x: torch.argmax(x, dim=-1),
    "topk50_topp0.9": lambda x: top_p_draw(x, 0.8, 50, 0.9),
    "topp0.9": lambda x: top_p_draw(x, 0.8, min(1024, x.shape[-1]), 0.9),
    "full": lambda x: torch.multinomial(torch.softmax(x, dim=-1), 1),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch sees no CUDA device"}))
        return
    g = torch.Generator().manual_seed(0)
    for s in a.shapes.split(","):
        b, v = (int(t) for t in s.split("x"))
        x = (torch.rand(b, v, generator=g) * 16 - 8).to("cuda")
        for name, fn in OPS.items():
            ms = time_cuda(lambda: fn(x))
            print(json.dumps({"kernel": "sample-gpu", "impl": "torch", "op": f"sample_{name}", "shape": f"{b}x{v}",
                              "dtype": "f32", "median_ms": ms, "gbps": 4.0 * b * v / (ms * 1e6),
                              "torch": torch.__version__}))


if __name__ == "__main__":
    main()
