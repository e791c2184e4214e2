"""What every command shares: reading input, reporting bad input as one line."""

from __future__ import annotations

import argparse
import codecs
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "EXIT_OK",
    "EXIT_OVERFLOW",
    "EXIT_USAGE",
    "CliError",
    "add_input_limit",
    "dumps_json",
    "iter_text",
    "positive_int",
    "read_chunks",
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


#: The most a command reads from one input unless ``--max-input-bytes`` says otherwise:
#: far above any real request or log, and low enough that ``/dev/zero`` or an endless
#: pipe is refused in seconds with bounded memory, rather than growing until it fails.
DEFAULT_MAX_INPUT_BYTES = 256 * 1024 * 1024

#: Bytes read per call; the limit and undecodable bytes are noticed within one of these.
READ_CHUNK = 1024 * 1024

# JSON allows no raw control character but whitespace (RFC 8259: strings must escape
# U+0000-U+001F), so one in the input means it is not JSON whatever follows.
_NOT_JSON = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def add_input_limit(parser: argparse.ArgumentParser, *, what: str = "an input") -> None:
    """``--max-input-bytes N``, shared by the commands that read files."""
    parser.add_argument(
        "--max-input-bytes",
        type=positive_int,
        default=DEFAULT_MAX_INPUT_BYTES,
        metavar="N",
        help=f"refuse {what} larger than this (default 256 MiB, {DEFAULT_MAX_INPUT_BYTES:,} "
        "bytes); reading stops there, so an endless input such as /dev/zero is refused "
        "with bounded memory",
    )


def add_progress_flags(parser: argparse.ArgumentParser, *, shown: str) -> None:
    """``--progress`` / ``--no-progress`` (default: when standard error is a terminal),
    shared by the commands that report progress; ``shown`` says what is shown."""
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help=f"{shown} on standard error (default: when it is a terminal)",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false")


def _size(n: int) -> str:
    mib = n / (1024 * 1024)
    return f"{n:,} bytes" if n < 1024 * 1024 else f"{mib:,.4g} MiB ({n:,} bytes)"


def read_chunks(path: str, limit: int = DEFAULT_MAX_INPUT_BYTES) -> Iterator[bytes]:
    """The bytes of ``path`` (``-``: standard input) in chunks of :data:`READ_CHUNK`; a
    one-line CliError as soon as more than ``limit`` bytes have come (or it cannot be read)."""
    try:
        stream: BinaryIO = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror})") from None
    total = 0
    try:
        while True:
            try:
                chunk = stream.read(min(READ_CHUNK, limit + 1 - total))
            except IsADirectoryError:
                raise CliError(f"{path}: is a directory, not a file") from None
            except OSError as exc:
                raise CliError(f"{path}: cannot read ({exc.strerror})") from None
            if not chunk:
                return
            total += len(chunk)
            if total > limit:
                raise CliError(
                    f"{path}: larger than {_size(limit)}; raise --max-input-bytes to read more"
                )
            yield chunk
    finally:
        if path != "-":
            stream.close()


def iter_text(path: str, limit: int = DEFAULT_MAX_INPUT_BYTES) -> Iterator[str]:
    """The UTF-8 text of ``path`` in pieces (a leading byte order mark dropped), failing
    at the first chunk with bytes that are not UTF-8, or with a NUL byte (which no text
    file holds), rather than after reading it all."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    offset = 0
    for chunk in read_chunks(path, limit):
        try:
            text = decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            raise CliError(f"{path}: not UTF-8 text (byte {offset + exc.start})") from None
        zero = chunk.find(0)
        if zero >= 0:  # text has no NUL; binary data (or /dev/zero) is refused at once
            raise CliError(f"{path}: not a text file (a NUL byte at byte {offset + zero:,})")
        offset += len(chunk)
        if text:
            yield text
    try:
        tail = decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text (byte {offset + exc.start}, at the end)") from None
    if tail:
        yield tail


def read_text(path: str, limit: int = DEFAULT_MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of ``path`` (``-`` for standard input), or a one-line CliError."""
    return "".join(iter_text(path, limit))


def read_json(path: str, limit: int = DEFAULT_MAX_INPUT_BYTES) -> Any:
    """The JSON document in ``path``, or a one-line CliError. A control character that
    JSON does not allow stops the reading at once (random bytes or ``/dev/zero`` are
    refused after one chunk)."""
    pieces: list[str] = []
    seen = 0
    for piece in iter_text(path, limit):
        bad = _NOT_JSON.search(piece)
        if bad is not None:
            where = seen + bad.start()
            raise CliError(
                f"{path}: invalid JSON: control character U+{ord(bad.group()):04X} at "
                f"character {where:,} (JSON allows none unescaped)"
            )
        seen += len(piece)
        pieces.append(piece)
    text = "".join(pieces)
    del pieces
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise CliError(f"{path}: JSON nested too deeply") from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON, with text as it is, except a lone surrogate (such as
    ``\\ud800``, which JSON allows and UTF-8 cannot carry), written as its ``\\uXXXX``
    escape: a JSON reader gets exactly the same data back, and the output can be written
    as UTF-8. (Outside strings json.dumps writes only ASCII, so every surrogate it leaves
    is inside a string, where the escape means the same.)"""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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


port_number = checked_number(
    int, lambda n: 0 <= n <= 65535, "a port is 0-65535, not {number}", what="a port number"
)


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """What every windowfit HTTP server takes: its largest request body and uvicorn's
    log level (``windowfit serve-sim`` and ``windowfit proxy``)."""
    parser.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=32 * 1024 * 1024,
        metavar="N",
        help="largest request body accepted (default 32 MiB; larger gets 413)",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's log level (default warning)",
    )
