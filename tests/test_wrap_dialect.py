"""windowfit.wrap asks the dialects: no provider-name branches in the wrappers, the
agent runtime or the integrations; which APIs a client speaks comes from the dialects'
SDK facts; one usage type throughout."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai

from windowfit import logs
from windowfit.formats import DIALECTS, FORMATS, Usage
from windowfit.wrap import UsageRecord, _dialects_of, wrap

SRC = Path(__file__).resolve().parent.parent / "src" / "windowfit"
#: The modules that must ask a dialect instead of naming a provider.
ASKING = [
    "wrap.py",
    "_wrap_gemini.py",
    "_wrap_responses.py",
    "calibration.py",
    "learning.py",
    "logs.py",
    "sizing.py",
    *sorted(str(p.relative_to(SRC)) for p in (SRC / "agent").glob("*.py")),
    *sorted(str(p.relative_to(SRC)) for p in (SRC / "integrations").glob("*.py")),
]
NAMES = set(DIALECTS) | set(FORMATS)


def _names_in(node: ast.expr) -> set[str]:
    """The provider names a comparison's operand spells out (a literal, or a literal
    tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def provider_branches(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each comparison with a provider or format name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found.extend((node.lineno, name) for name in sorted(_names_in(operand)))
        elif isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchValue):
            found.extend((node.pattern.lineno, n) for n in sorted(_names_in(node.pattern.value)))
    return found


@pytest.mark.parametrize("module", ASKING)
def test_no_provider_name_branches(module: str) -> None:
    assert provider_branches((SRC / module).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "if provider == 'anthropic': pass",
        "x = 'gemini' != fmt",
        "ok = state.provider in ('openai', 'openai-responses')",
        "match name:\n    case 'anthropic':\n        pass",
    ],
)
def test_the_check_sees_a_branch(source: str) -> None:
    assert provider_branches(source)


def test_lookups_by_name_are_not_branches() -> None:
    assert provider_branches("d = DIALECTS['anthropic']; kind == 'chat'") == []


@pytest.mark.parametrize(
    ("client", "names"),
    [
        (anthropic.Anthropic(api_key="k"), ["anthropic"]),
        (anthropic.AsyncAnthropic(api_key="k"), ["anthropic"]),
        (openai.OpenAI(api_key="k"), ["openai", "openai-responses"]),
        (openai.AsyncOpenAI(api_key="k"), ["openai", "openai-responses"]),
        (
            openai.AzureOpenAI(api_key="k", api_version="2024-10-21", azure_endpoint="http://x"),
            ["openai", "openai-responses"],
        ),
        (genai.Client(api_key="k"), ["gemini"]),
    ],
    ids=["anthropic", "anthropic-async", "openai", "openai-async", "azure", "genai"],
)
def test_the_apis_of_a_client_come_from_the_dialects(client: Any, names: list[str]) -> None:
    assert [d.name for d in _dialects_of(client)] == names
    wrapped = wrap(client, budget=1_000)
    assert wrapped.windowfit.dialect is DIALECTS[names[0]]
    for name in names:
        path = DIALECTS[name].sdk_resource.split(".")
        resource: Any = wrapped
        for part in path:
            resource = getattr(resource, part)
        assert type(resource).__module__.startswith("windowfit.")


def test_one_usage_type() -> None:
    assert logs.RecordedUsage is Usage
    usage = Usage(120, 7, cache_read_tokens=100, cache_write_tokens=15, reasoning_tokens=3)
    record = UsageRecord("anthropic", "m", 100, 1_000, usage)
    assert record.usage is usage
    assert (record.input_tokens, record.cache_read_tokens, record.cache_write_tokens) == (
        120,
        100,
        15,
    )
    assert record.output_tokens == 7 and record.ratio == 1.2
