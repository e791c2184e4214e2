"""OpenAI Chat Completions: request checks, counting, answers and stream chunks.

Checks follow the API's own messages (``Missing required parameter: 'messages'.``,
``Invalid type for 'messages[0].content': ...``, the tool-call pairing rules), each with
its ``param`` and ``code``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConversationError
from ..formats import get_format, openai_chat
from ..formats._dialect import Usage
from ..formats._rules import PairingRule, Problem
from ..simcore import Answer, Segment, ToolOffer, WindowRule, canonical, stable_id
from ..sizing import Sizer
from ._door import Call, Door, Http, bearer, late_drop, mask, refuse_if_too_long
from ._errors import ProviderError, retry_headers, status_kind
from ._validate import json_type

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = [
    "BAD_JSON",
    "DOOR",
    "WINDOW",
    "OpenAIRequest",
    "completion_body",
    "error",
    "key",
    "openai_error",
    "parse_request",
    "segments",
    "stream_chunks",
]

_SPEC = get_format("openai")
_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
_PART_TYPES = ("text", "image_url", "input_audio", "refusal", "audio", "file")

#: What OpenAI says when the body is not JSON.
BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON. If you have trouble figuring out how to fix this, please "
    "contact us through our help center at help.openai.com.)"
)


def openai_error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    *,
    kind: str = "invalid_request",
) -> ProviderError:
    """An error in OpenAI's shape (Chat Completions and Responses share it)."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return ProviderError(status, body, headers, kind=kind)


def invalid(message: str) -> ProviderError:
    return openai_error(400, message)


#: The API's error type, usual words and code, status by status.
_STATUSES: dict[int, tuple[str, str, str | None]] = {
    400: (
        "invalid_request_error",
        "Injected invalid request (windowfit serve-sim fault).",
        None,
    ),
    401: (
        "invalid_request_error",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_api_key",
    ),
    403: (
        "invalid_request_error",
        "You are not allowed to sample from this model",
        "unsupported_country_region_territory",
    ),
    404: (
        "invalid_request_error",
        "The model does not exist or you do not have access to it.",
        "model_not_found",
    ),
    413: ("invalid_request_error", "Request too large.", "request_too_large"),
    429: (
        "requests",
        "Rate limit reached for requests. Please try again in a moment. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        "rate_limit_exceeded",
    ),
    500: (
        "server_error",
        "The server had an error while processing your request. Sorry about that!",
        None,
    ),
    503: (
        "server_error",
        "The engine is currently overloaded, please try again later.",
        None,
    ),
}


def error(
    status: int,
    message: str | None = None,
    type_: str | None = None,
    *,
    retry_after: float | None = None,
    kind: str | None = None,
) -> ProviderError:
    """The error OpenAI answers with for ``status`` (a fault, or a plain refusal)."""
    otype, omessage, code = _STATUSES.get(
        status,
        ("server_error", _STATUSES[500][1], None)
        if status >= 500
        else ("invalid_request_error", f"Request failed with status {status}.", None),
    )
    return openai_error(
        status,
        message or omessage,
        type_ or otype,
        None,
        code,
        retry_headers(retry_after, status),
        kind=kind or status_kind(status),
    )


def key(request: Request, keys: tuple[str, ...]) -> str:
    """The caller's key (``Authorization: Bearer``; ``""`` when none was sent); OpenAI's
    401 when keys are configured and it is missing or unknown."""
    sent = bearer(request.headers.get("authorization"))
    if not keys:
        return sent or ""
    if not sent:
        raise openai_error(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an "
            "API key from https://platform.openai.com/account/api-keys.",
            kind="authentication",
        )
    if sent not in keys:
        raise openai_error(
            401,
            f"Incorrect API key provided: {mask(sent)}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
            kind="authentication",
        )
    return sent


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


def _bad_value(param: str, value: Any, supported: tuple[str, ...]) -> ProviderError:
    listed = ", ".join(f"'{s}'" for s in supported[:-1]) + f", and '{supported[-1]}'"
    return openai_error(
        400,
        f"Invalid value: '{value}'. Supported values are: {listed}.",
        param=param,
        code="invalid_value",
    )


@dataclass
class OpenAIRequest:
    """A checked Chat Completions request (the parts the server uses)."""

    model: str
    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    choice: str = "auto"
    named: str | None = None
    stream: bool = False
    include_usage: bool = False
    cache_key: str | None = None

    def offers(self) -> list[ToolOffer]:
        out = []
        for tool in self.tools:
            function = tool.get("function")
            if not isinstance(function, Mapping):
                continue
            schema = function.get("parameters")
            out.append(
                ToolOffer(str(function["name"]), schema if isinstance(schema, Mapping) else {})
            )
        return out

    def results(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "tool")


# --------------------------------------------------------------------------- checking


def _string(container: Mapping[str, Any], key: str, param: str, *, required: bool) -> Any:
    if key not in container or container[key] is None:
        if required:
            raise _missing(param)
        return None
    value = container[key]
    if not isinstance(value, str):
        raise _wrong_type(param, "a string", value)
    return value


def _check_content(message: Mapping[str, Any], where: str, *, required: bool) -> None:
    if "content" not in message or message["content"] is None:
        if required:
            raise _missing(f"{where}.content")
        return
    content = message["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _wrong_type(f"{where}.content", "one of a string or array of objects", content)
    for k, part in enumerate(content):
        param = f"{where}.content[{k}]"
        if not isinstance(part, dict):
            raise _wrong_type(param, "an object", part)
        kind = _string(part, "type", f"{param}.type", required=True)
        if kind not in _PART_TYPES:
            raise _bad_value(f"{param}.type", kind, _PART_TYPES)
        if kind == "text":
            _string(part, "text", f"{param}.text", required=True)
        elif kind == "image_url":
            url = part.get("image_url")
            if not isinstance(url, dict):
                raise _wrong_type(f"{param}.image_url", "an object", url)
            _string(url, "url", f"{param}.image_url.url", required=True)


def _check_tool_calls(message: Mapping[str, Any], where: str) -> list[str]:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise _wrong_type(f"{where}.tool_calls", "an array", calls)
    ids = []
    for k, call in enumerate(calls):
        param = f"{where}.tool_calls[{k}]"
        if not isinstance(call, dict):
            raise _wrong_type(param, "an object", call)
        ids.append(_string(call, "id", f"{param}.id", required=True))
        function = call.get("function")
        if function is None:
            raise _missing(f"{param}.function")
        if not isinstance(function, dict):
            raise _wrong_type(f"{param}.function", "an object", function)
        _string(function, "name", f"{param}.function.name", required=True)
        _string(function, "arguments", f"{param}.function.arguments", required=True)
    return ids


def _check_messages(raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        raise _missing("messages")
    if not isinstance(raw, list):
        raise _wrong_type("messages", "an array", raw)
    if not raw:
        raise openai_error(
            400,
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            param="messages",
            code="empty_array",
        )
    messages: list[dict[str, Any]] = []
    rule = PairingRule.for_format(_SPEC)
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _wrong_type(where, "an object", message)
        role = _string(message, "role", f"{where}.role", required=True)
        if role not in _ROLES:
            raise _bad_value(f"{where}.role", role, _ROLES)
        calls: list[str] = []
        results: list[str] = []
        if role == "tool":
            results = [_string(message, "tool_call_id", f"{where}.tool_call_id", required=True)]
            _check_content(message, where, required=True)
        elif role == "assistant":
            calls = _check_tool_calls(message, where)
            _check_content(message, where, required=not calls and "function_call" not in message)
        else:
            _check_content(message, where, required=True)
        _pairing_error(rule.check(i, role, calls, results, role == "tool"))
        messages.append(message)
    _pairing_error(rule.finish())
    return messages


def _pairing_error(problem: Problem | None) -> None:
    """The pairing rule fitting uses (``formats/_rules.py``), answered in OpenAI's words."""
    if problem is None:
        return
    if problem.kind == "orphan_result":
        raise openai_error(
            400,
            "Invalid parameter: messages with role 'tool' must be a response to a "
            "preceeding message with 'tool_calls'.",
            param=f"messages.[{problem.index}].role",
        )
    if problem.kind == "unanswered_call":
        raise openai_error(
            400,
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {problem.call_id}",
            param=f"messages.[{problem.index}].role",
        )
    raise openai_error(
        400,
        f"Invalid 'messages[{problem.index}].tool_calls': duplicate tool call id "
        f"{problem.call_id!r}.",
        param=f"messages.[{problem.index}].tool_calls",
    )


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    found = None
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong_type(key, "an integer", value)
        if value < 1:
            raise openai_error(
                400,
                f"Invalid '{key}': integer below minimum value. Expected a value >= 1, but got "
                f"{value} instead.",
                param=key,
                code="integer_below_min_value",
            )
        found = value if found is None else found
    return found


def _check_tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("tools")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _wrong_type("tools", "an array", raw)
    for k, tool in enumerate(raw):
        param = f"tools[{k}]"
        if not isinstance(tool, dict):
            raise _wrong_type(param, "an object", tool)
        if tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        if function is None:
            raise _missing(f"{param}.function")
        if not isinstance(function, dict):
            raise _wrong_type(f"{param}.function", "an object", function)
        _string(function, "name", f"{param}.function.name", required=True)
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise _wrong_type(f"{param}.function.parameters", "an object", parameters)
    return list(raw)


def _check_choice(value: Any) -> tuple[str, str | None]:
    if value is None:
        return "auto", None
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            raise _bad_value("tool_choice", value, ("none", "auto", "required"))
        return ("any" if value == "required" else value), None
    if not isinstance(value, dict):
        raise _wrong_type("tool_choice", "one of a string or object", value)
    function = value.get("function")
    if not isinstance(function, dict):
        raise _missing("tool_choice.function")
    return "any", _string(function, "name", "tool_choice.function.name", required=True)


def parse_request(body: Any) -> OpenAIRequest:
    """Check a Chat Completions request body; raise the API's 400 when wrong."""
    if not isinstance(body, dict):
        raise openai_error(400, BAD_JSON)
    if body.get("model") is None:
        raise openai_error(400, "you must provide a model parameter")
    model = _string(body, "model", "model", required=True)
    messages = _check_messages(body.get("messages"))
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _wrong_type("stream", "a boolean", stream)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _wrong_type("stream_options", "an object", options)
    include = bool(options and options.get("include_usage") is True)
    choice, named = _check_choice(body.get("tool_choice"))
    cache_key = _string(body, "prompt_cache_key", "prompt_cache_key", required=False)
    return OpenAIRequest(
        model=model,
        messages=messages,
        max_tokens=_max_tokens(body),
        tools=_check_tools(body),
        choice=choice,
        named=named,
        stream=bool(stream),
        include_usage=include,
        cache_key=cache_key,
    )


# --------------------------------------------------------------------------- counting


def segments(request: OpenAIRequest, sizer: Sizer) -> list[Segment]:
    """Tool definitions, then one segment per message, sized in real tokens."""
    out = [Segment(canonical(["tool", tool]), sizer.tools([tool])) for tool in request.tools]
    for i, raw in enumerate(request.messages):
        message = _SPEC.from_message(raw, i)
        out.append(Segment(canonical(raw), sizer.size_of(message).tokens))
    return out


#: OpenAI's refusal of messages too long (the wording is the dialect's).
WINDOW = WindowRule(openai_chat.overflow_error, openai_chat.output_overflow_error)


# --------------------------------------------------------------------------- answering


def assistant_message(answer: Answer, completion_id: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.tool is not None:
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": stable_id("call_", completion_id, answer.tool),
                "type": "function",
                "function": {
                    "name": answer.tool,
                    "arguments": json.dumps(dict(answer.arguments or {}), ensure_ascii=False),
                },
            }
        ]
    message["refusal"] = None
    message["annotations"] = []
    return message


def usage_body(usage: Usage) -> dict[str, Any]:
    """The core's usage in the API's fields (the cache is read automatically)."""
    prompt, cached, completion = usage.input_tokens, usage.cache_read_tokens, usage.output_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _base(completion_id: str, model: str, created: int, kind: str) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": kind,
        "created": created,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": "fp_windowfit_sim",
    }


def completion_body(
    completion_id: str,
    model: str,
    created: int,
    message: dict[str, Any],
    finish_reason: str,
    usage: dict[str, Any],
) -> dict[str, Any]:
    return _base(completion_id, model, created, "chat.completion") | {
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": usage,
    }


def stream_chunks(
    completion_id: str,
    model: str,
    created: int,
    message: dict[str, Any],
    finish_reason: str,
    usage: dict[str, Any],
    *,
    include_usage: bool,
    chunk: int,
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of an answer (``[DONE]`` is added by the
    caller): the role, content or tool-call pieces, the finish reason and, when asked for
    with ``stream_options.include_usage``, a last chunk with the usage."""
    base = _base(completion_id, model, created, "chat.completion.chunk")
    extra: dict[str, Any] = {"usage": None} if include_usage else {}

    def chunk_with(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return base | {"choices": [choice]} | extra

    chunks = [chunk_with({"role": "assistant", "content": "", "refusal": None})]
    text = message.get("content")
    if isinstance(text, str):
        for k in range(0, len(text), chunk):
            chunks.append(chunk_with({"content": text[k : k + chunk]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        chunks.append(chunk_with({"tool_calls": [head]}))
        arguments = call["function"]["arguments"]
        for k in range(0, len(arguments), chunk):
            piece = {"index": index, "function": {"arguments": arguments[k : k + chunk]}}
            chunks.append(chunk_with({"tool_calls": [piece]}))
    chunks.append(chunk_with({}, finish_reason))
    if include_usage:
        chunks.append(base | {"choices": [], "usage": usage})
    return chunks


# --------------------------------------------------------------------------- the door


async def serve(state: Any, call: Call, http: Http) -> Response:
    """Answer a Chat Completions request with the simulator's core."""
    core = state.core
    request = parse_request(call.data)
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
    refuse_if_too_long(core, WINDOW, tokens, request.max_tokens)
    namespace = f"{call.key}\x00{request.model}\x00{request.cache_key or ''}"
    use = core.cache_use(namespace, pieces, explicit=False)
    answer = core.answer_to(request, tokens, request.model)
    completion_id = stable_id("chatcmpl-", *(s.key for s in pieces[-3:]), tokens)
    message = assistant_message(answer, completion_id)
    out_tokens = sizer.size_of(_SPEC.from_message(message, 0)).tokens
    finish = "tool_calls" if answer.tool is not None else "stop"
    if answer.tool is None:
        text, out_tokens, cut = core.cut(str(message["content"]), out_tokens, request.max_tokens)
        message["content"] = text
        finish = "length" if cut else finish
    usage = usage_body(core.usage(tokens, use, out_tokens))
    entry.cache_read = use.read
    entry.output_tokens = out_tokens
    entry.status = 200
    headers = http.request_id(DOOR)
    created = int(time.time())
    if not request.stream:
        body = completion_body(completion_id, request.model, created, message, finish, usage)
        return http.json(body, headers=headers)
    chunks = stream_chunks(
        completion_id,
        request.model,
        created,
        message,
        finish,
        usage,
        include_usage=request.include_usage,
        chunk=state.config.stream_chunk_chars,
    )
    frames = [http.sse(None, c) for c in chunks] + [http.sse(None, "[DONE]")]
    problem = http.stream_fault(DOOR, call)
    fault_frame = http.sse(None, problem.body) if problem is not None else b""
    return http.event_stream(frames, headers, call.fault, fault_frame)


DOOR = Door(
    name=_SPEC.name,
    request_id_header="x-request-id",
    error=error,
    invalid=invalid,
    bad_json=BAD_JSON,
    key=key,
    window=WINDOW,
    serve=serve,
)
