"""Counts from a tokenizer's own vocabulary, and the family profiles checked against them.

Why this exists: a profile (:mod:`windowfit.profiles`) estimates from character classes,
and a class cannot see what costs most in text that is not English: whether a word is in
the vocabulary. Italian, Dutch, Basque or Indonesian letters are the same classes as
English ones, and every profile counts those languages 10-45% low (RESULTS.md, "Real text
of many languages"). Where the family's vocabulary is on the machine, windowfit can ask it.

Two things live here:

* :class:`VocabularyCounter`: exact counts with a rank-file vocabulary (OpenAI's
  ``o200k_base`` and ``cl100k_base``, Mistral's Tekken), by the optional C speedup
  ``windowfit._bpe``. It splits text with a scanner written for each pre-tokenizer pattern
  and merges by rank as tiktoken does: tiktoken's numbers (the tests compare them on
  arbitrary text), without tiktoken. The rank files come from the PyPI packages that ship
  them (``litellm``, ``mistral-common``) or tiktoken's cache; nothing is downloaded.
* :class:`CheckedEstimator`: the family's profile, checked by its vocabulary. A short text
  is counted exactly; a long one gets the profile's estimate times what the vocabulary
  counts over the profile on windows spread through it (and a margin), which costs a small
  share of counting it exactly.
  :func:`windowfit.profiles.estimator_for` gives it for a model of these families when the
  vocabulary can be found; otherwise the profile alone.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import os
import sys
import threading
import unicodedata
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ._speedup import DISABLE_VARIABLE
from .errors import SettingsError, TokenizerError
from .tokens import Estimator

if TYPE_CHECKING:
    from ._bpe import Vocabulary as _VocabularyType

# ---------------------------------------------------------------------------------------
# Unicode categories as the pre-tokenizer patterns see them
# ---------------------------------------------------------------------------------------

#: The category codes of ``_bpe.c`` (one byte per code point).
OTHER, UPPER, LOWER, LETTER, MARK, NUMBER, SPACE, NEWLINE = range(8)

_CATEGORY_CODES = {
    "Lu": UPPER,
    "Lt": UPPER,
    "Ll": LOWER,
    "Lm": LETTER,
    "Lo": LETTER,
    "Mn": MARK,
    "Mc": MARK,
    "Me": MARK,
    "Nd": NUMBER,
    "Nl": NUMBER,
    "No": NUMBER,
}

#: Unicode's White_Space property (PropList.txt), which the patterns' ``\s`` means; Python
#: has no lookup for it (``str.isspace`` also takes U+001C-001F).
WHITE_SPACE = frozenset(
    (*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029)
).union((0x202F, 0x205F, 0x3000))

#: Where assigned characters are: planes 0-3 (up to the CJK extensions) and plane 14
#: (tags and variation selectors). Planes 4-13 are unassigned and 15-16 private use.
_ASSIGNED = ((0x0, 0x40000), (0xE0000, 0xE1000))
CODE_POINTS = 0x110000


@lru_cache(maxsize=1)
def unicode_categories() -> bytes:
    """Every code point's category code, from this Python's :mod:`unicodedata`
    (about 60 ms, once a process). A character assigned in a later Unicode version than
    this Python's is punctuation here, and may be split otherwise by tiktoken's tables."""
    table = bytearray(CODE_POINTS)
    category, codes = unicodedata.category, _CATEGORY_CODES
    for start, stop in _ASSIGNED:
        table[start:stop] = bytes(codes.get(category(chr(c)), OTHER) for c in range(start, stop))
    for c in WHITE_SPACE:
        table[c] = NEWLINE if c in (0x0A, 0x0D) else SPACE
    return bytes(table)


# ---------------------------------------------------------------------------------------
# The vocabularies
# ---------------------------------------------------------------------------------------

#: Pattern ids of ``_bpe.c``.
PATTERN_CL100K, PATTERN_O200K, PATTERN_TEKKEN = 0, 1, 2


def _find_bpe() -> type[_VocabularyType] | None:
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return None
    try:
        from ._bpe import Vocabulary as found
    except ImportError:  # not built
        return None
    return found


#: The C counter's class, or None where it is not built or turned off.
BPE: type[_VocabularyType] | None = _find_bpe()


@dataclass(frozen=True)
class _Family:
    """Where a family's vocabulary comes from and which pattern splits its text."""

    pattern: int
    find: Callable[[], Path | None]
    read: Callable[[Path], Sequence[bytes]]  # the tokens in rank order
    package: str  # the PyPI package that ships the file


def _openai(encoding: str) -> _Family:
    from . import tokenizers

    spec = tokenizers._OPENAI_ENCODINGS[encoding]

    def read(path: Path) -> Sequence[bytes]:
        tokens = read_rank_file(tokenizers._read_bytes(path), str(path))
        if len(tokens) != spec.ranks:
            raise TokenizerError(f"{path}: {len(tokens)} tokens, not {spec.ranks} ({encoding})")
        return tokens

    pattern = PATTERN_O200K if spec.family == "o200k" else PATTERN_CL100K
    return _Family(pattern, lambda: tokenizers._bundled_openai_file(spec), read, "litellm")


def read_rank_file(data: bytes, source: str = "<data>") -> list[bytes]:
    """The tokens of a ``.tiktoken`` rank file (``<base64 token> <rank>`` lines), in rank
    order. Faster than building a dict: the published files list ranks 0, 1, 2, ... in
    order, which is checked, and anything else is refused with the line it is on."""
    tokens: list[bytes] = []
    decode = _strict_base64()
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        token, _, rank = line.partition(b" ")
        try:
            if int(rank) != len(tokens):
                raise ValueError(f"rank {int(rank)} where {len(tokens)} comes next")
            tokens.append(decode(token))
        except (ValueError, binascii.Error) as exc:
            raise TokenizerError(f"{source}, line {number}: {exc} ({line[:60]!r})") from None
    if not tokens:
        raise TokenizerError(f"{source}: no tokens in file")
    return tokens


def _strict_base64() -> Callable[[bytes], bytes]:
    if sys.version_info >= (3, 11):
        return lambda token: binascii.a2b_base64(token, strict_mode=True)
    return lambda token: base64.b64decode(token, validate=True)  # (slower)


def _tekken() -> _Family:
    from . import tokenizers

    def find() -> Path | None:
        return tokenizers._find_in_package("mistral_common", "data/tekken_240911.json")

    def read(path: Path) -> Sequence[bytes]:
        return ranks_in_order(tokenizers.read_tekken(path).ranks)

    return _Family(PATTERN_TEKKEN, find, read, "mistral-common")


_FAMILIES: dict[str, Callable[[], _Family]] = {
    "o200k": lambda: _openai("o200k_base"),
    "cl100k": lambda: _openai("cl100k_base"),
    "tekken": _tekken,
}

#: The families a vocabulary can count for.
VOCABULARY_FAMILIES = tuple(_FAMILIES)


def build_vocabulary(tokens: Sequence[bytes], pattern: int) -> _VocabularyType:
    """The C counter for ``tokens`` in rank order (token i has rank i), split by
    ``pattern`` (:data:`PATTERN_CL100K`, :data:`PATTERN_O200K`, :data:`PATTERN_TEKKEN`)."""
    if BPE is None:
        raise TokenizerError(
            "exact vocabulary counts need windowfit's C speedup (windowfit._bpe), which is "
            f"not built here or is turned off by {DISABLE_VARIABLE}"
        )
    if not all(isinstance(token, bytes) and token for token in tokens):
        raise TokenizerError("a vocabulary's tokens must be non-empty bytes")
    offsets = array("I", [0])
    if sum(map(len, tokens)) >= 2**32:
        raise TokenizerError("a vocabulary's tokens must hold less than 4 GiB in all")
    offsets.extend(itertools.accumulate(map(len, tokens)))
    try:
        return BPE(
            blob=b"".join(tokens),
            offsets=offsets.tobytes(),
            categories=unicode_categories(),
            pattern=pattern,
        )
    except ValueError as exc:
        raise TokenizerError(f"not a vocabulary: {exc}") from exc


def ranks_in_order(ranks: Mapping[bytes, int]) -> list[bytes]:
    """The tokens of a token-to-rank mapping in rank order; the ranks must be 0..n-1."""
    tokens = sorted(ranks, key=ranks.__getitem__)
    if [ranks[t] for t in tokens] != list(range(len(tokens))):
        raise TokenizerError("a vocabulary's ranks must be 0, 1, 2, ... with none missing")
    return tokens


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: U+FFFD, as tiktoken counts them
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


class VocabularyCounter(Estimator):
    """Exact counts for ``family`` (``o200k``, ``cl100k`` or ``tekken``) from its rank
    file: the same numbers as tiktoken's ``encode_ordinary`` (special-token strings count
    as text), computed in C without the GIL. Without ``path`` the file is the one the
    family's package ships (``litellm``, ``mistral-common``) or tiktoken's cache holds.

    Raises :class:`~windowfit.errors.TokenizerError` when the file cannot be found or read,
    or when the C speedup is not built; :class:`~windowfit.errors.SettingsError` for a
    family it cannot count."""

    cheap = False

    def __init__(self, family: str, *, path: str | os.PathLike[str] | None = None) -> None:
        if family not in _FAMILIES:
            raise SettingsError(
                f"no vocabulary counter for family {family!r}; known: {', '.join(_FAMILIES)}"
            )
        spec = _FAMILIES[family]()
        if path is None:
            found = spec.find()
            if found is None:
                raise TokenizerError(
                    f"the {family} vocabulary is not on this machine: install {spec.package} "
                    "(pip install 'windowfit[tokenizers]') or give path="
                )
            source = found
        else:
            source = Path(path).expanduser()
            if not source.is_file():
                raise TokenizerError(f"{source}: no such file")
        self._vocabulary = _load(family, source, spec)
        self.family = family
        self.source = source
        self.name = f"vocabulary:{family}"

    def estimate(self, text: str) -> int:
        return self._vocabulary.count(_utf8(text)) if text else 0

    def count_bytes(self, data: bytes) -> int:
        """Tokens in UTF-8 ``data`` (what :meth:`estimate` counts after encoding)."""
        return self._vocabulary.count(data)


_LOADED: dict[tuple[str, Path], _VocabularyType] = {}
_LOADED_LOCK = threading.Lock()


def _load(family: str, source: Path, spec: _Family) -> _VocabularyType:
    key = (family, source.resolve())
    with _LOADED_LOCK:  # one load a file, however many threads ask at once
        vocabulary = _LOADED.get(key)
        if vocabulary is None:
            vocabulary = build_vocabulary(spec.read(source), spec.pattern)
            _LOADED[key] = vocabulary
    return vocabulary


_FOUND: dict[str, VocabularyCounter | None] = {}


def find_vocabulary(family: str) -> VocabularyCounter | None:
    """The family's :class:`VocabularyCounter` when its file and the C speedup are here;
    ``None`` otherwise (and for families without a rank file: claude, deepseek)."""
    if family not in _FAMILIES:
        return None
    if family not in _FOUND:
        try:
            counter: VocabularyCounter | None = VocabularyCounter(family)
        except TokenizerError:
            counter = None
        _FOUND[family] = counter
    return _FOUND[family]


# ---------------------------------------------------------------------------------------
# Profiles checked by the vocabulary
# ---------------------------------------------------------------------------------------

#: Texts of up to this many UTF-8 bytes are counted exactly (at most about a millisecond:
#: what counting costs follows the bytes, a Han character is three).
EXACT_BYTES = 4096
#: A longer text is checked on windows of about WINDOW_BYTES bytes spread evenly through
#: it: WINDOWS, and one more for every WINDOW_EVERY characters beyond that (a very long
#: text is more often made of unlike parts), so the check costs about 2% of counting a
#: 300,000-character text exactly and never more than counting 4 KB plus 1.6%.
WINDOWS = 16
WINDOW_BYTES = 256
WINDOW_EVERY = 16_384
#: What the windows' ratio is multiplied by, for the parts of the text no window saw:
#: chosen on the Django catalogs (every one then at least 1.00 of its real count), checked
#: on the Sphinx ones and the real texts (RESULTS.md, "Counts checked by the vocabulary").
SAMPLE_MARGIN = 1.08


#: The profile families checked by another tokenizer's vocabulary, and by how much more
#: the family counts than that tokenizer. Claude's tokenizer is not public: its profile's
#: shape comes from the legacy Claude tokenizer, its level from today's models' counts,
#: which the profile puts at least 1.137 times the legacy tokenizer's on every real text
#: (RESULTS.md, "Every text, every family"). So the legacy vocabulary checks it, scaled.
REFERENCE_OF_FAMILY: Mapping[str, tuple[str, float]] = {"claude": ("claude-legacy", 1.137)}


class CheckedEstimator(Estimator):
    """A profile's estimate checked by the family's vocabulary (see the module docstring).

    ``estimate(text)``: exact for a text of up to :data:`EXACT_BYTES` bytes. A longer one
    gets the profile's estimate times the vocabulary's count over the profile's on
    :data:`WINDOWS` (or more) windows of about :data:`WINDOW_BYTES` bytes spread through it,
    times :data:`SAMPLE_MARGIN` for what no window saw: the profile corrected for the
    words of this text's language, up or down (Khmer, which the profiles count 2-4x high,
    comes down). Beyond the profile it costs exact counting of 4 KB, and of about 1.6% of
    a longer text's bytes. ``scale``: what the family counts over the vocabulary's
    tokenizer, where that is another one (see :data:`REFERENCE_OF_FAMILY`); the exact
    count is then scaled and rounded up. Stateless and safe from any thread."""

    cheap = False

    def __init__(
        self, profile: Estimator, vocabulary: VocabularyCounter, *, scale: float = 1.0
    ) -> None:
        reference = REFERENCE_OF_FAMILY.get(profile.family, (profile.family, 1.0))[0]
        if vocabulary.family != reference:
            raise SettingsError(
                f"a {profile.family} profile cannot be checked by a {vocabulary.family} vocabulary"
            )
        if not math.isfinite(scale) or scale < 1.0:
            raise SettingsError(f"scale must be at least 1 (it only raises), not {scale!r}")
        self.profile = profile
        self.vocabulary = vocabulary
        self.scale = scale
        self.family = profile.family
        self.framing = profile.framing
        self.name = f"checked:{profile.family}"

    def estimate(self, text: str) -> int:
        size = len(text)
        if size <= EXACT_BYTES:
            data = _utf8(text)
            if len(data) <= EXACT_BYTES:
                exact = self.vocabulary.count_bytes(data)
                return exact if self.scale == 1.0 else math.ceil(exact * self.scale)
        count, profile = self.vocabulary.count_bytes, self.profile.estimate
        windows = max(WINDOWS, size // WINDOW_EVERY)
        step = max(1, (size - WINDOW_BYTES) // (windows - 1))
        counted = profiled = 0
        for start in range(0, step * windows, step):
            window = text[start : start + WINDOW_BYTES]
            data = _utf8(window)
            if len(data) > WINDOW_BYTES:  # not ASCII: as many characters as fit the bytes
                window = window[: max(1, WINDOW_BYTES * len(window) // len(data))]
                data = _utf8(window)
            counted += count(data)
            profiled += profile(window)
        ratio = self.scale * counted / profiled * SAMPLE_MARGIN
        return max(1, math.ceil(profile(text) * ratio))


def checked(profile: Estimator) -> Estimator:
    """``profile`` checked by its family's vocabulary (or the one that stands in for it)
    when that is on the machine; ``profile`` itself otherwise."""
    reference, scale = REFERENCE_OF_FAMILY.get(profile.family, (profile.family, 1.0))
    counter = find_vocabulary(reference)
    return profile if counter is None else CheckedEstimator(profile, counter, scale=scale)
