"""PyTorch peer of `llmk bench matmul`: y = x @ W.T in f32 with W already dequantized (what a
framework without quantized kernels does), on random data of the same shapes.

usage: peer_torch_matmul.py THREADS QUICK(0|1) SHAPES  with SHAPES "M:N:K,M:N:K,..."
Prints JSON lines: bytes = 4 (N K + M K + M N), FLOPs = 2 M N K (gflops column).
"""
import json
import sys
import time

try:
    import torch
except ImportError as e:
    print(json.dumps({"skipped": f"torch not importable ({e})"}))
    sys.exit(0)

threads, quick, shapes = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
torch.set_num_threads(threads)
torch.ones(2, 2) @ torch.ones(2, 2)  # loads the BLAS
# Debian's torch is built with BLAS_INFO=generic: its matmul goes through libblas.so.3, the
# reference BLAS (~2 GFLOP/s) unless the alternatives point it at OpenBLAS (scripts/setup
# installs libopenblas0-openmp). The `blas` column says which one this process loaded.
with open("/proc/self/maps") as maps:
    libs = maps.read()
blas = "openblas" if "openblas" in libs else "reference" if "libblas" in libs else "?"
for s in shapes.split(","):
    M, N, K = (int(v) for v in s.split(":"))
    x, w = torch.randn(M, K), torch.randn(N, K)
    y = x @ w.T
    times, t_end = [], time.perf_counter() + (0.05 if quick else 0.3)
    while len(times) < 5 or (time.perf_counter() < t_end and len(times) < 1000):
        t = time.perf_counter()
        torch.matmul(x, w.T, out=y)
        times.append(time.perf_counter() - t)
    ms = sorted(times)[len(times) // 2] * 1e3
    print(json.dumps({"kernel": "matmul", "impl": "torch", "op": "xWt", "shape": f"{M}x{N}x{K}", "dtype": "f32",
                      "median_ms": ms, "gbps": 4 * (N * K + M * K + M * N) / ms / 1e6,
                      "gflops": 2 * M * N * K / ms / 1e6, "blas": blas}), flush=True)
