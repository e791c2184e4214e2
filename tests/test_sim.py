"""The simulated provider, the scripted models and the old system's trimming."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from windowfit.agent import AgentInfo, ModelRequest, ModelResponse
from windowfit.classify import ErrorKind, classify_error
from windowfit.errors import SimulatedProviderError
from windowfit.formats import get_format
from windowfit.instructions import SAFETY_NET
from windowfit.sim import (
    LEGACY_NOTE,
    Coordinator,
    LegacyShaper,
    PolicyView,
    Reader,
    SimulatedProvider,
    cached_tokenizer,
    chars4,
    coordinator_instruction,
    files_in,
    legacy_should_retry,
    prompt_too_long,
    reader_instruction,
)
from windowfit.sizing import Sizer
from windowfit.tokenizers import load_backend
from windowfit.tokens import Estimator, SeedEstimator

AGENT = AgentInfo("session", "main", "main")
RUSSIAN = "Князь Андрей посмотрел на Пьера и улыбнулся. " * 400


class Fixed:
    """A policy that always answers the same text."""

    def respond(self, view: PolicyView) -> list[dict[str, Any]]:
        return [{"type": "text", "text": "ok"}]


class Counting(Estimator):
    name = "counting"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def estimate(self, text: str) -> int:
        self.texts.append(text)
        return len(text)


def request(
    messages: list[dict[str, Any]], system: str = "sys", agent: AgentInfo = AGENT
) -> ModelRequest:
    return ModelRequest(agent, system, [], messages)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def respond(provider: SimulatedProvider, req: ModelRequest) -> ModelResponse:
    return asyncio.run(provider.respond(req))


# --------------------------------------------------------------------------------------
# The hard limit and Anthropic's error


@pytest.fixture(scope="module")
def o200k() -> Estimator:
    return cached_tokenizer("o200k")


def test_counts_with_the_real_tokenizer(o200k: Estimator) -> None:
    provider = SimulatedProvider(Fixed(), tokenizer=o200k)
    assert provider.tokenizer_name == "o200k"
    messages = [user(RUSSIAN)]
    real = load_backend("o200k").estimate(RUSSIAN)
    expected = Sizer(load_backend("o200k")).system("sys") + Sizer(load_backend("o200k")).messages(
        messages, get_format("anthropic")
    )
    assert provider.count(request(messages)) == expected
    assert real < expected < real + 20  # the text plus a little framing
    assert SeedEstimator().estimate(RUSSIAN) != real  # not the estimate: a real count


@pytest.mark.parametrize("over", [0, 1, 5000])
def test_the_hard_limit_and_anthropics_error(o200k: Estimator, over: int) -> None:
    messages = [user(RUSSIAN)]
    size = SimulatedProvider(Fixed(), tokenizer=o200k).count(request(messages))
    limit = size - over
    provider = SimulatedProvider(Fixed(), tokenizer=o200k, hard_limit=limit)
    if over == 0:
        assert respond(provider, request(messages)).text == "ok"  # exactly at the limit: fine
        assert (provider.calls, provider.rejections) == (1, 0)
        return
    with pytest.raises(SimulatedProviderError) as caught:
        respond(provider, request(messages))
    error = caught.value
    message = f"prompt is too long: {size} tokens > {limit} maximum"
    assert error.status_code == 400
    assert error.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
    }
    info = classify_error(error)
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert (info.prompt_tokens, info.limit, info.status) == (size, limit, 400)
    assert not info.retryable and not info.alert
    assert (provider.calls, provider.rejections) == (1, 1)
    usage = provider.usage[AGENT.key]
    assert (usage.requests, usage.rejected, usage.peak_tokens) == (1, 1, size)
    assert usage.cache_read == usage.cache_write == 0  # a rejected request costs nothing


def test_prompt_too_long_is_classified_from_status_and_body_too() -> None:
    error = prompt_too_long(1_234_567, 1_000_000)
    info = classify_error(status=error.status_code, body=error.body)
    assert info.is_context_overflow and info.prompt_tokens == 1_234_567


def test_each_message_is_counted_once() -> None:
    counter = Counting()
    provider = SimulatedProvider(Fixed(), tokenizer=counter)
    big = user("x" * 5000)
    messages = [big, assistant("a"), user("b")]
    for _ in range(3):
        respond(provider, request(messages))
    assert counter.texts.count("x" * 5000) == 1
    # A new message object with the same long text is not counted again either.
    respond(provider, request([user("x" * 5000)]))
    assert counter.texts.count("x" * 5000) == 1


# --------------------------------------------------------------------------------------
# Prefix cache


def test_prefix_cache_reads_writes_and_breaks() -> None:
    provider = SimulatedProvider(Fixed(), tokenizer=Counting())
    m1, m2, m3 = user("a" * 100), assistant("b" * 50), user("c" * 70)
    s1, s2, s3 = provider.sizes([m1, m2, m3])
    fixed = provider.count(request([]))
    first = respond(provider, request([m1]))
    assert first.usage.cache_read_tokens == 0
    assert first.usage.cache_write_tokens == fixed + s1
    second = respond(provider, request([m1, m2, m3]))
    assert second.usage.cache_read_tokens == fixed + s1
    assert second.usage.cache_write_tokens == s2 + s3
    # Equal content is a cache hit even when it is another object.
    third = respond(provider, request([dict(m1), m2, m3, user("d")]))
    assert third.usage.cache_read_tokens == fixed + s1 + s2 + s3
    usage = provider.usage[AGENT.key]
    assert usage.breaks == 0
    # Changing an early message breaks the prefix: everything after it is written again.
    changed = respond(provider, request([m1, assistant("B" * 50), m3]))
    assert changed.usage.cache_read_tokens == fixed + s1
    assert usage.breaks == 1
    # Another system prompt: nothing is read.
    other = respond(provider, request([m1], system="other"))
    assert other.usage.cache_read_tokens == 0
    assert usage.breaks == 2
    assert math.isclose(usage.cost, usage.cache_read * 0.1 + usage.cache_write * 1.25)
    assert 0 < usage.read_share < 1


def test_the_cache_is_per_agent() -> None:
    provider = SimulatedProvider(Fixed(), tokenizer=Counting())
    m = user("a" * 100)
    respond(provider, request([m]))
    other = AgentInfo("session", "main/1", "sub", 1, "main")
    answer = respond(provider, request([m], agent=other))
    assert answer.usage.cache_read_tokens == 0
    assert set(provider.usage) == {AGENT.key, other.key}
    assert provider.total().requests == 2


# --------------------------------------------------------------------------------------
# Scripted models


def run_reader(reader: Reader, files: list[str], system: str = "sys") -> list[dict[str, Any]]:
    """Play a reader against fake file contents; the conversation."""
    provider = SimulatedProvider(reader, tokenizer=Counting())
    messages: list[dict[str, Any]] = [user(reader_instruction(files))]
    for _ in range(len(files) + 2):
        answer = respond(provider, request(messages, system=system))
        messages.append(answer.message())
        calls = answer.tool_calls
        if not calls:
            return messages
        (call,) = calls
        assert call.name == "read_file"
        body = f"Heading of {call.input['path']}\n" + "w " * 2000
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": body}],
            }
        )
    raise AssertionError("the reader never answered")


@pytest.mark.parametrize("count", [1, 3, 7])
def test_reader_reads_every_file_in_order_then_answers(count: int) -> None:
    files = [f"dir/file {k}.txt" for k in range(count)]
    messages = run_reader(Reader(), files)
    calls = [
        b
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert [c["input"]["path"] for c in calls] == files
    assert len({c["id"] for c in calls}) == count
    answer = messages[-1]["content"][0]["text"]
    assert answer.startswith(f"I went through {count} of the {count} files.")
    for path in files:
        assert (
            f"Noted {path}: 'Heading of {path}', 2,004 words." in answer
        )  # the heading's 4 and 2,000 more


@pytest.mark.parametrize(("system", "read"), [("sys", 2), (f"sys\n\n{SAFETY_NET}", 10)])
def test_a_cautious_reader_stops_early_unless_told_about_the_safety_net(
    system: str, read: int
) -> None:
    files = [f"f{k}" for k in range(10)]
    # Each file is ~4,000 "tokens" with this counter: the third would pass 25% of 40,000.
    messages = run_reader(Reader(caution=0.25, budget=40_000), files, system=system)
    answer = messages[-1]["content"][0]["text"]
    assert answer.startswith(f"I went through {read} of the 10 files.")
    assert ("to save space" in answer) is (read < 10)


def test_coordinator_splits_files_and_gathers_answers() -> None:
    files = [f"f{k}" for k in range(10)]
    provider = SimulatedProvider(Coordinator(), tokenizer=Counting())
    messages: list[dict[str, Any]] = [user(coordinator_instruction(files, 3))]
    first = respond(provider, request(messages))
    calls = first.tool_calls
    assert [c.name for c in calls] == ["spawn_subagent"] * 3
    shares = [files_in(str(c.input["instruction"])) for c in calls]
    assert sorted(f for share in shares for f in share) == sorted(files)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    messages.append(first.message())
    results = [
        {"type": "tool_result", "tool_use_id": calls[0].id, "content": "done A"},
        {"type": "tool_result", "tool_use_id": calls[1].id, "content": "stopped", "is_error": True},
        {"type": "tool_result", "tool_use_id": calls[2].id, "content": "done C"},
    ]
    messages.append({"role": "user", "content": results})
    final = respond(provider, request(messages)).text
    assert final.splitlines() == [
        "2 of 3 sub-agents finished.",
        "reader 1: done A",
        "reader 2 did not finish: stopped",
        "reader 3: done C",
    ]


# --------------------------------------------------------------------------------------
# The old system


def test_chars4() -> None:
    assert [chars4(t) for t in ("", "a", "abcd", "abcde", RUSSIAN)] == [
        0,
        1,
        1,
        2,
        math.ceil(len(RUSSIAN) / 4),
    ]
    assert all(legacy_should_retry(classify_error(prompt_too_long(2, 1))) for _ in range(2))


def subagent_history(rounds: int, size: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [user("read everything")]
    for k in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{k}", "name": "read_file", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": "x" * size}],
            }
        )
    return messages


def test_legacy_cannot_cut_a_subagent() -> None:
    messages = subagent_history(10, 4000)
    shaped = LegacyShaper(budget=2000)(messages, "sys", [])
    assert shaped.messages == messages
    assert shaped.estimate > 10 * 1000
    assert shaped.dropped == 0


def test_legacy_keeps_the_first_message_a_note_and_the_latest_whole_turns() -> None:
    messages: list[dict[str, Any]] = []
    for turn in range(5):
        messages += [user(f"turn {turn} " + "q" * 4000), assistant("a" * 4000)]
    shaper = LegacyShaper(budget=5500)
    shaped = shaper(messages, "", [])
    # first message (1,002) + note + turn 4 (2,002) + turn 3 (2,002) fit; turn 2 does not.
    assert shaped.messages[0] is messages[0]
    assert shaped.messages[1] == {"role": "assistant", "content": LEGACY_NOTE}
    assert shaped.messages[2:] == messages[6:]
    assert shaped.dropped == 5
    assert shaped.estimate <= 5500
    # Within budget by chars/4 even when the text is Russian (the old system's mistake).
    russian = [user(RUSSIAN), assistant("ok")]
    assert LegacyShaper(budget=len(RUSSIAN) // 4 + 10)(russian, "", []).messages == russian
