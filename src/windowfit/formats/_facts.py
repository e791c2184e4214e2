"""What fitting needs to know of one provider message, read straight from its JSON.

Converting every message to the neutral model (:mod:`windowfit.messages`) on every
request costs more than deciding what to send: a proxy sees each request as freshly
parsed JSON. So each format has a *scanner* that walks the provider dict once, checks it
strictly (every problem is a :class:`~windowfit.errors.ConversationError` naming the
message and field) and returns :class:`Facts`: the message's size and the few things
fitting reasons about. Neutral messages are built only for the messages fitting changes.

A scanner's sizes are exactly those of :class:`windowfit.sizing.Sizer` on the neutral
form (tested as a property), so both paths agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from ..errors import ConversationError

__all__ = [
    "CARRIER",
    "ROLE",
    "TOKENS",
    "USER_TOKENS",
    "FactTuple",
    "Facts",
    "describe",
    "json_text",
]


class Facts(NamedTuple):
    """One message as fitting sees it. A tuple, so that comparing two conversations'
    facts (to reuse what was decided for the first) runs at C speed.

    ``results`` holds ``(call_id, tokens, cleared_tokens)`` per tool result, in order.
    ``carrier``: the message answers tool calls (an OpenAI ``tool`` message, an Anthropic
    user message with ``tool_result`` blocks). ``user_input``: it carries user input
    other than tool results (text typed while tools ran, an image, a loaded skill).
    ``user_tokens``: its size with the tool results left out, which is what is sent when
    its results' round is dropped but its user input is kept.
    """

    role: str
    tokens: int
    calls: tuple[str, ...]
    results: tuple[tuple[str, int, int], ...]
    carrier: bool
    user_input: bool
    user_tokens: int


#: A message's facts as fitting keeps them: a plain tuple of :class:`Facts`' fields, in
#: their order (``Facts(*t)`` names them). The scanners of a whole conversation make
#: these: a cold fit makes and reads thousands, and a tuple subclass costs a call to make
#: and a slow path to unpack or index. Read by position with the names below.
FactTuple = tuple[str, int, tuple[str, ...], tuple[tuple[str, int, int], ...], bool, bool, int]

ROLE: Final = 0
TOKENS: Final = 1
CARRIER: Final = 4
USER_TOKENS: Final = 6


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _c_encoder() -> Any:
    """The C encoder behind ``_ENCODER``, made once: ``JSONEncoder.encode`` builds a new
    one at every call, which costs more than encoding a small tool input. Without
    circular-reference markers (so it keeps no state between calls); a cycle then ends in
    the RecursionError that :func:`json_text` reports."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C encoder
        return None
    return make(
        None,
        _ENCODER.default,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        False,
        False,
        False,
    )


_C_ENCODER = _c_encoder()


def json_text(value: Any, index: int | None, field: str) -> str:
    """``value`` as the compact JSON text a provider receives (and counts).

    Values that are not JSON (sets, bytes, NaN, circular or absurdly deep structures,
    integers too long to print) are a :class:`ConversationError` for the field, not the
    encoder's own exception: the provider could not be sent them either.
    """
    try:
        if type(value) is str:
            return _ENCODER.encode(value)
        if _C_ENCODER is not None:
            return "".join(_C_ENCODER(value, 0))
        return _ENCODER.encode(value)
    except RecursionError:
        raise ConversationError("is nested too deeply to send", index=index, field=field) from None
    except (TypeError, ValueError) as exc:
        raise ConversationError(f"is not JSON: {exc}", index=index, field=field) from None


def describe(value: Any) -> str:
    """A value's JSON type name, for error messages (``a string``, ``an object``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a Python {type(value).__name__} (not JSON)"
