"""Long texts made of unlike parts: does the check on windows still err high? (issue 10)

Run:  .venv/bin/python benchmarks/mixed_texts_report.py               (about 2 minutes)
      .venv/bin/python benchmarks/mixed_texts_report.py --mixes 40    (a shorter run)
      .venv/bin/python benchmarks/mixed_texts_report.py --seed 7      (another draw)
      .venv/bin/python benchmarks/mixed_texts_report.py --json PATH   (every mix's figures)

Why. A text longer than ``EXACT_BYTES`` is not counted exactly: the profile's estimate is
corrected by what the vocabulary counts on a few windows of it (``windowfit.vocabulary``).
On one kind of text the windows see what the rest is like. A tool result or a pasted
file is often not one kind: 3,000 digits and then 17,000 characters of Hindi, a log with a
base64 blob inside, code with Chinese comments. The profile over- or under-counts each
part by a different factor, and the windows must find each part's.

What it measures. ``--mixes`` texts (200 by default), each of 2-8 parts drawn at random
(``--seed``): a slice of 500-60,000 characters (log-uniform, from a random start, cut
where the tokenizers split anyway) of one of the real texts of ``../shared/data/texts``
(when present), a translation catalog of the Django and Sphinx wheels (every string of one
language joined; ``make setup`` downloads them), one of those with runs of blanks between
its lines (:data:`PADDINGS`), or a generated text of ``profiles_report.py`` (a Unicode
block's letters in word-like runs, or one of the hard ASCII texts), parts joined by a
newline. For every family, its estimate without framing
(``profiles_report.without_framing``) over the real tokenizer's count of the whole mix
(``conservative`` over the largest of the five): min, max, how many outside
[0.98, 1.25], and the worst mixes with their parts.

Measurement only; prints Markdown (or JSON) and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from languages_report import find_corpora, read_wheel
from profiles_report import (
    BACKENDS,
    CHECKED_ON,
    WINDOW,
    Source,
    checks,
    data_dir,
    generated_sources,
    load_backends,
    real_sources,
    with_derived,
    without_framing,
)
from windowfit import vocabulary as voc
from windowfit.tokenizers import split_text
from windowfit.tokens import Estimator

#: Parts per mix, and each part's length in characters (drawn log-uniform).
PARTS = (2, 8)
PART_CHARS = (500, 60_000)
#: Characters per generated text in the pool (its slices are at most this long).
GENERATED_CHARS = 30_000
#: A part's first and last pieces of about this many characters are dropped, so that it
#: starts and ends where the tokenizers split anyway (not mid-word).
EDGE_CHARS = 64


@dataclass
class Part:
    source: str
    kind: str
    start: int
    chars: int


@dataclass
class Mix:
    text: str
    parts: list[Part]
    estimate: dict[str, int]
    real: dict[str, int]
    #: what :func:`one_ratio` answers, per family
    before: dict[str, int]

    def ratio(self, family: str, before: bool = False) -> float:
        real = max(self.real[b] for b in CHECKED_ON[family] if b in self.real)
        estimate = (self.before if before else self.estimate)[family]
        return estimate / real if real else math.inf

    def describe(self) -> str:
        return " + ".join(f"{p.chars:,} {p.source}" for p in self.parts)


def pool(seed: int, data: Path | None) -> list[Source]:
    """Every text a part may come from."""
    sources = list(real_sources(data, 10**7))
    for name, path in find_corpora():
        for catalog in read_wheel(path, name):
            text = "\n".join(catalog.strings)
            if len(text) >= PART_CHARS[0]:
                sources.append(Source(catalog.name, "catalog", text))
    sources += padded_sources(random.Random(seed), sources)
    sources += generated_sources(seed, GENERATED_CHARS)
    return sources


#: Padded texts: lines of a text with runs of blanks between them (indentation, blank
#: lines with trailing spaces, tab columns), which the profile rates very differently
#: from the words around them. (run, its repeats, the share of lines that are padding)
PADDINGS = (
    (" ", (100, 250), 0.15),
    (" ", (100, 250), 0.4),
    ("\t", (20, 200), 0.15),
    ("    \n", (20, 250), 0.1),
    ("        \n", (5, 40), 0.3),
)


def padded_sources(rng: random.Random, texts: Sequence[Source]) -> list[Source]:
    """:data:`PADDINGS` applied to lines of texts drawn from ``texts``, 30,000 characters
    each, two of each padding."""
    out = []
    lined = [s for s in texts if s.text.count("\n") > 20]
    for run, (low, high), share in PADDINGS * 2:
        if not lined:
            break
        source = rng.choice(lined)
        lines = source.text.splitlines()
        start = rng.randrange(len(lines))
        chosen, size = [], 0
        while size < GENERATED_CHARS:
            line = run * rng.randint(low, high) if rng.random() < share else lines[start]
            start = (start + 1) % len(lines)
            chosen.append(line)
            size += len(line) + 1
        name = f"{source.name} padded with {run!r} x{low}-{high} ({share:.0%} of lines)"
        out.append(Source(name, "padded", "\n".join(chosen)))
    return out


def draw(rng: random.Random, sources: Sequence[Source]) -> tuple[str, list[Part]]:
    """One mix: its text and what it is made of."""
    texts, parts = [], []
    low, high = math.log(PART_CHARS[0]), math.log(PART_CHARS[1])
    for _ in range(rng.randint(*PARTS)):
        source = rng.choice(sources)
        want = int(math.exp(rng.uniform(low, high)))
        if len(source.text) <= want:
            start, piece = 0, source.text
        else:
            start = rng.randrange(len(source.text) - want)
            piece = source.text[start : start + want]
            # cut where the tokenizers split anyway: no part starts or ends mid-word
            pieces = split_text(piece, EDGE_CHARS)
            if len(pieces) > 2:
                start += len(pieces[0])
                piece = "".join(pieces[1:-1])
        texts.append(piece)
        parts.append(Part(source.name, source.kind, start, len(piece)))
    return "\n".join(texts), parts


def measure(
    mixes: int, seed: int, data: Path | None, progress: bool = True
) -> tuple[list[Mix], dict[str, Any]]:
    sources = pool(seed, data)
    backends = load_backends(BACKENDS)
    families = [f for f in CHECKED_ON if all(b in derived(backends) for b in CHECKED_ON[f])]
    estimators = {f: without_framing(f) for f in families}
    rng = random.Random(seed)
    out: list[Mix] = []
    started = time.perf_counter()
    for index in range(mixes):
        text, parts = draw(rng, sources)
        real = with_derived({name: b.estimate(text) for name, b in backends.items()})
        estimate = {f: e.estimate(text) for f, e in estimators.items()}
        before = {f: one_ratio(e, text) for f, e in estimators.items()}
        out.append(Mix(text, parts, estimate, real, before))
        if progress and (index + 1) % 20 == 0:
            elapsed = time.perf_counter() - started
            print(f"  {index + 1}/{mixes} mixes, {elapsed:.0f} s", file=sys.stderr, flush=True)
    kinds: dict[str, int] = {}
    for source in sources:
        kinds[source.kind] = kinds.get(source.kind, 0) + 1
    meta = {
        "mixes": mixes,
        "seed": seed,
        "sources": kinds,
        "families": families,
        "checks": checks(),
        "characters": sum(len(m.text) for m in out),
    }
    return out, meta


def one_ratio(estimator: Estimator, text: str) -> int:
    """What the check answered before windows corrected their own stretches (up to
    session 14): one ratio, every window's count over every window's profile
    estimate, times the profile's estimate of the whole text. Kept here to show the two
    side by side on the same mixes."""
    if isinstance(estimator, voc.LargestEstimator):
        profile = estimator.profile.estimate
        exact = [
            (p.vocabulary.count_bytes, p.scale)
            for p in estimator.parts
            if isinstance(p, voc.CheckedEstimator)
        ]
    elif isinstance(estimator, voc.CheckedEstimator):
        profile = estimator.profile.estimate
        exact = [(estimator.vocabulary.count_bytes, estimator.scale)]
    else:
        return estimator.estimate(text)
    if len(voc._utf8(text)) <= voc.EXACT_BYTES:
        return estimator.estimate(text)
    # the same windows, unweighted (their UTF-8 is cut at a character, so it decodes)
    windows = [data for data, _, _ in voc._strata(text, lambda window: 1)]
    profiled = sum(max(1, profile(data.decode())) for data in windows)
    largest = max(scale * sum(count(data) for data in windows) for count, scale in exact)
    return max(1, math.ceil(profile(text) * largest / profiled * voc.SAMPLE_MARGIN))


def derived(backends: dict[str, Any]) -> set[str]:
    return set(with_derived({name: 1 for name in backends}))


def markdown(mixes: Sequence[Mix], meta: dict[str, Any], worst: int) -> str:
    kinds = ", ".join(f"{n} {kind}" for kind, n in meta["sources"].items())
    lines = [
        f"{meta['mixes']} mixes (seed {meta['seed']}, {meta['characters']:,} characters) "
        f"of parts from {kinds}; {meta['checks']}.",
        "",
        "windowfit's check (each window corrects the stretch it is like) and, beside it,",
        "one ratio of all the windows for the whole text (the check before):",
        "",
        "| family | min | max | under 0.98 | over 1.25 | one ratio: min | max | under | over |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for family in meta["families"]:
        cells = []
        for before in (False, True):
            ratios = [m.ratio(family, before) for m in mixes]
            low = sum(r < WINDOW[0] for r in ratios)
            high = sum(r > WINDOW[1] for r in ratios)
            cells.append(f"{min(ratios):.3f} | {max(ratios):.3f} | {low} | {high}")
        lines.append(f"| {family} | {cells[0]} | {cells[1]} |")
    for family in meta["families"]:
        ranked = sorted(mixes, key=lambda m: m.ratio(family))[:worst]
        lines += ["", f"Lowest {family}:", ""]
        lines += [f"- {m.ratio(family):.3f}: {m.describe()}" for m in ranked]
    return "\n".join(lines) + "\n"


def as_json(mixes: Sequence[Mix], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "meta": meta,
        "mixes": [
            {
                "parts": [vars(p) for p in m.parts],
                "estimate": m.estimate,
                "real": m.real,
                "before": m.before,
                "ratio": {f: m.ratio(f) for f in meta["families"]},
                "ratio_before": {f: m.ratio(f, True) for f in meta["families"]},
            }
            for m in mixes
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--data", help="the shared data (default: ../shared/data)")
    parser.add_argument("--no-data", action="store_true", help="no real texts in the pool")
    parser.add_argument("--worst", type=int, default=5, help="lowest mixes listed per family")
    parser.add_argument("--json", metavar="PATH", help="every mix's figures as JSON, to PATH")
    args = parser.parse_args(argv)
    if args.mixes < 1:
        parser.error("--mixes must be at least 1")
    data = None if args.no_data else data_dir(args.data)
    started = time.perf_counter()
    mixes, meta = measure(args.mixes, args.seed, data)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(as_json(mixes, meta)) + "\n", encoding="utf-8")
    sys.stdout.write(markdown(mixes, meta, args.worst))
    sys.stdout.write(f"\n({meta['seconds']} s)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
