"""The vocabulary counter in merge mode against Hugging Face's ``tokenizers``.

The two byte-level BPE ``tokenizer.json`` files litellm ships (DeepSeek-V3's and the
legacy Claude one) are counted by windowfit._bpe, which claims the numbers of
``load_backend(name)`` (``tokenizers`` without special tokens added). These tests hold it
to that on arbitrary text, on text made of the characters the two pre-tokenizers and the
NFKC normalizer treat apart, on long pieces, and on small merge tables made up so that
merging by pair and merging by the joined bytes' rank disagree.
"""

from __future__ import annotations

import json
import math
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from windowfit import vocabulary as voc
from windowfit.errors import TokenizerError
from windowfit.profiles import estimator_for

from conftest import counts_in_threads, windows_of

pytest.importorskip("tokenizers")

from windowfit.tokenizers import HFTokenizerEstimator, load_backend

if voc.BPE is None:
    pytest.skip("windowfit._bpe is not built", allow_module_level=True)

NAMES = ("claude-legacy", "deepseek")
FIXTURE = [HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module", params=NAMES)
def pair(request: pytest.FixtureRequest) -> tuple[voc.VocabularyCounter, HFTokenizerEstimator]:
    try:
        real = load_backend(request.param)
        counter = voc.VocabularyCounter(request.param)
    except TokenizerError as exc:
        pytest.skip(str(exc))
    assert isinstance(real, HFTokenizerEstimator)
    return counter, real


# What the pre-tokenizers and the normalizer treat apart: GPT-2's case-sensitive
# contractions; each letter category, marks; the edges of DeepSeek's CJK ranges (U+4E00,
# U+9FA5 in, U+9FA6 and U+4DFF out; kana with its marks, symbols and punctuation inside the
# range); digits of several scripts and kinds; ASCII and other punctuation against symbols;
# every kind of space and newline, controls, format and private-use characters; characters
# NFKC changes (ligatures, circled and fullwidth forms, radicals that become CJK ideographs,
# a spacing diaeresis that becomes a space and a mark), and some whose mappings are newer
# than tokenizers' tables (which leave them); added tokens' strings.
TRICKY = (
    *"'stmdlrevSTLRD", "'ll", "'re", "'ve", "'S",
    *"aZx\u01c5\u02b0\u05d0\u0915\u093f\u0301\u20dd\u00e9",
    *"\u4e00\u9fa5\u9fa6\u4dff\u3041\u309f\u30a0\u30fb\u30fc\u30ff\u3099\u309b\u3105\u3007",
    *"7\u0663\u0967\uff11\u2167\u00b2\u2460",
    *"!,-()[\\_`~$+^|<>\u00a7\u00a9\u2014\u3001\u3002\u20ac\U0001f600\u00ab",
    *" \t\n\r\x0b\x0c\x85\xa0\u1680\u2003\u2028\u3000\x1c\x00\u200b\u200d\ufe0f\ue000",
    *"\ufb01\uff21\uff41\u00bd\u2126\u3131\u32a4\u2f00\uf900\u00a8\u2474",
    *"\u32ff\ua7f2\U0001079e",
    "<EOT>", "<think>", "</think>", "<\uff5cUser\uff5c>", "\uff5cDSML\uff5c",
)  # fmt: skip

tricky_text = st.lists(st.sampled_from(TRICKY), max_size=40).map("".join)
#: Characters this Python's Unicode knows: the tokenizers' tables may be of another version.
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


def _exact(counter: voc.VocabularyCounter, real: HFTokenizerEstimator, text: str) -> None:
    expected = real.estimate(text)
    assert counter.estimate(text) == expected, repr(text)
    # the bytes' path (ASCII without an added token's start goes straight to C)
    data = text.encode("utf-8", "replace")
    if data.decode() == text:
        assert counter.count_bytes(data) == expected, repr(text)


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE)
@given(text=tricky_text)
def test_counts_are_hfs_on_the_characters_pre_tokenizers_treat_apart(pair, text: str) -> None:
    _exact(*pair, text)


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE)
@given(text=known_text)
def test_counts_are_hfs_on_any_text(pair, text: str) -> None:
    _exact(*pair, text)


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE)
@given(text=word_text)
def test_counts_are_hfs_on_words_as_english_and_code_write_them(pair, text: str) -> None:
    _exact(*pair, text)


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURE)
@given(text=long_piece_text)
def test_counts_are_hfs_on_long_pieces(pair, text: str) -> None:
    _exact(*pair, text)


def _hf_pieces(real: HFTokenizerEstimator, text: str) -> list[bytes]:
    alphabet = voc.byte_level_alphabet()
    pre = real.tokenizer.pre_tokenizer
    return [bytes(alphabet[c] for c in piece) for piece, _ in pre.pre_tokenize_str(text)]


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURE)
@given(text=st.one_of(tricky_text, known_text, word_text))
def test_pieces_are_the_pre_tokenizers(pair, text: str) -> None:
    counter, real = pair
    text = voc.nfkc_as_hf(text) if counter.family == "claude-legacy" else text
    assert counter._vocabulary.pieces(text.encode()) == _hf_pieces(real, text), repr(text)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 3000,  # one piece merged with the heap
        "ab" * 700 + "c" * 90,
        "Donaudampfschifffahrtsgesellschaftskapitän" * 40,
        "\u4e2d\u6587\u5b57" * 400,
        "\u30ab\u30bf\u30ab\u30ca" * 300,
        "0123456789" * 50,
        "!?" * 500,
        " " * 500 + "x",
        "\n\n \r\n\t " * 30,
        "Ｆｕｌｌｗｉｄｔｈ" * 100,
    ],
    ids=["x", "ab", "german", "han", "katakana", "digits", "punct", "spaces", "newlines", "wide"],
)
def test_long_pieces_are_exact(pair, text: str) -> None:
    _exact(*pair, text)


@pytest.mark.parametrize(
    "text",
    [
        "<think>why</think>",
        "a<EOT>b<META>",
        "x<\uff5cUser\uff5c>y<\uff5cAssistant\uff5c>",
        "<<EOT>>",
        "<|EOT|> and </dsml:call> then <dsml:x",
        "<|place_holder_mm_span_0021|><|place_holder_mm_span_0022",
        "<div></div><t>a</b> <|x|> <thin",
        "x<SOS>y<META>z<EOT",
    ],
)
def test_added_tokens_in_the_text_count_as_hf_counts_them(pair, text: str) -> None:
    _exact(*pair, text)


#: Every piece of two bytes (counted from a table, not by merging): two ASCII characters,
#: and one character of two bytes.
TWO_BYTES = [chr(a) + chr(b) for a in range(128) for b in range(128)] + [
    chr(c) for c in range(0x80, 0x800, 7)
]


def test_every_two_byte_piece_counts_as_hf_counts_it(pair) -> None:
    counter, real = pair
    wrong = [t for t in TWO_BYTES if counter.estimate(t) != real.estimate(t)]
    assert not wrong, wrong[:10]


@settings(max_examples=100, deadline=None, suppress_health_check=FIXTURE)
@given(text=st.one_of(word_text, long_piece_text, tricky_text))
def test_weighing_windows_is_counting_each_of_them(pair, text: str) -> None:
    """In one call where the windows are ASCII without an added token's start, window by
    window where not: the same numbers either way."""
    counter = pair[0]
    data = text.encode("utf-8", "replace")
    strata = windows_of(data)
    assert counter.weigh(strata) == voc.weighed_by(counter.count_bytes, strata)


def test_lone_surrogates_count_as_replacement_characters(pair) -> None:
    counter, real = pair
    assert counter.estimate("a\ud800b") == real.estimate("a\ud800b")
    assert counter.count_bytes("a\ufffdb".encode()) == real.estimate("a\ud800b")


def test_empty_text_is_no_tokens(pair) -> None:
    assert pair[0].estimate("") == 0


def test_real_text_is_exact(pair) -> None:
    counter, real = pair
    text = Path(__file__).read_text(encoding="utf-8")
    assert counter.estimate(text) == real.estimate(text)


def test_nfkc_is_hfs_on_every_character_python_knows() -> None:
    """One text of every assigned character, each after a newline (nothing composes
    across one), normalized by both: the claude-legacy file's NFKC, with tokenizers'
    older tables, against windowfit's."""
    try:
        real = load_backend("claude-legacy")
    except TokenizerError as exc:
        pytest.skip(str(exc))
    assert isinstance(real, HFTokenizerEstimator)
    characters = (
        chr(c)
        for c in range(0x110000)
        if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) != "Cn"
    )
    text = "\n".join(characters)
    assert voc.nfkc_as_hf(text) == real.tokenizer.normalizer.normalize_str(text)


def test_threads_count_with_one_vocabulary_at_once(pair) -> None:
    counter, real = pair
    texts = [f"Ciao mondo {i}, perché no? \u4e2d\u6587 " * (50 + i) for i in range(8)]
    expected = [real.estimate(t) for t in texts]
    results = counts_in_threads(counter.estimate, texts)
    assert len(results) == 4
    assert all(r == expected for r in results)


def test_deepseek_and_claude_are_checked_scaled() -> None:
    """deepseek by its own vocabulary, claude by the legacy one, each scaled by what its
    provider counts over that tokenizer (REFERENCE_OF_FAMILY)."""
    if voc.find_vocabulary("deepseek") is None or voc.find_vocabulary("claude-legacy") is None:
        pytest.skip("no deepseek or claude-legacy vocabulary here")
    text = "Ciao, mondo: gaur goizean etxera joan naiz."
    for family, backend in (("deepseek", "deepseek"), ("claude", "claude-legacy")):
        checked = estimator_for(family=family)
        assert isinstance(checked, voc.CheckedEstimator)
        scale = voc.REFERENCE_OF_FAMILY[family][1]
        assert checked.scale == scale > 1
        assert checked.estimate(text) == math.ceil(load_backend(backend).estimate(text) * scale)
    assert voc.find_vocabulary("claude") is None
    counter = voc.find_vocabulary("claude-legacy")
    assert counter is not None and counter.family == "claude-legacy"


# ---------------------------------------------------------------------------------------
# Small made-up merge tables: merging by pair, as Hugging Face does
# ---------------------------------------------------------------------------------------


def _tokenizer_json(merges: list[tuple[str, str]], **changes: object) -> dict[str, object]:
    """A byte-level BPE tokenizer.json: every byte, then each merge's token."""
    vocab = {c: i for i, c in enumerate(voc.byte_level_alphabet())}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    data: dict[str, object] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "vocab": vocab,
            "merges": [f"{left} {right}" for left, right in merges],
        },
    }
    data.update(changes)
    return data


def _both(tmp_path: Path, data: dict[str, object]) -> tuple[voc._Counting, object]:
    import tokenizers

    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return voc._hf_counting(voc.read_byte_level_bpe(path)), tokenizers.Tokenizer.from_file(
        str(path)
    )


@st.composite
def merge_tables(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Merges over a, b, c, d, often making one token by two splits."""
    tokens = list("abcd")
    merges: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(1, 14))):
        left, right = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        if (left, right) in merges:
            continue
        merges.append((left, right))
        if left + right not in tokens:
            tokens.append(left + right)
    return merges


@settings(max_examples=60, deadline=None)
@given(
    merges=merge_tables(), texts=st.lists(st.text("abcd", max_size=1200), min_size=1, max_size=5)
)
def test_merges_go_by_pair_not_by_the_joined_bytes(
    tmp_path_factory: pytest.TempPathFactory, merges: list[tuple[str, str]], texts: list[str]
) -> None:
    counting, real = _both(tmp_path_factory.mktemp("bpe"), _tokenizer_json(merges))
    for text in texts:
        expected = len(real.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]
        assert counting.count(text) == expected, (merges, text)


def test_a_token_two_splits_make_is_merged_by_its_pair(tmp_path: Path) -> None:
    """b+c comes first, and a+bc is no merge: 'abc' stays two tokens, though 'abc' is
    a token (made by ab+c) that merging by the joined bytes' rank would reach."""
    merges = [("b", "c"), ("a", "b"), ("ab", "c")]
    counting, real = _both(tmp_path, _tokenizer_json(merges))
    assert counting.count("abc") == 2 == len(real.encode("abc").ids)  # type: ignore[attr-defined]
    assert counting.count("abd") == 2


# ---------------------------------------------------------------------------------------
# Files it refuses
# ---------------------------------------------------------------------------------------


def _model(**changes: object) -> dict[str, object]:
    data = _tokenizer_json([("a", "b")])
    model = dict(data["model"])  # type: ignore[call-overload]
    model.update(changes)
    return {**data, "model": model}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("not json", "not a tokenizer.json"),
        ({"model": None}, "no model"),
        (_model(type="WordPiece"), "a WordPiece model, not BPE"),
        (_model(dropout=0.1), "with dropout"),
        (_model(continuing_subword_prefix="##"), "with continuing_subword_prefix"),
        (_model(byte_fallback=True), "byte_fallback"),
        (_model(merges=["a x y"]), "is not two tokens"),
        (_model(merges=["a q"], vocab={"a": 0, "q": 1}), "not every byte is a token"),
        (_tokenizer_json([], normalizer={"type": "Lowercase"}), "only an NFKC normalizer"),
        (
            _tokenizer_json([], pre_tokenizer={"type": "Whitespace"}),
            "pre-tokenizer \\(Whitespace\\)",
        ),
        (
            _tokenizer_json([], pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True}),
            "adds a prefix space",
        ),
        (
            _tokenizer_json(
                [],
                added_tokens=[
                    {
                        "id": 0,
                        "content": "<x>",
                        "lstrip": True,
                        "single_word": False,
                        "rstrip": False,
                        "normalized": False,
                        "special": True,
                    }
                ],
            ),
            "lstrip",
        ),
    ],
    ids=[
        "text",
        "no-model",
        "wordpiece",
        "dropout",
        "prefix",
        "fallback",
        "merge",
        "bytes",
        "normalizer",
        "pre",
        "prefix-space",
        "lstrip",
    ],
)
def test_bad_files_are_refused(tmp_path: Path, data: object, message: str) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    with pytest.raises(TokenizerError, match=message):
        voc.VocabularyCounter("deepseek", path=path)


def test_a_merge_of_tokens_not_in_the_vocab_is_refused(tmp_path: Path) -> None:
    data = _model(merges=["a b", "a z9"])
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"merge 1 .* is not of vocab tokens"):
        voc.read_byte_level_bpe(path)


def _ids(*ids: int) -> bytes:
    return b"".join(i.to_bytes(4, sys.byteorder) for i in ids)


@pytest.mark.parametrize(
    ("merges", "message"),
    [
        (b"\0" * 11, "triples"),
        (_ids(0, 0, 900), "not in the vocabulary"),
        (_ids(97, 97, 97), "is not tokens 97 and 97 joined"),
    ],
)
def test_the_c_type_refuses_bad_merges(merges: bytes, message: str) -> None:
    assert voc.BPE is not None
    tokens = [bytes([b]) for b in range(256)]
    offsets = [0]
    for token in tokens:
        offsets.append(offsets[-1] + len(token))
    with pytest.raises(ValueError, match=message):
        voc.BPE(
            blob=b"".join(tokens),
            offsets=b"".join(o.to_bytes(4, sys.byteorder) for o in offsets),
            categories=voc.unicode_categories(),
            pattern=voc.PATTERN_GPT2,
            merges=merges,
        )


def test_the_c_type_refuses_a_missing_byte() -> None:
    assert voc.BPE is not None
    with pytest.raises(ValueError, match="byte 0 is not a token"):
        voc.BPE(
            blob=b"ab",
            offsets=b"\0\0\0\0\x01\0\0\0\x02\0\0\0",
            categories=voc.unicode_categories(),
            pattern=voc.PATTERN_GPT2,
            merges=b"",
        )


def test_only_deepseeks_table_has_punctuation_and_symbols() -> None:
    assert voc.BPE is not None
    split = voc.unicode_categories(punctuation=True)
    assert (split[ord("!")], split[ord("$")], split[ord("\x00")]) == (
        voc.PUNCTUATION,
        voc.SYMBOL,
        voc.OTHER,
    )
    with pytest.raises(ValueError, match="is not one of 0-7"):
        voc.BPE(
            blob=b"ab",
            offsets=b"\0\0\0\0\x01\0\0\0\x02\0\0\0",
            categories=split,
            pattern=voc.PATTERN_GPT2,
        )
