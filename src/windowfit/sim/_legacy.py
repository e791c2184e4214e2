"""The old system, as the write-up describes it, for the *before* runs.

* **Trimming only at user messages.** When the request's estimate is over the budget, keep
  the first message, a note that earlier conversation was trimmed, and the most recent
  whole user turns that fit. A sub-agent has one user message (its instruction), so
  nothing can be cut and it sends its whole history every time.
* **chars/4 estimates.** Every text counts as its length divided by four, whatever the
  script.
* **Rejected requests retried.** Every error was retried, a request rejected as too long
  included (:func:`legacy_should_retry`, :data:`LEGACY_RETRY`), so the same request was
  sent again and rejected again.
* **No safety net** in the instructions (the runtime's ``safety_net=False``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..agent import Shaped
from ..classify import ErrorInfo
from ..retry import RetryPolicy

__all__ = ["LEGACY_NOTE", "LEGACY_RETRY", "LegacyShaper", "chars4", "legacy_should_retry"]

#: The old system's note where it trimmed.
LEGACY_NOTE = "[Earlier conversation was trimmed.]"

#: The old retry: three attempts in all (the simulation does not wait between them).
LEGACY_RETRY = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, jitter=False)


def legacy_should_retry(info: ErrorInfo) -> bool:
    """The old system retried every error, invalid requests included."""
    return True


def chars4(text: str) -> int:
    """The old estimate: characters divided by four, rounded up."""
    return math.ceil(len(text) / 4)


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(json.dumps(block.get("input"), ensure_ascii=False))
        elif kind == "tool_result":
            inner = block.get("content")
            if isinstance(inner, str):
                parts.append(inner)
            elif isinstance(inner, list):
                parts.extend(str(b.get("text", "")) for b in inner if isinstance(b, Mapping))
    return "".join(parts)


def _is_turn_start(message: Mapping[str, Any]) -> bool:
    """A user message with text of its own (not only tool results)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    return bool(blocks) and not any(b.get("type") == "tool_result" for b in blocks)


class LegacyShaper:
    """The old trimming (see the module docstring), as a runtime shaper."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.note: dict[str, Any] = {"role": "assistant", "content": LEGACY_NOTE}
        self._sizes: dict[int, tuple[object, int]] = {}

    def size(self, message: Mapping[str, Any]) -> int:
        hit = self._sizes.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        size = chars4(_message_text(message))
        self._sizes[id(message)] = (message, size)
        return size

    def __call__(
        self,
        messages: Sequence[dict[str, Any]],
        system: str,
        tools: Sequence[Mapping[str, Any]],
    ) -> Shaped:
        fixed = chars4(system) + chars4(json.dumps(list(tools), ensure_ascii=False))
        sizes = [self.size(m) for m in messages]
        total = fixed + sum(sizes)
        if total <= self.budget or len(messages) < 2:
            return Shaped(list(messages), total)
        starts = [i for i in range(1, len(messages)) if _is_turn_start(messages[i])]
        if not starts:
            return Shaped(list(messages), total)  # one user message: nothing can be cut
        head = fixed + sizes[0] + self.size(self.note)
        keep = starts[-1]  # the latest turn is always sent, whether it fits or not
        for start in reversed(starts[:-1]):
            if head + sum(sizes[start:]) > self.budget:
                break
            keep = start
        kept = [messages[0], self.note, *messages[keep:]]
        return Shaped(kept, head + sum(sizes[keep:]), dropped=keep - 1)
