"""Pure conversions between provider formats and the neutral model.

Each format module exposes ``from_message(raw, index)`` and ``to_message(message)``; the
round trip ``to_message(from_message(m))`` gives back ``m`` exactly (same keys and values),
including fields windowfit does not understand. :func:`detect_format` tells the
formats apart from the messages themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import ConversationError
from . import anthropic, gemini, openai_chat, openai_responses
from ._common import FormatSpec
from ._dialect import Dialect, RequestParts, Usage

__all__ = [
    "DIALECTS",
    "FORMATS",
    "Dialect",
    "FormatName",
    "FormatSpec",
    "RequestParts",
    "Usage",
    "detect_format",
    "get_format",
]

FormatName = Literal["anthropic", "openai", "openai-responses", "gemini"]

FORMATS: dict[str, FormatSpec] = {
    "anthropic": anthropic.SPEC,
    "openai": openai_chat.SPEC,
    "openai-responses": openai_responses.SPEC,
    "gemini": gemini.SPEC,
}

#: The whole-API dialects (request body, usage, stream events, error bodies), by name.
DIALECTS: dict[str, Dialect] = {
    "anthropic": anthropic.DIALECT,
    "openai": openai_chat.DIALECT,
}
DIALECTS[openai_responses.DIALECT.name] = openai_responses.DIALECT
DIALECTS[gemini.DIALECT.name] = gemini.DIALECT

_OPENAI_ONLY_ROLES = {"tool", "system", "developer", "function"}
_ANTHROPIC_BLOCK_TYPES = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "server_tool_use",
}
_OPENAI_PART_TYPES = {"image_url", "input_audio", "refusal", "file"}


def get_format(name: str) -> FormatSpec:
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise ConversationError(f"unknown format {name!r}; known formats: {known}") from None


def detect_format(messages: Sequence[Any], default: FormatName = "anthropic") -> FormatName:
    """Tell Anthropic Messages, OpenAI Chat Completions and Gemini contents apart by what
    the messages contain.

    Messages with only plain string content look the same in both formats (and convert
    the same way), so ``default`` is returned for them. OpenAI Responses input items are
    recognised by what only they have: an item ``type`` (``message``, ``function_call``,
    ``reasoning``...) or a Responses content part (``input_text``, ``output_text``...).
    """
    for msg in messages:
        if not isinstance(msg, Mapping):
            continue
        kind = msg.get("type")
        # (An Anthropic reply appended whole is ``type: message`` too, with a stop_reason.)
        if (
            isinstance(kind, str)
            and kind in openai_responses.ITEM_TYPES
            and not (kind == "message" and "stop_reason" in msg)
        ):
            return "openai-responses"
        role = msg.get("role")
        if isinstance(role, str) and role in _OPENAI_ONLY_ROLES:
            return "openai"
        if "tool_calls" in msg or "tool_call_id" in msg:
            return "openai"
        if role == "model" or ("parts" in msg and "content" not in msg):
            return "gemini"  # Gemini contents: {"role": "user" | "model", "parts": [...]}
        content = msg.get("content")
        if isinstance(content, list):
            for part in content:
                if not isinstance(part, Mapping):
                    continue
                kind = part.get("type")
                if not isinstance(kind, str):
                    continue
                if kind in _ANTHROPIC_BLOCK_TYPES or (kind == "image" and "source" in part):
                    return "anthropic"
                if kind in _OPENAI_PART_TYPES:
                    return "openai"
                if kind in openai_responses.PART_TYPES:
                    return "openai-responses"
    return default
