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

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

__all__ = [
    "CJK_RANGES",
    "CharacterBreakdown",
    "Estimator",
    "SeedEstimator",
    "breakdown",
    "estimate_tokens",
]

#: Code-point ranges counted as CJK (1 token per character), inclusive. Han ideographs
#: (unified, extensions A-H, compatibility), Hiragana, Katakana (and their extensions and
#: small-kana supplements), Hangul (syllables and jamo), Bopomofo, and CJK punctuation:
#: the CJK Symbols and Punctuation block, CJK compatibility forms, and the halfwidth and
#: fullwidth forms block (fullwidth ASCII variants, halfwidth katakana).
CJK_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x1100, 0x11FF, "Hangul Jamo"),
    (0x2E80, 0x2FDF, "CJK Radicals Supplement, Kangxi Radicals"),
    (0x2FF0, 0x2FFF, "Ideographic Description Characters"),
    (0x3000, 0x303F, "CJK Symbols and Punctuation"),
    (0x3040, 0x309F, "Hiragana"),
    (0x30A0, 0x30FF, "Katakana"),
    (0x3100, 0x312F, "Bopomofo"),
    (0x3130, 0x318F, "Hangul Compatibility Jamo"),
    (0x3190, 0x31FF, "Kanbun, Bopomofo Extended, CJK Strokes, Katakana Phonetic Extensions"),
    (0x3200, 0x33FF, "Enclosed CJK Letters and Months, CJK Compatibility"),
    (0x3400, 0x4DBF, "CJK Unified Ideographs Extension A"),
    (0x4E00, 0x9FFF, "CJK Unified Ideographs"),
    (0xA960, 0xA97F, "Hangul Jamo Extended-A"),
    (0xAC00, 0xD7AF, "Hangul Syllables"),
    (0xD7B0, 0xD7FF, "Hangul Jamo Extended-B"),
    (0xF900, 0xFAFF, "CJK Compatibility Ideographs"),
    (0xFE30, 0xFE4F, "CJK Compatibility Forms"),
    (0xFF00, 0xFFEF, "Halfwidth and Fullwidth Forms"),
    (0x1AFF0, 0x1B16F, "Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana"),
    (0x20000, 0x2FA1F, "CJK Unified Ideographs Extensions B-F, Compatibility Supplement"),
    (0x30000, 0x323AF, "CJK Unified Ideographs Extensions G-H"),
)

_CJK_CLASS = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi, _ in CJK_RANGES)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")


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


def breakdown(text: str) -> CharacterBreakdown:
    """Count ASCII, CJK and other characters; C-speed string operations only."""
    n = len(text)
    if text.isascii():
        return CharacterBreakdown(ascii=n, cjk=0, other=0)
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

    @abstractmethod
    def estimate(self, text: str) -> int:
        """Tokens in ``text``; for an estimate, erring high rather than low."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class SeedEstimator(Estimator):
    """The write-up's rule: ASCII/4 + CJK/1 + other/2, rounded up."""

    name = "seed"
    family = "seed"

    def estimate(self, text: str) -> int:
        return estimate_tokens(text)
