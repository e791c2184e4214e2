"""Peer policies, written from their public documentation (no code copied).

Each peer decides from the request alone (all three are documented as recomputing their
view at every model call: Anthropic applies context editing server-side to each request;
OpenHands condensers and SWE-agent history processors are applied to the full history
before every query), so each is a pure function of ``messages[:upto]``.

What "an observation" is: a tool result when the conversation holds tool calls; in a
history without tool calls (SWE-agent's thought/action format, where the environment's
output comes back as a user message), every user message after the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..messages import Image
from ..sizing import TOOL_OVERHEAD
from .conversation import Conversation, Observation, result_text
from .policies import Policy

__all__ = [
    "AnthropicClearToolUses",
    "OpenHandsObservationMasking",
    "SweAgentLastNObservations",
]


def _apply(
    conv: Conversation,
    upto: int,
    texts: Iterable[tuple[Observation, str]],
    tag: str,
    cleared_inputs: dict[int, set[str]] | None = None,
) -> list[dict[str, Any]]:
    """``messages[:upto]`` with the given observations replaced by their texts."""
    by_message: dict[int, dict[str, str]] = {}
    whole: dict[int, str] = {}
    for obs, text in texts:
        if obs.call_id is None:
            whole[obs.message] = text
        else:
            by_message.setdefault(obs.message, {})[obs.call_id] = text
    inputs = cleared_inputs or {}
    out = conv.messages[:upto]
    for index in sorted({*by_message, *whole, *inputs}):
        out[index] = conv.replaced(
            index,
            by_message.get(index),
            whole=whole.get(index),
            cleared_inputs=frozenset(inputs.get(index, ())),
            tag=tag,
        )
    return out


@dataclass(eq=False)
class AnthropicClearToolUses(Policy):
    """Anthropic context editing, strategy ``clear_tool_uses_20250919``.

    Documented behaviour (Anthropic docs, "Context editing", tool result clearing,
    docs.claude.com/en/docs/build-with-claude/context-editing): once the prompt exceeds
    the ``trigger``, the API clears the oldest tool results in chronological order,
    replacing each with placeholder text, and keeps the most recent ``keep`` tool
    use/result pairs; ``exclude_tools`` are never cleared; ``clear_tool_inputs`` also
    clears the tool-use parameters; when fewer than ``clear_at_least`` tokens can be
    cleared, the strategy is not applied. It runs server-side on every request, so it is
    stateless: every request over the trigger has all but its last ``keep`` tool results
    cleared, and each new call moves one result out of the keep-window (a change near the
    end of the prompt, which re-sends little).

    Documented defaults: ``trigger`` 100,000 input tokens, ``keep`` 3 tool uses,
    ``clear_at_least`` none, ``exclude_tools`` none, ``clear_tool_inputs`` false.

    Replay: the 100,000-token trigger is scaled to the replay: ``trigger`` defaults to the
    replay's budget (set ``trigger=N`` for a fixed number). The prompt size is counted
    with the replay's tokenizer, as the API counts real tokens. The docs do not give the
    placeholder's wording; a short ``[cleared]`` is used.
    """

    name: ClassVar[str] = "anthropic-clear-tool-uses"
    summary: ClassVar[str] = (
        "Anthropic context editing `clear_tool_uses_20250919` (Anthropic docs, context "
        "editing): over the trigger, clear all but the last `keep` tool results"
    )
    trigger: int | None = None
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False
    placeholder: str = "[cleared]"

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        trigger = self.trigger if self.trigger is not None else conv.budget
        if conv.request_tokens(upto) <= trigger:
            return conv.messages[:upto]
        calls = conv.calls_before(upto)
        older = calls[: max(0, len(calls) - max(0, self.keep))]
        excluded = set(self.exclude_tools)
        note = TOOL_OVERHEAD + conv.sizer.text(self.placeholder)
        cleared: list[tuple[Observation, str]] = []
        inputs: dict[int, set[str]] = {}
        saved = 0
        for index, call in older:
            if call.name in excluded:
                continue
            for where, _result, tokens in conv.results_of(call.id, upto):
                cleared.append((Observation(where, call.id, tokens, 0), self.placeholder))
                saved += max(0, tokens - note)
            if self.clear_tool_inputs:
                inputs.setdefault(index, set()).add(call.id)
                saved += max(0, conv.sizer.text(call.arguments) - 1)
        if not cleared and not inputs:
            return conv.messages[:upto]
        if saved < self.clear_at_least:
            return conv.messages[:upto]
        return _apply(conv, upto, cleared, self.name, inputs)

    def settings(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger if self.trigger is not None else "budget",
            "keep": self.keep,
            "clear_at_least": self.clear_at_least,
            "exclude_tools": list(self.exclude_tools),
            "clear_tool_inputs": self.clear_tool_inputs,
        }


@dataclass(eq=False)
class OpenHandsObservationMasking(Policy):
    """OpenHands' ``observation_masking`` condenser.

    Documented behaviour (OpenHands condenser configuration,
    ``ObservationMaskingCondenserConfig`` in ``openhands/core/config/condenser_config.py``,
    and the condenser's docstring in the OpenHands API docs, docs.all-hands.dev): "a
    condenser that masks the values of observations outside of a recent attention
    window"; ``attention_window`` is "the number of most-recent events where observations
    will not be masked". Two defaults are documented: the condenser class's own
    constructor takes ``attention_window: int = 5``
    (``openhands/memory/condenser/impl/observation_masking_condenser.py``), the config
    class defaults to 100. We use the condenser's 5, which also reproduces the figures the
    replay issue quotes for this peer (0.5-0.9x raw cost, about a hundred requests over the
    hard limit on mini-swe-agent at 30%); ``openhands-masking:attention_window=100`` is
    the other. Masked observations read ``<MASKED>``. The
    condensed view is recomputed from the full event history at every step, so it is
    stateless. It has no token trigger: it masks by event count whatever the budget.

    Events, as OpenHands counts them: one action per tool call (an assistant message
    without calls is one message event), one observation per tool result, one event per
    other message (system prompt, user messages).
    """

    name: ClassVar[str] = "openhands-masking"
    summary: ClassVar[str] = (
        "OpenHands `observation_masking` condenser (OpenHands condenser config): mask "
        "observations outside the last `attention_window` events"
    )
    attention_window: int = 5
    placeholder: str = "<MASKED>"

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        cutoff = conv.events[upto] - self.attention_window
        masked: list[tuple[Observation, str]] = []
        for obs in conv.observations(upto):
            if obs.event >= cutoff:
                break
            masked.append((obs, self.placeholder))
        if not masked:
            return conv.messages[:upto]
        return _apply(conv, upto, masked, self.name)

    def settings(self) -> dict[str, Any]:
        return {"attention_window": self.attention_window}


@dataclass(eq=False)
class SweAgentLastNObservations(Policy):
    """SWE-agent's ``last_n_observations`` history processor.

    Documented behaviour (SWE-agent reference, "History processor configuration",
    swe-agent.com/latest/reference/history_processor_config, ``LastNObservations``):
    "elide all but the last n observations"; elided observations are replaced by
    ``Old environment output: (N lines omitted)``; the first observation (the instance
    template, i.e. the task) is never elided. ``n`` has no default; the docs' typical
    configuration, used in the original paper and the SWE-agent 0.7 config, is ``n: 5``.
    ``polling`` (default 1) is "how many steps to keep between updating the number of
    observations to keep ... useful for caching": the elided range only moves when the
    number of observations crosses a multiple of ``polling``, so between ``n`` and
    ``n + polling`` observations are kept. Recomputed from the full history before every
    query, so stateless. No token trigger: it elides by count whatever the budget.
    """

    name: ClassVar[str] = "swe-agent-last-n"
    summary: ClassVar[str] = (
        "SWE-agent `last_n_observations` history processor (SWE-agent reference): elide "
        "all but the last `n` observations, updating every `polling` steps"
    )
    n: int = 5
    polling: int = 1

    def __post_init__(self) -> None:
        from ..errors import SettingsError

        if self.n <= 0:
            raise SettingsError(f"swe-agent-last-n: n must be a positive integer, not {self.n}")
        if self.polling <= 0:
            raise SettingsError(
                f"swe-agent-last-n: polling must be a positive integer, not {self.polling}"
            )

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        observations = conv.observations(upto)
        count = len(observations) + 1  # the instance template is observation 0
        last_removed = max(0, (count // self.polling) * self.polling - self.n)
        elided = observations[: max(0, last_removed - 1)]
        if not elided:
            return conv.messages[:upto]
        return _apply(conv, upto, ((o, _elided_text(conv, o)) for o in elided), self.name)

    def settings(self) -> dict[str, Any]:
        return {"n": self.n, "polling": self.polling}


def _elided_text(conv: Conversation, obs: Observation) -> str:
    message = conv.neutral[obs.message]
    if obs.call_id is None:
        text = message.text()
        images = sum(1 for b in message.blocks if isinstance(b, Image))
    else:
        content = next((r.content for r in message.tool_results if r.call_id == obs.call_id), None)
        text, images = result_text(content)
    out = f"Old environment output: ({len(text.splitlines())} lines omitted)"
    if images:
        out += f" ({images} images omitted)"
    return out
