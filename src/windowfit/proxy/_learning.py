"""What the proxy learns per conversation from the provider's own counts.

Every answer carries the provider's count of the request it answered (usage), and an
overflow error often states it too. Kept per conversation, next to windowfit's estimate
of the same request, those counts correct the budget of the conversation's next request
(:class:`windowfit.calibration.UsageCalibrator`: ``provider ~ factor * estimate +
offset``). The conversations are keyed by the proxy (see ``_fit.conversation_key``), so
a freshly parsed copy of a conversation finds what was learned from its earlier requests.

This module is the one place the proxy touches learning, so that it can move to a shared
learner without the rest changing. What it keeps is bounded (least recently used
conversations first out). With a state store (``--redis URL``), each conversation's
correction is written there after every observation, and a replica that has not seen
the conversation itself fits to the stored correction, so replicas behind a load
balancer answer alike.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from ..calibration import Correction, UsageCalibrator
from ..classify import classify_error

__all__ = ["ConversationLearning"]


class ConversationLearning:
    """One :class:`UsageCalibrator` per conversation, at most ``max_conversations``."""

    def __init__(self, max_conversations: int = 10_000, store: Any = None) -> None:
        self.max_conversations = max_conversations
        #: A ``StateStore`` (``get(key)``/``set(key, value)`` of strings), or ``None``.
        self.store = store
        self._calibrators: OrderedDict[str, UsageCalibrator] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._calibrators)

    def _get(self, key: str, create: bool) -> UsageCalibrator | None:
        with self._lock:
            found = self._calibrators.get(key)
            if found is not None:
                self._calibrators.move_to_end(key)
                return found
            if not create:
                return None
            found = UsageCalibrator()
            self._calibrators[key] = found
            while len(self._calibrators) > self.max_conversations:
                self._calibrators.popitem(last=False)
            return found

    def budget_for(self, key: str, budget: int) -> int:
        """The budget to fit estimates to so that the provider counts at most ``budget``."""
        calibrator = self._get(key, create=False)
        if calibrator is not None:
            return calibrator.budget_for(budget)
        stored = self._stored(key)
        return budget if stored is None else stored.budget_for(budget)

    def observe(self, key: str, estimated: int, provider_tokens: int) -> None:
        """The provider counted ``provider_tokens`` for a request estimated at ``estimated``."""
        if estimated > 0 and provider_tokens > 0:
            calibrator = self._get(key, create=True)
            assert calibrator is not None
            correction = calibrator.observe(estimated, provider_tokens)
            if self.store is not None:
                value = {"factor": correction.factor, "offset": correction.offset}
                self.store.set(f"learned:{key}", json.dumps(value))

    def observe_overflow(
        self, key: str, estimated: int, status: int, body: object
    ) -> tuple[bool, int | None]:
        """Learn from an overflow error (the count it states, else its limit + 1):
        whether it taught anything, and the limit it states (the upstream's real window,
        which may be smaller than the model table says)."""
        info = classify_error(status=status, body=body)
        counted = info.prompt_tokens or ((info.limit or 0) + 1 if info.limit else None)
        if counted is None or estimated <= 0:
            return False, info.limit
        self.observe(key, estimated, counted)
        return True, info.limit

    def correction(self, key: str) -> Correction | None:
        """What was learned about a conversation (``None``: nothing yet)."""
        calibrator = self._get(key, create=False)
        return None if calibrator is None or not calibrator.observations else calibrator.correction

    def _stored(self, key: str) -> Correction | None:
        """The correction another replica stored for the conversation, if any."""
        if self.store is None:
            return None
        raw = self.store.get(f"learned:{key}")
        if raw is None:
            return None
        try:
            value = json.loads(raw)
            factor, offset = float(value["factor"]), int(value["offset"])
        except (ValueError, TypeError, KeyError):
            return None
        if not (0 < factor < 100) or offset < 0:
            return None
        return Correction(factor, offset)
