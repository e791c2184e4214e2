"""Learning from what the provider counted: a per-conversation correction of estimates.

Every answer carries the provider's own count of the request (``usage``: input tokens,
cache reads and cache writes included), and a context-overflow error often states it too
("prompt is too long: 215000 tokens > 200000 maximum"). :class:`UsageCalibrator` keeps
the last few of those counts next to the estimates windowfit made for the same requests,
and predicts the provider's count of the next request as::

    provider ~ factor * estimate + offset

``factor`` is learned from how the provider's count *grew* between requests against how
the estimate grew (so it measures the estimator on the conversation's own content), and
``offset`` is whatever the provider counts that the estimate does not see at all (a
system prompt or tool definitions the caller did not pass to :func:`windowfit.fit`, the
provider's own framing, instructions a client injects). With a calibrated profile the
factor stays near 1 and the offset near the hidden part; with the seed's rule on code the
factor rises to about 1.5.

How it composes with :func:`windowfit.fit`: the estimator and its per-message caches are
never touched. The correction is applied to the *budget* instead::

    calibrator = UsageCalibrator()
    result = fit(messages, budget=calibrator.budget_for(limit), estimator=estimator)
    reply = client.messages.create(..., messages=result.messages)
    calibrator.observe_usage(result.report.tokens_after, reply.usage)

``budget_for(budget)`` is ``(budget - offset) / factor``, rounded down. Both numbers move
in coarse steps and rarely, so the budget fit sees changes seldom and its cache-stable cut
points stay where they were: the factor lives on a 1% geometric grid, is measured over
the last ``4 * window`` requests and moves only when the measurement is two grid steps
above it or three below (then it keeps one step of headroom); the offset moves in steps
of about 0.5% of the provider's count, up at once when a request needs it (with a step
of headroom) and down only when three steps clear. Replayed on the recorded Claude Code
and DeepSeek runs (``benchmarks/tokens_report.py``), the corrected estimates come within
1-3% over what the providers counted.

Bounds (what keeps the estimates erring high):

* After an observation, ``correct(estimate) >= provider_tokens`` for every observation
  still in the window: the offset is at least the largest excess of the provider's count
  over ``factor * estimate`` among them.
* The factor carries a margin (2%) over the growth ratio it measured, and is kept within
  ``[min_factor, max_factor]`` (0.25-4: a profile further off than that is the wrong
  profile, not something to learn); the offset within ``[0, largest count seen]``.
* Before the first observation the correction is the identity (factor 1, offset 0): the
  calibrated profiles err high already. The factor needs two requests whose estimates
  grew by at least ``min_growth`` tokens; until then only the offset moves.
* A count from an overflow error is an observation like any other. An overflow error that
  states only the limit says the provider counted more than the limit: that is observed
  as ``limit + 1``. One that states neither teaches nothing.

The calibrator is for one conversation (one agent, one model): its window follows that
conversation's requests. It is safe to share between threads.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .classify import ErrorInfo
from .errors import SettingsError
from .formats import Usage

__all__ = ["Correction", "UsageCalibrator", "provider_input_tokens"]


@dataclass(frozen=True)
class Correction:
    """``provider ~ factor * estimate + offset``."""

    factor: float = 1.0
    offset: int = 0

    def apply(self, estimate: int) -> int:
        """The provider's expected count of a request estimated at ``estimate``."""
        if estimate <= 0:
            return 0
        return math.ceil(estimate * self.factor + self.offset)

    def budget_for(self, budget: int) -> int:
        """The budget to fit estimates to so that the provider counts at most ``budget``
        (at least 1)."""
        return max(1, math.floor((budget - self.offset) / self.factor))


def _field(usage: Any, name: str) -> Any:
    if isinstance(usage, Mapping):
        return usage.get(name)
    return getattr(usage, name, None)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return max(0, int(value))


def provider_input_tokens(usage: Any) -> int | None:
    """The whole input the provider counted, from a response's ``usage`` (an SDK object
    or its JSON): Anthropic ``input_tokens + cache_read_input_tokens +
    cache_creation_input_tokens``; OpenAI Chat ``prompt_tokens`` (cached tokens are part
    of it); OpenAI Responses ``input_tokens``; windowfit's own
    :class:`~windowfit.formats.Usage` (what a dialect read, a log record), whose
    ``input_tokens`` is the whole input. ``None`` when ``usage`` holds no input count."""
    if usage is None:
        return None
    if isinstance(usage, Usage):
        return usage.input_tokens
    prompt = _field(usage, "prompt_tokens")
    if prompt is not None:
        return _count(prompt)
    base = _field(usage, "input_tokens")
    if base is None:
        return None
    total = _count(base)
    read = _field(usage, "cache_read_input_tokens")
    write = _field(usage, "cache_creation_input_tokens")
    if read is None and write is None:  # Responses: input_tokens is already the total
        return total
    return total + _count(read) + _count(write)


class UsageCalibrator:
    """A correction of estimates for one conversation, learned from the provider's counts
    (see the module docstring for the model and its bounds).

    ``window``: how many recent requests the correction answers for. ``margin``: what the
    factor adds over the growth ratio it measured. ``step``: the factor's grid (1%).
    ``offset_step``: the offset's grid, in tokens. ``min_growth``: the least growth of the
    estimate between two requests that teaches the factor anything.
    """

    def __init__(
        self,
        *,
        window: int = 8,
        margin: float = 0.02,
        step: float = 0.01,
        offset_step: int = 64,
        min_factor: float = 0.25,
        max_factor: float = 4.0,
        min_growth: int = 32,
    ) -> None:
        if not isinstance(window, int) or window < 2:
            raise SettingsError(f"window must be a whole number >= 2, not {window!r}")
        if not 0 <= margin <= 1:
            raise SettingsError(f"margin must be in [0, 1], not {margin!r}")
        if not 0 < step <= 1:
            raise SettingsError(f"step must be in (0, 1], not {step!r}")
        if not isinstance(offset_step, int) or offset_step < 1:
            raise SettingsError(f"offset_step must be a whole number >= 1, not {offset_step!r}")
        if not 0 < min_factor <= 1 <= max_factor:
            raise SettingsError("the factor bounds must hold 1: 0 < min_factor <= 1 <= max_factor")
        if not isinstance(min_growth, int) or min_growth < 1:
            raise SettingsError(f"min_growth must be a whole number >= 1, not {min_growth!r}")
        self.window = window
        self.margin = margin
        self.step = step
        self.offset_step = offset_step
        self.min_factor = min_factor
        self.max_factor = max_factor
        self.min_growth = min_growth
        self._history: deque[tuple[int, int]] = deque(maxlen=window)
        self._growth: deque[tuple[int, int]] = deque(maxlen=4 * window)
        self._correction = Correction()
        self._observations = 0
        self._lock = threading.Lock()

    # -- what was learned ---------------------------------------------------------------

    @property
    def correction(self) -> Correction:
        return self._correction

    @property
    def factor(self) -> float:
        return self._correction.factor

    @property
    def offset(self) -> int:
        return self._correction.offset

    @property
    def observations(self) -> int:
        """How many counts were observed (all of them, not only those in the window)."""
        return self._observations

    def correct(self, estimate: int) -> int:
        """The provider's expected count of a request estimated at ``estimate``."""
        return self._correction.apply(estimate)

    def budget_for(self, budget: int) -> int:
        """The budget to pass to :func:`windowfit.fit` so that the provider counts at most
        ``budget`` (see :meth:`Correction.budget_for`)."""
        return self._correction.budget_for(budget)

    def state(self) -> dict[str, Any]:
        """What was learned, as JSON-serialisable data (:meth:`load_state` reads it back):
        the observations in the windows, the correction and the count."""
        with self._lock:
            return {
                "history": [list(pair) for pair in self._history],
                "growth": [list(pair) for pair in self._growth],
                "factor": self._correction.factor,
                "offset": self._correction.offset,
                "observations": self._observations,
            }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state`'s data (kept by another process, say). Data that is
        not what :meth:`state` writes raises :class:`~windowfit.errors.SettingsError`."""
        try:
            history = [(int(e), int(p)) for e, p in state["history"]]
            growth = [(int(e), int(p)) for e, p in state["growth"]]
            factor = float(state["factor"])
            offset = int(state["offset"])
            observations = int(state["observations"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SettingsError(f"not a calibrator's state: {exc}") from None
        if not (math.isfinite(factor) and self.min_factor <= factor <= self.max_factor):
            raise SettingsError(f"a calibrator's factor must be within its bounds, not {factor}")
        if offset < 0 or observations < 0:
            raise SettingsError("a calibrator's offset and count must not be negative")
        with self._lock:
            self._history = deque(history, maxlen=self.window)
            self._growth = deque(growth, maxlen=4 * self.window)
            self._correction = Correction(factor, offset)
            self._observations = observations

    def reset(self) -> None:
        """Forget everything (a new conversation)."""
        with self._lock:
            self._history.clear()
            self._growth.clear()
            self._correction = Correction()
            self._observations = 0

    # -- learning -------------------------------------------------------------------------

    def observe(self, estimated: int, provider_tokens: int) -> Correction:
        """Learn from one request: windowfit estimated it at ``estimated`` tokens, the
        provider counted ``provider_tokens``. Non-positive numbers are ignored."""
        if isinstance(estimated, bool) or isinstance(provider_tokens, bool):
            raise TypeError("token counts must be whole numbers")
        estimated, provider_tokens = int(estimated), int(provider_tokens)
        with self._lock:
            if estimated <= 0 or provider_tokens <= 0:
                return self._correction
            self._history.append((estimated, provider_tokens))
            self._growth.append((estimated, provider_tokens))
            self._observations += 1
            factor = self._next_factor()
            self._correction = Correction(factor, self._next_offset(factor))
            return self._correction

    def observe_usage(self, estimated: int, usage: Any) -> Correction:
        """Learn from a response's ``usage`` (see :func:`provider_input_tokens`)."""
        counted = provider_input_tokens(usage)
        if counted is None:
            return self._correction
        return self.observe(estimated, counted)

    def observe_overflow(self, info: ErrorInfo, estimated: int) -> Correction:
        """Learn from a context-overflow error (:func:`windowfit.classify_error`) about a
        request estimated at ``estimated``: the count it states, else ``limit + 1``."""
        if info.prompt_tokens is not None and info.prompt_tokens > 0:
            return self.observe(estimated, info.prompt_tokens)
        if info.limit is not None and info.limit > 0:
            return self.observe(estimated, info.limit + 1)
        return self._correction

    # -- the rules --------------------------------------------------------------------------

    def _grid(self, value: float) -> float:
        """The smallest point of the factor's grid at or above ``value``."""
        k = math.ceil(math.log(value) / math.log1p(self.step) - 1e-9)
        return float((1 + self.step) ** k)

    def _next_factor(self) -> float:
        """The growth ratio pooled over the factor's window, plus the margin, on the grid;
        moved only when two grid steps away (then with one step of headroom)."""
        current = self._correction.factor
        grown = counted = 0
        for (e0, p0), (e1, p1) in pairwise(self._growth):
            if e1 - e0 >= self.min_growth and p1 >= p0:
                grown += e1 - e0
                counted += p1 - p0
        if grown == 0:
            return current
        ratio = max(counted / grown * (1 + self.margin), self.min_factor)
        target = min(self._grid(ratio), self.max_factor)
        up = 1 + self.step
        if target >= current * up**2 * (1 - 1e-9):
            return min(self._grid(target * up), self.max_factor)
        if target * up**3 <= current * (1 + 1e-9):
            return max(self._grid(target * up), self.min_factor)
        return current

    def _next_offset(self, factor: float) -> int:
        """At least the largest excess of the provider's count over ``factor * estimate``
        in the window; moved in steps of about 0.5% of the latest count, up at once (with
        one step of headroom), down only when three steps clear."""
        needed = max(0.0, max(p - factor * e for e, p in self._history))
        latest = self._history[-1][1]
        step = max(self.offset_step, 1 << max(0, (latest // 200).bit_length() - 1))
        largest = max(p for _, p in self._history)
        target = min(math.ceil(needed / step - 1e-9) * step, largest)
        current = self._correction.offset
        if needed > current:
            return max(math.ceil(needed), min(target + step, largest))
        if target + 3 * step <= current:
            return max(math.ceil(needed), min(target + step, largest))
        return current
