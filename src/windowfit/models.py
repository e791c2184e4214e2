"""Known context windows and default output reserves, by model name.

:func:`model_limits` finds a model the way ``tiktoken.encoding_for_model`` does: an exact
name first, then the longest known prefix, so that dated snapshots
(``claude-3-5-sonnet-20241022``, ``gpt-4o-2024-08-06``) and suffixed names find their
family. The figures are the providers' published ones at the time of writing; a
deployment that differs (a 1M-token beta window, a proxy with a smaller limit) passes its
own through ``windows=`` to :func:`windowfit.wrap` or :func:`model_limits`.

``max_output`` is what :func:`windowfit.wrap` reserves for the answer when a request does
not say (OpenAI's ``max_tokens`` is optional); it is the model's largest answer, so the
reserve never comes up short.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["MODEL_LIMITS", "ModelLimits", "model_limits"]


@dataclass(frozen=True)
class ModelLimits:
    """A model's context window (input and output together) and its largest answer."""

    context_window: int
    max_output: int

    def __post_init__(self) -> None:
        for name in ("context_window", "max_output"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive whole number, not {value!r}")


_L = ModelLimits

#: Published limits by model name or name prefix (longest prefix wins).
MODEL_LIMITS: Mapping[str, ModelLimits] = MappingProxyType(
    {
        # Anthropic. "claude" alone is the fallback for a Claude model not listed: 200k,
        # the smallest window of the family, so that fitting errs on the safe side.
        # Sonnet 4 and 4.5 read 1M behind a beta header only: pass windows= for that.
        "claude": _L(200_000, 4_096),
        "claude-3-haiku": _L(200_000, 4_096),
        "claude-3-opus": _L(200_000, 4_096),
        "claude-3-sonnet": _L(200_000, 4_096),
        "claude-3-5-haiku": _L(200_000, 8_192),
        "claude-3-5-sonnet": _L(200_000, 8_192),
        "claude-3-7-sonnet": _L(200_000, 64_000),
        "claude-sonnet-4": _L(200_000, 64_000),
        "claude-opus-4": _L(200_000, 32_000),
        "claude-opus-4-5": _L(200_000, 64_000),
        "claude-haiku-4-5": _L(200_000, 64_000),
        # 1M tokens as standard (platform.claude.com model pages).
        "claude-opus-4-6": _L(1_000_000, 128_000),
        "claude-opus-4-7": _L(1_000_000, 128_000),
        "claude-opus-4-8": _L(1_000_000, 128_000),
        "claude-sonnet-4-6": _L(1_000_000, 128_000),
        "claude-sonnet-5": _L(1_000_000, 128_000),
        "claude-opus-5": _L(1_000_000, 128_000),
        "claude-fable-5": _L(1_000_000, 128_000),
        # OpenAI chat models.
        "gpt-3.5-turbo": _L(16_385, 4_096),
        "gpt-4": _L(8_192, 8_192),
        "gpt-4-32k": _L(32_768, 32_768),
        "gpt-4-turbo": _L(128_000, 4_096),
        "gpt-4-1106": _L(128_000, 4_096),
        "gpt-4-0125": _L(128_000, 4_096),
        "gpt-4o": _L(128_000, 16_384),
        "chatgpt-4o-latest": _L(128_000, 16_384),
        "gpt-4.1": _L(1_047_576, 32_768),
        "gpt-5": _L(400_000, 128_000),
        "o1": _L(200_000, 100_000),
        "o1-mini": _L(128_000, 65_536),
        "o1-preview": _L(128_000, 32_768),
        "o3": _L(200_000, 100_000),
        "o4-mini": _L(200_000, 100_000),
        # Google Gemini (ai.google.dev model pages): the window is the input limit, which
        # is what the API checks ("The input token count (N) exceeds the maximum number of
        # tokens allowed (M)"); "gemini" alone is the fallback for a model not listed.
        "gemini": _L(1_048_576, 8_192),
        "gemini-1.5-flash": _L(1_048_576, 8_192),
        "gemini-1.5-pro": _L(2_097_152, 8_192),
        "gemini-2.0-flash": _L(1_048_576, 8_192),
        "gemini-2.5-pro": _L(1_048_576, 65_536),
        "gemini-2.5-flash": _L(1_048_576, 65_536),
        "gemini-3-pro": _L(1_048_576, 65_536),
        "gemini-3-flash": _L(1_048_576, 65_536),
        # OpenAI-compatible providers often reached through the openai SDK.
        "deepseek-chat": _L(128_000, 8_192),
        "deepseek-reasoner": _L(128_000, 64_000),
    }
)


def _as_limits(value: ModelLimits | int | tuple[int, int]) -> ModelLimits:
    if isinstance(value, ModelLimits):
        return value
    if isinstance(value, tuple):
        return ModelLimits(value[0], value[1])
    return ModelLimits(value, min(value, 4_096))


def model_limits(
    model: str,
    windows: Mapping[str, ModelLimits | int | tuple[int, int]] | None = None,
) -> ModelLimits | None:
    """The limits of ``model``: exact name, then the longest known prefix; ``None`` if
    unknown. ``windows`` entries (a :class:`ModelLimits`, a window, or ``(window,
    max_output)``) take precedence over the table; a bare window reserves at most 4,096
    output tokens by default."""
    if not isinstance(model, str) or not model:
        return None
    tables: list[Mapping[str, ModelLimits | int | tuple[int, int]]] = []
    if windows:
        tables.append(windows)
    tables.append(MODEL_LIMITS)
    for table in tables:
        if model in table:
            return _as_limits(table[model])
        best = max((name for name in table if model.startswith(name)), key=len, default=None)
        if best is not None:
            return _as_limits(table[best])
    return None
