"""The fold over a conversation's request points: the cache-stable decision.

See :mod:`windowfit.fitting` for the idea. A :class:`Fold` is built for one format,
budget, settings and fixed size (system and tools), from the messages' :class:`Facts`
alone (never the messages themselves), and extended as the conversation grows; its
``state`` is the decision after the last committed request point. It depends only on
the facts, so two conversations with the same facts get the same decisions, which is
what lets a :class:`~windowfit.Fitter` reuse a fold for freshly parsed copies.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate, islice

from .formats import FormatSpec
from .formats._facts import Facts
from .settings import FitSettings

__all__ = ["Fold", "State"]


@dataclass
class State:
    cleared: int = 0  # how many of the clearable results (oldest first) are cleared
    cut: int = -1  # first kept message after the head; -1 while nothing is dropped
    failed: bool = False
    exhausted: bool = False  # stage 1 once cleared all it could without reaching the mark


@dataclass
class Fold:
    """Incremental arrays over the conversation and the committed decision.

    Built for one (sizer, format, budget, settings, fixed size); extended message by
    message; ``state`` is the decision after the last committed request point.
    """

    budget: int
    settings: FitSettings
    fixed: int
    note_cost: int
    spec: FormatSpec
    facts: list[Facts] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    prefix: list[int] = field(default_factory=lambda: [0])
    roles: list[str] = field(default_factory=list)
    turn_starts: list[int] = field(default_factory=list)
    assistants: list[int] = field(default_factory=list)
    #: One tuple per tool result: the index of the message that carries it, its call id,
    #: its tokens, the tokens clearing it saves, whether it is big enough to be worth
    #: clearing. (A plain tuple: a cold fit makes one per result.)
    results: list[tuple[int, str, int, int, bool]] = field(default_factory=list)
    head_end: int = -1  # end of the always-kept head (system messages, first message)
    first: int = -1  # index of the first non-system message
    result_msgs: list[int] = field(default_factory=list)
    protected_from: int = 0  # results[protected_from:tail_end] are in the protected tail
    tail_end: int = 0
    tail_tokens: int = 0
    clearable_msg: list[int] = field(default_factory=list)
    clearable_idx: list[int] = field(default_factory=list)
    savings: list[int] = field(default_factory=lambda: [0])
    state: State = field(default_factory=State)
    committed: int = 0  # request points below this index are folded into ``state``

    # -- growing the arrays ------------------------------------------------------------

    def add(self, facts: Facts) -> None:
        """Add the next message's facts (checked by the caller)."""
        i = len(self.sizes)
        self.facts.append(facts)
        self.sizes.append(facts.tokens)
        self.prefix.append(self.prefix[-1] + facts.tokens)
        role = facts.role
        # One item of a round that an earlier item opened (OpenAI Responses): neither a
        # request point nor a place to cut.
        continues = (
            self.spec.item_rounds
            and role == "assistant"
            and i > 0
            and self.facts[i - 1].role == "assistant"
        )
        if self.first < 0 and role not in self.spec.system_roles:
            self.first = i
            self.head_end = i + 1
        elif self.first >= 0 and self.head_end == i and (facts.carrier or continues):
            self.head_end = i + 1  # results answering the first message stay with it
        if i >= self.head_end >= 0:
            if role == self.spec.assistant_role and not continues:
                self.assistants.append(i)
            elif facts.user_input:
                # User input is a turn's start even beside tool results (typed while the
                # tools ran): a cut may fall before it, and its results then stay with
                # their round (see ``kept_size``).
                self.turn_starts.append(i)
        if facts.results:
            ratio = self.settings.min_clear_ratio
            for call_id, tokens, cleared in facts.results:
                self.results.append(
                    (i, call_id, tokens, tokens - cleared, tokens >= ratio * cleared)
                )
                self.result_msgs.append(i)

    def extend(self, facts: Sequence[Facts]) -> None:
        """:meth:`add` every message of ``facts`` after those already added, in one loop
        (the same arrays; a cold fit adds thousands of messages, and per-message method
        calls and attribute look-ups cost more than the work itself)."""
        start = len(self.sizes)
        if start >= len(facts):
            return
        if self.first < 0 or self.head_end == start:
            # The head is still open (no first message yet, or results answering it may
            # follow): add message by message until it closes.
            while start < len(facts) and (self.first < 0 or self.head_end == start):
                self.add(facts[start])
                start += 1
            if start >= len(facts):
                return
        new = facts[start:]
        self.facts.extend(new)
        sizes = [f[1] for f in new]
        self.sizes.extend(sizes)
        self.prefix.extend(islice(accumulate(sizes, initial=self.prefix[-1]), 1, None))
        item_rounds, assistant_role = self.spec.item_rounds, self.spec.assistant_role
        assistants, turn_starts = self.assistants, self.turn_starts
        ratio = self.settings.min_clear_ratio
        results, result_msgs = self.results, self.result_msgs
        before = self.facts[start - 1].role
        i = start
        for role, _, _, message_results, _, user_input, _ in new:
            if role == assistant_role and not (
                item_rounds and role == "assistant" and before == "assistant"
            ):
                assistants.append(i)
            elif user_input:
                turn_starts.append(i)
            for call_id, tokens, cleared in message_results:
                results.append((i, call_id, tokens, tokens - cleared, tokens >= ratio * cleared))
                result_msgs.append(i)
            before = role
            i += 1

    def approximate_bytes(self) -> int:
        """What this fold keeps, roughly, for the :class:`~windowfit.Fitter`'s memory bound
        (measured with tracemalloc: about this much per message and per tool result)."""
        return 1024 + 360 * len(self.sizes) + 200 * len(self.results)

    def advance_protection(self, upto: int) -> None:
        """Move the protected tail to the results of messages[:upto]: the newest results
        whose running total fits in protect_fraction of the budget, at least the newest
        (or, with ``keep_results``, the newest that many results)."""
        limit = self.settings.protect_fraction * self.budget
        keep = self.settings.keep_results
        count = bisect_left(self.result_msgs, upto)
        while self.tail_end < count:
            self.tail_tokens += self.results[self.tail_end][2]
            self.tail_end += 1
        while self.protected_from < count - 1 and (
            count - self.protected_from > keep if keep is not None else self.tail_tokens > limit
        ):
            message, _, tokens, saving, clearable = self.results[self.protected_from]
            self.tail_tokens -= tokens
            if clearable:
                self.clearable_msg.append(message)
                self.clearable_idx.append(self.protected_from)
                self.savings.append(self.savings[-1] + saving)
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

    def stripped(self, index: int) -> bool:
        """Whether message ``index``, kept right after a cut (as the cut itself or as the
        opening beside it), is sent without its tool results: their round was dropped."""
        return self.facts[index].carrier

    def size(self, cleared: int, cut: int, upto: int) -> int:
        """Estimated request size for messages[:upto] under a decision (an upper bound
        where a note is involved; the exact size is measured on the built request)."""
        head = self.prefix[self.head_end] - self._saved(cleared, 0, self.head_end)
        if cut < 0:
            body = self.prefix[upto] - self.prefix[self.head_end]
            return self.fixed + head + body - self._saved(cleared, self.head_end, upto)
        if cut < upto and self.stripped(cut):
            body = self.facts[cut].user_tokens + self.prefix[upto] - self.prefix[cut + 1]
            body -= self._saved(cleared, cut + 1, upto)
        else:
            body = self.prefix[upto] - self.prefix[cut] - self._saved(cleared, cut, upto)
        opening = self.opening(cut)
        extra = 0
        if opening is not None:
            facts = self.facts[opening]
            extra = facts.user_tokens if facts.carrier else facts.tokens
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

    def step(self, state: State, upto: int) -> State:
        """The decision at the request made of messages[:upto], given the previous one."""
        budget = self.budget
        self.advance_protection(upto)
        trigger = self.settings.clear_trigger
        if trigger is not None and self.fixed + self.prefix[upto] > trigger * budget:
            # Keep-window clearing: the results that left the window are cleared once
            # ``batch_size`` of them wait, which changes the request near its end; a
            # batch re-sends a little more at a change but changes it that many times
            # less often, and the waiting results stay intact meanwhile.
            waiting = len(self.clearable_msg) - state.cleared
            if waiting >= self.settings.batch_size:
                state = State(len(self.clearable_msg), state.cut, exhausted=state.exhausted)
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
            return State(cleared, state.cut, exhausted=state.exhausted)
        # The mark is out of reach: clear all there is, once. The next time the request
        # outgrows the budget, clearing the few results that left the protected tail since
        # would buy little room for a re-send of everything after them, so stages 2 and 3
        # take over then.
        once = state.cut < 0 and not state.exhausted
        if once and self.size(n_clearable, state.cut, upto) <= budget:
            return State(n_clearable, state.cut, exhausted=True)
        return self._cut(state, upto, n_clearable)

    def fold_points(self, points: Sequence[int]) -> None:
        """Fold ``state`` over the request points ``points`` (increasing, after those
        folded already): at each, :meth:`step`, keeping the decision unless the request
        could not be sent.

        A decision that fits at one point stays while it fits, and under one decision
        the request only grows with ``upto`` (its cleared results lie before the point
        where it was taken, so what clearing saves stays the same). So the points where
        it still fits are found by bisection and skipped: stepping there would change
        nothing, and the protected tail, which depends only on the point it is advanced
        to, is advanced at the next point stepped. (Keep-window clearing changes the
        decision at points where it fits, so with ``clear_trigger`` every point is
        stepped.)"""
        skip = self.settings.clear_trigger is None and self.head_end >= 0
        budget = self.budget
        k, n = 0, len(points)
        while k < n:
            state = self.state
            if skip and not state.failed:
                cleared, cut, size = state.cleared, state.cut, self.size
                lo, hi = k, n
                while lo < hi:  # the first point where the decision no longer fits
                    mid = (lo + hi) // 2
                    if size(cleared, cut, points[mid]) <= budget:
                        lo = mid + 1
                    else:
                        hi = mid
                k = lo
                if k == n:
                    break
            decided = self.step(state, points[k])
            if not decided.failed:  # a request that could not be sent decides nothing
                self.state = decided
            k += 1

    def _cut(self, state: State, upto: int, cleared: int) -> State:
        low = self._low_water(self.settings.cut_low_water, cut=True)
        start = max(state.cut, self.head_end + 1)
        lo = bisect_left(self.turn_starts, start)
        hi = bisect_left(self.turn_starts, upto)
        turns = self.turn_starts[lo:hi]
        chosen = self._first_cut(turns, cleared, upto, low)
        if chosen is not None:
            return State(cleared, chosen, exhausted=state.exhausted)
        current_turn = self.turn_starts[hi - 1] if hi > 0 else self.first
        lo = bisect_left(self.assistants, max(start, current_turn + 1))
        hi = bisect_left(self.assistants, upto)
        rounds = self.assistants[lo:hi]
        chosen = self._first_cut(rounds, cleared, upto, low)
        if chosen is not None:
            return State(cleared, chosen, exhausted=state.exhausted)
        if rounds:
            return State(cleared, rounds[-1], failed=True)
        if turns:
            return State(cleared, turns[-1], failed=True)
        return State(cleared, state.cut, failed=True)

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

    def stage(self, state: State) -> int:
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
