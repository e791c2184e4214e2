"""detect_format on messages whose ``type`` is not a string (found by the fitter's fuzz)."""

from __future__ import annotations

from typing import Any

import pytest

from windowfit.formats import detect_format


@pytest.mark.parametrize("kind", [{"nested": 1}, ["message"], 3, None])
def test_a_type_that_is_not_a_string_is_not_a_format(kind: Any) -> None:
    assert detect_format([{"role": "user", "type": kind, "content": "hi"}]) == detect_format(
        [{"role": "user", "content": "hi"}]
    )
