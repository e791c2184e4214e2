"""benchmarks/profiles_report.py: its generated texts, windows and real counts.

The report measures how the profiles generalise (issue 10, item 1); these tests check the
instrument, not the ratios (the profiles' own tests own those): the generated texts are
deterministic and made of their block's characters, the windows are what they say, a long
window's count summed from pieces is the tokenizer's count of the whole window, and a
small run goes end to end.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import unicodedata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import profiles_report as report
from real_tokenizers import real_backend
from windowfit.tokens import Estimator
from windowfit.vocabulary import scaled_count

BLOCKS = report.unicode_blocks()
BY_NAME = {block.name: block for block in BLOCKS}
#: The blocks with nothing to write words of: surrogates, private use, format controls.
UNUSABLE = {
    "High Surrogates",
    "High Private Use Surrogates",
    "Low Surrogates",
    "Private Use Area",
    "Egyptian Hieroglyph Format Controls",
    "Shorthand Format Controls",
    "Tags",
    "Supplementary Private Use Area-A",
    "Supplementary Private Use Area-B",
}


def _backends() -> dict[str, Estimator]:
    return {name: real_backend(name) for name in report.BACKENDS}


def test_the_block_list_is_the_unicode_block_list() -> None:
    assert len(BLOCKS) == 320  # Blocks-14.0.0.txt
    assert (BLOCKS[0].first, BLOCKS[0].last, BLOCKS[0].name) == (0, 0x7F, "Basic Latin")
    assert BLOCKS[-1] == report.Block(0x100000, 0x10FFFF, "Supplementary Private Use Area-B")
    for before, after in itertools.pairwise(BLOCKS):
        assert before.last < after.first, (before, after)
    for block in BLOCKS:
        assert block.first % 16 == 0 and block.last % 16 == 15, block
    assert len(BY_NAME) == len(BLOCKS)


@pytest.mark.parametrize("name", [b.name for b in BLOCKS])
def test_a_block_text_is_deterministic_and_made_of_its_block(name: str) -> None:
    block = BY_NAME[name]
    text = report.block_text(block, seed=3, size=1_500)
    if name in UNUSABLE:
        assert text == ""
        return
    assert text == report.block_text(block, seed=3, size=1_500)
    assert text != report.block_text(block, seed=4, size=1_500)
    text.encode("utf-8")  # no lone surrogates
    assert 1_500 <= len(text) < 1_600
    chars = report.block_characters(block)
    own = chars.all()
    allowed = own | report.GLUE | (set(report.LATIN_BASES) if not chars.letters else set())
    assert set(text) <= allowed, sorted(set(text) - allowed)[:5]
    in_block = [c for c in text if block.first <= ord(c) <= block.last]
    assert len(in_block) >= len(text) // 3
    # a deck deals every character before it repeats one: a small block's are all there
    used = set(in_block)
    for group in (chars.letters, chars.marks):
        if group and len(group) * 4 <= len(in_block) and name not in report.PICTOGRAPHIC:
            assert set(group) <= used, (name, sorted(set(group) - used)[:5])
    assert not unicodedata.category(text[0]).startswith("M")  # a mark follows a base


def test_marks_come_after_a_base_and_viramas_between_consonants() -> None:
    text = report.block_text(BY_NAME["Devanagari"], seed=0)
    virama = "\u094d"
    assert text.count(virama) > 20
    for i, char in enumerate(text):
        if unicodedata.category(char).startswith("M"):
            assert text[i - 1] not in " \n", (i, text[i - 5 : i + 5])
    chars = report.block_characters(BY_NAME["Devanagari"])
    conjuncts = sum(text[i + 1] in chars.consonants for i, c in enumerate(text[:-1]) if c == virama)
    assert conjuncts > 20


def test_pictographic_blocks_make_zwj_sequences_with_skin_tones() -> None:
    text = report.block_text(BY_NAME["Emoticons"], seed=0)
    assert text.count(report.ZWJ) > 100
    assert any(tone in text for tone in report.SKIN_TONES)
    for word in text.split():
        assert not word.startswith(report.ZWJ) and not word.rstrip(",.;:!?").endswith(report.ZWJ)


@pytest.mark.parametrize("name", list(report.hard_texts(0, 200)))
def test_the_other_generated_texts_are_deterministic(name: str) -> None:
    text = report.hard_texts(5, 2_000)[name]
    assert text == report.hard_texts(5, 2_000)[name]
    assert text != report.hard_texts(6, 2_000)[name]
    assert 1_900 <= len(text) <= 2_100
    if name.startswith("ascii: "):
        assert text.isascii()
    words = [w.strip(",.;:!?") for w in text.split()]
    if name.startswith("capitalised"):
        assert all(w[0].isupper() and w[1:].islower() for w in words if w.isalpha())
    if name.startswith("upper-case"):
        assert all(w.isupper() for w in words if w.isalpha())
    if name in ("capitalised Cyrillic", "upper-case Cyrillic"):
        assert all("а" <= c.lower() <= "я" for w in words for c in w)


@pytest.mark.parametrize(
    ("text", "start", "stop", "expected"),
    [
        ("hello world again", 0, 13, 11),  # "hello world| ag"
        ("hello world again", 0, 11, 11),  # already at a boundary: the same cut
        ("hello world", 0, 4, None),  # no boundary in the second half
        ("ab, cd", 0, 5, 3),
        ("文字文字。文字文字", 0, 8, 5),  # after the ideographic full stop
    ],
)
def test_word_stop_moves_back_to_the_last_word_boundary(
    text: str, start: int, stop: int, expected: int | None
) -> None:
    assert report.word_stop(text, start, stop) == expected


def test_windows_cover_every_length_from_each_start() -> None:
    text = "\n".join(f"line {i} with some words in it" for i in range(400))
    source = report.Source("lines", "real", text)
    items = report.windows(source, report.LENGTHS, extra_starts=3)
    starts = sorted({w.start for w in items})
    assert starts[0] == 0 and len(starts) == 4
    assert all(text[s - 1] == "\n" for s in starts[1:])
    for window in items:
        assert 0 <= window.start < window.stop <= len(text)
        if window.cut == "char":
            assert window.stop - window.start == window.length
        elif window.cut == "word":
            assert window.stop - window.start < window.length
            assert text[window.stop] in " \n" or not text[window.stop - 1].isalnum()
            assert window.stop - window.start > window.length // 2
    lengths = {w.length for w in items if w.start == 0 and w.cut == "char"}
    assert lengths == {n for n in report.LENGTHS if n <= len(text)}
    assert any(w.cut == "whole" for w in items)


@pytest.mark.parametrize("backend", report.BACKENDS)
def test_a_long_window_counted_from_pieces_is_the_tokenizers_count(backend: str) -> None:
    estimator = real_backend(backend)
    parts = [report.block_text(BY_NAME[n], 1, 1_500) for n in ("Basic Latin", "Cyrillic")]
    parts += list(report.hard_texts(1, 1_500).values())
    text = "\n".join(parts)
    counter = report.SourceCounter(text, estimator, piece_chars=1_000)
    assert len(counter.ends) > 10
    for stop in (1, 999, 1_001, 10_000, len(text) - 1, len(text)):
        assert counter.count(stop) == estimator.estimate(text[:stop]), stop
    for end in counter.ends[:5]:  # at a cut, and one character either side of it
        for stop in (end - 1, end, end + 1):
            assert counter.count(stop) == estimator.estimate(text[:stop]), stop


def test_a_small_run_goes_end_to_end() -> None:
    picked = {"Basic Latin", "Greek Extended", "Thai", "Emoticons"}
    run = report.run(
        size=400,
        lengths=[1, 2, 3, 5, 10, 30, 100, 300],
        extra_starts=1,
        data=None,
        block_filter=lambda b: b.name in picked,
        backends=_backends(),
    )
    assert run.meta["blocks"] == len(picked)
    assert run.meta["hard"] == len(report.hard_texts(0, 10))
    families = {(r.family, r.view) for r in run.results}
    assert families == {(f, v) for f in report.CHECKED_ON for v in ("text", "as used")}
    for result in run.results:
        assert len(result.ratios) == len(run.windows)
        assert all(r.real > 0 and r.estimate >= 0 for r in result.ratios)
    by_view = {(r.family, r.view): r for r in run.results}
    for family in report.CHECKED_ON:  # framing only adds
        text, used = by_view[(family, "text")], by_view[(family, "as used")]
        assert all(u.estimate >= t.estimate for t, u in zip(text.ratios, used.ratios, strict=True))
        # as used (framing included), only the lower bound judges; the text view, both
        assert used.failures() == [r for r in used.ratios if r.value < report.WINDOW[0]]
        assert text.failures() == [
            r for r in text.ratios if not report.WINDOW[0] <= r.value <= report.WINDOW[1]
        ]
    conservative = by_view[("conservative", "text")]
    window = conservative.ratios[0].window
    real = {b: real_backend(b).estimate(window.text) for b in report.BACKENDS}
    # Claude 3+ as windowfit models it: the legacy count x1.137, to the nearest token
    modelled = scaled_count(real["claude-legacy"], report.CLAUDE_SCALE)
    assert conservative.ratios[0].real == max(*real.values(), modelled)
    claude = by_view[("claude", "text")]
    assert claude.checked_on == (report.CLAUDE_MODEL,)
    assert claude.ratios[0].real == modelled
    assert 1.0 <= claude.floor < math.inf  # never under the legacy count itself
    out = report.markdown(run.results, run.meta, worst=3)
    for family in report.CHECKED_ON:
        assert f"| {family} |" in out
    assert "claude against claude-legacy itself" in out
    data = json.loads(json.dumps(report.as_json(run)))
    assert len(data["windows"]) == len(run.windows)
    assert {row["verdict"] for row in data["summary"]} <= {"pass", "FAIL"}


@pytest.mark.parametrize(
    ("legacy", "modelled"), [(0, 0), (1, 1), (2, 2), (3, 3), (4, 5), (7, 8), (100, 114)]
)
def test_claudes_yardstick_is_the_legacy_count_scaled_to_the_nearest_token(
    legacy: int, modelled: int
) -> None:
    assert report.CLAUDE_SCALE == 1.137
    assert report.with_derived({"claude-legacy": legacy})[report.CLAUDE_MODEL] == modelled
    assert report.with_derived({"o200k": 3}) == {"o200k": 3}  # nothing to derive from


def test_the_quick_command_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    _backends()  # skips where a tokenizer is missing
    assert report.main(["--quick", "--no-data", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["meta"]["real"] == 0 and data["meta"]["blocks"] == 5
    assert {row["family"] for row in data["summary"]} == set(report.CHECKED_ON)
    for row in data["windows"]:
        assert row["stop"] - row["start"] <= row["length"]
        assert set(row["real"]) == {*report.BACKENDS, *report.DERIVED}


def test_a_fit_can_pass_its_own_estimator_per_text() -> None:
    from windowfit.profiles import estimator_for

    seed = estimator_for(family="seed")
    asked: set[tuple[str, str, str]] = set()

    def choose(family: str, view: str, source: report.Source) -> Estimator:
        asked.add((family, view, source.name))
        return seed

    run = report.run(
        size=200,
        lengths=[1, 10, 100],
        extra_starts=0,
        block_filter=lambda b: b.name == "Armenian",
        families=["o200k", "conservative"],
        backends=_backends(),
        choose=choose,
    )
    names = {w.source.name for w in run.windows}
    assert asked == {
        (f, v, n) for f in ("o200k", "conservative") for v in ("text", "as used") for n in names
    }
    for result in run.results:
        assert all(r.estimate == seed.estimate(r.window.text) for r in result.ratios)


def test_the_longest_windows_come_from_the_texts_joined() -> None:
    reals = [
        report.Source(name, "real", "\n".join(f"{name} line {i} of words" for i in range(5_000)))
        for name in ("first", "second", "third")
    ]
    generated = [report.Source(n, "hard", t) for n, t in report.hard_texts(0, 1_000).items()]
    real, joined = report.joined_sources(reals, generated, 200_000)
    assert len(real.text) == 200_000 and real.kind == "real"
    first_turn = real.text[:25_000]
    assert first_turn.startswith("first line 0 ") and "\nsecond line 0 " in first_turn
    assert "third line" in real.text[:70_000]
    one_pass = "\n".join(s.text for s in generated)
    assert joined.kind == "joined" and len(joined.text) == 200_000
    assert joined.text.startswith(one_pass + "\n" + one_pass + "\n")  # from the first again
    (short,) = report.joined_sources([], generated, 5_000)
    assert short.text == one_pass[:5_000]
    assert report.joined_sources([], [], 10) == []
