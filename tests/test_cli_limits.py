"""The CLI on hostile input: endless or random bytes, wrong shapes, lone surrogates, huge
files. Each answers in one line on standard error with exit code 2, within bounded memory;
a huge text is counted in pieces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from windowfit import __version__
from windowfit.cli import main
from windowfit.commands.tokens import PIECE_CHARS, pieces
from windowfit.settings import PRESETS

COMMAND = [sys.executable, "-m", "windowfit.cli"]
MIB = 1024 * 1024


# Runs windowfit as its only child and reports that child's peak memory (ru_maxrss is the
# largest of a process's children, so a fresh parent per measurement makes it exact).
_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "sys.stderr.write(f'\\npeak={kib * (1 if sys.platform == \"darwin\" else 1024)}\\n')\n"
    "sys.exit(code)\n"
)


def _run(args: list[str], stdin: Any = subprocess.DEVNULL) -> tuple[int, str, str, int]:
    """Exit code, stdout, stderr and peak memory (RSS, in bytes) of one windowfit process."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *COMMAND, *args],
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    err, _, peak = done.stderr.rstrip().rpartition("\npeak=")
    return done.returncode, done.stdout, err, int(peak)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize(
    ("args", "from_stdin", "expected"),
    [
        (["fit", "-", "--budget", "10"], True, "NUL byte"),
        (["fit", "/dev/zero", "--budget", "10"], False, "NUL byte"),
        (["tokens", "/dev/zero"], False, "NUL byte"),
        (["tokens", "-"], True, "NUL byte"),
        (["replay", "/dev/zero", "--max-input-bytes", str(8 * MIB)], False, "larger than"),
    ],
)
def test_dev_zero_is_one_line_exit_2_in_bounded_memory(
    args: list[str], from_stdin: bool, expected: str
) -> None:
    with open("/dev/zero", "rb") as zero:
        code, out, err, peak = _run(args, stdin=zero if from_stdin else subprocess.DEVNULL)
    assert code == 2 and out == ""
    assert expected in _one_line(err)
    assert peak < 300 * MIB, peak


def test_replay_stops_reading_at_the_default_limit() -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("needs /dev/zero")
    code, _, err, peak = _run(["replay", "/dev/zero", "--no-progress"])
    assert code == 2
    assert "larger than the limit of 268,435,456 bytes" in _one_line(err)
    assert peak < 256 * MIB + 200 * MIB, peak


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["fit", "-", "--budget", "10"], "-: not UTF-8 text"),
        (["tokens", "-"], "-: not UTF-8 text"),
    ],
)
def test_random_bytes_on_standard_input_are_answered_at_once(
    args: list[str], expected: str
) -> None:
    noise = bytes((i * 7919 + 13) % 256 for i in range(3 * MIB))  # not UTF-8 near the start
    process = subprocess.Popen(
        [*COMMAND, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdin is not None
        process.stdin.write(noise)
        process.stdin.close()
    except BrokenPipeError:  # it answered before reading everything: the point
        pass
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and out == b""
    assert expected in _one_line(err.decode())


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "{file}", "--budget", "10"],
        ["tokens", "{file}"],
        ["replay", "{file}", "--no-progress"],
    ],
)
def test_an_input_over_the_limit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "big.txt"
    path.write_text("[" + '"a",' * 100_000 + '"a"]', encoding="utf-8")
    args = [a.replace("{file}", str(path)) for a in argv] + ["--max-input-bytes", "100000"]
    assert main(args) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert "larger than" in line and "--max-input-bytes" in line and "100,000" in line


def test_replay_of_random_bytes_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "noise.jsonl"
    path.write_bytes(bytes(range(128, 256)) * 100)
    assert main(["replay", str(path), "--no-progress"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(path) in line and "not UTF-8" in line


# --------------------------------------------------------------------------- shapes

_HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"system": 5, "messages": _HI}, "'system': must be a string or a list of blocks"),
        ({"system": {"text": "x"}, "messages": _HI}, "not an object"),
        ({"system": [5], "messages": _HI}, "'system[0]': a block must be a JSON object"),
        ({"tools": 5, "messages": _HI}, "'tools': must be a list"),
        ({"tools": {"name": "t"}, "messages": _HI}, "'tools': must be a list"),
        ({"tools": ["t"], "messages": _HI}, "'tools[0]': a tool definition must be a JSON object"),
        ({"messages": 5}, "needs a 'messages' list"),
        ([{"role": {"a": 1}, "content": "hi"}], "message 0, field 'role': must be a string"),
        ([{"role": ["user"], "content": "hi"}], "not a list"),
        ({"messages": [*_HI, {"role": 7, "content": "x"}]}, "message 1, field 'role'"),
        ("just text", "expected a list of messages"),
    ],
)
def test_wrong_shapes_in_a_request_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: Any, expected: str
) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    assert main(["fit", str(path), "--budget", "100"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert expected in _one_line(captured.err)


@pytest.mark.parametrize("output", ["file", "-"])
def test_a_lone_surrogate_is_written_as_its_escape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    messages = [{"role": "user", "content": "\ud800 привет \udfff"}]
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"messages": messages, "model": "m"}), encoding="ascii")
    target = str(tmp_path / "out.json") if output == "file" else "-"
    assert main(["fit", str(path), "--budget", "100", "--output", target, "--json"]) == 0
    captured = capsys.readouterr()
    written = Path(target).read_text(encoding="utf-8") if output == "file" else captured.out
    document = written if output == "file" else written[: written.rindex("\n{") + 1]
    assert json.loads(document)["messages"] == messages  # the same data, losslessly
    assert "\\ud800" in written and "привет" in written  # only the surrogates are escaped


def test_a_byte_order_mark_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = json.dumps({"messages": _HI}).encode()
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + body)
    assert main(["fit", str(path), "--budget", "100", "--json"]) == 0
    lines = tmp_path / "bom.jsonl"
    lines.write_bytes(b"\xef\xbb\xbf" + b"\n".join(json.dumps(m).encode() for m in _HI * 2))
    for log in (path, lines):
        assert main(["replay", str(log), "--budget", "100", "--no-progress", "--json"]) == 0
    captured = capsys.readouterr()
    assert "BOM" not in captured.err


def test_tokens_drops_a_byte_order_mark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfhello")
    assert main(["tokens", str(path), "--json", "--family", "o200k"]) == 0
    assert json.loads(capsys.readouterr().out)["chars"] == 5


# --------------------------------------------------------------------------- help


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"windowfit {__version__}"


def test_fit_preset_help_lists_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in PRESETS:
        assert f"{name}: " in text
    assert "--max-input-bytes" in text


# --------------------------------------------------------------------------- huge texts


@pytest.mark.parametrize(
    "text",
    [
        "",
        "short",
        "word " * 300_000,
        "line of text\n" * 200_000,
        "x" * 1_100_000,  # no place to cut: cut at the size bound
        ("a b " * 50_000 + "y" * 500_000) * 3,
    ],
)
def test_pieces_join_back_and_stay_bounded(text: str) -> None:
    size = 100_000
    chunks = [text[k : k + 65_536] for k in range(0, len(text), 65_536)]
    out = list(pieces(chunks, size))
    assert "".join(out) == text
    assert all(len(piece) < 2 * size for piece in out)
    assert all(len(piece) >= size for piece in out[:-1])


def test_a_text_of_many_pieces_is_counted_close_to_one_shot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tiktoken", reason="needs tiktoken (pip install 'windowfit[tokenizers]')")
    from windowfit.profiles import estimator_for
    from windowfit.tokenizers import available_backends, load_backend

    if "o200k" not in [b.name for b in available_backends()]:
        pytest.skip("needs the o200k tokenizer file (pip install litellm)")
    line = "Это строка текста, and some English too: 12345 {x: [1, 2]}\n"
    text = line * (2 * PIECE_CHARS // len(line) + 5_000)
    path = tmp_path / "long.txt"
    path.write_text(text, encoding="utf-8")
    assert main(["tokens", str(path), "--json", "--family", "o200k", "--tokenizer", "o200k"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pieces"] == 2 and data["chars"] == len(text)
    real = load_backend("o200k").estimate(text)
    own = estimator_for(family="o200k", vocabulary=False).estimate(text)
    checked = estimator_for(family="o200k").estimate(text)
    row = data["backends"]["o200k"]
    # Cut where the tokenizer splits anyway, the pieces add up to the whole exactly; the
    # profile's estimate may be a token or so higher per piece (each piece is rounded up).
    assert row["tokens"] == real
    assert own <= data["profile_estimate"] <= own + 2 * data["pieces"]
    # Checked by the vocabulary, each piece is checked on windows of its own.
    assert row["profile_estimate"] == data["estimate"]
    assert abs(data["estimate"] - checked) <= 0.03 * checked


def test_a_20_mb_file_is_counted_in_bounded_memory(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken", reason="needs tiktoken (pip install 'windowfit[tokenizers]')")
    from windowfit.tokenizers import available_backends

    if "o200k" not in [b.name for b in available_backends()]:
        pytest.skip("needs the o200k tokenizer file (pip install litellm)")
    path = tmp_path / "big.txt"
    block = ("Это строка текста, and some English words too. 12345\n" * 20_000).encode()
    with path.open("wb") as out:
        while out.tell() < 20_000_000:
            out.write(block)
    size = os.path.getsize(path)
    code, out, err, peak = _run(
        ["tokens", str(path), "--tokenizer", "o200k", "--family", "o200k", "--json", "--progress"]
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["pieces"] > 5
    assert data["backends"]["o200k"]["tokens"] > 0
    assert err.count("MB read") == data["pieces"]  # one progress line per piece
    assert peak < 400 * MIB, peak  # the whole text alone, as str, would be ~70 MB; counted
    assert size > 19_000_000  # whole, the tokenizer needed gigabytes
