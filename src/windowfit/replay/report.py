"""Tables of a replay, as plain text (the command line) or Markdown (benchmarks)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .engine import PolicyStats, ReplayReport

__all__ = [
    "POLICY_DROP_ORDER",
    "SOURCE_NAMES",
    "Table",
    "frontier",
    "policy_table",
    "runs_table",
    "text_report",
]

#: How each run kind is called in reports.
SOURCE_NAMES = {
    "mini-swe-agent": "mini-swe-agent",
    "claude-code": "Claude Code sessions",
    "claude-code-subagent": "Claude Code sub-agents",
    "tau-bench": "tau-bench",
    "swe-agent": "SWE-agent",
    "anthropic": "Anthropic message lists",
    "openai": "OpenAI message lists",
    "codex": "Codex CLI sessions",
}


@dataclass
class Table:
    """Rows of cells under headers; the first column is left-aligned, the rest right."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add(self, cells: Sequence[str]) -> None:
        self.rows.append(list(cells))

    def text(self, indent: str = "  ") -> str:
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

        def line(cells: Sequence[str]) -> str:
            parts = [
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ]
            return (indent + "  ".join(parts)).rstrip()

        return "\n".join([line(self.headers), *(line(r) for r in self.rows)])

    def width(self, indent: str = "  ") -> int:
        """The length of the longest line :meth:`text` gives."""
        return max(len(line) for line in self.text(indent).splitlines())

    def without(self, columns: Sequence[str]) -> Table:
        """The same table without the named columns."""
        keep = [i for i, h in enumerate(self.headers) if h not in columns]
        return Table([self.headers[i] for i in keep], [[r[i] for i in keep] for r in self.rows])

    def narrowed(
        self, width: int | None, drop: Sequence[str], indent: str = "  "
    ) -> tuple[Table, list[str]]:
        """The table without as few of the ``drop`` columns (taken in that order) as it
        takes to fit ``width`` characters (``None``: every column), and the columns left
        out. A table that cannot fit even without all of them is returned as narrow as
        that."""
        table, dropped = self, []
        for name in drop:
            if width is None or table.width(indent) <= width:
                break
            if name in table.headers:
                table = table.without([name])
                dropped.append(name)
        return table, dropped

    def markdown(self) -> str:
        head = "| " + " | ".join(self.headers) + " |"
        rule = "|" + "|".join(["---", *["---:"] * (len(self.headers) - 1)]) + "|"
        body = ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join([head, rule, *body])


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _cost(value: float, dollars: bool) -> str:
    if dollars:
        return f"${value:,.2f}"
    if value >= 1e6:
        return f"{value / 1e6:,.2f}M"
    return f"{value:,.0f}"


def policy_table(
    totals: Mapping[str, PolicyStats],
    report: ReplayReport,
    *,
    baseline: str = "raw",
    compact: bool = False,
) -> Table:
    """One row per policy. ``compact`` keeps the columns the benchmark tables show."""
    pricing, price = report.config.pricing, report.config.price_per_mtok
    base = totals.get(baseline)
    base_cost = base.cost(pricing) if base is not None and base.sent else None
    dollars = price is not None
    if compact:
        headers = [
            "policy",
            "cost x raw",
            "intact (mean)",
            "intact (last)",
            "rejected",
            "refused",
            "over budget",
            "violations",
            "breaks",
            "resent/break",
            "cache read",
        ]
    else:
        headers = [
            "policy",
            "requests",
            "refused",
            "over budget",
            "rejected",
            "peak",
            "mean",
            "cost cached",
            "x raw",
            "uncached",
            "cache read",
            "breaks",
            "resent/break",
            "intact last",
            "intact mean",
            "malformed",
        ]
    table = Table(headers)
    for label, stats in totals.items():
        d = stats.to_dict(pricing, price)
        ratio = stats.cost(pricing) / base_cost if base_cost else None
        if compact:
            table.add(
                [
                    label,
                    _ratio(ratio),
                    _share(d["visible_tool_tokens_mean"]),
                    _share(d["visible_tool_tokens_last"]),
                    f"{d['rejected']:,}",
                    f"{d['refused']:,}",
                    f"{d['over_budget']:,}",
                    f"{d['violations']:,}",
                    f"{d['breaks']:,}",
                    f"{d['resent_per_break']:,.0f}",
                    _share(d["cache_read_share"]),
                ]
            )
        else:
            table.add(
                [
                    label,
                    f"{d['requests']:,}",
                    f"{d['refused']:,}",
                    f"{d['over_budget']:,}",
                    f"{d['rejected']:,}",
                    f"{d['peak_tokens']:,}",
                    f"{d['mean_tokens']:,.0f}",
                    _cost(d["cost_cached"], dollars),
                    _ratio(ratio),
                    _cost(d["cost_uncached"], dollars),
                    _share(d["cache_read_share"]),
                    f"{d['breaks']:,}",
                    f"{d['resent_per_break']:,.0f}",
                    _share(d["visible_tool_tokens_last"]),
                    _share(d["visible_tool_tokens_mean"]),
                    f"{d['violations']:,}",
                ]
            )
    return table


def runs_table(report: ReplayReport, baseline: str = "raw") -> Table:
    """One row per run: its limits and each policy's cost against ``baseline`` and its
    rejected/refused counts (``cost x raw  rejected/refused``)."""
    pricing = report.config.pricing
    table = Table(["run", "calls", "budget", "limit", *report.policies])
    for run in report.runs:
        base = run.policies.get(baseline)
        base_cost = base.cost(pricing) if base is not None and base.sent else None
        cells = [run.name, f"{run.requests:,}", f"{run.budget:,}", f"{run.hard_limit:,}"]
        for label in report.policies:
            stats = run.policies[label]
            ratio = stats.cost(pricing) / base_cost if base_cost else None
            flags = ""
            if stats.rejected or stats.refused:
                flags = f" {stats.rejected}/{stats.refused}"
            if stats.violations:
                flags += f" !{stats.violations}"
            cells.append(_ratio(ratio) + flags)
        table.add(cells)
    return table


def frontier(totals: Mapping[str, PolicyStats], report: ReplayReport) -> list[str]:
    """The policies on the cost / intact-share frontier: no other policy is at most as
    expensive (with caching) with at least as large a mean intact share, and better in
    one of the two. Policies that were rejected, refused or malformed are left out."""
    pricing = report.config.pricing
    points: dict[str, tuple[float, float]] = {}
    for label, stats in totals.items():
        if stats.rejected or stats.violations or stats.refused or not stats.sent:
            continue
        points[label] = (stats.cost(pricing), stats.visible_mean or 0.0)
    out = []
    for label, (cost, share) in points.items():
        dominated = any(
            c <= cost and s >= share and (c < cost or s > share)
            for other, (c, s) in points.items()
            if other != label
        )
        if not dominated:
            out.append(label)
    return out


def _count(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n:,} {plural}"


#: The policy table's columns in the order they are left out to fit a width: what can
#: be derived or matters least first; policy, refusals, rejections, one cost (against
#: raw, or in dollars with ``--price``: see :func:`text_report`), cache share, intact
#: share and malformed requests stay.
POLICY_DROP_ORDER = (
    "mean",
    "uncached",
    "requests",
    "resent/break",
    "intact last",
    "peak",
    "breaks",
    "over budget",
)

_NAME_CHARS = 32  # a run's name is cut to this in a narrowed per-run table


def _fitted(table: Table, width: int | None, drop: Sequence[str], notes: set[str]) -> str:
    narrow, dropped = table.narrowed(width, drop)
    notes.update(dropped)
    return narrow.text()


def text_report(report: ReplayReport, *, per_run: bool = False, width: int | None = 100) -> str:
    """The command line's summary: totals per policy, per source, and optionally per run.

    With ``width`` (default 100 characters) columns are left out, in the order of
    :data:`POLICY_DROP_ORDER` (per run: the limits, then policies from the last), until
    each table fits, and a line says which; ``width=None`` shows every column."""
    left_out: set[str] = set()
    # Of the two costs, keep the dollars when a price was given, else the ratio to raw.
    dollars = report.config.price_per_mtok is not None
    drop = (*POLICY_DROP_ORDER, "x raw" if dollars else "cost cached")
    runs = report.runs
    calls = sum(r.requests for r in runs)
    files = len({r.path for r in runs})
    tokenizers = sorted({r.tokenizer for r in runs})
    lines = [
        f"replayed {_count(len(runs), 'run')} from {_count(files, 'file')}: "
        f"{_count(calls, 'model call')}, each through {_count(len(report.policies), 'policy')}",
        f"{report.config.describe()} ({', '.join(tokenizers) or 'nothing'} used); "
        f"cache reads {report.config.pricing.read:g}x, writes {report.config.pricing.write:g}x",
        "",
        "all runs:",
        _fitted(policy_table(report.totals(), report), width, drop, left_out),
    ]
    sources = report.by_source()
    if len(sources) > 1:
        for kind, totals in sources.items():
            count = sum(1 for r in runs if r.kind == kind)
            lines += ["", f"{SOURCE_NAMES.get(kind, kind)} ({_count(count, 'run')}):"]
            lines.append(_fitted(policy_table(totals, report), width, drop, left_out))
    if per_run:
        table = runs_table(report)
        if width is not None:
            for row in table.rows:
                if len(row[0]) > _NAME_CHARS:
                    row[0] = row[0][: _NAME_CHARS - 3] + "..."
        keep = {"windowfit", "raw"}
        run_drop = ["limit", "budget", *(p for p in reversed(report.policies) if p not in keep)]
        lines += [
            "",
            "per run (cost x raw; rejected/refused when any; !malformed):",
            _fitted(table, width, run_drop, left_out),
        ]
    if left_out:
        order = [*drop, "limit", "budget", *reversed(report.policies)]
        names = [name for name in dict.fromkeys(order) if name in left_out]
        lines += [
            "",
            _wrap(
                f"to fit {width} columns, not shown: {', '.join(names)} "
                "(--wide shows every column)",
                width,
            ),
        ]
    if report.problems:
        lines += ["", f"{len(report.problems)} log problem(s) (the rest was replayed):"]
        lines += [f"  {p}" for p in report.problems]
    lines += [
        "",
        _wrap(
            "refused: windowfit would not send it (nothing fits; the agent stops or asks the "
            "person). rejected: over the hard limit. intact: share of tool-result tokens sent "
            "unchanged. malformed: requests that break the provider's rules (tool pairing, "
            "roles).",
            width,
        ),
    ]
    lines[1] = _wrap(lines[1], width)
    return "\n".join(lines)


def _wrap(text: str, width: int | None) -> str:
    return text if width is None else textwrap.fill(text, width, break_on_hyphens=False)
