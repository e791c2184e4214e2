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
each request starts with the previous one. (The fold is cached per conversation for
speed; the cache never changes an answer.)
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import ContextOverflowError, ConversationError, SettingsError
from .formats import FormatSpec, detect_format, get_format
from .instructions import CLEARED_RESULT_NOTE, TRIMMED_CONVERSATION_NOTE
from .messages import Block, Message, Text, ToolResult
from .settings import FitSettings
from .sizing import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, MessageSize, Sizer, default_sizer
from .tokens import Estimator

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
    budget, and the request was fitted to the ``limit`` given to :func:`fit` instead.
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
# The conversation, measured and validated once


@dataclass
class _Result:
    message: int  # index of the message that carries the result
    call_id: str
    tokens: int
    saving: int  # tokens saved by clearing it
    clearable: bool  # big enough to be worth clearing


def _is_result_carrier(message: Message) -> bool:
    """True for a message that answers tool calls (OpenAI ``tool``; Anthropic user message
    whose content starts with tool_result blocks)."""
    return bool(message.blocks) and isinstance(message.blocks[0], ToolResult)


class _Validator:
    """Checks, message by message, the pairing rule both providers enforce: every result
    answers a call of the assistant message just before it (only other result-carrying
    messages between), and every call is answered before the next other message."""

    def __init__(self, spec: FormatSpec):
        self.spec = spec
        self.open_calls: dict[str, int] = {}  # call id -> index of the assistant message

    def add(self, i: int, message: Message) -> None:
        open_calls = self.open_calls
        for result in message.tool_results:
            if result.call_id not in open_calls:
                raise ConversationError(
                    f"tool result for call {result.call_id!r} has no matching tool call in "
                    "the assistant message just before it",
                    index=i,
                    field=self._field(message, result),
                )
            del open_calls[result.call_id]
        if open_calls and not _is_result_carrier(message):
            call_id, at = next(iter(open_calls.items()))
            raise ConversationError(
                f"tool call {call_id!r} has no tool result before message {i}",
                index=at,
                field=self._calls_field,
            )
        for call in message.tool_calls:
            # Ids may be reused once answered (real OpenAI runs do), never while open.
            if call.id in open_calls:
                raise ConversationError(
                    f"tool call id {call.id!r} is used twice in one round",
                    index=i,
                    field="tool_calls",
                )
            open_calls[call.id] = i

    def finish(self) -> None:
        """A request must answer every call it contains."""
        if self.open_calls:
            call_id, at = next(iter(self.open_calls.items()))
            raise ConversationError(
                f"tool call {call_id!r} has no tool result (a request must answer every call)",
                index=at,
                field=self._calls_field,
            )

    @property
    def _calls_field(self) -> str:
        return "tool_calls" if self.spec.name == "openai" else "content"

    def _field(self, message: Message, result: ToolResult) -> str:
        if self.spec.name == "openai":
            return "tool_call_id"
        return f"content[{message.blocks.index(result)}].tool_use_id"


# --------------------------------------------------------------------------------------
# The fold over request points


@dataclass
class _State:
    cleared: int = 0  # how many of the clearable results (oldest first) are cleared
    cut: int = -1  # first kept message after the head; -1 while nothing is dropped
    failed: bool = False
    exhausted: bool = False  # stage 1 once cleared all it could without reaching the mark


@dataclass
class _Fold:
    """Incremental arrays over the conversation and the committed decision.

    Built for one (sizer, format, budget, settings, fixed size); extended message by
    message; ``state`` is the decision after the last committed request point.
    """

    budget: int
    settings: FitSettings
    fixed: int
    note_cost: int
    spec: FormatSpec
    validator: _Validator
    raws: list[Any] = field(default_factory=list)
    neutral: list[Message] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    prefix: list[int] = field(default_factory=lambda: [0])
    roles: list[str] = field(default_factory=list)
    turn_starts: list[int] = field(default_factory=list)
    assistants: list[int] = field(default_factory=list)
    results: list[_Result] = field(default_factory=list)
    head_end: int = -1  # end of the always-kept head (system messages, first message)
    first: int = -1  # index of the first non-system message
    result_msgs: list[int] = field(default_factory=list)
    protected_from: int = 0  # results[protected_from:tail_end] are in the protected tail
    tail_end: int = 0
    tail_tokens: int = 0
    clearable_msg: list[int] = field(default_factory=list)
    clearable_idx: list[int] = field(default_factory=list)
    savings: list[int] = field(default_factory=lambda: [0])
    state: _State = field(default_factory=_State)
    committed: int = 0  # request points below this index are folded into ``state``
    built: dict[int, tuple[frozenset[str], dict[str, Any], int]] = field(default_factory=dict)
    last: _Built | None = None  # the last request built, reused while the decision holds

    # -- growing the arrays ------------------------------------------------------------

    def extend(self, messages: Sequence[Any], sizer: Sizer) -> None:
        """Measure, check and add the messages beyond those already folded."""
        for i in range(len(self.raws), len(messages)):
            message, size = sizer.measure(messages[i], self.spec, i)
            self.validator.add(i, message)
            self.add(messages[i], message, size, self.spec)

    def add(self, raw: Any, message: Message, size: MessageSize, spec: FormatSpec) -> None:
        i = len(self.sizes)
        self.raws.append(raw)
        self.neutral.append(message)
        self.sizes.append(size.tokens)
        self.prefix.append(self.prefix[-1] + size.tokens)
        self.roles.append(message.role)
        if self.first < 0 and message.role not in spec.system_roles:
            self.first = i
            self.head_end = i + 1
        elif self.first >= 0 and self.head_end == i and _is_result_carrier(message):
            self.head_end = i + 1  # results answering the first message stay with it
        if i >= self.head_end >= 0:
            if message.role == "assistant":
                self.assistants.append(i)
            elif message.role == "user" and not message.tool_results and message.blocks:
                self.turn_starts.append(i)
        ratio = self.settings.min_clear_ratio
        for call_id, tokens, cleared in size.results:
            self.results.append(
                _Result(i, call_id, tokens, tokens - cleared, tokens >= ratio * cleared)
            )
            self.result_msgs.append(i)

    def advance_protection(self, upto: int) -> None:
        """Move the protected tail to the results of messages[:upto]: the newest results
        whose running total fits in protect_fraction of the budget, at least the newest
        (or, with ``keep_results``, the newest that many results)."""
        limit = self.settings.protect_fraction * self.budget
        keep = self.settings.keep_results
        count = bisect_left(self.result_msgs, upto)
        while self.tail_end < count:
            self.tail_tokens += self.results[self.tail_end].tokens
            self.tail_end += 1
        while self.protected_from < count - 1 and (
            count - self.protected_from > keep if keep is not None else self.tail_tokens > limit
        ):
            leaving = self.results[self.protected_from]
            self.tail_tokens -= leaving.tokens
            if leaving.clearable:
                self.clearable_msg.append(leaving.message)
                self.clearable_idx.append(self.protected_from)
                self.savings.append(self.savings[-1] + leaving.saving)
            self.protected_from += 1

    def snapshot(self) -> tuple[int, int, int, int]:
        """The protection state, to be restored after looking at an uncommitted point."""
        return (self.protected_from, self.tail_end, self.tail_tokens, len(self.clearable_msg))

    def restore(self, snap: tuple[int, int, int, int]) -> None:
        self.protected_from, self.tail_end, self.tail_tokens, n = snap
        del self.clearable_msg[n:]
        del self.clearable_idx[n:]
        del self.savings[n + 1 :]

    # -- sizes ------------------------------------------------------------------------

    def _saved(self, cleared: int, lo: int, hi: int) -> int:
        """Tokens saved by the first ``cleared`` clearable results in messages[lo:hi]."""
        a = min(cleared, bisect_left(self.clearable_msg, lo))
        b = min(cleared, bisect_left(self.clearable_msg, hi))
        return self.savings[b] - self.savings[a] if b > a else 0

    def opening(self, cut: int) -> int | None:
        """The opening message kept beside a stage-3 cut: the last turn start before it."""
        j = bisect_left(self.turn_starts, cut + 1) - 1
        if j < 0:
            return None
        start = self.turn_starts[j]
        return None if start == cut else start

    def size(self, cleared: int, cut: int, upto: int) -> int:
        """Estimated request size for messages[:upto] under a decision (an upper bound
        where a note is involved; the exact size is measured on the built request)."""
        head = self.prefix[self.head_end] - self._saved(cleared, 0, self.head_end)
        if cut < 0:
            body = self.prefix[upto] - self.prefix[self.head_end]
            return self.fixed + head + body - self._saved(cleared, self.head_end, upto)
        body = self.prefix[upto] - self.prefix[cut] - self._saved(cleared, cut, upto)
        opening = self.opening(cut)
        extra = self.sizes[opening] if opening is not None else 0
        return self.fixed + head + self.note_cost + extra + body

    # -- one request point ------------------------------------------------------------

    def _low_water(self, fraction: float, *, cut: bool) -> float:
        """The size to shape down to: ``fraction`` of the part of the budget that shaping
        can act on, above what is always sent (system, tools, the head, the note). A large
        system prompt thus does not make the mark unreachable."""
        base = self.fixed + self.prefix[self.head_end] + (self.note_cost if cut else 0)
        if base >= self.budget:
            return float(self.budget)
        return base + fraction * (self.budget - base)

    def step(self, state: _State, upto: int) -> _State:
        """The decision at the request made of messages[:upto], given the previous one."""
        budget = self.budget
        self.advance_protection(upto)
        trigger = self.settings.clear_trigger
        if trigger is not None and self.fixed + self.prefix[upto] > trigger * budget:
            # Keep-window clearing: every clearable result goes as soon as it leaves the
            # window, which changes the request near its end and re-sends little.
            state = _State(len(self.clearable_msg), state.cut, exhausted=state.exhausted)
        if self.head_end < 0 or self.size(state.cleared, state.cut, upto) <= budget:
            return replace(state, failed=False) if state.failed else state
        n_clearable = len(self.clearable_msg)
        low = self._low_water(self.settings.low_water, cut=state.cut >= 0)
        batch = self.settings.batch_size
        cleared = _first_batch(
            state.cleared,
            n_clearable,
            batch,
            lambda k: self.size(k, state.cut, upto) <= low,
        )
        if cleared is not None:
            return _State(cleared, state.cut, exhausted=state.exhausted)
        # The mark is out of reach: clear all there is, once. The next time the request
        # outgrows the budget, clearing the few results that left the protected tail since
        # would buy little room for a re-send of everything after them, so stages 2 and 3
        # take over then.
        once = state.cut < 0 and not state.exhausted
        if once and self.size(n_clearable, state.cut, upto) <= budget:
            return _State(n_clearable, state.cut, exhausted=True)
        return self._cut(state, upto, n_clearable)

    def _cut(self, state: _State, upto: int, cleared: int) -> _State:
        low = self._low_water(self.settings.cut_low_water, cut=True)
        start = max(state.cut, self.head_end + 1)
        lo = bisect_left(self.turn_starts, start)
        hi = bisect_left(self.turn_starts, upto)
        turns = self.turn_starts[lo:hi]
        chosen = self._first_cut(turns, cleared, upto, low)
        if chosen is not None:
            return _State(cleared, chosen, exhausted=state.exhausted)
        current_turn = self.turn_starts[hi - 1] if hi > 0 else self.first
        lo = bisect_left(self.assistants, max(start, current_turn + 1))
        hi = bisect_left(self.assistants, upto)
        rounds = self.assistants[lo:hi]
        chosen = self._first_cut(rounds, cleared, upto, low)
        if chosen is not None:
            return _State(cleared, chosen, exhausted=state.exhausted)
        if rounds:
            return _State(cleared, rounds[-1], failed=True)
        if turns:
            return _State(cleared, turns[-1], failed=True)
        return _State(cleared, state.cut, failed=True)

    def _first_cut(
        self, candidates: Sequence[int], cleared: int, upto: int, low: float
    ) -> int | None:
        """The earliest cut among ``candidates`` that brings the request to the low-water
        mark; else the latest, if it fits the budget at all; else ``None``."""
        if not candidates:
            return None
        chosen = _first_fit(candidates, lambda c: self.size(cleared, c, upto) <= low)
        if chosen is None and self.size(cleared, candidates[-1], upto) <= self.budget:
            chosen = candidates[-1]
        return chosen

    def stage(self, state: _State) -> int:
        if state.cut >= 0:
            return 2 if self.opening(state.cut) is None and self._is_turn(state.cut) else 3
        return 1 if state.cleared else 0

    def _is_turn(self, index: int) -> bool:
        j = bisect_left(self.turn_starts, index)
        return j < len(self.turn_starts) and self.turn_starts[j] == index


def _first_batch(current: int, total: int, batch: int, ok: Callable[[int], bool]) -> int | None:
    """The fewest cleared results, in whole batches (the oldest ``batch`` clearable results,
    the next ``batch``, ...; the last may be smaller when fewer remain), more than
    ``current``, for which ``ok`` holds; ``None`` if none does."""
    if current >= total:
        return None
    candidates = [*range((current // batch + 1) * batch, total, batch), total]
    return _first_fit(candidates, ok)


def _first_fit(candidates: Sequence[int], ok: Callable[[int], bool]) -> int | None:
    """The first candidate for which ``ok`` holds, given that ``ok`` is monotone along
    the candidates (false, ..., false, true, ..., true)."""
    lo, hi = 0, len(candidates)
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(candidates[mid]):
            hi = mid
        else:
            lo = mid + 1
    return candidates[lo] if lo < len(candidates) else None


# --------------------------------------------------------------------------------------
# Fold cache: one fold per conversation being fitted, so warm calls only do new work.

_FOLDS: dict[tuple[Any, ...], _Fold] = {}
_FOLD_LIMIT = 64


def _fold_for(
    key: tuple[Any, ...],
    raw: Sequence[Any],
    make: Callable[[], _Fold],
) -> _Fold:
    fold = _FOLDS.get(key)
    if fold is not None:
        n = len(fold.raws)
        if n <= len(raw) and all(map(operator.is_, fold.raws, raw)):
            return fold
    fold = make()
    if len(_FOLDS) >= _FOLD_LIMIT:
        _FOLDS.pop(next(iter(_FOLDS)))
    _FOLDS[key] = fold
    return fold


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
) -> FitResult:
    """Shape ``messages`` so that the request fits ``budget`` tokens (estimated).

    ``messages`` are Anthropic Messages or OpenAI Chat Completions messages (detected;
    pass ``format="anthropic"`` or ``"openai"`` to choose). ``system`` and ``tools`` are
    counted against the budget and never changed. The input is never modified: the
    result holds a new list whose unchanged messages are the very objects given.

    ``limit`` is the model's hard context window, when known (the budget is windowfit's
    own, lower limit). When nothing fits the budget but the request can be fitted to the
    limit, that request is returned (``report.over_budget``) rather than an error: a
    request over the budget but inside the window still gets an answer.

    Raises :class:`~windowfit.ContextOverflowError` when even the first message, the
    current turn's opening message and the latest tool round do not fit, and
    :class:`~windowfit.errors.ConversationError` when the messages are not a valid
    request (saying which message and field).
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise SettingsError(f"budget must be a whole number of tokens, not {budget!r}")
    if budget <= 0:
        raise SettingsError(f"budget must be positive, not {budget}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise SettingsError(f"limit must be a positive whole number of tokens, not {limit!r}")
    if isinstance(settings, str):
        settings = FitSettings.preset(settings)
    settings = settings or FitSettings()
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ConversationError(f"messages must be a list, not {type(messages).__name__}")
    fmt = format or detect_format(messages)
    spec = get_format(fmt)
    sizer = default_sizer(estimator, fmt)
    fixed = sizer.system(system) + sizer.tools(tools)
    note_cost = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + sizer.text(TRIMMED_CONVERSATION_NOTE) + 2

    def make() -> _Fold:
        return _Fold(budget, settings, fixed, note_cost, spec, _Validator(spec))

    key = (id(sizer), fmt, budget, settings, fixed, id(messages[0]) if messages else None)
    fold = make() if settings.stateless else _fold_for(key, messages, make)
    try:
        fold.extend(messages, sizer)
    except ConversationError:
        _FOLDS.pop(key, None)  # the fold holds a half-checked message: never reuse it
        raise
    fold.validator.finish()

    n = len(messages)
    tokens_before = fixed + fold.prefix[n]
    if not settings.stateless:
        points = fold.assistants[bisect_left(fold.assistants, fold.committed) :]
        for point in points:
            decided = fold.step(fold.state, point)
            if not decided.failed:  # a request that could not be sent decides nothing
                fold.state = decided
        fold.committed = max(fold.committed, points[-1] + 1 if points else 0)
    # The current request is not committed: a later call may see more messages after it
    # that make it no request point at all, so the fold's protection state is restored.
    snap = fold.snapshot()
    try:
        state = fold.step(fold.state if not settings.stateless else _State(), n)
        if state.failed or (fold.head_end < 0 and tokens_before > budget):
            needed = fold.size(state.cleared, state.cut, n) if fold.head_end >= 0 else tokens_before
            if limit is not None and limit > budget:
                fallback = fit(
                    messages,
                    budget=limit,
                    system=system,
                    tools=tools,
                    settings=settings,
                    format=fmt,
                    estimator=estimator,
                )
                over = replace(fallback.report, budget=budget, over_budget=True)
                return replace(fallback, report=over)
            raise ContextOverflowError(
                "the first message, the current turn's opening message and the latest tool "
                "round do not fit the budget",
                tokens=needed,
                limit=budget,
            )
        built = _build(fold, state, n, sizer)
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
    )
    return FitResult(list(built.out), report, system, tools)


@dataclass(frozen=True)
class _Built:
    """A built request for messages[:n] under a decision, kept to be extended cheaply."""

    cleared_count: int
    cut: int
    n: int
    out: list[Any]
    total: int
    cleared: tuple[str, ...]
    dropped: tuple[int, ...]
    note_index: int | None
    prefix_end: int


def _build(fold: _Fold, state: _State, n: int, sizer: Sizer) -> _Built:
    """The request for messages[:n] under ``state``. While the decision does not change,
    the previous request plus the new messages is the answer, which keeps warm calls cheap
    (and is exactly the prefix property the prompt cache needs)."""
    last = fold.last
    same = last is not None and (last.cleared_count, last.cut) == (state.cleared, state.cut)
    if last is not None and same and last.n <= n:
        new = fold.raws[last.n : n]
        prefix_end = n if last.prefix_end == last.n else last.prefix_end
        total = last.total + fold.prefix[n] - fold.prefix[last.n]
        built = replace(last, n=n, out=[*last.out, *new], total=total, prefix_end=prefix_end)
        fold.last = built
        return built
    built = _build_afresh(fold, state, n, sizer)
    fold.last = built
    return built


def _build_afresh(fold: _Fold, state: _State, n: int, sizer: Sizer) -> _Built:
    raw = fold.raws
    cleared_by_message: dict[int, set[str]] = {}
    cleared_ids: list[str] = []
    for j in fold.clearable_idx[: state.cleared]:
        result = fold.results[j]
        if state.cut >= 0 and fold.head_end <= result.message < state.cut:
            continue  # in a dropped message: nothing to clear
        cleared_by_message.setdefault(result.message, set()).add(result.call_id)
        cleared_ids.append(result.call_id)

    def emit(i: int) -> tuple[Any, int]:
        ids = cleared_by_message.get(i)
        if not ids:
            return raw[i], fold.sizes[i]
        frozen = frozenset(ids)
        hit = fold.built.get(i)
        if hit is not None and hit[0] == frozen:
            return hit[1], hit[2]
        message = fold.neutral[i]
        blocks = tuple(_cleared(b) if _clears(b, ids) else b for b in message.blocks)
        new = replace(message, blocks=blocks)
        built = fold.spec.to_message(new)
        tokens = sizer.size_of(new).tokens
        fold.built[i] = (frozen, built, tokens)
        return built, tokens

    out: list[Any] = []
    total = fold.fixed
    dropped: tuple[int, ...] = ()
    note_index: int | None = None
    head_end = fold.head_end if fold.head_end >= 0 else n
    for i in range(min(head_end, n)):
        item, tokens = emit(i)
        out.append(item)
        total += tokens
    if state.cut >= 0:
        opening = fold.opening(state.cut)
        kept_after = [*([opening] if opening is not None else []), *range(state.cut, n)]
        dropped = tuple(i for i in range(head_end, state.cut) if i != opening)
        following = fold.neutral[kept_after[0]]
        note_index, note_tokens = _place_note(out, fold.spec, following, sizer)
        total += note_tokens
        for i in kept_after:
            item, tokens = emit(i)
            out.append(item)
            total += tokens
    else:
        for i in range(head_end, n):
            item, tokens = emit(i)
            out.append(item)
            total += tokens
    prefix_end = 0
    while prefix_end < min(len(out), n) and out[prefix_end] is raw[prefix_end]:
        prefix_end += 1
    if total > fold.budget:  # the bound used while folding is an upper bound: never here
        raise ContextOverflowError(
            "the shaped request is over the budget", tokens=total, limit=fold.budget
        )
    return _Built(
        state.cleared, state.cut, n, out, total, tuple(cleared_ids), dropped, note_index, prefix_end
    )


def _clears(block: Block, ids: set[str]) -> bool:
    return isinstance(block, ToolResult) and block.call_id in ids


def _cleared(block: Block) -> Block:
    assert isinstance(block, ToolResult)
    content: str | tuple[Block, ...]
    content = (
        (Text(CLEARED_RESULT_NOTE),) if isinstance(block.content, tuple) else (CLEARED_RESULT_NOTE)
    )
    return replace(block, content=content)


def _place_note(
    out: list[Any], spec: FormatSpec, following: Message, sizer: Sizer
) -> tuple[int, int]:
    """Put the trimmed-conversation note between the head and the kept messages so that
    roles still alternate: as its own message when the messages around it have the same
    side (user/tool vs assistant), else appended to the last head message. Returns the
    note's index in ``out`` and the tokens it added."""
    before = spec.from_message(out[-1], len(out) - 1)  # as sent (its results may be cleared)
    user_side = {"user", "tool"}
    same_side = (before.role in user_side) == (following.role in user_side)
    if same_side or (spec.name == "openai" and before.role != "user"):
        role = "assistant" if before.role in user_side and following.role != "assistant" else "user"
        note = Message(role, (Text(TRIMMED_CONVERSATION_NOTE),), "string")
        out.append(spec.to_message(note))
        return len(out) - 1, sizer.size_of(note).tokens
    if before.form == "string":
        text = "".join(b.text for b in before.blocks if isinstance(b, Text))
        merged = replace(before, blocks=(Text(f"{text}\n\n{TRIMMED_CONVERSATION_NOTE}"),))
    else:
        merged = replace(
            before, blocks=(*before.blocks, Text(TRIMMED_CONVERSATION_NOTE)), form="list"
        )
    old = sizer.size_of(before).tokens
    out[-1] = spec.to_message(merged)
    return len(out) - 1, sizer.size_of(merged).tokens - old
