"""Starting `llmk serve` on a free loopback port for the server tests."""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LLMK = Path(os.environ.get("LLMK_BUILD_DIR", ROOT / "build")) / "llmk"


def has_serve():
    if not LLMK.exists():
        return False
    return " serve " in subprocess.run([str(LLMK)], capture_output=True, text=True).stdout + \
        subprocess.run([str(LLMK)], capture_output=True, text=True).stderr


class Server:
    """`llmk serve --port 0 ARGS`: the port is read from its first line of output."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([str(LLMK), "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://(127\.0\.0\.\d+|\[::1\]|localhost):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"llmk serve did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(m.group(2))
        self.url = f"http://{m.group(1)}:{self.port}"

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def metrics(port):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def wait_for(pred, timeout=30.0):
    t = time.time()
    while time.time() - t < timeout:
        if pred():
            return True
        time.sleep(0.05)
    return False
