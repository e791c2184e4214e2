"""Real tokenizers behind the :class:`~windowfit.tokens.Estimator` interface.

Nothing here downloads anything. The tokenizer files are read from places where they are
already on disk:

* OpenAI BPE rank files (``o200k_base``, ``cl100k_base``, ``p50k_base``, ``r50k_base``):
  the ``litellm`` wheel bundles them in ``litellm/litellm_core_utils/tokenizers/``, named
  like tiktoken's own download cache, by the SHA-1 of the URL tiktoken would fetch them
  from (``<sha1 of https://openaipublic.blob.core.windows.net/encodings/NAME.tiktoken>``).
  tiktoken's cache directory (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR``, or
  ``<tmp>/data-gym-cache``) is searched as well. Every file found that way is checked
  against the SHA-256 that tiktoken publishes for it.
* Hugging Face ``tokenizer.json`` files: ``litellm`` also bundles DeepSeek-V3's tokenizer
  and Anthropic's legacy (Claude 1/2-era) tokenizer.
* Mistral's Tekken files: ``mistral_common/data/tekken_*.json`` in the ``mistral-common``
  wheel.

The packages that ship the files are never imported: their directories are found with
:func:`importlib.util.find_spec`, so they can be installed without their dependencies
(``pip install --no-deps litellm mistral-common``). Every estimator also takes an
explicit ``path``.

Counting needs ``tiktoken`` (extra ``tiktoken``) for the OpenAI and Tekken encodings and
``tokenizers`` (extra ``hf``) for the Hugging Face files; both are imported only when an
estimator is built. Counts are for plain text: no BOS/EOS, and text that looks like a
special token (``<|endoftext|>``) is counted as ordinary text by the tiktoken-based
estimators. Hugging Face tokenizers always match their added tokens (such as DeepSeek's
``<｜end▁of▁sentence｜>``) in the text; that is how those tokenizers behave.

Long texts (over ``split_above`` characters) are cut at places where the tokenizers'
pre-tokenisation splits anyway (after a lone newline, or before a single space between two
letters), and the pieces are counted in one parallel batch call. For the bundled files
this gives exactly the count of the whole text; for a Hugging Face file of your own whose
pre-tokeniser adds a prefix space (SentencePiece-style ``▁``), each cut can add about one
token: pass ``split_above=None`` to count in one call. A whitespace run of a million
characters crashes tiktoken's regex engine, so the tiktoken-based estimators count runs
longer than :data:`MAX_WHITESPACE_RUN` in pieces (about one token off per piece).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib.util
import json
import os
import re
import tempfile
import threading
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from windowfit.errors import MissingExtraError, TokenizerError
from windowfit.tokens import Estimator

if TYPE_CHECKING:
    import tiktoken
    import tokenizers

__all__ = [
    "BACKEND_NAMES",
    "BACKEND_OF_FAMILY",
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_SPLIT_ABOVE",
    "FAMILY_BACKENDS",
    "HF_CHUNK_CHARS",
    "HF_SPLIT_ABOVE",
    "MAX_WHITESPACE_RUN",
    "BackendInfo",
    "HFTokenizerEstimator",
    "TekkenEstimator",
    "TiktokenEstimator",
    "TokenizerEstimator",
    "available_backends",
    "load_backend",
    "parse_tiktoken_bpe",
    "split_text",
    "split_whitespace_runs",
]

#: Texts longer than this many characters are split and counted in a parallel batch by
#: the tiktoken-based estimators. tiktoken is linear on big strings (4-20M chars/s in one
#: call); the batch only buys the other cores: 1.3-1.6x on two cores for 600k characters.
DEFAULT_SPLIT_ABOVE = 256_000
#: Target size of the pieces a long text is cut into by the tiktoken-based estimators.
DEFAULT_CHUNK_CHARS = 64_000
#: Hugging Face ``tokenizers`` slows down on long single inputs (0.6-1.4M chars/s for 600k
#: characters in one call) and its batch call runs on every core: 16k-character pieces
#: count 2.5-4x faster on two cores, and already 1.7x for a 50k-character text.
HF_SPLIT_ABOVE = 32_000
#: Target size of the pieces a long text is cut into by the Hugging Face estimators.
HF_CHUNK_CHARS = 16_000

PathArg = str | os.PathLike[str]
_T = TypeVar("_T")


# --------------------------------------------------------------------------------------
# Splitting long texts where every bundled tokenizer's pre-tokeniser splits anyway
# --------------------------------------------------------------------------------------

# Cut AFTER a lone newline (non-whitespace on both sides, and not "/" after it: o200k and
# Tekken join "[\r\n/]*" to punctuation), or BEFORE one space between two letters. No
# pre-tokenisation pattern joins a newline to the character after it, or a letter to a
# following space, so every tokenizer splits there anyway. A longer whitespace run is
# never cut or ended by a cut: GPT-2-style patterns ("\s+(?!\S)") look past it.
_SAFE_CUT = re.compile(r"(?<=\S)\n(?=[^\s/])|(?<=[^\W\d_]) (?=[^\W\d_])")


def split_text(text: str, chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[str]:
    """Cut ``text`` into pieces of at least ``chunk_chars`` characters (the last may be
    shorter) at places where the bundled tokenizers split anyway, so that the pieces' token
    counts add up to the text's; ``"".join(pieces) == text``.

    A text with no such place after ``chunk_chars`` characters is not cut further.
    """
    if chunk_chars < 1:
        raise ValueError("chunk_chars must be at least 1")
    pieces: list[str] = []
    start = 0
    n = len(text)
    while n - start > chunk_chars:
        match = _SAFE_CUT.search(text, start + chunk_chars)
        if match is None:
            break
        cut = match.end() if match.group() == "\n" else match.start()
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


#: tiktoken's regex engine (fancy-regex) gives up with a stack overflow on a whitespace run
#: of about a million characters (measured: 800,000 spaces pass, 1,000,000 fail). The
#: tiktoken-based estimators cut runs longer than this, which changes the count by about one
#: token per cut: a run of 100,000 spaces is some 780 tokens.
MAX_WHITESPACE_RUN = 100_000


_WHITESPACE = re.compile(r"\s*")


def _has_whitespace_run(text: str, limit: int) -> bool:
    """Whether ``text`` has a whitespace run longer than ``limit``: a few probes, not a scan.

    A run longer than ``limit`` covers a position that is a multiple of ``limit``, so only
    those positions are looked at, and the run through each is measured.
    """
    for probe in range(0, len(text), limit):
        if text[probe].isspace():
            match = _WHITESPACE.match(text, probe)
            end = match.end() if match else probe
            left = text[max(0, probe - limit) : probe]
            start = probe - (len(left) - len(left.rstrip()))
            if end - start > limit:
                return True
    return False


def split_whitespace_runs(text: str, limit: int = MAX_WHITESPACE_RUN) -> list[str]:
    """Cut every whitespace run longer than ``limit`` into pieces of ``limit`` characters,
    so that no piece of the result holds a run longer than ``limit``; joins back to ``text``.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if len(text) <= limit or not _has_whitespace_run(text, limit):
        return [text]
    pieces: list[str] = []
    last = 0
    for run in re.finditer(rf"\s{{{limit + 1},}}", text):
        for cut in range(run.start() + limit, run.end(), limit):
            pieces.append(text[last:cut])
            last = cut
    pieces.append(text[last:])
    return pieces


def _without_surrogates(text: str) -> str:
    """Replace lone surrogates (which UTF-8 cannot encode) with U+FFFD, as tiktoken does."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


# --------------------------------------------------------------------------------------
# Optional packages
# --------------------------------------------------------------------------------------


def _import_tiktoken(purpose: str) -> Any:
    try:
        import tiktoken
    except ImportError as exc:
        raise MissingExtraError("tiktoken", "tiktoken", purpose) from exc
    return tiktoken


def _import_tokenizers(purpose: str) -> Any:
    try:
        import tokenizers
    except ImportError as exc:
        raise MissingExtraError("tokenizers", "hf", purpose) from exc
    return tokenizers


# --------------------------------------------------------------------------------------
# Finding the files
# --------------------------------------------------------------------------------------


def _package_dirs(package: str) -> list[Path]:
    """Directories of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(location) for location in spec.submodule_search_locations]


def _find_in_package(package: str, relative: str) -> Path | None:
    for directory in _package_dirs(package):
        candidate = directory / relative
        if candidate.is_file():
            return candidate
    return None


def _tiktoken_cache_dirs() -> list[Path]:
    """tiktoken's own download cache, searched after litellm's bundled copy."""
    dirs: list[Path] = []
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        value = os.environ.get(variable)
        if value:
            dirs.append(Path(value))
    dirs.append(Path(tempfile.gettempdir()) / "data-gym-cache")
    return dirs


def _user_path(path: PathArg) -> Path:
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise TokenizerError(f"tokenizer file not found: {resolved}")
    return resolved


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TokenizerError(f"cannot read tokenizer file {path}: {exc}") from exc


# --------------------------------------------------------------------------------------
# Per-process cache of loaded tokenizers
# --------------------------------------------------------------------------------------

_CACHE: dict[tuple[str, str], object] = {}
_CACHE_LOCK = threading.Lock()


def _cached(kind: str, path: Path, load: Callable[[], _T]) -> _T:
    """Load once per process and path; concurrent first calls load only once."""
    key = (kind, str(path.resolve()))
    with _CACHE_LOCK:
        if key in _CACHE:
            return cast(_T, _CACHE[key])
        loaded = load()
        _CACHE[key] = loaded
        return loaded


def _clear_cache() -> None:
    """Forget every loaded tokenizer (for tests and for freeing memory)."""
    with _CACHE_LOCK:
        _CACHE.clear()


# --------------------------------------------------------------------------------------
# Estimator base for real tokenizers
# --------------------------------------------------------------------------------------


class TokenizerEstimator(Estimator):
    """An estimator backed by a real tokenizer file: exact counts, not estimates.

    ``source`` is the file it was loaded from. Texts longer than ``split_above`` characters
    (``None``: never) are cut into pieces of about ``chunk_chars`` characters at places
    where the tokenizer splits anyway (see :func:`split_text`), and the pieces are counted
    in one batch call that uses every core. Both may be changed on an instance.
    """

    source: Path
    #: Longest whitespace run counted in one piece (``None``: no limit).
    max_whitespace_run: int | None = None

    def __init__(self, split_above: int | None, chunk_chars: int) -> None:
        if split_above is not None and split_above < 1:
            raise ValueError("split_above must be at least 1 or None")
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be at least 1")
        self.split_above = split_above
        self.chunk_chars = chunk_chars

    def estimate(self, text: str) -> int:
        if not text:
            return 0
        pieces = self.pieces(text)
        if len(pieces) == 1:
            return self._count(text)
        return self._count_many(pieces)

    def pieces(self, text: str) -> list[str]:
        """The pieces :meth:`estimate` counts ``text`` in (one piece for most texts)."""
        pieces = [text]
        if self.max_whitespace_run is not None and len(text) > self.max_whitespace_run:
            pieces = split_whitespace_runs(text, self.max_whitespace_run)
        if self.split_above is not None and len(text) > self.split_above:
            pieces = [part for piece in pieces for part in split_text(piece, self.chunk_chars)]
        return pieces

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` in one tokenizer call, without BOS/EOS."""

    @abstractmethod
    def decode(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens``."""

    @abstractmethod
    def _count(self, text: str) -> int:
        """Tokens in ``text``, counted in one call."""

    def _count_many(self, texts: list[str]) -> int:
        return sum(self._count(text) for text in texts)


def _threads(pieces: int) -> int:
    return max(1, min(pieces, os.cpu_count() or 1))


# --------------------------------------------------------------------------------------
# tiktoken: OpenAI BPE rank files
# --------------------------------------------------------------------------------------

_OPENAI_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

_R50K_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_CONTRACTION = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
_O200K_PATTERN = "|".join(
    (
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        + _O200K_CONTRACTION,
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        + _O200K_CONTRACTION,
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    )
)


@dataclass(frozen=True)
class _OpenAIEncoding:
    name: str
    family: str
    pattern: str
    special_tokens: Mapping[str, int]
    ranks: int  # number of mergeable tokens in the file
    sha256: str  # of the published file

    @property
    def cache_name(self) -> str:
        """File name in tiktoken's cache and litellm's bundle: SHA-1 of the download URL."""
        url = _OPENAI_URL.format(name=self.name)
        return hashlib.sha1(url.encode()).hexdigest()


_OPENAI_ENCODINGS: dict[str, _OpenAIEncoding] = {
    enc.name: enc
    for enc in (
        _OpenAIEncoding(
            name="o200k_base",
            family="o200k",
            pattern=_O200K_PATTERN,
            special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
            ranks=199_998,
            sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        ),
        _OpenAIEncoding(
            name="cl100k_base",
            family="cl100k",
            pattern=_CL100K_PATTERN,
            special_tokens={
                _ENDOFTEXT: 100257,
                "<|fim_prefix|>": 100258,
                "<|fim_middle|>": 100259,
                "<|fim_suffix|>": 100260,
                _ENDOFPROMPT: 100276,
            },
            ranks=100_256,
            sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        ),
        _OpenAIEncoding(
            name="p50k_base",
            family="p50k",
            pattern=_R50K_PATTERN,
            special_tokens={_ENDOFTEXT: 50256},
            ranks=50_280,
            sha256="94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        ),
        _OpenAIEncoding(
            name="r50k_base",
            family="r50k",
            pattern=_R50K_PATTERN,
            special_tokens={_ENDOFTEXT: 50256},
            ranks=50_256,
            sha256="306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        ),
    )
}

_LITELLM_TOKENIZERS = "litellm_core_utils/tokenizers"


def _bundled_openai_file(enc: _OpenAIEncoding) -> Path | None:
    """litellm's bundled copy first, then tiktoken's download cache."""
    found = _find_in_package("litellm", f"{_LITELLM_TOKENIZERS}/{enc.cache_name}")
    if found is not None:
        return found
    for directory in _tiktoken_cache_dirs():
        candidate = directory / enc.cache_name
        if candidate.is_file():
            return candidate
    return None


def parse_tiktoken_bpe(data: bytes, source: str = "<data>") -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file: one ``<base64 token> <rank>`` pair per line."""
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise TokenizerError(
                f"{source}, line {lineno}: expected '<base64 token> <rank>', got {line[:60]!r}"
            ) from exc
    if not ranks:
        raise TokenizerError(f"{source}: no tokens in file")
    if len(set(ranks.values())) != len(ranks):
        raise TokenizerError(f"{source}: two tokens have the same rank")
    return ranks


def _load_openai_encoding(enc: _OpenAIEncoding, path: Path, verify: bool) -> tiktoken.Encoding:
    tiktoken_module = _import_tiktoken(f"Counting {enc.name} tokens")
    data = _read_bytes(path)
    if verify and hashlib.sha256(data).hexdigest() != enc.sha256:
        raise TokenizerError(
            f"{path} is not the published {enc.name} file (SHA-256 differs); "
            "pass the right file with path=..."
        )
    ranks = parse_tiktoken_bpe(data, str(path))
    if len(ranks) != enc.ranks:
        raise TokenizerError(
            f"{path} has {len(ranks)} tokens but {enc.name} has {enc.ranks}: "
            "is it the file of another encoding?"
        )
    if not set(enc.special_tokens.values()).isdisjoint(ranks.values()):
        raise TokenizerError(f"{path}: a token's rank collides with a special token's id")
    try:
        encoding: tiktoken.Encoding = tiktoken_module.Encoding(
            name=enc.name,
            pat_str=enc.pattern,
            mergeable_ranks=ranks,
            special_tokens=dict(enc.special_tokens),
        )
    except Exception as exc:  # tiktoken raises bare ValueErrors and pyo3 errors
        raise TokenizerError(f"tiktoken could not build {enc.name} from {path}: {exc}") from exc
    return encoding


def _missing_file_error(what: str, package: str, where: str) -> TokenizerError:
    return TokenizerError(
        f"{what}: file not found. It ships inside the {package!r} wheel ({where}); install "
        f"it without its dependencies, `pip install --no-deps {package}`, or pass the "
        "file with path=..."
    )


def _rust_call(call: Callable[[], _T], what: str) -> _T:
    """Run a tokenizer call; a Rust panic (a BaseException) becomes a TokenizerError."""
    try:
        return call()
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        raise TokenizerError(f"{what} failed inside the tokenizer: {exc}") from exc


class _TiktokenCounter(TokenizerEstimator):
    """Counts with a ``tiktoken.Encoding`` (OpenAI files and Tekken)."""

    encoding: tiktoken.Encoding
    max_whitespace_run: int | None = MAX_WHITESPACE_RUN

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as ordinary text (special-token strings are not special).

        Exact, in one call: a whitespace run of about a million characters makes tiktoken
        fail (:class:`~windowfit.errors.TokenizerError`); :meth:`estimate` cuts such runs.
        """
        return _rust_call(lambda: self.encoding.encode_ordinary(text), f"encoding with {self}")

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens``; invalid UTF-8 becomes U+FFFD."""
        return self.encoding.decode(tokens)

    def _count(self, text: str) -> int:
        return len(self.encode(text))

    def _count_many(self, texts: list[str]) -> int:
        threads = _threads(len(texts))
        batches = _rust_call(
            lambda: self.encoding.encode_ordinary_batch(texts, num_threads=threads),
            f"encoding with {self}",
        )
        return sum(len(tokens) for tokens in batches)


class TiktokenEstimator(_TiktokenCounter):
    """Exact counts for an OpenAI encoding: ``o200k_base`` (GPT-4o, GPT-4.1, o-series,
    GPT-5), ``cl100k_base`` (GPT-4, GPT-3.5), ``p50k_base`` or ``r50k_base``.

    Without ``path`` the BPE file is taken from the ``litellm`` wheel (or tiktoken's cache)
    and checked against its published SHA-256. With ``path`` that file is used; its token
    count is checked, and its hash too when ``verify=True``.
    """

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        path: PathArg | None = None,
        verify: bool | None = None,
        split_above: int | None = DEFAULT_SPLIT_ABOVE,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
    ) -> None:
        super().__init__(split_above, chunk_chars)
        spec = _OPENAI_ENCODINGS.get(encoding) or _OPENAI_ENCODINGS.get(f"{encoding}_base")
        if spec is None:
            known = ", ".join(_OPENAI_ENCODINGS)
            raise TokenizerError(f"unknown tiktoken encoding {encoding!r}; known: {known}")
        _import_tiktoken(f"Counting {spec.name} tokens")
        if path is None:
            found = _bundled_openai_file(spec)
            if found is None:
                raise _missing_file_error(
                    f"{spec.name} BPE ranks",
                    "litellm",
                    f"litellm/{_LITELLM_TOKENIZERS}/{spec.cache_name}",
                )
            source, check = found, True if verify is None else verify
        else:
            source, check = _user_path(path), bool(verify)
        self.encoding = _cached(
            f"tiktoken:{spec.name}:{'verified' if check else 'unverified'}",
            source,
            lambda: _load_openai_encoding(spec, source, check),
        )
        self.source = source
        self.family = spec.family
        self.name = spec.family if path is None else f"{spec.family}:{source.name}"


# --------------------------------------------------------------------------------------
# Mistral Tekken
# --------------------------------------------------------------------------------------

_TEKKEN_VERSIONS = ("240911", "240718")


@dataclass(frozen=True)
class _TekkenModel:
    encoding: tiktoken.Encoding
    num_special_tokens: int
    vocab_size: int


def _tekken_field(mapping: Mapping[str, object], key: str, kind: type[_T], path: Path) -> _T:
    value = mapping.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TokenizerError(f"{path}: field {key!r} missing or not a {kind.__name__}")
    return value


@dataclass(frozen=True)
class TekkenFile:
    """What a ``tekken_*.json`` file holds that counting needs: the inner BPE's ranks and
    pre-tokenizer pattern, and how many special tokens come before its ids."""

    ranks: Mapping[bytes, int]
    pattern: str
    num_special_tokens: int
    vocab_size: int


def read_tekken(path: Path) -> TekkenFile:
    """Read a Tekken file (no tiktoken needed); :class:`TokenizerError` says what is wrong."""
    try:
        data = json.loads(_read_bytes(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"{path} is not a JSON file: {exc}") from exc
    if not isinstance(data, dict):
        raise TokenizerError(f"{path}: not a Tekken file (top level is not an object)")
    config = data.get("config")
    vocab = data.get("vocab")
    if not isinstance(config, dict) or not isinstance(vocab, list):
        raise TokenizerError(f"{path}: not a Tekken file (needs 'config' and 'vocab')")
    pattern = _tekken_field(config, "pattern", str, path)
    vocab_size = _tekken_field(config, "default_vocab_size", int, path)
    num_special = _tekken_field(config, "default_num_special_tokens", int, path)
    inner = vocab_size - num_special
    if inner <= 256 or inner > len(vocab):
        raise TokenizerError(
            f"{path}: vocab size {vocab_size} minus {num_special} special tokens does not fit "
            f"the {len(vocab)} vocabulary entries"
        )
    # The tokenizer uses the first (vocab size - special tokens) entries; ids in a real
    # request are offset by the number of special tokens, which does not change counts.
    ranks: dict[bytes, int] = {}
    for index, entry in enumerate(vocab[:inner]):
        try:
            rank = entry["rank"]
            token = base64.b64decode(entry["token_bytes"], validate=True)
        except (KeyError, TypeError, binascii.Error) as exc:
            raise TokenizerError(f"{path}: vocab entry {index} is malformed") from exc
        if rank != index or (index < 256 and token != bytes([index])):
            raise TokenizerError(f"{path}: vocab entry {index} is out of order")
        ranks[token] = rank
    if len(ranks) != inner:
        raise TokenizerError(f"{path}: duplicate tokens in the vocabulary")
    return TekkenFile(ranks, pattern, num_special, vocab_size)


def _load_tekken(path: Path) -> _TekkenModel:
    tiktoken_module = _import_tiktoken("Counting Mistral Tekken tokens")
    tekken = read_tekken(path)
    try:
        encoding: tiktoken.Encoding = tiktoken_module.Encoding(
            name=path.stem,
            pat_str=tekken.pattern,
            mergeable_ranks=dict(tekken.ranks),
            special_tokens={},
        )
    except Exception as exc:
        raise TokenizerError(
            f"tiktoken could not build a Tekken encoding from {path}: {exc}"
        ) from exc
    return _TekkenModel(
        encoding=encoding,
        num_special_tokens=tekken.num_special_tokens,
        vocab_size=tekken.vocab_size,
    )


class TekkenEstimator(_TiktokenCounter):
    """Exact counts for Mistral's Tekken tokenizer (Mistral NeMo, Pixtral, Mistral Large 2
    and later, Codestral, Ministral), read from a ``tekken_*.json`` file.

    Without ``path`` the file is ``mistral_common/data/tekken_{version}.json`` from the
    ``mistral-common`` wheel. Counts are without BOS/EOS. ``encode`` returns ids of the
    inner BPE (Mistral's ids add :attr:`num_special_tokens` to each).
    """

    family = "tekken"

    def __init__(
        self,
        version: str = "240911",
        *,
        path: PathArg | None = None,
        split_above: int | None = DEFAULT_SPLIT_ABOVE,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
    ) -> None:
        super().__init__(split_above, chunk_chars)
        _import_tiktoken("Counting Mistral Tekken tokens")
        if path is None:
            relative = f"data/tekken_{version}.json"
            found = _find_in_package("mistral_common", relative)
            if found is None:
                raise _missing_file_error(
                    f"Tekken {version}", "mistral-common", f"mistral_common/{relative}"
                )
            source = found
        else:
            source = _user_path(path)
        model = _cached("tekken", source, lambda: _load_tekken(source))
        self.encoding = model.encoding
        self.num_special_tokens = model.num_special_tokens
        self.vocab_size = model.vocab_size
        self.source = source
        if path is None:
            self.name = "tekken" if version == _TEKKEN_VERSIONS[0] else f"tekken-{version}"
        else:
            self.name = f"tekken:{source.name}"


# --------------------------------------------------------------------------------------
# Hugging Face tokenizers
# --------------------------------------------------------------------------------------

_HF_BUNDLED = {
    "deepseek": f"{_LITELLM_TOKENIZERS}/deepseek_tokenizer.json",
    "claude-legacy": f"{_LITELLM_TOKENIZERS}/anthropic_tokenizer.json",
}


def _load_hf(path: Path) -> tokenizers.Tokenizer:
    tokenizers_module = _import_tokenizers("Counting tokens with a Hugging Face tokenizer")
    try:
        tokenizer: tokenizers.Tokenizer = tokenizers_module.Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises bare Exception
        raise TokenizerError(f"cannot load Hugging Face tokenizer {path}: {exc}") from exc
    # A file may carry truncation or padding settings; counting must see every token.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


class HFTokenizerEstimator(TokenizerEstimator):
    """Counts with a Hugging Face ``tokenizer.json`` (``add_special_tokens=False``).

    ``tokenizer`` is ``"deepseek"`` (DeepSeek-V3/R1, bundled by litellm) or
    ``"claude-legacy"`` (Anthropic's Claude 1/2-era tokenizer, bundled by litellm; Claude
    3 and later use an unpublished tokenizer, so its counts are only indicative). With
    ``path`` any ``tokenizer.json`` can be used; ``tokenizer`` then only names it and
    ``family`` (default: ``tokenizer``) says what the counts are for.
    """

    def __init__(
        self,
        tokenizer: str = "deepseek",
        *,
        path: PathArg | None = None,
        family: str | None = None,
        split_above: int | None = HF_SPLIT_ABOVE,
        chunk_chars: int = HF_CHUNK_CHARS,
    ) -> None:
        super().__init__(split_above, chunk_chars)
        _import_tokenizers(f"Counting {tokenizer} tokens")
        if path is None:
            relative = _HF_BUNDLED.get(tokenizer)
            if relative is None:
                known = ", ".join(_HF_BUNDLED)
                raise TokenizerError(
                    f"no bundled Hugging Face tokenizer {tokenizer!r} (bundled: {known}); "
                    "pass the tokenizer.json file with path=..."
                )
            found = _find_in_package("litellm", relative)
            if found is None:
                raise _missing_file_error(
                    f"{tokenizer} tokenizer.json", "litellm", f"litellm/{relative}"
                )
            source = found
        else:
            source = _user_path(path)
        self.tokenizer = _cached("hf", source, lambda: _load_hf(source))
        encode_fast = getattr(self.tokenizer, "encode_batch_fast", None)
        self._encode_batch: Callable[..., list[tokenizers.Encoding]] = (
            encode_fast if encode_fast is not None else self.tokenizer.encode_batch
        )
        self.source = source
        self.family = family or tokenizer
        self.name = tokenizer if path is None else f"{tokenizer}:{source.name}"

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without BOS/EOS."""
        return list(self._encode_one(text).ids)

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens``, special tokens included (a normalizer may have changed it)."""
        return self.tokenizer.decode(list(tokens), skip_special_tokens=False)

    def _encode_one(self, text: str) -> tokenizers.Encoding:
        what = f"encoding with {self}"
        try:
            return _rust_call(lambda: self.tokenizer.encode(text, add_special_tokens=False), what)
        except TypeError:
            # Lone surrogates cannot cross into Rust; count them as U+FFFD like tiktoken.
            clean = _without_surrogates(text)
            return _rust_call(lambda: self.tokenizer.encode(clean, add_special_tokens=False), what)

    def _count(self, text: str) -> int:
        return len(self._encode_one(text))

    def _count_many(self, texts: list[str]) -> int:
        what = f"encoding with {self}"
        try:
            encodings = _rust_call(
                lambda: self._encode_batch(texts, add_special_tokens=False), what
            )
        except TypeError:
            clean = [_without_surrogates(text) for text in texts]
            encodings = _rust_call(
                lambda: self._encode_batch(clean, add_special_tokens=False), what
            )
        return sum(len(encoding) for encoding in encodings)


# --------------------------------------------------------------------------------------
# Backends by name
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackendInfo:
    """A tokenizer that :func:`load_backend` can load on this machine."""

    name: str
    family: str
    path: Path
    extra: str  # the windowfit extra its package comes from
    description: str


@dataclass(frozen=True)
class _Backend:
    name: str
    family: str
    package: str  # the Python package that counts
    extra: str
    description: str
    locate: Callable[[], Path | None]
    load: Callable[[PathArg | None], TokenizerEstimator]


def _openai_backend(encoding: str, description: str) -> _Backend:
    spec = _OPENAI_ENCODINGS[encoding]
    return _Backend(
        name=spec.family,
        family=spec.family,
        package="tiktoken",
        extra="tiktoken",
        description=description,
        locate=lambda: _bundled_openai_file(spec),
        load=lambda path: TiktokenEstimator(spec.name, path=path),
    )


def _hf_backend(name: str, description: str) -> _Backend:
    return _Backend(
        name=name,
        family=name,
        package="tokenizers",
        extra="hf",
        description=description,
        locate=lambda: _find_in_package("litellm", _HF_BUNDLED[name]),
        load=lambda path: HFTokenizerEstimator(name, path=path),
    )


def _tekken_backend(version: str, name: str, description: str) -> _Backend:
    return _Backend(
        name=name,
        family="tekken",
        package="tiktoken",
        extra="tiktoken",
        description=description,
        locate=lambda: _find_in_package("mistral_common", f"data/tekken_{version}.json"),
        load=lambda path: TekkenEstimator(version, path=path),
    )


_BACKENDS: dict[str, _Backend] = {
    backend.name: backend
    for backend in (
        _openai_backend("o200k_base", "OpenAI o200k_base: GPT-4o, GPT-4.1, o1/o3/o4, GPT-5"),
        _openai_backend("cl100k_base", "OpenAI cl100k_base: GPT-4, GPT-3.5-turbo, embeddings"),
        _hf_backend("deepseek", "DeepSeek-V3/R1 (litellm's deepseek_tokenizer.json)"),
        _hf_backend(
            "claude-legacy",
            "Anthropic's Claude 1/2-era tokenizer (indicative only for Claude 3 and later)",
        ),
        _tekken_backend("240911", "tekken", "Mistral Tekken (tekken_240911.json)"),
        _tekken_backend("240718", "tekken-240718", "Mistral Tekken (tekken_240718.json)"),
        _openai_backend("p50k_base", "OpenAI p50k_base: Codex, text-davinci-002/003"),
        _openai_backend("r50k_base", "OpenAI r50k_base: GPT-3 (davinci)"),
    )
}

#: Every backend name :func:`load_backend` knows (not all may be loadable here).
BACKEND_NAMES: tuple[str, ...] = tuple(_BACKENDS)

#: The real tokenizer each calibrated family of :mod:`windowfit.profiles` is fitted on and
#: measured against: its own, and for Claude 3 and later (no public tokenizer) the legacy
#: Claude one. The replay, the calibration, the reports and the tests all read it here.
BACKEND_OF_FAMILY: Mapping[str, str] = MappingProxyType(
    {
        "o200k": "o200k",
        "cl100k": "cl100k",
        "deepseek": "deepseek",
        "tekken": "tekken",
        "claude": "claude-legacy",
    }
)
#: Those tokenizers, each once (``conservative`` is checked against all of them).
FAMILY_BACKENDS: tuple[str, ...] = ("o200k", "cl100k", "deepseek", "claude-legacy", "tekken")

_ALIASES = {
    "o200k_base": "o200k",
    "cl100k_base": "cl100k",
    "p50k_base": "p50k",
    "r50k_base": "r50k",
    "tekken_240911": "tekken",
    "tekken-240911": "tekken",
    "tekken_240718": "tekken-240718",
    "anthropic-legacy": "claude-legacy",
}


def _package_present(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _iter_available() -> Iterator[BackendInfo]:
    for backend in _BACKENDS.values():
        if not _package_present(backend.package):
            continue
        path = backend.locate()
        if path is None:
            continue
        yield BackendInfo(
            name=backend.name,
            family=backend.family,
            path=path,
            extra=backend.extra,
            description=backend.description,
        )


def available_backends() -> list[BackendInfo]:
    """The backends whose counting package and data file are both on this machine.

    Cheap: nothing is imported or read (files are found by name only).
    """
    return list(_iter_available())


def load_backend(name: str, *, path: PathArg | None = None) -> TokenizerEstimator:
    """Load a real tokenizer by name: ``"o200k"``, ``"cl100k"``, ``"deepseek"``,
    ``"claude-legacy"``, ``"tekken"`` (also ``"tekken-240718"``, ``"p50k"``, ``"r50k"``).

    ``path`` overrides where the data file is read from. Raises
    :class:`~windowfit.errors.MissingExtraError` when the counting package is missing and
    :class:`~windowfit.errors.TokenizerError` when the data file is missing or broken
    (the message says which package ships it). Loaded files are cached per process.
    """
    key = _ALIASES.get(name, name)
    backend = _BACKENDS.get(key)
    if backend is None:
        raise TokenizerError(
            f"unknown tokenizer backend {name!r}; known: {', '.join(BACKEND_NAMES)}"
        )
    return backend.load(path)
