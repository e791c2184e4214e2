"""How a proxy behaves: where it forwards, what it fits to, what it refuses."""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import SettingsError
from ..settings import FitSettings

__all__ = ["DEFAULT_UPSTREAMS", "ProxyConfig"]

#: The providers' public API hosts, by upstream name.
DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "gemini": "https://generativelanguage.googleapis.com",
}

#: Anthropic's documented limit for a Messages request (32 MB); OpenAI's is lower.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


def _origin(name: str, url: str) -> str:
    """``url`` checked (http or https, a host) and without a trailing ``/`` or ``/v1``:
    request paths (``/v1/messages``) are appended to it as they come."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SettingsError(
            f"the {name} upstream must be an http:// or https:// URL with a host, not {url!r}"
        )
    if parts.query or parts.fragment:
        raise SettingsError(f"the {name} upstream must not carry a query or fragment: {url!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):  # OpenAI-style base URLs include /v1; paths bring their own
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True)
class ProxyConfig:
    """Settings of ``windowfit proxy`` (all have command-line flags).

    ``upstreams``: where each API's requests go (an origin such as
    ``https://api.anthropic.com``; never taken from a request). ``budget``: fit every
    request to this many tokens (capped by the model's window minus its output limit when
    the model is known); ``budget_fraction``: fit to this share of that instead; neither:
    the window minus the output limit, from :mod:`windowfit.models` (requests for a model
    it does not know are then forwarded unfitted). ``settings``: a fitting preset.
    ``max_body_bytes``: larger request bodies get a 413 in the API's shape.
    ``connect_timeout`` / ``read_timeout``: seconds to reach the upstream and between two
    pieces of its answer. ``admin_key``: what ``/metrics`` and ``/_windowfit/`` need when
    the proxy listens beyond loopback. ``redis_url``: where learned per-conversation state
    is shared between replicas. ``max_conversations``: how many conversations' learned
    state one process keeps (least recently used first out). ``fitter_max_bytes``: what
    the proxy's :class:`~windowfit.Fitter` keeps of large conversations it has folded (it
    only makes their next request cheaper; conversations under 64 KiB are not kept, see
    ``_fit.KEPT_MIN_BYTES``): 128 MiB holds twenty 200k-token conversations served at
    once. A proxy serving 10,000 distinct small conversations grows by about 15 MB
    (``benchmarks/proxy.py`` measures it).
    """

    upstreams: tuple[tuple[str, str], ...] = tuple(DEFAULT_UPSTREAMS.items())
    budget: int | None = None
    budget_fraction: float | None = None
    settings: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    admin_key: str | None = None
    redis_url: str | None = None
    max_conversations: int = 4_000
    fitter_max_bytes: int = 128 * 1024 * 1024

    def __post_init__(self) -> None:
        names = dict(self.upstreams)
        unknown = set(names) - set(DEFAULT_UPSTREAMS)
        if unknown:
            raise SettingsError(f"unknown upstream {sorted(unknown)[0]!r}")
        merged = {**DEFAULT_UPSTREAMS, **names}
        object.__setattr__(self, "upstreams", tuple((k, _origin(k, v)) for k, v in merged.items()))
        if self.budget is not None and self.budget_fraction is not None:
            raise SettingsError("give a budget or a budget fraction, not both")
        if self.budget is not None and (
            isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget <= 0
        ):
            raise SettingsError(f"budget must be a positive whole number, not {self.budget!r}")
        fraction = self.budget_fraction
        if fraction is not None and not (
            isinstance(fraction, (int, float)) and math.isfinite(fraction) and 0 < fraction <= 1
        ):
            raise SettingsError(f"budget fraction must be in (0, 1], not {fraction!r}")
        if self.settings is not None:
            FitSettings.preset(self.settings)  # a SettingsError naming the presets if unknown
        for name in ("max_body_bytes", "max_conversations", "fitter_max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SettingsError(f"{name} must be a positive whole number, not {value!r}")
        for name in ("connect_timeout", "read_timeout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise SettingsError(f"{name} must be a positive number of seconds, not {value!r}")

    def upstream(self, name: str) -> str:
        """The origin requests for ``name`` (anthropic, openai, gemini) go to."""
        return dict(self.upstreams)[name]
