"""The one model table: a model's context window, largest answer and tokenizer family.

Everything in windowfit that looks a model up asks :func:`model_info`:
:func:`model_limits` (what :func:`windowfit.wrap` fits to), :func:`windowfit.family_for_model`
(which calibrated profile counts, :func:`windowfit.estimator_for`) and the replay's
``tokenizer_for`` (which real tokenizer measures). So they cannot disagree.

A name is looked up the way ``tiktoken.encoding_for_model`` does (an exact name first,
then the longest known prefix, so dated snapshots such as ``claude-3-5-sonnet-20241022`` or
``gpt-4o-2024-08-06`` find their row) after :func:`canonical_model_name` has taken off what
routers and clouds add: ``anthropic/``, ``openrouter/...``, ``bedrock/``, ``vertex_ai/``,
``azure/``, Bedrock's ``us.anthropic.claude-...-v2:0`` and Vertex's
``claude-...@20250514`` forms, OpenRouter's dotted versions (``claude-3.5-sonnet``), and
``ft:`` for fine-tunes.

The figures are the providers' published ones at the time of writing (sources in the
comments); a deployment that differs (a 1M-token beta window, a proxy with a smaller
limit) passes its own through ``windows=`` to :func:`windowfit.wrap` or
:func:`model_limits`. ``max_output`` is what :func:`windowfit.wrap` reserves for the answer
when a request does not say (OpenAI's ``max_tokens`` is optional); it is the model's
largest answer, so the reserve never comes up short. ``family`` is ``"conservative"``
for models whose tokenizer windowfit has no profile of (Gemini, Qwen, Llama): their
counts then err high against every family measured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "MODELS",
    "MODEL_LIMITS",
    "ModelInfo",
    "ModelLimits",
    "canonical_model_name",
    "model_info",
    "model_limits",
]


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


@dataclass(frozen=True)
class ModelInfo:
    """One row of the table: the row's name (the prefix that matched), the model's limits
    and its tokenizer family (a name of :data:`windowfit.FAMILIES`)."""

    name: str
    limits: ModelLimits
    family: str

    @property
    def context_window(self) -> int:
        return self.limits.context_window

    @property
    def max_output(self) -> int:
        return self.limits.max_output


def _m(window: int, output: int, family: str) -> tuple[ModelLimits, str]:
    return ModelLimits(window, output), family


_CLAUDE, _O200K, _CL100K = "claude", "o200k", "cl100k"
_DEEPSEEK, _TEKKEN, _UNKNOWN = "deepseek", "tekken", "conservative"

_ROWS: dict[str, tuple[ModelLimits, str]] = {
    # ---- Anthropic (docs.claude.com "Models overview" and each model's page). "claude"
    # alone is the fallback for a Claude model not listed: 200k, the smallest window of
    # the family, and the smallest answer, so that fitting errs on the safe side. Sonnet 4
    # and 4.5 read 1M behind a beta header only: pass windows= for that.
    "claude": _m(200_000, 4_096, _CLAUDE),
    "claude-2": _m(100_000, 4_096, _CLAUDE),
    "claude-2-1": _m(200_000, 4_096, _CLAUDE),
    "claude-instant": _m(100_000, 4_096, _CLAUDE),
    "claude-3-haiku": _m(200_000, 4_096, _CLAUDE),
    "claude-3-opus": _m(200_000, 4_096, _CLAUDE),
    "claude-3-sonnet": _m(200_000, 4_096, _CLAUDE),
    "claude-3-5-haiku": _m(200_000, 8_192, _CLAUDE),
    "claude-3-5-sonnet": _m(200_000, 8_192, _CLAUDE),
    "claude-3-7-sonnet": _m(200_000, 64_000, _CLAUDE),
    "claude-sonnet-4": _m(200_000, 64_000, _CLAUDE),
    "claude-sonnet-4-5": _m(200_000, 64_000, _CLAUDE),
    "claude-opus-4": _m(200_000, 32_000, _CLAUDE),
    "claude-opus-4-1": _m(200_000, 32_000, _CLAUDE),
    "claude-opus-4-5": _m(200_000, 64_000, _CLAUDE),
    "claude-haiku-4-5": _m(200_000, 64_000, _CLAUDE),
    # 1M tokens as standard (platform.claude.com model pages).
    "claude-opus-4-6": _m(1_000_000, 128_000, _CLAUDE),
    "claude-opus-4-7": _m(1_000_000, 128_000, _CLAUDE),
    "claude-opus-4-8": _m(1_000_000, 128_000, _CLAUDE),
    "claude-sonnet-4-6": _m(1_000_000, 128_000, _CLAUDE),
    "claude-sonnet-5": _m(1_000_000, 128_000, _CLAUDE),
    "claude-opus-5": _m(1_000_000, 128_000, _CLAUDE),
    "claude-fable-5": _m(1_000_000, 128_000, _CLAUDE),
    # ---- OpenAI (platform.openai.com/docs/models, each model's "context window" and
    # "max output tokens"; encodings as tiktoken's model table).
    "gpt-3.5-turbo": _m(16_385, 4_096, _CL100K),
    "gpt-35-turbo": _m(16_385, 4_096, _CL100K),  # Azure's spelling
    "gpt-4": _m(8_192, 8_192, _CL100K),
    "gpt-4-32k": _m(32_768, 32_768, _CL100K),
    "gpt-4-turbo": _m(128_000, 4_096, _CL100K),
    "gpt-4-1106": _m(128_000, 4_096, _CL100K),
    "gpt-4-0125": _m(128_000, 4_096, _CL100K),
    "gpt-4-vision": _m(128_000, 4_096, _CL100K),
    "text-embedding-": _m(8_191, 1, _CL100K),
    "gpt-4o": _m(128_000, 16_384, _O200K),
    "chatgpt-4o": _m(128_000, 16_384, _O200K),
    "gpt-4.1": _m(1_047_576, 32_768, _O200K),
    "gpt-4.5": _m(128_000, 16_384, _O200K),
    "gpt-5": _m(400_000, 128_000, _O200K),
    "gpt-5-chat": _m(128_000, 16_384, _O200K),
    "gpt-5.1": _m(400_000, 128_000, _O200K),
    "gpt-5.1-chat": _m(128_000, 16_384, _O200K),
    "gpt-5.2": _m(400_000, 128_000, _O200K),
    "gpt-oss": _m(131_072, 32_768, _O200K),  # open weights; o200k_harmony
    "codex-mini": _m(200_000, 100_000, _O200K),
    "o1": _m(200_000, 100_000, _O200K),
    "o1-mini": _m(128_000, 65_536, _O200K),
    "o1-preview": _m(128_000, 32_768, _O200K),
    "o3": _m(200_000, 100_000, _O200K),
    "o3-mini": _m(200_000, 100_000, _O200K),
    "o4-mini": _m(200_000, 100_000, _O200K),
    # ---- Google Gemini (ai.google.dev/gemini-api/docs/models: input token limit plus
    # output token limit). Gemini's tokenizer has no profile here: conservative.
    "gemini": _m(32_768, 8_192, _UNKNOWN),
    "gemini-1.5-pro": _m(2_097_152, 8_192, _UNKNOWN),
    "gemini-1.5-flash": _m(1_048_576, 8_192, _UNKNOWN),
    "gemini-2.0-flash": _m(1_048_576, 8_192, _UNKNOWN),
    "gemini-2.5-pro": _m(1_048_576, 65_536, _UNKNOWN),
    "gemini-2.5-flash": _m(1_048_576, 65_536, _UNKNOWN),
    "gemini-3": _m(1_048_576, 65_536, _UNKNOWN),
    # ---- DeepSeek (api-docs.deepseek.com "Models & Pricing": 128K context; chat answers
    # up to 8K, reasoner up to 64K).
    "deepseek": _m(128_000, 8_192, _DEEPSEEK),
    "deepseek-chat": _m(128_000, 8_192, _DEEPSEEK),
    "deepseek-reasoner": _m(128_000, 64_000, _DEEPSEEK),
    "deepseek-r1": _m(128_000, 64_000, _DEEPSEEK),
    # ---- Mistral (docs.mistral.ai/getting-started/models: context lengths; no separate
    # answer limit is published, so the reserve is a quarter of the window). Tekken is
    # the tokenizer of NeMo and every model since; the older 7B/8x7B ones have another.
    "mistral-large": _m(131_072, 32_768, _TEKKEN),
    "mistral-medium": _m(131_072, 32_768, _TEKKEN),
    "mistral-small": _m(131_072, 32_768, _TEKKEN),
    "open-mistral-nemo": _m(131_072, 32_768, _TEKKEN),
    "mistral-nemo": _m(131_072, 32_768, _TEKKEN),
    "ministral": _m(131_072, 32_768, _TEKKEN),
    "pixtral": _m(131_072, 32_768, _TEKKEN),
    "codestral": _m(256_000, 64_000, _TEKKEN),
    "devstral": _m(131_072, 32_768, _TEKKEN),
    "magistral": _m(40_000, 10_000, _TEKKEN),
    "open-mistral-7b": _m(32_768, 8_192, _UNKNOWN),
    "open-mixtral": _m(32_768, 8_192, _UNKNOWN),
    # ---- Qwen (Alibaba Model Studio model list; Hugging Face model cards for the open
    # weights: Qwen2.5 32K native, Qwen3 32K native and 128K with YaRN as served,
    # Qwen3-Coder 256K). No profile for Qwen's tokenizer: conservative.
    "qwen": _m(32_768, 8_192, _UNKNOWN),
    "qwen-max": _m(32_768, 8_192, _UNKNOWN),
    "qwen-plus": _m(131_072, 16_384, _UNKNOWN),
    "qwen-turbo": _m(1_000_000, 16_384, _UNKNOWN),
    "qwen2.5": _m(32_768, 8_192, _UNKNOWN),
    "qwen3": _m(131_072, 32_768, _UNKNOWN),
    "qwen3-coder": _m(262_144, 65_536, _UNKNOWN),
    # ---- Meta Llama (llama.com model cards: Llama 3 8K; 3.1-3.3 128K; Llama 4 Scout
    # 10M and Maverick 1M as trained, hosts often serve less: pass windows=). Answers
    # as the hosts cap them (4K-8K). No profile for Llama's tokenizer: conservative.
    "llama-3": _m(8_192, 4_096, _UNKNOWN),
    "llama3": _m(8_192, 4_096, _UNKNOWN),
    "llama-3.1": _m(131_072, 8_192, _UNKNOWN),
    "llama-3.2": _m(131_072, 8_192, _UNKNOWN),
    "llama-3.3": _m(131_072, 8_192, _UNKNOWN),
    "llama3-1": _m(131_072, 8_192, _UNKNOWN),  # Bedrock's spelling: meta.llama3-1-...
    "llama3-2": _m(131_072, 8_192, _UNKNOWN),
    "llama3-3": _m(131_072, 8_192, _UNKNOWN),
    "llama-4-scout": _m(10_000_000, 8_192, _UNKNOWN),
    "llama-4-maverick": _m(1_000_000, 8_192, _UNKNOWN),
    "llama4-scout": _m(10_000_000, 8_192, _UNKNOWN),
    "llama4-maverick": _m(1_000_000, 8_192, _UNKNOWN),
}

#: Every row of the table by name or name prefix (longest prefix wins).
MODELS: Mapping[str, ModelInfo] = MappingProxyType(
    {name: ModelInfo(name, limits, family) for name, (limits, family) in _ROWS.items()}
)

#: The limits of every row (the view :func:`model_limits` answers from).
MODEL_LIMITS: Mapping[str, ModelLimits] = MappingProxyType(
    {name: info.limits for name, info in MODELS.items()}
)

# Cloud and router forms: a region and vendor ahead of the name (Bedrock's
# "us.anthropic.", "eu.", "apac.", "global."; "meta.llama3-1-..."), a version after it
# (Bedrock's "-v2:0", Vertex's "@20241022", Ollama's ":70b").
_VENDOR = re.compile(
    r"^(?:(?:us|eu|apac|global|us-gov|jp|au)\.)?"
    r"(anthropic|meta|mistral|deepseek|openai|amazon|cohere|qwen|google)\."
)
_BEDROCK_VERSION = re.compile(r"-v\d+:\d+$")
_DOTTED = re.compile(r"(?<=\d)\.(?=\d)")


def canonical_model_name(model: str) -> str:
    """``model`` as the table spells it: lowercase, without a router's or cloud's route
    (everything up to the last ``/``; Bedrock's region and vendor), version suffix
    (Bedrock ``-v1:0``, Vertex ``@...``, a tag after ``:``) or ``ft:`` prefix, and with a
    Claude name's dotted version as hyphens (OpenRouter's ``claude-3.5-sonnet``)."""
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    name = name.rsplit("/", 1)[-1]
    vendor = _VENDOR.match(name)
    if vendor is not None:
        name = name[vendor.end() :]
        if vendor.group(1) == "deepseek" and not name.startswith("deepseek"):
            name = "deepseek-" + name  # Bedrock's "deepseek.r1-v1:0"
    name = name.split("@", 1)[0]
    name = _BEDROCK_VERSION.sub("", name)
    name = name.split(":", 1)[0]
    if name.startswith("claude"):
        name = _DOTTED.sub("-", name)
    return name


def _find(name: str, table: Mapping[str, object]) -> str | None:
    if name in table:
        return name
    return max((key for key in table if name.startswith(key)), key=len, default=None)


def model_info(model: str) -> ModelInfo | None:
    """The table's row for ``model`` (see :func:`canonical_model_name`): the exact name,
    else the longest known prefix; ``None`` for a model the table does not know."""
    if not isinstance(model, str) or not model.strip():
        return None
    found = _find(canonical_model_name(model), MODELS)
    return None if found is None else MODELS[found]


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
    """The limits of ``model`` (:func:`model_info`); ``None`` if unknown. ``windows``
    entries (a :class:`ModelLimits`, a window, or ``(window, max_output)``) take
    precedence over the table, matched on the name as given and then as the table spells
    it; a bare window reserves at most 4,096 output tokens by default."""
    if not isinstance(model, str) or not model:
        return None
    if windows:
        for name in (model, canonical_model_name(model)):
            found = _find(name, windows)
            if found is not None:
                return _as_limits(windows[found])
    info = model_info(model)
    return None if info is None else info.limits
