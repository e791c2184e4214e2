"""pydantic-ai messages <-> OpenAI Chat dicts, for fitting and back.

A pydantic-ai ``ModelRequest`` holds several parts (system prompt, user prompt, tool
returns, retry prompts) and becomes one chat dict per part (``system``, ``user``,
``tool``); a ``ModelResponse`` becomes one ``assistant`` dict (its text, its tool calls
with their JSON arguments, its thinking as ``reasoning_content``). :func:`to_chat` keeps,
for each dict, which message and part it came from, so that :func:`restore` can rebuild
the fitted history from the original objects: a message fitting left whole is the
original object, a cleared tool return is a copy of its part with the note as content,
and a message whose parts were all left out is left out. pydantic-ai's objects are never
changed.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConversationError

__all__ = ["Chat", "from_chat", "restore", "to_chat"]


@dataclass(frozen=True)
class Chat:
    """The chat dicts of a pydantic-ai history and where each came from:
    ``origins[k] = (message index, part index)`` (part ``-1``: the whole response)."""

    messages: list[dict[str, Any]]
    origins: list[tuple[int, int]]


def _user_item(item: Any) -> dict[str, Any]:
    from pydantic_ai import messages as pm

    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, pm.ImageUrl):
        return {"type": "image_url", "image_url": {"url": item.url}}
    if isinstance(item, pm.BinaryContent):
        data = base64.b64encode(item.data).decode("ascii")
        url = f"data:{item.media_type};base64,{data}"
        if item.is_image:
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_data": url}}
    link: Any = getattr(item, "url", None)
    if isinstance(link, str):  # documents, audio and video by link
        return {"type": "file", "file": {"file_url": link}}
    return {"type": "text", "text": str(item)}


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [_user_item(item) for item in content]


def _response(message: Any, index: int) -> dict[str, Any]:
    from pydantic_ai import messages as pm

    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, pm.TextPart):
            texts.append(part.content)
        elif isinstance(part, pm.ThinkingPart):
            thinking.append(part.content)
        elif isinstance(part, pm.ToolCallPart):
            calls.append(
                {
                    "id": part.tool_call_id,
                    "type": "function",
                    "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
                }
            )
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if thinking:
        out["reasoning_content"] = "".join(thinking)
    if calls:
        out["tool_calls"] = calls
    return out


def to_chat(history: Sequence[Any]) -> Chat:
    """The chat dicts of a pydantic-ai history (module docstring)."""
    from pydantic_ai import messages as pm

    out: list[dict[str, Any]] = []
    origins: list[tuple[int, int]] = []
    for i, message in enumerate(history):
        if isinstance(message, pm.ModelResponse):
            out.append(_response(message, i))
            origins.append((i, -1))
            continue
        if not isinstance(message, pm.ModelRequest):
            raise ConversationError(
                f"a history holds ModelRequest and ModelResponse, not {type(message).__name__}",
                index=i,
            )
        for k, part in enumerate(message.parts):
            raw: dict[str, Any]
            if isinstance(part, pm.SystemPromptPart):
                raw = {"role": "system", "content": part.content}
            elif isinstance(part, pm.UserPromptPart):
                raw = {"role": "user", "content": _user_content(part.content)}
            elif isinstance(part, pm.ToolReturnPart):
                raw = {
                    "role": "tool",
                    "tool_call_id": part.tool_call_id,
                    "content": part.model_response_str(),
                }
            elif isinstance(part, pm.RetryPromptPart):
                text = part.model_response()
                if part.tool_name is None:
                    raw = {"role": "user", "content": text}
                else:
                    raw = {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
            else:  # a part kind this mapping does not know: sent as the JSON it is
                raw = {"role": "user", "content": repr(part)}
            out.append(raw)
            origins.append((i, k))
    return Chat(out, origins)


def from_chat(raw: dict[str, Any]) -> Any:
    """A new pydantic-ai message for a chat dict (the trimmed-conversation note)."""
    from pydantic_ai import messages as pm

    content = raw.get("content")
    text = content if isinstance(content, str) else ""
    if raw.get("role") == "assistant":
        return pm.ModelResponse(parts=[pm.TextPart(text)])
    return pm.ModelRequest(parts=[pm.UserPromptPart(text)])


def _changed_part(part: Any, raw: dict[str, Any]) -> Any:
    """A copy of ``part`` with the fitted content (a cleared result, the note appended)."""
    from pydantic_ai import messages as pm

    raw_content = raw.get("content")
    if isinstance(raw_content, list):  # a cleared list result is one text part
        content = "".join(p.get("text", "") for p in raw_content if isinstance(p, dict))
    else:
        content = raw_content if isinstance(raw_content, str) else ""
    if isinstance(part, pm.UserPromptPart) and not isinstance(part.content, str):
        # the note was appended to the list of parts: the last text part is it
        note = raw_content[-1].get("text", "") if isinstance(raw_content, list) else content
        return dataclasses.replace(part, content=[*part.content, note])
    return dataclasses.replace(part, content=content)


def restore(
    history: Sequence[Any],
    chat: Chat,
    fitted: Sequence[dict[str, Any]],
    sources: Sequence[int | None],
    changed: Sequence[bool],
) -> list[Any]:
    """The fitted history as pydantic-ai messages (module docstring)."""
    kept: dict[int, dict[int, Any]] = {}  # message -> part index -> part to keep
    order: list[tuple[str, Any]] = []  # ("message", index) or ("new", message)
    for raw, src, is_changed in zip(fitted, sources, changed, strict=True):
        if src is None:
            order.append(("new", from_chat(raw)))
            continue
        i, k = chat.origins[src]
        if i < 0:  # sent apart from the history (the instructions)
            continue
        if i not in kept:
            kept[i] = {}
            order.append(("message", i))
        if k >= 0:
            part = history[i].parts[k]
            kept[i][k] = _changed_part(part, raw) if is_changed else part
    out: list[Any] = []
    for what, value in order:
        if what == "new":
            out.append(value)
            continue
        message = history[value]
        parts = kept[value]
        whole = len(parts) == len(message.parts) and all(
            parts[k] is p for k, p in enumerate(message.parts)
        )
        if message.kind == "response" or whole:
            out.append(message)
        else:
            out.append(dataclasses.replace(message, parts=[parts[k] for k in sorted(parts)]))
    return out
