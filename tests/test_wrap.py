"""windowfit.wrap around the official anthropic and openai SDKs, sync and async, over real
HTTP against the simulated provider on 127.0.0.1."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import windowfit
from windowfit.errors import SettingsError
from windowfit.models import MODEL_LIMITS, ModelLimits, model_limits
from windowfit.retry import RetryPolicy
from windowfit.server import SimConfig, SimServer
from windowfit.tokens import Estimator
from windowfit.wrap import UsageRecord, WrapState, place_breakpoints, wrap

from conftest import data_dir

WINDOW = 6_000
MAX_TOKENS = 300
BUDGET = WINDOW - MAX_TOKENS
MODEL = "sim-6k"
WINDOWS = {MODEL: WINDOW}
KEY = "sk-wrap-test-0001"

TOOL = {
    "name": "read_chapter",
    "description": "Read one chapter of the book.",
    "input_schema": {
        "type": "object",
        "properties": {"number": {"type": "integer"}},
        "required": ["number"],
    },
}
OPENAI_TOOL = {
    "type": "function",
    "function": {
        "name": TOOL["name"],
        "description": TOOL["description"],
        "parameters": TOOL["input_schema"],
    },
}
TASK = "Read every chapter of the book and tell me who the narrator is."

PROVIDERS = ["anthropic", "openai"]
MODES = ["sync", "async"]


def _chapters() -> list[str]:
    """Chapters of real public-domain novels (English and Russian) when the shared data is
    present, else generated English and Russian prose; 1,800 characters each. Without the
    data, tests must still need fitting (twelve steps of these pass the budget), so the
    generated prose counts about as many tokens per chapter (o200k: 379 and 639, against
    424 and 522 for the real chapters)."""
    root = data_dir()
    texts = []
    if root is not None:
        for name in ("en_stoker-dracula.txt", "ru_tolstoy-voyna-i-mir-vol1.txt"):
            path = Path(root) / "texts" / name
            if path.is_file():
                texts.append(path.read_text(encoding="utf-8")[20_000:60_000])
    if not texts:  # as dense in tokens as the real pair, so that agents still need fitting
        texts = [
            "Harker wrote in his journal by candlelight while the wolves howled outside. " * 600,
            "Пьер долго сидел у окна, глядя на тёмную улицу, и думал о том, что сказала ему "
            "княжна Марья. " * 500,
        ]
    out = []
    for k in range(24):
        text = texts[k % len(texts)]
        start = (k // len(texts)) * 1_800
        out.append(text[start : start + 1_800])
    return out


CHAPTERS = _chapters()


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    config = SimConfig(
        context_window=WINDOW, tool_rounds=1_000, cache_min_tokens=0, cache_increment=1
    )
    with SimServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def sim_auth() -> Iterator[SimServer]:
    with SimServer(SimConfig(context_window=WINDOW, api_keys=(KEY,))) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(request: pytest.FixtureRequest) -> None:
    for name in ("sim", "sim_auth"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()


class Sleeps(list[float]):
    """Records the pauses between attempts instead of sleeping (a sync and an async form)."""

    def sync(self, seconds: float) -> None:
        self.append(seconds)

    async def async_(self, seconds: float) -> None:
        self.append(seconds)


FAST = RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=1.0, jitter=False)


def raw_client(provider: str, mode: str, server: SimServer, key: str = "k") -> Any:
    # max_retries=5 on purpose: wrap must switch the SDK's own retries off.
    if provider == "anthropic":
        cls: Any = anthropic.AsyncAnthropic if mode == "async" else anthropic.Anthropic
        return cls(base_url=server.url, api_key=key, max_retries=5)
    cls = openai.AsyncOpenAI if mode == "async" else openai.OpenAI
    return cls(base_url=server.openai_url, api_key=key, max_retries=5)


def make(
    provider: str, mode: str, server: SimServer, sleeps: Sleeps | None = None, **options: Any
) -> Any:
    sleeps = sleeps if sleeps is not None else Sleeps()
    options.setdefault("windows", WINDOWS)
    options.setdefault("retry", FAST)
    sleep = sleeps.async_ if mode == "async" else sleeps.sync
    return wrap(raw_client(provider, mode, server, options.pop("key", "k")), sleep=sleep, **options)


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def ask(client: Any, provider: str, messages: list[Any], **extra: Any) -> Any:
    """One request through ``client`` (sync or async)."""
    if provider == "anthropic":
        extra.setdefault("max_tokens", MAX_TOKENS)
        return await settle(client.messages.create(model=MODEL, messages=messages, **extra))
    extra.setdefault("max_completion_tokens", MAX_TOKENS)
    return await settle(client.chat.completions.create(model=MODEL, messages=messages, **extra))


async def agent(client: Any, provider: str, steps: int) -> list[Any]:
    """An agent loop reading one chapter per step; returns the history."""
    messages: list[Any] = [{"role": "user", "content": TASK}]
    tools = [TOOL] if provider == "anthropic" else [OPENAI_TOOL]
    for _ in range(steps):
        reply = await ask(client, provider, messages, tools=tools)
        if provider == "anthropic":
            messages.append({"role": "assistant", "content": reply.content})
            call = next(b for b in reply.content if b.type == "tool_use")
            text = CHAPTERS[call.input["number"] % len(CHAPTERS)]
            result = {"type": "tool_result", "tool_use_id": call.id, "content": text}
            messages.append({"role": "user", "content": [result]})
        else:
            message = reply.choices[0].message
            messages.append(message)
            call = message.tool_calls[0]
            number = json.loads(call.function.arguments)["number"]
            text = CHAPTERS[number % len(CHAPTERS)]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return messages


def served(server: SimServer) -> list[dict[str, Any]]:
    return [e for e in server.stats()["log"] if e["route"] != "anthropic.count_tokens"]


# --------------------------------------------------------------------------- fitting


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_long_agent_loop_stays_under_budget(sim: SimServer, provider: str, mode: str) -> None:
    client = make(provider, mode, sim)
    history = asyncio.run(agent(client, provider, steps=14))
    log = served(sim)
    assert len(log) == 14 and all(e["status"] == 200 for e in log)
    # What the server counted with its real tokenizer stayed inside the budget...
    assert max(e["tokens"] for e in log) <= BUDGET
    assert all(e["tokens"] + e["max_tokens"] <= WINDOW for e in log)
    # ...because fitting shaped the later requests, not because the history was small.
    stats = client.windowfit.stats
    assert stats.fitted > 0 and stats.last_report.stage >= 1
    assert stats.attempts == stats.calls == 14
    # The same history sent as it is would have been refused.
    raw = raw_client(provider, "sync", sim)
    tools = [TOOL] if provider == "anthropic" else [OPENAI_TOOL]
    with pytest.raises((anthropic.BadRequestError, openai.BadRequestError)) as caught:
        asyncio.run(ask(raw, provider, history, tools=tools))
    assert windowfit.classify_error(caught.value).kind is windowfit.ErrorKind.CONTEXT_OVERFLOW


@pytest.mark.parametrize("provider", PROVIDERS)
def test_eight_concurrent_sub_agents_share_one_async_client(sim: SimServer, provider: str) -> None:
    # The write-up's first failure: 8 sub-agents with one instruction each grew until every
    # request was refused. Through one wrapped client, concurrently, none is.
    client = make(provider, "async", sim)

    async def main() -> list[list[Any]]:
        return await asyncio.gather(*(agent(client, provider, steps=12) for _ in range(8)))

    histories = asyncio.run(main())
    assert all(len(h) == 25 for h in histories)
    log = served(sim)
    assert len(log) == 96 and {e["status"] for e in log} == {200}
    assert max(e["tokens"] for e in log) <= BUDGET
    assert client.windowfit.stats.fitted > 8


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_history_itself_is_never_changed(sim: SimServer, provider: str) -> None:
    client = make(provider, "sync", sim)
    history = asyncio.run(agent(client, provider, steps=12))
    before = copy.deepcopy(history)
    asyncio.run(
        ask(client, provider, history, tools=[TOOL] if provider == "anthropic" else [OPENAI_TOOL])
    )
    assert history == before
    assert client.windowfit.stats.last_report.messages_before == len(history)


def test_a_lower_budget_falls_back_to_the_window_when_nothing_fits_it(sim: SimServer) -> None:
    client = make("anthropic", "sync", sim, budget=800)
    messages = [{"role": "user", "content": CHAPTERS[0] * 3}]  # over 800 tokens, inside the window
    asyncio.run(ask(client, "anthropic", messages))
    report = client.windowfit.stats.last_report
    assert report.over_budget and report.budget == 800
    assert served(sim)[-1]["status"] == 200


# --------------------------------------------------------------------------- overflow


class Undercount(Estimator):
    """An estimator that counts a tenth of the truth: the provider has the last word."""

    name = "undercount"

    def estimate(self, text: str) -> int:
        return len(text) // 40


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("where", ["estimate", "provider"])
def test_a_hopeless_request_raises_context_overflow_after_at_most_one_request(
    sim: SimServer, provider: str, mode: str, where: str
) -> None:
    estimator = Undercount() if where == "provider" else None
    client = make(provider, mode, sim, estimator=estimator)
    huge = "A sentence that goes on. " * 2_000  # one message, about 12k tokens
    with pytest.raises(windowfit.ContextOverflowError) as caught:
        asyncio.run(ask(client, provider, [{"role": "user", "content": huge}]))
    error = caught.value
    assert str(error) == windowfit.CONTEXT_OVERFLOW_MESSAGE
    requests = sim.stats()["requests"]
    if where == "estimate":
        assert requests == 0  # fitting knew before sending
        assert error.limit == BUDGET
    else:
        assert requests == 1  # sent once, refused, never retried
        counted = served(sim)[0]["tokens"]
        assert (error.tokens, error.limit) == (counted, WINDOW)
        assert error.provider_message is not None
        assert ("prompt is too long" in error.provider_message) is (provider == "anthropic")
        assert isinstance(error.__cause__, (anthropic.BadRequestError, openai.BadRequestError))
    assert client.windowfit.stats.overflows == 1


# --------------------------------------------------------------------------- retries


OVERLOADED = {"anthropic": "529", "openai": "503"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_overloaded_rate_limited_server_errors_and_drops_are_retried(
    sim: SimServer, provider: str, mode: str
) -> None:
    sim.add_faults([OVERLOADED[provider], "429:retry_after=0.25", "500", "drop"])
    sleeps = Sleeps()
    client = make(provider, mode, sim, sleeps)
    reply = asyncio.run(ask(client, provider, [{"role": "user", "content": "hello"}]))
    text = reply.content[0].text if provider == "anthropic" else reply.choices[0].message.content
    assert text.startswith("Done")
    stats = sim.stats()
    assert stats["requests"] == 5  # four faults, one answer: the SDK's own retries are off
    assert stats["by_status"] == {OVERLOADED[provider]: 1, "429": 1, "500": 1, "0": 1, "200": 1}
    # Exponential backoff without jitter, except after the 429, whose retry-after is honoured.
    assert sleeps == [0.01, 0.25, 0.04, 0.08]
    assert client.windowfit.stats.retries == 4
    assert client.windowfit.stats.attempts == 5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_stop_at_the_policys_limit(sim: SimServer, provider: str) -> None:
    sim.add_faults(["500", "500", "500"])
    client = make(provider, "sync", sim, retry=RetryPolicy(max_attempts=2, base_delay=0.0))
    with pytest.raises((anthropic.InternalServerError, openai.InternalServerError)):
        asyncio.run(ask(client, provider, [{"role": "user", "content": "hello"}]))
    assert sim.stats()["requests"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [400, 401])
def test_invalid_requests_and_bad_keys_are_not_retried(
    sim: SimServer, sim_auth: SimServer, provider: str, mode: str, status: int
) -> None:
    sleeps = Sleeps()
    if status == 401:
        server = sim_auth
        client = make(provider, mode, server, sleeps, key="sk-not-the-key")
        expected: tuple[type[Exception], ...] = (
            anthropic.AuthenticationError,
            openai.AuthenticationError,
        )
    else:
        server = sim
        server.add_faults(["400"])
        client = make(provider, mode, server, sleeps)
        expected = (anthropic.BadRequestError, openai.BadRequestError)
    with pytest.raises(expected):
        asyncio.run(ask(client, provider, [{"role": "user", "content": "hello"}]))
    assert server.stats()["requests"] == 1
    assert sleeps == []
    assert client.windowfit.stats.errors[-1].status == status


# --------------------------------------------------------------------------- streaming


def long_history(provider: str) -> list[Any]:
    """A conversation well over the budget, with tool results to clear."""
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for k in range(14):
        if provider == "anthropic":
            use = {
                "type": "tool_use",
                "id": f"toolu_{k}",
                "name": "read_chapter",
                "input": {"number": k},
            }
            messages.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": CHAPTERS[k]}
            messages.append({"role": "user", "content": [result]})
        else:
            call = {
                "id": f"call_{k}",
                "type": "function",
                "function": {"name": "read_chapter", "arguments": json.dumps({"number": k})},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": CHAPTERS[k]})
    messages.append({"role": "user", "content": "Now answer, please."})
    return messages


async def stream_text(
    client: Any, provider: str, mode: str, helper: bool, history: list[Any]
) -> str:
    """The answer's text, read through a stream (create(stream=True) or the helper)."""
    if provider == "anthropic":
        kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": history}
        if helper and mode == "async":
            async with client.messages.stream(**kwargs) as stream:
                return "".join([text async for text in stream.text_stream])
        if helper:
            with client.messages.stream(**kwargs) as stream:
                return "".join(stream.text_stream)
        events = await settle(client.messages.create(**kwargs, stream=True))
        got = [e async for e in events] if mode == "async" else list(events)
        return "".join(e.delta.text for e in got if e.type == "content_block_delta")
    kwargs = {"model": MODEL, "max_completion_tokens": MAX_TOKENS, "messages": history}
    kwargs["stream_options"] = {"include_usage": True}
    if helper and mode == "async":
        async with client.chat.completions.stream(**kwargs) as stream:
            return "".join([e.delta async for e in stream if e.type == "content.delta"])
    if helper:
        with client.chat.completions.stream(**kwargs) as stream:
            return "".join(e.delta for e in stream if e.type == "content.delta")
    chunks = await settle(client.chat.completions.create(**kwargs, stream=True))
    got = [c async for c in chunks] if mode == "async" else list(chunks)
    return "".join(c.choices[0].delta.content or "" for c in got if c.choices)


@pytest.mark.parametrize("helper", [False, True], ids=["create-stream", "stream-helper"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_streaming_through_the_wrapper_is_fitted_retried_and_measured(
    sim: SimServer, provider: str, mode: str, helper: bool
) -> None:
    records: list[UsageRecord] = []
    # Counted with the write-up's rule, which clears the chapters (stage 1) here; the
    # default (conservative, for this unknown model) counts more and cuts instead.
    seed = windowfit.estimator_for(family="seed")
    client = make(provider, mode, sim, on_usage=records.append, estimator=seed)
    sim.add_faults([OVERLOADED[provider]])  # refused before the stream starts: retried
    text = asyncio.run(stream_text(client, provider, mode, helper, long_history(provider)))
    assert text == "Done: I read 14 tool results."
    log = served(sim)
    assert [e["status"] for e in log] == [int(OVERLOADED[provider]), 200]
    assert log[-1]["stream"] and log[-1]["tokens"] <= BUDGET
    assert client.windowfit.stats.last_report.stage >= 1
    assert len(records) == 1
    assert records[0].input_tokens == log[-1]["tokens"]
    assert records[0].estimated == client.windowfit.stats.last_report.tokens_after


# --------------------------------------------------------------------------- usage


class RecordingCalibrator:
    """A calibrator that keeps what it is told and scales budgets by a fixed factor."""

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor
        self.seen: list[tuple[int, int]] = []

    def observe(self, estimated: int, provider_tokens: int) -> None:
        self.seen.append((estimated, provider_tokens))

    def budget_for(self, budget: int) -> int:
        return int(budget * self.factor)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_with_cache_fields_flows_into_calibration(
    sim: SimServer, provider: str, mode: str
) -> None:
    calibrator = RecordingCalibrator()
    records: list[UsageRecord] = []
    client = make(
        provider, mode, sim, calibrator=calibrator, on_usage=records.append, cache_control=True
    )
    asyncio.run(agent(client, provider, steps=6))
    log = served(sim)
    assert len(calibrator.seen) == len(records) == len(log) == 6
    for (estimated, counted), record, entry in zip(calibrator.seen, records, log, strict=True):
        assert counted == entry["tokens"] == record.input_tokens
        assert estimated == record.estimated
        assert record.cache_read_tokens == entry["cache_read"]
        assert record.cache_write_tokens == entry["cache_write"]
        assert 0.3 < record.ratio <= 1.0  # conservative (an unknown model) errs high
    # From the second request on, the conversation's prefix is read from the cache.
    assert all(r.cache_read_tokens > 0 for r in records[1:])
    if provider == "anthropic":
        assert records[0].cache_write_tokens == records[0].input_tokens


def test_the_calibrators_budget_is_the_one_fitted_to(sim: SimServer) -> None:
    calibrator = RecordingCalibrator(factor=0.5)
    client = make("anthropic", "sync", sim, calibrator=calibrator)
    asyncio.run(ask(client, "anthropic", long_history("anthropic")))
    assert client.windowfit.stats.last_report.budget == BUDGET // 2
    assert served(sim)[-1]["tokens"] <= BUDGET // 2


def test_an_overflow_the_provider_reports_teaches_the_calibrator(sim: SimServer) -> None:
    calibrator = RecordingCalibrator()
    client = make("anthropic", "sync", sim, estimator=Undercount(), calibrator=calibrator)
    with pytest.raises(windowfit.ContextOverflowError):
        asyncio.run(
            ask(client, "anthropic", [{"role": "user", "content": "More words here. " * 3_000}])
        )
    ((estimated, counted),) = calibrator.seen
    assert counted == served(sim)[0]["tokens"] and estimated < counted


# --------------------------------------------------------------------------- cache_control


def test_breakpoints_make_the_prefix_cacheable(sim: SimServer) -> None:
    plain = make("anthropic", "sync", sim)
    asyncio.run(agent(plain, "anthropic", steps=4))
    assert sim.stats()["cache_read_tokens"] == 0  # Anthropic caches only at breakpoints
    sim.reset()
    cached = make("anthropic", "sync", sim, cache_control=True)
    asyncio.run(agent(cached, "anthropic", steps=14))
    stats = sim.stats()
    assert stats["by_status"] == {"200": 14}
    assert stats["cache_read_tokens"] > stats["cache_write_tokens"]


EPH = {"type": "ephemeral"}


@pytest.mark.parametrize(
    ("messages", "prefix_end", "existing", "expected"),
    [
        ([], 0, 0, []),
        (
            [{"role": "user", "content": "hi"}],
            1,
            0,
            [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPH}]}],
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
            ],
            1,
            0,
            [
                {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": EPH}]},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "b", "cache_control": EPH}],
                },
            ],
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            1,
            3,  # one slot left: the end of the request only
            [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "b", "cache_control": EPH}],
                },
            ],
        ),
        ([{"role": "user", "content": "a"}], 1, 4, [{"role": "user", "content": "a"}]),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "t", "signature": "s"}],
                }
            ],
            1,
            0,
            [
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "t", "signature": "s"}],
                }
            ],
        ),
    ],
)
def test_place_breakpoints(
    messages: list[Any], prefix_end: int, existing: int, expected: list[Any]
) -> None:
    before = copy.deepcopy(messages)
    assert place_breakpoints(messages, prefix_end, existing) == expected
    assert messages == before


# --------------------------------------------------------------------------- the client


@pytest.mark.parametrize("mode", MODES)
def test_everything_else_passes_through(sim: SimServer, mode: str) -> None:
    client = make("anthropic", mode, sim)
    assert client.api_key == "k" and str(client.base_url).startswith(sim.url)
    counted = asyncio.run(
        settle(
            client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        )
    )
    assert counted.input_tokens == sim.stats()["log"][-1]["tokens"] > 0
    assert sim.stats()["by_route"] == {"anthropic.count_tokens": 1}
    other = client.with_options(timeout=20)
    assert other.windowfit is client.windowfit
    asyncio.run(ask(other, "anthropic", long_history("anthropic")))
    assert served(sim)[-1]["tokens"] <= BUDGET
    assert "windowfit.wrap" in repr(client)


def test_only_sdk_clients_can_be_wrapped() -> None:
    with pytest.raises(TypeError, match="anthropic or openai client"):
        wrap(object())
    with pytest.raises(SettingsError):
        wrap(anthropic.Anthropic(api_key="k"), budget=0)


def test_an_unknown_model_needs_a_budget_or_a_window(sim: SimServer) -> None:
    client = wrap(anthropic.Anthropic(base_url=sim.url, api_key="k"))
    with pytest.raises(SettingsError, match="no context window is known"):
        client.messages.create(
            model="mystery-model", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert sim.stats()["requests"] == 0


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5-20250929", ModelLimits(200_000, 64_000)),
        ("claude-opus-4-6", ModelLimits(1_000_000, 128_000)),
        ("claude-unknown-9", ModelLimits(200_000, 4_096)),
        ("gpt-4o-2024-08-06", ModelLimits(128_000, 16_384)),
        ("gpt-4-0613", ModelLimits(8_192, 8_192)),
        ("gpt-4-1106-preview", ModelLimits(128_000, 4_096)),
        ("gpt-4.1-mini", ModelLimits(1_047_576, 32_768)),
        ("o3-mini", ModelLimits(200_000, 100_000)),
        ("llama-3", ModelLimits(8_192, 4_096)),
        ("llama", None),
        ("", None),
    ],
)
def test_known_windows(model: str, expected: ModelLimits | None) -> None:
    assert model_limits(model) == expected


def test_windows_given_win_over_the_table() -> None:
    assert model_limits("gpt-4o", {"gpt-4o": 64_000}) == ModelLimits(64_000, 4_096)
    assert model_limits("my-model-v2", {"my-model": (32_000, 2_000)}) == ModelLimits(32_000, 2_000)
    assert all(limits.max_output <= limits.context_window for limits in MODEL_LIMITS.values())


def _state(provider: Any = "anthropic", **options: Any) -> WrapState:
    defaults: dict[str, Any] = {
        "budget": None,
        "settings": None,
        "windows": None,
        "estimator": None,
        "retry": None,
        "cache_control": False,
        "calibrator": None,
        "on_usage": None,
        "on_fit": None,
        "sleep": None,
    }
    return WrapState(provider, **(defaults | options))


@pytest.mark.parametrize(
    ("options", "model", "max_tokens", "expected"),
    [
        ({}, "claude-sonnet-4-5", 8_000, (192_000, None)),
        ({"budget": 50_000}, "claude-sonnet-4-5", 8_000, (50_000, 192_000)),
        ({"budget": 500_000}, "claude-sonnet-4-5", 8_000, (192_000, None)),
        ({"budget": 9_000}, "mystery", 100, (9_000, None)),
        ({}, "gpt-4o", None, (128_000 - 16_384, None)),
        ({"windows": {"gpt-4o": 10_000}}, "gpt-4o", 1_000, (9_000, None)),
    ],
)
def test_the_budget_is_the_window_minus_the_output(
    options: dict[str, Any], model: str, max_tokens: int | None, expected: tuple[int, int | None]
) -> None:
    assert _state(**options).limits_for(model, max_tokens) == expected


@pytest.mark.parametrize(("model", "max_tokens"), [("mystery", 10), ("claude-3-haiku", 200_000)])
def test_impossible_budgets_are_settings_errors(model: str, max_tokens: int) -> None:
    with pytest.raises(SettingsError):
        _state().limits_for(model, max_tokens)


# --------------------------------------------------------------------------- the README loop


def readme_loop(base_url: str) -> tuple[str, Any]:
    """The README's agent loop (which spells wrap windowfit.wrap), apart from the base URL."""
    client = wrap(anthropic.Anthropic(base_url=base_url, api_key="sim"))
    tools = [
        {
            "name": "read_chapter",
            "description": "Read one chapter of the book.",
            "input_schema": {
                "type": "object",
                "properties": {"number": {"type": "integer"}},
                "required": ["number"],
            },
        }
    ]
    messages: list[Any] = [
        {"role": "user", "content": "Read all 40 chapters, then tell me who the narrator is."}
    ]
    while True:
        reply = client.messages.create(
            model="claude-haiku-4-5", max_tokens=1024, tools=tools, messages=messages
        )
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason != "tool_use":
            break
        page = "Harker wrote in his journal by candlelight while the wolves howled outside. "
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        "content": f"Chapter {block.input['number']}. " + page * 500,
                    }
                    for block in reply.content
                    if block.type == "tool_use"
                ],
            }
        )
    return reply.content[0].text, client.windowfit.stats.last_report


def test_the_readme_agent_loop_runs_against_serve_sim() -> None:
    # windowfit serve-sim --port 8080 --tool-rounds 40
    with SimServer(SimConfig(tool_rounds=40)) as server:
        text, report = readme_loop(server.url)
        assert text == "Done: I read 40 tool results."
        assert report.stage == 1 and report.tokens_before > 200_000
        stats = server.stats()
        assert stats["by_status"] == {"200": 41}
        assert stats["max_request_tokens"] <= 200_000 - 1024
