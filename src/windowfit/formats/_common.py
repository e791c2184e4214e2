"""Pieces both provider formats share."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConversationError
from ..messages import Message


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


def require_mapping(value: Any, index: int, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConversationError(
            f"{what} must be a JSON object, not {type(value).__name__}", index=index
        )
    return value


def require_str(value: Mapping[str, Any], key: str, index: int, where: str = "") -> str:
    if key not in value:
        raise ConversationError("is missing", index=index, field=f"{where}{key}")
    got = value[key]
    if not isinstance(got, str):
        raise ConversationError(
            f"must be a string, not {type(got).__name__}", index=index, field=f"{where}{key}"
        )
    return got


def rest(value: Mapping[str, Any], *known: str) -> dict[str, Any]:
    """The keys of ``value`` that windowfit does not interpret, in their order."""
    return {k: v for k, v in value.items() if k not in known}


def arguments_json(value: Any) -> str:
    """The JSON text of tool-call arguments, as a provider would count it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
