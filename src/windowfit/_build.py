"""Build the request to send from the messages given and the fold's decision.

Unchanged messages are the very objects given; a message whose results are cleared, or
whose results are left out (user input beside the results of a dropped round), is a
shallow copy made by the format (keys in their order, other blocks shared); the
trimmed-conversation note is placed so that roles still alternate. Sizes come from the
facts (clearing and leaving out results change a message's size by exactly the parts
concerned), so nothing is measured twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._fold import Fold, State
from .errors import ContextOverflowError
from .formats import FormatSpec
from .instructions import CLEARED_RESULT_NOTE, TRIMMED_CONVERSATION_NOTE
from .messages import Message, Text
from .sizing import Sizer

__all__ = ["Built", "build"]


@dataclass(frozen=True)
class Built:
    """A built request for messages[:n] under a decision."""

    out: list[Any]
    total: int
    cleared: tuple[str, ...]
    dropped: tuple[int, ...]
    note_index: int | None
    prefix_end: int


def build(
    fold: Fold, state: State, raw: Sequence[Any], n: int, sizer: Sizer, bound: int | None = None
) -> Built:
    """The request for ``raw[:n]`` under ``state``, within ``bound`` (the fold's budget
    unless given: the model's window, for the smallest request over the budget)."""
    spec = fold.spec
    facts = fold.facts
    head_end = fold.head_end if fold.head_end >= 0 else n
    opening = fold.opening(state.cut) if state.cut >= 0 else None
    # The first message kept after a cut (and the opening beside it) lose the results of
    # the dropped round before them; later messages keep theirs.
    stripped = {
        i for i in (opening, state.cut) if i is not None and 0 <= i < n and fold.stripped(i)
    }
    cleared_by_message: dict[int, set[str]] = {}
    cleared_ids: list[str] = []
    saved: dict[int, int] = {}
    for j in fold.clearable_idx[: state.cleared]:
        message, call_id, _, saving, _ = fold.results[j]
        if state.cut >= 0 and fold.head_end <= message < state.cut:
            continue  # in a dropped message: nothing to clear
        if message in stripped:
            continue  # left out with its round
        cleared_by_message.setdefault(message, set()).add(call_id)
        cleared_ids.append(call_id)
        saved[message] = saved.get(message, 0) + saving

    out: list[Any] = []
    total = fold.fixed

    def emit(i: int) -> None:
        nonlocal total
        if i in stripped:
            out.append(spec.strip(raw[i]))
            total += facts[i].user_tokens
            return
        ids = cleared_by_message.get(i)
        if ids:
            out.append(spec.clear(raw[i], frozenset(ids), CLEARED_RESULT_NOTE))
            total += facts[i].tokens - saved[i]
        else:
            out.append(raw[i])
            total += facts[i].tokens

    dropped: tuple[int, ...] = ()
    note_index: int | None = None
    for i in range(min(head_end, n)):
        emit(i)
    if state.cut >= 0:
        kept_after = [*([opening] if opening is not None else []), *range(state.cut, n)]
        dropped = tuple(i for i in range(head_end, state.cut) if i != opening)
        note_index, note_tokens = _place_note(out, spec, facts[kept_after[0]].role, sizer)
        total += note_tokens
        for i in kept_after:
            emit(i)
    else:
        for i in range(head_end, n):
            emit(i)
    prefix_end = 0
    limit = min(len(out), n)
    while prefix_end < limit and out[prefix_end] is raw[prefix_end]:
        prefix_end += 1
    bound = fold.budget if bound is None else bound
    if total > bound:  # the bound used while folding is an upper bound: never here
        raise ContextOverflowError(
            "the shaped request is over the budget", tokens=total, limit=bound
        )
    return Built(out, total, tuple(cleared_ids), dropped, note_index, prefix_end)


def _place_note(out: list[Any], spec: FormatSpec, following: str, sizer: Sizer) -> tuple[int, int]:
    """Put the trimmed-conversation note between the head and the kept messages so that
    roles still alternate: as its own message when the messages around it have the same
    side (user/tool vs assistant), else appended to the last head message. Returns the
    note's index in ``out`` and the tokens it added."""
    before = spec.from_message(out[-1], len(out) - 1)  # as sent (its results may be cleared)
    user_side = {"user", "tool"}
    same_side = (before.role in user_side) == (following in user_side)
    own = spec.note_as_own_message or (spec.note_joins_only_user_messages and before.role != "user")
    if own or same_side:
        model = spec.assistant_role
        role = model if before.role in user_side and following != model else "user"
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
    out[-1] = {**out[-1], **spec.to_message(merged)}
    return len(out) - 1, sizer.size_of(merged).tokens - old
