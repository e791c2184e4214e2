"""Running the server: in a background thread (tests, notebooks) or in the foreground
(``windowfit serve-sim``). uvicorn and starlette are imported here, when a server starts.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
import urllib.request
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import MissingExtraError
from ..simcore import Fault, parse_fault
from ..tokens import Estimator
from ._config import SimConfig

if TYPE_CHECKING:
    import uvicorn
    from starlette.applications import Starlette

__all__ = ["SimServer", "bind_socket", "create_app", "is_loopback"]

#: uvicorn reports a connection the app closed on purpose (a ``drop`` fault) as an error.
_DROP_MESSAGE = "ASGI callable returned without completing response."


class _DropFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _DROP_MESSAGE


_FILTER = _DropFilter()


def _quiet_drops() -> None:
    logger = logging.getLogger("uvicorn.error")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


def create_app(config: SimConfig | None = None, *, estimator: Estimator | None = None) -> Starlette:
    """The ASGI application for ``config`` (needs the ``server`` extra). ``estimator``
    replaces the tokenizer named in the config (for example one already loaded)."""
    try:
        from ._app import SimState, build_app
    except ImportError as exc:
        raise MissingExtraError("starlette", "server", "windowfit serve-sim") from exc
    config = config or SimConfig()
    if estimator is None:
        from ..tokenizers import load_backend

        estimator = load_backend(config.tokenizer)
    return build_app(SimState(config, estimator))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0 picks a free port)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError("uvicorn", "server", "windowfit serve-sim") from exc
    return uvicorn


def uvicorn_server(app: Starlette, log_level: str = "warning") -> uvicorn.Server:
    uv = _uvicorn()
    _quiet_drops()
    config = uv.Config(
        app,
        log_level=log_level,
        lifespan="off",
        http="h11",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server: uvicorn.Server = uv.Server(config)
    return server


class SimServer:
    """A simulated provider on ``host``:``port`` in a background thread.

    ::

        with SimServer(SimConfig(context_window=8_000)) as sim:
            client = anthropic.Anthropic(base_url=sim.url, api_key="any")
            ...
            sim.stats()["requests"]

    ``port=0`` picks a free port; :attr:`url` says which. The helpers (:meth:`stats`,
    :meth:`add_faults`, :meth:`reset`) talk to the server over HTTP like any client.
    """

    def __init__(
        self,
        config: SimConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        estimator: Estimator | None = None,
        log_level: str = "warning",
    ) -> None:
        self.config = config or SimConfig()
        self.host = host
        self.port = port
        self._estimator = estimator
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """The base URL for Anthropic clients (``base_url=``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def openai_url(self) -> str:
        """The base URL for OpenAI clients (``base_url=``): :attr:`url` + ``/v1``."""
        return f"{self.url}/v1"

    def start(self, timeout: float = 30.0) -> SimServer:
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        app = create_app(self.config, estimator=self._estimator)
        self._socket = bind_socket(self.host, self.port)
        self.port = self._socket.getsockname()[1]
        server = uvicorn_server(app, self._log_level)
        self._server = server
        sock = self._socket

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # pragma: no cover - reported by start()
                self._error = exc

        self._thread = threading.Thread(target=run, name="windowfit-serve-sim", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the simulated server did not start: {self._error!r}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        server, thread = self._server, self._thread
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive() and server is not None:
                server.force_exit = True
                thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- talking to the server ---------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"}
        if self.config.api_keys:  # the control routes need a key when the server has keys
            headers["x-api-key"] = self.config.api_keys[0]
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stats(self) -> dict[str, Any]:
        """The counters at ``GET /_sim/stats``."""
        result: dict[str, Any] = self._call("GET", "/_sim/stats")
        return result

    def reset(self) -> None:
        """Clear counters, caches and waiting faults."""
        self._call("POST", "/_sim/reset", {})

    def add_faults(self, faults: Iterable[Fault | Mapping[str, Any] | str]) -> int:
        """Queue faults (objects, their JSON form or their text form); returns how many
        are waiting."""
        items = []
        for fault in faults:
            if isinstance(fault, str):
                fault = parse_fault(fault)
            items.append(fault.to_json() if isinstance(fault, Fault) else dict(fault))
        result = self._call("POST", "/_sim/faults", {"faults": items})
        return len(result["pending"])
