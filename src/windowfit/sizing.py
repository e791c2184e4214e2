"""Token sizes of messages, blocks and whole requests, computed once per message.

Every estimator only counts text; this module adds what a request costs beyond its text
(a small fixed overhead per message and per block, tool calls by their JSON arguments,
images by the provider's size rule) so that the numbers err high. Messages never change
once written, so a message's size is computed once and kept: :class:`Sizer` caches by the
message object's identity (holding a reference, so an id is never reused while cached).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .formats import FormatSpec
from .images import image_tokens
from .instructions import CLEARED_RESULT_NOTE
from .messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .tokens import Estimator, SeedEstimator

__all__ = [
    "BLOCK_OVERHEAD",
    "MESSAGE_OVERHEAD",
    "TOOL_OVERHEAD",
    "MessageSize",
    "Sizer",
    "default_sizer",
]

#: Per message (role and framing tokens). OpenAI documents 3-4 per message; we use 4.
MESSAGE_OVERHEAD = 4
#: Per content block.
BLOCK_OVERHEAD = 3
#: Per tool call or tool result (ids, names, framing).
TOOL_OVERHEAD = 10
#: Per tool definition, on top of its JSON.
TOOL_DEFINITION_OVERHEAD = 10

_CACHE_LIMIT = 500_000


@dataclass(frozen=True)
class MessageSize:
    """A message's estimated size and what clearing each of its results would save.

    ``results`` holds ``(call_id, tokens, cleared_tokens)`` per tool result, where
    ``cleared_tokens`` is the result's size once its content is replaced by the note.
    """

    tokens: int
    calls: tuple[str, ...]
    results: tuple[tuple[str, int, int], ...]


class Sizer:
    """Sizes of messages for one estimator and one provider format, cached per message."""

    def __init__(self, estimator: Estimator | None = None, provider: str = "anthropic"):
        self.estimator = estimator or SeedEstimator()
        self.provider = provider
        self._cache: dict[int, tuple[object, Message, MessageSize]] = {}
        note = self.estimator.estimate(CLEARED_RESULT_NOTE)
        self.cleared_string_tokens = TOOL_OVERHEAD + note
        self.cleared_list_tokens = TOOL_OVERHEAD + BLOCK_OVERHEAD + note

    # -- text and blocks -------------------------------------------------------------

    def text(self, text: str) -> int:
        return self.estimator.estimate(text)

    def block(self, block: Block) -> int:
        if isinstance(block, Text):
            return BLOCK_OVERHEAD + self.estimator.estimate(block.text)
        if isinstance(block, ToolResult):
            return self.result(block)
        if isinstance(block, ToolCall):
            return (
                TOOL_OVERHEAD
                + self.estimator.estimate(block.name)
                + self.estimator.estimate(block.arguments)
            )
        if isinstance(block, Thinking):
            return BLOCK_OVERHEAD + self.estimator.estimate(block.text)
        if isinstance(block, Image):
            return BLOCK_OVERHEAD + image_tokens(block.source, self.provider)
        if isinstance(block, Opaque):
            return BLOCK_OVERHEAD + self.estimator.estimate(_json(block.data))
        raise TypeError(f"not a block: {block!r}")

    def result(self, result: ToolResult) -> int:
        if result.content is None:
            return TOOL_OVERHEAD
        if isinstance(result.content, str):
            return TOOL_OVERHEAD + self.estimator.estimate(result.content)
        return TOOL_OVERHEAD + sum(self.block(b) for b in result.content)

    def cleared_result(self, result: ToolResult) -> int:
        """The size of ``result`` once its content is the cleared-result note."""
        if isinstance(result.content, tuple):
            return self.cleared_list_tokens
        return self.cleared_string_tokens

    def message_blocks(self, message: Message) -> int:
        return MESSAGE_OVERHEAD + sum(self.block(b) for b in message.blocks)

    # -- provider messages, cached ---------------------------------------------------

    def measure(self, raw: Any, spec: FormatSpec, index: int) -> tuple[Message, MessageSize]:
        """The neutral form of a provider message and its size, computed once per object."""
        key = id(raw)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is raw:
            return hit[1], hit[2]
        message = spec.from_message(raw, index)
        size = self.size_of(message)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = (raw, message, size)
        return message, size

    def size_of(self, message: Message) -> MessageSize:
        tokens = MESSAGE_OVERHEAD
        calls: list[str] = []
        results: list[tuple[str, int, int]] = []
        for block in message.blocks:
            n = self.block(block)
            tokens += n
            if isinstance(block, ToolCall):
                calls.append(block.id)
            elif isinstance(block, ToolResult):
                results.append((block.call_id, n, self.cleared_result(block)))
        return MessageSize(tokens, tuple(calls), tuple(results))

    # -- request parts ----------------------------------------------------------------

    def system(self, system: str | Sequence[Mapping[str, Any]] | None) -> int:
        if system is None:
            return 0
        if isinstance(system, str):
            return MESSAGE_OVERHEAD + self.estimator.estimate(system)
        total = MESSAGE_OVERHEAD
        for block in system:
            text = block.get("text") if isinstance(block, Mapping) else None
            if isinstance(text, str):
                total += BLOCK_OVERHEAD + self.estimator.estimate(text)
            else:
                total += BLOCK_OVERHEAD + self.estimator.estimate(_json(block))
        return total

    def tools(self, tools: Sequence[Any] | None) -> int:
        if not tools:
            return 0
        return sum(TOOL_DEFINITION_OVERHEAD + self.estimator.estimate(_json(t)) for t in tools)

    def messages(self, messages: Sequence[Any], spec: FormatSpec) -> int:
        return sum(self.measure(m, spec, i)[1].tokens for i, m in enumerate(messages))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


_DEFAULT_SIZERS: dict[tuple[int, str], Sizer] = {}


def default_sizer(estimator: Estimator | None = None, provider: str = "anthropic") -> Sizer:
    """A process-wide sizer per estimator and provider, so caches are shared across calls."""
    est = estimator or _SEED
    key = (id(est), provider)
    sizer = _DEFAULT_SIZERS.get(key)
    if sizer is None or sizer.estimator is not est:
        if len(_DEFAULT_SIZERS) >= 64:  # many short-lived estimators: start over
            _DEFAULT_SIZERS.clear()
        sizer = Sizer(est, provider)
        _DEFAULT_SIZERS[key] = sizer
    return sizer


_SEED = SeedEstimator()
