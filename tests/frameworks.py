"""What the framework integration tests share: a simulated provider whose scripted model
calls a tool 40 times, tool results that together exceed its window several times over,
and the checks on the server's counters."""

from __future__ import annotations

from typing import Any

WINDOW = 30_000
MAX_TOKENS = 512
BUDGET = WINDOW - MAX_TOKENS
ROUNDS = 40
MODEL = "sim-30k"
REPLY = f"Done: I read {ROUNDS} tool results."
TASK = "Read every chapter of the book, one call per chapter, then tell me you are done."

_TEXT = (
    "lantern harbour orchard velvet granite meadow whisper copper thistle ember "
    "cathedral riverbank saddle parchment juniper quarry lattice cobalt marigold "
    "Пьер долго сидел у окна глядя на тёмную улицу"
)
_WORDS = _TEXT.split()


def chapter(number: int) -> str:
    """A long, deterministic tool result (about 3,000 o200k tokens), different for every
    chapter so that no two results are the same text."""
    words = [_WORDS[(number * 7 + k * k) % len(_WORDS)] for k in range(2_200)]
    return f"Chapter {number}. " + " ".join(words)


def sim_config() -> Any:
    from windowfit.server import SimConfig

    return SimConfig(context_window=WINDOW, tool_rounds=ROUNDS, cache_min_tokens=0)


def assert_never_rejected(stats: dict[str, Any]) -> None:
    """Every request the server saw was answered and under the window."""
    assert stats["requests"] == ROUNDS + 1, stats["by_status"]
    assert stats["by_status"] == {"200": ROUNDS + 1}, stats["by_status"]
    assert stats["errors"] == {}
    assert 0 < stats["max_request_tokens"] <= WINDOW - MAX_TOKENS
    assert all(entry["tokens"] <= WINDOW - MAX_TOKENS for entry in stats["log"])


def assert_rejected_too_long(stats: dict[str, Any]) -> None:
    """The run without windowfit ended on the provider's "too long" refusal."""
    assert stats["by_status"].get("400") == 1, stats["by_status"]
    assert stats["errors"] == {"context_overflow": 1}, stats["errors"]
    assert stats["log"][-1]["tokens"] > WINDOW - MAX_TOKENS
