"""``wrap(..., verify="count_tokens")``: near the budget, the real anthropic SDK asks
serve-sim's free ``/v1/messages/count_tokens`` first and the request is fitted to that
count; far from it, no count is asked. Counted by serve-sim's request log."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from windowfit import SettingsError, wrap
from windowfit.retry import RetryPolicy
from windowfit.server import SimConfig, SimServer
from windowfit.tokens import Estimator

WINDOW = 20_000
MODEL = "sim-20k"
MAX_TOKENS = 200
FAST = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.0)


class Halved(Estimator):
    """An estimate that counts half of what it should: what verification is for."""

    name = "halved"

    def estimate(self, text: str) -> int:
        return max(1, len(text) // 8)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(SimConfig(context_window=WINDOW, cache_min_tokens=0)) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


def _client(sim: SimServer, mode: str, **options: Any) -> Any:
    kind = anthropic.AsyncAnthropic if mode == "async" else anthropic.Anthropic
    raw = kind(base_url=sim.url, api_key="k", max_retries=0)
    return wrap(raw, windows={MODEL: WINDOW}, retry=FAST, estimator=Halved(), **options)


def _history(rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the parts."}]
    for n in range(rounds):
        call = {"type": "tool_use", "id": f"c{n}", "name": "read", "input": {"n": n}}
        messages.append({"role": "assistant", "content": [call]})
        text = f"part {n}: " + " ".join(f"word{n}x{i}" for i in range(300))
        result = {"type": "tool_result", "tool_use_id": f"c{n}", "content": text}
        messages.append({"role": "user", "content": [result]})
    return messages


def _ask(client: Any, messages: list[dict[str, Any]]) -> Any:
    reply = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, messages=messages)
    if inspect.isawaitable(reply):
        return asyncio.run(_settle(reply))
    return reply


async def _settle(value: Any) -> Any:
    return await value


def _routes(sim: SimServer) -> list[tuple[str, int, int | None]]:
    return [(e["route"], e["status"], e["tokens"]) for e in sim.stats()["log"]]


def _estimate(messages: list[dict[str, Any]]) -> int:
    from windowfit import fit

    return fit(messages, budget=10**6, estimator=Halved()).report.tokens_after


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_near_the_budget_the_count_is_asked_and_the_request_fitted_to_it(
    sim: SimServer, mode: str
) -> None:
    messages = _history(6)
    budget = int(_estimate(messages) / 0.95)  # the estimate lands 5% below the budget
    client = _client(sim, mode, budget=budget, verify="count_tokens")
    _ask(client, messages)
    routes = _routes(sim)
    assert [r for r, _, _ in routes] == ["anthropic.count_tokens", "anthropic.messages"]
    counted, sent = routes[0][2], routes[1][2]
    assert counted is not None and counted > budget  # the halved estimate was far too low
    assert sent is not None and sent <= budget  # fitted to the provider's own count
    stats = client.windowfit.stats
    assert (stats.counted, stats.count_refits, stats.count_failures) == (1, 1, 0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_without_verification_the_same_request_goes_over_the_budget(
    sim: SimServer, mode: str
) -> None:
    messages = _history(6)
    budget = int(_estimate(messages) / 0.95)
    client = _client(sim, mode, budget=budget, learn=False)
    _ask(client, messages)
    (route,) = _routes(sim)
    assert route[0] == "anthropic.messages" and route[2] is not None and route[2] > budget


def test_far_below_the_budget_no_count_is_asked(sim: SimServer) -> None:
    messages = _history(2)
    client = _client(sim, "sync", budget=_estimate(messages) * 3, verify="count_tokens")
    _ask(client, messages)
    assert [r for r, _, _ in _routes(sim)] == ["anthropic.messages"]
    assert client.windowfit.stats.counted == 0


def test_a_count_that_fails_leaves_the_request_as_fitted(sim: SimServer) -> None:
    messages = _history(6)
    budget = int(_estimate(messages) / 0.95)
    client = _client(sim, "sync", budget=budget, verify="count_tokens")
    sim.add_faults([{"status": 500, "route": "anthropic.count_tokens"}])
    _ask(client, messages)
    assert client.windowfit.stats.count_failures == 1
    assert _routes(sim)[-1][:2] == ("anthropic.messages", 200)


@pytest.mark.parametrize(
    ("options", "wording"),
    [
        ({"verify": "tiktoken"}, "verify must be None or 'count_tokens'"),
        ({"verify": "count_tokens", "verify_band": 1.5}, "verify_band must be between"),
        ({"verify": "count_tokens", "verify_band": "x"}, "verify_band must be a number"),
    ],
)
def test_bad_verification_settings_are_refused(
    sim: SimServer, options: dict[str, Any], wording: str
) -> None:
    with pytest.raises(SettingsError, match=wording):
        _client(sim, "sync", **options)


def test_an_api_without_a_count_endpoint_cannot_verify(sim: SimServer) -> None:
    import openai

    with pytest.raises(SettingsError, match="token-counting endpoint"):
        wrap(openai.OpenAI(base_url=sim.openai_url, api_key="k"), verify="count_tokens")
