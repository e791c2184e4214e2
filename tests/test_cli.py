"""The command line: readable output, --json, --output, and one-line errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from windowfit.cli import main


def _conversation(rounds: int = 20, size: int = 4000) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read everything"}]
    for i in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"c{i}", "name": "read", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"c{i}", "content": "x" * size}],
            }
        )
    return messages


def _write(tmp_path: Path, data: Any, name: str = "in.json") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def test_fit_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ('x' * 4000 is counted 3,400 tokens a result: a run of one repeated letter is a run)
    path = _write(tmp_path, _conversation())
    assert main(["fit", path, "--budget", "15000"]) == 0
    out = capsys.readouterr().out
    assert "stage" in out and "cleared old tool results" in out
    assert "of a 15,000 budget" in out


def test_fit_json_and_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = {"model": "m", "max_tokens": 100, "system": "be brief", "messages": _conversation()}
    path = _write(tmp_path, body)
    shaped = tmp_path / "out.json"
    assert main(["fit", path, "--budget", "15_000", "--json", "--output", str(shaped)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stage"] == 1 and report["tokens_after"] <= 15_000
    written = json.loads(shaped.read_text(encoding="utf-8"))
    assert written["model"] == "m" and written["system"] == "be brief"
    assert len(written["messages"]) == len(body["messages"])


def test_fit_overflow_exits_1_with_the_person_facing_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _conversation(2, 400_000))
    assert main(["fit", path, "--budget", "5000"]) == 1
    assert "Start a new chat" in capsys.readouterr().out


def test_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "привет, мир! 你好", "t.txt")
    assert main(["tokens", path, "--json", "--family", "seed"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["classes"]["cjk"]["chars"] == 2
    assert data["estimate"] == 8  # ceil(4 ASCII / 4 + 2 CJK + 9 Cyrillic / 2)
    assert main(["tokens", path]) == 0
    assert "estimate" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        (None, ["fit", "{missing}", "--budget", "10"], "no such file"),
        ("{not json", ["fit", "{path}", "--budget", "10"], "invalid JSON at line 1"),
        ([{"content": "hi"}], ["fit", "{path}", "--budget", "10"], "message 0, field 'role'"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]},
            ],
            ["fit", "{path}", "--budget", "10"],
            "message 1, field 'content[0].tool_use_id'",
        ),
        ([], ["fit", "{path}", "--budget", "-5"], "must be positive"),
        ([], ["fit", "{path}", "--budget", "lots"], "not a whole number"),
        ({"messages": 3}, ["fit", "{path}", "--budget", "10"], "needs a 'messages' list"),
        ("x", ["tokens", "{dir}"], "is a directory"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, content: Any, args: list[str], expected: str
) -> None:
    path = _write(tmp_path, content) if content is not None else ""
    argv = [a.format(path=path, missing=tmp_path / "nope.json", dir=tmp_path) for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "windowfit.cli", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert expected in lines[0]
    assert "Traceback" not in done.stderr
