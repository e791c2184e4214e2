"""What a request costs under a provider's prefix cache.

Providers reuse the work done for the start of a request when it matches the start of an
earlier one. Priced as Anthropic prices it (prompt-caching docs): a cache read costs 0.1x
the base input price, a cache write 1.25x (5-minute cache), so a request whose start
changed re-sends everything after the change at the write price. :class:`PrefixCacheMeter`
follows one agent's requests and splits each into tokens read from the cache and tokens
written to it, message by message, which is how replay, the simulator and the demo count
cache breaks and cost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CachePricing", "CacheUse", "PrefixCacheMeter", "message_key"]


@dataclass(frozen=True)
class CachePricing:
    """Input prices relative to the base input price (Anthropic's published multipliers)."""

    read: float = 0.1
    write: float = 1.25
    uncached: float = 1.0


@dataclass(frozen=True)
class CacheUse:
    """One request: tokens read from the cache, tokens written, and whether the request
    broke the prefix (did not start with the whole previous request)."""

    read: int
    write: int
    broke: bool

    @property
    def total(self) -> int:
        return self.read + self.write


def message_key(message: Any) -> str:
    """A stable text identity for a message (what the provider would see)."""
    return json.dumps(message, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass
class PrefixCacheMeter:
    """Tracks one agent's successive requests (the longest shared prefix is a cache read).

    ``fixed`` is the size of what precedes the messages (system prompt and tools); it is
    read from the cache after the first request while it does not change.
    """

    pricing: CachePricing = field(default_factory=CachePricing)
    requests: int = 0
    breaks: int = 0
    read_tokens: int = 0
    write_tokens: int = 0
    resent_on_break: int = 0
    _keys: list[str] = field(default_factory=list)
    _fixed: int = -1

    def observe(self, messages: Sequence[Any], sizes: Sequence[int], fixed: int = 0) -> CacheUse:
        """Account one request of ``messages`` whose estimated sizes are ``sizes``."""
        keys = [message_key(m) for m in messages]
        shared = 0
        if self._fixed == fixed:
            limit = min(len(keys), len(self._keys))
            while shared < limit and keys[shared] == self._keys[shared]:
                shared += 1
        total = fixed + sum(sizes)
        read = (fixed if self._fixed == fixed else 0) + sum(sizes[:shared])
        first = self.requests == 0
        broke = not first and (self._fixed != fixed or shared < len(self._keys))
        write = total - read
        self.requests += 1
        self.read_tokens += read
        self.write_tokens += write
        if broke:
            self.breaks += 1
            self.resent_on_break += total - read
        self._keys = keys
        self._fixed = fixed
        return CacheUse(read, write, broke)

    @property
    def cost(self) -> float:
        """Input cost with caching, in base-price tokens."""
        return self.read_tokens * self.pricing.read + self.write_tokens * self.pricing.write

    @property
    def cost_uncached(self) -> float:
        return (self.read_tokens + self.write_tokens) * self.pricing.uncached

    @property
    def read_share(self) -> float:
        total = self.read_tokens + self.write_tokens
        return self.read_tokens / total if total else 0.0
