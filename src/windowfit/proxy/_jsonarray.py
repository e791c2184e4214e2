"""A light watcher of a streamed JSON array, for the usage a relayed Gemini stream carries.

Gemini's ``:streamGenerateContent`` without ``?alt=sse`` answers one JSON array whose
elements (whole ``generateContent`` responses) arrive one after another
(``[{...},\\r\\n{...}]``). The proxy relays those bytes as they come and only *watches*
them: this scanner follows string and nesting state across chunks, cuts out each
top-level element as it closes and hands those that may hold usage to the dialect. Only
the bytes that matter to nesting are looked at (one regular-expression pass per chunk),
so that watching costs little next to relaying.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..formats import Usage

__all__ = ["JsonArrayWatcher"]

_MAX_ELEMENT_BYTES = 1024 * 1024  # an element larger than this is not watched (still relayed)
_SIGNIFICANT = re.compile(rb'[\[\]{}"\\]')


class JsonArrayWatcher:
    """Feed it a streamed JSON array's bytes; ``usage`` is the first usage with an input
    count seen, ``last_usage`` the last one (as :class:`~._sse.UsageWatcher`)."""

    def __init__(self, read: Callable[[Any], Usage | None]) -> None:
        self._read = read
        self._depth = 0
        self._in_string = False
        self._escaped = False  # the last byte fed was a backslash inside a string
        self._parts: list[bytes] = []  # the open element's bytes from earlier chunks
        self._size = 0
        self._watching = True  # False while an element is too large to be watched
        self.usage: Usage | None = None
        self.last_usage: Usage | None = None
        self.elements = 0

    def feed(self, chunk: bytes) -> None:
        start = 0 if self._depth >= 2 else None  # where the open element starts in chunk
        skip = 0 if self._escaped else -1  # the offset of a byte a backslash escaped
        self._escaped = False
        for match in _SIGNIFICANT.finditer(chunk):
            at = match.start()
            if at == skip:
                continue
            byte = chunk[at]
            if self._in_string:
                if byte == 0x5C:  # backslash: the next byte is taken as it is
                    if at + 1 == len(chunk):
                        self._escaped = True
                    skip = at + 1
                elif byte == 0x22:
                    self._in_string = False
                continue
            if byte == 0x22:
                self._in_string = True
            elif byte in (0x5B, 0x7B):  # [ {
                self._depth += 1
                if self._depth == 2:
                    start = at
            elif byte in (0x5D, 0x7D):  # ] }
                self._depth -= 1
                if self._depth == 1 and start is not None:
                    self._element(chunk[start : at + 1])
                    start = None
                elif self._depth < 0:
                    self._depth = 0  # not an array after all: nothing to watch
        if self._depth >= 2 and start is not None:
            self._keep(chunk[start:])

    def _keep(self, piece: bytes) -> None:
        if not self._watching:
            return
        self._size += len(piece)
        if self._size > _MAX_ELEMENT_BYTES:
            self._watching = False
            self._parts.clear()
            return
        self._parts.append(piece)

    def _element(self, tail: bytes) -> None:
        watching = self._watching
        data = b"".join((*self._parts, tail)) if self._parts else tail
        self._parts.clear()
        self._size = 0
        self._watching = True
        self.elements += 1
        if not watching or b'"usage' not in data:
            return
        try:
            payload = json.loads(data)
        except ValueError:
            return
        usage = self._read(payload)
        if usage is None:
            return
        self.last_usage = usage
        if self.usage is None and usage.input_tokens > 0:
            self.usage = usage
