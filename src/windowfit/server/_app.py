"""The ASGI application (Starlette): routes, the order of checks, responses.

Every provider request goes through the same steps, so that what a client sees is
predictable:

1. the body is read up to ``max_body_bytes`` (else 413 in the API's shape);
2. the next waiting fault for the route is taken: its delay is waited, and an error or a
   drop that does not wait for stream events is served now;
3. the API key is checked when keys are configured (401);
4. the body is parsed as JSON (400 in the API's wording);
5. the API's door (``_anthropic``, ``_openai``, ``_responses``, ``_gemini``: a
   :class:`~windowfit.server._door.Door`) checks the request and asks the simulator's core
   (:class:`windowfit.simcore.SimCore`) to count it with the real tokenizer, to check it
   against the window, to consult the prefix cache and to answer with the scripted model;
   it writes the answer as JSON or as SSE (with the fault, if any, after its
   ``after_events`` events).

Nothing here knows a provider by its name: each fact is its door's.
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
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..simcore import Fault, ScriptedModel, SimCore, fault_from_json, stable_id
from ..sizing import Sizer
from ..tokens import Estimator
from . import _anthropic, _gemini, _openai, _responses
from ._config import SimConfig
from ._door import Call, Door, Http, bearer
from ._errors import ProviderError
from ._stats import RequestLog, Stats

__all__ = ["FAULTS_BODY_EXAMPLE", "MAX_JSON_DEPTH", "SimState", "build_app", "nesting_exceeds"]

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

#: The doors by route (the Gemini routes are found from the URL's method).
_DOORS: dict[str, Door] = {
    "anthropic.messages": _anthropic.DOOR,
    "anthropic.count_tokens": _anthropic.DOOR,
    "openai.chat": _openai.DOOR,
    "openai.responses": _responses.DOOR,
    "gemini.generate": _gemini.DOOR,
    "gemini.stream": _gemini.DOOR,
}
#: The door whose shape answers a request no door recognises (an unknown path).
_FALLBACK = _openai.DOOR


class SimState:
    """Everything the server keeps between requests: the simulator's core (counting,
    window, prefix cache, scripted model, faults) and the counters."""

    def __init__(self, config: SimConfig, estimator: Estimator) -> None:
        self.config = config
        self.core = SimCore(
            window=config.context_window,
            tokenizer=estimator,
            model=ScriptedModel(config.tool_rounds, config.reply, config.script_tool),
            reserve_output=config.reserve_output,
            cache_min_tokens=config.cache_min_tokens,
            cache_increment=config.cache_increment,
            cache_ttl=config.cache_ttl,
            cache_max_bytes=config.cache_max_bytes,
            faults=config.faults,
        )
        self.tokenizer = estimator.name
        self.cache = self.core.cache
        self.faults = self.core.faults
        self.stats = Stats(log_max_bytes=config.log_max_bytes)

    def sizer(self, format_name: str) -> Sizer:
        return self.core.sizer(format_name)

    def reset(self) -> None:
        self.core.reset()
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


def _request_id(door: Door) -> dict[str, str]:
    return {door.request_id_header: stable_id("req_sim", time.time_ns())}


def _error_response(door: Door, error: ProviderError) -> Response:
    headers = {**error.headers, **_request_id(door)}
    body = dict(error.body)
    if door.request_id_in_body:
        body["request_id"] = headers[door.request_id_header]
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
        #: Seconds between events (``SimConfig.stream_tokens_per_second``; 0: none).
        self.interval = 0.0
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
                if k and self.interval:
                    await asyncio.sleep(self.interval)
                await send(
                    {"type": "http.response.body", "body": self.frames[k], "more_body": True}
                )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else _dumps(data).decode("ascii")
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# --------------------------------------------------------------------------- checks


def _control_refusal(request: Request, keys: tuple[str, ...]) -> Response | None:
    """401 for a control route (``/_sim/...``) when keys are configured and the request
    carries none of them (as ``x-api-key`` or ``Authorization: Bearer``, the forms the
    provider routes accept): otherwise anyone who can reach the port could inject faults,
    reset counters or read the request log."""
    if not keys:
        return None
    key = request.headers.get("x-api-key") or bearer(request.headers.get("authorization"))
    if key and any(hmac.compare_digest(key.encode(), k.encode()) for k in keys):
        return None
    why = "invalid API key" if key else "an API key is required"
    return _json(
        {"error": f"{why}: send x-api-key: KEY or Authorization: Bearer KEY"},
        401,
        headers={"www-authenticate": "Bearer"},
    )


async def _read_body(request: Request, limit: int, door: Door, drain_seconds: float) -> bytes:
    """The body, or 413 once it passes ``limit``. The rest of an oversized body is read and
    dropped, up to a bound in bytes and in time, so that an honest client gets the answer
    rather than a broken pipe, and a client that stops sending cannot hold the answer."""
    declared = request.headers.get("content-length")
    too_big = False
    if declared is not None:
        try:
            too_big = int(declared) > limit
        except ValueError:
            raise door.invalid(door.bad_json) from None
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
        raise door.error(413)
    return b"".join(chunks)


def _too_deep(door: Door) -> ProviderError:
    """400 for a body nested too deeply; the server logs it as one line (never a
    traceback: the body is the client's mistake, and a log line per level would let a
    5 KB request write hundreds of KB of log)."""
    error = door.invalid(
        f"The request body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep."
    )
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


def _parse_json(body: bytes, door: Door) -> Any:
    """The parsed body; 400 for invalid JSON and for JSON nested deeper than
    :data:`MAX_JSON_DEPTH` (the parser itself gives up near the recursion limit)."""
    try:
        data = json.loads(body)
    except ValueError:
        raise door.invalid(door.bad_json) from None
    except RecursionError:
        raise _too_deep(door) from None
    if isinstance(data, (dict, list)) and nesting_exceeds(data, MAX_JSON_DEPTH):
        raise _too_deep(door)
    return data


def _fault_error(door: Door, fault: Fault) -> ProviderError:
    assert fault.status is not None
    return door.error(fault.status, fault.message, fault.type, retry_after=fault.retry_after)


def _late_fault(door: Door, fault: Fault | None, stream: bool) -> Response | None:
    """A fault meant for a stream's middle, served at once to a plain request."""
    if fault is None or fault.after_events is None or stream:
        return None
    if fault.drop:
        return _Dropped()
    raise _fault_error(door, fault)


def _stream_fault(door: Door, call: Call) -> ProviderError | None:
    fault = call.fault
    if fault is not None and fault.status is not None:
        error = _fault_error(door, fault)
        call.entry.error = error.kind
        return error
    if fault is not None and fault.drop:
        call.entry.error = "dropped"
    return None


def _describe(fault: Fault) -> str:
    if fault.drop:
        return "drop"
    if fault.status is not None:
        return str(fault.status)
    return f"delay={fault.delay:g}"


_HTTP = Http(
    json=_json,
    sse=_sse,
    event_stream=lambda *a, **k: _EventStream(*a, **k),
    dropped=lambda: _Dropped(),
    late_fault=_late_fault,
    fault_error=_fault_error,
    stream_fault=_stream_fault,
    request_id=_request_id,
    streaming=StreamingResponse,
)


# --------------------------------------------------------------------------- the app


class _App:
    def __init__(self, state: SimState) -> None:
        self.state = state

    async def handle(self, request: Request, route: str, door: Door) -> Response:
        entry = self.state.stats.start(route)
        try:
            response = await self._serve(request, route, door, entry)
        except ProviderError as error:
            entry.status = error.status
            entry.error = error.kind
            response = _error_response(door, error)
            if error.log_line:
                _log.warning("windowfit serve-sim: %s: %s", route, error.log_line)
        except RecursionError:  # a walk deeper than the depth check foresaw: still bad input
            entry.status = 400
            entry.error = "invalid_request"
            response = _error_response(door, _too_deep(door))
        except ClientDisconnect:
            entry.status = 499
            entry.error = "client_disconnected"
            response = Response(status_code=499)
        except Exception:  # a bug here must still answer in the API's shape
            _log.exception("windowfit serve-sim: unexpected error")
            entry.status = 500
            entry.error = "server"
            response = _error_response(door, door.error(500))
        self.state.stats.finish(entry)
        return response

    async def _serve(self, request: Request, route: str, door: Door, entry: RequestLog) -> Response:
        config = self.state.config
        body = await _read_body(request, config.max_body_bytes, door, config.drain_seconds)
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
                raise _fault_error(door, fault)
        key = door.key(request, config.api_keys)
        data = _parse_json(body, door)
        call = Call(data, key, fault, entry, route, request)
        response = await door.serve(self.state, call, _HTTP)
        if isinstance(response, _EventStream) and config.stream_tokens_per_second:
            response.interval = config.stream_chunk_chars / 4 / config.stream_tokens_per_second
        return response

    # -- routes ----------------------------------------------------------------------

    def route(self, name: str) -> Any:
        door = _DOORS[name]

        async def endpoint(request: Request) -> Response:
            return await self.handle(request, name, door)

        return endpoint

    async def gemini(self, request: Request) -> Response:
        route = _gemini.route_for(request.path_params["target"])
        if route is None:
            error = _gemini.unknown_method(request.path_params["target"])
            return _json(error.body, error.status, _request_id(_gemini.DOOR))
        return await self.handle(request, route, _gemini.DOOR)

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
            raw = await _read_body(request, config.max_body_bytes, _FALLBACK, config.drain_seconds)
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
        doors = dict.fromkeys(_DOORS.values())
        door = next((d for d in doors if d.recognises(request.headers)), _FALLBACK)
        if status == 405:
            message = f"Method Not Allowed ({request.method} {request.url.path})"
        else:
            message = f"Invalid URL ({request.method} {request.url.path})"
        return _error_response(door, door.error(status, message))


def build_app(state: SimState) -> Starlette:
    app = _App(state)
    routes = [
        Route("/v1beta/models/{target}", app.gemini, methods=["POST"]),
        Route("/v1/models/{target}", app.gemini, methods=["POST"]),
        Route("/v1/messages", app.route("anthropic.messages"), methods=["POST"]),
        Route("/v1/messages/count_tokens", app.route("anthropic.count_tokens"), methods=["POST"]),
        Route("/v1/chat/completions", app.route("openai.chat"), methods=["POST"]),
        Route("/chat/completions", app.route("openai.chat"), methods=["POST"]),
        Route("/v1/responses", app.route("openai.responses"), methods=["POST"]),
        Route("/responses", app.route("openai.responses"), methods=["POST"]),
        Route("/_sim/stats", app.control(app.stats), methods=["GET"]),
        Route("/_sim/reset", app.control(app.reset), methods=["POST"]),
        Route("/_sim/faults", app.control(app.faults), methods=["GET", "POST", "DELETE"]),
        Route("/_sim/health", app.control(app.health), methods=["GET"]),
    ]
    handlers: dict[Any, Any] = {404: app.not_found, 405: app.not_found}
    starlette = Starlette(routes=routes, exception_handlers=handlers)
    starlette.state.sim = state
    return starlette
