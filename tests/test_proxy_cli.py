"""``windowfit proxy`` and serve-sim's scripted-tool flags on the command line."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx
import pytest

from windowfit.cli import main
from windowfit.server import SimConfig, SimServer


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "5", "--budget-fraction", "0.5"], "not allowed with"),
        (["--budget-fraction", "2"], "at most 1"),
        (["--anthropic-upstream", "ftp://x"], "http:// or https://"),
        (["--settings", "no-such-preset"], "unknown preset"),
        (["--fitter-max-mb", "0"], "--fitter-max-mb"),
        (["--keep-freed-mb", "-1"], "--keep-freed-mb"),
    ],
)
def test_bad_proxy_options_are_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        code = main(["proxy", "--port", "0", *args])
        raise SystemExit(code)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_bad_scripted_tool_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-sim", "--port", "0", "--script-tool", "Bash=[1]"]) == 2
    assert "--script-tool" in capsys.readouterr().err


def test_the_proxy_command_serves_and_fits() -> None:
    with SimServer(SimConfig(context_window=5_000)) as sim:
        command = [sys.executable, "-m", "windowfit.cli", "proxy", "--port", "0"]
        command += ["--anthropic-upstream", sim.url, "--budget", "2000"]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            found = re.search(r"http://127\.0\.0\.1:\d+", line)
            assert found, line
            body = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}],
            }
            answer = httpx.post(f"{found.group(0)}/v1/messages", json=body, timeout=30)
            assert answer.status_code == 200
            assert answer.headers["x-windowfit-stage"] == "0"
            assert sim.stats()["requests"] == 1
        finally:
            process.terminate()
            process.wait(timeout=15)
