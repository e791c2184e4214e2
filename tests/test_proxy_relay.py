"""The proxy's application in process, against a recording upstream on loopback (a real
HTTP server: aiohttp's, in a thread): exactly what crosses it (headers, query strings,
bytes)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from windowfit import fit
from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE, ContextOverflowError
from windowfit.models import model_limits
from windowfit.profiles import estimator_for
from windowfit.proxy import ProxyConfig, create_proxy_app

from conversations import conversations

MODEL = "claude-sonnet-4-5"


@dataclass
class Seen:
    """One request as the upstream received it."""

    path_qs: str
    query: str
    headers: dict[str, str]  # names in lower case; repeated names joined by ", "
    content: bytes


SEEN: list[Seen] = []
#: Requests whose head reached the upstream, and those of them whose body never came whole.
STARTED: list[float] = []
INCOMPLETE: list[str] = []

Answer = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


async def _write(
    request: web.BaseRequest, status: int, data: bytes, headers: dict[str, str]
) -> web.StreamResponse:
    """An answer whose body goes out 7 bytes at a time, as from a slow network."""
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = len(data)
    await response.prepare(request)
    for k in range(0, len(data), 7):
        await response.write(data[k : k + 7])
    await response.write_eof()
    return response


async def _recorded(request: web.BaseRequest) -> web.StreamResponse:
    if request.path == "/v1/messages":
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": 7, "output_tokens": 1},
        }
        headers = {
            "content-type": "application/json",
            **{"request-id": "req_1", "connection": "keep-alive", "x-upstream": "yes"},
        }
        return await _write(request, 200, json.dumps(body).encode(), headers)
    headers = {"content-type": "application/json", "x-upstream": "yes"}
    return await _write(request, 404, b'{"error": "nope"}', headers)


class Upstream:
    """A real HTTP server on loopback in a thread of its own that records every request
    in :data:`SEEN` and answers with ``answer``."""

    def __init__(self, answer: Answer = _recorded) -> None:
        self.answer = answer
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.ServerRunner | None = None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        STARTED.append(time.monotonic())
        try:
            content = await request.read()
        except Exception as exc:  # the sender closed the connection before the body's end
            INCOMPLETE.append(type(exc).__name__)
            raise
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        SEEN.append(Seen(request.path_qs, request.query_string, headers, content))
        return await self.answer(request)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._runner = web.ServerRunner(web.Server(self._handle), handle_signals=False)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = self._runner.addresses[0][1]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def __enter__(self) -> Upstream:
        self._thread.start()
        assert self._ready.wait(10), "the recording upstream did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


_UPSTREAM: list[Upstream] = []


@pytest.fixture(scope="module", autouse=True)
def _upstream() -> Iterator[Upstream]:
    with Upstream() as upstream:
        _UPSTREAM.append(upstream)
        yield upstream
        _UPSTREAM.clear()


def _up() -> str:
    return _UPSTREAM[0].url


async def _through(app: Any, path: str, content: Any, headers: dict[str, str]) -> httpx.Response:
    """One request to the proxy's application in process; its upstream pool closed after.
    ``content``: bytes, or an async iterator of chunks (``headers`` give its length)."""
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            return await client.post(path, content=content, headers=headers)
    finally:
        await app.aclose()


def _post(
    path: str, body: Any, headers: dict[str, str] | None = None, **config: Any
) -> httpx.Response:
    SEEN.clear()
    app = create_proxy_app(ProxyConfig(upstreams=(("anthropic", _up()),), **config))
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return asyncio.run(_through(app, path, content, headers or {}))


def _conversation(rounds: int, size: int, word: str = "word ") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for k in range(rounds):
        call = {"type": "tool_use", "id": f"t{k}", "name": "read", "input": {"k": k}}
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": word * size}
        thinking = {"type": "thinking", "thinking": "hmm", "signature": f"sig-{k}"}
        messages += [
            {"role": "assistant", "content": [thinking, call]},
            {"role": "user", "content": [result]},
        ]
    return messages


def test_a_request_that_fits_is_forwarded_byte_for_byte_with_its_headers() -> None:
    raw = (
        b'{"model": "claude-sonnet-4-5",  "max_tokens": 5, '
        b'"messages": [{"role": "user", "content": "hi"}]}'
    )
    headers = {
        "x-api-key": "sk-secret",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "context-management-2025-06-27",
        "x-claude-code-session-id": "s-1",
        "connection": "keep-alive, x-hop",
        "x-hop": "drop me",
        "keep-alive": "timeout=5",
    }
    answer = _post("/v1/messages?beta=true", raw, headers)
    assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "ok"
    (sent,) = SEEN
    assert sent.content == raw
    assert sent.path_qs == "/v1/messages?beta=true"
    for name in ("x-api-key", "anthropic-version", "anthropic-beta", "x-claude-code-session-id"):
        assert sent.headers[name] == headers[name]
    assert "x-hop" not in sent.headers and "keep-alive" not in sent.headers
    assert sent.headers["host"] == _up().removeprefix("http://")
    assert sent.headers["content-length"] == str(len(raw))
    # the client's own user-agent and accept-encoding, none of the proxy's HTTP client
    assert sent.headers["user-agent"].startswith("python-httpx/")
    assert "aiohttp" not in json.dumps(sent.headers)
    assert answer.headers["x-upstream"] == "yes" and answer.headers["request-id"] == "req_1"
    assert answer.headers["x-windowfit-stage"] == "0"


def test_fitting_changes_only_what_it_must() -> None:
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "metadata": {"user_id": "u"},
        "messages": _conversation(12, 800),
    }
    answer = _post("/v1/messages", body, budget=4_000)
    assert answer.status_code == 200
    assert int(answer.headers["x-windowfit-stage"]) >= 1
    assert int(answer.headers["x-windowfit-cleared"]) >= 1
    sent = json.loads(SEEN[0].content)
    for key in ("model", "max_tokens", "system", "context_management", "metadata"):
        assert sent[key] == body[key]
    assert list(sent) == list(body)  # the same fields in the same order
    signatures = [
        b["signature"]
        for m in sent["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "thinking"
    ]
    assert signatures and all(s.startswith("sig-") for s in signatures)
    assert int(answer.headers["x-windowfit-tokens-after"]) <= 4_000


@pytest.mark.parametrize(
    "raw",
    [b"{oops", b"[1, 2]", b'{"model": "m", "messages": [{"role": "robot", "content": "x"}]}'],
    ids=["not-json", "not-an-object", "bad-role"],
)
def test_what_windowfit_cannot_read_goes_unchanged(raw: bytes) -> None:
    answer = _post("/v1/messages", raw, budget=1_000)
    assert answer.status_code == 200
    assert SEEN[0].content == raw
    assert answer.headers["x-windowfit-skipped"] in ("not-json", "unreadable")


def test_other_paths_pass_through_to_the_upstream() -> None:
    answer = _post("/v1/files?limit=2", b"abc", {"x-api-key": "k"})
    assert answer.status_code == 404 and answer.json() == {"error": "nope"}
    assert SEEN[0].content == b"abc" and SEEN[0].query == "limit=2"
    assert "x-windowfit-stage" not in answer.headers


def test_admin_routes_need_the_key_beyond_loopback() -> None:
    async def get(app: Any, headers: dict[str, str]) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            return await client.get("/metrics", headers=headers)

    closed = create_proxy_app(ProxyConfig(), loopback=False)
    assert asyncio.run(get(closed, {})).status_code == 403
    keyed = create_proxy_app(ProxyConfig(admin_key="adm"), loopback=False)
    assert asyncio.run(get(keyed, {})).status_code == 401
    assert asyncio.run(get(keyed, {"authorization": "Bearer wrong"})).status_code == 401
    for headers in ({"authorization": "Bearer adm"}, {"x-windowfit-admin-key": "adm"}):
        assert asyncio.run(get(keyed, headers)).status_code in (200, 404)  # 404: no metrics yet
    assert asyncio.run(get(create_proxy_app(ProxyConfig()), {})).status_code in (200, 404)


async def _slow_stream(request: web.BaseRequest) -> web.StreamResponse:
    """An SSE answer in two parts, a second apart."""
    response = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await response.prepare(request)
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}
    await response.write(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
    await asyncio.sleep(1.0)
    await response.write(b'event: message_stop\ndata: {"type": "message_stop"}\n\n')
    await response.write_eof()
    return response


def test_a_stream_is_relayed_as_it_arrives_and_watched_for_usage() -> None:
    import time

    from windowfit.proxy import ProxyServer

    with (
        Upstream(_slow_stream) as slow,
        ProxyServer(ProxyConfig(upstreams=(("anthropic", slow.url),), budget=1_000)) as proxy,
    ):
        body = {
            "model": MODEL,
            "max_tokens": 5,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        started = time.monotonic()
        with httpx.stream("POST", f"{proxy.url}/v1/messages", json=body, timeout=10) as answer:
            pieces = answer.iter_raw()
            first = next(pieces)
            first_at = time.monotonic() - started
            rest = b"".join(pieces)
            total = time.monotonic() - started
        assert b"message_start" in first and b"message_stop" in rest
        # the first event did not wait for the second (sent a second later); timed from
        # the first event, not the start, which on a loaded machine includes the
        # client's own start-up
        assert total - first_at > 0.8
        deadline = time.monotonic() + 2  # learning follows the stream's last byte
        while not len(proxy.app.learning) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(proxy.app.learning) == 1  # its usage was seen on the way


def test_two_proxies_fit_the_same_request_to_the_same_bytes() -> None:
    body = {"model": MODEL, "max_tokens": 100, "messages": _conversation(10, 600)}
    _post("/v1/messages", body, budget=3_000)
    first = SEEN[0].content
    _post("/v1/messages", body, budget=3_000)  # a new application: nothing kept
    assert SEEN[0].content == first and len(first) < len(json.dumps(body))


@settings(max_examples=25)
@given(conversation=conversations(), budget=st.integers(min_value=300, max_value=6_000))
def test_what_the_proxy_forwards_is_what_fit_decides(
    conversation: tuple[str, list[dict[str, Any]]], budget: int
) -> None:
    """For any valid conversation: the bytes as sent when it fits, else the body with
    fit's messages in place (every other field as sent), or the API's own 400 (fitted to
    the model's window, as :func:`windowfit.fit` does with ``limit``)."""
    fmt, messages = conversation
    path = "/v1/messages" if fmt == "anthropic" else "/v1/chat/completions"
    model = MODEL if fmt == "anthropic" else "gpt-4o"
    body = {"model": model, "max_tokens": 50, "messages": messages, "metadata": {"k": 1}}
    raw = json.dumps(body).encode()
    limits = model_limits(model)
    assert limits is not None
    hard = limits.context_window - 50  # the window less the answer's max_tokens
    try:
        expected = fit(
            messages,
            budget=budget,
            format=fmt,
            estimator=estimator_for(model=model),
            limit=hard,
        )
    except ContextOverflowError:
        expected = None
    SEEN.clear()
    app = create_proxy_app(
        ProxyConfig(upstreams=(("anthropic", _up()), ("openai", _up())), budget=budget)
    )
    answer = asyncio.run(_through(app, path, raw, {}))
    if expected is None:
        assert answer.status_code == 400 and not SEEN
        assert CONTEXT_OVERFLOW_MESSAGE in answer.json()["error"]["message"]
        return
    (sent,) = SEEN
    if expected.report.stage == 0:
        assert sent.content == raw
    else:
        assert json.loads(sent.content) == {**body, "messages": expected.messages}
    assert answer.headers["x-windowfit-stage"] == str(expected.report.stage)


@pytest.mark.parametrize("name", ["anthropic", "openai", "openai-responses", "gemini"])
def test_each_fitted_dialect_names_a_configured_upstream_and_its_error_shape(name: str) -> None:
    from windowfit.formats import DIALECTS
    from windowfit.proxy._config import DEFAULT_UPSTREAMS

    dialect = DIALECTS[name]
    assert dialect.provider in DEFAULT_UPSTREAMS
    for status in (413, 502, 504):
        body = dialect.status_error(status, "windowfit proxy: said so")
        assert body["error"]["message"] == "windowfit proxy: said so"
        assert json.loads(json.dumps(body)) == body


# --------------------------------------------------------------------------- early forwarding


def _in_parts(raw: bytes, parts: int, sent: list[float]) -> Any:
    """``raw`` as a client sending it in ``parts``, 0.2 s apart; ``sent`` gets the time
    its last part went."""

    async def chunks() -> Any:
        step = len(raw) // parts + 1
        for k in range(0, len(raw), step):
            if k:
                await asyncio.sleep(0.2)
            if k + step >= len(raw):
                sent.append(time.monotonic())
            yield raw[k : k + step]

    return chunks()


def _settled() -> None:
    """Wait until every request the upstream started has ended one way or the other."""
    deadline = time.monotonic() + 5
    while len(STARTED) > len(SEEN) + len(INCOMPLETE) and time.monotonic() < deadline:
        time.sleep(0.02)


EARLY_METRICS: list[str] = []


def _early_post(body: dict[str, Any], **config: Any) -> tuple[httpx.Response, bytes, float]:
    """``body`` sent in 4 parts to a new proxy application; its ``/metrics`` text after is
    in :data:`EARLY_METRICS`."""
    from windowfit.proxy._early import EARLY_MIN_BYTES

    raw = json.dumps(body).encode()
    assert len(raw) > EARLY_MIN_BYTES  # large enough to go upstream as it arrives
    SEEN.clear()
    STARTED.clear()
    INCOMPLETE.clear()
    sent: list[float] = []
    app = create_proxy_app(ProxyConfig(upstreams=(("anthropic", _up()),), **config))
    headers = {"content-length": str(len(raw)), "content-type": "application/json"}
    answer = asyncio.run(_through(app, "/v1/messages", _in_parts(raw, 4, sent), headers))
    _settled()
    EARLY_METRICS[:] = [app.observers.metrics.render()]
    return answer, raw, sent[0]


def test_a_large_body_that_fits_goes_upstream_while_it_arrives() -> None:
    body = {"model": MODEL, "max_tokens": 100, "messages": _conversation(18, 4_000)}
    answer, raw, last_part = _early_post(body)
    assert answer.status_code == 200 and answer.headers["x-windowfit-stage"] == "0"
    (sent,) = SEEN
    assert sent.content == raw and sent.headers["content-length"] == str(len(raw))
    assert sent.headers["content-type"] == "application/json"
    assert len(STARTED) == 1 and not INCOMPLETE
    assert STARTED[0] < last_part  # the upstream had the request before the client ended it
    (text,) = EARLY_METRICS
    assert 'early_total{route="/v1/messages",outcome="released"} 1' in text
    before = re.search(
        r'early_body_bytes_total\{route="/v1/messages",part="before_end"\} (\d+)', text
    )
    assert before is not None and len(raw) // 2 <= int(before.group(1)) < len(raw)


def test_a_large_body_that_fitting_changes_never_reaches_the_upstream_whole() -> None:
    """Dense text (digits: about 1.2 bytes a token) passes the bytes-per-token guess, so
    the request is begun while the body arrives; fitting changes it, so that request is
    abandoned short of its end and the fitted body goes on a request of its own, the
    only one the upstream reads to its end."""
    body = {"model": MODEL, "max_tokens": 100, "messages": _conversation(40, 4_000, "7 ")}
    answer, raw, _ = _early_post(body, budget=120_000)
    assert answer.status_code == 200 and int(answer.headers["x-windowfit-stage"]) >= 1
    (sent,) = SEEN
    assert len(sent.content) < len(raw) and json.loads(sent.content)["model"] == MODEL
    assert len(STARTED) == 2 and len(INCOMPLETE) == 1  # begun early, then abandoned
    assert 'early_total{route="/v1/messages",outcome="abandoned"} 1' in EARLY_METRICS[0]


def test_a_large_body_nothing_fits_is_refused_and_never_reaches_the_upstream_whole() -> None:
    body = {"model": MODEL, "max_tokens": 64_000, "messages": _conversation(2, 100)}
    # The task, always kept: beyond the 136k the 200k window leaves beside the answer by
    # any count (a real tokenizer gives about one token per "7 "; an estimate may only err
    # high of that), yet dense enough (2 bytes a token) that the body is begun upstream
    # while it arrives.
    body["messages"][0]["content"] = "7 " * 190_000
    answer, _, _ = _early_post(body)
    assert answer.status_code == 400
    assert CONTEXT_OVERFLOW_MESSAGE in answer.json()["error"]["message"]
    assert not SEEN and len(STARTED) == len(INCOMPLETE) == 1


def test_a_large_body_far_beyond_its_budget_is_received_whole_first() -> None:
    """At more bytes than 3 a token of the budget, fitting will most likely change the
    body: no upload is begun that would be abandoned."""
    body = {"model": MODEL, "max_tokens": 100, "messages": _conversation(24, 4_000)}
    answer, raw, last_part = _early_post(body, budget=4_000)
    assert answer.status_code == 200 and int(answer.headers["x-windowfit-stage"]) >= 1
    assert len(STARTED) == len(SEEN) == 1 and not INCOMPLETE
    assert STARTED[0] > last_part and len(SEEN[0].content) < len(raw)
    assert "early_total{" not in EARLY_METRICS[0]


@pytest.mark.parametrize(
    ("chunk", "model"),
    [
        (b'{"model": "claude-sonnet-4-5", "messages": [', "claude-sonnet-4-5"),
        (b' {"model":"gpt-4o","input":', "gpt-4o"),
        (b'{"messages": [{"model": "x"}], "model": "gpt-4o"}', None),  # not the first field
        (b'{"model": "a\\"b"}', None),
        (b"[1, 2]", None),
    ],
)
def test_the_model_is_read_only_from_the_first_field(chunk: bytes, model: str | None) -> None:
    from windowfit.proxy._early import leading_model

    assert leading_model(chunk) == model


# --------------------------------------------------------------------------- what is kept


def test_only_large_conversations_are_kept_between_requests_and_answers_do_not_change() -> None:
    from windowfit.formats import DIALECTS
    from windowfit.proxy._fit import KEPT_MIN_BYTES, RequestFitter
    from windowfit.proxy._learning import ConversationLearning

    config = ProxyConfig(budget=3_000)
    kept = RequestFitter(config, ConversationLearning())
    small = {"model": MODEL, "max_tokens": 100, "messages": _conversation(3, 50)}
    large = {"model": MODEL, "max_tokens": 100, "messages": _conversation(30, 800)}
    grown = {**large, "messages": _conversation(32, 800)}
    for body, is_large in ((small, False), (large, True), (grown, True)):
        raw = json.dumps(body).encode()
        assert (len(raw) >= KEPT_MIN_BYTES) is is_large
        seen = kept.fit(DIALECTS["anthropic"], raw)
        fresh = RequestFitter(config, ConversationLearning()).fit(DIALECTS["anthropic"], raw)
        assert seen.body == fresh.body and seen.report == fresh.report
        assert (kept.fitter.cached_bytes > 0) is is_large  # the small one left nothing
    assert kept.fitter.folds_reused >= 1  # the grown conversation continued its fold


def test_a_body_that_names_its_model_late_goes_early_after_one_that_named_it() -> None:
    """The Python SDKs write ``model`` after ``messages``: the route's last model is the
    guess, so the second request of such a client is sent on as it arrives."""
    SEEN.clear()
    STARTED.clear()
    INCOMPLETE.clear()
    app = create_proxy_app(ProxyConfig(upstreams=(("anthropic", _up()),)))
    first = {"max_tokens": 100, "messages": _conversation(1, 10), "model": MODEL}
    asyncio.run(_through(app, "/v1/messages", json.dumps(first).encode(), {}))
    large = {"max_tokens": 100, "messages": _conversation(18, 4_000), "model": MODEL}
    raw = json.dumps(large).encode()
    sent: list[float] = []
    headers = {"content-length": str(len(raw))}
    answer = asyncio.run(_through(app, "/v1/messages", _in_parts(raw, 4, sent), headers))
    _settled()
    assert answer.status_code == 200 and SEEN[-1].content == raw
    assert STARTED[-1] < sent[0]  # begun before the client had sent it all
    assert 'outcome="released"} 1' in app.observers.metrics.render()
