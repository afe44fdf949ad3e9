#!/usr/bin/env python3
"""Plots of `llmk analyze --json`: memory against context, and each device's roofline.

    ./build/llmk analyze --model llama-3-8b --json > a.json
    ./build/llmk bench triad --json > triad.json
    .venv/bin/python scripts/plot_capacity.py a.json --bench cpu=triad.json --out docs/img

writes <out>/<model>_memory.png and <out>/<model>_roofline.png.

Memory plot: weights + batch x KV bytes(context) for each KV storage type, with
each device's memory less its reserve as a horizontal line (the analysis's
"after the weights and the reserve").

Roofline plot: one panel per device, attainable FLOP/s = min(peak, I x bandwidth)
against I (FLOPs per byte) for the tensor-core peak (solid) and the f32 vector
peak (dashed, GPUs only), with the model's ops from the analysis placed on the
roof (decode attention per KV type, prefill attention per prompt length, weight
matmuls per token count). Measured kernels from `llmk bench ... --json` files
given as --bench DEVICE=FILE are placed at (I, I x measured GB/s); I comes from
the row (`flops_per_byte`, or `gflops` / `gbps`) or from the kernel's formula:
  triad: 2 FLOPs per 24 bytes (STREAM convention);
  layernorm forward: 8 FLOPs per element over 2 x s bytes (s = element size),
  backward: 13 FLOPs per element over 3 x s bytes (docs/capacity.md);
  decode attention: G (4d + 5) / (d (bk + bv)) from the row's `group`,
  `head_dim` and `kv_type` (or `dtype`), its long-context limit.
Rows that name a model (the attention bench's) are placed only on that
model's plot, at the analysis's context and batch (paged kernel only).
Rows whose intensity cannot be told are listed and skipped.
"""
import argparse
import json
import sys
from pathlib import Path

KV_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "int8": 34 / 32, "int4": 20 / 32}
ELEM_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "f64": 8.0}


def load_rows(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            if "type" not in r and r.get("gbps", 0) > 0:
                rows.append(r)
    return rows


def row_intensity(r):
    """FLOPs per byte of a measured bench row, or None when it cannot be told."""
    if "flops_per_byte" in r:
        return float(r["flops_per_byte"])
    if "gflops" in r:
        return float(r["gflops"]) / float(r["gbps"])
    kernel, op = r.get("kernel", ""), r.get("op", "")
    if kernel == "triad":
        return 2 / 24
    s = ELEM_BYTES.get(r.get("dtype", ""))
    if "layernorm" in kernel.replace("_", "") and s:
        if "back" in op or "bwd" in op:
            return 13 / (3 * s)
        return 8 / (2 * s)
    if "attention" in kernel and "decode" in op:
        kv = r.get("kv_type", r.get("dtype", ""))
        if kv in KV_BYTES and "group" in r and "head_dim" in r:
            g, d = float(r["group"]), float(r["head_dim"])
            return g * (4 * d + 5) / (d * 2 * KV_BYTES[kv])
    return None


def same_setting(r, a):
    """Rows that name a model (the attention bench's) are placed only on that
    model's plot, at the analysis's context and batch, and only the paged
    kernel; other rows (triad, LayerNorm) go on every plot."""
    if "model" not in r:
        return True
    s = a["settings"]
    def key(name):  # the bench says llama3-8b where the analysis says llama-3-8b
        return name.lower().replace("-", "")
    return (key(r["model"]) == key(a["model"]["name"]) and r.get("impl") == "paged"
            and int(r.get("context", -1)) == s["context"] and int(r.get("batch", -1)) == s["batch"])


def plot_memory(a, out, plt):
    m, s = a["model"], a["settings"]
    fig, ax = plt.subplots(figsize=(8, 5))
    ctx_max = max(max(r["context"] for r in a["memory_vs_context"]), m["max_context"] or 0)
    ctx = [2 ** (k / 4) for k in range(4 * 7, 4 * (ctx_max.bit_length() + 1))]
    by_size = {}  # types of equal size (f16, bf16) share a line
    for t, per_token in a["kv_bytes_per_token"].items():
        by_size.setdefault(per_token, []).append(t)
    for per_token, types in sorted(by_size.items(), reverse=True):
        ys = [(a["weight_bytes"] + s["batch"] * c * per_token) / 1e9 for c in ctx]
        ax.plot(ctx, ys, label=f"KV {'/'.join(types)} ({per_token / 1024:.1f} KiB/token)")
    ax.axhline(a["weight_bytes"] / 1e9, color="k", ls=":", lw=1)
    ax.text(ctx[0], a["weight_bytes"] / 1e9, f" weights ({s['weights']})", va="bottom", fontsize=8)
    usable = {}  # devices of equal memory share a line
    for d in a["devices"]:
        usable.setdefault((d["memory_bytes"] - d["capacity"]["reserve"]) / 1e9, []).append(d["key"])
    for k, (gb, keys) in enumerate(sorted(usable.items())):
        ax.axhline(gb, color="gray", ls="--", lw=0.8)
        x = ctx[-1] if k % 2 == 0 else ctx[len(ctx) // 2]  # alternate, so close lines keep readable labels
        ax.text(x, gb, ", ".join(keys) + " ", ha="right", va="bottom", fontsize=8, color="gray")
    if m["max_context"]:
        ax.axvline(m["max_context"], color="k", ls="-.", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("weights + KV cache (GB)")
    ax.set_title(f"{m['name']}: memory at batch {s['batch']} (dashed: device memory less "
                 f"{100 * s['reserve_fraction']:.0f}% reserve)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    path = out / f"{m['name']}_memory.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_roofline(a, measured, out, plt):
    devices = a["devices"]
    n = len(devices)
    cols = min(n, 4)
    rows_ = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_, cols, figsize=(4.2 * cols, 3.8 * rows_), squeeze=False)
    it = a["intensity"]
    # One marker and colour map per op family, shades within it.
    families = [("decode attn ctx %d" % a["settings"]["context"], "o", "Blues", it["decode_attention"], "kv_type"),
                ("prefill attn P=", "^", "Greens", it["prefill_attention"], "prompt"),
                ("matmuls T=", "s", "Oranges", it["weight_matmuls"], "tokens")]
    ops = []
    for title, marker, cmap, rows, key in families:
        for k, r in enumerate(rows):
            colour = plt.get_cmap(cmap)(0.35 + 0.65 * k / max(1, len(rows) - 1))
            name = f"{title} {r[key]}" if key == "kv_type" else f"{title}{r[key]}"
            ops.append((name, r["intensity"], marker, colour))
    for ax, d in zip(axes.flat, devices):
        peak, bw = d["peak_tflops"] * 1e12, d["bandwidth_gbps"] * 1e9
        xs = [2 ** (k / 4) for k in range(-16, 4 * 16)]
        ax.plot(xs, [min(peak, x * bw) for x in xs], "k-", lw=1.5)
        if d["fp32_tflops"] < d["peak_tflops"]:  # the roof without tensor cores
            f32 = d["fp32_tflops"] * 1e12
            ax.plot(xs, [min(f32, x * bw) for x in xs], "k--", lw=0.8)
        ax.axvline(d["ridge"], color="gray", ls=":", lw=0.8)
        for name, i, marker, colour in ops:
            ax.plot([i], [min(peak, i * bw)], marker, color=colour, mec="k", mew=0.4, ms=6, label=name)
        for label, i, gbps in measured.get(d["key"], []):
            ax.plot([i], [i * gbps * 1e9], "r*", ms=10)
            ax.annotate(label, (i, i * gbps * 1e9), fontsize=6, color="r", xytext=(3, -8), textcoords="offset points")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{d['key']}: ridge {d['ridge']:.1f} FLOP/B", fontsize=9)
        ax.set_xlabel("FLOPs per byte", fontsize=8)
        ax.set_ylabel("FLOP/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=6)
    s = a["settings"]
    fig.suptitle(f"{a['model']['name']} on each roofline (context {s['context']}, weights {s['weights']}; "
                 f"dashed: f32 roof without tensor cores; red stars: measured kernels)", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    path = out / f"{a['model']['name']}_roofline.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("analysis", help="output of `llmk analyze --json` ('-' for stdin)")
    p.add_argument("--bench", action="append", default=[], metavar="DEVICE=FILE",
                   help="`llmk bench ... --json` output measured on DEVICE (a device key of the analysis)")
    p.add_argument("--out", default="docs/img", help="output folder")
    args = p.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    text = sys.stdin.read() if args.analysis == "-" else Path(args.analysis).read_text()
    a = json.loads(text)
    keys = {d["key"] for d in a["devices"]}
    measured = {}
    for spec in args.bench:
        device, sep, path = spec.partition("=")
        if not sep:
            p.error(f"--bench {spec!r}: expected DEVICE=FILE")
        if device not in keys:
            p.error(f"--bench {spec!r}: device {device!r} is not in the analysis ({', '.join(sorted(keys))})")
        for r in load_rows(path):
            if not same_setting(r, a):
                continue
            i = row_intensity(r)
            label = f"{r.get('kernel')}/{r.get('impl')} {r.get('op')} {r.get('shape')} {r.get('dtype')}"
            if "model" in r:  # its plot already names the model, context and batch
                label = f"{r.get('op')} {r.get('kv_type', r.get('dtype'))}"
            elif "threads" in r:
                label += f" {r['threads']} thr"
            if i is None:
                print(f"skipped (intensity unknown): {label}", file=sys.stderr)
                continue
            measured.setdefault(device, []).append((label, i, float(r["gbps"])))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in (plot_memory(a, out, plt), plot_roofline(a, measured, out, plt)):
        print(path)


if __name__ == "__main__":
    main()
