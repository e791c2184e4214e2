"""Token sizes of messages, blocks and whole requests.

Every estimator only counts text; this module adds what a request costs beyond its text
(a small fixed overhead per message and per block, tool calls by their JSON arguments,
images by the provider's size rule) so that the numbers err high. A :class:`Sizer` works
on the neutral model; fitting sizes provider dicts directly with the same rules (see
``formats/_facts.py``). :meth:`Sizer.tokens` remembers sizes by content (never by object
identity, which goes stale when a message is edited in place), for callers that count
with a costly real tokenizer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._content import content_key
from ._lru import ByteBoundedCache
from ._overheads import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TOOL_DEFINITION_OVERHEAD, TOOL_OVERHEAD
from .errors import ConversationError
from .formats import FormatSpec
from .formats._facts import describe, json_text
from .images import image_tokens
from .instructions import CLEARED_RESULT_NOTE
from .messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .tokens import Estimator, SeedEstimator, part_counter

__all__ = [
    "BLOCK_OVERHEAD",
    "MESSAGE_OVERHEAD",
    "TOOL_OVERHEAD",
    "MessageSize",
    "Sizer",
    "default_sizer",
]


#: Texts shorter than this are counted again rather than looked up.
_MEMO_MIN_CHARS = 256

#: How many characters at each end of a long text go into its memo key (see
#: :meth:`Sizer._make_text`).
_KEY_CHARS = 48

#: What a memo entry holds besides the text: the key's tuple and its two slices (at most
#: 48 characters each, up to 4 bytes a character), the value's tuple, the dict's slot.
_ENTRY_BYTES = 2 * (80 + 4 * _KEY_CHARS) + 200

#: What a memo entry of a short text holds besides the text: the key's and the value's
#: tuples, the dict's slot.
_SHORT_ENTRY_BYTES = 200

#: :meth:`Sizer.tokens` remembers this many sizes (two ints each, about 10 MB in all).
_MEMO_LIMIT = 65_536

#: Texts of at most this many characters (tool names, empty results, "ok") recur all
#: through a conversation: a Sizer with a memo looks their counts up in a plain dict,
#: which costs less than counting them. At most :data:`_NAMES_LIMIT` of them (under
#: 200 KB), and only for a memo of at least :data:`_NAMES_MIN_MEMO` bytes.
_NAME_CHARS = 32
_NAMES_LIMIT = 1024
_NAMES_MIN_MEMO = 1 << 20


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

    def __init__(
        self,
        estimator: Estimator | None = None,
        provider: str = "anthropic",
        *,
        memo: ByteBoundedCache | None = None,
    ):
        self.estimator = estimator or SeedEstimator()
        self.provider = provider
        #: Where counts of long texts are remembered (for a costly estimator; shared with
        #: the Fitter that owns this Sizer, and bounded by its bytes).
        self.text_memo = memo
        self._cheap = bool(getattr(self.estimator, "cheap", False))
        #: One text part of a message: the text and the family's framing around it.
        self._estimate = part_counter(self.estimator)
        self._memo: dict[tuple[str, tuple[int, int]], int] = {}
        self._names: dict[str, int] | None = (
            {} if memo is not None and memo.max_bytes >= _NAMES_MIN_MEMO else None
        )
        self.text = self._make_text()  # type: ignore[method-assign,assignment]
        note = self._estimate(CLEARED_RESULT_NOTE)
        self.cleared_string_tokens = TOOL_OVERHEAD + note
        self.cleared_list_tokens = TOOL_OVERHEAD + BLOCK_OVERHEAD + note

    # -- text and blocks -------------------------------------------------------------

    def text(self, text: str) -> int:
        """Tokens in ``text``. With a memo, long texts are counted once and looked up after
        (for a cheap estimator only non-ASCII ones: its ASCII count is already O(1)), and
        short ones that recur (tool names) are looked up in a small dict; for a costly
        estimator every text is counted once and looked up after.
        (Replaced per instance by the closure :meth:`_make_text` builds: scanners call it
        for every text of every message, and most texts are short.)"""
        return self._make_text()(text)

    def _make_text(self) -> Callable[[str], int]:
        estimate, memo, names, cheap = self._estimate, self.text_memo, self._names, self._cheap
        if memo is None:
            return estimate

        def text(text: str) -> int:
            size = len(text)
            if size < _MEMO_MIN_CHARS:
                if names is None or size > _NAME_CHARS:
                    if cheap or not size:
                        return estimate(text)
                    # A costly estimator (several vocabularies' exact counts) costs more
                    # than hashing a short text: remembered by the text itself, so that
                    # the next request of a conversation does not count it again.
                    short_key = (estimator_id, text)
                    with lock:
                        hit = get(short_key)
                    if hit is not None and hit[0] is estimator:
                        return int(hit[1])
                    counted = estimate(text)
                    with lock:
                        put(short_key, (estimator, counted), getsizeof(text) + _SHORT_ENTRY_BYTES)
                    return counted
                tokens = names.get(text)
                if tokens is None:
                    tokens = estimate(text)
                    if len(names) >= _NAMES_LIMIT:
                        names.clear()
                    names[text] = tokens
                return tokens
            if cheap and text.isascii():
                return estimate(text)
            # A long text: from the memo, or counted and put there. The key is the text's
            # length, its first and last characters and the estimator, and an entry holds
            # the text itself: a hit is a text equal to the one given (compared at memory
            # speed), never one that merely shares the key. Hashing the whole text instead
            # would read every character once more per call, about a tenth of what
            # counting it costs. (Inline, with its names bound once: on first sight every
            # lookup misses, and a cold fit makes one for every long text.)
            key = (estimator_id, size, text[:_KEY_CHARS], text[-_KEY_CHARS:])
            with lock:
                hit = get(key)
            if hit is not None and hit[0] is estimator and hit[1] == text:
                return int(hit[2])
            tokens = estimate(text)
            with lock:
                put(key, (estimator, text, tokens), getsizeof(text) + _ENTRY_BYTES)
            return tokens

        estimator, estimator_id, getsizeof = self.estimator, id(self.estimator), sys.getsizeof
        lock, get, put = memo.lock, memo.get, memo.put
        return text

    def block(self, block: Block) -> int:
        if isinstance(block, Text):
            return BLOCK_OVERHEAD + self._estimate(block.text)
        if isinstance(block, ToolResult):
            return self.result(block)
        if isinstance(block, ToolCall):
            return TOOL_OVERHEAD + self._estimate(block.name) + self._estimate(block.arguments)
        if isinstance(block, Thinking):
            return BLOCK_OVERHEAD + self._estimate(block.text)
        if isinstance(block, Image):
            return BLOCK_OVERHEAD + image_tokens(block.source, self.provider)
        if isinstance(block, Opaque):
            return BLOCK_OVERHEAD + self._estimate(_json(block.data))
        raise TypeError(f"not a block: {block!r}")

    def result(self, result: ToolResult) -> int:
        if result.content is None:
            return TOOL_OVERHEAD
        if isinstance(result.content, str):
            return TOOL_OVERHEAD + self._estimate(result.content)
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
        """The neutral form of a provider message and its size."""
        message = spec.from_message(raw, index)
        return message, self.size_of(message)

    def tokens(self, raw: Any, spec: FormatSpec, index: int) -> int:
        """A provider message's size, checked as fitting checks it, remembered by content
        (a bounded memo of numbers: it keeps no reference to any message)."""
        key = content_key(raw)
        if key is not None:
            hit = self._memo.get((spec.name, key))
            if hit is not None:
                return hit
        tokens = spec.scan(raw, index, self).tokens
        if key is not None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[(spec.name, key)] = tokens
        return tokens

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
        """The system prompt's size: a string, or a list of blocks (text blocks by their
        text, others by their JSON). Anything else is a ConversationError for ``system``."""
        if system is None:
            return 0
        if isinstance(system, str):
            return MESSAGE_OVERHEAD + self._estimate(system)
        if not isinstance(system, (list, tuple)):
            raise ConversationError(
                f"must be a string or a list of blocks, not {describe(system)}", field="system"
            )
        total = MESSAGE_OVERHEAD
        for k, block in enumerate(system):
            if not isinstance(block, Mapping):
                raise ConversationError(
                    f"a block must be a JSON object, not {describe(block)}",
                    field=f"system[{k}]",
                )
            text = block.get("text")
            if isinstance(text, str):
                total += BLOCK_OVERHEAD + self._estimate(text)
            else:
                total += BLOCK_OVERHEAD + self._estimate(json_text(block, None, f"system[{k}]"))
        return total

    def tools(self, tools: Sequence[Any] | None) -> int:
        """The tool definitions' size, by their JSON (a ConversationError for ``tools``
        when they are not a list of JSON objects)."""
        if tools is None:
            return 0
        if not isinstance(tools, (list, tuple)):
            raise ConversationError(
                f"must be a list of tool definitions, not {describe(tools)}", field="tools"
            )
        total = 0
        for k, tool in enumerate(tools):
            if not isinstance(tool, Mapping):
                raise ConversationError(
                    f"a tool definition must be a JSON object, not {describe(tool)}",
                    field=f"tools[{k}]",
                )
            total += TOOL_DEFINITION_OVERHEAD + self._estimate(json_text(tool, None, f"tools[{k}]"))
        return total

    def messages(self, messages: Sequence[Any], spec: FormatSpec) -> int:
        return sum(self.tokens(m, spec, i) for i, m in enumerate(messages))


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
