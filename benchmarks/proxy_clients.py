"""CPU of one upstream request as the proxy makes it, by HTTP client: httpx, aiohttp, h11.

Run:  .venv/bin/python benchmarks/proxy_clients.py [--requests 60] [--mb 1]

Each client sends a POST of about 1 MB (a JSON body) to a minimal asyncio HTTP/1.1 server
on loopback (run as a separate process, so its work is not counted) and reads back a
streamed answer of 12 server-sent events, as the proxy does for a 200k-token request;
the figure is the client thread's CPU time (``time.thread_time``) per request after 5
warm-ups. benchmarks/RESULTS.md ("The proxy's own latency") has the figures this chose
the proxy's upstream client by. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
    b'"usage":{"input_tokens":200000,"output_tokens":1}}}\n\n'
)
_DELTAS = b"".join(
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"word %d "}}\n\n' % i
    for i in range(10)
)
_END = (
    b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":10}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read each request (by its content-length) and answer it with a chunked stream."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            for part in (_START, _DELTAS, _END):
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _serve(port: int) -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", port)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


async def _measure(one: Callable[[], Awaitable[None]], requests: int) -> float:
    for _ in range(5):
        await one()
    started = time.thread_time()
    for _ in range(requests):
        await one()
    return (time.thread_time() - started) / requests * 1000


async def with_httpx(url: str, body: bytes, requests: int) -> float:
    import httpx

    async with httpx.AsyncClient(trust_env=False) as client:

        async def one() -> None:
            request = client.build_request("POST", url, headers=HEADERS, content=body)
            response = await client.send(request, stream=True)
            async for _ in response.aiter_bytes():
                pass
            await response.aclose()

        return await _measure(one, requests)


async def with_aiohttp(url: str, body: bytes, requests: int) -> float:
    import aiohttp

    async with aiohttp.ClientSession() as session:

        async def one() -> None:
            async with session.post(url, data=body, headers=HEADERS) as response:
                async for _ in response.content.iter_any():
                    pass

        return await _measure(one, requests)


async def with_h11(url: str, body: bytes, requests: int) -> float:
    import h11

    host, port = url.split("//")[1].split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    conn = h11.Connection(h11.CLIENT)
    fields = [("host", host), ("content-length", str(len(body))), *HEADERS.items()]

    async def one() -> None:
        writer.write(conn.send(h11.Request(method="POST", target="/v1/messages", headers=fields)))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(65536))
            elif isinstance(event, h11.EndOfMessage):
                break
        conn.start_next_cycle()

    try:
        return await _measure(one, requests)
    finally:
        writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--mb", type=float, default=1.0, help="request body size")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        asyncio.run(_serve(args.serve))
        return 0
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1/messages"
        words = max(1, int(args.mb * 1_000_000 / 5))
        body = json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "word " * words}]}
        )
        print(f"| client | CPU ms per request ({len(body):,}-byte POST, 12-event stream back) |")
        print("|---|---:|")
        for name, run in (("httpx", with_httpx), ("aiohttp", with_aiohttp), ("h11", with_h11)):
            figure = asyncio.run(run(url, body.encode(), args.requests))
            print(f"| {name} | {figure:.2f} |")
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
