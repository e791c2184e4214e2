"""The simulator's defences: its control routes need the key, deeply nested bodies get a
400 and one log line, and what clients send cannot grow its memory without bound."""

from __future__ import annotations

import json
import logging
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from windowfit.server import SimConfig, SimServer
from windowfit.server._app import FAULTS_BODY_EXAMPLE, MAX_JSON_DEPTH, nesting_exceeds
from windowfit.server._stats import LOG_SIZE, RequestLog, Stats
from windowfit.simcore import PrefixCache, Segment

KEY = "sk-sim-control-key-01"


@pytest.fixture(scope="module")
def locked() -> Iterator[SimServer]:
    with SimServer(SimConfig(api_keys=(KEY,))) as server:
        yield server


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(SimConfig(cache_min_tokens=0, cache_increment=1)) as server:
        yield server


# --------------------------------------------------------------------------- control routes

CONTROL = [
    ("GET", "/_sim/stats"),
    ("POST", "/_sim/reset"),
    ("GET", "/_sim/faults"),
    ("POST", "/_sim/faults"),
    ("DELETE", "/_sim/faults"),
    ("GET", "/_sim/health"),
    ("GET", "/_sim/anything-else"),
]


@pytest.mark.parametrize(("method", "path"), CONTROL)
@pytest.mark.parametrize("sent", [None, "sk-wrong", "Bearer sk-wrong"])
def test_control_routes_refuse_without_the_key(
    locked: SimServer, method: str, path: str, sent: str | None
) -> None:
    headers = {}
    if sent is not None:
        headers = {"authorization": sent} if sent.startswith("Bearer") else {"x-api-key": sent}
    body = json.dumps([{"status": 500}]).encode() if method == "POST" else None
    response = httpx.request(method, locked.url + path, content=body, headers=headers)
    assert response.status_code == 401
    assert "API key" in response.json()["error"]
    assert locked.stats()["faults_pending"] == 0  # nothing was injected


@pytest.mark.parametrize(
    "headers", [{"x-api-key": KEY}, {"authorization": f"Bearer {KEY}"}], ids=["x-api-key", "bearer"]
)
def test_control_routes_accept_the_key_in_either_header(
    locked: SimServer, headers: dict[str, str]
) -> None:
    url = locked.url + "/_sim/faults"
    added = httpx.post(url, content=b'[{"status": 529}]', headers=headers)
    assert added.status_code == 200 and added.json()["pending"] == [{"status": 529}]
    assert httpx.delete(url, headers=headers).json()["pending"] == []
    assert httpx.get(locked.url + "/_sim/stats", headers=headers).status_code == 200
    assert httpx.get(locked.url + "/_sim/nowhere", headers=headers).status_code == 404


def test_control_routes_are_open_when_no_key_is_set(sim: SimServer) -> None:
    assert httpx.get(sim.url + "/_sim/stats").status_code == 200


@pytest.mark.parametrize("body", [b'"500"', b'{"faults": "529"}', b'["drop"]', b"{"])
def test_a_bad_faults_body_is_answered_with_an_example(sim: SimServer, body: bytes) -> None:
    response = httpx.post(sim.url + "/_sim/faults", content=body)
    assert response.status_code == 400
    message = response.json()["error"]
    assert FAULTS_BODY_EXAMPLE in message
    # The example itself is accepted.
    example = httpx.post(sim.url + "/_sim/faults", content=FAULTS_BODY_EXAMPLE.encode())
    assert example.status_code == 200 and len(example.json()["pending"]) == 3
    httpx.delete(sim.url + "/_sim/faults")


# --------------------------------------------------------------------------- deep JSON


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _deep_body(provider: str, where: str, depth: int) -> bytes:
    inner = _nested(depth)
    if provider == "anthropic":
        if where == "schema":
            tools = [{"name": "t", "input_schema": {"type": "object", "properties": "@"}}]
            body: dict[str, Any] = {
                "model": "m",
                "max_tokens": 5,
                "tools": tools,
                "messages": [{"role": "user", "content": "hi"}],
            }
        else:
            use = {"type": "tool_use", "id": "x", "name": "t", "input": "@"}
            result = {"type": "tool_result", "tool_use_id": "x", "content": "r"}
            body = {
                "model": "m",
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [use]},
                    {"role": "user", "content": [result]},
                ],
            }
    elif where == "schema":
        function = {"name": "t", "parameters": {"type": "object", "properties": "@"}}
        body = {
            "model": "m",
            "tools": [{"type": "function", "function": function}],
            "messages": [{"role": "user", "content": "hi"}],
        }
    else:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi", "name": "@"}]}
    return json.dumps(body).replace('"@"', inner).encode()


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("where", ["schema", "message"])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 494, 800, 5_000, 200_000])
def test_deeply_nested_json_gets_a_400_and_one_log_line(
    sim: SimServer, caplog: pytest.LogCaptureFixture, provider: str, where: str, depth: int
) -> None:
    path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"
    with caplog.at_level(logging.WARNING, logger="windowfit.server"):
        response = httpx.post(sim.url + path, content=_deep_body(provider, where, depth))
    assert response.status_code == 400, response.text
    body = response.json()
    if provider == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert "levels deep" in body["error"]["message"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["type"] == "invalid_request_error"
        assert "levels deep" in body["error"]["message"]
    records = [r for r in caplog.records if r.name == "windowfit.server"]
    assert len(records) == 1 and records[0].exc_info is None
    assert len(records[0].getMessage().splitlines()) == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_nesting_at_the_limit_is_served(sim: SimServer, provider: str) -> None:
    path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"
    # The body's own levels (object, tools list, tool, schema, ...) count too.
    response = httpx.post(sim.url + path, content=_deep_body(provider, "schema", 100))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [
        ([], 1, False),
        ([[]], 1, True),
        ({"a": [{"b": 1}]}, 3, False),
        ({"a": [{"b": 1}]}, 2, True),
        ([1, [2, [3]], "x"], 3, False),
    ],
)
def test_nesting_exceeds_counts_levels(value: Any, limit: int, expected: bool) -> None:
    assert nesting_exceeds(value, limit) is expected


def test_nesting_exceeds_never_recurses() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert nesting_exceeds(deep, 99_999) and not nesting_exceeds(deep, 100_001)


# --------------------------------------------------------------------------- memory


def test_the_prefix_cache_is_bounded_in_bytes_whatever_keys_clients_send() -> None:
    limit = 2 * 1024 * 1024
    cache = PrefixCache(min_tokens=0, increment=1, ttl=300.0, max_bytes=limit)
    segments = [Segment(f"message {j}", 50) for j in range(50)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(400):  # 400 distinct 1 MB prompt_cache_keys, 50 prefixes each
            namespace = f"key\x00model\x00{i:08d}" + "k" * 1_000_000
            cache.automatic(namespace, segments)
            del namespace
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.accounted_bytes <= limit
    assert len(cache) == limit // PrefixCache.ENTRY_BYTES
    assert grown < limit * 1.25, grown  # the accounting is not far from the truth


def test_the_prefix_cache_still_hits_after_evictions() -> None:
    cache = PrefixCache(min_tokens=0, increment=1, ttl=300.0, max_bytes=PrefixCache.ENTRY_BYTES * 3)
    first = [Segment("a", 10), Segment("b", 10)]
    assert cache.automatic("ns", first).read == 0
    assert cache.automatic("ns", first).read == 20
    for k in range(3):
        cache.automatic("other", [Segment(f"x{k}", 10)])
    assert cache.automatic("ns", first).read == 0  # pushed out, least recently used first


def test_the_request_log_is_bounded_in_bytes() -> None:
    stats = Stats(log_max_bytes=64 * 1024)
    for i in range(1_000):
        entry = stats.start("openai.chat")
        entry.model = f"{i}" + "m" * 1_000_000  # a 1 MB model name
        entry.status = 200
        stats.finish(entry)
    assert stats.log_bytes <= 64 * 1024
    assert stats.log_bytes == sum(e.accounted for e in stats.log)
    assert 0 < len(stats.log) <= LOG_SIZE
    assert all(len(e.model or "") < 300 for e in stats.log)
    assert stats.requests == 1_000


def test_the_request_log_keeps_at_most_log_size_entries() -> None:
    stats = Stats()
    for _ in range(LOG_SIZE + 50):
        stats.finish(stats.start("anthropic.messages"))
    assert len(stats.log) == LOG_SIZE
    assert stats.log_bytes == sum(e.accounted for e in stats.log)
    assert "accounted" not in stats.to_json()["log"][0]


def test_the_server_memory_does_not_grow_with_distinct_cache_keys_and_models(
    sim: SimServer,
) -> None:
    sim.reset()
    for i in range(20):
        body = {
            "model": f"m{i}" + "x" * 50_000,
            "prompt_cache_key": f"{i}" + "k" * 50_000,
            "messages": [{"role": "user", "content": "hi " * 600}],
        }
        response = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=30)
        assert response.status_code == 200
    config = sim.stats()["config"]
    assert config["cache_bytes"] <= config["cache_max_bytes"]
    assert config["log_bytes"] <= config["log_max_bytes"]
    assert config["cache_entries"] == 20  # one prefix each, keyed by a digest
    assert config["cache_bytes"] == 20 * PrefixCache.ENTRY_BYTES
    assert RequestLog("x").size() < 1_000
