"""Core benchmark: estimate throughput, fit latency and growth, and a peer, side by side.

Run:  .venv/bin/python benchmarks/core.py            (or: make bench)

Prints figures, asserts nothing. Every comparison is measured in the same run (these
machines are noisy); each timing is the best of several repeats. Texts come from
../shared/data/texts when present (real prose in eight scripts, Python code, emoji), else
from generated text.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _speed import compared
from windowfit import estimate_tokens, fit

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "texts"
TEXTS = {
    "ascii (English prose)": "en_stoker-dracula.txt",
    "ascii (Python code)": "code_python_sweagent-agent.txt",
    "Cyrillic (Russian)": "ru_tolstoy-voyna-i-mir-vol1.txt",
    "Greek": "el_bible-vamvas.txt",
    "Arabic": "ar_bible-van-dyck.txt",
    "Devanagari (Hindi)": "hi_bible-hindi-ov.txt",
    "Han (Chinese)": "zh_xiyouji.txt",
    "Kana + Han (Japanese)": "ja_soseki-wagahai-neko.txt",
    "Hangul (Korean)": "ko_bible-gaeyeok-hangeul-part1.txt",
    "emoji test file": "emoji_unicode-emoji-test.txt",
}


def best(fn: Callable[[], Any], repeat: int = 5) -> float:
    """Best wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _texts() -> dict[str, str]:
    if DATA.is_dir():
        texts = {k: (DATA / f).read_text(encoding="utf-8")[:300_000] for k, f in TEXTS.items()}
        code = texts["ascii (Python code)"]
        texts["pure ASCII (the code, 19 non-ASCII removed)"] = code.encode(
            "ascii", "ignore"
        ).decode()
        return texts
    from windowfit.demo import chapter_text

    return {
        "ascii (generated English)": chapter_text(1, 50_000, "en"),
        "Cyrillic (generated Russian)": chapter_text(1, 50_000, "ru"),
    }


def bench_estimates() -> list[dict[str, Any]]:
    try:
        from windowfit.tokenizers import load_backend

        encoders = {name: load_backend(name).encoding for name in ("o200k", "cl100k")}  # type: ignore[attr-defined]
    except Exception as exc:  # a benchmark reports what is missing and goes on
        print(f"  (tiktoken not available: {exc}; estimates timed alone)")
        encoders = {}
    rows = []
    for label, text in _texts().items():
        ours = best(lambda t=text: estimate_tokens(t))
        row: dict[str, Any] = {"text": label, "chars": len(text), "windowfit_ms": ours * 1e3}
        for name, enc in encoders.items():
            theirs = best(lambda t=text, e=enc: e.encode_ordinary(t), repeat=3)
            row[f"{name}_ms"] = theirs * 1e3
            row[f"speedup_{name}"] = theirs / ours
        rows.append(row)
    return rows


def conversation(n_messages: int, tokens: int) -> list[dict[str, Any]]:
    """A coding-agent-like run: user turns every 25 rounds, tool results of varying size,
    about ``tokens`` tokens in ``n_messages`` messages (Anthropic format)."""
    base = "def handler(request):\n    return render(request, 'page.html', {'items': items})\n"
    per_round = max(40, int(tokens / (n_messages / 2) * 4))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    i = 0
    while len(messages) < n_messages:
        if i % 25 == 24:
            messages.append({"role": "assistant", "content": "Progress: " + base * 4})
            messages.append({"role": "user", "content": "Good. Now check the other module."})
        else:
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "bash",
                            "input": {"command": f"cat src/file_{i}.py"},
                        },
                    ],
                }
            )
            size = per_round + (i * 37) % 500
            body = (base * (size // len(base) + 1))[:size]
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": body}],
                }
            )
        i += 1
    return messages if messages[-1]["role"] == "user" else messages[:-1]


def _fresh(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(json.dumps(messages))
    return out


def bench_fit(n_messages: int = 2000, tokens: int = 1_000_000) -> dict[str, Any]:
    messages = conversation(n_messages, tokens)
    total = fit(messages, budget=10**12).report.tokens_before
    out: dict[str, Any] = {"messages": len(messages), "tokens": total, "budgets": []}
    for fraction in (0.2, 0.5):
        budget = int(total * fraction)
        copies = [_fresh(messages) for _ in range(3)]
        cold = min(best(lambda c=c, b=budget: fit(c, budget=b), repeat=1) for c in copies)
        warm = best(lambda c=copies[0], b=budget: fit(c, budget=b), repeat=20)
        stage = fit(copies[0], budget=budget).report.stage
        # An agent's next step: the same conversation plus one new tool round.
        step_times = []
        grown = list(copies[1])
        fit(grown, budget=budget)
        for k in range(10):
            grown = [*grown, *conversation(3, 1500)[1:]]
            grown[-2]["content"][1]["id"] = grown[-1]["content"][0]["tool_use_id"] = f"n{k}"
            start = time.perf_counter()
            fit(grown, budget=budget)
            step_times.append(time.perf_counter() - start)
        out["budgets"].append(
            {
                "budget": budget,
                "stage": stage,
                "cold_ms": cold * 1e3,
                "warm_ms": warm * 1e3,
                "next_step_ms": statistics.median(step_times) * 1e3,
            }
        )
    return out


def bench_growth() -> list[dict[str, Any]]:
    rows = []
    for n in (500, 1000, 2000, 4000, 8000):
        messages = conversation(n, n * 500)
        total = fit(messages, budget=10**12).report.tokens_before
        copies = [_fresh(messages) for _ in range(3)]
        budget = total // 3
        cold = min(best(lambda c=c, b=budget: fit(c, budget=b), repeat=1) for c in copies)
        warm = best(lambda c=copies[0], b=budget: fit(c, budget=b), repeat=10)
        rows.append(
            {
                "messages": len(messages),
                "tokens": total,
                "cold_ms": cold * 1e3,
                "warm_ms": warm * 1e3,
                "cold_us_per_message": cold * 1e6 / len(messages),
            }
        )
    return rows


def bench_langchain(n_messages: int = 2000, tokens: int = 1_000_000) -> dict[str, Any] | None:
    try:
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, trim_messages
        from langchain_core.messages.utils import count_tokens_approximately
    except ImportError:
        return None
    messages = conversation(n_messages, tokens)
    converted: list[Any] = []
    for m in messages:
        content = m["content"]
        if m["role"] == "user" and isinstance(content, list):
            block = content[0]
            converted.append(
                ToolMessage(content=block["content"], tool_call_id=block["tool_use_id"])
            )
        elif m["role"] == "user":
            converted.append(HumanMessage(content=content))
        elif isinstance(content, list):
            call = content[1]
            converted.append(
                AIMessage(
                    content=content[0]["text"],
                    tool_calls=[{"id": call["id"], "name": call["name"], "args": call["input"]}],
                )
            )
        else:
            converted.append(AIMessage(content=content))
    total = fit(messages, budget=10**12).report.tokens_before
    budget = total // 5

    def trim() -> Any:
        return trim_messages(
            converted,
            max_tokens=budget,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on="human",
            allow_partial=False,
        )

    theirs = best(trim, repeat=3)
    copies = [_fresh(messages) for _ in range(3)]
    cold = min(best(lambda c=c: fit(c, budget=budget), repeat=1) for c in copies)
    warm = best(lambda: fit(copies[0], budget=budget), repeat=10)
    return {
        "budget": budget,
        "langchain_ms": theirs * 1e3,
        "windowfit_cold_ms": cold * 1e3,
        "windowfit_warm_ms": warm * 1e3,
        "speedup_cold": theirs / cold,
        "speedup_warm": theirs / warm,
        "kept_by_langchain": len(trim()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}", file=sys.stderr)
    print("timing estimates ...", file=sys.stderr, flush=True)
    estimates = bench_estimates()
    print("timing fit ...", file=sys.stderr, flush=True)
    latency = bench_fit()
    print("timing growth ...", file=sys.stderr, flush=True)
    growth = bench_growth()
    print("timing langchain trim_messages ...", file=sys.stderr, flush=True)
    peer = bench_langchain()
    if args.json:
        print(
            json.dumps(
                {"estimates": estimates, "fit": latency, "growth": growth, "langchain": peer},
                indent=2,
            )
        )
        return 0
    print("\n## Estimate throughput (300k characters of each text; best of several)\n")
    has_tk = estimates and "o200k_ms" in estimates[0]
    head = "| text | windowfit ms | o200k ms | cl100k ms | windowfit vs o200k | vs cl100k |"
    print(head if has_tk else "| text | windowfit ms |")
    print("|---|---:|---:|---:|---:|---:|" if has_tk else "|---|---:|")
    for r in estimates:
        if has_tk:
            print(
                f"| {r['text']} | {r['windowfit_ms']:.2f} | {r['o200k_ms']:.1f} | "
                f"{r['cl100k_ms']:.1f} | {compared(r['o200k_ms'], r['windowfit_ms'], 0)} | "
                f"{compared(r['cl100k_ms'], r['windowfit_ms'], 0)} |"
            )
        else:
            print(f"| {r['text']} | {r['windowfit_ms']:.2f} |")
    print(f"\n## fit on {latency['messages']:,} messages, {latency['tokens']:,} tokens\n")
    print("cold: fresh message objects; warm: the same list again; next step: the list plus one")
    print("new tool round (median of 10 steps)\n")
    print("| budget | stage | cold ms | warm ms | next step ms |\n|---:|---:|---:|---:|---:|")
    for b in latency["budgets"]:
        print(
            f"| {b['budget']:,} | {b['stage']} | {b['cold_ms']:.1f} | {b['warm_ms']:.2f} | "
            f"{b['next_step_ms']:.2f} |"
        )
    print("\n## Growth (budget = a third of the conversation)\n")
    print("| messages | tokens | cold ms | cold us/message | warm ms |\n|---:|---:|---:|---:|---:|")
    for g in growth:
        print(
            f"| {g['messages']:,} | {g['tokens']:,} | {g['cold_ms']:.1f} | "
            f"{g['cold_us_per_message']:.1f} | {g['warm_ms']:.2f} |"
        )
    per_message = [g["cold_us_per_message"] for g in growth]
    print(
        f"\ncold time per message: min {min(per_message):.1f} us, max {max(per_message):.1f} us,"
        f" spread {max(per_message) / min(per_message):.2f}x (linear growth keeps this flat; "
        f"median {statistics.median(per_message):.1f} us)"
    )
    if peer is None:
        print("\nlangchain_core is not installed: peer comparison skipped")
    else:
        print(
            "\n## langchain_core.messages.trim_messages (approximate counter), same conversation\n"
        )
        print(
            f"budget {peer['budget']:,}: trim_messages {peer['langchain_ms']:.1f} ms; windowfit "
            f"cold {peer['windowfit_cold_ms']:.1f} ms "
            f"({compared(peer['langchain_ms'], peer['windowfit_cold_ms'])}), "
            f"warm {peer['windowfit_warm_ms']:.2f} ms "
            f"({compared(peer['langchain_ms'], peer['windowfit_warm_ms'], 0)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
