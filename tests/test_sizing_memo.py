"""What a Sizer remembers of texts: true to content, bounded, and only where allowed."""

from __future__ import annotations

import pytest

from windowfit import Fitter
from windowfit._lru import ByteBoundedCache
from windowfit.profiles import estimator_for
from windowfit.sizing import _NAME_CHARS, _NAMES_LIMIT, Sizer
from windowfit.tokens import Estimator, part_counter


class _Counting(Estimator):
    """Counts how often it is asked, to see what the Sizer looks up instead."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def estimate(self, text: str) -> int:
        self.calls += 1
        return len(text) + 1


@pytest.mark.parametrize("family", ["conservative", "o200k", "seed"])
@pytest.mark.parametrize("text", ["", "Bash", "x" * _NAME_CHARS, "é" * 40, "ok " * 200, "中" * 300])
def test_remembered_counts_are_the_estimates(family: str, text: str) -> None:
    estimator = estimator_for(family=family)
    sizer = Sizer(estimator, "anthropic", memo=ByteBoundedCache(1 << 22))
    for _ in range(3):  # counted, then looked up
        assert sizer.text(text) == part_counter(estimator)(text)  # the text and its framing


def test_recurring_short_texts_are_counted_once() -> None:
    estimator = _Counting()
    sizer = Sizer(estimator, "anthropic", memo=ByteBoundedCache(1 << 22))
    before = estimator.calls
    for _ in range(50):
        assert sizer.text("Read") == 5
    assert estimator.calls == before + 1


def test_short_texts_kept_stay_within_their_bound() -> None:
    sizer = Sizer(_Counting(), "anthropic", memo=ByteBoundedCache(1 << 22))
    for k in range(3 * _NAMES_LIMIT):
        assert sizer.text(f"tool_{k}") == len(f"tool_{k}") + 1
    assert sizer._names is not None
    assert len(sizer._names) <= _NAMES_LIMIT


@pytest.mark.parametrize("max_bytes", [0, 200_000])
def test_a_small_fitter_keeps_no_short_texts(max_bytes: int) -> None:
    fitter = Fitter(max_bytes=max_bytes)
    sizer = fitter._sizer(estimator_for(), "anthropic")
    sizer.text("Bash")
    assert sizer._names is None


def test_a_sizer_without_a_memo_counts_every_time() -> None:
    estimator = _Counting()
    sizer = Sizer(estimator, "anthropic")
    before = estimator.calls
    for _ in range(5):
        sizer.text("Bash")
    assert estimator.calls == before + 5
