"""``windowfit proxy`` over real HTTP on 127.0.0.1: the official SDKs talk to the proxy,
the proxy to ``serve-sim`` (which counts with a real tokenizer and refuses what does not
fit its window in each API's own words)."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE
from windowfit.proxy import ProxyConfig, ProxyServer
from windowfit.server import SimConfig, SimServer

WINDOW = 20_000
BUDGET = 12_000
MODEL = "claude-sonnet-4-5"
RESULT = "word " * 1_500  # about 1,500 tokens per tool result

TOOLS = [
    {
        "name": "read_part",
        "description": "Read one part.",
        "input_schema": {
            "type": "object",
            "properties": {"number": {"type": "integer"}},
            "required": ["number"],
        },
    }
]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {"name": "read_part", "description": "Read one part.", "parameters": t},
    }
    for t in [TOOLS[0]["input_schema"]]
]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    config = SimConfig(context_window=WINDOW, tool_rounds=60, reserve_output=False)
    with SimServer(config) as server:
        yield server


def _config(sim: SimServer, **changes: Any) -> ProxyConfig:
    upstreams = (("anthropic", sim.url), ("openai", sim.url))
    return ProxyConfig(upstreams=upstreams, **{"budget": BUDGET, **changes})


@pytest.fixture(scope="module")
def proxy(sim: SimServer) -> Iterator[ProxyServer]:
    with ProxyServer(_config(sim, max_body_bytes=4 * 1024 * 1024)) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


def _rejected(sim: SimServer) -> int:
    return int(sim.stats()["errors"].get("context_overflow", 0))


def _sim_tokens(sim: SimServer) -> list[int]:
    return [entry["tokens"] for entry in sim.stats()["log"] if entry["tokens"] is not None]


# --------------------------------------------------------------------------- long loops


def _anthropic_turn(client: anthropic.Anthropic, messages: list[Any], stream: bool) -> Any:
    """One request; returns (headers, content blocks as JSON, stop reason, usage)."""
    if not stream:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=1_000, messages=messages, tools=TOOLS
        )
        message = raw.parse()
        blocks = [b.model_dump(exclude_none=True) for b in message.content]
        return raw.headers, blocks, message.stop_reason, message.usage
    with client.messages.stream(
        model=MODEL, max_tokens=1_000, messages=messages, tools=TOOLS
    ) as events:
        final = events.get_final_message()
        headers = events.response.headers
    blocks = [b.model_dump(exclude_none=True) for b in final.content]
    return headers, blocks, final.stop_reason, final.usage


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_anthropic_sdk_long_loop_fits_under_the_window(
    sim: SimServer, proxy: ProxyServer, stream: bool
) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="test", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": f"Read every part ({stream})."}]
    stages = []
    for _ in range(20):
        headers, blocks, stop, usage = _anthropic_turn(client, messages, stream)
        stages.append(int(headers["x-windowfit-stage"]))
        assert int(headers["x-windowfit-tokens-after"]) <= int(headers["x-windowfit-tokens-before"])
        assert usage.input_tokens + usage.cache_read_input_tokens > 0  # usage flows back
        assert stop == "tool_use"
        call = next(b for b in blocks if b["type"] == "tool_use")
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": RESULT}
        messages += [
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": [result]},
        ]
    assert max(stages) >= 1 and stages[0] == 0
    assert max(_sim_tokens(sim)) <= BUDGET  # as the provider counted (learning included)
    assert _rejected(sim) == 0
    assert len(proxy.app.learning) >= 1
    # The same conversation sent directly is refused as too long.
    direct = anthropic.Anthropic(base_url=sim.url, api_key="test", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        direct.messages.create(model=MODEL, max_tokens=1_000, messages=messages, tools=TOOLS)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_openai_sdk_long_loop_fits_under_the_window(
    sim: SimServer, proxy: ProxyServer, stream: bool
) -> None:
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="test", max_retries=0)
    messages: list[Any] = [
        {"role": "system", "content": "You read parts."},
        {"role": "user", "content": f"Read every part ({stream})."},
    ]
    stages = []
    for _ in range(20):
        if stream:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o",
                messages=messages,
                tools=OPENAI_TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = list(raw.parse())
            usage = chunks[-1].usage
            call_id = next(
                c.choices[0].delta.tool_calls[0].id
                for c in chunks
                if c.choices and c.choices[0].delta.tool_calls
            )
            arguments = "".join(
                c.choices[0].delta.tool_calls[0].function.arguments or ""
                for c in chunks
                if c.choices and c.choices[0].delta.tool_calls
            )
        else:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=messages, tools=OPENAI_TOOLS
            )
            completion = raw.parse()
            usage = completion.usage
            tool_call = completion.choices[0].message.tool_calls[0]
            call_id, arguments = tool_call.id, tool_call.function.arguments
        assert usage is not None and usage.prompt_tokens > 0
        stages.append(int(raw.headers["x-windowfit-stage"]))
        after = int(raw.headers["x-windowfit-tokens-after"])
        assert after <= int(raw.headers["x-windowfit-tokens-before"])
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "read_part", "arguments": arguments},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": RESULT},
        ]
    assert max(stages) >= 1
    assert max(_sim_tokens(sim)) <= BUDGET  # as the provider counted (learning included)
    assert _rejected(sim) == 0


def test_usage_in_streams_and_answers_teaches_the_conversation(
    sim: SimServer, proxy: ProxyServer
) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="test", max_retries=0)
    messages = [{"role": "user", "content": "A conversation of its own: learning."}]
    before = len(proxy.app.learning)
    with client.messages.stream(model=MODEL, max_tokens=100, messages=messages) as events:
        events.get_final_message()
    assert len(proxy.app.learning) == before + 1


# --------------------------------------------------------------------------- transparency


def test_upstream_errors_are_returned_verbatim(sim: SimServer, proxy: ProxyServer) -> None:
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    sim.add_faults(["429:retry_after=2"])
    direct = httpx.post(f"{sim.url}/v1/messages", json=body)
    sim.add_faults(["429:retry_after=2"])
    proxied = httpx.post(f"{proxy.url}/v1/messages", json=body)
    assert proxied.status_code == direct.status_code == 429
    strip = lambda r: {k: v for k, v in r.json().items() if k != "request_id"}  # noqa: E731
    assert strip(proxied) == strip(direct)
    assert proxied.headers["retry-after"] == "2"
    sim.add_faults(["529"])
    client = anthropic.Anthropic(base_url=proxy.url, api_key="test", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**body)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


def test_a_stream_cut_by_the_upstream_is_cut_for_the_client(
    sim: SimServer, proxy: ProxyServer
) -> None:
    sim.add_faults(["drop:after_events=3"])
    client = anthropic.Anthropic(base_url=proxy.url, api_key="test", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    # (the SDK's own HTTP stack reports it: peer closed the connection mid-body)
    with (
        pytest.raises(Exception, match=r"incomplete|closed|onnection"),
        client.messages.stream(model=MODEL, max_tokens=50, messages=messages) as events,
    ):
        events.get_final_message()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("route", ["/v1/messages", "/v1/chat/completions"])
def test_an_answer_dropped_before_its_body_is_a_502_in_the_apis_shape(
    sim: SimServer, proxy: ProxyServer, route: str, stream: bool
) -> None:
    """serve-sim sends the head of a JSON answer and closes the connection: directly, the
    client sees a broken connection; through the proxy, a 502 it can read and retry."""
    body = {
        "model": MODEL,
        "max_tokens": 10,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    }
    sim.add_faults(["drop"])
    with pytest.raises(httpx.HTTPError):
        httpx.post(sim.url + route, json=body)
    sim.add_faults(["drop"])
    answer = httpx.post(proxy.url + route, json=body)
    assert answer.status_code == 502
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert "broke off" in error["message"]
    if route == "/v1/messages":
        assert answer.json()["type"] == "error" and error["type"] == "api_error"
    else:
        assert error["type"] == "server_error"
    again = httpx.post(proxy.url + route, json={**body, "stream": False})
    assert again.status_code == 200  # the proxy itself is unharmed


def _metrics_on(sock: socket.socket) -> bytes:
    """One ``GET /metrics`` on an open connection: the answer's status line."""
    sock.sendall(b"GET /metrics HTTP/1.1\r\nhost: proxy\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        if not chunk:
            return b"closed by the proxy"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0]


@pytest.mark.slow
def test_an_idle_client_connection_outlives_the_clients_own_idle_limit(
    proxy: ProxyServer,
) -> None:
    """httpx (so the anthropic and openai SDKs) drops idle connections after 5 s; the proxy
    keeps them longer, so a client never reuses one the proxy is closing that instant."""
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        assert _metrics_on(sock) == b"HTTP/1.1 200 OK"
        time.sleep(6.0)  # past httpx's keepalive_expiry and uvicorn's own default (5 s)
        assert _metrics_on(sock) == b"HTTP/1.1 200 OK"


def test_count_tokens_and_other_routes_pass_through(sim: SimServer, proxy: ProxyServer) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="test", max_retries=0)
    direct = anthropic.Anthropic(base_url=sim.url, api_key="test", max_retries=0)
    messages = [{"role": "user", "content": "count me " * 50}]
    counted = client.messages.count_tokens(model=MODEL, messages=messages)
    assert (
        counted.input_tokens
        == direct.messages.count_tokens(model=MODEL, messages=messages).input_tokens
    )
    for method, path in [("GET", "/v1/models"), ("HEAD", "/"), ("GET", "/no/such/path?x=1")]:
        a = httpx.request(method, f"{proxy.url}{path}", headers={"anthropic-version": "2023-06-01"})
        b = httpx.request(method, f"{sim.url}{path}", headers={"anthropic-version": "2023-06-01"})
        assert a.status_code == b.status_code
        if method != "HEAD":
            assert {k: v for k, v in a.json().items() if k != "request_id"} == {
                k: v for k, v in b.json().items() if k != "request_id"
            }


def test_a_body_windowfit_cannot_read_is_forwarded_unchanged(
    sim: SimServer, proxy: ProxyServer
) -> None:
    for raw in [b"{not json", b'{"model": "x", "messages": "not a list", "max_tokens": 5}']:
        direct = httpx.post(f"{sim.url}/v1/messages", content=raw)
        proxied = httpx.post(f"{proxy.url}/v1/messages", content=raw)
        assert proxied.status_code == direct.status_code == 400
        assert proxied.json()["error"] == direct.json()["error"]
        assert "x-windowfit-skipped" in proxied.headers
    # An unknown model with no budget configured is forwarded unfitted, and answered.
    assert proxy.app.skipped


# --------------------------------------------------------------------------- refusals


def test_nothing_fits_gets_the_apis_own_400_with_the_sentence(
    sim: SimServer, proxy: ProxyServer
) -> None:
    huge = "word " * 260_000  # more than any window the model table knows for these models
    client = anthropic.Anthropic(base_url=proxy.url, api_key="test", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": huge}]
        )
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("prompt is too long:")
    assert CONTEXT_OVERFLOW_MESSAGE in error["message"]
    chat = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="test", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        chat.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": huge}])
    assert refused.value.code == "context_length_exceeded"
    assert CONTEXT_OVERFLOW_MESSAGE in refused.value.message
    assert sim.stats()["requests"] == 0  # nothing hopeless was sent


def test_an_oversized_body_gets_413_in_the_apis_shape(sim: SimServer) -> None:
    with ProxyServer(_config(sim, max_body_bytes=1_000)) as small:
        body = {
            "model": MODEL,
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x" * 2_000}],
        }
        answer = httpx.post(f"{small.url}/v1/messages", json=body)
        assert answer.status_code == 413
        assert answer.json()["error"]["type"] == "request_too_large"
        answer = httpx.post(f"{small.url}/v1/chat/completions", json=body)
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "request_too_large"
    assert sim.stats()["requests"] == 0


def test_an_upstream_overflow_is_refitted_once(sim: SimServer) -> None:
    """A budget above the upstream's real window: the first request is refused as too
    long, the proxy learns the window from the error and sends one fitted request."""
    with ProxyServer(_config(sim, budget=60_000)) as loose:
        client = anthropic.Anthropic(base_url=loose.url, api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "Read."}]
        for k in range(16):
            call = {"type": "tool_use", "id": f"t{k}", "name": "read_part", "input": {"number": k}}
            result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": RESULT}
            messages += [
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": [result]},
            ]
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=100, messages=messages, tools=TOOLS
        )
        assert raw.parse().stop_reason == "tool_use"
        assert int(raw.headers["x-windowfit-stage"]) >= 1
        assert loose.app.refits == 1
        stats = sim.stats()
        assert stats["requests"] == 2 and _rejected(sim) == 1
        # The next request of the conversation is fitted to what was learned: no refusal.
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=100, messages=messages, tools=TOOLS
        )
        assert _rejected(sim) == 1 and loose.app.refits == 1


def test_an_unreachable_upstream_is_a_502_in_the_apis_shape() -> None:
    closed = "http://127.0.0.1:9"  # discard port: nothing listens
    config = ProxyConfig(upstreams=(("anthropic", closed), ("openai", closed)), connect_timeout=2)
    with ProxyServer(config) as proxy:
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        answer = httpx.post(f"{proxy.url}/v1/messages", json=body)
        assert answer.status_code == 502
        assert answer.json()["type"] == "error"
        answer = httpx.post(f"{proxy.url}/v1/chat/completions", json=body)
        assert answer.status_code == 502 and "message" in answer.json()["error"]


def test_a_client_that_leaves_cancels_its_upstream_request(
    sim: SimServer, proxy: ProxyServer
) -> None:
    sim.add_faults(["delay=3"])
    before = proxy.app.disconnects
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=0.5)
    deadline = time.monotonic() + 2
    while proxy.app.disconnects == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proxy.app.disconnects == before + 1
    assert time.monotonic() - started < 2.5  # noticed before the upstream answered


def test_the_scripted_tool_drives_a_loop(tmp_path: Any) -> None:
    from windowfit.server import parse_scripted_tool

    script = parse_scripted_tool('read_part={"number": "{n}", "note": ["part-{n}"]}')
    config = SimConfig(tool_rounds=2, reply="read all", script_tool=script)
    with SimServer(config) as sim:
        client = anthropic.Anthropic(base_url=sim.url, api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "go"}]
        inputs = []
        for _ in range(3):
            message = client.messages.create(
                model=MODEL, max_tokens=100, messages=messages, tools=TOOLS
            )
            blocks = [b.model_dump(exclude_none=True) for b in message.content]
            calls = [b for b in blocks if b["type"] == "tool_use"]
            if not calls:
                assert blocks[0]["text"] == "read all"
                break
            inputs.append(calls[0]["input"])
            result = {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": "ok"}
            messages += [
                {"role": "assistant", "content": blocks},
                {"role": "user", "content": [result]},
            ]
        assert inputs == [{"number": "1", "note": ["part-1"]}, {"number": "2", "note": ["part-2"]}]
        # A request that does not offer the scripted tool is answered with the text.
        message = client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "title?"}]
        )
        assert message.content[0].type == "text"


@pytest.mark.parametrize(
    "spec",
    ["Bash", "={}", 'Bash={"command": ', "Bash=[1]"],
    ids=["no-json", "no-name", "bad", "list"],
)
def test_a_bad_scripted_tool_is_a_clear_error(spec: str) -> None:
    from windowfit.server import parse_scripted_tool

    with pytest.raises(ValueError, match=r"NAME=JSON|not JSON|JSON object"):
        parse_scripted_tool(spec)


RESPONSES_TOOL = {
    "type": "function",
    "name": "read_part",
    **{"parameters": TOOLS[0]["input_schema"]},
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_openai_responses_sdk_long_loop_fits_under_the_window(
    sim: SimServer, proxy: ProxyServer, stream: bool
) -> None:
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="test", max_retries=0)
    items: list[Any] = [{"role": "user", "content": f"Read every part ({stream}, responses)."}]
    stages = []
    for _ in range(20):
        kwargs: dict[str, Any] = {
            "model": "gpt-4o",
            "input": items,
            "tools": [RESPONSES_TOOL],
            "instructions": "Be brief.",
        }
        if stream:
            raw = client.responses.with_raw_response.create(stream=True, **kwargs)
            events = list(raw.parse())
            response = next(e.response for e in events if e.type == "response.completed")
        else:
            raw = client.responses.with_raw_response.create(**kwargs)
            response = raw.parse()
        assert response.usage is not None and response.usage.input_tokens > 0
        stages.append(int(raw.headers["x-windowfit-stage"]))
        call = next(o for o in response.output if o.type == "function_call")
        items += [o.model_dump(exclude_none=True) for o in response.output]
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": RESULT})
    assert max(stages) >= 1
    assert max(_sim_tokens(sim)) <= BUDGET
    assert _rejected(sim) == 0
