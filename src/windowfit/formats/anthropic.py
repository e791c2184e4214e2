"""Anthropic Messages format <-> neutral model.

A message is ``{"role": "user" | "assistant", "content": str | [block, ...]}``; blocks are
``text``, ``image``, ``tool_use``, ``tool_result`` (whose content is a string or a list of
text/image blocks), ``thinking`` and ``redacted_thinking``. Any other block type is kept
verbatim as :class:`~windowfit.messages.Opaque`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._overheads import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TOOL_OVERHEAD
from ..errors import ConversationError
from ..messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from ._common import (
    Counts,
    FormatSpec,
    arguments_json,
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
    "block_from_raw",
    "block_to_raw",
    "error_body",
    "from_message",
    "output_overflow_error",
    "scan",
    "scan_all",
    "to_message",
]


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


# --------------------------------------------------------------------------------------
# Scanning: checked and sized straight from the JSON (see ``_facts``)

#: Block types a tool_result's content may hold (Anthropic tool-use docs: text, image,
#: document and search_result blocks).
_RESULT_CONTENT_TYPES = frozenset({"text", "image", "document", "search_result"})
#: Block types only the assistant writes.
_ASSISTANT_ONLY = frozenset({"tool_use", "thinking", "redacted_thinking", "server_tool_use"})


def scan(raw: Any, index: int, counts: Counts) -> Facts:
    """Check one Anthropic message and size it, without building the neutral form (see
    :func:`scan_all`, which this is for one message)."""
    return scan_all((raw,), counts, index)[0]


def scan_all(messages: Iterable[Any], counts: Counts, start: int = 0) -> list[Facts]:
    """Check every message (the first is message ``start``) and size it, without building
    the neutral form: the facts of each, in order.

    Besides each block's own fields, checks what the API rejects with a 400: a role other
    than user or assistant, content that is not a string or a list of blocks, tool_use
    or thinking blocks in a user message, tool_result blocks in an assistant message or
    after other content, and blocks nested where they may not be.

    (One loop over the whole conversation, its names bound once: a cold fit reads
    thousands of messages, and a call per message, per-message look-ups and building
    each error's field name before it is needed cost more than reading them does.)
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
        if role != "user" and role != "assistant":
            if role is None or not isinstance(role, str):
                raise not_a_string(role, index, "role")
            raise ConversationError(
                f"role {role!r} is not an Anthropic role (user, assistant)",
                index=index,
                field="role",
            )
        content = raw.get("content")
        user_side = role == "user"
        if type(content) is str:
            tokens = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + estimate(content)
            append(make(Facts, (role, tokens, (), (), False, user_side, tokens)))
            continue
        if type(content) is not list:
            if content is None:
                problem = "is missing" if "content" not in raw else "must not be null"
                raise ConversationError(problem, index=index, field="content")
            raise ConversationError(
                f"must be a string or a list of blocks, not {describe(content)}",
                index=index,
                field="content",
            )
        tokens = other = MESSAGE_OVERHEAD
        calls: tuple[str, ...] = ()
        results: tuple[tuple[str, int, int], ...] = ()
        k = -1
        for block in content:
            k += 1
            if type(block) is not dict and not isinstance(block, Mapping):
                raise ConversationError(
                    f"a block must be a JSON object, not {describe(block)}",
                    index=index,
                    field=f"content[{k}]",
                )
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if type(text) is not str:
                    raise not_a_string(text, index, f"content[{k}].text")
                n = BLOCK_OVERHEAD + estimate(text)
            elif kind == "tool_result":
                if not user_side:
                    raise ConversationError(
                        "a tool_result block belongs in a user message, not an assistant message",
                        index=index,
                        field=f"content[{k}]",
                    )
                if other != MESSAGE_OVERHEAD:
                    raise ConversationError(
                        "tool_result blocks must come first in a user message, before any "
                        "other content",
                        index=index,
                        field=f"content[{k}]",
                    )
                call_id = block.get("tool_use_id")
                if type(call_id) is not str:
                    raise not_a_string(call_id, index, f"content[{k}].tool_use_id")
                inner = block.get("content")
                is_error = block.get("is_error")
                if type(inner) is str and (is_error is None or type(is_error) is bool):
                    n, cleared = TOOL_OVERHEAD + estimate(inner), cleared_string  # common
                else:
                    n, cleared = _result_size(block, index, k, counts)
                results += ((call_id, n, cleared),)
                tokens += n
                continue
            elif kind == "tool_use":
                if user_side:
                    raise _assistant_only(kind, index, k)
                call_id = block.get("id")
                if type(call_id) is not str:
                    raise not_a_string(call_id, index, f"content[{k}].id")
                name = block.get("name")
                if type(name) is not str:
                    raise not_a_string(name, index, f"content[{k}].name")
                value = block.get("input", _EMPTY)
                if type(value) is not dict and not isinstance(value, Mapping):
                    raise ConversationError(
                        f"must be a JSON object, not {describe(value)}",
                        index=index,
                        field=f"content[{k}].input",
                    )
                arguments = json_text(value, index, f"content[{k}].input")
                n = TOOL_OVERHEAD + estimate(name) + estimate(arguments)
                calls += (call_id,)
            else:
                n = _other_block_size(block, kind, index, f"content[{k}]", counts)
                if user_side and kind in _ASSISTANT_ONLY:
                    raise _assistant_only(kind, index, k)
            tokens += n
            other += n
        has_input = user_side and other != MESSAGE_OVERHEAD
        append(make(Facts, (role, tokens, calls, results, bool(results), has_input, other)))
    return out


_EMPTY: dict[str, Any] = {}


def _assistant_only(kind: str, index: int, k: int) -> ConversationError:
    return ConversationError(
        f"a {kind} block belongs in an assistant message, not a user message",
        index=index,
        field=f"content[{k}]",
    )


def _other_block_size(
    block: Mapping[str, Any], kind: Any, index: int, where: str, counts: Counts
) -> int:
    """The size of a block that is neither a tool call nor a tool result."""
    if kind == "text":
        text = block.get("text")
        if type(text) is not str:
            raise not_a_string(text, index, f"{where}.text")
        return BLOCK_OVERHEAD + counts.text(text)
    if kind == "image":
        return image_size(block.get("source"), index, f"{where}.source", counts)
    if kind == "thinking":
        text = block.get("thinking")
        if type(text) is not str:
            raise not_a_string(text, index, f"{where}.thinking")
        signature = block.get("signature")
        if signature is not None and type(signature) is not str:
            raise not_a_string(signature, index, f"{where}.signature")
        return BLOCK_OVERHEAD + counts.text(text)
    if kind == "redacted_thinking":
        data = block.get("data")
        if type(data) is not str:
            raise not_a_string(data, index, f"{where}.data")
        return BLOCK_OVERHEAD + counts.text(data)
    if type(kind) is not str:
        raise not_a_string(kind, index, f"{where}.type")
    if kind == "tool_use" or kind == "tool_result":
        raise ConversationError(
            f"a {kind} block cannot be nested inside another block", index=index, field=where
        )
    return BLOCK_OVERHEAD + counts.text(json_text(block, index, where))


def _result_size(block: Mapping[str, Any], index: int, k: int, counts: Counts) -> tuple[int, int]:
    """A tool_result block's size and its size once cleared."""
    where = f"content[{k}]"
    is_error = block.get("is_error")
    if is_error is not None and type(is_error) is not bool:
        raise ConversationError(
            f"must be true or false, not {describe(is_error)}",
            index=index,
            field=f"{where}.is_error",
        )
    inner = block.get("content")
    if inner is None:
        if "content" in block:
            raise ConversationError("must not be null", index=index, field=f"{where}.content")
        return TOOL_OVERHEAD, counts.cleared_string_tokens
    if type(inner) is str:
        return TOOL_OVERHEAD + counts.text(inner), counts.cleared_string_tokens
    if type(inner) is not list:
        raise ConversationError(
            f"must be a string or a list of blocks, not {describe(inner)}",
            index=index,
            field=f"{where}.content",
        )
    n = TOOL_OVERHEAD
    text_size = counts.text
    for j, part in enumerate(inner):
        if type(part) is dict and part.get("type") == "text":  # the common case, inline
            text = part.get("text")
            if type(text) is str:
                n += BLOCK_OVERHEAD + text_size(text)
                continue
        here = f"{where}.content[{j}]"
        if type(part) is not dict and not isinstance(part, Mapping):
            raise ConversationError(
                f"a block must be a JSON object, not {describe(part)}", index=index, field=here
            )
        kind = part.get("type")
        if type(kind) is not str:
            raise not_a_string(kind, index, f"{here}.type")
        if kind not in _RESULT_CONTENT_TYPES:
            allowed = ", ".join(sorted(_RESULT_CONTENT_TYPES))
            raise ConversationError(
                f"a {kind} block cannot be inside a tool_result (allowed: {allowed})",
                index=index,
                field=here,
            )
        n += _other_block_size(part, kind, index, here, counts)
    return n, counts.cleared_list_tokens


def result_field(raw: Any, call_id: str) -> str:
    """Where in ``raw`` the tool_result for ``call_id`` is."""
    for k, block in enumerate(raw.get("content") or ()):
        if isinstance(block, Mapping) and block.get("tool_use_id") == call_id:
            return f"content[{k}].tool_use_id"
    return "content"


def clear(raw: Any, ids: frozenset[str], note: str) -> dict[str, Any]:
    """A copy of ``raw`` whose tool_result blocks for ``ids`` hold ``note`` (as a string,
    or as one text block when the result was a list of blocks). Keys keep their order."""
    content = []
    for block in raw["content"]:
        if block.get("type") == "tool_result" and block.get("tool_use_id") in ids:
            inner = block.get("content")
            block = {
                **block,
                "content": [{"type": "text", "text": note}] if isinstance(inner, list) else note,
            }
        content.append(block)
    return {**raw, "content": content}


def strip(raw: Any) -> dict[str, Any]:
    """A copy of ``raw`` without its tool_result blocks (its other content kept)."""
    return {**raw, "content": [b for b in raw["content"] if b.get("type") != "tool_result"]}


SPEC = FormatSpec(
    name="anthropic",
    from_message=from_message,
    to_message=to_message,
    system_roles=frozenset(),
    roles=frozenset({"user", "assistant"}),
    scan=scan,
    scan_all=scan_all,
    result_field=result_field,
    calls_field="content",
    clear=clear,
    strip=strip,
    opening_roles=frozenset({"user"}),
    # "Consecutive user or assistant turns in your request will be combined into a single
    # turn" (Messages API docs): split assistant messages are one round, as in Responses.
    item_rounds=True,
)


# --------------------------------------------------------------------------------------
# The whole Messages API: request body, usage, stream events, error bodies


def _whole(value: Any) -> int | None:
    return value if type(value) is int else None


def read_request(body: Mapping[str, Any]) -> RequestParts:
    """The parts of a Messages (or count_tokens) body fitting reads: ``messages``, the
    top-level ``system`` (a string or text blocks) and ``tools``, ``max_tokens``."""
    if not isinstance(body, Mapping):
        raise ConversationError(f"a request body must be a JSON object, not {describe(body)}")
    messages = body.get("messages")
    if type(messages) is not list:
        raise ConversationError(f"must be a list, not {describe(messages)}", field="messages")
    model = body.get("model")
    return RequestParts(
        messages=messages,
        system=body.get("system"),
        tools=body.get("tools"),
        model=model if isinstance(model, str) else None,
        max_output_tokens=_whole(body.get("max_tokens")),
        stream=body.get("stream") is True,
    )


def write_request(body: Mapping[str, Any], messages: list[Any], system: Any) -> dict[str, Any]:
    """``body`` with ``messages`` (and ``system``, when given) in place; every other field,
    ``cache_control``, ``context_management`` and ``metadata`` included, as sent."""
    out = dict(body)
    out["messages"] = messages
    if system is not None:
        out["system"] = system
    return out


def usage(response: Any) -> Usage | None:
    """The usage of a whole Messages response (``None`` without one)."""
    raw = response.get("usage") if isinstance(response, Mapping) else None
    return _usage(raw)


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    uncached = _whole(raw.get("input_tokens")) or 0
    read = _whole(raw.get("cache_read_input_tokens")) or 0
    write = _whole(raw.get("cache_creation_input_tokens")) or 0
    output = _whole(raw.get("output_tokens")) or 0
    return Usage(uncached + read + write, output, read, write)


def stream_usage(event: Any) -> Usage | None:
    """Usage in one streamed event: ``message_start`` carries the input counts (and one
    output token); ``message_delta`` the output so far (with the input counts too in
    current API versions; ``input_tokens`` is 0 when it does not say)."""
    if not isinstance(event, Mapping):
        return None
    kind = event.get("type")
    if kind == "message_start":
        message = event.get("message")
        return _usage(message.get("usage")) if isinstance(message, Mapping) else None
    if kind == "message_delta":
        return _usage(event.get("usage"))
    return None


def error_body(type_: str, message: str) -> dict[str, Any]:
    """An error body in the Messages API's shape."""
    return {"type": "error", "error": {"type": type_, "message": message}}


#: The Messages API's error ``type`` by HTTP status (its errors page); others: api_error.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def status_error(status: int, message: str) -> dict[str, Any]:
    """The API's error body for an HTTP ``status`` (its ``type`` follows the status)."""
    return error_body(_ERROR_TYPES.get(status, "api_error"), message)


def overflow_error(tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
    """The API's 400 for a prompt of ``tokens`` over a window of ``limit``."""
    message = f"prompt is too long: {tokens} tokens > {limit} maximum"
    return 400, error_body("invalid_request_error", message)


def output_overflow_error(tokens: int, max_tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
    """The API's 400 for a prompt that fits but leaves no room for ``max_tokens``."""
    message = (
        f"input length and `max_tokens` exceed context limit: {tokens} + {max_tokens} > "
        f"{limit}, decrease input length or `max_tokens` and try again"
    )
    return 400, error_body("invalid_request_error", message)


_OVERFLOW = re.compile(r"prompt is too long", re.IGNORECASE)


def is_overflow(status: int, body: Any) -> bool:
    """Whether an error answer is the API's refusal of a prompt too long for the window.
    (Not the refusal of a ``max_tokens`` that leaves no room: shortening the prompt is
    not its remedy, and clients such as Claude Code lower ``max_tokens`` themselves.)"""
    if status != 400 or not isinstance(body, Mapping):
        return False
    error = body.get("error")
    message = error.get("message") if isinstance(error, Mapping) else None
    return isinstance(message, str) and _OVERFLOW.search(message) is not None


DIALECT = Dialect(
    name="anthropic",
    format=SPEC,
    output_limit_field="max_tokens",
    read_request=read_request,
    write_request=write_request,
    usage=usage,
    stream_usage=stream_usage,
    overflow_error=overflow_error,
    is_overflow=is_overflow,
    provider="anthropic",
    status_error=status_error,
    sdk_package="anthropic",
    sdk_resource="messages",
    cache_breakpoints=True,
    # POST /v1/messages/count_tokens (Anthropic's token counting docs): free, rate limited
    # apart from messages, and it takes these fields of a Messages request.
    count_method="count_tokens",
    count_fields=("model", "messages", "system", "tools", "tool_choice", "thinking"),
)
