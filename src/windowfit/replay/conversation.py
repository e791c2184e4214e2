"""One run, measured once, and what every policy needs to know about it.

:class:`Conversation` holds a run's messages in provider format and in neutral form, their
sizes under the replay's tokenizer, and indexes that make each policy's decision cheap at
every request point: where the tool calls and results are, how many "events" (in the
OpenHands sense) precede each message, and where the first non-system message is. It also
rebuilds messages whose tool results a policy replaced by a placeholder, once per distinct
change, so that an unchanged decision gives the very same objects at the next request
(which is what lets the sizer and the cache meter count each message once).

A policy's decision at request ``upto`` (the request was ``messages[:upto]``) may only
depend on ``messages[:upto]``, the run's system prompt and tools, and the replay's
budget: every index here is either per message or a prefix sum, so it can be read for any
prefix.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..cache import message_key
from ..formats import FormatSpec, get_format
from ..logs import Run
from ..messages import Block, ContentForm, Image, Message, Text, ToolCall, ToolResult
from ..sizing import MessageSize, Sizer

__all__ = ["Conversation", "Described", "Observation", "result_text"]

#: What the replay needs of a sent message: its index among the logged messages (-1 when
#: it was rebuilt), its size, whether it carries tool results (starts with one), the call
#: ids of its results, the ids of its calls, its role, and its neutral form.
Described = tuple[int, int, bool, tuple[str, ...], tuple[str, ...], str, Message]


@dataclass(frozen=True)
class Observation:
    """Something a tool or the environment returned, as the peers see it.

    ``call_id`` is the tool call a tool result answers; it is ``None`` for a whole user
    message that plays the part of an observation in a run without tool calls (SWE-agent's
    thought/action histories, where the environment's output comes back as a user
    message). ``event`` is its position in the OpenHands event sequence.
    """

    message: int
    call_id: str | None
    tokens: int
    event: int


def result_text(content: str | tuple[Block, ...] | None) -> tuple[str, int]:
    """The text of a tool result's content and how many images it holds."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts = [b.text for b in content if isinstance(b, Text)]
    images = sum(1 for b in content if isinstance(b, Image))
    return "\n".join(texts), images


class Conversation:
    """A run's messages with their sizes and the indexes the policies read.

    ``budget`` and ``hard_limit`` are the replay's limits for this run (whole request,
    system and tools included); ``fixed`` is the size of the system prompt and tools.
    """

    def __init__(self, run: Run, sizer: Sizer, budget: int = 0, hard_limit: int = 0):
        self.run = run
        self.messages: list[dict[str, Any]] = run.messages
        self.spec: FormatSpec = get_format(run.format)
        self.sizer = sizer
        self.budget = budget
        self.hard_limit = hard_limit
        self.neutral: list[Message] = []
        self.sizes: list[MessageSize] = []
        for i, raw in enumerate(self.messages):
            message, size = sizer.measure(raw, self.spec, i)
            self.neutral.append(message)
            self.sizes.append(size)
        self.fixed = sizer.system(run.system) + sizer.tools(run.tools)
        self.prefix = [0]
        for size in self.sizes:
            self.prefix.append(self.prefix[-1] + size.tokens)

        system_roles = self.spec.system_roles
        self.first = next((i for i, m in enumerate(self.neutral) if m.role not in system_roles), -1)
        # Tool calls in order, and where each call's result is.
        self.calls: list[tuple[int, ToolCall]] = []
        self.call_messages: list[int] = []  # message index of each call, for bisect
        self.result_at: dict[str, list[tuple[int, ToolResult, int]]] = {}
        self.result_tokens = [0]  # prefix sums of tool-result tokens per message
        # OpenHands events: an action per tool call (or one per assistant message without
        # calls), an observation per tool result, one event per other message.
        self.events = [0]
        tool_obs: list[Observation] = []
        user_obs: list[Observation] = []
        for i, (message, size) in enumerate(zip(self.neutral, self.sizes, strict=True)):
            event = self.events[-1]
            results = message.tool_results
            calls = message.tool_calls
            result_sizes = {call_id: tokens for call_id, tokens, _ in size.results}
            for k, result in enumerate(results):
                tokens = result_sizes.get(result.call_id, 0)
                self.result_at.setdefault(result.call_id, []).append((i, result, tokens))
                tool_obs.append(Observation(i, result.call_id, tokens, event + k))
            for call in calls:
                self.calls.append((i, call))
                self.call_messages.append(i)
            self.result_tokens.append(self.result_tokens[-1] + sum(result_sizes.values()))
            if results:
                rest = any(not isinstance(b, ToolResult) for b in message.blocks)
                count = len(results) + (1 if rest else 0)
            elif calls:
                count = len(calls)
            else:
                count = 1
            if message.role == "user" and not results and i > self.first >= 0:
                user_obs.append(Observation(i, None, size.tokens, event))
            self.events.append(event + count)
        self._tool_obs = tool_obs
        self._tool_obs_messages = [o.message for o in tool_obs]
        self._user_obs = user_obs
        self._user_obs_messages = [o.message for o in user_obs]
        self._built: dict[tuple[Any, ...], dict[str, Any]] = {}
        #: Where each logged message object stands in ``messages`` (by identity).
        self.index_of: dict[int, int] = {id(m): i for i, m in enumerate(self.messages)}
        self._described: list[Described] = [
            self._describe(i, m, size.tokens)
            for i, (m, size) in enumerate(zip(self.neutral, self.sizes, strict=True))
        ]
        self._other: dict[int, tuple[Any, Described]] = {}
        self._by_key: dict[str, Described] = {}

    # -- sizes ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.run.name

    def request_tokens(self, upto: int) -> int:
        """Size of the request ``messages[:upto]`` sent as it is."""
        return self.fixed + self.prefix[upto]

    def size_of(self, message: Any) -> int:
        """Size of a message of a shaped request (cached per message object)."""
        return self.describe(message)[1]

    def neutral_of(self, message: Any) -> Message:
        return self.describe(message)[6]

    @staticmethod
    def _describe(index: int, message: Message, tokens: int) -> Described:
        blocks = message.blocks
        carrier = bool(blocks) and isinstance(blocks[0], ToolResult)
        results = tuple(r.call_id for r in message.tool_results)
        calls = tuple(c.id for c in message.tool_calls)
        return (index, tokens, carrier, results, calls, message.role, message)

    def describe(self, message: Any) -> Described:
        """What the replay needs of a message of a shaped request (see :data:`Described`):
        read from the run's own tables for a logged message, computed once per object
        (and once per distinct content) for a rebuilt one."""
        i = self.index_of.get(id(message))
        if i is not None and self.messages[i] is message:
            return self._described[i]
        hit = self._other.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = message_key(message)
        described = self._by_key.get(key)
        if described is None:
            neutral, size = self.sizer.measure(message, self.spec, 0)
            described = self._describe(-1, neutral, size.tokens)
            self._by_key[key] = described
        self._other[id(message)] = (message, described)
        return described

    # -- what the peers look at -------------------------------------------------------

    def uses_tools(self, upto: int) -> bool:
        """Whether ``messages[:upto]`` holds a tool call."""
        return bool(self.call_messages) and self.call_messages[0] < upto

    def calls_before(self, upto: int) -> list[tuple[int, ToolCall]]:
        """The tool calls of ``messages[:upto]``, oldest first."""
        return self.calls[: bisect_left(self.call_messages, upto)]

    def observations(self, upto: int) -> list[Observation]:
        """The observations of ``messages[:upto]``: its tool results when it holds tool
        calls, else its user messages after the first non-system message."""
        if self.uses_tools(upto):
            return self._tool_obs[: bisect_left(self._tool_obs_messages, upto)]
        return self._user_obs[: bisect_left(self._user_obs_messages, upto)]

    def results_of(self, call_id: str, upto: int) -> list[tuple[int, ToolResult, int]]:
        """Where the results for ``call_id`` are in ``messages[:upto]``."""
        return [hit for hit in self.result_at.get(call_id, ()) if hit[0] < upto]

    # -- rebuilding changed messages -------------------------------------------------------

    def replaced(
        self,
        index: int,
        results: Mapping[str, str] | None = None,
        *,
        whole: str | None = None,
        cleared_inputs: frozenset[str] = frozenset(),
        tag: str = "",
    ) -> dict[str, Any]:
        """Message ``index`` with the content of some tool results replaced.

        ``results`` maps call ids to the text that stands in for their content (the form,
        string or list of blocks, is kept); ``whole`` replaces the text of the whole
        message instead; ``cleared_inputs`` names tool calls whose arguments become
        ``{}``. The same change gives the same object every time it is asked for.
        """
        results = results or {}
        key = (tag, index, frozenset(results.items()), whole, cleared_inputs)
        hit = self._built.get(key)
        if hit is not None:
            return hit
        message = self.neutral[index]
        if whole is not None:
            whole_form: ContentForm = "list" if message.form == "list" else "string"
            new = replace(message, blocks=(Text(whole),), form=whole_form)
        else:
            blocks: list[Block] = []
            form: ContentForm = message.form
            for block in message.blocks:
                if isinstance(block, ToolResult) and block.call_id in results:
                    text = results[block.call_id]
                    if isinstance(block.content, tuple):
                        block = replace(block, content=(Text(text),))
                    else:
                        block = replace(block, content=text)
                        if message.role == "tool":
                            form = "string"
                elif isinstance(block, ToolCall) and block.id in cleared_inputs:
                    block = replace(block, arguments="{}", input={})
                blocks.append(block)
            new = replace(message, blocks=tuple(blocks), form=form)
        built = self.spec.to_message(new)
        self._built[key] = built
        return built

    def with_blocks(self, index: int, keep: Sequence[int], tag: str = "") -> dict[str, Any]:
        """Message ``index`` with only the blocks at positions ``keep`` (cached)."""
        key = (tag, index, "blocks", tuple(keep))
        hit = self._built.get(key)
        if hit is not None:
            return hit
        message = self.neutral[index]
        new = replace(message, blocks=tuple(message.blocks[k] for k in keep))
        built = self.spec.to_message(new)
        self._built[key] = built
        return built
