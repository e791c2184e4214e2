"""The fitting contract (DESIGN section 3) as properties over generated conversations."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from windowfit import ContextOverflowError, FitResult, FitSettings, default_estimator, fit
from windowfit.formats import get_format
from windowfit.sizing import Sizer

from conversations import (
    check_valid_request,
    conversations,
    is_cleared,
    is_note,
    raw_size,
    request_points,
)

PRESETS = ["windowfit", "seed", "windowfit-lean"]


def _results(fmt: str, messages: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(call id, tokens, cleared tokens) of every tool result, oldest first."""
    sizer = Sizer(default_estimator(), provider=fmt)  # what fit counts with by default
    spec = get_format(fmt)
    out = []
    for i, m in enumerate(messages):
        _, size = sizer.measure(m, spec, i)
        out.extend(size.results)
    return out


def _clearable(
    results: list[tuple[str, int, int]], budget: int, preset: str = "windowfit"
) -> list[tuple[str, int, int]]:
    """Results outside the protected tail (newest within 1/4 budget, at least the newest;
    for the lean preset the newest three) and at least twice the size of the note."""
    protected = 0
    total = 0
    for _, tokens, _ in reversed(results):
        if preset == "windowfit-lean":
            if protected == 3:
                break
        elif protected and total + tokens > budget / 4:
            break
        total += tokens
        protected += 1
    older = results[: len(results) - protected]
    return [r for r in older if r[1] >= 2 * r[2]]


def _cleared_ids(fmt: str, out: list[dict[str, Any]]) -> set[str]:
    ids = set()
    for m in out:
        if fmt == "openai":
            if m.get("role") == "tool" and is_cleared(m):
                ids.add(m["tool_call_id"])
        elif isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_result" and is_cleared(b):
                    ids.add(b["tool_use_id"])
    return ids


def _first_index(messages: list[dict[str, Any]]) -> int:
    return next(i for i, m in enumerate(messages) if m["role"] not in ("system", "developer"))


def _check_one(
    fmt: str, messages: list[dict[str, Any]], budget: int, preset: str
) -> FitResult | None:
    before = copy.deepcopy(messages)
    try:
        result = fit(messages, budget=budget, settings=preset, format=fmt)
    except ContextOverflowError:
        assert messages == before
        return None
    out = result.messages
    report = result.report
    assert messages == before, "fit changed its input"
    assert report.tokens_after <= budget
    assert raw_size(out) == report.tokens_after
    check_valid_request(fmt, out)
    first = _first_index(messages)
    kept_first = out[first]
    assert kept_first["role"] == messages[first]["role"]
    if kept_first is not messages[first]:
        original, now = messages[first]["content"], kept_first["content"]
        if isinstance(original, str):
            assert now.startswith(original)
        else:
            assert now[: len(original)] == original
    if report.tokens_before <= budget:
        assert report.stage == 0
        assert all(a is b for a, b in zip(out, messages, strict=True))
    results = _results(fmt, messages)
    cleared = _cleared_ids(fmt, out)
    assert cleared == set(report.cleared)
    if results:
        assert results[-1][0] not in cleared, "the newest result was cleared"
    clearable = {r[0] for r in _clearable(results, budget, preset)}
    assert cleared <= clearable, "a protected or too-small result was cleared"
    if report.stage >= 2:
        assert any(is_note(m) for m in out)
    return result


@given(case=conversations(), fraction=st.floats(0.05, 1.2), preset=st.sampled_from(PRESETS))
def test_single_request_contract(
    case: tuple[str, list[dict[str, Any]]], fraction: float, preset: str
) -> None:
    fmt, messages = case
    budget = max(1, int(raw_size(messages) * fraction))
    _check_one(fmt, messages, budget, preset)


@given(case=conversations(), fraction=st.floats(0.1, 0.9), preset=st.sampled_from(PRESETS))
def test_growing_conversation_is_cache_stable(
    case: tuple[str, list[dict[str, Any]]], fraction: float, preset: str
) -> None:
    """For a conversation that only grows, with a fixed budget: the cleared set only grows,
    in whole batches while no message is dropped; stage 1 alone is used while clearing
    suffices; the cut only moves forward; and while neither changes, each request starts
    with the previous one."""
    fmt, messages = case
    budget = max(1, int(raw_size(messages) * fraction))
    previous: FitResult | None = None
    ever_cut = False
    for point in request_points(messages):
        prefix = messages[:point]
        result = _check_one(fmt, prefix, budget, preset)
        if result is None:
            previous = None
            continue
        report = result.report
        results = _results(fmt, prefix)
        clearable = _clearable(results, budget, preset)
        grew = previous is not None and set(report.cleared) != set(previous.report.cleared)
        if report.stage == 1 and grew and preset != "windowfit-lean":
            assert len(report.cleared) % 4 == 0 or len(report.cleared) == len(clearable)
        if (
            report.stage >= 2
            and not ever_cut
            and not report.clearing_exhausted
            and preset != "windowfit-lean"
        ):
            all_cleared = report.tokens_before - sum(t - c for _, t, c in clearable)
            assert all_cleared > budget, "cut although clearing alone would have fit"
        ever_cut = ever_cut or report.stage >= 2
        if previous is not None and preset != "seed":
            old = previous.report
            dropped_ids = _ids_in(fmt, [prefix[i] for i in report.dropped])
            assert set(old.cleared) <= set(report.cleared) | dropped_ids
            if old.dropped:
                assert report.dropped, "the cut moved backward"
                assert max(report.dropped) >= max(old.dropped), "the cut moved backward"
            unchanged = set(old.cleared) == set(report.cleared) and old.dropped == report.dropped
            if unchanged:
                n = len(previous.messages)
                assert result.messages[:n] == previous.messages, "prefix broke without a change"
        previous = result


def _ids_in(fmt: str, messages: list[dict[str, Any]]) -> set[str]:
    return {r[0] for r in _results(fmt, messages)}


@given(case=conversations(), fraction=st.floats(0.1, 0.9))
def test_cache_never_changes_an_answer(
    case: tuple[str, list[dict[str, Any]]], fraction: float
) -> None:
    """Fitting a conversation warm (after its prefixes) and cold (fresh objects) agree."""
    _, messages = case
    budget = max(1, int(raw_size(messages) * fraction))
    warm: list[Any] = []
    for point in request_points(messages):
        try:
            warm.append(fit(messages[:point], budget=budget).messages)
        except ContextOverflowError:
            warm.append(None)
    for point, expected in zip(request_points(messages), warm, strict=True):
        fresh = json.loads(json.dumps(messages[:point]))
        try:
            got = fit(fresh, budget=budget).messages
        except ContextOverflowError:
            got = None
        assert got == expected


@given(case=conversations(), fraction=st.floats(0.1, 0.9))
def test_seed_preset_is_stateless(case: tuple[str, list[dict[str, Any]]], fraction: float) -> None:
    """The seed preset decides from the current request alone."""
    _, messages = case
    budget = max(1, int(raw_size(messages) * fraction))
    seed = FitSettings.preset("seed")
    try:
        direct = fit(messages, budget=budget, settings=seed).messages
    except ContextOverflowError:
        return
    for point in request_points(messages)[:-1]:
        with contextlib.suppress(ContextOverflowError):
            fit(messages[:point], budget=budget, settings=seed)
    assert fit(messages, budget=budget, settings=seed).messages == direct
