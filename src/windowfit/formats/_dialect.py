"""What a whole provider API request and response look like: one dialect per wire format.

A :class:`~windowfit.formats._common.FormatSpec` knows a format's *messages*. A
:class:`Dialect` knows the rest of the wire format around them, so that the proxy, the
wrappers, the simulator and replay ask the dialect instead of branching on a provider's
name: where the messages, system prompt and tools sit in a request body, the field that
limits the output, how usage and stop reasons are reported (whole responses and streamed
events), and the body of the error the API returns for a prompt that is too long.

Each format module that speaks a whole API defines one ``DIALECT``; ``DIALECTS`` in
:mod:`windowfit.formats` maps their names. Everything here is pure: functions of JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._common import FormatSpec

__all__ = ["Dialect", "RequestParts", "Usage"]


@dataclass(frozen=True)
class Usage:
    """The tokens of one answered request, in one shape for every provider.

    ``input_tokens`` is the *whole* input the provider counted, cached parts included
    (Anthropic: ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``;
    OpenAI Chat: ``prompt_tokens``; Responses: ``input_tokens``; Gemini:
    ``promptTokenCount``). ``cache_read_tokens`` and ``cache_write_tokens`` are the parts
    of it read from and written to the prompt cache; ``reasoning_tokens`` the part of
    ``output_tokens`` spent on reasoning where the provider says so.
    """

    input_tokens: int
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens neither read from nor written to the prompt cache."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens


@dataclass(frozen=True)
class RequestParts:
    """The parts of a request body that fitting reads (the body itself is not copied).

    ``messages`` is the list fitting works on, in the format's own JSON; ``system`` and
    ``tools`` are as the body holds them (``None`` when absent); ``max_output_tokens`` is
    the value of the dialect's output-limit field, if set.
    """

    messages: list[Any]
    system: Any = None
    tools: Any = None
    model: str | None = None
    max_output_tokens: int | None = None
    stream: bool = False


@dataclass(frozen=True)
class Dialect:
    """Everything about one provider API's wire format (see the module docstring).

    ``read_request`` raises :class:`~windowfit.errors.ConversationError` naming the field
    for a body it cannot read; ``write_request`` returns a shallow copy of ``body`` with
    the fitted messages (and system prompt) put back where the API expects them, every
    other field kept in its place. ``usage`` reads a whole response's JSON and
    ``stream_usage`` one streamed event's JSON (``None`` where they carry none).
    ``overflow_error`` gives the HTTP status and JSON body the API returns when a prompt
    of ``tokens`` exceeds ``limit`` (so simulators and the proxy answer in the API's own
    words), and ``is_overflow`` recognises such a body.
    """

    name: str
    format: FormatSpec
    #: The request field that limits the output (``max_tokens``, ``max_output_tokens``...).
    output_limit_field: str
    read_request: Callable[[Mapping[str, Any]], RequestParts]
    write_request: Callable[[Mapping[str, Any], list[Any], Any], dict[str, Any]]
    usage: Callable[[Any], Usage | None]
    stream_usage: Callable[[Any], Usage | None]
    overflow_error: Callable[[int, int], tuple[int, dict[str, Any]]]
    is_overflow: Callable[[int, Any], bool]

    # -- what a proxy in front of the API needs (issue 12) ------------------------------
    #: The provider whose hosts serve this API (``anthropic``, ``openai``, ``gemini``):
    #: the dialects of one provider share its upstream and its error shape.
    provider: str = ""
    #: The error body the API answers with for an HTTP ``status`` of its own and a
    #: ``message`` (what a proxy says itself: 413, 502, 504), in the API's shape.
    status_error: Callable[[int, str], dict[str, Any]] = lambda status, message: {
        "error": {"code": status, "message": message}
    }

    # -- the official Python SDK's side, for windowfit.wrap ---------------------------
    #: The package of the API's official Python SDK (``""``: none), whose clients
    #: :func:`windowfit.wrap` recognises by the module their type comes from.
    sdk_package: str = ""
    #: Where on such a client the API's requests are sent: the attribute path of the
    #: resource (``"chat.completions"``), whose ``create``/``stream`` wrap fits.
    sdk_resource: str = ""
    #: Whether the API takes prompt-cache breakpoints (``cache_control``) on content
    #: blocks, placed by ``wrap(..., cache_control=True)``.
    cache_breakpoints: bool = False
    #: The resource's free token-counting method (``""``: the API has none), which
    #: ``wrap(..., verify="count_tokens")`` asks when an estimate lands near the budget,
    #: and the request fields it takes.
    count_method: str = ""
    count_fields: tuple[str, ...] = ()
