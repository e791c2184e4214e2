"""``windowfit tokens FILE [--model M | --family F]``: the estimate of a text, by
character class, beside the real count of every tokenizer installed.

Without ``--model`` or ``--family`` the estimate is the seed's rule (ASCII/4 + CJK/1 +
other/2). With them it is the calibrated profile of that family (a model maps to its
family; an unknown model to ``conservative``), split by the classes of
:data:`windowfit.profiles.CHARACTER_CLASSES`. Every tokenizer that
:func:`windowfit.tokenizers.available_backends` finds counts the text too, so that the
estimate and the real counts can be read side by side.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ..errors import SettingsError, WindowfitError
from ..profiles import FAMILIES, ProfileEstimator, estimator_for, family_for_model
from ..tokens import breakdown, estimate_tokens
from ._io import EXIT_OK, CliError, read_text


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tokens",
        help="estimate the tokens of a text file by character class, beside real tokenizers",
    )
    p.add_argument("file", help="text file, or - for standard input")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", help="estimate for this model (its tokenizer family)")
    which.add_argument(
        "--family", help=f"estimate for this tokenizer family: {', '.join(FAMILIES)}"
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(run=run)


def _classes(text: str, family: str) -> tuple[dict[str, dict[str, float]], float, int]:
    """Per class: characters, tokens, tokens per character; the framing; the estimate."""
    if family == "seed":
        parts = breakdown(text)
        rows = {
            "ascii": (parts.ascii, parts.ascii / 4),
            "cjk": (parts.cjk, float(parts.cjk)),
            "other": (parts.other, parts.other / 2),
        }
        classes = {
            name: {"chars": chars, "tokens": tokens, "tokens_per_char": rate}
            for (name, (chars, tokens)), rate in zip(rows.items(), (0.25, 1.0, 0.5), strict=True)
        }
        return classes, 0.0, parts.tokens
    estimator = estimator_for(family=family)
    assert isinstance(estimator, ProfileEstimator)
    classes = {}
    framing = 0.0
    for row in estimator.by_class(text):
        if row.name == "framing":
            framing = row.tokens
            continue
        rate = row.tokens / row.characters if row.characters else 0.0
        classes[row.name] = {"chars": row.characters, "tokens": row.tokens, "tokens_per_char": rate}
    return classes, framing, estimator.estimate(text)


def _real_counts(text: str, estimate: int) -> dict[str, dict[str, Any]]:
    """Every installed tokenizer's count of ``text`` (or why it could not count)."""
    try:
        from ..tokenizers import available_backends, load_backend
    except ImportError as exc:  # pragma: no cover - the module itself is stdlib-only
        return {"(none)": {"error": str(exc)}}
    counts: dict[str, dict[str, Any]] = {}
    for info in available_backends():
        try:
            real = load_backend(info.name).estimate(text)
        except (WindowfitError, OSError, ValueError) as exc:
            counts[info.name] = {"error": str(exc).splitlines()[0]}
            continue
        ratio = estimate / real if real else None
        counts[info.name] = {"tokens": real, "estimate_over_real": ratio}
    return counts


def run(args: argparse.Namespace) -> int:
    text = read_text(args.file)
    model: str | None = args.model
    family: str = args.family or (family_for_model(model) if model else "seed")
    if family not in FAMILIES:
        raise CliError(f"unknown tokenizer family {family!r}; known: {', '.join(FAMILIES)}")
    try:
        classes, framing, estimate = _classes(text, family)
    except SettingsError as exc:  # pragma: no cover - checked above
        raise CliError(str(exc)) from None
    chars = len(text)
    seed = estimate_tokens(text)
    quarter = math.ceil(chars / 4)
    real = _real_counts(text, estimate)
    if args.json:
        print(
            json.dumps(
                {
                    "file": args.file,
                    "chars": chars,
                    "model": model,
                    "family": family,
                    "estimator": "seed" if family == "seed" else f"profile:{family}",
                    "classes": classes,
                    "framing": framing,
                    "estimate": estimate,
                    "seed_estimate": seed,
                    "chars_over_4": quarter,
                    "backends": real,
                },
                ensure_ascii=False,
            )
        )
        return EXIT_OK
    _print_table(args.file, chars, model, family, classes, framing, estimate, seed, quarter, real)
    return EXIT_OK


def _print_table(
    file: str,
    chars: int,
    model: str | None,
    family: str,
    classes: dict[str, dict[str, float]],
    framing: float,
    estimate: int,
    seed: int,
    quarter: int,
    real: dict[str, dict[str, Any]],
) -> None:
    which = f"model {model} -> family {family}" if model else f"family {family}"
    print(f"{file}: {chars:,} characters; {which}")
    print(f"  {'class':<14}{'chars':>12}{'tok/char':>10}{'tokens':>12}")
    for name, row in classes.items():
        if row["chars"] or row["tokens"]:
            print(
                f"  {name:<14}{int(row['chars']):>12,}{row['tokens_per_char']:>10.3f}"
                f"{row['tokens']:>12,.1f}"
            )
    if framing:
        print(f"  {'framing':<14}{'':>12}{'':>10}{framing:>12,.1f}")
    rule = (
        "seed rule: ASCII/4 + CJK/1 + other/2, rounded up"
        if family == "seed"
        else f"calibrated {family} profile, rounded up"
    )
    print(f"  estimate: {estimate:,} tokens ({rule})")
    print(f"  seed rule would say {seed:,}; chars/4 would say {quarter:,}")
    if not real:
        print("  no real tokenizer installed (pip install 'windowfit[tokenizers]')")
        return
    print(f"\n  {'real tokenizer':<16}{'tokens':>12}{'estimate/real':>16}")
    for name, row in real.items():
        if "error" in row:
            print(f"  {name:<16}  not available: {row['error']}")
            continue
        ratio = row["estimate_over_real"]
        shown = f"{ratio:.3f}" if ratio is not None else "-"
        print(f"  {name:<16}{row['tokens']:>12,}{shown:>16}")
