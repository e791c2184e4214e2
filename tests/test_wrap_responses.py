"""The real ``openai`` SDK's Responses API (``responses.create``, ``stream=True`` and
``responses.stream``; sync and async) through ``windowfit.wrap``, over real HTTP against
serve-sim's ``POST /v1/responses`` on 127.0.0.1; and that route's own answers."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import windowfit
from windowfit.retry import RetryPolicy
from windowfit.server import SimConfig, SimServer
from windowfit.tokens import Estimator
from windowfit.wrap import UsageRecord, wrap

WINDOW = 6_000
MAX_OUTPUT = 300
BUDGET = WINDOW - MAX_OUTPUT
MODEL = "sim-6k"
TOOL = {
    "type": "function",
    "name": "read_chapter",
    "description": "Read one chapter of the book.",
    "parameters": {
        "type": "object",
        "properties": {"number": {"type": "integer"}},
        "required": ["number"],
    },
}
TASK = "Read every chapter of the book and tell me who the narrator is."
CHAPTER = "Harker wrote in his journal by candlelight while the wolves howled outside. " * 24
FAST = RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=1.0, jitter=False)
HOW = ["create", "create-stream", "stream-helper"]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    config = SimConfig(
        context_window=WINDOW, tool_rounds=1_000, cache_min_tokens=0, cache_increment=1
    )
    with SimServer(config) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


def make(mode: str, sim: SimServer, **options: Any) -> Any:
    cls: Any = openai.AsyncOpenAI if mode == "async" else openai.OpenAI
    raw = cls(base_url=sim.openai_url, api_key="k", max_retries=5)
    options.setdefault("windows", {MODEL: WINDOW})
    return wrap(raw, retry=FAST, **options)


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def respond(client: Any, how: str, items: Any, **extra: Any) -> Any:
    """One Responses request through ``client``, the final response object back."""
    extra.setdefault("max_output_tokens", MAX_OUTPUT)
    kwargs = {"model": MODEL, "input": items, **extra}
    if how == "create":
        return await settle(client.responses.create(**kwargs))
    if how == "create-stream":
        stream = await settle(client.responses.create(stream=True, **kwargs))
        final = None
        if hasattr(stream, "__aiter__"):
            async for event in stream:
                final = event.response if event.type == "response.completed" else final
        else:
            for event in stream:
                final = event.response if event.type == "response.completed" else final
        return final
    manager = client.responses.stream(**kwargs)
    if hasattr(manager, "__aenter__"):
        async with manager as stream:
            async for _ in stream:
                pass
            return await stream.get_final_response()
    with manager as stream:
        for _ in stream:
            pass
        return stream.get_final_response()


async def agent(client: Any, how: str, steps: int) -> list[Any]:
    """An agent loop reading one chapter per step, its history the response items."""
    items: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(steps):
        response = await respond(client, how, items, tools=[TOOL], instructions="Be brief.")
        items.extend(response.output)  # SDK objects, as agents append them
        call = next(o for o in response.output if o.type == "function_call")
        number = json.loads(call.arguments)["number"]
        items.append(
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": f"{number}. {CHAPTER}",
            }
        )
    return items


def served(sim: SimServer) -> list[dict[str, Any]]:
    return [e for e in sim.stats()["log"] if e["route"] == "openai.responses"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("how", HOW)
def test_a_long_agent_loop_stays_under_budget_and_usage_flows_back(
    sim: SimServer, mode: str, how: str
) -> None:
    seen: list[UsageRecord] = []
    client = make(mode, sim, on_usage=seen.append)
    history = asyncio.run(agent(client, how, steps=14))
    log = served(sim)
    assert len(log) == 14 and {e["status"] for e in log} == {200}
    assert max(e["tokens"] for e in log) <= BUDGET
    stats = client.windowfit.stats
    assert stats.fitted > 0 and stats.last_report.stage >= 1
    assert stats.calls == stats.attempts == 14
    # Every answer's usage came back, with the cached tokens the simulator reported.
    assert len(seen) == 14 and {r.provider for r in seen} == {"openai-responses"}
    assert [r.input_tokens for r in seen] == [e["tokens"] for e in log]
    assert [r.cache_read_tokens for r in seen] == [e["cache_read"] for e in log]
    assert sum(r.cache_read_tokens for r in seen) > 0
    assert stats.last_usage == seen[-1]
    # The same history sent as it is would have been refused, in the API's words.
    raw = openai.OpenAI(base_url=sim.openai_url, api_key="k", max_retries=0)
    plain = [o.model_dump(exclude_none=True) if hasattr(o, "model_dump") else o for o in history]
    with pytest.raises(openai.BadRequestError) as caught:
        raw.responses.create(model=MODEL, input=plain, tools=[TOOL], max_output_tokens=MAX_OUTPUT)
    assert caught.value.code == "context_length_exceeded"
    assert windowfit.classify_error(caught.value).kind is windowfit.ErrorKind.CONTEXT_OVERFLOW


def test_the_history_is_never_changed(sim: SimServer) -> None:
    client = make("sync", sim)
    history = asyncio.run(agent(client, "create", steps=12))
    before = copy.deepcopy(history)
    asyncio.run(respond(client, "create", history, tools=[TOOL]))
    assert history == before
    assert client.windowfit.stats.last_report.messages_before == len(history)


class Undercount(Estimator):
    """Counts a tenth of the truth: the provider has the last word."""

    name = "undercount"

    def estimate(self, text: str) -> int:
        return len(text) // 40


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("where", ["estimate", "provider"])
def test_a_hopeless_request_raises_context_overflow_after_at_most_one_request(
    sim: SimServer, mode: str, where: str
) -> None:
    client = make(mode, sim, estimator=Undercount() if where == "provider" else None)
    huge = "A sentence that goes on. " * 2_000  # about 12k tokens
    with pytest.raises(windowfit.ContextOverflowError) as caught:
        asyncio.run(respond(client, "create", huge))
    assert str(caught.value) == windowfit.CONTEXT_OVERFLOW_MESSAGE
    requests = sim.stats()["requests"]
    if where == "estimate":
        assert requests == 0 and caught.value.limit == BUDGET
    else:
        assert requests == 1  # sent once, refused in Responses' words, never retried
        assert caught.value.provider_message is not None
        assert "exceeds the context window" in caught.value.provider_message
        assert isinstance(caught.value.__cause__, openai.BadRequestError)
    assert client.windowfit.stats.overflows == 1


def test_a_string_input_is_one_user_message_and_sent_as_it_was(sim: SimServer) -> None:
    bodies: list[dict[str, Any]] = []

    def keep(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    raw = openai.OpenAI(
        base_url=sim.openai_url,
        api_key="k",
        http_client=httpx.Client(event_hooks={"request": [keep]}),
    )
    client = wrap(raw, windows={MODEL: WINDOW})
    reply = client.responses.create(model=MODEL, input="hello", instructions="Be brief.")
    assert reply.output_text.startswith("Done")
    assert bodies[-1]["input"] == "hello" and bodies[-1]["instructions"] == "Be brief."
    assert client.windowfit.stats.last_report.messages_before == 1


def test_previous_response_id_fits_only_the_items_sent(sim: SimServer) -> None:
    """The simulator keeps no responses (404-like 400 in the API's words), but what is
    sent was measured: the leading outputs as they are, within the budget."""
    client = make("sync", sim)
    outputs = [{"type": "function_call_output", "call_id": "call_1", "output": CHAPTER}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input=outputs, previous_response_id="resp_x")
    assert caught.value.code == "previous_response_not_found"
    assert client.windowfit.stats.attempts == 1
    huge = [{"type": "function_call_output", "call_id": "c", "output": CHAPTER * 20}]
    with pytest.raises(windowfit.ContextOverflowError):
        client.responses.create(model=MODEL, input=huge, previous_response_id="resp_x")
    assert client.windowfit.stats.attempts == 1  # nothing more was sent


# --------------------------------------------------------------------------- the route


def _post(sim: SimServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{sim.openai_url}/responses", json=body, timeout=30)


def test_the_stream_is_the_responses_event_sequence(sim: SimServer) -> None:
    body = {"model": MODEL, "input": "hi", "stream": True}
    with httpx.stream("POST", f"{sim.url}/responses", json=body, timeout=30) as reply:
        lines = [line for line in reply.iter_lines() if line]
    names = [line[7:] for line in lines if line.startswith("event: ")]
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert [e["type"] for e in events] == names
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert names[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert names[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    final = events[-1]["response"]
    assert final["output"][0]["content"][0]["text"] == text
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 0


def test_a_tool_call_streams_its_arguments(sim: SimServer) -> None:
    body = {"model": MODEL, "input": "go", "tools": [TOOL], "stream": True}
    with httpx.stream("POST", f"{sim.url}/v1/responses", json=body, timeout=30) as reply:
        events = [json.loads(x[6:]) for x in reply.iter_lines() if x.startswith("data: ")]
    deltas = "".join(
        e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"
    )
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert deltas == done["arguments"] == '{"number": 1}' and done["name"] == "read_chapter"
    assert events[-1]["response"]["output"][0]["type"] == "function_call"


@pytest.mark.parametrize(
    ("body", "status", "code", "wording"),
    [
        ({"input": "x"}, 400, "missing_required_parameter", "Missing required parameter: 'model'."),
        ({"model": MODEL}, 400, "missing_required_parameter", "'input'"),
        ({"model": MODEL, "input": 5}, 400, "invalid_type", "Invalid type for 'input'"),
        (
            {
                "model": MODEL,
                "input": [{"type": "function_call_output", "call_id": "a", "output": "o"}],
            },
            400,
            None,
            "No tool call found for function call output with call_id a.",
        ),
        (
            {
                "model": MODEL,
                "input": [
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"}
                ],
            },
            400,
            None,
            "No tool output found for function call a.",
        ),
        (
            {"model": MODEL, "input": "x", "max_output_tokens": 4},
            400,
            "integer_below_min_value",
            ">= 16",
        ),
        (
            {"model": MODEL, "input": "x " * 9_000},
            400,
            "context_length_exceeded",
            "exceeds the context window",
        ),
    ],
)
def test_bad_requests_are_answered_in_the_apis_words(
    sim: SimServer, body: dict[str, Any], status: int, code: str | None, wording: str
) -> None:
    reply = _post(sim, body)
    assert reply.status_code == status
    error = reply.json()["error"]
    assert error["code"] == code and wording in error["message"]


def test_a_mid_stream_fault_is_an_error_event(sim: SimServer) -> None:
    sim.add_faults([{"status": 500, "after_events": 2, "route": "openai.responses"}])
    body = {"model": MODEL, "input": "hi", "stream": True}
    with httpx.stream("POST", f"{sim.url}/responses", json=body, timeout=30) as reply:
        events = [json.loads(x[6:]) for x in reply.iter_lines() if x.startswith("data: ")]
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "error"]
    assert events[-1]["sequence_number"] == 2


def _readme_block() -> str:
    """The python block of the README's "OpenAI Responses" section, as written."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### OpenAI Responses", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_the_readme_responses_loop_runs_against_serve_sim(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``from windowfit.wrap import ...`` above left the submodule at ``windowfit.wrap``
    # (Python sets a package's attribute when it imports a submodule); a script that only
    # does ``import windowfit`` sees the function, as here.
    monkeypatch.setattr(windowfit, "wrap", wrap)
    code = _readme_block()
    assert 'base_url="http://127.0.0.1:8080/v1"' in code
    with SimServer(SimConfig(tool_rounds=40)) as server:
        scope: dict[str, Any] = {}
        exec(code.replace("http://127.0.0.1:8080/v1", server.openai_url), scope)
        stats = server.stats()
    assert capsys.readouterr().out == "Done: I read 40 tool results. 1\n"
    report = scope["client"].windowfit.stats.last_report
    assert report.stage == 1 and report.tokens_before > 200_000
    assert stats["by_status"] == {"200": 41}
    assert stats["max_request_tokens"] <= 200_000 - 1024
