"""The simulator's one core and its two doors (serve-sim over HTTP, the in-process model).

Both doors must count a request alike, refuse it alike and answer it with the same
scripted model, and the in-process door serves faults as the server does. (That neither
branches on a provider's name is checked for the whole package in test_architecture.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import windowfit
from windowfit.agent import AgentInfo, ModelRequest, ModelResponse, Runtime
from windowfit.classify import ErrorKind, classify_error
from windowfit.errors import SimulatedProviderError
from windowfit.formats import anthropic, gemini, openai_chat
from windowfit.retry import RetryPolicy
from windowfit.server import SimConfig, SimServer, create_app, parse_fault, parse_scripted_tool
from windowfit.sim import LegacyShaper, Scripted, SimulatedProvider
from windowfit.simcore import ScriptedModel, SimCore, WindowRule
from windowfit.tokens import SeedEstimator

SRC = Path(windowfit.__file__).parent
AGENT = AgentInfo("session", "main", "main")
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
TOOLS: list[dict[str, Any]] = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "Read",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
]


def respond(provider: SimulatedProvider, messages: list[dict[str, Any]]) -> ModelResponse:
    request = ModelRequest(AGENT, "You are a careful agent.", TOOLS, messages)
    return asyncio.run(provider.respond(request))


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
    }


# --------------------------------------------------------------------------- one core, two doors


def test_both_doors_are_the_same_core() -> None:
    provider = SimulatedProvider(tokenizer=SeedEstimator())
    assert isinstance(provider.core, SimCore)
    assert isinstance(provider.policy, Scripted)
    assert provider.policy.model is provider.core.model
    app = create_app(SimConfig(tool_rounds=7), estimator=SeedEstimator())
    core = app.state.sim.core
    assert isinstance(core, SimCore)
    assert core.model == ScriptedModel(tool_rounds=7)


@pytest.mark.parametrize("words", [1, 50, 400])
def test_both_doors_count_and_answer_a_request_alike(words: int) -> None:
    messages = [{"role": "user", "content": "Read the part files, please. " * words}]
    provider = SimulatedProvider(tokenizer="cl100k")
    local = respond(provider, messages)
    with SimServer(SimConfig(tokenizer="cl100k", cache_min_tokens=0)) as sim:
        body = {
            "model": "sim",
            "max_tokens": 1000,
            "system": "You are a careful agent.",
            "tools": TOOLS,
            "messages": messages,
        }
        served = httpx.post(f"{sim.url}/v1/messages", json=body, headers=HEADERS).json()
    total = local.usage.input_tokens
    assert total == provider.count(ModelRequest(AGENT, "You are a careful agent.", TOOLS, messages))
    usage = served["usage"]
    served_total = (
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )
    assert served_total == total
    assert [b["type"] for b in served["content"]] == [b["type"] for b in local.content]
    served_call = served["content"][-1]
    (local_call,) = local.tool_calls
    assert (served_call["name"], served_call["input"]) == (local_call.name, local_call.input)
    assert local.usage.output_tokens == usage["output_tokens"]


def test_the_in_process_door_follows_a_scripted_tool_plan() -> None:
    script = parse_scripted_tool('Bash={"command": "cat part-{n}.txt"}')
    model = ScriptedModel(tool_rounds=4, reply="Read {results} parts.", script=script)
    provider = SimulatedProvider(Scripted(model), tokenizer=SeedEstimator())
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the parts."}]
    commands = []
    for _ in range(10):
        answer = respond(provider, messages)
        messages.append(answer.message())
        if not answer.tool_calls:
            break
        (call,) = answer.tool_calls
        commands.append(call.input["command"])
        messages.append(tool_result(call.id, f"part {len(commands)}"))
    assert commands == [f"cat part-{n}.txt" for n in range(1, 5)]
    assert answer.text == "Read 4 parts."
    assert answer.stop_reason == "end_turn"
    ids = [b["id"] for m in messages if m["role"] == "assistant" for b in m["content"] if "id" in b]
    assert len(set(ids)) == 4


def test_the_in_process_door_refuses_in_the_anthropic_doors_words() -> None:
    provider = SimulatedProvider(hard_limit=50, tokenizer=SeedEstimator())
    with pytest.raises(SimulatedProviderError) as caught:
        respond(provider, [{"role": "user", "content": "many words here " * 100}])
    status, body = anthropic.overflow_error(provider.usage[AGENT.key].peak_tokens, 50)
    assert (caught.value.status_code, caught.value.body) == (status, body)
    assert classify_error(caught.value).kind is ErrorKind.CONTEXT_OVERFLOW


# --------------------------------------------------------------------------- faults in process


@pytest.mark.parametrize(
    ("spec", "status", "kind"),
    [
        ("529", 529, ErrorKind.OVERLOADED),
        ("429:retry_after=2", 429, ErrorKind.RATE_LIMIT),
        ("500", 500, ErrorKind.SERVER),
    ],
)
def test_the_in_process_door_serves_faults_as_the_server_does(
    spec: str, status: int, kind: ErrorKind
) -> None:
    provider = SimulatedProvider(tokenizer=SeedEstimator(), faults=[parse_fault(spec)])
    messages = [{"role": "user", "content": "hello"}]
    with pytest.raises(SimulatedProviderError) as caught:
        respond(provider, messages)
    assert caught.value.status_code == status
    assert caught.value.body["type"] == "error"
    assert classify_error(caught.value).kind is kind
    assert provider.faults_served == 1
    assert provider.calls == 0  # a fault is served before the request reaches the model
    assert respond(provider, messages).tool_calls  # the next request is answered
    with SimServer(SimConfig(faults=(parse_fault(spec),))) as sim:
        body = {"model": "m", "max_tokens": 10, "messages": messages}
        served = httpx.post(f"{sim.url}/v1/messages", json=body, headers=HEADERS)
    assert served.status_code == status
    assert {k: v for k, v in served.json().items() if k != "request_id"} == caught.value.body


def test_a_dropped_connection_in_process_is_a_connection_error() -> None:
    provider = SimulatedProvider(tokenizer=SeedEstimator(), faults=[parse_fault("drop")])
    with pytest.raises(ConnectionError):
        respond(provider, [{"role": "user", "content": "hello"}])


# --------------------------------------------------------------------------- the core's steps

RULES = {
    "anthropic": WindowRule(anthropic.overflow_error, anthropic.output_overflow_error),
    "openai": WindowRule(openai_chat.overflow_error, openai_chat.output_overflow_error),
    "gemini": WindowRule(gemini.overflow_error, counts_output=False),
}


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize("reserve", [True, False])
@given(tokens=st.integers(1, 3000), max_tokens=st.one_of(st.none(), st.integers(1, 3000)))
def test_the_window_check(name: str, reserve: bool, tokens: int, max_tokens: int | None) -> None:
    rule = RULES[name]
    core = SimCore(window=2000, tokenizer=SeedEstimator(), reserve_output=reserve)
    refusal = core.refusal(rule, tokens, max_tokens)
    counted = tokens + (max_tokens or 0) if reserve and rule.counts_output else tokens
    assert (refusal is None) == (counted <= 2000)
    if tokens > 2000:
        assert refusal == rule.overflow(tokens, 2000)
    elif refusal is not None:
        assert rule.output_overflow is not None and max_tokens is not None
        assert refusal == rule.output_overflow(tokens, max_tokens, 2000)


@given(
    text=st.text(min_size=1, max_size=200), tokens=st.integers(1, 500), limit=st.integers(1, 500)
)
def test_an_answer_is_cut_to_its_output_limit(text: str, tokens: int, limit: int) -> None:
    cut_text, cut_tokens, cut = SimCore.cut(text, tokens, limit)
    assert cut == (tokens > limit)
    assert cut_tokens == min(tokens, limit)
    assert text.startswith(cut_text) and cut_text
    if not cut:
        assert cut_text == text


def test_the_core_refuses_a_bad_window() -> None:
    with pytest.raises(ValueError, match="positive"):
        SimCore(window=0, tokenizer=SeedEstimator())


# --------------------------------------------------------------------------- a long scripted run


@pytest.mark.parametrize("fitted", [True, False])
def test_the_agent_runtime_runs_a_long_scripted_plan_in_process(
    tmp_path: Path, fitted: bool
) -> None:
    """The runtime, driven by the scripted plan "read part-{n}.txt for n = 1..12": with
    windowfit fitting each request to its budget the run finishes under the window (after
    a 529 it retries); with the old trimming (nothing to cut in one turn) the provider
    refuses a request in Anthropic's words and the run stops on the overflow."""
    parts = 12
    for n in range(1, parts + 1):
        (tmp_path / f"part-{n}.txt").write_text(f"Part {n}\n" + "word " * 400, encoding="utf-8")
    script = parse_scripted_tool('read_file={"path": "part-{n}.txt"}')
    plan = ScriptedModel(tool_rounds=parts, reply="Read {results} parts.", script=script)
    window, budget = 4_000, 3_000
    seed = SeedEstimator()
    provider = SimulatedProvider(
        Scripted(plan), hard_limit=window, tokenizer=seed, faults=[parse_fault("529")]
    )
    runtime = Runtime(
        provider,
        workspace=tmp_path,
        store=":memory:",
        budget=budget,
        estimator=seed,
        shaper=None if fitted else LegacyShaper(10 * window),
        max_depth=0,
        learn=False,
        retry=RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, jitter=False),
    )
    result = asyncio.run(runtime.run("Read the parts."))
    total = provider.total()
    assert provider.faults_served == 1
    if not fitted:
        assert result.status == "overflow" and total.rejected == 1
        assert total.peak_tokens > window
        return
    assert result.finished and result.answer == f"Read {parts} parts."
    assert total.rejected == 0 and total.peak_tokens <= budget
    assert result.stats.cleared > 0  # old parts were cleared to stay under the budget
    assert total.requests == parts + 1
