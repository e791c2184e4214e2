"""The simulator's in-process door: a :class:`windowfit.agent.Model` on the simulator's core.

:class:`SimulatedProvider` answers the agent runtime's requests with the same core as
``windowfit serve-sim`` (:class:`windowfit.simcore.SimCore`) and speaks Anthropic's
Messages API in process. For every request it

* counts the request with a **real tokenizer** (default ``cl100k``; any name
  :func:`windowfit.tokenizers.load_backend` knows can be chosen), with the same
  per-message and per-block framing as :class:`windowfit.sizing.Sizer`. Messages never
  change once written, so each message is counted once (cached by identity, and long
  texts by value);
* rejects a request above the hard limit (default 1,000,000 tokens) exactly as Anthropic
  does, in the words of the Anthropic door: :class:`~windowfit.errors.SimulatedProviderError`
  with status 400 and the body ``{"type": "error", "error": {"type":
  "invalid_request_error", "message": "prompt is too long: N tokens > M maximum"}}``, which
  :func:`windowfit.classify.classify_error` reads as a context overflow;
* serves the faults queued for it (``faults=``: errors in Anthropic's shape, delays,
  dropped connections), as the server does;
* otherwise answers with its policy (default :class:`Scripted`, the server's scripted
  model) and a usage from the core's prefix cache, kept per agent with no minimum size:
  the longest prefix (system and tools, then whole messages) this agent sent before is a
  cache read (0.1x the input price), the rest a cache write (1.25x), as
  :class:`windowfit.cache.CachePricing` prices them;
* counts calls, rejections and, per agent, requests, the largest request seen (rejected
  ones included), cache reads, writes and breaks (a request that does not extend the
  agent's previous one), and cost.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..agent import ModelRequest, ModelResponse, Usage
from ..cache import CachePricing, message_key
from ..errors import SimulatedProviderError
from ..formats import get_format
from ..server import _anthropic as door
from ..simcore import (
    Fault,
    MemoEstimator,
    ScriptedModel,
    Segment,
    SimCore,
    ToolOffer,
    memo_tokenizer,
    stable_id,
)
from ..sizing import Sizer
from ..tokens import Estimator

__all__ = [
    "DEFAULT_HARD_LIMIT",
    "DEFAULT_TOKENIZER",
    "ROUTE",
    "AgentUsage",
    "Policy",
    "PolicyView",
    "RequestRecord",
    "Scripted",
    "SimulatedProvider",
    "cached_tokenizer",
    "prompt_too_long",
]

#: The model's window in the simulation, as the write-up's model had (about 1M tokens).
DEFAULT_HARD_LIMIT = 1_000_000
#: The tokenizer the simulator counts with (see the module docstring).
DEFAULT_TOKENIZER = "cl100k"
#: The route the in-process door's faults are queued for (the server's Messages route).
ROUTE = "anthropic.messages"

_SPEC = get_format("anthropic")
_MEMO_BYTES = 256 * 1024 * 1024  # counted long texts kept in process (one copy each)
_KEYS_KEPT = 100_000


def prompt_too_long(tokens: int, limit: int) -> SimulatedProviderError:
    """The error Anthropic returns for a prompt above the model's window."""
    status, body = door.WINDOW.overflow(tokens, limit)
    return _error(status, body)


def _error(status: int, body: dict[str, Any]) -> SimulatedProviderError:
    inner = body.get("error")
    message = inner.get("message") if isinstance(inner, Mapping) else None
    return SimulatedProviderError(status, body, str(message or status))


def cached_tokenizer(tokenizer: str | Estimator = DEFAULT_TOKENIZER) -> MemoEstimator:
    """A real tokenizer (a :func:`~windowfit.tokenizers.load_backend` name, or an estimator)
    that keeps its counts of long texts, to share between simulated providers."""
    return memo_tokenizer(tokenizer, max_bytes=_MEMO_BYTES)


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
    #: The size of this agent's last answered request (a break is a request that does
    #: not read all of it back from the cache).
    last_tokens: int | None = field(default=None, repr=False)

    @property
    def cost(self) -> float:
        """Input cost in base-price tokens (reads at 0.1x, writes at 1.25x)."""
        return self.cache_read * self.pricing.read + self.cache_write * self.pricing.write

    @property
    def read_share(self) -> float:
        total = self.cache_read + self.cache_write
        return self.cache_read / total if total else 0.0


class Scripted:
    """The server's scripted model (:class:`~windowfit.simcore.ScriptedModel`) as a
    policy: it calls the tools the request offers while the conversation holds fewer
    than ``tool_rounds`` results (``script``: this tool with this input, ``{n}`` filled
    in), then answers; its answer is written as the Anthropic door writes it."""

    def __init__(self, model: ScriptedModel | None = None) -> None:
        self.model = model or ScriptedModel()

    def respond(self, view: PolicyView) -> list[dict[str, Any]]:
        request = view.request
        offers = []
        for tool in request.tools:
            schema = tool.get("input_schema")
            offers.append(
                ToolOffer(str(tool.get("name")), schema if isinstance(schema, Mapping) else {})
            )
        results = sum(
            1
            for message in request.messages
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if isinstance(block, Mapping) and block.get("type") == "tool_result"
        )
        answer = self.model.answer(
            offers, choice="auto", named=None, results=results, tokens=view.tokens, model="sim"
        )
        agent = request.agent
        message_id = stable_id("msg_", agent.id, len(request.messages), view.calls_before)
        return door.content_blocks(answer, message_id)


class SimulatedProvider:
    """The in-process door of the simulator's core (module docstring).

    ``policy`` decides the answers (default :class:`Scripted`). ``tokenizer`` is a
    backend name for :func:`windowfit.tokenizers.load_backend` or an
    :class:`~windowfit.tokens.Estimator`. ``latency`` seconds are awaited per request (0
    still yields to other agents, so that sub-agents interleave). ``faults`` are served
    first, in order, as ``windowfit serve-sim`` serves them on its Messages route.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        hard_limit: int = DEFAULT_HARD_LIMIT,
        tokenizer: str | Estimator = DEFAULT_TOKENIZER,
        pricing: CachePricing | None = None,
        latency: float = 0.0,
        faults: Iterable[Fault] = (),
    ) -> None:
        if hard_limit <= 0:
            raise ValueError(f"hard_limit must be positive, not {hard_limit}")
        self.core = SimCore(
            window=hard_limit,
            tokenizer=cached_tokenizer(tokenizer),
            reserve_output=False,
            cache_min_tokens=0,
            cache_increment=1,
            cache_ttl=math.inf,
            faults=faults,
        )
        self.tokenizer_name = self.core.tokenizer
        self.policy: Policy = policy or Scripted(self.core.model)
        self.hard_limit = hard_limit
        self.pricing = pricing or CachePricing()
        self.latency = latency
        self.sizer: Sizer = self.core.sizer(_SPEC.name)
        self.calls = 0
        self.rejections = 0
        self.faults_served = 0
        self.usage: dict[tuple[str, str], AgentUsage] = {}
        self._keys: dict[int, tuple[object, str]] = {}

    # -- counting -------------------------------------------------------------------

    def _fixed(self, request: ModelRequest) -> Segment:
        key = json.dumps([request.system, list(request.tools)], ensure_ascii=False, default=str)
        tokens = self.sizer.system(request.system) + self.sizer.tools(request.tools)
        return Segment(_digest(key), tokens)

    def sizes(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Each message's size in real tokens (counted once per message object)."""
        return [self.sizer.tokens(m, _SPEC, i) for i, m in enumerate(messages)]

    def count(self, request: ModelRequest) -> int:
        """The request's size in real tokens: system, tools and messages."""
        return self._fixed(request).tokens + sum(self.sizes(request.messages))

    def _key(self, message: Any) -> str:
        """A message's identity in the prefix cache (a digest of what it says), kept by
        object: messages never change once written."""
        hit = self._keys.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = _digest(message_key(message))
        if len(self._keys) > _KEYS_KEPT:
            self._keys.clear()
        self._keys[id(message)] = (message, key)
        return key

    def _segments(self, request: ModelRequest) -> list[Segment]:
        sizes = self.sizes(request.messages)
        keys = [self._key(m) for m in request.messages]
        return [self._fixed(request), *(Segment(k, n) for k, n in zip(keys, sizes, strict=True))]

    # -- the Model protocol ----------------------------------------------------------

    async def _fault(self) -> None:
        """Serve the next fault queued for the Messages route, if any."""
        fault = self.core.faults.take(ROUTE)
        if fault is None:
            return
        self.faults_served += 1
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.drop:
            raise ConnectionResetError("the simulated provider dropped the connection")
        if fault.status is not None:
            error = door.error(
                fault.status, fault.message, fault.type, retry_after=fault.retry_after
            )
            raise _error(error.status, error.body)

    async def respond(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.latency)
        await self._fault()
        agent = request.agent.key
        usage = self.usage.setdefault(agent, AgentUsage(self.pricing))
        segments = self._segments(request)
        tokens = sum(s.tokens for s in segments)
        calls_before = usage.requests
        self.calls += 1
        usage.requests += 1
        usage.peak_tokens = max(usage.peak_tokens, tokens)
        refusal = self.core.refusal(door.WINDOW, tokens, request.max_tokens)
        if refusal is not None:
            self.rejections += 1
            usage.rejected += 1
            usage.log.append(RequestRecord(tokens, request.estimate, True))
            raise _error(*refusal)
        usage.log.append(RequestRecord(tokens, request.estimate, False))

        read = self.core.cache_use("\x00".join(agent), segments, explicit=False).read
        if usage.last_tokens is not None and read < usage.last_tokens:
            usage.breaks += 1
        usage.last_tokens = tokens
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
                input_tokens=tokens,
                output_tokens=output,
                cache_read_tokens=read,
                cache_write_tokens=tokens - read,
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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
