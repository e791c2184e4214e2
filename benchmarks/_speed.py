"""How the benchmarks word a speed ratio: "3.3x slower", never "0.3x faster"."""

from __future__ import annotations


def compared(theirs: float, ours: float, digits: int = 1) -> str:
    """windowfit's speed against a peer's, from the two times (seconds or ms, the same
    unit): ``"14.2x faster"`` when windowfit takes less time, ``"3.3x slower"`` when it
    takes more, ``"as fast"`` when they round to the same."""
    if ours <= 0 or theirs <= 0:
        return "-"
    ratio = theirs / ours
    if round(ratio, digits) == 1:
        return "as fast"
    if ratio > 1:
        return f"{ratio:.{digits}f}x faster"
    return f"{1 / ratio:.{digits}f}x slower"
