"""windowfit.integrations.openai_agents: a real OpenAI Agents SDK agent (Responses API
over HTTP) against the simulated provider."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.run_config import CallModelData, ModelInputData

import windowfit
from windowfit.errors import ConversationError
from windowfit.integrations.openai_agents import SAFETY_NET, fit_model_input
from windowfit.server import SimServer

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

set_tracing_disabled(True)  # nothing leaves the machine


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(sim_config()) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


@function_tool
def read_chapter(number: int) -> str:
    """Read one chapter of the book."""
    return chapter(number)


def _agent(sim: SimServer) -> Agent[Any]:
    client = openai.AsyncOpenAI(base_url=sim.openai_url, api_key="sk-agents", max_retries=0)
    return Agent(
        name="reader",
        instructions="You read books.",
        tools=[read_chapter],
        model=OpenAIResponsesModel(MODEL, openai_client=client),
        model_settings=ModelSettings(max_tokens=MAX_TOKENS),
    )


@pytest.mark.slow
def test_agent_finishes_inside_the_window(sim: SimServer) -> None:
    reports: list[windowfit.FitReport] = []
    config = RunConfig(call_model_input_filter=fit_model_input(BUDGET, on_fit=reports.append))
    result = Runner.run_sync(_agent(sim), TASK, run_config=config, max_turns=2 * ROUNDS)
    assert result.final_output == REPLY
    assert_never_rejected(sim.stats())
    outputs = [i for i in result.to_input_list() if i.get("type") == "function_call_output"]
    assert [o["output"] for o in outputs] == [chapter(n) for n in range(1, ROUNDS + 1)]
    assert max(r.stage for r in reports) >= 1
    assert all(r.tokens_after <= r.budget <= BUDGET for r in reports)


@pytest.mark.slow
def test_without_windowfit_the_provider_refuses(sim: SimServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        Runner.run_sync(_agent(sim), TASK, max_turns=2 * ROUNDS)
    assert windowfit.is_context_overflow(caught.value)
    assert_rejected_too_long(sim.stats())


def _items(rounds: int) -> list[Any]:
    out: list[Any] = [{"role": "user", "content": TASK}]
    for n in range(1, rounds + 1):
        out.append(
            {
                "type": "function_call",
                "call_id": f"c{n}",
                "name": "read_chapter",
                "arguments": f'{{"number": {n}}}',
            }
        )
        out.append({"type": "function_call_output", "call_id": f"c{n}", "output": chapter(n)})
    return out


def test_filter_fits_without_mutating_and_adds_the_safety_net(sim: SimServer) -> None:
    items = _items(12)
    before = copy.deepcopy(items)
    data = CallModelData(ModelInputData(items, "You read books."), _agent(sim), None)
    out = fit_model_input(budget=15_000)(data)
    assert items == before
    assert out.input[0] is items[0]
    assert out.instructions == f"You read books.\n\n{SAFETY_NET}"
    cleared = [i for i in out.input if i.get("output") == windowfit.CLEARED_RESULT_NOTE]
    assert cleared
    calls = {i["call_id"] for i in out.input if i.get("type") == "function_call"}
    assert all(i["call_id"] in calls for i in out.input if i.get("type") == "function_call_output")


def test_broken_items_are_conversation_errors(sim: SimServer) -> None:
    items = [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "x"}]
    data = CallModelData(ModelInputData(items, None), _agent(sim), None)
    with pytest.raises(ConversationError):
        fit_model_input(budget=BUDGET)(data)
