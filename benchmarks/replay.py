"""Replay benchmark: every model call of the runs in ../shared/data/trajectories, replayed
through windowfit's presets, sending everything, and the peer policies, at budgets of
30%, 50% and 70% of each run's largest request with a hard limit at twice the budget.

Run:  .venv/bin/python benchmarks/replay.py            (writes benchmarks/REPLAY.md)
      .venv/bin/python benchmarks/replay.py --jobs 1 --out -      (print instead)

Each fraction is the same as ``windowfit replay ../shared/data/trajectories
--budget-fraction F --hard-limit-factor 2`` (tokens counted with ``--tokenizer auto``;
windowfit's presets count with the default estimate, ``--fit-counts default``, unless
``--fit-counts`` says otherwise).
Files are replayed in parallel worker processes (``--jobs``); the figures do not depend
on it. Prints the timing; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from pair_ceiling import pair_ceilings
from windowfit.logs import Run
from windowfit.profiles import default_estimator, estimator_for
from windowfit.replay import (
    Conversation,
    LogProblem,
    PolicyStats,
    ReplayConfig,
    ReplayReport,
    RunReport,
    available_policies,
    log_files,
    parse_policies,
    read_logs,
    replay,
    tokenizer_for,
)
from windowfit.replay.report import SOURCE_NAMES, Table, frontier, policy_table
from windowfit.settings import PRESETS
from windowfit.sizing import default_sizer
from windowfit.tokenizers import load_backend
from windowfit.tokens import Estimator

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
OUT = Path(__file__).resolve().parent / "REPLAY.md"
FRACTIONS = (0.3, 0.5, 0.7)
#: Peers with settings other than their documented defaults, shown beside them.
VARIANTS = ("openhands-masking:attention_window=100", "swe-agent-last-n:polling=10")
HARD_LIMIT_FACTOR = 2.0
#: windowfit-lean's one rule parameter, swept: how many results that left the keep-window
#: wait before they are cleared together (the preset's own value is among these).
LEAN_BATCHES = (1, 2, 4, 8, 16, 32)
#: The sources the preset's batch size was chosen on; the others are held out.
CHOSEN_ON = ("mini-swe-agent", "claude-code")
#: The model of the runs of a data folder whose logs do not record one, from its entry in
#: ../shared/data/trajectories/SOURCES.md ("customer-service airline domain, gpt-4o
#: agent"; the file is historical_trajectories/gpt-4o-airline.json). Every request a
#: provider sees names its model, so the replay counts these as it would be told. SWE-agent's
#: trajectories mix models that the logs do not name: they stay unknown (conservative).
MODEL_OF_FOLDER = {"tau_bench": "gpt-4o"}
SOURCE_ORDER = (
    "mini-swe-agent",
    "claude-code",
    "claude-code-subagent",
    "tau-bench",
    "swe-agent",
)


def _log_files(root: Path) -> list[Path]:
    """The files ``read_logs`` would read under ``root``, largest first (for balance)."""
    files = log_files(root) if root.is_dir() else [root]
    return sorted(files, key=lambda p: -p.stat().st_size)


def _config(fraction: float, fit_counts: str, model: str | None = None) -> ReplayConfig:
    return ReplayConfig(
        budget_fraction=fraction,
        hard_limit_factor=HARD_LIMIT_FACTOR,
        fit_counts=fit_counts,
        model=model,
    )


_MODELS_NOTE = (
    "Runs whose log does not name its model are replayed as that model where the data's "
    "SOURCES.md says which it was ("
    + ", ".join(f"`{folder}`: `--model {model}`" for folder, model in MODEL_OF_FOLDER.items())
    + "), as the provider's requests named it; the others (SWE-agent's) stay unknown: "
    "measured with o200k, and windowfit, not told the model, counts with `conservative`."
)


def _model_of(path: str) -> str | None:
    """The model of a log's runs when the log does not record it (``MODEL_OF_FOLDER``)."""
    return next((m for folder, m in MODEL_OF_FOLDER.items() if folder in Path(path).parts), None)


#: Per budget fraction and source: the pair ceilings' sums (real count, windowfit's
#: estimate) and the requests with tool results they are averaged over.
Ceilings = dict[float, dict[str, list[float]]]


def _fit_estimator(fit_counts: str, measuring: Estimator, model: str | None) -> Estimator:
    """What the windowfit presets count with (as ``windowfit replay --fit-counts``)."""
    if fit_counts == "exact":
        return measuring
    if fit_counts == "seed":
        return estimator_for(family="seed")
    return default_estimator(model=model)


def _pair_ceilings(
    runs: Sequence[Run], fractions: Sequence[float], fit_counts: str, model: str | None
) -> Ceilings:
    """The pair ceilings (:mod:`pair_ceiling`) of ``runs`` at every fraction, by source."""
    out: Ceilings = {f: {} for f in fractions}
    for run in runs:
        if run.model is None and model is not None:
            run = dataclasses.replace(run, model=model)
        measuring = load_backend(tokenizer_for(run, "auto"))
        conv = Conversation(run, default_sizer(measuring, run.format))
        estimate = default_sizer(_fit_estimator(fit_counts, measuring, run.model), run.format)
        points = [p.index for p in run.requests if 0 < p.index <= len(run.messages)]
        if not points:
            continue
        largest = max(conv.request_tokens(i) for i in points)
        for fraction in fractions:
            budget, _ = _config(fraction, fit_counts).limits(largest)
            real, guessed, counted = pair_ceilings(run, conv, estimate, budget, points)
            sums = out[fraction].setdefault(run.kind, [0.0, 0.0, 0.0])
            sums[0] += real
            sums[1] += guessed
            sums[2] += counted
    return out


def _replay_file(
    path: str, fractions: Sequence[float], policies: str | None, fit_counts: str = "default"
) -> tuple[str, dict[float, list[RunReport]], list[LogProblem], list[str], float, Ceilings]:
    """Worker: replay one file at every fraction (series dropped to keep results small)."""
    start = time.perf_counter()
    runs, problems = read_logs([path])
    chosen = parse_policies(policies)
    out: dict[float, list[RunReport]] = {}
    for fraction in fractions:
        report = replay(runs, chosen, _config(fraction, fit_counts, _model_of(path)))
        for run in report.runs:
            run.series = {}
        out[fraction] = report.runs
    ceilings = _pair_ceilings(runs, fractions, fit_counts, _model_of(path))
    labels = [p.label for p in chosen]
    return path, out, problems, labels, time.perf_counter() - start, ceilings


def run_all(
    root: Path,
    fractions: Sequence[float],
    jobs: int,
    policies: str | None,
    fit_counts: str = "default",
) -> tuple[dict[float, ReplayReport], float, Ceilings]:
    files = _log_files(root)
    started = time.perf_counter()
    results = []
    terminal = sys.stderr.isatty()

    def progress(done: int) -> None:
        # Redrawn in place on a terminal; a line every tenth of the way in a log file.
        if terminal:
            print(f"\r{done}/{len(files)} files", end="", file=sys.stderr, flush=True)
        elif done == len(files) or done % max(1, len(files) // 10) == 0:
            print(f"{done}/{len(files)} files", file=sys.stderr, flush=True)

    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(_replay_file, str(f), fractions, policies, fit_counts) for f in files
            ]
            for done, future in enumerate(futures, 1):
                results.append(future.result())
                progress(done)
    else:
        for done, f in enumerate(files, 1):
            results.append(_replay_file(str(f), fractions, policies, fit_counts))
            progress(done)
    if terminal:
        print(file=sys.stderr)
    elapsed = time.perf_counter() - started
    order = {str(f): i for i, f in enumerate(sorted(files))}
    results.sort(key=lambda r: order[r[0]])
    labels = results[0][3] if results else []
    chosen = parse_policies(policies)
    settings = {p.label: {"describe": p.describe(), **p.settings()} for p in chosen}
    reports = {}
    ceilings: Ceilings = {f: {} for f in fractions}
    for fraction in fractions:
        config = _config(fraction, fit_counts)
        runs = [run for r in results for run in r[1][fraction]]
        problems = [p for r in results for p in r[2]]
        reports[fraction] = ReplayReport(config, labels, runs, problems, settings)
        for r in results:
            for kind, sums in r[5][fraction].items():
                total = ceilings[fraction].setdefault(kind, [0.0, 0.0, 0.0])
                for k in range(3):
                    total[k] += sums[k]
    return reports, elapsed, ceilings


# --------------------------------------------------------------------------------------
# Markdown


def _peers(labels: Sequence[str]) -> list[str]:
    """The peers with their documented defaults (no ``:KEY=VALUE`` settings)."""
    return [x for x in labels if x not in PRESETS and x != "raw" and ":" not in x]


def _variants(labels: Sequence[str]) -> list[str]:
    return [x for x in labels if ":" in x and not _swept(x)]


def _lean_sweep() -> list[str]:
    """The lean preset at every swept batch size but its own (that one is the preset)."""
    own = PRESETS["windowfit-lean"].batch_size
    return [f"windowfit-lean:batch_size={b}" for b in LEAN_BATCHES if b != own]


def _swept(label: str) -> bool:
    return label.startswith("windowfit-lean:")


def _without_sweep(report: ReplayReport) -> ReplayReport:
    """``report`` without the swept lean variants (they have a section of their own)."""
    labels = [x for x in report.policies if not _swept(x)]
    runs = [
        dataclasses.replace(r, policies={k: v for k, v in r.policies.items() if not _swept(k)})
        for r in report.runs
    ]
    settings = {k: v for k, v in report.settings.items() if not _swept(k)}
    return ReplayReport(report.config, labels, runs, report.problems, settings)


def _cost(stats: PolicyStats, report: ReplayReport) -> float:
    return stats.cost(report.config.pricing)


def _ratio(stats: PolicyStats, totals: dict[str, PolicyStats], report: ReplayReport) -> float:
    raw = _cost(totals["raw"], report) if "raw" in totals else 0.0
    return _cost(stats, report) / raw if raw else 0.0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _sources(report: ReplayReport) -> list[tuple[str, dict[str, PolicyStats]]]:
    by = report.by_source()
    kinds = [k for k in SOURCE_ORDER if k in by] + [k for k in by if k not in SOURCE_ORDER]
    return [(k, by[k]) for k in kinds]


def _valid(stats: PolicyStats) -> bool:
    return not stats.rejected and not stats.violations


def _ceiling(report: ReplayReport, kind: str) -> float | None:
    """The largest mean intact share a policy within the budget could have on a source
    (:attr:`RunReport.intact_ceiling`), or ``None`` when its runs have no tool results."""
    runs = [r for r in report.runs if r.kind == kind]
    points = sum(r.intact_points for r in runs)
    return sum(r.intact_ceiling for r in runs) / points if points else None


def _pair_ceiling(ceilings: Ceilings, fraction: float, kind: str) -> tuple[float, float] | None:
    """The pair ceilings (real count, windowfit's estimate) of a source, averaged over its
    requests with tool results; ``None`` when it has none."""
    sums = ceilings.get(fraction, {}).get(kind)
    if not sums or not sums[2]:
        return None
    return sums[0] / sums[2], sums[1] / sums[2]


def _above(share: float, ceiling: float | None, pairs: tuple[float, float] | None) -> str:
    """Which bound by the real count ``share`` is above (``""`` when neither): a policy
    that keeps more on average does so only by exceeding the budget."""
    if ceiling is not None and share > ceiling:
        return "ceiling"
    if pairs is not None and share > pairs[0]:
        return "pair ceiling"
    return ""


def _cheapest_valid(totals: dict[str, PolicyStats], report: ReplayReport) -> str | None:
    valid = [p for p in _peers(report.policies) if _valid(totals[p])]
    return min(valid, key=lambda p: _cost(totals[p], report)) if valid else None


def _meets(
    lean: PolicyStats,
    peer: PolicyStats,
    report: ReplayReport,
    ceiling: float | None,
    pairs: tuple[float, float] | None,
) -> bool:
    """The lean target: at most 1.05x the peer's cost, and at least its intact share
    (unless the peer keeps more than a ceiling, which it does only over the budget)."""
    cheap = _cost(lean, report) <= 1.05 * _cost(peer, report)
    mine, theirs = lean.visible_mean or 0.0, peer.visible_mean or 0.0
    kept = mine >= theirs or bool(_above(theirs, ceiling, pairs))
    return cheap and kept and not lean.rejected and not lean.violations


def _sweep_table(reports: dict[float, ReplayReport], ceilings: Ceilings) -> Table:
    """windowfit-lean at every swept batch size, per source and budget (50%, 70%), beside
    the cheapest valid peer; ``ok`` where the lean targets are met."""
    own = PRESETS["windowfit-lean"].batch_size
    columns = {
        b: "windowfit-lean" if b == own else f"windowfit-lean:batch_size={b}" for b in LEAN_BATCHES
    }
    table = Table(
        [
            "source",
            "budget",
            "cheapest valid peer",
            *(f"batch {b}" + (" (preset)" if b == own else "") for b in LEAN_BATCHES),
        ]
    )
    for fraction in (0.5, 0.7):
        report = reports.get(fraction)
        if report is None:
            continue
        for kind, totals in _sources(report):
            fair = _cheapest_valid(totals, report)
            if fair is None or "raw" not in totals:
                continue
            ceiling = _ceiling(report, kind)
            pairs = _pair_ceiling(ceilings, fraction, kind)
            peer = totals[fair]
            held = "" if kind in CHOSEN_ON else " (held out)"
            cells = [
                SOURCE_NAMES.get(kind, kind) + held,
                f"{fraction:.0%}",
                f"{_ratio(peer, totals, report):.2f}x / {_pct(peer.visible_mean)} {fair}",
            ]
            for b in LEAN_BATCHES:
                stats = totals.get(columns[b])
                if stats is None:
                    cells.append("-")
                    continue
                cell = f"{_ratio(stats, totals, report):.3f}x / {_pct(stats.visible_mean)}"
                cells.append(cell + (" ok" if _meets(stats, peer, report, ceiling, pairs) else ""))
            table.add(cells)
    return table


def _targets(
    reports: dict[float, ReplayReport], ceilings: Ceilings | None = None
) -> tuple[Table, list[str]]:
    """The issue's targets at 0.5 and 0.7 per source, against the documented-default
    peers: met or not, with the numbers."""
    table = Table(
        [
            "source",
            "budget",
            "windowfit rej / inv",
            "windowfit x raw",
            "windowfit intact vs best peer",
            "lean rej / inv",
            "lean cost vs cheapest peer",
            "lean cost vs cheapest valid peer",
            "lean intact vs that valid peer",
            "ceiling within the budget",
            "pair ceiling: real count / windowfit's estimate",
        ]
    )
    misses: list[str] = []
    for fraction in (0.5, 0.7):
        report = reports.get(fraction)
        if report is None:
            continue
        peers = _peers(report.policies)
        for kind, totals in _sources(report):
            name = SOURCE_NAMES.get(kind, kind)
            wf, lean = totals.get("windowfit"), totals.get("windowfit-lean")
            if wf is None or "raw" not in totals or not peers:
                continue
            at = f"on {name} at {fraction:.0%}"
            cells = [name, f"{fraction:.0%}", f"{wf.rejected} / {wf.violations}"]
            ratio = _ratio(wf, totals, report)
            cells.append(f"{ratio:.2f}x" + ("" if ratio <= 1.0 else " **miss**"))
            if ratio > 1.0:
                misses.append(f"windowfit costs {ratio:.2f}x raw {at}")
            if wf.rejected or wf.violations:
                misses.append(f"windowfit rejected {wf.rejected}, malformed {wf.violations} {at}")
            ceiling = _ceiling(report, kind)
            pairs = _pair_ceiling(ceilings or {}, fraction, kind)
            pair_cell = f"{pairs[0]:.0%} / {pairs[1]:.0%}" if pairs else "-"
            best = max(peers, key=lambda p: totals[p].visible_mean or 0.0)
            mine, theirs = wf.visible_mean or 0.0, totals[best].visible_mean or 0.0
            over = totals[best].over_budget / max(1, totals[best].sent)
            ok = mine > theirs
            above = _above(theirs, ceiling, pairs)
            cells.append(
                f"{mine:.0%} vs {theirs:.0%} {best} (over budget {over:.0%})"
                + ("" if ok else f" (peer above the {above})" if above else " **miss**")
            )
            if not ok and not above:
                misses.append(
                    f"windowfit keeps {mine:.0%} of tool-result tokens intact {at}; {best} "
                    f"keeps {theirs:.0%} but is over the budget on {over:.0%} of its requests"
                )
            if lean is None:
                table.add([*cells, "-", "-", "-", "-", _pct(ceiling), pair_cell])
                continue
            cells.append(f"{lean.rejected} / {lean.violations}")
            if lean.rejected or lean.violations:
                misses.append(
                    f"windowfit-lean rejected {lean.rejected}, malformed {lean.violations} {at}"
                )
            lean_cost = _cost(lean, report)
            cheapest = min(peers, key=lambda p: _cost(totals[p], report))
            cheap_cost = _cost(totals[cheapest], report)
            cells.append(f"{lean_cost / cheap_cost:.2f}x {cheapest}" if cheap_cost else "-")
            valid = [p for p in peers if _valid(totals[p])]
            if not valid:
                cells += ["-", "-", _pct(ceiling), pair_cell]
                table.add(cells)
                continue
            fair = min(valid, key=lambda p: _cost(totals[p], report))
            fair_cost = _cost(totals[fair], report)
            times = lean_cost / fair_cost if fair_cost else 0.0
            cells.append(f"{times:.2f}x {fair}" + ("" if times <= 1.05 else " **miss**"))
            mine, theirs = lean.visible_mean or 0.0, totals[fair].visible_mean or 0.0
            # A peer above a ceiling keeps that much intact only by exceeding the budget.
            beyond = _above(theirs, ceiling, pairs)
            mark = ""
            if mine < theirs:
                mark = f" (peer above the {beyond})" if beyond else " **miss**"
            # Above what a request within the budget by windowfit's own estimate can keep:
            # no policy that holds that estimate within the budget can match the peer.
            unreachable = pairs is not None and theirs > pairs[1] and not beyond
            if mine < theirs and unreachable:
                mark += " (peer above the pair ceiling by the estimate)"
            cells.append(f"{mine:.0%} vs {theirs:.0%}{mark}")
            cells.append(_pct(ceiling))
            cells.append(pair_cell)
            if times > 1.05:
                misses.append(
                    f"windowfit-lean costs {times:.2f}x the cheapest valid peer ({fair}) {at}"
                )
            if mine < theirs and not beyond:
                why = ""
                if unreachable and pairs is not None:
                    why = (
                        f": no request within the budget by windowfit's default estimate keeps "
                        f"more than {pairs[1]:.0%} on average (by the real count "
                        f"{pairs[0]:.0%}); the peer keeps {theirs:.0%} by going over the "
                        f"budget on {totals[fair].over_budget:,} of {totals[fair].sent:,} "
                        "requests"
                    )
                misses.append(
                    f"windowfit-lean keeps {mine:.0%} intact {at}, the cheapest valid peer "
                    f"({fair}) {theirs:.0%}{why}"
                )
            if cheapest != fair and cheap_cost and lean_cost > 1.05 * cheap_cost:
                misses.append(
                    f"windowfit-lean costs {lean_cost / cheap_cost:.2f}x {cheapest} {at}, "
                    f"which is cheaper but malformed on {totals[cheapest].violations:,} requests"
                )
            table.add(cells)
    return table, misses


def _frontier_table(reports: dict[float, ReplayReport]) -> Table:
    labels = next(iter(reports.values())).policies
    table = Table(["source", "budget", *labels])
    for fraction, report in reports.items():
        for kind, totals in _sources(report):
            on = set(frontier(totals, report))
            cells = [SOURCE_NAMES.get(kind, kind), f"{fraction:.0%}"]
            for label in labels:
                stats = totals[label]
                cell = f"{_ratio(stats, totals, report):.2f}x / {_pct(stats.visible_mean)}"
                if label in on:
                    cell = f"**{cell}**"
                marks = []
                if stats.rejected:
                    marks.append(f"{stats.rejected} rej")
                if stats.refused:
                    marks.append(f"{stats.refused} ref")
                if stats.violations:
                    marks.append(f"{stats.violations} inv")
                if marks:
                    cell += " (" + ", ".join(marks) + ")"
                cells.append(cell)
            table.add(cells)
    return table


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def _notes(reports: dict[float, ReplayReport]) -> list[str]:
    """Why the figures are what they are, with the numbers from this run."""
    notes: list[str] = []
    first = next(iter(reports.values()))
    peers = _peers(first.policies)
    kinds = [kind for kind, _ in _sources(first)]
    wanted = [f for f in (0.5, 0.7) if f in reports]
    for kind in kinds:
        name = SOURCE_NAMES.get(kind, kind)
        runs = [r for r in first.runs if r.kind == kind]
        calls = sum(r.requests for r in runs)
        heads = [r.head / r.largest for r in runs if r.largest]
        outside = []
        for fraction in wanted:
            report = reports[fraction]
            wf = report.by_source()[kind].get("windowfit")
            unfittable = sum(r.unfittable for r in report.runs if r.kind == kind)
            if wf is not None and (wf.refused or wf.over_budget):
                outside.append(
                    f"at {fraction:.0%} {wf.over_budget:,} over the budget and {wf.refused:,} "
                    f"refused (unfittable: {unfittable:,})"
                )
        if outside:
            notes.append(
                f"windowfit does not keep every call on {name} ({calls:,} calls) within the "
                "budget: "
                + "; ".join(outside)
                + ". Unfittable: calls where the head (system prompt, tools, first message; a "
                f"median {_median(heads):.0%} of a run's largest request) plus the latest tool "
                "round, intact, is over the budget. windowfit keeps the task and the newest "
                "result; told the hard limit, it sends such a request over the budget when "
                "the window holds it, and refuses only when the window does not (refused "
                "requests are not sent: cost and intact share count the requests sent)."
            )
        report = reports.get(0.5)
        if report is None:
            continue
        totals = report.by_source()[kind]
        raw = totals.get("raw")
        for peer in peers:
            stats = totals[peer]
            if (
                raw is not None
                and _cost(stats, report) == _cost(raw, report)
                and stats.visible_mean == raw.visible_mean
            ):
                notes.append(
                    f"{peer} changes nothing on {name}: its rule does not depend on the budget "
                    "and these runs never reach it, so it sends every request whole (over the "
                    f"budget on {stats.over_budget:,} of {stats.sent:,} requests at 50%)."
                )
    for fraction in wanted:
        report = reports[fraction]
        for kind, totals in _sources(report):
            wf = totals.get("windowfit")
            if wf is None or "raw" not in totals:
                continue
            mine = _ratio(wf, totals, report)
            for peer in peers:
                stats = totals[peer]
                theirs = _ratio(stats, totals, report)
                if _valid(stats) and theirs < mine:
                    notes.append(
                        f"{peer} is cheaper than windowfit on {SOURCE_NAMES.get(kind, kind)} at "
                        f"{fraction:.0%} ({theirs:.2f}x against {mine:.2f}x raw); it keeps "
                        f"{_pct(stats.visible_mean)} intact against windowfit's "
                        f"{_pct(wf.visible_mean)} and is over the budget on "
                        f"{stats.over_budget:,} of {stats.sent:,} requests."
                    )
    return notes


def _ceiling_notes(reports: dict[float, ReplayReport], ceilings: Ceilings) -> list[str]:
    """Where the cheapest valid peer keeps more intact than windowfit-lean only by being
    above a ceiling: how much room the bounds leave, so a met target is not read as more."""
    notes = []
    for fraction in (0.5, 0.7):
        report = reports.get(fraction)
        if report is None:
            continue
        for kind, totals in _sources(report):
            lean, fair = totals.get("windowfit-lean"), _cheapest_valid(totals, report)
            pairs = _pair_ceiling(ceilings, fraction, kind)
            if lean is None or fair is None or pairs is None:
                continue
            mine, theirs = lean.visible_mean or 0.0, totals[fair].visible_mean or 0.0
            if mine >= theirs or _above(theirs, _ceiling(report, kind), pairs) != "pair ceiling":
                continue
            notes.append(
                f"On {SOURCE_NAMES.get(kind, kind)} at {fraction:.0%} {fair} keeps {theirs:.0%} "
                f"intact, above the pair ceiling ({pairs[0]:.0%} by the real count): it is over "
                f"the budget on {totals[fair].over_budget:,} of {totals[fair].sent:,} requests. "
                f"windowfit-lean keeps {mine:.0%}; holding windowfit's default estimate within "
                f"the budget leaves room for at most {pairs[1]:.0%} (the estimate errs high, "
                "as it must by default when the model is not known)."
            )
    return notes


_FIT_COUNTS_NOTE = {
    "default": "windowfit's presets count with the estimate a user gets by default "
    "(`windowfit.default_estimator`: the run's model family's profile, checked by the "
    "family's vocabulary where it is on the machine, `conservative` when the model is "
    "unknown), not with the tokenizer that measures.",
    "exact": "windowfit's presets count with the tokenizer that measures (exact counts).",
    "seed": "windowfit's presets count with the write-up's rule (seed).",
}


def _budget_table(reports: dict[float, ReplayReport]) -> Table:
    first = next(iter(reports.values()))
    presets = [p for p in first.policies if p in PRESETS]
    table = Table(
        [
            "source",
            "budget",
            "cannot fit",
            *(f"{p}: over limit / over budget / worst" for p in presets),
            *(f"{p}, where a fit exists: over budget / worst" for p in presets),
        ]
    )
    for fraction, report in reports.items():
        kinds: dict[str, list[RunReport]] = {}
        for run in report.runs:
            kinds.setdefault(run.kind, []).append(run)
        order = [k for k in SOURCE_ORDER if k in kinds] + [
            k for k in kinds if k not in SOURCE_ORDER
        ]
        for kind in order:
            calls = sum(run.requests for run in kinds[kind])
            unfittable = sum(run.unfittable for run in kinds[kind])
            cells = [
                SOURCE_NAMES.get(kind, kind),
                f"{fraction:.0%}",
                f"{unfittable / calls:.2%}" if calls else "-",
            ]
            fittable_cells = []
            for preset in presets:
                over_limit = over_budget = sent = over_fittable = sent_fittable = 0
                worst = worst_fittable = 0.0
                for run in kinds[kind]:
                    stats = run.policies[preset]
                    over_limit += stats.rejected
                    over_budget += stats.over_budget
                    over_fittable += stats.over_budget_fittable
                    sent += stats.sent
                    sent_fittable += run.requests - run.unfittable
                    worst_fittable = max(worst_fittable, stats.worst_fittable)
                    if run.budget:
                        worst = max(worst, stats.peak_tokens / run.budget)
                share = over_budget / sent if sent else 0.0
                cells.append(f"{over_limit} / {share:.2%} / {worst:.3f}x")
                share = over_fittable / sent_fittable if sent_fittable else 0.0
                fittable_cells.append(f"{share:.2%} / {worst_fittable:.3f}x")
            table.add(cells + fittable_cells)
    return table


def markdown(
    all_reports: dict[float, ReplayReport],
    elapsed: float,
    jobs: int,
    command: str,
    ceilings: Ceilings | None = None,
) -> str:
    reports = {f: _without_sweep(r) for f, r in all_reports.items()}
    first = next(iter(reports.values()))
    runs = first.runs
    counts: dict[str, tuple[int, int]] = {}
    tokenizers: dict[str, set[str]] = {}
    for run in runs:
        n, calls = counts.get(run.kind, (0, 0))
        counts[run.kind] = (n + 1, calls + run.requests)
        tokenizers.setdefault(run.kind, set()).add(run.tokenizer)
    targets, misses = _targets(reports, ceilings)
    lines = [
        "# Replay: what each policy would have sent on real agent runs, and its cost",
        "",
        "Generated by `benchmarks/replay.py`; do not edit by hand. Command:",
        "",
        "```",
        command,
        "```",
        "",
        "Each budget is the same as `windowfit replay ../shared/data/trajectories "
        "--budget-fraction F --hard-limit-factor 2` with the policies below (defaults: "
        f"`--tokenizer auto --fit-counts {first.config.fit_counts}`, cache reads 0.1x, "
        "writes 1.25x). " + _FIT_COUNTS_NOTE[first.config.fit_counts] + " " + _MODELS_NOTE,
        "",
        "## windowfit's presets against the budget, by the real tokenizer",
        "",
        "Per preset: requests over the hard limit (the provider would reject them), the "
        "share of requests sent over the budget, and the worst request's size over its "
        "run's budget; sizes counted with the real tokenizer (`--tokenizer auto`). "
        "*Cannot fit*: the share of requests whose first message and latest tool round "
        "alone are over the budget; windowfit sends those over the budget, within the hard "
        "limit (`--fit-limit`), rather than refuse them, so they count as over budget. "
        "*Where a fit exists*: the same figures over the other requests only (head and "
        "latest round within the budget by the real count), where being over the budget "
        "comes from counting, not from the run. What remains there is windowfit's own "
        "trimmed-conversation note (about 45 tokens), which a cut request carries: on "
        "budgets of a thousand tokens or two (tau-bench) it takes a request that only just "
        "fits over the budget, by at most 6%.",
        "",
        _budget_table(reports).markdown(),
        "",
        f"Wall time: {elapsed:.0f} s for {len(reports)} budgets with {jobs} worker "
        f"process(es) on {os.cpu_count()} CPU(s), Python {platform.python_version()}.",
        "",
        "## Cost against intact share, every source and budget",
        "",
        "Each cell: input cost with prompt caching, against sending everything (raw) / mean "
        "share of tool-result tokens sent intact. **Bold**: on the frontier (no other policy "
        "without rejections, refusals or malformed requests is at most as expensive with at "
        "least as much intact). Marks: requests over the hard limit (rej), refused by "
        "windowfit (ref), malformed (inv).",
        "",
        _frontier_table(reports).markdown(),
        "",
        "## The issue's targets (budgets 50% and 70%)",
        "",
        "Against the peers with their documented defaults (`"
        + "`, `".join(_peers(first.policies))
        + "`). A valid peer has no rejected and no malformed requests. *Ceiling within "
        "the budget*: per request, the largest share of its tool-result tokens that a request "
        "within the budget keeping the head (system prompt, tools, first message) can send "
        "unchanged, `min(1, (budget - head) / tool-result tokens)`, averaged over the "
        "requests with tool results: no policy that holds the budget keeps more intact on "
        "average. A peer above it keeps more only by exceeding the budget (marked so, not "
        "counted as a miss). *Pair ceiling*: the same bound when a result is sent only "
        "beside the assistant message that made its call (a provider rejects it otherwise), "
        "which costs tokens too (`benchmarks/pair_ceiling.py`: per request, a fractional "
        "knapsack over the calls and their results beside the head), by the real count and "
        "by the estimate windowfit counts with by default; the estimate errs high, so a "
        "policy that holds it within the budget sees less room.",
        "",
        targets.markdown(),
        "",
    ]
    if misses:
        lines += ["Not met:", ""]
        lines += [f"* {m}" for m in misses]
        lines.append("")
    else:
        lines += ["Every target is met.", ""]
    if any(_swept(label) for label in next(iter(all_reports.values())).policies):
        own = PRESETS["windowfit-lean"].batch_size
        dev = ", ".join(SOURCE_NAMES.get(k, k) for k in CHOSEN_ON)
        lines += [
            "## windowfit-lean's batch size, swept",
            "",
            "windowfit-lean clears the results that leave its keep-window of 3 once "
            "`batch_size` of them wait. Each clearing changes the request where the oldest "
            "waiting result is, so everything after it is written to the cache again: "
            "clearing one at a time writes the last few rounds again at every call, a batch "
            "of B writes a B-round longer tail once per B calls, and the waiting results "
            "stay intact meanwhile. Each cell: cost x raw / intact share, `ok` where the "
            "lean targets are met (at most 1.05x the cheapest valid peer's cost, at least "
            "its intact share unless that is above a ceiling). The batch size was chosen "
            f"on {dev} only (50% and 70%): every target met there, and then the lowest worst "
            "cost against the cheapest valid peer, ties within 0.01 going to the larger "
            f"intact share: {own}. The other sources are held out: their cells were not "
            "looked at to choose it.",
            "",
            _sweep_table(all_reports, ceilings or {}).markdown(),
            "",
        ]
    notes = _notes(reports) + _ceiling_notes(reports, ceilings or {})
    lines += ["## Why", ""]
    lines += [f"* {n}" for n in notes]
    lines += [
        "* `langchain-trim` is the cheapest because it drops whole messages from the start "
        "and keeps only the tail that starts with a human message: once it trims, the task "
        "(the first message) is gone, which a provider accepts but an agent cannot work "
        "without; a sub-agent has one human message, so its trimmed requests hold only the "
        "system prompt. Those requests are counted as malformed (first message missing).",
        "* `openhands-masking` masks, at every step, the observation that just left its "
        "window of 5 events (the condenser class's default): a change near the end of the "
        "request, so a change re-sends little, but few results stay intact and nothing "
        "holds the request under the budget. With the configuration file's window of 100 "
        "events it is raw for short runs and, on long ones, masks in the middle of the "
        "request, so most of it is written to the cache again at every call.",
        "* Peers that keep more tool results intact than windowfit do so by not holding "
        "the budget (over it on the share of requests shown) or by dropping the task "
        "(malformed): windowfit is held to the budget, so at a tight budget whose head "
        "(system prompt, tools, first message) is a third of the largest request (tau-bench, "
        "SWE-agent) it keeps less.",
        "* `swe-agent-last-n` with polling 1 changes the request at every call by design "
        "(its docs say so); with `polling=10` the change comes every 10 observations.",
        "* `anthropic-clear-tool-uses` clears the result that leaves its 3-use window, near "
        "the end of the request, so a change re-sends little; but it clears only tool "
        "results, so it goes over the budget where the rest of the request is large.",
        "* windowfit clears whole batches of the oldest results when a request goes over "
        "the budget, which changes the request near its start but rarely; `windowfit-lean` "
        "clears the results that leave a keep-window of 3 (as Anthropic does), "
        f"{PRESETS['windowfit-lean'].batch_size} at a time, and keeps windowfit's budget "
        "guarantee.",
        "",
    ]
    variants = _variants(first.policies)
    if variants:
        lines += [
            "Peers with other settings (in the tables, not in the targets): "
            + ", ".join(f"`{v}`" for v in variants)
            + ". OpenHands' condenser class defaults to an attention window of 5 (used "
            "above); its configuration file's default is 100.",
            "",
        ]
    lines += [
        "## Data",
        "",
        "Runs from `../shared/data/trajectories` (see its `SOURCES.md`), read with "
        "`windowfit.logs.read_runs`; every model call (request point) is replayed.",
        "",
    ]
    data = Table(["source", "runs", "model calls", "counted with", "head / largest (median)"])
    kinds = [k for k in SOURCE_ORDER if k in counts] + [k for k in counts if k not in SOURCE_ORDER]
    for kind in kinds:
        n, calls = counts[kind]
        heads = [r.head / r.largest for r in runs if r.kind == kind and r.largest]
        data.add(
            [
                SOURCE_NAMES.get(kind, kind),
                str(n),
                f"{calls:,}",
                ", ".join(sorted(tokenizers[kind])),
                f"{_median(heads):.0%}",
            ]
        )
    lines += [
        data.markdown(),
        "",
        "Tokenizers (`--tokenizer auto`): DeepSeek's for the DeepSeek runs (it matches their "
        "recorded usage), o200k for tau-bench (GPT-4o) and SWE-agent, and the Claude 1/2-era "
        "tokenizer for Claude Code: no Claude 4 tokenizer is public; by the recorded usage "
        "the real counts are about 1.2x higher. The head is what no policy drops (system "
        "prompt, tools, first message).",
        "",
        "## How to read the tables",
        "",
        "* Budget: a fraction of each run's largest request (everything sent, counted with "
        "the tokenizer); hard limit: twice the budget.",
        "* **cost x raw**: input cost with prompt caching (longest prefix shared with the "
        "previous request sent read at 0.1x, the rest written at 1.25x), against sending "
        "everything (`raw`). Every request sent is billed, rejected ones too; refused ones "
        "are not sent.",
        "* **intact**: share of the tool-result tokens the conversation holds that are sent "
        "unchanged, averaged over the requests sent (mean) and at each run's last request "
        "sent (last). Runs without tool calls (SWE-agent's thought/action histories) have "
        "none and do not count.",
        "* **rejected**: requests over the hard limit; **refused**: requests windowfit "
        "would not send (nothing fits, not even in the hard limit, which windowfit is told: "
        "the agent stops or asks the person); **over budget**: over the budget; "
        "**violations**: requests a provider would reject as malformed, or that lost the "
        "first message.",
        "* **breaks**: requests that do not start with the whole previous request; "
        "**resent/break**: tokens written to the cache per break.",
        "",
        "## Policies",
        "",
    ]
    for label in first.policies:
        settings = dict(first.settings.get(label, {}))
        describe = settings.pop("describe", "")
        shown = ", ".join(f"{k}={v}" for k, v in settings.items() if k != "name")
        lines.append(f"* `{label}`: {describe}" + (f" ({shown})" if shown else ""))
    lines += [
        "",
        "Peer defaults are their documented ones; the docstrings in "
        "`src/windowfit/replay/peers.py` and `langchain_trim.py` say where each comes from. "
        "Anthropic `clear_tool_uses_20250919`: keep 3 tool uses, the 100k-token trigger "
        "scaled to the budget. OpenHands `observation_masking`: attention window 100 events. "
        "SWE-agent `last_n_observations`: n 5, polling 1. LangChain `trim_messages`: "
        "`strategy=last`, the approximate counter, `start_on=human`, `include_system=True`, "
        "`max_tokens` = budget minus tools.",
        "",
    ]
    for fraction, report in reports.items():
        lines += [f"## Budget {fraction:.0%} of the largest request", ""]
        for kind, totals in _sources(report):
            n = sum(1 for r in report.runs if r.kind == kind)
            calls = sum(r.requests for r in report.runs if r.kind == kind)
            lines += [f"### {SOURCE_NAMES.get(kind, kind)} ({n} runs, {calls:,} calls)", ""]
            lines += [policy_table(totals, report, compact=True).markdown(), ""]
    problems = first.problems
    if problems:
        lines += ["## Logs that could not be read", ""]
        lines += [f"* {p}" for p in problems]
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="trajectories directory")
    parser.add_argument("--out", default=str(OUT), help="Markdown file to write, - to print")
    parser.add_argument(
        "--fractions", default=",".join(str(f) for f in FRACTIONS), help="budget fractions"
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--policies",
        help="comma-separated policies (default: every available one, "
        + ", ".join(VARIANTS)
        + ", and windowfit-lean at batch sizes "
        + ", ".join(str(b) for b in LEAN_BATCHES)
        + ")",
    )
    parser.add_argument(
        "--fit-counts",
        choices=["default", "exact", "seed"],
        default="default",
        help="what windowfit's presets count with (as windowfit replay --fit-counts)",
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"no data at {args.data}", file=sys.stderr)
        return 2
    fractions = tuple(float(f) for f in args.fractions.split(","))
    policies = args.policies or ",".join([*available_policies(), *VARIANTS, *_lean_sweep()])
    reports, elapsed, ceilings = run_all(
        args.data, fractions, max(1, args.jobs), policies, args.fit_counts
    )
    given = " ".join(sys.argv[1:]) if argv is None else " ".join(argv)
    command = ".venv/bin/python benchmarks/replay.py" + (f" {given}" if given else "")
    text = markdown(reports, elapsed, max(1, args.jobs), command, ceilings)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    print(f"replayed {len(fractions)} budgets in {elapsed:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
