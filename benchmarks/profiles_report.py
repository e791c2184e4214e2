"""Do the profiles hold on text they were not fitted on? (issue 10, item 1)

Run:  .venv/bin/python benchmarks/profiles_report.py            (markdown; a few minutes)
      .venv/bin/python benchmarks/profiles_report.py --quick    (smoke run, seconds)
      .venv/bin/python benchmarks/profiles_report.py --json     (every figure as JSON;
                                                  --json PATH: to a file, markdown printed)

Measurement only: it asserts nothing and changes nothing. For every family's estimator
(``estimator_for(family=...)``) it divides the estimate by the real tokenizer's count:
o200k, cl100k, deepseek and tekken against their own tokenizers, claude against the legacy
Claude tokenizer (the only public guide), and ``conservative`` (the default for an unknown
model) against the largest count of the five. The target is every ratio in [0.98, 1.25].

What it counts:

1. Generated text for every Unicode block that has letters, marks, numbers or symbols
   (the block list is Blocks-14.0.0.txt of the Unicode Character Database, kept below as
   data; the characters are the block's assigned code points by ``unicodedata``). Each
   block's characters are dealt like a shuffled deck into word-like runs of 2-10
   characters with spaces, some punctuation and numbers; combining marks come after a
   base, Indic viramas join two consonants, pictographic blocks make emoji ZWJ sequences
   with skin tones. All five tokenizers are byte-level BPEs (claude-legacy normalises by
   NFKC first), so every block is one they handle: none maps a character to an unknown
   token. Beside the blocks: hard ASCII
   (random letters, punctuation runs, digits between spaces, base64, hex, capitalised
   words...), capitalised and upper-case Cyrillic and Greek, and mathematical notation.
   Deterministic by ``--seed``; ``unicodedata``'s version (Python's) decides which code
   points are assigned, and is printed.
2. A length sweep: windows of 1, 2, 3, 5, 10, 30, ... 10^6 characters of the real texts in
   ``../shared/data/texts`` (when present; the profiles were fitted on them, so these are
   in-sample) and of the generated texts, from the start and from a few other line
   starts, cut at a character (code point) boundary and also at the last word boundary
   before it. No single text has a million characters: the longest windows come from the
   real texts in turns and from the generated texts one after another.
3. Per family: min and max ratio, the worst windows, pass/fail; the same by length (real
   and generated texts apart) and per whole generated text. Two views: ``text`` is the
   estimate without the family's ``framing`` (what a provider adds around every block,
   which a tokenizer's count of the bare text does not have); ``as used`` is the
   estimate ``fit`` uses, framing included (it can only be higher, so it is the one the
   lower bound matters for).

Real counts of long windows are the sum of the counts of pieces cut where every bundled
tokenizer splits anyway (``windowfit.tokenizers.split_text``), each piece counted once
for all the lengths; the test checks that this is the count of the whole window.

For held-out figures, a fit calls :func:`run` with ``choose``: the estimator to use per
family, view and text (for example the one fitted without that text).
"""

from __future__ import annotations

import argparse
import base64
import bisect
import dataclasses
import functools
import itertools
import json
import math
import os
import platform
import random
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from windowfit.profiles import Profile, ProfileEstimator, estimator_for, get_profile
from windowfit.tokenizers import BACKEND_OF_FAMILY, FAMILY_BACKENDS, split_text
from windowfit.tokens import Estimator, part_counter
from windowfit.vocabulary import (
    REFERENCE_OF_FAMILY,
    CheckedEstimator,
    LargestEstimator,
    checked,
    scaled_count,
)

WINDOW = (0.98, 1.25)
#: Each family against the real tokenizer it is checked on (``conservative``: all of them).
BACKENDS = FAMILY_BACKENDS
#: Claude 3+ has no public tokenizer. What it counts is known only as the legacy
#: tokenizer's count times the scale the API's usage shows (REFERENCE_OF_FAMILY, fitted on
#: Claude Code traffic), so that model is the yardstick of ``claude`` and one of the five
#: ``conservative`` must reach: the legacy count scaled and rounded to nearest, as
#: windowfit counts a short text (never below the legacy count itself, which
#: :data:`FLOOR_OF` checks too).
CLAUDE_SCALE = REFERENCE_OF_FAMILY["claude"][1]
CLAUDE_MODEL = f"claude-legacy x{CLAUDE_SCALE:g}"
#: Counts derived from a real tokenizer's: name -> (the tokenizer, the scale).
DERIVED = {CLAUDE_MODEL: ("claude-legacy", CLAUDE_SCALE)}
CHECKED_ON = {
    **{family: (backend,) for family, backend in BACKEND_OF_FAMILY.items()},
    "claude": (CLAUDE_MODEL,),
    "conservative": tuple(CLAUDE_MODEL if b == "claude-legacy" else b for b in BACKENDS),
}
#: A tokenizer a family's estimate must never be under, beside its yardstick.
FLOOR_OF = {"claude": "claude-legacy"}


def with_derived(counts: dict[str, int]) -> dict[str, int]:
    """``counts`` (real tokenizer -> count) with the :data:`DERIVED` counts added."""
    for name, (base, scale) in DERIVED.items():
        if base in counts:
            counts[name] = scaled_count(counts[base], scale)
    return counts


def derived_names(backends: Iterable[str]) -> set[str]:
    """``backends`` and the :data:`DERIVED` counts they make."""
    have = set(backends)
    return have | {name for name, (base, _) in DERIVED.items() if base in have}


LENGTHS = (
    *(1, 2, 3, 5, 10, 30, 100, 300, 1_000, 3_000),
    *(10_000, 30_000, 100_000, 300_000, 1_000_000),
)
GENERATED_SIZE = 3_000
#: Windows of real text start at the beginning and at this many other line starts (spread
#: over the text), for the lengths up to ``OFFSET_LENGTH_LIMIT``.
EXTRA_STARTS = 6
OFFSET_LENGTH_LIMIT = 10_000
#: Pieces of this many characters are counted once and summed for long windows.
PIECE_CHARS = 16_000

# ---------------------------------------------------------------------------------------
# Unicode blocks
# ---------------------------------------------------------------------------------------

#: Blocks-14.0.0.txt of the Unicode Character Database (2021-01-22), the version of
#: Python 3.11's ``unicodedata``: https://www.unicode.org/Public/14.0.0/ucd/Blocks.txt
#: (the ranges and names as published; the file's comments are left out).
BLOCKS_TXT = """
0000..007F; Basic Latin
0080..00FF; Latin-1 Supplement
0100..017F; Latin Extended-A
0180..024F; Latin Extended-B
0250..02AF; IPA Extensions
02B0..02FF; Spacing Modifier Letters
0300..036F; Combining Diacritical Marks
0370..03FF; Greek and Coptic
0400..04FF; Cyrillic
0500..052F; Cyrillic Supplement
0530..058F; Armenian
0590..05FF; Hebrew
0600..06FF; Arabic
0700..074F; Syriac
0750..077F; Arabic Supplement
0780..07BF; Thaana
07C0..07FF; NKo
0800..083F; Samaritan
0840..085F; Mandaic
0860..086F; Syriac Supplement
0870..089F; Arabic Extended-B
08A0..08FF; Arabic Extended-A
0900..097F; Devanagari
0980..09FF; Bengali
0A00..0A7F; Gurmukhi
0A80..0AFF; Gujarati
0B00..0B7F; Oriya
0B80..0BFF; Tamil
0C00..0C7F; Telugu
0C80..0CFF; Kannada
0D00..0D7F; Malayalam
0D80..0DFF; Sinhala
0E00..0E7F; Thai
0E80..0EFF; Lao
0F00..0FFF; Tibetan
1000..109F; Myanmar
10A0..10FF; Georgian
1100..11FF; Hangul Jamo
1200..137F; Ethiopic
1380..139F; Ethiopic Supplement
13A0..13FF; Cherokee
1400..167F; Unified Canadian Aboriginal Syllabics
1680..169F; Ogham
16A0..16FF; Runic
1700..171F; Tagalog
1720..173F; Hanunoo
1740..175F; Buhid
1760..177F; Tagbanwa
1780..17FF; Khmer
1800..18AF; Mongolian
18B0..18FF; Unified Canadian Aboriginal Syllabics Extended
1900..194F; Limbu
1950..197F; Tai Le
1980..19DF; New Tai Lue
19E0..19FF; Khmer Symbols
1A00..1A1F; Buginese
1A20..1AAF; Tai Tham
1AB0..1AFF; Combining Diacritical Marks Extended
1B00..1B7F; Balinese
1B80..1BBF; Sundanese
1BC0..1BFF; Batak
1C00..1C4F; Lepcha
1C50..1C7F; Ol Chiki
1C80..1C8F; Cyrillic Extended-C
1C90..1CBF; Georgian Extended
1CC0..1CCF; Sundanese Supplement
1CD0..1CFF; Vedic Extensions
1D00..1D7F; Phonetic Extensions
1D80..1DBF; Phonetic Extensions Supplement
1DC0..1DFF; Combining Diacritical Marks Supplement
1E00..1EFF; Latin Extended Additional
1F00..1FFF; Greek Extended
2000..206F; General Punctuation
2070..209F; Superscripts and Subscripts
20A0..20CF; Currency Symbols
20D0..20FF; Combining Diacritical Marks for Symbols
2100..214F; Letterlike Symbols
2150..218F; Number Forms
2190..21FF; Arrows
2200..22FF; Mathematical Operators
2300..23FF; Miscellaneous Technical
2400..243F; Control Pictures
2440..245F; Optical Character Recognition
2460..24FF; Enclosed Alphanumerics
2500..257F; Box Drawing
2580..259F; Block Elements
25A0..25FF; Geometric Shapes
2600..26FF; Miscellaneous Symbols
2700..27BF; Dingbats
27C0..27EF; Miscellaneous Mathematical Symbols-A
27F0..27FF; Supplemental Arrows-A
2800..28FF; Braille Patterns
2900..297F; Supplemental Arrows-B
2980..29FF; Miscellaneous Mathematical Symbols-B
2A00..2AFF; Supplemental Mathematical Operators
2B00..2BFF; Miscellaneous Symbols and Arrows
2C00..2C5F; Glagolitic
2C60..2C7F; Latin Extended-C
2C80..2CFF; Coptic
2D00..2D2F; Georgian Supplement
2D30..2D7F; Tifinagh
2D80..2DDF; Ethiopic Extended
2DE0..2DFF; Cyrillic Extended-A
2E00..2E7F; Supplemental Punctuation
2E80..2EFF; CJK Radicals Supplement
2F00..2FDF; Kangxi Radicals
2FF0..2FFF; Ideographic Description Characters
3000..303F; CJK Symbols and Punctuation
3040..309F; Hiragana
30A0..30FF; Katakana
3100..312F; Bopomofo
3130..318F; Hangul Compatibility Jamo
3190..319F; Kanbun
31A0..31BF; Bopomofo Extended
31C0..31EF; CJK Strokes
31F0..31FF; Katakana Phonetic Extensions
3200..32FF; Enclosed CJK Letters and Months
3300..33FF; CJK Compatibility
3400..4DBF; CJK Unified Ideographs Extension A
4DC0..4DFF; Yijing Hexagram Symbols
4E00..9FFF; CJK Unified Ideographs
A000..A48F; Yi Syllables
A490..A4CF; Yi Radicals
A4D0..A4FF; Lisu
A500..A63F; Vai
A640..A69F; Cyrillic Extended-B
A6A0..A6FF; Bamum
A700..A71F; Modifier Tone Letters
A720..A7FF; Latin Extended-D
A800..A82F; Syloti Nagri
A830..A83F; Common Indic Number Forms
A840..A87F; Phags-pa
A880..A8DF; Saurashtra
A8E0..A8FF; Devanagari Extended
A900..A92F; Kayah Li
A930..A95F; Rejang
A960..A97F; Hangul Jamo Extended-A
A980..A9DF; Javanese
A9E0..A9FF; Myanmar Extended-B
AA00..AA5F; Cham
AA60..AA7F; Myanmar Extended-A
AA80..AADF; Tai Viet
AAE0..AAFF; Meetei Mayek Extensions
AB00..AB2F; Ethiopic Extended-A
AB30..AB6F; Latin Extended-E
AB70..ABBF; Cherokee Supplement
ABC0..ABFF; Meetei Mayek
AC00..D7AF; Hangul Syllables
D7B0..D7FF; Hangul Jamo Extended-B
D800..DB7F; High Surrogates
DB80..DBFF; High Private Use Surrogates
DC00..DFFF; Low Surrogates
E000..F8FF; Private Use Area
F900..FAFF; CJK Compatibility Ideographs
FB00..FB4F; Alphabetic Presentation Forms
FB50..FDFF; Arabic Presentation Forms-A
FE00..FE0F; Variation Selectors
FE10..FE1F; Vertical Forms
FE20..FE2F; Combining Half Marks
FE30..FE4F; CJK Compatibility Forms
FE50..FE6F; Small Form Variants
FE70..FEFF; Arabic Presentation Forms-B
FF00..FFEF; Halfwidth and Fullwidth Forms
FFF0..FFFF; Specials
10000..1007F; Linear B Syllabary
10080..100FF; Linear B Ideograms
10100..1013F; Aegean Numbers
10140..1018F; Ancient Greek Numbers
10190..101CF; Ancient Symbols
101D0..101FF; Phaistos Disc
10280..1029F; Lycian
102A0..102DF; Carian
102E0..102FF; Coptic Epact Numbers
10300..1032F; Old Italic
10330..1034F; Gothic
10350..1037F; Old Permic
10380..1039F; Ugaritic
103A0..103DF; Old Persian
10400..1044F; Deseret
10450..1047F; Shavian
10480..104AF; Osmanya
104B0..104FF; Osage
10500..1052F; Elbasan
10530..1056F; Caucasian Albanian
10570..105BF; Vithkuqi
10600..1077F; Linear A
10780..107BF; Latin Extended-F
10800..1083F; Cypriot Syllabary
10840..1085F; Imperial Aramaic
10860..1087F; Palmyrene
10880..108AF; Nabataean
108E0..108FF; Hatran
10900..1091F; Phoenician
10920..1093F; Lydian
10980..1099F; Meroitic Hieroglyphs
109A0..109FF; Meroitic Cursive
10A00..10A5F; Kharoshthi
10A60..10A7F; Old South Arabian
10A80..10A9F; Old North Arabian
10AC0..10AFF; Manichaean
10B00..10B3F; Avestan
10B40..10B5F; Inscriptional Parthian
10B60..10B7F; Inscriptional Pahlavi
10B80..10BAF; Psalter Pahlavi
10C00..10C4F; Old Turkic
10C80..10CFF; Old Hungarian
10D00..10D3F; Hanifi Rohingya
10E60..10E7F; Rumi Numeral Symbols
10E80..10EBF; Yezidi
10F00..10F2F; Old Sogdian
10F30..10F6F; Sogdian
10F70..10FAF; Old Uyghur
10FB0..10FDF; Chorasmian
10FE0..10FFF; Elymaic
11000..1107F; Brahmi
11080..110CF; Kaithi
110D0..110FF; Sora Sompeng
11100..1114F; Chakma
11150..1117F; Mahajani
11180..111DF; Sharada
111E0..111FF; Sinhala Archaic Numbers
11200..1124F; Khojki
11280..112AF; Multani
112B0..112FF; Khudawadi
11300..1137F; Grantha
11400..1147F; Newa
11480..114DF; Tirhuta
11580..115FF; Siddham
11600..1165F; Modi
11660..1167F; Mongolian Supplement
11680..116CF; Takri
11700..1174F; Ahom
11800..1184F; Dogra
118A0..118FF; Warang Citi
11900..1195F; Dives Akuru
119A0..119FF; Nandinagari
11A00..11A4F; Zanabazar Square
11A50..11AAF; Soyombo
11AB0..11ABF; Unified Canadian Aboriginal Syllabics Extended-A
11AC0..11AFF; Pau Cin Hau
11C00..11C6F; Bhaiksuki
11C70..11CBF; Marchen
11D00..11D5F; Masaram Gondi
11D60..11DAF; Gunjala Gondi
11EE0..11EFF; Makasar
11FB0..11FBF; Lisu Supplement
11FC0..11FFF; Tamil Supplement
12000..123FF; Cuneiform
12400..1247F; Cuneiform Numbers and Punctuation
12480..1254F; Early Dynastic Cuneiform
12F90..12FFF; Cypro-Minoan
13000..1342F; Egyptian Hieroglyphs
13430..1343F; Egyptian Hieroglyph Format Controls
14400..1467F; Anatolian Hieroglyphs
16800..16A3F; Bamum Supplement
16A40..16A6F; Mro
16A70..16ACF; Tangsa
16AD0..16AFF; Bassa Vah
16B00..16B8F; Pahawh Hmong
16E40..16E9F; Medefaidrin
16F00..16F9F; Miao
16FE0..16FFF; Ideographic Symbols and Punctuation
17000..187FF; Tangut
18800..18AFF; Tangut Components
18B00..18CFF; Khitan Small Script
18D00..18D7F; Tangut Supplement
1AFF0..1AFFF; Kana Extended-B
1B000..1B0FF; Kana Supplement
1B100..1B12F; Kana Extended-A
1B130..1B16F; Small Kana Extension
1B170..1B2FF; Nushu
1BC00..1BC9F; Duployan
1BCA0..1BCAF; Shorthand Format Controls
1CF00..1CFCF; Znamenny Musical Notation
1D000..1D0FF; Byzantine Musical Symbols
1D100..1D1FF; Musical Symbols
1D200..1D24F; Ancient Greek Musical Notation
1D2E0..1D2FF; Mayan Numerals
1D300..1D35F; Tai Xuan Jing Symbols
1D360..1D37F; Counting Rod Numerals
1D400..1D7FF; Mathematical Alphanumeric Symbols
1D800..1DAAF; Sutton SignWriting
1DF00..1DFFF; Latin Extended-G
1E000..1E02F; Glagolitic Supplement
1E100..1E14F; Nyiakeng Puachue Hmong
1E290..1E2BF; Toto
1E2C0..1E2FF; Wancho
1E7E0..1E7FF; Ethiopic Extended-B
1E800..1E8DF; Mende Kikakui
1E900..1E95F; Adlam
1EC70..1ECBF; Indic Siyaq Numbers
1ED00..1ED4F; Ottoman Siyaq Numbers
1EE00..1EEFF; Arabic Mathematical Alphabetic Symbols
1F000..1F02F; Mahjong Tiles
1F030..1F09F; Domino Tiles
1F0A0..1F0FF; Playing Cards
1F100..1F1FF; Enclosed Alphanumeric Supplement
1F200..1F2FF; Enclosed Ideographic Supplement
1F300..1F5FF; Miscellaneous Symbols and Pictographs
1F600..1F64F; Emoticons
1F650..1F67F; Ornamental Dingbats
1F680..1F6FF; Transport and Map Symbols
1F700..1F77F; Alchemical Symbols
1F780..1F7FF; Geometric Shapes Extended
1F800..1F8FF; Supplemental Arrows-C
1F900..1F9FF; Supplemental Symbols and Pictographs
1FA00..1FA6F; Chess Symbols
1FA70..1FAFF; Symbols and Pictographs Extended-A
1FB00..1FBFF; Symbols for Legacy Computing
20000..2A6DF; CJK Unified Ideographs Extension B
2A700..2B73F; CJK Unified Ideographs Extension C
2B740..2B81F; CJK Unified Ideographs Extension D
2B820..2CEAF; CJK Unified Ideographs Extension E
2CEB0..2EBEF; CJK Unified Ideographs Extension F
2F800..2FA1F; CJK Compatibility Ideographs Supplement
30000..3134F; CJK Unified Ideographs Extension G
E0000..E007F; Tags
E0100..E01EF; Variation Selectors Supplement
F0000..FFFFF; Supplementary Private Use Area-A
100000..10FFFF; Supplementary Private Use Area-B
"""


@dataclass(frozen=True)
class Block:
    """A Unicode block: its first and last code point and its name."""

    first: int
    last: int
    name: str


def unicode_blocks() -> list[Block]:
    """The blocks of :data:`BLOCKS_TXT`, in code-point order."""
    blocks = []
    for line in BLOCKS_TXT.strip().splitlines():
        span, name = line.split("; ")
        first, last = span.split("..")
        blocks.append(Block(int(first, 16), int(last, 16), name))
    return blocks


#: Blocks whose characters are emoji: their words are emoji ZWJ sequences.
PICTOGRAPHIC = frozenset(
    {
        "Emoticons",
        "Miscellaneous Symbols and Pictographs",
        "Supplemental Symbols and Pictographs",
        "Symbols and Pictographs Extended-A",
        "Transport and Map Symbols",
    }
)
ZWJ = "\u200d"
VS16 = "\ufe0f"
SKIN_TONES = tuple(chr(c) for c in range(0x1F3FB, 0x1F400))
ASCII_PUNCTUATION = ",.;:!?"
#: What a generated text may hold beyond its block's own characters.
GLUE = frozenset(" \n" + ASCII_PUNCTUATION + "0123456789-()" + ZWJ + VS16) | set(SKIN_TONES)
#: Bases for the combining marks of a block that has only marks.
LATIN_BASES = "aeioubcdgklmnrstxyz"


@dataclass(frozen=True)
class BlockCharacters:
    """A block's assigned characters by role in a word."""

    letters: tuple[str, ...]  # letters, other numbers, symbols: what a word is made of
    marks: tuple[str, ...]  # combining marks: after a base
    digits: tuple[str, ...]  # decimal digits: numbers
    punctuation: tuple[str, ...]  # after a word
    virama: str | None  # a sign that joins two consonants (Indic conjuncts)
    consonants: tuple[str, ...]

    @property
    def usable(self) -> bool:
        return bool(self.letters or self.marks or self.punctuation or self.digits)

    def all(self) -> frozenset[str]:
        return frozenset(self.letters + self.marks + self.digits + self.punctuation)


_WORD_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "No", "Sm", "Sc", "Sk", "So"})


@functools.cache
def block_characters(block: Block) -> BlockCharacters:
    """The block's assigned characters (by this Python's ``unicodedata``), by role."""
    letters: list[str] = []
    marks: list[str] = []
    digits: list[str] = []
    punctuation: list[str] = []
    consonants: list[str] = []
    virama = None
    for code in range(block.first, block.last + 1):
        char = chr(code)
        category = unicodedata.category(char)
        name = unicodedata.name(char, "")
        if category in _WORD_CATEGORIES:
            letters.append(char)
            if category == "Lo" and " LETTER " in name and "VOWEL" not in name:
                consonants.append(char)
        elif category[0] == "M":
            marks.append(char)
            if name.endswith("SIGN VIRAMA") and virama is None:
                virama = char
        elif category == "Nd":
            digits.append(char)
        elif category[0] == "P":
            punctuation.append(char)
    if not letters and not marks and punctuation:
        letters, punctuation = punctuation, []  # a punctuation block: its marks are words
    return BlockCharacters(
        tuple(letters),
        tuple(marks),
        tuple(digits),
        tuple(punctuation),
        virama if consonants else None,
        tuple(consonants),
    )


class Deck:
    """Characters dealt in shuffled rounds, so that each is used before any repeats."""

    def __init__(self, items: Sequence[str], rng: random.Random) -> None:
        self._items = list(items)
        self._rng = rng
        self._hand: list[str] = []

    def __bool__(self) -> bool:
        return bool(self._items)

    def deal(self) -> str:
        if not self._hand:
            self._hand = list(self._items)
            self._rng.shuffle(self._hand)
        return self._hand.pop()


def _rng(seed: int, name: str) -> random.Random:
    return random.Random(f"{seed}:{name}")


def _join_words(words: Iterator[str], rng: random.Random, size: int, punct: Deck | None) -> str:
    """Words with spaces, some punctuation and line breaks, until ``size`` characters."""
    out: list[str] = []
    total = 0
    for word in words:
        if out:
            sep = "\n" if rng.random() < 0.04 else " "
            out.append(sep)
            total += 1
        out.append(word)
        total += len(word)
        if rng.random() < 0.12:
            mark = punct.deal() if punct and rng.random() < 0.7 else rng.choice(ASCII_PUNCTUATION)
            out.append(mark)
            total += 1
        if total >= size:
            break
    return "".join(out)


def _number(rng: random.Random, digits: Sequence[str]) -> str:
    return "".join(rng.choice(digits) for _ in range(rng.randint(1, 6)))


def _numbers(rng: random.Random, digits: Sequence[str]) -> Iterator[str]:
    while True:
        yield _number(rng, digits)


def _emoji_words(chars: BlockCharacters, rng: random.Random) -> Iterator[str]:
    """Emoji sequences: one to three emoji joined by ZWJ, some with a skin tone or VS16."""
    deck = Deck([c for c in chars.letters if unicodedata.category(c) == "So"], rng)
    while True:
        parts = []
        for _ in range(rng.choices((1, 2, 3), (5, 3, 2))[0]):
            part = deck.deal()
            roll = rng.random()
            if roll < 0.25:
                part += rng.choice(SKIN_TONES)
            elif roll < 0.4:
                part += VS16
            parts.append(part)
        yield ZWJ.join(parts)


def _script_words(chars: BlockCharacters, rng: random.Random) -> Iterator[str]:
    """Words of the block's characters: a mark after some bases, a virama between some
    consonants, a capital first letter where the block has case, some numbers."""
    letters = Deck(chars.letters, rng) if chars.letters else Deck(LATIN_BASES, rng)
    marks = Deck(chars.marks, rng)
    consonants = Deck(chars.consonants, rng)
    only_marks = not chars.letters
    mark_rate = 0.9 if only_marks else 0.3
    own = frozenset(chars.letters)
    while True:
        roll = rng.random()
        if roll < 0.05:
            yield _number(rng, "0123456789")
            continue
        if chars.digits and roll < 0.12:
            yield _number(rng, chars.digits)
            continue
        word: list[str] = []
        for _ in range(rng.randint(2, 10)):
            base = letters.deal()
            if not word and base.upper() in own and rng.random() < 0.3:
                base = base.upper()  # a capital first letter, where the block has it
            word.append(base)
            if marks and rng.random() < mark_rate:
                word.append(marks.deal())
                if rng.random() < 0.1:
                    word.append(marks.deal())
            if chars.virama and consonants and rng.random() < 0.2:
                word.append(chars.virama + consonants.deal())
        yield "".join(word)


def block_text(block: Block, seed: int = 0, size: int = GENERATED_SIZE) -> str:
    """About ``size`` characters of word-like runs of ``block``'s characters ("" for a
    block without letters, marks, numbers or symbols: surrogates, private use, tags)."""
    chars = block_characters(block)
    if not chars.usable:
        return ""
    rng = _rng(seed, block.name)
    if block.name in PICTOGRAPHIC:
        words = _emoji_words(chars, rng)
    elif not chars.letters and not chars.marks:
        words = _numbers(rng, chars.digits)
    else:
        words = _script_words(chars, rng)
    punct = Deck(chars.punctuation, rng) if chars.punctuation else None
    return _join_words(words, rng, size, punct)


def _letters(first: str, last: str) -> list[str]:
    return [
        chr(c) for c in range(ord(first), ord(last) + 1) if unicodedata.category(chr(c))[0] == "L"
    ]


def _case_words(lower: Sequence[str], rng: random.Random, style: str) -> Iterator[str]:
    deck = Deck(lower, rng)
    while True:
        word = "".join(deck.deal() for _ in range(rng.randint(2, 10)))
        yield word.upper() if style == "upper" else word[0].upper() + word[1:]


def _math_words(rng: random.Random) -> Iterator[str]:
    """Formulas: variables (ASCII, Greek, mathematical alphanumerics), numbers, operators."""
    operators = [c for c in map(chr, range(0x2200, 0x2300)) if unicodedata.category(c) == "Sm"]
    operators += list("+-=<>*/^")
    variables = list("xyznabcijk") + _letters("α", "ω")
    variables += [c for c in map(chr, range(0x1D400, 0x1D7CC)) if unicodedata.category(c) == "Lu"]
    ops, names = Deck(operators, rng), Deck(variables, rng)
    while True:
        roll = rng.random()
        if roll < 0.2:
            yield _number(rng, "0123456789")
        elif roll < 0.6:
            yield names.deal() + (rng.choice("₀₁₂ᵢⱼ²³") if rng.random() < 0.3 else "")
        elif roll < 0.7:
            yield "(" + names.deal() + ops.deal() + names.deal() + ")"
        else:
            yield ops.deal()


def _ascii_text(kind: str, rng: random.Random, size: int) -> str:
    lower = "abcdefghijklmnopqrstuvwxyz"
    punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    if kind == "random letters":
        return "".join(rng.choice(lower) for _ in range(size))
    if kind == "random mixed-case letters":
        return "".join(rng.choice(lower + lower.upper()) for _ in range(size))
    if kind == "punctuation runs":
        return "".join(rng.choice(punctuation) for _ in range(size))
    if kind == "digits":
        return "".join(rng.choice("0123456789") for _ in range(size))
    if kind == "digits between spaces":
        return " ".join(rng.choice("0123456789") for _ in range(size // 2))
    if kind == "numbers between spaces":
        return _join_words(_numbers(rng, "0123456789"), rng, size, None)
    if kind == "single letters between spaces":
        return " ".join(rng.choice(lower) for _ in range(size // 2))
    if kind == "base64":
        return base64.b64encode(rng.randbytes(size * 3 // 4)).decode()
    if kind == "hex":
        return rng.randbytes(size // 2).hex()
    if kind == "capitalised words":
        return _join_words(_case_words(lower, rng, "title"), rng, size, None)
    if kind == "upper-case words":
        return _join_words(_case_words(lower, rng, "upper"), rng, size, None)
    raise ValueError(f"no generated ASCII text {kind!r}")


ASCII_KINDS = (
    "random letters",
    "random mixed-case letters",
    "punctuation runs",
    "digits",
    "digits between spaces",
    "numbers between spaces",
    "single letters between spaces",
    "base64",
    "hex",
    "capitalised words",
    "upper-case words",
)


def hard_texts(seed: int = 0, size: int = GENERATED_SIZE) -> dict[str, str]:
    """Generated texts beside the blocks: hard ASCII, cased Cyrillic and Greek, math."""
    texts = {f"ascii: {kind}": _ascii_text(kind, _rng(seed, kind), size) for kind in ASCII_KINDS}
    scripts = {"Cyrillic": _letters("а", "я"), "Greek": _letters("α", "ω")}
    for script, lower in scripts.items():
        for style, label in (("title", "capitalised"), ("upper", "upper-case")):
            name = f"{label} {script}"
            words = _case_words(lower, _rng(seed, name), style)
            texts[name] = _join_words(words, _rng(seed, name + " glue"), size, None)
    texts["mathematical notation"] = _join_words(
        _math_words(_rng(seed, "math")), _rng(seed, "math glue"), size, None
    )
    return texts


# ---------------------------------------------------------------------------------------
# Samples: texts and their windows
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A text the sweep cuts windows from: ``kind`` is ``real``, ``block``, ``hard`` or
    ``joined`` (the generated texts one after another)."""

    name: str
    kind: str
    text: str


@dataclass(frozen=True)
class Window:
    """``source.text[start:stop]``; ``cut`` is ``char`` or ``word`` (the stop moved back to
    the last word boundary); ``length`` is the length asked for."""

    source: Source
    start: int
    stop: int
    length: int
    cut: str

    @property
    def text(self) -> str:
        return self.source.text[self.start : self.stop]

    def label(self) -> str:
        where = "" if self.start == 0 else f"@{self.start:,}"
        return f"{self.source.name}{where} [{self.length:,} {self.cut}]"


def word_stop(text: str, start: int, stop: int) -> int | None:
    """Where a window of ``text[start:stop]`` ends at a word boundary: the last stop at
    or before ``stop`` that is followed by whitespace or comes right after punctuation
    (scripts without spaces), or None when there is none in the window's second half."""
    floor = start + (stop - start) // 2
    for i in range(stop, floor, -1):
        if i >= len(text) or text[i].isspace() or unicodedata.category(text[i - 1])[0] == "P":
            return i
    return None


def line_starts(text: str, count: int) -> list[int]:
    """``count`` positions spread over ``text``, each moved on to the start of a line."""
    starts = []
    for k in range(1, count + 1):
        at = text.find("\n", len(text) * k // (count + 1))
        if 0 <= at < len(text) - 1 and at + 1 not in starts:
            starts.append(at + 1)
    return starts


def windows(source: Source, lengths: Sequence[int], extra_starts: int) -> list[Window]:
    """The sweep's windows of one source: every length from the start; the lengths up to
    :data:`OFFSET_LENGTH_LIMIT` also from ``extra_starts`` other line starts; each cut at
    the length and, where it differs, at the last word boundary before it."""
    text = source.text
    out: list[Window] = []
    starts = [0, *line_starts(text, extra_starts)]
    for start in starts:
        for length in lengths:
            if start and length > OFFSET_LENGTH_LIMIT:
                continue
            stop = start + length
            if stop > len(text):
                break
            out.append(Window(source, start, stop, length, "char"))
            if length >= 3:
                word = word_stop(text, start, stop)
                if word is not None and word != stop:
                    out.append(Window(source, start, word, length, "word"))
    if not any(w.start == 0 and w.stop == len(text) for w in out):
        out.append(Window(source, 0, len(text), len(text), "whole"))
    return out


# ---------------------------------------------------------------------------------------
# Real counts
# ---------------------------------------------------------------------------------------


class SourceCounter:
    """Real counts of windows that start at 0 of one long text: the text is cut into
    pieces where every bundled tokenizer splits anyway, each piece is counted once, and a
    window's count is the pieces before it plus its tail counted apart."""

    def __init__(self, text: str, backend: Estimator, piece_chars: int = PIECE_CHARS) -> None:
        self.text = text
        self.backend = backend
        pieces = split_text(text, piece_chars)
        self.ends = list(itertools.accumulate(len(p) for p in pieces))
        self._pieces = pieces
        self._counts: list[int | None] = [None] * len(pieces)

    def _piece(self, i: int) -> int:
        count = self._counts[i]
        if count is None:
            count = self._counts[i] = self.backend.estimate(self._pieces[i])
        return count

    def count(self, stop: int) -> int:
        """The real count of ``text[:stop]``."""
        # A cut stays a cut in a window that holds the character after it (the cut's
        # pattern looks one character ahead).
        k = bisect.bisect_right(self.ends, stop - 2)
        head = sum(self._piece(i) for i in range(k))
        tail_start = self.ends[k - 1] if k else 0
        return head + self.backend.estimate(self.text[tail_start:stop])


def real_counts(
    items: Sequence[Window], backends: dict[str, Estimator]
) -> dict[tuple[str, int, int], dict[str, int]]:
    """Every window's count by every backend, keyed by (source name, start, stop)."""
    counters: dict[tuple[str, str], SourceCounter] = {}
    out: dict[tuple[str, int, int], dict[str, int]] = {}
    for window in items:
        key = (window.source.name, window.start, window.stop)
        if key in out:
            continue
        counts = {}
        for name, backend in backends.items():
            if window.start == 0 and window.stop > PIECE_CHARS:
                counter = counters.get((window.source.name, name))
                if counter is None:
                    counter = SourceCounter(window.source.text, backend)
                    counters[(window.source.name, name)] = counter
                counts[name] = counter.count(window.stop)
            else:
                counts[name] = backend.estimate(window.text)
        out[key] = with_derived(counts)
    return out


# ---------------------------------------------------------------------------------------
# Ratios
# ---------------------------------------------------------------------------------------


@functools.cache
def without_framing(family: str, *, vocabulary: bool = True) -> Estimator:
    """The family's estimator with its framing set to 0: the estimate of the bare text.
    It is what :func:`estimator_for` gives: the profile checked by the family's vocabulary
    where that is on the machine (``vocabulary=False``: the profile alone)."""
    profile: Profile = get_profile(family)
    bare = ProfileEstimator(dataclasses.replace(profile, framing=0.0))
    return checked(bare) if vocabulary else bare


def checks() -> str:
    """In words, which families this machine checks by a vocabulary, by which one and at
    what scale (as :func:`estimator_for` does), and which count by their profile alone."""
    parts: list[str] = []
    alone: list[str] = []
    largest: list[str] = []
    for family in CHECKED_ON:
        estimator = without_framing(family)
        if isinstance(estimator, LargestEstimator):
            largest.append(f"{family} by the largest of its {len(estimator.parts)} families")
            continue
        if not isinstance(estimator, CheckedEstimator):
            alone.append(family)
            continue
        by = estimator.vocabulary.family
        scale = f" x{estimator.scale:g}" if estimator.scale != 1.0 else ""
        parts.append(family + (f" by {by}{scale}" if by != family else scale))
    checked_part = f"checked by the vocabularies: {', '.join(parts)}" if parts else ""
    alone_part = f"profiles alone: {', '.join(alone)}" if alone else ""
    return "; ".join(part for part in (checked_part, *largest, alone_part) if part)


@dataclass
class Ratio:
    window: Window
    estimate: int
    real: int

    @property
    def value(self) -> float:
        return self.estimate / self.real if self.real else math.inf


@dataclass
class FamilyRatios:
    family: str
    view: str  # "text" or "as used"
    checked_on: tuple[str, ...]
    ratios: list[Ratio] = field(default_factory=list)
    #: the lowest estimate / count of the family's :data:`FLOOR_OF` tokenizer (if any)
    floor: float = math.inf

    def values(self, keep: Callable[[Ratio], bool] = lambda r: True) -> list[float]:
        return [r.value for r in self.ratios if keep(r)]

    def failures(self) -> list[Ratio]:
        """The ratios outside :data:`WINDOW`; ``as used``, the ones under it only: the
        framing is what the provider adds around a block, which the real count of the bare
        text lacks, so there it is over by design (most on the shortest texts)."""
        high = WINDOW[1] if self.view == "text" else math.inf
        return [r for r in self.ratios if not WINDOW[0] <= r.value <= high]

    def verdict(self) -> str:
        return "pass" if self.ratios and not self.failures() else "FAIL" if self.ratios else "-"


Counts = dict[tuple[str, int, int], dict[str, int]]


@dataclass
class Report:
    """What one run measured: the windows, their real counts, the ratios, and the run."""

    windows: list[Window]
    counts: Counts
    results: list[FamilyRatios]
    meta: dict[str, Any]


#: Which estimator counts a text for a family in a view: ``(family, view, source)`` to an
#: estimator. The default is the library's (:func:`library_estimator`); a fit that holds
#: texts out can pass its own, for example the estimator fitted without ``source``.
EstimatorChoice = Callable[[str, str, Source], Estimator]


def library_estimator(family: str, view: str, source: Source) -> Estimator:
    """``estimator_for(family=...)``, without its framing in the ``text`` view: the
    profile checked by the family's vocabulary where that is on the machine."""
    return without_framing(family) if view == "text" else estimator_for(family=family)


def profile_estimator(family: str, view: str, source: Source) -> Estimator:
    """The profile alone (``--profiles``): what counts where no vocabulary is installed."""
    if view == "text":
        return without_framing(family, vocabulary=False)
    return estimator_for(family=family, vocabulary=False)


def measure(
    items: Sequence[Window],
    counts: Counts,
    backends: Iterable[str],
    families: Sequence[str],
    choose: EstimatorChoice = library_estimator,
) -> list[FamilyRatios]:
    """Every family's ratios in both views, in the order of ``items``."""
    have = derived_names(backends)
    results = []
    for family in families:
        checked = tuple(b for b in CHECKED_ON[family] if b in have)
        if not checked:
            continue
        for view in ("text", "as used"):
            result = FamilyRatios(family, view, checked)
            floor = FLOOR_OF.get(family)
            for window in items:
                estimator = choose(family, view, window.source)
                real_of = counts[(window.source.name, window.start, window.stop)]
                real = max(real_of[b] for b in checked)
                # ``as used``: a text as a message part, framing and all (``estimate`` is
                # the bare text's count since the framing moved to the message counter).
                count = part_counter(estimator) if view == "as used" else estimator.estimate
                estimate = count(window.text)
                result.ratios.append(Ratio(window, estimate, real))
                if real_of.get(floor):
                    result.floor = min(result.floor, estimate / real_of[floor])
            results.append(result)
    return results


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    text = f"{value:.3f}"
    return text if WINDOW[0] <= value <= WINDOW[1] else f"**{text}**"


def _worst(ratios: Sequence[Ratio], count: int, low: bool) -> str:
    ordered = sorted(ratios, key=lambda r: r.value, reverse=not low)[:count]
    return "; ".join(f"{r.window.label()} {r.value:.2f} ({r.estimate}/{r.real})" for r in ordered)


def length_bucket(window: Window) -> str:
    return "whole" if window.cut == "whole" else f"{window.length:,}"


#: Scripts and registers issue 10 names (absent from the measured texts), and what makes
#: them: the generated text of these blocks.
NAMED_BLOCKS = (
    "Greek Extended",  # polytonic Greek
    "Devanagari",  # with conjuncts
    "Thai",
    "Tibetan",
    "Georgian",
    "Armenian",
    "Ethiopic",
    "Mathematical Operators",
    "Combining Diacritical Marks",
    "Emoticons",  # ZWJ sequences with skin tones
    "Cyrillic",
    "CJK Unified Ideographs",
    "Hangul Syllables",
)


def whole_texts(result: FamilyRatios) -> dict[str, Ratio]:
    """Per text, the longest window from its start (the whole generated text)."""
    best: dict[str, Ratio] = {}
    for ratio in result.ratios:
        window = ratio.window
        if window.start:
            continue
        held = best.get(window.source.name)
        if held is None or window.stop > held.window.stop:
            best[window.source.name] = ratio
    return best


def _span(values: Sequence[float]) -> str:
    return f"{_fmt(min(values))}-{_fmt(max(values))}" if values else "-"


def _length_table(out: list[str], results: Sequence[FamilyRatios], real: bool) -> None:
    def keep(x: Ratio) -> bool:
        return (x.window.source.kind == "real") == real

    buckets = sorted(
        {length_bucket(x.window) for r in results for x in r.ratios if keep(x)},
        key=lambda b: math.inf if b == "whole" else int(b.replace(",", "")),
    )
    out.append("| length | " + " | ".join(r.family for r in results) + " |")
    out.append("|---:|" + "---|" * len(results))
    for bucket in buckets:
        cells = [
            _span(r.values(lambda x, b=bucket: keep(x) and length_bucket(x.window) == b))
            for r in results
        ]
        out.append(f"| {bucket} | " + " | ".join(cells) + " |")


def markdown(
    results: Sequence[FamilyRatios], meta: dict[str, Any], worst: int, every_block: bool = False
) -> str:
    out: list[str] = []
    out.append(
        f"{meta['windows']:,} windows of {meta['sources']} texts ({meta['real']} real, "
        f"{meta['blocks']} Unicode blocks, {meta['hard']} other generated, and the real and "
        f"the generated ones joined for the longest windows); "
        f"Python {meta['python']}, Unicode {meta['unicode']}, seed {meta['seed']}; "
        f"target {WINDOW[0]:.2f}-{WINDOW[1]:.2f}, **bold** = outside it. The real texts "
        "are the ones the profiles were fitted on (in-sample); the generated ones are not. "
        + (
            f"Estimates: {meta['checks']}.\n"
            if meta.get("checked")
            else "Every family's profile alone (--profiles, or no vocabulary installed).\n"
        )
    )
    for view in ("text", "as used"):
        out.append(f"### Per family, {view}\n")
        if view == "as used":
            out.append(
                "Framing included (what `fit` counts a text as a message part with), against "
                "the real count of the bare text: only the lower bound applies here, since "
                "the framing is what the provider adds around a block. *outside* counts the "
                "windows under it.\n"
            )
        out.append(
            "| family | vs | min | max | outside | verdict | real texts | windows of 1,000+ chars |"
        )
        out.append("|---|---|---:|---:|---:|---|---|---|")
        for r in (r for r in results if r.view == view):
            values = r.values()
            vs = "max of 5" if len(r.checked_on) > 1 else r.checked_on[0]
            real = r.values(lambda x: x.window.source.kind == "real")
            long = r.values(lambda x: x.window.stop - x.window.start >= 1_000)
            out.append(
                f"| {r.family} | {vs} | {_fmt(min(values))} | {_fmt(max(values))} | "
                f"{len(r.failures()):,} of {len(values):,} | {r.verdict()} | "
                f"{_span(real)} | {_span(long)} |"
            )
        out.append("")
        for r in (r for r in results if r.view == view and r.floor < math.inf):
            verdict = "never under it" if r.floor >= 1.0 else "**under it**"
            out.append(
                f"{r.family} against {FLOOR_OF[r.family]} itself (a public tokenizer it "
                f"must not be under): lowest {r.floor:.3f}, {verdict}.\n"
            )
    text_results = [r for r in results if r.view == "text"]
    out.append("### By length, real texts (text view): min-max\n")
    _length_table(out, text_results, real=True)
    out.append("\n### By length, generated texts (text view): min-max\n")
    _length_table(out, text_results, real=False)
    wholes = [whole_texts(r) for r in text_results]
    names = [n for n in NAMED_BLOCKS if n in wholes[0]]
    names += [n for n, x in wholes[0].items() if x.window.source.kind == "hard"]
    if every_block:
        names = [n for n, x in wholes[0].items() if x.window.source.kind != "real"]
    out.append("\n### Whole generated texts (text view)\n")
    out.append(
        "UTF-8 bytes / the largest real count: how far the safe bound (a byte-level BPE "
        "never needs more tokens than bytes) is above the count.\n"
    )
    out.append(
        "| text | chars | " + " | ".join(r.family for r in text_results) + " | UTF-8 bytes / real |"
    )
    out.append("|---|---:|" + "---:|" * (len(text_results) + 1))
    largest = {n: max(w[n].real for w in wholes) for n in names}
    for name in names:
        row = [wholes[i][name] for i in range(len(text_results))]
        cells = [_fmt(x.value) for x in row]
        text = row[0].window.text
        size = len(text.encode("utf-8")) / largest[name]
        out.append(f"| {name} | {len(text):,} | " + " | ".join(cells) + f" | {size:.2f} |")
    out.append("\n### Worst windows (text view)\n")
    for r in text_results:
        out.append(f"- **{r.family}** lowest: {_worst(r.ratios, worst, low=True)}")
        out.append(f"- **{r.family}** highest: {_worst(r.ratios, worst, low=False)}")
    out.append("\n### Blocks outside the target (text view, whole generated text)\n")
    for r, whole in zip(text_results, wholes, strict=True):
        texts = [x for x in whole.values() if x.window.source.kind == "block"]
        low = sorted((x for x in texts if x.value < WINDOW[0]), key=lambda x: x.value)
        high = sorted((x for x in texts if x.value > WINDOW[1]), key=lambda x: -x.value)
        out.append(
            f"- **{r.family}**: {len(low)} under, {len(high)} over of {len(texts)}. Under: "
            + (", ".join(f"{x.window.source.name} {x.value:.2f}" for x in low[:10]) or "none")
            + ("; ..." if len(low) > 10 else "")
            + ". Over: "
            + (", ".join(f"{x.window.source.name} {x.value:.2f}" for x in high[:10]) or "none")
            + ("; ..." if len(high) > 10 else "")
        )
    return "\n".join(out) + "\n"


def summary(results: Sequence[FamilyRatios]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        values = r.values()
        rows.append(
            {
                "family": r.family,
                "view": r.view,
                "checked_on": list(r.checked_on),
                "min": round(min(values), 4),
                "max": round(max(values), 4),
                "outside": len(r.failures()),
                "windows": len(values),
                "verdict": r.verdict(),
                **(
                    {"floor": FLOOR_OF[r.family], "floor_min": round(r.floor, 4)}
                    if r.floor < math.inf
                    else {}
                ),
            }
        )
    return rows


def as_json(report: Report) -> dict[str, Any]:
    """The summary, and every window with its real counts and each family's estimates."""
    estimates = {(r.family, r.view): r.ratios for r in report.results}
    rows = []
    for i, window in enumerate(report.windows):
        rows.append(
            {
                "text": window.source.name,
                "kind": window.source.kind,
                "start": window.start,
                "stop": window.stop,
                "length": window.length,
                "cut": window.cut,
                "real": report.counts[(window.source.name, window.start, window.stop)],
                "estimate": {f: r[i].estimate for (f, v), r in estimates.items() if v == "text"},
                "estimate_as_used": {
                    f: r[i].estimate for (f, v), r in estimates.items() if v == "as used"
                },
            }
        )
    return {
        "meta": report.meta,
        "target": list(WINDOW),
        "summary": summary(report.results),
        "windows": rows,
    }


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def generated_sources(
    seed: int, size: int, block_filter: Callable[[Block], bool] = lambda b: True
) -> list[Source]:
    sources = []
    for block in unicode_blocks():
        if not block_filter(block):
            continue
        text = block_text(block, seed, size)
        if text:
            sources.append(Source(block.name, "block", text))
    sources += [Source(name, "hard", text) for name, text in hard_texts(seed, size).items()]
    return sources


def real_sources(data: Path | None, limit: int) -> list[Source]:
    if data is None:
        return []
    return [
        Source(path.name, "real", path.read_text(encoding="utf-8")[:limit])
        for path in sorted((data / "texts").glob("*.txt"))
    ]


def joined_sources(reals: Sequence[Source], generated: Sequence[Source], size: int) -> list[Source]:
    """Texts of up to ``size`` characters for the longest windows (no single text has a
    million characters): the real texts in turns of 20,000 characters (cut where the
    tokenizers split anyway), and the generated texts one after another (from the first
    again when they are shorter)."""
    out = []
    if reals:
        turns = [split_text(s.text, 20_000) for s in reals]
        pieces: list[str] = []
        total = 0
        for round_ in itertools.zip_longest(*turns, fillvalue=""):
            for piece in round_:
                pieces.append(piece)
                total += len(piece)
            if total >= size:
                break
        name = "real texts in turns of 20,000 characters"
        out.append(Source(name, "real", "".join(pieces)[:size]))
    if generated:
        parts: list[str] = []
        total = 0
        for source in itertools.cycle(generated):  # again from the first, up to ``size``
            if total >= size:
                break
            parts.append(source.text)
            total += len(source.text) + 1
        joined = "\n".join(parts)[:size]
        out.append(Source("generated texts one after another", "joined", joined))
    return out


def data_dir(explicit: str | None = None) -> Path | None:
    """The shared data: ``--data``, else $WINDOWFIT_DATA, else ../shared/data."""
    candidates = [Path(explicit)] if explicit else []
    if os.environ.get("WINDOWFIT_DATA"):
        candidates.append(Path(os.environ["WINDOWFIT_DATA"]))
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    return next((path for path in candidates if (path / "texts").is_dir()), None)


def load_backends(names: Iterable[str]) -> dict[str, Estimator]:
    from windowfit.tokenizers import load_backend

    return {name: load_backend(name) for name in names}


def run(
    *,
    seed: int = 0,
    size: int = GENERATED_SIZE,
    lengths: Sequence[int] = LENGTHS,
    extra_starts: int = EXTRA_STARTS,
    data: Path | None = None,
    block_filter: Callable[[Block], bool] = lambda b: True,
    families: Sequence[str] = tuple(CHECKED_ON),
    backends: dict[str, Estimator] | None = None,
    choose: EstimatorChoice = library_estimator,
) -> Report:
    """Build the texts and windows, count them, and return the ratios and what was run."""
    reals = real_sources(data, max(lengths))
    generated = generated_sources(seed, size, block_filter)
    joined = joined_sources(reals, generated, max(lengths))
    items = [w for s in (*reals, *generated, *joined) for w in windows(s, lengths, extra_starts)]
    if backends is None:
        backends = load_backends(BACKENDS)
    counts = real_counts(items, backends)
    results = measure(items, counts, backends, families, choose)
    meta = {
        "windows": len(items),
        "sources": len(reals) + len(generated) + len(joined),
        "real": len(reals),
        "blocks": sum(s.kind == "block" for s in generated),
        "hard": sum(s.kind == "hard" for s in generated),
        "python": platform.python_version(),
        "unicode": unicodedata.unidata_version,
        "seed": seed,
        "size": size,
        "lengths": list(lengths),
        "data": str(data) if data else None,
    }
    return Report(items, counts, results, meta)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few blocks, short")
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="every figure as JSON, to PATH (the markdown still printed) or alone to stdout",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=None, help="characters per generated text")
    parser.add_argument("--data", help="the shared data (default: ../shared/data)")
    parser.add_argument("--no-data", action="store_true", help="generated texts only")
    parser.add_argument("--worst", type=int, default=5, help="worst windows listed per family")
    parser.add_argument("--blocks", action="store_true", help="a row for every block")
    parser.add_argument(
        "--profiles", action="store_true", help="the profiles alone, not checked by vocabularies"
    )
    args = parser.parse_args(argv)
    data = None if args.no_data else data_dir(args.data)
    started = time.perf_counter()
    choose = profile_estimator if args.profiles else library_estimator
    if args.quick:
        quick_blocks = {"Basic Latin", "Cyrillic", "Devanagari", "Thai", "Emoticons"}
        report = run(
            seed=args.seed,
            size=args.size or 500,
            lengths=[n for n in LENGTHS if n <= 10_000],
            extra_starts=1,
            data=data,
            block_filter=lambda b: b.name in quick_blocks,
            choose=choose,
        )
    else:
        report = run(seed=args.seed, size=args.size or GENERATED_SIZE, data=data, choose=choose)
    report.meta["checked"] = [
        f
        for f in CHECKED_ON
        if not args.profiles and isinstance(without_framing(f), CheckedEstimator)
    ]
    report.meta["checks"] = checks()
    report.meta["seconds"] = round(time.perf_counter() - started, 1)
    if args.json and args.json != "-":
        Path(args.json).write_text(json.dumps(as_json(report)) + "\n", encoding="utf-8")
    if args.json == "-":
        json.dump(as_json(report), sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(markdown(report.results, report.meta, args.worst, args.blocks))
        sys.stdout.write(f"\n({report.meta['seconds']} s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
