"""The google-genai SDK's wrap learns and recovers as the other SDKs' do: the real SDK
(sync, ``aio``, streaming and not) over real HTTP against serve-sim's Gemini door,
counting the requests the server answered (the tests of test_learning.py, for Gemini)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import types

import windowfit
from test_learning import Scaled
from test_wrap import CHAPTERS, TASK
from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE
from windowfit.learning import Learner
from windowfit.retry import RetryPolicy
from windowfit.server import SimConfig, SimServer
from windowfit.sim._texts import generated_text
from windowfit.wrap import wrap

WINDOW = 6_000
MODEL = "sim-6k"
CONFIG = types.GenerateContentConfig(max_output_tokens=300)
FAST = RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=1.0, jitter=False)
MODES = ["sync", "async", "stream", "async-stream"]


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


def make(server: SimServer, **options: Any) -> Any:
    options.setdefault("windows", {MODEL: WINDOW})
    options.setdefault("retry", FAST)
    raw = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=server.url))
    return wrap(raw, **options)


def served(server: SimServer) -> list[dict[str, Any]]:
    return list(server.stats()["log"])


def long_history() -> list[Any]:
    """A conversation well over the window (14 function calls and their long results)."""
    contents: list[Any] = [{"role": "user", "parts": [{"text": TASK}]}]
    for k in range(14):
        call = {"functionCall": {"name": "read_chapter", "args": {"number": k}}}
        contents.append({"role": "model", "parts": [call]})
        result = {"functionResponse": {"name": "read_chapter", "response": {"text": CHAPTERS[k]}}}
        contents.append({"role": "user", "parts": [result]})
    contents.append({"role": "user", "parts": [{"text": "Now answer, please."}]})
    return contents


def generate(client: Any, mode: str, contents: list[Any]) -> str:
    """One request through ``client`` in ``mode``; the answer's text."""

    async def run() -> str:
        kwargs = {"model": MODEL, "contents": contents, "config": CONFIG}
        if mode == "sync":
            return str(client.models.generate_content(**kwargs).text)
        if mode == "async":
            return str((await client.aio.models.generate_content(**kwargs)).text)
        if mode == "stream":
            chunks = list(client.models.generate_content_stream(**kwargs))
        else:
            stream = await client.aio.models.generate_content_stream(**kwargs)
            chunks = [chunk async for chunk in stream]
        return "".join(chunk.text or "" for chunk in chunks)

    return asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_learning_is_on_without_configuration(sim: SimServer, mode: str) -> None:
    client = make(sim)
    generate(client, mode, long_history())
    learner = client.windowfit.learner
    assert isinstance(learner, Learner) and learner.observations == 1
    assert client.windowfit.stats.last_usage.input_tokens == served(sim)[-1]["tokens"]
    off = make(sim, learn=False)
    generate(off, mode, long_history())
    assert off.windowfit.learner is None


@pytest.mark.parametrize("learn", [True, False], ids=["learning", "learning-off"])
@pytest.mark.parametrize("mode", MODES)
def test_a_request_a_refit_saves_costs_exactly_two_requests(
    sim: SimServer, mode: str, learn: bool
) -> None:
    client = make(sim, estimator=Scaled(0.7), learn=learn)
    assert generate(client, mode, long_history()).startswith("Done")
    log = served(sim)
    assert [e["status"] for e in log] == [400, 200]
    assert log[1]["tokens"] < log[0]["tokens"] and log[1]["tokens"] <= WINDOW
    assert client.windowfit.stats.refits == 1


@pytest.mark.parametrize("mode", ["sync", "stream"])
def test_what_an_overflow_taught_holds_for_the_conversations_next_request(
    sim: SimServer, mode: str
) -> None:
    """Learning is per conversation: once the first request's overflow taught the count,
    the next one of the same conversation is fitted to the corrected budget and sent
    once. With learning off, the lesson served that one re-fit only: it costs two again."""
    history = long_history()
    grown = [*history, {"role": "model", "parts": [{"text": "Done."}]}]
    grown.append({"role": "user", "parts": [{"text": "And who wrote it?"}]})
    for learn, statuses in ((True, [400, 200, 200]), (False, [400, 200, 400, 200])):
        sim.reset()
        client = make(sim, estimator=Scaled(0.7), learn=learn)
        generate(client, mode, history)
        generate(client, mode, grown)
        assert [e["status"] for e in served(sim)] == statuses


@pytest.mark.parametrize("factor", [0.1, 0.5])
@pytest.mark.parametrize("mode", MODES)
def test_a_hopeless_request_costs_at_most_two_requests(
    sim: SimServer, mode: str, factor: float
) -> None:
    client = make(sim, estimator=Scaled(factor))
    huge = generated_text("en", "huge", 40_000)  # one message, about 9k tokens
    with pytest.raises(windowfit.ContextOverflowError) as caught:
        generate(client, mode, [{"role": "user", "parts": [{"text": huge}]}])
    assert str(caught.value) == CONTEXT_OVERFLOW_MESSAGE
    assert caught.value.provider_message is not None
    log = served(sim)
    assert 1 <= len(log) <= 2 and all(e["status"] == 400 for e in log)
    assert len(log) == 1 or log[1]["tokens"] < log[0]["tokens"]  # never the same request
