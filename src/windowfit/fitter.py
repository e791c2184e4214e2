"""``Fitter``: fitting with the state it keeps, owned, bounded and safe to share.

Fitting is a pure function of the request (see :mod:`windowfit.fitting`); what a
:class:`Fitter` keeps only makes the next call cheaper, never changes an answer:

* **folds**: the decision folded over a conversation's request points, so that the next
  request of a growing conversation only folds its new messages. A fold is built from
  the messages' facts (sizes, roles, tool ids), never from the message objects, and is
  reused only when the facts of the messages it covers are those of the request given.
  So editing a message in place gives the answer for what it now holds, and a freshly
  parsed copy of the same conversation (a proxy's case) reuses the fold.
* **counts of texts** (for windowfit's own estimates, long non-ASCII texts; for a
  costly estimator such as a real tokenizer or a vocabulary's check, every text), keyed
  by the text itself,
  so that a conversation seen before is not counted again, whether it comes as the same
  objects or as a fresh copy.
* **counts of short recurring texts** (tool names, empty results): at most 1,024 strings
  of up to 32 characters per estimator and format (under 200 KB), only for a Fitter of
  at least 4 MiB.

Nothing a Fitter keeps refers to a message object (the text counts hold strings, within
the bound). What it keeps is bounded by memory
(``max_bytes``, least recently used first out), not by a count of entries. Calls may
come from many threads and asyncio tasks at once: each fold is taken out of the cache
while a call works on it (another call for the same conversation meanwhile builds its
own), so concurrent calls give the answers the same calls would give one after another.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._build import build
from ._content import content_key
from ._fold import Fold, State
from ._lru import ByteBoundedCache
from .errors import ContextOverflowError, ConversationError, SettingsError
from .fitting import FitReport, FitResult
from .formats import FormatSpec, detect_format, get_format
from .formats._facts import ROLE, FactTuple, describe
from .formats._rules import PairingRule, Problem
from .instructions import TRIMMED_CONVERSATION_NOTE
from .settings import FitSettings
from .sizing import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, Sizer
from .tokens import Estimator

__all__ = ["DEFAULT_MAX_BYTES", "Fitter", "Scanned"]

#: What a Fitter keeps, at most, by default: 32 MiB (folds of about forty 2,000-message
#: conversations).
DEFAULT_MAX_BYTES = 32 * 1024 * 1024


@dataclass
class _Checked:
    """A fold with the pairing rule's state at its end, as kept between calls."""

    fold: Fold
    open_calls: dict[str, int]
    opened: bool
    last_role: str | None = None


class Scanned:
    """The facts one call scanned for a list of message objects, for a caller that holds
    those very objects and never changes them: the proxy, whose body parser hands the
    next request of a conversation the same objects for the messages whose bytes are
    unchanged (``proxy/_reparse.py``). Given back to :meth:`Fitter._fit_scanned`, the
    facts of each leading message that *is* (the same object as) the one scanned are
    taken as they are, and only the rest scanned, which saves the scan of a seen
    conversation (about half a millisecond per 1 MB) on the proxy's path.

    Reuse goes by object identity and by the very Sizer that counted (so the same
    estimator and format), message by message from the start, stopping at the first that
    differs: a record from another conversation, another parse or another estimator is
    simply not used. The one thing identity cannot see is a message edited in place,
    which :meth:`Fitter.fit` must answer for what it now holds; hence this is internal,
    for callers whose messages are never edited, not an option of ``fit``.
    """

    __slots__ = ("facts", "messages", "sizer")

    def __init__(self, sizer: Sizer, messages: Sequence[Any], facts: list[FactTuple]) -> None:
        self.sizer = sizer
        self.messages = messages
        self.facts = facts


class Fitter:
    """Fits requests (see :func:`windowfit.fit`, which uses one shared Fitter) and owns
    what fitting keeps between calls; safe to share between threads and asyncio tasks.

    ``max_bytes`` bounds what it keeps (default :data:`DEFAULT_MAX_BYTES`); ``0`` keeps
    nothing, so that every call does all its work afresh.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise SettingsError(f"max_bytes must be a whole number >= 0, not {max_bytes!r}")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._folds = ByteBoundedCache(max_bytes * 3 // 4)
        self._texts = ByteBoundedCache(max_bytes - max_bytes * 3 // 4)
        self._sizers: dict[tuple[int, str], Sizer] = {}
        self.folds_reused = 0  # calls that continued a kept fold
        self.folds_built = 0  # calls that folded the conversation from its start
        self.facts_reused = 0  # messages whose scan was reused (see Scanned), all calls

    # -- what it keeps -----------------------------------------------------------------

    @property
    def cached_bytes(self) -> int:
        """About how many bytes the caches hold now (what ``max_bytes`` bounds)."""
        with self._lock, self._texts.lock:
            return self._folds.bytes + self._texts.bytes

    def clear(self) -> None:
        """Forget everything kept (answers do not change; the next calls are slower)."""
        with self._lock:
            self._folds.clear()
            self._sizers.clear()
        with self._texts.lock:
            self._texts.clear()

    def _sizer(self, estimator: Estimator, fmt: str) -> Sizer:
        key = (id(estimator), fmt)
        with self._lock:
            sizer = self._sizers.get(key)
            if sizer is None or sizer.estimator is not estimator:
                if len(self._sizers) >= 64:  # many short-lived estimators: start over
                    self._sizers.clear()
                sizer = Sizer(estimator, fmt, memo=self._texts)
                self._sizers[key] = sizer
            return sizer

    # -- fitting -------------------------------------------------------------------------

    def fit(
        self,
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
        """Shape ``messages`` to ``budget``; the arguments and answer of :func:`windowfit.fit`."""
        return self._fit(
            messages, budget, system, tools, settings, format, estimator, limit, model, None
        )[0]

    def _fit_scanned(
        self,
        known: Scanned | None,
        messages: Sequence[Mapping[str, Any]],
        *,
        budget: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        settings: FitSettings | str | None = None,
        format: str | None = None,
        estimator: Estimator | None = None,
        limit: int | None = None,
    ) -> tuple[FitResult, Scanned]:
        """:meth:`fit`, reusing the facts ``known`` holds for the leading messages that are
        the very objects it scanned (see :class:`Scanned`: internal, for the proxy, whose
        messages are never edited in place), and what this call scanned, for the next."""
        return self._fit(
            messages, budget, system, tools, settings, format, estimator, limit, None, known
        )

    def _fit(
        self,
        messages: Sequence[Mapping[str, Any]],
        budget: int,
        system: str | Sequence[Mapping[str, Any]] | None,
        tools: Sequence[Mapping[str, Any]] | None,
        settings: FitSettings | str | None,
        format: str | None,
        estimator: Estimator | None,
        limit: int | None,
        model: str | None,
        known: Scanned | None,
    ) -> tuple[FitResult, Scanned]:
        _check_number("budget", budget)
        if limit is not None:
            _check_number("limit", limit)
        fitting = _settings(settings)
        estimator = _estimator(estimator, model)
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise ConversationError(f"messages must be a list, not {describe(messages)}")
        if not messages:
            raise ConversationError("a request needs at least one message")
        if format is not None and not isinstance(format, str):
            raise SettingsError(f"format must be a format name, not {describe(format)}")
        fmt = format or detect_format(messages)
        spec = get_format(fmt)
        sizer = self._sizer(estimator, fmt)
        fixed = sizer.system(system) + sizer.tools(tools)
        facts, reused = self._scan(messages, spec, sizer, known)
        if reused:
            with self._lock:
                self.facts_reused += reused
        key = self._fold_key(messages, facts, spec, estimator, budget, fitting, fixed)
        checked = self._fold(key, messages, facts, spec, budget, fitting, fixed, sizer)
        try:
            result = self._decide(checked, facts, messages, fitting, sizer, fmt, limit)
        finally:
            if key is not None:
                with self._lock:
                    self._folds.put(key, checked, checked.fold.approximate_bytes())
        scanned = Scanned(sizer, messages, facts)
        if result is None:  # nothing fits the budget, but the window was given
            assert limit is not None
            fallback, _ = self._fit(
                messages, limit, system, tools, fitting, fmt, estimator, None, None, scanned
            )
            over = replace(fallback.report, budget=budget, over_budget=True)
            return replace(fallback, report=over), scanned
        return FitResult(result[0], result[1], system, tools), scanned

    @staticmethod
    def _scan(
        messages: Sequence[Any], spec: FormatSpec, sizer: Sizer, known: Scanned | None = None
    ) -> tuple[list[FactTuple], int]:
        """Every message's facts, checked. (A costly estimator's counts of long texts are
        remembered by the Sizer, so a conversation seen before is not counted again.)
        ``known``: facts already scanned, taken for each leading message that is the very
        object they were scanned from, by the very same Sizer (see :class:`Scanned`); and
        how many were so taken."""
        start = 0
        if known is not None and known.sizer is sizer:
            seen = known.messages
            most = min(len(seen), len(messages), len(known.facts))
            while start < most and messages[start] is seen[start]:
                start += 1
        if not start:
            return spec.scan_messages(messages, sizer), 0
        assert known is not None
        facts = known.facts[:start]
        facts.extend(spec.scan_messages(messages[start:], sizer, start))
        return facts, start

    @staticmethod
    def _fold_key(
        messages: Sequence[Any],
        facts: list[FactTuple],
        spec: FormatSpec,
        estimator: Estimator,
        budget: int,
        settings: FitSettings,
        fixed: int,
    ) -> tuple[Any, ...] | None:
        """Which conversation this is, for finding its fold: the fitting parameters and
        the content of its first message (``None``: do not keep a fold)."""
        if settings.stateless or not messages:
            return None
        first = next((i for i, f in enumerate(facts) if f[ROLE] not in spec.system_roles), 0)
        return (spec.name, id(estimator), budget, settings, fixed, content_key(messages[first]))

    def _fold(
        self,
        key: tuple[Any, ...] | None,
        messages: Sequence[Any],
        facts: list[FactTuple],
        spec: FormatSpec,
        budget: int,
        settings: FitSettings,
        fixed: int,
        sizer: Sizer,
    ) -> _Checked:
        """The conversation's fold, extended to every message given, pairing checked."""
        checked: _Checked | None = None
        if key is not None:
            with self._lock:
                checked = self._folds.take(key)
        if checked is not None:
            known = checked.fold.facts
            if len(known) > len(facts) or known != facts[: len(known)]:
                checked = None  # another conversation, or this one edited: start afresh
        with self._lock:
            if checked is None:
                self.folds_built += 1
            else:
                self.folds_reused += 1
        if checked is None:
            note_cost = (
                MESSAGE_OVERHEAD + BLOCK_OVERHEAD + sizer.text(TRIMMED_CONVERSATION_NOTE) + 2
            )
            checked = _Checked(Fold(budget, settings, fixed, note_cost, spec), {}, False)
        rule = PairingRule.for_format(spec)
        rule.open_calls = dict(checked.open_calls)
        rule.opened = checked.opened
        rule.last_role = checked.last_role
        fold = checked.fold
        problem = rule.add_all(facts, len(fold.facts))
        if problem is not None:
            raise _error(problem, spec, messages)
        fold.extend(facts)
        checked.open_calls = dict(rule.open_calls)
        checked.opened = rule.opened
        checked.last_role = rule.last_role
        problem = rule.finish()
        if problem is not None:
            raise _error(problem, spec, messages)
        return checked

    @staticmethod
    def _decide(
        checked: _Checked,
        facts: list[FactTuple],
        messages: Sequence[Any],
        settings: FitSettings,
        sizer: Sizer,
        fmt: str,
        limit: int | None,
    ) -> tuple[list[Any], FitReport] | None:
        fold = checked.fold
        budget = fold.budget
        n = len(facts)
        tokens_before = fold.fixed + fold.prefix[n]
        if not settings.stateless:
            points = fold.assistants[bisect_left(fold.assistants, fold.committed) :]
            fold.fold_points(points)
            fold.committed = max(fold.committed, points[-1] + 1 if points else 0)
        # The current request is not committed: a later call may see more messages after
        # it that make it no request point at all, so the protection state is restored.
        snap = fold.snapshot()
        try:
            state = fold.step(fold.state if not settings.stateless else State(), n)
            bound: int | None = None
            if state.failed or (fold.head_end < 0 and tokens_before > budget):
                needed = (
                    fold.size(state.cleared, state.cut, n) if fold.head_end >= 0 else tokens_before
                )
                if limit is not None and limit > budget:
                    if fold.head_end < 0:
                        return None  # nothing to clear or cut: fitted to the window instead
                    if needed <= limit:
                        # Over the budget by as little as can be: the smallest request
                        # (everything cleared, cut to the latest round), not one filled
                        # up to the window, which would take the answer's room too.
                        bound = limit
                if bound is None:
                    window = limit is not None and limit > budget
                    raise ContextOverflowError(
                        "the first message, the current turn's opening message and the latest "
                        f"tool round do not fit the {'window' if window else 'budget'}",
                        tokens=needed,
                        limit=limit if window and limit is not None else budget,
                    )
            built = build(fold, state, messages, n, sizer, bound)
        finally:
            fold.restore(snap)
        report = FitReport(
            stage=fold.stage(state),
            tokens_before=tokens_before,
            tokens_after=built.total,
            budget=budget,
            cleared=built.cleared,
            dropped=built.dropped,
            prefix_end=built.prefix_end,
            format=fmt,
            settings=settings.name,
            note_index=built.note_index,
            messages_before=n,
            messages_after=len(built.out),
            clearing_exhausted=state.exhausted,
            over_budget=bound is not None,
        )
        return built.out, report


def _error(problem: Problem, spec: FormatSpec, messages: Sequence[Any]) -> ConversationError:
    """The ConversationError for a broken pairing rule, naming the field concerned."""
    if problem.kind == "orphan_result" and problem.call_id is not None:
        field = spec.result_field(messages[problem.index], problem.call_id)
    elif problem.kind == "bad_opening":
        field = "role"
    else:
        field = spec.calls_field
    return ConversationError(problem.text, index=problem.index, field=field)


def _check_number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"{name} must be a whole number of tokens, not {value!r}")
    if value <= 0:
        raise SettingsError(f"{name} must be positive, not {value}")


def _settings(settings: Any) -> FitSettings:
    if settings is None:
        return FitSettings()
    if isinstance(settings, str):
        return FitSettings.preset(settings)
    if not isinstance(settings, FitSettings):
        raise SettingsError(
            f"settings must be a FitSettings or a preset name, not {describe(settings)}"
        )
    return settings


def _estimator(estimator: Any, model: Any) -> Estimator:
    if estimator is not None and not callable(getattr(estimator, "estimate", None)):
        raise SettingsError(
            "estimator must be a windowfit Estimator (an object with estimate(text) -> int), "
            f"not {describe(estimator)}"
        )
    if model is not None and not isinstance(model, str):
        raise SettingsError(f"model must be a model name, not {describe(model)}")
    from .profiles import default_estimator

    return default_estimator(estimator, model)
