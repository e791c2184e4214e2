"""The real Claude Code and Codex (pinned in clients/, installed by ``make setup``) run a
40-step shell loop offline against serve-sim, whose window the files exceed several times
over: through the proxy they finish; directly they run into the provider's "too long"
error."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from windowfit.proxy import ProxyConfig, ProxyServer
from windowfit.server import SimConfig, SimServer, parse_scripted_tool

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / "clients" / "node_modules" / ".bin" / "claude"
CODEX = ROOT / "clients" / "node_modules" / ".bin" / "codex"
WINDOW = 60_000
PARTS = 40
ANSWER = "All 40 parts read."
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "river", "stone", "cloud", "ember", "frost"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("node") is None, reason="needs node (Claude Code runs on it)"),
]


def _parts(where: Path) -> int:
    """40 files of about 5,000 tokens each: 200k tokens, 3x the window."""
    rng = random.Random(12)
    size = 0
    for n in range(1, PARTS + 1):
        lines = (
            " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 999)}" for _ in range(12))
            for _ in range(150)
        )
        text = "\n".join(lines) + "\n"
        (where / f"part-{n}.txt").write_text(text)
        size += len(text)
    return size


def _claude(base_url: str, work: Path, timeout: float) -> subprocess.CompletedProcess[str] | None:
    if not CLAUDE.exists():
        pytest.fail(f"{CLAUDE} is missing: run make setup (it installs clients/)")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work / "home"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # Claude Code asks for 128k output tokens by default, more than the whole window.
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000",
    }
    (work / "home").mkdir(exist_ok=True)
    command = [str(CLAUDE), "-p", "Read every part file.", "--allowedTools", "Bash"]
    try:
        return subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def _messages(stats: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in stats["log"] if e["route"] == "anthropic.messages"]


def test_claude_code_runs_a_long_loop_through_the_proxy(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    assert _parts(work) > 3 * WINDOW * 3  # bytes: several windows of tokens
    script = parse_scripted_tool('Bash={"command": "cat part-{n}.txt"}')
    config = SimConfig(context_window=WINDOW, tool_rounds=PARTS, reply=ANSWER, script_tool=script)
    with SimServer(config) as sim:
        upstream = (("anthropic", sim.url),)
        with ProxyServer(ProxyConfig(upstreams=upstream, budget=40_000)) as proxy:
            run = _claude(proxy.url, work, timeout=240)
            assert run is not None, "Claude Code did not finish through the proxy"
            assert run.returncode == 0, run.stderr[-2000:]
            assert ANSWER in run.stdout
            stats = sim.stats()
            answered = [e for e in _messages(stats) if e["status"] == 200]
            assert len(answered) >= PARTS + 1  # 40 tool calls, then the answer
            assert stats["errors"].get("context_overflow", 0) == 0
            assert max(e["tokens"] for e in answered) <= WINDOW
            assert proxy.app.refits == 0

        # The same run straight against serve-sim: the conversation outgrows the window
        # and Claude Code meets "prompt is too long" (then keeps retrying and compacting,
        # which cannot succeed: the run is stopped after a while).
        sim.reset()
        direct = _claude(sim.url, work, timeout=60)
        assert direct is None or direct.returncode != 0 or ANSWER not in direct.stdout
        stats = sim.stats()
        assert stats["errors"].get("context_overflow", 0) >= 1
        assert stats["max_request_tokens"] > WINDOW * 9 // 10


def _codex(base_url: str, work: Path, timeout: float) -> subprocess.CompletedProcess[str] | None:
    if not CODEX.exists():
        pytest.fail(f"{CODEX} is missing: run make setup (it installs clients/)")
    home = work / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'model = "gpt-5-codex"\nmodel_provider = "wf"\n\n[model_providers.wf]\n'
        f'name = "wf"\nbase_url = "{base_url}/v1"\nwire_api = "responses"\n'
        'env_key = "WF_API_KEY"\n',
        encoding="utf-8",
    )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work / "home"), "CODEX_HOME": str(home)}
    env["WF_API_KEY"] = "test"
    command = [str(CODEX), "exec", "--skip-git-repo-check", "Read every part file."]
    try:
        return subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def test_codex_runs_a_long_loop_through_the_proxy(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "home").mkdir()
    _parts(work)
    script = parse_scripted_tool('exec_command={"cmd": "cat part-{n}.txt"}')
    config = SimConfig(context_window=WINDOW, tool_rounds=PARTS, reply=ANSWER, script_tool=script)
    with SimServer(config) as sim:
        upstream = (("openai", sim.url),)
        with ProxyServer(ProxyConfig(upstreams=upstream, budget=40_000)) as proxy:
            run = _codex(proxy.url, work, timeout=240)
            assert run is not None, "Codex did not finish through the proxy"
            assert run.returncode == 0, run.stderr[-2000:]
            assert ANSWER in run.stdout
            stats = sim.stats()
            served = [e for e in stats["log"] if e["route"] == "openai.responses"]
            answered = [e for e in served if e["status"] == 200]
            assert len(answered) >= PARTS + 1
            assert stats["errors"].get("context_overflow", 0) == 0
            assert max(e["tokens"] for e in answered) <= WINDOW
            assert proxy.app.skipped == {}

        sim.reset()
        direct = _codex(sim.url, work, timeout=90)
        assert direct is None or direct.returncode != 0 or ANSWER not in direct.stdout
        assert sim.stats()["errors"].get("context_overflow", 0) >= 1
