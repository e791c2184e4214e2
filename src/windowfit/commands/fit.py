"""``windowfit fit FILE --budget N``: fit a request and say what was done."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from ..errors import ContextOverflowError, WindowfitError
from ..fitting import FitResult, fit
from ..formats import DIALECTS
from ..settings import PRESETS
from ._io import (
    EXIT_OK,
    EXIT_OVERFLOW,
    CliError,
    add_input_limit,
    dumps_json,
    positive_int,
    read_json,
    write_text,
)

_STAGES = {
    0: "already fit: sent unchanged",
    1: "cleared old tool results",
    2: "kept the most recent whole user turns",
    3: "kept the most recent whole tool rounds",
}


#: One line per preset for ``--help`` (a preset without a line is listed by name).
_PRESET_HELP = {
    "windowfit": "clears old tool results in batches down to half the budget, then drops "
    "whole old turns; keeps the prefix stable for the prompt cache",
    "windowfit-lean": "once the request passes the budget, clears the tool results older "
    "than the newest 3, eight at a time",
    "seed": "the seed's rule: clears or drops just enough, from the current request alone",
}


def register(sub: Any) -> None:
    p = sub.add_parser("fit", help="fit a request (JSON message list or request body) to a budget")
    p.add_argument("file", help="JSON file, or - for standard input")
    p.add_argument("--budget", type=positive_int, required=True, help="token budget")
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="windowfit",
        help="fitting settings: "
        + "; ".join(f"{name}: {_PRESET_HELP.get(name, name)}" for name in sorted(PRESETS))
        + " (default windowfit)",
    )
    add_input_limit(p)
    p.add_argument(
        "--format", choices=["anthropic", "openai", "openai-responses"], help="default: detected"
    )
    p.add_argument("--output", help="write the shaped request here (- for standard output)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=run)


def request_parts(path: str, data: Any) -> tuple[list[Any], Any, Any, dict[str, Any] | None]:
    """(messages, system, tools, body) from a message list or a request body."""
    if isinstance(data, list):
        return data, None, None, None
    if isinstance(data, dict):
        messages = data.get("messages")
        if messages is None and "input" in data:  # an OpenAI Responses body
            try:
                parts = DIALECTS["openai-responses"].read_request(data)
            except WindowfitError as exc:
                raise CliError(f"{path}: {exc}") from None
            return parts.messages, parts.system, parts.tools, data
        if not isinstance(messages, list):
            raise CliError(f"{path}: a request body needs a 'messages' list")
        # Wrong shapes inside (system, tools, roles...) are fit's ConversationErrors,
        # which name the field: one line, exit 2.
        return messages, data.get("system"), data.get("tools"), data
    raise CliError(f"{path}: expected a list of messages or a request object with 'messages'")


_RESPONSES = "openai-responses"


def _is_responses(body: dict[str, Any] | None) -> bool:
    """A request body of the Responses API (``input`` items, no ``messages``)."""
    return body is not None and "messages" not in body and "input" in body


def spans(indexes: Sequence[int]) -> str:
    """``1-4, 7`` for ``[1, 2, 3, 4, 7]``."""
    parts: list[str] = []
    i = 0
    while i < len(indexes):
        j = i
        while j + 1 < len(indexes) and indexes[j + 1] == indexes[j] + 1:
            j += 1
        parts.append(str(indexes[i]) if i == j else f"{indexes[i]}-{indexes[j]}")
        i = j + 1
    return ", ".join(parts)


def _ids(ids: Sequence[str], most: int = 6) -> str:
    shown = ", ".join(ids[:most])
    return shown + (f", ... (+{len(ids) - most} more)" if len(ids) > most else "")


def table(path: str, result: FitResult) -> str:
    r = result.report
    rows = [
        ("stage", f"{r.stage} ({_STAGES[r.stage]})"),
        (
            "tokens",
            f"{r.tokens_before:,} -> {r.tokens_after:,} of a {r.budget:,} budget (estimated)",
        ),
        ("messages", f"{r.messages_before:,} -> {r.messages_after:,}"),
        ("cleared results", f"{len(r.cleared)}" + (f": {_ids(r.cleared)}" if r.cleared else "")),
        ("dropped messages", f"{len(r.dropped)}" + (f": {spans(r.dropped)}" if r.dropped else "")),
        ("unchanged prefix", f"the first {r.prefix_end} messages are sent exactly as given"),
    ]
    if r.note_index is not None:
        rows.append(("trimmed note", f"at output message {r.note_index}"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{path}: {r.format} format, settings {r.settings!r}"]
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    return "\n".join(lines)


def _model_of(body: Any) -> str | None:
    """The request's model, which picks what counts (windowfit.default_estimator)."""
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) and model else None


def run(args: argparse.Namespace) -> int:
    data = read_json(args.file, args.max_input_bytes)
    messages, system, tools, body = request_parts(args.file, data)
    try:
        result = fit(
            messages,
            budget=args.budget,
            system=system,
            tools=tools,
            settings=args.preset,
            format=args.format or (_RESPONSES if _is_responses(body) else None),
            model=_model_of(body),
        )
    except ContextOverflowError as exc:
        if args.json:
            print(
                json.dumps(
                    {
                        "error": "context_overflow",
                        "message": str(exc),
                        "detail": exc.detail,
                        "tokens": exc.tokens,
                        "limit": exc.limit,
                    }
                )
            )
        else:
            print(
                f"{args.file}: does not fit: {exc.detail} ({exc.tokens:,} > {exc.limit:,} tokens)"
            )
            print(str(exc))
        return EXIT_OVERFLOW
    except WindowfitError as exc:
        raise CliError(f"{args.file}: {exc}") from None
    if args.output:
        shaped: Any = result.messages if body is None else {**body, "messages": result.messages}
        if _is_responses(body):
            assert body is not None
            dialect = DIALECTS[_RESPONSES]
            shaped = dialect.write_request(body, result.messages, body.get("instructions"))
        write_text(args.output, dumps_json(shaped, indent=2) + "\n")
    if args.json:
        print(dumps_json(result.report.to_dict()))
    else:
        print(table(args.file, result))
        if args.output and args.output != "-":
            print(f"  written to {args.output}")
    return EXIT_OK
