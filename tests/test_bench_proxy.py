"""benchmarks/proxy.py: its helpers, and a --quick run end to end (serve-sim, the proxy
where it exists, faults) that must finish with every fault answered and nothing hung."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import types
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


@pytest.mark.parametrize(
    ("concurrency", "requests", "staggered", "expected"),
    [
        (1, 200, False, (20, 10)),
        (20, 240, False, (6, 2)),
        (20, 240, True, (4, 3)),
        (1, 5, False, (1, 5)),
        (20, 20, True, (1, 1)),
        (1, 25, False, (2, 10)),
    ],
)
def test_rounds_split_each_paths_requests(concurrency, requests, staggered, expected):
    assert bench.rounds_for(concurrency, requests, staggered) == expected


@pytest.mark.parametrize(("requests", "step"), [(200, 240), (60, 800), (12, 800), (0, 800)])
def test_a_conversation_grows_at_most_48k_tokens_over_a_run(requests, step):
    assert bench.step_tokens(requests) == step
    assert step * requests <= bench.GROWTH_TOKENS


def _timing(total: float, place: tuple[int, int, int]) -> bench.Timing:
    return bench.Timing(total / 2, total, 200, None, place)


def test_pairs_are_the_requests_of_the_same_place_and_a_failure_drops_its_pair():
    direct = bench.PathResult("direct", [_timing(t, (0, 0, i)) for i, t in enumerate((10, 20, 30))])
    proxied = bench.PathResult(
        "proxy",
        [_timing(14, (0, 0, 2)), _timing(11, (0, 0, 0))],  # (0, 0, 1) failed
    )
    assert bench.paired(proxied, direct) == [1, -16]  # by place, not by order of arrival
    assert bench.paired(proxied, direct, "first_byte") == [0.5, -8]


def test_an_interleaved_run_gives_every_path_the_same_places_and_conversation_sizes():
    from windowfit.server import SimConfig, SimServer

    with SimServer(SimConfig(tool_rounds=0, context_window=1_000_000)) as sim:
        # the "process in between" is this one (its CPU is read per request; no process)
        here = types.SimpleNamespace(pid=os.getpid())
        service = bench.Service("in process", sim.url, here)  # type: ignore[arg-type]
        targets = [
            bench.Target("a", sim.url + "/v1/messages"),
            bench.Target("b", sim.url + "/v1/messages", service),
        ]
        pids = (os.getpid(), os.getpid())
        lanes = asyncio.run(bench.run_interleaved(targets, 2, 8, 3000, 1, pids))
        alone = asyncio.run(bench.run_interleaved(targets, 1, 2, 3000, 2, pids))
    assert [lane.result.name for lane in lanes] == ["a", "b"]
    places = [sorted(t.place for t in lane.result.timings) for lane in lanes]
    rounds, per_worker = bench.rounds_for(2, 8)
    expected = [(r, w, i) for r in range(rounds) for w in range(2) for i in range(per_worker)]
    assert places == [expected, expected]
    assert all(not lane.result.failures for lane in lanes)
    sizes = [[len(c.messages) for c in lane.conversations] for lane in lanes]
    assert sizes[0] == sizes[1]  # each path's own conversations, grown alike
    texts = [lane.conversations[0].messages[0]["content"] for lane in lanes]
    assert texts[0] != texts[1]  # not shared: serve-sim's memo favours neither
    # each request's own CPU in between: at concurrency 1 only, on paths with a middle
    assert [t.middle_cpu_ms for t in lanes[1].result.timings] == [None] * 8
    assert [t.middle_cpu_ms for t in alone[0].result.timings] == [None] * 2
    assert all(t.middle_cpu_ms and t.middle_cpu_ms > 0 for t in alone[1].result.timings)


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
    assert out.count("| paired added p50 / p99 (ms) |") == 2  # the latency and paced tables
    assert "Paths interleaved, per path concurrency 1: 1 round of 5 requests" in out
    proxied = "windowfit proxy could not start" not in out
    if proxied:
        assert "through windowfit proxy" in out
        row = r"^\| through windowfit proxy \| (\d+) / (\d+) \| [\d.]+ / [\d.]+ \| -?\d+ \|$"
        events = re.findall(row, out, re.M)  # the per-event table: short and long answers
        assert len(events) == 1 and int(events[0][0]) < int(events[0][1]), out
        assert "windowfit proxy, concurrency 1: the collector's passes per request" in out
        for name in ("429 rate limit (retry_after=1)", "529 overloaded, streamed", "500 api error"):
            assert rows[name][2] == rows[name][0], name  # the upstream's error, verbatim
        assert "request cancelled" in rows["client disconnects (upstream 5 s)"][2]
        assert "proxy RSS over 200 requests" in out
