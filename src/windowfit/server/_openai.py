"""OpenAI Chat Completions: request checks, counting, answers and stream chunks.

Checks follow the API's own messages (``Missing required parameter: 'messages'.``,
``Invalid type for 'messages[0].content': ...``, the tool-call pairing rules), each with
its ``param`` and ``code``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..formats import get_format
from ..formats._rules import PairingRule, Problem
from ..sizing import Sizer
from ._cache import Segment, canonical
from ._errors import ProviderError, openai_error
from ._script import Answer, ToolOffer, stable_id
from ._validate import json_type

__all__ = [
    "OpenAIRequest",
    "completion_body",
    "context_error",
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


def context_error(
    tokens: int, max_tokens: int | None, window: int, reserve: bool
) -> ProviderError | None:
    """OpenAI's refusal of a request too long for the window, or ``None``."""
    if tokens > window:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
    elif reserve and max_tokens is not None and tokens + max_tokens > window:
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{tokens + max_tokens} tokens ({tokens} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    else:
        return None
    return openai_error(
        400, message, param="messages", code="context_length_exceeded", kind="context_overflow"
    )


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


def usage_body(prompt: int, cached: int, completion: int) -> dict[str, Any]:
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
