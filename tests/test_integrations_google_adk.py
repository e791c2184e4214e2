"""windowfit.integrations.google_adk: a real ADK agent (its Gemini model over HTTP)
against the simulated provider's Gemini door."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.models.google_llm import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import types

import windowfit
from windowfit.integrations.google_adk import WindowfitPlugin, before_model_callback
from windowfit.server import SimServer

from frameworks import (
    BUDGET,
    MAX_TOKENS,
    REPLY,
    ROUNDS,
    TASK,
    assert_never_rejected,
    assert_rejected_too_long,
    chapter,
    sim_config,
)

MODEL = "gemini-sim-30k"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(sim_config()) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "sim-key")
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    sim.reset()


def read_chapter(number: int) -> str:
    """Read one chapter of the book."""
    return chapter(number)


def _run(sim: SimServer, **agent_options: Any) -> tuple[str, list[Any]]:
    plugins = agent_options.pop("plugins", [])
    agent = LlmAgent(
        name="reader",
        model=Gemini(model=MODEL, base_url=sim.url),
        instruction=f"You read books. {windowfit.SAFETY_NET}",
        tools=[read_chapter],
        generate_content_config=types.GenerateContentConfig(max_output_tokens=MAX_TOKENS),
        **agent_options,
    )
    runner = InMemoryRunner(agent=agent, app_name="windowfit", plugins=plugins or None)

    async def go() -> tuple[str, list[Any]]:
        session = await runner.session_service.create_session(app_name="windowfit", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text=TASK)])
        final = ""
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message
        ):
            if event.is_final_response() and event.content and event.content.parts:
                final = event.content.parts[0].text or ""
        stored = await runner.session_service.get_session(
            app_name="windowfit", user_id="u", session_id=session.id
        )
        assert stored is not None
        return final, stored.events

    return asyncio.run(go())


def _responses(events: list[Any]) -> list[Any]:
    return [
        part.function_response.response
        for event in events
        if event.content
        for part in event.content.parts or ()
        if part.function_response is not None
    ]


@pytest.mark.slow
def test_agent_finishes_inside_the_window(sim: SimServer) -> None:
    fitter = before_model_callback(budget=BUDGET)
    final, events = _run(sim, before_model_callback=fitter, after_model_callback=fitter.after)
    assert final == REPLY
    assert_never_rejected(sim.stats())
    assert len(_responses(events)) == ROUNDS  # the session keeps every result
    assert all(r == {"result": chapter(n)} for n, r in enumerate(_responses(events), 1))
    assert fitter.shaper.last_report is not None


@pytest.mark.slow
def test_plugin_form_finishes_inside_the_window(sim: SimServer) -> None:
    final, _ = _run(sim, plugins=[WindowfitPlugin(budget=BUDGET)])
    assert final == REPLY
    assert_never_rejected(sim.stats())


@pytest.mark.slow
def test_without_windowfit_the_provider_refuses(sim: SimServer) -> None:
    with pytest.raises(Exception) as caught:
        _run(sim)
    assert windowfit.is_context_overflow(caught.value), repr(caught.value)
    assert_rejected_too_long(sim.stats())
