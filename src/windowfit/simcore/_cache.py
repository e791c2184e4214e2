"""Counting requests with a real tokenizer, and the providers' prefix caches.

Both doors of the simulated provider use these: the ASGI server (``windowfit serve-sim``)
and the in-process model of :mod:`windowfit.sim`.

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
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..tokens import Estimator

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "CacheUse",
    "MemoEstimator",
    "PrefixCache",
    "Segment",
    "canonical",
    "memo_tokenizer",
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
    resends its whole conversation at every step, so each long text is counted once.
    The remembered texts take at most ``max_bytes`` (as Python stores them: a character
    can take 1, 2 or 4 bytes); past it the memo starts again empty."""

    def __init__(
        self, inner: Estimator, *, min_chars: int = 1_000, max_bytes: int = 64 * 1024 * 1024
    ):
        self.inner = inner
        self.name: str = inner.name
        self.family = inner.family
        self._counts: dict[str, int] = {}
        self._bytes = 0
        self._min = min_chars
        self._max = max_bytes

    def estimate(self, text: str) -> int:
        if len(text) < self._min:
            return self.inner.estimate(text)
        count = self._counts.get(text)
        if count is None:
            count = self.inner.estimate(text)
            size = sys.getsizeof(text)
            if size > self._max:
                return count
            if self._bytes + size > self._max:
                self._counts.clear()
                self._bytes = 0
            self._counts[text] = count
            self._bytes += size
        return count


def memo_tokenizer(tokenizer: str | Estimator, **memo: int) -> MemoEstimator:
    """A real tokenizer (a :func:`~windowfit.tokenizers.load_backend` name, or an
    estimator) that remembers its counts of long texts; a :class:`MemoEstimator` is
    returned as it is, so that several simulated providers share one memo."""
    if isinstance(tokenizer, MemoEstimator):
        return tokenizer
    if isinstance(tokenizer, str):
        from ..tokenizers import load_backend

        tokenizer = load_backend(tokenizer)
    return MemoEstimator(tokenizer, **memo)


#: Default bound on the prefix cache's memory (see :class:`PrefixCache`).
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024


def _entry_bytes() -> int:
    """What one stored prefix costs: its 48-byte key object and its expiry float, as this
    interpreter sizes them, plus the ordered dict's share (hash table entry and index, with
    room to grow, and the node that keeps the order), taken on the generous side: measured
    with tracemalloc, an entry costs about 230 bytes on CPython 3.10-3.13."""
    return sys.getsizeof(bytes(48)) + sys.getsizeof(0.0) + 160


class PrefixCache:
    """Stored prefixes per namespace, with a time to live and a bound in bytes.

    An entry is keyed by a fixed-size digest of its namespace and of its prefix, never by
    the text itself: a client can send a new ``prompt_cache_key`` or model name of any
    length with every request, and memory must not grow with what it sends. Entries are
    evicted least recently used first once :attr:`accounted_bytes` would pass ``max_bytes``
    (default :data:`DEFAULT_CACHE_BYTES`, 32 MiB: about 125,000 prefixes).
    """

    #: Accounted size of one entry, in bytes.
    ENTRY_BYTES = _entry_bytes()

    def __init__(
        self,
        *,
        min_tokens: int,
        increment: int,
        ttl: float,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_tokens = min_tokens
        self.increment = increment
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.clock = clock
        self._entries: OrderedDict[bytes, float] = OrderedDict()

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def accounted_bytes(self) -> int:
        """The memory the entries are accounted at (at most ``max_bytes``)."""
        return len(self._entries) * self.ENTRY_BYTES

    @staticmethod
    def _space(namespace: str) -> bytes:
        return hashlib.sha256(namespace.encode("utf-8", "surrogatepass")).digest()[:16]

    def _has(self, space: bytes, digest: bytes) -> bool:
        key = space + digest
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

    def _put(self, space: bytes, digest: bytes) -> None:
        key = space + digest
        self._entries[key] = self.clock() + self.ttl
        self._entries.move_to_end(key)
        while self._entries and len(self._entries) * self.ENTRY_BYTES > self.max_bytes:
            self._entries.popitem(last=False)

    @staticmethod
    def _chain(segments: Sequence[Segment]) -> tuple[list[bytes], list[int]]:
        digests: list[bytes] = []
        totals: list[int] = []
        running = hashlib.sha256()
        total = 0
        for segment in segments:
            running.update(segment.key.encode("utf-8", "surrogatepass"))
            running.update(b"\x00")
            digests.append(running.copy().digest())
            total += segment.tokens
            totals.append(total)
        return digests, totals

    def explicit(self, namespace: str, segments: Sequence[Segment]) -> CacheUse:
        """Anthropic's rule: reads and writes happen at breakpoints only."""
        breakpoints = [i for i, s in enumerate(segments) if s.breakpoint]
        if not breakpoints:
            return CacheUse(0, 0)
        space = self._space(namespace)
        digests, totals = self._chain(segments)
        hit = -1
        for point in reversed(breakpoints):
            if point <= hit:
                continue
            for i in range(point, max(-1, point - _LOOKBACK - 1), -1):
                if i <= hit:
                    break
                if self._has(space, digests[i]):
                    hit = i
                    break
        read = totals[hit] if hit >= 0 else 0
        written_to = hit
        for point in breakpoints:
            if point > hit and totals[point] >= self.min_tokens:
                self._put(space, digests[point])
                written_to = max(written_to, point)
        write = totals[written_to] - read if written_to > hit else 0
        return CacheUse(read, write)

    def automatic(self, namespace: str, segments: Sequence[Segment]) -> CacheUse:
        """OpenAI's rule: the longest prefix seen before, rounded down to the step."""
        space = self._space(namespace)
        digests, totals = self._chain(segments)
        hit = -1
        for i in range(len(segments) - 1, -1, -1):
            if self._has(space, digests[i]):
                hit = i
                break
        for i in range(hit + 1, len(segments)):
            if totals[i] >= self.min_tokens:
                self._put(space, digests[i])
        read = totals[hit] if hit >= 0 else 0
        if read < max(1, self.min_tokens):
            return CacheUse(0, 0)
        read = self.min_tokens + (read - self.min_tokens) // self.increment * self.increment
        return CacheUse(read, 0)
