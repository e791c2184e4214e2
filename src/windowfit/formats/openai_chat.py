"""OpenAI Chat Completions format <-> neutral model.

Roles ``system``/``developer``/``user``/``assistant``/``tool``. Content is a string, null,
or a list of parts (``text``, ``image_url``; others kept verbatim as
:class:`~windowfit.messages.Opaque`). An assistant's ``tool_calls`` become
:class:`~windowfit.messages.ToolCall` blocks after its content, and a DeepSeek-style
``reasoning_content`` string becomes a leading :class:`~windowfit.messages.Thinking` block.
A ``tool`` message becomes one :class:`~windowfit.messages.ToolResult` block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConversationError
from ..messages import (
    Block,
    ContentForm,
    Image,
    Message,
    Opaque,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
)
from ._common import FormatSpec, require_mapping, require_str, rest

__all__ = ["SPEC", "from_message", "to_message"]

_REASONING_KEY = "reasoning_content"


def _part_from_raw(raw: Any, index: int, where: str) -> Block:
    part = require_mapping(raw, index, f"{where} part")
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return Text(part["text"], rest(part, "type", "text"))
    if kind == "image_url" and isinstance(part.get("image_url"), Mapping):
        return Image(part["image_url"], rest(part, "type", "image_url"))
    return Opaque(part)


def _part_to_raw(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text, **block.extra}
    if isinstance(block, Image):
        return {"type": "image_url", "image_url": block.source, **block.extra}
    if isinstance(block, Opaque):
        return dict(block.data)
    raise TypeError(f"a {block.type} block cannot be a content part in OpenAI chat format")


def _content_from_raw(msg: Mapping[str, Any], index: int) -> tuple[ContentForm, tuple[Block, ...]]:
    if "content" not in msg:
        return "absent", ()
    content = msg["content"]
    if content is None:
        return "null", ()
    if isinstance(content, str):
        return "string", (Text(content),)
    if isinstance(content, list):
        return "list", tuple(
            _part_from_raw(part, index, f"content[{i}]") for i, part in enumerate(content)
        )
    raise ConversationError(
        f"content must be a string, null or a list of parts, not {type(content).__name__}",
        index=index,
        field="content",
    )


def _content_to_raw(form: ContentForm, blocks: tuple[Block, ...]) -> Any:
    if form == "string":
        return "".join(b.text for b in blocks if isinstance(b, Text))
    if form == "null":
        return None
    return [_part_to_raw(b) for b in blocks]


def _call_from_raw(raw: Any, index: int, position: int) -> ToolCall:
    where = f"tool_calls[{position}]."
    call = require_mapping(raw, index, "tool call")
    call_id = require_str(call, "id", index, where)
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise ConversationError("is missing", index=index, field=f"{where}function")
    name = require_str(function, "name", index, f"{where}function.")
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        raise ConversationError(
            "must be a JSON string", index=index, field=f"{where}function.arguments"
        )
    extra = rest(call, "id", "function")
    function_extra = rest(function, "name", "arguments")
    if function_extra:
        extra["function"] = function_extra
    return ToolCall(call_id, name, arguments, None, extra)


def _call_to_raw(block: ToolCall) -> dict[str, Any]:
    extra = dict(block.extra)
    function: dict[str, Any] = {"name": block.name, "arguments": block.arguments}
    function.update(extra.pop("function", {}))
    return {"id": block.id, **extra, "function": function}


def from_message(raw: Any, index: int) -> Message:
    msg = require_mapping(raw, index, "message")
    role = require_str(msg, "role", index)
    if role not in SPEC.roles:
        roles = ", ".join(sorted(SPEC.roles))
        raise ConversationError(
            f"role {role!r} is not an OpenAI chat role ({roles})", index=index, field="role"
        )
    if role == "tool":
        call_id = require_str(msg, "tool_call_id", index)
        form, parts = _content_from_raw(msg, index)
        content: str | tuple[Block, ...] | None
        if form == "string":
            content = parts[0].text if isinstance(parts[0], Text) else ""
        elif form == "list":
            content = parts
        else:
            content = None
        result = ToolResult(call_id, content, None, {})
        return Message(role, (result,), form, rest(msg, "role", "content", "tool_call_id"))
    form, blocks = _content_from_raw(msg, index)
    known: list[str] = ["role", "content"]
    if role == "assistant":
        reasoning = msg.get(_REASONING_KEY)
        if isinstance(reasoning, str):
            blocks = (Thinking(reasoning, None, False, {"form": _REASONING_KEY}), *blocks)
            known.append(_REASONING_KEY)
        calls = msg.get("tool_calls")
        if isinstance(calls, list) and calls:
            blocks = (*blocks, *(_call_from_raw(c, index, i) for i, c in enumerate(calls)))
            known.append("tool_calls")
        elif calls is not None and not isinstance(calls, list):
            raise ConversationError("must be a list", index=index, field="tool_calls")
    return Message(role, blocks, form, rest(msg, *known))


def to_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.role == "tool":
        result = message.blocks[0]
        if not isinstance(result, ToolResult):
            raise TypeError("an OpenAI tool message holds exactly one tool result")
        if message.form == "string":
            out["content"] = result.content if isinstance(result.content, str) else ""
        elif message.form == "null":
            out["content"] = None
        elif message.form == "list":
            parts = result.content if isinstance(result.content, tuple) else ()
            out["content"] = [_part_to_raw(b) for b in parts]
        out["tool_call_id"] = result.call_id
        out.update(message.extra)
        return out
    content = tuple(b for b in message.blocks if not isinstance(b, (ToolCall, Thinking)))
    if message.form != "absent":
        out["content"] = _content_to_raw(message.form, content)
    for block in message.blocks:
        if isinstance(block, Thinking):
            out[_REASONING_KEY] = block.text
    calls = [_call_to_raw(b) for b in message.blocks if isinstance(b, ToolCall)]
    if calls:
        out["tool_calls"] = calls
    out.update(message.extra)
    return out


SPEC = FormatSpec(
    name="openai",
    from_message=from_message,
    to_message=to_message,
    system_roles=frozenset({"system", "developer"}),
    roles=frozenset({"system", "developer", "user", "assistant", "tool", "function"}),
)
