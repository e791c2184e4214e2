"""The package's promises about itself."""

from __future__ import annotations

import subprocess
import sys

import windowfit


def test_import_uses_the_standard_library_only() -> None:
    code = (
        "import sys, windowfit\n"
        "std = set(sys.stdlib_module_names)\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules} - std - {'windowfit'})\n"
        "print(','.join(m for m in bad if not m.startswith('_')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_public_names_exist() -> None:
    for name in windowfit.__all__:
        assert hasattr(windowfit, name), name


def test_wrap_stays_callable_after_its_module_is_imported_first() -> None:
    """``from windowfit.wrap import ...`` before ``windowfit.wrap(client)`` binds the
    package's ``wrap`` to the module; the call must still wrap (a fresh interpreter)."""
    code = (
        "from windowfit.wrap import WrapStats\n"
        "import windowfit, openai\n"
        "client = windowfit.wrap(openai.OpenAI(api_key='k', base_url='http://127.0.0.1:9/v1'))\n"
        "print(type(client.windowfit).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "WrapState"
