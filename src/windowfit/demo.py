"""``windowfit demo``: the write-up's three failures, before and after, offline.

Each scenario of :mod:`windowfit.sim` runs twice on the simulated provider (a hard limit
counted with a real tokenizer, Anthropic's "prompt is too long" error, prompt-cache
accounting): *before* with the old system (trimming only at user messages, chars/4
estimates, rejected requests retried, no safety net in the instructions) and *after* with
windowfit. Progress goes to stderr while it runs; the tables (or, with ``--json``, one
JSON document) go to stdout.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from .agent import AgentEvent
from .sim import SCENARIOS, Figures, ScenarioConfig, Scenarios, TextSource, generated_text

__all__ = ["chapter_text", "collect", "render", "run_demo"]


def chapter_text(number: int, words: int, language: str = "ru", seed: int = 0) -> str:
    """A deterministic chapter of generated prose of about ``words`` words (see
    :func:`windowfit.sim.generated_text`)."""
    chars_per_word = 7 if language == "ru" else 6
    key = f"chapter-{number}" if not seed else f"seed-{seed}-chapter-{number}"
    return generated_text(language, key, words * chars_per_word)


# --------------------------------------------------------------------------------------
# Progress


class _Progress:
    """Progress on stderr: a live line on a terminal, a line per run otherwise."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.live = bool(stream is not None and stream.isatty())
        self.requests = self.rejected = self.ended = 0
        self.last = 0.0
        self.label = ""

    def write(self, text: str) -> None:
        if self.stream is None:
            return
        if self.live:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, scenario: str, mode: str) -> None:
        self.requests = self.rejected = self.ended = 0
        self.label = f"{scenario} ({mode})"
        if not self.live:
            self.write(f"  running {self.label} ...")

    def event(self, scenario: str, mode: str, event: AgentEvent) -> None:
        if event.kind == "request":
            self.requests += 1
        elif event.kind == "error":
            self.rejected += 1
        elif event.kind == "ended":
            self.ended += 1
        if not self.live or self.stream is None:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and event.kind != "ended":
            return
        self.last = now
        self.stream.write(
            f"\r\033[K  {self.label}: {self.requests} requests, {self.rejected} rejected, "
            f"{self.ended} agents done"
        )
        self.stream.flush()

    def done(self, scenario: str, mode: str, figures: Figures) -> None:
        self.write(
            f"  {scenario} ({mode}): {figures.finished} of {figures.agents} finished, "
            f"{figures.rejected_requests} requests rejected, {figures.seconds:.1f} s"
        )


# --------------------------------------------------------------------------------------
# Running


def collect(
    config: ScenarioConfig | None = None,
    *,
    texts: TextSource | None = None,
    history: str | Path | None = None,
    scenarios: Sequence[str] = SCENARIOS,
    progress: TextIO | None = None,
) -> dict[str, Any]:
    """Run the scenarios before and after; the JSON document ``windowfit demo --json``
    prints."""
    config = config or ScenarioConfig()
    show = _Progress(progress)
    started = time.perf_counter()
    document: dict[str, Any] = {
        "tokenizer": config.tokenizer,
        "budget": config.budget,
        "hard_limit": config.hard_limit,
        "config": asdict(config),
        "scenarios": {},
    }
    with tempfile.TemporaryDirectory(prefix="windowfit-demo-") as workspace:
        runner = Scenarios(workspace, config, texts=texts, history=history, on_event=show.event)
        document["texts"] = runner.texts.name
        for scenario in scenarios:
            entry: dict[str, Any] = {}
            if scenario == "russian":
                entry.update(runner.russian_chapter())
            for mode in ("before", "after"):
                show.start(scenario, mode)
                figures = runner.run(scenario, mode)
                show.done(scenario, mode, figures)
                entry[mode] = figures.to_dict()
            group = "library" if scenario == "subagents" else "chapters"
            tokens = [runner.tokenizer.estimate(runner.text(p)) for p in runner.files(group)]
            entry["file_tokens"] = {"files": len(tokens), "total": sum(tokens)}
            document["scenarios"][scenario] = entry
        wrapped: set[str] = getattr(runner.texts, "wrapped", set())
        if wrapped:
            document["texts"] += f" (repeated for: {', '.join(sorted(wrapped))})"
    document["seconds"] = round(time.perf_counter() - started, 1)
    return document


# --------------------------------------------------------------------------------------
# The tables


Row = tuple[str, str, str]


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _m(value: float) -> str:
    return f"{value / 1e6:.2f}M"


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _rows(lines: list[str], rows: list[Row], heads: tuple[str, str]) -> None:
    width = max(len(r[0]) for r in rows) + 2
    col = max(14, *(len(r[1]) + 2 for r in rows), len(heads[0]) + 2)
    lines.append(f"  {'':<{width}}{heads[0]:<{col}}{heads[1]}")
    for label, before, after in rows:
        lines.append(f"  {label:<{width}}{before:<{col}}{after}")


def _row(
    label: str, show: Callable[[dict[str, Any]], str], b: dict[str, Any], a: dict[str, Any]
) -> Row:
    return (label, show(b), show(a))


def _common(b: dict[str, Any], a: dict[str, Any], files: str) -> list[Row]:
    return [
        _row(
            "requests (rejected)",
            lambda x: f"{_n(x['requests'])} ({_n(x['rejected_requests'])})",
            b,
            a,
        ),
        _row(files, lambda x: f"{_n(x['files_read'])} of {_n(x['files_total'])}", b, a),
        _row("largest request, real tokens", lambda x: _n(x["peak_tokens"]), b, a),
        _row("results cleared", lambda x: _n(x["cleared"]), b, a),
        _row(
            "clearing events / cache breaks",
            lambda x: f"{x['clearing_events']} / {x['cache_breaks']}",
            b,
            a,
        ),
        _row("prompt-cache read share", lambda x: _pct(x["cache_read_share"]), b, a),
        _row("input cost, base-price tokens", lambda x: _m(x["cost"]), b, a),
    ]


def _how_to_read(b: dict[str, Any], a: dict[str, Any], unit: str) -> str:
    """One line under a before/after table. When before was stopped early the two columns
    cover different amounts of work, so totals do not compare and the cost per file read
    does; and clearing (which breaks the cache) is why the cache read share can be lower
    after."""
    done_b, done_a, total = b["files_read"], a["files_read"], a["files_total"]
    per_b = round(b["cost"] / max(1, done_b))
    per_a = round(a["cost"] / max(1, done_a))
    line = (
        f"  how to read: before read {done_b} of {total} {unit}s, after {done_a}, so the "
        f"totals cover different work; per {unit} read, input cost is {_n(per_b)} before and "
        f"{_n(per_a)} after"
    )
    if per_a > per_b:
        line += " (each later request carries every result still kept)"
    if a["cache_read_share"] < b["cache_read_share"]:
        line += (
            f"; the cache read share is lower after because each of its "
            f"{a['clearing_events']} clearing events rewrites the request from that point"
        )
    return line + "."


def render(document: dict[str, Any]) -> str:
    """The before/after tables of a :func:`collect` document."""
    lines = [
        "windowfit demo: the write-up's three failures, before (the old system) and after "
        "(windowfit)",
        f"Simulated provider: hard limit {_n(document['hard_limit'])} tokens, counted with the "
        f"real {document['tokenizer']} tokenizer; budget {_n(document['budget'])} tokens.",
        f"Files read: {document['texts']}.",
        "Before: trimming only at user messages, chars/4 estimates, rejected requests "
        "retried, no safety net.",
    ]
    scenarios = document["scenarios"]
    if "subagents" in scenarios:
        entry = scenarios["subagents"]
        b, a = entry["before"], entry["after"]
        per = entry["file_tokens"]["total"] / max(1, b["agents"])
        lines += [
            "",
            f"subagents: a parent starts {b['agents']} sub-agents at once; each is asked to read "
            f"{b['files_total'] // max(1, b['agents'])} long files, {_m(per)} real tokens in all",
        ]
        rows = [
            _row("sub-agents finished", lambda x: f"{x['finished']} of {x['agents']}", b, a),
            _row("sub-agents rejected", lambda x: f"{x['rejected_agents']} of {x['agents']}", b, a),
            *_common(b, a, "files read"),
        ]
        _rows(lines, rows, ("before", "after"))
        lines.append(_how_to_read(b, a, "file"))
        lines += [f"  the parent, {m}: {entry[m]['lead']}" for m in ("before", "after")]
    if "chapters" in scenarios:
        entry = scenarios["chapters"]
        b, a = entry["before"], entry["after"]
        per = entry["file_tokens"]["total"] / max(1, entry["file_tokens"]["files"])
        lines += [
            "",
            f"chapters: one sub-agent is asked to read {b['files_total']} long Russian chapters "
            f"(~{_n(round(per))} real tokens each)",
        ]
        _rows(lines, _common(b, a, "chapters read"), ("before", "after"))
        lines.append(_how_to_read(b, a, "chapter"))
        lines += [f"  the sub-agent, {m}: {entry[m]['answer']}" for m in ("before", "after")]
    if "russian" in scenarios:
        entry = scenarios["russian"]
        b, a = entry["before"], entry["after"]
        real = max(1, entry["real_tokens"])
        lines += [
            "",
            f"russian: one Russian chapter of {_n(entry['chars'])} characters is "
            f"{_n(entry['real_tokens'])} real tokens ({entry['tokenizer']}); chars/4 says "
            f"{_n(entry['estimate_chars4'])} ({entry['estimate_chars4'] / real:.2f}x), the "
            f"script-aware rule {_n(entry['estimate_script'])} "
            f"({entry['estimate_script'] / real:.2f}x), windowfit's {entry['profile']} estimate "
            f"{_n(entry['estimate_profile'])} ({entry['estimate_profile'] / real:.2f}x).",
            f"A person asks an agent for {b['files_total']} chapters, a few per turn; the old "
            "system trims whole turns by its estimate:",
        ]
        rows = [
            _row("largest estimate", lambda x: _n(x["peak_estimate"]), b, a),
            _row(
                "real size of the largest request estimated within budget",
                lambda x: _n(x["largest_within_budget"]),
                b,
                a,
            ),
            _row(
                "requests above budget, real tokens", lambda x: _n(x["over_budget_requests"]), b, a
            ),
            _row("largest request, real tokens", lambda x: _n(x["peak_tokens"]), b, a),
            _row(
                "requests (rejected)", lambda x: f"{x['requests']} ({x['rejected_requests']})", b, a
            ),
            _row("chapters read", lambda x: f"{x['files_read']} of {x['files_total']}", b, a),
            _row("input cost, base-price tokens", lambda x: _m(x["cost"]), b, a),
        ]
        _rows(lines, rows, ("before: chars/4", f"after: {a['estimator']}"))
        within = "every request was" if b["peak_estimate"] <= b["budget"] else "most were"
        lines.append(
            f"  how to read: both read {a['files_read']} of {a['files_total']} chapters; by "
            f"chars/4 {within} within budget, but {_n(b['over_budget_requests'])} were over it "
            f"in real tokens, so before sends (and pays for) more: {_m(b['cost'])} against "
            f"{_m(a['cost'])}."
        )
    lines += [
        "",
        "Real tokens are the simulator's count; estimates are the shaper's. Cost: input "
        "tokens priced as cache reads (0.1x) and writes (1.25x);",
        "rejected requests cost nothing. A clearing event changes the start of the request, "
        "so the provider re-reads it at the write price.",
        f"Took {document['seconds']} s.",
    ]
    return "\n".join(lines)


def run_demo(
    as_json: bool = False,
    *,
    config: ScenarioConfig | None = None,
    texts: TextSource | None = None,
    history: str | Path | None = None,
    scenarios: Sequence[str] = SCENARIOS,
    quiet: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the demo and print the tables (or JSON); the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    if not quiet:
        print("windowfit demo: running the scenarios (progress below) ...", file=err, flush=True)
    document = collect(
        config, texts=texts, history=history, scenarios=scenarios, progress=None if quiet else err
    )
    if as_json:
        out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    else:
        out.write(render(document) + "\n")
    return 0
