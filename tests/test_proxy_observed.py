"""What a running proxy shows about the requests it fitted: /metrics and the live page,
read over HTTP after real requests through it to serve-sim."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

httpx = pytest.importorskip("httpx", reason="needs httpx: pip install 'windowfit[proxy]'")
pytest.importorskip("windowfit.proxy._run", reason="needs the proxy app (windowfit proxy)")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from windowfit.proxy import ProxyConfig, ProxyServer  # type: ignore[attr-defined]  # noqa: E402
from windowfit.server import SimConfig, SimServer  # noqa: E402

BUDGET = 20_000
HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
WORDS = ("read", "the", "file", "and", "report", "what", "each", "function", "returns")


@pytest.fixture(scope="module")
def proxy() -> Iterator[Any]:
    with SimServer(SimConfig(context_window=60_000, tool_rounds=0)) as sim:
        upstreams = (("anthropic", sim.url), ("openai", sim.url))
        with ProxyServer(ProxyConfig(upstreams=upstreams, budget=BUDGET)) as server:
            yield server


def _long_turn(task: str, rounds: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i in range(rounds):
        text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(2500))
        call = {"type": "tool_use", "id": f"toolu_{i:04d}", "name": "Bash", "input": {"n": i}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:04d}", "content": text}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": messages}


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_and_the_live_page_show_a_fitted_conversation(proxy):
    task = "Task: read the files and say what each function returns."
    small = httpx.post(proxy.url + "/v1/messages", json=_long_turn(task, 1), headers=HEADERS)
    large = httpx.post(proxy.url + "/v1/messages", json=_long_turn(task, 12), headers=HEADERS)
    assert small.status_code == 200 and large.status_code == 200, large.text
    assert large.headers["x-windowfit-stage"] != "0"

    metrics = httpx.get(proxy.url + "/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(metrics.text)
    requests = {
        dict(labels)["stage"]: value
        for (name, labels), value in samples.items()
        if name == "windowfit_proxy_requests_total" and dict(labels)["status"] == "200"
    }
    assert requests.get("0", 0) >= 1 and sum(requests.values()) >= 2
    assert any(stage not in ("0", "none", "passthrough") for stage in requests)
    before = sum(v for (n, _), v in samples.items() if n == "windowfit_proxy_tokens_before_total")
    after = sum(v for (n, _), v in samples.items() if n == "windowfit_proxy_tokens_after_total")
    assert after < before
    added = sum(v for (n, _), v in samples.items() if n == "windowfit_proxy_added_seconds_count")
    assert added >= 2

    page = httpx.get(proxy.url + "/_windowfit/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "<svg" in html and 'id="conversations"' in html
    assert html.count("data-conversation=") >= 1
    assert 'class="num requests">' in html
