"""The proxy's counters and latency histograms, served as ``GET /metrics``.

Written against the Prometheus text exposition format (version 0.0.4) with the standard
library only, so that the proxy needs no metrics package and ``import windowfit`` stays
free of third-party imports. One lock guards every update: the proxy observes once per
request, from the event loop or from worker threads alike.

What is exported (every name starts with ``windowfit_proxy_``):

``requests_total{route, stage, status}``
    Requests answered. ``stage`` is the fitting stage that was needed (``0`` = sent as it
    came, ``1``-``3`` = the stage that made it fit), ``none`` when fitting gave no stage
    (for example nothing could fit), ``passthrough`` for routes the proxy does not fit.
``unparsed_total{route}``
    Requests the proxy could not read and forwarded unchanged.
``tokens_before_total{route}`` / ``tokens_after_total{route}``
    Estimated input tokens of the requests as clients sent them and as forwarded.
``refits_total{route}``
    Requests re-fitted and sent again after the upstream said they were too long.
``early_total{route, outcome}`` / ``early_body_bytes_total{route, part}``
    Requests whose body went upstream while it arrived (``outcome``: ``released``, sent
    as received; ``abandoned``, cut short because fitting changed it), and of their
    bodies the bytes handed to the upstream connection before the body had all arrived
    (``part="before_end"``) and in all (``part="all"``).
``upstream_seconds{route}`` / ``added_seconds{route}``
    Histograms: time spent waiting for the upstream (to the end of its answer), and time
    the proxy itself added (reading, fitting, serialising), per request.

And, under the names Prometheus's own Python client gives them, the process's garbage
collector: ``python_gc_collections_total{generation}`` (passes so far) and
``python_gc_objects_collected_total{generation}``, read from :func:`gc.get_stats` when
scraped (nothing is hooked into the collector), so that passes per request can be
counted against ``requests_total`` (``benchmarks/proxy.py`` does).

Label values come partly from clients (the route of an unknown path, for example); each
metric keeps at most :data:`MAX_SERIES` label sets and counts the rest under
``route="other"`` so that a client cannot grow the exposition without bound.
"""

from __future__ import annotations

import gc
import math
import threading
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["ADDED_BUCKETS", "MAX_SERIES", "UPSTREAM_BUCKETS", "Metrics", "collector_lines"]

#: Upper bounds (seconds) of the upstream latency buckets: a streamed answer of a long
#: agent turn takes seconds to minutes, a refused one milliseconds.
UPSTREAM_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)

#: Upper bounds (seconds) of the added latency buckets: the proxy's goal is a few
#: milliseconds per request, so the fine buckets are below 20 ms.
ADDED_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)

#: The most label sets one metric keeps before folding new ones into ``route="other"``.
MAX_SERIES = 500

_PREFIX = "windowfit_proxy_"
_OTHER = "other"

Labels = tuple[tuple[str, str], ...]


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _label_text(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{name}="{_escape_label(value)}"' for name, value in labels)
    return "{" + inner + "}"


def _stage_label(stage: int | None) -> str:
    return "none" if stage is None else str(stage)


class _Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self.values: dict[Labels, float] = {}

    def add(self, labels: Labels, amount: float) -> None:
        key = _bounded(self.values, labels)
        self.values[key] = self.values.get(key, 0) + amount

    def lines(self) -> Iterable[str]:
        yield f"# HELP {self.name} {_escape_help(self.help)}"
        yield f"# TYPE {self.name} counter"
        for labels in sorted(self.values):
            yield f"{self.name}{_label_text(labels)} {_number(self.values[labels])}"


class _Histogram:
    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name = name
        self.help = help_text
        self.buckets = tuple(buckets)
        # per label set: per-bucket (not cumulative) counts, then +Inf, the sum
        self.values: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, labels: Labels, seconds: float) -> None:
        if not math.isfinite(seconds) or seconds < 0:
            seconds = 0.0
        key = _bounded(self.values, labels)
        entry = self.values.get(key)
        if entry is None:
            entry = ([0] * (len(self.buckets) + 1), [0.0])
            self.values[key] = entry
        counts, total = entry
        index = len(self.buckets)
        for i, bound in enumerate(self.buckets):
            if seconds <= bound:
                index = i
                break
        counts[index] += 1
        total[0] += seconds

    def lines(self) -> Iterable[str]:
        yield f"# HELP {self.name} {_escape_help(self.help)}"
        yield f"# TYPE {self.name} histogram"
        for labels in sorted(self.values):
            counts, total = self.values[labels]
            running = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                running += count
                le = (*labels, ("le", "+Inf" if math.isinf(bound) else repr(float(bound))))
                yield f"{self.name}_bucket{_label_text(le)} {running}"
            yield f"{self.name}_sum{_label_text(labels)} {_number(total[0])}"
            yield f"{self.name}_count{_label_text(labels)} {running}"


def _bounded(values: Mapping[Labels, object], labels: Labels) -> Labels:
    """``labels``, or the same with ``route="other"`` once :data:`MAX_SERIES` are kept."""
    if labels in values or len(values) < MAX_SERIES:
        return labels
    return tuple((name, _OTHER if name == "route" else value) for name, value in labels)


class Metrics:
    """The proxy's metrics, updated per request and rendered for ``GET /metrics``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests = _Counter(
            _PREFIX + "requests_total",
            "Requests answered, by route, fitting stage (passthrough: not fitted) and status.",
        )
        self._unparsed = _Counter(
            _PREFIX + "unparsed_total",
            "Requests the proxy could not read and forwarded unchanged.",
        )
        self._before = _Counter(
            _PREFIX + "tokens_before_total",
            "Estimated input tokens of fitted requests as the clients sent them.",
        )
        self._after = _Counter(
            _PREFIX + "tokens_after_total",
            "Estimated input tokens of fitted requests as forwarded upstream.",
        )
        self._refits = _Counter(
            _PREFIX + "refits_total",
            "Requests re-fitted and sent again after an upstream context overflow.",
        )
        self._early = _Counter(
            _PREFIX + "early_total",
            "Requests whose body went upstream as it arrived: released whole or abandoned.",
        )
        self._early_bytes = _Counter(
            _PREFIX + "early_body_bytes_total",
            "Body bytes of those requests handed upstream before the body ended, and in all.",
        )
        self._upstream = _Histogram(
            _PREFIX + "upstream_seconds",
            "Seconds spent waiting for the upstream, to the end of its answer.",
            UPSTREAM_BUCKETS,
        )
        self._added = _Histogram(
            _PREFIX + "added_seconds",
            "Seconds the proxy itself added to a request (reading, fitting, forwarding).",
            ADDED_BUCKETS,
        )

    def observe(
        self,
        route: str,
        stage: int | None,
        status: int,
        tokens_before: int,
        tokens_after: int,
        refit: bool,
        upstream_seconds: float,
        added_seconds: float,
    ) -> None:
        """One fitted request, once its answer has been relayed."""
        by_route: Labels = (("route", route),)
        labels: Labels = (("route", route), ("stage", _stage_label(stage)), ("status", str(status)))
        with self._lock:
            self._requests.add(labels, 1)
            self._before.add(by_route, max(0, tokens_before))
            self._after.add(by_route, max(0, tokens_after))
            if refit:
                self._refits.add(by_route, 1)
            self._upstream.observe(by_route, upstream_seconds)
            self._added.observe(by_route, added_seconds)

    def observe_passthrough(self, route: str, status: int, upstream_seconds: float) -> None:
        """One request forwarded without fitting (a route the proxy does not fit)."""
        labels: Labels = (("route", route), ("stage", "passthrough"), ("status", str(status)))
        with self._lock:
            self._requests.add(labels, 1)
            self._upstream.observe((("route", route),), upstream_seconds)

    def observe_early(self, route: str, released: bool, before_end: int, size: int) -> None:
        """One request begun upstream while its body arrived (see ``_early``)."""
        outcome = "released" if released else "abandoned"
        with self._lock:
            self._early.add((("route", route), ("outcome", outcome)), 1)
            if released:
                self._early_bytes.add((("route", route), ("part", "before_end")), before_end)
                self._early_bytes.add((("route", route), ("part", "all")), size)

    def observe_unparsed(self, route: str) -> None:
        """One request of a fitted route that could not be read (it is forwarded as sent)."""
        with self._lock:
            self._unparsed.add((("route", route),), 1)

    def render(self) -> str:
        """The exposition, for a response of type ``text/plain; version=0.0.4``."""
        families = (
            self._requests,
            self._unparsed,
            self._before,
            self._after,
            self._refits,
            self._early,
            self._early_bytes,
            self._upstream,
            self._added,
        )
        with self._lock:
            lines = [line for family in families for line in family.lines()]
        lines += collector_lines()
        return "\n".join(lines) + "\n"

    #: The ``content-type`` of :meth:`render`'s text.
    content_type = "text/plain; version=0.0.4; charset=utf-8"


def collector_lines() -> list[str]:
    """The garbage collector's counters, by generation (see the module docstring)."""
    stats = gc.get_stats()
    out: list[str] = []
    for name, key, help_text in (
        ("python_gc_collections_total", "collections", "Passes of the garbage collector."),
        ("python_gc_objects_collected_total", "collected", "Objects the collector freed."),
    ):
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        out += [
            f'{name}{{generation="{generation}"}} {int(entry.get(key, 0))}'
            for generation, entry in enumerate(stats)
        ]
    return out
