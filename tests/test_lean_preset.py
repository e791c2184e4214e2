"""windowfit-lean: results that leave its keep-window are cleared batch_size at a time."""

from __future__ import annotations

from typing import Any

import pytest

from windowfit import PRESETS, FitSettings, Fitter, fit

ROUNDS = 40
RESULT = "observation line with some words in it\n" * 40  # a few hundred tokens each


def _conversation(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    """A task, then ``rounds`` tool rounds with results of one size (Anthropic format)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for k in range(rounds):
        call = {"type": "tool_use", "id": f"call_{k}", "name": "run", "input": {"n": k}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"call_{k}", "content": RESULT}
        messages.append({"role": "user", "content": [result]})
    return messages


def _points(messages: list[dict[str, Any]]) -> list[int]:
    """The request points: after every tool result."""
    return [i + 1 for i in range(2, len(messages), 2)]


def _budget(messages: list[dict[str, Any]]) -> int:
    """A budget the raw conversation passes half way in, and that holds the task, the
    newest 3 + 7 waiting results intact and the rest cleared: clearing alone suffices."""
    whole = fit(messages, budget=10**9).report.tokens_before
    return whole // 2


def _lean(batch: int) -> FitSettings:
    return PRESETS["windowfit-lean"].with_(batch_size=batch)


def test_the_preset_clears_eight_at_a_time() -> None:
    lean = FitSettings.preset("windowfit-lean")
    assert (lean.keep_results, lean.clear_trigger, lean.batch_size) == (3, 1.0, 8)


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_results_leaving_the_window_are_cleared_in_whole_batches(batch: int) -> None:
    messages = _conversation()
    budget = _budget(messages)
    fitter = Fitter()
    triggered = 0
    before = 0
    for upto in _points(messages):
        result = fitter.fit(messages[:upto], budget=budget, settings=_lean(batch))
        report = result.report
        assert report.tokens_after <= budget
        assert report.stage <= 1, "clearing alone suffices here"
        results = upto // 2  # tool results in messages[:upto]
        newest = {f"call_{k}" for k in range(results - 3, results)}
        assert not newest & set(report.cleared), "the keep-window of 3 stays intact"
        if report.tokens_before <= budget:
            assert not report.cleared
            continue
        triggered += 1
        waiting = results - 3 - len(report.cleared)
        assert 0 <= waiting < batch, (upto, len(report.cleared), waiting)
        grew = len(report.cleared) - before
        assert grew == 0 or grew >= batch, "a clearing takes a whole batch (or the backlog)"
        before = len(report.cleared)
    assert triggered >= ROUNDS // 3


def _changes(batch: int) -> int:
    """How many requests do not start with the whole previous request (prompt-cache
    breaks) over the conversation."""
    messages = _conversation()
    budget = _budget(messages)
    previous: list[dict[str, Any]] | None = None
    breaks = 0
    for upto in _points(messages):
        sent = fit(messages[:upto], budget=budget, settings=_lean(batch)).messages
        if previous is not None and sent[: len(previous)] != previous:
            breaks += 1
        previous = sent
    return breaks


def test_batches_change_the_request_that_many_times_less_often() -> None:
    one, eight = _changes(1), _changes(8)
    assert one >= ROUNDS // 3  # one at every request past the trigger
    assert 4 * eight <= one


def test_the_budget_holds_when_waiting_results_would_not_fit() -> None:
    """With a budget too small for 8 waiting results, stage 1 clears them sooner."""
    messages = _conversation()
    whole = fit(messages, budget=10**9).report.tokens_before
    budget = whole // 6
    for upto in _points(messages):
        report = fit(messages[:upto], budget=budget, settings="windowfit-lean").report
        assert report.tokens_after <= budget
