"""Core benchmark: estimate throughput, fit latency and growth, and a peer, side by side.

Run:  .venv/bin/python benchmarks/core.py            (or: make bench)

Prints figures, asserts nothing. Every comparison is measured in the same run (these
machines are noisy); each timing is the best of several repeats. Texts come from
../shared/data/texts when present (real prose in eight scripts, Python code, emoji), else
from generated text.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _speed import compared
from windowfit import Fitter, WindowfitError, estimate_tokens, fit

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
        cold = min(best(lambda c=c, b=budget: Fitter().fit(c, budget=b), repeat=1) for c in copies)
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
    cold = min(best(lambda c=c: Fitter().fit(c, budget=budget), repeat=1) for c in copies)
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


def cpu(fn: Callable[[], Any]) -> float:
    """CPU time of one call, in seconds: on a machine shared with other work, wall time
    also counts the time other processes held the cores."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def langchain_trim(
    fmt: str, messages: list[dict[str, Any]], system: Any, tools: Any, budget: int
) -> Callable[[], Any]:
    """One call of ``langchain_core.messages.trim_messages`` on ``messages``, as its docs
    configure it for chat history (its approximate counter, keep the last messages, start
    on a human one). The messages are converted to LangChain's once, here, so that only
    the trimming is timed (the conversion is windowfit.replay's)."""
    from langchain_core.messages import trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    from windowfit.logs import Run
    from windowfit.replay.conversation import Conversation
    from windowfit.replay.langchain_trim import _convert_run
    from windowfit.sizing import Sizer

    run = Run("bench", "bench", "bench", fmt, system, tools, messages, [], None, "agent")  # type: ignore[arg-type]
    converted = [part[2] for part in _convert_run(Conversation(run, Sizer()))["parts"]]

    def trim() -> Any:
        return trim_messages(
            converted,
            max_tokens=budget,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on="human",
            end_on=("human", "tool"),
            include_system=True,
            allow_partial=False,
        )

    return trim


#: The model of each real run's source (Claude Code; mini-swe-agent on DeepSeek).
MODEL_OF_FORMAT = {"anthropic": "claude-sonnet-4-5", "openai": "deepseek-chat"}


def bench_real(n_messages: int = 2000, repeat: int = 9) -> list[dict[str, Any]]:
    """fit against ``trim_messages`` on conversations built from the real runs (both
    formats), repetitions interleaved so that both see the same machine load; each
    figure is the median CPU time (``process_time``) of ``repeat`` rounds.

    cold: a new :class:`windowfit.Fitter` and freshly parsed JSON (first sight, a
    proxy's first request); copy: freshly parsed JSON of a conversation the Fitter has
    seen (a proxy's next request); warm: the same objects again; next step: one more
    round (its messages taken from the run, so sizes are real); model: cold, with the
    run's model named (what ``wrap`` and the proxy count with: that family's vocabulary
    alone, where the default without a model counts by all five); seed: cold, counting
    with the write-up's rule instead of the default estimate."""
    from realconv import real_conversation
    from windowfit import Fitter
    from windowfit.profiles import estimator_for

    try:
        import langchain_core  # noqa: F401
    except ImportError:
        have_langchain = False
    else:
        have_langchain = True
    rows = []
    for fmt in ("anthropic", "openai"):
        built = real_conversation(fmt, n_messages + 40)
        if built is None:
            continue
        whole, system, tools = built
        messages = whole[:n_messages]
        while messages[-1]["role"] == "assistant":
            messages.pop()
        total = fit(messages, budget=10**12, system=system, tools=tools, format=fmt)
        budget = total.report.tokens_before // 5
        trim = langchain_trim(fmt, messages, system, tools, budget) if have_langchain else None

        times: dict[str, list[float]] = {
            "trim": [],
            "cold": [],
            "copy": [],
            "warm": [],
            "step": [],
            "model": [],
            "seed": [],
        }
        step = whole[len(messages) : len(messages) + 2]
        seed = estimator_for(family="seed")
        for _ in range(repeat):
            if trim is not None:
                times["trim"].append(cpu(trim))
            fitter = Fitter()
            fresh, again = _fresh(messages), _fresh(messages)
            args = {"budget": budget, "system": system, "tools": tools, "format": fmt}
            grown = [*again, *_fresh(step)] if len(step) == 2 else again
            for name, batch in (("cold", fresh), ("copy", again), ("warm", again), ("step", grown)):
                # (the next round may not pair up with a cut: then there is no figure for it)
                with contextlib.suppress(WindowfitError):
                    times[name].append(cpu(lambda f=fitter, m=batch, a=args: f.fit(m, **a)))
            fresh = _fresh(messages)
            model = MODEL_OF_FORMAT[fmt]
            times["model"].append(
                cpu(lambda m=fresh, a=args, w=model: Fitter().fit(m, model=w, **a))
            )
            fresh = _fresh(messages)
            times["seed"].append(
                cpu(lambda m=fresh, a=args, e=seed: Fitter().fit(m, estimator=e, **a))  # type: ignore[arg-type]
            )
        row: dict[str, Any] = {
            "format": fmt,
            "source": "real runs",
            "messages": len(messages),
            "tokens": total.report.tokens_before,
            "budget": budget,
        }
        for name, values in times.items():
            if values:
                row[f"{name}_ms"] = statistics.median(values) * 1e3
        rows.append(row)
    return rows


def bench_memory(conversations: int = 100, tokens: int = 1_000_000) -> dict[str, Any]:
    """What stays allocated after fitting ``conversations`` distinct ~1M-token
    conversations with the default Fitter (``windowfit.fit``) and dropping them."""
    import gc
    import tracemalloc

    import windowfit.fitting as fitting_module

    fitting_module._DEFAULT_FITTER = None  # a fresh process's default Fitter
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    peak_kept = 0
    for k in range(conversations):
        messages = conversation(2000, tokens)
        messages[0] = {"role": "user", "content": f"Task {k}: fix the failing test."}
        fit(messages, budget=tokens // 3)
        del messages
        if k % 10 == 9:
            gc.collect()
            peak_kept = max(peak_kept, tracemalloc.get_traced_memory()[0] - start)
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    from windowfit import DEFAULT_MAX_BYTES

    return {
        "conversations": conversations,
        "kept_mb": kept / 2**20,
        "peak_kept_mb": peak_kept / 2**20,
        "bound_mb": DEFAULT_MAX_BYTES / 2**20,
    }


def bench_import(repeat: int = 5) -> dict[str, float]:
    """``import windowfit`` in a new process (best of ``repeat``), against bare Python."""
    import subprocess

    def run(code: str) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        return min(times)

    bare = run("pass")
    with_windowfit = run("import windowfit")
    return {
        "python_ms": bare * 1e3,
        "windowfit_ms": with_windowfit * 1e3,
        "import_ms": (with_windowfit - bare) * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--real", action="store_true", help="only fit against trim_messages on the real runs"
    )
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}", file=sys.stderr)
    if args.real:
        print("timing fit on real runs against trim_messages ...", file=sys.stderr, flush=True)
        real = bench_real()
        if args.json:
            print(json.dumps({"real": real}, indent=2))
        else:
            print_real(real)
        return 0
    print("timing estimates ...", file=sys.stderr, flush=True)
    estimates = bench_estimates()
    print("timing fit ...", file=sys.stderr, flush=True)
    latency = bench_fit()
    print("timing growth ...", file=sys.stderr, flush=True)
    growth = bench_growth()
    print("timing langchain trim_messages ...", file=sys.stderr, flush=True)
    peer = bench_langchain()
    print("timing fit on real runs against trim_messages ...", file=sys.stderr, flush=True)
    real = bench_real()
    print("measuring retained memory (100 conversations) ...", file=sys.stderr, flush=True)
    memory = bench_memory()
    print("timing import ...", file=sys.stderr, flush=True)
    imports = bench_import()
    if args.json:
        print(
            json.dumps(
                {
                    "estimates": estimates,
                    "fit": latency,
                    "growth": growth,
                    "langchain": peer,
                    "real": real,
                    "memory": memory,
                    "import": imports,
                },
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
            f"({compared(peer['langchain_ms'], peer['windowfit_warm_ms'])})"
        )
    print_real(real)
    print(
        f"\n## Memory\n\nafter fitting {memory['conversations']} distinct ~1M-token "
        f"conversations with windowfit.fit and dropping them: {memory['kept_mb']:.1f} MB "
        f"still allocated (at most {memory['peak_kept_mb']:.1f} MB along the way; the "
        f"default Fitter's bound is {memory['bound_mb']:.0f} MB)"
    )
    print(
        f"\n## Import\n\n`import windowfit` in a new process: {imports['import_ms']:.0f} ms "
        f"beyond bare Python ({imports['python_ms']:.0f} ms)"
    )
    return 0


def print_real(real: list[dict[str, Any]]) -> None:
    print("\n## fit against trim_messages on conversations built from the real runs\n")
    if not real:
        print("../shared/data is not here: skipped (it needs the real runs)")
        return
    print("cold: new Fitter, freshly parsed JSON; copy: freshly parsed JSON the Fitter has")
    print("seen; warm: the same objects; next step: one more round; model: cold, the run's model")
    print("named (claude-sonnet-4-5, deepseek-chat: what wrap and the proxy count with); seed:")
    print("cold, counting with the write-up's rule. Median CPU time (process_time) of 9")
    print("interleaved rounds.\n")
    print(
        "| format | messages | tokens | trim_messages ms | cold ms | copy ms | warm ms | "
        "next step ms | model cold ms | seed cold ms | trim / cold | trim / model cold | "
        "trim / seed cold |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in real:
        trim_ms = r.get("trim_ms", 0.0)
        print(
            f"| {r['format']} | {r['messages']:,} | {r['tokens']:,} | {trim_ms:.1f} | "
            f"{r['cold_ms']:.1f} | {r['copy_ms']:.1f} | {r['warm_ms']:.1f} | "
            f"{r.get('step_ms', float('nan')):.1f} | {r['model_ms']:.1f} | {r['seed_ms']:.1f} | "
            f"{trim_ms / r['cold_ms']:.2f}x | {trim_ms / r['model_ms']:.2f}x | "
            f"{trim_ms / r['seed_ms']:.2f}x |"
        )


if __name__ == "__main__":
    sys.exit(main())
