#!/usr/bin/env python3
"""Turns `llmk bench ... --json` output (JSON lines) into markdown tables:
one table of measurements per kernel, then the ratio lines.

usage: bench_table.py FILE.jsonl [FILE.jsonl ...]"""
import json
import sys


def main(paths):
    rows, ratios, notes = [], [], []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    o = json.loads(line)
                except json.JSONDecodeError:
                    continue
                t = o.get("type")
                (ratios if t == "ratio" else notes if t == "note" else rows).append(o)
    base = ["kernel", "impl", "op", "shape", "dtype", "median_ms", "gbps"]
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        krows = [r for r in rows if r["kernel"] == kernel]
        extra = [k for k in dict.fromkeys(k for r in krows for k in r) if k not in base]
        print(f"\n### {kernel}\n")
        for n in notes:
            if n.get("kernel") == kernel:
                print(f"- {n['note']}")
        cols = base[1:] + extra
        print("\n| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in krows:
            print("| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |")
        kr = [r for r in ratios if r.get("kernel") == kernel]
        if kr:
            print("\n| impl | versus | op | shape | dtype | speedup |\n|---|---|---|---|---|---|")
            for r in kr:
                print(f"| {r['impl']} | {r['versus']} | {r['op']} | {r['shape']} | {r['dtype']} | {fmt(r['speedup'])}x |")


def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


if __name__ == "__main__":
    main(sys.argv[1:])
