"""``windowfit tokens FILE [--model M | --family F] [--json]``: the estimate by class and
the real count of every installed tokenizer, side by side; bad input is one line, exit 2."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from windowfit.cli import main
from windowfit.profiles import CHARACTER_CLASSES, estimator_for
from windowfit.tokenizers import available_backends
from windowfit.tokens import estimate_tokens

TEXT = "Hello, мир! 你好 😀 fooBar = 12\n    return x  # “done”\n"


def _file(tmp_path: Path, text: str = TEXT) -> str:
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(argv) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize(
    ("args", "family"),
    [
        ([], "conservative"),
        (["--family", "seed"], "seed"),
        (["--family", "o200k"], "o200k"),
        (["--family", "claude"], "claude"),
        (["--family", "conservative"], "conservative"),
        (["--model", "gpt-4o-mini"], "o200k"),
        (["--model", "claude-sonnet-4-5"], "claude"),
        (["--model", "some-new-model"], "conservative"),
    ],
)
def test_json_has_the_estimate_by_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], family: str
) -> None:
    data = _json(capsys, ["tokens", _file(tmp_path), "--json", *args])
    assert data["family"] == family
    assert data["chars"] == len(TEXT)
    assert data["seed_estimate"] == estimate_tokens(TEXT)
    assert data["chars_over_4"] == math.ceil(len(TEXT) / 4)
    assert data["estimate"] == estimator_for(family=family).estimate(TEXT)
    classes = data["classes"]
    if family == "seed":
        assert list(classes) == ["ascii", "cjk", "other"]
    else:
        assert list(classes) == [c.name for c in CHARACTER_CLASSES]
        assert classes["cyrillic"]["chars"] == 3 and classes["han"]["chars"] == 2
        assert classes["emoji"]["chars"] == 1
    assert sum(row["chars"] for row in classes.values()) == len(TEXT)
    total = sum(row["tokens"] for row in classes.values()) + data["framing"]
    profile_estimate = data["estimate"] if family == "seed" else data["profile_estimate"]
    assert math.ceil(total - 1e-9) == profile_estimate
    if family != "seed":  # the classes are the profile's; the estimate may be checked
        profile = estimator_for(family=family, vocabulary=False).estimate(TEXT)
        assert profile_estimate == profile
        assert data["estimator"] == estimator_for(family=family).name


def test_json_has_the_real_count_of_every_installed_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    installed = [b.name for b in available_backends()]
    if not installed:
        pytest.skip("no tokenizer installed (pip install 'windowfit[tokenizers]' litellm)")
    pytest.importorskip("tiktoken", reason="the bundled encodings need tiktoken")
    from windowfit.tokenizers import load_backend

    data = _json(capsys, ["tokens", _file(tmp_path), "--json", "--family", "cl100k"])
    assert list(data["backends"]) == installed
    for name, row in data["backends"].items():
        if "error" in row:
            continue
        backend = load_backend(name)
        real = backend.estimate(TEXT)
        assert row["tokens"] == real
        # Each tokenizer is set beside the profile of its own family, not the one asked for.
        if backend.family in ("o200k", "cl100k", "deepseek", "tekken"):
            own = estimator_for(family=backend.family).estimate(TEXT)
            assert (row["profile"], row["profile_estimate"]) == (backend.family, own)
            assert row["estimate_over_real"] == pytest.approx(own / real)
        else:  # p50k, claude-legacy, ...: windowfit has no profile to compare
            assert row["profile"] is None and row["estimate_over_real"] is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--family", "seed"], ["ascii", "cjk", "seed rule: ASCII/4"]),
        ([], ["cyrillic", "han", "family conservative"]),
        (["--family", "tekken"], ["cyrillic", "han", "emoji", "calibrated tekken profile"]),
        (["--model", "deepseek-chat"], ["model deepseek-chat -> family deepseek"]),
    ],
)
def test_readable_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: list[str]
) -> None:
    assert main(["tokens", _file(tmp_path), *args]) == 0
    out = capsys.readouterr().out
    for piece in expected:
        assert piece in out
    if available_backends():
        assert "real tokenizer" in out and "est/real" in out
        assert "beside the estimate of its own family's profile" in out


def test_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", _Stdin("привет"))
    data = _json(capsys, ["tokens", "-", "--json", "--family", "o200k"])
    assert data["chars"] == 6 and data["classes"]["cyrillic"]["chars"] == 6


class _Stdin:
    def __init__(self, text: str) -> None:
        self.buffer = io.BytesIO(text.encode("utf-8"))


@pytest.mark.parametrize(
    ("setup", "args", "expected"),
    [
        ("none", ["tokens", "{dir}/missing.txt", "--family", "o200k"], "no such file"),
        ("none", ["tokens", "{dir}"], "is a directory"),
        ("binary", ["tokens", "{dir}/t.bin", "--family", "claude"], "not UTF-8"),
        ("text", ["tokens", "{dir}/t.txt", "--family", "o300k"], "unknown tokenizer family"),
        (
            "text",
            ["tokens", "{dir}/t.txt", "--family", "o200k", "--model", "gpt-4o"],
            "not allowed",
        ),
        ("text", ["tokens", "{dir}/t.txt", "--colour"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, args: list[str], expected: str
) -> None:
    if setup == "binary":
        (tmp_path / "t.bin").write_bytes(b"\xff\xfe\x00bad")
    if setup == "text":
        _file(tmp_path)
    argv = [a.replace("{dir}", str(tmp_path)) for a in args]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], captured.err
    assert "Traceback" not in captured.err
