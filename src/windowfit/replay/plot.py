"""Request size over model calls, one line per policy (matplotlib, extra ``plot``)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import MissingExtraError
from .engine import ReplayReport, RunReport

__all__ = ["caption", "plot_report", "require_matplotlib"]

_PURPOSE = "drawing replay plots (--plot)"


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or
    :class:`~windowfit.MissingExtraError` naming the ``plot`` extra."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise MissingExtraError("matplotlib", "plot", _PURPOSE) from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _chosen(report: ReplayReport, most: int) -> list[RunReport]:
    """The runs with the most model calls (ties in file order): the long runs are where
    policies part ways, and a panel per run stays readable only for a few."""
    ranked = sorted(enumerate(report.runs), key=lambda p: (-p[1].requests, p[0]))
    return [run for _, run in ranked[:most] if run.requests]


#: Line styles cycled over the policies, so that lines lying on top of each other (several
#: policies often send the same requests) stay distinguishable; windowfit's presets first.
_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("", "o", "s", "^", "v", "D", "x", "+")


def caption(report: ReplayReport, runs: list[RunReport]) -> str:
    """What the figure shows: which runs (of how many) and why those."""
    total = len(report.runs)
    shown = len(runs)
    which = "every run" if shown == total else f"the {shown} runs with the most model calls"
    return (
        f"Request size per model call: {which} (of {total}); one line style per policy, "
        "policies that sent the same requests overlap; gaps are requests a policy refused; "
        "dashed grey: budget, dotted red: hard limit."
    )


def plot_report(report: ReplayReport, path: str | os.PathLike[str], *, most: int = 6) -> int:
    """Draw request size (tokens) over model calls for each policy, one panel per run
    (the ``most`` runs with the most calls, as the title says), with the budget and the
    hard limit; refused requests are gaps. Returns how many panels were drawn."""
    plt = require_matplotlib()
    runs = _chosen(report, most)
    if not runs:
        return 0
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.8 * len(runs) + 0.8), squeeze=False)
    panels = [row[0] for row in axes]
    for ax, run in zip(panels, runs, strict=True):
        for k, label in enumerate(report.policies):
            series = run.series.get(label, [])
            xs = [i for i, v in enumerate(series) if v is not None]
            ys = [v for v in series if v is not None]
            ax.plot(
                xs,
                ys,
                label=label,
                linewidth=1.6 if label.startswith("windowfit") else 1.0,
                linestyle=_STYLES[k % len(_STYLES)],
                marker=_MARKERS[k % len(_MARKERS)],
                markevery=max(1, len(xs) // 12),
                markersize=3,
                alpha=0.85,
                zorder=3 if label.startswith("windowfit") else 2,
            )
        ax.axhline(run.budget, linestyle="--", color="0.4", linewidth=0.8, label="budget")
        ax.axhline(run.hard_limit, linestyle=":", color="red", linewidth=0.8, label="hard limit")
        ax.set_title(
            f"{run.name} ({run.kind}, {run.requests:,} model calls, {run.tokenizer})", fontsize=9
        )
        ax.set_xlabel("model call")
        ax.set_ylabel("request tokens")
    panels[0].legend(fontsize=7, ncol=4, loc="upper left")
    fig.suptitle(caption(report, runs), fontsize=8, wrap=True)
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=110)
    plt.close(fig)
    return len(runs)
