"""Pieces both provider formats share."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .._overheads import BLOCK_OVERHEAD
from ..errors import ConversationError
from ..images import image_tokens
from ..messages import Message
from ._facts import Facts, FactTuple, describe, json_text


@dataclass(frozen=True)
class FormatSpec:
    """What fitting needs to know about a provider format."""

    name: str
    from_message: Callable[[Any, int], Message]
    to_message: Callable[[Message], dict[str, Any]]
    #: Roles that belong to the system prompt when they lead the message list.
    system_roles: frozenset[str]
    #: The roles a message may have.
    roles: frozenset[str]
    #: Reads a provider message straight from its JSON: checked, sized (see ``_facts``).
    scan: Callable[[Any, int, Counts], Facts]
    #: The field that holds a message's ``k``-th tool result's call id, for errors.
    result_field: Callable[[Any, str], str]
    #: The field that holds a message's tool calls, for errors.
    calls_field: str
    #: A copy of a message whose results for the given call ids hold the given note.
    clear: Callable[[Any, frozenset[str], str], dict[str, Any]]
    #: A copy of a message with its tool results left out (its user input kept).
    strip: Callable[[Any], dict[str, Any]]
    #: Roles the first non-system message may have (``None``: any).
    opening_roles: frozenset[str] | None = None
    #: Consecutive ``assistant`` messages make one round (OpenAI Responses items:
    #: reasoning, text, tool calls; Anthropic joins consecutive same-role turns): one
    #: request point, one place a cut may fall, its calls answered after all of it.
    item_rounds: bool = False
    #: The trimmed-conversation note is always a message of its own (Responses items),
    #: never appended to the head's last message.
    note_as_own_message: bool = False
    #: The note is appended only to a ``user`` message; after any other it is a message
    #: of its own (OpenAI Chat: a ``tool`` message holds one call's result, and the
    #: assistant's may hold only calls).
    note_joins_only_user_messages: bool = False
    #: The role of the model's own messages (Gemini says ``model``).
    assistant_role: str = "assistant"
    #: ``scan`` for every message of a conversation in one loop (the messages, the
    #: counts, the index of the first), where the format has one: what a cold fit runs.
    scan_all: Callable[[Iterable[Any], Counts, int], list[FactTuple]] | None = None

    def scan_messages(
        self, messages: Iterable[Any], counts: Counts, start: int = 0
    ) -> list[FactTuple]:
        """The facts of every message, checked (``scan`` of each, in order; the first is
        message ``start`` of its conversation, which errors name)."""
        if self.scan_all is not None:
            return self.scan_all(messages, counts, start)
        scan = self.scan
        facts: list[FactTuple] = [scan(raw, i, counts) for i, raw in enumerate(messages, start)]
        return facts


def require_mapping(value: Any, index: int, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConversationError(f"{what} must be a JSON object, not {describe(value)}", index=index)
    return value


def require_str(value: Mapping[str, Any], key: str, index: int, where: str = "") -> str:
    if key not in value:
        raise ConversationError("is missing", index=index, field=f"{where}{key}")
    got = value[key]
    if not isinstance(got, str):
        raise ConversationError(
            f"must be a string, not {describe(got)}", index=index, field=f"{where}{key}"
        )
    return got


def rest(value: Mapping[str, Any], *known: str) -> dict[str, Any]:
    """The keys of ``value`` that windowfit does not interpret, in their order."""
    return {k: v for k, v in value.items() if k not in known}


def arguments_json(value: Any) -> str:
    """The JSON text of tool-call arguments, as a provider would count it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Counts(Protocol):
    """What a scanner needs to size a message (a :class:`windowfit.sizing.Sizer`)."""

    provider: str
    cleared_string_tokens: int
    cleared_list_tokens: int

    def text(self, text: str) -> int: ...


def image_size(source: Any, index: int, field: str, counts: Counts) -> int:
    """An image block's size, after checking that its source is a JSON object."""
    if not isinstance(source, Mapping):
        raise ConversationError(
            f"an image needs a source object, not {describe(source)}", index=index, field=field
        )
    json_text(source, index, field)
    return BLOCK_OVERHEAD + image_tokens(source, counts.provider)


def not_a_string(value: Any, index: int, field: str) -> ConversationError:
    if value is None:
        return ConversationError("is missing", index=index, field=field)
    return ConversationError(f"must be a string, not {describe(value)}", index=index, field=field)
