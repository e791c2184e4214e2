"""LangChain messages <-> OpenAI Chat dicts, for fitting and back.

:func:`to_chat` gives the dict a LangChain message stands for on the wire (tool calls with
their arguments as JSON, ``ToolMessage.tool_call_id``, text and image content blocks;
LangChain's standard image blocks become ``image_url`` parts, so that windowfit counts an
image as an image, not as its base64 text). :func:`from_chat` makes a new message from
such a dict. :func:`restore` turns a fitted dict back into the message it came from:
the original object when fitting left it unchanged, else a copy of it with only the
content changed (every other field kept, blocks that survived kept as the original block
objects). LangChain's objects are never changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConversationError

__all__ = ["content_to_chat", "from_chat", "restore", "to_chat"]

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _image_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """An OpenAI ``image_url`` part for a LangChain standard image block (v1 ``url`` /
    ``base64``, or the older ``source_type`` form); ``None`` for any other block."""
    if block.get("type") != "image":
        return None
    url = block.get("url")
    data = block.get("base64", block.get("data"))
    mime = block.get("mime_type") or "image/png"
    if isinstance(url, str):
        return {"type": "image_url", "image_url": {"url": url}}
    if block.get("source_type") == "url" and isinstance(block.get("url"), str):
        return {"type": "image_url", "image_url": {"url": block["url"]}}
    if isinstance(data, str):
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    return None


def _part(block: Any, index: int, where: str) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, Mapping):
        raise ConversationError(
            f"a content block must be a string or a dict, not {type(block).__name__}",
            index=index,
            field=where,
        )
    image = _image_part(block)
    if image is not None:
        return image
    return dict(block)


def content_to_chat(content: Any, index: int = 0) -> str | list[dict[str, Any]]:
    """LangChain content (a string or a list of blocks) as OpenAI Chat content."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_part(block, index, f"content[{k}]") for k, block in enumerate(content)]
    raise ConversationError(
        f"content must be a string or a list of blocks, not {type(content).__name__}",
        index=index,
        field="content",
    )


def to_chat(message: Any, index: int = 0) -> dict[str, Any]:
    """The OpenAI Chat dict for a LangChain message (module docstring)."""
    kind = getattr(message, "type", None)
    role = _ROLES.get(kind) if isinstance(kind, str) else None
    if kind == "chat":
        role = getattr(message, "role", None)
    if not isinstance(role, str):
        raise ConversationError(
            f"a {type(message).__name__} cannot be sent to a chat model (expected a "
            "HumanMessage, AIMessage, ToolMessage, SystemMessage or ChatMessage)",
            index=index,
        )
    out: dict[str, Any] = {"role": role, "content": content_to_chat(message.content, index)}
    name = getattr(message, "name", None)
    if isinstance(name, str) and name and role in ("user", "assistant", "system"):
        out["name"] = name
    if role == "assistant":
        calls = [
            {
                "id": call.get("id") or "",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call.get("args", {}), ensure_ascii=False),
                },
            }
            for call in getattr(message, "tool_calls", None) or ()
        ]
        calls += [
            {
                "id": call.get("id") or "",
                "type": "function",
                "function": {"name": call.get("name") or "", "arguments": call.get("args") or ""},
            }
            for call in getattr(message, "invalid_tool_calls", None) or ()
        ]
        if calls:
            out["tool_calls"] = calls
    elif role == "tool":
        out["tool_call_id"] = message.tool_call_id
    return out


def _content_back(content: Any, originals: Any) -> Any:
    """Chat content as LangChain content: a part that is the chat form of an original
    block becomes that block again (so standard image blocks stay standard)."""
    if not isinstance(content, list):
        return content
    known: dict[str, Any] = {}
    if isinstance(originals, list):
        for k, block in enumerate(originals):
            key = json.dumps(_part(block, 0, f"content[{k}]"), sort_keys=True, default=str)
            known.setdefault(key, block)
    out = []
    for part in content:
        key = json.dumps(part, sort_keys=True, default=str)
        out.append(known.get(key, part))
    return out


def from_chat(raw: Mapping[str, Any]) -> Any:
    """A new LangChain message for an OpenAI Chat dict (tool call arguments parsed)."""
    from langchain_core import messages as lc

    role = raw.get("role")
    content = _content_back(raw.get("content") or "", None)
    name = raw.get("name")
    extra: dict[str, Any] = {"name": name} if isinstance(name, str) else {}
    if role == "user":
        return lc.HumanMessage(content=content, **extra)
    if role in ("system", "developer"):
        return lc.SystemMessage(content=content, **extra)
    if role == "tool":
        return lc.ToolMessage(content=content, tool_call_id=raw.get("tool_call_id", ""))
    if role == "assistant":
        calls = []
        for call in raw.get("tool_calls") or ():
            function = call.get("function") or {}
            try:
                args = json.loads(function.get("arguments") or "{}")
            except ValueError:
                args = {}
            calls.append({"id": call.get("id"), "name": function.get("name", ""), "args": args})
        return lc.AIMessage(content=content, tool_calls=calls, **extra)
    raise ConversationError(f"unknown role {role!r}", field="role")


def restore(fitted: Mapping[str, Any], original: Any, changed: bool) -> Any:
    """The LangChain message a fitted dict stands for (module docstring)."""
    if original is None:
        return from_chat(fitted)
    if not changed:
        return original
    return original.model_copy(
        update={"content": _content_back(fitted.get("content") or "", original.content)}
    )


def to_chat_all(messages: Sequence[Any], offset: int = 0) -> list[dict[str, Any]]:
    """:func:`to_chat` of each message (``offset``: index of the first, for errors)."""
    return [to_chat(m, offset + i) for i, m in enumerate(messages)]
