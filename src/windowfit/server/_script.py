"""The scripted model: deterministic answers that drive an agent loop.

While tools are offered, the tool choice allows it, and the conversation holds fewer than
``tool_rounds`` tool results, the model calls a tool (the named one when the tool choice
names one, else the first tool offered) with arguments made from the tool's JSON schema:
every required property gets a value derived from the number of results so far (integers
count 1, 2, 3...; strings are ``"<property>-<n>"``; an ``enum`` cycles through its values).
Otherwise it answers with the configured text. The same request always gets the same
answer, ids included.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "ToolOffer", "decide", "stable_id"]


@dataclass(frozen=True)
class ToolOffer:
    """A tool the request offers: its name and the JSON schema of its input."""

    name: str
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class Answer:
    """Either a text or a tool call (``tool`` and ``arguments``)."""

    text: str | None = None
    tool: str | None = None
    arguments: Mapping[str, Any] | None = None


def stable_id(prefix: str, *parts: object, length: int = 24) -> str:
    """A deterministic id: ``prefix`` and a digest of ``parts``."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8", "replace"))
    return prefix + digest.hexdigest()[:length]


def _value(schema: Any, name: str, n: int) -> Any:
    if not isinstance(schema, Mapping):
        return f"{name}-{n}"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[(n - 1) % len(enum)]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "integer":
        return n
    if kind == "number":
        return float(n)
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return _arguments(schema, n)
    return f"{name}-{n}"


def _arguments(schema: Mapping[str, Any], n: int) -> dict[str, Any]:
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return {}
    return {
        key: _value(properties.get(key), key, n)
        for key in required
        if isinstance(key, str) and key in properties
    }


def decide(
    tools: Sequence[ToolOffer],
    *,
    choice: str,
    named: str | None,
    results: int,
    tool_rounds: int,
    reply: str,
    tokens: int,
    model: str,
) -> Answer:
    """The answer to a request (module docstring). ``choice`` is ``auto``, ``any``
    (a tool call is required) or ``none``; ``named`` is the tool the choice names."""
    offered = {tool.name: tool for tool in tools}
    wants_tool = choice == "any" or (choice == "auto" and results < tool_rounds)
    if tools and choice != "none" and wants_tool:
        tool = offered.get(named or "", tools[0])
        return Answer(tool=tool.name, arguments=_arguments(tool.schema, results + 1))
    try:
        text = reply.format(results=results, tokens=tokens, model=model)
    except (KeyError, IndexError, ValueError):
        text = reply
    return Answer(text=text or ".")
