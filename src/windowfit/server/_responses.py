"""OpenAI Responses (``POST /v1/responses``): request checks, counting, answers, events.

The items are checked and sized by the Responses format (``formats/openai_responses``),
paired by its rule (a ``function_call_output`` needs its ``function_call`` earlier, every
call needs its output), and answered in the API's words. The scripted model answers with
one output item: a ``message`` with an ``output_text`` part, or a ``function_call``.
Streamed answers follow the API's event sequence (``response.created``,
``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta``... or ``response.function_call_arguments.delta``...,
``response.output_item.done``, ``response.completed``), each event with its
``sequence_number``. The simulator keeps no responses, so a ``previous_response_id`` is
answered as the API answers an unknown one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConversationError
from ..formats import openai_responses as fmt
from ..formats._dialect import Usage
from ..formats._rules import PairingRule, Problem
from ..simcore import Answer, Segment, ToolOffer, WindowRule, canonical, stable_id
from ..sizing import Sizer
from . import _openai
from ._door import Call, Door, Http, late_drop, refuse_if_too_long
from ._errors import ProviderError
from ._openai import openai_error
from ._validate import json_type

if TYPE_CHECKING:
    from starlette.responses import Response

__all__ = [
    "DOOR",
    "WINDOW",
    "ResponsesRequest",
    "parse_request",
    "response_body",
    "segments",
    "stream_events",
]

_SPEC = fmt.SPEC
#: The API's lowest ``max_output_tokens``.
MIN_OUTPUT_TOKENS = 16


def _missing(param: str) -> ProviderError:
    return openai_error(
        400,
        f"Missing required parameter: '{param}'.",
        param=param,
        code="missing_required_parameter",
    )


def _wrong_type(param: str, expected: str, value: Any) -> ProviderError:
    return openai_error(
        400,
        f"Invalid type for '{param}': expected {expected}, but got {json_type(value)} instead.",
        param=param,
        code="invalid_type",
    )


@dataclass
class ResponsesRequest:
    """A checked Responses request (the parts the server uses)."""

    model: str
    items: list[Any]
    instructions: str | None = None
    max_tokens: int | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    choice: str = "auto"
    named: str | None = None
    stream: bool = False
    cache_key: str | None = None
    body: dict[str, Any] = field(default_factory=dict)

    def offers(self) -> list[ToolOffer]:
        """The function tools offered (Responses tools are flat: name and parameters)."""
        out = []
        for tool in self.tools:
            if tool.get("type") != "function" or not isinstance(tool.get("name"), str):
                continue
            schema = tool.get("parameters")
            out.append(ToolOffer(tool["name"], schema if isinstance(schema, Mapping) else {}))
        return out

    def results(self) -> int:
        return sum(
            1
            for item in self.items
            if isinstance(item, Mapping) and item.get("type") in fmt.OUTPUT_TYPES
        )


def _string(body: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            raise _missing(key)
        return None
    if not isinstance(value, str):
        raise _wrong_type(key, "a string", value)
    return value


def _choice(value: Any) -> tuple[str, str | None]:
    if value is None:
        return "auto", None
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            raise openai_error(
                400,
                f"Invalid value: '{value}'. Supported values are: 'none', 'auto', and 'required'.",
                param="tool_choice",
                code="invalid_value",
            )
        return ("any" if value == "required" else value), None
    if not isinstance(value, dict):
        raise _wrong_type("tool_choice", "one of a string or object", value)
    name = value.get("name")
    return "any", name if isinstance(name, str) else None


def parse_request(body: Any) -> ResponsesRequest:
    """Check a Responses request body's top level; raise the API's 400 when wrong (the
    items are checked while they are counted, see :func:`segments`)."""
    if not isinstance(body, dict):
        raise _wrong_type("body", "an object", body)
    model = _string(body, "model", required=True)
    assert model is not None
    previous = _string(body, "previous_response_id", required=False)
    if previous is not None:
        raise openai_error(
            400,
            f"Previous response with id '{previous}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    raw = body.get("input")
    if raw is None:
        raise _missing("input")
    if not isinstance(raw, (str, list)):
        raise _wrong_type("input", "one of a string or array of input items", raw)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _wrong_type("tools", "an array", tools)
        for k, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise _wrong_type(f"tools[{k}]", "an object", tool)
            if tool.get("type") == "function" and not isinstance(tool.get("name"), str):
                raise _missing(f"tools[{k}].name")
    limit = body.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise _wrong_type("max_output_tokens", "an integer", limit)
        if limit < MIN_OUTPUT_TOKENS:
            raise openai_error(
                400,
                "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
                f"{MIN_OUTPUT_TOKENS}, but got {limit} instead.",
                param="max_output_tokens",
                code="integer_below_min_value",
            )
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _wrong_type("stream", "a boolean", stream)
    try:
        parts = fmt.read_request(body)
    except ConversationError as exc:
        raise openai_error(400, str(exc), param=exc.field) from None
    choice, named = _choice(body.get("tool_choice"))
    return ResponsesRequest(
        model=model,
        items=parts.messages,
        instructions=parts.system,
        max_tokens=limit,
        tools=list(tools or []),
        choice=choice,
        named=named,
        stream=bool(stream),
        cache_key=_string(body, "prompt_cache_key", required=False),
        body=body,
    )


# --------------------------------------------------------------------------- counting


def _pairing_error(problem: Problem | None) -> None:
    """The pairing rule fitting uses, answered in the API's words."""
    if problem is None:
        return
    param = f"input[{problem.index}]"
    if problem.kind == "orphan_result":
        message = f"No tool call found for function call output with call_id {problem.call_id}."
    elif problem.kind == "unanswered_call":
        message = f"No tool output found for function call {problem.call_id}."
    elif problem.kind == "duplicate_call":
        message = f"Duplicate item found with call_id {problem.call_id}."
    else:
        message = problem.text
    raise openai_error(400, message, param=param)


def segments(request: ResponsesRequest, sizer: Sizer) -> list[Segment]:
    """Tool definitions, the instructions, then one segment per input item, sized in real
    tokens; the items checked (format and pairing) on the way. A ConversationError is the
    caller's 400."""
    out = [Segment(canonical(["tool", tool]), sizer.tools([tool])) for tool in request.tools]
    if request.instructions is not None:
        out.append(
            Segment(
                canonical(["instructions", request.instructions]),
                sizer.system(request.instructions),
            )
        )
    rule = PairingRule(_SPEC.system_roles, _SPEC.opening_roles, _SPEC.item_rounds)
    for i, raw in enumerate(request.items):
        facts = _SPEC.scan(raw, i, sizer)
        _pairing_error(rule.add(i, facts))
        out.append(Segment(canonical(raw), facts.tokens))
    _pairing_error(rule.finish())
    return out


#: The API's refusal of an input too long, with or without the output (its wording
#: names neither number).
WINDOW = WindowRule(fmt.overflow_error)


# --------------------------------------------------------------------------- answering


def output_items(answer: Answer, response_id: str) -> list[dict[str, Any]]:
    """The response's output: one ``message`` or one ``function_call`` item."""
    if answer.tool is not None:
        arguments = json.dumps(dict(answer.arguments or {}), ensure_ascii=False)
        return [
            {
                "id": stable_id("fc_", response_id, answer.tool),
                "type": "function_call",
                "status": "completed",
                "arguments": arguments,
                "call_id": stable_id("call_", response_id, answer.tool),
                "name": answer.tool,
            }
        ]
    return [
        {
            "id": stable_id("msg_", response_id),
            "type": "message",
            "status": "completed",
            "content": [
                {"type": "output_text", "annotations": [], "logprobs": [], "text": answer.text}
            ],
            "role": "assistant",
        }
    ]


def usage_body(usage: Usage) -> dict[str, Any]:
    """The core's usage in the API's fields."""
    tokens, output = usage.input_tokens, usage.output_tokens
    cached, written = usage.cache_read_tokens, usage.cache_write_tokens
    return {
        "input_tokens": tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens + output,
    }


def response_body(
    request: ResponsesRequest,
    response_id: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    *,
    status: str = "completed",
    incomplete: str | None = None,
) -> dict[str, Any]:
    """The ``response`` object (also what ``response.created`` and ``.completed`` carry)."""
    body = request.body
    tool_choice = body.get("tool_choice", "auto")
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": request.instructions,
        "max_output_tokens": request.max_tokens,
        "model": request.model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "previous_response_id": None,
        "prompt_cache_key": request.cache_key,
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True) is not False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": tool_choice,
        "tools": request.tools,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": body.get("metadata") or {},
    }


def stream_events(
    request: ResponsesRequest,
    response_id: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any],
    *,
    status: str,
    incomplete: str | None,
    chunk: int,
) -> list[dict[str, Any]]:
    """The events of a streamed answer, numbered by ``sequence_number`` from 0."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    start = response_body(request, response_id, [], None, status="in_progress")
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    for index, item in enumerate(output):
        if item["type"] == "function_call":
            added = {**item, "status": "in_progress", "arguments": ""}
            emit("response.output_item.added", output_index=index, item=added)
            arguments = item["arguments"]
            for k in range(0, len(arguments), chunk):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=arguments[k : k + chunk],
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=arguments,
                name=item["name"],
            )
        else:
            added = {**item, "status": "in_progress", "content": []}
            emit("response.output_item.added", output_index=index, item=added)
            for part_index, part in enumerate(item["content"]):
                where = {"item_id": item["id"], "output_index": index, "content_index": part_index}
                emit("response.content_part.added", **where, part={**part, "text": ""})
                text = part["text"]
                for k in range(0, len(text), chunk):
                    emit(
                        "response.output_text.delta",
                        **where,
                        delta=text[k : k + chunk],
                        logprobs=[],
                    )
                emit("response.output_text.done", **where, text=text, logprobs=[])
                emit("response.content_part.done", **where, part=part)
        emit("response.output_item.done", output_index=index, item=item)
    final = response_body(request, response_id, output, usage, status=status, incomplete=incomplete)
    emit("response.incomplete" if status == "incomplete" else "response.completed", response=final)
    return events


def error_event(body: Mapping[str, Any], sequence_number: int) -> dict[str, Any]:
    """A mid-stream ``error`` event for an error body: the SDK's fields (code, message,
    param) and the nested ``error`` object the API sends beside them."""
    error = dict(body.get("error") or {})
    return {
        "type": "error",
        "sequence_number": sequence_number,
        "code": error.get("code") or error.get("type"),
        "message": error.get("message"),
        "param": error.get("param"),
        "error": error,
    }


# --------------------------------------------------------------------------- the door


async def serve(state: Any, call: Call, http: Http) -> Response:
    """Answer a Responses request with the simulator's core (the steps are Chat's)."""
    core = state.core
    request = parse_request(call.data)
    entry = call.entry
    entry.model, entry.max_tokens, entry.stream = request.model, request.max_tokens, request.stream
    sizer = core.sizer(_SPEC.name)
    try:
        pieces = await asyncio.to_thread(segments, request, sizer)
    except ConversationError as exc:
        raise openai_error(400, str(exc), param="input") from None
    tokens = entry.tokens = sum(s.tokens for s in pieces)
    late = late_drop(http, DOOR, call, request.stream)
    if late is not None:
        return late
    refuse_if_too_long(core, WINDOW, tokens, request.max_tokens)
    namespace = f"{call.key}\x00{request.model}\x00{request.cache_key or ''}"
    use = core.cache_use(namespace, pieces, explicit=False)
    answer = core.answer_to(request, tokens, request.model)
    response_id = stable_id("resp_", *(s.key for s in pieces[-3:]), tokens)
    output = output_items(answer, response_id)
    out_tokens = sum(_SPEC.scan(item, 0, sizer).tokens for item in output)
    status, incomplete = "completed", None
    if answer.tool is None:
        part = output[0]["content"][0]
        part["text"], out_tokens, cut = core.cut(part["text"], out_tokens, request.max_tokens)
        if cut:
            status, incomplete = "incomplete", "max_output_tokens"
            output[0]["status"] = "incomplete"
    usage = usage_body(core.usage(tokens, use, out_tokens))
    entry.cache_read, entry.output_tokens, entry.status = use.read, out_tokens, 200
    headers = http.request_id(DOOR)
    if not request.stream:
        body = response_body(
            request, response_id, output, usage, status=status, incomplete=incomplete
        )
        return http.json(body, headers=headers)
    events = stream_events(
        request,
        response_id,
        output,
        usage,
        status=status,
        incomplete=incomplete,
        chunk=state.config.stream_chunk_chars,
    )
    frames = [http.sse(e["type"], e) for e in events]
    problem = http.stream_fault(DOOR, call)
    fault_frame = b""
    if problem is not None and call.fault is not None:
        event = error_event(problem.body, call.fault.after_events or 0)
        fault_frame = http.sse("error", event)
    return http.event_stream(frames, headers, call.fault, fault_frame)


DOOR = Door(
    name=_SPEC.name,
    request_id_header="x-request-id",
    error=_openai.error,
    invalid=_openai.invalid,
    bad_json=_openai.BAD_JSON,
    key=_openai.key,
    window=WINDOW,
    serve=serve,
)
