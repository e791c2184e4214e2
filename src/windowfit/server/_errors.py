"""Error bodies in each provider's own shape, status by status.

Anthropic: ``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``
(types ``invalid_request_error`` 400, ``authentication_error`` 401, ``permission_error``
403, ``not_found_error`` 404, ``request_too_large`` 413, ``rate_limit_error`` 429,
``api_error`` 500, ``overloaded_error`` 529).

OpenAI: ``{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

__all__ = [
    "Provider",
    "ProviderError",
    "anthropic_error",
    "default_error",
    "openai_error",
    "retry_headers",
]

Provider = Literal["anthropic", "openai"]


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


def anthropic_error(
    status: int,
    type_: str,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    kind: str = "invalid_request",
) -> ProviderError:
    body = {"type": "error", "error": {"type": type_, "message": message}}
    return ProviderError(status, body, headers, kind=kind)


def openai_error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    *,
    kind: str = "invalid_request",
) -> ProviderError:
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return ProviderError(status, body, headers, kind=kind)


def retry_headers(seconds: float) -> dict[str, str]:
    """``retry-after`` as providers send it (whole seconds) and ``retry-after-ms``."""
    return {
        "retry-after": str(max(0, math.ceil(seconds))),
        "retry-after-ms": str(max(0, round(seconds * 1000))),
    }


_ANTHROPIC: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Injected invalid request (windowfit serve-sim fault)."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit "
        "(https://docs.anthropic.com/en/api/rate-limits); see the response headers for "
        "current usage. Please reduce the prompt length or the maximum tokens requested, "
        "or try again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}

_OPENAI: dict[int, tuple[str, str, str | None]] = {
    400: (
        "invalid_request_error",
        "Injected invalid request (windowfit serve-sim fault).",
        None,
    ),
    401: (
        "invalid_request_error",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_api_key",
    ),
    403: (
        "invalid_request_error",
        "You are not allowed to sample from this model",
        "unsupported_country_region_territory",
    ),
    404: (
        "invalid_request_error",
        "The model does not exist or you do not have access to it.",
        "model_not_found",
    ),
    413: ("invalid_request_error", "Request too large.", "request_too_large"),
    429: (
        "requests",
        "Rate limit reached for requests. Please try again in a moment. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        "rate_limit_exceeded",
    ),
    500: (
        "server_error",
        "The server had an error while processing your request. Sorry about that!",
        None,
    ),
    503: (
        "server_error",
        "The engine is currently overloaded, please try again later.",
        None,
    ),
}

_KINDS = {401: "authentication", 403: "permission", 404: "not_found", 429: "rate_limit"}


def _kind(status: int) -> str:
    if status in _KINDS:
        return _KINDS[status]
    if status in (503, 529):
        return "overloaded"
    return "server" if status >= 500 else "invalid_request"


def default_error(
    provider: Provider,
    status: int,
    *,
    type_: str | None = None,
    message: str | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """The error ``provider`` answers with for ``status`` (a fault, or a plain refusal)."""
    headers: dict[str, str] = {}
    if retry_after is None and status == 429:
        retry_after = 1.0  # both providers always say when to come back after a 429
    if retry_after is not None:
        headers = retry_headers(retry_after)
    kind = _kind(status)
    if provider == "anthropic":
        default_type, default_message = _ANTHROPIC.get(
            status,
            ("api_error", "Internal server error")
            if status >= 500
            else ("invalid_request_error", f"Request failed with status {status}."),
        )
        return anthropic_error(
            status, type_ or default_type, message or default_message, headers, kind=kind
        )
    otype, omessage, code = _OPENAI.get(
        status,
        ("server_error", _OPENAI[500][1], None)
        if status >= 500
        else ("invalid_request_error", f"Request failed with status {status}.", None),
    )
    return openai_error(status, message or omessage, type_ or otype, None, code, headers, kind=kind)
