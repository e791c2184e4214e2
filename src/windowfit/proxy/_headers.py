"""Which headers cross the proxy, and which upstream a request goes to.

Headers pass through as sent (``x-api-key``, ``authorization``, ``anthropic-version``,
``anthropic-beta``, session ids...) except the hop-by-hop ones, which describe one
connection and not the request (RFC 9110 section 7.6.1), and the ones the proxy must
recompute: ``host`` (the upstream's), ``content-length`` (of the body actually sent),
and, for answers the proxy decoded to read usage, ``content-encoding``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["pick_upstream", "request_headers", "response_headers"]

_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)


def _named_by_connection(headers: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    """Headers the ``connection`` header lists: hop-by-hop for this connection too."""
    named: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            named.update(v.strip().lower() for v in value.split(b",") if v.strip())
    return named


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The client's headers to send upstream (``raw``: the ASGI scope's)."""
    raw = list(raw)
    drop = _HOP_BY_HOP | _named_by_connection(raw) | {b"host", b"content-length"}
    return [(n, v) for n, v in raw if n.lower() not in drop]


def response_headers(
    raw: Iterable[tuple[bytes, bytes]], *, decoded: bool
) -> list[tuple[bytes, bytes]]:
    """The upstream's headers to send the client; ``decoded``: the body relayed is the
    decoded one (its length and encoding are then the proxy's to state)."""
    raw = list(raw)
    drop = _HOP_BY_HOP | _named_by_connection(raw)
    if decoded:
        drop = drop | {b"content-length", b"content-encoding"}
    return [(n.lower(), v) for n, v in raw if n.lower() not in drop]


def pick_upstream(path: str, headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The upstream for a request the proxy does not fit (``/v1/models``, probes, unknown
    paths): Gemini for its paths or key header, Anthropic for its headers, OpenAI for a
    bearer token alone; Anthropic when nothing tells (Claude Code's probes)."""
    names = {n.lower() for n, _ in headers}
    if path.startswith("/v1beta/") or b"x-goog-api-key" in names or ":generateContent" in path:
        return "gemini"
    if path.startswith("/v1/messages") or b"anthropic-version" in names or b"x-api-key" in names:
        return "anthropic"
    if b"authorization" in names:
        return "openai"
    return "anthropic"
