"""Where the proxy keeps what it learns per conversation between requests.

The fitting decision is a pure function of the request, so proxy replicas need no
coordination for it; what does outlive a request (for example the provider's own count
of a conversation's last request, learned from its usage) is a small string per key.
:class:`MemoryStateStore` keeps it in the process (bounded, least recently used first
out); :class:`RedisStateStore` keeps it in Redis so that every replica behind a load
balancer sees the same (``windowfit proxy --redis URL``).

The proxy must never make a request fail that would have succeeded without it, so once
a Redis store is open, a Redis that stops answering makes lookups miss and writes drop
(counted in :attr:`RedisStateStore.failures`, logged at most once a minute) rather than
fail the request; only opening the store checks the server and raises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from ..errors import MissingExtraError, SettingsError

__all__ = ["MemoryStateStore", "RedisStateStore", "StateStore", "open_store", "redact_url"]

_log = logging.getLogger("windowfit.proxy")

#: Seconds between two log lines about a Redis that does not answer.
_WARN_EVERY = 60.0


@runtime_checkable
class StateStore(Protocol):
    """A string-to-string store shared by the requests of one proxy (or of all replicas)."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


class MemoryStateStore:
    """At most ``max_entries`` keys in this process; the least recently used go first."""

    def __init__(self, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise SettingsError(f"max_entries must be at least 1, not {max_entries!r}")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, str] = OrderedDict()

    def get(self, key: str) -> str | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def set(self, key: str, value: str) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unreadable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class RedisStateStore:
    """Keys in Redis under ``prefix``, each expiring ``ttl_seconds`` after its last write.

    Needs the ``redis`` package (``pip install 'windowfit[proxy]'``). Opening checks that
    the server answers (a :class:`~windowfit.errors.SettingsError` naming the URL, with
    any password hidden, when it does not). Every call waits at most ``timeout`` seconds.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "windowfit:",
        ttl_seconds: int = 7 * 86400,
        timeout: float = 1.0,
    ) -> None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or ttl_seconds < 1:
            raise SettingsError(f"ttl_seconds must be a whole number >= 1, not {ttl_seconds!r}")
        try:
            import redis
        except ImportError as exc:
            raise MissingExtraError("redis", "proxy", "windowfit proxy --redis") from exc
        self.url = redact_url(url)
        self.prefix = prefix
        self.ttl_seconds = ttl_seconds
        self.failures = 0
        self._warned_at = -_WARN_EVERY
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        try:
            self._client: Any = redis.Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                decode_responses=True,
            )
        except ValueError as exc:
            raise SettingsError(f"--redis {self.url}: not a Redis URL ({exc})") from None
        try:
            self._client.ping()
        except self._errors as exc:
            self._client.close()
            raise SettingsError(
                f"--redis {self.url}: the Redis server does not answer ({exc}); "
                "start it or leave out --redis to keep state in this process"
            ) from None

    def _failed(self, action: str, exc: BaseException) -> None:
        self.failures += 1
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            _log.warning(
                "Redis %s at %s failed (%s); the proxy goes on without the learned state "
                "(%d failures so far)",
                action,
                self.url,
                exc,
                self.failures,
            )

    def get(self, key: str) -> str | None:
        try:
            value = self._client.get(self.prefix + key)
        except self._errors as exc:
            self._failed("read", exc)
            return None
        return value if isinstance(value, str) else None

    def set(self, key: str, value: str) -> None:
        try:
            self._client.set(self.prefix + key, value, ex=self.ttl_seconds)
        except self._errors as exc:
            self._failed("write", exc)

    def close(self) -> None:
        self._client.close()


def open_store(redis_url: str | None) -> StateStore:
    """The store ``windowfit proxy`` uses: in this process, or in Redis at ``redis_url``."""
    if redis_url is None or not redis_url.strip():
        return MemoryStateStore()
    return RedisStateStore(redis_url.strip())
