"""Forwarding a large request body upstream while it arrives, all but its tail.

Receiving 1 MB from the client and sending it on are the largest steps of a proxied
200k-token request, and done one after the other they add up. So for a large body with
a declared length, the upstream request starts as soon as the head has arrived and the
body is sent on as it comes, all but its last :data:`HELD_BYTES` bytes, which are held
back. When the body is complete and fitting has decided:

* **unchanged** (stage 0, or a body windowfit cannot read and forwards as sent): the
  held-back tail is sent and the upstream's answer is the answer;
* **changed** (fitted, or refused): the upstream request is abandoned, its connection
  closed with the body incomplete, and the fitted body goes out on a new request.

So the upstream never receives the whole of a body that fitting changed: what it got
of it stops short of its declared length, and an HTTP server does not act on a request
whose declared length never arrived. (Holding back only a few bytes rather than the
last chunk received, up to a few hundred KB, means that what follows the fit on the
path to the upstream's answer is a few bytes' write, not the upload of that chunk.)

An abandoned request costs the upload of most of a body for nothing, so it is started
only where fitting will most likely leave the body as it is: the model is known (named
as the body's first field, as Claude Code and the benchmark write it; else the model of
the route's last fitted request, since the Python SDKs write ``model`` after
``messages``), and the declared length is at most :data:`EARLY_BYTES_PER_TOKEN` bytes
per token of that model's budget
(JSON of prose and code runs at about 4 bytes per token; a conversation being fitted is
beyond its budget, most often far beyond). Anything else is received whole first, as
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable

from ._upstream import UpstreamResponse

__all__ = [
    "EARLY_BYTES_PER_TOKEN",
    "EARLY_MIN_BYTES",
    "HELD_BYTES",
    "EarlyForward",
    "leading_model",
]

#: Bodies declared at least this long are forwarded as they arrive (smaller ones are
#: received whole first: the overlap would win less than the extra task costs).
EARLY_MIN_BYTES = 256 * 1024

#: A body is forwarded as it arrives when its declared length is at most this many bytes
#: per token of its model's budget (module docstring).
EARLY_BYTES_PER_TOKEN = 3

#: How many bytes at the end of the body are held back until fitting has decided.
HELD_BYTES = 16

_LEADING_MODEL = re.compile(rb'\s*\{\s*"model"\s*:\s*"([A-Za-z0-9._:/@-]{1,200})"')


def leading_model(chunk: bytes) -> str | None:
    """The model a JSON body names as its first field (``None``: not there)."""
    found = _LEADING_MODEL.match(chunk)
    return found.group(1).decode("ascii") if found else None


class EarlyForward:
    """One upstream request whose body may be fed as the client's arrives.

    ``wanted(first_chunk)``: whether to start it (see the module docstring).
    ``open(chunks)``: starts the upstream request with a body read from ``chunks``
    (an async iterator) and returns its answer. :meth:`feed` each chunk received; when
    :attr:`answer` is set, either :meth:`release` (the body goes out as received) and
    await :attr:`answer`, or :meth:`abandon`."""

    def __init__(
        self,
        open: Callable[[AsyncIterator[bytes | memoryview]], Awaitable[UpstreamResponse]],
        wanted: Callable[[bytes], bool],
    ) -> None:
        self._open = open
        self._wanted: Callable[[bytes], bool] | None = wanted
        self._queue: asyncio.Queue[bytes | memoryview | None] = asyncio.Queue()
        self._held = b""
        #: Whether the body went upstream as received (it may not be abandoned then).
        self.released = False
        #: The upstream's answer, once the request was started (``None``: it was not).
        self.answer: asyncio.Future[UpstreamResponse] | None = None
        #: Body bytes handed to the upstream connection so far, and when released.
        self.sent = 0
        self.sent_before_end = 0

    async def _body(self) -> AsyncIterator[bytes | memoryview]:
        while True:
            chunk = await self._queue.get()
            if chunk is None:
                return
            yield chunk
            self.sent += len(chunk)

    def feed(self, chunk: bytes) -> None:
        """A chunk of the body as received: it goes upstream now, all but the body's
        last :data:`HELD_BYTES` bytes so far."""
        if not chunk:
            return
        if self.answer is None:
            wanted, self._wanted = self._wanted, None  # decided on the first chunk only
            if wanted is None or not wanted(chunk):
                return
            self.answer = asyncio.ensure_future(self._open(self._body()))
        if len(chunk) > HELD_BYTES:  # all but its end goes now, the end is held back
            if self._held:
                self._queue.put_nowait(self._held)
            self._queue.put_nowait(memoryview(chunk)[:-HELD_BYTES])
            self._held = chunk[-HELD_BYTES:]
            return
        held = self._held + chunk  # a short chunk: the held bytes and it, held to HELD_BYTES
        if len(held) > HELD_BYTES:
            self._queue.put_nowait(held[:-HELD_BYTES])
            held = held[-HELD_BYTES:]
        self._held = held

    def release(self) -> None:
        """The body is to go as received: send the held-back tail and end it."""
        if self.answer is None:
            return
        self.released = True
        self.sent_before_end = self.sent
        if self._held:
            self._queue.put_nowait(self._held)
            self._held = b""
        self._queue.put_nowait(None)

    async def abandon(self) -> None:
        """Drop the upstream request without its tail (its connection is closed); a
        second call does nothing more."""
        assert not self.released, "a released body has gone upstream whole"
        self._held = b""
        self._wanted = None
        if self.answer is None:
            return
        self.answer.cancel()
        with contextlib.suppress(BaseException):
            response = await self.answer
            response.close(complete=False)  # it answered an incomplete body: close it
