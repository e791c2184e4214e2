"""The proxy's JSON: a fitted body written back holds exactly the values it was read with,
whichever writer (orjson, or the standard library for what orjson cannot write) wrote it."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowfit.proxy._json import dumps, loads

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)  # beyond orjson's 64 bits too
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # lone surrogates included
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, NaN equal to NaN, an int never equal to a float."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(value=_VALUES)
def test_what_is_written_back_reads_as_what_was_read(value: Any) -> None:
    raw = json.dumps(value).encode()  # what a client could send (NaN, big ints, \\ud800)
    read, fast = loads(raw)
    again, _ = loads(dumps(read, fast))
    assert _same(again, read) and _same(read, value)


@pytest.mark.parametrize(
    ("raw", "fast"),
    [
        (b'{"temperature": 0.5, "messages": []}', True),
        (b'{"n": NaN}', False),
        (b'{"n": -Infinity}', False),
        (b'{"n": 1e400}', False),  # read as inf: orjson would write null
        (b'{"id": 123456789012345678901234567890}', True),  # orjson refuses it; json writes it
    ],
)
def test_only_values_orjson_writes_exactly_take_the_fast_writer(raw: bytes, fast: bool) -> None:
    value, allowed = loads(raw)
    assert allowed is fast
    assert _same(json.loads(dumps(value, allowed)), json.loads(raw))


def test_an_ordinary_body_is_written_by_orjson_compactly_in_utf8() -> None:
    value, fast = loads(json.dumps({"messages": [{"role": "user", "content": "héllo"}]}).encode())
    assert dumps(value, fast) == orjson.dumps(value)
    assert dumps(value, fast) == '{"messages":[{"role":"user","content":"héllo"}]}'.encode()


def test_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        loads(b"{not json")
