"""``windowfit demo``: the whole system at work, offline (what ``make demo`` runs)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="show fitting at work on a long sub-agent run")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    return run_demo(as_json=args.json)
