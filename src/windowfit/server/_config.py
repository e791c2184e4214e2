"""How a simulated server behaves: its window, its tokenizer, its model's script."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..simcore import DEFAULT_CACHE_BYTES, DEFAULT_REPLY, Fault, ScriptedTool
from ._stats import DEFAULT_LOG_BYTES

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_LOG_BYTES",
    "DEFAULT_MAX_BODY_BYTES",
    "SimConfig",
]

#: Every current Claude model reads 200k tokens.
DEFAULT_CONTEXT_WINDOW = 200_000
#: Anthropic's documented limit for a Messages request (32 MB).
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class SimConfig:
    """Settings of ``windowfit serve-sim`` (all have command-line flags).

    ``context_window``: the hard limit, in tokens counted with ``tokenizer`` (any name
    :func:`windowfit.tokenizers.load_backend` knows). A request whose input is above it is
    rejected as "prompt is too long"; with ``reserve_output`` also one whose input plus
    ``max_tokens`` is above it, as current models do.
    ``api_keys``: when not empty, requests must carry one of them (``x-api-key`` or
    ``Authorization: Bearer``), else 401; when empty, any key is accepted. The control
    routes (``/_sim/...``) need one of them too, as either header.
    ``tool_rounds``: the scripted model calls a tool while the conversation holds fewer
    than this many tool results and tools are offered; then it answers with ``reply``
    (``{results}``, ``{tokens}`` and ``{model}`` are filled in). ``script_tool``: call
    this tool with this input (``{n}`` filled in) instead of the first tool offered.
    ``cache_min_tokens`` / ``cache_increment``: the prefix cache's smallest cacheable
    prefix and, for OpenAI, the step cached counts are rounded down to (1024 and 128, as
    the providers document).
    ``faults``: errors, delays and dropped connections served first, in order.
    ``latency``: seconds every answer waits (a provider's time to first token).
    ``stream_chunk_chars``: text per SSE delta. ``stream_tokens_per_second``: a stream's
    events are paced as a model writing this many tokens a second (at about 4
    characters a token, so ``stream_chunk_chars / 4 / rate`` seconds between events;
    0, the default: as fast as they can be written).
    ``cache_max_bytes`` / ``log_max_bytes``: the memory the prefix cache and the log of
    recent requests may take (32 MiB and 1 MiB); the least recently used go first.
    ``drain_seconds``: how long the rest of an oversized body is read (and dropped) before
    the 413 is sent, so that a client that stops sending cannot hold its answer.
    """

    context_window: int = DEFAULT_CONTEXT_WINDOW
    tokenizer: str = "o200k"
    api_keys: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    tool_rounds: int = 3
    reply: str = DEFAULT_REPLY
    reserve_output: bool = True
    cache_min_tokens: int = 1024
    cache_increment: int = 128
    cache_ttl: float = 300.0
    latency: float = 0.0
    stream_chunk_chars: int = 12
    stream_tokens_per_second: float = 0.0
    drain_seconds: float = 5.0
    cache_max_bytes: int = DEFAULT_CACHE_BYTES
    log_max_bytes: int = DEFAULT_LOG_BYTES
    faults: tuple[Fault, ...] = field(default_factory=tuple)
    script_tool: ScriptedTool | None = None

    def __post_init__(self) -> None:
        positive = (
            "context_window",
            "max_body_bytes",
            "cache_increment",
            "stream_chunk_chars",
            "cache_max_bytes",
            "log_max_bytes",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive whole number, not {value!r}")
        for name in ("tool_rounds", "cache_min_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
        for name in ("latency", "cache_ttl", "drain_seconds", "stream_tokens_per_second"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if not all(isinstance(key, str) and key for key in self.api_keys):
            raise ValueError("api_keys must be non-empty strings")
