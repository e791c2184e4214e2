"""``windowfit demo``: the whole system at work, offline (what ``make demo`` runs)."""

from __future__ import annotations

import argparse
from typing import Any

from ._io import CliError, positive_int


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="reproduce the write-up's three failures, before and after, on a simulated model",
        description=(
            "Run the scenarios subagents, chapters and russian twice on a simulated provider "
            "(a hard context limit counted with a real tokenizer): before, with the old "
            "system, and after, with windowfit. Progress goes to stderr, the tables to stdout."
        ),
    )
    p.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    p.add_argument(
        "--texts",
        metavar="DIR",
        help="read real texts from DIR (files named like ru_*.txt, en_*.txt) instead of "
        "generating them, e.g. ../shared/data/texts",
    )
    p.add_argument(
        "--tokenizer",
        default="cl100k",
        metavar="NAME",
        help=(
            "the simulator's tokenizer (a windowfit tokenizer backend; default cl100k, "
            "which counts Russian near the write-up's 2.2 characters a token)"
        ),
    )
    p.add_argument(
        "--scenario",
        action="append",
        choices=["subagents", "chapters", "russian"],
        help="run only this scenario (repeatable; default: all three)",
    )
    p.add_argument(
        "--history",
        metavar="DIR",
        help="keep each run's saved history in DIR (<scenario>-<mode>.sqlite3)",
    )
    p.add_argument("--subagents", type=positive_int, metavar="N", help="sub-agents (default 8)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import MissingExtraError, TokenizerError
    from ..sim import SCENARIOS, DirectoryTexts, ScenarioConfig, cached_tokenizer

    texts = None
    if args.texts is not None:
        try:
            texts = DirectoryTexts(args.texts)
            for language in ("en", "ru"):
                if not texts.files(language):
                    raise CliError(f"{args.texts}: no {language}_*.txt file (needed by the demo)")
        except FileNotFoundError as exc:
            raise CliError(str(exc)) from None
    try:
        cached_tokenizer(args.tokenizer)
    except (TokenizerError, MissingExtraError) as exc:
        raise CliError(str(exc)) from None
    options: dict[str, Any] = {"tokenizer": args.tokenizer}
    if args.subagents is not None:
        options["subagents"] = args.subagents
    from ..demo import run_demo

    return run_demo(
        as_json=args.json,
        config=ScenarioConfig(**options),
        texts=texts,
        history=args.history,
        scenarios=args.scenario or SCENARIOS,
        quiet=args.quiet,
    )
