"""Token estimates without running a tokenizer, and the interface real tokenizers plug into.

The seed's rule (DESIGN section 4) counts by script, because chars/4 is an English rule:

* ASCII characters: 1/4 token each;
* CJK characters (ranges in :data:`CJK_RANGES`): 1 token each;
* every other character (Cyrillic, Greek, Arabic, accented Latin, emoji, ...): 1/2 token;

and rounds the total up. It is meant to err high.

An :class:`Estimator` turns text into a token count. Message-level counting (block and
message overheads, tool calls by their JSON arguments, images by the provider's size rule)
is shared by every estimator and lives in :mod:`windowfit.sizing`, so a real tokenizer
only has to implement :meth:`Estimator.estimate`.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CJK_RANGES",
    "CharacterBreakdown",
    "Estimator",
    "SeedEstimator",
    "breakdown",
    "estimate_tokens",
    "part_counter",
]

#: Code-point ranges counted as CJK (1 token per character), inclusive. Han ideographs
#: (unified, extensions, compatibility; all of planes 2 and 3), Hiragana, Katakana (and
#: their supplements), Hangul (syllables and jamo), Bopomofo, and CJK punctuation: the CJK
#: Symbols and Punctuation block, CJK compatibility forms, and the halfwidth and fullwidth
#: forms block. Blocks are taken whole where that lets the count run on UTF-8 lead bytes
#: at C speed: the Yijing hexagram symbols inside U+3000-U+9FFF, and the small scripts of
#: U+A000-U+ABFF next to Yi and Hangul (Vai, Bamum, Javanese, Cham, Meetei Mayek...), count
#: as CJK too, which errs high for them, as the rule means to.
CJK_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x1100, 0x11FF, "Hangul Jamo"),
    (0x2E80, 0x2FFF, "CJK Radicals Supplement, Kangxi Radicals, Ideographic Description"),
    (
        0x3000,
        0x9FFF,
        "CJK Symbols and Punctuation, Hiragana, Katakana, Bopomofo, Hangul "
        "Compatibility Jamo, Kanbun, CJK Strokes, Enclosed CJK, CJK Compatibility, "
        "CJK Unified Ideographs and Extension A",
    ),
    (
        0xA000,
        0xD7FF,
        "Yi, Hangul Jamo Extended-A, Hangul Syllables, Hangul Jamo Extended-B "
        "(and the small scripts between them, counted high)",
    ),
    (0xF900, 0xFAFF, "CJK Compatibility Ideographs"),
    (0xFE30, 0xFE4F, "CJK Compatibility Forms"),
    (0xFF00, 0xFFEF, "Halfwidth and Fullwidth Forms"),
    (0x1AFF0, 0x1B16F, "Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana"),
    (0x20000, 0x3FFFF, "Supplementary and Tertiary Ideographic Planes (CJK extensions B-H)"),
)

_CJK_CLASS = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi, _ in CJK_RANGES)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")

# The count runs on UTF-8 bytes with C-speed ``translate`` passes. Every character of
# U+3000-U+D7FF starts with a byte E3-ED (ED A0-BF would be a surrogate, which strict
# UTF-8 never produces): those lead bytes alone identify a CJK character. The other ranges
# share their lead byte with non-CJK characters, so a pattern checks the following bytes:
# for E1, E2 and F0 it matches the CJK characters (rare behind those leads: Georgian,
# punctuation, emoji are common), for EF the non-CJK ones (rare there: fullwidth forms are
# common), so that the pattern that runs finds few matches.
_WHOLE_LEADS = bytes([0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8, 0xE9, 0xEA, 0xEB, 0xEC, 0xED])
_DROP_BUT_WHOLE = bytes(b for b in range(256) if b not in _WHOLE_LEADS)
_DROP_BELOW_E0 = bytes(range(0xE0))
_ASCII_BYTES = bytes(range(0x80))
_DROP_BUT_4BYTE_LEADS = bytes(b for b in range(256) if not 0xF0 <= b <= 0xF4)
#: CJK behind E1 and E2 is told by the lead and the next byte alone, so it is counted with
#: ``bytes.count`` of each two-byte prefix, faster than a pattern where those leads are
#: common (arrows and box drawing behind E2 fill coding agents' tool output).
_CJK_PREFIXES: dict[int, tuple[bytes, ...]] = {
    0xE1: tuple(bytes([0xE1, b]) for b in range(0x84, 0x88)),  # U+1100-11FF
    0xE2: tuple(bytes([0xE2, b]) for b in range(0xBA, 0xC0)),  # U+2E80-2FFF
}
_CJK_AFTER: dict[int, re.Pattern[bytes]] = {
    0xF0: re.compile(  # U+1AFF0-1B16F, U+20000-3FFFF
        rb"\xf0(?:[\xa0-\xbf]|\x9a\xbf[\xb0-\xbf]|\x9b[\x80-\x84]|\x9b\x85[\x80-\xaf])"
    ),
}
_NOT_CJK_AFTER: dict[int, re.Pattern[bytes]] = {
    # CJK behind EF: U+F900-FAFF, U+FE30-FE4F, U+FF00-FFEF. This pattern matches
    # everything else behind the same lead.
    0xEF: re.compile(
        rb"\xef(?:[\x80-\xa3\xac-\xb7\xba\xbb]|\xb8[\x80-\xaf]|\xb9[\x90-\xbf]|\xbf[\xb0-\xbf])"
    ),
}


@dataclass(frozen=True)
class CharacterBreakdown:
    """How many characters of each class a text has, under the seed's rule."""

    ascii: int
    cjk: int
    other: int

    @property
    def tokens(self) -> int:
        """The seed's estimate: ceil(ascii/4 + cjk + other/2), in exact integer arithmetic."""
        return -(-(self.ascii + 4 * self.cjk + 2 * self.other) // 4)


def _breakdown_utf8(text: str, data: bytes) -> CharacterBreakdown:
    n = len(text)
    # Only the bytes of non-ASCII characters matter, and in text that is mostly ASCII
    # (code, logs, tool output with a few arrows) they are few: every later pass runs on
    # them alone. Each character's bytes stay together and in order, and a continuation
    # byte is never a lead, so a lead followed by its next bytes still matches exactly.
    wide = data.translate(None, _ASCII_BYTES)
    size = len(wide)
    high = wide.translate(None, _DROP_BELOW_E0)  # lead bytes of 3- and 4-byte characters
    four = len(high.translate(None, _DROP_BUT_4BYTE_LEADS))
    three = len(high) - four
    two = (size - 3 * three - 4 * four) // 2
    cjk = len(high.translate(None, _DROP_BUT_WHOLE))
    for lead, prefixes in _CJK_PREFIXES.items():
        if lead in high:
            cjk += sum(wide.count(prefix) for prefix in prefixes)
    for lead, pattern in _CJK_AFTER.items():
        if lead in high:
            cjk += len(pattern.findall(wide))
    for lead, pattern in _NOT_CJK_AFTER.items():
        if lead in high:
            cjk += high.count(lead) - len(pattern.findall(wide))
    ascii_count = n - two - three - four
    return CharacterBreakdown(ascii=ascii_count, cjk=cjk, other=n - ascii_count - cjk)


def breakdown(text: str) -> CharacterBreakdown:
    """Count ASCII, CJK and other characters, with C-speed string and bytes operations."""
    n = len(text)
    if text.isascii():
        return CharacterBreakdown(ascii=n, cjk=0, other=0)
    try:
        return _breakdown_utf8(text, text.encode("utf-8"))
    except UnicodeEncodeError:  # lone surrogates: the slower, general way
        ascii_count = len(text.encode("ascii", "ignore"))
        cjk = n - len(_CJK_RUN.sub("", text))
        return CharacterBreakdown(ascii=ascii_count, cjk=cjk, other=n - ascii_count - cjk)


def estimate_tokens(text: str) -> int:
    """The seed's script-aware estimate of ``text`` (see the module docstring)."""
    if text.isascii():
        return -(-len(text) // 4)
    return breakdown(text).tokens


class Estimator(ABC):
    """Counts tokens of text. Subclasses implement :meth:`estimate` and set ``name``.

    ``family`` names the tokenizer family the counts are for (``"seed"``, ``"o200k"``,
    ``"cl100k"``, ...). Message-level counting is done by :mod:`windowfit.sizing` on top
    of :meth:`estimate`, with a per-message cache, so estimators stay stateless and cheap.
    """

    name: str = "estimator"
    family: str = "custom"
    #: Tokens the provider wraps around every text part of a request (a text block, a
    #: tool call's name and arguments, a tool result), beyond windowfit.sizing's generic
    #: overheads. Not part of :meth:`estimate`, which counts the text alone: message
    #: counting adds it once per non-empty text (:meth:`estimate_part`, :func:`part_counter`).
    framing: float = 0.0
    #: Whether running it again costs less than looking its answer up by content (true of
    #: windowfit's own estimates; a real tokenizer is not). A
    #: :class:`~windowfit.Fitter` remembers message sizes only for estimators that are not.
    cheap: bool = False

    @abstractmethod
    def estimate(self, text: str) -> int:
        """Tokens in ``text``; for an estimate, erring high rather than low."""

    def estimate_part(self, text: str) -> int:
        """Tokens of ``text`` as one text part of a request: :meth:`estimate` plus the
        :attr:`framing`, rounded up (0 for an empty text)."""
        tokens = self.estimate(text)
        return tokens + math.ceil(self.framing) if text and self.framing else tokens

    def estimate_message(self, message: Mapping[str, Any], format: str | None = None) -> int:
        """Tokens of one provider-format message (Anthropic or OpenAI chat, detected),
        overheads included."""
        from .formats import detect_format, get_format
        from .sizing import default_sizer

        fmt = format or detect_format([message])
        return default_sizer(self, fmt).measure(message, get_format(fmt), 0)[1].tokens

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def part_counter(estimator: Estimator) -> Callable[[str], int]:
    """What counts one text part of a message with ``estimator``: its ``estimate`` when it
    has no framing (any object with ``estimate(text)``), else its ``estimate_part``."""
    if not getattr(estimator, "framing", 0):
        return estimator.estimate
    part = getattr(estimator, "estimate_part", None)
    if part is None:
        return lambda text: Estimator.estimate_part(estimator, text)
    return part  # type: ignore[no-any-return]


class SeedEstimator(Estimator):
    """The write-up's rule: ASCII/4 + CJK/1 + other/2, rounded up."""

    name = "seed"
    family = "seed"
    cheap = True

    def estimate(self, text: str) -> int:
        return estimate_tokens(text)
