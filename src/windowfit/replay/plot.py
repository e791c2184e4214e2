"""Request size over model calls, one line per policy (matplotlib, extra ``plot``)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import MissingExtraError
from .engine import ReplayReport, RunReport

__all__ = ["plot_report", "require_matplotlib"]

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
    """The runs with the most model calls (ties in file order)."""
    ranked = sorted(enumerate(report.runs), key=lambda p: (-p[1].requests, p[0]))
    return [run for _, run in ranked[:most] if run.requests]


def plot_report(report: ReplayReport, path: str | os.PathLike[str], *, most: int = 6) -> int:
    """Draw request size (tokens) over model calls for each policy, one panel per run
    (the ``most`` runs with the most calls), with the budget and the hard limit; refused
    requests are gaps. Returns how many panels were drawn."""
    plt = require_matplotlib()
    runs = _chosen(report, most)
    if not runs:
        return 0
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.8 * len(runs)), squeeze=False)
    panels = [row[0] for row in axes]
    for ax, run in zip(panels, runs, strict=True):
        for label in report.policies:
            series = run.series.get(label, [])
            xs = [i for i, v in enumerate(series) if v is not None]
            ys = [v for v in series if v is not None]
            ax.plot(xs, ys, label=label, linewidth=1.0)
        ax.axhline(run.budget, linestyle="--", color="0.4", linewidth=0.8, label="budget")
        ax.axhline(run.hard_limit, linestyle=":", color="red", linewidth=0.8, label="hard limit")
        ax.set_title(f"{run.name} ({run.kind}, {run.tokenizer})", fontsize=9)
        ax.set_xlabel("model call")
        ax.set_ylabel("request tokens")
    panels[0].legend(fontsize=7, ncol=4, loc="upper left")
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=110)
    plt.close(fig)
    return len(runs)
