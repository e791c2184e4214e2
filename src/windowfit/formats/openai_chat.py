"""OpenAI Chat Completions format <-> neutral model.

Roles ``system``/``developer``/``user``/``assistant``/``tool``. Content is a string, null,
or a list of parts (``text``, ``image_url``; others kept verbatim as
:class:`~windowfit.messages.Opaque`). An assistant's ``tool_calls`` become
:class:`~windowfit.messages.ToolCall` blocks after its content, and a DeepSeek-style
``reasoning_content`` string becomes a leading :class:`~windowfit.messages.Thinking` block.
A ``tool`` message becomes one :class:`~windowfit.messages.ToolResult` block.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._overheads import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TOOL_OVERHEAD
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
from ._common import (
    Counts,
    FormatSpec,
    image_size,
    not_a_string,
    require_mapping,
    require_str,
    rest,
)
from ._dialect import Dialect, RequestParts, Usage
from ._facts import Facts, describe, json_text

__all__ = [
    "DIALECT",
    "SPEC",
    "error_body",
    "from_message",
    "output_overflow_error",
    "scan",
    "scan_all",
    "to_message",
]

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


# --------------------------------------------------------------------------------------
# Scanning: checked and sized straight from the JSON (see ``_facts``)

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
#: Keys that let an assistant message go without content (Chat Completions reference:
#: content is "required unless tool_calls or function_call is specified").
_CONTENT_OPTIONAL = ("tool_calls", "function_call", "audio", "refusal")


def scan(raw: Any, index: int, counts: Counts) -> Facts:
    """Check one Chat Completions message and size it, without building the neutral form
    (see :func:`scan_all`, which this is for one message)."""
    return scan_all((raw,), counts, index)[0]


def scan_all(messages: Iterable[Any], counts: Counts, start: int = 0) -> list[Facts]:
    """Check every message (the first is message ``start``) and size it, without building
    the neutral form: the facts of each, in order.

    Besides each part's own fields, checks what the API rejects with a 400: an unknown
    role, missing content (except an assistant message with tool calls), tool calls on a
    message that is not the assistant's, a tool message without ``tool_call_id``.
    (One loop, its names bound once: see ``anthropic.scan_all``.)
    """
    estimate = counts.text
    cleared_string = counts.cleared_string_tokens
    make = tuple.__new__
    out: list[Facts] = []
    append = out.append
    index = start - 1
    for raw in messages:
        index += 1
        if type(raw) is not dict and not isinstance(raw, Mapping):
            raise ConversationError(
                f"a message must be a JSON object, not {describe(raw)}", index=index
            )
        role = raw.get("role")
        if type(role) is not str or role not in _ROLES:
            if not isinstance(role, str):
                raise not_a_string(role, index, "role")
            roles = ", ".join(sorted(_ROLES))
            raise ConversationError(
                f"role {role!r} is not an OpenAI chat role ({roles})", index=index, field="role"
            )
        content = raw.get("content")
        if role == "tool":
            call_id = raw.get("tool_call_id")
            if type(call_id) is not str:
                raise not_a_string(call_id, index, "tool_call_id")
            if type(content) is str:
                n, cleared = TOOL_OVERHEAD + estimate(content), cleared_string
            elif content is None:
                raise ConversationError(
                    "is missing" if "content" not in raw else "must not be null",
                    index=index,
                    field="content",
                )
            else:
                n = TOOL_OVERHEAD + _parts_size(content, index, counts)
                cleared = counts.cleared_list_tokens
            facts = (role, MESSAGE_OVERHEAD + n, (), ((call_id, n, cleared),), True, False, 0)
            append(make(Facts, facts))
            continue
        if type(content) is str:
            tokens = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + estimate(content)
            has_content = True
        elif content is None:
            if role != "assistant" or not any(raw.get(k) is not None for k in _CONTENT_OPTIONAL):
                raise ConversationError(
                    "is missing" if "content" not in raw else "must not be null",
                    index=index,
                    field="content",
                )
            tokens, has_content = MESSAGE_OVERHEAD, False
        else:
            tokens = MESSAGE_OVERHEAD + _parts_size(content, index, counts)
            has_content = bool(content)
        calls: tuple[str, ...] = ()
        raw_calls = raw.get("tool_calls")
        if raw_calls is not None:
            if role != "assistant":
                raise ConversationError(
                    f"only assistant messages carry tool calls, not {role} messages",
                    index=index,
                    field="tool_calls",
                )
            if type(raw_calls) is not list:
                raise ConversationError(
                    f"must be a list, not {describe(raw_calls)}", index=index, field="tool_calls"
                )
            k = -1
            for call in raw_calls:
                k += 1
                function = call.get("function") if type(call) is dict else None
                if type(function) is dict:  # the common case, inline
                    call_id = call.get("id")
                    name = function.get("name")
                    arguments = function.get("arguments", "")
                    if (
                        type(call_id) is not str
                        or type(name) is not str
                        or type(arguments) is not str
                    ):
                        call_id, name, arguments = _call_fields(call, index, k)
                else:
                    call_id, name, arguments = _call_fields(call, index, k)
                tokens += TOOL_OVERHEAD + estimate(name) + estimate(arguments)
                calls += (call_id,)
        if role == "assistant":
            reasoning = raw.get(_REASONING_KEY)
            if type(reasoning) is str:
                tokens += BLOCK_OVERHEAD + estimate(reasoning)
        has_input = role == "user" and has_content
        append(make(Facts, (role, tokens, calls, (), False, has_input, tokens)))
    return out


def _call_fields(call: Any, index: int, k: int) -> tuple[str, str, str]:
    where = f"tool_calls[{k}]"
    if type(call) is not dict and not isinstance(call, Mapping):
        raise ConversationError(
            f"a tool call must be a JSON object, not {describe(call)}", index=index, field=where
        )
    call_id = call.get("id")
    if type(call_id) is not str:
        raise not_a_string(call_id, index, f"{where}.id")
    function = call.get("function")
    if type(function) is not dict and not isinstance(function, Mapping):
        if function is None:
            raise ConversationError("is missing", index=index, field=f"{where}.function")
        raise ConversationError(
            f"must be a JSON object, not {describe(function)}",
            index=index,
            field=f"{where}.function",
        )
    name = function.get("name")
    if type(name) is not str:
        raise not_a_string(name, index, f"{where}.function.name")
    arguments = function.get("arguments", "")
    if type(arguments) is not str:
        raise ConversationError(
            f"must be a JSON string, not {describe(arguments)}",
            index=index,
            field=f"{where}.function.arguments",
        )
    return call_id, name, arguments


def _parts_size(content: Any, index: int, counts: Counts) -> int:
    if type(content) is not list:
        raise ConversationError(
            f"must be a string or a list of parts, not {describe(content)}",
            index=index,
            field="content",
        )
    n = 0
    for k, part in enumerate(content):
        where = f"content[{k}]"
        if type(part) is not dict and not isinstance(part, Mapping):
            raise ConversationError(
                f"a content part must be a JSON object, not {describe(part)}",
                index=index,
                field=where,
            )
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if type(text) is not str:
                raise not_a_string(text, index, f"{where}.text")
            n += BLOCK_OVERHEAD + counts.text(text)
        elif kind == "image_url":
            n += image_size(part.get("image_url"), index, f"{where}.image_url", counts)
        elif type(kind) is not str:
            raise not_a_string(kind, index, f"{where}.type")
        else:
            n += BLOCK_OVERHEAD + counts.text(json_text(part, index, where))
    return n


def result_field(raw: Any, call_id: str) -> str:
    return "tool_call_id"


def clear(raw: Any, ids: frozenset[str], note: str) -> dict[str, Any]:
    """A copy of a tool message whose content is ``note`` (one text part if it was a list)."""
    content = raw.get("content")
    return {
        **raw,
        "content": [{"type": "text", "text": note}] if isinstance(content, list) else note,
    }


def strip(raw: Any) -> dict[str, Any]:
    raise TypeError("an OpenAI message never carries user input beside tool results")


SPEC = FormatSpec(
    name="openai",
    from_message=from_message,
    to_message=to_message,
    system_roles=frozenset({"system", "developer"}),
    roles=_ROLES,
    scan=scan,
    scan_all=scan_all,
    result_field=result_field,
    calls_field="tool_calls",
    clear=clear,
    strip=strip,
    note_joins_only_user_messages=True,
)


# --------------------------------------------------------------------------------------
# The whole Chat Completions API: request body, usage, stream chunks, error bodies

#: The output-limit fields, the current one first (``max_tokens`` is the older name).
OUTPUT_LIMIT_FIELDS = ("max_completion_tokens", "max_tokens")


def _whole(value: Any) -> int | None:
    return value if type(value) is int else None


def read_request(body: Mapping[str, Any]) -> RequestParts:
    """The parts of a Chat Completions body fitting reads. The system prompt is the
    ``system``/``developer`` messages leading ``messages`` (fitting keeps them as they
    are), so ``system`` is ``None``; ``tools`` (or the older ``functions``)."""
    if not isinstance(body, Mapping):
        raise ConversationError(f"a request body must be a JSON object, not {describe(body)}")
    messages = body.get("messages")
    if type(messages) is not list:
        raise ConversationError(f"must be a list, not {describe(messages)}", field="messages")
    tools = body.get("tools")
    if tools is None:
        tools = body.get("functions")
    limit = None
    for key in OUTPUT_LIMIT_FIELDS:
        limit = _whole(body.get(key))
        if limit is not None:
            break
    model = body.get("model")
    return RequestParts(
        messages=messages,
        system=None,
        tools=tools,
        model=model if isinstance(model, str) else None,
        max_output_tokens=limit,
        stream=body.get("stream") is True,
    )


def write_request(body: Mapping[str, Any], messages: list[Any], system: Any) -> dict[str, Any]:
    """``body`` with ``messages`` in place (system messages travel inside them)."""
    out = dict(body)
    out["messages"] = messages
    return out


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    prompt = _whole(raw.get("prompt_tokens"))
    if prompt is None:
        return None
    details = raw.get("prompt_tokens_details")
    cached = _whole(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    out_details = raw.get("completion_tokens_details")
    reasoning = (
        _whole(out_details.get("reasoning_tokens")) if isinstance(out_details, Mapping) else None
    )
    return Usage(prompt, _whole(raw.get("completion_tokens")) or 0, cached or 0, 0, reasoning or 0)


def usage(response: Any) -> Usage | None:
    """The usage of a whole completion (``None`` without one)."""
    return _usage(response.get("usage")) if isinstance(response, Mapping) else None


def stream_usage(chunk: Any) -> Usage | None:
    """Usage in one streamed chunk: only the last one has it, and only when the request
    asked with ``stream_options: {"include_usage": true}`` (the others carry null)."""
    return _usage(chunk.get("usage")) if isinstance(chunk, Mapping) else None


def error_body(
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """An error body in the OpenAI API's shape."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def status_error(status: int, message: str) -> dict[str, Any]:
    """The API's error body for an HTTP ``status``: a ``server_error`` for 5xx, an
    ``invalid_request_error`` (with a ``code`` naming a 413) for the others."""
    if status >= 500:
        return error_body(message, "server_error")
    return error_body(message, code="request_too_large" if status == 413 else None)


def overflow_error(tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
    """The API's 400 for messages of ``tokens`` over a window of ``limit``."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    return 400, error_body(message, param="messages", code="context_length_exceeded")


def output_overflow_error(tokens: int, max_tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
    """The API's 400 for messages that fit but leave no room for ``max_tokens``."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, you requested "
        f"{tokens + max_tokens} tokens ({tokens} in the messages, {max_tokens} in the "
        "completion). Please reduce the length of the messages or completion."
    )
    return 400, error_body(message, param="messages", code="context_length_exceeded")


_OVERFLOW = re.compile(r"maximum context length", re.IGNORECASE)


def is_overflow(status: int, body: Any) -> bool:
    """Whether an error answer is the API's refusal of messages too long for the window
    (``code: context_length_exceeded``, or the wording compatible servers copy); not the
    refusal of a completion limit that leaves no room (its remedy is a smaller limit)."""
    if status != 400 or not isinstance(body, Mapping):
        return False
    error = body.get("error")
    if not isinstance(error, Mapping):
        return False
    message = error.get("message")
    if isinstance(message, str) and "in the completion" in message:
        return False
    if error.get("code") == "context_length_exceeded":
        return True
    return isinstance(message, str) and _OVERFLOW.search(message) is not None


DIALECT = Dialect(
    name="openai",
    format=SPEC,
    output_limit_field="max_completion_tokens",
    read_request=read_request,
    write_request=write_request,
    usage=usage,
    stream_usage=stream_usage,
    overflow_error=overflow_error,
    is_overflow=is_overflow,
    provider="openai",
    status_error=status_error,
    sdk_package="openai",
    sdk_resource="chat.completions",
)
