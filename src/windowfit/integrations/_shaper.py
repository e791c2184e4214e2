"""What every framework adapter shares: fitting OpenAI Chat messages to a budget and
learning from the usage the framework reports.

Adapters translate their framework's messages to OpenAI Chat Completions dicts (the
format every framework here can express, tool calls and images included), let a
:class:`Shaper` fit them, and translate the answer back, keeping each message the fit
left unchanged as the framework's own object. The budget, the calibrated estimator, the
retry-free usage bookkeeping and the :class:`~windowfit.Fitter` are those of
:func:`windowfit.wrap` (:class:`windowfit.wrap.WrapState`), so that an adapter fits
exactly as a wrapped OpenAI client would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..calibration import UsageCalibrator
from ..errors import ContextOverflowError, MissingExtraError, SettingsError
from ..fitter import Fitter
from ..fitting import FitReport
from ..formats import Usage
from ..models import ModelLimits
from ..profiles import default_estimator
from ..settings import FitSettings
from ..tokens import Estimator
from ..wrap import Calibrator, UsageRecord, WrapState, _Prepared

__all__ = ["Fitted", "Shaper", "require"]


def require(module: str, package: str, extra: str, purpose: str) -> Any:
    """Import ``module`` of an optional framework, or say which extra brings it."""
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError as exc:
        raise MissingExtraError(package, extra, purpose) from exc


@dataclass(frozen=True)
class Fitted:
    """One fitted request: the messages to send, where each came from, and the numbers.

    ``sources[k]`` is the index in the input of the message ``messages[k]`` stands for
    (``None`` for the trimmed-conversation note when it is a message of its own);
    ``changed[k]`` says whether that message differs from the input's (a cleared result,
    the note appended to it).
    """

    messages: list[dict[str, Any]]
    sources: list[int | None]
    changed: list[bool]
    report: FitReport
    estimated: int
    budget: int
    model: str


class Shaper:
    """Fits OpenAI Chat requests for one adapter and learns from the usage seen.

    ``budget``: tokens a request may take (default: the model's known window minus the
    output reserve, :mod:`windowfit.models`); ``model``: the model name to look the window
    up by when the framework's own is not known; ``settings``: :class:`FitSettings` or a
    preset name. ``calibrator`` (default: a :class:`~windowfit.UsageCalibrator`) learns
    from each answer's usage how far the estimates are from the provider's counts; what it
    learns only ever lowers the budget (:class:`_Ceiling`).
    """

    def __init__(
        self,
        budget: int | None = None,
        model: str | None = None,
        settings: FitSettings | str | None = None,
        *,
        windows: Mapping[str, ModelLimits | int | tuple[int, int]] | None = None,
        estimator: Estimator | None = None,
        calibrator: Calibrator | None = None,
        fitter: Fitter | None = None,
        on_fit: Callable[[FitReport], object] | None = None,
        on_usage: Callable[[UsageRecord], object] | None = None,
    ) -> None:
        if model is not None and not isinstance(model, str):
            raise SettingsError(f"model must be a model name, not {model!r}")
        self.model = model
        self.state = WrapState(
            "openai",
            budget=budget,
            settings=settings,
            windows=windows,
            estimator=estimator,
            retry=None,
            cache_control=False,
            calibrator=_Ceiling(calibrator if calibrator is not None else UsageCalibrator()),
            on_usage=on_usage,
            on_fit=on_fit,
            sleep=None,
            fitter=fitter,
        )

    @property
    def last_report(self) -> FitReport | None:
        """The report of the last request fitted."""
        return self.state.stats.last_report

    @property
    def calls(self) -> int:
        """How many requests were fitted."""
        return self.state.stats.calls

    def fit(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Fitted:
        """Fit ``messages`` (OpenAI Chat dicts; a leading system message is counted and
        kept). Raises :class:`~windowfit.ContextOverflowError` when nothing fits and
        :class:`~windowfit.ConversationError` for a broken conversation."""
        name = self.model or model or ""
        kwargs: dict[str, Any] = {"model": name, "messages": list(messages)}
        if tools:
            kwargs["tools"] = list(tools)
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        prepared = self.state.prepare(kwargs)
        out: list[dict[str, Any]] = prepared.kwargs["messages"]
        report = self.state.stats.last_report
        assert report is not None
        sources, changed = _sources(messages, out, report)
        return Fitted(out, sources, changed, report, prepared.estimated, prepared.budget, name)

    def fit_format(
        self,
        messages: Sequence[Any],
        *,
        format: str,
        system: Any = None,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Fitted:
        """:meth:`fit` for messages in another windowfit format (``"openai-responses"``
        items, ...), with the system prompt or instructions given apart."""
        state = self.state
        name = self.model or model or ""
        state.stats.calls += 1
        budget, limit = state.limits_for(name or None, max_tokens)
        try:
            result = state.fitter.fit(
                list(messages),
                budget=budget,
                system=system,
                tools=list(tools) if tools else None,
                settings=state.settings,
                format=format,
                estimator=default_estimator(state.estimator, name),
                limit=limit,
            )
        except ContextOverflowError:
            state.stats.overflows += 1
            raise
        report = result.report
        state.stats.last_report = report
        state.stats.fitted += report.stage > 0
        if state.on_fit is not None:
            state.on_fit(report)
        sources, changed = _sources(messages, result.messages, report)
        return Fitted(result.messages, sources, changed, report, report.tokens_after, budget, name)

    def observe(
        self, fitted: Fitted, input_tokens: int | Usage | None, output_tokens: int = 0
    ) -> None:
        """Learn from the provider's count of a fitted request's input (when reported):
        the count, or the answer's whole :class:`~windowfit.formats.Usage` as the API's
        dialect read it."""
        if isinstance(input_tokens, Usage):
            usage = input_tokens
        elif isinstance(input_tokens, int) and not isinstance(input_tokens, bool):
            usage = Usage(input_tokens, output_tokens)
        else:
            return
        if usage.input_tokens <= 0:
            return
        prepared = _Prepared({}, fitted.model, fitted.budget, fitted.estimated)
        self.state.observe_usage(prepared, usage)


class _Ceiling:
    """A calibrator whose budgets never exceed the one asked about.

    Frameworks hand windowfit a budget and nothing else of the window, so there is no
    hard limit to fall back on when a raised budget proves too high: an estimate that
    errs low (the provider counts more) tightens the budget, and one that errs high is
    kept as a margin. Found on a real run: after clearing, the requests are mostly short
    English notes, whose ratio to the provider's count differs from the long results'
    the factor was learned on, so a budget raised by that factor let a request past the
    window."""

    def __init__(self, inner: Calibrator) -> None:
        self.inner = inner

    def observe(self, estimated: int, provider_tokens: int) -> object:
        return self.inner.observe(estimated, provider_tokens)

    def budget_for(self, budget: int) -> int:
        return min(budget, int(self.inner.budget_for(budget)))


def _sources(
    given: Sequence[Any], out: Sequence[Any], report: FitReport
) -> tuple[list[int | None], list[bool]]:
    """Which input message each output message stands for (see :class:`Fitted`)."""
    dropped = set(report.dropped)
    kept = [i for i in range(len(given)) if i not in dropped]
    sources: list[int | None] = list(kept)
    if len(out) == len(kept) + 1 and report.note_index is not None:
        sources.insert(report.note_index, None)
    if len(sources) != len(out):  # fitting's contract broken: say so, never guess
        raise AssertionError("fitted messages do not line up with the messages given")
    changed = [src is None or out[k] is not given[src] for k, src in enumerate(sources)]
    return sources, changed
