"""Where a proxied request's added time goes, hop by hop (issue 12, "The floor").

Run:  .venv/bin/python benchmarks/proxy_hops.py [--requests 40] [--tokens 200000]

An instant upstream of its own (a raw asyncio HTTP server: it reads the body, notes the
moment its last byte arrived, answers at once with a short Anthropic event stream and
says that moment in a header), and a client on a plain blocking socket that notes when
its body was handed to the kernel, when the first byte of the answer came and when the
last did. All on one monotonic clock (``time.perf_counter`` is CLOCK_MONOTONIC on Linux,
the same in every process). For serve-less traffic the same as ``benchmarks/proxy.py``'s
(streamed Anthropic requests of ~200k tokens, one conversation growing by 800 tokens),
straight to the upstream and through windowfit's proxy, the minimal ASGI pass-through
and the raw relay of ``benchmarks/proxy_floor.py``, per request:

* **upload**: from the client's last body byte handed to the kernel to the upstream
  reading it (what the process in between adds is the receive, any work before the
  tail goes on, and the send);
* **answer head**: from that moment to the client's first byte of the answer (the
  upstream answers at once: this is the answer's way back through the process);
* **stream**: from the first to the last byte of the answer (~12 events sent at once).

Prints medians and 90th percentiles of each, minus the direct path's, and the CPU per
request of the process in between (``/proc/PID/stat``); asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy import (
    MODEL,
    Conversation,
    _windowfit,
    cpu_seconds,
    floor_services,
    start,
    stop,
)

_EVENTS = [
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": None, "usage": {"input_tokens": 200000, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "text", "text": ""}}),
    *[("content_block_delta", {"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": "twelve chars"}})] * 8,
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                       "usage": {"output_tokens": 24}}),
    ("message_stop", {"type": "message_stop"}),
]  # fmt: skip
_FRAMES = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in _EVENTS]


class _Upstream(asyncio.Protocol):
    """HTTP/1.1 keep-alive, Content-Length bodies only; answers every request at once."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = bytearray()
        self.need = -1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if self.need < 0:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buffer[:end]).lower()
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip() == b"content-length":
                        length = int(value)
                del self.buffer[: end + 4]
                self.need = length
            if len(self.buffer) < self.need:
                return
            arrived = time.perf_counter()
            del self.buffer[: self.need]
            self.need = -1
            self._answer(arrived)

    def _answer(self, arrived: float) -> None:
        body = b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in _FRAMES) + b"0\r\n\r\n"
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            f"transfer-encoding: chunked\r\nx-arrived: {arrived!r}\r\n\r\n"
        ).encode()
        self.transport.write(head + body)


def serve_upstream(port: int) -> None:
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(_Upstream, "127.0.0.1", port))
    print(f"instant upstream on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    loop.run_forever()


class _Client:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = parts.netloc

    def request(self, body: bytes) -> tuple[float, float, float, float]:
        """(body handed over, upstream had it, first answer byte, last answer byte)."""
        head = (
            f"POST /v1/messages HTTP/1.1\r\nhost: {self.host}\r\nx-api-key: sk-bench\r\n"
            "anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        self.sock.sendall(head + body)
        sent = time.perf_counter()
        got = bytearray(self.sock.recv(1 << 20))
        first = time.perf_counter()
        while not got.endswith(b"0\r\n\r\n"):
            more = self.sock.recv(1 << 20)
            if not more:
                raise RuntimeError("connection closed")
            got += more
        last = time.perf_counter()
        status = got[: got.find(b"\r\n")]
        if b" 200 " not in status:
            raise RuntimeError(bytes(got[:300]).decode("latin-1"))
        at = got.find(b"x-arrived: ")
        arrived = float(got[at + 11 : got.find(b"\r\n", at)])
        return sent, arrived, first, last


def _measure(url: str, requests: int, tokens: int, seed: int) -> dict[str, list[float]]:
    client = _Client(url)
    warm = Conversation(seed + 999, 2000, 100)
    for _ in range(3):
        client.request(warm.next_body(True))
    conv = Conversation(seed, tokens, 800)
    out: dict[str, list[float]] = {"upload": [], "answer head": [], "stream": [], "total": []}
    for _ in range(requests):
        sent, arrived, first, last = client.request(conv.next_body(True))
        out["upload"].append(arrived - sent)
        out["answer head"].append(first - arrived)
        out["stream"].append(last - first)
        out["total"].append(last - sent)
    client.sock.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--serve-upstream", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream is not None:
        serve_upstream(args.serve_upstream)
        return 0
    upstream = start("upstream", [sys.executable, __file__, "--serve-upstream", "0"])
    middles = []
    try:
        proxy = start(
            "windowfit proxy",
            [_windowfit(), "proxy", "--port", "0", "--anthropic-upstream", upstream.url],
        )
        middles = [proxy, *floor_services(upstream, ("asgi", "relay"))]
        targets = [(upstream, "directly", upstream.url), *((m, m.name, m.url) for m in middles)]
        results = {}
        cpu = {}
        for k, (service, name, url) in enumerate(targets):
            before = cpu_seconds(service.proc.pid)
            results[name] = _measure(url, args.requests, args.tokens, 10 * k)
            used = cpu_seconds(service.proc.pid) - before
            cpu[name] = used * 1000 / (args.requests + 3)
    finally:
        for service in (*middles, upstream):
            stop(service)
    direct = results["directly"]
    print(f"{args.requests} requests of ~{args.tokens:,} tokens, concurrency 1, ms")
    print(
        "| path | upload p50 / p90 | answer head p50 / p90 | stream p50 | total p50 / p90 "
        "| CPU per request (ms; directly: the upstream's) |"
    )
    print("|---|---|---|---|---|---:|")
    for name, got in results.items():
        cells = []
        for what in ("upload", "answer head", "stream", "total"):
            p50 = statistics.median(got[what]) * 1000
            p90 = statistics.quantiles(got[what], n=10)[-1] * 1000
            if name != "directly":
                p50 -= statistics.median(direct[what]) * 1000
                p90 -= statistics.quantiles(direct[what], n=10)[-1] * 1000
            sign = "+" if name != "directly" else ""
            cells.append(
                f"{p50:{sign}.2f}" if what == "stream" else f"{p50:{sign}.2f} / {p90:{sign}.2f}"
            )
        print(f"| {name} | " + " | ".join(cells) + f" | {cpu[name]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
