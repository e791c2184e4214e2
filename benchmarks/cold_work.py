"""Instructions of one cold fit and of one ``trim_messages`` call, counted by callgrind.

On a machine shared with other work, CPU times of a 50 ms call swing by 1.5x between
runs; the instructions a call executes do not. This runs one call of each (a new
``Fitter`` on freshly parsed JSON of the conversation ``benchmarks/realconv.py`` builds;
``trim_messages`` with its approximate counter on the same conversation) under
``valgrind --tool=callgrind``, counting only inside the call, and prints the totals and
the part spent in the C functions the estimate runs on (``bytes.translate``,
``int.from_bytes``/``to_bytes``, UTF-8 encoding, ``zlib.adler32``, big-integer
arithmetic). Instructions are not time (C loops run more of them per cycle than the
interpreter does), but a change that removes work shows here whatever the load.

Needs valgrind (``apt-get install valgrind``) and ``../shared/data``; about a minute per
call counted. ``python benchmarks/cold_work.py`` (both formats).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: C functions of the estimate's passes (see ``windowfit/profiles.py``).
ESTIMATE_FUNCTIONS = (
    "bytes_translate_impl",
    "_PyLong_AsByteArray",
    "_PyLong_FromByteArray",
    "utf8_encoder",
    "adler32",
    "k_mul",
    "long_lshift",
    "long_bitwise",
)


def _conversation(fmt: str) -> tuple[list[dict[str, Any]], Any, Any, int]:
    sys.path.insert(0, str(HERE))
    from realconv import real_conversation
    from windowfit import fit

    built = real_conversation(fmt, 2040)
    if built is None:
        raise SystemExit("needs ../shared/data")
    whole, system, tools = built
    messages = whole[:2000]
    while messages[-1]["role"] == "assistant":
        messages.pop()
    total = fit(messages, budget=10**12, system=system, tools=tools, format=fmt)
    return messages, system, tools, total.report.tokens_before // 5


def run_one(kind: str, fmt: str) -> None:
    """One call of ``kind`` (``fit`` or ``trim``) inside ``functools.reduce``, the frame
    callgrind is told to count in (everything before it is set up and warmed up)."""
    messages, system, tools, budget = _conversation(fmt)
    if kind == "fit":
        from windowfit import Fitter

        text = json.dumps(messages)
        Fitter().fit(json.loads(text), budget=budget, system=system, tools=tools, format=fmt)
        fresh = json.loads(text)

        def call(_: Any, m: Any) -> Any:
            return Fitter().fit(m, budget=budget, system=system, tools=tools, format=fmt)

        functools.reduce(call, [fresh], None)
        return
    from core import langchain_trim

    trim = langchain_trim(fmt, messages, system, tools, budget)
    trim()  # warmed up
    functools.reduce(lambda _, __: trim(), [0], None)


def count(kind: str, fmt: str) -> tuple[int, int]:
    """(all instructions, those in the estimate's C functions) of one call."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--one",
                kind,
                fmt,
            ],
            check=True,
            capture_output=True,
        )
        report = subprocess.run(
            ["callgrind_annotate", "--threshold=100", str(out)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    total = estimate = 0
    for line in report.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+)", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if m.group(2) == "PROGRAM":
            total = n
        elif any(name in m.group(2) for name in ESTIMATE_FUNCTIONS):
            estimate += n
    return total, estimate


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        run_one(sys.argv[2], sys.argv[3])
        return 0
    if shutil.which("valgrind") is None:
        print("needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 1
    print("| format | trim_messages | cold fit | of it, the estimate's C passes | trim / fit |")
    print("|---|---:|---:|---:|---:|")
    for fmt in ("anthropic", "openai"):
        trim, _ = count("trim", fmt)
        fit, estimate = count("fit", fmt)
        share = f"{estimate / 1e6:,.0f}M ({estimate / fit:.0%})"
        print(f"| {fmt} | {trim / 1e6:,.0f}M | {fit / 1e6:,.0f}M | {share} | {trim / fit:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
