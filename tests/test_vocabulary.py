"""The vocabulary counter (windowfit._bpe) against tiktoken, and the checked estimate.

The counter claims tiktoken's numbers; these tests hold it to that on arbitrary text and
on text made of the characters each pre-tokenizer pattern treats specially, for o200k,
cl100k and Tekken, and check its pieces against the pattern run by the ``regex`` module.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from windowfit import vocabulary as voc
from windowfit.errors import SettingsError, TokenizerError
from windowfit.profiles import ProfileEstimator, estimator_for

from conftest import counts_in_threads, windows_of

pytest.importorskip("tiktoken")
regex = pytest.importorskip("regex")

from windowfit.tokenizers import TekkenEstimator, TiktokenEstimator  # noqa: E402

if voc.BPE is None:
    pytest.skip("windowfit._bpe is not built", allow_module_level=True)

FAMILIES = ("o200k", "cl100k", "tekken")


def _real(family: str) -> TiktokenEstimator | TekkenEstimator:
    if family == "tekken":
        return TekkenEstimator()
    return TiktokenEstimator(f"{family}_base")


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request: pytest.FixtureRequest) -> tuple[voc.VocabularyCounter, object]:
    family = request.param
    try:
        real = _real(family)
        counter = voc.VocabularyCounter(family)
    except TokenizerError as exc:
        pytest.skip(str(exc))
    return counter, real


# Characters the patterns treat apart: contractions (and the long s that folds to s),
# each letter category, marks, numbers of three kinds, every kind of space and newline,
# slashes and punctuation, an emoji sequence, CJK.
TRICKY = (
    "'sSſtTdDmMlLvVrReE"
    "aZ\u01c5\u02b0\u05d0\u0915\u093f\u0301\u20dd"
    "7\u0663\u2167\u00b2"
    " \t\n\r\x0b\x0c\x85\xa0\u1680\u2003\u2028\u3000\u001c"
    '/.,!?-_()[]{}"#'
    "\U0001f468\u200d\U0001f469\ufe0f"
    "\u4e2d\u6587\u3042\uac00"
)

tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=60)
#: Characters this Python's Unicode knows: the regex module's tables may be newer.
known_text = st.text(st.characters(exclude_categories=["Cn", "Cs"]), max_size=80)
#: Words as English and code write them, for the scanners' ASCII fast path: runs of either
#: case, every ASCII character as a prefix or an end, apostrophes (contractions), and
#: letters past 0x7F that go on with a word (or are a prefix) where the fast path stops.
WORD_PARTS = (
    *(chr(c) for c in range(128)),
    "the", "The", "THE", "tHe", "HTTPServer", "fooBar", "x", "I", "don't", "'s", "'LL",
    "caf\u00e9", "\u00c9cole", "na\u00efve", "Stra\u00dfe", "\u02b0", "\u0301", "\u00b5",
)  # fmt: skip
word_text = st.lists(st.sampled_from(WORD_PARTS), max_size=50).map("".join)
#: Long pieces, merged by the scan (up to 64 bytes), by blocks (up to 1,024) or the heap
#: (past that): runs of digits, punctuation, a few letters or hex, as numbers, separator
#: lines and hashes are.
LONG_PIECE_ALPHABETS = ("0123456789", "=-*#/.", "ab", "0123456789abcdef", "xyzXYZ", "é€")
long_piece_text = st.sampled_from(LONG_PIECE_ALPHABETS).flatmap(
    lambda alphabet: st.text(alphabet, min_size=1, max_size=1200)
)


def _exact(counter: voc.VocabularyCounter, real: object, text: str) -> None:
    expected = len(real.encode(text))  # type: ignore[attr-defined]
    assert counter.estimate(text) == expected, repr(text)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=tricky_text)
def test_counts_are_tiktokens_on_the_characters_patterns_treat_apart(pair, text: str) -> None:
    _exact(*pair, text)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=known_text)
def test_counts_are_tiktokens_on_any_text(pair, text: str) -> None:
    _exact(*pair, text)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=word_text)
def test_counts_are_tiktokens_on_words_as_english_and_code_write_them(pair, text: str) -> None:
    _exact(*pair, text)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=long_piece_text)
def test_counts_are_tiktokens_on_long_pieces(pair, text: str) -> None:
    _exact(*pair, text)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.one_of(tricky_text, known_text, word_text))
def test_pieces_are_the_patterns(pair, text: str) -> None:
    counter, real = pair
    pattern = regex.compile(real.encoding._pat_str)
    pieces = counter._vocabulary.pieces(text.encode())
    assert pieces == [p.encode() for p in pattern.findall(text)]


@pytest.mark.parametrize(
    "text",
    [
        "x" * 3000,  # one piece merged with the heap
        "ab" * 700 + "c" * 90,
        "Donaudampfschifffahrtsgesellschaftskapitän" * 40,
        "\u4e2d\u6587\u5b57" * 400,
        "0123456789" * 50,
        " " * 500 + "x",
        "\n\n \r\n\t " * 30,
    ],
    ids=["x", "ab", "german", "han", "digits", "spaces", "newlines"],
)
def test_long_pieces_are_exact(pair, text: str) -> None:
    _exact(*pair, text)


#: Every piece of two bytes (counted from a table, not by merging): two ASCII characters,
#: and one character of two bytes.
TWO_BYTES = [chr(a) + chr(b) for a in range(128) for b in range(128)] + [
    chr(c) for c in range(0x80, 0x800, 7)
]


def test_every_two_byte_piece_counts_as_tiktoken_counts_it(pair) -> None:
    counter, real = pair
    wrong = [t for t in TWO_BYTES if counter.estimate(t) != len(real.encode(t))]  # type: ignore[attr-defined]
    assert not wrong, wrong[:10]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.one_of(word_text, long_piece_text, known_text))
def test_weighing_windows_is_counting_each_of_them(pair, text: str) -> None:
    counter = pair[0]
    strata = windows_of(text.encode("utf-8", "replace"))
    assert counter.weigh(strata) == voc.weighed_by(counter.count_bytes, strata)


@pytest.mark.parametrize(
    ("strata", "error"),
    [
        ([(b"ab", 1.0)], "window 0 is not"),
        ([(b"ab", 1.0, 1), ("ab", 1.0, 1)], "window 1 is not"),
        ([(b"ab", "heavy", 1)], "must be real number"),
        (5, "sequence of windows"),
    ],
)
def test_weighing_refuses_what_is_not_windows(pair, strata: object, error: str) -> None:
    with pytest.raises(TypeError, match=error):
        pair[0]._vocabulary.weigh(strata)


def _joint() -> tuple[object, list[voc.VocabularyCounter]]:
    """The Joint of every family's vocabulary that is on this machine."""
    counters = [c for c in map(voc.find_vocabulary, voc.VOCABULARY_FAMILIES) if c is not None]
    if not counters:
        pytest.skip("no vocabulary on this machine")
    from windowfit._bpe import Joint

    return Joint(vocabularies=tuple(c._vocabulary for c in counters)), counters


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(word_text, long_piece_text, known_text, tricky_text))
def test_a_joint_counts_as_each_of_its_vocabularies(text: str) -> None:
    """One slot table for five vocabularies (the conservative check's): every count the
    same as each vocabulary's own, of a text and of its windows."""
    joint, counters = _joint()
    data = text.encode("utf-8", "replace")
    assert joint.counts(data) == [c._vocabulary.count(data) for c in counters]  # type: ignore[attr-defined]
    strata = windows_of(data)
    assert joint.weigh(strata) == [c._vocabulary.weigh(strata) for c in counters]  # type: ignore[attr-defined]


def test_a_joint_counts_long_texts_as_each_vocabulary() -> None:
    joint, counters = _joint()
    data = ("Donaudampfschiff 2024, naïve café: x = y*2; " * 200).encode()
    assert len(data) > 4096  # (counted without the GIL, each vocabulary with a cache of its own)
    assert joint.counts(data) == [c._vocabulary.count(data) for c in counters]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"vocabularies": ()}, ValueError, "1 to 8 vocabularies, not 0"),
        ({"vocabularies": ("x",)}, TypeError, "vocabulary 0 is not a Vocabulary"),
        ({"vocabularies": [1]}, TypeError, "must be tuple"),
        ({}, TypeError, "vocabularies"),
    ],
)
def test_a_joint_refuses_what_is_not_vocabularies(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    if voc.BPE is None:
        pytest.skip("windowfit._bpe is not built")
    from windowfit._bpe import Joint

    with pytest.raises(error, match=message):
        Joint(**arguments)  # type: ignore[arg-type]


class _Emptying:
    """A weight whose conversion empties the list of windows it is in (hostile input:
    the C code must read a copy of the list, not the list)."""

    def __init__(self, windows: list[object]) -> None:
        self.windows = windows

    def __float__(self) -> float:
        self.windows.clear()
        return 1.0


def test_weighing_reads_windows_a_conversion_changes_safely(pair) -> None:
    joint, _ = _joint()
    for weigh in (pair[0]._vocabulary.weigh, lambda w: joint.weigh(w)[0]):  # type: ignore[attr-defined]
        windows: list[object] = []
        windows.extend([(b"hello world " * 20, _Emptying(windows), 1)] * 3)
        total, low, high = weigh(windows)
        assert low == high and total > 0


def test_weighing_refuses_a_window_estimated_at_nothing(pair) -> None:
    joint, _ = _joint()
    for weigh in (pair[0]._vocabulary.weigh, joint.weigh):  # type: ignore[attr-defined]
        with pytest.raises(ZeroDivisionError, match="window 0 has an estimate of 0"):
            weigh([(b"hello", 1.0, 0)])


def test_a_joint_refuses_what_is_not_bytes_or_windows() -> None:
    joint, _ = _joint()
    with pytest.raises(TypeError, match="takes UTF-8 bytes"):
        joint.counts("text")  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="window 0 is not"):
        joint.weigh([("text", 1.0, 1)])  # type: ignore[attr-defined]


def test_lone_surrogates_count_as_replacement_characters(pair) -> None:
    counter, real = pair
    assert counter.estimate("a\ud800b") == real.estimate("a\ud800b")


def test_empty_text_is_no_tokens(pair) -> None:
    assert pair[0].estimate("") == 0


def test_threads_count_with_one_vocabulary_at_once(pair) -> None:
    counter, real = pair
    texts = [f"Ciao mondo {i}, perché no? " * (50 + i) for i in range(8)]
    expected = [len(real.encode(t)) for t in texts]
    results = counts_in_threads(counter.estimate, texts)
    assert len(results) == 4
    assert all(r == expected for r in results)


def _many_short_texts(n: int = 600, seed: int = 7) -> list[str]:
    """Short texts of words that rarely repeat (letters of four scripts, digits, marks):
    more distinct pieces than the shared cache of short texts has slots, so that its
    entries are overwritten while other threads read them."""
    rng = random.Random(seed)
    alphabets = ("abcdefghijklmnopqrstuvwxyz", "абвгдежзийклмнопрст", "αβγδεζηθικλμ", "0123456789")
    texts = []
    for _ in range(n):
        words = [
            "".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(2, 9)))
            for _ in range(rng.randint(3, 40))
        ]
        texts.append(rng.choice((" ", ", ", "\n", "_")).join(words))
    return texts


def test_threads_counting_short_texts_share_the_cache_safely(pair) -> None:
    counter, real = pair
    texts = _many_short_texts()
    assert all(len(t.encode()) <= voc.EXACT_BYTES for t in texts)
    expected = [len(real.encode(t)) for t in texts]
    results = counts_in_threads(counter.estimate, texts, rounds=2)
    assert all(r == expected for r in results)


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


def test_unknown_family_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="known: o200k"):
        voc.VocabularyCounter("claude")


def test_missing_file_says_which(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="no such file"):
        voc.VocabularyCounter("o200k", path=tmp_path / "missing.tiktoken")


def test_wrong_file_is_a_tokenizer_error(tmp_path: Path) -> None:
    path = tmp_path / "tiny.tiktoken"
    path.write_bytes(b"YQ== 0\nYg== 1\n")
    with pytest.raises(TokenizerError, match="2 tokens, not 199998"):
        voc.VocabularyCounter("o200k", path=path)


@pytest.mark.parametrize(
    ("ranks", "message"),
    [({b"a": 0, b"b": 2}, "with none missing"), ({b"a": 1, b"b": 1}, "with none missing")],
)
def test_bad_ranks_are_refused(ranks: dict[bytes, int], message: str) -> None:
    with pytest.raises(TokenizerError, match=message):
        voc.ranks_in_order(ranks)


def test_a_token_twice_is_refused() -> None:
    with pytest.raises(TokenizerError, match="also an earlier token"):
        voc.build_vocabulary([b"a", b"b", b"a"], voc.PATTERN_O200K)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"YQ== 0\nYg== 2\n", "line 2: rank 2 where 1 comes next"),
        (b"YQ== 0\n!!!! 1\n", "line 2"),
        (b"YQ== x\n", "line 1"),
        (b"\n\n", "no tokens"),
    ],
)
def test_a_bad_rank_file_says_where(data: bytes, message: str) -> None:
    with pytest.raises(TokenizerError, match=message):
        voc.read_rank_file(data, "f.tiktoken")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"categories": b"\0" * 10}, "categories must hold"),
        ({"categories": b"\x09" * voc.CODE_POINTS}, r"category 9 of U\+0000 is not one of 0-7"),
        ({"pattern": 7}, "pattern must be"),
        ({"offsets": b"\0\0\0\0"}, "at least two"),
        ({"offsets": b"\0\0\0\0\x05\0\0\0"}, "not a token of the blob"),
    ],
)
def test_the_c_type_refuses_bad_tables(arguments: dict[str, object], message: str) -> None:
    assert voc.BPE is not None
    given = {
        "blob": b"ab",
        "offsets": b"\0\0\0\0\x01\0\0\0\x02\0\0\0",
        "categories": voc.unicode_categories(),
        "pattern": 0,
        **arguments,
    }
    with pytest.raises(ValueError, match=message):
        voc.BPE(**given)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "data",
    [b"a\xf0", b"\xf0", b"\x80" * 70_000, b"\xc3", b"\xe4\xb8", b"ab\xff\xfecd", b"\xed\xa0\x80"],
    ids=["cut-4", "lead-only", "continuations", "cut-2", "cut-3", "ff-fe", "surrogate"],
)
def test_bytes_that_are_not_utf8_are_counted_within_them(data: bytes) -> None:
    """Each byte that is not part of a character counts as U+FFFD would: nothing past
    the end is read, and a long run of stray bytes still ends."""
    vocabulary = voc.build_vocabulary([bytes([b]) for b in range(256)], voc.PATTERN_O200K)
    assert b"".join(vocabulary.pieces(data)) == data
    assert vocabulary.count(data) == len(data)  # one token a byte here


def test_count_takes_bytes() -> None:
    vocabulary = voc.build_vocabulary([bytes([b]) for b in range(256)], voc.PATTERN_CL100K)
    with pytest.raises(TypeError, match="UTF-8 bytes"):
        vocabulary.count("text")  # type: ignore[arg-type]
    assert vocabulary.count(b"hello") == 5


def test_categories_follow_unicode() -> None:
    table = voc.unicode_categories()
    expected = {
        "A": voc.UPPER, "\u01c5": voc.UPPER, "a": voc.LOWER, "\u02b0": voc.LETTER,
        "\u4e2d": voc.LETTER, "\u0301": voc.MARK, "\u00b2": voc.NUMBER, "\u2167": voc.NUMBER,
        " ": voc.SPACE, "\x85": voc.SPACE, "\u3000": voc.SPACE, "\n": voc.NEWLINE,
        "\r": voc.NEWLINE, "\x1c": voc.OTHER, "!": voc.OTHER, "\U000e0101": voc.MARK,
        "\U00020000": voc.LETTER, "\U00100000": voc.OTHER,
    }  # fmt: skip
    assert {c: table[ord(c)] for c in expected} == expected


# ---------------------------------------------------------------------------------------
# The checked estimate
# ---------------------------------------------------------------------------------------


def test_models_of_these_families_get_the_checked_estimate() -> None:
    for model, family in (
        ("gpt-4o", "o200k"),
        ("gpt-4", "cl100k"),
        ("mistral-large-latest", "tekken"),
    ):
        estimator = estimator_for(model=model)
        if voc.find_vocabulary(family) is None:
            pytest.skip(f"no {family} vocabulary here")
        assert isinstance(estimator, voc.CheckedEstimator), model
        assert estimator.family == family
        assert isinstance(estimator_for(model=model, vocabulary=False), ProfileEstimator)


def test_short_texts_are_exact(pair) -> None:
    counter, real = pair
    checked = estimator_for(family=counter.family)
    for text in ("a", "Ciao", "Perché no?", "Gaur goizean etxera joan naiz. " * 30):
        assert checked.estimate(text) == real.estimate(text)


def test_long_text_is_never_checked_below_what_its_windows_say(pair) -> None:
    """A long text of a language the profiles count low (Indonesian words the vocabulary
    does not hold whole) is raised to at least its real count."""
    counter, real = pair
    checked = estimator_for(family=counter.family)
    profile = estimator_for(family=counter.family, vocabulary=False)
    sentence = "Pengaturan ini menentukan bagaimana pengguna mengelola berkas-berkasnya. "
    text = sentence * 400
    assert checked.estimate(text) >= real.estimate(text) > profile.estimate(text)


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.tuples(st.sampled_from(["a b ", "12", "हिं", "日本", "😀", "\n"]), st.integers(1, 3000)),
        min_size=1,
        max_size=6,
    )
)
def test_the_windows_stretches_cover_the_text_once(parts: list[tuple[str, int]]) -> None:
    """Every character of a long text is in exactly one window's stretch: with the length
    as the profile, each weight is the stretch's length over the window's, so the weights
    times the windows' lengths add up to the text's."""
    text = "".join(piece * count for piece, count in parts)
    if len(text) < voc.WINDOW_BYTES * 2:
        return
    for finer in (1, voc.UNEVEN_FINER):
        strata = voc._strata(text, len, finer)
        assert len(strata) >= voc.WINDOWS * finer
        assert all(weight >= 0 for _, weight, _ in strata)
        covered = sum(weight * len(data.decode()) for data, weight, _ in strata)
        assert covered == pytest.approx(len(text))


def _uneven_profile(text: str) -> int:
    """A profile that adds up over a text's parts and rates them very differently."""
    return 3 * text.count(" ") + sum(1 for c in text if not c.isascii())


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from(["a b ", "12", "हिं", "日本", " " * 9, "\t\n"]), st.integers(1, 3000)
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_vocabulary_that_counts_like_the_profile_gets_the_profiles_estimate(
    parts: list[tuple[str, int]],
) -> None:
    """Whichever stretches take their own window's ratio and whichever the pooled one, the
    weights put back the profile's estimate of the whole text when the windows are counted
    as the profile estimates them: nothing is counted twice or left out."""
    text = "".join(piece * count for piece, count in parts)
    if len(text) < voc.WINDOW_BYTES * 2:
        return
    for finer in (1, voc.UNEVEN_FINER):
        strata = voc._strata(text, _uneven_profile, finer)
        answer = sum(weight * estimate for _, weight, estimate in strata)
        assert answer == pytest.approx(_uneven_profile(text), abs=1e-6)


def _assert_long_text_within_target(family: str, text: str) -> None:
    """The family's estimate of a long text (the windows' path, not the exact one) is at
    least the real count of every vocabulary it is checked by, and at most 1.25 times it."""
    estimator = estimator_for(family=family)
    parts = estimator.parts if isinstance(estimator, voc.LargestEstimator) else (estimator,)
    exact = [p for p in parts if isinstance(p, voc.CheckedEstimator)]
    if not exact:
        pytest.skip(f"no vocabulary checks {family} here")
    assert len(text.encode()) > voc.EXACT_BYTES
    real = max(voc.scaled_count(p.vocabulary.estimate(text), p.scale) for p in exact)
    assert real <= estimator.estimate(text) <= 1.25 * real


def _mixed_texts() -> dict[str, str]:
    """Long texts of unlike parts, which the profiles misjudge by different factors."""
    rng = random.Random(7)

    def words(first: int, last: int, count: int) -> str:
        return " ".join(
            "".join(chr(rng.randint(first, last)) for _ in range(rng.randint(2, 6)))
            for _ in range(count)
        )

    hindi = "यह पुस्तक उन लोगों के लिए लिखी गई है जो अपने घर के कामकाज को सरल बनाना चाहते हैं। "
    indonesian = "Pengaturan ini menentukan bagaimana pengguna mengelola berkas-berkasnya. "
    digits = "".join(rng.choice("0123456789") for _ in range(3000))
    return {
        "digits then Hindi": digits + "\n" + hindi * 60,
        "Hindi then digits": hindi * 200 + "\n" + digits,
        "Tai Tham then Indonesian": words(0x1A20, 0x1A54, 600) + "\n" + indonesian * 160,
        "code then Chinese": "def f(x):\n    return x + 1\n" * 300
        + "这是一个用于测试的中文句子，包含常见的词语。" * 300,
    }


@pytest.mark.parametrize(
    "family", ["o200k", "cl100k", "tekken", "deepseek", "claude", "conservative"]
)
@pytest.mark.parametrize("name", list(_mixed_texts()))
def test_a_long_text_of_unlike_parts_is_not_under_counted(family: str, name: str) -> None:
    """Each window corrects the stretch of text it stands for: one ratio for the whole
    text put 3,000 digits and then Hindi at 0.92 of the largest count (conservative)."""
    _assert_long_text_within_target(family, _mixed_texts()[name])


_COMMON = """the of and to in is was that for on with as by at from his her they which this
had not be are but have were one all their there been when who would will more if out so
said what up its about into than them can only other new some could time these two may
then do first any my now such like our over man me even most made after also did many
before must through back years where much your way well down should"""
WORDS = _COMMON.split()


def _prose(rng: random.Random, size: int) -> list[str]:
    lines, total = [], 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
        lines.append(line)
        total += len(line) + 1
    return lines


def _padded_texts() -> dict[str, str]:
    """Prose with runs of blanks between its lines, and prose whose blanks fall exactly
    where the windows are: windows the profile rates nothing like their stretches."""
    texts = {}
    for name, run, low, high, share in (
        ("spaces", " ", 100, 250, 0.15),
        ("many spaces", " ", 100, 250, 0.4),
        ("tabs", "\t", 20, 200, 0.15),
        ("indented blank lines", "    \n", 20, 250, 0.1),
    ):
        rng = random.Random(name)
        lines = [
            run * rng.randint(low, high) if rng.random() < share else line
            for line in _prose(rng, 15_000)
        ]
        texts[f"prose with {name}"] = "\n".join(lines)
    prose = "\n".join(_prose(random.Random(3), 20_000))[:20_000]
    step = (len(prose) - voc.WINDOW_BYTES) // (voc.WINDOWS - 1)
    for name, block in (
        ("spaces", " " * 300),
        ("blank lines", "        \n" * 36),
        ("tabs", "\t" * 288),
    ):
        chars = list(prose)
        for k in (2, 5, 8, 11):
            chars[k * step : k * step + len(block)] = block
        texts[f"{name} where 4 of 16 windows fall"] = "".join(chars)
    return texts


@pytest.mark.parametrize(
    "family", ["o200k", "cl100k", "tekken", "deepseek", "claude", "conservative"]
)
@pytest.mark.parametrize("name", list(_padded_texts()))
def test_a_window_on_blanks_does_not_decide_prose_around_it(family: str, name: str) -> None:
    """Each window correcting its own stretch alone answered 0.87 (spaces where windows
    fall, claude) and 1.7 (blank lines, tekken); a window unlike its stretch now leaves it
    to the ratio of all the windows, and an uneven text is checked on more windows."""
    _assert_long_text_within_target(family, _padded_texts()[name])


def test_turned_off_without_the_speedups() -> None:
    code = (
        "from windowfit.profiles import estimator_for;"
        "print(type(estimator_for(model='gpt-4o')).__name__)"
    )
    env = {**os.environ, "WINDOWFIT_NO_SPEEDUPS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ProfileEstimator", out.stderr


def test_a_profile_of_another_family_is_refused(pair) -> None:
    counter, _ = pair
    other = "cl100k" if counter.family != "cl100k" else "o200k"
    with pytest.raises(SettingsError, match="cannot be checked"):
        voc.CheckedEstimator(estimator_for(family=other, vocabulary=False), counter)


def test_a_scale_below_one_is_refused(pair) -> None:
    counter, _ = pair
    profile = estimator_for(family=counter.family, vocabulary=False)
    with pytest.raises(SettingsError, match="at least 1"):
        voc.CheckedEstimator(profile, counter, scale=0.9)


def test_a_scaled_check_scales_the_exact_count(pair) -> None:
    counter, real = pair
    profile = estimator_for(family=counter.family, vocabulary=False)
    scaled = voc.CheckedEstimator(profile, counter, scale=1.137)
    text = "Perché no? Gaur goizean etxera joan naiz."
    exact = real.estimate(text)
    assert scaled.estimate(text) == int(exact * 1.137 + 0.5)  # to the nearest token
    assert scaled.estimate("a") == 1  # not 1 x 1.137 rounded up


@given(count=st.integers(0, 10**7), scale=st.sampled_from([1.0, 1.03, 1.137, 1.2]))
def test_a_scaled_count_is_never_below_the_count_nor_far_above_it(count: int, scale: float) -> None:
    scaled = voc.scaled_count(count, scale)
    assert count <= scaled <= count * scale + 0.5
    assert scaled <= 1.25 * count


def _largest() -> voc.LargestEstimator:
    estimator = estimator_for()
    if not isinstance(estimator, voc.LargestEstimator):
        pytest.skip("no family's vocabulary is on this machine")
    return estimator


def test_the_default_is_conservative_checked_by_every_family() -> None:
    estimator = _largest()
    assert estimator is estimator_for(family="conservative")
    assert estimator.family == "conservative" and estimator.name == "checked:conservative"
    families = ["o200k", "cl100k", "deepseek", "tekken", "claude"]
    assert [p.family for p in estimator.parts] == families
    assert estimator.framing == estimator_for(family="conservative", vocabulary=False).framing
    assert isinstance(estimator_for(vocabulary=False), ProfileEstimator)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=300),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz <>|｜/éß\n", max_size=4096),
        st.sampled_from(["", "<｜begin▁of▁sentence｜> hi", "a" * 4096, "ж" * 2048]),
    )
)
def test_conservative_is_the_largest_of_the_families_counts_on_short_texts(text: str) -> None:
    """Up to EXACT_BYTES bytes (one UTF-8 form for every vocabulary) it answers what each
    family's own estimator answers, at its largest."""
    if len(text.encode()) > voc.EXACT_BYTES:
        text = text[: voc.EXACT_BYTES // 4]
    estimator = _largest()
    families = [estimator_for(family=p.family) for p in estimator.parts]
    assert estimator.estimate(text) == max(f.estimate(text) for f in families)


#: Long texts of unlike kinds, checked on windows: each at least 0.98 and at most 1.25 of
#: the largest real count.
LONG_TEXTS = {
    "prose": "The agent read the file, found the bug and wrote a test for it. " * 200,
    "code": "def fit(messages, budget):\n    return [m for m in messages if m]\n" * 150,
    "russian": "Агент прочитал файл, нашёл ошибку и написал для неё тест. " * 200,
    "dutch": "Gebruikersnaam en wachtwoord zijn verplicht voor deze pagina. " * 200,
    "mixed": ("Ошибка: 文件未找到 (file not found) at line 42\n" * 60)
    + ("SELECT id, name FROM users WHERE active = 1;\n" * 60),
}


@pytest.mark.parametrize("kind", list(LONG_TEXTS))
def test_conservative_is_within_the_window_of_the_largest_real_count_on_long_texts(
    kind: str,
) -> None:
    from real_tokenizers import largest_real, real_backend

    text = LONG_TEXTS[kind]
    assert len(text.encode()) > voc.EXACT_BYTES
    estimator = _largest()
    real = largest_real(text)
    # claude is checked at 1.137 times the legacy tokenizer: its real count is that much
    claude = voc.scaled_count(real_backend("claude-legacy").estimate(text), 1.137)
    assert 0.98 <= estimator.estimate(text) / max(real, claude) <= 1.25


#: Words of Latin-script languages other than English, which the conservative profile
#: counted as English ones (0.40 of the real count at worst, session 10).
NOT_ENGLISH = [
    "Gebruikersnaam",
    "Wachtwoord vergeten?",
    "Erabiltzaile-izena",
    "Jina la mtumiaji",
    "Kullanıcı adı zaten alınmış.",
    "Nom d'utilisateur déjà utilisé",
    "Ungültige Eingabe für Feld",
    "Nazwa użytkownika jest zajęta",
]


@pytest.mark.parametrize("text", NOT_ENGLISH)
def test_conservative_is_never_under_a_real_tokenizer_on_words_it_cannot_see(text: str) -> None:
    from real_tokenizers import largest_real

    estimate = _largest().estimate(text)
    real = largest_real(text)
    assert real <= estimate <= 2 * real


def test_the_largest_of_five_gives_every_thread_what_it_gives_one() -> None:
    estimator = _largest()
    texts = [*_many_short_texts(200, seed=11), LONG_TEXTS["mixed"], LONG_TEXTS["prose"]]
    expected = [estimator.estimate(t) for t in texts]
    results = counts_in_threads(estimator.estimate, texts, rounds=2)
    assert all(r == expected for r in results)


#: ASCII with and without the strings that start an added token of a tokenizer.json
#: (counted the slower way, each vocabulary by itself), short and long.
JOINT_PARTS = ("plain words, 12 of them; ", "x = f(y) * 2\n", "<think>", "</think>", "<|EOT|>")


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(st.sampled_from(JOINT_PARTS), min_size=1, max_size=8),
    repeat=st.sampled_from([1, 40, 400]),
)
def test_conservative_through_the_joint_counts_what_each_vocabulary_counts(
    parts: list[str], repeat: int
) -> None:
    """Where the Joint counts (ASCII, no added token's start), and where it must not (an
    added token is one token to a tokenizer.json, and several to the C counter alone)."""
    estimator = _largest()
    if estimator._joint is None:
        pytest.skip("no Joint in this build")
    data = ("".join(parts) * repeat).encode()
    assert estimator._counts(data) == [count(data) for count in estimator._exact]
    strata = windows_of(data)
    assert estimator._weigh_all(strata) == [weigh(strata) for weigh in estimator._weighs]


def test_the_profile_alone_was_under_where_the_check_is_not() -> None:
    from real_tokenizers import largest_real

    text = "Gebruikersnaam"
    real = largest_real(text)
    profile = estimator_for(family="conservative", vocabulary=False).estimate(text)
    assert profile < real <= _largest().estimate(text)


def _split_by_regex(contents: list[str], text: str) -> list[tuple[str, bool]]:
    """The added tokens found as one regex of the alternatives, longest first, finds them
    (the leftmost, and there the longest): what :func:`voc._splitter` must answer."""
    import re

    pattern = re.compile("|".join(map(re.escape, sorted(contents, key=len, reverse=True))))
    parts: list[tuple[str, bool]] = []
    at = 0
    for match in pattern.finditer(text):
        if match.start() > at:
            parts.append((text[at : match.start()], False))
        parts.append((match.group(), True))
        at = match.end()
    if at < len(text):
        parts.append((text[at:], False))
    return parts or [(text, False)]


ADDED = ["<|a|>", "<|ab|>", "<|", "<", "ab", "｜x｜", "<｜x", "b"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(ADDED), min_size=1, max_size=6, unique=True),
    st.text(alphabet="<|｜abx> ", max_size=40),
)
def test_added_tokens_are_split_where_a_regex_of_them_splits(
    contents: list[str], text: str
) -> None:
    assert voc._splitter(contents)(text) == _split_by_regex(contents, text)
