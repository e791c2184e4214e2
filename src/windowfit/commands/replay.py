"""``windowfit replay PATH...``: what each policy would have sent on real agent runs, and
what it would have cost under prompt caching.

Exit codes: 0 when every log was read, 1 when some could not be (each is reported on
standard error with its file and line; the rest is replayed), 2 for bad arguments or when
no run could be read at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..cache import CachePricing
from ..errors import WindowfitError
from ._io import (
    EXIT_OK,
    CliError,
    add_input_limit,
    add_progress_flags,
    checked_number,
    positive_int,
)

EXIT_PARTIAL = 1

_DEFAULT_FRACTION = 0.5


_fraction = checked_number(float, lambda n: 0 < n <= 1, "must be in (0, 1], not {number:g}")
_factor = checked_number(float, lambda n: n >= 1, "must be at least 1, not {number:g}")
_price = checked_number(float, lambda n: n >= 0, "must not be negative, not {number:g}")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="replay agent logs through windowfit and peer policies: sizes, rejections, cost",
        description=(
            "Replay every model call of the runs in agent logs (Claude Code JSONL, "
            "mini-swe-agent, SWE-agent, tau-bench, plain message lists; a directory means "
            "every log in it) through each policy, and report request sizes, rejections, "
            "prompt-cache cost and breaks, the share of tool results kept intact, and "
            "invariant violations."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="log file or directory")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--budget", type=positive_int, metavar="N", help="budget in tokens, for every run"
    )
    budget.add_argument(
        "--budget-fraction",
        type=_fraction,
        metavar="F",
        help=f"budget as a fraction of each run's largest request (default {_DEFAULT_FRACTION})",
    )
    limit = p.add_mutually_exclusive_group()
    limit.add_argument(
        "--context-window",
        type=positive_int,
        metavar="M",
        help="hard limit in tokens (the model's window)",
    )
    limit.add_argument(
        "--hard-limit-factor",
        type=_factor,
        metavar="H",
        default=2.0,
        help="hard limit as a multiple of the budget (default 2)",
    )
    p.add_argument(
        "--policies",
        metavar="P,...",
        help="comma-separated policy names, each optionally NAME:KEY=VALUE:... "
        "(default: every policy available)",
    )
    p.add_argument(
        "--tokenizer",
        default="auto",
        metavar="T",
        help="tokenizer that counts requests: auto (by the run's model), seed (no "
        "tokenizer), o200k, cl100k, deepseek, claude-legacy, tekken (default auto)",
    )
    p.add_argument(
        "--fit-counts",
        choices=["default", "exact", "seed"],
        default="default",
        help="what windowfit's presets count with: the estimate a user gets by default "
        "(default: the model family's profile, checked by its vocabulary where that is "
        "installed, conservative for an unknown model), the "
        "same tokenizer that measures (exact), or the write-up's rule (seed); over budget "
        "and over the hard limit are measured with --tokenizer either way",
    )
    p.add_argument(
        "--model",
        metavar="NAME",
        help="the model of runs whose log does not record one (for example gpt-4o for "
        "tau-bench's episodes): the judge (--tokenizer auto) and windowfit's default "
        "estimate then count as for that model; without it such runs are measured with "
        "o200k and windowfit counts with conservative",
    )
    p.add_argument(
        "--no-fit-limit",
        dest="fit_limit",
        action="store_false",
        help="do not tell windowfit the hard limit: it then refuses every request that "
        "cannot fit the budget, instead of sending it over the budget",
    )
    p.add_argument(
        "--cache-read",
        type=_price,
        default=0.1,
        metavar="X",
        help="cache read price (x input, default 0.1)",
    )
    p.add_argument(
        "--cache-write",
        type=_price,
        default=1.25,
        metavar="X",
        help="cache write price (x input, default 1.25)",
    )
    p.add_argument(
        "--price",
        type=_price,
        metavar="USD",
        help="dollars per million input tokens (costs in dollars)",
    )
    add_input_limit(p, what="a log file")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--per-run", action="store_true", help="add a table with one row per run")
    p.add_argument(
        "--wide",
        action="store_true",
        help="show every column (the tables then run to about 200 characters); by default "
        "they fit 100 columns, and say which columns were left out",
    )
    p.add_argument(
        "--plot",
        metavar="OUT.png",
        help="draw request size over model calls, one panel for each of the 6 runs with the "
        "most model calls (the figure's title says which)",
    )
    add_progress_flags(p, shown="show a progress bar")
    p.set_defaults(run=run)


def _check_tokenizer(name: str) -> None:
    if name in ("auto", "seed"):
        return
    from ..tokenizers import load_backend

    try:
        load_backend(name)
    except WindowfitError as exc:
        raise CliError(f"--tokenizer {name}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from ..replay import ReplayConfig, count_requests, parse_policies, read_logs, replay
    from ..replay._progress import Progress
    from ..replay.report import text_report

    for path in args.paths:
        if not Path(path).exists():
            raise CliError(f"{path}: no such file or directory")
    if args.plot:
        from ..replay.plot import require_matplotlib

        try:
            require_matplotlib()
        except WindowfitError as exc:
            raise CliError(str(exc)) from None
    try:
        config = ReplayConfig(
            budget=args.budget,
            budget_fraction=args.budget_fraction or _DEFAULT_FRACTION,
            context_window=args.context_window,
            hard_limit_factor=args.hard_limit_factor,
            tokenizer=args.tokenizer,
            fit_counts=args.fit_counts,
            fit_limit=args.fit_limit,
            model=args.model,
            pricing=CachePricing(read=args.cache_read, write=args.cache_write),
            price_per_mtok=args.price,
        )
        policies = parse_policies(args.policies)
    except WindowfitError as exc:
        raise CliError(str(exc)) from None
    _check_tokenizer(args.tokenizer)

    runs, problems = read_logs(args.paths, max_bytes=args.max_input_bytes)
    if not runs and len(problems) == 1:  # one file, one problem: one line says it all
        raise CliError(f"{problems[0]}; no run could be read from {', '.join(args.paths)}")
    for problem in problems:
        print(f"windowfit: error: {problem}", file=sys.stderr)
    if not runs:
        raise CliError("no run could be read from " + ", ".join(args.paths))
    progress = Progress(count_requests(runs) * len(policies), enabled=args.progress)
    try:
        report = replay(runs, policies, config, problems=problems, progress=progress)
    except WindowfitError as exc:
        progress.close()
        raise CliError(str(exc)) from None
    plotted = 0
    if args.plot:
        from ..replay.plot import plot_report

        plotted = plot_report(report, args.plot)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        print(text_report(report, per_run=args.per_run, width=None if args.wide else 100))
        if args.plot:
            which = (
                "every run"
                if plotted == len(report.runs)
                else f"the {plotted} of {len(report.runs)} runs with the most model calls"
            )
            print(f"\nplot written to {args.plot} ({which})")
    return EXIT_PARTIAL if problems else EXIT_OK
