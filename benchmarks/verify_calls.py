"""How many extra calls ``wrap(..., verify="count_tokens")`` would make: every model call
of the runs in ../shared/data/trajectories fitted with the windowfit preset and the
default estimate (as ``windowfit replay``, hard limit twice the budget), counting the
requests whose estimate lands within the band below the budget (where wrap asks the
provider's count), and among them those the real tokenizer puts over the budget (what
the count would catch).

Run:  .venv/bin/python benchmarks/verify_calls.py [--band 0.1] [--json]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from windowfit import ContextOverflowError, Fitter, default_estimator
from windowfit.logs import read_runs
from windowfit.replay.engine import Conversation, _Estimators, measure_request, tokenizer_for
from windowfit.replay.report import SOURCE_NAMES
from windowfit.sizing import default_sizer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
FRACTIONS = (0.3, 0.5, 0.7)


def measure(data: Path, band: float) -> dict[str, dict[str, dict[str, int]]]:
    """source -> budget fraction -> counts (requests, in_band, in_band_over, over)."""
    counts: dict[str, dict[str, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    measuring = _Estimators("auto")
    runs = [r for r in read_runs(data) if r.requests]
    for done, run in enumerate(runs, 1):
        real, _, _ = measuring.get(tokenizer_for(run, "auto"))
        conv = Conversation(run, default_sizer(real, run.format))
        points = [p.index for p in run.requests if 0 < p.index <= len(run.messages)]
        if not points:
            continue
        largest = max(conv.request_tokens(i) for i in points)
        estimator = default_estimator(model=run.model)
        for fraction in FRACTIONS:
            budget = max(1, int(largest * fraction))
            cell = counts[run.kind][f"{fraction:.0%}"]
            fitter = Fitter()
            for upto in points:
                cell["requests"] += 1
                try:
                    result = fitter.fit(
                        conv.messages[:upto],
                        budget=budget,
                        system=run.system,
                        tools=run.tools,
                        format=run.format,
                        estimator=estimator,
                        limit=2 * budget,
                    )
                except ContextOverflowError:
                    continue
                sizes, _, _ = measure_request(conv, result.messages, upto)
                size = conv.fixed + sum(sizes)
                estimate = result.report.tokens_after
                near = budget * (1 - band) <= estimate <= budget
                cell["in_band"] += near
                cell["in_band_over"] += near and size > budget
                cell["over"] += size > budget
        print(f"{done}/{len(runs)} runs", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return {k: {f: dict(c) for f, c in v.items()} for k, v in counts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--band", type=float, default=0.1, help="as wrap's verify_band")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"no data at {args.data}", file=sys.stderr)
        return 2
    figures = measure(args.data, args.band)
    if args.json:
        print(json.dumps({"band": args.band, "sources": figures}, indent=2))
        return 0
    print(f"band: estimate within {args.band:.0%} below the budget")
    print()
    print(
        "| source | budget | requests | counts asked per 100 requests "
        "| of those, over the budget by the real count | over the budget, all requests |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for kind, by_budget in figures.items():
        for fraction, c in by_budget.items():
            n = c.get("requests", 0)
            row: list[Any] = [
                SOURCE_NAMES.get(kind, kind),
                fraction,
                f"{n:,}",
                f"{100 * c.get('in_band', 0) / n:.1f}" if n else "-",
                f"{c.get('in_band_over', 0):,}",
                f"{c.get('over', 0):,}",
            ]
            print("| " + " | ".join(str(x) for x in row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
