#!/usr/bin/env python3
"""The Python layer's overhead against the CLI at batch-1 decode (docs/python.md).

Runs the same greedy request (one prompt, -n tokens, the same model, KV type and threads)
through `llmk generate --json` (a process per round) and through llmk.LLM.generate (one
process, model loaded once), in alternating rounds, and keeps each side's median round:
  cli       decode tok/s as the engine times it (decode steps only), from the CLI's stats;
  py_engine the same engine-timed figure inside llmk.LLM (does running under Python, with the
            GIL released per step, slow the engine?);
  py_wall   decode tokens / (the whole generate() call's wall time minus its prefill step's
            engine time): every Python-side cost is charged to decode (argument checks,
            encoding, engine set-up, the step loop, event and output conversion).
  py_cpu    CPU seconds of the calling Python thread during generate() per decode second of the
            engine: what the layer itself computes (checks, encoding, waking per step, converting
            events and outputs), whatever the scheduler does on a loaded machine.
overhead = cli / py_wall - 1, the share of decode speed the Python layer costs; the target is
under 3%. in-process = py_engine / py_wall - 1: the same share measured inside each Python
round (the same requests, no other process between the two clocks), which the load on a
shared machine cannot move between the two sides. A ratio taken inside one run: the
machine's speed drifts between runs.

usage: .venv/bin/python bench/python/bench_llm.py [--model PATH] [-n 128] [--rounds 7]
       [--threads 2] [--kv-type f16] [--prompt TEXT] [--llmk build/llmk] [--json]
PYTHONPATH must reach the llmk package (build/python, or a pip-installed llmk).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="GGUF path or model name (default: the default model)")
    ap.add_argument("-n", type=int, default=128, help="new tokens per request")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-type", default="f16")
    ap.add_argument("--prompt", default="1, 2, 3, 4,")  # greedy: counts on for hundreds of tokens
    ap.add_argument("--llmk", default=str(Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import llmk
    llm = llmk.LLM(a.model, kv_type=a.kv_type, threads=a.threads)
    path = llm.config["path"]
    cmd = [a.llmk, "generate", "--model", path, "--prompt", a.prompt, "-n", str(a.n), "--temp", "0",
           "--kv-type", a.kv_type, "--threads", str(a.threads), "--json"]
    llm.generate(a.prompt, max_tokens=8)  # warm the mapping and caches
    rows = {"cli": [], "py_engine": [], "py_wall": []}
    tokens = None
    cpu_share = []
    for r in range(a.rounds):
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        st = next(l for l in lines if l.get("type") == "stats")
        cli_tokens = next(l for l in lines if "tokens" in l)["tokens"]
        rows["cli"].append(st["decode_tok_s"])
        t0, c0 = time.perf_counter(), time.thread_time()
        o = llm.generate(a.prompt, max_tokens=a.n)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        s = llm.last_stats
        assert o.tokens == cli_tokens, "the CLI and llmk.LLM generated different tokens"
        rows["py_engine"].append(s["decode_tokens"] / s["decode_seconds"])
        rows["py_wall"].append(s["decode_tokens"] / (wall - s["prefill_seconds"]))
        tokens = s["decode_tokens"]
        cpu_share.append(cpu / s["decode_seconds"])
        print(f"round {r + 1}/{a.rounds}: " + ", ".join(f"{k} {v[-1]:.1f} tok/s" for k, v in rows.items())
              + f", python cpu {100 * cpu_share[-1]:.2f}%",
              file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    overhead = med["cli"] / med["py_wall"] - 1
    engine = med["cli"] / med["py_engine"] - 1
    inproc = statistics.median(e / w - 1 for e, w in zip(rows["py_engine"], rows["py_wall"]))
    cpu = statistics.median(cpu_share)
    if a.json:
        for k, v in med.items():
            print(json.dumps({"kernel": "llm_python_overhead", "impl": k, "decode_tok_s": round(v, 2),
                              "rounds": a.rounds, "decode_tokens": tokens, "threads": a.threads,
                              "kv_type": a.kv_type}))
        print(json.dumps({"type": "ratios", "python_overhead_pct": round(100 * overhead, 2),
                          "engine_under_python_pct": round(100 * engine, 2),
                          "in_process_pct": round(100 * inproc, 3), "python_cpu_pct": round(100 * cpu, 3)}))
    else:
        print(f"model {path}\nbatch 1, {tokens} decode tokens, kv {a.kv_type}, {a.threads} threads, "
              f"median of {a.rounds} alternating rounds")
        for k, v in med.items():
            spread = f"{min(rows[k]):.1f}..{max(rows[k]):.1f}"
            print(f"  {k:10s} {v:8.1f} tok/s   (rounds {spread})")
        print(f"Python layer overhead (cli / py_wall - 1): {100 * overhead:+.2f}%  (target < 3%)")
        print(f"engine under Python   (cli / py_engine - 1): {100 * engine:+.2f}%")
        print(f"in-process            (py_engine / py_wall - 1, median of rounds): {100 * inproc:+.3f}%")
        print(f"Python thread CPU     (per engine decode second, median of rounds): {100 * cpu:.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
