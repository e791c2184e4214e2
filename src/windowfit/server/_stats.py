"""The server's counters, served at ``GET /_sim/stats``."""

from __future__ import annotations

import sys
from collections import Counter, deque
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["DEFAULT_LOG_BYTES", "LOG_SIZE", "MODEL_CHARS", "RequestLog", "Stats"]

#: How many recent requests ``/_sim/stats`` lists, at most.
LOG_SIZE = 200
#: ... and how much memory they may take, at most: the oldest go first past either bound.
DEFAULT_LOG_BYTES = 1024 * 1024
#: A model name longer than this is cut in the log (a client chooses what it sends).
MODEL_CHARS = 256


@dataclass
class RequestLog:
    """One provider request as the server saw it.

    ``tokens`` is the input as the server counted it with its tokenizer (``None`` when the
    request was refused before counting), ``status`` the HTTP status answered (0 for a
    dropped connection), ``error`` the kind of refusal.
    """

    route: str
    status: int = 0
    model: str | None = None
    tokens: int | None = None
    max_tokens: int | None = None
    stream: bool = False
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    error: str | None = None
    fault: str | None = None
    accounted: int = field(default=0, repr=False, compare=False)  # bytes, once finished

    def size(self) -> int:
        """The bytes this entry holds: the object and every value in it."""
        return sys.getsizeof(self) + sum(
            sys.getsizeof(getattr(self, f.name)) for f in fields(self) if f.name != "accounted"
        )


@dataclass
class Stats:
    """Counters since the server started (or since ``POST /_sim/reset``).

    The log of recent requests keeps at most :data:`LOG_SIZE` entries and at most
    ``log_max_bytes`` bytes of them (default :data:`DEFAULT_LOG_BYTES`), so that
    what clients send (a model name of any length) cannot grow the server's memory.
    """

    requests: int = 0
    by_route: Counter[str] = field(default_factory=Counter)
    by_status: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    faults: int = 0
    streams: int = 0
    answered: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    max_request_tokens: int = 0
    log: deque[RequestLog] = field(default_factory=deque)
    log_max_bytes: int = DEFAULT_LOG_BYTES
    log_bytes: int = 0

    def start(self, route: str) -> RequestLog:
        self.requests += 1
        self.by_route[route] += 1
        entry = RequestLog(route)
        self.log.append(entry)
        self._trim()
        return entry

    def _trim(self) -> None:
        while self.log and (len(self.log) > LOG_SIZE or self.log_bytes > self.log_max_bytes):
            self.log_bytes -= self.log.popleft().accounted

    def finish(self, entry: RequestLog) -> None:
        if entry.model is not None and len(entry.model) > MODEL_CHARS:
            entry.model = f"{entry.model[:MODEL_CHARS]}... ({len(entry.model):,} characters)"
        if any(e is entry for e in reversed(self.log)):  # not already pushed out
            entry.accounted = entry.size()
            self.log_bytes += entry.accounted
            self._trim()
        self.by_status[str(entry.status)] += 1
        if entry.error is not None:
            self.errors[entry.error] += 1
        if entry.fault is not None:
            self.faults += 1
        if entry.tokens is not None:
            self.max_request_tokens = max(self.max_request_tokens, entry.tokens)
        if entry.status == 200 and entry.route != "anthropic.count_tokens":
            self.answered += 1
            self.streams += entry.stream
            self.input_tokens += entry.tokens or 0
            self.cache_read_tokens += entry.cache_read
            self.cache_write_tokens += entry.cache_write
            self.output_tokens += entry.output_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "answered": self.answered,
            "by_route": dict(self.by_route),
            "by_status": dict(self.by_status),
            "errors": dict(self.errors),
            "faults": self.faults,
            "streams": self.streams,
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
            "max_request_tokens": self.max_request_tokens,
            "log": [
                {k: v for k, v in asdict(entry).items() if k != "accounted"} for entry in self.log
            ],
        }
