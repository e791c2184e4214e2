"""A neutral conversation model shared by every provider format.

Frozen dataclasses with a tagged union of blocks, so that fitting reasons about one shape
whatever the provider. Fields windowfit does not interpret (``cache_control``, ``name``,
``citations``, provider extras) travel in ``extra`` so that converting to the neutral
model and back gives exactly what the user gave (see :mod:`windowfit.formats`).

Messages are treated as immutable: a message, once written, never changes. That is what
makes per-message token estimates cacheable and fitting a pure function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "Block",
    "Image",
    "Message",
    "Opaque",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolResult",
]

#: How a provider spelled a message's content: a plain string, a list of parts, JSON null,
#: or no content key at all. Kept so that the round trip is exact.
ContentForm = Literal["string", "list", "null", "absent"]


@dataclass(frozen=True)
class Text:
    """Plain text."""

    text: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class Image:
    """An image, by value (base64) or by URL. ``source`` keeps the provider's fields."""

    source: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["image"] = "image"


@dataclass(frozen=True)
class ToolCall:
    """The model asking for a tool to run.

    ``arguments`` is the JSON text of the arguments, which is what both providers count
    (OpenAI sends it as a string; for Anthropic it is ``json.dumps(input)``); ``input`` is
    the value as the provider gave it, kept for the round trip.
    """

    id: str
    name: str
    arguments: str
    input: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned, answering the call with id ``call_id``.

    ``content`` is a string when the provider gave a string, a tuple of blocks when it
    gave a list, and ``None`` when the result had no content at all.
    """

    call_id: str
    content: str | tuple[Block, ...] | None
    is_error: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class Thinking:
    """Reasoning the model showed (Anthropic thinking, DeepSeek ``reasoning_content``).

    ``signature`` must travel back unchanged for Anthropic to accept the block;
    ``redacted`` blocks carry their encrypted ``data`` in ``text``.
    """

    text: str
    signature: str | None = None
    redacted: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True)
class Opaque:
    """A block windowfit does not interpret (documents, server tool results, audio...).

    It is kept verbatim and counted by the size of its JSON.
    """

    data: Mapping[str, Any]
    type: Literal["opaque"] = "opaque"


Block: TypeAlias = Text | Image | ToolCall | ToolResult | Thinking | Opaque


@dataclass(frozen=True)
class Message:
    """One message: a role and its blocks, in order.

    ``role`` is the provider's own role string (``user``, ``assistant``, ``tool``,
    ``system``, ``developer``). ``form`` says how the content was spelled, and ``extra``
    holds the message's other keys.
    """

    role: str
    blocks: tuple[Block, ...]
    form: ContentForm = "list"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.blocks if isinstance(b, ToolCall))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(b for b in self.blocks if isinstance(b, ToolResult))

    @property
    def has_user_input(self) -> bool:
        """True when the message carries input other than tool results."""
        return any(not isinstance(b, ToolResult) for b in self.blocks)

    def text(self) -> str:
        """The message's plain text, joined; tool results and calls are left out."""
        return "\n".join(b.text for b in self.blocks if isinstance(b, Text))
