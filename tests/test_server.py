"""The simulated provider server, over real HTTP on 127.0.0.1, driven by the official SDKs
(and by raw HTTP for what the SDKs would refuse to send)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from windowfit.classify import ErrorKind, classify_error
from windowfit.formats import get_format
from windowfit.server import Fault, SimConfig, SimServer, fault_from_json, parse_fault
from windowfit.sizing import Sizer
from windowfit.tokenizers import load_backend

WINDOW = 3_000
MAX_BODY = 64 * 1024
KEY = "sk-sim-test-key-0001"

TOOLS = [
    {
        "name": "read_chapter",
        "description": "Read one chapter of the book.",
        "input_schema": {
            "type": "object",
            "properties": {"number": {"type": "integer"}, "mode": {"enum": ["full", "head"]}},
            "required": ["number", "mode"],
        },
    }
]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": t["name"],
            "description": t["description"],
            "parameters": t["input_schema"],
        },
    }
    for t in TOOLS
]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    config = SimConfig(
        context_window=WINDOW,
        max_body_bytes=MAX_BODY,
        tool_rounds=2,
        cache_min_tokens=0,
        cache_increment=1,
        drain_seconds=0.3,
    )
    with SimServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def sim_auth() -> Iterator[SimServer]:
    with SimServer(SimConfig(api_keys=(KEY,))) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(request: pytest.FixtureRequest) -> None:
    for name in ("sim", "sim_auth"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()


def claude(server: SimServer, key: str = "any-key") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0)


def gpt(server: SimServer, key: str = "any-key") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_url, api_key=key, max_retries=0)


def post(server: SimServer, path: str, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"content-type": "application/json", **headers}
    return httpx.post(server.url + path, content=content, headers=sent, timeout=30)


def real_count(messages: list[dict[str, Any]], provider: str, tools: Any = None) -> int:
    sizer = Sizer(load_backend("o200k"), provider)
    spec = get_format(provider)
    return sizer.tools(tools) + sum(
        sizer.size_of(spec.from_message(m, i)).tokens for i, m in enumerate(messages)
    )


# --------------------------------------------------------------------------- answering


def test_anthropic_scripted_model_calls_tools_then_answers(sim: SimServer) -> None:
    client = claude(sim)
    messages: list[Any] = [{"role": "user", "content": "Read the book."}]
    calls = []
    for _ in range(5):
        reply = client.messages.create(
            model="sim-model", max_tokens=200, tools=TOOLS, messages=messages
        )
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason != "tool_use":
            break
        call = next(b for b in reply.content if b.type == "tool_use")
        calls.append(call.input)
        result = {"type": "tool_result", "tool_use_id": call.id, "content": f"chapter {call.id}"}
        messages.append({"role": "user", "content": [result]})
    assert calls == [{"number": 1, "mode": "full"}, {"number": 2, "mode": "head"}]
    assert reply.stop_reason == "end_turn"
    assert reply.content[0].type == "text"
    assert "2 tool results" in reply.content[0].text
    stats = sim.stats()
    assert stats["requests"] == 3
    assert stats["by_status"] == {"200": 3}


def test_openai_scripted_model_calls_tools_then_answers(sim: SimServer) -> None:
    client = gpt(sim)
    messages: list[Any] = [{"role": "user", "content": "Read the book."}]
    names = []
    for _ in range(5):
        reply = client.chat.completions.create(
            model="sim-model", tools=OPENAI_TOOLS, messages=messages
        )
        choice = reply.choices[0]
        messages.append(choice.message)
        if choice.finish_reason != "tool_calls":
            break
        call = choice.message.tool_calls[0]
        names.append(json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "chapter text"})
    assert names == [{"number": 1, "mode": "full"}, {"number": 2, "mode": "head"}]
    assert choice.finish_reason == "stop"
    assert choice.message.content == "Done: I read 2 tool results."
    assert reply.usage is not None and reply.usage.prompt_tokens > 0
    assert sim.stats()["by_route"] == {"openai.chat": 3}


def test_the_same_request_gets_the_same_answer(sim: SimServer) -> None:
    client = claude(sim)
    ask = {
        "model": "m",
        "max_tokens": 100,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "go"}],
    }
    first = client.messages.create(**ask)
    second = client.messages.create(**ask)
    assert first.model_dump(exclude={"usage"}) == second.model_dump(exclude={"usage"})


@pytest.mark.parametrize(
    ("choice", "results", "expect_tool"),
    [
        ({"type": "none"}, 0, False),
        ({"type": "any"}, 5, True),
        ({"type": "tool", "name": "read_chapter"}, 5, True),
        ({"type": "auto"}, 5, False),
    ],
)
def test_tool_choice_is_honoured(
    sim: SimServer, choice: dict[str, Any], results: int, expect_tool: bool
) -> None:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for k in range(results):
        use = {"type": "tool_use", "id": f"t{k}", "name": "read_chapter", "input": {}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "x"}
        messages.append({"role": "user", "content": [result]})
    reply = claude(sim).messages.create(
        model="m",
        max_tokens=100,
        tools=TOOLS,
        tool_choice=choice,
        messages=messages,
    )
    assert (reply.stop_reason == "tool_use") is expect_tool


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_small_max_tokens_cuts_the_answer(sim: SimServer, provider: str) -> None:
    if provider == "anthropic":
        reply = claude(sim).messages.create(
            model="m", max_tokens=3, messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.stop_reason == "max_tokens"
        assert reply.usage.output_tokens == 3
    else:
        answer = gpt(sim).chat.completions.create(
            model="m", max_completion_tokens=3, messages=[{"role": "user", "content": "hi"}]
        )
        assert answer.choices[0].finish_reason == "length"
        assert answer.usage is not None and answer.usage.completion_tokens == 3


# --------------------------------------------------------------------------- counting


RUSSIAN = "Наташа вошла в гостиную и остановилась у окна, глядя на заснеженный сад. " * 4


def test_requests_are_counted_with_a_real_tokenizer(sim: SimServer) -> None:
    messages = [{"role": "user", "content": RUSSIAN}]
    counted = claude(sim).messages.count_tokens(model="m", messages=messages)
    expected = real_count(messages, "anthropic")
    assert counted.input_tokens == expected
    claude(sim).messages.create(model="m", max_tokens=10, messages=messages)
    assert sim.stats()["log"][-1]["tokens"] == expected
    # The script rule counts Cyrillic at 2 characters a token, o200k near 3.3: not the rule.
    from windowfit.tokens import estimate_tokens

    assert expected < estimate_tokens(RUSSIAN)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("with_output", [False, True])
def test_a_request_over_the_window_gets_the_providers_400(
    sim: SimServer, provider: str, with_output: bool
) -> None:
    words = "word " * (WINDOW - 200) if with_output else "word " * (WINDOW + 100)
    messages = [{"role": "user", "content": words}]
    tokens = real_count(messages, provider)
    max_tokens = 500
    error: Any
    if provider == "anthropic":
        with pytest.raises(anthropic.BadRequestError) as caught:
            claude(sim).messages.create(model="m", max_tokens=max_tokens, messages=messages)
        error = caught.value
        assert error.body["type"] == "error"
        assert error.body["error"]["type"] == "invalid_request_error"
        if with_output:
            assert f"{tokens} + {max_tokens} > {WINDOW}" in error.body["error"]["message"]
        else:
            assert error.body["error"]["message"] == (
                f"prompt is too long: {tokens} tokens > {WINDOW} maximum"
            )
    else:
        with pytest.raises(openai.BadRequestError) as caught_openai:
            gpt(sim).chat.completions.create(
                model="m",
                max_tokens=max_tokens,
                messages=messages,
            )
        error = caught_openai.value
        assert error.code == "context_length_exceeded"
        assert error.param == "messages"
        assert f"maximum context length is {WINDOW} tokens" in error.message
    info = classify_error(error)
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert info.limit == WINDOW
    assert info.prompt_tokens == tokens
    stats = sim.stats()
    assert stats["errors"] == {"context_overflow": 1}
    assert stats["log"][-1]["tokens"] == tokens


# --------------------------------------------------------------------------- prefix cache


def test_anthropic_cache_reads_at_breakpoints_only(sim: SimServer) -> None:
    client = claude(sim)
    first = [{"role": "user", "content": [{"type": "text", "text": "long context " * 40}]}]
    marked = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "long context " * 40,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        }
    ]
    plain = client.messages.create(model="m", max_tokens=10, messages=first)
    again = client.messages.create(model="m", max_tokens=10, messages=first)
    assert plain.usage.cache_read_input_tokens == again.usage.cache_read_input_tokens == 0
    assert again.usage.cache_creation_input_tokens == 0
    write = client.messages.create(model="m", max_tokens=10, messages=marked)
    assert write.usage.cache_creation_input_tokens == plain.usage.input_tokens
    assert write.usage.input_tokens == 0
    longer = [
        *marked,
        {"role": "assistant", "content": "ok"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}],
        },
    ]
    read = client.messages.create(model="m", max_tokens=10, messages=longer)
    assert read.usage.cache_read_input_tokens == plain.usage.input_tokens
    total = real_count(longer, "anthropic")
    assert read.usage.cache_creation_input_tokens == total - plain.usage.input_tokens
    # Another key has its own cache.
    other = claude(sim, key="another-key").messages.create(
        model="m", max_tokens=10, messages=longer
    )
    assert other.usage.cache_read_input_tokens == 0
    stats = sim.stats()
    assert stats["cache_read_tokens"] == plain.usage.input_tokens


def test_anthropic_top_level_cache_control_marks_the_last_block(sim: SimServer) -> None:
    client = claude(sim)
    messages = [{"role": "user", "content": "a question " * 30}]
    client.messages.create(
        model="m", max_tokens=10, messages=messages, cache_control={"type": "ephemeral"}
    )
    reply = client.messages.create(
        model="m",
        max_tokens=10,
        messages=[
            *messages,
            {"role": "assistant", "content": "yes"},
            {"role": "user", "content": "more"},
        ],
        cache_control={"type": "ephemeral"},
    )
    assert reply.usage.cache_read_input_tokens == real_count(messages, "anthropic")


def test_openai_caches_prefixes_automatically(sim: SimServer) -> None:
    client = gpt(sim)
    messages: list[Any] = [
        {"role": "system", "content": "You read books. " * 20},
        {"role": "user", "content": "Chapter one, please."},
    ]
    first = client.chat.completions.create(model="m", messages=messages)
    assert first.usage is not None and first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    messages += [first.choices[0].message, {"role": "user", "content": "And chapter two."}]
    second = client.chat.completions.create(model="m", messages=messages)
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens == first.usage.prompt_tokens
    third = client.chat.completions.create(model="m", messages=messages, prompt_cache_key="other")
    assert third.usage is not None and third.usage.prompt_tokens_details is not None
    assert third.usage.prompt_tokens_details.cached_tokens == 0


def test_openai_cache_counts_from_the_minimum_in_steps() -> None:
    config = SimConfig(context_window=50_000, cache_min_tokens=1024, cache_increment=128)
    with SimServer(config) as server:
        client = gpt(server)
        messages: list[Any] = [{"role": "user", "content": "Long instructions here. " * 300}]
        client.chat.completions.create(model="m", messages=messages)
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
        reply = client.chat.completions.create(model="m", messages=messages)
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        cached = reply.usage.prompt_tokens_details.cached_tokens
        assert cached is not None and cached >= 1024 and (cached - 1024) % 128 == 0
        assert cached <= real_count(messages[:1], "openai")


def test_more_than_four_breakpoints_is_refused(sim: SimServer) -> None:
    block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    response = post(
        sim,
        "/v1/messages",
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [block] * 5}]},
    )
    assert response.status_code == 400
    assert "A maximum of 4 blocks with cache_control" in response.json()["error"]["message"]


# --------------------------------------------------------------------------- streaming


def test_anthropic_streams_its_event_sequence(sim: SimServer) -> None:
    client = claude(sim)
    ask: dict[str, Any] = {
        "model": "m",
        "max_tokens": 200,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "go"}],
    }
    whole = client.messages.create(**ask)
    kinds = [event.type for event in client.messages.create(**ask, stream=True)]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    assert kinds.count("content_block_delta") > 2
    with client.messages.stream(**ask) as stream:
        final = stream.get_final_message()

    def parts(content: Any) -> list[tuple[Any, ...]]:
        return [(b.type, getattr(b, "text", None), getattr(b, "input", None)) for b in content]

    assert parts(final.content) == parts(whole.content)
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.stop_reason == "tool_use"
    assert sim.stats()["streams"] == 2


def test_openai_streams_chunks_and_done(sim: SimServer) -> None:
    client = gpt(sim)
    ask: dict[str, Any] = {
        "model": "m",
        "tools": OPENAI_TOOLS,
        "messages": [{"role": "user", "content": "go"}],
    }
    whole = client.chat.completions.create(**ask)
    chunks = list(
        client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True})
    )
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    )
    assert arguments == whole.choices[0].message.tool_calls[0].function.arguments
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    usage, expected = chunks[-1].usage, whole.usage
    assert chunks[-1].choices == [] and usage is not None and expected is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        expected.prompt_tokens,
        expected.completion_tokens,
    )
    response = post(sim, "/v1/chat/completions", {**ask, "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.rstrip().endswith("data: [DONE]")


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize(
    ("spec", "anthropic_error", "openai_error"),
    [
        ("529", anthropic.OverloadedError, openai.InternalServerError),
        ("500", anthropic.InternalServerError, openai.InternalServerError),
        ("429:retry_after=2.5", anthropic.RateLimitError, openai.RateLimitError),
        ("403", anthropic.PermissionDeniedError, openai.PermissionDeniedError),
        ("400:message=broken", anthropic.BadRequestError, openai.BadRequestError),
    ],
)
def test_faults_are_served_in_the_providers_shape(
    sim: SimServer, spec: str, anthropic_error: type[Exception], openai_error: type[Exception]
) -> None:
    sim.add_faults([spec, spec])
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic_error) as caught:
        claude(sim).messages.create(model="m", max_tokens=5, messages=messages)
    with pytest.raises(openai_error) as caught_openai:
        gpt(sim).chat.completions.create(model="m", messages=messages)
    a, o = caught.value, caught_openai.value
    assert isinstance(a, anthropic.APIStatusError) and isinstance(o, openai.APIStatusError)
    assert a.status_code == o.status_code == int(spec.split(":")[0])
    assert a.body["type"] == "error" and set(a.body["error"]) == {"type", "message"}
    assert set(o.body) == {"message", "type", "param", "code"}
    if spec.startswith("429"):
        for error in (a, o):
            assert error.response.headers["retry-after"] == "3"
            assert error.response.headers["retry-after-ms"] == "2500"
            assert classify_error(error).retry_after == 2.5
    if spec.startswith("400"):
        assert a.body["error"]["message"] == "broken"
    # The next request is answered normally, and the counters saw it all.
    claude(sim).messages.create(model="m", max_tokens=5, messages=messages)
    stats = sim.stats()
    assert stats["requests"] == 3 and stats["faults"] == 2 and stats["faults_pending"] == 0


def test_a_dropped_connection_and_a_delay(sim: SimServer) -> None:
    sim.add_faults(["drop", "delay=0.3", {"drop": True, "route": "openai"}])
    client = claude(sim)
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.APIConnectionError) as caught:
        client.messages.create(model="m", max_tokens=5, messages=messages)
    assert classify_error(caught.value).kind is ErrorKind.CONNECTION
    slow = claude(sim).with_options(timeout=0.1)
    with pytest.raises(anthropic.APITimeoutError):
        slow.messages.create(model="m", max_tokens=5, messages=messages)
    # The route-limited fault waits for an OpenAI request.
    client.messages.create(model="m", max_tokens=5, messages=messages)
    with pytest.raises(openai.APIConnectionError):
        gpt(sim).chat.completions.create(model="m", messages=messages)
    stats = sim.stats()
    assert stats["errors"].get("dropped") == 2
    assert stats["faults_pending"] == 0


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("spec", ["529:after_events=3", "drop:after_events=3"])
def test_faults_in_the_middle_of_a_stream(sim: SimServer, provider: str, spec: str) -> None:
    sim.add_faults([spec])
    messages = [{"role": "user", "content": "hi"}]
    seen = []
    with pytest.raises(Exception) as caught:
        if provider == "anthropic":
            stream: Any = claude(sim).messages.create(
                model="m",
                max_tokens=50,
                messages=messages,
                stream=True,
            )
        else:
            stream = gpt(sim).chat.completions.create(model="m", messages=messages, stream=True)
        for event in stream:
            seen.append(event)
    assert 1 <= len(seen) <= 3
    info = classify_error(caught.value)
    if spec.startswith("529") and provider == "anthropic":
        assert isinstance(caught.value, anthropic.APIStatusError)
        assert info.kind is ErrorKind.OVERLOADED
    elif spec.startswith("529"):
        assert isinstance(caught.value, openai.APIError)
    else:
        assert info.kind is ErrorKind.CONNECTION


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("529", Fault(status=529)),
        ("429:retry_after=1.5", Fault(status=429, retry_after=1.5)),
        ("drop", Fault(drop=True)),
        ("drop:after_events=2,route=openai", Fault(drop=True, after_events=2, route="openai")),
        ("delay=0.25", Fault(delay=0.25)),
        (
            "500:delay=1,type=api_error,message=down",
            Fault(500, delay=1.0, type="api_error", message="down"),
        ),
    ],
)
def test_fault_specs(spec: str, expected: Fault) -> None:
    assert parse_fault(spec) == expected
    assert fault_from_json(expected.to_json()) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "oops",
        "99",
        "700",
        "drop:status=500",
        "429:retry_after=soon",
        "500:colour=red",
        "delay=-1",
        "500:route=bedrock",
        "429:retry_after",
    ],
)
def test_bad_fault_specs_say_what_is_wrong(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_fault(spec)


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"faults": 5}', b'[{"status": "x"}]', b'[{"colour": 1}]', b"[[1]]"],
)
def test_bad_fault_posts_get_a_400(sim: SimServer, body: bytes) -> None:
    response = post(sim, "/_sim/faults", body)
    assert response.status_code == 400
    assert "error" in response.json()
    assert sim.stats()["faults_pending"] == 0


def test_faults_can_be_listed_replaced_and_cleared(sim: SimServer) -> None:
    sim.add_faults(["500", "529"])
    replaced = post(sim, "/_sim/faults", {"faults": [{"status": 429}], "replace": True}).json()
    assert replaced["pending"] == [{"status": 429}]
    assert httpx.get(sim.url + "/_sim/faults").json()["pending"] == [{"status": 429}]
    assert httpx.delete(sim.url + "/_sim/faults").json()["pending"] == []


# --------------------------------------------------------------------------- auth


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("key", [None, "sk-wrong-key-123456"])
def test_a_missing_or_wrong_key_gets_401(
    sim_auth: SimServer, provider: str, key: str | None
) -> None:
    messages = [{"role": "user", "content": "hi"}]
    headers = {}
    if key is not None:
        headers = (
            {"x-api-key": key} if provider == "anthropic" else {"authorization": f"Bearer {key}"}
        )
    path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"
    response = post(
        sim_auth, path, {"model": "m", "max_tokens": 5, "messages": messages}, **headers
    )
    assert response.status_code == 401
    body = response.json()
    if provider == "anthropic":
        assert body["error"]["type"] == "authentication_error"
    else:
        assert body["error"]["code"] == ("invalid_api_key" if key else None)
        if key:
            assert key not in body["error"]["message"]  # the key is masked
    assert classify_error(status=401, body=body).kind is ErrorKind.AUTHENTICATION
    # The right key passes, through the SDKs.
    if provider == "anthropic":
        claude(sim_auth, KEY).messages.create(model="m", max_tokens=5, messages=messages)
        with pytest.raises(anthropic.AuthenticationError):
            claude(sim_auth, "nope").messages.create(model="m", max_tokens=5, messages=messages)
    else:
        gpt(sim_auth, KEY).chat.completions.create(model="m", messages=messages)
        with pytest.raises(openai.AuthenticationError):
            gpt(sim_auth, "nope").chat.completions.create(model="m", messages=messages)


# --------------------------------------------------------------------------- bad input

_OK_ANTHROPIC: dict[str, Any] = {
    "model": "m",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "hi"}],
}
_OK_OPENAI: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

_USE = {"type": "tool_use", "id": "toolu_1", "name": "read_chapter", "input": {}}
_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}

ANTHROPIC_BAD: list[tuple[str, Any, str]] = [
    ("bad json", b'{"model": "m", "max_tokens": ', "not valid JSON"),
    ("not utf-8", b'{"model": "\xff\xfe"}', "not valid JSON"),
    ("deep nesting", b"[" * 30_000 + b"]" * 30_000, "levels deep"),
    ("a list", [1, 2], "valid dictionary"),
    ("no model", {"max_tokens": 5, "messages": []}, "model: Field required"),
    ("no max_tokens", {"model": "m", "messages": []}, "max_tokens: Field required"),
    ("no messages", {"model": "m", "max_tokens": 5}, "messages: Field required"),
    (
        "messages a string",
        {**_OK_ANTHROPIC, "messages": "hi"},
        "messages: Input should be a valid list",
    ),
    (
        "max_tokens a string",
        {**_OK_ANTHROPIC, "max_tokens": "10"},
        "max_tokens: Input should be a valid integer",
    ),
    ("max_tokens zero", {**_OK_ANTHROPIC, "max_tokens": 0}, "greater than or equal to 1"),
    ("model a number", {**_OK_ANTHROPIC, "model": 7}, "model: Input should be a valid string"),
    ("empty messages", {**_OK_ANTHROPIC, "messages": []}, "at least 1 item"),
    (
        "message a string",
        {**_OK_ANTHROPIC, "messages": ["hi"]},
        "messages.0: Input should be a valid dictionary",
    ),
    (
        "bad role",
        {**_OK_ANTHROPIC, "messages": [{"role": "robot", "content": "x"}]},
        "messages.0.role",
    ),
    (
        "no content",
        {**_OK_ANTHROPIC, "messages": [{"role": "user"}]},
        "messages.0.content: Field required",
    ),
    (
        "content a number",
        {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": 5}]},
        "messages.0.content",
    ),
    (
        "empty content",
        {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": ""}]},
        "non-empty content",
    ),
    (
        "block without type",
        {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": [{"text": "x"}]}]},
        "messages.0.content.0.type: Field required",
    ),
    (
        "unknown block",
        {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
        "Input tag 'video'",
    ),
    (
        "text not a string",
        {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]},
        "text: Input should be a valid string",
    ),
    (
        "tool input a string",
        {
            **_OK_ANTHROPIC,
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{**_USE, "input": "x"}]},
            ],
        },
        "input: Input should be a valid dictionary",
    ),
    (
        "orphan result",
        {**_OK_ANTHROPIC, "messages": [{"role": "user", "content": [_RESULT]}]},
        "unexpected `tool_use_id`",
    ),
    (
        "unanswered call",
        {
            **_OK_ANTHROPIC,
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [_USE]},
                {"role": "user", "content": "and?"},
            ],
        },
        "without `tool_result` blocks",
    ),
    (
        "tools not a list",
        {**_OK_ANTHROPIC, "tools": {"name": "x"}},
        "tools: Input should be a valid list",
    ),
    (
        "tool without schema",
        {**_OK_ANTHROPIC, "tools": [{"name": "x"}]},
        "tools.0.input_schema: Field required",
    ),
    ("system a number", {**_OK_ANTHROPIC, "system": 3}, "system"),
    ("bad tool_choice", {**_OK_ANTHROPIC, "tool_choice": {"type": "maybe"}}, "Input tag 'maybe'"),
    (
        "stream a string",
        {**_OK_ANTHROPIC, "stream": "yes"},
        "stream: Input should be a valid boolean",
    ),
]

OPENAI_BAD: list[tuple[str, Any, str | None, str | None]] = [
    ("bad json", b"{nope", None, None),
    ("a list", [1], None, None),
    ("no model", {"messages": [{"role": "user", "content": "hi"}]}, None, None),
    ("no messages", {"model": "m"}, "messages", "missing_required_parameter"),
    ("messages a string", {"model": "m", "messages": "hi"}, "messages", "invalid_type"),
    ("empty messages", {"model": "m", "messages": []}, "messages", "empty_array"),
    ("message a number", {"model": "m", "messages": [3]}, "messages[0]", "invalid_type"),
    (
        "no role",
        {"model": "m", "messages": [{"content": "x"}]},
        "messages[0].role",
        "missing_required_parameter",
    ),
    (
        "bad role",
        {"model": "m", "messages": [{"role": "robot", "content": "x"}]},
        "messages[0].role",
        "invalid_value",
    ),
    (
        "no content",
        {"model": "m", "messages": [{"role": "user"}]},
        "messages[0].content",
        "missing_required_parameter",
    ),
    (
        "content a number",
        {"model": "m", "messages": [{"role": "user", "content": 4}]},
        "messages[0].content",
        "invalid_type",
    ),
    (
        "bad part",
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "video"}]}]},
        "messages[0].content[0].type",
        "invalid_value",
    ),
    ("max_tokens a string", {**_OK_OPENAI, "max_tokens": "9"}, "max_tokens", "invalid_type"),
    (
        "max_tokens zero",
        {**_OK_OPENAI, "max_completion_tokens": 0},
        "max_completion_tokens",
        "integer_below_min_value",
    ),
    (
        "arguments an object",
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c", "content": "x"},
            ],
        },
        "messages[1].tool_calls[0].function.arguments",
        "invalid_type",
    ),
    (
        "orphan tool message",
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "tool", "tool_call_id": "c", "content": "x"},
            ],
        },
        "messages.[1].role",
        None,
    ),
    (
        "unanswered call",
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
            ],
        },
        "messages.[1].role",
        None,
    ),
    ("tools a string", {**_OK_OPENAI, "tools": "all"}, "tools", "invalid_type"),
    (
        "tool without function",
        {**_OK_OPENAI, "tools": [{"type": "function"}]},
        "tools[0].function",
        "missing_required_parameter",
    ),
    ("bad tool_choice", {**_OK_OPENAI, "tool_choice": "sometimes"}, "tool_choice", "invalid_value"),
    ("stream a number", {**_OK_OPENAI, "stream": 1}, "stream", "invalid_type"),
]


@pytest.mark.parametrize(
    ("case", "body", "wording"), ANTHROPIC_BAD, ids=[c[0] for c in ANTHROPIC_BAD]
)
def test_bad_anthropic_requests_get_a_400_in_anthropics_shape(
    sim: SimServer, case: str, body: Any, wording: str
) -> None:
    response = post(sim, "/v1/messages", body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert wording in error["error"]["message"]
    assert "request-id" in response.headers
    info = classify_error(status=400, body=error)
    assert info.kind is ErrorKind.INVALID_REQUEST and not info.retryable


@pytest.mark.parametrize(
    ("case", "body", "param", "code"), OPENAI_BAD, ids=[c[0] for c in OPENAI_BAD]
)
def test_bad_openai_requests_get_a_400_in_openais_shape(
    sim: SimServer, case: str, body: Any, param: str | None, code: str | None
) -> None:
    response = post(sim, "/v1/chat/completions", body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)
    assert classify_error(status=400, body=response.json()).kind is ErrorKind.INVALID_REQUEST


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("declared", [True, False])
def test_an_oversized_body_gets_a_413(sim: SimServer, provider: str, declared: bool) -> None:
    body = json.dumps(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * MAX_BODY}]}
    ).encode()
    path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"

    def pieces() -> Iterator[bytes]:
        for k in range(0, len(body), 8192):
            yield body[k : k + 8192]

    content: Any = body if declared else pieces()
    response = httpx.post(sim.url + path, content=content, timeout=30)
    assert response.status_code == 413
    error = response.json()
    if provider == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "request_too_large"
    else:
        assert error["error"]["code"] == "request_too_large"
    # Just under the limit is fine.
    small = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 100}]}
    assert post(sim, path, small).status_code == 200


def test_a_client_that_stops_sending_an_oversized_body_still_gets_its_413(
    sim: SimServer,
) -> None:
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as conn:
        head = (
            "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"
        )
        conn.sendall(head.encode() + b"{" * 1000)  # ... and nothing more
        answer = b""
        while b"request_too_large" not in answer:
            piece = conn.recv(65536)
            if not piece:
                break
            answer += piece
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"request_too_large" in answer


@pytest.mark.parametrize(
    ("method", "path", "headers", "status", "shape"),
    [
        ("POST", "/v1/complete", {"anthropic-version": "2023-06-01"}, 404, "anthropic"),
        ("POST", "/v1/embeddings", {}, 404, "openai"),
        ("GET", "/v1/messages", {"x-api-key": "k"}, 405, "anthropic"),
        ("GET", "/v1/chat/completions", {}, 405, "openai"),
    ],
)
def test_unknown_routes_answer_in_the_providers_shape(
    sim: SimServer, method: str, path: str, headers: dict[str, str], status: int, shape: str
) -> None:
    response = httpx.request(method, sim.url + path, headers=headers)
    assert response.status_code == status
    body = response.json()
    if shape == "anthropic":
        assert body["type"] == "error" and "message" in body["error"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}


def test_strange_text_never_breaks_the_server(sim: SimServer) -> None:
    # A lone surrogate and control characters in text and in a tool's schema.
    odd = "\ud800 \x00 \u202e emoji 🙂"
    schema = {"type": "object", "properties": {odd: {"type": "string"}}, "required": [odd]}
    body = {
        "model": odd,
        "max_tokens": 50,
        "tools": [{"name": "t", "input_schema": schema}],
        "messages": [{"role": "user", "content": odd}],
    }
    raw = json.dumps(body).encode()  # ASCII escapes carry the surrogate
    response = post(sim, "/v1/messages", raw)
    assert response.status_code == 200
    assert response.json()["content"][1]["input"] == {odd: f"{odd}-1"}


def test_stats_and_health(sim: SimServer) -> None:
    claude(sim).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
    )
    stats = sim.stats()
    assert stats["requests"] == 1 and stats["answered"] == 1
    assert stats["config"]["context_window"] == WINDOW
    assert stats["config"]["tokenizer"] == "o200k"
    entry = stats["log"][0]
    assert entry["route"] == "anthropic.messages" and entry["status"] == 200
    assert httpx.get(sim.url + "/_sim/health").json() == {"ok": True}


# --------------------------------------------------------------------------- async SDKs


def test_async_clients_talk_to_the_server(sim: SimServer) -> None:
    async def main() -> tuple[Any, Any, list[str]]:
        async with anthropic.AsyncAnthropic(base_url=sim.url, api_key="k", max_retries=0) as a:
            first = await a.messages.create(
                model="m", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
            )
            kinds = [
                e.type
                async for e in await a.messages.create(
                    model="m",
                    max_tokens=20,
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                )
            ]
        async with openai.AsyncOpenAI(base_url=sim.openai_url, api_key="k", max_retries=0) as o:
            second = await o.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        return first, second, kinds

    first, second, kinds = asyncio.run(main())
    assert first.content[0].text == second.choices[0].message.content
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
