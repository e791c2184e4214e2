"""``windowfit proxy``: fit every request of any agent, by pointing it at another URL.

Most agents are not written against windowfit's Python API: Claude Code, Codex, aider
and apps in other languages speak HTTP to a provider and let the user change its base
URL. The proxy takes those requests (Anthropic ``POST /v1/messages``, OpenAI
``POST /v1/chat/completions`` and ``POST /v1/responses``), fits each with its API's dialect
(:data:`windowfit.formats.DIALECTS`) and forwards it to the configured upstream,
transparently: headers and query strings kept, streams relayed as they arrive, upstream
errors verbatim, anything it cannot read forwarded unchanged. It learns each
conversation's real counts from the usage in the answers and re-fits once when the
upstream still says the prompt is too long.

Importing this package needs only the standard library; aiohttp and uvicorn (the
``proxy`` extra) are imported when a proxy is created.
"""

from __future__ import annotations

from ._config import DEFAULT_UPSTREAMS, ProxyConfig
from ._run import ProxyServer, create_proxy_app

__all__ = ["DEFAULT_UPSTREAMS", "ProxyConfig", "ProxyServer", "create_proxy_app"]
