"""``windowfit tokens FILE [--model M | --family F]``: the estimate of a text, by
character class, and every installed tokenizer's real count beside the estimate of its
own family's profile.

The estimate is what fitting counts with by default (:func:`windowfit.default_estimator`):
the calibrated profile of the model's family with ``--model`` (an unknown model:
``conservative``), of the family named with ``--family`` (``--family seed`` is the
write-up's rule, ASCII/4 + CJK/1 + other/2), and ``conservative`` with neither, checked
by the family's vocabulary where that is on the machine (:mod:`windowfit.vocabulary`);
the profile's part is split by the classes of
:data:`windowfit.profiles.CHARACTER_CLASSES`. Every tokenizer that
:func:`windowfit.tokenizers.available_backends` finds (or those named with
``--tokenizer``) counts the text too, and is shown beside the estimate of *its* family's
profile (o200k's count beside the o200k profile, ...), so each ratio says how far that
profile is from its own tokenizer; a tokenizer windowfit has no profile for shows none.

Long inputs are counted in pieces of about :data:`PIECE_CHARS` characters, cut where the
tokenizers split anyway (:func:`windowfit.tokenizers.split_text`: after a newline, or at
a space between letters), so memory stays bounded whatever the file's size. Every figure
is then the sum of the pieces' figures, which can differ from counting the whole text in
one call by at most a few tokens per piece: each piece's estimate is rounded up and
carries the profile's framing, and a tokenizer cannot merge characters across a cut
(a cut only where it splits anyway makes that rare). A text of one piece is counted
exactly as before. Progress goes to standard error when it is a terminal (``--progress``
forces it).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import SettingsError, WindowfitError
from ..profiles import FAMILIES, ProfileEstimator, estimator_for, family_for_model
from ..tokens import CharacterBreakdown, Estimator, breakdown
from ..vocabulary import CheckedEstimator, LargestEstimator
from ._io import EXIT_OK, CliError, add_input_limit, add_progress_flags, dumps_json, iter_text

#: Characters per piece when a long input is counted in pieces (see the module docstring).
PIECE_CHARS = 2_000_000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tokens",
        help="estimate the tokens of a text file by character class, beside real tokenizers",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("file", help="text file, or - for standard input")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", help="estimate for this model (its tokenizer family)")
    which.add_argument(
        "--family", help=f"estimate for this tokenizer family: {', '.join(FAMILIES)}"
    )
    p.add_argument(
        "--tokenizer",
        action="append",
        metavar="NAME",
        help="count with this real tokenizer only (repeatable; default: every one installed)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_progress_flags(p, shown="report progress")
    add_input_limit(p)
    p.set_defaults(run=run)


def pieces(texts: Iterable[str], size: int = PIECE_CHARS) -> Iterator[str]:
    """The text of ``texts`` again, in pieces of ``size`` to ``2 * size`` characters (the
    last may be shorter), each cut where the tokenizers split anyway when there is such a
    place in its second half, else at whitespace, else at ``size`` characters; so no
    piece, and no buffer, grows without bound. ``"".join(pieces(texts)) == "".join(texts)``.
    """
    from ..tokenizers import split_text

    buffer = ""
    for text in texts:
        buffer += text
        while len(buffer) >= 2 * size:
            window = buffer[: 2 * size]
            head = split_text(window, size)[0]
            if len(head) == len(window):  # no place where every tokenizer splits
                cut = max(window.rfind(" ", size), window.rfind("\n", size))
                head = window[: cut + 1] if cut > 0 else window[:size]
            yield head
            buffer = buffer[len(head) :]
    if buffer:
        yield buffer


@dataclass
class _Backend:
    """A real tokenizer, the profile of its family (when windowfit has one), and their
    counts so far."""

    name: str
    family: str
    counter: Estimator | None = None
    profile: Estimator | None = None
    error: str | None = None
    tokens: int = 0
    estimate: int = 0


@dataclass
class _Totals:
    """Everything ``tokens`` reports, summed over the pieces of the input."""

    family: str
    estimator: Estimator | None
    backends: list[_Backend]
    chars: int = 0
    pieces: int = 0
    seed: list[int] = field(default_factory=lambda: [0, 0, 0])  # ascii, cjk, other
    classes: dict[str, list[float]] = field(default_factory=dict)  # name: [chars, tokens]
    framing: float = 0.0
    estimate: int = 0
    profile_estimate: int = 0

    @property
    def profile(self) -> ProfileEstimator | None:
        """The profile the estimate is made of (checked by a vocabulary or not)."""
        estimator = self.estimator
        if isinstance(estimator, (CheckedEstimator, LargestEstimator)):
            estimator = estimator.profile
        return estimator if isinstance(estimator, ProfileEstimator) else None

    def add(self, text: str) -> None:
        self.chars += len(text)
        self.pieces += 1
        parts = breakdown(text)
        self.seed = [
            self.seed[0] + parts.ascii,
            self.seed[1] + parts.cjk,
            self.seed[2] + parts.other,
        ]
        profile = self.profile
        if profile is not None:
            for row in profile.by_class(text):
                if row.name == "framing":
                    self.framing += row.tokens
                    continue
                total = self.classes.setdefault(row.name, [0, 0.0])
                total[0] += row.characters
                total[1] += row.tokens
            self.profile_estimate += profile.estimate(text)
        if self.estimator is not None:
            self.estimate += self.estimator.estimate(text)
        for backend in self.backends:
            if backend.counter is None:
                continue
            try:
                backend.tokens += backend.counter.estimate(text)
            except (WindowfitError, OSError, ValueError) as exc:
                backend.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                backend.counter = None
                continue
            if backend.profile is not None:
                backend.estimate += backend.profile.estimate(text)

    @property
    def seed_parts(self) -> CharacterBreakdown:
        return CharacterBreakdown(*self.seed)


def _backends(names: list[str] | None) -> list[_Backend]:
    """The tokenizers to count with, each beside its family's profile when there is one."""
    try:
        from ..tokenizers import available_backends, load_backend
    except ImportError as exc:  # pragma: no cover - the module itself is stdlib-only
        return [_Backend("(none)", "", error=str(exc))]
    if names is None:
        chosen = [(info.name, info.family) for info in available_backends()]
    else:
        chosen = []
        for name in names:
            try:
                counter = load_backend(name)
            except WindowfitError as exc:
                raise CliError(f"--tokenizer {name}: {str(exc).splitlines()[0]}") from None
            chosen.append((name, counter.family))
    out: list[_Backend] = []
    for name, family in chosen:
        backend = _Backend(name, family)
        try:
            backend.counter = load_backend(name)
        except (WindowfitError, OSError, ValueError) as exc:
            backend.error = str(exc).splitlines()[0]
        if family in FAMILIES and family not in ("seed", "conservative"):
            backend.profile = estimator_for(family=family)
        out.append(backend)
    return out


class _Progress:
    """``N of M MB counted`` on standard error: rewritten in place on a terminal, one
    line per piece otherwise."""

    def __init__(self, path: str, enabled: bool | None) -> None:
        tty = sys.stderr.isatty()
        self.enabled = tty if enabled is None else enabled
        self.tty = tty
        self.total: int | None = None
        if path != "-":
            try:
                size = os.stat(path).st_size
                self.total = size or None
            except OSError:
                pass
        self.shown = False

    def update(self, chars: int, bytes_read: int) -> None:
        if not self.enabled:
            return
        of = f" of {self.total / 1e6:,.1f}" if self.total else ""
        line = (
            f"windowfit tokens: {bytes_read / 1e6:,.1f}{of} MB read, {chars:,} characters counted"
        )
        end = "\r" if self.tty else "\n"
        print(line, end=end, file=sys.stderr, flush=True)
        self.shown = True

    def close(self) -> None:
        if self.enabled and self.shown and self.tty:
            print(file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    model: str | None = args.model
    family: str = args.family or (family_for_model(model) if model else "conservative")
    if family not in FAMILIES:
        raise CliError(f"unknown tokenizer family {family!r}; known: {', '.join(FAMILIES)}")
    try:
        estimator = None if family == "seed" else estimator_for(family=family)
    except SettingsError as exc:  # pragma: no cover - checked above
        raise CliError(str(exc)) from None
    texts = iter_text(args.file, args.max_input_bytes)
    first = next(texts, "")  # bad input is refused before the tokenizers load (seconds)
    totals = _Totals(family, estimator, _backends(args.tokenizer))
    progress = _Progress(args.file, args.progress)
    read = 0

    def counted(texts: Iterable[str]) -> Iterator[str]:
        nonlocal read
        for text in texts:
            read += len(text.encode("utf-8", "surrogatepass"))
            yield text

    try:
        for piece in pieces(counted(itertools.chain([first], texts))):
            totals.add(piece)
            progress.update(totals.chars, read)
    finally:
        progress.close()
    figures = _figures(args.file, model, totals)
    if args.json:
        print(dumps_json(figures))
    else:
        _print_table(figures)
    return EXIT_OK


def _figures(path: str, model: str | None, totals: _Totals) -> dict[str, Any]:
    family = totals.family
    seed = totals.seed_parts
    if family == "seed":
        rows = {"ascii": (seed.ascii, seed.ascii / 4), "cjk": (seed.cjk, float(seed.cjk))}
        rows["other"] = (seed.other, seed.other / 2)
        rates = {"ascii": 0.25, "cjk": 1.0, "other": 0.5}
        classes = {
            name: {"chars": chars, "tokens": tokens, "tokens_per_char": rates[name]}
            for name, (chars, tokens) in rows.items()
        }
        estimate = seed.tokens
    else:
        classes = {
            name: {
                "chars": int(chars),
                "tokens": tokens,
                "tokens_per_char": tokens / chars if chars else 0.0,
            }
            for name, (chars, tokens) in totals.classes.items()
        }
        estimate = totals.estimate
    backends: dict[str, dict[str, Any]] = {}
    for b in totals.backends:
        if b.error is not None:
            backends[b.name] = {"error": b.error}
            continue
        profile = b.family if b.profile is not None else None
        own = b.estimate if b.profile is not None else None
        ratio = own / b.tokens if own is not None and b.tokens else None
        backends[b.name] = {
            "tokens": b.tokens,
            "profile": profile,
            "profile_estimate": own,
            "estimate_over_real": ratio,
        }
    return {
        "file": path,
        "chars": totals.chars,
        "pieces": totals.pieces,
        "model": model,
        "family": family,
        "estimator": "seed" if totals.estimator is None else totals.estimator.name,
        "classes": classes,
        "framing": totals.framing,
        "estimate": estimate,
        "profile_estimate": None if family == "seed" else totals.profile_estimate,
        "seed_estimate": seed.tokens,
        "chars_over_4": math.ceil(totals.chars / 4),
        "backends": backends,
    }


def _print_table(f: dict[str, Any]) -> None:
    model, family = f["model"], f["family"]
    which = f"model {model} -> family {family}" if model else f"family {family}"
    counted = f" (counted in {f['pieces']} pieces)" if f["pieces"] > 1 else ""
    print(f"{f['file']}: {f['chars']:,} characters; {which}{counted}")
    print(f"  {'class':<14}{'chars':>12}{'tok/char':>10}{'tokens':>12}")
    for name, row in f["classes"].items():
        if row["chars"] or row["tokens"]:
            print(
                f"  {name:<14}{int(row['chars']):>12,}{row['tokens_per_char']:>10.3f}"
                f"{row['tokens']:>12,.1f}"
            )
    if f["framing"]:
        print(f"  {'framing':<14}{'':>12}{'':>10}{f['framing']:>12,.1f}")
    if family == "seed":
        rule = "seed rule: ASCII/4 + CJK/1 + other/2, rounded up"
    elif f["estimator"].startswith("checked:"):
        rule = (
            f"calibrated {family} profile checked by its vocabulary; "
            f"the profile alone: {f['profile_estimate']:,}"
        )
    else:
        rule = f"calibrated {family} profile, rounded up"
    print(f"  estimate: {f['estimate']:,} tokens ({rule})")
    print(f"  seed rule would say {f['seed_estimate']:,}; chars/4 would say {f['chars_over_4']:,}")
    real = f["backends"]
    if not real:
        print("  no real tokenizer installed (pip install 'windowfit[tokenizers]')")
        return
    print("\n  each real tokenizer beside the estimate of its own family's profile")
    print(
        f"  {'real tokenizer':<16}{'tokens':>12}  {'profile':<10}{'estimate':>12}{'est/real':>10}"
    )
    for name, row in real.items():
        if "error" in row:
            print(f"  {name:<16}  not available: {row['error']}")
            continue
        if row["profile"] is None:
            print(f"  {name:<16}{row['tokens']:>12,}  {'(none)':<10}{'-':>12}{'-':>10}")
            continue
        ratio = row["estimate_over_real"]
        shown = f"{ratio:.3f}" if ratio is not None else "-"
        print(
            f"  {name:<16}{row['tokens']:>12,}  {row['profile']:<10}"
            f"{row['profile_estimate']:>12,}{shown:>10}"
        )
