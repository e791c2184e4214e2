"""``windowfit serve-sim`` as a user runs it: a process on 127.0.0.1, stopped with Ctrl-C."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import anthropic
import openai
import pytest

from windowfit.cli import main

COMMAND = [sys.executable, "-m", "windowfit.cli", "serve-sim"]


@pytest.fixture
def served() -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [
            *COMMAND,
            "--port",
            "0",
            "--context-window",
            "2000",
            "--fault",
            "529",
            "--api-key",
            "sk-1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")
        yield process, match.group()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_serve_sim_serves_both_apis_until_interrupted(
    served: tuple[subprocess.Popen[str], str],
) -> None:
    process, url = served
    claude = anthropic.Anthropic(base_url=url, api_key="sk-1", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.OverloadedError):  # the --fault, first
        claude.messages.create(model="m", max_tokens=10, messages=messages)
    reply = claude.messages.create(model="m", max_tokens=10, messages=messages)
    assert reply.stop_reason in ("end_turn", "max_tokens")
    gpt = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:  # --context-window 2000
        gpt.chat.completions.create(model="m", messages=[{"role": "user", "content": "w " * 3000}])
    assert caught.value.code == "context_length_exceeded"
    with pytest.raises(openai.AuthenticationError):  # --api-key
        openai.OpenAI(base_url=f"{url}/v1", api_key="sk-2", max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "0", "--fault", "teapot"], "--fault"),
        (["--port", "0", "--fault", "429:retry_after=soon"], "retry_after"),
        (["--port", "0", "--tokenizer", "nonesuch"], "nonesuch"),
    ],
)
def test_bad_serve_sim_options_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve-sim", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("windowfit: error:") and message in err
    assert "\n" not in err


@pytest.mark.parametrize(
    "argv", [["--port", "70000"], ["--port", "x"], [], ["--port", "0", "--latency", "-1"]]
)
def test_bad_serve_sim_arguments_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["serve-sim", *argv])
    assert caught.value.code == 2


def test_a_port_in_use_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve-sim", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"windowfit: error: cannot listen on 127.0.0.1:{port}")
