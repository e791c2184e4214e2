"""Learning on by default: a correction per conversation, from what the provider counted.

:func:`windowfit.wrap` and the agent runtime give every answer's usage (the provider's
count of the request) and every context-overflow error's stated count to a
:class:`Learner`, next to the estimate fitting made of the same request, and fit the next
request of that conversation to the corrected budget. Nobody has to pass a calibrator.

* **Which conversation.** :func:`conversation_key` hashes what does not change while a
  conversation grows: the wire format, the model, the system prompt, the tool
  definitions and the first message. No object identity is used, so a proxy that parses
  every request afresh finds the same conversation, and the key is the same in every
  process (a SHA-256 of canonical JSON).
* **What is learned.** Per conversation, :class:`~windowfit.UsageCalibrator`'s model
  (``provider ~ factor * estimate + offset``, moved in coarse steps).
* **Only tighter, within bounds.** The factor is kept within ``[1, max_factor]`` and the
  offset within ``[0, the largest count seen]``, so a learned budget is never above the
  budget asked for: learning can make estimates err higher, never lower.
* **Bounded.** The in-process store keeps at most ``max_conversations`` (least recently
  used first out). A :class:`StateStore` (``get``/``set`` of strings, such as a Redis
  client's) keeps it elsewhere: the state of a conversation is a short JSON text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .calibration import Correction, UsageCalibrator
from .classify import ErrorInfo
from .errors import SettingsError

__all__ = [
    "DEFAULT_MAX_CONVERSATIONS",
    "OVERFLOW_MARGIN",
    "Learner",
    "MemoryStore",
    "StateStore",
    "conversation_key",
    "overflow_correction",
]

#: How many conversations the in-process store remembers by default.
DEFAULT_MAX_CONVERSATIONS = 1024

#: What an overflow error that states no count at all teaches: the provider counted at
#: least this much more than the estimate (or than the limit the request was fitted to).
OVERFLOW_MARGIN = 0.25

_MAX_FACTOR = 4.0


class StateStore(Protocol):
    """Where a :class:`Learner` keeps each conversation's state (a JSON text)."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


class MemoryStore:
    """A :class:`StateStore` in this process: at most ``max_entries`` states, least
    recently used first out. Safe to share between threads."""

    def __init__(self, max_entries: int = DEFAULT_MAX_CONVERSATIONS) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise SettingsError(f"max_entries must be a whole number >= 1, not {max_entries!r}")
        self.max_entries = max_entries
        self._entries: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def set(self, key: str, value: str) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    ).encode("utf-8", "surrogatepass")


def conversation_key(
    format: str,
    model: str | None,
    system: Any,
    tools: Any,
    messages: Sequence[Any],
    system_roles: Sequence[str] = ("system", "developer"),
) -> str:
    """The key of the conversation a request belongs to: a hash of what stays the same
    while it grows (format, model, system prompt, tools, the first message that is not
    a system message). Equal content gives an equal key, in any process."""
    first: Any = None
    for message in messages:
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in system_roles:
            first = message
            break
    leading = [m for m in messages[:8] if isinstance(m, Mapping) and m.get("role") in system_roles]
    digest = hashlib.sha256()
    for part in (format, model or "", system, tools, leading, first):
        data = _canonical(part)
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return "wf:" + digest.hexdigest()[:32]


class Learner:
    """Per-conversation corrections of estimates, learned from the provider's counts.

    ``store``: where states are kept (default: a :class:`MemoryStore` of
    ``max_conversations``). Safe to share between threads; with a shared store, between
    processes too (the last writer of a conversation wins, which loses at most one
    observation).
    """

    def __init__(
        self,
        store: StateStore | None = None,
        *,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        max_factor: float = _MAX_FACTOR,
    ) -> None:
        if not math.isfinite(max_factor) or max_factor < 1:
            raise SettingsError(f"max_factor must be at least 1, not {max_factor!r}")
        self.store: StateStore = store if store is not None else MemoryStore(max_conversations)
        self.max_factor = max_factor
        self._lock = threading.Lock()
        self.observations = 0  # every count learned from, in this process

    # -- state ----------------------------------------------------------------------

    def _calibrator(self, key: str) -> UsageCalibrator:
        calibrator = UsageCalibrator(min_factor=1.0, max_factor=self.max_factor)
        raw = self.store.get(key)
        if raw:
            # A state this version cannot read: the conversation starts afresh.
            with contextlib.suppress(SettingsError, ValueError, TypeError):
                calibrator.load_state(json.loads(raw))
        return calibrator

    def correction(self, key: str) -> Correction:
        """What was learned for the conversation (the identity when nothing was)."""
        return self._calibrator(key).correction

    def budget_for(self, key: str, budget: int) -> int:
        """The budget to fit estimates to so that the provider counts at most ``budget``:
        never above ``budget``, at least 1."""
        return max(1, min(budget, self.correction(key).budget_for(budget)))

    # -- learning -------------------------------------------------------------------

    def observe(self, key: str, estimated: int, provider_tokens: int) -> Correction:
        """Learn that a request estimated at ``estimated`` was counted ``provider_tokens``
        by the provider (non-positive numbers teach nothing)."""
        if estimated <= 0 or provider_tokens <= 0:
            return self.correction(key)
        with self._lock:
            calibrator = self._calibrator(key)
            correction = calibrator.observe(estimated, provider_tokens)
            self.store.set(key, json.dumps(calibrator.state(), separators=(",", ":")))
            self.observations += 1
        return correction

    def observe_overflow(
        self, key: str, estimated: int, info: ErrorInfo, fitted_to: int | None = None
    ) -> Correction:
        """Learn from a context-overflow error about a request estimated at ``estimated``
        (and fitted to ``fitted_to`` tokens): the count it states; else its limit plus
        one; else, with no count at all, a safe margin (:data:`OVERFLOW_MARGIN`) over the
        larger of the estimate and ``fitted_to``."""
        if info.prompt_tokens is not None and info.prompt_tokens > 0:
            counted = info.prompt_tokens
        elif info.limit is not None and info.limit > 0:
            counted = info.limit + 1
        else:
            counted = math.ceil(max(estimated, fitted_to or 0) * (1 + OVERFLOW_MARGIN)) + 1
        return self.observe(key, estimated, max(counted, estimated + 1))


def overflow_correction(
    estimated: int, info: ErrorInfo, fitted_to: int | None = None
) -> Correction:
    """What one context-overflow error alone teaches (for a re-fit when learning is off):
    the correction a fresh :class:`Learner` makes of it."""
    learner = Learner(MemoryStore(1))
    return learner.observe_overflow("overflow", estimated, info, fitted_to)
