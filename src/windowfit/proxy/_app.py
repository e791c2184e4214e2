"""The proxy's ASGI application: read, fit, forward, relay, learn.

A plain ASGI callable (no framework routing in the way of a relayed stream), served by
uvicorn, forwarding with one upstream connection pool (``_upstream``: aiohttp, connect
and read timeouts). Every request:

1. is read up to ``max_body_bytes`` (else 413 in the API's shape);
2. on a route windowfit fits (``POST /v1/messages``, ``POST /v1/chat/completions``...),
   is fitted by its dialect (see ``_fit``); what cannot be read is forwarded unchanged;
   a conversation nothing fits gets the API's own 400 with windowfit's sentence added;
3. is forwarded to the configured upstream with the client's headers (hop-by-hop ones
   aside) and query string; anything else (``/v1/models``, ``HEAD /``, unknown paths)
   is forwarded as it came;
4. on an upstream overflow error, after learning from it, is fitted once more to the
   corrected budget and sent once more (the only retry the proxy makes);
5. has its answer relayed: error bodies verbatim, streams chunk by chunk as they arrive
   while a light parser watches them for usage, which teaches the conversation's budget.

A client that disconnects cancels its upstream request at once. ``x-windowfit-stage``,
``x-windowfit-tokens-before``, ``x-windowfit-tokens-after`` and ``x-windowfit-cleared``
say what was done; ``x-windowfit-skipped`` why a request was forwarded unfitted.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from ..formats import DIALECTS, Dialect
from ._config import ProxyConfig
from ._dashboard import ConversationLog, RequestRecord, render_page
from ._early import EARLY_BYTES_PER_TOKEN, EARLY_MIN_BYTES, EarlyForward, leading_model
from ._fit import Fitted, RequestFitter
from ._headers import pick_upstream, request_headers, response_headers
from ._jsonarray import JsonArrayWatcher
from ._learning import ConversationLearning
from ._metrics import Metrics
from ._sse import UsageWatcher
from ._state import StateStore, open_store
from ._upstream import Upstream, UpstreamError, UpstreamResponse, UpstreamTimeout

__all__ = ["ProxyApp", "fitted_route", "redact_key"]

_log = logging.getLogger("windowfit.proxy")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Routes windowfit fits: path -> dialect name (the dialect says which upstream serves
#: it). Dialects that are not (yet) defined are skipped, their paths forwarded unchanged.
_FITTED = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai",
    "/v1/responses": "openai-responses",
}
_GEMINI_DIALECT = "gemini"

#: Gemini's routes: the model is in the path (``/v1beta/models/gemini-2.5-flash:
#: generateContent``; google-genai 3.6 uses ``/v1/`` by default).
_GEMINI_ROUTE = re.compile(
    r"/(?:v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)"
)

_MAX_ERROR_BYTES = 4 * 1024 * 1024  # an error body is read whole, up to this much


def fitted_route(method: str, path: str) -> tuple[Dialect, str] | None:
    """The dialect and upstream (its provider) of a request windowfit fits, or ``None``."""
    if method != "POST":
        return None
    name = _FITTED.get(path)
    if name is None and _GEMINI_ROUTE.fullmatch(path):
        name = _GEMINI_DIALECT
    dialect = DIALECTS.get(name) if name is not None else None
    if dialect is None or not dialect.provider:
        return None
    return dialect, dialect.provider


def path_model(path: str) -> str | None:
    """The model a Gemini route names in its path (``None`` for other routes)."""
    match = _GEMINI_ROUTE.fullmatch(path)
    return match.group("model") if match else None


def route_label(path: str) -> str:
    """A fitted route as counted: Gemini's with ``*`` for the model, so that the
    number of metric series does not grow with the model names clients send."""
    match = _GEMINI_ROUTE.fullmatch(path)
    if match is None:
        return path
    return path[: match.start("model")] + "*:" + match.group("method")


_KEY_IN_QUERY = re.compile(r"(?i)((?:^|[?&])key=)[^&#\s\"']*")


def redact_key(text: str) -> str:
    """``text`` (a URL, a log line) with the value of a ``key=`` query parameter, the
    Gemini API key, replaced by ``***``."""
    return _KEY_IN_QUERY.sub(r"\1***", text)


def _refusal(upstream: str, status: int, message: str) -> dict[str, Any]:
    """An error body of the proxy's own (413, 502, 504) in the upstream API's shape."""
    for dialect in DIALECTS.values():
        if dialect.provider == upstream:
            return dialect.status_error(status, message)
    return {"error": {"code": status, "message": message}}  # pragma: no cover - all known


_MESSAGES = {
    413: "Request exceeds the maximum allowed number of bytes.",
    502: "windowfit proxy: the upstream could not be reached or broke off.",
    504: "windowfit proxy: the upstream did not answer in time.",
}


class _TooLarge(Exception):
    pass


@dataclass
class _Outcome:
    """What one request came to, for the counters and the live page."""

    route: str
    status: int = 0
    fitted: Fitted | None = None
    refit: bool = False
    usage_input: int | None = None
    usage_cache_read: int | None = None
    upstream_seconds: float = 0.0
    error: str | None = None
    started: float = field(default_factory=time.perf_counter)


class _Observers:
    """The proxy's metrics (``GET /metrics``) and live page (``GET /_windowfit/``)."""

    def __init__(self, max_conversations: int = 200) -> None:
        self.metrics = Metrics()
        self.log = ConversationLog(max_conversations=max_conversations)


def _open_store(config: ProxyConfig) -> StateStore | None:
    """The shared state store for ``--redis URL`` (``None``: learning stays in process)."""
    if config.redis_url is None:
        return None
    return open_store(config.redis_url)


class ProxyApp:
    """The ASGI application (module docstring). ``loopback``: whether the proxy listens
    on loopback only (the admin routes then need no key)."""

    def __init__(self, config: ProxyConfig, *, loopback: bool = True) -> None:
        self.config = config
        self.loopback = loopback
        self.learning = ConversationLearning(config.max_conversations, _open_store(config))
        self.fitter = RequestFitter(config, self.learning)
        self.observers = _Observers()
        self.upstream = Upstream(config.connect_timeout, config.read_timeout)
        #: Requests forwarded unfitted, by reason (``not-json``, ``unreadable``...).
        self.skipped: dict[str, int] = {}
        self.refits = 0
        #: Requests whose client left before the answer was complete.
        self.disconnects = 0
        #: The model of the last request fitted on each route: the guess for a body
        #: whose first chunk does not name one (the Python SDKs write fields in
        #: alphabetical order, ``model`` after ``messages``).
        self._last_model: dict[str, str] = {}

    async def aclose(self) -> None:
        """Close the upstream connections (at shutdown; tests that drive the app)."""
        await self.upstream.aclose()

    # -- ASGI ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        method: str = scope["method"]
        if method == "GET" and path in ("/metrics", "/_windowfit", "/_windowfit/"):
            await self._admin(scope, send, path)
            return
        route = fitted_route(method, path)
        upstream = route[1] if route else pick_upstream(path, scope["headers"])
        outcome = _Outcome(route=f"{method} {path}" if route is None else route_label(path))
        early = self._early(scope, upstream) if route is not None else None
        try:
            body = await _read_body(
                scope, receive, self.config.max_body_bytes, early.feed if early else None
            )
        except _TooLarge:
            if early is not None:
                await early.abandon()
            await self._own_error(send, upstream, 413, outcome)
            return
        if body is None:  # the client left while sending
            if early is not None:
                await early.abandon()
            return
        started: list[bool] = []

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(True)
            await send(message)

        task = asyncio.ensure_future(
            self._handle(scope, tracked, body, route, upstream, outcome, early)
        )
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not task.done():  # the client left: its upstream request is cancelled
                task.cancel()
                self.disconnects += 1
                outcome.status, outcome.error = 499, "client disconnected"
        try:
            await task
        except asyncio.CancelledError:
            if outcome.status != 499:
                raise
        except Exception:  # a bug here must not look like the upstream's answer
            _log.exception("windowfit proxy: unexpected error")
            if not started:
                await self._own_error(send, upstream, 502, outcome)
        finally:
            if early is not None and not early.released:  # cancelled before it decided
                await early.abandon()
        self._observe(outcome)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.upstream.start()  # its TLS context made now, not on the first request
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- one request ---------------------------------------------------------------------

    def _url(self, scope: Scope, upstream: str) -> str:
        url: str = self.config.upstream(upstream) + scope["path"]
        query: bytes = scope.get("query_string") or b""
        if query:
            url += "?" + query.decode("latin-1")
        return url

    def _early(self, scope: Scope, upstream: str) -> EarlyForward | None:
        """An upstream request fed as the body arrives (see ``_early``), for a body
        declared large (and within the limit); ``None`` for any other."""
        length = -1
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    return None
            elif name == b"transfer-encoding":
                return None
        if not EARLY_MIN_BYTES <= length <= self.config.max_body_bytes:
            return None
        url = self._url(scope, upstream)
        headers = [*request_headers(scope["headers"]), (b"content-length", str(length).encode())]

        path: str = scope["path"]

        def wanted(first: bytes) -> bool:
            model = leading_model(first) or self._last_model.get(path)
            budget = self.fitter.likely_budget(model) if model else None
            return budget is not None and length <= budget * EARLY_BYTES_PER_TOKEN

        return EarlyForward(
            lambda chunks: self.upstream.open("POST", url, headers, chunks, decoded=True),
            wanted,
        )

    async def _handle(
        self,
        scope: Scope,
        send: Send,
        body: bytes,
        route: tuple[Dialect, str] | None,
        upstream: str,
        outcome: _Outcome,
        early: EarlyForward | None = None,
    ) -> None:
        url = self._url(scope, upstream)
        headers = request_headers(scope["headers"])
        if route is None:
            await self._forward(scope["method"], url, headers, body, send, upstream, outcome)
            return
        dialect = route[0]
        try:
            fitted = self.fitter.fit(dialect, body, path_model(scope["path"]))
        except BaseException:
            if early is not None:
                await early.abandon()
            raise
        outcome.fitted = fitted
        model = fitted.parts.model if fitted.parts is not None else None
        if model:
            if len(self._last_model) >= 64 and scope["path"] not in self._last_model:
                self._last_model.clear()  # bounded: Gemini's routes name their models
            self._last_model[scope["path"]] = model
        if early is not None and early.answer is None:
            early = None  # it was not started: the body goes as a whole
        if early is not None:
            released = fitted.body is body and fitted.refusal is None
            if released:
                early.release()  # forwarded as received: its tail goes now
            else:
                await early.abandon()  # changed: the upstream never sees it whole
            self.observers.metrics.observe_early(
                outcome.route, released, early.sent_before_end, len(body)
            )
            if not released:
                early = None
        if fitted.skipped is not None:
            self.skipped[fitted.skipped] = self.skipped.get(fitted.skipped, 0) + 1
            _log.info(
                "windowfit proxy: %s forwarded unfitted (%s)",
                scope["path"],
                fitted.detail or fitted.skipped,
            )
        if fitted.refusal is not None:
            status, refusal = fitted.refusal
            outcome.status, outcome.error = status, "context overflow (nothing fits)"
            await _send_json(send, status, refusal, _report_headers(fitted))
            return
        response = await self._open(
            url, headers, fitted.body, upstream, outcome, send, pending=early
        )
        if response is None:
            return
        if response.status >= 400:
            error = await _read_error(response)
            parsed = _json_or_none(error)
            if (
                dialect.is_overflow(response.status, parsed)
                and fitted.parts is not None
                and fitted.key is not None
                and fitted.report is not None
            ):
                retry = self._refit(dialect, fitted, response.status, parsed)
                if retry is not None:
                    self.refits += 1
                    outcome.refit = True
                    outcome.fitted = fitted = retry
                    if fitted.refusal is not None:
                        status, refusal = fitted.refusal
                        outcome.status, outcome.error = status, "context overflow (nothing fits)"
                        await _send_json(send, status, refusal, _report_headers(fitted))
                        return
                    response = await self._open(url, headers, fitted.body, upstream, outcome, send)
                    if response is None:
                        return
                    if response.status >= 400:
                        error = await _read_error(response)
                        await self._send_error(send, response, error, fitted, outcome)
                        return
                else:
                    await self._send_error(send, response, error, fitted, outcome)
                    return
            else:
                await self._send_error(send, response, error, fitted, outcome)
                return
        await self._relay(send, response, url, dialect, fitted, outcome)

    def _refit(self, dialect: Dialect, fitted: Fitted, status: int, body: Any) -> Fitted | None:
        """The request fitted again after the upstream refused it as too long, or ``None``
        when what was learned would send the same request."""
        assert fitted.key is not None and fitted.report is not None and fitted.parts is not None
        taught, limit = self.learning.observe_overflow(
            fitted.key, fitted.report.tokens_after, status, body
        )
        if not taught and limit is None:
            return None
        again = self.fitter.refit(
            dialect, fitted.body, fitted.data, fitted.parts, retry=True, cap=limit, fast=fitted.fast
        )
        if again.refusal is not None:
            return again
        if again.report is None or again.report.tokens_after >= fitted.report.tokens_after:
            return None
        return again

    async def _open(
        self,
        url: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        upstream: str,
        outcome: _Outcome,
        send: Send,
        method: str = "POST",
        decoded: bool = True,
        pending: EarlyForward | None = None,
    ) -> UpstreamResponse | None:
        """The upstream's answer (its head; the body is read as it is relayed), or
        ``None`` after answering the client with a 502/504 in the API's shape.
        ``pending``: the request already under way, its body released."""
        content = body if body or method not in ("GET", "HEAD") else None  # none, as sent
        started = time.perf_counter()
        try:
            if pending is not None and pending.answer is not None:
                response = await pending.answer
            else:
                response = await self.upstream.open(method, url, headers, content, decoded=decoded)
        except UpstreamTimeout:
            outcome.upstream_seconds += time.perf_counter() - started
            await self._own_error(send, upstream, 504, outcome)
            return None
        except UpstreamError as exc:
            outcome.upstream_seconds += time.perf_counter() - started
            _log.warning("windowfit proxy: upstream %s: %s", upstream, exc)
            await self._own_error(send, upstream, 502, outcome)
            return None
        outcome.upstream_seconds += time.perf_counter() - started
        if _log.isEnabledFor(logging.DEBUG):  # never the Gemini key of ?key=
            _log.debug("windowfit proxy: %s %s -> %d", method, redact_key(url), response.status)
        return response

    async def _forward(
        self,
        method: str,
        url: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        send: Send,
        upstream: str,
        outcome: _Outcome,
    ) -> None:
        """Pass a request through exactly: its answer's bytes as they came (still
        encoded), its headers (hop-by-hop ones aside)."""
        response = await self._open(
            url, headers, body, upstream, outcome, send, method, decoded=False
        )
        if response is None:
            return
        outcome.status = response.status
        complete = False
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status,
                    "headers": response_headers(response.raw_headers, decoded=False),
                }
            )
            async for chunk in response.chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            complete = True
        except UpstreamError:
            outcome.error = "upstream broke off"
            return  # the connection is closed without an end: the client sees it cut
        finally:
            response.close(complete=complete)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _relay(
        self,
        send: Send,
        response: UpstreamResponse,
        url: str,
        dialect: Dialect,
        fitted: Fitted,
        outcome: _Outcome,
    ) -> None:
        """A successful answer to the client: a stream chunk by chunk (watched for usage),
        a JSON body whole (read for usage); then learning from the usage. A stream cut
        by the upstream is cut for the client; a whole body the upstream dropped before
        it ended is a 502 in the API's shape (nothing of it reached the client yet)."""
        outcome.status = response.status
        content_type = response.header("content-type")
        headers = response_headers(response.raw_headers, decoded=True) + _report_headers(fitted)
        streamed = content_type.startswith("text/event-stream")
        array = not streamed and url.partition("?")[0].endswith(":streamGenerateContent")
        complete = False
        try:
            if streamed or array:  # relayed as it arrives, watched for usage
                watcher: UsageWatcher | JsonArrayWatcher = (
                    UsageWatcher(dialect.stream_usage)
                    if streamed
                    else JsonArrayWatcher(dialect.stream_usage)
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status,
                        "headers": headers,
                    }
                )
                async for chunk in response.chunks():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    watcher.feed(chunk)
                complete = True
                usage = watcher.usage
            else:
                try:
                    data = await response.read()
                except UpstreamError as exc:  # before anything reached the client
                    _log.warning("windowfit proxy: upstream answer dropped: %s", exc)
                    await self._own_error(send, dialect.provider, 502, outcome)
                    return
                complete = True
                usage = dialect.usage(_json_or_none(data))
                headers.append((b"content-length", str(len(data)).encode()))
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status,
                        "headers": headers,
                    }
                )
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except UpstreamError:
            outcome.error = "upstream broke off"
            return  # the client sees its stream cut, as the upstream cut it
        finally:
            response.close(complete=complete)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if usage is not None:
            outcome.usage_input = usage.input_tokens
            outcome.usage_cache_read = usage.cache_read_tokens
            if fitted.key is not None and fitted.report is not None:
                self.learning.observe(fitted.key, fitted.report.tokens_after, usage.input_tokens)

    async def _send_error(
        self,
        send: Send,
        response: UpstreamResponse,
        body: bytes,
        fitted: Fitted,
        outcome: _Outcome,
    ) -> None:
        """An upstream error, verbatim (decoded), with what windowfit did."""
        outcome.status = response.status
        outcome.error = _error_summary(body)
        headers = response_headers(response.raw_headers, decoded=True) + _report_headers(fitted)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _own_error(self, send: Send, upstream: str, status: int, outcome: _Outcome) -> None:
        message = _MESSAGES[status]
        outcome.status, outcome.error = status, message
        await _send_json(send, status, _refusal(upstream, status, message), [])
        if status == 413:
            self._observe(outcome)

    # -- counters, live page -------------------------------------------------------------

    def _observe(self, outcome: _Outcome) -> None:
        observers = self.observers
        fitted = outcome.fitted
        report = fitted.report if fitted is not None else None
        total = time.perf_counter() - outcome.started
        if fitted is None:  # passed through, or refused before reading
            observers.metrics.observe_passthrough(
                outcome.route, outcome.status, outcome.upstream_seconds
            )
        else:
            if fitted.skipped is not None:
                observers.metrics.observe_unparsed(outcome.route)
            observers.metrics.observe(
                route=outcome.route,
                stage=report.stage if report is not None else None,
                status=outcome.status,
                tokens_before=report.tokens_before if report is not None else 0,
                tokens_after=report.tokens_after if report is not None else 0,
                refit=outcome.refit,
                upstream_seconds=outcome.upstream_seconds,
                added_seconds=max(0.0, total - outcome.upstream_seconds),
            )
        if fitted is not None and fitted.key is not None:
            parts = fitted.parts
            observers.log.record(
                fitted.key,
                RequestRecord(
                    at=time.time(),
                    route=outcome.route,
                    model=parts.model if parts is not None else None,
                    stage=report.stage if report is not None else None,
                    tokens_before=report.tokens_before if report is not None else 0,
                    tokens_after=report.tokens_after if report is not None else 0,
                    budget=fitted.budget,
                    input_tokens=outcome.usage_input,
                    cache_read_tokens=outcome.usage_cache_read,
                    refit=outcome.refit,
                    status=outcome.status,
                    error=outcome.error,
                ),
            )

    async def _admin(self, scope: Scope, send: Send, path: str) -> None:
        refusal = self._admin_refusal(scope)
        if refusal is not None:
            await _send_json(send, refusal[0], {"error": refusal[1]}, [])
            return
        observers = self.observers
        if path == "/metrics":
            text = observers.metrics.render().encode()
            kind = b"text/plain; version=0.0.4; charset=utf-8"
        else:
            query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
            selected = query.get("conversation", [None])[0]
            text = render_page(observers.log, selected=selected).encode()
            kind = b"text/html; charset=utf-8"
        headers = [(b"content-type", kind), (b"content-length", str(len(text)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": text, "more_body": False})

    def _admin_refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Open on loopback; elsewhere the admin key is needed (bearer or
        ``x-windowfit-admin-key``), and without one configured the routes stay closed."""
        if self.loopback:
            return None
        key = self.config.admin_key
        if not key:
            return 403, "start the proxy with --admin-key KEY to read this beyond loopback"
        given = b""
        for name, value in scope["headers"]:
            if name == b"x-windowfit-admin-key":
                given = value.strip()
            elif name == b"authorization" and value[:7].lower() == b"bearer ":
                given = given or value[7:].strip()
        if given and hmac.compare_digest(given, key.encode()):
            return None
        return 401, "send the admin key as Authorization: Bearer KEY or x-windowfit-admin-key"


# --------------------------------------------------------------------------- helpers


async def _read_body(
    scope: Scope, receive: Receive, limit: int, feed: Callable[[bytes], None] | None = None
) -> bytes | None:
    """The request body, ``None`` if the client disconnected, :class:`_TooLarge` past
    ``limit`` (by its declared length, or as it arrives); ``feed`` is given every chunk
    as it arrives (see ``_early``)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                if int(value) > limit:
                    raise _TooLarge
            except ValueError:
                pass
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if feed is not None:
            feed(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone (the body is already read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _read_error(response: UpstreamResponse) -> bytes:
    """An error answer's body (decoded; what came of it when the upstream broke off)."""
    chunks: list[bytes] = []
    size = 0
    complete = False
    try:
        async for chunk in response.chunks():
            chunks.append(chunk)
            size += len(chunk)
            if size > _MAX_ERROR_BYTES:
                break
        else:
            complete = True
    except UpstreamError:
        pass
    finally:
        response.close(complete=complete)
    return b"".join(chunks)


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _error_summary(body: bytes) -> str:
    parsed = _json_or_none(body)
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    text = message if isinstance(message, str) else body[:200].decode("utf-8", "replace")
    return text[:300]


def _report_headers(fitted: Fitted) -> list[tuple[bytes, bytes]]:
    report = fitted.report
    if report is None:
        reason = fitted.skipped or ("overflow" if fitted.refusal is not None else "none")
        return [(b"x-windowfit-skipped", reason.encode("ascii", "replace"))]
    return [
        (b"x-windowfit-stage", str(report.stage).encode()),
        (b"x-windowfit-tokens-before", str(report.tokens_before).encode()),
        (b"x-windowfit-tokens-after", str(report.tokens_after).encode()),
        (b"x-windowfit-cleared", str(len(report.cleared)).encode()),
    ]


async def _send_json(send: Send, status: int, body: Any, extra: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body, separators=(",", ":")).encode("ascii")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})
