"""Serving the proxy: in the foreground (``windowfit proxy``) or in a background thread
(tests, notebooks). uvicorn and aiohttp are imported here, when a proxy starts.

uvicorn serves with httptools and uvloop, both in the ``proxy`` extra (uvicorn falls
back to h11 and asyncio's loop where they are missing). Per 1 MB streamed request
(``benchmarks/proxy.py --floor``, CPU of the proxy process): h11 -> httptools about
2 ms less (h11 copies each chunk of a body several times over), asyncio's loop ->
uvloop about 1.5 ms less.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from ..errors import MissingExtraError
from ..server._run import ServerThread, base_url, is_loopback
from ._config import ProxyConfig

if TYPE_CHECKING:
    import uvicorn

    from ._app import ProxyApp

__all__ = ["KEEP_ALIVE_SECONDS", "ProxyServer", "create_proxy_app", "proxy_server"]

#: How long the proxy keeps an idle client connection open. Longer than the clients' own
#: idle limits (httpx, and so the anthropic and openai SDKs: 5 s; Node's undici: 4 s),
#: so that the client, not the proxy, closes an idle connection: with uvicorn's default
#: of 5 s, equal to httpx's, a client could send its next request on a connection the
#: proxy was closing that instant, and see it reset (a ``ReadError``).
KEEP_ALIVE_SECONDS = 75


def create_proxy_app(config: ProxyConfig | None = None, *, loopback: bool = True) -> ProxyApp:
    """The proxy's ASGI application (needs the ``proxy`` extra)."""
    try:
        from ._app import ProxyApp
    except ImportError as exc:  # aiohttp, or orjson (the fast writer of fitted bodies)
        missing = exc.name if exc.name in ("aiohttp", "orjson") else "aiohttp"
        raise MissingExtraError(missing, "proxy", "windowfit proxy") from exc
    return ProxyApp(config or ProxyConfig(), loopback=loopback)


def proxy_server(app: ProxyApp, log_level: str = "warning") -> uvicorn.Server:
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError("uvicorn", "proxy", "windowfit proxy") from exc
    from ..server._run import _quiet_drops

    _quiet_drops()  # a stream the upstream cut is cut for the client too, on purpose
    config = uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        http="auto",  # httptools where installed (the proxy extra has it), else h11
        loop="auto",  # uvloop where installed (the proxy extra has it), else asyncio's
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config)


class ProxyServer:
    """A proxy on ``host``:``port`` in a background thread::

        with SimServer(...) as sim, ProxyServer(ProxyConfig(upstreams=(("anthropic",
                sim.url),))) as proxy:
            client = anthropic.Anthropic(base_url=proxy.url, api_key="any")

    ``port=0`` picks a free port; :attr:`url` says which, :attr:`app` is the application
    (its counters).
    """

    def __init__(
        self,
        config: ProxyConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
    ) -> None:
        self.config = config or ProxyConfig()
        self.host = host
        self.port = port
        self.app = create_proxy_app(self.config, loopback=is_loopback(host))
        self._log_level = log_level
        self._runner = ServerThread("windowfit-proxy", "the proxy")

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    def start(self, timeout: float = 30.0) -> ProxyServer:
        server = proxy_server(self.app, self._log_level)
        self.port = self._runner.start(server, self.host, self.port, timeout)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._runner.stop(timeout)

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
