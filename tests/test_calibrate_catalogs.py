"""benchmarks/calibrate.py's catalog step: the rates of scripts no shared text holds,
lowered to what counts their real text (translation catalogs) a set margin high.

Pure functions over made-up rows, so each rule is checked by itself: a class is lowered
to the least that keeps its own catalogs at the floor and never raised; a catalog belongs
to the class it holds most of, when that is a large enough share of it; a class shared
by many scripts is never lowered; a catalog another class's lowering put under the floor
raises its own class back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import calibrate
from calibrate import TextRow, catalog_class_level, catalog_owners, linear


def _row(name: str, real: int, chars: int, **counts: int) -> TextRow:
    return TextRow(name, "catalog", "x" * chars, real={"t": real}, counts=dict(counts))


BASE = {"lower": 0.1, "hebrew": 2.0, "armenian": 2.0, "georgian": 3.0, "other_scripts": 3.0}


@pytest.mark.parametrize("floor", [1.0, 1.15, 1.5])
def test_a_class_is_lowered_to_what_counts_its_catalog_at_the_floor(floor: float) -> None:
    he = _row("he", real=1_000, chars=3_000, lower=1_000, hebrew=2_000)
    out = catalog_class_level(BASE, [he], "t", floor)
    assert linear(out, he.counts) == pytest.approx(floor * 1_000)
    assert out["hebrew"] == pytest.approx((floor * 1_000 - 100) / 2_000)
    assert {k: v for k, v in out.items() if k != "hebrew"} == {
        k: v for k, v in BASE.items() if k != "hebrew"
    }


def test_a_class_is_never_raised() -> None:
    he = _row("he", real=10_000, chars=3_000, lower=1_000, hebrew=2_000)  # counted low now
    assert catalog_class_level(BASE, [he], "t", 1.15) == BASE


def test_every_own_catalog_stays_at_the_floor() -> None:
    rows = [
        _row("he-a", real=1_000, chars=3_000, hebrew=2_000),
        _row("he-b", real=1_400, chars=3_000, hebrew=2_000),
    ]
    out = catalog_class_level(BASE, rows, "t", 1.15)
    assert min(linear(out, r.counts) / r.real["t"] for r in rows) == pytest.approx(1.15)


@pytest.mark.parametrize(
    ("counts", "chars", "owner"),
    [
        ({"hebrew": 2_000, "lower": 500}, 3_000, "hebrew"),
        ({"hebrew": 100, "armenian": 1_500}, 3_000, "armenian"),  # the one it holds most of
        ({"hebrew": 100, "lower": 5_000}, 5_100, None),  # under 5% of the catalog
        ({"other_scripts": 3_000}, 3_000, None),  # shared by many scripts: never lowered
    ],
)
def test_a_catalog_belongs_to_the_class_it_holds_most_of(
    counts: dict[str, int], chars: int, owner: str | None
) -> None:
    row = _row("c", real=1_000, chars=chars, **counts)
    assert catalog_owners([row]).get("c") == owner


def test_a_class_shared_by_many_scripts_keeps_its_rate() -> None:
    km = _row("km", real=1_000, chars=3_000, other_scripts=3_000)
    assert "other_scripts" in calibrate.CATALOG_SHARED_CLASSES
    assert catalog_class_level(BASE, [km], "t", 1.15)["other_scripts"] == 3.0


def test_too_few_characters_of_a_class_leave_it_as_it_is() -> None:
    small = _row("he", real=100, chars=200, hebrew=calibrate.CATALOG_MIN_CHARS // 10)
    assert catalog_class_level(BASE, [small], "t", 1.15) == BASE


def test_a_catalog_another_lowering_put_under_raises_its_own_class_back() -> None:
    """Armenian's last letters share Hebrew's class: lowering Hebrew by the Hebrew
    catalog takes the Armenian catalog under, and Armenian is raised to make it up."""
    he = _row("he", real=1_000, chars=3_000, hebrew=3_000)
    hy = _row("hy", real=2_000, chars=3_000, armenian=2_000, hebrew=400)
    out = catalog_class_level(BASE, [hy, he], "t", 1.15)
    assert linear(out, he.counts) / 1_000 == pytest.approx(1.15)
    assert linear(out, hy.counts) / 2_000 >= 1.15 - 1e-9
    assert out["armenian"] <= BASE["armenian"]
