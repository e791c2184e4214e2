"""windowfit.integrations.pydantic_ai: a real pydantic-ai agent (OpenAIChatModel over
HTTP) against the simulated provider, and the message mapping both ways."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai import AsyncOpenAI
from pydantic_ai import Agent, UsageLimits
from pydantic_ai import messages as pm
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import windowfit
from windowfit.errors import ContextOverflowError, ConversationError
from windowfit.integrations._pydantic_ai_messages import restore, to_chat
from windowfit.integrations.pydantic_ai import SAFETY_NET, fit_history
from windowfit.server import SimServer
from windowfit.wrap import UsageRecord

from frameworks import (
    BUDGET,
    MAX_TOKENS,
    MODEL,
    REPLY,
    ROUNDS,
    TASK,
    assert_never_rejected,
    assert_rejected_too_long,
    chapter,
    sim_config,
)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(sim_config()) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


def _agent(sim: SimServer, capabilities: list[Any]) -> Agent[None, str]:
    client = AsyncOpenAI(base_url=sim.openai_url, api_key="sk-pydantic-test", max_retries=0)
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    agent: Agent[None, str] = Agent(
        model,
        instructions="You read books.",
        capabilities=capabilities,
        model_settings={"max_tokens": MAX_TOKENS},
    )

    @agent.tool_plain
    def read_chapter(number: int) -> str:
        """Read one chapter of the book."""
        return chapter(number)

    return agent


LIMITS = UsageLimits(request_limit=2 * ROUNDS)


def _returns(messages: list[pm.ModelMessage]) -> list[pm.ToolReturnPart]:
    return [
        part
        for m in messages
        if isinstance(m, pm.ModelRequest)
        for part in m.parts
        if isinstance(part, pm.ToolReturnPart)
    ]


@pytest.mark.slow
def test_agent_finishes_inside_the_window_and_keeps_its_history(sim: SimServer) -> None:
    reports: list[windowfit.FitReport] = []
    usages: list[UsageRecord] = []
    capability = fit_history(budget=BUDGET, on_fit=reports.append, on_usage=usages.append)
    result = _agent(sim, [capability]).run_sync(TASK, usage_limits=LIMITS)
    assert result.output == REPLY
    assert_never_rejected(sim.stats())
    # The run's history is whole: no result cleared there.
    returns = _returns(result.all_messages())
    assert [p.content for p in returns] == [chapter(n) for n in range(1, ROUNDS + 1)]
    assert len(reports) == ROUNDS + 1 and max(r.stage for r in reports) >= 1
    assert all(r.tokens_after <= r.budget <= BUDGET for r in reports)
    assert capability.shaper.state.stats.last_usage is not None  # learned from usage
    assert len(usages) == ROUNDS + 1 and all(u.input_tokens > 0 for u in usages)


@pytest.mark.slow
def test_async_run_finishes_inside_the_window(sim: SimServer) -> None:
    agent = _agent(sim, [fit_history(budget=BUDGET)])
    result = asyncio.run(agent.run(TASK, usage_limits=LIMITS))
    assert result.output == REPLY
    assert_never_rejected(sim.stats())


@pytest.mark.slow
def test_without_windowfit_the_provider_refuses(sim: SimServer) -> None:
    with pytest.raises(ModelHTTPError) as caught:
        _agent(sim, []).run_sync(TASK, usage_limits=LIMITS)
    assert caught.value.status_code == 400
    assert "context_length_exceeded" in json.dumps(caught.value.body)
    assert_rejected_too_long(sim.stats())


def test_safety_net_is_an_instruction() -> None:
    assert fit_history(budget=BUDGET).get_instructions() == SAFETY_NET
    assert fit_history(budget=BUDGET, safety_net=False).get_instructions() is None


def _history(rounds: int) -> list[pm.ModelMessage]:
    out: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.SystemPromptPart("You read books."), pm.UserPromptPart(TASK)])
    ]
    for n in range(1, rounds + 1):
        call = pm.ToolCallPart("read_chapter", {"number": n}, tool_call_id=f"call_{n}")
        out.append(pm.ModelResponse(parts=[pm.TextPart(f"Reading {n}."), call]))
        ret = pm.ToolReturnPart("read_chapter", chapter(n), tool_call_id=f"call_{n}")
        out.append(pm.ModelRequest(parts=[ret]))
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_history_processor_form_fits_and_never_mutates(mode: str) -> None:
    history = _history(20)
    before = copy.deepcopy(history)
    capability = fit_history(budget=20_000)  # stage 1: results cleared, none cut
    if mode == "sync":
        fitted = capability.process(history)
    else:
        fitted = asyncio.run(capability.aprocess(history))
    assert history == before
    assert fitted[0] is history[0]
    cleared = [p for p in _returns(fitted) if p.content == windowfit.CLEARED_RESULT_NOTE]
    assert cleared
    for part in cleared:
        original = next(p for p in _returns(history) if p.tool_call_id == part.tool_call_id)
        assert part is not original and part.content != original.content
        assert (part.tool_name, part.timestamp) == (original.tool_name, original.timestamp)
    # Pairs intact: every return answers a call sent before it.
    calls: set[str] = set()
    for message in fitted:
        for part in message.parts:
            if isinstance(part, pm.ToolCallPart):
                calls.add(part.tool_call_id)
            if isinstance(part, pm.ToolReturnPart):
                assert part.tool_call_id in calls


def test_errors_come_from_windowfits_tree() -> None:
    with pytest.raises(ContextOverflowError):
        fit_history(budget=500).process([pm.ModelRequest(parts=[pm.UserPromptPart(chapter(1))])])
    orphan = [
        pm.ModelRequest(parts=[pm.UserPromptPart("hi")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("t", "x", tool_call_id="nowhere")]),
    ]
    with pytest.raises(ConversationError):
        fit_history(budget=BUDGET).process(orphan)
    with pytest.raises(ConversationError, match="ModelRequest and ModelResponse"):
        fit_history(budget=BUDGET).process(["not a message"])  # type: ignore[list-item]


# --------------------------------------------------------------------------- the mapping

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_args = st.dictionaries(st.text(min_size=1, max_size=8), _json_values, max_size=4)
_user_items = st.lists(
    st.text(max_size=20)
    | st.builds(pm.ImageUrl, st.just("https://example.org/cat.png"))
    | st.builds(
        lambda data: pm.BinaryContent(data, media_type="image/png"), st.binary(max_size=30)
    ),
    min_size=1,
    max_size=3,
)


_results = st.text(max_size=20)


@st.composite
def _histories(draw: st.DrawFn) -> list[pm.ModelMessage]:
    first = draw(st.text(max_size=20) | _user_items)
    out: list[pm.ModelMessage] = [pm.ModelRequest(parts=[pm.UserPromptPart(first)])]
    for n in range(draw(st.integers(0, 3))):
        args = draw(st.lists(_args, min_size=1, max_size=2))
        calls = [pm.ToolCallPart("search", a, tool_call_id=f"c{n}_{k}") for k, a in enumerate(args)]
        text = draw(st.text(max_size=10))
        out.append(pm.ModelResponse(parts=[pm.TextPart(text), *calls]))
        out.append(
            pm.ModelRequest(
                parts=[
                    pm.ToolReturnPart(
                        "search", draw(st.text(max_size=20)), tool_call_id=c.tool_call_id
                    )
                    for c in calls
                ]
            )
        )
    return out


@given(_histories())
def test_mapping_round_trips_unchanged_history(history: list[pm.ModelMessage]) -> None:
    chat = to_chat(history)
    json.dumps(chat.messages)  # plain JSON, as sent
    for raw, (i, _k) in zip(chat.messages, chat.origins, strict=True):
        message = history[i]
        if isinstance(message, pm.ModelResponse):
            calls = [p for p in message.parts if isinstance(p, pm.ToolCallPart)]
            got = [(c["id"], json.loads(c["function"]["arguments"])) for c in raw["tool_calls"]]
            assert got == [(c.tool_call_id, c.args) for c in calls]
    sources = list(range(len(chat.messages)))
    back = restore(history, chat, chat.messages, sources, [False] * len(sources))
    assert len(back) == len(history)
    assert all(a is b for a, b in zip(back, history, strict=True))


def test_images_are_image_parts() -> None:
    history = [
        pm.ModelRequest(
            parts=[
                pm.UserPromptPart(
                    [
                        "look",
                        pm.ImageUrl("https://example.org/cat.png"),
                        pm.BinaryContent(b"\x89PNG", media_type="image/png"),
                    ]
                )
            ]
        )
    ]
    content = to_chat(history).messages[0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "image_url"]
    assert content[2]["image_url"]["url"].startswith("data:image/png;base64,")
