"""OpenAI Responses ``input`` items <-> neutral model.

A Responses request carries a list of *items* rather than messages. Each item is one
"message" for fitting:

* ``message`` items (``{"type": "message", "role": ..., "content": ...}``, ``type`` may be
  left out): role ``user``, ``system``, ``developer`` or ``assistant``; content a string or
  a list of parts (``input_text``/``output_text`` become :class:`~windowfit.messages.Text`,
  ``input_image`` an :class:`~windowfit.messages.Image`, anything else, such as
  ``input_file`` and ``refusal``, is kept as :class:`~windowfit.messages.Opaque` and sized
  by its JSON);
* ``function_call`` and ``custom_tool_call`` (the model's side, role ``assistant``): one
  :class:`~windowfit.messages.ToolCall` each, paired by ``call_id`` with
* ``function_call_output`` and ``custom_tool_call_output`` (role ``tool``): one
  :class:`~windowfit.messages.ToolResult` each, whose ``output`` is a string or a list of
  parts;
* ``reasoning`` and ``compaction`` items, and anything carrying ``encrypted_content``, are
  kept verbatim (role ``assistant``), sized by their JSON and never cleared: the
  encrypted parts must travel back byte for byte;
* any other item type is kept verbatim and sized by its JSON: ``..._call`` items are the
  model's (role ``assistant``), the others (``..._output``, ``item_reference``...) sit
  between rounds without taking part in the pairing.

**Rounds.** The model's output is several items (reasoning, text, calls), so consecutive
``assistant`` items form one round (``FormatSpec.item_rounds``): one request point, one
place a cut may fall, its calls answered by the output items after the round. Windowfit
asks that every call be answered before the next round or user message starts (the API
itself only needs each output's call earlier in the input and every call answered); a
request that breaks this is a ConversationError naming the item.

**Clearing** replaces an output item's ``output`` with the cleared-result note (a string,
or one ``input_text`` part when the output was a list); its ``call_id`` and other fields
stay, so the pairing still holds.

The round trip is exact, key order included: the neutral form keeps each item (and each
part) whole in ``extra``/``source``, and the way back writes the interpreted fields into
a copy of it, where they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._overheads import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TOOL_OVERHEAD
from ..errors import ConversationError
from ..messages import Block, ContentForm, Image, Message, Opaque, Text, ToolCall, ToolResult
from ._common import Counts, FormatSpec, image_size, not_a_string, require_mapping
from ._dialect import Dialect, RequestParts, Usage
from ._facts import Facts, describe, json_text
from .openai_chat import status_error as _openai_status_error

__all__ = [
    "CALL_TYPES",
    "DIALECT",
    "OUTPUT_TYPES",
    "OVERFLOW_MESSAGE",
    "SPEC",
    "from_message",
    "item_type",
    "scan",
    "to_message",
]

#: Call item type -> the field holding its arguments.
CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
#: Output item types that answer a call, by ``call_id``.
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
#: Item types only Responses has (what :func:`windowfit.detect_format` looks for).
ITEM_TYPES = frozenset({"message", "reasoning", "compaction", *CALL_TYPES, *OUTPUT_TYPES})
#: Content part types only Responses has.
PART_TYPES = frozenset({"input_text", "output_text", "input_image", "input_file"})

_MESSAGE_ROLES = ("assistant", "developer", "system", "user")
#: Part types an assistant message item may hold (the API: "Supported values are:
#: 'output_text' and 'refusal'").
_ASSISTANT_PARTS = frozenset({"output_text", "refusal"})
_TEXT_PARTS = frozenset({"input_text", "output_text"})


def item_type(raw: Mapping[str, Any]) -> str:
    """An item's type: its ``type``, or ``message`` for an untyped role/content item."""
    kind = raw.get("type", "message")
    return kind if isinstance(kind, str) else ""


def _verbatim_role(kind: str) -> str:
    """The role of an item kept verbatim: the model's side, or between rounds."""
    if kind in ("reasoning", "compaction") or kind.endswith("_call"):
        return "assistant"
    return "tool"


# --------------------------------------------------------------------------------------
# Neutral model


def _part_from_raw(raw: Any, index: int, where: str) -> Block:
    part = require_mapping(raw, index, f"{where} part")
    kind = part.get("type")
    if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
        return Text(part["text"], dict(part))
    if kind == "input_image":
        return Image(part)
    return Opaque(part)


def _part_to_raw(block: Block, role: str) -> dict[str, Any]:
    if isinstance(block, Text):
        default = "output_text" if role == "assistant" else "input_text"
        out = dict(block.extra) if block.extra else {"type": default}
        out["text"] = block.text
        return out
    if isinstance(block, Image):
        return dict(block.source)
    if isinstance(block, Opaque):
        return dict(block.data)
    raise TypeError(f"a {block.type} block cannot be a content part of a Responses item")


def _content_from_raw(content: Any, index: int, field: str) -> str | tuple[Block, ...]:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return tuple(_part_from_raw(part, index, f"{field}[{k}]") for k, part in enumerate(content))
    raise ConversationError(
        f"must be a string or a list of parts, not {describe(content)}", index=index, field=field
    )


def from_message(raw: Any, index: int) -> Message:
    item = require_mapping(raw, index, "input item")
    kind = item_type(item)
    if kind in CALL_TYPES:
        call_id = _str(item, "call_id", index)
        name = _str(item, "name", index)
        arguments = _str(item, CALL_TYPES[kind], index)
        return Message(
            "assistant", (ToolCall(call_id, name, arguments, None, dict(item)),), "absent"
        )
    if kind in OUTPUT_TYPES:
        call_id = _str(item, "call_id", index)
        if "output" not in item:
            raise ConversationError("is missing", index=index, field="output")
        content = _content_from_raw(item["output"], index, "output")
        form: ContentForm = "string" if isinstance(content, str) else "list"
        return Message("tool", (ToolResult(call_id, content, None, dict(item)),), form)
    if kind == "message" and "encrypted_content" not in item:
        role = _str(item, "role", index)
        if role not in _MESSAGE_ROLES:
            raise _bad_role(role, index)
        if "content" not in item:
            raise ConversationError("is missing", index=index, field="content")
        content = _content_from_raw(item["content"], index, "content")
        if isinstance(content, str):
            return Message(role, (Text(content),), "string", dict(item))
        return Message(role, content, "list", dict(item))
    return Message(_verbatim_role(kind), (Opaque(item),), "absent")


def to_message(message: Message) -> dict[str, Any]:
    blocks = message.blocks
    out: dict[str, Any]
    if message.form == "absent" and len(blocks) == 1:
        block = blocks[0]
        if isinstance(block, ToolCall):
            out = dict(block.extra) if block.extra else {"type": "function_call"}
            out["call_id"] = block.id
            out["name"] = block.name
            out[CALL_TYPES.get(out.get("type", ""), "arguments")] = block.arguments
            return out
        if isinstance(block, Opaque):
            return dict(block.data)
    if len(blocks) == 1 and isinstance(blocks[0], ToolResult):
        result = blocks[0]
        out = dict(result.extra) if result.extra else {"type": "function_call_output"}
        out["call_id"] = result.call_id
        if isinstance(result.content, str):
            out["output"] = result.content
        else:
            out["output"] = [_part_to_raw(b, "tool") for b in result.content or ()]
        return out
    out = dict(message.extra) if message.extra else {"type": "message"}
    out["role"] = message.role
    if message.form == "string":
        out["content"] = "".join(b.text for b in blocks if isinstance(b, Text))
    else:
        out["content"] = [_part_to_raw(b, message.role) for b in blocks]
    return out


def _str(item: Mapping[str, Any], key: str, index: int) -> str:
    value = item.get(key)
    if type(value) is not str:
        raise not_a_string(value, index, key)
    return value


def _bad_role(role: str, index: int) -> ConversationError:
    roles = ", ".join(_MESSAGE_ROLES)
    return ConversationError(
        f"role {role!r} is not a Responses message role ({roles})", index=index, field="role"
    )


# --------------------------------------------------------------------------------------
# Scanning: checked and sized straight from the JSON (see ``_facts``)


def scan(raw: Any, index: int, counts: Counts) -> Facts:
    """Check one input item and size it, without building the neutral form.

    Checks what the API rejects with a 400: an item that is not an object, a ``type``
    that is not a string, a call or output without its string ``call_id`` (a call without
    ``name`` or string arguments, an output without ``output``), a message item without a
    known role or content, parts that are not objects with a string ``type``, text parts
    without string ``text``, and input parts in an assistant message.
    """
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ConversationError(
            f"an input item must be a JSON object, not {describe(raw)}", index=index
        )
    kind = raw.get("type", "message")
    if type(kind) is not str:
        raise not_a_string(kind, index, "type")
    estimate = counts.text
    if kind in CALL_TYPES:
        call_id = _str(raw, "call_id", index)
        name = _str(raw, "name", index)
        arguments = _str(raw, CALL_TYPES[kind], index)
        tokens = MESSAGE_OVERHEAD + TOOL_OVERHEAD + estimate(name) + estimate(arguments)
        return Facts("assistant", tokens, (call_id,), (), False, False, tokens)
    if kind in OUTPUT_TYPES:
        call_id = _str(raw, "call_id", index)
        output = raw.get("output")
        if type(output) is str:
            n, cleared = TOOL_OVERHEAD + estimate(output), counts.cleared_string_tokens
        elif output is None:
            raise ConversationError(
                "is missing" if "output" not in raw else "must not be null",
                index=index,
                field="output",
            )
        else:
            n = TOOL_OVERHEAD + _parts_size(output, index, "output", counts, None)
            cleared = counts.cleared_list_tokens
        return Facts("tool", MESSAGE_OVERHEAD + n, (), ((call_id, n, cleared),), True, False, 0)
    if kind == "message" and "encrypted_content" not in raw:
        role = raw.get("role")
        if type(role) is not str:
            raise not_a_string(role, index, "role")
        if role not in _MESSAGE_ROLES:
            raise _bad_role(role, index)
        content = raw.get("content")
        if type(content) is str:
            tokens = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + estimate(content)
            has_content = True
        elif content is None:
            raise ConversationError(
                "is missing" if "content" not in raw else "must not be null",
                index=index,
                field="content",
            )
        else:
            tokens = MESSAGE_OVERHEAD + _parts_size(content, index, "content", counts, role)
            has_content = bool(content)
        return Facts(role, tokens, (), (), False, role == "user" and has_content, tokens)
    tokens = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + estimate(json_text(raw, index, "item"))
    role = _verbatim_role(kind)
    return Facts(role, tokens, (), (), role == "tool", False, tokens)


def _parts_size(content: Any, index: int, field: str, counts: Counts, role: str | None) -> int:
    if type(content) is not list:
        raise ConversationError(
            f"must be a string or a list of parts, not {describe(content)}",
            index=index,
            field=field,
        )
    n = 0
    for k, part in enumerate(content):
        where = f"{field}[{k}]"
        if type(part) is not dict and not isinstance(part, Mapping):
            raise ConversationError(
                f"a content part must be a JSON object, not {describe(part)}",
                index=index,
                field=where,
            )
        kind = part.get("type")
        if type(kind) is not str:
            raise not_a_string(kind, index, f"{where}.type")
        if role == "assistant" and kind not in _ASSISTANT_PARTS:
            raise ConversationError(
                f"an assistant message holds output_text and refusal parts, not {kind}",
                index=index,
                field=f"{where}.type",
            )
        if kind in _TEXT_PARTS:
            text = part.get("text")
            if type(text) is not str:
                raise not_a_string(text, index, f"{where}.text")
            n += BLOCK_OVERHEAD + counts.text(text)
        elif kind == "input_image":
            url = part.get("image_url")
            if url is not None and type(url) is not str:
                raise not_a_string(url, index, f"{where}.image_url")
            n += image_size(part, index, where, counts)
        else:
            n += BLOCK_OVERHEAD + counts.text(json_text(part, index, where))
    return n


def result_field(raw: Any, call_id: str) -> str:
    return "call_id"


def clear(raw: Any, ids: frozenset[str], note: str) -> dict[str, Any]:
    """A copy of an output item whose ``output`` is ``note`` (one ``input_text`` part when
    it was a list); every other field, ``call_id`` included, stays where it was."""
    output = raw.get("output")
    return {
        **raw,
        "output": [{"type": "input_text", "text": note}] if isinstance(output, list) else note,
    }


def strip(raw: Any) -> dict[str, Any]:
    raise TypeError("a Responses item never carries user input beside a tool output")


SPEC = FormatSpec(
    name="openai-responses",
    from_message=from_message,
    to_message=to_message,
    system_roles=frozenset({"system", "developer"}),
    roles=frozenset({*_MESSAGE_ROLES, "tool"}),
    scan=scan,
    result_field=result_field,
    calls_field="call_id",
    clear=clear,
    strip=strip,
    item_rounds=True,
    note_as_own_message=True,
)


# --------------------------------------------------------------------------------------
# The whole API: request body, usage, stream events, the overflow error

#: What the Responses API says when the input is longer than the model's window (HTTP
#: 400, ``code: context_length_exceeded``, ``param: input``).
OVERFLOW_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
#: Stream events whose ``response`` carries the final usage.
FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def read_request(body: Mapping[str, Any]) -> RequestParts:
    """The parts of a ``POST /v1/responses`` body fitting reads.

    ``input`` may be a string (one user message) or a list of items; ``instructions`` is
    the system prompt. A body with ``previous_response_id`` is read as it is: only the
    items it sends are fitted (the stored conversation before them is the provider's).
    """
    if not isinstance(body, Mapping):
        raise ConversationError(f"a request body must be a JSON object, not {describe(body)}")
    raw = body.get("input")
    if isinstance(raw, str):
        items: list[Any] = [{"role": "user", "content": raw}]
    elif isinstance(raw, list):
        items = raw
    elif raw is None:
        items = []
    else:
        raise ConversationError(
            f"must be a string or a list of input items, not {describe(raw)}", field="input"
        )
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ConversationError(
            f"must be a string, not {describe(instructions)}", field="instructions"
        )
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise ConversationError(f"must be a list, not {describe(tools)}", field="tools")
    limit = body.get("max_output_tokens")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise ConversationError(
            f"must be a whole number, not {describe(limit)}", field="max_output_tokens"
        )
    model = body.get("model")
    return RequestParts(
        messages=items,
        system=instructions,
        tools=tools,
        model=model if isinstance(model, str) else None,
        max_output_tokens=limit,
        stream=body.get("stream") is True,
    )


def write_request(body: Mapping[str, Any], messages: list[Any], system: Any) -> dict[str, Any]:
    """``body`` with the fitted items as its ``input`` (a string input left a string when
    fitting kept its one message) and ``system`` as its ``instructions``."""
    out = dict(body)
    raw = body.get("input")
    if not (isinstance(raw, str) and messages == [{"role": "user", "content": raw}]):
        out["input"] = messages
    if system is not None or "instructions" in body:
        out["instructions"] = system
    return out


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _count(value: Any, key: str) -> int:
    got = _get(value, key)
    return got if isinstance(got, int) and not isinstance(got, bool) else 0


def usage(response: Any) -> Usage | None:
    """A response's ``usage``: ``input_tokens`` (cached ones included), of them
    ``input_tokens_details.cached_tokens`` read from the cache, ``output_tokens``, of them
    ``output_tokens_details.reasoning_tokens``. Also reads a bare usage object."""
    found = _get(response, "usage")
    found = found if isinstance(found, Mapping) else response
    if not isinstance(found, Mapping) or not isinstance(found.get("input_tokens"), int):
        return None
    return Usage(
        input_tokens=_count(found, "input_tokens"),
        output_tokens=_count(found, "output_tokens"),
        cache_read_tokens=_count(_get(found, "input_tokens_details"), "cached_tokens"),
        reasoning_tokens=_count(_get(found, "output_tokens_details"), "reasoning_tokens"),
    )


def stream_usage(event: Any) -> Usage | None:
    """The usage a streamed event carries: the ``response`` of ``response.completed``
    (and of ``response.incomplete`` / ``response.failed``); ``None`` for the others."""
    if _get(event, "type") not in FINAL_EVENTS:
        return None
    return usage(_get(event, "response"))


def overflow_error(tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
    """The 400 the API answers for an input of ``tokens`` over a window of ``limit`` (its
    wording names neither number)."""
    return 400, {
        "error": {
            "message": OVERFLOW_MESSAGE,
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }


def is_overflow(status: int, body: Any) -> bool:
    """Whether ``body`` is the API's context overflow: the 400 body, a streamed ``error``
    event, or a ``response.failed`` event whose response's error says so."""
    error = _get(body, "error")
    if _get(body, "type") == "response.failed":
        error = _get(_get(body, "response"), "error")
    error = error if isinstance(error, Mapping) else body
    if _get(error, "code") == "context_length_exceeded":
        return status in (0, 200, 400)
    message = _get(error, "message")
    return status == 400 and isinstance(message, str) and "exceeds the context window" in message


DIALECT = Dialect(
    name="openai-responses",
    format=SPEC,
    output_limit_field="max_output_tokens",
    read_request=read_request,
    write_request=write_request,
    usage=usage,
    stream_usage=stream_usage,
    overflow_error=overflow_error,
    is_overflow=is_overflow,
    provider="openai",
    status_error=_openai_status_error,  # one provider, one error shape
    sdk_package="openai",
    sdk_resource="responses",
)
