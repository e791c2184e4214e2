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
from hypothesis import given, settings
from hypothesis import strategies as st

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
    # the answers' usageMetadata, read by the Gemini dialect, reached the shaper
    record = fitter.shaper.state.stats.last_usage
    assert record is not None and record.provider == "openai"
    assert record.input_tokens == sim.stats()["log"][-1]["tokens"]


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


def _contents(rounds: int, image: bytes, args: dict[str, Any]) -> list[types.Content]:
    contents = [
        types.Content(
            role="user",
            parts=[
                types.Part(text=TASK),
                types.Part(inline_data=types.Blob(mime_type="image/png", data=image)),
            ],
        )
    ]
    for n in range(rounds):
        call = types.FunctionCall(name="read_chapter", args={**args, "number": n})
        contents.append(types.Content(role="model", parts=[types.Part(function_call=call)]))
        answer = types.FunctionResponse(name="read_chapter", response={"result": chapter(n)})
        contents.append(types.Content(role="user", parts=[types.Part(function_response=answer)]))
    return contents


_ARGS = st.dictionaries(
    st.sampled_from(["path", "flags", "depth"]),
    st.one_of(
        st.text(max_size=20),
        st.integers(-5, 5),
        st.lists(st.text(max_size=5), max_size=3),
        st.dictionaries(st.sampled_from(["a", "b"]), st.booleans(), max_size=2),
    ),
    max_size=3,
)


@settings(max_examples=25, deadline=None)
@given(rounds=st.integers(0, 6), image=st.binary(min_size=1, max_size=64), args=_ARGS)
def test_the_contents_mapping_round_trips_and_never_mutates(
    rounds: int, image: bytes, args: dict[str, Any]
) -> None:
    """Structured call arguments, multi-part content and inline images survive the mapping;
    what fitting leaves alone comes back as the very objects, the rest as equal copies of
    what was fitted, and the caller's Content objects are never changed."""
    from google.adk.models.llm_request import LlmRequest

    from windowfit.integrations.google_adk import ContentsFitter

    contents = _contents(rounds, image, args)
    before = [c.model_dump(mode="json") for c in contents]
    for budget, all_kept in ((10**7, True), (4_000, False)):
        request = LlmRequest(model="gemini-2.5-pro", contents=list(contents))
        try:
            ContentsFitter(budget=budget).fit(request)
        except windowfit.ContextOverflowError:
            continue
        out = request.contents
        if all_kept:
            assert all(a is b for a, b in zip(out, contents, strict=True))
        assert out[0].parts[1].inline_data.data == image  # the task and its image: kept
        for content in out:
            for part in content.parts or ():
                if part.function_call is not None:
                    assert {k: v for k, v in part.function_call.args.items() if k != "number"} == {
                        k: v for k, v in args.items() if k != "number"
                    }
    assert [c.model_dump(mode="json") for c in contents] == before
