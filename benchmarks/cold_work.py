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
call counted. ``python benchmarks/cold_work.py`` (both formats); ``--seed`` adds a column
for the same cold fit counting with the seed rule (``estimator_for(family="seed")``,
about free on ASCII), which is what reading, checking, folding and building cost when
the estimate costs next to nothing; ``--top N KIND FORMAT`` prints the N functions of
one call (``fit``, ``seed`` or ``trim``) that execute the most instructions themselves.
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
    """One call of ``kind`` (``fit``, ``seed`` or ``trim``) inside ``functools.reduce``,
    the frame callgrind is told to count in (everything before it is set up and warmed
    up). ``seed`` is ``fit`` counting with the seed rule (the budget stays the default
    estimate's, as in ``benchmarks/core.py --real``)."""
    messages, system, tools, budget = _conversation(fmt)
    if kind in ("fit", "seed"):
        from windowfit import Fitter
        from windowfit.profiles import default_estimator, estimator_for

        estimator = estimator_for(family="seed") if kind == "seed" else default_estimator()
        args = {"budget": budget, "system": system, "tools": tools, "format": fmt}
        text = json.dumps(messages)
        Fitter().fit(json.loads(text), estimator=estimator, **args)
        fresh = json.loads(text)

        def call(_: Any, m: Any) -> Any:
            return Fitter().fit(m, estimator=estimator, **args)

        functools.reduce(call, [fresh], None)
        return
    from core import langchain_trim

    trim = langchain_trim(fmt, messages, system, tools, budget)
    trim()  # warmed up
    functools.reduce(lambda _, __: trim(), [0], None)


def _annotate(kind: str, fmt: str) -> str:
    """``callgrind_annotate``'s report of one call of ``kind`` on ``fmt``."""
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
        return subprocess.run(
            ["callgrind_annotate", "--threshold=100", str(out)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout


def count(kind: str, fmt: str) -> tuple[int, int]:
    """(all instructions, those in the estimate's C functions) of one call."""
    total = estimate = 0
    for line in _annotate(kind, fmt).splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+)", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if m.group(2) == "PROGRAM":
            total = n
        elif any(name in m.group(2) for name in ESTIMATE_FUNCTIONS):
            estimate += n
    return total, estimate


def top(kind: str, fmt: str, n: int) -> list[tuple[int, str]]:
    """The ``n`` functions of one call that execute the most instructions themselves."""
    rows = []
    for line in _annotate(kind, fmt).splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if m:
            rows.append((int(m.group(1).replace(",", "")), m.group(2).strip()))
    return rows[: n + 1]  # the first is the whole call (PROGRAM TOTALS)


def main() -> int:
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--one":
        run_one(args[1], args[2])
        return 0
    if shutil.which("valgrind") is None:
        print("needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 1
    if len(args) == 4 and args[0] == "--top":
        for n, name in top(args[2], args[3], int(args[1])):
            print(f"{n:>13,} {name}")
        return 0
    seed = args == ["--seed"]
    head = "| format | trim_messages | cold fit | of it, the estimate's C passes | trim / fit |"
    print(head + (" seed-rule cold fit | trim / seed fit |" if seed else ""))
    print("|---|---:|---:|---:|---:|" + ("---:|---:|" if seed else ""))
    for fmt in ("anthropic", "openai"):
        trim, _ = count("trim", fmt)
        fit, estimate = count("fit", fmt)
        share = f"{estimate / 1e6:,.0f}M ({estimate / fit:.0%})"
        row = f"| {fmt} | {trim / 1e6:,.0f}M | {fit / 1e6:,.0f}M | {share} | {trim / fit:.2f}x |"
        if seed:
            seed_fit, _ = count("seed", fmt)
            row += f" {seed_fit / 1e6:,.1f}M | {trim / seed_fit:.2f}x |"
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
