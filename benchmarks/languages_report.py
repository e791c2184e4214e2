"""The profiles on real text of about a hundred languages that no fit has seen.

Run:  .venv/bin/python benchmarks/languages_report.py            (about 2 minutes)
      .venv/bin/python benchmarks/languages_report.py --quick    (a few languages)
      (``--json PATH``: every catalog's and string's counts; ``--corpus WHEEL``: other
      wheels than the pinned ones)

Why this corpus. ``../shared/data`` holds ten real texts, and every profile was fitted
on them; the generated block texts of ``profiles_report.py`` are random words, harder
than real text. Translation catalogs are real text written by people, in many languages,
and PyPI ships them: the ``.po`` files inside the Django and Sphinx wheels (pinned in
:data:`CORPORA`; ``make setup`` downloads the two wheels into ``.cache/corpora`` and this
script reads them as zip files, importing neither package). They are user-interface
strings (short sentences, field names, error messages, with ``%(name)s`` placeholders),
which is what an agent's tool results and a user's short messages look like too.

What it measures, each family's estimate without its framing (``estimator_for``'s
profile with ``framing=0``: the bare text, ``profiles_report.without_framing``)
over the real tokenizer's count (``conservative`` over the largest of the five):

* every catalog whole (its translated strings joined by newlines), per language;
* every translated string alone: real short texts, by length;
* the spread within one script: the catalogs written in ASCII letters only (Swahili,
  Basque, Indonesian, Dutch, English...), whose characters fall in the same classes of
  the profile. No estimate that sees only the classes and their pairs can put two texts
  of the same class statistics at different rates, so a spread wider than the target's
  (1.25 / 0.98 = 1.276) says which part of the target needs a vocabulary.

* with ``--greedy``, what a vocabulary would buy: each text counted by the greedy
  longest match of the tokenizer's own vocabulary within its own pre-tokenizer's pieces
  (o200k and cl100k, whose files tiktoken reads; slow, Python), over the real BPE count.
  A fast estimate that held a compact vocabulary could count like that.

Measurement only; prints Markdown and asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import sys
import time
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from windowfit.tokens import Estimator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profiles_report import BACKENDS, CHECKED_ON, WINDOW, checks, with_derived, without_framing

ROOT = Path(__file__).resolve().parents[1]
#: The wheels whose translation catalogs are the corpus (``make setup`` downloads them
#: into :data:`CORPUS_DIR` with these pins).
CORPORA = {"django": "Django-5.1.4-py3-none-any.whl", "sphinx": "sphinx-8.1.3-py3-none-any.whl"}
CORPUS_DIR = ROOT / ".cache" / "corpora"
#: A catalog shorter than this is left out of the whole-catalog tables (a ratio of a few
#: hundred tokens says little).
MIN_CATALOG_CHARS = 2_000
#: Lengths (characters) of the strings-alone table: upper bounds of each bucket.
STRING_BUCKETS = (5, 10, 30, 100, 300, 10**9)
#: Each family and the real tokenizers it is checked on (``profiles_report``'s).
FAMILIES = tuple(CHECKED_ON)


# ---------------------------------------------------------------------------------------
# Reading the catalogs
# ---------------------------------------------------------------------------------------

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b"}
_ESCAPE = re.compile(r"\\(.)")
_KEYWORD = re.compile(r"^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(\".*\")\s*$")


def _unquote(quoted: str) -> str:
    """The text of one ``"..."`` line of a catalog (C escapes)."""
    body = quoted.strip()[1:-1]
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def translations(po_text: str) -> list[str]:
    """The non-empty translated strings (``msgstr`` and ``msgstr[N]``) of a ``.po``
    catalog, the header entry (the one whose ``msgid`` is empty) left out."""
    out: list[str] = []
    msgid: list[str] = []
    current: list[str] | None = None
    strings: list[list[str]] = []

    def flush() -> None:
        if "".join(msgid):
            out.extend(s for s in ("".join(parts) for parts in strings) if s)
        strings.clear()

    for line in po_text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _KEYWORD.match(line)
        if match:
            keyword, quoted = match.groups()
            if keyword in ("msgctxt", "msgid") and strings:
                flush()
                msgid = []
            if keyword == "msgid":
                msgid = [_unquote(quoted)]
                current = msgid
            elif keyword.startswith("msgstr"):
                strings.append([_unquote(quoted)])
                current = strings[-1]
            else:
                current = None
        elif line.startswith('"') and current is not None:
            current.append(_unquote(line))
    flush()
    return out


@dataclass
class Catalog:
    source: str  # the wheel's name in CORPORA
    language: str  # the catalog's locale directory (``pt_BR``, ``sr@latin``...)
    strings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.source}:{self.language}"

    @property
    def text(self) -> str:
        return "\n".join(self.strings)


def read_wheel(path: Path, source: str) -> list[Catalog]:
    """Every language's translated strings of a wheel (``.../<lang>/LC_MESSAGES/*.po``),
    one catalog per language (a package's several domains joined)."""
    catalogs: dict[str, Catalog] = {}
    with zipfile.ZipFile(path) as wheel:
        for name in sorted(wheel.namelist()):
            parts = name.split("/")
            if not name.endswith(".po") or len(parts) < 3 or parts[-2] != "LC_MESSAGES":
                continue
            language = parts[-3]
            text = wheel.read(name).decode("utf-8", errors="replace")
            catalog = catalogs.setdefault(language, Catalog(source, language))
            catalog.strings.extend(translations(text))
    return [c for c in catalogs.values() if c.strings]


def find_corpora(paths: Sequence[str] = ()) -> list[tuple[str, Path]]:
    """(source, wheel) pairs: the ``--corpus`` paths, else the pinned wheels that are there."""
    if paths:
        return [(Path(p).name.split("-")[0].lower(), Path(p)) for p in paths]
    found = [(src, CORPUS_DIR / wheel) for src, wheel in CORPORA.items()]
    return [(src, path) for src, path in found if path.is_file()]


#: A catalog whose letters are at least this share ASCII is "ASCII" in the spread table
#: (Dutch, Indonesian, Swahili, Italian, English: a rare accented letter apart, every
#: character is in the profile's ASCII classes).
ASCII_SHARE = 0.98


def script_of(text: str) -> str:
    """The script most of the text's letters are written in (the first word of their
    Unicode names: LATIN, CYRILLIC, ARABIC, CJK...), and ``ASCII`` when at least
    :data:`ASCII_SHARE` of its letters are ASCII letters."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "none"
    if sum(c.isascii() for c in letters) >= ASCII_SHARE * len(letters):
        return "ASCII"
    counts = collections.Counter(unicodedata.name(c, "UNKNOWN").split()[0] for c in letters)
    return counts.most_common(1)[0][0]


# ---------------------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------------------


def load_backends() -> dict[str, Estimator]:
    from windowfit.tokenizers import load_backend

    return {name: load_backend(name) for name in BACKENDS}


@dataclass
class Counted:
    """One text's estimate per family and real count per backend."""

    chars: int
    estimate: dict[str, int]
    real: dict[str, int]

    def ratio(self, family: str) -> float:
        real = max(self.real[b] for b in CHECKED_ON[family])
        return self.estimate[family] / real if real else float("inf")


def count(text: str, estimators: dict[str, Estimator], backends: dict[str, Estimator]) -> Counted:
    return Counted(
        len(text),
        {f: e.estimate(text) for f, e in estimators.items()},
        with_derived({b: e.estimate(text) for b, e in backends.items()}),
    )


# ---------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------


def _cell(value: float) -> str:
    text = f"{value:.3f}"
    return text if WINDOW[0] <= value <= WINDOW[1] else f"**{text}**"


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def catalog_tables(rows: list[tuple[Catalog, str, Counted]]) -> Iterator[str]:
    yield "### Whole catalogs, per family: languages outside 0.98-1.25"
    yield ""
    yield "| family | catalogs | under 0.98 | over 1.25 | lowest | highest |"
    yield "|---|---:|---:|---:|---|---|"
    for family in FAMILIES:
        ratios = sorted((c.ratio(family), cat.name) for cat, _, c in rows)
        under = [n for r, n in ratios if r < WINDOW[0]]
        over = [n for r, n in ratios if r > WINDOW[1]]
        low = ", ".join(f"{n} {r:.2f}" for r, n in ratios[:3])
        high = ", ".join(f"{n} {r:.2f}" for r, n in ratios[::-1][:3])
        yield f"| {family} | {len(ratios)} | {len(under)} | {len(over)} | {low} | {high} |"
    yield ""
    yield "### Whole catalogs, every language (estimate / real count; **bold** outside 0.98-1.25)"
    yield ""
    yield "| catalog | script | chars | " + " | ".join(FAMILIES) + " |"
    yield "|---|---|---:|" + "---:|" * len(FAMILIES)
    order = sorted(rows, key=lambda row: row[2].ratio("conservative"))
    for cat, script, c in order:
        cells = " | ".join(_cell(c.ratio(f)) for f in FAMILIES)
        yield f"| {cat.name} | {script} | {c.chars:,} | {cells} |"


def spread_table(rows: list[tuple[Catalog, str, Counted]]) -> Iterator[str]:
    ascii_rows = [(cat, c) for cat, script, c in rows if script == "ASCII"]
    yield "### One script, many languages: the catalogs in ASCII letters (at least 98%)"
    yield ""
    if len(ascii_rows) < 2:
        yield "(fewer than two such catalogs)"
        return
    names = ", ".join(sorted({cat.language for cat, _ in ascii_rows}))
    yield f"{len(ascii_rows)} catalogs ({names}). Target spread: 1.25 / 0.98 = 1.276."
    yield ""
    yield "| family | lowest | highest | spread (highest / lowest) |"
    yield "|---|---|---|---:|"
    for family in FAMILIES:
        ratios = sorted((c.ratio(family), cat.name) for cat, c in ascii_rows)
        (lo, lo_name), (hi, hi_name) = ratios[0], ratios[-1]
        yield f"| {family} | {lo_name} {lo:.3f} | {hi_name} {hi:.3f} | {hi / lo:.3f} |"


def string_table(counted: list[Counted]) -> Iterator[str]:
    yield "### Every string alone, by length (real short texts)"
    yield ""
    yield (
        "Share of strings under 0.98 / over 1.25, and the 1st percentile, median and 99th "
        "percentile of the ratios."
    )
    yield ""
    yield "| family | length (chars) | strings | under | over | p1 | p50 | p99 |"
    yield "|---|---|---:|---:|---:|---:|---:|---:|"
    for family in FAMILIES:
        low = 0
        for high in STRING_BUCKETS:
            ratios = [c.ratio(family) for c in counted if low < c.chars <= high]
            label = f"{low + 1}-{high}" if high < 10**9 else f"over {low}"
            low = high
            if not ratios:
                continue
            under = sum(r < WINDOW[0] for r in ratios) / len(ratios)
            over = sum(r > WINDOW[1] for r in ratios) / len(ratios)
            p1, p50, p99 = (_quantile(ratios, q) for q in (0.01, 0.5, 0.99))
            yield (
                f"| {family} | {label} | {len(ratios):,} | {under:.1%} | {over:.1%} "
                f"| {p1:.3f} | {p50:.3f} | {p99:.3f} |"
            )


class GreedyCounter:
    """Counts a text as the greedy longest match of a tiktoken encoding's vocabulary
    within each piece of its pre-tokenizer (no merge ranks): what an estimate holding the
    vocabulary, not the merges, would count. ``top``: only the tokens of rank below it
    (and every single byte), as a compact table would hold."""

    def __init__(self, backend: Estimator, top: int | None = None) -> None:
        import regex  # tiktoken's own dependency

        encoding = backend.encoding  # type: ignore[attr-defined]
        ranks: dict[bytes, int] = encoding._mergeable_ranks
        if top is not None:
            ranks = {k: v for k, v in ranks.items() if v < top or len(k) == 1}
        self.vocabulary = ranks
        self.longest = max(map(len, self.vocabulary))
        self.pattern = regex.compile(encoding._pat_str)

    def count(self, text: str) -> int:
        tokens = 0
        for piece in self.pattern.findall(text):
            data = piece.encode("utf-8", errors="surrogatepass")
            i = 0
            while i < len(data):
                j = min(len(data), i + self.longest)
                while j > i + 1 and data[i:j] not in self.vocabulary:
                    j -= 1
                tokens += 1
                i = j
        return tokens


#: Every how many-th distinct string the greedy table counts alone (time).
GREEDY_STRING_STEP = 7


def greedy_table(
    rows: list[tuple[Catalog, str, Counted]],
    catalogs: Sequence[Catalog],
    backends: dict[str, Estimator],
) -> Iterator[str]:
    yield "### What a vocabulary would buy: greedy longest match / real count (--greedy)"
    yield ""
    yield (
        "Whole catalogs, and every "
        f"{GREEDY_STRING_STEP}th distinct string alone (shares under 0.98 and over 1.25). "
        "*top*: only the tokens of rank below it, and every byte."
    )
    yield ""
    yield "| tokenizer | top | catalogs | lowest | median | highest | strings | under | over |"
    yield "|---|---:|---:|---|---:|---|---:|---:|---:|"
    texts = {c.name: c.text for c in catalogs}
    strings = [s for c in catalogs for s in dict.fromkeys(c.strings)][::GREEDY_STRING_STEP]
    for name in ("o200k", "cl100k"):
        real_alone = [backends[name].estimate(s) for s in strings]
        for top in (None, 100_000):
            counter = GreedyCounter(backends[name], top)
            ratios = sorted(
                (counter.count(texts[cat.name]) / c.real[name], cat.name) for cat, _, c in rows
            )
            (lo, lo_name), (hi, hi_name) = ratios[0], ratios[-1]
            median = ratios[len(ratios) // 2][0]
            alone = [counter.count(s) / r for s, r in zip(strings, real_alone, strict=True) if r]
            under = sum(r < WINDOW[0] for r in alone) / len(alone)
            over = sum(r > WINDOW[1] for r in alone) / len(alone)
            label = "all" if top is None else f"{top:,}"
            yield (
                f"| {name} | {label} | {len(ratios)} | {lo_name} {lo:.3f} | {median:.3f} | "
                f"{hi_name} {hi:.3f} | {len(alone):,} | {under:.1%} | {over:.1%} |"
            )


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def _progress(done: int, total: int, started: float) -> None:
    print(f"  {done}/{total} catalogs, {time.monotonic() - started:.0f} s", file=sys.stderr)


def measure(
    catalogs: Iterable[Catalog], backends: dict[str, Estimator], *, vocabulary: bool = True
) -> tuple[list[tuple[Catalog, str, Counted]], list[Counted], dict[str, Any]]:
    estimators = {f: without_framing(f, vocabulary=vocabulary) for f in FAMILIES}
    rows: list[tuple[Catalog, str, Counted]] = []
    strings: list[Counted] = []
    dump: dict[str, Any] = {}
    todo = list(catalogs)
    started = time.monotonic()
    for k, cat in enumerate(todo, 1):
        whole = count(cat.text, estimators, backends)
        alone = [count(s, estimators, backends) for s in dict.fromkeys(cat.strings)]
        strings.extend(alone)
        script = script_of(cat.text)
        if whole.chars >= MIN_CATALOG_CHARS:
            rows.append((cat, script, whole))
        dump[cat.name] = {
            "script": script,
            "whole": dataclasses.asdict(whole),
            "strings": [dataclasses.asdict(c) for c in alone],
        }
        if k % 20 == 0:
            _progress(k, len(todo), started)
    return rows, strings, dump


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few languages only")
    parser.add_argument("--json", help="write every catalog's and string's counts here")
    parser.add_argument("--corpus", action="append", default=[], help="a wheel to read")
    parser.add_argument(
        "--greedy", action="store_true", help="also count by the vocabulary (a few minutes)"
    )
    parser.add_argument(
        "--profiles",
        action="store_true",
        help="the profiles alone, not checked by the vocabularies (what counts without them)",
    )
    args = parser.parse_args(argv)
    corpora = find_corpora(args.corpus)
    missing = [p for _, p in corpora if not p.is_file()]
    if not corpora or missing:
        where = ", ".join(map(str, missing)) or str(CORPUS_DIR)
        print(f"languages_report: no corpus wheel at {where} (make setup downloads them)")
        return 2
    catalogs = [cat for source, path in corpora for cat in read_wheel(path, source)]
    if args.quick:
        catalogs = [c for c in catalogs if c.language in ("en", "sw", "ru", "ja", "ka")]
    started = time.monotonic()
    backends = load_backends()
    rows, strings, dump = measure(catalogs, backends, vocabulary=not args.profiles)
    seconds = time.monotonic() - started
    how = "the profiles alone (--profiles)" if args.profiles else "the defaults: " + checks()
    sources = ", ".join(f"{src} ({path.name})" for src, path in corpora)
    print("## Real text of many languages, unseen by any fit (languages_report.py)")
    print()
    print(
        f"{len(catalogs)} catalogs from {sources}: {sum(len(c.strings) for c in catalogs):,} "
        f"translated strings, {sum(c.chars for _, _, c in rows):,} characters in the "
        f"{len(rows)} catalogs of at least {MIN_CATALOG_CHARS:,}. Estimate without framing "
        f"/ real count; conservative / the largest of the five. Estimates: {how}. Python "
        f"{sys.version.split()[0]}, {seconds:.0f} s."
    )
    print()
    tables = [catalog_tables(rows), spread_table(rows), string_table(strings)]
    if args.greedy:
        tables.append(greedy_table(rows, catalogs, backends))
    for table in tables:
        for line in table:
            print(line)
        print()
    if args.json:
        Path(args.json).write_text(json.dumps(dump))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
