"""A tighter bound on the tool-result tokens a request within the budget can keep intact.

The replay's *ceiling within the budget* (``RunReport.intact_ceiling``) lets every token of
the budget above the head hold a tool result. But a result is only sent intact beside the
assistant message whose call it answers (a provider rejects a result without its call),
and that message costs tokens too; on runs whose calls carry long thoughts or commands
the bound that counts them is much lower. Per request the bound here is a fractional
knapsack over the calling assistant messages: each one, sent with the result messages that
answer it, weighs its tokens and theirs and is worth their tool-result tokens; the head
(system prompt, tools, first message) is always sent. Everything else may be dropped or
cleared (which only lowers the weight), and a part of a group is worth at most its share,
so no valid request within the budget keeps more: the greedy fill is an upper bound.

Two weights: the real tokenizer's (what any policy can keep by the judge's count) and the
estimate windowfit counts with by default (what a policy that holds its *estimate* within
the budget can keep: the estimate errs high, so it sees less room). The worth is always
the judge's count of the results, as the intact share is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from windowfit.formats import get_format
from windowfit.logs import Run
from windowfit.replay import Conversation
from windowfit.sizing import Sizer


@dataclass(frozen=True)
class Group:
    """One calling assistant message with the result messages that answer it, before a
    request point: ``ready`` is the first request point (message count) that holds them."""

    ready: int
    worth: int
    weight: int


def groups(conv: Conversation, weights: Sequence[int]) -> list[Group]:
    """The calling groups of the run, oldest first, weighed with ``weights`` (one size per
    message). A result message joins the group of the call it answers first; results
    answering a call in the head are part of the head's worth (they are always sent)."""
    owner: dict[str, int] = {}
    for index, call in conv.calls:
        owner.setdefault(call.id, index)
    members: dict[int, list[int]] = {}
    for i, message in enumerate(conv.neutral):
        results = message.tool_results
        if not results or i <= conv.first:
            continue
        caller = owner.get(results[0].call_id)
        if caller is None or caller <= conv.first:
            continue
        members.setdefault(caller, []).append(i)
    out = []
    for caller, answers in sorted(members.items()):
        worth = sum(conv.result_tokens[i + 1] - conv.result_tokens[i] for i in answers)
        weight = weights[caller] + sum(weights[i] for i in answers)
        if worth:
            out.append(Group(max(answers) + 1, worth, weight))
    return out


def share_bound(found: Sequence[Group], upto: int, room: int, total: int) -> float:
    """The largest share of ``total`` result tokens a request ``messages[:upto]`` can keep
    intact with ``room`` tokens beside the head (fractional knapsack, densest first)."""
    if total <= 0:
        return 1.0
    kept = 0.0
    left = float(max(0, room))
    for group in sorted(
        (g for g in found if g.ready <= upto), key=lambda g: g.worth / g.weight, reverse=True
    ):
        if left <= 0:
            break
        if group.weight <= left:
            kept += group.worth
            left -= group.weight
        else:
            kept += group.worth * left / group.weight
            left = 0
    return min(1.0, kept / total)


def pair_ceilings(
    run: Run, conv: Conversation, estimate: Sizer, budget: int, points: Sequence[int]
) -> tuple[float, float, int]:
    """(sum of the per-request bound by the real count, the same by windowfit's default
    estimate, requests with tool results) over ``points``, for averaging as the replay
    averages the intact share."""
    spec = get_format(run.format)
    real = [size.tokens for size in conv.sizes]
    guessed = [estimate.measure(raw, spec, i)[1].tokens for i, raw in enumerate(conv.messages)]
    head_end = conv.first + 1 if conv.first >= 0 else len(real)
    real_head = conv.fixed + sum(real[:head_end])
    guessed_head = estimate.system(run.system) + estimate.tools(run.tools) + sum(guessed[:head_end])
    real_groups, guessed_groups = groups(conv, real), groups(conv, guessed)
    by_real = by_guess = 0.0
    counted = 0
    for upto in points:
        total = conv.result_tokens[upto]
        if not total:
            continue
        counted += 1
        by_real += share_bound(real_groups, upto, budget - real_head, total)
        by_guess += share_bound(guessed_groups, upto, budget - guessed_head, total)
    return by_real, by_guess, counted
