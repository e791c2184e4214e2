"""What the agent loop sends to a model and what it gets back.

The runtime keeps its history in the Anthropic Messages format (``{"role": ...,
"content": [blocks]}``, tool calls as ``tool_use`` blocks, results as ``tool_result``
blocks in the next user message). A :class:`Model` is anything with an async
``respond(request)``: an adapter around a provider SDK, or the simulated provider of
:mod:`windowfit.sim`. Errors are raised as the provider raised them; the loop classifies
them with :func:`windowfit.classify.classify_error`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..formats import Usage

__all__ = ["AgentInfo", "Model", "ModelRequest", "ModelResponse", "ToolCall", "Usage"]


@dataclass(frozen=True)
class AgentInfo:
    """Who is asking: the session, the agent's id within it, its name and its place in the
    tree of agents (``depth`` 0 for the main agent, 1 for its sub-agents, ...)."""

    session: str
    id: str
    name: str
    depth: int = 0
    parent: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """Unique across sessions: what a provider's per-agent state is keyed by."""
        return (self.session, self.id)


@dataclass(frozen=True)
class ModelRequest:
    """One request: the fitted messages, with the system prompt and tool definitions.

    ``estimate`` is the request's size as the loop's shaper estimated it (``None`` when
    unknown); ``max_tokens`` the most the answer may take.
    """

    agent: AgentInfo
    system: str
    tools: Sequence[Mapping[str, Any]]
    messages: Sequence[Mapping[str, Any]]
    max_tokens: int = 4096
    estimate: int | None = None


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made: the ``tool_use`` block's id, name and input."""

    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class ModelResponse:
    """The model's answer: Anthropic content blocks (``text`` and ``tool_use``) and usage."""

    content: Sequence[Mapping[str, Any]]
    usage: Usage = field(default_factory=lambda: Usage(0))
    stop_reason: str = "end_turn"

    @property
    def text(self) -> str:
        return "\n".join(
            str(b.get("text", "")) for b in self.content if b.get("type") == "text"
        ).strip()

    @property
    def tool_calls(self) -> list[ToolCall]:
        calls = []
        for block in self.content:
            if block.get("type") == "tool_use":
                raw = block.get("input")
                calls.append(
                    ToolCall(
                        str(block.get("id")),
                        str(block.get("name")),
                        raw if isinstance(raw, Mapping) else {},
                    )
                )
        return calls

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the history (a new dict, new block dicts)."""
        return {"role": "assistant", "content": [dict(b) for b in self.content]}


@runtime_checkable
class Model(Protocol):
    """A model the agent loop can talk to."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer one request, or raise the provider's error."""
        ...
