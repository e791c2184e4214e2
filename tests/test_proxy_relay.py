"""The proxy's application in process, against a recording upstream: exactly what
crosses it (headers, query strings, bytes)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowfit import fit
from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE, ContextOverflowError
from windowfit.models import model_limits
from windowfit.profiles import estimator_for
from windowfit.proxy import ProxyConfig, create_proxy_app

from conversations import conversations

MODEL = "claude-sonnet-4-5"
SEEN: list[httpx.Request] = []


def _upstream(request: httpx.Request) -> httpx.Response:
    SEEN.append(request)
    if request.url.path == "/v1/messages":
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": 7, "output_tokens": 1},
        }
        headers = {"request-id": "req_1", "connection": "keep-alive", "x-upstream": "yes"}
        return httpx.Response(200, json=body, headers=headers)
    return httpx.Response(404, json={"error": "nope"}, headers={"x-upstream": "yes"})


class _Recording(httpx.AsyncBaseTransport):
    """An upstream that answers with :func:`_upstream`, its body left to be streamed (as
    from the network; httpx's MockTransport hands back bodies already read)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        answer = _upstream(request)
        return httpx.Response(
            answer.status_code, headers=answer.headers, stream=_Chunks(answer.content)
        )


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> Any:
        for k in range(0, len(self.data), 7):
            yield self.data[k : k + 7]


def _post(
    path: str, body: Any, headers: dict[str, str] | None = None, **config: Any
) -> httpx.Response:
    SEEN.clear()
    app = create_proxy_app(
        ProxyConfig(upstreams=(("anthropic", "http://up.test"),), **config),
        transport=_Recording(),
    )

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            return await client.post(path, content=content, headers=headers or {})

    return asyncio.run(go())


def _conversation(rounds: int, size: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for k in range(rounds):
        call = {"type": "tool_use", "id": f"t{k}", "name": "read", "input": {"k": k}}
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "word " * size}
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
    assert str(sent.url) == "http://up.test/v1/messages?beta=true"
    for name in ("x-api-key", "anthropic-version", "anthropic-beta", "x-claude-code-session-id"):
        assert sent.headers[name] == headers[name]
    assert "x-hop" not in sent.headers and "keep-alive" not in sent.headers
    assert sent.headers["host"] == "up.test"
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
    assert SEEN[0].content == b"abc" and SEEN[0].url.query == b"limit=2"
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


class _SlowStream(httpx.AsyncBaseTransport):
    """An upstream whose SSE answer comes in two parts, a second apart."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()

        class Parts(httpx.AsyncByteStream):
            async def __aiter__(self) -> Any:
                start = {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}
                yield f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
                await asyncio.sleep(1.0)
                yield b'event: message_stop\ndata: {"type": "message_stop"}\n\n'

        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=Parts())


def test_a_stream_is_relayed_as_it_arrives_and_watched_for_usage() -> None:
    import time

    from windowfit.proxy import ProxyServer

    config = ProxyConfig(upstreams=(("anthropic", "http://up.test"),), budget=1_000)
    with ProxyServer(config, transport=_SlowStream()) as proxy:
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
        assert first_at < 0.8 < total  # the first event did not wait for the second
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
        ProxyConfig(
            upstreams=(("anthropic", "http://up.test"), ("openai", "http://up.test")),
            budget=budget,
        ),
        transport=_Recording(),
    )

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            return await client.post(path, content=raw)

    answer = asyncio.run(go())
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
