"""The words windowfit puts in front of the model, all in one place.

A mechanism the model cannot see does not help the model (DESIGN section 6): an agent
that does not know old tool results will be cleared for it stops long work early "to
save space". So every agent's and sub-agent's instructions carry :data:`SAFETY_NET`, and
what fitting removes is replaced by a note saying what happened and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CLEARED_RESULT_NOTE",
    "SAFETY_NET",
    "TRIMMED_CONVERSATION_NOTE",
    "add_safety_net",
    "add_safety_net_to_messages",
]

#: Added to the system prompt of every agent and sub-agent.
SAFETY_NET = (
    "Your context is managed for you. When this conversation grows past what the model "
    "can read at once, the oldest tool results are cleared (replaced by a short note) and "
    "the most recent ones stay intact. So do not stop a long task, or skip work, to save "
    "space: keep going until the task is done, and if you need something from a cleared "
    "result, run the tool again (for example, re-read the file)."
)

#: Replaces the content of a cleared tool result. The call and the result block stay.
CLEARED_RESULT_NOTE = (
    "[This tool result was cleared to keep the conversation within the model's context "
    "window. Run the tool again if you need its output.]"
)

#: Stands where earlier messages were left out of the request (stages 2 and 3).
TRIMMED_CONVERSATION_NOTE = (
    "[Earlier messages of this conversation were left out of this request to keep it "
    "within the model's context window. The full history is kept; the first message and "
    "the most recent work are shown.]"
)


def add_safety_net(
    system: str | Sequence[Mapping[str, Any]] | None, text: str = SAFETY_NET
) -> str | list[dict[str, Any]]:
    """Return ``system`` with the safety-net paragraph appended (idempotent).

    ``system`` may be a string (either provider), Anthropic's list of text blocks, or
    ``None``. A list stays a list, with the text as a new block at the end, so that
    ``cache_control`` on existing blocks is untouched.
    """
    if system is None or system == "":
        return text
    if isinstance(system, str):
        return system if text in system else f"{system}\n\n{text}"
    blocks = [dict(b) for b in system]
    if any(b.get("text") == text for b in blocks):
        return blocks
    return [*blocks, {"type": "text", "text": text}]


def add_safety_net_to_messages(
    messages: Sequence[Mapping[str, Any]], text: str = SAFETY_NET
) -> list[dict[str, Any]]:
    """OpenAI chat: append the safety net to the leading system/developer message.

    When the list has no leading system message, one is inserted at the front. The input
    is not changed; a new list is returned.
    """
    out = [dict(m) for m in messages]
    if out and out[0].get("role") in ("system", "developer"):
        content = out[0].get("content")
        if content is None or isinstance(content, (str, list)):
            out[0]["content"] = add_safety_net(content, text)
        return out
    return [{"role": "system", "content": text}, *out]
