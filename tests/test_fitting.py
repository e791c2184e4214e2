"""Fitting by example: the seed's cases, the notes, and bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from windowfit import (
    CLEARED_RESULT_NOTE,
    CONTEXT_OVERFLOW_MESSAGE,
    ContextOverflowError,
    ConversationError,
    SettingsError,
    estimator_for,
)
from windowfit import fit as windowfit_fit

from conversations import check_valid_request, is_note

#: These tests size their conversations by the write-up's rule (ASCII/4), so they count
#: with it; what fit counts with by default is tested at the end.
SEED = estimator_for(family="seed")


def fit(messages: Any, **options: Any) -> Any:
    options.setdefault("estimator", SEED)
    return windowfit_fit(messages, **options)


def _round(i: int, size: int, fmt: str = "anthropic") -> list[dict[str, Any]]:
    if fmt == "openai":
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * size},
        ]
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"c{i}", "name": "read", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"c{i}", "content": "x" * size}],
        },
    ]


def _subagent(rounds: int, size: int, fmt: str = "anthropic") -> list[dict[str, Any]]:
    """A sub-agent: one instruction, then nothing but tool rounds."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the 40 chapters."}]
    for i in range(rounds):
        messages += _round(i, size, fmt)
    return messages


def test_fitting_request_is_returned_unchanged() -> None:
    messages = _subagent(3, 100)
    result = fit(messages, budget=100_000)
    assert result.report.stage == 0
    assert all(a is b for a, b in zip(result.messages, messages, strict=True))
    assert result.report.prefix_end == len(messages)
    assert result.report.cleared == () and result.report.dropped == ()


def test_stage_one_clears_oldest_whole_batches_and_keeps_pairs() -> None:
    messages = _subagent(20, 4000)  # about 1000 tokens per result
    result = fit(messages, budget=12_000)
    report = result.report
    assert report.stage == 1
    assert report.cleared[:4] == ("c0", "c1", "c2", "c3")
    assert len(report.cleared) % 4 == 0
    assert "c19" not in report.cleared
    assert report.tokens_after <= 12_000
    check_valid_request("anthropic", result.messages)
    first_cleared = result.messages[2]["content"][0]
    assert first_cleared["content"] == CLEARED_RESULT_NOTE
    assert first_cleared["tool_use_id"] == "c0"
    assert report.prefix_end == 2  # messages 0 and 1 are sent exactly as given


def test_protected_tail_is_a_quarter_of_the_budget() -> None:
    messages = _subagent(20, 4000)
    result = fit(messages, budget=12_000)
    intact = [
        m["content"][0]["tool_use_id"]
        for m in result.messages
        if m["role"] == "user"
        and isinstance(m["content"], list)
        and m["content"][0]["content"] != CLEARED_RESULT_NOTE
    ]
    # 3 results of ~1010 tokens fit in 3000 tokens; everything older is cleared or dropped
    assert intact[-2:] == ["c18", "c19"]


def test_small_results_are_never_cleared() -> None:
    messages = _subagent(60, 8)
    result = fit(messages, budget=1500)
    assert result.report.cleared == ()
    assert result.report.stage == 3


def test_subagent_lives_in_stage_three() -> None:
    """The seed's failure 1: one user message, so user-turn trimming has nothing to cut."""
    messages = _subagent(40, 4000)  # ~1k tokens per result; cleared rounds alone are ~4k
    result = fit(messages, budget=3000)
    report = result.report
    assert report.stage == 3
    assert report.tokens_after <= 3000
    assert result.messages[0]["content"].startswith("Read the 40 chapters.\n\n")
    assert is_note(result.messages[0])  # appended: the next kept message is an assistant
    assert result.messages[1]["role"] == "assistant"
    check_valid_request("anthropic", result.messages)
    assert report.dropped == tuple(range(1, report.dropped[-1] + 1))


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_stage_three_keeps_the_current_turns_opening_message(fmt: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "first task"}]
    messages += [
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "second task"},
    ]
    for i in range(40):
        messages += _round(i, 4000, fmt)
    result = fit(messages, budget=3000)
    assert result.report.stage == 3
    texts = [m.get("content") for m in result.messages]
    assert texts[0] == "first task"
    assert "second task" in texts
    assert any(is_note(m) for m in result.messages)
    check_valid_request(fmt, result.messages)


def test_stage_two_keeps_whole_user_turns() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task 0"}]
    for t in range(8):
        messages += _round(t, 20)  # small results: nothing to clear
        messages += [
            {"role": "assistant", "content": "ok " * 400},
            {"role": "user", "content": f"task {t + 1}"},
        ]
    result = fit(messages, budget=1200)
    report = result.report
    assert report.stage == 2
    assert result.messages[0]["content"] == "task 0"
    assert is_note(result.messages[1]) and result.messages[1]["role"] == "assistant"
    assert result.messages[2]["content"].startswith("task")
    check_valid_request("anthropic", result.messages)


def test_openai_system_messages_stay_first() -> None:
    messages = [{"role": "system", "content": "be brief"}, *_subagent(40, 4000, "openai")]
    result = fit(messages, budget=3000)
    assert result.messages[0] == {"role": "system", "content": "be brief"}
    assert result.messages[1]["content"].startswith("Read the 40 chapters.")
    check_valid_request("openai", result.messages)


def test_nothing_fits_raises_the_person_facing_error() -> None:
    messages = _subagent(3, 400_000)
    with pytest.raises(ContextOverflowError) as info:
        fit(messages, budget=50_000)
    assert str(info.value) == CONTEXT_OVERFLOW_MESSAGE
    assert info.value.limit == 50_000
    assert info.value.tokens is not None and info.value.tokens > 50_000


def test_system_and_tools_count_against_the_budget() -> None:
    messages = _subagent(2, 100)
    alone = fit(messages, budget=10_000).report.tokens_before
    tools = [{"name": "read", "description": "d" * 4000, "input_schema": {"type": "object"}}]
    both = fit(messages, budget=10_000, system="s" * 4000, tools=tools).report.tokens_before
    assert both >= alone + 2000


def test_report_is_json() -> None:
    report = fit(_subagent(20, 4000), budget=12_000).report
    assert json.loads(json.dumps(report.to_dict()))["stage"] == 1


@pytest.mark.parametrize("budget", [0, -5, 1.5, "100", True])
def test_bad_budget(budget: Any) -> None:
    with pytest.raises(SettingsError):
        fit(_subagent(1, 10), budget=budget)


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        (
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}],
                },
            ],
            "message 1, field 'content[0].tool_use_id'",
        ),
        (
            [
                {"role": "user", "content": "hi"},
                _round(0, 10)[0],
                {"role": "user", "content": "next"},
            ],
            "message 1",
        ),
        ([{"role": "user", "content": "hi"}, _round(0, 10)[0]], "has no tool result"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [_round(0, 1)[0]["content"][0]] * 2},
            ],
            "used twice in one round",
        ),
        (
            [{"role": "user", "content": "hi"}, *_round(0, 10), _round(0, 10)[1]],
            "no matching tool call",
        ),
        ([{"content": "hi"}], "message 0, field 'role'"),
        ("not a list", "messages must be a list"),
    ],
)
def test_invalid_conversations_say_where(messages: Any, where: str) -> None:
    with pytest.raises(ConversationError) as info:
        fit(messages, budget=1000)
    assert where in str(info.value)


def test_unknown_preset() -> None:
    with pytest.raises(SettingsError, match="known presets"):
        fit(_subagent(1, 10), budget=1000, settings="nope")


def test_a_corrected_message_is_accepted_after_an_error() -> None:
    """A rejected message must not poison what fitting remembers of the conversation."""
    first = {"role": "user", "content": "hi"}
    call = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "f", "input": {}},
            {"type": "tool_use", "id": "b", "name": "f", "input": {}},
        ],
    }
    bad = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "x"},
            {"type": "tool_result", "tool_use_id": "zzz", "content": "x"},
        ],
    }
    with pytest.raises(ConversationError):
        fit([first, call, bad], budget=1000)
    good = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "x"},
            {"type": "tool_result", "tool_use_id": "b", "content": "x"},
        ],
    }
    assert fit([first, call, good], budget=1000).report.stage == 0


def test_over_the_budget_sends_the_smallest_request_not_one_filled_to_the_window() -> None:
    rounds = [("c1", "a" * 8_000), ("c2", "b" * 8_000), ("c3", "word " * 8_000)]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for call_id, text in rounds:
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call_id, "name": "read", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
            }
        )
    whole = fit(messages, budget=10**6).report.tokens_after
    latest = fit(messages[:1] + messages[-2:], budget=10**6).report.tokens_after
    budget = latest // 2  # the latest round alone is over it; the window holds everything
    result = fit(messages, budget=budget, limit=whole * 2)
    assert result.report.over_budget and result.report.stage == 3
    assert result.report.tokens_after < whole
    assert result.messages[0]["content"].startswith(messages[0]["content"])  # with the note
    assert result.messages[1:] == messages[-2:]  # and only the latest round
    check_valid_request("anthropic", result.messages)


def test_limit_turns_an_overflow_into_an_over_budget_request() -> None:
    """A request over windowfit's budget but inside the model's window still gets sent."""
    messages = _subagent(3, 40_000)  # the newest result alone is ~10k tokens
    with pytest.raises(ContextOverflowError):
        fit(messages, budget=5000)
    result = fit(messages, budget=5000, limit=20_000)
    assert result.report.over_budget
    assert result.report.budget == 5000
    assert 5000 < result.report.tokens_after <= 20_000
    # Over the budget by as little as can be: nothing smaller fits, and the window's own
    # fit (which would take the answer's room) is larger.
    smallest = result.report.tokens_after
    with pytest.raises(ContextOverflowError):
        fit(messages, budget=smallest - 1)
    assert fit(messages, budget=20_000).report.tokens_after >= smallest
    with pytest.raises(ContextOverflowError) as too_small:
        fit(messages, budget=5000, limit=smallest - 1)
    assert too_small.value.limit == smallest - 1  # the window, not the budget
    check_valid_request("anthropic", result.messages)
    with pytest.raises(ContextOverflowError):
        fit(messages, budget=5000, limit=6000)


def test_clearing_that_cannot_reach_the_mark_hands_over_to_the_cut() -> None:
    """Once stage 1 has cleared everything without reaching its low-water mark, the next
    outgrowth is met by a cut with headroom, not by clearing one more result (which would
    re-send everything after it for little room)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(60):  # long assistant turns, mid-sized results: little to clear
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "thinking " * 150},
                    {"type": "tool_use", "id": f"c{i}", "name": "read", "input": {}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"c{i}", "content": "y" * 800}],
            }
        )
    budget = int(fit(messages, budget=10**9).report.tokens_before * 0.6)
    stages = []
    for point in range(3, len(messages) + 1, 2):
        report = fit(messages[:point], budget=budget).report
        stages.append((report.stage, report.clearing_exhausted))
    assert (1, True) in stages
    first_exhausted = stages.index((1, True))
    assert any(stage == 3 for stage, _ in stages[first_exhausted:])


@pytest.mark.parametrize(
    ("model", "family"),
    [
        (None, "conservative"),
        ("gpt-4o", "o200k"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude"),
        ("some-new-model", "conservative"),
    ],
)
def test_fit_counts_with_the_models_family_and_conservative_without_one(
    model: str | None, family: str
) -> None:
    messages = [{"role": "user", "content": "Прочитай это, пожалуйста: " + "слово " * 500}]
    expected = windowfit_fit(messages, budget=100_000, estimator=estimator_for(family=family))
    got = windowfit_fit(messages, budget=100_000, model=model)
    assert got.report.tokens_before == expected.report.tokens_before
    seed = windowfit_fit(messages, budget=100_000, estimator=SEED).report.tokens_before
    assert (got.report.tokens_before == seed) is False


def test_an_estimator_given_wins_over_the_model() -> None:
    messages = [{"role": "user", "content": "x" * 4_000}]
    got = windowfit_fit(messages, budget=100_000, model="gpt-4o", estimator=SEED)
    assert (
        got.report.tokens_before
        == windowfit_fit(messages, budget=100_000, estimator=SEED).report.tokens_before
    )
    with pytest.raises(SettingsError, match="model must be a model name"):
        windowfit_fit(messages, budget=100_000, model=42)  # type: ignore[arg-type]
