#!/usr/bin/env python3
"""Scale-out benchmark and fault test: N `llmk serve` replicas on loopback ports behind a router.

Servers: N replicas (`llmk serve --port 0`, the threads split among them: max(1, T // N) each),
and in front of them either vllm-router (PyPI, scripts/setup-peers; `--policy cache_aware` or
`round_robin`, /health checks) or HAProxy (Debian; /health checks, `balance hdr(X-Session-Id)`
with consistent hashing, L7 retries on connection failures and 503). The baseline is one
replica with all T threads, no router.

Workloads (streamed, 128 output tokens, ignore_eos, as bench_serve.py):
  shared  completions in G = 2N conversations, each with its own ~700-word (~1000-token) prefix
          and session id (header X-Session-Id), in a shuffled order: cache-aware routing keeps
          a conversation's requests on the replica that holds its prefix (completions, not chat:
          the router matches the prompt text);
  random  completions with random prompts of 32..512 tokens (no reuse to find).
How counted: tok/s, TTFT and ITL as bench_serve.py; hit rate = cached / prompt tokens from each
replica's /metrics (per replica and over all); "spread" = each replica's share of the prompt tokens.

Fault test (--fault): R replicas (3; --quick: 2) under load through the router; a third of the
way in, replica 0 is killed (SIGKILL); with 3, replica 1 gets SIGTERM (drains, --drain-timeout 5)
and is restarted on the same port once it exits. Each request ends as: completed (its stream
reached [DONE] with a finish_reason), an error the client can retry (an HTTP error status, or a
stream cut short), or hung (no byte for --stall-s seconds: must never happen). The router's
retries are read from its own metrics.

  .venv/bin/python bench/serve/bench_replicas.py --replicas 3 --router vllm-router|haproxy
      [--policies cache_aware,round_robin] [--threads T] [--quick] [--fault] [--json]
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_serve as bs  # noqa: E402

VLLM_ROUTER = Path(sys.executable).parent / "vllm-router"


def router_available(kind):
    if kind == "vllm-router":
        return VLLM_ROUTER.exists() or shutil.which("vllm-router") is not None
    if kind == "haproxy":
        return shutil.which("haproxy") is not None
    raise SystemExit(f"--router: unknown router {kind!r} (known: vllm-router, haproxy)")


def http_get(port, path, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read()


def wait_ready(port, path, deadline_s, proc=None):
    t0 = time.time()
    while time.time() - t0 < deadline_s:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process on port {port} exited with {proc.returncode}")
        try:
            if http_get(port, path)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"port {port}: {path} not 200 after {deadline_s} s")


class Replica:
    def __init__(self, threads, model, kv_tokens, port=0, drain_s=5):
        self.threads, self.model, self.kv_tokens, self.drain_s = threads, model, kv_tokens, drain_s
        self.start(port)

    def start(self, port=0):
        cmd = [str(bs.LLMK), "serve", "--port", str(port), "--model", str(self.model), "--threads",
               str(self.threads), "--kv-tokens", str(self.kv_tokens), "--max-seqs", "32", "--drain-timeout",
               str(self.drain_s)]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        m = re.search(r"http://127\.0\.0\.1:(\d+)", self.p.stdout.readline())
        if not m:
            raise RuntimeError(f"llmk serve did not start (status {self.p.poll()})")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self, sig=signal.SIGINT):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def metrics(self):
        try:
            return bs.Proc.metrics(type("P", (), {"kind": "llmk", "port": self.port})())
        except OSError:
            return {}


class Router:
    def __init__(self, kind, policy, replicas):
        self.kind, self.port = kind, bs.free_port()
        self.tmp = tempfile.mkdtemp(prefix="llmk-router-")
        urls = [r.url for r in replicas]
        if kind == "vllm-router":
            self.metrics_port = bs.free_port()
            exe = str(VLLM_ROUTER) if VLLM_ROUTER.exists() else "vllm-router"
            cmd = [exe, "--host", "127.0.0.1", "--port", str(self.port), "--worker-urls", *urls, "--policy", policy,
                   "--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.metrics_port),
                   "--health-check-endpoint", "/health", "--health-check-interval-secs", "1",
                   "--health-failure-threshold", "1", "--log-level", "warning", "--log-dir", self.tmp]
            self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            self.metrics_port = bs.free_port()
            servers = "\n".join(f"  server r{i} 127.0.0.1:{r.port} check" for i, r in enumerate(replicas))
            cfg = f"""global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 600s
  timeout server 600s
  timeout http-request 30s
  retries 2
  option redispatch 1
  retry-on conn-failure empty-response 503
frontend fe
  bind 127.0.0.1:{self.port}
  option http-buffer-request
  default_backend be
frontend stats
  bind 127.0.0.1:{self.metrics_port}
  stats enable
  stats uri /stats
backend be
  balance hdr(X-Session-Id)
  hash-type consistent
  option httpchk GET /health
  default-server inter 500ms fall 1 rise 1
{servers}
"""
            Path(self.tmp, "haproxy.cfg").write_text(cfg)
            self.p = subprocess.Popen(["haproxy", "-db", "-f", str(Path(self.tmp, "haproxy.cfg"))],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.port, "/v1/models", 60, self.p)

    def retries(self):
        """Requests the router retried on another replica, from its own metrics (None: not reported)."""
        try:
            if self.kind == "haproxy":
                st, body = http_get(self.metrics_port, "/stats;csv")
                rows = [ln.split(",") for ln in body.decode().splitlines()]
                head = [h.lstrip("# ") for h in rows[0]]
                i, j = head.index("wretr"), head.index("wredis")
                return sum(int(r[i] or 0) + int(r[j] or 0) for r in rows[1:] if len(r) > j and r[1] == "BACKEND")
            st, body = http_get(self.metrics_port, "/metrics")
            n = 0.0
            for ln in body.decode().splitlines():
                name = ln.split(" ")[0].split("{")[0]
                if not ln.startswith("#") and "retr" in name and name.endswith("_total"):
                    n += float(ln.rsplit(" ", 1)[1])
            return n
        except (OSError, ValueError, IndexError):
            return None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def workload(kind, n, groups, out_tokens, rng, short=False):
    """[(path, body, session)]: bench_serve's random prompts, or `groups` conversations."""
    if kind == "random":
        return [(p, b, str(i)) for i, (p, b) in enumerate(bs.requests_for("random", n, out_tokens, rng, short))]
    systems = []
    for g in range(groups):
        grng = random.Random(100 + g)
        words = 60 if short else 700
        systems.append(f"You are assistant {g}. " + " ".join(grng.choice(bs.WORDS) for _ in range(words)))
    order = [i % groups for i in range(n)]
    rng.shuffle(order)  # not in turn: round robin must not land each conversation on one replica by chance
    out = []
    for i, g in enumerate(order):
        q = f"\n\nQuestion {i}: tell me about the " + " ".join(rng.choice(bs.WORDS) for _ in range(8)) + ".\nAnswer:"
        out.append(("/v1/completions", {"prompt": systems[g] + q, "max_tokens": out_tokens, "temperature": 0,
                                        "ignore_eos": True, "stream": True}, f"s{g}"))
    return out


def one(port, path, body, session, stall_s):
    """One streamed request: ("ok", ttft, gaps, n) | ("error", why) | ("hung", why)."""
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=stall_s)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json", "X-Session-Id": session})
        r = c.getresponse()
        if r.status != 200:
            return ("error", f"HTTP {r.status}: {r.read()[:120].decode(errors='replace')}")
        ttft, last, gaps, n, done, finish = None, None, [], 0, False, None
        for raw in r:
            line = raw.strip()
            if line == b"data: [DONE]":
                done = True
                continue
            if not line.startswith(b"data: "):
                continue
            ch = json.loads(line[6:])
            for c0 in ch.get("choices") or []:
                finish = c0.get("finish_reason") or finish
                text = c0.get("text") if "text" in c0 else (c0.get("delta") or {}).get("content")
                if text:
                    now = time.perf_counter()
                    if ttft is None:
                        ttft = now - t0
                    else:
                        gaps.append(now - last)
                    last = now
                    n += 1
        if not done or finish in (None, "abort", "error"):
            return ("error", f"stream cut short (finish {finish})")
        return ("ok", ttft if ttft is not None else time.perf_counter() - t0, gaps, n)
    except TimeoutError:
        return ("hung", f"no byte for {stall_s} s")
    except (OSError, http.client.HTTPException, ValueError) as e:
        return ("error", type(e).__name__)


def drive(port, reqs, conc, stall_s, on_progress=None):
    results, lock, it = [], threading.Lock(), iter(reqs)

    def worker():
        while True:
            with lock:
                nxt = next(it, None)
            if nxt is None:
                return
            r = one(port, *nxt, stall_s)
            with lock:
                results.append(r)
                if on_progress:
                    on_progress(len(results))

    t0 = time.perf_counter()
    th = [threading.Thread(target=worker) for _ in range(conc)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return results, time.perf_counter() - t0


def pct(xs, p):
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def summarize(results, wall, replicas, before):
    ok = [r for r in results if r[0] == "ok"]
    ttfts = sorted(r[1] for r in ok)
    gaps = sorted(g for r in ok for g in r[2])
    after = [r.metrics() for r in replicas]
    per = []
    for b, a in zip(before, after):
        d = lambda k: a.get(k, 0) - b.get(k, 0)  # noqa: E731
        p, h = d("llmk_prompt_tokens_total"), d("llmk_cached_prompt_tokens_total")
        per.append((p, h))
    prompt = sum(p for p, _ in per)
    return {"tok_s": sum(r[3] for r in ok) / wall, "ttft_p50": pct(ttfts, 50), "ttft_p99": pct(ttfts, 99),
            "itl_p50": pct(gaps, 50), "itl_p99": pct(gaps, 99), "requests": len(results), "ok": len(ok),
            "wall_s": wall, "hit_rate": sum(h for _, h in per) / prompt if prompt else None,
            "replica_hit_rates": [round(h / p, 3) if p else None for p, h in per],
            "spread": [round(p / prompt, 3) if prompt else None for p, _ in per]}


def bench(a):
    rows = []
    model = Path(a.model)
    n_rep = a.replicas
    per_threads = max(1, a.threads // n_rep)
    setups = [("one replica", None, None)] + [(f"{a.router} {pol}", a.router, pol) for pol in a.policies.split(",")]
    if a.router == "haproxy":
        setups = [("one replica", None, None), ("haproxy hash", "haproxy", "hash")]
    out_tokens = 8 if a.quick else a.out_tokens
    for wl in a.workloads.split(","):
        n = a.requests or (2 * n_rep + 2 if a.quick else 16 * n_rep)
        reqs = workload(wl, n, 2 * n_rep, out_tokens, random.Random(7), short=a.quick)
        for name, router, policy in setups:
            k = 1 if router is None else n_rep
            reps = [Replica(a.threads if router is None else per_threads, model, a.kv_tokens) for _ in range(k)]
            rt = None
            try:
                rt = Router(router, policy, reps) if router else None
                port = rt.port if rt else reps[0].port
                before = [r.metrics() for r in reps]
                res, wall = drive(port, reqs, a.concurrency, a.stall_s)
                row = summarize(res, wall, reps, before)
            finally:
                if rt:
                    rt.stop()
                for r in reps:
                    r.stop()
            row.update(workload=wl, setup=name, replicas=k, threads_each=reps[0].threads, concurrency=a.concurrency)
            rows.append(row)
            if a.json:
                print(json.dumps(row), flush=True)
            else:
                hr = "-" if row["hit_rate"] is None else f"{row['hit_rate']:.2f}"
                print(f"{wl:7s} {name:26s} x{k} ({row['threads_each']} thr) {row['tok_s']:7.1f} tok/s  TTFT p50 "
                      f"{row['ttft_p50']:6.2f} p99 {row['ttft_p99']:6.2f} s  ITL p50 {row['itl_p50']*1e3:6.0f} ms  "
                      f"hit {hr} per replica {row['replica_hit_rates']} spread {row['spread']}  "
                      f"({row['ok']}/{row['requests']} ok, {row['wall_s']:.1f} s)", flush=True)
    by = {(r["workload"], r["setup"]): r for r in rows}
    for wl in a.workloads.split(","):
        one_r, ca, rr = by.get((wl, "one replica")), by.get((wl, f"{a.router} cache_aware")), \
            by.get((wl, f"{a.router} round_robin"))
        if ca and rr and one_r:
            line = {"type": "ratio", "workload": wl,
                    "hit_cache_aware_over_one": (ca["hit_rate"] or 0) / one_r["hit_rate"] if one_r["hit_rate"] else None,
                    "ttft_p99_cache_aware_over_round_robin": ca["ttft_p99"] / rr["ttft_p99"],
                    "throughput_cache_aware_over_one": ca["tok_s"] / one_r["tok_s"]}
            print(json.dumps(line) if a.json else "  " + wl + ": " + ", ".join(
                f"{k} {v:.2f}x" for k, v in line.items() if isinstance(v, float)), flush=True)
    return rows


def fault(a):
    """Kill -9 one replica mid-run, SIGTERM another and restart it; count what the clients saw."""
    n_rep = 2 if a.quick else 3
    model = Path(a.model)
    reps = [Replica(max(1, a.threads // n_rep), model, a.kv_tokens, drain_s=5) for _ in range(n_rep)]
    policy = "round_robin" if a.router == "vllm-router" else "hash"
    rt = None
    n = a.requests or (8 if a.quick else 48)
    out_tokens = 16 if a.quick else 64
    reqs = workload("shared", n, 2 * n_rep, out_tokens, random.Random(11), short=a.quick)
    events = []
    try:
        rt = Router(a.router, policy, reps)
        done = threading.Event()

        def chaos(count):
            if count >= n // 3 and not events:
                events.append(("kill -9 replica 0", time.time()))
                reps[0].p.kill()
                if n_rep >= 3:
                    threading.Thread(target=sigterm_and_restart, daemon=True).start()
            if count >= n:
                done.set()

        def sigterm_and_restart():
            r = reps[1]
            port = r.port
            events.append(("SIGTERM replica 1", time.time()))
            r.p.send_signal(signal.SIGTERM)
            r.p.wait(30)
            r.start(port)
            events.append(("replica 1 restarted", time.time()))

        res, wall = drive(rt.port, reqs, a.concurrency, a.stall_s, on_progress=chaos)
        retried = rt.retries()
    finally:
        if rt:
            rt.stop()
        for r in reps:
            r.stop()
    counts = {k: sum(1 for r in res if r[0] == k) for k in ("ok", "error", "hung")}
    why = {}
    for r in res:
        if r[0] != "ok":
            why[r[1]] = why.get(r[1], 0) + 1
    row = {"type": "fault", "router": f"{a.router} {policy}", "replicas": n_rep, "requests": len(res),
           "completed": counts["ok"], "errored_retryable": counts["error"], "hung": counts["hung"],
           "router_retries": retried, "errors": why, "events": [e for e, _ in events], "wall_s": round(wall, 1)}
    print(json.dumps(row) if a.json else
          f"fault: {row['router']}, {n_rep} replicas, {row['requests']} requests: {row['completed']} completed, "
          f"{row['errored_retryable']} errored (retryable), {row['hung']} hung; router retries {retried}; "
          f"errors {why}; events {row['events']}; {row['wall_s']} s", flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--router", default="vllm-router")
    ap.add_argument("--policies", default="cache_aware,round_robin")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=0)
    ap.add_argument("--workloads", default="shared,random")
    ap.add_argument("--out-tokens", type=int, default=128)
    ap.add_argument("--kv-tokens", type=int, default=32768)
    ap.add_argument("--stall-s", type=float, default=30.0, help="a request with no byte for this long is hung")
    ap.add_argument("--model", default=str(bs.MODEL))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fault", action="store_true", help="run the fault test (only)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.replicas < 1:
        raise SystemExit(f"--replicas: must be >= 1, got {a.replicas}")
    if not router_available(a.router):
        raise SystemExit(f"--router {a.router}: not installed (vllm-router: scripts/setup-peers; haproxy: scripts/setup)")
    if a.quick:
        a.concurrency = min(a.concurrency, 4)
        a.kv_tokens = min(a.kv_tokens, 4096)
    return fault(a) if a.fault else bench(a)


if __name__ == "__main__":
    main()
