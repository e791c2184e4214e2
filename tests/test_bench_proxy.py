"""benchmarks/proxy.py: its helpers, and a --quick run end to end (serve-sim, the proxy
where it exists, faults) that must finish with every fault answered and nothing hung."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

pytest.importorskip("httpx", reason="needs httpx: pip install 'windowfit[proxy]'")

import proxy as bench  # noqa: E402


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0], 50, 1.0),
        ([1.0, 2.0, 3.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        (list(range(101)), 99, 99.0),
        ([5.0, 1.0, 3.0], 0, 1.0),
        ([5.0, 1.0, 3.0], 100, 5.0),
    ],
)
def test_quantiles_interpolate(values, q, expected):
    assert bench.pct([float(v) for v in values], q) == pytest.approx(expected)


def test_a_conversation_pairs_every_tool_call_and_grows_by_one_result():
    conv = bench.Conversation(3, 20_000, 500)
    first = json.loads(conv.next_body(stream=True))
    second = json.loads(conv.next_body(stream=True))
    assert first["model"] == bench.MODEL and first["stream"] is True
    assert len(second["messages"]) == len(first["messages"]) + 2
    messages = first["messages"]
    assert messages[0]["role"] == "user" and isinstance(messages[0]["content"], str)
    for call, result in zip(messages[1::2], messages[2::2], strict=True):
        assert call["content"][0]["id"] == result["content"][0]["tool_use_id"]
    words = sum(len(m["content"][0]["content"].split()) for m in messages[2::2])
    assert 19_000 <= words <= 20_000
    other = json.loads(bench.Conversation(4, 20_000, 500).next_body(stream=True))
    assert other["messages"][0] != messages[0]  # distinct conversations for the proxy


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_upstream_connections_are_read_from_proc():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    try:
        assert len(bench.upstream_connections(os.getpid(), port)) == 1
        assert bench.upstream_connections(os.getpid(), port + 1 if port < 65535 else 1) == set()
    finally:
        client.close()
        accepted.close()
        server.close()
    assert bench.rss_mb(os.getpid()) > 1


@pytest.mark.slow
def test_the_quick_run_answers_every_fault_and_nothing_hangs():
    run = subprocess.run(
        [sys.executable, str(BENCH / "proxy.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = run.stdout
    assert run.returncode == 0, out[-3000:] + run.stderr[-3000:]
    assert "HUNG" not in out
    faults = [line for line in out.splitlines() if line.startswith("| ") and " s |" not in line]
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in faults}
    for scenario in bench.SCENARIOS:
        assert scenario.name in rows, out
    direct = {name: cells[0] for name, cells in rows.items() if cells}
    assert direct["429 rate limit (retry_after=1)"].startswith("429 rate_limit_error")
    assert "(retry-after 1)" in direct["429 rate limit (retry_after=1)"]
    assert direct["529 overloaded, streamed"].startswith("529 overloaded_error")
    assert direct["stream dropped after 3 events"].startswith("200, 3 events, then")
    assert direct["slow upstream (2 s)"].endswith("last message_stop")
    proxied = "windowfit proxy could not start" not in out
    if proxied:
        assert "through windowfit proxy" in out
        for name in ("429 rate limit (retry_after=1)", "529 overloaded, streamed", "500 api error"):
            assert rows[name][2] == rows[name][0], name  # the upstream's error, verbatim
        assert "request cancelled" in rows["client disconnects (upstream 5 s)"][2]
        assert "proxy RSS over 200 requests" in out
