"""The real mini-swe-agent (``mini``, on litellm; pinned in clients/requirements.txt and
installed into .venv-clients/ by ``make setup``), an OpenAI-Chat agent that is not the
SDK, runs a 40-step bash loop offline against serve-sim, whose window the files exceed
several times over: through the proxy it submits; directly it dies of litellm's
``ContextWindowExceededError``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from test_proxy_clients import ANSWER, PARTS, WINDOW, _parts
from windowfit.proxy import ProxyConfig, ProxyServer
from windowfit.server import SimConfig, SimServer, parse_scripted_tool

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / ".venv-clients" / "bin" / "mini"
#: The task's end: mini-swe-agent submits when a command's output starts with this line.
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

pytestmark = pytest.mark.slow


def _script() -> SimConfig:
    """``bash`` with ``cat part-{n}.txt`` for n = 1..40; the 41st call finds no file and
    submits (mini-swe-agent answers only through its tool, so its last step is one too)."""
    command = f"cat part-{{n}}.txt 2>/dev/null || printf '{SUBMIT}\\n{ANSWER}\\n'"
    script = parse_scripted_tool('bash={"command": "' + command.replace("\\", "\\\\") + '"}')
    return SimConfig(context_window=WINDOW, tool_rounds=PARTS + 1, script_tool=script)


def _mini(base_url: str, work: Path, timeout: float) -> subprocess.CompletedProcess[str] | None:
    if not MINI.exists():
        pytest.fail(f"{MINI} is missing: run make setup (it installs .venv-clients/)")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work / "home"),
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": f"{base_url}/v1",  # litellm's openai/ provider reads it
        "MSWEA_CONFIGURED": "true",  # no first-run setup wizard
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(work / "mswea"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm's price list from its wheel, offline
    }
    command = [str(MINI), "-y", "--exit-immediately", "-m", "openai/gpt-4o-mini", "-l", "0"]
    command += ["-t", "Read every part file.", "-o", str(work / "trajectory.json")]
    try:
        return subprocess.run(
            command,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None


def _chat(stats: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in stats["log"] if e["route"] == "openai.chat"]


def test_mini_swe_agent_runs_a_long_loop_through_the_proxy(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "home").mkdir(parents=True)
    _parts(work)
    with SimServer(_script()) as sim:
        upstream = (("openai", sim.url),)
        with ProxyServer(ProxyConfig(upstreams=upstream, budget=40_000)) as proxy:
            run = _mini(proxy.url, work, timeout=240)
            assert run is not None, "mini-swe-agent did not finish through the proxy"
            assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
            assert ANSWER in run.stdout  # its submission
            stats = sim.stats()
            answered = [e for e in _chat(stats) if e["status"] == 200]
            assert len(answered) == PARTS + 1  # 40 reads, then the submitting call
            assert stats["errors"].get("context_overflow", 0) == 0
            assert max(e["tokens"] for e in answered) <= WINDOW
            assert proxy.app.refits == 0 and proxy.app.skipped == {}

        # Straight against serve-sim: the conversation outgrows the window and litellm
        # raises ContextWindowExceededError, which mini-swe-agent does not retry.
        sim.reset()
        direct = _mini(sim.url, work, timeout=120)
        assert direct is not None and direct.returncode != 0
        assert "ContextWindowExceededError" in direct.stdout + direct.stderr
        stats = sim.stats()
        assert stats["errors"].get("context_overflow", 0) == 1
        assert stats["max_request_tokens"] > WINDOW
