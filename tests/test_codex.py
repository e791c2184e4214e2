"""The real Codex CLI (``@openai/codex``, pinned in clients/, installed by make setup)
driven offline against serve-sim's Responses route: the request bodies it sends
round-trip through the Responses dialect (same JSON after a parse) and fit; its session
log (``rollout-*.jsonl``) reads back as the items it sent, with its usage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asgi_capture import capturing_sim_bodies
from windowfit import ContextOverflowError, fit
from windowfit.formats import DIALECTS
from windowfit.logs import read_runs
from windowfit.server import SimConfig, SimServer

CODEX = Path(__file__).resolve().parents[1] / "clients" / "node_modules" / ".bin" / "codex"
DIALECT = DIALECTS["openai-responses"]
SPEC = DIALECT.format

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CODEX.exists() or shutil.which("node") is None,
        reason="needs the pinned Codex CLI (make setup installs it with npm)",
    ),
]


@pytest.fixture(scope="module")
def codex_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One ``codex exec`` against serve-sim (three tool rounds, then the answer)."""
    home = tmp_path_factory.mktemp("codex-home")
    work = tmp_path_factory.mktemp("codex-work")
    with capturing_sim_bodies() as bodies, SimServer(SimConfig(tool_rounds=3)) as sim:
        (home / "config.toml").write_text(
            'model = "gpt-5-codex"\nmodel_provider = "sim"\n\n[model_providers.sim]\n'
            f'name = "sim"\nbase_url = "{sim.openai_url}"\nwire_api = "responses"\n'
            'env_key = "SIM_API_KEY"\n',
            encoding="utf-8",
        )
        env = {**os.environ, "CODEX_HOME": str(home), "SIM_API_KEY": "sim"}
        done = subprocess.run(
            [str(CODEX), "exec", "--skip-git-repo-check", "List the files here."],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        log = sim.stats()["log"]
    yield {"done": done, "bodies": bodies, "log": log, "home": home}


def _requests(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(body) for path, body in run["bodies"] if path.endswith("/responses")]


def test_codex_ran_its_loop_against_serve_sim(codex_run: dict[str, Any]) -> None:
    done = codex_run["done"]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Done: I read 3 tool results." in done.stdout
    log = [e for e in codex_run["log"] if e["route"] == "openai.responses"]
    assert len(log) == 4 and {e["status"] for e in log} == {200}
    assert all(e["stream"] for e in log)


def test_codex_requests_roundtrip_through_the_dialect_and_fit(codex_run: dict[str, Any]) -> None:
    requests = _requests(codex_run)
    assert len(requests) == 4
    for body in requests:
        parts = DIALECT.read_request(body)
        items = parts.messages
        back = [SPEC.to_message(SPEC.from_message(item, i)) for i, item in enumerate(items)]
        assert json.dumps(back) == json.dumps(body["input"])  # same JSON, key order too
        assert DIALECT.write_request(body, back, parts.system) == body
        whole = fit(
            items, budget=10**6, system=parts.system, tools=parts.tools, format="openai-responses"
        )
        assert whole.report.stage == 0 and whole.messages == items
        budget = whole.report.tokens_before - 10  # a round dropped saves more than the note
        try:
            shaped = fit(
                items,
                budget=budget,
                system=parts.system,
                tools=parts.tools,
                format="openai-responses",
            )
        except ContextOverflowError:
            # Only the head and the latest tool round, which fitting always keeps.
            assert sum(item.get("type") == "function_call" for item in items) <= 1
            continue
        assert shaped.report.tokens_after <= budget and shaped.report.stage >= 1
    kinds = {item.get("type") for body in requests for item in body["input"]}
    assert {"message", "function_call", "function_call_output"} <= kinds


def test_the_session_log_reads_back_as_what_codex_sent(codex_run: dict[str, Any]) -> None:
    requests = _requests(codex_run)
    (run,) = read_runs(codex_run["home"] / "sessions")
    assert (run.kind, run.format, run.model) == ("codex", "openai-responses", "gpt-5-codex")
    assert len(run.requests) == len(requests) and not run.repairs
    log = [e for e in codex_run["log"] if e["route"] == "openai.responses"]
    for point, body, served in zip(run.requests, requests, log, strict=True):
        sent = body["input"]
        # Every item after the base instructions is what was sent, byte for byte in meaning.
        assert run.messages[1 : point.index] == sent[1:]
        assert run.messages[0]["role"] == sent[0]["role"] == "developer"
        assert point.usage is not None
        assert point.usage.input_tokens == served["tokens"]
        assert point.usage.cache_read_tokens == served["cache_read"]
    assert any("base instructions" in w for w in run.warnings)
