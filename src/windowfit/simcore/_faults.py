"""Faults served on demand: provider errors, slow answers and dropped connections.

A :class:`Fault` is taken by one request, first come first served, from a queue filled
by ``--fault SPEC`` flags, :class:`SimConfig.faults <windowfit.server.SimConfig>` or
``POST /_sim/faults``. The text form (``--fault``) is::

    529                     an error with this status, in the provider's own shape
    429:retry_after=0.5     ... with options: retry_after, type, message, delay,
                            after_events, route
    drop                    the connection is closed before the answer's body
    drop:after_events=3     a streamed answer is cut after 3 events
    delay=1.5               the answer comes 1.5 s late (and is otherwise normal)

``route`` restricts a fault to one kind of request: ``anthropic`` (both Anthropic routes),
``anthropic.messages``, ``anthropic.count_tokens``, ``openai`` (``openai.chat`` and
``openai.responses``), ``gemini`` (``gemini.generate``, ``gemini.stream``) or one of those.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ROUTES", "Fault", "FaultQueue", "fault_from_json", "parse_fault"]

#: The provider routes a fault can be restricted to.
ROUTES = (
    "anthropic.messages",
    "anthropic.count_tokens",
    "openai.chat",
    "openai.responses",
    "gemini.generate",
    "gemini.stream",
)

_MAX_DELAY = 600.0


@dataclass(frozen=True)
class Fault:
    """One injected fault (see the module docstring).

    ``status``: answer with this HTTP status and the provider's error body for it.
    ``drop``: close the connection instead (after the status line, before the body).
    ``delay``: seconds to wait first; a fault with only a delay answers normally.
    ``after_events``: for a streamed request, serve that many SSE events first, then the
    error (as an ``error`` event) or the drop; a request that is not streamed takes the
    fault at once. ``retry_after``: seconds, sent as ``retry-after`` (whole seconds,
    rounded up) and ``retry-after-ms``. ``type`` / ``message``: override the provider's
    error type and wording. ``route``: see :data:`ROUTES` (a prefix matches).
    """

    status: int | None = None
    drop: bool = False
    delay: float = 0.0
    after_events: int | None = None
    retry_after: float | None = None
    type: str | None = None
    message: str | None = None
    route: str | None = None

    def __post_init__(self) -> None:
        if self.status is not None and (
            isinstance(self.status, bool)
            or not isinstance(self.status, int)
            or not 400 <= self.status <= 599
        ):
            raise ValueError(f"status must be an HTTP error status (400-599), not {self.status!r}")
        if not isinstance(self.drop, bool):
            raise ValueError(f"drop must be true or false, not {self.drop!r}")
        if self.drop and self.status is not None:
            raise ValueError("a fault either drops the connection or answers with a status")
        if (
            isinstance(self.delay, bool)
            or not isinstance(self.delay, (int, float))
            or not math.isfinite(self.delay)
            or not 0 <= self.delay <= _MAX_DELAY
        ):
            raise ValueError(f"delay must be a number of seconds in [0, 600], not {self.delay!r}")
        if self.after_events is not None and (
            isinstance(self.after_events, bool)
            or not isinstance(self.after_events, int)
            or self.after_events < 0
        ):
            raise ValueError(f"after_events must be a whole number >= 0, not {self.after_events!r}")
        if self.retry_after is not None and (
            isinstance(self.retry_after, bool)
            or not isinstance(self.retry_after, (int, float))
            or not math.isfinite(self.retry_after)
            or not 0 <= self.retry_after <= 86_400
        ):
            raise ValueError(f"retry_after must be seconds in [0, 86400], not {self.retry_after!r}")
        for name in ("type", "message", "route"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string, not {value!r}")
        if self.route is not None and not any(
            r == self.route or r.startswith(self.route + ".") for r in ROUTES
        ):
            raise ValueError(
                f"route must be one of {', '.join(ROUTES)} or a prefix, not {self.route!r}"
            )
        if self.status is None and not self.drop and self.delay == 0:
            raise ValueError("a fault needs a status, drop or a delay")

    def matches(self, route: str) -> bool:
        return self.route is None or route == self.route or route.startswith(self.route + ".")

    def to_json(self) -> dict[str, Any]:
        defaults = {"drop": False, "delay": 0.0}
        return {
            k: v
            for k, v in asdict(self).items()
            if v is not None and (k not in defaults or v != defaults[k])
        }


_FIELDS = {
    "status": int,
    "drop": bool,
    "delay": float,
    "after_events": int,
    "retry_after": float,
    "type": str,
    "message": str,
    "route": str,
}


def fault_from_json(value: Any) -> Fault:
    """A fault from its JSON form (``{"status": 429, "retry_after": 1}``, ...)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"a fault must be a JSON object, not {type(value).__name__}")
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown fault field {unknown[0]!r}; known: {', '.join(_FIELDS)}")
    args: dict[str, Any] = {}
    for key, raw in value.items():
        if raw is None:
            continue
        if _FIELDS[key] is float and isinstance(raw, int) and not isinstance(raw, bool):
            raw = float(raw)
        args[key] = raw
    try:
        return Fault(**args)
    except TypeError as exc:  # pragma: no cover - every field is known by now
        raise ValueError(str(exc)) from None


def _option(key: str, text: str) -> Any:
    kind = _FIELDS.get(key)
    if kind is None:
        raise ValueError(f"unknown fault option {key!r}; known: {', '.join(_FIELDS)}")
    if kind is str:
        return text
    if kind is bool:
        if text.lower() in ("1", "true", "yes"):
            return True
        if text.lower() in ("0", "false", "no"):
            return False
        raise ValueError(f"{key} must be true or false, not {text!r}")
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        raise ValueError(f"{key} must be a number, not {text!r}") from None


def parse_fault(spec: str) -> Fault:
    """A fault from its text form (module docstring): ``529``, ``429:retry_after=1``,
    ``drop``, ``drop:after_events=3``, ``delay=0.5``."""
    head, _, rest = spec.strip().partition(":")
    args: dict[str, Any] = {}
    head = head.strip()
    if head.isdigit():
        args["status"] = int(head)
    elif head == "drop":
        args["drop"] = True
    elif "=" in head:
        rest = f"{head},{rest}" if rest else head
    else:
        raise ValueError(f"a fault is a status (529), drop or delay=SECONDS, not {spec!r}")
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, text = item.partition("=")
        if not eq:
            raise ValueError(f"fault option {item!r} needs a value (key=value)")
        args[key.strip()] = _option(key.strip(), text.strip())
    return Fault(**args)


class FaultQueue:
    """Faults waiting for requests, in order."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self._queue: deque[Fault] = deque(faults)
        self.served = 0

    def add(self, faults: Iterable[Fault]) -> None:
        self._queue.extend(faults)

    def clear(self) -> None:
        self._queue.clear()

    def take(self, route: str) -> Fault | None:
        """The first waiting fault for ``route``, removed from the queue."""
        for i, fault in enumerate(self._queue):
            if fault.matches(route):
                del self._queue[i]
                self.served += 1
                return fault
        return None

    def pending(self) -> list[Fault]:
        return list(self._queue)

    def __len__(self) -> int:
        return len(self._queue)
