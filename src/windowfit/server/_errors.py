"""An error answer, whatever the API: its status, JSON body, headers and kind.

The bodies themselves are each API's own and live in its door module
(``_anthropic.error``, ``_openai.error``, ``_gemini.error``); what they share is here.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ProviderError", "retry_headers", "status_kind"]


class ProviderError(Exception):
    """An answer that is an error: status, JSON body and extra headers."""

    def __init__(
        self,
        status: int,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
        *,
        kind: str = "invalid_request",
    ) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.kind = kind
        #: When set, the server logs this one line for the answer (bad input it wants seen).
        self.log_line: str | None = None


def retry_headers(seconds: float | None, status: int) -> dict[str, str]:
    """``retry-after`` as providers send it (whole seconds) and ``retry-after-ms``; a 429
    always says when to come back (after a second unless told)."""
    if seconds is None and status == 429:
        seconds = 1.0
    if seconds is None:
        return {}
    return {
        "retry-after": str(max(0, math.ceil(seconds))),
        "retry-after-ms": str(max(0, round(seconds * 1000))),
    }


_KINDS = {401: "authentication", 403: "permission", 404: "not_found", 429: "rate_limit"}


def status_kind(status: int) -> str:
    """The kind of refusal a status is, as the server's counters name it."""
    if status in _KINDS:
        return _KINDS[status]
    if status in (503, 529):
        return "overloaded"
    return "server" if status >= 500 else "invalid_request"
