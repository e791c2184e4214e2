"""Counting requests with a real tokenizer, and the providers' prefix caches.

A request is cut into *segments* in the order the providers cache it (tool definitions,
system prompt, then messages: per content block for Anthropic, per message for OpenAI),
each with its size in real tokens. Sizes use :class:`windowfit.sizing.Sizer`'s framing
(per-message and per-block overheads) over the tokenizer's text counts, so that the sizes
the server reports and the estimates fitting makes differ only in how text is counted.

Caches are kept per namespace (API key and model, plus OpenAI's ``prompt_cache_key``) as
hashes of whole prefixes, so interleaved conversations each find their own prefix:

* **Anthropic** caches only prefixes that end at a ``cache_control`` breakpoint (at most 4
  per request; a top-level ``cache_control`` marks the last block). A request reads the
  longest stored prefix that ends at a breakpoint or at one of the 20 block boundaries
  before it, and writes the prefixes up to its breakpoints: usage reports the read part
  as ``cache_read_input_tokens``, the newly written part as
  ``cache_creation_input_tokens`` and only the rest as ``input_tokens``.
* **OpenAI** caches automatically: ``prompt_tokens_details.cached_tokens`` is the longest
  prefix seen before (at a message boundary), from 1024 tokens on, in steps of 128.

Prefixes shorter than the provider's minimum are not cached. ``cache_control`` markers
themselves are not part of a prefix's identity (moving a breakpoint keeps the cache).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..tokens import Estimator

__all__ = [
    "CacheUse",
    "MemoEstimator",
    "PrefixCache",
    "Segment",
    "canonical",
    "strip_cache_control",
]

_LOOKBACK = 20  # Anthropic checks this many block boundaries before a breakpoint


@dataclass(frozen=True)
class Segment:
    """A cacheable part of a request: what it is (``key``), its size, and whether it ends
    at an explicit breakpoint."""

    key: str
    tokens: int
    breakpoint: bool = False


@dataclass(frozen=True)
class CacheUse:
    read: int
    write: int


def canonical(value: Any) -> str:
    """The JSON identity of a request part, without ``cache_control`` markers."""
    return json.dumps(
        strip_cache_control(value), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )


def strip_cache_control(value: Any) -> Any:
    """``value`` without ``cache_control`` keys, at any depth (a new value; ``value`` is
    left as it is)."""
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


class MemoEstimator(Estimator):
    """A real tokenizer whose counts of long texts are remembered by value: an agent
    resends its whole conversation at every step, so each long text is counted once."""

    def __init__(self, inner: Estimator, *, min_chars: int = 1_000, max_chars: int = 64_000_000):
        self.inner = inner
        self.name = inner.name
        self.family = inner.family
        self._counts: dict[str, int] = {}
        self._chars = 0
        self._min = min_chars
        self._max = max_chars

    def estimate(self, text: str) -> int:
        if len(text) < self._min:
            return self.inner.estimate(text)
        count = self._counts.get(text)
        if count is None:
            count = self.inner.estimate(text)
            if self._chars + len(text) > self._max:
                self._counts.clear()
                self._chars = 0
            self._counts[text] = count
            self._chars += len(text)
        return count


class PrefixCache:
    """Stored prefixes per namespace, with a time to live and a bounded size."""

    def __init__(
        self,
        *,
        min_tokens: int,
        increment: int,
        ttl: float,
        capacity: int = 16_384,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_tokens = min_tokens
        self.increment = increment
        self.ttl = ttl
        self.capacity = capacity
        self.clock = clock
        self._entries: OrderedDict[tuple[str, str], float] = OrderedDict()

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _has(self, namespace: str, digest: str) -> bool:
        key = (namespace, digest)
        expires = self._entries.get(key)
        now = self.clock()
        if expires is None:
            return False
        if expires < now:
            del self._entries[key]
            return False
        self._entries[key] = now + self.ttl  # a hit refreshes the entry, as providers do
        self._entries.move_to_end(key)
        return True

    def _put(self, namespace: str, digest: str) -> None:
        key = (namespace, digest)
        self._entries[key] = self.clock() + self.ttl
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    @staticmethod
    def _chain(segments: Sequence[Segment]) -> tuple[list[str], list[int]]:
        digests: list[str] = []
        totals: list[int] = []
        running = hashlib.sha256()
        total = 0
        for segment in segments:
            running.update(segment.key.encode("utf-8", "surrogatepass"))
            running.update(b"\x00")
            digests.append(running.copy().hexdigest())
            total += segment.tokens
            totals.append(total)
        return digests, totals

    def explicit(self, namespace: str, segments: Sequence[Segment]) -> CacheUse:
        """Anthropic's rule: reads and writes happen at breakpoints only."""
        breakpoints = [i for i, s in enumerate(segments) if s.breakpoint]
        if not breakpoints:
            return CacheUse(0, 0)
        digests, totals = self._chain(segments)
        hit = -1
        for point in reversed(breakpoints):
            if point <= hit:
                continue
            for i in range(point, max(-1, point - _LOOKBACK - 1), -1):
                if i <= hit:
                    break
                if self._has(namespace, digests[i]):
                    hit = i
                    break
        read = totals[hit] if hit >= 0 else 0
        written_to = hit
        for point in breakpoints:
            if point > hit and totals[point] >= self.min_tokens:
                self._put(namespace, digests[point])
                written_to = max(written_to, point)
        write = totals[written_to] - read if written_to > hit else 0
        return CacheUse(read, write)

    def automatic(self, namespace: str, segments: Sequence[Segment]) -> CacheUse:
        """OpenAI's rule: the longest prefix seen before, rounded down to the step."""
        digests, totals = self._chain(segments)
        hit = -1
        for i in range(len(segments) - 1, -1, -1):
            if self._has(namespace, digests[i]):
                hit = i
                break
        for i in range(hit + 1, len(segments)):
            if totals[i] >= self.min_tokens:
                self._put(namespace, digests[i])
        read = totals[hit] if hit >= 0 else 0
        if read < max(1, self.min_tokens):
            return CacheUse(0, 0)
        read = self.min_tokens + (read - self.min_tokens) // self.increment * self.increment
        return CacheUse(read, 0)
