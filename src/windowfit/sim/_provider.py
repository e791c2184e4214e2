"""A simulated model provider: a hard context limit, Anthropic's error, prompt caching.

:class:`SimulatedProvider` implements :class:`windowfit.agent.Model` around a scripted
:class:`Policy`. For every request it

* counts the request with a **real tokenizer** (default ``o200k``: OpenAI's o200k_base
  BPE, read by ``tiktoken`` from the file that ships inside the ``litellm`` wheel; any name
  :func:`windowfit.tokenizers.load_backend` knows can be chosen), with the same per-message
  and per-block framing as :class:`windowfit.sizing.Sizer`. Messages never change once
  written, so each message is counted once (cached by identity, and long texts by value);
* rejects a request above the hard limit (default 1,000,000 tokens) exactly as Anthropic
  does: :class:`~windowfit.errors.SimulatedProviderError` with status 400 and the body
  ``{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too
  long: N tokens > M maximum"}}``, which :func:`windowfit.classify.classify_error` reads
  as a context overflow with ``prompt_tokens=N`` and ``limit=M``;
* otherwise answers with the policy's content and a usage that models a prefix cache: the
  longest prefix (system and tools, then whole messages) shared with the same agent's
  previous answered request is a cache read (0.1x the input price), the rest a cache
  write (1.25x), as :class:`windowfit.cache.CachePricing` prices them;
* counts calls, rejections and, per agent, requests, the largest request seen (rejected
  ones included), cache reads, writes and breaks, and cost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..agent import ModelRequest, ModelResponse, Usage
from ..cache import CachePricing, message_key
from ..errors import SimulatedProviderError
from ..formats import get_format
from ..sizing import Sizer
from ..tokens import Estimator

__all__ = [
    "DEFAULT_HARD_LIMIT",
    "DEFAULT_TOKENIZER",
    "AgentUsage",
    "Policy",
    "PolicyView",
    "RequestRecord",
    "SimulatedProvider",
    "cached_tokenizer",
    "prompt_too_long",
]

#: The model's window in the simulation, as the write-up's model had (about 1M tokens).
DEFAULT_HARD_LIMIT = 1_000_000
#: The tokenizer the simulator counts with (see the module docstring).
DEFAULT_TOKENIZER = "cl100k"

_SPEC = get_format("anthropic")
_TEXT_CACHE_CHARS = 200_000_000  # characters of counted texts kept (one copy each)
_MEMO_MIN_CHARS = 2_000  # shorter texts are counted again rather than kept


def prompt_too_long(tokens: int, limit: int) -> SimulatedProviderError:
    """The error Anthropic returns for a prompt above the model's window."""
    message = f"prompt is too long: {tokens} tokens > {limit} maximum"
    body: dict[str, object] = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
    }
    return SimulatedProviderError(400, body, message)


class _Memo(Estimator):
    """A real tokenizer whose counts of long texts are kept by value: the same file read
    by another agent, or in another run, is not counted twice."""

    def __init__(self, inner: Estimator) -> None:
        self.inner = inner
        self.name = inner.name
        self.family = inner.family
        self._counts: dict[str, int] = {}
        self._chars = 0

    def estimate(self, text: str) -> int:
        if len(text) < _MEMO_MIN_CHARS:
            return self.inner.estimate(text)
        count = self._counts.get(text)
        if count is None:
            count = self.inner.estimate(text)
            if self._chars + len(text) > _TEXT_CACHE_CHARS:
                self._counts.clear()
                self._chars = 0
            self._counts[text] = count
            self._chars += len(text)
        return count


def cached_tokenizer(tokenizer: str | Estimator = DEFAULT_TOKENIZER) -> Estimator:
    """A real tokenizer (a :func:`~windowfit.tokenizers.load_backend` name, or an estimator)
    that keeps its counts of long texts, to share between simulated providers."""
    if isinstance(tokenizer, _Memo):
        return tokenizer
    if isinstance(tokenizer, str):
        from ..tokenizers import load_backend

        tokenizer = load_backend(tokenizer)
    return _Memo(tokenizer)


@dataclass(frozen=True)
class PolicyView:
    """What a scripted policy sees: the request, its size in real tokens, and how many
    requests this agent has sent to the provider before (rejected ones included)."""

    request: ModelRequest
    tokens: int
    calls_before: int


class Policy(Protocol):
    """A scripted model: the content blocks (``text``, ``tool_use``) of its answer."""

    def respond(self, view: PolicyView) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class RequestRecord:
    """One request as the provider saw it: its real size, the shaper's estimate, and
    whether it was rejected."""

    tokens: int
    estimate: int | None
    rejected: bool


@dataclass
class AgentUsage:
    """One agent's requests as the provider counted them."""

    pricing: CachePricing = field(default_factory=CachePricing)
    requests: int = 0
    rejected: int = 0
    peak_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    breaks: int = 0
    log: list[RequestRecord] = field(default_factory=list)

    @property
    def cost(self) -> float:
        """Input cost in base-price tokens (reads at 0.1x, writes at 1.25x)."""
        return self.cache_read * self.pricing.read + self.cache_write * self.pricing.write

    @property
    def read_share(self) -> float:
        total = self.cache_read + self.cache_write
        return self.cache_read / total if total else 0.0


@dataclass
class _Prefix:
    fixed_key: str
    fixed: int
    messages: list[Any]


class SimulatedProvider:
    """A provider that enforces a hard limit with a real tokenizer (module docstring).

    ``tokenizer`` is a backend name for :func:`windowfit.tokenizers.load_backend` or an
    :class:`~windowfit.tokens.Estimator`. ``latency`` seconds are awaited per request
    (0 still yields to other agents, so that sub-agents interleave).
    """

    def __init__(
        self,
        policy: Policy,
        *,
        hard_limit: int = DEFAULT_HARD_LIMIT,
        tokenizer: str | Estimator = DEFAULT_TOKENIZER,
        pricing: CachePricing | None = None,
        latency: float = 0.0,
    ) -> None:
        if hard_limit <= 0:
            raise ValueError(f"hard_limit must be positive, not {hard_limit}")
        estimator = cached_tokenizer(tokenizer)
        self.tokenizer_name = estimator.name
        self.policy = policy
        self.hard_limit = hard_limit
        self.pricing = pricing or CachePricing()
        self.latency = latency
        self.sizer = Sizer(estimator, "anthropic")
        self.calls = 0
        self.rejections = 0
        self.usage: dict[tuple[str, str], AgentUsage] = {}
        self._prefix: dict[tuple[str, str], _Prefix] = {}
        self._keys: dict[int, tuple[object, str]] = {}

    # -- counting -------------------------------------------------------------------

    def _fixed(self, request: ModelRequest) -> tuple[str, int]:
        key = json.dumps([request.system, list(request.tools)], ensure_ascii=False, default=str)
        return key, self.sizer.system(request.system) + self.sizer.tools(request.tools)

    def sizes(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Each message's size in real tokens (counted once per message object)."""
        return [self.sizer.tokens(m, _SPEC, i) for i, m in enumerate(messages)]

    def count(self, request: ModelRequest) -> int:
        """The request's size in real tokens: system, tools and messages."""
        return self._fixed(request)[1] + sum(self.sizes(request.messages))

    def _key(self, message: Any) -> str:
        hit = self._keys.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = message_key(message)
        if len(self._keys) > 100_000:
            self._keys.clear()
        self._keys[id(message)] = (message, key)
        return key

    def _same(self, a: Any, b: Any) -> bool:
        return a is b or self._key(a) == self._key(b)

    # -- the Model protocol ----------------------------------------------------------

    async def respond(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.latency)
        agent = request.agent.key
        usage = self.usage.setdefault(agent, AgentUsage(self.pricing))
        fixed_key, fixed = self._fixed(request)
        sizes = self.sizes(request.messages)
        tokens = fixed + sum(sizes)
        calls_before = usage.requests
        self.calls += 1
        usage.requests += 1
        usage.peak_tokens = max(usage.peak_tokens, tokens)
        if tokens > self.hard_limit:
            self.rejections += 1
            usage.rejected += 1
            usage.log.append(RequestRecord(tokens, request.estimate, True))
            raise prompt_too_long(tokens, self.hard_limit)
        usage.log.append(RequestRecord(tokens, request.estimate, False))

        previous = self._prefix.get(agent)
        read = 0
        if previous is not None and previous.fixed_key == fixed_key:
            read = fixed
            shared = 0
            limit = min(len(previous.messages), len(request.messages))
            while shared < limit and self._same(
                previous.messages[shared], request.messages[shared]
            ):
                read += sizes[shared]
                shared += 1
            if shared < len(previous.messages):
                usage.breaks += 1
        elif previous is not None:
            usage.breaks += 1
        self._prefix[agent] = _Prefix(fixed_key, fixed, list(request.messages))
        usage.cache_read += read
        usage.cache_write += tokens - read

        content = self.policy.respond(PolicyView(request, tokens, calls_before))
        answer = _SPEC.from_message({"role": "assistant", "content": content}, 0)
        output = self.sizer.size_of(answer).tokens
        usage.output_tokens += output
        stop = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
        return ModelResponse(
            content=content,
            usage=Usage(
                input_tokens=0,
                cache_read_input_tokens=read,
                cache_creation_input_tokens=tokens - read,
                output_tokens=output,
            ),
            stop_reason=stop,
        )

    # -- totals ----------------------------------------------------------------------

    def total(self, agents: Sequence[tuple[str, str]] | None = None) -> AgentUsage:
        """The usage of ``agents`` (default: all) added up; ``peak_tokens`` is the max."""
        keys = list(self.usage) if agents is None else [a for a in agents if a in self.usage]
        total = AgentUsage(self.pricing)
        for key in keys:
            u = self.usage[key]
            total.requests += u.requests
            total.rejected += u.rejected
            total.peak_tokens = max(total.peak_tokens, u.peak_tokens)
            total.cache_read += u.cache_read
            total.cache_write += u.cache_write
            total.output_tokens += u.output_tokens
            total.breaks += u.breaks
            total.log.extend(u.log)
        return total
