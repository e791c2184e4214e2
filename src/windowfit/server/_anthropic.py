"""The Anthropic Messages API: request checks, counting, answers and stream events.

Checks follow the API's own messages (pydantic-style ``messages.0.content: Input should
be a valid list``, the tool pairing rules, at most 4 ``cache_control`` breakpoints), so
that a request the real API would refuse is refused here too, in the same shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConversationError
from ..formats import anthropic as anthropic_format
from ..formats import get_format
from ..formats._dialect import Usage
from ..formats._rules import PairingRule
from ..simcore import (
    Answer,
    Segment,
    ToolOffer,
    WindowRule,
    canonical,
    stable_id,
    strip_cache_control,
)
from ..sizing import MESSAGE_OVERHEAD, Sizer
from ._door import Call, Door, Http, bearer, late_drop, refuse_if_too_long
from ._errors import ProviderError, retry_headers, status_kind
from ._validate import python_type_word

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = [
    "DOOR",
    "WINDOW",
    "AnthropicRequest",
    "anthropic_error",
    "content_blocks",
    "error",
    "message_body",
    "parse_request",
    "segments",
    "stream_events",
]

_SPEC = get_format("anthropic")
_MAX_BREAKPOINTS = 4

_BLOCK_TYPES = (
    "text",
    "image",
    "document",
    "search_result",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
)
_RESULT_PART_TYPES = ("text", "image", "document", "search_result")
_CHOICES = ("auto", "any", "tool", "none")


def anthropic_error(
    status: int,
    type_: str,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    kind: str = "invalid_request",
) -> ProviderError:
    """An error in the Messages API's shape (the app adds the ``request_id``)."""
    body = {"type": "error", "error": {"type": type_, "message": message}}
    return ProviderError(status, body, headers, kind=kind)


def invalid(message: str) -> ProviderError:
    return anthropic_error(400, "invalid_request_error", message)


#: The API's error type and usual words, status by status.
_STATUSES: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Injected invalid request (windowfit serve-sim fault)."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit "
        "(https://docs.anthropic.com/en/api/rate-limits); see the response headers for "
        "current usage. Please reduce the prompt length or the maximum tokens requested, "
        "or try again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def error(
    status: int,
    message: str | None = None,
    type_: str | None = None,
    *,
    retry_after: float | None = None,
    kind: str | None = None,
) -> ProviderError:
    """The error the API answers with for ``status`` (a fault, or a plain refusal)."""
    default_type, default_message = _STATUSES.get(
        status,
        ("api_error", "Internal server error")
        if status >= 500
        else ("invalid_request_error", f"Request failed with status {status}."),
    )
    return anthropic_error(
        status,
        type_ or default_type,
        message or default_message,
        retry_headers(retry_after, status),
        kind=kind or status_kind(status),
    )


def key(request: Request, keys: tuple[str, ...]) -> str:
    """The caller's key (``x-api-key``, or ``Authorization: Bearer``; ``""`` when none was
    sent); the API's 401 when keys are configured and it is missing or unknown."""
    sent = request.headers.get("x-api-key") or bearer(request.headers.get("authorization"))
    if not keys:
        return sent or ""
    if not sent:
        raise anthropic_error(
            401, "authentication_error", "x-api-key header is required", kind="authentication"
        )
    if sent not in keys:
        raise anthropic_error(
            401, "authentication_error", "invalid x-api-key", kind="authentication"
        )
    return sent


BAD_JSON = "There was an error parsing the body of your request: it is not valid JSON."


@dataclass
class AnthropicRequest:
    """A checked Messages request (the parts the server uses)."""

    model: str
    max_tokens: int | None
    messages: list[dict[str, Any]]
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    choice: str = "auto"
    named: str | None = None
    stream: bool = False
    cache_control: dict[str, Any] | None = None

    def offers(self) -> list[ToolOffer]:
        out = []
        for tool in self.tools:
            schema = tool.get("input_schema")
            out.append(ToolOffer(str(tool["name"]), schema if isinstance(schema, Mapping) else {}))
        return out

    def results(self) -> int:
        """How many tool results the conversation holds."""
        return sum(
            1
            for message in self.messages
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        )


# --------------------------------------------------------------------------- checking


def _need(container: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in container:
        raise invalid(f"{where}{key}: Field required")
    value = container[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise invalid(f"{where}{key}: Input should be a valid {python_type_word(kind)}")
    return value


def _optional(container: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if container.get(key) is None:
        return None
    return _need(container, key, kind, where)


def _check_block(block: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise invalid(f"{where}: Input should be a valid dictionary")
    kind = _need(block, "type", str, f"{where}.")
    if kind not in allowed:
        tags = ", ".join(f"'{t}'" for t in allowed)
        raise invalid(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags: {tags}"
        )
    inner = f"{where}.{kind}."
    if kind == "text":
        if not _need(block, "text", str, inner):
            raise invalid("messages: text content blocks must be non-empty")
    elif kind in ("image", "document"):
        _need(block, "source", dict, inner)
    elif kind == "tool_use":
        _need(block, "id", str, inner)
        _need(block, "name", str, inner)
        _need(block, "input", dict, inner)
    elif kind == "tool_result":
        _need(block, "tool_use_id", str, inner)
        content = block.get("content")
        if isinstance(content, list):
            for k, part in enumerate(content):
                _check_block(part, f"{inner}content.{k}", _RESULT_PART_TYPES)
        elif content is not None and not isinstance(content, str):
            raise invalid(f"{inner}content: Input should be a valid string or a list of blocks")
        _optional(block, "is_error", bool, inner)
    elif kind == "thinking":
        _need(block, "thinking", str, inner)
    elif kind == "redacted_thinking":
        _need(block, "data", str, inner)
    cache = block.get("cache_control")
    if cache is not None and not isinstance(cache, dict):
        raise invalid(f"{inner}cache_control: Input should be a valid dictionary")
    return block


def _check_message(message: Any, i: int, last: bool) -> dict[str, Any]:
    where = f"messages.{i}"
    if not isinstance(message, dict):
        raise invalid(f"{where}: Input should be a valid dictionary")
    role = message.get("role")
    if "role" not in message:
        raise invalid(f"{where}.role: Field required")
    if role not in ("user", "assistant"):
        raise invalid(f"{where}.role: Input should be 'user' or 'assistant'")
    if "content" not in message:
        raise invalid(f"{where}.content: Field required")
    content = message["content"]
    if isinstance(content, str):
        empty = not content
    elif isinstance(content, list):
        for j, block in enumerate(content):
            _check_block(block, f"{where}.content.{j}", _BLOCK_TYPES)
        empty = not content
    else:
        raise invalid(f"{where}.content: Input should be a valid string or a list of blocks")
    if empty and not (last and role == "assistant"):
        raise invalid(
            f"{where}: all messages must have non-empty content except for the optional "
            "final assistant message"
        )
    return message


def _ids(message: Mapping[str, Any], kind: str, key: str) -> list[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [str(b[key]) for b in content if b.get("type") == kind]


def _check_pairing(messages: list[dict[str, Any]]) -> None:
    """The pairing rule fitting uses (``formats/_rules.py``), answered in Anthropic's words."""
    rule = PairingRule.for_format(_SPEC)
    for i, message in enumerate(messages):
        content = message["content"]
        blocks = content if isinstance(content, list) else []
        calls = [str(b["id"]) for b in blocks if b.get("type") == "tool_use"]
        results = [str(b["tool_use_id"]) for b in blocks if b.get("type") == "tool_result"]
        problem = rule.check(i, message["role"], calls, results, bool(results))
        if problem is None:
            continue
        if problem.kind == "orphan_result":
            j = next(k for k, b in enumerate(blocks) if b.get("tool_use_id") == problem.call_id)
            raise invalid(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {problem.call_id}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        if problem.kind == "unanswered_call":
            raise invalid(
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {problem.call_id}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        if problem.kind == "bad_opening":
            raise invalid('messages.0.role: the first message must use the "user" role')
        raise invalid(f"messages.{i}: `tool_use` ids must be unique: {problem.call_id}")
    problem = rule.finish()
    if problem is not None:
        raise invalid(
            f"messages.{problem.index + 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {problem.call_id}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )


def _breakpoints(request: AnthropicRequest) -> int:
    count = sum(1 for tool in request.tools if tool.get("cache_control") is not None)
    if isinstance(request.system, list):
        count += sum(1 for block in request.system if block.get("cache_control") is not None)
    for message in request.messages:
        content = message["content"]
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("cache_control") is not None:
                count += 1
            inner = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(inner, list):
                count += sum(1 for part in inner if part.get("cache_control") is not None)
    return count + (1 if request.cache_control is not None else 0)


def parse_request(body: Any, *, count_only: bool = False) -> AnthropicRequest:
    """Check a Messages (or count_tokens) request body; raise the API's 400 when wrong."""
    if not isinstance(body, dict):
        raise invalid("Input should be a valid dictionary")
    model = _need(body, "model", str, "")
    max_tokens = None
    if not count_only:
        max_tokens = _need(body, "max_tokens", int, "")
        if max_tokens < 1:
            raise invalid("max_tokens: Input should be greater than or equal to 1")
    raw_messages = _need(body, "messages", list, "")
    if not raw_messages and not count_only:
        raise invalid("messages: List should have at least 1 item after validation, not 0")
    messages = [
        _check_message(m, i, i == len(raw_messages) - 1) for i, m in enumerate(raw_messages)
    ]
    _check_pairing(messages)

    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise invalid("system: Input should be a valid string or a list of text blocks")
        system = [_check_block(b, f"system.{k}", ("text",)) for k, b in enumerate(system)]

    tools: list[dict[str, Any]] = []
    raw_tools = _optional(body, "tools", list, "")
    for k, tool in enumerate(raw_tools or []):
        where = f"tools.{k}"
        if not isinstance(tool, dict):
            raise invalid(f"{where}: Input should be a valid dictionary")
        _need(tool, "name", str, f"{where}.")
        if tool.get("type") in (None, "custom"):
            _need(tool, "input_schema", dict, f"{where}.")
        tools.append(tool)

    choice, named = "auto", None
    raw_choice = _optional(body, "tool_choice", dict, "")
    if raw_choice is not None:
        kind = _need(raw_choice, "type", str, "tool_choice.")
        if kind not in _CHOICES:
            tags = ", ".join(f"'{c}'" for c in _CHOICES)
            raise invalid(
                f"tool_choice: Input tag '{kind}' found using 'type' does not match any of "
                f"the expected tags: {tags}"
            )
        choice = "any" if kind in ("any", "tool") else kind
        if kind == "tool":
            named = _need(raw_choice, "name", str, "tool_choice.tool.")

    stream = bool(_optional(body, "stream", bool, "")) and not count_only
    cache_control = _optional(body, "cache_control", dict, "")
    request = AnthropicRequest(
        model, max_tokens, messages, system, tools, choice, named, stream, cache_control
    )
    found = _breakpoints(request)
    if found > _MAX_BREAKPOINTS:
        raise invalid(
            f"A maximum of {_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
    return request


# --------------------------------------------------------------------------- counting


def _has_breakpoint(block: Mapping[str, Any]) -> bool:
    if block.get("cache_control") is not None:
        return True
    inner = block.get("content") if block.get("type") == "tool_result" else None
    return isinstance(inner, list) and any(
        isinstance(p, Mapping) and p.get("cache_control") is not None for p in inner
    )


def segments(request: AnthropicRequest, sizer: Sizer) -> list[Segment]:
    """The request in cache order (tools, system, message blocks), sized in real tokens."""
    out: list[Segment] = []
    for tool in request.tools:
        plain = strip_cache_control(tool)
        out.append(
            Segment(canonical(["tool", plain]), sizer.tools([plain]), "cache_control" in tool)
        )
    system = request.system
    if isinstance(system, str):
        block = {"type": "text", "text": system}
        out.append(Segment(canonical(["system", block]), sizer.system(system)))
    elif system:
        for k, block in enumerate(system):
            tokens = sizer.system([block]) - (0 if k == 0 else MESSAGE_OVERHEAD)
            out.append(
                Segment(
                    canonical(["system", block]), tokens, block.get("cache_control") is not None
                )
            )
    for i, raw in enumerate(request.messages):
        message = _SPEC.from_message(raw, i)
        content = raw["content"]
        if not message.blocks:
            out.append(Segment(canonical([raw["role"], content]), MESSAGE_OVERHEAD))
            continue
        # A string is one text block to the API: both forms are the same prefix.
        raws: list[Any] = (
            content if isinstance(content, list) else [{"type": "text", "text": content}]
        )
        for j, (neutral, part) in enumerate(zip(message.blocks, raws, strict=True)):
            tokens = sizer.block(neutral) + (MESSAGE_OVERHEAD if j == 0 else 0)
            mark = isinstance(part, Mapping) and _has_breakpoint(part)
            out.append(Segment(canonical([raw["role"] if j == 0 else "", part]), tokens, mark))
    if request.cache_control is not None and out:
        last = out[-1]
        out[-1] = Segment(last.key, last.tokens, True)
    return out


#: The API's refusal of a prompt too long (the wording is the dialect's).
WINDOW = WindowRule(anthropic_format.overflow_error, anthropic_format.output_overflow_error)


# --------------------------------------------------------------------------- answering


def content_blocks(answer: Answer, message_id: str) -> list[dict[str, Any]]:
    if answer.tool is None:
        return [{"type": "text", "text": answer.text or ""}]
    return [
        {"type": "text", "text": f"I will call {answer.tool}."},
        {
            "type": "tool_use",
            "id": stable_id("toolu_", message_id, answer.tool),
            "name": answer.tool,
            "input": dict(answer.arguments or {}),
        },
    ]


def usage_body(usage: Usage) -> dict[str, Any]:
    """The core's usage in the API's fields (``input_tokens`` is the uncached part)."""
    write = usage.cache_write_tokens
    return {
        "input_tokens": usage.uncached_input_tokens,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0},
        "output_tokens": usage.output_tokens,
        "service_tier": "standard",
    }


def message_body(
    message_id: str,
    model: str,
    content: list[dict[str, Any]],
    stop_reason: str,
    usage: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[k : k + size] for k in range(0, len(text), size)] or [""]


def stream_events(
    message_id: str,
    model: str,
    content: list[dict[str, Any]],
    stop_reason: str,
    usage: dict[str, Any],
    chunk: int,
) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of an answer: message_start, ping, content blocks with their
    deltas, message_delta (stop reason, output tokens) and message_stop."""
    start_usage = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": message_body(message_id, model, [], "", start_usage)
                | {"stop_reason": None},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(content):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            for piece in _pieces(block["text"], chunk):
                delta = {"type": "text_delta", "text": piece}
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    )
                )
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            arguments = json.dumps(block["input"], ensure_ascii=False)
            for piece in _pieces(arguments, chunk):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    )
                )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# --------------------------------------------------------------------------- the door


async def serve(state: Any, call: Call, http: Http) -> Response:
    """Answer a Messages (or count_tokens) request with the simulator's core."""
    core = state.core
    count_only = call.route.endswith(".count_tokens")
    request = parse_request(call.data, count_only=count_only)
    entry = call.entry
    entry.model, entry.max_tokens, entry.stream = request.model, request.max_tokens, request.stream
    sizer = core.sizer(_SPEC.name)
    try:
        pieces = await asyncio.to_thread(segments, request, sizer)
    except ConversationError as exc:
        raise invalid(str(exc)) from None
    tokens = entry.tokens = sum(s.tokens for s in pieces)
    late = late_drop(http, DOOR, call, request.stream)
    if late is not None:
        return late
    headers = http.request_id(DOOR)
    if count_only:
        entry.status = 200
        return http.json({"input_tokens": tokens}, headers=headers)
    refuse_if_too_long(core, WINDOW, tokens, request.max_tokens)
    use = core.cache_use(f"{call.key}\x00{request.model}", pieces, explicit=True)
    answer = core.answer_to(request, tokens, request.model)
    message_id = stable_id("msg_", *(s.key for s in pieces[-3:]), tokens)
    content = content_blocks(answer, message_id)
    output = sizer.size_of(_SPEC.from_message({"role": "assistant", "content": content}, 0))
    out_tokens = output.tokens
    stop = "tool_use" if answer.tool is not None else "end_turn"
    if answer.tool is None:
        text, out_tokens, cut = core.cut(content[0]["text"], out_tokens, request.max_tokens)
        content[0]["text"] = text
        stop = "max_tokens" if cut else stop
    usage = usage_body(core.usage(tokens, use, out_tokens))
    entry.cache_read, entry.cache_write = use.read, use.write
    entry.output_tokens = out_tokens
    entry.status = 200
    if not request.stream:
        body = message_body(message_id, request.model, content, stop, usage)
        return http.json(body, headers=headers)
    events = stream_events(
        message_id, request.model, content, stop, usage, state.config.stream_chunk_chars
    )
    frames = [http.sse(name, payload) for name, payload in events]
    problem = http.stream_fault(DOOR, call)
    fault_frame = http.sse("error", problem.body) if problem is not None else b""
    return http.event_stream(frames, headers, call.fault, fault_frame)


def _recognises(headers: Mapping[str, str]) -> bool:
    return "anthropic-version" in headers or "x-api-key" in headers


DOOR = Door(
    name=_SPEC.name,
    request_id_header="request-id",
    request_id_in_body=True,
    error=error,
    invalid=invalid,
    bad_json=BAD_JSON,
    key=key,
    window=WINDOW,
    serve=serve,
    recognises=_recognises,
)
