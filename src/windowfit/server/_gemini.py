"""Gemini ``generateContent``: the simulator's Gemini door.

``POST /v1beta/models/{model}:generateContent`` answers one JSON response;
``:streamGenerateContent`` answers the same response in chunks, as server-sent events
with ``?alt=sse`` (what ``google-genai`` asks for) and as one streamed JSON array
without it (the REST default). The key comes in ``x-goog-api-key`` or ``?key=``.

The steps are the other doors' (see ``_app``): body size, faults, key, checks in the
API's words (``* GenerateContentRequest.contents: contents is not specified``, the
pairing rule's "function response turn comes immediately after a function call turn"),
counting with the real tokenizer, the window check with Gemini's error body (the input
alone is limited: Gemini's window does not include the answer), the prefix cache read
automatically as OpenAI's is (``cachedContentTokenCount``), and the scripted model, whose
tool calls are ``functionCall`` parts. Errors are ``{"error": {"code", "message",
"status"}}`` with the gRPC status name.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConversationError
from ..formats import gemini as _format
from ..formats._dialect import Usage
from ..formats._facts import describe
from ..formats._rules import PairingRule, Problem
from ..simcore import Answer, Fault, Segment, ToolOffer, WindowRule, canonical, stable_id
from ..sizing import Sizer
from ._door import Call, Door, Http, late_drop, refuse_if_too_long
from ._errors import ProviderError, status_kind

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["DOOR", "WINDOW", "GeminiRequest", "error", "parse_request", "route_for", "serve"]

_SPEC = _format.SPEC

#: The gRPC status Google names beside each HTTP status, and its usual words.
_STATUSES: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "The caller does not have permission."),
    404: ("NOT_FOUND", "Requested entity was not found."),
    413: ("INVALID_ARGUMENT", "Request payload size exceeds the limit."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: ("INTERNAL", "An internal error has occurred. Please retry or report the problem."),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "The request timed out. Please try again."),
}


def error(
    status: int,
    message: str | None = None,
    type_: str | None = None,
    *,
    retry_after: float | None = None,
    kind: str | None = None,
) -> ProviderError:
    """An error in Gemini's shape (``type_`` is the gRPC status name); a 429 says when to
    come back as Google does, in a ``RetryInfo`` detail."""
    default_grpc, default_message = _STATUSES.get(
        status, ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION", f"HTTP {status}.")
    )
    body = _format.error_body(status, message or default_message, type_ or default_grpc)
    if retry_after is None and status == 429:
        retry_after = 1.0
    if retry_after is not None:
        body["error"]["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.RetryInfo",
                "retryDelay": f"{max(0.0, retry_after):g}s",
            }
        ]
    return ProviderError(status, body, kind=kind or status_kind(status))


#: What Google says when the body is not JSON.
BAD_JSON = "Invalid JSON payload received. Unexpected token."


# --------------------------------------------------------------------------- checking


def _invalid(message: str) -> ProviderError:
    return error(400, message)


def _get(body: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field in either spelling (proto JSON accepts both)."""
    return body[camel] if camel in body else body.get(snake)


_TOP_FIELDS = frozenset(
    {
        "contents",
        "tools",
        "toolConfig",
        "tool_config",
        "safetySettings",
        "safety_settings",
        "systemInstruction",
        "system_instruction",
        "generationConfig",
        "generation_config",
        "cachedContent",
        "cached_content",
        "labels",
        "model",
    }
)


@dataclass
class GeminiRequest:
    """A checked ``generateContent`` request (the parts the server uses)."""

    model: str
    contents: list[dict[str, Any]]
    system: Any = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int | None = None
    choice: str = "auto"
    named: str | None = None
    stream: bool = False

    def offers(self) -> list[ToolOffer]:
        out = []
        for tool in self.tools:
            declarations = _get(tool, "functionDeclarations", "function_declarations")
            for declaration in declarations if isinstance(declarations, list) else ():
                if not isinstance(declaration, Mapping):
                    continue
                schema = _get(declaration, "parameters", "parameters_json_schema")
                if schema is None:
                    schema = declaration.get("parametersJsonSchema")
                out.append(
                    ToolOffer(
                        str(declaration.get("name")),
                        _lower_types(schema) if isinstance(schema, Mapping) else {},
                    )
                )
        return out

    def results(self) -> int:
        return sum(
            1
            for content in self.contents
            for part in content.get("parts") or ()
            if isinstance(part, Mapping)
            and ("functionResponse" in part or "function_response" in part)
        )


def _lower_types(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A Gemini schema (``"type": "STRING"``, OpenAPI style) as the JSON Schema the
    scripted model reads (``"type": "string"``)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif isinstance(value, Mapping):
            out[key] = _lower_types(value)
        else:
            out[key] = value
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {
            k: _lower_types(v) if isinstance(v, Mapping) else v
            for k, v in out["properties"].items()
        }
    return out


def _pairing_error(problem: Problem | None) -> None:
    """The pairing rule fitting uses, answered in Gemini's words."""
    if problem is None:
        return
    if problem.kind == "orphan_result":
        raise _invalid(
            "Please ensure that function response turn comes immediately after a function "
            "call turn."
        )
    raise _invalid(
        "Please ensure that the number of function response parts is equal to the number "
        "of function call parts of the function call turn."
    )


def _check_contents(raw: Any, sizer: Sizer) -> list[dict[str, Any]]:
    if raw is None or raw == []:
        raise _invalid("* GenerateContentRequest.contents: contents is not specified")
    if not isinstance(raw, list):
        raise _invalid(
            "Invalid value at 'contents' (type.googleapis.com/google.ai.generativelanguage."
            f"v1beta.Content), {describe(raw)}"
        )
    rule = PairingRule.for_format(_SPEC)
    for i, content in enumerate(raw):
        try:
            facts = _SPEC.scan(content, i, sizer)
        except ConversationError as exc:
            where = f"contents[{i}]" + (f".{exc.field}" if exc.field else "")
            raise _invalid(f"* GenerateContentRequest.{where}: {exc.problem}") from None
        _pairing_error(rule.add(i, facts))
    _pairing_error(rule.finish())
    return list(raw)


def _max_tokens(config: Any) -> int | None:
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise _invalid("Invalid JSON payload received. 'generationConfig' must be an object.")
    value = _get(config, "maxOutputTokens", "max_output_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(
            f"Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32), {value!r}"
        )
    if value < 1:
        raise _invalid("* GenerateContentRequest.generation_config.max_output_tokens: must be > 0")
    return value


def _choice(config: Any) -> tuple[str, str | None]:
    """``(auto|any|none, named)`` from ``toolConfig.functionCallingConfig``."""
    if not isinstance(config, Mapping):
        return "auto", None
    calling = _get(config, "functionCallingConfig", "function_calling_config")
    if not isinstance(calling, Mapping):
        return "auto", None
    mode = str(calling.get("mode") or "AUTO").upper()
    allowed = _get(calling, "allowedFunctionNames", "allowed_function_names")
    named = allowed[0] if isinstance(allowed, list) and len(allowed) == 1 else None
    if mode == "NONE":
        return "none", None
    if mode in ("ANY", "VALIDATED"):
        return "any", named
    return "auto", None


def parse_request(body: Any, model: str, stream: bool, sizer: Sizer) -> GeminiRequest:
    """Check a ``generateContent`` body; raise the API's 400 when wrong."""
    if not isinstance(body, dict):
        raise _invalid("Invalid JSON payload received. Expected an object.")
    for key in body:
        if key not in _TOP_FIELDS:
            raise _invalid(
                f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.'
            )
    tools = _get(body, "tools", "tools")
    if tools is not None and not isinstance(tools, list):
        raise _invalid("Invalid JSON payload received. 'tools' must be a list.")
    system = _get(body, "systemInstruction", "system_instruction")
    try:
        _format.system_parts(system)
    except ConversationError as exc:
        raise _invalid(f"* GenerateContentRequest.system_instruction: {exc.problem}") from None
    choice, named = _choice(_get(body, "toolConfig", "tool_config"))
    return GeminiRequest(
        model=model,
        contents=_check_contents(body.get("contents"), sizer),
        system=system,
        tools=list(tools or []),
        max_tokens=_max_tokens(_get(body, "generationConfig", "generation_config")),
        choice=choice,
        named=named,
        stream=stream,
    )


# --------------------------------------------------------------------------- counting


def segments(request: GeminiRequest, sizer: Sizer) -> list[Segment]:
    """Tool definitions, the system instruction, then one segment per content."""
    out = [Segment(canonical(["tool", tool]), sizer.tools([tool])) for tool in request.tools]
    system = _format.system_parts(request.system)
    if system is not None:
        out.append(Segment(canonical(["system", system]), sizer.system(system)))
    for i, content in enumerate(request.contents):
        out.append(Segment(canonical(content), _SPEC.scan(content, i, sizer).tokens))
    return out


#: Gemini's refusal of a prompt over the model's input limit (the answer is not counted).
WINDOW = WindowRule(_format.overflow_error, counts_output=False)


# --------------------------------------------------------------------------- answering


def model_content(answer: Answer) -> dict[str, Any]:
    if answer.tool is not None:
        call = {"name": answer.tool, "args": dict(answer.arguments or {})}
        return {"role": "model", "parts": [{"functionCall": call}]}
    return {"role": "model", "parts": [{"text": answer.text or ""}]}


def usage_metadata(usage: Usage) -> dict[str, Any]:
    """The core's usage in Gemini's fields (the cache is read automatically)."""
    prompt, cached, output = usage.input_tokens, usage.cache_read_tokens, usage.output_tokens
    metadata: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        metadata["cachedContentTokenCount"] = cached
        metadata["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    return metadata


def response_body(
    content: dict[str, Any],
    finish: str | None,
    model: str,
    response_id: str,
    metadata: dict[str, Any] | None,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": content, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate]}
    if metadata is not None:
        body["usageMetadata"] = metadata
    body["modelVersion"] = model
    body["responseId"] = response_id
    return body


def stream_chunks(
    content: dict[str, Any],
    finish: str,
    model: str,
    response_id: str,
    metadata: dict[str, Any],
    chunk: int,
) -> list[dict[str, Any]]:
    """The streamed responses of an answer: the text in pieces (a function call whole),
    the last piece with the finish reason and the usage."""
    part = content["parts"][0]
    pieces: list[dict[str, Any]]
    if "text" in part:
        text = part["text"]
        pieces = [{"text": text[k : k + chunk]} for k in range(0, len(text), chunk)] or [
            {"text": ""}
        ]
    else:
        pieces = [part]
    out = []
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        out.append(
            response_body(
                {"role": "model", "parts": [piece]},
                finish if last else None,
                model,
                response_id,
                metadata if last else None,
            )
        )
    return out


# --------------------------------------------------------------------------- the door


def key(request: Request, keys: tuple[str, ...]) -> str:
    """The caller's key; Google's refusals when keys are configured and it is missing
    (403) or unknown (400, ``API_KEY_INVALID``)."""
    key = request.headers.get("x-goog-api-key") or request.query_params.get("key") or ""
    if not keys:
        return key
    if not key:
        raise error(
            403,
            "Method doesn't allow unregistered callers (callers without established identity)."
            " Please use API Key or other form of API consumer identity to call this API.",
            kind="authentication",
        )
    if key not in keys:
        problem = error(
            400, "API key not valid. Please pass a valid API key.", kind="authentication"
        )
        problem.body["error"]["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
            }
        ]
        raise problem
    return key


#: The methods served, by their name in the URL (``models/{model}:{method}``), and the
#: route each is counted (and its faults queued) under.
METHODS = {"generateContent": "gemini.generate", "streamGenerateContent": "gemini.stream"}
_STREAMED = "gemini.stream"


def route_for(target: str) -> str | None:
    """The route of a request to ``models/{target}`` (``{model}:{method}``), or ``None``
    for a method that is not served."""
    model, _, method = target.rpartition(":")
    return METHODS.get(method) if model else None


def unknown_method(target: str) -> ProviderError:
    """Google's 404 for a model path whose method is not served."""
    return error(
        404,
        f"models/{target} is not found for API version v1beta, or is not "
        "supported for this method. Call ListModels to see the list of "
        "available models and their supported methods.",
    )


async def serve(state: Any, call: Call, http: Http) -> Response:
    """Answer one ``generateContent`` (or streamed) request with the simulator's core."""
    core = state.core
    model = call.request.path_params["target"].rpartition(":")[0]
    stream = call.route == _STREAMED
    entry, fault = call.entry, call.fault
    sizer = core.sizer(_SPEC.name)
    parsed = await asyncio.to_thread(parse_request, call.data, model, stream, sizer)
    entry.model, entry.max_tokens, entry.stream = model, parsed.max_tokens, stream
    pieces = await asyncio.to_thread(segments, parsed, sizer)
    tokens = entry.tokens = sum(s.tokens for s in pieces)
    late = late_drop(http, DOOR, call, stream)
    if late is not None:
        return late
    refuse_if_too_long(core, WINDOW, tokens, parsed.max_tokens)
    use = core.cache_use(f"{call.key}\x00{model}", pieces, explicit=False)
    answer = core.answer_to(parsed, tokens, model)
    response_id = stable_id("", *(s.key for s in pieces[-3:]), tokens, length=22)
    content = model_content(answer)
    out_tokens = _SPEC.scan(content, 0, sizer).tokens
    finish = "STOP"
    if answer.tool is None:
        part = content["parts"][0]
        part["text"], out_tokens, cut = core.cut(part["text"], out_tokens, parsed.max_tokens)
        finish = "MAX_TOKENS" if cut else finish
    metadata = usage_metadata(core.usage(tokens, use, out_tokens))
    entry.cache_read = use.read
    entry.output_tokens = out_tokens
    entry.status = 200
    headers = http.request_id(DOOR)
    if not stream:
        return http.json(response_body(content, finish, model, response_id, metadata), 200, headers)
    chunks = stream_chunks(
        content, finish, model, response_id, metadata, state.config.stream_chunk_chars
    )
    problem = http.stream_fault(DOOR, call)
    if call.request.query_params.get("alt") == "sse":
        frames = [http.sse(None, c) for c in chunks]
        fault_frame = http.sse(None, problem.body) if problem is not None else b""
        return http.event_stream(frames, headers, fault, fault_frame)
    return http.streaming(
        _array(chunks, fault, problem), headers=headers, media_type="application/json"
    )


def _array(
    chunks: list[dict[str, Any]], fault: Fault | None, problem: ProviderError | None
) -> Iterator[bytes]:
    """The streamed JSON array (``[{...},\\r\\n{...}]``); a fault after some chunks ends it
    there (with the error as the next element, or cut short for a drop)."""
    sep = b"["
    for k in range(len(chunks) + 1):
        if fault is not None and fault.after_events == k:
            if problem is not None:
                yield sep + _body_bytes(problem.body) + b"]"
            return  # a drop: the array is never closed
        if k < len(chunks):
            yield sep + _body_bytes(chunks[k])
            sep = b",\r\n"
    yield b"]"


def _body_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("ascii")


DOOR = Door(
    name=_SPEC.name,
    request_id_header="x-request-id",
    error=error,
    invalid=_invalid,
    bad_json=BAD_JSON,
    key=key,
    window=WINDOW,
    serve=serve,
)
