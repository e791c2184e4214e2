"""Reading a large body that begins with an earlier body's bytes: only its new part parsed.

An agent's requests grow: each one is the previous one's bytes up to some message, then
the new messages (a tool result, the next call), then the same closing fields. Parsing
1 MB of JSON costs the proxy about 1.5 ms on the path between the client's last byte
and the body going out (``benchmarks/RESULTS.md``, "The floor"), for values it parsed a
moment ago. So :class:`BodyParser` remembers, for recent large bodies, their bytes, the
values of the fields before the conversation's array and of each element of that array,
and where each element ends. A new body that starts with the same bytes as a remembered
one up to the end of one of its elements takes those values as they are (identical
bytes are identical JSON) and parses only what follows, with the standard library's own
scanner, element by element, as ``json.loads`` would. What comes out is what
``_json.loads`` gives for the whole body, value for value, key order included (a test
checks it for any body against the whole parse): the shortcut is about time only.

Only for bodies of at least :data:`MIN_BYTES` in ASCII (what the SDKs send: JSON with
``\\u`` escapes; a body with raw UTF-8 is parsed whole, as before) whose top level is
an object holding the array once, with no non-finite number; anything else, or any
surprise on the way (invalid JSON after the shared bytes), is parsed whole by
``_json.loads``, which raises what it raises. What is remembered is bounded by bytes
(least recently used out) and holds no more than the values the previous request of
each conversation held.
"""

from __future__ import annotations

import json
import json.scanner
import math
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..fitter import Scanned
from . import _json

__all__ = ["MIN_BYTES", "BodyParser", "Remembered"]

#: Bodies at least this large are remembered (smaller ones parse in well under 0.5 ms).
MIN_BYTES = 256 * 1024

#: What a remembered body costs, per byte of it: the bytes, and the values parsed from
#: them (measured with tracemalloc on the benchmark's 1 MB bodies: 1.04 bytes per byte).
#: So the default bound holds 32 conversations of 1 MB, more than the benchmark's 20
#: served at once (which, kept in a bound one too small, would push each other out in
#: turn and never be found).
_COST_PER_BYTE = 2

_WHITESPACE = " \t\n\r"


class _Surprise(Exception):
    """The body is not of the shape the shortcut reads: parse it whole."""


@dataclass
class _Seen:
    raw: bytes
    field: str
    head: list[tuple[str, Any]]  # the top-level pairs before the array, as parsed
    elements: list[Any]
    ends: list[int]  # offset just after each element
    #: What the Fitter scanned of the messages (``elements``, the very objects): see
    #: :meth:`BodyParser.read`.
    scan: Scanned | None = None


#: A remembered body, as :meth:`BodyParser.read` hands it out (its ``scan`` slot).
Remembered = _Seen


class _Scanner:
    """The standard library's scanner with ``_json.loads``' handling of numbers:
    ``finite`` turns false at the first NaN or infinity."""

    def __init__(self) -> None:
        self.finite = True

        def constant(name: str) -> float:
            self.finite = False
            return float(name)

        def number(text: str) -> float:
            value = float(text)
            if not math.isfinite(value):
                self.finite = False
            return value

        decoder = json.JSONDecoder(parse_constant=constant, parse_float=number)
        # what json.loads scans with (typeshed types make_scanner's argument oddly)
        self.scan_once: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
            decoder  # type: ignore[arg-type]
        )

    def value(self, s: str, at: int) -> tuple[Any, int]:
        try:
            return self.scan_once(s, at)
        except StopIteration:
            raise _Surprise from None


def _skip(s: str, at: int) -> int:
    n = len(s)
    while at < n and s[at] in _WHITESPACE:
        at += 1
    return at


def _expect(s: str, at: int, char: str) -> int:
    if at >= len(s) or s[at] != char:
        raise _Surprise
    return at + 1


def _elements(
    scan: _Scanner, s: str, at: int, base: int, first: bool
) -> tuple[list[Any], list[int], int]:
    """The array's elements from ``at`` (just after ``[``, or after an element when not
    ``first``), their end offsets (``+ base``), and the offset after the ``]``."""
    values: list[Any] = []
    ends: list[int] = []
    at = _skip(s, at)
    if first and at < len(s) and s[at] == "]":
        return values, ends, at + 1
    while True:
        if not first or values:
            if at < len(s) and s[at] == "]":
                return values, ends, at + 1
            at = _skip(s, _expect(s, at, ","))
        value, at = scan.value(s, at)
        values.append(value)
        ends.append(at + base)
        at = _skip(s, at)


def _pairs(scan: _Scanner, s: str, at: int, first: bool) -> tuple[list[tuple[str, Any]], int]:
    """Top-level pairs from ``at`` to the closing ``}`` (``first``: just after ``{``)."""
    pairs: list[tuple[str, Any]] = []
    at = _skip(s, at)
    if first and at < len(s) and s[at] == "}":
        return pairs, at + 1
    while True:
        if not first or pairs:
            if at < len(s) and s[at] == "}":
                return pairs, at + 1
            at = _skip(s, _expect(s, at, ","))
        pair, at = _pair(scan, s, at)
        pairs.append(pair)
        at = _skip(s, at)


def _pair(scan: _Scanner, s: str, at: int) -> tuple[tuple[str, Any], int]:
    if at >= len(s) or s[at] != '"':
        raise _Surprise
    key, at = scan.value(s, at)
    at = _skip(s, _expect(s, _skip(s, at), ":"))
    value, at = scan.value(s, at)
    return (key, value), at


def _common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` share (compared in blocks, no copies)."""
    n = min(len(a), len(b))
    view = memoryview(a)
    at = 0
    block = 65536
    while block:
        while at + block <= n and b.startswith(view[at : at + block], at):
            at += block
        block //= 16
    while at < n and a[at] == b[at]:
        at += 1
    return at


class BodyParser:
    """``_json.loads`` for request bodies, remembering recent large ones (module
    docstring); safe to share between threads. ``max_bytes`` bounds what it keeps;
    ``min_bytes``: smaller bodies are parsed whole and not kept."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024, min_bytes: int = MIN_BYTES) -> None:
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self._seen: OrderedDict[int, _Seen] = OrderedDict()  # by id, least recent first
        self._bytes = 0
        self._lock = threading.Lock()
        #: Bodies read from a remembered one's values (the counter tests and benchmarks
        #: read), and the bytes they did not parse again.
        self.reused = 0
        self.reused_bytes = 0

    def loads(self, raw: bytes, field: str) -> tuple[Any, bool]:
        """The JSON value of ``raw`` and whether ``_json.dumps`` may write it fast (as
        ``_json.loads``); ``field``: the top-level key of the conversation's array
        (``messages``, ``input``, ``contents``)."""
        value, fast, _ = self.read(raw, field)
        return value, fast

    def read(self, raw: bytes, field: str) -> tuple[Any, bool, Remembered | None]:
        """:meth:`loads`, and the record of this body when it was read the remembering
        way (``None``: parsed whole by ``_json.loads``). Its ``scan`` slot holds what the
        Fitter scanned for the remembered body this one continues, whose messages this
        value shares *as objects* for every message whose bytes are unchanged (``None``:
        nothing scanned yet), for the fit of this body to reuse
        (:meth:`~windowfit.fitter.Fitter._fit_scanned`, which checks identity message by
        message) and to replace with what it scanned."""
        if len(raw) < self.min_bytes or self.max_bytes <= 0:
            return (*_json.loads(raw), None)
        # (Not ASCII: decoding the part to scan as ASCII fails, and the body is parsed
        # whole. The bytes shared with a remembered body were ASCII when it was read.)
        previous = self._best(raw, field)
        try:
            value, seen, finite = self._read(raw, field, previous)
        except (_Surprise, ValueError, RecursionError):
            return (*_json.loads(raw), None)  # raises for what is not JSON
        if finite and seen is not None:
            self._keep(seen, previous)
        return value, finite, seen

    # -- remembering ---------------------------------------------------------------------

    def _best(self, raw: bytes, field: str) -> tuple[_Seen, int] | None:
        """The remembered body sharing the most elements' bytes with ``raw``, and how
        many of its elements are shared."""
        with self._lock:
            candidates = [s for s in self._seen.values() if s.field == field]
        best: tuple[_Seen, int] | None = None
        for seen in candidates:
            # One comparison first (the first message: another conversation's differs),
            # so that many kept conversations cost a microsecond each, not a search.
            if not seen.ends or not raw.startswith(memoryview(seen.raw)[: seen.ends[0]]):
                continue
            shared = bisect_right(seen.ends, _common_prefix(seen.raw, raw))
            if shared and (best is None or seen.ends[shared - 1] > best[0].ends[best[1] - 1]):
                best = (seen, shared)
        return best

    def _keep(self, seen: _Seen, previous: tuple[_Seen, int] | None) -> None:
        cost = len(seen.raw) * _COST_PER_BYTE
        if cost > self.max_bytes:
            return
        with self._lock:
            if previous is not None:  # the conversation moved on: its older body goes
                old = self._seen.pop(id(previous[0]), None)
                if old is not None:
                    self._bytes -= len(old.raw) * _COST_PER_BYTE
            self._seen[id(seen)] = seen
            self._bytes += cost
            while self._bytes > self.max_bytes and self._seen:
                _, out = self._seen.popitem(last=False)
                self._bytes -= len(out.raw) * _COST_PER_BYTE

    # -- reading ---------------------------------------------------------------------------

    def _read(
        self, raw: bytes, field: str, previous: tuple[_Seen, int] | None
    ) -> tuple[Any, _Seen | None, bool]:
        scan = _Scanner()
        if previous is None:
            return self._read_whole(raw, field, scan)
        seen, shared = previous
        cut = seen.ends[shared - 1]
        s = raw[cut:].decode("ascii")
        more, ends, at = _elements(scan, s, 0, cut, first=False)
        tail, at = _pairs(scan, s, at, first=False)
        if _skip(s, at) != len(s) or any(k == field for k, _ in tail):
            raise _Surprise
        elements = seen.elements[:shared] + more
        value = dict([*seen.head, (field, elements), *tail])
        self.reused += 1
        self.reused_bytes += cut
        kept = _Seen(raw, field, seen.head, elements, seen.ends[:shared] + ends, seen.scan)
        return value, kept, scan.finite

    @staticmethod
    def _read_whole(raw: bytes, field: str, scan: _Scanner) -> tuple[Any, _Seen | None, bool]:
        s = raw.decode("ascii")
        at = _skip(s, _expect(s, _skip(s, 0), "{"))
        head: list[tuple[str, Any]] = []
        while at < len(s) and s[at] != "}":
            if head:
                at = _skip(s, _expect(s, at, ","))
            if s.startswith(f'"{field}"', at):
                at = _skip(s, _expect(s, _skip(s, at + len(field) + 2), ":"))
                start = _expect(s, at, "[")
                elements, ends, at = _elements(scan, s, start, 0, first=True)
                tail, at = _pairs(scan, s, at, first=False)
                if _skip(s, at) != len(s) or any(k == field for k, _ in (*head, *tail)):
                    raise _Surprise
                value = dict([*head, (field, elements), *tail])
                return value, _Seen(raw, field, head, elements, ends), scan.finite
            pair, at = _pair(scan, s, at)
            head.append(pair)
            at = _skip(s, at)
        raise _Surprise  # no such array: nothing to remember
