"""Anthropic Messages format <-> neutral model.

A message is ``{"role": "user" | "assistant", "content": str | [block, ...]}``; blocks are
``text``, ``image``, ``tool_use``, ``tool_result`` (whose content is a string or a list of
text/image blocks), ``thinking`` and ``redacted_thinking``. Any other block type is kept
verbatim as :class:`~windowfit.messages.Opaque`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConversationError
from ..messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from ._common import FormatSpec, arguments_json, require_mapping, require_str, rest

__all__ = ["SPEC", "block_from_raw", "block_to_raw", "from_message", "to_message"]


def block_from_raw(raw: Any, index: int, where: str) -> Block:
    block = require_mapping(raw, index, f"{where} block")
    kind = block.get("type")
    if kind == "text":
        return Text(require_str(block, "text", index, where), rest(block, "type", "text"))
    if kind == "image":
        source = block.get("source")
        if not isinstance(source, Mapping):
            raise ConversationError("image block needs a source object", index=index, field=where)
        return Image(source, rest(block, "type", "source"))
    if kind == "tool_use":
        call_id = require_str(block, "id", index, where)
        name = require_str(block, "name", index, where)
        value = block.get("input", {})
        return ToolCall(call_id, name, arguments_json(value), value, rest(block, *_TOOL_USE_KEYS))
    if kind == "tool_result":
        call_id = require_str(block, "tool_use_id", index, where)
        content: str | tuple[Block, ...] | None
        if "content" not in block:
            content = None
        elif isinstance(block["content"], str):
            content = block["content"]
        elif isinstance(block["content"], list):
            content = tuple(
                block_from_raw(part, index, f"{where}content[{i}].")
                for i, part in enumerate(block["content"])
            )
        else:
            raise ConversationError(
                "tool_result content must be a string or a list of blocks",
                index=index,
                field=f"{where}content",
            )
        is_error = block.get("is_error")
        return ToolResult(
            call_id,
            content,
            is_error if isinstance(is_error, bool) else None,
            rest(block, "type", "tool_use_id", "content", *_bool_key(block, "is_error")),
        )
    if kind == "thinking":
        signature = block.get("signature")
        return Thinking(
            require_str(block, "thinking", index, where),
            signature if isinstance(signature, str) else None,
            False,
            rest(block, "type", "thinking", "signature"),
        )
    if kind == "redacted_thinking":
        return Thinking(
            require_str(block, "data", index, where), None, True, rest(block, "type", "data")
        )
    return Opaque(block)


_TOOL_USE_KEYS = ("type", "id", "name", "input")


def _bool_key(block: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """``(key,)`` when ``block[key]`` is a bool held in a typed field, else ``()``."""
    return (key,) if isinstance(block.get(key), bool) else ()


def block_to_raw(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text, **block.extra}
    if isinstance(block, Image):
        return {"type": "image", "source": block.source, **block.extra}
    if isinstance(block, ToolCall):
        value = block.input if block.input is not None else _parse_arguments(block.arguments)
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": value,
            **block.extra,
        }
    if isinstance(block, ToolResult):
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.call_id}
        if isinstance(block.content, str):
            out["content"] = block.content
        elif block.content is not None:
            out["content"] = [block_to_raw(b) for b in block.content]
        if block.is_error is not None:
            out["is_error"] = block.is_error
        out.update(block.extra)
        return out
    if isinstance(block, Thinking):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.text, **block.extra}
        out = {"type": "thinking", "thinking": block.text}
        if block.signature is not None:
            out["signature"] = block.signature
        out.update(block.extra)
        return out
    return dict(block.data)


def _parse_arguments(arguments: str) -> Any:
    import json

    try:
        return json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {"_raw_arguments": arguments}


def from_message(raw: Any, index: int) -> Message:
    msg = require_mapping(raw, index, "message")
    role = require_str(msg, "role", index)
    if role not in SPEC.roles:
        raise ConversationError(
            f"role {role!r} is not an Anthropic role (user, assistant)", index=index, field="role"
        )
    extra = rest(msg, "role", "content")
    if "content" not in msg:
        return Message(role, (), "absent", extra)
    content = msg["content"]
    if isinstance(content, str):
        return Message(role, (Text(content),), "string", extra)
    if content is None:
        return Message(role, (), "null", extra)
    if not isinstance(content, list):
        raise ConversationError(
            f"content must be a string or a list of blocks, not {type(content).__name__}",
            index=index,
            field="content",
        )
    blocks = tuple(
        block_from_raw(block, index, f"content[{i}].") for i, block in enumerate(content)
    )
    return Message(role, blocks, "list", extra)


def to_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.form == "string":
        out["content"] = "".join(b.text for b in message.blocks if isinstance(b, Text))
    elif message.form == "null":
        out["content"] = None
    elif message.form == "list":
        out["content"] = [block_to_raw(b) for b in message.blocks]
    out.update(message.extra)
    return out


SPEC = FormatSpec(
    name="anthropic",
    from_message=from_message,
    to_message=to_message,
    system_roles=frozenset(),
    roles=frozenset({"user", "assistant"}),
)
