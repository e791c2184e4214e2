"""A body sent on while it arrives: all of it goes upstream but its last bytes, which go
only when fitting lets it go as it came."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from windowfit.proxy._early import HELD_BYTES, EarlyForward


async def _feed(body: bytes, cuts: list[int], release: bool) -> tuple[bytes, bytes, bool]:
    """What the upstream had before fitting decided, and in the end; whether it ended."""
    got: list[bytes] = []
    ended = asyncio.Event()

    async def upstream(chunks: AsyncIterator[bytes | memoryview]) -> Any:
        async for chunk in chunks:
            got.append(bytes(chunk))
        ended.set()

    early = EarlyForward(lambda chunks: upstream(chunks), lambda first: True)
    at = 0
    for cut in [*sorted(cuts), len(body)]:
        early.feed(body[at:cut])
        at = max(at, cut)
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    before = b"".join(got)
    if release:
        early.release()
        await asyncio.wait_for(ended.wait(), 2)
    else:
        await early.abandon()
    await asyncio.sleep(0.01)
    return before, b"".join(got), ended.is_set()


@given(
    body=st.binary(min_size=1, max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=8),
    release=st.booleans(),
)
def test_all_but_the_last_bytes_go_before_fitting_decides(
    body: bytes, cuts: list[int], release: bool
) -> None:
    cuts = [c for c in cuts if c < len(body)]
    before, after, ended = asyncio.run(_feed(body, cuts, release))
    assert before == body[: max(0, len(body) - HELD_BYTES)]
    if release:
        assert after == body and ended
    else:
        assert after == before and not ended  # never the whole body
