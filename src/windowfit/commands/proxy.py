"""``windowfit proxy``: fit every request an agent sends, by changing its base URL."""

from __future__ import annotations

import argparse
import gc
import math
import sys
from typing import Any

from ..errors import MissingExtraError, SettingsError
from ._io import (
    EXIT_OK,
    CliError,
    add_server_options,
    checked_number,
    port_number,
    positive_int,
)

_whole_mb = checked_number(
    int, lambda n: 0 <= n <= 2047, "must be 0 to 2047, not {value}", what="a whole number"
)

_fraction = checked_number(
    float,
    lambda n: math.isfinite(n) and 0 < n <= 1,
    "must be more than 0 and at most 1, not {value}",
    what="a fraction",
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "proxy",
        help="fit every request an agent sends: point its base URL at this proxy",
        description=(
            "Forward Anthropic Messages (POST /v1/messages), OpenAI Chat Completions and "
            "Responses (POST /v1/chat/completions, /v1/responses) requests to their "
            "upstream, each fitted to the model's context window first; everything else "
            "passes through unchanged. "
            "Claude Code: ANTHROPIC_BASE_URL=http://HOST:PORT; OpenAI clients: "
            "OPENAI_BASE_URL=http://HOST:PORT/v1."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--port", type=port_number, default=8787, help="port to listen on (default 8787)"
    )
    p.add_argument("--anthropic-upstream", metavar="URL", help="default https://api.anthropic.com")
    p.add_argument("--openai-upstream", metavar="URL", help="default https://api.openai.com")
    p.add_argument(
        "--gemini-upstream",
        metavar="URL",
        help="default https://generativelanguage.googleapis.com",
    )
    p.add_argument("--settings", metavar="PRESET", help="fitting preset (default: the default)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--budget",
        type=positive_int,
        metavar="N",
        help="fit every request to N tokens (at most the model's window minus its output)",
    )
    budget.add_argument(
        "--budget-fraction",
        type=_fraction,
        metavar="F",
        help="fit to this share of the model's window minus its output (default 1)",
    )
    add_server_options(p)
    p.add_argument(
        "--fitter-max-mb",
        type=positive_int,
        default=128,
        metavar="N",
        help=(
            "MiB the proxy keeps of large conversations (64 KiB or more) it has seen, so "
            "their next requests are not counted again (default 128: about 5 MiB per MB "
            "of conversation text served at once, enough for 20 concurrent 200k-token "
            "conversations)"
        ),
    )
    p.add_argument(
        "--keep-freed-mb",
        type=_whole_mb,
        default=64,
        metavar="N",
        help=(
            "MiB of freed memory the process keeps for the next requests instead of "
            "returning it to the system (glibc): large bodies then cost no page faults, "
            "about 2.5 ms of CPU less per 1 MB request; 0 leaves the allocator as it is "
            "(default 64)"
        ),
    )
    p.add_argument("--redis", metavar="URL", help="share learned state between replicas")
    p.add_argument(
        "--admin-key",
        metavar="KEY",
        help="key /metrics and /_windowfit/ need when listening beyond loopback",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..proxy import ProxyConfig, create_proxy_app
    from ..proxy._malloc import keep_freed_memory
    from ..proxy._run import proxy_server
    from ..server._run import bind_socket, is_loopback

    upstreams = tuple(
        (name, url)
        for name, url in (
            ("anthropic", args.anthropic_upstream),
            ("openai", args.openai_upstream),
            ("gemini", args.gemini_upstream),
        )
        if url
    )
    try:
        config = ProxyConfig(
            upstreams=upstreams,
            budget=args.budget,
            budget_fraction=args.budget_fraction,
            settings=args.settings,
            max_body_bytes=args.max_body_bytes,
            admin_key=args.admin_key,
            redis_url=args.redis,
            fitter_max_bytes=args.fitter_max_mb * 1024 * 1024,
        )
        loopback = is_loopback(args.host)
        app = create_proxy_app(config, loopback=loopback)
        server = proxy_server(app, args.log_level)
    except (SettingsError, MissingExtraError) as exc:
        raise CliError(str(exc)) from None
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{port}"
    if not loopback:
        print(
            f"windowfit proxy: warning: listening on {args.host}, reachable from other "
            "machines; requests carry API keys"
            + (
                ""
                if args.admin_key
                else "; /metrics and /_windowfit/ stay closed without --admin-key"
            ),
            file=sys.stderr,
        )
    print(
        f"windowfit proxy: {url} -> anthropic {config.upstream('anthropic')}, openai "
        f"{config.upstream('openai')}, gemini {config.upstream('gemini')}; "
        f"ANTHROPIC_BASE_URL={url}, OPENAI_BASE_URL={url}/v1, GOOGLE_GEMINI_BASE_URL={url}; "
        f"live page {url}/_windowfit/",
        flush=True,
    )
    # What the process holds now (modules, tokenizer tables) lives as long as it does:
    # kept out of the collector's full passes, which otherwise walk it again and again.
    gc.freeze()
    keep_freed_memory(args.keep_freed_mb * 1024 * 1024)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    print("windowfit proxy: stopped", file=sys.stderr)
    return EXIT_OK
