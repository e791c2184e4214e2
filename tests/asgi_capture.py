"""Keep the request bodies a real client sends to serve-sim, for tests that check them
against a dialect (what the client sent, not what windowfit thinks it sent)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from windowfit.server import _run as server_run


class Capture:
    """An ASGI wrapper that keeps every request's path and body, then hands it on."""

    def __init__(self, app: Any, bodies: list[tuple[str, bytes]]) -> None:
        self.app = app
        self.bodies = bodies

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        self.bodies.append((scope["path"], body))
        given = False

        async def replay() -> Any:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


@contextmanager
def capturing_sim_bodies() -> Iterator[list[tuple[str, bytes]]]:
    """While open, every SimServer started wraps its app in a :class:`Capture`."""
    bodies: list[tuple[str, bytes]] = []
    original = server_run.create_app
    patch = pytest.MonkeyPatch()
    patch.setattr(server_run, "create_app", lambda *a, **k: Capture(original(*a, **k), bodies))
    try:
        yield bodies
    finally:
        patch.undo()
