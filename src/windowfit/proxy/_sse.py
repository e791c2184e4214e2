"""A light watcher of server-sent events, for the usage a relayed stream carries.

The proxy relays a stream's bytes as they arrive and only *watches* them: this parser
splits the bytes into events and hands the JSON of those that may carry usage to the
dialect. Most events (text deltas) are skipped without being parsed as JSON, so that
watching costs little next to relaying.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..formats import Usage

__all__ = ["UsageWatcher"]

_MAX_EVENT_BYTES = 1024 * 1024  # an event larger than this is not watched (still relayed)


class UsageWatcher:
    """Feed it a stream's bytes; ``usage`` is the first usage with an input count seen
    (Anthropic ``message_start``, OpenAI's last chunk, Gemini's ``usageMetadata``),
    ``last_usage`` the last one."""

    def __init__(self, read: Callable[[Any], Usage | None]) -> None:
        self._read = read
        self._buffer = b""
        self.usage: Usage | None = None
        self.last_usage: Usage | None = None
        self.events = 0

    def feed(self, chunk: bytes) -> None:
        data = self._buffer + chunk if self._buffer else chunk
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        *events, rest = data.split(b"\n\n")
        self._buffer = rest if len(rest) <= _MAX_EVENT_BYTES else b""
        for event in events:
            self.events += 1
            if b'"usage' not in event:  # "usage", "usageMetadata", "usage_metadata"
                continue
            self._event(event)

    def _event(self, event: bytes) -> None:
        lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if not lines:
            return
        try:
            payload = json.loads(b"\n".join(lines))
        except ValueError:
            return
        usage = self._read(payload)
        if usage is None:
            return
        self.last_usage = usage
        if self.usage is None and usage.input_tokens > 0:
            self.usage = usage
