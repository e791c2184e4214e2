"""The real google-genai SDK through windowfit.wrap, over real HTTP against serve-sim's
Gemini door on 127.0.0.1 (sync, async and streaming), and the door itself."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

import windowfit
from windowfit.classify import ErrorKind, classify_error
from windowfit.retry import RetryPolicy
from windowfit.server import SimConfig, SimServer
from windowfit.wrap import UsageRecord, wrap

WINDOW = 6_000
MAX_TOKENS = 300
MODEL = "sim-6k"
KEY = "AIza-gemini-test-0001"
FAST = RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=1.0, jitter=False)
CHAPTER = "Harker wrote in his journal by candlelight while the wolves howled outside. " * 24

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
CONFIG = types.GenerateContentConfig(
    tools=[TOOL],
    max_output_tokens=MAX_TOKENS,
    system_instruction="You read books and say who the narrator is.",
)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    config = SimConfig(
        context_window=WINDOW, tool_rounds=1_000, cache_min_tokens=0, cache_increment=1
    )
    with SimServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def sim_auth() -> Iterator[SimServer]:
    with SimServer(SimConfig(context_window=WINDOW, api_keys=(KEY,))) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(request: pytest.FixtureRequest) -> None:
    for name in ("sim", "sim_auth"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()


def raw_client(server: SimServer, key: str = "k") -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=server.url))


def make(server: SimServer, records: list[UsageRecord] | None = None, **options: Any) -> Any:
    options.setdefault("windows", {MODEL: WINDOW})
    options.setdefault("retry", FAST)
    if records is not None:
        options["on_usage"] = records.append
    return wrap(raw_client(server, options.pop("key", "k")), **options)


def served(server: SimServer) -> list[dict[str, Any]]:
    return list(server.stats()["log"])


def answer(history: list[Any], reply: Any) -> None:
    """Append the model's turn and the response to its function call (as SDK objects)."""
    content = reply.candidates[0].content
    history.append(content)
    call = content.parts[0].function_call
    assert call is not None and call.name == "read_chapter"
    response = {"text": f"Chapter {call.args['number']}. {CHAPTER}"}
    history.append(
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name=call.name, response=response)],
        )
    )


def start() -> list[Any]:
    return [types.Content(role="user", parts=[types.Part(text="Read every chapter.")])]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_agent_loop_is_fitted_under_the_window_and_usage_flows_back(
    sim: SimServer, mode: str
) -> None:
    records: list[UsageRecord] = []
    client = make(sim, records)
    history = start()
    snapshots: list[Any] = []

    async def run() -> None:
        for _ in range(16):
            if mode == "sync":
                reply = client.models.generate_content(model=MODEL, contents=history, config=CONFIG)
            else:
                reply = await client.aio.models.generate_content(
                    model=MODEL, contents=history, config=CONFIG
                )
            snapshots.append([c.model_dump() for c in history])
            answer(history, reply)

    asyncio.run(run())
    log = served(sim)
    assert len(log) == 16 and all(e["status"] == 200 for e in log)
    # What the server counted with its real tokenizer stayed inside the window...
    assert max(e["tokens"] for e in log) <= WINDOW
    # ...though the history grew well past it, so fitting had work to do.
    unfitted = windowfit.fit(
        [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in history],
        budget=10**9,
        format="gemini",
    )
    assert unfitted.report.tokens_before > WINDOW
    assert client.windowfit.stats.fitted > 0
    # The caller's history is never changed: earlier snapshots are prefixes of it.
    for snap in snapshots:
        assert [c.model_dump() for c in history[: len(snap)]] == snap
    # Usage came back for every answer, with the prefix cache read.
    assert len(records) == 16
    assert [r.input_tokens for r in records] == [e["tokens"] for e in log]
    assert any(r.cache_read_tokens > 0 for r in records)
    assert all(r.provider == "gemini" and r.model == MODEL for r in records)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_streams_are_fitted_and_report_usage(sim: SimServer, mode: str) -> None:
    records: list[UsageRecord] = []
    client = make(sim, records)
    history = start()
    plain = make(sim)
    for _ in range(3):
        answer(history, plain.models.generate_content(model=MODEL, contents=history, config=CONFIG))
    sim.reset()
    text_config = types.GenerateContentConfig(max_output_tokens=MAX_TOKENS)

    async def run() -> list[Any]:
        if mode == "sync":
            return list(
                client.models.generate_content_stream(
                    model=MODEL, contents=history, config=text_config
                )
            )
        stream = await client.aio.models.generate_content_stream(
            model=MODEL, contents=history, config=text_config
        )
        return [chunk async for chunk in stream]

    chunks = asyncio.run(run())
    assert len(chunks) > 1  # the answer's text came in pieces
    assert "".join(c.text or "" for c in chunks).startswith("Done: I read 3 tool results")
    (entry,) = served(sim)
    assert entry["stream"] is True and entry["route"] == "gemini.stream"
    assert len(records) == 1 and records[0].input_tokens == entry["tokens"]
    assert records[0].output_tokens == entry["output_tokens"] > 0


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_a_hopeless_request_raises_before_sending(sim: SimServer, mode: str) -> None:
    client = make(sim)
    contents = [{"role": "user", "parts": [{"text": "word " * 9_000}]}]
    with pytest.raises(windowfit.ContextOverflowError) as caught:
        if mode == "sync":
            client.models.generate_content(model=MODEL, contents=contents)
        elif mode == "stream":
            client.models.generate_content_stream(model=MODEL, contents=contents)
        else:
            asyncio.run(client.aio.models.generate_content(model=MODEL, contents=contents))
    assert caught.value.limit is not None and caught.value.tokens is not None
    assert caught.value.tokens > caught.value.limit
    assert sim.stats()["requests"] == 0


def test_the_servers_overflow_is_a_context_overflow_error_and_not_retried(
    sim: SimServer,
) -> None:
    """A window windowfit believes larger than the server's: the request is sent and the
    server's Gemini 400 is recognised, with its counts, after one HTTP request."""
    client = make(sim, windows={MODEL: 100_000})
    contents = [{"role": "user", "parts": [{"text": "word " * 9_000}]}]
    with pytest.raises(windowfit.ContextOverflowError) as caught:
        client.models.generate_content(model=MODEL, contents=contents)
    assert caught.value.limit == WINDOW
    assert caught.value.tokens == served(sim)[0]["tokens"]
    assert sim.stats()["requests"] == 1


def test_the_raw_sdk_error_classifies_as_overflow(sim: SimServer) -> None:
    contents = [{"role": "user", "parts": [{"text": "word " * 9_000}]}]
    client = raw_client(sim)
    with pytest.raises(genai_errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents=contents)
    info = classify_error(caught.value)
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert info.limit == WINDOW and info.prompt_tokens == served(sim)[0]["tokens"]


@pytest.mark.parametrize("fault", ["429:retry_after=0", "503", "500", "drop"])
def test_transient_errors_are_retried(sim: SimServer, fault: str) -> None:
    sim.add_faults([fault])
    client = make(sim)
    reply = client.models.generate_content(model=MODEL, contents="hello")
    assert reply.text
    assert sim.stats()["requests"] == 2
    assert client.windowfit.stats.retries == 1


def test_a_stream_is_retried_until_its_first_chunk(sim: SimServer) -> None:
    sim.add_faults(["503"])
    client = make(sim)
    chunks = list(client.models.generate_content_stream(model=MODEL, contents="hello"))
    assert chunks and sim.stats()["requests"] == 2


def test_dicts_in_either_spelling_are_fitted_and_left_as_they_were(sim: SimServer) -> None:
    big = "lorem ipsum dolor " * 150  # a result of about 1,100 tokens by the largest count
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "go"}]}]
    for k in range(8):
        key = "function_call" if k % 2 else "functionCall"
        history.append({"role": "model", "parts": [{key: {"name": "read", "args": {"n": k}}}]})
        answer_key = "function_response" if k % 2 else "functionResponse"
        history.append(
            {"role": "user", "parts": [{answer_key: {"name": "read", "response": {"out": big}}}]}
        )
    before = copy.deepcopy(history)
    client = make(sim)
    reply = client.models.generate_content(model=MODEL, contents=history)
    assert reply.text
    assert history == before
    assert client.windowfit.stats.last_report.stage >= 1
    assert served(sim)[0]["tokens"] <= WINDOW


def test_unknown_model_needs_a_window(sim: SimServer) -> None:
    client = wrap(raw_client(sim))
    with pytest.raises(windowfit.SettingsError):
        client.models.generate_content(model="not-a-gemini", contents="hi")
    # A known Gemini model, named as a resource, finds its row in the table.
    limits = windowfit.models.model_limits("gemini-2.5-flash")
    assert limits is not None and limits.context_window == 1_048_576


# ------------------------------------------------------------------------- the door


def post(server: SimServer, path: str, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=30, **kwargs)


HELLO = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}


def test_keys_by_header_or_query(sim_auth: SimServer) -> None:
    path = f"/v1beta/models/{MODEL}:generateContent"
    missing = post(sim_auth, path, HELLO)
    assert missing.status_code == 403
    assert missing.json()["error"]["status"] == "PERMISSION_DENIED"
    wrong = post(sim_auth, path, HELLO, headers={"x-goog-api-key": "nope"})
    assert wrong.status_code == 400
    assert wrong.json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    assert post(sim_auth, path, HELLO, headers={"x-goog-api-key": KEY}).status_code == 200
    assert post(sim_auth, f"{path}?key={KEY}", HELLO).status_code == 200
    wrong_client, right_client = raw_client(sim_auth, "nope"), raw_client(sim_auth, KEY)
    with pytest.raises(genai_errors.ClientError):
        wrong_client.models.generate_content(model=MODEL, contents="hi")
    assert right_client.models.generate_content(model=MODEL, contents="hi").text


def test_stream_without_alt_sse_is_a_json_array(sim: SimServer) -> None:
    got = post(sim, f"/v1beta/models/{MODEL}:streamGenerateContent", HELLO)
    assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
    chunks = json.loads(got.content)
    assert isinstance(chunks, list) and len(chunks) > 1
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["promptTokenCount"] == served(sim)[0]["tokens"]
    assert all("usageMetadata" not in c for c in chunks[:-1])
    sse = post(sim, f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse", HELLO)
    events = [line[6:] for line in sse.text.splitlines() if line.startswith("data: ")]
    # The same chunks (the second request reads the first from the prefix cache).
    assert [json.loads(e)["candidates"] for e in events] == [c["candidates"] for c in chunks]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"contents": []}, "contents is not specified"),
        ({"contents": [{"role": "bot", "parts": [{"text": "x"}]}]}, "contents[0].role"),
        ({**HELLO, "temperature": 1}, 'Unknown name "temperature"'),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "x"}]},
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {"name": "f", "response": {}}}],
                    },
                ]
            },
            "function response turn comes immediately after a function call turn",
        ),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "x"}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
                    {"role": "user", "parts": [{"text": "y"}]},
                ]
            },
            "the number of function response parts is equal",
        ),
    ],
)
def test_bad_requests_are_refused_in_geminis_words(sim: SimServer, body: Any, words: str) -> None:
    got = post(sim, f"/v1beta/models/{MODEL}:generateContent", body)
    assert got.status_code == 400
    error = got.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
    assert words in error["message"]


def test_not_json_and_unknown_methods(sim: SimServer) -> None:
    bad = httpx.post(sim.url + f"/v1beta/models/{MODEL}:generateContent", content=b"{", timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
    unknown = post(sim, f"/v1beta/models/{MODEL}:embedContent", HELLO)
    assert unknown.status_code == 404 and unknown.json()["error"]["status"] == "NOT_FOUND"


def test_tool_choice_and_output_limit(sim: SimServer) -> None:
    body = {
        **HELLO,
        "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["b"]}},
    }
    got = post(sim, f"/v1beta/models/{MODEL}:generateContent", body).json()
    assert got["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "b"
    limited = {**HELLO, "generationConfig": {"maxOutputTokens": 3}}
    got = post(sim, f"/v1/models/{MODEL}:generateContent", limited).json()
    assert got["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert got["usageMetadata"]["candidatesTokenCount"] == 3


@pytest.mark.parametrize("alt", ["?alt=sse", ""])
def test_a_fault_in_the_middle_of_a_stream(sim: SimServer, alt: str) -> None:
    sim.add_faults(["500:after_events=1,route=gemini.stream"])
    got = post(sim, f"/v1beta/models/{MODEL}:streamGenerateContent{alt}", HELLO)
    assert got.status_code == 200  # the status line went out before the fault
    if alt:
        events = [json.loads(x[6:]) for x in got.text.splitlines() if x.startswith("data: ")]
    else:
        events = json.loads(got.content)
    assert len(events) == 2 and "candidates" in events[0]
    assert events[1]["error"]["status"] == "INTERNAL"


def test_resource_names_find_the_model(sim: SimServer) -> None:
    client = make(sim)
    reply = client.models.generate_content(model=f"models/{MODEL}", contents="hello")
    assert reply.text and client.windowfit.stats.last_usage.model == MODEL
