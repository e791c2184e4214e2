"""The one model table: every caller that looks a model up gets the same answer, for the
names as routers, clouds and SDKs spell them."""

from __future__ import annotations

import pytest

from windowfit import estimator_for, family_for_model, model_limits
from windowfit.logs import Run
from windowfit.models import MODELS, ModelLimits, canonical_model_name, model_info
from windowfit.replay import tokenizer_for

BACKEND = {
    "o200k": "o200k",
    "cl100k": "cl100k",
    "deepseek": "deepseek",
    "claude": "claude-legacy",
    "tekken": "tekken",
    "conservative": "o200k",
}

#: (name as written somewhere real, the row it must find).
NAMES = [
    # Anthropic, direct and through routers and clouds
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ("anthropic/claude-opus-4-6", "claude-opus-4-6"),
    ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
    ("eu.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
    ("anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku"),
    ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
    ("bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
    ("claude-sonnet-4@20250514", "claude-sonnet-4"),
    ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
    ("vertex_ai/claude-opus-4-1@20250805", "claude-opus-4-1"),
    ("openrouter/anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
    ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
    ("claude-unknown-9", "claude"),
    # OpenAI
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4o-mini", "gpt-4o"),
    ("azure/gpt-4o", "gpt-4o"),
    ("openai/gpt-4.1-mini", "gpt-4.1"),
    ("gpt-4.1-nano-2025-04-14", "gpt-4.1"),
    ("gpt-4-0613", "gpt-4"),
    ("gpt-4-1106-preview", "gpt-4-1106"),
    ("gpt-4-turbo-2024-04-09", "gpt-4-turbo"),
    ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
    ("gpt-35-turbo", "gpt-35-turbo"),
    ("gpt-5", "gpt-5"),
    ("gpt-5-codex", "gpt-5"),
    ("gpt-5-mini-2025-08-07", "gpt-5"),
    ("gpt-5-chat-latest", "gpt-5-chat"),
    ("gpt-5.1-codex-max", "gpt-5.1"),
    ("o1-mini", "o1-mini"),
    ("o3-mini-2025-01-31", "o3-mini"),
    ("o4-mini", "o4-mini"),
    ("ft:gpt-4o-mini:acme::abc", "gpt-4o"),
    ("openrouter/openai/gpt-oss-120b", "gpt-oss"),
    # Gemini
    ("gemini-2.5-pro", "gemini-2.5-pro"),
    ("gemini-2.5-flash-lite", "gemini-2.5-flash"),
    ("vertex_ai/gemini-2.5-flash", "gemini-2.5-flash"),
    ("models/gemini-2.0-flash-001", "gemini-2.0-flash"),
    ("gemini-3-pro-preview", "gemini-3"),
    # DeepSeek
    ("deepseek-chat", "deepseek-chat"),
    ("openrouter/deepseek/deepseek-chat", "deepseek-chat"),
    ("deepseek/deepseek-reasoner", "deepseek-reasoner"),
    ("DeepSeek-V3", "deepseek"),
    ("deepseek.r1-v1:0", "deepseek-r1"),
    # Mistral
    ("mistral-large-2411", "mistral-large"),
    ("mistral/codestral-2501", "codestral"),
    ("mistral.mistral-large-2407-v1:0", "mistral-large"),
    ("devstral-small-2505", "devstral"),
    ("open-mistral-7b", "open-mistral-7b"),
    # Qwen
    ("qwen-plus", "qwen-plus"),
    ("Qwen/Qwen3-235B-A22B", "qwen3"),
    ("openrouter/qwen/qwen3-coder", "qwen3-coder"),
    ("qwen2.5-72b-instruct", "qwen2.5"),
    # Llama
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3"),
    ("meta.llama3-1-70b-instruct-v1:0", "llama3-1"),
    ("groq/llama-3.1-8b-instant", "llama-3.1"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick"),
]


@pytest.mark.parametrize(("name", "row"), NAMES)
def test_every_caller_answers_from_the_one_table(name: str, row: str) -> None:
    info = model_info(name)
    assert info is not None and info.name == row
    assert model_limits(name) == info.limits
    assert family_for_model(name) == info.family
    assert estimator_for(model=name) is estimator_for(family=info.family)
    run = Run("r", "messages", "x.json", "openai", None, None, [], [], name, "messages")
    assert tokenizer_for(run, "auto") == BACKEND[info.family]


@pytest.mark.parametrize("name", ["gpt", "my-model", "", "   ", "llama", "mistral-7b"])
def test_unknown_names_are_unknown_to_every_caller(name: str) -> None:
    assert model_info(name) is None
    assert model_limits(name) is None
    assert family_for_model(name) == "conservative"
    run = Run("r", "messages", "x.json", "openai", None, None, [], [], name or None, "messages")
    assert tokenizer_for(run, "auto") == "o200k"


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet-20240620"),
        ("claude-sonnet-4@20250514", "claude-sonnet-4"),
        ("openrouter/anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("DeepSeek-V3", "deepseek-v3"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("ft:gpt-4o-mini:acme::abc", "gpt-4o-mini"),
        ("llama3:70b", "llama3"),
    ],
)
def test_canonical_names(name: str, canonical: str) -> None:
    assert canonical_model_name(name) == canonical


def test_claude_code_logs_without_a_model_count_with_the_claude_tokenizer() -> None:
    run = Run("r", "lines", "x.jsonl", "anthropic", None, None, [], [], None, "claude-code")
    assert tokenizer_for(run, "auto") == "claude-legacy"
    assert tokenizer_for(run, "cl100k") == "cl100k"


def test_every_row_is_sane() -> None:
    families = {"o200k", "cl100k", "deepseek", "claude", "tekken", "conservative"}
    for name, info in MODELS.items():
        assert name == canonical_model_name(name), name
        assert info.family in families
        assert isinstance(info.limits, ModelLimits)
        assert info.max_output <= info.context_window
