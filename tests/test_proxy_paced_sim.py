"""serve-sim paces a stream as a provider writes it (``--latency``, the time to first
token; ``--stream-tokens-per-second``), so that the proxy's benchmark can load 20
concurrent streams the way real ones arrive instead of all at once."""

from __future__ import annotations

import time

import httpx
import pytest

from windowfit.server import SimConfig, SimServer

_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 200,
    "stream": True,
    "messages": [{"role": "user", "content": "hello"}],
}


def _stream(url: str) -> tuple[float, float, int]:
    """Seconds to the first event and to the end, and how many events."""
    started = time.perf_counter()
    first = 0.0
    events = 0
    with httpx.stream(
        "POST", url + "/v1/messages", json=_BODY, headers={"x-api-key": "k"}, timeout=30
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("event:"):
                events += 1
                first = first or time.perf_counter() - started
    return first, time.perf_counter() - started, events


@pytest.mark.parametrize(("rate", "latency"), [(400.0, 0.0), (200.0, 0.2)])
def test_a_paced_stream_takes_the_time_a_model_writing_at_that_rate_would(
    rate: float, latency: float
) -> None:
    reply = "word " * 40  # 200 characters: 17 deltas of 12
    config = SimConfig(tool_rounds=0, reply=reply, latency=latency, stream_tokens_per_second=rate)
    with SimServer(config) as sim:
        first, total, events = _stream(sim.url)
    interval = config.stream_chunk_chars / 4 / rate
    assert events > 17
    assert first >= latency
    assert total - first >= (events - 1) * interval * 0.95  # sleeps end no sooner


@pytest.mark.parametrize("rate", [-1.0, float("nan"), float("inf")])
def test_a_pace_must_be_a_finite_rate(rate: float) -> None:
    with pytest.raises(ValueError, match="stream_tokens_per_second"):
        SimConfig(stream_tokens_per_second=rate)
