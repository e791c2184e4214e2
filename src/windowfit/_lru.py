"""A least-recently-used cache bounded by bytes, for the state objects that own caches."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["ByteBoundedCache"]


class ByteBoundedCache:
    """Least-recently-used entries whose sizes add up to at most ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.lock = threading.Lock()  # for callers that share it between threads
        self._entries: OrderedDict[Any, tuple[Any, int]] = OrderedDict()

    def take(self, key: Any) -> Any:
        """Remove and return the entry (``None`` when absent)."""
        hit = self._entries.pop(key, None)
        if hit is None:
            return None
        self.bytes -= hit[1]
        return hit[0]

    def get(self, key: Any) -> Any:
        hit = self._entries.get(key)
        if hit is None:
            return None
        self._entries.move_to_end(key)
        return hit[0]

    def put(self, key: Any, value: Any, size: int) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        if size > self.max_bytes:
            return
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0
