"""Counts from a tokenizer's own vocabulary, and the family profiles checked against them.

Why this exists: a profile (:mod:`windowfit.profiles`) estimates from character classes,
and a class cannot see what costs most in text that is not English: whether a word is in
the vocabulary. Italian, Dutch, Basque or Indonesian letters are the same classes as
English ones, and every profile counts those languages 10-45% low (RESULTS.md, "Real text
of many languages"). Where the family's vocabulary is on the machine, windowfit can ask it.

Three things live here:

* :class:`VocabularyCounter`: exact counts with a rank-file vocabulary (OpenAI's
  ``o200k_base`` and ``cl100k_base``, Mistral's Tekken), by the optional C speedup
  ``windowfit._bpe``. It splits text with a scanner written for each pre-tokenizer pattern
  and merges by rank as tiktoken does: tiktoken's numbers (the tests compare them on
  arbitrary text), without tiktoken. The rank files come from the PyPI packages that ship
  them (``litellm``, ``mistral-common``) or tiktoken's cache; nothing is downloaded.
  It also counts with the two byte-level BPE ``tokenizer.json`` files litellm ships
  (DeepSeek-V3's, and the legacy Claude one), merging by pair as Hugging Face's
  ``tokenizers`` does: its numbers, without it.
* :class:`CheckedEstimator`: the family's profile, checked by its vocabulary. A short text
  is counted exactly; a long one is checked on a few windows spread through it, each of
  which corrects the profile's estimate of the stretch of text around it by what the
  vocabulary counts there (and a margin), which costs a small share of counting it
  exactly.
  :func:`windowfit.profiles.estimator_for` gives it for a model of these families when the
  vocabulary can be found; otherwise the profile alone.
* :class:`LargestEstimator`: ``conservative`` (no model, or one whose tokenizer windowfit
  has no profile for), the largest of the five families' checked estimates, the five
  counting through one slot table of all their tokens (``_bpe.Joint``) where they can.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import math
import os
import re
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
    from ._bpe import Joint as _JointType
    from ._bpe import Vocabulary as _VocabularyType

# ---------------------------------------------------------------------------------------
# Unicode categories as the pre-tokenizer patterns see them
# ---------------------------------------------------------------------------------------

#: The category codes of ``_bpe.c`` (one byte per code point).
OTHER, UPPER, LOWER, LETTER, MARK, NUMBER, SPACE, NEWLINE = range(8)
#: Punctuation and symbols, apart from OTHER only in DeepSeek's table
#: (``unicode_categories(punctuation=True)``): its pattern tells ``\p{P}`` from ``\p{S}``
#: and both from controls, which no other pattern does.
PUNCTUATION, SYMBOL = 8, 9

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


@lru_cache(maxsize=2)
def unicode_categories(punctuation: bool = False) -> bytes:
    """Every code point's category code, from this Python's :mod:`unicodedata`
    (about 60 ms, once a process). A character assigned in a later Unicode version than
    this Python's is punctuation here, and may be split otherwise by tiktoken's tables.
    With ``punctuation``, P* and S* characters have codes of their own (DeepSeek's
    pattern); the rank-file patterns' table keeps codes 0-7."""
    table = bytearray(CODE_POINTS)
    category = unicodedata.category
    codes = dict(_CATEGORY_CODES)
    if punctuation:
        codes.update(dict.fromkeys(("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"), PUNCTUATION))
        codes.update(dict.fromkeys(("Sm", "Sc", "Sk", "So"), SYMBOL))
    for start, stop in _ASSIGNED:
        table[start:stop] = bytes(codes.get(category(chr(c)), OTHER) for c in range(start, stop))
    for c in WHITE_SPACE:
        table[c] = NEWLINE if c in (0x0A, 0x0D) else SPACE
    return bytes(table)


# ---------------------------------------------------------------------------------------
# The vocabularies
# ---------------------------------------------------------------------------------------

#: Pattern ids of ``_bpe.c``.
PATTERN_CL100K, PATTERN_O200K, PATTERN_TEKKEN, PATTERN_GPT2, PATTERN_DEEPSEEK = range(5)


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


#: A long text's windows (see :func:`_strata`): each window's UTF-8, weight and the
#: profile's estimate of it.
Strata = Sequence[tuple[bytes, float, int]]
#: What a vocabulary counts of a long text's windows: the sum of each window's count times
#: its weight, and the lowest and highest of a window's count over its estimate.
Weighed = tuple[float, float, float]


@dataclass(frozen=True)
class _Counting:
    """A loaded vocabulary and how a text is counted with it."""

    vocabulary: _VocabularyType
    count: Callable[[str], int]
    #: the same count of a text's UTF-8 bytes (rank files: the C counter itself; a
    #: tokenizer.json first finds added tokens and normalizes, which work on text)
    count_bytes: Callable[[bytes], int]
    #: the count of a long text's windows (:data:`Weighed`), in one call where it can be
    weigh: Callable[[Strata], Weighed]
    #: whether ``count_bytes(data)`` is the C counter's count of ``data`` as it is (always
    #: for a rank file; for a tokenizer.json, ASCII where no added token can start)
    plain: Callable[[bytes], bool]


def weighed_by(count: Callable[[bytes], int], strata: Strata) -> Weighed:
    """What ``count`` counts of a long text's windows, window by window: the reference
    for the C counter's ``Vocabulary.weigh``, which gives the same numbers in one call."""
    total, low, high = 0.0, math.inf, -math.inf
    for data, weight, estimate in strata:
        tokens = count(data)
        total += tokens * weight
        ratio = tokens / estimate
        low, high = min(low, ratio), max(high, ratio)
    return total, low, high


@dataclass(frozen=True)
class _Family:
    """Where a family's vocabulary comes from and how it is loaded into a counter."""

    find: Callable[[], Path | None]
    load: Callable[[Path], _Counting]
    package: str  # the PyPI package that ships the file


def _rank_file(
    read: Callable[[Path], Sequence[bytes]], pattern: int
) -> Callable[[Path], _Counting]:
    """Loading a rank file: ``read`` gives its tokens in rank order."""

    def load(path: Path) -> _Counting:
        vocabulary = build_vocabulary(read(path), pattern)
        count = vocabulary.count
        return _Counting(
            vocabulary, lambda text: count(_utf8(text)), count, vocabulary.weigh, lambda data: True
        )

    return load


def _openai(encoding: str) -> _Family:
    from . import tokenizers

    spec = tokenizers._OPENAI_ENCODINGS[encoding]

    def read(path: Path) -> Sequence[bytes]:
        tokens = read_rank_file(tokenizers._read_bytes(path), str(path))
        if len(tokens) != spec.ranks:
            raise TokenizerError(f"{path}: {len(tokens)} tokens, not {spec.ranks} ({encoding})")
        return tokens

    pattern = PATTERN_O200K if spec.family == "o200k" else PATTERN_CL100K
    return _Family(
        lambda: tokenizers._bundled_openai_file(spec), _rank_file(read, pattern), "litellm"
    )


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

    return _Family(find, _rank_file(read, PATTERN_TEKKEN), "mistral-common")


def _hugging_face(backend: str) -> _Family:
    from . import tokenizers

    def find() -> Path | None:
        return tokenizers._find_in_package("litellm", tokenizers._HF_BUNDLED[backend])

    return _Family(find, lambda path: _hf_counting(read_byte_level_bpe(path)), "litellm")


_FAMILIES: dict[str, Callable[[], _Family]] = {
    "o200k": lambda: _openai("o200k_base"),
    "cl100k": lambda: _openai("cl100k_base"),
    "tekken": _tekken,
    # Hugging Face tokenizer.json files. "claude-legacy" is a backend's name, not a profile
    # family's: the claude profile is for Claude 3 and later, whose tokenizer is not
    # public, so find_vocabulary("claude") stays None and only this name finds the file.
    "deepseek": lambda: _hugging_face("deepseek"),
    "claude-legacy": lambda: _hugging_face("claude-legacy"),
}

#: The families a vocabulary can count for.
VOCABULARY_FAMILIES = tuple(_FAMILIES)


def build_vocabulary(tokens: Sequence[bytes], pattern: int) -> _VocabularyType:
    """The C counter for ``tokens`` in rank order (token i has rank i), split by
    ``pattern`` (:data:`PATTERN_CL100K`, :data:`PATTERN_O200K`, :data:`PATTERN_TEKKEN`)."""
    _require_bpe()
    assert BPE is not None
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


def _require_bpe() -> None:
    if BPE is None:
        raise TokenizerError(
            "exact vocabulary counts need windowfit's C speedup (windowfit._bpe), which is "
            f"not built here or is turned off by {DISABLE_VARIABLE}"
        )


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: U+FFFD, as tiktoken counts them
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


# ---------------------------------------------------------------------------------------
# Hugging Face byte-level BPE files (tokenizer.json)
# ---------------------------------------------------------------------------------------


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's stand-ins for the 256 bytes (character -> byte), which byte-level
    ``tokenizer.json`` files spell their tokens in: a printable byte stands for itself,
    and the others (controls, space, the non-printing Latin-1 ones) take U+0100 onwards
    in byte order, so that every token is a printable string."""
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    alphabet = {chr(b): b for b in sorted(printable)}
    stand_in = 0x100
    for b in range(256):
        if b not in printable:
            alphabet[chr(stand_in)] = b
            stand_in += 1
    return alphabet


#: DeepSeek-V3's pre-tokenizer, split by split (each "Isolated"), then ByteLevel without
#: its regex: the one ``_bpe.c``'s PATTERN_DEEPSEEK scans.
DEEPSEEK_SPLITS = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)


@dataclass(frozen=True)
class ByteLevelBPE:
    """What :func:`read_byte_level_bpe` takes from a ``tokenizer.json``."""

    tokens: tuple[bytes, ...]  # by id; b"" for an id that is no byte string
    merges: bytes  # (left, right, result) ids as native uint32 triples, in merge order
    pattern: int  # PATTERN_GPT2 or PATTERN_DEEPSEEK
    nfkc: bool  # the normalizer is NFKC (else none)
    added: tuple[tuple[str, bool], ...]  # added tokens: (content, matched after normalizing)


def _pattern_of(pre: object, where: str) -> int:
    """The scanner for a pre-tokenizer, or a TokenizerError naming what is not known."""
    if isinstance(pre, dict) and pre.get("type") == "ByteLevel":
        if pre.get("add_prefix_space") or not pre.get("use_regex", True):
            raise TokenizerError(
                f"{where}: a ByteLevel pre-tokenizer that adds a prefix space or does "
                "without its regex is not one windowfit can count with"
            )
        return PATTERN_GPT2
    if isinstance(pre, dict) and pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers")
        if isinstance(steps, list) and len(steps) == len(DEEPSEEK_SPLITS) + 1:
            splits = [
                step.get("pattern", {}).get("Regex")
                for step in steps[:-1]
                if isinstance(step, dict)
                and step.get("type") == "Split"
                and step.get("behavior") == "Isolated"
                and not step.get("invert")
                and isinstance(step.get("pattern"), dict)
            ]
            last = steps[-1]
            if (
                tuple(splits) == DEEPSEEK_SPLITS
                and isinstance(last, dict)
                and last.get("type") == "ByteLevel"
                and not last.get("add_prefix_space")
                and last.get("use_regex") is False
            ):
                return PATTERN_DEEPSEEK
    kind = pre.get("type") if isinstance(pre, dict) else pre
    raise TokenizerError(
        f"{where}: its pre-tokenizer ({kind}) is neither GPT-2's ByteLevel nor DeepSeek-V3's "
        "splits, the two windowfit can count with"
    )


def _nfkc_of(normalizer: object, where: str) -> bool:
    if normalizer is None:
        return False
    if isinstance(normalizer, dict):
        steps = [normalizer]
        if normalizer.get("type") == "Sequence":
            inner = normalizer.get("normalizers")
            steps = inner if isinstance(inner, list) else [normalizer]
        kinds = [step.get("type") if isinstance(step, dict) else step for step in steps]
        if kinds == []:
            return False
        if kinds == ["NFKC"]:
            return True
    raise TokenizerError(f"{where}: only an NFKC normalizer, or none, can be counted with")


def read_byte_level_bpe(path: Path) -> ByteLevelBPE:
    """The vocabulary, merges and text handling of a Hugging Face ``tokenizer.json``,
    refusing (:class:`~windowfit.errors.TokenizerError`, saying what) anything but a
    byte-level BPE model whose pre-tokenizer ``_bpe.c`` has a scanner for: another model
    or normalizer would count differently, and a wrong count must not look exact."""
    from . import tokenizers

    where = str(path)
    try:
        data = json.loads(tokenizers._read_bytes(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"{where}: not a tokenizer.json ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise TokenizerError(f"{where}: not a tokenizer.json (no model)")
    model = data["model"]
    if model.get("type") != "BPE":
        raise TokenizerError(f"{where}: a {model.get('type')} model, not BPE")
    for option in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise TokenizerError(f"{where}: a BPE model with {option} is not counted here")
    if model.get("byte_fallback") or model.get("ignore_merges"):
        raise TokenizerError(f"{where}: byte_fallback and ignore_merges are not counted here")
    pattern = _pattern_of(data.get("pre_tokenizer"), where)
    nfkc = _nfkc_of(data.get("normalizer"), where)
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list) or not vocab:
        raise TokenizerError(f"{where}: the BPE model has no vocab or no merges")
    ids = list(vocab.values())
    if not all(isinstance(i, int) and 0 <= i < 1 << 24 for i in ids) or len(set(ids)) != len(ids):
        raise TokenizerError(f"{where}: the vocab's ids are not distinct small integers")
    alphabet = byte_level_alphabet()
    # each stand-in to the Latin-1 character of its byte, and every other character below
    # U+0100 out of Latin-1, so that encoding fails exactly for a string that is not bytes
    to_latin1 = {c: "\uffff" for c in range(0x100)}
    to_latin1.update({ord(c): chr(b) for c, b in alphabet.items()})
    tokens = [b""] * (max(ids) + 1)
    for string, i in vocab.items():
        # a string that is not bytes (a special token's, which no text spells) stays b""
        with contextlib.suppress(UnicodeEncodeError):
            tokens[i] = string.translate(to_latin1).encode("latin-1")
    missing = [b for c, b in alphabet.items() if c not in vocab]
    if missing:
        raise TokenizerError(
            f"{where}: not every byte is a token (byte 0x{missing[0]:02X} is not), so a "
            "count would drop characters"
        )
    triples = array("I")
    for number, merge in enumerate(merges):
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(pair, list) or len(pair) != 2:
            raise TokenizerError(f"{where}: merge {number} ({merge!r}) is not two tokens")
        left, right = pair
        try:
            ids3 = (vocab[left], vocab[right], vocab[left + right])
        except (KeyError, TypeError):
            raise TokenizerError(
                f"{where}: merge {number} ({merge!r}) is not of vocab tokens"
            ) from None
        if tokens[ids3[0]] and tokens[ids3[1]]:  # else bytes never make it
            triples.extend(ids3)
    added = []
    for token in data.get("added_tokens") or ():
        content = token.get("content") if isinstance(token, dict) else None
        if not isinstance(content, str) or not content:
            raise TokenizerError(f"{where}: an added token without content")
        if token.get("single_word") or token.get("lstrip") or token.get("rstrip"):
            raise TokenizerError(
                f"{where}: added token {content!r} is single_word, lstrip or rstrip, "
                "which windowfit does not count"
            )
        added.append((content, bool(token.get("normalized"))))
    return ByteLevelBPE(tuple(tokens), triples.tobytes(), pattern, nfkc, tuple(added))


def build_merge_vocabulary(bpe: ByteLevelBPE) -> _VocabularyType:
    """The C counter in merge mode for a read ``tokenizer.json``."""
    _require_bpe()
    assert BPE is not None
    offsets = array("I", [0])
    for token in bpe.tokens:
        offsets.append(offsets[-1] + len(token))
    try:
        return BPE(
            blob=b"".join(bpe.tokens),
            offsets=offsets.tobytes(),
            categories=unicode_categories(punctuation=bpe.pattern == PATTERN_DEEPSEEK),
            pattern=bpe.pattern,
            merges=bpe.merges,
        )
    except ValueError as exc:
        raise TokenizerError(f"not a byte-level BPE vocabulary: {exc}") from exc


def _splitter(contents: list[str]) -> Callable[[str], list[tuple[str, bool]]]:
    """Text cut at the added tokens ``contents`` (True for an added token's part), the
    leftmost and at one place the longest, as Hugging Face matches them; a text holding
    none of their first characters is not searched."""
    if not contents:
        return lambda text: [(text, False)]
    firsts = tuple({content[0] for content in contents})
    # Where an added token may start (its first two characters), each length of the
    # tokens that start so is one set lookup: a regex of the alternatives tries them one
    # by one (DeepSeek's 1,283 at every "<" of code).
    grouped: dict[str, dict[int, set[str]]] = {}
    for content in contents:
        grouped.setdefault(content[:2], {}).setdefault(len(content), set()).add(content)
    tables = {prefix: sorted(group.items(), reverse=True) for prefix, group in grouped.items()}
    singles = any(len(prefix) == 1 for prefix in tables)
    starts = re.compile("|".join(map(re.escape, sorted(tables, key=len, reverse=True))))

    def split(text: str) -> list[tuple[str, bool]]:
        if not any(first in text for first in firsts):
            return [(text, False)]
        parts: list[tuple[str, bool]] = []
        at = 0
        start = starts.search(text)
        while start is not None:
            place = start.start()
            candidates = tables.get(text[place : place + 2], [])
            if singles and text[place] in tables:
                candidates = sorted(candidates + tables[text[place]], reverse=True)
            for length, found in candidates:
                if text[place : place + length] in found:
                    if place > at:
                        parts.append((text[at:place], False))
                    parts.append((text[place : place + length], True))
                    at = place + length
                    start = starts.search(text, at)
                    break
            else:
                start = starts.search(text, place + 1)
        if at < len(text):
            parts.append((text[at:], False))
        return parts

    return split


#: Characters whose compatibility mappings are newer than the Unicode tables Hugging
#: Face's ``tokenizers`` normalizes with (about 12.0, in tokenizers 0.23): its NFKC leaves
#: them as they are, so windowfit's does too. Measured on every character this Python
#: (Unicode 14) knows (tests/test_vocabulary_hf.py compares them all), with the Unicode 15
#: Cyrillic modifier letters added for a newer Python.
_NEWER_COMPATIBILITY = (
    (0x32FF, 0x32FF), (0xA7F2, 0xA7F4), (0xAB69, 0xAB69), (0x10781, 0x10785),
    (0x10787, 0x107B0), (0x107B2, 0x107BA), (0x1F16C, 0x1F16C), (0x1FBF0, 0x1FBF9),
    (0x1E030, 0x1E06D),
)  # fmt: skip
_KEPT_BY_NFKC = re.compile(
    "([" + "".join(f"{chr(a)}-{chr(b)}" for a, b in _NEWER_COMPATIBILITY) + "]+)"
)


def nfkc_as_hf(text: str) -> str:
    """NFKC as ``tokenizers`` does it: this Python's, but for the characters in
    :data:`_NEWER_COMPATIBILITY`, kept (to its tables they are starters that map to
    themselves, so the text between them is normalized on its own)."""
    if unicodedata.is_normalized("NFKC", text):  # most text: cheaper than the search
        return text
    if _KEPT_BY_NFKC.search(text) is None:
        return unicodedata.normalize("NFKC", text)
    parts = _KEPT_BY_NFKC.split(text)  # odd parts are the kept runs
    return "".join(
        part if k % 2 else unicodedata.normalize("NFKC", part) for k, part in enumerate(parts)
    )


def _hf_counting(bpe: ByteLevelBPE) -> _Counting:
    """Counting as ``tokenizers`` encodes without special tokens added: the added tokens
    are found first (one token each, special or not: Hugging Face finds them in the text
    either way), those matched before normalizing in the raw text; the rest is normalized
    (NFKC: this Python's unicodedata), cut at the added tokens matched after normalizing,
    and each part counted by the C counter."""
    vocabulary = build_merge_vocabulary(bpe)
    raw = _splitter([content for content, normalized in bpe.added if not normalized])
    normalized = _splitter([content for content, normalized in bpe.added if normalized])
    nfkc, count = bpe.nfkc, vocabulary.count
    # ASCII is its own NFKC: an ASCII text where no added token can start is the C
    # counter's alone (most of a conversation; the general path costs about 2 us a text)
    # (their first 6 characters: "<|" and "</" alone are everywhere in code and markup)
    starts = sorted({c[:6] for c, _ in bpe.added if c[:6].isascii()}, key=len, reverse=True)
    holds_text = re.compile("|".join(map(re.escape, starts))).search if starts else None
    holds_data = (
        re.compile(b"|".join(re.escape(s.encode()) for s in starts)).search if starts else None
    )

    def count_text(text: str) -> int:
        if text.isascii() and (holds_text is None or holds_text(text) is None):
            return count(text.encode())
        total = 0
        for part, added in raw(text):
            if added:
                total += 1
                continue
            if nfkc and not part.isascii():
                part = nfkc_as_hf(part)
            for piece, added_after in normalized(part):
                total += 1 if added_after else count(_utf8(piece))
        return total

    def plain(data: bytes) -> bool:
        return data.isascii() and (holds_data is None or holds_data(data) is None)

    def count_data(data: bytes) -> int:
        if plain(data):
            return count(data)
        return count_text(data.decode("utf-8", "replace"))

    weigh_all = vocabulary.weigh

    def weigh(strata: Strata) -> Weighed:
        # windows of ASCII where no added token can start (looked for once, in all of
        # them joined: a start across two is only a slower answer) are the C counter's
        if plain(_joined(strata)):
            return weigh_all(strata)
        return weighed_by(count_data, strata)

    return _Counting(vocabulary, count_text, count_data, weigh, plain)


def _joined(strata: Strata) -> bytes:
    """A long text's windows in one string, a newline between two (for a look for added
    tokens' starts once: one that spans two windows only sends them the slower way)."""
    return b"\n".join([data for data, _, _ in strata])


# ---------------------------------------------------------------------------------------
# The counter
# ---------------------------------------------------------------------------------------


class VocabularyCounter(Estimator):
    """Exact counts for ``family`` from its vocabulary file, computed in C (a long text
    without the GIL; one of up to 4 KB with it held, through merged pieces shared by every
    short text: see ``_bpe.c``). ``o200k``, ``cl100k``, ``tekken``: from the rank file,
    tiktoken's numbers (``encode_ordinary``: special-token strings count as text). ``deepseek``,
    ``claude-legacy``: from the ``tokenizer.json``, the numbers of Hugging Face's
    ``tokenizers`` without special tokens added (an added token's string in the text is
    one token, as there). Without ``path`` the file is the one the family's package ships
    (``litellm``, ``mistral-common``) or tiktoken's cache holds.

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
        counting = _load(family, source, spec)
        self._vocabulary = counting.vocabulary
        self._count = counting.count
        self.count_bytes: Callable[[bytes], int] = counting.count_bytes
        """Tokens in UTF-8 ``data`` (what :meth:`estimate` counts after encoding)."""
        self.weigh: Callable[[Strata], Weighed] = counting.weigh
        """What the vocabulary counts of a long text's windows (:data:`Weighed`)."""
        self.plain: Callable[[bytes], bool] = counting.plain
        """Whether :attr:`count_bytes` of ``data`` is the C counter's count of it."""
        self.family = family
        self.source = source
        self.name = f"vocabulary:{family}"

    def estimate(self, text: str) -> int:
        return self._count(text) if text else 0


_LOADED: dict[tuple[str, Path], _Counting] = {}
_LOADED_LOCK = threading.Lock()


def _load(family: str, source: Path, spec: _Family) -> _Counting:
    key = (family, source.resolve())
    with _LOADED_LOCK:  # one load a file, however many threads ask at once
        counting = _LOADED.get(key)
        if counting is None:
            _require_bpe()
            counting = spec.load(source)
            _LOADED[key] = counting
    return counting


_FOUND: dict[str, VocabularyCounter | None] = {}


def find_vocabulary(family: str) -> VocabularyCounter | None:
    """The family's :class:`VocabularyCounter` when its file and the C speedup are here;
    ``None`` otherwise (and for families without a vocabulary file: claude, whose legacy
    tokenizer is the ``claude-legacy`` counter's, not Claude 3's)."""
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
#: What the windows' answer is multiplied by, for the parts of the text no window saw:
#: chosen on the Django catalogs (every one then at least 1.00 of its real count), checked
#: on the Sphinx ones and the real texts (RESULTS.md, "Counts checked by the vocabulary").
SAMPLE_MARGIN = 1.08


#: The families whose check is scaled: the vocabulary that checks each, and how much more
#: the provider counts than that vocabulary.
#:
#: * claude: Claude's tokenizer is not public. Its profile's shape comes from the legacy
#:   Claude tokenizer and its level from today's models' counts, which put it at least
#:   1.137 times the legacy tokenizer's on every real text (RESULTS.md, "Every text,
#:   every family"); so the legacy vocabulary checks it, scaled by that.
#: * deepseek: DeepSeek's API counts about 3% more than its tokenizer on a request (its
#:   chat template), beyond windowfit's per-message overheads: the smallest scale that
#:   keeps every request of half the mini-swe-agent runs at or over the API's count
#:   (1.003-1.087), held out on the other half (1.001-1.065).
REFERENCE_OF_FAMILY: Mapping[str, tuple[str, float]] = {
    "claude": ("claude-legacy", 1.137),
    "deepseek": ("deepseek", 1.03),
}


class CheckedEstimator(Estimator):
    """A profile's estimate checked by the family's vocabulary (see the module docstring).

    ``estimate(text)``: exact for a text of up to :data:`EXACT_BYTES` bytes. A longer one
    is checked on :data:`WINDOWS` (or more) windows of about :data:`WINDOW_BYTES` bytes
    spread through it, each correcting the profile's estimate of the stretch of text it is
    like by the vocabulary's count over the profile's there (:func:`_strata`,
    :func:`_checked_count`), times :data:`SAMPLE_MARGIN` for what no window saw: the
    profile corrected for the words of each part's language, up or down (Khmer, which the
    profiles count 2-4x high, comes down). Beyond the profile it costs exact counting of
    4 KB, and of about 1.6% of a longer text's bytes. ``scale``: what the family counts
    over the vocabulary's tokenizer, where that is another one (see
    :data:`REFERENCE_OF_FAMILY`); the exact count is then scaled (:func:`scaled_count`).
    Stateless and safe from any thread."""

    cheap = False

    def __init__(
        self, profile: Estimator, vocabulary: VocabularyCounter, *, scale: float = 1.0
    ) -> None:
        reference = REFERENCE_OF_FAMILY.get(profile.family, (profile.family, 1.0))[0]
        if vocabulary.family not in (reference, profile.family):
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

    def _weigh(self, strata: Strata) -> list[Weighed]:
        return [self.vocabulary.weigh(strata)]

    def estimate(self, text: str) -> int:
        size = len(text)
        if size <= EXACT_BYTES:
            data = _utf8(text)
            if len(data) <= EXACT_BYTES:
                exact = self.vocabulary.count_bytes(data)
                return exact if self.scale == 1.0 else scaled_count(exact, self.scale)
        counted = _checked_count(text, self.profile.estimate, self._weigh, (self.scale,))
        return max(1, math.ceil(counted * SAMPLE_MARGIN))


def scaled_count(count: int, scale: float) -> int:
    """An exact ``count`` of the vocabulary that stands in for a family, scaled to the
    family (``scale`` at least 1) and rounded to the nearest token, never below ``count``.

    Why not rounded up: the scale is what the family counts over the stand-in on whole
    texts; a text the stand-in counts as one token is most likely one token to the family
    too, and rounding 1 x 1.137 up to 2 doubled every one-word text (and a conversation is
    many of them). Rounded to nearest, the answer is never below the stand-in's count
    (``count x scale >= count``) and at most 1.25 times it at any size."""
    return math.floor(count * scale + 0.5)


#: A window stands for the stretch of text around it when the profile's estimate per
#: character of the two differs by at most this factor; otherwise that stretch takes the
#: ratio of all the windows (see :func:`_strata`). Chosen on padded prose and texts of
#: unlike parts (RESULTS.md, "Long texts of unlike parts"), on 16 windows: at 1.25, 22 of
#: 720 padded texts' estimates were under 0.98 of the real count (10 at 1.5); at 2, windows
#: on blank padding stood for prose again and 27 were over 1.25 (4 at 1.5).
REPRESENTATIVE = 1.5


def _strata(
    text: str, profile: Callable[[str], int], finer: int = 1
) -> list[tuple[bytes, float, int]]:
    """The windows a long text is checked on, each as its UTF-8, its weight and the
    profile's estimate of it: a vocabulary's count of the text is the sum of its counts of
    the windows times their weights (before :data:`SAMPLE_MARGIN`).

    The windows: :data:`WINDOWS` (and one more for every :data:`WINDOW_EVERY` characters
    beyond; ``finer`` times as many) of about :data:`WINDOW_BYTES` bytes, spread evenly
    through the text; each has a stretch, the text from halfway to the window before it
    to halfway to the one after. A window like its stretch (their profile estimates per
    character within :data:`REPRESENTATIVE` of each other) corrects the profile's estimate
    of that stretch by its own ratio, vocabulary count over profile estimate; the other
    stretches take the ratio of all the windows together, each window standing for as
    many characters as its stretch has.

    Why not one ratio for the whole text, as before: a long text is often made of unlike
    parts (3,000 digits and then 17,000 characters of Hindi) that the profile misjudges by
    different factors, and one ratio of every window's count over every window's estimate
    weighs each part by how many windows fell in it, not by how much of the text it is:
    it under-counted such texts by up to 14% (o200k). Why not each window's ratio for its
    stretch alone: a window that falls on a run of blanks in prose (an estimate of 11 where
    the prose around it has 60) then set the ratio of a stretch it is not like, and
    answered 0.87 or 1.7 of the real count (RESULTS.md, "Long texts of unlike parts")."""
    size = len(text)
    windows = max(WINDOWS, size // WINDOW_EVERY) * finer
    strata = getattr(profile, "strata", None)  # the C weigher's form of what follows
    if strata is not None and text.isascii():
        found: list[tuple[bytes, float, int]] = strata(text, windows, WINDOW_BYTES, REPRESENTATIVE)
        return found
    step = max(1, (size - WINDOW_BYTES) // (windows - 1))
    starts = range(0, step * windows, step)
    # (written for the interpreter: on 300,000 characters of ASCII the arithmetic of 18
    # windows took as long as the profile's pass over the whole text when written a line
    # an element)
    texts = [text[start : start + WINDOW_BYTES] for start in starts]
    if text.isascii():  # a character is a byte
        datas = [window.encode() for window in texts]
    else:  # as many characters as fit the bytes
        datas = []
        for k, window in enumerate(texts):
            data = _utf8(window)
            if len(data) > WINDOW_BYTES:
                window = texts[k] = window[: max(1, WINDOW_BYTES * len(window) // len(data))]
                data = _utf8(window)
            datas.append(data)
    shown = [max(1, len(window)) for window in texts]  # each window's characters
    # the profile's estimate of each window
    estimated = [max(1, estimate) for estimate in map(profile, texts)]
    centres = [start + len(window) // 2 for start, window in zip(starts, texts, strict=True)]
    # the stretches: text[cuts[k]:cuts[k + 1]], from halfway to the window before to
    # halfway to the one after (never falling back: windows cut to fit their bytes can
    # have centres out of order)
    middles = [min(size, (a + b) // 2) for a, b in itertools.pairwise(centres)]
    cuts = [0, *itertools.accumulate(middles, max), size] if middles else [0, size]
    chars = [b - a for a, b in itertools.pairwise(cuts)]  # each stretch's characters
    # the profile's estimate of each stretch: by the C weigher's one call where the profile
    # is one (no copy of the text), else slice by slice
    estimates = getattr(profile, "estimates", None)
    stretch: list[int] = (
        estimates(text, cuts)
        if estimates is not None
        else [profile(text[a:b]) for a, b in itertools.pairwise(cuts)]
    )
    # the pooled ratio: each window's count and estimate times its stretch's characters
    # over its own, so that a window stands for as much of the text as its stretch is
    spread = [c / n for c, n in zip(chars, shown, strict=True)]
    pooled = 0.0  # (added in order, as the C weigher does: sum() compensates on 3.12+)
    for part, seen in zip(spread, estimated, strict=True):
        pooled += part * seen
    own: list[float] = []
    left = 0  # the profile's estimate of the stretches that take the pooled ratio
    for seen, n, part, c in zip(estimated, shown, stretch, chars, strict=True):
        per_window = seen / n
        per_stretch = part / c if c else 0.0
        if per_window <= per_stretch:
            alike = per_window > 0 and per_stretch <= REPRESENTATIVE * per_window
        else:
            alike = per_stretch > 0 and per_window <= REPRESENTATIVE * per_stretch
        if alike:
            own.append(part / seen)
        else:
            own.append(0.0)
            left += part
    share = left / pooled if pooled > 0 else 0.0
    return [
        (data, mine + share * spreads, seen)
        for data, mine, spreads, seen in zip(datas, own, spread, estimated, strict=True)
    ]


#: When one vocabulary's ratio (count over the profile's estimate) on one window is more
#: than this many times its ratio on another, the text is uneven at the windows' scale
#: (blank padding between paragraphs, parts of a few hundred characters each, a catalog
#: of short strings in a language the profile misjudges unevenly), and is checked again
#: on :data:`UNEVEN_FINER` times as many windows. At 2, a Tatar catalog whose windows'
#: ratios ran 0.71-1.28 was not, and got 0.93 of its real count (1.5: 0.99); at 1.5 the
#: check runs again on 5 of 186 long real and generated texts of one kind, never ASCII.
UNEVEN = 1.5
UNEVEN_FINER = 2


def _checked_count(
    text: str,
    profile: Callable[[str], int],
    weigh: Callable[[Strata], Sequence[Weighed]],
    scales: Sequence[float],
) -> float:
    """The largest of what each vocabulary counts in a long text, by its windows
    (:func:`_strata`): ``weigh`` gives each vocabulary's :data:`Weighed` of them (see
    :func:`weighed_by`), ``scales`` each one's scale; before :data:`SAMPLE_MARGIN`. An
    uneven text (:data:`UNEVEN`) is checked on more windows: with 16, the windows that fall
    on padding lines of 5-character blank runs in prose decided too much of the answer for
    Tekken (0.87 of the real count); with 32, 1.03 (RESULTS.md, "Long texts of unlike
    parts"). Homogeneous text is almost never uneven, and costs no more."""
    strata = _strata(text, profile)
    weighed = weigh(strata)
    if any(high > UNEVEN * low for _, low, high in weighed):
        strata = _strata(text, profile, UNEVEN_FINER)
        weighed = weigh(strata)
    return max(scale * total for (total, _, _), scale in zip(weighed, scales, strict=True))


class LargestEstimator(Estimator):
    """``conservative`` checked: the largest of every calibrated family's estimate, each
    the family's profile checked by its vocabulary where that is on the machine (its
    profile alone where not).

    Why not the ``conservative`` profile alone: a profile cannot tell a Dutch word from an
    English one, and the words of Latin-script languages other than English cost more
    tokens than their letters' classes say (*Gebruikersnaam*: 3 by the profile, 7 by the
    legacy Claude tokenizer). No single vocabulary stands in for the five, so every one
    counts, and the answer is at least each family's count (on a long text, as its check
    on windows finds it): what an unknown model's tokenizer is bounded by, as far as
    windowfit knows. It costs one exact count per vocabulary of each text of up to
    :data:`EXACT_BYTES` bytes (the text encoded once for all of them); a longer one is
    the largest of what the vocabularies count on the same windows, weighted by the
    ``conservative`` profile's estimates (:func:`_strata`, :func:`_checked_count`).
    Where every vocabulary's count is the C counter's (``plain``: ASCII without an added
    token's start), the five count through one slot table of all their tokens
    (``_bpe.Joint``, built with the estimator: about 40 ms and 8 MB): the same numbers,
    the words found once in the processor's cache for all five. ``framing`` is the
    ``conservative`` profile's (the largest). Safe from any thread (the Joint is read
    only; each vocabulary's cache of merged pieces is used with the GIL held)."""

    cheap = False

    def __init__(self, profile: Estimator, parts: Sequence[Estimator]) -> None:
        if not parts:
            raise SettingsError("the largest of no estimates: give at least one part")
        self.profile = profile
        self.parts = tuple(parts)
        self.family = profile.family
        self.framing = profile.framing
        self.name = f"checked:{profile.family}"
        exact = [p for p in self.parts if isinstance(p, CheckedEstimator)]
        self._exact = tuple(p.vocabulary.count_bytes for p in exact)
        self._weighs = tuple(p.vocabulary.weigh for p in exact)
        self._scales = tuple(p.scale for p in exact)
        # one slot table for the vocabularies' tokens (see _bpe.c's Joint): counted one
        # after another, they find the words the first looked up in the cache; used where
        # every vocabulary's count is the C counter's (``plain``: ASCII without an added
        # token's start, for a tokenizer.json). (A CheckedEstimator exists only where the
        # C counter is built, and the Joint is part of it.)
        self._joint: _JointType | None = None
        if exact:
            from ._bpe import Joint

            self._joint = Joint(vocabularies=tuple(p.vocabulary._vocabulary for p in exact))
        self._plains = tuple(p.vocabulary.plain for p in exact)
        self._alone = tuple(p.estimate for p in self.parts if not isinstance(p, CheckedEstimator))
        self._every = tuple(p.estimate for p in self.parts)

    def estimate(self, text: str) -> int:
        if len(text) <= EXACT_BYTES:
            data = _utf8(text)
            if len(data) <= EXACT_BYTES:
                # what each CheckedEstimator would answer, the bytes encoded once
                best = 0
                for tokens, scale in zip(self._counts(data), self._scales, strict=True):
                    if scale != 1.0:
                        tokens = scaled_count(tokens, scale)
                    if tokens > best:
                        best = tokens
                for estimate in self._alone:
                    tokens = estimate(text)
                    if tokens > best:
                        best = tokens
                return best
        if not self._exact:
            return max(estimate(text) for estimate in self._every)
        # A long text: the largest of what each vocabulary counts on the same windows,
        # weighted by the conservative profile's estimates (:func:`_strata`: one profile
        # pass over the text for all five). One vocabulary at a time over every window:
        # the windows' words recur, and their slots stay in the processor's cache until
        # the next vocabulary (taking the five in turn on each window was a third slower).
        largest = _checked_count(text, self.profile.estimate, self._weigh_all, self._scales)
        best = max(1, math.ceil(largest * SAMPLE_MARGIN))
        for estimate in self._alone:
            best = max(best, estimate(text))
        return best

    def _counts(self, data: bytes) -> list[int]:
        """Each vocabulary's count of ``data`` (through the Joint where it can)."""
        if self._joint is not None and all(plain(data) for plain in self._plains):
            return self._joint.counts(data)
        return [count(data) if data else 0 for count in self._exact]

    def _weigh_all(self, strata: Strata) -> list[Weighed]:
        """Each vocabulary's :data:`Weighed` of a long text's windows (the same)."""
        if self._joint is not None:
            joined = _joined(strata)
            if all(plain(joined) for plain in self._plains):
                return self._joint.weigh(strata)
        return [weigh(strata) for weigh in self._weighs]


def checked(profile: Estimator) -> Estimator:
    """``profile`` checked by its family's vocabulary (or the one that stands in for it)
    when that is on the machine; ``profile`` itself otherwise. ``conservative`` is checked
    by every family's vocabulary (:class:`LargestEstimator`), when at least one is here."""
    if profile.family == "conservative":
        return _largest(profile)
    reference, scale = REFERENCE_OF_FAMILY.get(profile.family, (profile.family, 1.0))
    counter = find_vocabulary(reference)
    return profile if counter is None else CheckedEstimator(profile, counter, scale=scale)


def _largest(profile: Estimator) -> Estimator:
    from .profiles import CALIBRATED_FAMILIES, estimator_for

    # each family's own shared estimator (one profile object, and its tables, per family)
    parts = [estimator_for(family=family) for family in CALIBRATED_FAMILIES]
    if not any(isinstance(part, CheckedEstimator) for part in parts):
        return profile  # no vocabulary here: the profile of every rate at its highest
    return LargestEstimator(profile, parts)
