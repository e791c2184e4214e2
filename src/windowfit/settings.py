"""Fitting settings and their named presets.

``windowfit`` (the default) makes the seed's choices of what to clear and what to keep,
but changes the request's prefix rarely: when it has to clear, it clears whole batches
down to a low-water mark, and when it has to drop turns or rounds, it drops enough to
leave headroom, so that the many requests that follow share their prefix with the prompt
cache. ``seed`` is the write-up's behaviour exactly (clear just enough, four at a time;
slide the window of turns or rounds at every request), kept for reference.
``windowfit-lean`` is for users who care most about cost: past a trigger it clears the
results that leave a small keep-window (as Anthropic's clear_tool_uses and OpenHands'
observation masking do), which changes the request only near its end; the budget guarantee
and stages 2 and 3 stay as the fallback. It clears them eight at a time, not one by one:
each clearing re-writes the request's tail to the prompt cache, so a batch of eight
re-writes it once where one by one would re-write it eight times, and the waiting results
stay intact meanwhile (benchmarks/REPLAY.md shows the batch size swept).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from .errors import SettingsError

__all__ = ["PRESETS", "FitSettings"]


@dataclass(frozen=True)
class FitSettings:
    """How :func:`windowfit.fit` shapes a request.

    ``batch_size``: stage 1 clears the oldest clearable results this many at a time.
    ``protect_fraction``: the newest results whose running total fits in this fraction of
    the budget are never cleared (always at least the newest one).
    ``min_clear_ratio``: a result is clearable only if it is at least this many times the
    size of the cleared-result note (clearing a small one saves little and still changes
    the request's prefix).
    ``low_water``: when stage 1 must clear, it clears whole batches until the request is
    at most this fraction of the budget (1.0 clears just enough, as the seed does).
    ``cut_low_water``: when stages 2 or 3 must drop messages, they drop whole turns or
    rounds until the request is at most this fraction of the budget (1.0 slides the
    window by the least amount, as the seed does).
    ``stateless``: decide from the current request alone (the seed), instead of from the
    conversation's earlier request points as well (see :mod:`windowfit.fitting`).
    ``keep_results``: protect the newest this many results instead of a fraction of the
    budget. ``clear_trigger``: once the uncleared request is above this fraction of the
    budget, clear the results that left the protected window as soon as ``batch_size`` of
    them wait (near the end of the request), instead of in batches when over budget;
    ``batch_size=1`` clears each one as it leaves.
    """

    name: str = "windowfit"
    batch_size: int = 4
    protect_fraction: float = 0.25
    min_clear_ratio: float = 2.0
    low_water: float = 0.5
    cut_low_water: float = 0.3
    stateless: bool = False
    keep_results: int | None = None
    clear_trigger: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise SettingsError(f"batch_size must be a whole number >= 1, not {self.batch_size!r}")
        for field in ("protect_fraction", "low_water", "cut_low_water"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
                raise SettingsError(f"{field} must be in (0, 1], not {value!r}")
        if self.keep_results is not None and (
            not isinstance(self.keep_results, int) or self.keep_results < 1
        ):
            raise SettingsError(f"keep_results must be None or >= 1, not {self.keep_results!r}")
        if self.clear_trigger is not None and (
            not isinstance(self.clear_trigger, (int, float)) or not 0.0 < self.clear_trigger <= 1.0
        ):
            raise SettingsError(
                f"clear_trigger must be None or in (0, 1], not {self.clear_trigger!r}"
            )
        if not isinstance(self.min_clear_ratio, (int, float)) or self.min_clear_ratio < 1.0:
            raise SettingsError(f"min_clear_ratio must be >= 1, not {self.min_clear_ratio!r}")

    @classmethod
    def preset(cls, name: str) -> FitSettings:
        """The named preset (see :data:`PRESETS`)."""
        try:
            return PRESETS[name]
        except KeyError:
            known = ", ".join(sorted(PRESETS))
            raise SettingsError(f"unknown preset {name!r}; known presets: {known}") from None

    def with_(self, **changes: Any) -> FitSettings:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PRESETS: dict[str, FitSettings] = {
    "windowfit": FitSettings(),
    "seed": FitSettings(name="seed", low_water=1.0, cut_low_water=1.0, stateless=True),
    "windowfit-lean": FitSettings(
        name="windowfit-lean", keep_results=3, clear_trigger=1.0, batch_size=8
    ),
}
