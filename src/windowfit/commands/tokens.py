"""``windowfit tokens FILE``: the estimate of a text, by character class."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ..tokens import breakdown
from ._io import EXIT_OK, read_text


def register(sub: Any) -> None:
    p = sub.add_parser("tokens", help="estimate the tokens of a text file, by character class")
    p.add_argument("file", help="text file, or - for standard input")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    text = read_text(args.file)
    parts = breakdown(text)
    chars = len(text)
    classes = {
        "ascii": {"chars": parts.ascii, "tokens_per_char": 0.25, "tokens": parts.ascii / 4},
        "cjk": {"chars": parts.cjk, "tokens_per_char": 1.0, "tokens": float(parts.cjk)},
        "other": {"chars": parts.other, "tokens_per_char": 0.5, "tokens": parts.other / 2},
    }
    if args.json:
        print(
            json.dumps(
                {
                    "file": args.file,
                    "chars": chars,
                    "classes": classes,
                    "estimate": parts.tokens,
                    "estimator": "seed",
                    "chars_over_4": math.ceil(chars / 4),
                },
                ensure_ascii=False,
            )
        )
        return EXIT_OK
    print(f"{args.file}: {chars:,} characters")
    print(f"  {'class':<8}{'chars':>12}{'tok/char':>10}{'tokens':>12}")
    for name, row in classes.items():
        print(f"  {name:<8}{row['chars']:>12,}{row['tokens_per_char']:>10}{row['tokens']:>12,.1f}")
    print(f"  estimate: {parts.tokens:,} tokens (seed rule: ASCII/4 + CJK/1 + other/2, rounded up)")
    print(f"  chars/4 would say {math.ceil(chars / 4):,}")
    return EXIT_OK
