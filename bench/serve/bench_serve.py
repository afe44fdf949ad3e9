#!/usr/bin/env python3
"""Serving benchmark: a bounded, loopback-only load generator against `llmk serve` and its
peers, run in turns with the same model and thread count, printing ratios.

Workloads (each request streamed through /v1/completions or /v1/chat/completions):
  random  prompts of 32..512 tokens (random words, a fixed seed), 128 output tokens;
  shared  chat requests that share a ~1000-token system prompt, each with its own question,
          128 output tokens.
Concurrency: 1, 8, 32 clients, each sending its share of the requests back to back.
Servers: llmk (prefix cache on; on the shared workload also with --no-prefix-cache),
llama-cpp-python's OpenAI server (`python -m llama_cpp.server`, scripts/setup-peers), started with
`--interrupt_requests False` (by default a new request cuts the stream in progress short), and
llama.cpp's `llama-server` (`scripts/setup-peers --llama-server`; $LLAMA_SERVER overrides the
path) with 32 slots over one unified KV buffer, continuous batching and its prompt cache, as
llmk runs with 32 sequences. Each server gets a KV capacity of 32768 tokens, f16.

How counted: output tokens = streamed chunks that carry text (one per token for both
servers; llmk merges the rare token that ends inside a UTF-8 character with the next);
output tok/s = all output tokens / wall time of the level; TTFT = request sent -> first
text chunk; ITL = time between a request's consecutive text chunks; p50/p99 over all
requests (TTFT) or all gaps (ITL); hit rate = llmk's cached / prompt tokens from /metrics.
Every request ignores end-of-sequence tokens (ignore_eos / min_tokens where the server
has them; otherwise a request may end early and produce fewer tokens, which tok/s counts).

  .venv/bin/python bench/serve/bench_serve.py [--quick] [--threads 2] [--requests N]
      [--concurrency 1,8,32] [--workloads random,shared] [--peers llama-cpp-python,llama-server] [--json]
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"
MODEL = Path.home() / ".cache/llmk/models/SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE = Path(os.environ.get("LLMK_CACHE", Path.home() / ".cache/llmk"))


def llama_server_path():
    env = os.environ.get("LLAMA_SERVER")
    if env:
        return Path(env)
    found = sorted(CACHE.glob("peers/llama-server-*/llama-server"))
    return found[-1] if found else None

WORDS = ("time person year way day thing man world life hand part child eye woman place work week case "
         "point government company number group problem fact river mountain city garden window music "
         "paper story table light water color family history energy market market school answer").split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    def __init__(self, kind, args, threads, model, ctx):
        self.kind = kind
        if kind.startswith("llmk"):
            cmd = [str(LLMK), "serve", "--port", "0", "--model", str(model), "--threads", str(threads),
                   "--kv-tokens", str(ctx), "--max-seqs", "32", *args]
            self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            m = re.search(r"http://127\.0\.0\.1:(\d+)", self.p.stdout.readline())
            self.port = int(m.group(1))
        elif kind == "llama-server":
            self.port = free_port()
            cmd = [str(llama_server_path()), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
                   "-t", str(threads), "-tb", str(threads), "-c", str(ctx), "-np", "32", "-kvu", "-cb",
                   "-ctk", "f16", "-ctv", "f16", "--no-webui", *args]
            self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            self.port = free_port()
            cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
                   "--port", str(self.port), "--n_threads", str(threads), "--n_threads_batch", str(threads),
                   "--n_ctx", "4096", "--interrupt_requests", "False", *args]
            self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while time.time() - t0 < 120:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/v1/models")
                if c.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{kind} did not start")

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()

    def metrics(self):
        if not self.kind.startswith("llmk"):
            return {}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", "/metrics")
        out = {}
        for line in c.getresponse().read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out


def peer_available(kind):
    """Whether a peer can run here; says why not on stderr."""
    if kind == "llama-cpp-python":
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError as e:
            print(f"skipped: llama-cpp-python server not installed ({e}); run scripts/setup-peers", file=sys.stderr)
            return False
        return True
    if kind == "llama-server":
        if llama_server_path() and llama_server_path().exists():
            return True
        print("skipped: no llama-server (run scripts/setup-peers --llama-server, or set LLAMA_SERVER)", file=sys.stderr)
        return False
    raise SystemExit(f"--peers: unknown peer {kind!r} (known: llama-cpp-python, llama-server)")


def stream(port, path, body):
    """One streamed request: (TTFT, [gaps], chunks with text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]}")
    ttft, last, gaps, n = None, None, [], 0
    for raw in r:
        line = raw.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ch = json.loads(line[6:])
        if not ch.get("choices"):
            continue
        c0 = ch["choices"][0]
        text = c0.get("text") if "text" in c0 else (c0.get("delta") or {}).get("content")
        if not text:
            continue
        now = time.perf_counter()
        if ttft is None:
            ttft = now - t0
        else:
            gaps.append(now - last)
        last = now
        n += 1
    return ttft if ttft is not None else time.perf_counter() - t0, gaps, n


def requests_for(workload, n, out_tokens, rng, short=False):
    reqs = []
    if workload == "random":
        for _ in range(n):
            words = rng.randint(24, 40 if short else 380)  # ~32..512 tokens
            prompt = " ".join(rng.choice(WORDS) for _ in range(words))
            reqs.append(("/v1/completions", {"prompt": prompt, "max_tokens": out_tokens, "temperature": 0,
                                             "ignore_eos": True, "min_tokens": out_tokens, "stream": True}))
    else:
        sysrng = random.Random(1)
        system = "You are a helpful assistant. " + " ".join(sysrng.choice(WORDS) for _ in range(700))
        for i in range(n):
            q = f"Question {i}: tell me about the " + " ".join(rng.choice(WORDS) for _ in range(8)) + "."
            reqs.append(("/v1/chat/completions",
                         {"messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
                          "max_tokens": out_tokens, "temperature": 0, "ignore_eos": True,
                          "min_tokens": out_tokens, "stream": True}))
    return reqs


def run_level(proc, reqs, conc):
    results, lock = [], threading.Lock()
    it = iter(reqs)

    def worker():
        while True:
            with lock:
                nxt = next(it, None)
            if nxt is None:
                return
            r = stream(proc.port, *nxt)
            with lock:
                results.append(r)

    before = proc.metrics()
    t0 = time.perf_counter()
    th = [threading.Thread(target=worker) for _ in range(conc)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    after = proc.metrics()
    ttfts = sorted(r[0] for r in results)
    gaps = sorted(g for r in results for g in r[1]) or [0.0]
    toks = sum(r[2] for r in results)

    def pct(xs, p):
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

    d = lambda k: after.get(k, 0) - before.get(k, 0)  # noqa: E731
    hit = d("llmk_cached_prompt_tokens_total") / d("llmk_prompt_tokens_total") if d("llmk_prompt_tokens_total") else None
    return {"tok_s": toks / wall, "ttft_p50": pct(ttfts, 50), "ttft_p99": pct(ttfts, 99), "itl_p50": pct(gaps, 50),
            "itl_p99": pct(gaps, 99), "tokens": toks, "requests": len(results), "wall_s": wall, "hit_rate": hit}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=0, help="requests per level (default: max(8, concurrency))")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--workloads", default="random,shared")
    ap.add_argument("--peers", default="llama-cpp-python,llama-server")
    ap.add_argument("--out-tokens", type=int, default=128)
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    concs = [int(c) for c in a.concurrency.split(",")]
    out_tokens = a.out_tokens
    workloads = a.workloads.split(",")
    if a.quick:  # a smoke test of every server, not a measurement
        concs, out_tokens, workloads = [1], 8, ["random"]
    servers = ["llmk"] + [p for p in a.peers.split(",") if p and peer_available(p)]
    rows = []
    for workload in workloads:
        kinds = servers + (["llmk-no-prefix-cache"] if workload == "shared" else [])
        for conc in concs:
            n = a.requests or (1 if a.quick else max(8, conc))
            reqs = requests_for(workload, n, out_tokens, random.Random(conc), short=a.quick)
            warm = requests_for("random", 1, 4, random.Random(1000 + conc))
            for kind in kinds:  # in turns, each on a fresh server
                args = ["--no-prefix-cache"] if kind == "llmk-no-prefix-cache" else []
                p = Proc(kind, args, a.threads, a.model, 32768)
                try:
                    stream(p.port, *warm[0])  # warm up (not counted; shares no prompt with the level's)
                    r = run_level(p, reqs, conc)
                finally:
                    p.stop()
                # the fields every `llmk bench --json` row has: median_ms is the ITL p50, per output token
                r.update(server=kind, workload=workload, concurrency=conc, kernel="serve", impl=kind, op=workload,
                         shape=f"c{conc}", dtype="f16", median_ms=r["itl_p50"] * 1e3, gbps=0.0)
                rows.append(r)
                if a.json:
                    print(json.dumps(r), flush=True)
                else:
                    hr = "-" if r["hit_rate"] is None else f"{r['hit_rate']:.2f}"
                    print(f"{workload:7s} c={conc:<3d} {kind:22s} {r['tok_s']:8.1f} tok/s  TTFT p50 {r['ttft_p50']*1e3:8.1f} "
                          f"p99 {r['ttft_p99']*1e3:8.1f} ms  ITL p50 {r['itl_p50']*1e3:7.1f} p99 {r['itl_p99']*1e3:7.1f} ms"
                          f"  hit {hr}  ({r['requests']} req, {r['tokens']} tok, {r['wall_s']:.1f} s)", flush=True)
    if not a.json:
        print("ratios (llmk / peer; TTFT: llmk over peer, lower is better):")
    key = {(r["server"], r["workload"], r["concurrency"]): r for r in rows}
    for (srv, wl, c), r in key.items():
        if srv in ("llmk", "llmk-no-prefix-cache"):
            continue
        l = key.get(("llmk", wl, c))
        if l:
            line = {"type": "ratio", "peer": srv, "workload": wl, "concurrency": c,
                    "throughput": l["tok_s"] / r["tok_s"], "ttft_p99": l["ttft_p99"] / r["ttft_p99"]}
            print(json.dumps(line) if a.json else
                  f"  {wl:7s} c={c:<3d} vs {srv}: throughput {line['throughput']:.2f}x, p99 TTFT {line['ttft_p99']:.2f}x")
    for (srv, wl, c), r in key.items():
        if srv == "llmk-no-prefix-cache" and ("llmk", wl, c) in key:
            l = key[("llmk", wl, c)]
            line = {"type": "ratio", "prefix_cache": True, "workload": wl, "concurrency": c,
                    "ttft_p50": l["ttft_p50"] / r["ttft_p50"], "ttft_p99": l["ttft_p99"] / r["ttft_p99"]}
            print(json.dumps(line) if a.json else
                  f"  {wl:7s} c={c:<3d} prefix cache on / off: TTFT p50 {line['ttft_p50']:.2f}x, p99 {line['ttft_p99']:.2f}x")


if __name__ == "__main__":
    main()
