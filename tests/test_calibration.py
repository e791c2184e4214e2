"""Learning from the provider's counts: the bounds that keep estimates erring high, how
the correction tightens, the counts inside overflow errors, and how it composes with fit."""

from __future__ import annotations

import math
import random
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowfit import classify_error, fit
from windowfit.calibration import Correction, UsageCalibrator, provider_input_tokens
from windowfit.classify import ErrorInfo, ErrorKind
from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE, SettingsError
from windowfit.formats import Usage
from windowfit.logs import RecordedUsage
from windowfit.profiles import estimator_for


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # Anthropic: input + cache reads + cache writes
        (
            {
                "input_tokens": 12,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 50,
            },
            1062,
        ),
        ({"input_tokens": 12, "cache_read_input_tokens": None, "output_tokens": 3}, 12),
        (
            SimpleNamespace(
                input_tokens=5, cache_read_input_tokens=0, cache_creation_input_tokens=700
            ),
            705,
        ),
        # OpenAI chat: prompt_tokens holds the cached ones already
        ({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 800}}, 900),
        (SimpleNamespace(prompt_tokens=42, completion_tokens=7), 42),
        # OpenAI responses, and windowfit's own log records: input_tokens is the total
        ({"input_tokens": 300, "input_tokens_details": {"cached_tokens": 100}}, 300),
        (RecordedUsage(400, 10, cache_read_tokens=300), 400),
        (Usage(400, 10, cache_read_tokens=300, cache_write_tokens=50), 400),
        # nothing to learn from
        (None, None),
        ({"output_tokens": 5}, None),
        ({"prompt_tokens": "many"}, 0),
    ],
)
def test_provider_input_tokens(usage: Any, expected: int | None) -> None:
    assert provider_input_tokens(usage) == expected


def test_before_any_observation_the_correction_is_the_identity() -> None:
    calibrator = UsageCalibrator()
    assert (calibrator.factor, calibrator.offset, calibrator.observations) == (1.0, 0, 0)
    assert calibrator.correct(12_345) == 12_345
    assert calibrator.budget_for(100_000) == 100_000
    assert calibrator.correct(0) == 0


OBSERVATIONS = st.lists(
    st.tuples(st.integers(1, 2_000_000), st.integers(1, 2_000_000)), min_size=1, max_size=40
)


@given(observations=OBSERVATIONS, window=st.integers(2, 12))
def test_never_below_what_the_provider_counted_for_the_requests_in_the_window(
    observations: list[tuple[int, int]], window: int
) -> None:
    calibrator = UsageCalibrator(window=window)
    for k, (estimated, counted) in enumerate(observations):
        calibrator.observe(estimated, counted)
        for e, p in observations[max(0, k + 1 - window) : k + 1]:
            assert calibrator.correct(e) >= p
        assert calibrator.min_factor <= calibrator.factor <= calibrator.max_factor
        assert 0 <= calibrator.offset <= max(p for _, p in observations[: k + 1])


@given(observations=OBSERVATIONS, budget=st.integers(1, 5_000_000))
def test_the_budget_handed_to_fit_keeps_the_provider_count_within_the_budget(
    observations: list[tuple[int, int]], budget: int
) -> None:
    calibrator = UsageCalibrator()
    for estimated, counted in observations:
        calibrator.observe(estimated, counted)
    fitted = calibrator.budget_for(budget)
    assert fitted >= 1
    if calibrator.offset + calibrator.factor <= budget:
        assert calibrator.correct(fitted) <= budget + 1


@pytest.mark.parametrize("ratio", [0.55, 0.8, 0.93, 1.0, 1.3, 2.2])
def test_the_correction_tightens_to_the_ratio_the_provider_shows(ratio: float) -> None:
    """A profile that counts ``1/ratio`` of what the provider counts: after a few requests
    the corrected estimate is just above the provider's count (the margin and one grid
    step), never under it."""
    calibrator = UsageCalibrator()
    errors = []
    for k in range(1, 41):
        estimated = 1_000 * k
        counted = math.ceil(ratio * estimated)
        errors.append(calibrator.correct(estimated) / counted)
        calibrator.observe(estimated, counted)
    late = errors[10:]
    assert all(1.0 <= e <= 1.05 for e in late), late
    if ratio < 1:  # the profile erred high: the correction tightens it
        assert late[-1] < errors[0]
    assert calibrator.factor == pytest.approx(ratio * 1.02, rel=0.02)


def test_an_offset_learns_what_the_estimate_does_not_see() -> None:
    """Claude Code's logs leave out a system prompt of ~25k tokens: the offset takes it,
    and the factor stays the profile's own error on what grows."""
    calibrator = UsageCalibrator()
    judged = []
    for k in range(1, 31):
        estimated = 2_000 * k
        counted = 25_000 + math.ceil(0.9 * estimated)
        if k > 5:
            judged.append(calibrator.correct(estimated) / counted)
        calibrator.observe(estimated, counted)
    # the factor's 2% margin over the growth ratio takes part of what the offset would
    assert calibrator.offset == pytest.approx(25_000, rel=0.06)
    assert calibrator.factor == pytest.approx(0.9 * 1.02, rel=0.02)
    assert all(1.0 <= j <= 1.03 for j in judged), judged


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_correction_changes_rarely_and_stays_just_high(seed: int) -> None:
    """Each new message costs the provider 1.0-1.2x its estimate. The correction moves the
    budget handed to fit, and with it fit's cut points, so it changes rarely (the factor
    on a 1% grid, two steps before it moves; the offset in steps of ~0.5%); summed over
    the run after the first requests, it stays within 1.00-1.08x of the provider."""
    rng = random.Random(seed)
    calibrator = UsageCalibrator()
    budgets, predicted, counted = [], 0, 0
    estimated = provider = 0
    for k in range(300):
        grown = rng.randint(200, 3_000)
        estimated += grown
        provider += math.ceil(grown * rng.uniform(1.0, 1.2))
        if k >= 5:
            predicted += calibrator.correct(estimated)
            counted += provider
        calibrator.observe(estimated, provider)
        budgets.append(calibrator.budget_for(1_000_000))
    changes = sum(1 for a, b in pairwise(budgets) if a != b)
    assert changes <= 12, changes
    assert 1.0 <= predicted / counted <= 1.08


@pytest.mark.parametrize(
    ("error", "estimated", "learned"),
    [
        # the provider's own words, parsed by classify_error
        (
            {"type": "error", "error": {"type": "invalid_request_error",
             "message": "prompt is too long: 215000 tokens > 200000 maximum"}},
            180_000,
            215_000,
        ),
        (
            {"error": {"message": "This model's maximum context length is 128000 tokens. "
             "However, your messages resulted in 140000 tokens. Please reduce the length "
             "of the messages.", "type": "invalid_request_error",
             "code": "context_length_exceeded"}},
            100_000,
            140_000,
        ),
    ],
)  # fmt: skip
def test_overflow_errors_teach_the_count_they_state(
    error: dict[str, Any], estimated: int, learned: int
) -> None:
    info = classify_error(error, status=400)
    assert info.is_context_overflow and info.prompt_tokens == learned
    calibrator = UsageCalibrator()
    calibrator.observe_overflow(info, estimated)
    assert calibrator.correct(estimated) >= learned
    assert calibrator.budget_for(info.limit or 0) < (info.limit or 0) * estimated / learned


def _overflow(prompt_tokens: int | None, limit: int | None) -> ErrorInfo:
    return ErrorInfo(
        kind=ErrorKind.CONTEXT_OVERFLOW,
        retryable=False,
        alert=False,
        user_message=CONTEXT_OVERFLOW_MESSAGE,
        prompt_tokens=prompt_tokens,
        limit=limit,
    )


def test_an_overflow_that_states_only_the_limit_counts_as_just_over_it() -> None:
    calibrator = UsageCalibrator()
    calibrator.observe_overflow(_overflow(None, 200_000), 150_000)
    assert calibrator.correct(150_000) > 200_000


def test_an_overflow_without_numbers_teaches_nothing() -> None:
    calibrator = UsageCalibrator()
    assert calibrator.observe_overflow(_overflow(None, None), 150_000) == Correction()
    assert calibrator.observations == 0


@pytest.mark.parametrize(("estimated", "counted"), [(0, 100), (100, 0), (-5, 10)])
def test_empty_counts_are_ignored(estimated: int, counted: int) -> None:
    calibrator = UsageCalibrator()
    calibrator.observe(estimated, counted)
    assert calibrator.observations == 0 and calibrator.correction == Correction()


def test_usage_objects_are_read_and_reset_forgets() -> None:
    calibrator = UsageCalibrator()
    calibrator.observe_usage(
        1_000,
        {"input_tokens": 10, "cache_read_input_tokens": 1_500, "cache_creation_input_tokens": 0},
    )
    assert calibrator.correct(1_000) >= 1_510
    calibrator.observe_usage(2_000, {"output_tokens": 1})  # no input count: nothing learned
    assert calibrator.observations == 1
    calibrator.reset()
    assert calibrator.correction == Correction() and calibrator.observations == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 1},
        {"margin": -0.1},
        {"step": 0.0},
        {"offset_step": 0},
        {"min_factor": 1.5},
        {"max_factor": 0.9},
        {"min_growth": 0},
    ],
)
def test_settings_are_checked(kwargs: dict[str, Any]) -> None:
    with pytest.raises(SettingsError):
        UsageCalibrator(**kwargs)


def test_it_composes_with_fit() -> None:
    """A provider that counts 1.25x the estimate plus 3,000 hidden tokens: fitting to
    ``budget_for(limit)`` keeps every later request within the limit, without touching
    the estimator or its per-message cache."""
    estimator = estimator_for(family="o200k")
    limit = 30_000
    calibrator = UsageCalibrator()
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every chapter."}]
    counted_requests = []
    for k in range(60):
        call = f"c{k}"
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "read", "input": {}}],
            }
        )
        body = f"chapter {k}: " + "the quick brown fox jumps over the lazy dog. " * 80
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": body}],
            }
        )
        result = fit(history, budget=calibrator.budget_for(limit), estimator=estimator)
        provider = math.ceil(1.25 * result.report.tokens_after) + 3_000
        if k >= 3:
            counted_requests.append(provider)
        calibrator.observe(result.report.tokens_after, provider)
    assert max(counted_requests) <= limit
    assert calibrator.factor == pytest.approx(1.25 * 1.02, rel=0.03)
