"""The ``windowfit`` command line.

Every command prints a readable summary by default and a JSON document with ``--json``.
Bad input (an unreadable file, invalid JSON, a message without a role, a tool result
whose call is missing, a negative budget) gives one line on stderr saying what is wrong
and where, and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from . import __version__
from .commands import COMMANDS
from .commands._io import EXIT_OK, EXIT_USAGE, CliError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="windowfit",
        description="Keep long LLM agent turns inside the model's context window.",
    )
    parser.add_argument("--version", action="version", version=f"windowfit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f".commands.{name}", __package__).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except CliError as exc:
        print(f"windowfit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("windowfit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
