"""The server's counters, served at ``GET /_sim/stats``."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["LOG_SIZE", "RequestLog", "Stats"]

#: How many recent requests ``/_sim/stats`` lists.
LOG_SIZE = 200


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


@dataclass
class Stats:
    """Counters since the server started (or since ``POST /_sim/reset``)."""

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
    log: deque[RequestLog] = field(default_factory=lambda: deque(maxlen=LOG_SIZE))

    def start(self, route: str) -> RequestLog:
        self.requests += 1
        self.by_route[route] += 1
        entry = RequestLog(route)
        self.log.append(entry)
        return entry

    def finish(self, entry: RequestLog) -> None:
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
            "log": [asdict(entry) for entry in self.log],
        }
