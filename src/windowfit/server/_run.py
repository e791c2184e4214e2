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

__all__ = ["ServerThread", "SimServer", "base_url", "bind_socket", "create_app", "is_loopback"]

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


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 host in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class ServerThread:
    """A uvicorn server in a daemon thread on a socket of its own: what serve-sim's
    :class:`SimServer` and the proxy's ``ProxyServer`` both run. It owns the socket, the
    server and the thread; :meth:`start` returns once the server listens, :meth:`stop`
    asks it to exit, then forces it."""

    def __init__(self, name: str, what: str) -> None:
        self.name = name  # the thread's name
        self.what = what  # for the error when it does not start
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, server: uvicorn.Server, host: str, port: int, timeout: float) -> int:
        """Bind ``host``:``port`` (0: a free port), run ``server`` on it, and return the
        port once it listens; raises RuntimeError when it does not start in ``timeout``."""
        if self._thread is not None:
            raise RuntimeError(f"{self.what} is already running")
        sock = self._socket = bind_socket(host, port)
        self._server = server

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # pragma: no cover - reported by start()
                self._error = exc

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.what} did not start: {self._error!r}")
            time.sleep(0.01)
        bound: int = sock.getsockname()[1]
        return bound

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
        self._runner = ServerThread("windowfit-serve-sim", "the simulated server")

    @property
    def url(self) -> str:
        """The base URL for Anthropic clients (``base_url=``)."""
        return base_url(self.host, self.port)

    @property
    def openai_url(self) -> str:
        """The base URL for OpenAI clients (``base_url=``): :attr:`url` + ``/v1``."""
        return f"{self.url}/v1"

    def start(self, timeout: float = 30.0) -> SimServer:
        if self._runner.running:
            raise RuntimeError("the server is already running")
        app = create_app(self.config, estimator=self._estimator)
        server = uvicorn_server(app, self._log_level)
        self.port = self._runner.start(server, self.host, self.port, timeout)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._runner.stop(timeout)

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
