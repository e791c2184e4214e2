"""The shortcuts a cold fit takes give what the plain paths give: the fold extended in one
loop, the pairing rule checked in one loop, and the memo of long texts' counts (which keys
a text by its length and ends but only answers for an equal text)."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowfit._fold import Fold
from windowfit._lru import ByteBoundedCache
from windowfit.formats import get_format
from windowfit.formats._rules import PairingRule
from windowfit.settings import FitSettings
from windowfit.sizing import Sizer
from windowfit.tokens import Estimator

from conversations import conversations


def _facts(fmt: str, messages: list[dict[str, Any]]) -> list[Any]:
    spec = get_format(fmt)
    sizer = Sizer(provider=fmt)
    return [spec.scan(m, i, sizer) for i, m in enumerate(messages)]


def _two_folds(conv: Any, budget: int, fitting: FitSettings) -> tuple[list[Any], Fold, Fold]:
    """A conversation's facts and two folds that have read them, to drive two ways."""
    fmt, messages = conv
    facts = _facts(fmt, messages)
    folds = [Fold(budget, fitting, 10, 30, get_format(fmt)) for _ in range(2)]
    for fold in folds:
        fold.extend(facts)
    return facts, folds[0], folds[1]


@settings(max_examples=60, deadline=None)
@given(conversations(), st.data())
def test_fold_extend_is_add_message_by_message(conv: Any, data: st.DataObject) -> None:
    fmt, messages = conv
    facts = _facts(fmt, messages)
    spec = get_format(fmt)
    fitting = FitSettings()
    one_by_one = Fold(1000, fitting, 10, 30, spec)
    for f in facts:
        one_by_one.add(f)
    # Extended in one go, and in pieces (a kept fold that grows by a few messages).
    whole = Fold(1000, fitting, 10, 30, spec)
    whole.extend(facts)
    assert whole == one_by_one
    pieces = Fold(1000, fitting, 10, 30, spec)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(facts)), max_size=4)))
    for cut in [*cuts, len(facts)]:
        pieces.extend(facts[:cut])
    assert pieces == one_by_one


def _broken(messages: list[dict[str, Any]], draw: st.DataObject) -> list[dict[str, Any]]:
    """The conversation with a few messages dropped or repeated (pairing may break)."""
    out = list(messages)
    for _ in range(draw.draw(st.integers(0, 3))):
        if not out:
            break
        k = draw.draw(st.integers(0, len(out) - 1))
        if draw.draw(st.booleans()):
            del out[k]
        else:
            out.insert(k, out[k])
    return out


@settings(max_examples=80, deadline=None)
@given(conversations(), st.data())
def test_pairing_add_all_finds_what_add_finds(conv: Any, data: st.DataObject) -> None:
    fmt, messages = conv
    messages = _broken(messages, data)
    facts = _facts(fmt, messages)
    spec = get_format(fmt)
    start = data.draw(st.integers(0, len(facts)))
    one, many = PairingRule.for_format(spec), PairingRule.for_format(spec)
    first = None
    for i in range(start):
        first = first or one.add(i, facts[i])
    if first is None:
        assert many.add_all(facts[:start]) is None
        expected = None
        for i in range(start, len(facts)):
            expected = one.add(i, facts[i])
            if expected is not None:
                break
        assert many.add_all(facts, start) == expected
        if expected is None:
            assert (many.open_calls, many.opened, many.last_role) == (
                one.open_calls,
                one.opened,
                one.last_role,
            )


class _Counting(Estimator):
    """Counts characters, and how often it was asked."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def estimate(self, text: str) -> int:
        self.calls += 1
        return len(text) + text.count("x")


@pytest.mark.parametrize("middle", ["x", "y", "xx"])
def test_memo_answers_only_for_an_equal_text(middle: str) -> None:
    estimator = _Counting()
    sizer = Sizer(estimator, memo=ByteBoundedCache(1 << 20))
    ends = "a" * 200
    first = f"{ends}{'y' * len(middle)}{ends}"
    other = f"{ends}{middle}{ends}"  # same length and ends as ``first``
    assert sizer.text(first) == estimator.estimate(first)
    estimator.calls = 0
    assert sizer.text(other) == len(other) + other.count("x")
    assert estimator.calls == (0 if other == first else 1)
    estimator.calls = 0
    copy = (other + ".")[:-1]  # equal content, another object
    assert copy is not other
    assert sizer.text(copy) == len(other) + other.count("x")
    assert estimator.calls == 0


@settings(max_examples=80, deadline=None)
@given(
    conversations(),
    st.integers(200, 30_000),
    st.sampled_from([FitSettings(), FitSettings(keep_results=2), FitSettings(clear_trigger=0.5)]),
)
def test_fold_points_is_a_step_at_every_point(conv: Any, budget: int, fitting: FitSettings) -> None:
    facts, stepped, skipped = _two_folds(conv, budget, fitting)
    states = []
    for point in stepped.assistants:
        decided = stepped.step(stepped.state, point)
        if not decided.failed:
            stepped.state = decided
        states.append(stepped.state)
    half = len(skipped.assistants) // 2
    skipped.fold_points(skipped.assistants[:half])  # in two calls, as a growing conversation
    assert skipped.state == (states[half - 1] if half else stepped.state.__class__())
    skipped.fold_points(skipped.assistants[half:])
    assert skipped.state == stepped.state
    end = len(facts)
    assert skipped.step(skipped.state, end) == stepped.step(stepped.state, end)


def _protect_one_at_a_time(fold: Fold, upto: int) -> None:
    """The protected tail moved one result at a time (what ``advance_protection`` did
    before it bisected): the reference its bisection must agree with."""
    limit = fold.settings.protect_fraction * fold.budget
    keep = fold.settings.keep_results
    count = bisect_left(fold.result_msgs, upto)
    while fold.tail_end < count:
        fold.tail_tokens += fold.results[fold.tail_end][2]
        fold.tail_end += 1
    while fold.protected_from < count - 1 and (
        count - fold.protected_from > keep if keep is not None else fold.tail_tokens > limit
    ):
        message, _, tokens, saving, clearable = fold.results[fold.protected_from]
        fold.tail_tokens -= tokens
        if clearable:
            fold.clearable_msg.append(message)
            fold.clearable_idx.append(fold.protected_from)
            fold.savings.append(fold.savings[-1] + saving)
        fold.protected_from += 1


@settings(max_examples=80, deadline=None)
@given(
    conversations(),
    st.integers(50, 30_000),
    st.sampled_from(
        [FitSettings(), FitSettings(keep_results=2), FitSettings(protect_fraction=0.1)]
    ),
    st.data(),
)
def test_the_protected_tail_moves_as_one_result_at_a_time(
    conv: Any, budget: int, fitting: FitSettings, data: st.DataObject
) -> None:
    facts, bisected, stepped = _two_folds(conv, budget, fitting)
    points = sorted(data.draw(st.lists(st.integers(0, len(facts)), min_size=1, max_size=6)))
    for upto in points:  # growing, with a look at an uncommitted point now and then
        snap = bisected.snapshot(), stepped.snapshot()
        bisected.advance_protection(upto)
        _protect_one_at_a_time(stepped, upto)
        assert bisected == stepped
        if data.draw(st.booleans()):
            bisected.restore(snap[0])
            stepped.restore(snap[1])
            assert bisected == stepped
