"""benchmarks/mixed_texts_report.py: its mixes are what it says, and a small run goes end
to end. The instrument, not the ratios (tests/test_vocabulary.py owns those)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import mixed_texts_report as report
from profiles_report import Source
from windowfit.profiles import estimator_for

POOL = [
    Source("english", "real", "The quick brown fox jumps over the lazy dog. " * 3000),
    Source("digits", "hard", " ".join(str(n * 7919 % 100_003) for n in range(20_000))),
    Source("short", "catalog", "Nom d'utilisateur\nMot de passe\n" * 20),
]


@pytest.mark.parametrize("seed", range(20))
def test_a_mix_is_its_parts_joined(seed: int) -> None:
    text, parts = report.draw(random.Random(seed), POOL)
    low, high = report.PARTS
    assert low <= len(parts) <= high
    by_name = {s.name: s.text for s in POOL}
    pieces = [by_name[p.source][p.start : p.start + p.chars] for p in parts]
    assert "\n".join(pieces) == text
    for part in parts:
        assert 0 < part.chars <= report.PART_CHARS[1]


def test_the_check_before_is_one_ratio_for_the_whole_text() -> None:
    """The side-by-side column: on one kind of text the two answers agree closely; on a
    short text both are the exact count."""
    estimator = estimator_for(family="conservative")
    short = "Nom d'utilisateur"
    assert report.one_ratio(estimator, short) == estimator.estimate(short)
    text = POOL[0].text
    assert 0.95 < report.one_ratio(estimator, text) / estimator.estimate(text) < 1.05


@pytest.mark.slow
def test_a_small_run_goes_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mixes.json"
    assert report.main(["--mixes", "2", "--no-data", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| conservative |" in printed and "Lowest conservative:" in printed
    figures = json.loads(out.read_text())
    assert len(figures["mixes"]) == 2
    for mix in figures["mixes"]:
        assert mix["ratio"]["conservative"] > 0 and mix["parts"]


def test_no_mixes_is_refused() -> None:
    with pytest.raises(SystemExit):
        report.main(["--mixes", "0"])


def test_padded_texts_are_a_texts_lines_and_runs_of_blanks() -> None:
    lined = Source("lines", "catalog", "\n".join(f"line number {n}" for n in range(100)))
    padded = report.padded_sources(random.Random(1), [lined, POOL[1]])
    assert len(padded) == 2 * len(report.PADDINGS)
    originals = set(lined.text.splitlines())
    for source in padded:
        assert source.kind == "padded" and len(source.text) >= report.GENERATED_CHARS - 1
        for line in source.text.split("\n"):
            assert line in originals or not line.strip(), line[:40]
    assert report.padded_sources(random.Random(1), [POOL[1]]) == []  # no text of lines
