"""Two minimal proxies, the floor windowfit's proxy is measured against (issue 12).

Run:  .venv/bin/python benchmarks/proxy_floor.py asgi  --upstream URL [--port 0]
      .venv/bin/python benchmarks/proxy_floor.py relay --upstream URL [--port 0]

Each prints ``http://127.0.0.1:PORT`` once it listens (``benchmarks/proxy.py --floor``
starts both and sends them the same traffic as serve-sim directly and windowfit's proxy):

* ``asgi``: a pass-through HTTP proxy on the stack windowfit's proxy uses (uvicorn with
  the same HTTP implementation and event loop, ``--http auto``: httptools where
  installed; a plain ASGI callable; one aiohttp pool; freed memory kept as
  ``windowfit proxy`` keeps it, ``--keep-freed-mb``):
  the request body streamed upstream chunk by chunk as it arrives, the answer streamed
  back chunk by chunk, headers passed on (hop-by-hop ones aside). No parse, no fit, no
  metrics: what any Python proxy on this stack pays for a request.
* ``relay``: a raw asyncio byte relay (``asyncio.Protocol``): each client connection gets
  one upstream connection, and bytes are copied both ways as they arrive, with the
  kernel's back-pressure (a side whose buffer fills pauses the other's reading). No HTTP
  at all: the least a Python process between client and upstream can add.

Neither is part of windowfit; they exist to be measured.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, cast
from urllib.parse import urlsplit

from windowfit.proxy._headers import _HOP_BY_HOP as HOP_BY_HOP

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]

# The proxy's own hop-by-hop set, and the client's host (the upstream gets its own).
_HOP_BY_HOP = HOP_BY_HOP | {b"host"}


# --------------------------------------------------------------------------- ASGI


class PassThrough:
    """The ASGI pass-through proxy (module docstring)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.session: Any = None

    async def __call__(
        self,
        scope: Scope,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    import aiohttp

                    self.session = aiohttp.ClientSession(
                        connector=aiohttp.TCPConnector(limit=256, keepalive_timeout=4.0),
                        skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept"),
                        auto_decompress=False,
                        cookie_jar=aiohttp.DummyCookieJar(),
                    )
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await self.session.close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        from yarl import URL

        headers = [
            (n.decode("latin-1"), v.decode("latin-1"))
            for n, v in scope["headers"]
            if n not in _HOP_BY_HOP
        ]

        async def body() -> AsyncIterator[bytes]:
            while True:
                message = await receive()
                chunk = message.get("body", b"")
                if chunk:
                    yield chunk
                if not message.get("more_body", False):
                    return

        url = self.upstream + scope["path"]
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        async with self.session.request(
            scope["method"],
            URL(url, encoded=True),
            headers=headers,
            data=body(),
            allow_redirects=False,
        ) as response:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status,
                    "headers": [
                        (n.lower(), v)
                        for n, v in response.raw_headers
                        if n.lower() not in _HOP_BY_HOP
                    ],
                }
            )
            while True:
                chunk = await response.content.readany()
                if not chunk:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def serve_asgi(upstream: str, host: str, port: int, http: str = "auto") -> None:
    import uvicorn

    from windowfit.proxy._run import KEEP_ALIVE_SECONDS

    sock = socket.socket()
    sock.bind((host, port))
    sock.listen(2048)  # connections wait in the backlog until uvicorn serves
    config = uvicorn.Config(
        PassThrough(upstream),
        log_level="warning",
        lifespan="on",
        http=http,  # auto: as windowfit's proxy (proxy/_run.py); the same loop choice
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    print(f"asgi pass-through on http://{host}:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


# --------------------------------------------------------------------------- raw relay


class _Side(asyncio.Protocol):
    """One end of a relayed connection: what it receives is written to its peer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.pending: list[bytes] = []  # received before the peer was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass of it

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.pending.append(data)
        else:
            peer.transport.write(data)

    def eof_received(self) -> bool:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    # back-pressure: while this side cannot write, its peer stops reading
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _ClientSide(_Side):
    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__()
        self.target = target

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.connecting = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, upstream = await loop.create_connection(_Side, *self.target)
        except OSError:
            if self.transport is not None:
                self.transport.close()
            return
        upstream.peer, self.peer = self, upstream
        assert upstream.transport is not None
        for data in self.pending:
            upstream.transport.write(data)
        self.pending.clear()


async def _relay(upstream: str, host: str, port: int) -> None:
    parts = urlsplit(upstream)
    target = (parts.hostname or "127.0.0.1", parts.port or 80)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _ClientSide(target), host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"raw relay on http://{host}:{bound}", flush=True)
    async with server:
        await server.serve_forever()


def serve_relay(upstream: str, host: str, port: int) -> None:
    try:  # the event loop uvicorn picks ("auto"), so that the floors compare alike
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(_relay(upstream, host, port))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["asgi", "relay"])
    parser.add_argument("--upstream", required=True, help="http://HOST:PORT")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--http", default="auto", help="asgi: uvicorn's HTTP implementation")
    parser.add_argument(
        "--keep-freed-mb", type=int, default=64, help="as windowfit proxy's (0: glibc's default)"
    )
    args = parser.parse_args(argv)
    from windowfit.proxy._malloc import keep_freed_memory

    keep_freed_memory(args.keep_freed_mb * 1024 * 1024)
    if args.kind == "asgi":
        serve_asgi(args.upstream, args.host, args.port, args.http)
    else:
        serve_relay(args.upstream, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
