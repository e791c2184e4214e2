"""The proxy's upstream HTTP client: one aiohttp connection pool, errors in two kinds.

Why aiohttp and not httpx: sending one 1 MB request and reading a stream of a dozen
events back costs httpx/httpcore about 3.5 ms of CPU, aiohttp (its C parser, writes
straight to the transport) about 1.6 ms, and the proxy does it for every request of an
agent whose conversation is that large (benchmarks/RESULTS.md, "The proxy"). Everything
the proxy needs from the client is here, so that ``_app`` reads as the request's flow:

* requests go out with the client's headers as given, plus only ``host`` and
  ``content-length`` (no ``user-agent``, ``accept-encoding`` or ``content-type`` of the
  proxy's own, so a passed-through answer is encoded only as the client asked);
* answers are read as they arrive, decoded (fitted routes, whose usage the proxy reads)
  or as raw bytes (pass-through);
* failures are :class:`UpstreamTimeout` (connect or read timeout: a 504) or
  :class:`UpstreamBroken` (refused, reset, cut mid-body: a 502, or a cut stream);
* idle pooled connections are dropped after :data:`IDLE_SECONDS`, sooner than servers
  close theirs (uvicorn: 5 s), so a request is never written on a connection the
  server is closing that instant (aiohttp retries only idempotent methods).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import aiohttp
from yarl import URL

__all__ = [
    "IDLE_SECONDS",
    "Upstream",
    "UpstreamBroken",
    "UpstreamError",
    "UpstreamResponse",
    "UpstreamTimeout",
]

#: Seconds an idle upstream connection is kept for the next request.
IDLE_SECONDS = 4.0

_NO_AUTO_HEADERS = frozenset({"User-Agent", "Accept-Encoding", "Accept", "Content-Type"})


class UpstreamError(Exception):
    """The upstream could not be reached, did not answer in time, or broke off."""


class UpstreamTimeout(UpstreamError):
    """Connecting or waiting for the next bytes took longer than configured."""


class UpstreamBroken(UpstreamError):
    """Refused, reset or closed before the answer was complete."""


def _translated(exc: BaseException) -> UpstreamError:
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return UpstreamTimeout(type(exc).__name__)
    return UpstreamBroken(type(exc).__name__)


_FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class UpstreamResponse:
    """An upstream answer whose head has arrived; its body is read by the caller."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status: int = response.status
        self.raw_headers: tuple[tuple[bytes, bytes], ...] = response.raw_headers

    def header(self, name: str) -> str:
        """One header's value (``""`` when absent)."""
        return self._response.headers.get(name, "")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (raises :class:`UpstreamError` when cut)."""
        content = self._response.content
        try:
            while True:
                chunk = await content.readany()
                if not chunk:
                    return
                yield chunk
        except _FAILURES as exc:
            raise _translated(exc) from exc

    async def read(self, limit: int | None = None) -> bytes:
        """The body whole, or (``limit``) its first chunks once past ``limit`` bytes."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            parts.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                break
        return b"".join(parts)

    def close(self, *, complete: bool) -> None:
        """Done with the answer: its connection goes back to the pool when the body was
        read to its end (``complete``), else it is closed (the upstream sees the
        request abandoned, as when the client left)."""
        if complete:
            self._response.release()
        else:
            self._response.close()


class Upstream:
    """The one pool of upstream connections (made in the serving event loop)."""

    def __init__(self, connect_timeout: float, read_timeout: float) -> None:
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_read=read_timeout
        )
        self._session: aiohttp.ClientSession | None = None

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=256, limit_per_host=0, keepalive_timeout=IDLE_SECONDS, ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                skip_auto_headers=_NO_AUTO_HEADERS,
                trust_env=False,
                auto_decompress=True,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    def start(self) -> None:
        """Make the pool now (at startup: its TLS context is not made on a request)."""
        self._open_session()

    async def open(
        self,
        method: str,
        url: str,
        headers: Iterable[tuple[bytes, bytes]],
        body: bytes | AsyncIterator[bytes | memoryview] | None,
        *,
        decoded: bool,
    ) -> UpstreamResponse:
        """Send the request; the answer once its head has arrived. ``body``: bytes, or
        chunks as they come (``headers`` then give its ``content-length``). ``decoded``:
        the answer is read decoded (``content-encoding`` undone), else as sent."""
        session = self._open_session()
        given = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]
        try:
            response = await session.request(
                method,
                URL(url, encoded=True),  # the path and query exactly as the client sent them
                headers=given,
                data=body,
                allow_redirects=False,
                auto_decompress=decoded,
                compress=None,
            )
        except _FAILURES as exc:
            raise _translated(exc) from exc
        return UpstreamResponse(response)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
