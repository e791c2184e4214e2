"""windowfit.integrations.litellm: a real LiteLLM proxy process with WindowfitHook in its
config, in front of the simulated provider; an agent loop (the official openai SDK)
talks to the proxy over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openai
import pytest

import windowfit
from windowfit.integrations.litellm import WindowfitHook
from windowfit.server import SimServer

from frameworks import (
    BUDGET,
    MAX_TOKENS,
    REPLY,
    ROUNDS,
    TASK,
    assert_never_rejected,
    assert_rejected_too_long,
    chapter,
    sim_config,
)

MASTER_KEY = "sk-windowfit-litellm-test-0123456789abcdef"
FITTED, RAW = "sim-fitted", "sim-raw"  # one proxy: the hook fits only the first name
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_chapter",
            "description": "Read one chapter of the book.",
            "parameters": {
                "type": "object",
                "properties": {"number": {"type": "integer"}},
                "required": ["number"],
            },
        },
    }
]

HOOK_FILE = f"""
from windowfit.integrations.litellm import WindowfitHook

hook = WindowfitHook(budget={BUDGET}, models=[{FITTED!r}])
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(sim_config()) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A LiteLLM proxy process (its own CLI) with the hook configured; its base URL."""
    folder = tmp_path_factory.mktemp("litellm")
    (folder / "windowfit_hook.py").write_text(HOOK_FILE)
    models = "".join(
        f"""
  - model_name: {name}
    litellm_params:
      model: openai/sim-30k
      api_base: {sim.openai_url}
      api_key: sk-sim
      max_retries: 0
"""
        for name in (FITTED, RAW)
    )
    config = folder / "config.yaml"
    config.write_text(
        f"model_list:{models}\nlitellm_settings:\n  callbacks: windowfit_hook.hook\n"
        "  num_retries: 0\n"
    )
    port = _free_port()
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": MASTER_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # nothing downloaded at start
        "LITELLM_TELEMETRY": "False",
    }
    cli = Path(sys.executable).with_name("litellm")
    log = (folder / "proxy.log").open("wb")
    process = subprocess.Popen(
        [str(cli), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=folder,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError((folder / "proxy.log").read_text()[-3000:])
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the LiteLLM proxy did not start in 180 s") from None
                time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


def _run_agent(proxy: str, model: str) -> tuple[str, list[dict[str, Any]]]:
    """A plain tool loop over the OpenAI SDK: call, run the tools asked for, repeat."""
    client = openai.OpenAI(base_url=f"{proxy}/v1", api_key=MASTER_KEY, max_retries=0)
    history: list[dict[str, Any]] = [
        {"role": "system", "content": f"You read books.\n\n{windowfit.SAFETY_NET}"},
        {"role": "user", "content": TASK},
    ]
    for _ in range(2 * ROUNDS):
        reply = client.chat.completions.create(
            model=model, messages=history, tools=TOOLS, max_tokens=MAX_TOKENS
        )
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or "", history
        history.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            number = json.loads(call.function.arguments)["number"]
            history.append({"role": "tool", "tool_call_id": call.id, "content": chapter(number)})
    raise AssertionError("the agent did not finish")


@pytest.mark.slow
def test_agent_through_the_proxy_finishes_inside_the_window(proxy: str, sim: SimServer) -> None:
    answer, history = _run_agent(proxy, FITTED)
    assert answer == REPLY
    assert_never_rejected(sim.stats())
    # The client's history is whole: the proxy fitted only what it sent on.
    results = [m["content"] for m in history if m["role"] == "tool"]
    assert results == [chapter(n) for n in range(1, ROUNDS + 1)]


@pytest.mark.slow
def test_without_the_hook_the_provider_refuses(proxy: str, sim: SimServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _run_agent(proxy, RAW)
    assert windowfit.is_context_overflow(caught.value)
    assert_rejected_too_long(sim.stats())


@pytest.mark.slow
def test_hopeless_request_is_refused_by_the_proxy_without_sending(
    proxy: str, sim: SimServer
) -> None:
    client = openai.OpenAI(base_url=f"{proxy}/v1", api_key=MASTER_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=FITTED, messages=[{"role": "user", "content": chapter(1) * 12}]
        )
    assert windowfit.is_context_overflow(caught.value)
    assert sim.stats()["requests"] == 0


def test_fit_request_leaves_the_body_alone() -> None:
    hook = WindowfitHook(budget=20_000)
    history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for n in range(1, 8):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "read_chapter", "arguments": json.dumps({"number": n})},
        }
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{n}", "content": chapter(n)})
    body = {"model": "m", "messages": history, "temperature": 0.2, "litellm_call_id": "x"}
    snapshot = json.dumps(body)
    out = hook.fit_request(body)
    assert json.dumps(body) == snapshot  # unchanged
    assert out["temperature"] == 0.2 and out["messages"] is not history
    assert out["messages"][0] is history[0]
    assert any(m.get("content") == windowfit.CLEARED_RESULT_NOTE for m in out["messages"])
    assert hook.shaper.last_report is not None and hook.shaper.last_report.tokens_after <= 20_000
    other = WindowfitHook(budget=8_000, models=["only-this"])
    assert other.fit_request(body) is body


def test_the_answers_usage_is_read_by_the_chat_dialect() -> None:
    """What the success hook learns from: the answer's ``usage`` (LiteLLM's pydantic
    ``Usage`` dumps to this JSON), cached part included."""
    hook = WindowfitHook(budget=20_000)
    body = {"model": "m", "messages": [{"role": "user", "content": TASK}], "litellm_call_id": "y"}
    hook.fit_request(body)
    usage: dict[str, Any] = {"prompt_tokens": 1_234, "completion_tokens": 5}
    usage["prompt_tokens_details"] = {"cached_tokens": 1_000}
    asyncio.run(hook.async_post_call_success_hook(body, None, SimpleNamespace(usage=usage)))
    record = hook.shaper.state.stats.last_usage
    assert record is not None
    usage_read = record.usage
    assert (usage_read.input_tokens, usage_read.output_tokens) == (1_234, 5)
    assert usage_read.cache_read_tokens == 1_000
