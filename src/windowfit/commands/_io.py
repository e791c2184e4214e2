"""What every command shares: reading input, reporting bad input as one line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "EXIT_OK",
    "EXIT_OVERFLOW",
    "EXIT_USAGE",
    "CliError",
    "positive_int",
    "read_json",
    "read_text",
    "write_text",
]

N = TypeVar("N", int, float)

EXIT_OK = 0
EXIT_OVERFLOW = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A problem with the command's input, reported as one line with exit code 2."""


def read_text(path: str) -> str:
    """The UTF-8 text of ``path`` (``-`` for standard input), or a one-line CliError."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror})") from None


def read_json(path: str) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise CliError(f"{path}: JSON nested too deeply") from None


def write_text(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: cannot write ({exc.strerror})") from None


def checked_number(
    convert: Callable[[str], N], valid: Callable[[N], bool], rule: str, *, what: str = "a number"
) -> Callable[[str], N]:
    """An argparse type: ``convert`` the text, then require ``valid``. Bad text says it is
    not ``what``; a value out of range says ``rule``, formatted with ``number`` (converted)
    and ``value`` (as given)."""

    def parse(value: str) -> N:
        try:
            number = convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {value!r}") from None
        if not valid(number):
            raise argparse.ArgumentTypeError(rule.format(number=number, value=value))
        return number

    return parse


def whole(value: str) -> int:
    """A whole number, with ``_`` and ``,`` allowed as separators."""
    return int(value.replace("_", "").replace(",", ""))


#: argparse type: a positive whole number (``_`` and ``,`` allowed as separators).
positive_int = checked_number(
    whole, lambda n: n > 0, "must be positive, not {number}", what="a whole number"
)
