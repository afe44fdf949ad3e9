"""The quick form of `llmk bench serve --replicas N --fault`: 2 replicas behind a router on
loopback ports, a handful of streamed requests, one replica killed (SIGKILL) mid-run. Every
request completes or ends with an error the client sees (never a hang past the bound), and the
surviving replica serves the rest. HAProxy (Debian) and vllm-router (scripts/setup-peers), each
where installed."""
import sys
import time
from pathlib import Path

import pytest

from serve_util import LLMK, ROOT

sys.path.insert(0, str(ROOT / "bench" / "serve"))
import bench_replicas as br  # noqa: E402

pytestmark = pytest.mark.skipif(not LLMK.exists(), reason=f"no CLI at {LLMK}")


@pytest.mark.parametrize("router", ["haproxy", "vllm-router"])
def test_quick_fault_loses_nothing_silently(router):
    if not br.router_available(router):
        pytest.skip(f"{router} not installed")
    t0 = time.time()
    row = br.main(["--fault", "--quick", "--router", router, "--threads", "1", "--stall-s", "15", "--json"])
    assert row["hung"] == 0, row
    assert row["completed"] + row["errored_retryable"] == row["requests"] == 8, row
    assert row["completed"] >= 4, row  # the surviving replica served the rest
    assert row["events"] == ["kill -9 replica 0"], row
    assert time.time() - t0 < 60
