"""What the app needs to know about one API's server side: a :class:`Door`.

Each API's module (``_anthropic``, ``_openai``, ``_responses``, ``_gemini``) defines one
``DOOR``; the app asks it instead of branching on a provider's name: which header
carries the request id (and whether the error body repeats it), how the caller's key is
sent and refused, the API's error bodies, its refusal of a prompt too long, and the
handler that reads a request and writes the answer in its shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..simcore import SimCore, WindowRule
from ._errors import ProviderError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..simcore import Fault
    from ._stats import RequestLog

__all__ = ["Call", "Door", "ErrorMaker", "Http"]


class ErrorMaker(Protocol):
    """An API's error for ``status``: its default type and wording unless given."""

    def __call__(
        self,
        status: int,
        message: str | None = None,
        type_: str | None = None,
        *,
        retry_after: float | None = None,
        kind: str | None = None,
    ) -> ProviderError: ...


@dataclass
class Call:
    """One provider request on its way through the app: the parsed body, the caller's
    key, the fault taken for it, its log entry, its route and the HTTP request."""

    data: Any
    key: str
    fault: Fault | None
    entry: RequestLog
    route: str
    request: Request


@dataclass(frozen=True)
class Http:
    """The app's HTTP pieces a door answers with (the app makes one; the door modules
    need no web framework to be imported). ``event_stream(frames, headers, fault,
    fault_frame)`` sends server-sent events with the fault, if any, after its
    ``after_events`` events; ``dropped()`` cuts the connection after the headers;
    ``late_fault(door, fault, stream)`` serves at once, to a request that is not streamed,
    a fault meant for a stream's middle; ``fault_error(door, fault)`` is a fault's error;
    ``stream_fault(door, call)`` the error a streamed answer carries after its
    ``after_events`` events (``None`` for none, or for a drop), noted in the call's log."""

    json: Callable[..., Response]
    sse: Callable[[str | None, Any], bytes]
    event_stream: Callable[..., Response]
    dropped: Callable[[], Response]
    late_fault: Callable[[Door, Fault | None, bool], Response | None]
    fault_error: Callable[[Door, Fault], ProviderError]
    stream_fault: Callable[[Door, Call], ProviderError | None]
    request_id: Callable[[Door], dict[str, str]]
    streaming: Callable[..., Response]


@dataclass(frozen=True)
class Door:
    """One API's server side (module docstring).

    ``error`` makes the API's error for a status (faults, 413, 500); ``invalid`` its 400
    for a request it cannot read, ``bad_json`` the words of that 400 for a body that is
    not JSON; ``key`` reads the caller's key from the request and refuses a missing or
    unknown one when keys are configured; ``window`` is its refusal of a prompt too long;
    ``serve`` answers a call whose key and body were read (``state`` is the app's
    ``SimState``).
    ``request_id_header`` names the header of the request id, which the error body
    repeats when ``request_id_in_body``; ``recognises`` tells from a request's headers
    that a client of this API sent it (for the 404 of an unknown path).
    """

    name: str
    request_id_header: str
    error: ErrorMaker
    invalid: Callable[[str], ProviderError]
    bad_json: str
    key: Callable[[Request, tuple[str, ...]], str]
    window: WindowRule
    serve: Callable[[Any, Call, Http], Awaitable[Response]]
    request_id_in_body: bool = False
    recognises: Callable[[Mapping[str, str]], bool] = lambda headers: False


def bearer(value: str | None) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header, if that is what it holds."""
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return None


def mask(key: str) -> str:
    """A key as an error may quote it: its first three and last four characters."""
    return f"{key[:3]}{'*' * max(3, len(key) - 7)}{key[-4:]}" if len(key) > 8 else "***"


def late_drop(http: Http, door: Door, call: Call, stream: bool) -> Response | None:
    """A fault meant for a stream's middle, served now to a request that is not
    streamed (noted in the call's log as dropped), or ``None``."""
    late = http.late_fault(door, call.fault, stream)
    if late is not None:
        call.entry.error = "dropped"
    return late


def refuse_if_too_long(
    core: SimCore, rule: WindowRule, tokens: int, max_tokens: int | None
) -> None:
    """Raise the API's refusal (``rule``) of an input of ``tokens`` that does not fit."""
    refusal = core.refusal(rule, tokens, max_tokens)
    if refusal is not None:
        raise ProviderError(*refusal, kind="context_overflow")
