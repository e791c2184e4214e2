"""``windowfit proxy``'s Gemini routes over real HTTP on 127.0.0.1: the real google-genai
SDK (sync, async, streaming) talks to the proxy, the proxy to ``serve-sim``'s Gemini door
(which counts with a real tokenizer and refuses what does not fit in Gemini's words)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

import windowfit
from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE
from windowfit.formats import gemini
from windowfit.proxy import ProxyConfig, ProxyServer
from windowfit.proxy._app import fitted_route, path_model, redact_key, route_label
from windowfit.proxy._jsonarray import JsonArrayWatcher
from windowfit.server import SimConfig, SimServer

WINDOW = 8_000
BUDGET = 5_000
MODEL = "gemini-2.5-flash"  # known to windowfit.models: 1,048,576 tokens, 65,536 out
KEY = "AIza-proxy-gemini-secret-0042"
CHAPTER = "Harker wrote in his journal by candlelight while the wolves howled outside. " * 48

TOOL = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="read_chapter",
            description="Read one chapter of the book.",
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"number": types.Schema(type=types.Type.INTEGER)},
                required=["number"],
            ),
        )
    ]
)
CONFIG = types.GenerateContentConfig(tools=[TOOL], max_output_tokens=300)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    config = SimConfig(
        context_window=WINDOW, tool_rounds=1_000, api_keys=(KEY,), reserve_output=False
    )
    with SimServer(config) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


def _proxy(sim: SimServer, **changes: Any) -> ProxyServer:
    return ProxyServer(ProxyConfig(upstreams=(("gemini", sim.url),), **changes))


@pytest.fixture(scope="module")
def proxy(sim: SimServer) -> Iterator[ProxyServer]:
    with _proxy(sim, budget=BUDGET) as server:
        yield server


def _client(url: str, key: str = KEY, api_version: str | None = None) -> genai.Client:
    options = types.HttpOptions(base_url=url, api_version=api_version)
    return genai.Client(api_key=key, http_options=options)


def _served(sim: SimServer) -> list[dict[str, Any]]:
    return list(sim.stats()["log"])


def _rejected(sim: SimServer) -> int:
    return int(sim.stats()["errors"].get("context_overflow", 0))


def _answer(history: list[Any], reply: types.GenerateContentResponse) -> None:
    content = reply.candidates[0].content if reply.candidates else None
    assert content is not None and content.parts
    history.append(content)
    call = content.parts[0].function_call
    assert call is not None and call.name == "read_chapter" and call.args is not None
    response = {"text": f"Chapter {call.args['number']}. {CHAPTER}"}
    history.append(
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name=call.name, response=response)],
        )
    )


def _joined(chunks: list[types.GenerateContentResponse]) -> types.GenerateContentResponse:
    """The streamed chunks of one answer as one response (the call is in one chunk)."""
    parts = [p for c in chunks if c.candidates for p in (c.candidates[0].content.parts or [])]
    usage = next(c.usage_metadata for c in reversed(chunks) if c.usage_metadata)
    content = types.Content(role="model", parts=parts)
    return types.GenerateContentResponse(
        candidates=[types.Candidate(content=content)], usage_metadata=usage
    )


# --------------------------------------------------------------------------- the loop


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_a_google_genai_loop_is_fitted_under_the_window(
    sim: SimServer, proxy: ProxyServer, mode: str
) -> None:
    client = _client(proxy.url)
    history: list[Any] = [types.Content(role="user", parts=[types.Part(text=f"Read ({mode}).")])]

    async def turn() -> types.GenerateContentResponse:
        if mode == "sync":
            return client.models.generate_content(model=MODEL, contents=history, config=CONFIG)
        if mode == "async":
            return await client.aio.models.generate_content(
                model=MODEL, contents=history, config=CONFIG
            )
        stream = client.models.generate_content_stream(model=MODEL, contents=history, config=CONFIG)
        return _joined(list(stream))

    for _ in range(14):
        reply = asyncio.run(turn())
        assert reply.usage_metadata is not None  # usage flows back through the proxy
        assert (reply.usage_metadata.prompt_token_count or 0) > 0
        _answer(history, reply)
    log = _served(sim)
    assert len(log) == 14 and all(e["status"] == 200 for e in log)
    assert _rejected(sim) == 0
    assert max(e["tokens"] for e in log) <= WINDOW
    assert all(
        e["route"] == ("gemini.stream" if mode == "stream" else "gemini.generate") for e in log
    )
    # The history grew well past the window: the proxy had to fit it.
    unfitted = windowfit.fit(
        [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in history],
        budget=10**9,
        format="gemini",
    )
    assert unfitted.report.tokens_before > 1.5 * WINDOW


@pytest.mark.parametrize("api_version", ["v1beta", "v1"])
def test_fitting_reports_headers_on_both_api_versions(
    sim: SimServer, proxy: ProxyServer, api_version: str
) -> None:
    client = _client(proxy.url, api_version=api_version)
    long = [{"role": "user", "parts": [{"text": "Who narrates?"}]}]
    for n in range(8):  # a call / response pair per chapter: over the budget
        long.append(
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "read_chapter", "args": {"number": n}}}],
            }
        )
        response = {"name": "read_chapter", "response": {"text": CHAPTER}}
        long.append({"role": "user", "parts": [{"functionResponse": response}]})
    reply = client.models.generate_content(model=MODEL, contents=long, config=CONFIG)
    headers = reply.sdk_http_response.headers if reply.sdk_http_response else {}
    assert int(headers["x-windowfit-stage"]) >= 1
    assert (
        int(headers["x-windowfit-tokens-after"])
        <= BUDGET
        < int(headers["x-windowfit-tokens-before"])
    )
    (entry,) = _served(sim)
    assert entry["status"] == 200 and entry["tokens"] <= WINDOW


def test_the_model_in_the_path_gives_the_budget(sim: SimServer) -> None:
    """No budget configured: a known model is fitted to its window from the model table,
    one the table does not know is forwarded unfitted, saying so."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}
    with _proxy(sim) as server:
        known = httpx.post(
            f"{server.url}/v1beta/models/{MODEL}:generateContent",
            json=body,
            headers={"x-goog-api-key": KEY},
        )
        unknown = httpx.post(
            f"{server.url}/v1beta/models/sim-unknown-7:generateContent",
            json=body,
            headers={"x-goog-api-key": KEY},
        )
        metrics = server.app.observers.metrics.render()
    assert known.status_code == 200 and known.headers["x-windowfit-stage"] == "0"
    assert unknown.status_code == 200 and unknown.headers["x-windowfit-skipped"] == "unknown-model"
    assert "/v1beta/models/*:generateContent" in metrics  # one series whatever the model
    assert "sim-unknown-7" not in metrics


def test_an_upstream_overflow_is_refitted_once(sim: SimServer) -> None:
    """The model table says 1M tokens; the simulator's window is 8,000: the upstream's
    overflow teaches the proxy the real window, and the one re-fit succeeds."""
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Who narrates?"}]}]
    for n in range(10):
        call = {"functionCall": {"name": "read_chapter", "args": {"number": n}}}
        contents.append({"role": "model", "parts": [call]})
        response = {"functionResponse": {"name": "read_chapter", "response": {"text": CHAPTER}}}
        contents.append({"role": "user", "parts": [response]})
    with _proxy(sim) as server:
        client = _client(server.url)
        reply = client.models.generate_content(model=MODEL, contents=contents, config=CONFIG)
        assert reply.candidates
        assert server.app.refits == 1
        sim_log = _served(sim)
        assert [e["status"] for e in sim_log] == [400, 200]
        assert sim_log[1]["tokens"] <= WINDOW
        # The next request of the conversation is fitted to what was learned: no overflow.
        client.models.generate_content(model=MODEL, contents=contents, config=CONFIG)
        assert [e["status"] for e in _served(sim)] == [400, 200, 200]


@pytest.mark.parametrize("mode", ["sync", "stream"])
def test_nothing_fits_is_refused_in_geminis_words(sim: SimServer, mode: str) -> None:
    """One message larger than the simulator's window: the upstream's overflow states
    the window, the re-fit finds nothing to clear, and the client gets Gemini's 400 with
    windowfit's sentence; the next try is refused without reaching the upstream."""
    contents = [{"role": "user", "parts": [{"text": "word " * 9_000}]}]
    errors = []
    with _proxy(sim) as server:
        client = _client(server.url)
        for _ in range(2):
            with pytest.raises(genai_errors.ClientError) as caught:
                if mode == "sync":
                    client.models.generate_content(model=MODEL, contents=contents)
                else:
                    list(client.models.generate_content_stream(model=MODEL, contents=contents))
            errors.append(caught.value)
    for error in errors:
        assert error.code == 400 and error.status == gemini.OVERFLOW_STATUS
        assert f"exceeds the maximum number of tokens allowed ({WINDOW})" in (error.message or "")
        assert CONTEXT_OVERFLOW_MESSAGE in (error.message or "")
        assert gemini.is_overflow(400, error.details)
    assert [e["status"] for e in _served(sim)] == [400]  # the second never left the proxy


def test_upstream_errors_come_back_verbatim(sim: SimServer, proxy: ProxyServer) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    path = f"/v1beta/models/{MODEL}:generateContent"
    direct = httpx.post(sim.url + path, json=body, headers={"x-goog-api-key": "wrong"})
    proxied = httpx.post(proxy.url + path, json=body, headers={"x-goog-api-key": "wrong"})
    assert direct.status_code == proxied.status_code >= 400
    assert proxied.content == direct.content
    client = _client(proxy.url, key="wrong")
    with pytest.raises(genai_errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents="hi")
    assert caught.value.code == direct.status_code
    assert caught.value.details == direct.json()


# --------------------------------------------------------------------------- streams


def test_the_json_array_stream_is_relayed_as_it_came_and_watched(sim: SimServer) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "Say something long."}]}]}
    path = f"/v1beta/models/{MODEL}:streamGenerateContent"
    direct = httpx.post(f"{sim.url}{path}?key={KEY}", json=body)
    with _proxy(sim, budget=BUDGET) as server:
        with httpx.stream("POST", f"{server.url}{path}?key={KEY}", json=body) as proxied:
            pieces = list(proxied.iter_raw())
            headers = proxied.headers
        # learning and the live page's record follow the stream's end (which the client
        # may see first); the record comes last
        deadline = time.monotonic() + 5
        while not server.app.observers.log.summaries() and time.monotonic() < deadline:
            time.sleep(0.02)
        learned = len(server.app.learning)
        (summary,) = server.app.observers.log.summaries()
    assert direct.status_code == 200 and headers["content-type"].startswith("application/json")
    joined = b"".join(pieces)
    assert json.loads(joined) == json.loads(direct.content)  # the same array
    assert len(json.loads(joined)) > 1
    assert headers["x-windowfit-stage"] == "0"
    assert learned == 1  # the usageMetadata in the array was seen...
    final = json.loads(direct.content)[-1]["usageMetadata"]["promptTokenCount"]
    assert summary.input_tokens == final  # ...and is what the live page shows


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sse_streams_report_usage_through_the_proxy(
    sim: SimServer, proxy: ProxyServer, mode: str
) -> None:
    client = _client(proxy.url)
    contents = f"Tell me a story ({mode})."
    config = types.GenerateContentConfig(max_output_tokens=300)

    async def run() -> list[types.GenerateContentResponse]:
        if mode == "sync":
            return list(
                client.models.generate_content_stream(model=MODEL, contents=contents, config=config)
            )
        stream = await client.aio.models.generate_content_stream(
            model=MODEL, contents=contents, config=config
        )
        return [chunk async for chunk in stream]

    chunks = asyncio.run(run())
    assert len(chunks) > 1
    (entry,) = _served(sim)
    assert entry["stream"] is True
    final = chunks[-1].usage_metadata
    assert final is not None and final.prompt_token_count == entry["tokens"]


# --------------------------------------------------------------------------- keys


def test_the_api_key_is_never_logged(sim: SimServer, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing the proxy's side logs (windowfit, aiohttp, uvicorn), at any level, holds
    the Gemini key of ``?key=``; the proxy's own request lines show it as ``***``. (The
    test's own httpx client logs the URLs it calls, key and all: those lines are the
    client's, not the proxy's, and are left out.)"""
    caplog.set_level(logging.DEBUG)
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with _proxy(sim, budget=BUDGET) as server:
        for route in ("generateContent", "streamGenerateContent"):
            for query in (f"?key={KEY}", f"?alt=sse&key={KEY}"):
                url = f"{server.url}/v1beta/models/{MODEL}:{route}{query}"
                assert httpx.post(url, json=body).status_code == 200
        # unparsed bodies are logged as forwarded unfitted: still no key
        url = f"{server.url}/v1beta/models/{MODEL}:generateContent?key={KEY}"
        httpx.post(url, content=b"{not json")
        good = _client(server.url)
        good.models.generate_content(model=MODEL, contents="hi")
        client = _client(server.url, key=KEY + "-bad")
        with pytest.raises(genai_errors.ClientError):
            client.models.generate_content(model=MODEL, contents="hi")
        stats = server.app.observers.metrics.render()
    clients = ("httpx", "httpcore", "google_genai")
    records = [r for r in caplog.records if not r.name.startswith(clients)]
    assert records  # there was logging to look at (the proxy's request lines at least)
    assert not [r for r in records if KEY in r.getMessage()]
    assert KEY not in stats
    assert any("key=***" in r.getMessage() for r in records if r.name == "windowfit.proxy")


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("path", "model", "label"),
    [
        (f"/v1beta/models/{MODEL}:generateContent", MODEL, "/v1beta/models/*:generateContent"),
        ("/v1/models/gemini-3-pro:streamGenerateContent", "gemini-3-pro", None),
        ("/v1alpha/models/x:generateContent", "x", None),
        ("/v1beta/models/x:countTokens", None, None),
        ("/v1beta/models/a/b:generateContent", None, None),
        ("/v1/messages", None, "/v1/messages"),
    ],
)
def test_gemini_routes(path: str, model: str | None, label: str | None) -> None:
    assert path_model(path) == model
    route = fitted_route("POST", path)
    assert (route is not None) == (model is not None or path == "/v1/messages")
    if model is not None:
        assert route is not None and route[1] == "gemini"
        assert fitted_route("GET", path) is None
    if label is not None:
        assert route_label(path) == label


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "http://h/v1beta/m:generateContent?key=AIza1",
            "http://h/v1beta/m:generateContent?key=***",
        ),
        ("/p?alt=sse&key=AIza1&x=1", "/p?alt=sse&key=***&x=1"),
        ("/p?monkey=1", "/p?monkey=1"),
        ('"POST /p?KEY=abc HTTP/1.1"', '"POST /p?KEY=*** HTTP/1.1"'),
    ],
)
def test_redact_key(text: str, expected: str) -> None:
    assert redact_key(text) == expected


def _array_bytes() -> bytes:
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"parts": [{"text": 'a "quoted" } ] { [ \\ text'}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "more\\"}]}}]},
        {"usageMetadata": {"promptTokenCount": 41, "candidatesTokenCount": 7}},
    ]
    return b"[" + b",\r\n".join(json.dumps(c).encode() for c in chunks) + b"]"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 10_000])
def test_the_array_watcher_finds_usage_whatever_the_chunking(size: int) -> None:
    data = _array_bytes()
    watcher = JsonArrayWatcher(gemini.stream_usage)
    for start in range(0, len(data), size):
        watcher.feed(data[start : start + size])
    assert watcher.elements == 3
    assert watcher.usage is not None and watcher.usage.input_tokens == 41
    assert watcher.usage.output_tokens == 7


def test_the_array_watcher_ignores_what_is_not_an_array() -> None:
    watcher = JsonArrayWatcher(gemini.stream_usage)
    watcher.feed(b'{"usageMetadata": {"promptTokenCount": 3}}]]] not json')
    assert watcher.usage is None


def test_the_proxys_own_errors_are_in_geminis_shape(sim: SimServer) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "word " * 500}]}]}
    path = f"/v1beta/models/{MODEL}:generateContent"
    with _proxy(sim, max_body_bytes=1_000) as server:
        too_large = httpx.post(server.url + path, json=body)
    closed = ProxyConfig(upstreams=(("gemini", "http://127.0.0.1:9"),), connect_timeout=2.0)
    with ProxyServer(closed) as server:
        unreachable = httpx.post(server.url + path, json={"contents": []})
    assert too_large.status_code == 413
    assert too_large.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert too_large.json()["error"]["code"] == 413
    assert unreachable.status_code == 502
    assert unreachable.json()["error"] == {
        "code": 502,
        "message": unreachable.json()["error"]["message"],
        "status": "UNAVAILABLE",
    }
    assert sim.stats()["requests"] == 0
