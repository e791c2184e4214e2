"""Fit a request into a token budget: the three stages of DESIGN section 3.

Stage 1 clears the oldest tool results (the call and result blocks stay, the content
becomes a short note); stage 2 keeps the first message, a note, and the most recent whole
user turns; stage 3 keeps the first message, a note, the current turn's opening message
and the most recent whole tool rounds. Each runs only if the one before was not enough.

**Cache stability.** A provider's prompt cache only helps while a request starts with the
previous request. So the decision is not taken for the current request alone: it is the
result of a *fold over the conversation's request points* (every position where an
assistant message follows, i.e. where the agent sent a request, plus the end). Starting
from "nothing changed", each point keeps the previous decision while it still fits, and
otherwise changes it by a large step: whole batches of results down to a low-water mark
(``FitSettings.low_water``), or a cut moved forward far enough to leave headroom
(``FitSettings.cut_low_water``). Because it is a function of the conversation alone (no
hidden state), a stateless server applying it to each incoming request gets the same
answer as an in-process agent; and because every step only adds to what was cleared or
dropped, the cleared set only grows and the cut only moves forward, so between changes
each request starts with the previous one. (The fold is kept per conversation for
speed by a :class:`~windowfit.Fitter`; what it keeps never changes an answer.)

The pieces: ``formats/*`` read and check each message (``scan``) and hold the pairing
rule (``formats/_rules.py``); ``_fold.py`` folds the decision; ``_build.py`` builds the
request; ``fitter.py`` owns what is kept between calls; this module has the reports and
:func:`fit`, which uses one process-wide :class:`~windowfit.Fitter`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .settings import FitSettings
from .tokens import Estimator

if TYPE_CHECKING:
    from .fitter import Fitter

__all__ = ["FitReport", "FitResult", "fit"]


@dataclass(frozen=True)
class FitReport:
    """What fitting did, for people, logs and the simulator.

    ``stage``: 0 when the request already fit, else the last stage that ran (1, 2 or 3).
    ``tokens_before`` / ``tokens_after``: estimated size of the whole request (system and
    tools included) before and after. ``cleared``: the tool call ids whose results were
    cleared. ``dropped``: indexes of input messages left out. ``prefix_end``: how many
    leading input messages are sent exactly as given, in the same positions; the request
    is unchanged before it. ``note_index``: where the trimmed-conversation note stands in
    the output (``None`` without one). ``clearing_exhausted``: at an earlier request, stage
    1 cleared all it could without reaching its low-water mark, so the next time the request
    outgrows the budget stages 2 and 3 take over. ``over_budget``: nothing fitted the
    budget, and the smallest request was sent instead, within the ``limit`` given to
    :func:`fit`.
    """

    stage: int
    tokens_before: int
    tokens_after: int
    budget: int
    cleared: tuple[str, ...]
    dropped: tuple[int, ...]
    prefix_end: int
    format: str
    settings: str
    note_index: int | None = None
    messages_before: int = 0
    messages_after: int = 0
    clearing_exhausted: bool = False
    over_budget: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "budget": self.budget,
            "cleared": list(self.cleared),
            "dropped": list(self.dropped),
            "prefix_end": self.prefix_end,
            "format": self.format,
            "settings": self.settings,
            "note_index": self.note_index,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "clearing_exhausted": self.clearing_exhausted,
            "over_budget": self.over_budget,
        }


@dataclass(frozen=True)
class FitResult:
    """The request to send (``messages`` in the input's format) and the report."""

    messages: list[dict[str, Any]]
    report: FitReport
    system: Any = None
    tools: Any = None


# --------------------------------------------------------------------------------------
# The public function


def fit(
    messages: Sequence[Mapping[str, Any]],
    *,
    budget: int,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    settings: FitSettings | str | None = None,
    format: str | None = None,
    estimator: Estimator | None = None,
    limit: int | None = None,
    model: str | None = None,
) -> FitResult:
    """Shape ``messages`` so that the request fits ``budget`` tokens (estimated).

    ``messages`` are Anthropic Messages or OpenAI Chat Completions messages (detected;
    pass ``format="anthropic"`` or ``"openai"`` to choose). ``system`` and ``tools`` are
    counted against the budget and never changed. The input is never modified: the
    result holds a new list whose unchanged messages are the very objects given.

    **Counting.** ``estimator`` counts the tokens when given; else ``model`` (a model name,
    in any form the model table knows: :mod:`windowfit.models`) picks its tokenizer
    family's calibrated profile; with neither, ``conservative`` counts (at least every
    family's estimate, :func:`windowfit.default_estimator`). The write-up's rule is
    ``estimator=estimator_for(family="seed")``.

    ``limit`` is the model's hard context window, when known (the budget is windowfit's
    own, lower limit). When nothing fits the budget but the smallest request fitting can
    make (every clearable result cleared, cut to the latest round) fits the limit, that
    request is returned (``report.over_budget``) rather than an error: a request over the
    budget but inside the window still gets an answer, over the budget by as little as
    can be, leaving the answer its room.

    Raises :class:`~windowfit.ContextOverflowError` when even the first message, the
    current turn's opening message and the latest tool round do not fit, and
    :class:`~windowfit.errors.ConversationError` when the messages are not a valid
    request (saying which message and field).
    """
    global _DEFAULT_FITTER
    if _DEFAULT_FITTER is None:
        from .fitter import Fitter

        _DEFAULT_FITTER = Fitter()
    return _DEFAULT_FITTER.fit(
        messages,
        budget=budget,
        system=system,
        tools=tools,
        settings=settings,
        format=format,
        estimator=estimator,
        limit=limit,
        model=model,
    )


_DEFAULT_FITTER: Fitter | None = None
