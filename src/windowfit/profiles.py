"""Calibrated token estimates per tokenizer family, as fast as the seed's rule.

:func:`estimator_for` picks the estimator for a model (or a tokenizer family) and returns
an :class:`~windowfit.tokens.Estimator`; ``estimate(text)`` never runs a tokenizer.

How a text is counted
---------------------

Every character gets a *class* (:data:`CHARACTER_CLASSES`): lowercase and uppercase ASCII
letters, digits, punctuation (and control characters), spaces and tabs, newlines, and for
the others the code-point range of its script (Latin-1, Latin-extended, Greek, Cyrillic, the other
Cyrillic, Armenian, Hebrew, Arabic, Syriac/Thaana/NKo, Devanagari and the other Indic
scripts, Thai, Lao, Tibetan, Myanmar, Georgian, Ethiopic, Vietnamese, polytonic Greek,
Hangul, Han, kana and
CJK punctuation, emoji, general symbols, other). Each character then gets a weight that
depends on its class *and on the class of the character before it* (the pair of the
two). That is how the count sees what tokenizers see: a letter after a space starts a
word (most words are one token, the space before a word is free), a digit after a
non-digit starts a number (and a space before it is a token of its own), a lowercase to
uppercase step splits ``camelCase``, a run of spaces is an indentation token, a Cyrillic
letter after a space starts a Cyrillic word. A pair cannot see how long a run is, so two
run terms count what it misses: every whole 16 lowercase letters in a row (a long English
word is one or two tokens, a string of random letters one per two or three) and every
whole 4 punctuation characters in a row (``bytes.count`` of the repeated class byte, one
C pass each). The weights are :data:`PARAMETERS` (tokens per occurrence), fitted per
family; the estimate is their sum, rounded up (at least 1 for a text that is not empty).

The work is C-speed passes over bytes, none per character in Python: the text is encoded
as UTF-8, ``bytes.translate`` turns each ASCII or lead byte into its class and drops the
continuation bytes (the class of a non-ASCII character is the range of its lead byte, or,
for the lead bytes E0 and E1, of its page: see below), a
big-integer shift and ``or`` pair every character with the one before it, a second
``translate`` turns pairs into weights (in 1/128 token), and ``zlib.adler32`` sums them
exactly (one call per 256 weights: their sum plus one stays below its modulus). Pure
ASCII takes a shorter way: its groups are its classes, so one multiplication of the
classes pairs them. It runs more than ten times
faster than tiktoken on every script measured (``benchmarks/tokens_report.py``).

What that costs in resolution: a class is the range of a lead byte (64 to 4,096 code
points), chosen where the scripts that share one tokenize alike: Latin-1 apart from Latin
Extended and IPA, Cyrillic U+0400-047F apart from the letters of other languages
(U+0480-053F, with the Armenian capitals), Armenian (U+0540-057F) apart from Hebrew (with
the last Armenian letters), Arabic apart from Syriac, Thaana and NKo. Two lead bytes hold
scripts that do not tokenize alike and cannot be cut by lead byte: E0 (Devanagari and the
other Indic scripts, Samaritan, Mandaic and Arabic Extended, Thai, Lao, Tibetan) and E1
(U+1000-1FFF: Myanmar, Georgian, Ethiopic, Khmer, Vietnamese, polytonic Greek...). Their
characters are classed by page and quarter of a page (64 code points,
:data:`_PAGE_CLASSES`) in a second pass over the text's UTF-16 form (high bytes: the
page; low bytes: the quarter; translates and big-integer passes over one byte per
character), which only a text holding E1, or E0 on a split page, pays: ASCII never
reaches it, and a text of other scripts (Hindi included, which pays one encoding to see
it has no Thai) keeps its lead-byte classes. No real text in the data holds these
scripts, so their rates are first the least that counts random words of their blocks
(``benchmarks/calibrate.py``'s ``GENERATED_CLASSES``) 1.5% high, at most 4 tokens per
character. Random words are harder than real text of a script (that rate counted real
Georgian 5.5x, Hebrew 2.7x, Thai 2.5x high for o200k), so where real text of a script
exists (the translation catalogs of the Django wheel: Hebrew, Georgian, Armenian, Thai,
Myanmar) each family's rate is then lowered to what counts it 15% high, checked on
Sphinx's catalogs (held out: 1.02 or more); ``conservative`` still counts random words
of those blocks high. One pair weight holds at most 255/128 tokens, so what a
character of a heavier class costs beyond that (``Profile.extras``: emoji, most of the
generated classes, and the unmeasured ones) is counted per character apart; the classes
no text measures (private use, planes 4-16) count :data:`UNMEASURED_RATE`, the UTF-8 byte
bound of byte-level BPE. A BMP character the family's tokenizer has no token for (it
costs 2 or more alone) is never counted less than that cost: an extra per code point
(:func:`char_extra_units`, :mod:`windowfit._rare_chars`) is added for it, from a table of
the real tokenizers' costs. The rest of U+1100-1DFF (Hangul Jamo, Cherokee, Canadian
syllabics, Khmer, Mongolian...) shares one class whose rate is the highest its generated
blocks need.

Families and where their numbers come from
------------------------------------------

``o200k``, ``cl100k``, ``deepseek``, ``tekken``
    Fitted by ``benchmarks/calibrate.py`` on the real tokenizers' counts of every text
    in ``../shared/data/texts`` (whole, and in pieces), of every message part of the
    recorded agent runs in ``../shared/data/trajectories``, and of generated hard ASCII
    (random letters, punctuation runs, base64, hex, digits, digits and letters between
    spaces), with an asymmetric loss that punishes under-counting four times more, then
    lifted so that every text is counted at least 1.5% high; the classes only generated
    words measure are then set on those (above). The method was chosen by held-out figures
    (``calibrate.py --holdout``: every text, generated kind and folder of runs fitted
    without it, then measured).
    ``deepseek``'s framing and level are then set on the ``prompt_tokens`` that
    DeepSeek's API reported for the mini-swe-agent runs (the chat template adds tokens
    around every message and tool call).

``claude``
    Claude 3 and later use a tokenizer that Anthropic has not published. What is
    public is the count the API reports: the Claude Code sessions in
    ``../shared/data/trajectories/claude_code`` carry the provider's input tokens
    (including cache reads and writes) of every request. Those logs leave out the
    system prompt and the tool definitions, so the *differences* between consecutive
    requests' totals are compared with the estimate of the messages added in between.
    The legacy (Claude 1/2) tokenizer that ships in ``litellm`` is used as the guide
    for the *shape* of the profile: its per-class rates are fitted like the other
    families', then scaled and given a framing so that the estimates match what the
    API counted on that traffic. The traffic is mostly ASCII (code, tool output,
    JSON); for the scripts it lacks (CJK, Cyrillic, Indic...), the legacy tokenizer's
    rates (times the same scale) are the only evidence, and that tokenizer is among the
    least efficient measured on most scripts, so the profile errs high there.

``conservative``
    For unknown models: at least every other family's estimate on every text, by
    construction (each pair weight and the framing are the largest of the families').
    Where the families' vocabularies are on the machine, :func:`estimator_for` checks
    it by all of them (:class:`windowfit.vocabulary.LargestEstimator`: the largest of
    the five checked estimates), since a profile alone counts the words of Latin-script
    languages other than English as English ones (down to 0.40 of the real count).

``seed``
    The write-up's rule (:func:`windowfit.tokens.estimate_tokens`), unchanged.

Framing
-------

Providers wrap every block of a request in tokens of their own (Claude renders tool
calls and results in a markup of its own; DeepSeek's chat template adds markers around
messages and calls). :mod:`windowfit.sizing` adds small generic overheads per message,
block and tool call; ``framing`` is what the family adds on top, per text part (a text
block, a tool call's name, its arguments, a tool result). It is measured from the
providers' counts and is 0 for the families without such data. It is not part of
``estimate(text)``, which counts the text alone (a 25-character sentence is about 6
tokens, not 6 plus Claude's framing): message counting adds it once per non-empty text
part (``ProfileEstimator.estimate_part``, :func:`windowfit.tokens.part_counter`), so the
totals of a request are what they were fitted to.
"""

from __future__ import annotations

import math
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from . import _profile_table, _rare_chars
from ._speedup import Weigher
from .errors import SettingsError
from .models import model_info
from .tokens import Estimator, SeedEstimator

__all__ = [
    "CHARACTER_CLASSES",
    "FAMILIES",
    "PAIR_PARAMETERS",
    "PARAMETERS",
    "UNMEASURED_RATE",
    "WEIGHT_UNIT",
    "ClassEstimate",
    "Profile",
    "ProfileEstimator",
    "char_extra_units",
    "default_estimator",
    "estimator_for",
    "family_for_model",
    "get_profile",
    "pair_code_counts",
    "parameter_counts",
]

#: Pair weights are whole numbers of this fraction of a token (one byte each, so at most
#: 255/128 tokens per byte; heavier characters spread their weight over two bytes).
WEIGHT_UNIT = 128

# ----------------------------------------------------------------------------------------
# Character classes
# ----------------------------------------------------------------------------------------
#
# The UTF-8 bytes are translated to one byte per character: continuation bytes are
# dropped, and an ASCII byte or a lead byte becomes ``class << 3 | group`` (a class of 5
# bits, a group of 3). The group says what a character is to the one after it: the start
# of the text, a lowercase or uppercase letter, a digit, punctuation, whitespace, an emoji
# or a newline, or a non-ASCII character. A pair code is one byte: the class of a
# character (bits 3-7) and the group of the character before it (bits 0-2).

(
    _NOTHING,
    _LOWER,
    _UPPER,
    _DIGIT,
    _PUNCT,
    _SPACE,
    _NEWLINE,
    _LATIN,
    _LATIN_EXT,
    _GREEK,
    _CYRILLIC,
    _CYRILLIC_EXT,
    _ARMENIAN,
    _HEBREW,
    _ARABIC,
    _RTL_OTHER,
    _INDIC,
    _THAI,
    _LAO,
    _TIBETAN,
    _MYANMAR,
    _GEORGIAN,
    _ETHIOPIC,
    _OTHER_SCRIPTS,
    _VIETNAMESE,
    _GREEK_EXT,
    _SYMBOLS,
    _KANA,
    _HAN,
    _HANGUL,
    _EMOJI,
    _OTHER,
) = range(32)

_G_START, _G_LOWER, _G_UPPER, _G_DIGIT, _G_PUNCT, _G_SPACE, _G_NEWLINE, _G_SCRIPT = range(8)
_LETTER_GROUPS = frozenset({_G_LOWER, _G_UPPER})
_SPACE_GROUPS = frozenset({_G_SPACE, _G_NEWLINE})
#: Groups before a non-ASCII character that make it the start of a word.
_WORD_BREAK_GROUPS = frozenset({_G_START, _G_DIGIT, _G_PUNCT, _G_SPACE, _G_NEWLINE})

_GROUP_OF: dict[int, int] = {
    _LOWER: _G_LOWER,
    _UPPER: _G_UPPER,
    _DIGIT: _G_DIGIT,
    _PUNCT: _G_PUNCT,
    _SPACE: _G_SPACE,
    _NEWLINE: _G_NEWLINE,
}


def _class_of_byte(b: int) -> int:
    """The class of an ASCII byte or of a UTF-8 lead byte (the code-point range)."""
    if b < 0x80:
        c = chr(b)
        if "a" <= c <= "z":
            return _LOWER
        if "A" <= c <= "Z":
            return _UPPER
        if "0" <= c <= "9":
            return _DIGIT
        if c == "\n":
            return _NEWLINE
        if c in " \t\r\x0b\x0c":
            return _SPACE
        return _PUNCT  # punctuation, symbols, control characters
    if b in (0xC2, 0xC3):
        return _LATIN  # U+0080-00FF
    if 0xC4 <= b <= 0xCB:
        return _LATIN_EXT  # U+0100-02FF
    if 0xCC <= b <= 0xCF:
        return _GREEK
    if b in (0xD0, 0xD1):
        return _CYRILLIC  # U+0400-047F
    if 0xD2 <= b <= 0xD4:
        return _CYRILLIC_EXT  # U+0480-053F (Armenian capitals from U+0531 with them)
    if b == 0xD5:
        return _ARMENIAN  # U+0540-057F
    if b in (0xD6, 0xD7):
        return _HEBREW  # U+0580-05FF (the last Armenian letters with the Hebrew points)
    if 0xD8 <= b <= 0xDB:
        return _ARABIC
    if 0xDC <= b <= 0xDF:
        return _RTL_OTHER
    if b == 0xE0:
        return _INDIC  # U+0800-0FFF; Thai, Lao and Tibetan by their page (_PAGE_CLASSES)
    if b == 0xE1:
        return _OTHER_SCRIPTS  # U+1000-1FFF; split by page (_PAGE_CLASSES)
    if b == 0xE2:
        return _SYMBOLS
    if b in (0xE3, 0xEF):
        return _KANA
    if 0xE4 <= b <= 0xE9:
        return _HAN
    if 0xEA <= b <= 0xED:
        return _HANGUL
    if b == 0xF0:
        return _EMOJI
    return _OTHER  # EE (private use), F1-F4 (planes 4-16), and bytes UTF-8 never has


_CLASS_TABLE = bytes(
    _class_of_byte(b) << 3 | _GROUP_OF.get(_class_of_byte(b), _G_SCRIPT) for b in range(256)
)
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))

# A lead byte that holds scripts which tokenize differently is split by the character's
# page (code point // 256) and quarter of a page (64 code points): E0 holds Thai, Lao and
# Tibetan beside the Indic scripts, E1 the U+1000-1FFF blocks. Only a text whose classes
# hold E1's class, or E0's and a page of this table, pays for it (one UTF-16 encoding,
# two slices, a few translates and big-integer passes over one byte per character);
# ASCII and every other text never do.

#: Page -> the class of each of its four quarters (the pages of E0 and E1 that differ
#: from their lead byte's class; the others keep it).
_PAGE_CLASSES: Mapping[int, tuple[int, int, int, int]] = MappingProxyType(
    {
        0x08: (_RTL_OTHER,) * 4,
        0x0E: (_THAI, _THAI, _LAO, _LAO),
        0x0F: (_TIBETAN,) * 4,
        0x10: (_MYANMAR, _MYANMAR, _MYANMAR, _GEORGIAN),
        0x12: (_ETHIOPIC,) * 4,
        0x13: (_ETHIOPIC, _ETHIOPIC, _OTHER_SCRIPTS, _OTHER_SCRIPTS),
        0x1C: (_OTHER_SCRIPTS, _OTHER_SCRIPTS, _GEORGIAN, _OTHER_SCRIPTS),
        0x1E: (_VIETNAMESE,) * 4,
        0x1F: (_GREEK_EXT,) * 4,
    }
)
#: The pages of E0 that are split (a text of E0 characters on other pages is all Indic).
_E0_SPLIT_PAGES = tuple(bytes([page]) for page in _PAGE_CLASSES if page < 0x10)
#: A UTF-16 unit's high byte -> its page's index in _PAGE_CLASSES, times 4 (0: not split);
#: a low surrogate (DC-DF) -> 0xFC, so that the second unit of a pair can be dropped.
_SURROGATE_KEY = 0xFC
_PAGE_KEYS = bytes(
    _SURROGATE_KEY
    if 0xDC <= b <= 0xDF
    else 4 * (1 + list(_PAGE_CLASSES).index(b))
    if b in _PAGE_CLASSES
    else 0
    for b in range(256)
)
#: A UTF-16 unit's low byte -> its quarter of the page.
_QUARTERS = bytes(b >> 6 for b in range(256))
#: Page key + quarter -> the class byte of the character (0: keep the lead byte's).
_KEY_CLASSES = bytes(
    _PAGE_CLASSES[list(_PAGE_CLASSES)[key // 4 - 1]][key % 4] << 3 | _G_SCRIPT
    if 4 <= key < 4 * (1 + len(_PAGE_CLASSES))
    else 0
    for key in range(256)
)
_NONZERO_TO_FF = bytes([0] + [0xFF] * 255)
_SURROGATE_KEYS = bytes(range(_SURROGATE_KEY, 256))


def _split_lead_classes(text: str, classes: bytes) -> bytes:
    """``classes`` with the characters of split pages (``_PAGE_CLASSES``) given their
    page's class, when there are any (else ``classes`` itself)."""
    e1, e0 = _CLASS_TABLE[0xE1], _CLASS_TABLE[0xE0]
    if e1 not in classes:
        if e0 not in classes:
            return classes
        units = text.encode("utf-16-be", "surrogatepass")
        pages = units[::2]
        if not any(page in pages for page in _E0_SPLIT_PAGES):
            return classes
    else:
        units = text.encode("utf-16-be", "surrogatepass")
        pages = units[::2]
    keys = (
        int.from_bytes(pages.translate(_PAGE_KEYS), "little")
        + int.from_bytes(units[1::2].translate(_QUARTERS), "little")
    ).to_bytes(len(pages), "little")
    if len(units) != 2 * len(text):  # a character beyond the BMP is two units
        keys = keys.translate(None, _SURROGATE_KEYS)
    found = keys.translate(_KEY_CLASSES)
    if len(found) != len(classes):  # a lone low surrogate: one character at a time
        return _split_lead_classes_slowly(text, classes)
    size = len(classes)
    mask = int.from_bytes(found.translate(_NONZERO_TO_FF), "little")
    merged = (int.from_bytes(classes, "little") & ~mask) | int.from_bytes(found, "little")
    return merged.to_bytes(size, "little")


_bmp_classes: bytes | None = None
_bmp_lock = threading.Lock()


def bmp_classes() -> bytes:
    """The class byte of every code point of the Basic Multilingual Plane (65,536 bytes,
    surrogates included): the table the C speedup looks characters up in. It is made the
    way the Python path classes a character, from its UTF-8 lead byte (``_CLASS_TABLE``)
    and the split pages (``_PAGE_CLASSES``); a character's class never depends on its
    neighbours, and the tests check every code point alone against :func:`_classes`.
    Built once, on first use."""
    global _bmp_classes
    if _bmp_classes is None:
        with _bmp_lock:
            if _bmp_classes is None:
                _bmp_classes = _make_bmp_classes()
    return _bmp_classes


def _make_bmp_classes() -> bytes:
    table = _CLASS_TABLE
    # U+0000-007F: the byte itself; U+0080-07FF: lead 0xC0 | cp >> 6 (64 code points
    # each, from C2); U+0800-FFFF: lead 0xE0 | cp >> 12 (4,096 each, E0 from U+0800).
    parts = [table[:0x80]]
    parts += [bytes([table[0xC0 | k]]) * 64 for k in range(2, 32)]
    parts.append(bytes([table[0xE0]]) * 0x800)
    parts += [bytes([table[0xE0 | k]]) * 0x1000 for k in range(1, 16)]
    classes = bytearray(b"".join(parts))
    for page, quarters in _PAGE_CLASSES.items():
        for quarter, cls in enumerate(quarters):
            start = page << 8 | quarter << 6
            classes[start : start + 64] = bytes([cls << 3 | _G_SCRIPT]) * 64
    return bytes(classes)


def _split_lead_classes_slowly(text: str, classes: bytes) -> bytes:
    """:func:`_split_lead_classes` one character at a time (for a text that holds a lone
    surrogate, which the fast way cannot align)."""
    out = bytearray(classes)
    for i, char in enumerate(text):
        quarters = _PAGE_CLASSES.get(ord(char) >> 8)
        if quarters is not None:
            out[i] = quarters[(ord(char) >> 6) & 3] << 3 | _G_SCRIPT
    return bytes(out)


@dataclass(frozen=True)
class CharacterClass:
    """A class of characters the estimate counts by: its name, what it holds, and whether
    its rate is measured (``False``: no measured text has it, and it counts
    :data:`UNMEASURED_RATE` tokens per character, more than any measured script takes)."""

    name: str
    description: str
    measured: bool = True


#: The character classes, in the order the ``tokens`` command lists them.
CHARACTER_CLASSES: tuple[CharacterClass, ...] = (
    CharacterClass("lower", "ASCII lowercase letters"),
    CharacterClass("upper", "ASCII uppercase letters"),
    CharacterClass("digit", "ASCII digits"),
    CharacterClass("punct", "ASCII punctuation, symbols and control characters"),
    CharacterClass("space", "spaces and tabs"),
    CharacterClass("newline", "line feeds"),
    CharacterClass("latin", "Latin-1 (U+0080-00FF)"),
    CharacterClass("latin_ext", "Latin Extended-A and -B, IPA, spacing modifiers (U+0100-02FF)"),
    CharacterClass("greek", "combining marks, Greek (U+0300-03FF)"),
    CharacterClass("cyrillic", "Cyrillic: Russian, Ukrainian, Serbian... (U+0400-047F)"),
    CharacterClass(
        "cyrillic_ext",
        "Cyrillic of other languages, Cyrillic Supplement, Armenian capitals (U+0480-053F)",
    ),
    CharacterClass("armenian", "Armenian (U+0540-057F)"),
    CharacterClass("hebrew", "Hebrew, and the Armenian letters of U+0580-058F (U+0580-05FF)"),
    CharacterClass("arabic", "Arabic (U+0600-06FF)"),
    CharacterClass(
        "rtl_other",
        "Syriac, Arabic Supplement, Thaana, NKo, Samaritan, Mandaic, Arabic Extended (U+0700-08FF)",
    ),
    CharacterClass("indic", "Devanagari and the other Indic scripts (U+0900-0DFF)"),
    CharacterClass("thai", "Thai (U+0E00-0E7F)"),
    CharacterClass("lao", "Lao (U+0E80-0EFF)"),
    CharacterClass("tibetan", "Tibetan (U+0F00-0FFF)"),
    CharacterClass("myanmar", "Myanmar, Georgian capitals (U+1000-10BF)"),
    CharacterClass("georgian", "Georgian (U+10C0-10FF, U+1C80-1CBF)"),
    CharacterClass("ethiopic", "Ethiopic (U+1200-137F)"),
    CharacterClass(
        "other_scripts",
        "Hangul Jamo, Cherokee, Canadian syllabics, Khmer, Mongolian, Balinese, phonetic "
        "extensions and the other blocks of U+1100-1DFF",
    ),
    CharacterClass("vietnamese", "Latin Extended Additional: Vietnamese (U+1E00-1EFF)"),
    CharacterClass("greek_ext", "Greek Extended: polytonic Greek (U+1F00-1FFF)"),
    CharacterClass(
        "symbols", "general punctuation, arrows, math, box drawing, dingbats (U+2000-2FFF)"
    ),
    CharacterClass(
        "kana", "CJK punctuation, Hiragana, Katakana, fullwidth forms (U+3000-3FFF, U+F000+)"
    ),
    CharacterClass("han", "Han ideographs (U+4000-9FFF)"),
    CharacterClass("hangul", "Yi, Hangul syllables (U+A000-DFFF)"),
    CharacterClass("emoji", "emoji, and planes 1-3 (U+10000-3FFFF)"),
    CharacterClass("other", "private use, planes 4-16 (U+E000-EFFF, U+40000+)", measured=False),
)

_CLASS_NAMES = tuple(c.name for c in CHARACTER_CLASSES)
_NAME_OF_CLASS = dict(zip(range(_LOWER, _OTHER + 1), _CLASS_NAMES, strict=True))

#: Tokens per character of the classes no text measures (private use, planes 4-16): the
#: safe bound of byte-level BPE, which never needs more tokens than UTF-8 bytes (at most
#: 4 per character). More than one pair weight holds: the rest is a class extra.
UNMEASURED_RATE = 4.0
UNMEASURED_RATES: Mapping[str, float] = MappingProxyType(
    {c.name: UNMEASURED_RATE for c in CHARACTER_CLASSES if not c.measured}
)

# ----------------------------------------------------------------------------------------
# Parameters: what each pair of classes costs
# ----------------------------------------------------------------------------------------

#: Runs the pair model cannot see by itself: a pair looks one character back, so a long
#: English word and a string of random letters cost the same per letter. Every whole
#: ``LOWER_RUN`` lowercase letters in a row (``bytes.count`` of the class byte repeated,
#: non-overlapping: a run of ``n`` counts ``n // LOWER_RUN``) and every whole
#: ``PUNCT_RUN`` punctuation characters in a row add their own weight. Words of English
#: (and most identifiers) are shorter than 16 letters; random letters, hashes in letters,
#: and long runs of symbols are not.
LOWER_RUN = 16
PUNCT_RUN = 4

#: The parameters of a profile, in tokens per occurrence. The character classes count
#: per character; the others per occurrence of the pair they describe.
PARAMETERS: Mapping[str, str] = MappingProxyType(
    {
        **{c.name: f"per character: {c.description}" for c in CHARACTER_CLASSES},
        "word": "an ASCII letter after something that is not a letter (a word starts)",
        "camel": "an uppercase letter right after a lowercase one (camelCase splits)",
        "number": "a digit after something that is not a digit (a number starts)",
        "space_digit": "a digit right after whitespace (the space is a token of its own)",
        "punct_run": "punctuation after something that is not punctuation",
        "space_punct": "punctuation right after whitespace",
        "space_run": "a space or newline after something that is not whitespace",
        "indent": "a space after whitespace (indentation, aligned columns)",
        "blank_line": "a newline after whitespace",
        "after_script": "an ASCII letter, digit or punctuation right after a non-ASCII character",
        "script_word": "a non-ASCII character after whitespace, punctuation, a digit or the start",
        "lower_run": (
            f"every {LOWER_RUN} lowercase ASCII letters in a row (a long run of letters that is "
            "not a word, such as an identifier or random letters, splits into short tokens)"
        ),
        "punct_long": (
            f"every {PUNCT_RUN} ASCII punctuation characters in a row (random punctuation "
            "takes about a token per character or two)"
        ),
    }
)

#: The parameters counted per run, not per pair (see :data:`LOWER_RUN`).
RUN_PARAMETERS: tuple[str, ...] = ("lower_run", "punct_long")


@dataclass(frozen=True)
class _PairRole:
    """What one pair code means: the parameters it carries, and the class of the
    character it counts (``None`` for codes that never occur)."""

    parameters: tuple[str, ...]
    owner: str | None


def _pair_role(code: int) -> _PairRole:
    cur, prev = code >> 3, code & 7
    if cur == _NOTHING or cur > _OTHER:
        return _PairRole((), None)  # never occurs
    name = _NAME_OF_CLASS[cur]
    params = [name]
    if cur in (_LOWER, _UPPER) and prev not in _LETTER_GROUPS:
        params.append("word")
    if cur == _UPPER and prev == _G_LOWER:
        params.append("camel")
    if cur == _DIGIT and prev != _G_DIGIT:
        params.append("number")
    if cur == _DIGIT and prev in _SPACE_GROUPS:
        params.append("space_digit")
    if cur == _PUNCT and prev != _G_PUNCT:
        params.append("punct_run")
    if cur == _PUNCT and prev in _SPACE_GROUPS:
        params.append("space_punct")
    if cur in (_SPACE, _NEWLINE) and prev not in _SPACE_GROUPS:
        params.append("space_run")
    if cur == _SPACE and prev in _SPACE_GROUPS:
        params.append("indent")
    if cur == _NEWLINE and prev in _SPACE_GROUPS:
        params.append("blank_line")
    if cur in (_LOWER, _UPPER, _DIGIT, _PUNCT) and prev == _G_SCRIPT:
        params.append("after_script")
    if cur >= _LATIN and prev in _WORD_BREAK_GROUPS:
        params.append("script_word")
    return _PairRole(tuple(params), name)


_ROLES: tuple[_PairRole, ...] = tuple(_pair_role(code) for code in range(256))

#: The parameters each pair code carries, for fitting (the sum of a pair's weights must
#: fit in one byte, 255/128 tokens, except a heavy class's: see ``Profile.extras``).
PAIR_PARAMETERS: tuple[tuple[str, ...], ...] = tuple(role.parameters for role in _ROLES)

# ----------------------------------------------------------------------------------------
# Counting
# ----------------------------------------------------------------------------------------

#: Texts are paired and summed in pieces of this many characters (the pair across a cut
#: is kept), so that the masks below have a fixed size.
_PIECE = 1 << 18
_masks: tuple[int, int] | None = None
_mask_lock = threading.Lock()


def _get_masks() -> tuple[int, int]:
    """Integers whose every byte is 0xF8 (class bits) and 0x07 (group bits)."""
    global _masks
    if _masks is None:
        with _mask_lock:
            if _masks is None:
                size = _PIECE + 1
                _masks = (
                    int.from_bytes(b"\xf8" * size, "little"),
                    int.from_bytes(b"\x07" * size, "little"),
                )
    return _masks


def _classes(text: str) -> bytes:
    """One byte per character: ``class << 3 | group`` (see :meth:`ProfileEstimator.estimate`,
    which does the same inline)."""
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate counts as Hangul
    if len(data) == len(text):
        return data.translate(_CLASS_TABLE)
    return _split_lead_classes(text, data.translate(_CLASS_TABLE, _CONTINUATION_BYTES))


def _pairs(classes: bytes) -> bytes:
    """The pair code of every character (and one byte of padding at the end)."""
    class_bits, group_bits = _get_masks()
    codes = int.from_bytes(classes, "little")
    return ((codes & class_bits) | (codes & group_bits) << 8).to_bytes(len(classes) + 1, "little")


#: Texts of at most this many characters have their weights summed by one adler32 call:
#: with the padding byte that is 256 weights of at most 255, and their sum plus one
#: (at most 65,281) stays below adler32's modulus (65,521), so the low half is exact.
_SHORT = 255


def _pieces(classes: bytes) -> Iterator[tuple[bytes, int, int]]:
    """``(pair codes, first, stop)`` per piece: sum ``codes[first:stop]``."""
    size = len(classes)
    if size <= _PIECE:
        yield _pairs(classes), 0, size
        return
    for start in range(0, size, _PIECE):
        first = start - 1 if start else 0  # keep the character before, for the pair
        piece = classes[first : start + _PIECE]
        yield _pairs(piece), start - first, len(piece)


def _nibble_tables(table: bytes) -> tuple[bytes, bytes]:
    """The high and low nibbles of a table's weights, as tables of their own (what
    :func:`_weighted_units` is given, and joins back into the table once)."""
    return bytes(w >> 4 for w in table), bytes(w & 15 for w in table)


#: Weights summed per adler32 call by :func:`_weight_sum`: 256 of at most 255, plus one,
#: stay below adler32's modulus (see :data:`_SHORT`).
_SUM_PIECE = _SHORT + 1


def _weight_sum(weights: bytes | memoryview) -> int:
    """The sum of ``weights`` (bytes), exactly: one adler32 call per 256 of them, on
    views of the one string. Measured cheaper on agent traffic than summing the weights'
    high and low nibbles 4,096 at a time (a text of 4,096 characters: 16 calls of a loop
    against 8,192 bytes more to translate and sum)."""
    view, adler32 = memoryview(weights), zlib.adler32
    total = 0
    for k in range(0, len(weights), _SUM_PIECE):
        total += adler32(view[k : k + _SUM_PIECE]) & 0xFFFF
    return total - -(-len(weights) // _SUM_PIECE)  # each call's sum starts at 1


#: The weight tables of the nibble tables given to :func:`_weighted_units` (one per
#: profile; a few dozen at most).
_TABLES: dict[tuple[bytes, bytes], bytes] = {}


def _weighted_units(classes: bytes, high: bytes, low: bytes) -> int:
    """The sum of the pair weights, in 1/:data:`WEIGHT_UNIT` tokens (``high``/``low``:
    the nibble tables of the profile's weights): one translate to the weights, summed
    256 at a time (:func:`_weight_sum`), fewer passes than the nibbles' two."""
    table = _TABLES.get((high, low))
    if table is None:
        table = bytes(16 * h + lo for h, lo in zip(high, low, strict=True))
        if len(_TABLES) >= 64:
            _TABLES.clear()
        _TABLES[(high, low)] = table
    if len(classes) <= _PIECE:
        return _weight_sum(memoryview(_pairs(classes).translate(table))[: len(classes)])
    return sum(
        _weight_sum(memoryview(codes.translate(table))[first:stop])
        for codes, first, stop in _pieces(classes)
    )


def pair_code_counts(text: str) -> Counter[int]:
    """How often each pair code occurs in ``text`` (for fitting, and for the breakdown
    by class)."""
    counts: Counter[int] = Counter()
    if text:
        for codes, first, stop in _pieces(_classes(text)):
            counts.update(memoryview(codes)[first:stop])
    return counts


def parameter_counts(codes: Mapping[int, int], text: str | None = None) -> dict[str, int]:
    """How often each parameter of :data:`PARAMETERS` occurs, from pair-code counts:
    characters for the character classes, pairs for the others; with ``text``, the runs
    of :data:`RUN_PARAMETERS` too (else 0)."""
    counts = dict.fromkeys(PARAMETERS, 0)
    for code, n in codes.items():
        for name in _ROLES[code].parameters:
            counts[name] += n
    if text:
        counts.update(run_counts(text))
    return counts


#: The class bytes of a lowercase letter and of punctuation (after ``_CLASS_TABLE``).
_LOWER_CODE = _CLASS_TABLE[ord("a")]
_PUNCT_CODE = _CLASS_TABLE[ord("!")]


def _runs(classes: bytes) -> tuple[int, int]:
    """(lowercase runs, punctuation runs) of :data:`RUN_PARAMETERS` in a text's class bytes
    (one per character): ``bytes.count`` of the class byte repeated, one C pass each.

    A run of one repeated character (``====``, ``xxxx``) is a run like any other. Its
    tokens are fewer than a run of different characters takes (a separator line is a few
    long tokens), so the count errs high there, never low; leaving such runs out cost a
    Python step and several big-integer passes per stretch of punctuation, and agent
    traffic has thousands (code, tracebacks, markdown tables): most of a cold fit's time."""
    lower = classes.count(_LOWER_RUN_BYTES) if len(classes) >= LOWER_RUN else 0
    return lower, classes.count(_PUNCT_RUN_BYTES)


def run_counts(text: str, lower_run: int = LOWER_RUN, punct_run: int = PUNCT_RUN) -> dict[str, int]:
    """The runs of :data:`RUN_PARAMETERS` in ``text``: whole ``lower_run`` lowercase
    letters and whole ``punct_run`` punctuation characters in a row (other lengths are for
    the calibration's choice of them)."""
    if not text:
        return {"lower_run": 0, "punct_long": 0}
    classes = _classes(text)
    return {
        "lower_run": classes.count(bytes([_LOWER_CODE]) * lower_run),
        "punct_long": classes.count(bytes([_PUNCT_CODE]) * punct_run),
    }


# ----------------------------------------------------------------------------------------
# Profiles
# ----------------------------------------------------------------------------------------

_CAP = 255

#: The non-ASCII classes, by name, and the class byte that stands for each after
#: translate (one per class: a non-ASCII character's group is always the script group).
_SCRIPT_CODES: Mapping[str, int] = MappingProxyType(
    {_NAME_OF_CLASS[cls]: cls << 3 | _G_SCRIPT for cls in range(_LATIN, _OTHER + 1)}
)


def _class_extras(rates: Mapping[str, float]) -> dict[str, float]:
    """What the heaviest pair of each non-ASCII class cannot hold (more than 255/128
    tokens: emoji, and the safe bound of the classes no text measures), in tokens per
    character: counted per character apart."""
    extras = {}
    for name, code in _SCRIPT_CODES.items():
        heaviest = max(
            sum(rates.get(p, 0.0) for p in _ROLES[code & 0xF8 | prev].parameters)
            for prev in range(8)
        )
        if heaviest > _CAP / WEIGHT_UNIT:
            extras[name] = heaviest - _CAP / WEIGHT_UNIT
    return extras


def _build_table(rates: Mapping[str, float]) -> bytes:
    """Pair weights in 1/WEIGHT_UNIT tokens, at most 255 each (what a heavy class's
    pairs cannot hold is counted apart, see :func:`_class_extras`)."""
    units = [WEIGHT_UNIT * sum(rates.get(name, 0.0) for name in role.parameters) for role in _ROLES]
    for name, extra in _class_extras(rates).items():
        code = _SCRIPT_CODES[name]
        for prev in range(8):
            units[code & 0xF8 | prev] -= extra * WEIGHT_UNIT
    return bytes(max(0, min(_CAP, round(u))) for u in units)


@dataclass(frozen=True)
class Profile:
    """Per-family rates: ``rates`` maps names of :data:`PARAMETERS` to tokens per
    occurrence; ``framing`` is added once per non-empty text (see the module docstring);
    ``fitted_on`` says what the numbers were fitted on. ``table`` (the pair weights) and
    ``extras`` (what a character of a heavy class costs beyond what one pair weight
    holds, counted per character apart) are derived from the rates unless given."""

    family: str
    description: str
    rates: Mapping[str, float]
    framing: float = 0.0
    fitted_on: str = ""
    table: bytes = field(default=b"", repr=False, compare=False)
    extras: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.rates) - set(PARAMETERS)
        if unknown:
            raise SettingsError(f"unknown profile parameters: {', '.join(sorted(unknown))}")
        if any(not math.isfinite(v) or v < 0 for v in self.rates.values()):
            raise SettingsError("profile rates must be finite and not negative")
        if not math.isfinite(self.framing) or self.framing < 0:
            raise SettingsError("framing must be finite and not negative")
        object.__setattr__(self, "rates", MappingProxyType(dict(self.rates)))
        if not self.table:
            object.__setattr__(self, "table", _build_table(self.rates))
        elif len(self.table) != 256:
            raise SettingsError("a profile table has 256 weights")
        extras = _class_extras(self.rates) if self.extras is None else dict(self.extras)
        if set(extras) - set(_SCRIPT_CODES):
            raise SettingsError("extras are for the non-ASCII character classes")
        object.__setattr__(self, "extras", MappingProxyType(extras))

    @property
    def emoji_extra(self) -> float:
        """What an emoji costs beyond what one pair weight holds (see ``extras``)."""
        return (self.extras or {}).get("emoji", 0.0)


@dataclass(frozen=True)
class ClassEstimate:
    """One line of :meth:`ProfileEstimator.by_class`: a class, how many characters of it
    (or, for ``framing``, 1), and the tokens the estimate gives them."""

    name: str
    characters: int
    tokens: float


_LOWER_RUN_BYTES = bytes([_CLASS_TABLE[ord("a")]]) * LOWER_RUN
_PUNCT_RUN_BYTES = bytes([_CLASS_TABLE[ord("!")]]) * PUNCT_RUN
#: ASCII bytes to their class (1-6, which is also their group); other bytes never meet it.
_ASCII_CLASSES = bytes(_CLASS_TABLE[b] >> 3 if b < 0x80 else 0 for b in range(256))
#: Times the classes as one integer: byte i becomes 8 * class i + class i-1 (at most
#: 8 * 6 + 6 = 54, so no byte carries into the next), and one byte more holds the last
#: class as the padding code.
_ASCII_PAIR_MULTIPLIER = 8 + 256


class ProfileEstimator(Estimator):
    """The estimate of a :class:`Profile`: the sum of the pair weights, the runs' weights
    and the heavy classes' extras, rounded up. ``estimate(text)`` is the text alone;
    ``estimate_part(text)`` adds the profile's ``framing`` (what the provider wraps around
    every text part of a request), and is what :mod:`windowfit.sizing` counts messages
    with (see :func:`windowfit.tokens.part_counter`)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.name = f"profile:{profile.family}"
        self.family = profile.family
        self.framing = profile.framing
        self._table = profile.table
        rates = profile.rates
        self._lower_units = round(rates.get("lower_run", 0.0) * WEIGHT_UNIT)
        self._punct_units = round(rates.get("punct_long", 0.0) * WEIGHT_UNIT)
        #: (class byte, extra units per character)
        self._extras = tuple(
            (_SCRIPT_CODES[name], round(extra * WEIGHT_UNIT))
            for name, extra in (profile.extras or {}).items()
            if round(extra * WEIGHT_UNIT) > 0
        )
        self._not_heavy = bytes(b for b in range(256) if b not in {c for c, _ in self._extras})
        # The padding byte after the last pair is a code of class 0 (it never occurs):
        # every table _build_table makes weighs those codes 0. A table given by hand that
        # does not is summed the slow way, which leaves the padding out.
        self._padding_free = not any(profile.table[:8])
        self._high, self._low = _nibble_tables(profile.table)
        self._rare: _rare_chars.RareChars | None = None  # loaded at the first non-ASCII text
        if type(self).estimate is ProfileEstimator.estimate:  # (a subclass keeps its own)
            self.estimate = self._make_estimate(0.0)  # type: ignore[method-assign,assignment]
            self.estimate_part = self._make_estimate(  # type: ignore[method-assign,assignment]
                self.framing
            )

    def _make_estimate(self, framing: float, *, speedup: bool = True) -> Callable[[str], int]:
        """``estimate`` (or, with the profile's framing, ``estimate_part``) as a closure
        over the profile's numbers: most texts a fit counts are short, and for them
        looking up attributes and globals costs as much as the C passes do."""
        estimate_any = self._estimate_any

        def general(text: str) -> int:
            return estimate_any(text, framing)

        if not self._padding_free:
            return general
        if speedup and Weigher is not None:
            return self._weigher(framing)
        table = self._table
        ascii_classes, multiplier = _ASCII_CLASSES, _ASCII_PAIR_MULTIPLIER
        adler32, from_bytes, ceil, weight_sum = zlib.adler32, int.from_bytes, math.ceil, _weight_sum
        lower_units, punct_units = self._lower_units, self._punct_units
        lower_run = bytes([_ASCII_CLASSES[ord("a")]]) * LOWER_RUN
        punct_run = bytes([_ASCII_CLASSES[ord("!")]]) * PUNCT_RUN

        def estimate(text: str) -> int:
            if not text.isascii():
                return general(text)
            size = len(text)
            if not size:
                return 0
            # ASCII: a character's group is its class, so its pair code (class << 3 |
            # group before) is 8 * class + class before, the bytes of one product.
            data = text.encode()
            classes = data.translate(ascii_classes)
            pairs = (from_bytes(classes, "little") * multiplier).to_bytes(size + 1, "little")
            if size <= _SHORT:
                units = (adler32(pairs.translate(table)) & 0xFFFF) - 1
            else:
                units = weight_sum(pairs.translate(table))  # the padding weighs 0
            if size >= PUNCT_RUN:  # the run terms (see _runs)
                if punct_units:
                    units += punct_units * classes.count(punct_run)
                if size >= LOWER_RUN and lower_units:
                    units += lower_units * classes.count(lower_run)
            return ceil(units / WEIGHT_UNIT + framing) or 1  # a text is one token at least

        return estimate

    def _weigher(self, framing: float) -> Callable[[str], int]:
        """The estimate as a :class:`windowfit._weigh.Weigher` (the optional C speedup):
        the same integer sum as :meth:`_estimate_any` from the same tables, in one pass,
        rounded the same way."""
        assert Weigher is not None
        return Weigher(**self.weigher_arguments(framing))

    def weigher_arguments(self, framing: float) -> dict[str, Any]:
        """What :meth:`_weigher` gives the C speedup: the profile's tables as bytes (the
        tests build Weighers of their own from these)."""
        class_extras = bytearray(4 * 256)
        for code, extra in self._extras:
            class_extras[4 * code : 4 * code + 4] = extra.to_bytes(4, "little")
        return {
            "classes": bmp_classes(),
            "weights": self._table,
            "class_extras": bytes(class_extras),
            "char_extras": char_extra_units(self.profile),
            "astral_low": _CLASS_TABLE[0xF0],
            "astral_high": _CLASS_TABLE[0xF1],
            "lower_code": _CLASS_TABLE[ord("a")],
            "lower_run": LOWER_RUN,
            "lower_units": self._lower_units,
            "punct_code": _CLASS_TABLE[ord("!")],
            "punct_run": PUNCT_RUN,
            "punct_units": self._punct_units,
            "framing": framing,
        }

    @property
    def accelerated(self) -> bool:
        """Whether :meth:`estimate` runs in the C speedup (``windowfit._weigh``), else in
        Python: the same counts either way."""
        return Weigher is not None and isinstance(self.estimate, Weigher)

    def estimate(self, text: str) -> int:
        # (replaced per instance by the closure _make_estimate builds; kept for the type)
        return self._estimate_any(text)

    def estimate_part(self, text: str) -> int:
        # (replaced per instance like estimate)
        return self._estimate_any(text, self.framing)

    def _estimate_any(self, text: str, framing: float = 0.0) -> int:
        """The estimate of any text: UTF-8 bytes to classes to pairs to weights."""
        if not text:
            return 0
        data = text.encode("utf-8", "surrogatepass")  # a lone surrogate counts as Hangul
        if len(data) == len(text):
            classes = data.translate(_CLASS_TABLE)
        else:
            classes = _split_lead_classes(text, data.translate(_CLASS_TABLE, _CONTINUATION_BYTES))
        size = len(classes)
        if size <= _SHORT and self._padding_free:
            # One adler32 sums the weights exactly (see _SHORT), the padding byte's
            # (0) with them.
            class_bits, group_bits = _masks or _get_masks()
            codes = int.from_bytes(classes, "little")
            pairs = ((codes & class_bits) | (codes & group_bits) << 8).to_bytes(size + 1, "little")
            units = (zlib.adler32(pairs.translate(self._table)) & 0xFFFF) - 1
        else:
            units = _weighted_units(classes, self._high, self._low)
        if size >= PUNCT_RUN:
            lower, punct = _runs(classes)
            units += self._lower_units * lower + self._punct_units * punct
        if self._extras:
            heavy = classes.translate(None, self._not_heavy)  # the heavy classes' bytes only
            if heavy:
                for code, extra in self._extras:
                    units += extra * heavy.count(code)
        if len(data) != len(text):  # rare characters (only a text that is not ASCII has any)
            units += (self._rare or self._rare_chars()).extra_units(text)
        return math.ceil(units / WEIGHT_UNIT + framing) or 1

    def _rare_chars(self) -> _rare_chars.RareChars:
        """The profile's rare-character extras (see :func:`char_extra_units`)."""
        self._rare = _profile_rare_chars(self.profile)
        return self._rare

    def by_class(self, text: str) -> list[ClassEstimate]:
        """The estimate of ``text`` split by character class (every class, in the order
        of :data:`CHARACTER_CLASSES`, then ``framing``, which is 0: the framing is added
        per text part where messages are counted); the tokens add up to :meth:`estimate`
        before rounding up. Slower than :meth:`estimate`."""
        chars = dict.fromkeys(_CLASS_NAMES, 0)
        units = dict.fromkeys(_CLASS_NAMES, 0)
        for code, n in pair_code_counts(text).items():
            owner = _ROLES[code].owner
            if owner is not None:
                chars[owner] += n
                units[owner] += n * self._table[code]
        runs = run_counts(text)
        units["lower"] += runs["lower_run"] * self._lower_units
        units["punct"] += runs["punct_long"] * self._punct_units
        for code, extra in self._extras:
            units[_NAME_OF_CLASS[code >> 3]] += chars[_NAME_OF_CLASS[code >> 3]] * extra
        if text and not text.isascii():
            rare = self._rare or self._rare_chars()
            for char in rare.pattern.findall(text) if rare.pattern else ():
                units[_NAME_OF_CLASS[_classes(char)[0] >> 3]] += rare.units[ord(char)]
        rows = [
            ClassEstimate(name, chars[name], units[name] / WEIGHT_UNIT) for name in _CLASS_NAMES
        ]
        rows.append(ClassEstimate("framing", 1 if text else 0, 0.0))
        return rows


def _profile_rare_chars(profile: Profile) -> _rare_chars.RareChars:
    extras = {
        _SCRIPT_CODES[name]: round(extra * WEIGHT_UNIT)
        for name, extra in (profile.extras or {}).items()
        if round(extra * WEIGHT_UNIT) > 0
    }
    return _rare_chars.rare_chars(
        profile.family,
        profile.table,
        extras,
        bmp_classes().__getitem__,  # the class byte of a code point
        WEIGHT_UNIT,
    )


def char_extra_units(profile: Profile) -> bytes:
    """What the rare-character term adds per BMP character, for ``profile``: 2 * 65,536
    bytes, a little-endian uint16 per code point, in 1/:data:`WEIGHT_UNIT` tokens (0 for
    most). The estimate adds the sum over a text's characters (astral characters add
    nothing) to the pair weights' units before rounding up.

    Which characters: those that cost at least 2 tokens alone in the family's real
    tokenizer (``conservative`` and other families: the largest of the calibrated
    families' tokenizers), but the characters the real texts the rates are fitted on
    hold (:mod:`windowfit._rare_chars`). Each gets what its cost alone exceeds the least its
    class's pairs weigh, so that it is never counted less than alone."""
    return _profile_rare_chars(profile).le_bytes()


def _conservative(profiles: Iterable[Profile]) -> Profile:
    members = list(profiles)
    table = bytes(max(p.table[code] for p in members) for code in range(256))
    rates = {name: max(p.rates.get(name, 0.0) for p in members) for name in PARAMETERS}
    extras = {
        name: max((p.extras or {}).get(name, 0.0) for p in members)
        for name in {name for p in members for name in p.extras or {}}
    }
    return Profile(
        family="conservative",
        description="never under any other family: the largest weight of each pair",
        rates=rates,
        framing=max(p.framing for p in members),
        fitted_on="the largest of " + ", ".join(p.family for p in members),
        table=table,
        extras=extras,
    )


_DESCRIPTIONS = {
    "o200k": "OpenAI o200k_base: GPT-4o, GPT-4.1, GPT-5, o1/o3/o4",
    "cl100k": "OpenAI cl100k_base: GPT-4, GPT-3.5-turbo, embeddings",
    "deepseek": "DeepSeek-V3/R1 (deepseek-chat, deepseek-reasoner)",
    "tekken": "Mistral Tekken: Mistral NeMo, Large 2, Small 3, Pixtral, Codestral, Ministral",
    "claude": "Anthropic Claude 3 and later (unpublished tokenizer; see the module docstring)",
}


def _load_profiles() -> dict[str, Profile]:
    profiles: dict[str, Profile] = {}
    for family, entry in _profile_table.PROFILES.items():
        # A parameter the table does not have (a table fitted before it existed) costs
        # nothing, a class the bound of the unmeasured ones.
        missing = {name: 0.0 for name in PARAMETERS if name not in _CLASS_NAMES}
        missing.update(dict.fromkeys(_CLASS_NAMES, UNMEASURED_RATE))
        rates = {**missing, **entry.rates, **UNMEASURED_RATES}
        profiles[family] = Profile(
            family=family,
            description=_DESCRIPTIONS.get(family, family),
            rates=rates,
            framing=entry.framing,
            fitted_on=entry.fitted_on,
        )
    profiles["conservative"] = _conservative(profiles.values())
    return profiles


_PROFILES = _load_profiles()

#: The families calibrated on a tokenizer each (``conservative`` is the largest of them).
CALIBRATED_FAMILIES: tuple[str, ...] = tuple(f for f in _PROFILES if f != "conservative")

#: Every family :func:`estimator_for` knows: the calibrated ones, ``conservative`` and
#: ``seed``.
FAMILIES: tuple[str, ...] = (*_PROFILES, "seed")


def get_profile(family: str) -> Profile:
    """The calibrated profile of ``family`` (not ``seed``, which has no profile)."""
    try:
        return _PROFILES[family]
    except KeyError:
        raise SettingsError(
            f"unknown tokenizer family {family!r}; known: {', '.join(FAMILIES)}"
        ) from None


# ----------------------------------------------------------------------------------------
# Models to families
# ----------------------------------------------------------------------------------------


def family_for_model(model: str) -> str:
    """The tokenizer family of ``model``, from the one model table
    (:func:`windowfit.models.model_info`: routes, cloud forms and dated suffixes are looked
    through, ``anthropic/claude-sonnet-4-5``, ``us.anthropic.claude-3-5-sonnet-...-v1:0``,
    ``openrouter/deepseek/deepseek-chat``); ``"conservative"`` for a model it does not
    know, or whose tokenizer has no profile."""
    info = model_info(model) if isinstance(model, str) else None
    return "conservative" if info is None else info.family


_ESTIMATORS: dict[tuple[str, bool], Estimator] = {}
_ESTIMATORS_LOCK = threading.RLock()  # (the checked estimator asks for its profile inside)


def estimator_for(
    model: str | None = None, family: str | None = None, *, vocabulary: bool = True
) -> Estimator:
    """The estimator for a model or a tokenizer family (give one, not both).

    ``model`` maps to a family by :func:`family_for_model` (unknown models get
    ``conservative``); ``family`` is one of :data:`FAMILIES` (``"seed"`` is the seed's
    rule). Without either: ``conservative``. For a family whose vocabulary is on the
    machine (see :mod:`windowfit.vocabulary`) it is the profile checked by that vocabulary
    (:class:`~windowfit.vocabulary.CheckedEstimator`; ``conservative``: by every family's,
    :class:`~windowfit.vocabulary.LargestEstimator`), unless ``vocabulary=False``;
    otherwise the profile. The same estimator object is returned
    for the same family, so that :mod:`windowfit.sizing`'s per-message cache is shared.
    Raises :class:`~windowfit.errors.SettingsError` for an unknown family.
    """
    if model is not None and family is not None:
        raise SettingsError("give a model or a family, not both")
    if family is None:
        family = family_for_model(model) if model is not None else "conservative"
    if family not in FAMILIES:
        raise SettingsError(f"unknown tokenizer family {family!r}; known: {', '.join(FAMILIES)}")
    key = (family, vocabulary)
    estimator = _ESTIMATORS.get(key)
    if estimator is None:
        with _ESTIMATORS_LOCK:
            estimator = _ESTIMATORS.get(key)
            if estimator is None:
                estimator = _make_estimator(family, vocabulary)
                _ESTIMATORS[key] = estimator
    return estimator


def _make_estimator(family: str, vocabulary: bool) -> Estimator:
    if family == "seed":
        return SeedEstimator()
    if not vocabulary:
        return ProfileEstimator(_PROFILES[family])
    profile = estimator_for(family=family, vocabulary=False)  # (one object for both)
    from .vocabulary import checked

    return checked(profile)


def default_estimator(estimator: Estimator | None = None, model: str | None = None) -> Estimator:
    """The estimator every part of windowfit counts with, by one rule: ``estimator`` when
    given; else the calibrated profile of ``model``'s tokenizer family
    (:func:`estimator_for`); with neither, or for a model the table does not know,
    ``conservative`` (at least every family's estimate). :func:`windowfit.fit`,
    :func:`windowfit.wrap`, the agent runtime and ``windowfit tokens`` all use it. The
    write-up's rule (the seed's ASCII/4 + CJK/1 + other/2) is only used when asked for
    (``family="seed"``): it under-counts cl100k- and Claude-tokenized text.

    Raises :class:`~windowfit.errors.SettingsError` for something that is not an
    estimator."""
    if estimator is not None:
        if not callable(getattr(estimator, "estimate", None)):
            raise SettingsError(
                "estimator must be a windowfit Estimator (an object with estimate(text) -> int), "
                f"not {type(estimator).__name__}"
            )
        return estimator
    if model is not None and not isinstance(model, str):
        raise SettingsError(f"model must be a model name, not {type(model).__name__}")
    return estimator_for(model=model or None)
