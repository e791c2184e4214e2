"""The real tokenizers the profile tests check estimates against, loaded once per test run.

They come from PyPI wheels (``make setup`` installs them); where one is missing, the test
that asks for it is skipped with the reason, rather than failing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pytest

from windowfit.errors import MissingExtraError, TokenizerError
from windowfit.tokenizers import BACKEND_OF_FAMILY, FAMILY_BACKENDS
from windowfit.tokens import Estimator

#: Every real tokenizer windowfit ships a profile for.
BACKENDS = FAMILY_BACKENDS

#: Each family and the real tokenizer it is checked against (Claude 3+ has no public
#: tokenizer: its profile is checked against the legacy one, which it must not be under).
CHECKED_ON = BACKEND_OF_FAMILY


@functools.cache
def real_backend(name: str) -> Estimator:
    """The real tokenizer ``name``, or a skip saying why it cannot be had."""
    from windowfit.tokenizers import load_backend

    try:
        return load_backend(name)
    except MissingExtraError as exc:
        pytest.skip(f"{name}: {exc}")
    except TokenizerError as exc:
        pytest.skip(f"{name}: tokenizer file not installed ({exc})")


def largest_real(text: str, backends: Sequence[str] = BACKENDS) -> int:
    """The largest count of ``text`` by the real tokenizers ``backends`` (all by default):
    what ``conservative`` must not be under."""
    return max(real_backend(name).estimate(text) for name in backends)
