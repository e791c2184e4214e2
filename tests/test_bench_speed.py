"""The benchmarks' wording of a speed ratio: a slower windowfit is "Nx slower"."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _speed import compared


@pytest.mark.parametrize(
    ("theirs", "ours", "digits", "expected"),
    [
        (18.7, 56.7, 1, "3.0x slower"),  # was printed as "0.3x faster"
        (11.4, 29.6, 1, "2.6x slower"),
        (56.7, 18.7, 1, "3.0x faster"),
        (11.4, 0.05, 0, "228x faster"),
        (10.0, 10.01, 1, "as fast"),
        (0.0, 1.0, 1, "-"),
    ],
)
def test_speed_ratios_say_slower_when_slower(
    theirs: float, ours: float, digits: int, expected: str
) -> None:
    assert compared(theirs, ours, digits) == expected
