"""The scripted model: deterministic answers that drive an agent loop.

While tools are offered, the tool choice allows it, and the conversation holds fewer than
``tool_rounds`` tool results, the model calls a tool (the named one when the tool choice
names one, else the first tool offered) with arguments made from the tool's JSON schema:
every required property gets a value derived from the number of results so far (integers
count 1, 2, 3...; strings are ``"<property>-<n>"``; an ``enum`` cycles through its values).
Otherwise it answers with the configured text. The same request always gets the same
answer, ids included.

A :class:`ScriptedTool` replaces the schema-made arguments, so that a real agent client
with its own tools (Claude Code's ``Bash``, Codex's shell) runs a long loop the test
chose: "call ``Bash`` with ``{"command": "cat part-{n}.txt"}`` for n = 1..40, then
answer". ``{n}`` in the template's strings is the number of tool results so far plus one.
Requests that do not offer the scripted tool (a client's side requests: titles, topic
checks) are answered with the text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_REPLY",
    "Answer",
    "ScriptedModel",
    "ScriptedTool",
    "ToolOffer",
    "decide",
    "parse_scripted_tool",
    "stable_id",
]

#: The scripted model's final answer unless told otherwise.
DEFAULT_REPLY = "Done: I read {results} tool results."


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


@dataclass(frozen=True)
class ScriptedTool:
    """The tool the scripted model calls, and its input with ``{n}`` placeholders."""

    name: str
    template: Mapping[str, Any]

    def arguments(self, n: int) -> dict[str, Any]:
        """The template with every ``{n}`` in its strings replaced by ``n``."""
        filled = _fill(self.template, str(n))
        assert isinstance(filled, dict)
        return filled


def _fill(value: Any, n: str) -> Any:
    if isinstance(value, str):
        return value.replace("{n}", n)
    if isinstance(value, Mapping):
        return {key: _fill(item, n) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, n) for item in value]
    return value


def parse_scripted_tool(spec: str) -> ScriptedTool:
    """``NAME=JSON-OBJECT`` (``Bash={"command": "cat part-{n}.txt"}``) as a
    :class:`ScriptedTool`; :class:`ValueError` saying what is wrong otherwise."""
    name, sep, template = spec.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(
            f'expected NAME=JSON, e.g. Bash={{"command": "cat part-{{n}}.txt"}}, not {spec!r}'
        )
    try:
        value = json.loads(template)
    except ValueError as exc:
        raise ValueError(f"the input of {name} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"the input of {name} must be a JSON object, not {template.strip()!r}")
    return ScriptedTool(name, value)


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
    script: ScriptedTool | None = None,
) -> Answer:
    """The answer to a request (module docstring). ``choice`` is ``auto``, ``any``
    (a tool call is required) or ``none``; ``named`` is the tool the choice names;
    ``script`` the tool to call with its own input, when set."""
    offered = {tool.name: tool for tool in tools}
    wants_tool = choice == "any" or (choice == "auto" and results < tool_rounds)
    if script is not None:
        if script.name in offered and choice != "none" and wants_tool:
            return Answer(tool=script.name, arguments=script.arguments(results + 1))
    elif tools and choice != "none" and wants_tool:
        tool = offered.get(named or "", tools[0])
        return Answer(tool=tool.name, arguments=_arguments(tool.schema, results + 1))
    try:
        text = reply.format(results=results, tokens=tokens, model=model)
    except (KeyError, IndexError, ValueError):
        text = reply
    return Answer(text=text or ".")


@dataclass(frozen=True)
class ScriptedModel:
    """The scripted model's plan (module docstring): call a tool while the conversation
    holds fewer than ``tool_rounds`` results (``script``: this tool with this input),
    then answer ``reply`` (``{results}``, ``{tokens}`` and ``{model}`` filled in)."""

    tool_rounds: int = 3
    reply: str = DEFAULT_REPLY
    script: ScriptedTool | None = None

    def answer(
        self,
        tools: Sequence[ToolOffer],
        *,
        choice: str,
        named: str | None,
        results: int,
        tokens: int,
        model: str,
    ) -> Answer:
        """The answer to one request (see :func:`decide`)."""
        return decide(
            tools,
            choice=choice,
            named=named,
            results=results,
            tool_rounds=self.tool_rounds,
            reply=self.reply,
            tokens=tokens,
            model=model,
            script=self.script,
        )
