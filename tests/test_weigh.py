"""The C speedup of the estimate (windowfit._weigh) gives exactly the Python path's counts.

Every family's estimate and part estimate is compared, on any text (surrogates, astral
characters, runs across the 64-character blocks the C code works in), with the two Python
paths it replaces: the ASCII closure and the general one.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowfit import profiles
from windowfit._speedup import DISABLE_VARIABLE, Weigher
from windowfit.profiles import ProfileEstimator, estimator_for

FAMILIES = [family for family in profiles.FAMILIES if family != "seed"]

needs_speedup = pytest.mark.skipif(
    Weigher is None, reason="windowfit._weigh is not built (no C compiler) or turned off"
)


def _estimators() -> list[ProfileEstimator]:
    found = []
    for family in FAMILIES:
        estimator = estimator_for(vocabulary=False, family=family)
        assert isinstance(estimator, ProfileEstimator)
        found.append(estimator)
    return found


ESTIMATORS = _estimators()


def _paths(estimator: ProfileEstimator, framing: float) -> list[Callable[[str], int]]:
    """The estimate by the speedup, by the Python closure and by the general path."""
    return [
        estimator._make_estimate(framing),
        estimator._make_estimate(framing, speedup=False),
        lambda text: estimator._estimate_any(text, framing),
    ]


def _agree(text: str) -> None:
    for estimator in ESTIMATORS:
        for framing in (0.0, estimator.framing):
            counts = [count(text) for count in _paths(estimator, framing)]
            assert len(set(counts)) == 1, (estimator.family, framing, counts, text[:80])
        if Weigher is not None:  # pure ASCII: the AVX2 pass and the table look-ups
            weigher = Weigher(**estimator.weigher_arguments(0.0))
            assert weigher.units(text) == weigher.units(text, simd=False), (
                estimator.family,
                text[:80],
            )


ANY_CHARACTER = st.one_of(
    st.characters(codec=None, exclude_categories=()),  # surrogates and astral ones too
    st.sampled_from("a!. \nZ9"),
)
#: Texts made of the run classes, to cross runs over the 64-character blocks.
RUNNY = st.lists(
    st.tuples(st.sampled_from(["a", "q", "!", "=", " ", "\u0436", "é"]), st.integers(1, 90)),
    max_size=12,
).map(lambda parts: "".join(char * count for char, count in parts))


@needs_speedup
@given(st.text(ANY_CHARACTER, max_size=300))
def test_the_speedup_counts_any_text_as_python_does(text: str) -> None:
    _agree(text)


@needs_speedup
@given(RUNNY)
def test_the_speedup_counts_runs_across_blocks_as_python_does(text: str) -> None:
    _agree(text)


#: Pure ASCII, every character of it (controls and DEL too) and the set edges most.
ASCII_TEXT = st.text(
    st.one_of(
        st.characters(max_codepoint=0x7F), st.sampled_from("`az{@AZ[/09:\t\n\x0b\r\x0e \x1f")
    ),
    max_size=400,
)
ASCII_RUNNY = st.lists(
    st.tuples(
        st.sampled_from(["a", "z", "Q", "!", "=", " ", "\n", "7", "ab", "a!"]), st.integers(1, 90)
    ),
    max_size=12,
).map(lambda parts: "".join(char * count for char, count in parts))


@needs_speedup
@given(ASCII_TEXT)
def test_the_ascii_pass_counts_any_ascii_as_python_does(text: str) -> None:
    _agree(text)


@needs_speedup
@given(ASCII_RUNNY)
def test_the_ascii_pass_counts_runs_across_blocks_as_python_does(text: str) -> None:
    _agree(text)


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return any(line.startswith("flags") and " avx2" in line for line in info)
    except OSError:
        return False


@needs_speedup
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: e.family)
def test_every_family_sums_ascii_by_the_avx2_pass_where_the_cpu_has_it(
    estimator: ProfileEstimator,
) -> None:
    """The tables of every family allow the pass; built with it, on a CPU with AVX2, it is
    the one taken (else the tests above would only ever compare the look-ups with
    themselves, and a broken processor check would go unseen)."""
    assert Weigher is not None
    from windowfit import _weigh

    weigher = Weigher(**estimator.weigher_arguments(0.0))
    if not _weigh.AVX2_BUILT:
        pytest.skip("built without the AVX2 pass (not x86, or not GCC 5+ / Clang 6+)")
    if not _has_avx2():
        pytest.skip("this CPU has no AVX2: pure ASCII is summed by the look-ups")
    assert weigher.simd


@needs_speedup
@pytest.mark.parametrize(
    "change",
    [
        # an extra a character, not the same for every letter
        {"char_extras": b"".join((cp % 7).to_bytes(2, "little") for cp in range(0x10000))},
        # pair weights (with the class extras) over a byte
        {"weights": bytes([255]) * 256, "class_extras": (1).to_bytes(4, "little") * 256},
    ],
    ids=["char extras", "weights over a byte"],
)
def test_tables_the_ascii_pass_cannot_sum_take_the_look_ups(change: dict[str, object]) -> None:
    assert Weigher is not None
    arguments = {**ESTIMATORS[0].weigher_arguments(0.0), **change}
    weigher = Weigher(**arguments)  # type: ignore[arg-type]
    assert not weigher.simd
    text = "Hello, World! 123\n\tabc " * 30
    assert weigher.units(text) == weigher.units(text, simd=False)


@needs_speedup
@pytest.mark.parametrize("size", [0, 1, 3, 4, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000])
@pytest.mark.parametrize(
    "char", ["a", "!", "x!", "ab ", "\n", "7 ", "\u0436", "\U0001f600", "\ud800"]
)
def test_the_speedup_counts_runs_at_block_edges(size: int, char: str) -> None:
    _agree(char * size)
    _agree("Z" + char * size)
    _agree(char * size + "Z" + char * size)


def test_the_class_table_is_each_code_point_alone() -> None:
    table = profiles.bmp_classes()
    assert len(table) == 0x10000
    text = "".join(map(chr, range(0x10000)))
    assert profiles._classes(text) == table
    wrong = [cp for cp in range(0x10000) if profiles._classes(chr(cp)) != table[cp : cp + 1]]
    assert wrong == []


@pytest.mark.parametrize("code_point", [0x10000, 0x1F600, 0x3FFFF, 0x40000, 0xE0001, 0x10FFFF])
def test_astral_classes_are_the_lead_bytes(code_point: int) -> None:
    lead = chr(code_point).encode("utf-8")[0]
    expected = profiles._CLASS_TABLE[0xF0 if lead == 0xF0 else 0xF1]
    assert profiles._classes(chr(code_point)) == bytes([expected])


@needs_speedup
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: e.family)
def test_every_family_counts_in_the_speedup(estimator: ProfileEstimator) -> None:
    assert estimator.accelerated
    assert estimator.estimate("") == 0
    assert estimator.estimate_part("") == 0


@needs_speedup
@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"classes": b"x"}, ValueError),
        ({"weights": b""}, ValueError),
        ({"lower_run": 3}, ValueError),
        ({"framing": -1.0}, ValueError),
    ],
)
def test_a_weigher_refuses_bad_tables(bad: dict[str, object], error: type[Exception]) -> None:
    assert Weigher is not None
    good = ESTIMATORS[0].weigher_arguments(0.0)
    with pytest.raises(error):
        Weigher(**{**good, **bad})  # type: ignore[arg-type]


@needs_speedup
def test_a_weigher_counts_only_text() -> None:
    weigh = ESTIMATORS[0].estimate
    with pytest.raises(TypeError, match="must be a str"):
        weigh(b"bytes")  # type: ignore[arg-type]


def test_the_speedup_is_built_where_a_compiler_is() -> None:
    """`make setup` builds it (pip's editable install runs setup.py): a missing build step
    would otherwise leave every user of this checkout on the slow path unnoticed."""
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        pytest.skip(f"{DISABLE_VARIABLE} is set")
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: windowfit counts in Python")
    assert Weigher is not None


def test_the_variable_turns_the_speedup_off() -> None:
    code = (
        "from windowfit.profiles import estimator_for;"
        "e = estimator_for(vocabulary=False, family='conservative');"
        "print(e.accelerated, e.estimate('Привет, мир! ' * 50 + 'x' * 40))"
    )
    off = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, DISABLE_VARIABLE: "1"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert off[0] == "False"
    estimator = estimator_for(vocabulary=False, family="conservative")
    assert int(off[1]) == estimator._estimate_any("Привет, мир! " * 50 + "x" * 40)


def _weigher_args(estimator: ProfileEstimator, char_extras: bytes | None) -> dict[str, object]:
    return {**estimator.weigher_arguments(0.0), "char_extras": char_extras}


def _extra_of(cp: int) -> int:
    return (cp * 7919) % 300 if cp % 3 else 0


SYNTHETIC_EXTRAS = b"".join(_extra_of(cp).to_bytes(2, "little") for cp in range(0x10000))


@needs_speedup
@given(st.text(ANY_CHARACTER, max_size=300))
def test_char_extras_add_their_sum_on_every_path(text: str) -> None:
    """Every character's extra is added once, below U+0100 (folded into the weights) as
    above it; astral characters have none."""
    assert Weigher is not None
    estimator = ESTIMATORS[0]
    without = Weigher(**_weigher_args(estimator, None))  # type: ignore[arg-type]
    with_extras = Weigher(**_weigher_args(estimator, SYNTHETIC_EXTRAS))  # type: ignore[arg-type]
    expected = sum(_extra_of(ord(char)) for char in text if ord(char) < 0x10000)
    assert with_extras.units(text) == without.units(text) + expected


@needs_speedup
@given(
    text=st.text(ANY_CHARACTER, max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=8),
)
def test_estimates_between_cuts_are_the_slices_estimates(text: str, cuts: list[int]) -> None:
    """windowfit.vocabulary._strata's stretches, in one call: each as its slice alone."""
    cuts = sorted(min(cut, len(text)) for cut in cuts)
    for estimator in ESTIMATORS:
        weigher = estimator.estimate
        assert isinstance(weigher, Weigher)
        expected = [weigher(text[a:b]) for a, b in itertools.pairwise(cuts)]
        assert weigher.estimates(text, cuts) == expected, (estimator.family, cuts)


@needs_speedup
@pytest.mark.parametrize(
    ("text", "cuts", "message"),
    [
        ("abc", [0, 5], "cut 1 is 5"),
        ("abc", [2, 1], "cut 1 is 1"),
        ("abc", [-1], "cut 0 is -1"),
        ("abc", 5, "sequence of cuts"),
        (b"abc", [0], "must be a str"),
    ],
)
def test_estimates_refuse_cuts_that_are_not_in_the_text(
    text: object, cuts: object, message: str
) -> None:
    weigher = ESTIMATORS[0].estimate
    with pytest.raises((ValueError, TypeError), match=message):
        weigher.estimates(text, cuts)  # type: ignore[attr-defined]


@needs_speedup
def test_estimates_read_cuts_a_conversion_changes_safely() -> None:
    """An __index__ that empties the list of cuts it is in: the C code reads a copy."""
    cuts: list[object] = []

    class Emptying:
        def __index__(self) -> int:
            cuts.clear()
            return 2

    cuts.extend([0, Emptying(), 4])
    weigher = ESTIMATORS[0].estimate
    assert weigher.estimates("abcdef", cuts) == [weigher("ab"), weigher("cd")]  # type: ignore[attr-defined]


#: ASCII made of runs that a profile weighs unlike (letters, digits, blanks, punctuation),
#: for windows that are and are not like their stretches.
ASCII_PARTS = st.lists(
    st.tuples(
        st.sampled_from(["hello world ", "7", " ", "\n", "=-", "Zebra", "\t"]), st.integers(1, 400)
    ),
    min_size=1,
    max_size=12,
).map(lambda parts: "".join(part * count for part, count in parts))


def _plain(weigher: Callable[[str], int]) -> Callable[[str], int]:
    """The weigher as a plain callable, without its one-call forms (Python's path)."""
    return lambda part: weigher(part)


@needs_speedup
@given(text=ASCII_PARTS, finer=st.sampled_from([1, 2]))
def test_the_strata_of_ascii_are_pythons(text: str, finer: int) -> None:
    """The C weigher's strata() is windowfit.vocabulary._strata for ASCII, number for
    number (the same arithmetic in the same order)."""
    from windowfit import vocabulary

    for estimator in ESTIMATORS:
        weigher = estimator.estimate
        assert isinstance(weigher, Weigher)
        in_python = vocabulary._strata(text, _plain(weigher), finer)
        assert vocabulary._strata(text, weigher, finer) == in_python, estimator.family


@needs_speedup
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("caf\u00e9" * 2000, 16, 256, 1.5), "ASCII only"),
        (("a" * 5000, 1, 256, 1.5), "at least 2 windows"),
        (("a" * 5000, 16, 0, 1.5), "at least 2 windows"),
    ],
)
def test_strata_refuse_what_they_cannot_window(arguments: tuple[object, ...], message: str) -> None:
    weigher = ESTIMATORS[0].estimate
    with pytest.raises(ValueError, match=message):
        weigher.strata(*arguments)  # type: ignore[attr-defined]
