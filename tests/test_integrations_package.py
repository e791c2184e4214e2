"""windowfit.integrations: frameworks are imported only by their own module, and a
missing framework is a MissingExtraError naming the extra."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = {
    "langchain": ("langchain", "langchain"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "openai_agents": ("agents", "openai-agents"),
    "litellm": ("litellm", "litellm"),
    "google_adk": ("google.adk", "google-adk"),
}


def test_the_package_imports_no_framework() -> None:
    code = (
        "import sys, windowfit, windowfit.integrations, windowfit.integrations._shaper; "
        f"print(sorted(m for m in {sorted(set(v[0] for v in MODULES.values()))!r} "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_missing_framework_names_the_extra(module: str) -> None:
    package, extra = MODULES[module]
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "try:\n"
        f"    import windowfit.integrations.{module}\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("MissingExtraError"), out.stdout + out.stderr
    assert f"windowfit[{extra}]" in out.stdout
