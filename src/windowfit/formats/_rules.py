"""The one tool-call pairing and placement rule, written once for every format.

Both providers reject a request (400) whose tool results and calls do not pair up:
every result must answer a call of the assistant message just before it (only other
result-carrying messages between), and every call must be answered before the next
message that is not a result. Anthropic also wants the first message to be the user's.
What lies inside one message (tool_result blocks first, tool_use only from the assistant)
is checked by each format's scanner; what lies across messages is checked here, from
:class:`~windowfit.formats._facts.Facts` alone, so that fitting, replay and the server
judge a request the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ._common import FormatSpec
from ._facts import Facts

__all__ = ["PairingRule", "Problem", "ProblemKind"]

ProblemKind = Literal["orphan_result", "unanswered_call", "duplicate_call", "bad_opening"]


@dataclass(frozen=True)
class Problem:
    """One way a request breaks the rule: ``kind``, the message ``index`` it is found at,
    the ``call_id`` concerned (``None`` for an opening problem) and a person's ``text``."""

    kind: ProblemKind
    index: int
    call_id: str | None
    text: str


class PairingRule:
    """Checks a request message by message (``add`` each, then ``finish``).

    ``system_roles`` lead a request without taking part in the pairing; ``opening_roles``
    are the roles the first other message may have (``None``: any role). With
    ``item_rounds`` (OpenAI Responses, one item per message), an assistant message right
    after an assistant message continues its round: calls stay open across the round's
    items and are answered by the result items after it.
    """

    def __init__(
        self,
        system_roles: frozenset[str] = frozenset(),
        opening_roles: frozenset[str] | None = None,
        item_rounds: bool = False,
    ) -> None:
        self.system_roles = system_roles
        self.opening_roles = opening_roles
        self.item_rounds = item_rounds
        self.open_calls: dict[str, int] = {}  # call id -> index of the assistant message
        self.opened = False
        self.last_role: str | None = None  # the role of the message checked last

    @classmethod
    def for_format(cls, spec: FormatSpec) -> PairingRule:
        """The rule as ``spec``'s API applies it."""
        return cls(spec.system_roles, spec.opening_roles, spec.item_rounds)

    def add(self, i: int, facts: Facts) -> Problem | None:
        """The first problem message ``i`` reveals, or ``None``."""
        return self.check(i, facts.role, facts.calls, [r[0] for r in facts.results], facts.carrier)

    def add_all(self, facts: Sequence[Facts], start: int = 0) -> Problem | None:
        """:meth:`add` for ``facts[start:]`` in order (message ``i`` is ``facts[i]``): the
        first problem, or ``None``. After the opening, the rule of :meth:`check` is applied
        here in one loop over the facts' fields (a cold fit checks thousands of messages,
        and a call per message costs more than the check)."""
        check = self.check
        n = len(facts)
        begin = start
        while begin < n and not self.opened:  # the opening, message by message
            f = facts[begin]
            problem = check(begin, f.role, f.calls, [r[0] for r in f.results], f.carrier)
            if problem is not None:
                return problem
            begin += 1
        open_calls = self.open_calls
        item_rounds = self.item_rounds
        last_role = self.last_role
        for i in range(begin, n):
            role, _, calls, results, carrier, _, _ = facts[i]
            for call_id, _, _ in results:
                if call_id not in open_calls:
                    self.last_role = role
                    return _orphan(i, call_id)
                del open_calls[call_id]
            continues = item_rounds and role == "assistant" and last_role == "assistant"
            if open_calls and not carrier and not continues:
                self.last_role = role
                return _unanswered(open_calls, i)
            for call_id in calls:
                if call_id in open_calls:
                    self.last_role = role
                    return _duplicate(i, call_id)
                open_calls[call_id] = i
            last_role = role
        self.last_role = last_role
        return None

    def check(
        self,
        i: int,
        role: str,
        calls: Sequence[str],
        results: Sequence[str],
        carrier: bool,
    ) -> Problem | None:
        """As :meth:`add`, from the parts: the message's role, the ids of the tool calls it
        makes and of the calls its results answer, and whether it answers calls."""
        if not self.opened and role not in self.system_roles:
            self.opened = True
            if self.opening_roles is not None and role not in self.opening_roles:
                allowed = " or ".join(sorted(self.opening_roles))
                return Problem(
                    "bad_opening",
                    i,
                    None,
                    f"the first message must be a {allowed} message, not {role}",
                )
        open_calls = self.open_calls
        continues = self.item_rounds and role == "assistant" and self.last_role == "assistant"
        self.last_role = role
        for call_id in results:
            if call_id not in open_calls:
                return _orphan(i, call_id)
            del open_calls[call_id]
        if open_calls and not carrier and not continues:
            return _unanswered(open_calls, i)
        for call_id in calls:
            # Ids may be reused once answered (real OpenAI runs do), never while open.
            if call_id in open_calls:
                return _duplicate(i, call_id)
            open_calls[call_id] = i
        return None

    def finish(self) -> Problem | None:
        """A request must answer every call it contains."""
        if self.open_calls:
            call_id, at = next(iter(self.open_calls.items()))
            self.open_calls.clear()
            return Problem(
                "unanswered_call",
                at,
                call_id,
                f"tool call {call_id!r} has no tool result (a request must answer every call)",
            )
        return None


def _orphan(i: int, call_id: str) -> Problem:
    return Problem(
        "orphan_result",
        i,
        call_id,
        f"tool result for call {call_id!r} has no matching tool call in the "
        "assistant message just before it",
    )


def _unanswered(open_calls: dict[str, int], i: int) -> Problem:
    """The first of ``open_calls``, left unanswered by message ``i`` (the calls are
    forgotten: the problem is reported once)."""
    call_id, at = next(iter(open_calls.items()))
    open_calls.clear()
    return Problem(
        "unanswered_call",
        at,
        call_id,
        f"tool call {call_id!r} has no tool result before message {i}",
    )


def _duplicate(i: int, call_id: str) -> Problem:
    return Problem(
        "duplicate_call", i, call_id, f"tool call id {call_id!r} is used twice in one round"
    )
