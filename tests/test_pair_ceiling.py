"""benchmarks/pair_ceiling.py: a bound no valid request within the budget can beat."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from test_replay import _agent, _run
from windowfit.logs import Run
from windowfit.replay import Conversation, ReplayConfig, parse_policies, replay_run
from windowfit.sizing import default_sizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from pair_ceiling import groups, pair_ceilings, share_bound

SIZES = [1200, 300, 900, 2000, 150, 700, 1600, 400]


def _setup(fmt: str) -> tuple[Run, Conversation]:
    run = _run(_agent(fmt, SIZES), fmt)
    return run, Conversation(run, default_sizer(None, run.format))


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("budget", [400, 700, 1000])
def test_the_bound_is_the_best_subset_of_calls_up_to_one_fraction(fmt: str, budget: int) -> None:
    """Per request: at least the best whole subset of calls (brute force), and more than
    it by at most the densest call left out (the fractional knapsack's gap)."""
    run, conv = _setup(fmt)
    weights = [size.tokens for size in conv.sizes]
    found = groups(conv, weights)
    head = conv.fixed + sum(weights[: conv.first + 1])
    for point in (p.index for p in run.requests):
        total = conv.result_tokens[point]
        if not total:
            continue
        ready = [g for g in found if g.ready <= point]
        best = 0
        for k in range(len(ready) + 1):
            for chosen in itertools.combinations(ready, k):
                if head + sum(g.weight for g in chosen) <= budget:
                    best = max(best, sum(g.worth for g in chosen))
        bound = share_bound(found, point, budget - head, total)
        assert bound >= best / total - 1e-9
        assert bound <= min(1.0, (best + max(g.worth for g in ready)) / total) + 1e-9


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("budget", [400, 700, 1000])
def test_no_policy_within_the_budget_keeps_more_than_the_pair_ceiling(
    fmt: str, budget: int
) -> None:
    run, conv = _setup(fmt)
    config = ReplayConfig(budget=budget, tokenizer="seed", fit_counts="exact")
    report = replay_run(run, parse_policies(None), config)
    points = [p.index for p in run.requests]
    sizer = default_sizer(None, run.format)
    real, estimated, counted = pair_ceilings(run, conv, sizer, budget, points)
    assert counted == report.intact_points
    assert real == pytest.approx(estimated)  # the same count both ways here
    pair = real / counted
    assert pair <= report.intact_ceiling / report.intact_points + 1e-9  # tighter
    assert pair < 1.0
    for label, stats in report.policies.items():
        if stats.over_budget == 0 and stats.refused == 0 and not stats.violations:
            assert (stats.visible_mean or 0.0) <= pair + 1e-9, label
    assert (report.policies["raw"].visible_mean or 0.0) > pair
