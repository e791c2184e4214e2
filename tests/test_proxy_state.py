"""The proxy's learned-state stores: bounded in memory, shared through a real redis-server."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from redis_server import NEEDS_REDIS, REDIS, free_port, running_redis, start_redis, stop_redis
from windowfit.errors import MissingExtraError, SettingsError
from windowfit.proxy._state import (
    MemoryStateStore,
    RedisStateStore,
    StateStore,
    open_store,
    redact_url,
)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """The URL of a real redis-server started for this test, stopped after it."""
    with running_redis(tmp_path) as url:
        yield url


# --------------------------------------------------------------------------- memory


def test_memory_store_keeps_and_replaces_values():
    store = MemoryStateStore()
    assert store.get("conv-1") is None
    store.set("conv-1", "a")
    store.set("conv-1", "b")
    assert store.get("conv-1") == "b"
    assert len(store) == 1


def test_memory_store_drops_the_least_recently_used_beyond_its_bound():
    store = MemoryStateStore(max_entries=3)
    for key in "abc":
        store.set(key, key.upper())
    assert store.get("a") == "A"  # a is now the most recently used
    store.set("d", "D")
    assert len(store) == 3
    assert store.get("b") is None
    assert [store.get(k) for k in "acd"] == ["A", "C", "D"]


def test_memory_store_stays_bounded_under_many_conversations_and_threads():
    store = MemoryStateStore(max_entries=500)

    def work(n: int) -> None:
        for i in range(3000):
            store.set(f"{n}-{i}", str(i))
            store.get(f"{n}-{i // 2}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store) == 500


@pytest.mark.parametrize("bad", [0, -1])
def test_memory_store_needs_room_for_one_entry(bad):
    with pytest.raises(SettingsError, match="max_entries"):
        MemoryStateStore(max_entries=bad)


def test_open_store_without_a_url_keeps_state_in_the_process():
    assert isinstance(open_store(None), MemoryStateStore)
    assert isinstance(open_store("  "), MemoryStateStore)
    assert isinstance(MemoryStateStore(), StateStore)


# --------------------------------------------------------------------------- redis


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:s3cret@cache.internal:6380/2", "redis://:***@cache.internal:6380/2"),
        ("rediss://user:pw@host/0", "rediss://user:***@host/0"),
    ],
)
def test_redis_urls_are_shown_without_their_password(url, shown):
    assert redact_url(url) == shown


def test_two_stores_on_one_server_share_state(redis_url):
    first, second = open_store(redis_url), RedisStateStore(redis_url)
    assert isinstance(first, RedisStateStore) and isinstance(first, StateStore)
    first.set("conv-42", '{"calibration": 1.07}')
    assert second.get("conv-42") == '{"calibration": 1.07}'
    second.set("conv-42", '{"calibration": 1.1}')
    assert first.get("conv-42") == '{"calibration": 1.1}'
    assert first.get("unknown") is None


def test_keys_live_under_the_prefix_with_the_ttl(redis_url):
    import redis

    store = RedisStateStore(redis_url, prefix="wf-test:", ttl_seconds=3600)
    store.set("conv-1", "x")
    raw = redis.Redis.from_url(redis_url, decode_responses=True)
    assert raw.get("wf-test:conv-1") == "x"
    assert 3590 <= raw.ttl("wf-test:conv-1") <= 3600
    store.set("conv-1", "y")  # a write renews the expiry
    assert raw.ttl("wf-test:conv-1") > 3590
    other = RedisStateStore(redis_url, prefix="other:")
    assert other.get("conv-1") is None
    raw.close()


def test_an_unreachable_redis_is_a_settings_error_naming_the_url_without_its_password():
    port = free_port()  # nothing listens there
    pytest.importorskip("redis", reason="needs the 'redis' package: pip install 'windowfit[proxy]'")
    with pytest.raises(SettingsError) as info:
        RedisStateStore(f"redis://:hunter2@127.0.0.1:{port}/0", timeout=0.5)
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "does not answer" in message
    assert "hunter2" not in message


def test_a_malformed_redis_url_is_a_settings_error():
    pytest.importorskip("redis", reason="needs the 'redis' package: pip install 'windowfit[proxy]'")
    with pytest.raises(SettingsError, match="not a Redis URL"):
        RedisStateStore("http://127.0.0.1:1/0")


@pytest.mark.parametrize("ttl", [0, -5, 1.5, True])
def test_the_ttl_is_whole_seconds(ttl):
    with pytest.raises(SettingsError, match="ttl_seconds"):
        RedisStateStore("redis://127.0.0.1:1/0", ttl_seconds=ttl)


def test_a_redis_that_goes_away_makes_lookups_miss_instead_of_failing_requests(tmp_path):
    if REDIS is None:
        pytest.skip(NEEDS_REDIS)
    pytest.importorskip("redis", reason="needs the 'redis' package: pip install 'windowfit[proxy]'")
    proc, url = start_redis(tmp_path)
    try:
        store = RedisStateStore(url, timeout=0.5)
        store.set("conv", "v")
        assert store.get("conv") == "v"
    finally:
        stop_redis(proc)
    started = time.monotonic()
    assert store.get("conv") is None
    store.set("conv", "w")  # dropped, not raised
    assert store.failures == 2
    assert time.monotonic() - started < 5


def test_without_the_redis_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingExtraError, match=r"windowfit\[proxy\]"):
        open_store("redis://127.0.0.1:6379/0")
