"""``windowfit serve-sim``: a local Anthropic/OpenAI-compatible server with a scripted model."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import MissingExtraError, TokenizerError
from ..server._stats import DEFAULT_LOG_BYTES
from ..simcore import DEFAULT_CACHE_BYTES, DEFAULT_REPLY
from ._io import (
    EXIT_OK,
    CliError,
    add_server_options,
    checked_number,
    port_number,
    positive_int,
    whole,
)

_count = checked_number(
    whole, lambda n: n >= 0, "must be 0 or more, not {number}", what="a whole number"
)
_seconds = checked_number(
    float, lambda n: 0 <= n <= 600, "must be 0-600 seconds, not {value}", what="a number of seconds"
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve-sim",
        help="run a local Anthropic/OpenAI/Gemini-compatible server with a scripted model",
        description=(
            "Serve the Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens), "
            "OpenAI Chat Completions (POST /v1/chat/completions), OpenAI Responses "
            "(POST /v1/responses) and Gemini (POST /v1beta/models/MODEL:generateContent, "
            ":streamGenerateContent) with a scripted model "
            "that enforces a context window counted with a real tokenizer. Counters at "
            "GET /_sim/stats; faults on demand with --fault or POST /_sim/faults. "
            "Anthropic and google-genai clients use base_url=http://HOST:PORT, OpenAI "
            "clients base_url=http://HOST:PORT/v1."
        ),
    )
    p.add_argument(
        "--port", type=port_number, required=True, help="port to listen on (0: any free)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--context-window",
        type=positive_int,
        default=200_000,
        metavar="N",
        help="the model's hard limit in tokens (default 200000)",
    )
    p.add_argument("--tokenizer", default="o200k", help="real tokenizer the window is counted with")
    p.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="accept only this key (repeatable), on the provider routes and on the control "
        "routes /_sim/* (x-api-key or Authorization: Bearer); without it any key is accepted",
    )
    p.add_argument(
        "--tool-rounds",
        "--script-rounds",
        dest="tool_rounds",
        type=_count,
        default=3,
        metavar="K",
        help="call a tool while the conversation has fewer than K tool results (default 3)",
    )
    p.add_argument(
        "--reply",
        "--answer",
        dest="reply",
        default=DEFAULT_REPLY,
        help="the final answer ({results}, {tokens} and {model} are filled in)",
    )
    p.add_argument(
        "--script-tool",
        metavar="NAME=JSON",
        help="call this tool with this input, {n} = 1, 2, ... (e.g. "
        '\'Bash={"command": "cat part-{n}.txt"}\'), instead of the first tool offered '
        "with arguments made from its schema",
    )
    add_server_options(p)
    p.add_argument(
        "--cache-min-tokens",
        type=_count,
        default=1024,
        metavar="N",
        help="smallest prefix the prompt cache keeps (default 1024)",
    )
    p.add_argument(
        "--cache-max-bytes",
        type=positive_int,
        default=DEFAULT_CACHE_BYTES,
        metavar="N",
        help="memory the prompt cache may take (default 32 MiB; least recently used go first)",
    )
    p.add_argument(
        "--log-max-bytes",
        type=positive_int,
        default=DEFAULT_LOG_BYTES,
        metavar="N",
        help="memory the log of recent requests at /_sim/stats may take (default 1 MiB)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        help=(
            "queue a fault, in order (repeatable): 529, 429:retry_after=2, 500, drop, "
            "drop:after_events=3, delay=1.5, 400:message=TEXT,route=openai"
        ),
    )
    p.add_argument(
        "--latency",
        type=_seconds,
        default=0.0,
        help="seconds every answer waits (a provider's time to first token)",
    )
    p.add_argument(
        "--stream-tokens-per-second",
        type=_seconds,
        default=0.0,
        metavar="RATE",
        help="pace streamed answers as a model writing RATE tokens a second (default 0: unpaced)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..server import SimConfig, create_app, is_loopback, parse_fault
    from ..server._run import bind_socket, uvicorn_server
    from ..simcore import parse_scripted_tool

    try:
        script = parse_scripted_tool(args.script_tool) if args.script_tool else None
    except ValueError as exc:
        raise CliError(f"--script-tool: {exc}") from None

    try:
        faults = tuple(parse_fault(spec) for spec in args.fault)
    except ValueError as exc:
        raise CliError(f"--fault: {exc}") from None
    try:
        config = SimConfig(
            context_window=args.context_window,
            tokenizer=args.tokenizer,
            api_keys=tuple(args.api_key),
            max_body_bytes=args.max_body_bytes,
            tool_rounds=args.tool_rounds,
            reply=args.reply,
            cache_min_tokens=args.cache_min_tokens,
            cache_max_bytes=args.cache_max_bytes,
            log_max_bytes=args.log_max_bytes,
            latency=args.latency,
            stream_tokens_per_second=args.stream_tokens_per_second,
            faults=faults,
            script_tool=script,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        app = create_app(config)
        server = uvicorn_server(app, args.log_level)
    except (MissingExtraError, TokenizerError) as exc:
        raise CliError(str(exc)) from None
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{port}"
    if not is_loopback(args.host):
        print(
            f"windowfit serve-sim: warning: listening on {args.host}, reachable from other "
            "machines; this is a test server",
            file=sys.stderr,
        )
    print(
        f"windowfit serve-sim: {url} (context window {config.context_window:,} tokens, "
        f"{config.tokenizer}); Anthropic base_url={url}, OpenAI base_url={url}/v1; "
        f"counters at {url}/_sim/stats",
        flush=True,
    )
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once it has shut down cleanly
        pass
    finally:
        sock.close()
    print("windowfit serve-sim: stopped", file=sys.stderr)
    return EXIT_OK
