"""A one-line progress bar on standard error, for long replays."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``label [#####.....]  45%  1,234/2,345 model calls  <note>``, redrawn in place at
    most ten times a second. Draws nothing unless ``enabled`` (by default: when the
    stream is a terminal)."""

    def __init__(
        self,
        total: int,
        *,
        label: str = "replay",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 24,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled and total > 0
        self.total = max(0, total)
        self.done = 0
        self.label = label
        self.width = width
        self._last = 0.0
        self._drawn = False

    def advance(self, amount: int = 1, note: str = "") -> None:
        self.done = min(self.total, self.done + amount)
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self._last < 0.1:
            return
        self._last = now
        self._draw(note)

    def line(self, note: str = "") -> str:
        share = self.done / self.total if self.total else 1.0
        filled = round(share * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        text = f"{self.label} [{bar}] {share:4.0%}  {self.done:,}/{self.total:,} model calls"
        if note:
            text += f"  {note[:40]}"
        return text

    def _draw(self, note: str) -> None:
        self.stream.write("\r" + self.line(note).ljust(100))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
