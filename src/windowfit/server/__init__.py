"""A local provider-compatible server for tests and demonstrations: ``windowfit serve-sim``.

It speaks the Anthropic Messages API (``POST /v1/messages``,
``POST /v1/messages/count_tokens``) and OpenAI Chat Completions
(``POST /v1/chat/completions``) and Gemini ``generateContent``
(``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``, also
under ``/v1``; see ``_gemini``), answers with a scripted model, and behaves like the
real services where windowfit cares:

* it counts every request with a real tokenizer and refuses one that does not fit the
  context window with the provider's own 400 ("prompt is too long: N tokens > M maximum";
  ``context_length_exceeded``);
* it answers 401 for a missing or unknown key when keys are configured, 413 for a body
  over the limit, and 400 in the provider's wording for bad JSON, missing fields, wrong
  types and broken tool pairing; never a 500 for bad input;
* its usage models each provider's prefix cache (``cache_read_input_tokens`` /
  ``cache_creation_input_tokens`` at ``cache_control`` breakpoints; OpenAI's automatic
  ``prompt_tokens_details.cached_tokens``);
* it streams in each provider's SSE format when asked (``stream: true``);
* it serves faults on demand (:class:`Fault`: 429 with ``retry-after``, Anthropic's 529
  ``overloaded_error``, 500, delays, dropped connections, errors in the middle of a
  stream), queued with ``--fault`` or ``POST /_sim/faults``;
* it reports its counters at ``GET /_sim/stats`` (``requests``, per route and status,
  tokens counted, cache reads and writes, and the last requests with their sizes).

Admin routes: ``GET /_sim/stats``, ``POST /_sim/reset``, ``GET|POST|DELETE
/_sim/faults``, ``GET /_sim/health``; when keys are configured they need one too
(``x-api-key`` or ``Authorization: Bearer``), so that nobody who can reach the port can
inject faults. Bodies nested more than 128 levels get a 400; the prefix cache and the
request log are bounded in bytes. The server binds to 127.0.0.1 by default.

Counting, the window check, the prefix cache, the scripted model and the faults are the
simulator's core (:mod:`windowfit.simcore`), which the in-process model of
:mod:`windowfit.sim` uses too; each API's module here is only its door (reading requests,
writing answers and errors in the API's shape).

Importing this package needs only the standard library; starlette and uvicorn (the
``server`` extra) are imported when a server is created.
"""

from __future__ import annotations

from ..simcore import ROUTES, Fault, ScriptedTool, fault_from_json, parse_fault, parse_scripted_tool
from ._config import DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_BODY_BYTES, SimConfig
from ._run import SimServer, create_app, is_loopback

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_BODY_BYTES",
    "ROUTES",
    "Fault",
    "ScriptedTool",
    "SimConfig",
    "SimServer",
    "create_app",
    "fault_from_json",
    "is_loopback",
    "parse_fault",
    "parse_scripted_tool",
]
