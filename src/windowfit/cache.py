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


_KEY_MEMO_LIMIT = 200_000


@dataclass
class PrefixCacheMeter:
    """Tracks one agent's successive requests (the longest shared prefix is a cache read).

    ``fixed`` is the size of what precedes the messages (system prompt and tools); it is
    read from the cache after the first request while it does not change.

    Two messages match when they are the same object or have the same
    :func:`message_key`; keys are computed once per message object (the meter holds a
    reference, so an id is never reused while remembered), so replaying a long run
    compares mostly by identity and serialises each message once.
    """

    pricing: CachePricing = field(default_factory=CachePricing)
    requests: int = 0
    breaks: int = 0
    read_tokens: int = 0
    write_tokens: int = 0
    resent_on_break: int = 0
    _previous: list[Any] = field(default_factory=list)
    _fixed: int = -1
    _memo: dict[int, tuple[Any, str]] = field(default_factory=dict)

    def _key(self, message: Any) -> str:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = message_key(message)
        if len(self._memo) >= _KEY_MEMO_LIMIT:
            self._memo.clear()
        self._memo[id(message)] = (message, key)
        return key

    def _same(self, a: Any, b: Any) -> bool:
        return a is b or self._key(a) == self._key(b)

    def shared_prefix(self, messages: Sequence[Any], fixed: int = 0) -> int:
        """How many leading ``messages`` the previous request also started with (0 when
        the part before the messages changed or there was no previous request)."""
        if self._fixed != fixed:
            return 0
        previous = self._previous
        limit = min(len(messages), len(previous))
        shared = 0
        while shared < limit and self._same(messages[shared], previous[shared]):
            shared += 1
        return shared

    def observe(self, messages: Sequence[Any], sizes: Sequence[int], fixed: int = 0) -> CacheUse:
        """Account one request of ``messages`` whose estimated sizes are ``sizes``."""
        shared = self.shared_prefix(messages, fixed)
        total = fixed + sum(sizes)
        read = (fixed if self._fixed == fixed else 0) + sum(sizes[:shared])
        first = self.requests == 0
        broke = not first and (self._fixed != fixed or shared < len(self._previous))
        write = total - read
        self.requests += 1
        self.read_tokens += read
        self.write_tokens += write
        if broke:
            self.breaks += 1
            self.resent_on_break += total - read
        self._previous = list(messages)
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

    @property
    def resent_per_break(self) -> float:
        """Tokens written to the cache per break, on average (0 without breaks)."""
        return self.resent_on_break / self.breaks if self.breaks else 0.0
