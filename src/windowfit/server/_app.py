"""The ASGI application (Starlette): routes, the order of checks, responses.

Every provider request goes through the same steps, so that what a client sees is
predictable:

1. the body is read up to ``max_body_bytes`` (else 413 in the provider's shape);
2. the next waiting fault for the route is taken: its delay is waited, and an error or a
   drop that does not wait for stream events is served now;
3. the API key is checked when keys are configured (401);
4. the body is parsed and checked (400 in the provider's wording);
5. the request is counted with the real tokenizer; a fault meant for the middle of a
   stream is served now when the request is not streamed;
6. a request that does not fit the window is refused (400, "prompt is too long" /
   ``context_length_exceeded``);
7. the prefix cache is consulted and the scripted model answers, as JSON or as SSE (with
   the fault, if any, after its ``after_events`` events).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..errors import ConversationError
from ..formats import get_format
from ..sizing import Sizer
from ..tokens import Estimator
from . import _anthropic, _gemini, _openai, _responses
from ._cache import MemoEstimator, PrefixCache, Segment
from ._config import SimConfig
from ._errors import Provider, ProviderError, anthropic_error, default_error, openai_error
from ._faults import Fault, FaultQueue, fault_from_json
from ._script import decide, stable_id
from ._stats import RequestLog, Stats

__all__ = ["SimState", "build_app"]

_log = logging.getLogger("windowfit.server")

_DRAIN_LIMIT = 64 * 1024 * 1024  # an oversized body is read (and dropped) up to this much

#: The deepest nesting of arrays and objects a request body may have. Counting, caching
#: and checking walk the request recursively; past a few hundred levels Python's
#: recursion limit is reached, so deeper bodies are refused as invalid (400) up front.
#: Real requests (JSON schemas, tool inputs) nest a few dozen levels at most.
MAX_JSON_DEPTH = 128

#: What ``POST /_sim/faults`` accepts, quoted in the 400 for a body it cannot read.
FAULTS_BODY_EXAMPLE = (
    '{"faults": [{"status": 429, "retry_after": 1}, {"drop": true, "after_events": 3}, '
    '{"delay": 0.5}], "replace": false}'
)


class SimState:
    """Everything the server keeps between requests."""

    def __init__(self, config: SimConfig, estimator: Estimator) -> None:
        self.config = config
        counted = MemoEstimator(estimator)
        self.tokenizer = estimator.name
        self.sizers = {"anthropic": Sizer(counted, "anthropic"), "openai": Sizer(counted, "openai")}
        self.sizers["openai-responses"] = Sizer(counted, "openai-responses")
        self.cache = PrefixCache(
            min_tokens=config.cache_min_tokens,
            increment=config.cache_increment,
            ttl=config.cache_ttl,
            max_bytes=config.cache_max_bytes,
        )
        self.faults = FaultQueue(config.faults)
        self.stats = Stats(log_max_bytes=config.log_max_bytes)

    def reset(self) -> None:
        self.cache.clear()
        self.faults.clear()
        self.stats = Stats(log_max_bytes=self.config.log_max_bytes)

    def stats_json(self) -> dict[str, Any]:
        out = self.stats.to_json()
        out["faults_pending"] = len(self.faults)
        out["config"] = {
            "context_window": self.config.context_window,
            "tokenizer": self.tokenizer,
            "auth": bool(self.config.api_keys),
            "max_body_bytes": self.config.max_body_bytes,
            "tool_rounds": self.config.tool_rounds,
            "cache_min_tokens": self.config.cache_min_tokens,
            "cache_max_bytes": self.config.cache_max_bytes,
            "cache_bytes": self.cache.accounted_bytes,
            "cache_entries": len(self.cache),
            "log_max_bytes": self.config.log_max_bytes,
            "log_bytes": self.stats.log_bytes,
            "reserve_output": self.config.reserve_output,
        }
        return out


# --------------------------------------------------------------------------- responses


def _dumps(value: Any) -> bytes:
    # ASCII escapes keep any text (lone surrogates included) encodable; clients decode
    # them exactly as they would decode raw UTF-8.
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_dumps(body), status, headers=headers, media_type="application/json")


def _request_id(provider: Provider) -> dict[str, str]:
    rid = stable_id("req_sim", time.time_ns())
    return {"request-id": rid} if provider == "anthropic" else {"x-request-id": rid}


def _error_response(provider: Provider, error: ProviderError) -> Response:
    headers = {**error.headers, **_request_id(provider)}
    body = dict(error.body)
    if provider == "anthropic":
        body["request_id"] = headers["request-id"]
    return _json(body, error.status, headers)


class _Dropped(Response):
    """Sends a status line and headers, then closes the connection without a body."""

    def __init__(self) -> None:
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"1024")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})


class _EventStream(Response):
    """Server-sent events, with an optional fault after some of them (an ``error`` event
    or a dropped connection)."""

    def __init__(
        self,
        frames: list[bytes],
        headers: dict[str, str],
        fault: Fault | None = None,
        fault_frame: bytes = b"",
    ) -> None:
        self.status_code = 200
        self.background = None
        self.frames = frames
        self.fault = fault
        self.fault_frame = fault_frame
        self.extra_headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in self.extra_headers.items()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        fault = self.fault
        for k in range(len(self.frames) + 1):
            if fault is not None and fault.after_events == k:
                if fault.drop:
                    return  # the connection is cut here
                body = {"type": "http.response.body", "body": self.fault_frame, "more_body": True}
                await send(body)
                break
            if k < len(self.frames):
                await send(
                    {"type": "http.response.body", "body": self.frames[k], "more_body": True}
                )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else _dumps(data).decode("ascii")
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# --------------------------------------------------------------------------- checks


def _bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return None


def _mask(key: str) -> str:
    return f"{key[:3]}{'*' * max(3, len(key) - 7)}{key[-4:]}" if len(key) > 8 else "***"


def _check_key(provider: Provider, request: Request, keys: tuple[str, ...]) -> str:
    """The caller's key (``""`` when none was sent); 401 when keys are configured and the
    key is missing or unknown."""
    if provider == "anthropic":
        key = request.headers.get("x-api-key") or _bearer(request.headers.get("authorization"))
    else:
        key = _bearer(request.headers.get("authorization"))
    if not keys:
        return key or ""
    if not key:
        if provider == "anthropic":
            raise anthropic_error(
                401, "authentication_error", "x-api-key header is required", kind="authentication"
            )
        raise openai_error(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an "
            "API key from https://platform.openai.com/account/api-keys.",
            kind="authentication",
        )
    if key not in keys:
        if provider == "anthropic":
            raise anthropic_error(
                401, "authentication_error", "invalid x-api-key", kind="authentication"
            )
        raise openai_error(
            401,
            f"Incorrect API key provided: {_mask(key)}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
            kind="authentication",
        )
    return key


def _control_refusal(request: Request, keys: tuple[str, ...]) -> Response | None:
    """401 for a control route (``/_sim/...``) when keys are configured and the request
    carries none of them (as ``x-api-key`` or ``Authorization: Bearer``, the forms the
    provider routes accept): otherwise anyone who can reach the port could inject faults,
    reset counters or read the request log."""
    if not keys:
        return None
    key = request.headers.get("x-api-key") or _bearer(request.headers.get("authorization"))
    if key and any(hmac.compare_digest(key.encode(), k.encode()) for k in keys):
        return None
    why = "invalid API key" if key else "an API key is required"
    return _json(
        {"error": f"{why}: send x-api-key: KEY or Authorization: Bearer KEY"},
        401,
        headers={"www-authenticate": "Bearer"},
    )


def _too_large(provider: Provider) -> ProviderError:
    return default_error(provider, 413)


async def _read_body(
    request: Request, limit: int, provider: Provider, drain_seconds: float
) -> bytes:
    """The body, or 413 once it passes ``limit``. The rest of an oversized body is read and
    dropped, up to a bound in bytes and in time, so that an honest client gets the answer
    rather than a broken pipe, and a client that stops sending cannot hold the answer."""
    declared = request.headers.get("content-length")
    too_big = False
    if declared is not None:
        try:
            too_big = int(declared) > limit
        except ValueError:
            raise _invalid_json(provider) from None
    chunks: list[bytes] = []
    size = 0
    pieces = request.stream().__aiter__()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + drain_seconds
    while True:
        try:
            if too_big:
                chunk = await asyncio.wait_for(pieces.__anext__(), deadline - loop.time())
            else:
                chunk = await pieces.__anext__()
        except (StopAsyncIteration, asyncio.TimeoutError):
            break
        size += len(chunk)
        if not too_big and size > limit:
            too_big = True
            deadline = loop.time() + drain_seconds
        if too_big:
            if size > _DRAIN_LIMIT:
                break
            continue
        chunks.append(chunk)
    if too_big:
        raise _too_large(provider)
    return b"".join(chunks)


def _invalid_json(provider: Provider) -> ProviderError:
    if provider == "anthropic":
        return anthropic_error(
            400,
            "invalid_request_error",
            "There was an error parsing the body of your request: it is not valid JSON.",
        )
    return openai_error(400, _openai.BAD_JSON)


def _too_deep(provider: Provider) -> ProviderError:
    """400 for a body nested too deeply; the server logs it as one line (never a
    traceback: the body is the client's mistake, and a log line per level would let a
    5 KB request write hundreds of KB of log)."""
    message = f"The request body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep."
    if provider == "anthropic":
        error = anthropic_error(400, "invalid_request_error", message)
    else:
        error = openai_error(400, message)
    error.log_line = f"refused a request body nested more than {MAX_JSON_DEPTH} levels deep"
    return error


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and dicts more than ``limit`` levels.
    Iterative, so that it cannot itself hit the recursion limit, and it stops at the first
    path that is too deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _parse_json(body: bytes, provider: Provider) -> Any:
    """The parsed body; 400 for invalid JSON and for JSON nested deeper than
    :data:`MAX_JSON_DEPTH` (the parser itself gives up near the recursion limit)."""
    try:
        data = json.loads(body)
    except ValueError:
        raise _invalid_json(provider) from None
    except RecursionError:
        raise _too_deep(provider) from None
    if isinstance(data, (dict, list)) and nesting_exceeds(data, MAX_JSON_DEPTH):
        raise _too_deep(provider)
    return data


def _fault_error(provider: Provider, fault: Fault) -> ProviderError:
    assert fault.status is not None
    return default_error(
        provider,
        fault.status,
        type_=fault.type,
        message=fault.message,
        retry_after=fault.retry_after,
    )


def _describe(fault: Fault) -> str:
    if fault.drop:
        return "drop"
    if fault.status is not None:
        return str(fault.status)
    return f"delay={fault.delay:g}"


# --------------------------------------------------------------------------- the app


class _App:
    def __init__(self, state: SimState) -> None:
        self.state = state

    async def _count(self, provider: Provider, request: Any) -> list[Segment]:
        sizer = self.state.sizers[provider]
        module: Any = _anthropic if provider == "anthropic" else _openai
        try:
            result: list[Segment] = await asyncio.to_thread(module.segments, request, sizer)
        except ConversationError as exc:
            if provider == "anthropic":
                raise _anthropic.invalid(str(exc)) from None
            raise openai_error(400, str(exc)) from None
        return result

    async def handle(self, request: Request, route: str) -> Response:
        provider: Provider = "anthropic" if route.startswith("anthropic") else "openai"
        entry = self.state.stats.start(route)
        try:
            response = await self._serve(request, route, provider, entry)
        except ProviderError as error:
            entry.status = error.status
            entry.error = error.kind
            response = _error_response(provider, error)
            if error.log_line:
                _log.warning("windowfit serve-sim: %s: %s", route, error.log_line)
        except RecursionError:  # a walk deeper than the depth check foresaw: still bad input
            entry.status = 400
            entry.error = "invalid_request"
            response = _error_response(provider, _too_deep(provider))
        except ClientDisconnect:
            entry.status = 499
            entry.error = "client_disconnected"
            response = Response(status_code=499)
        except Exception:  # a bug here must still answer in the provider's shape
            _log.exception("windowfit serve-sim: unexpected error")
            entry.status = 500
            entry.error = "server"
            response = _error_response(provider, default_error(provider, 500))
        self.state.stats.finish(entry)
        return response

    async def _serve(
        self, request: Request, route: str, provider: Provider, entry: RequestLog
    ) -> Response:
        config = self.state.config
        body = await _read_body(request, config.max_body_bytes, provider, config.drain_seconds)
        fault = self.state.faults.take(route)
        if fault is not None:
            entry.fault = _describe(fault)
            if fault.delay:
                await asyncio.sleep(fault.delay)
        if config.latency:
            await asyncio.sleep(config.latency)
        if fault is not None and fault.after_events is None:
            if fault.drop:
                entry.error = "dropped"
                return _Dropped()
            if fault.status is not None:
                raise _fault_error(provider, fault)
        key = _check_key(provider, request, config.api_keys)
        data = _parse_json(body, provider)
        if route == "openai.chat":
            return await self._openai(data, key, fault, entry)
        if route == "openai.responses":
            return await self._responses(data, key, fault, entry)
        return await self._anthropic(data, key, fault, entry, route == "anthropic.count_tokens")

    def _late_fault(self, provider: Provider, fault: Fault | None, stream: bool) -> Response | None:
        """A fault meant for a stream's middle, served at once to a plain request."""
        if fault is None or fault.after_events is None or stream:
            return None
        if fault.drop:
            return _Dropped()
        raise _fault_error(provider, fault)

    async def _anthropic(
        self, data: Any, key: str, fault: Fault | None, entry: RequestLog, count_only: bool
    ) -> Response:
        config = self.state.config
        request = _anthropic.parse_request(data, count_only=count_only)
        entry.model = request.model
        entry.max_tokens = request.max_tokens
        entry.stream = request.stream
        segments = await self._count("anthropic", request)
        tokens = sum(s.tokens for s in segments)
        entry.tokens = tokens
        late = self._late_fault("anthropic", fault, request.stream)
        if late is not None:
            entry.error = "dropped"
            return late
        if count_only:
            entry.status = 200
            return _json({"input_tokens": tokens}, headers=_request_id("anthropic"))
        refusal = _anthropic.context_error(
            tokens, request.max_tokens, config.context_window, config.reserve_output
        )
        if refusal is not None:
            raise refusal
        use = self.state.cache.explicit(f"{key}\x00{request.model}", segments)
        answer = decide(
            request.offers(),
            choice=request.choice,
            named=request.named,
            results=request.results(),
            tool_rounds=config.tool_rounds,
            reply=config.reply,
            tokens=tokens,
            model=request.model,
        )
        message_id = stable_id("msg_", *(s.key for s in segments[-3:]), tokens)
        content = _anthropic.content_blocks(answer, message_id)
        sizer = self.state.sizers["anthropic"]
        spec = get_format("anthropic")
        output = sizer.size_of(spec.from_message({"role": "assistant", "content": content}, 0))
        out_tokens = output.tokens
        stop = "tool_use" if answer.tool is not None else "end_turn"
        assert request.max_tokens is not None
        if answer.tool is None and out_tokens > request.max_tokens:
            text = content[0]["text"]
            content[0]["text"] = text[: max(1, len(text) * request.max_tokens // out_tokens)]
            out_tokens = request.max_tokens
            stop = "max_tokens"
        usage = _anthropic.usage_body(
            use.read, use.write, tokens - use.read - use.write, out_tokens
        )
        entry.cache_read, entry.cache_write = use.read, use.write
        entry.output_tokens = out_tokens
        entry.status = 200
        headers = _request_id("anthropic")
        if not request.stream:
            body = _anthropic.message_body(message_id, request.model, content, stop, usage)
            return _json(body, headers=headers)
        events = _anthropic.stream_events(
            message_id, request.model, content, stop, usage, config.stream_chunk_chars
        )
        frames = [_sse(name, payload) for name, payload in events]
        fault_frame = b""
        if fault is not None and fault.status is not None:
            error = _fault_error("anthropic", fault)
            entry.error = error.kind
            fault_frame = _sse("error", error.body)
        elif fault is not None and fault.drop:
            entry.error = "dropped"
        return _EventStream(frames, headers, fault, fault_frame)

    async def _openai(
        self, data: Any, key: str, fault: Fault | None, entry: RequestLog
    ) -> Response:
        config = self.state.config
        request = _openai.parse_request(data)
        entry.model = request.model
        entry.max_tokens = request.max_tokens
        entry.stream = request.stream
        segments = await self._count("openai", request)
        tokens = sum(s.tokens for s in segments)
        entry.tokens = tokens
        late = self._late_fault("openai", fault, request.stream)
        if late is not None:
            entry.error = "dropped"
            return late
        refusal = _openai.context_error(
            tokens, request.max_tokens, config.context_window, config.reserve_output
        )
        if refusal is not None:
            raise refusal
        namespace = f"{key}\x00{request.model}\x00{request.cache_key or ''}"
        use = self.state.cache.automatic(namespace, segments)
        answer = decide(
            request.offers(),
            choice=request.choice,
            named=request.named,
            results=request.results(),
            tool_rounds=config.tool_rounds,
            reply=config.reply,
            tokens=tokens,
            model=request.model,
        )
        completion_id = stable_id("chatcmpl-", *(s.key for s in segments[-3:]), tokens)
        message = _openai.assistant_message(answer, completion_id)
        sizer = self.state.sizers["openai"]
        spec = get_format("openai")
        out_tokens = sizer.size_of(spec.from_message(message, 0)).tokens
        finish = "tool_calls" if answer.tool is not None else "stop"
        limit = request.max_tokens
        if answer.tool is None and limit is not None and out_tokens > limit:
            text = str(message["content"])
            message["content"] = text[: max(1, len(text) * limit // out_tokens)]
            out_tokens = limit
            finish = "length"
        usage = _openai.usage_body(tokens, use.read, out_tokens)
        entry.cache_read = use.read
        entry.output_tokens = out_tokens
        entry.status = 200
        headers = _request_id("openai")
        created = int(time.time())
        if not request.stream:
            body = _openai.completion_body(
                completion_id, request.model, created, message, finish, usage
            )
            return _json(body, headers=headers)
        chunks = _openai.stream_chunks(
            completion_id,
            request.model,
            created,
            message,
            finish,
            usage,
            include_usage=request.include_usage,
            chunk=config.stream_chunk_chars,
        )
        frames = [_sse(None, c) for c in chunks] + [_sse(None, "[DONE]")]
        fault_frame = b""
        if fault is not None and fault.status is not None:
            error = _fault_error("openai", fault)
            entry.error = error.kind
            fault_frame = _sse(None, error.body)
        elif fault is not None and fault.drop:
            entry.error = "dropped"
        return _EventStream(frames, headers, fault, fault_frame)

    async def _responses(
        self, data: Any, key: str, fault: Fault | None, entry: RequestLog
    ) -> Response:
        """OpenAI Responses, with the same steps as Chat (see ``_responses``)."""
        config = self.state.config
        request = _responses.parse_request(data)
        entry.model, entry.max_tokens, entry.stream = (
            request.model,
            request.max_tokens,
            request.stream,
        )
        sizer = self.state.sizers["openai-responses"]
        try:
            segments = await asyncio.to_thread(_responses.segments, request, sizer)
        except ConversationError as exc:
            raise openai_error(400, str(exc), param="input") from None
        tokens = entry.tokens = sum(s.tokens for s in segments)
        late = self._late_fault("openai", fault, request.stream)
        if late is not None:
            entry.error = "dropped"
            return late
        refusal = _responses.context_error(
            tokens, request.max_tokens, config.context_window, config.reserve_output
        )
        if refusal is not None:
            raise refusal
        namespace = f"{key}\x00{request.model}\x00{request.cache_key or ''}"
        use = self.state.cache.automatic(namespace, segments)
        answer = decide(
            request.offers(),
            choice=request.choice,
            named=request.named,
            results=request.results(),
            tool_rounds=config.tool_rounds,
            reply=config.reply,
            tokens=tokens,
            model=request.model,
        )
        response_id = stable_id("resp_", *(s.key for s in segments[-3:]), tokens)
        output = _responses.output_items(answer, response_id)
        spec = get_format("openai-responses")
        out_tokens = sum(spec.scan(item, 0, sizer).tokens for item in output)
        status, incomplete = "completed", None
        limit = request.max_tokens
        if answer.tool is None and limit is not None and out_tokens > limit:
            part = output[0]["content"][0]
            part["text"] = part["text"][: max(1, len(part["text"]) * limit // out_tokens)]
            out_tokens, status, incomplete = limit, "incomplete", "max_output_tokens"
            output[0]["status"] = "incomplete"
        usage = _responses.usage_body(tokens, use.read, use.write, out_tokens)
        entry.cache_read, entry.output_tokens, entry.status = use.read, out_tokens, 200
        headers = _request_id("openai")
        if not request.stream:
            body = _responses.response_body(
                request, response_id, output, usage, status=status, incomplete=incomplete
            )
            return _json(body, headers=headers)
        events = _responses.stream_events(
            request,
            response_id,
            output,
            usage,
            status=status,
            incomplete=incomplete,
            chunk=config.stream_chunk_chars,
        )
        frames = [_sse(e["type"], e) for e in events]
        fault_frame = b""
        if fault is not None and fault.status is not None:
            error = _fault_error("openai", fault)
            entry.error = error.kind
            fault_frame = _sse("error", _responses.error_event(error.body, fault.after_events or 0))
        elif fault is not None and fault.drop:
            entry.error = "dropped"
        return _EventStream(frames, headers, fault, fault_frame)

    # -- routes ----------------------------------------------------------------------

    async def messages(self, request: Request) -> Response:
        return await self.handle(request, "anthropic.messages")

    async def count_tokens(self, request: Request) -> Response:
        return await self.handle(request, "anthropic.count_tokens")

    async def chat(self, request: Request) -> Response:
        return await self.handle(request, "openai.chat")

    async def responses(self, request: Request) -> Response:
        return await self.handle(request, "openai.responses")

    async def gemini(self, request: Request) -> Response:
        return await _gemini.serve(self.state, request, request.path_params["target"], _GEMINI_HTTP)

    def control(self, handler: Any) -> Any:
        """``handler`` behind the API key check of the control routes."""

        async def guarded(request: Request) -> Response:
            refusal = _control_refusal(request, self.state.config.api_keys)
            if refusal is not None:
                return refusal
            response: Response = await handler(request)
            return response

        return guarded

    async def stats(self, request: Request) -> Response:
        return _json(self.state.stats_json())

    async def reset(self, request: Request) -> Response:
        self.state.reset()
        return _json({"reset": True})

    async def faults(self, request: Request) -> Response:
        queue = self.state.faults
        if request.method == "GET":
            return _json({"pending": [f.to_json() for f in queue.pending()]})
        if request.method == "DELETE":
            queue.clear()
            return _json({"pending": []})
        try:
            config = self.state.config
            raw = await _read_body(request, config.max_body_bytes, "openai", config.drain_seconds)
        except ProviderError:
            return _json({"error": "body too large"}, 413)
        try:
            data = json.loads(raw)
            items = data.get("faults") if isinstance(data, dict) else data
            if not isinstance(items, list):
                raise ValueError('expected a list of faults or {"faults": [...]}')
            new = [fault_from_json(item) for item in items]
        except (ValueError, RecursionError) as exc:
            return _json({"error": f"bad faults: {exc}; for example {FAULTS_BODY_EXAMPLE}"}, 400)
        if isinstance(data, dict) and data.get("replace") is True:
            queue.clear()
        queue.add(new)
        return _json({"pending": [f.to_json() for f in queue.pending()]})

    async def health(self, request: Request) -> Response:
        return _json({"ok": True})

    async def not_found(self, request: Request, exc: Exception) -> Response:
        if request.url.path == "/_sim" or request.url.path.startswith("/_sim/"):
            refusal = _control_refusal(request, self.state.config.api_keys)
            if refusal is not None:
                return refusal
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
        provider: Provider = "anthropic" if anthropic else "openai"
        if status == 405:
            message = f"Method Not Allowed ({request.method} {request.url.path})"
        else:
            message = f"Invalid URL ({request.method} {request.url.path})"
        if provider == "anthropic":
            kind = "not_found_error" if status == 404 else "invalid_request_error"
            error = anthropic_error(status, kind, message)
        else:
            error = openai_error(status, message)
        return _error_response(provider, error)


_GEMINI_HTTP = _gemini.Http(_read_body, _parse_json, _json, _sse, _EventStream, _Dropped)


def build_app(state: SimState) -> Starlette:
    app = _App(state)
    routes = [
        Route("/v1beta/models/{target}", app.gemini, methods=["POST"]),
        Route("/v1/models/{target}", app.gemini, methods=["POST"]),
        Route("/v1/messages", app.messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", app.count_tokens, methods=["POST"]),
        Route("/v1/chat/completions", app.chat, methods=["POST"]),
        Route("/chat/completions", app.chat, methods=["POST"]),
        Route("/v1/responses", app.responses, methods=["POST"]),
        Route("/responses", app.responses, methods=["POST"]),
        Route("/_sim/stats", app.control(app.stats), methods=["GET"]),
        Route("/_sim/reset", app.control(app.reset), methods=["POST"]),
        Route("/_sim/faults", app.control(app.faults), methods=["GET", "POST", "DELETE"]),
        Route("/_sim/health", app.control(app.health), methods=["GET"]),
    ]
    handlers: dict[Any, Any] = {404: app.not_found, 405: app.not_found}
    starlette = Starlette(routes=routes, exception_handlers=handlers)
    starlette.state.sim = state
    return starlette
