"""A cheap key for what a JSON value holds, for caches that must be true to content.

Caches keyed by object identity go stale when a message is edited in place, and miss for
every freshly parsed copy. :func:`content_key` serialises the value with :mod:`marshal`
(C speed; format version 0, which writes every string the same way, interned or not, and
shares nothing between equal objects) and keeps only the length and hash of the bytes,
so that a cache holds no reference to the value and equal content gives an equal key.
"""

from __future__ import annotations

import marshal
from typing import Any

__all__ = ["content_key"]


def content_key(value: Any) -> tuple[int, int] | None:
    """``(length, hash)`` of ``value``'s serialisation; ``None`` for a value marshal cannot
    write (objects that are not plain dicts, lists, strings and numbers, or nested
    deeper than marshal allows), which callers then simply do not cache."""
    try:
        data = marshal.dumps(value, 0)
    except (ValueError, RecursionError):
        return None
    return len(data), hash(data)
