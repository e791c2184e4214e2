"""The real ``langchain_core.messages.trim_messages``, as a replay policy.

Imported only when the ``langchain-trim`` policy is used (extra ``peers``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import MissingExtraError
from ..messages import Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .conversation import Conversation
from .policies import Policy

__all__ = ["LangChainTrim"]


@dataclass(eq=False)
class LangChainTrim(Policy):
    """LangChain's ``trim_messages``, configured as its documentation recommends for chat
    history (langchain_core API reference, ``trim_messages``, and the "How to trim
    messages" guide): ``strategy="last"`` (keep the most recent messages),
    ``token_counter=count_tokens_approximately`` (the documented approximate counter,
    "recommended for using trim_messages on the hot path": 4 characters per token plus 3
    tokens per message), ``start_on="human"``, ``end_on=("human", "tool")``,
    ``include_system=True``, ``allow_partial=False``. It drops whole messages from the
    start, so every trimmed request changes the prompt's start.

    Budget mapping: ``max_tokens`` is the replay's budget minus the tool definitions as
    the same approximate counter counts them (``count_tokens_approximately(tools=...)``);
    the system prompt is a ``SystemMessage`` at index 0 (kept by ``include_system``), so
    it counts inside ``max_tokens``. The counter is LangChain's, not the replay's
    tokenizer, so a trimmed request may still be over the budget when the tokenizer
    counts more than 1 token per 4 characters.

    Conversion: every provider message becomes LangChain messages (system ->
    ``SystemMessage``, user text -> ``HumanMessage``, assistant -> ``AIMessage`` with
    ``tool_calls``, each tool result -> ``ToolMessage``; an Anthropic user message that
    carries tool results and text becomes several). After trimming, a provider message
    whose parts were all kept is sent as it was; one that lost some parts is rebuilt
    from the parts kept. The per-message counter is memoised per LangChain message (the
    approximate counter rounds per message, so the sum equals its count of the list).
    """

    name: ClassVar[str] = "langchain-trim"
    summary: ClassVar[str] = (
        "LangChain `langchain_core.messages.trim_messages` (the real function, as its docs "
        "configure it for chat history): keep the last messages within `max_tokens`"
    )
    start_on: str = "human"
    end_on: tuple[str, ...] = ("human", "tool")
    include_system: bool = True
    allow_partial: bool = False
    _lc: dict[str, Any] = field(default_factory=dict, repr=False, init=False)

    def begin(self, conv: Conversation) -> None:
        self._lc = {"conv": conv, **_convert_run(conv)}

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        try:
            from langchain_core.messages import trim_messages
        except ImportError:  # pragma: no cover - guarded by the registry
            raise MissingExtraError(
                "langchain-core", "peers", "the langchain-trim policy"
            ) from None
        if self._lc.get("conv") is not conv:
            self.begin(conv)
        state = self._lc
        parts: list[tuple[int, int, Any]] = state["parts"]
        ends: list[int] = state["ends"]
        counts: dict[int, int] = state["counts"]
        system_lc = state["system"]
        count_one = state["count_one"]

        def counter(messages: list[Any]) -> int:
            total = 0
            for message in messages:
                hit = counts.get(id(message))
                if hit is None:
                    hit = count_one(message)
                    counts[id(message)] = hit
                total += hit
            return total

        lc_messages = [p[2] for p in parts[: ends[upto]]]
        if system_lc is not None:
            lc_messages.insert(0, system_lc)
        max_tokens = max(0, conv.budget - state["tools_tokens"])
        kept = trim_messages(
            lc_messages,
            max_tokens=max_tokens,
            token_counter=counter,
            strategy="last",
            start_on=self.start_on,
            end_on=list(self.end_on),
            include_system=self.include_system,
            allow_partial=self.allow_partial,
        )
        where: dict[int, tuple[int, int]] = state["where"]
        chosen: dict[int, list[int]] = {}
        for message in kept:
            if message is system_lc:
                continue
            located = where.get(id(message))
            if located is None:  # a partial message (allow_partial=True): not mapped back
                continue
            index, part = located
            chosen.setdefault(index, []).append(part)
        out: list[dict[str, Any]] = []
        for index in sorted(chosen):
            total = state["part_counts"][index]
            got = chosen[index]
            if len(got) == total:
                out.append(conv.messages[index])
            else:
                blocks = [b for p in sorted(got) for b in state["part_blocks"][index][p]]
                out.append(conv.with_blocks(index, blocks, tag=self.name))
        return out

    def settings(self) -> dict[str, Any]:
        return {
            "strategy": "last",
            "token_counter": "count_tokens_approximately",
            "start_on": self.start_on,
            "end_on": list(self.end_on),
            "include_system": self.include_system,
            "allow_partial": self.allow_partial,
        }


def _text(blocks: tuple[Any, ...]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Text | Thinking):
            out.append(block.text)
        elif isinstance(block, Opaque):
            out.append(json.dumps(block.data, ensure_ascii=False, default=str))
    return "\n".join(out)


def _content(blocks: tuple[Any, ...]) -> Any:
    """LangChain content: a string, or text and image blocks when images are present."""
    images = [b for b in blocks if isinstance(b, Image)]
    text = _text(blocks)
    if not images:
        return text
    content: list[Any] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "image_url", "image_url": {"url": "image"}} for _ in images]
    return content


def _arguments(call: ToolCall) -> dict[str, Any]:
    if isinstance(call.input, dict):
        return call.input
    try:
        value = json.loads(call.arguments) if call.arguments else {}
    except json.JSONDecodeError:
        value = {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def _convert_run(conv: Conversation) -> dict[str, Any]:
    """Every message of the run as LangChain messages, with where each came from."""
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.messages.utils import count_tokens_approximately

    parts: list[tuple[int, int, Any]] = []
    ends = [0]
    where: dict[int, tuple[int, int]] = {}
    part_counts: list[int] = []
    part_blocks: list[list[list[int]]] = []

    def add(index: int, lc: Any, blocks: list[int]) -> None:
        k = len(part_blocks[index])
        part_blocks[index].append(blocks)
        parts.append((index, k, lc))
        where[id(lc)] = (index, k)

    for index, message in enumerate(conv.neutral):
        part_blocks.append([])
        _convert_message(index, message, add, AIMessage, HumanMessage, SystemMessage, ToolMessage)
        part_counts.append(len(part_blocks[index]))
        ends.append(len(parts))

    run = conv.run
    system_lc = None
    if run.system is not None:
        text = run.system if isinstance(run.system, str) else _system_text(run.system)
        system_lc = SystemMessage(content=text)
    tools_tokens = count_tokens_approximately([], tools=list(run.tools)) if run.tools else 0

    def count_one(message: Any) -> int:
        return int(count_tokens_approximately([message]))

    return {
        "parts": parts,
        "ends": ends,
        "where": where,
        "part_counts": part_counts,
        "part_blocks": part_blocks,
        "counts": {},
        "system": system_lc,
        "tools_tokens": int(tools_tokens),
        "count_one": count_one,
    }


def _system_text(system: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))


def _convert_message(
    index: int,
    message: Message,
    add: Any,
    ai: Any,
    human: Any,
    system: Any,
    tool: Any,
) -> None:
    blocks = message.blocks
    everything = list(range(len(blocks)))
    if message.role in ("system", "developer"):
        add(index, system(content=_content(blocks)), everything)
        return
    if message.role == "assistant":
        calls = [b for b in blocks if isinstance(b, ToolCall)]
        others = tuple(b for b in blocks if not isinstance(b, ToolCall))
        tool_calls = [{"name": c.name, "args": _arguments(c), "id": c.id} for c in calls]
        add(index, ai(content=_content(others), tool_calls=tool_calls), everything)
        return
    results = [k for k, b in enumerate(blocks) if isinstance(b, ToolResult)]
    rest = [k for k, b in enumerate(blocks) if not isinstance(b, ToolResult)]
    for k in results:
        block = blocks[k]
        assert isinstance(block, ToolResult)
        content = block.content
        inner: tuple[Any, ...] = (Text(content),) if isinstance(content, str) else (content or ())
        add(index, tool(content=_content(inner), tool_call_id=block.call_id), [k])
    if rest or not results:
        add(index, human(content=_content(tuple(blocks[k] for k in rest))), rest)
