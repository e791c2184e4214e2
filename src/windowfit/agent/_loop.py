"""The agent loop: fit, ask the model, run its tools, save everything, repeat.

Each agent (the main agent and every sub-agent) runs the same loop:

1. the full history is shaped into a request that fits the budget (:class:`FitShaper`, i.e.
   :func:`windowfit.fit`); if nothing can be made to fit, the agent stops with the
   person-facing message (:data:`windowfit.errors.CONTEXT_OVERFLOW_MESSAGE`);
2. the model is asked; an error is classified (:func:`windowfit.classify.classify_error`),
   logged at a level that fits its kind, passed to ``on_alert`` when the kind should wake
   someone, and retried only when sending the same request again can help (never an
   invalid request, never a context overflow: that agent stops with the person-facing
   message);
3. the answer is saved; its tool calls run at the same time (``spawn_subagent`` calls
   start sub-agents that run concurrently, each running this same loop, and each one's
   final answer comes back as its call's result); the results are saved as one message;
4. an answer without tool calls is the agent's final answer.

The history is saved message by message in a :class:`~windowfit.agent.HistoryStore`;
only requests are shaped. The system prompt of every agent and sub-agent carries
:data:`windowfit.instructions.SAFETY_NET`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..calibration import Correction
from ..classify import ErrorInfo, ErrorKind, classify_error
from ..errors import ContextOverflowError, HistoryError, SettingsError, ToolError
from ..fitter import Fitter
from ..instructions import add_safety_net
from ..learning import Learner, conversation_key, overflow_correction
from ..retry import RetryPolicy
from ..settings import FitSettings
from ..tokens import Estimator
from ._model import AgentInfo, Model, ModelRequest, ModelResponse, ToolCall, Usage
from ._store import HistoryStore, default_store_path
from ._tools import (
    ReadFile,
    RunCommand,
    SpawnSubagent,
    Tool,
    ToolContext,
    ToolOutput,
    run_tool,
)
from ._tools import tool_definition as _definition

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_SUBAGENT_SYSTEM",
    "DEFAULT_SYSTEM",
    "DEFAULT_TOOL_TIMEOUT",
    "LOG_LEVELS",
    "AgentEvent",
    "AgentResult",
    "AgentStats",
    "FitShaper",
    "Runtime",
    "Shaped",
    "Shaper",
]

logger = logging.getLogger("windowfit.agent")

#: The default request budget, in estimated tokens.
DEFAULT_BUDGET = 400_000

#: Seconds a tool call may run before the loop abandons it with an error result. Well
#: above run_command's own default (30 s), which stops a command and reports its output;
#: this limit is the safety net for a tool that hangs (a custom tool, a stuck read).
DEFAULT_TOOL_TIMEOUT = 120.0

DEFAULT_SYSTEM = (
    "You are a careful agent. Use the tools to do the task you are given, and finish "
    "with a clear answer."
)
DEFAULT_SUBAGENT_SYSTEM = (
    "You are a sub-agent. Work alone on the one instruction you were given, using the "
    "tools, and finish with a final answer that contains everything the agent that "
    "started you needs: it sees only that answer."
)

#: The logging level of each kind of classified error: an operator's problem is an error,
#: a person's decision (context overflow) is information, the rest a warning.
LOG_LEVELS: Mapping[ErrorKind, int] = {
    ErrorKind.CONTEXT_OVERFLOW: logging.INFO,
    ErrorKind.INVALID_REQUEST: logging.WARNING,
    ErrorKind.RATE_LIMIT: logging.WARNING,
    ErrorKind.OVERLOADED: logging.WARNING,
    ErrorKind.TIMEOUT: logging.WARNING,
    ErrorKind.AUTHENTICATION: logging.ERROR,
    ErrorKind.PERMISSION: logging.ERROR,
    ErrorKind.NOT_FOUND: logging.ERROR,
    ErrorKind.SERVER: logging.ERROR,
    ErrorKind.CONNECTION: logging.ERROR,
    ErrorKind.UNKNOWN: logging.ERROR,
}

_STEP_LIMIT_MESSAGE = "The agent stopped after {steps} steps without finishing its task."


# --------------------------------------------------------------------------------------
# Shaping a request


@dataclass(frozen=True)
class Shaped:
    """A request's messages after shaping, with what shaping did.

    ``estimate``: the request's estimated size (system and tools included). ``cleared``:
    ids of the tool calls whose results were cleared. ``dropped``: how many messages were
    left out. ``stage``: the fitting stage that ran (0 when nothing changed).
    """

    messages: list[dict[str, Any]]
    estimate: int
    cleared: frozenset[str] = frozenset()
    dropped: int = 0
    stage: int = 0
    key: str | None = None  # the conversation, for learning (FitShaper)
    budget: int | None = None  # what it was fitted to, after learned corrections


#: Shapes the full history into a request: (messages, system, tools) -> Shaped. Raises
#: ContextOverflowError when nothing can be made to fit.
Shaper = Callable[[Sequence[dict[str, Any]], str, Sequence[Mapping[str, Any]]], Shaped]


class FitShaper:
    """The default shaper: a :class:`~windowfit.Fitter` (its own, unless one is given)
    with a budget, settings and estimator. One shaper serves every agent and sub-agent of
    a runtime, concurrently.

    It counts with :func:`windowfit.default_estimator` (``estimator`` when given, else
    ``model``'s family profile, else ``conservative``), and learns a correction per
    conversation from the provider's counts (:class:`~windowfit.learning.Learner`; off
    with ``learn=False``), which :class:`Runtime` feeds with every answer's usage and
    every overflow error."""

    def __init__(
        self,
        budget: int = DEFAULT_BUDGET,
        *,
        settings: FitSettings | str | None = None,
        estimator: Estimator | None = None,
        fitter: Fitter | None = None,
        model: str | None = None,
        learn: bool | Learner = True,
    ) -> None:
        self.budget = budget
        self.settings = FitSettings.preset(settings) if isinstance(settings, str) else settings
        self.estimator = estimator
        self.model = model
        self.fitter = fitter if fitter is not None else Fitter()
        self.learner: Learner | None = (
            learn if isinstance(learn, Learner) else Learner() if learn else None
        )

    def __call__(
        self,
        messages: Sequence[dict[str, Any]],
        system: str,
        tools: Sequence[Mapping[str, Any]],
        *,
        shrink: Correction | None = None,
    ) -> Shaped:
        key = None
        budget = self.budget
        if self.learner is not None:
            key = conversation_key("anthropic", self.model, system, list(tools), messages)
            budget = self.learner.budget_for(key, budget)
        if shrink is not None:
            budget = max(1, min(budget, shrink.budget_for(budget)))
        result = self.fitter.fit(
            messages,
            budget=budget,
            system=system,
            tools=tools,
            settings=self.settings,
            format="anthropic",
            estimator=self.estimator,
            model=self.model,
        )
        report = result.report
        return Shaped(
            result.messages,
            report.tokens_after,
            frozenset(report.cleared),
            len(report.dropped),
            report.stage,
            key,
            budget,
        )

    def learn(self, shaped: Shaped, provider_tokens: int) -> None:
        """The provider counted ``provider_tokens`` for the request ``shaped``."""
        if self.learner is not None and shaped.key is not None and provider_tokens > 0:
            self.learner.observe(shaped.key, shaped.estimate, provider_tokens)

    def refit(
        self,
        messages: Sequence[dict[str, Any]],
        system: str,
        tools: Sequence[Mapping[str, Any]],
        shaped: Shaped,
        info: ErrorInfo,
    ) -> Shaped | None:
        """After the provider rejected ``shaped`` as too long: learn what the error says
        and shape again to the corrected budget; ``None`` when nothing smaller fits (the
        same request is never sent twice)."""
        shrink = None
        if self.learner is not None and shaped.key is not None:
            self.learner.observe_overflow(shaped.key, shaped.estimate, info, shaped.budget)
        else:
            shrink = overflow_correction(shaped.estimate, info, shaped.budget)
        try:
            again = self(messages, system, tools, shrink=shrink)
        except ContextOverflowError:
            return None
        return again if again.estimate < shaped.estimate else None


# --------------------------------------------------------------------------------------
# Results and events


@dataclass
class AgentStats:
    """What one agent did in one run.

    ``requests`` counts every request sent (retries included) and ``rejected`` those the
    provider answered with an error. ``cleared`` is the number of tool results cleared in
    the agent's latest request, ``dropped`` the messages left out of it; a
    ``clearing_event`` is a request whose shaping cleared or dropped more than the one
    before (which changes the request's prefix: a prompt-cache break).
    """

    requests: int = 0
    rejected: int = 0
    retries: int = 0
    steps: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    peak_estimate: int = 0
    cleared: int = 0
    dropped: int = 0
    clearing_events: int = 0
    usage: Usage = field(default_factory=lambda: Usage(0))

    def add_usage(self, usage: Usage) -> None:
        u = self.usage
        self.usage = Usage(
            u.input_tokens + usage.input_tokens,
            u.output_tokens + usage.output_tokens,
            u.cache_read_tokens + usage.cache_read_tokens,
            u.cache_write_tokens + usage.cache_write_tokens,
            u.reasoning_tokens + usage.reasoning_tokens,
        )


@dataclass(frozen=True)
class AgentResult:
    """How an agent's run ended.

    ``status``: ``finished`` (it gave a final answer), ``overflow`` (the conversation no
    longer fits: ``user_message`` is the person-facing message), ``failed`` (another error
    that retrying could not fix) or ``step_limit``. ``error`` is the classified provider
    error that stopped it, if one did.
    """

    agent: AgentInfo
    status: str
    answer: str | None
    user_message: str | None
    stats: AgentStats
    error: ErrorInfo | None = None

    @property
    def session(self) -> str:
        return self.agent.session

    @property
    def finished(self) -> bool:
        return self.status == "finished"


@dataclass(frozen=True)
class AgentEvent:
    """Something an agent did, for progress displays and metrics.

    ``kind``: ``started``, ``request`` (data: ``shaped``), ``response`` (``response``),
    ``error`` (``info``, ``attempt``, ``retry``), ``tool`` (``call``, ``is_error``) or
    ``ended`` (``result``).
    """

    kind: str
    agent: AgentInfo
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class _State:
    info: AgentInfo
    system: str
    history: list[dict[str, Any]]
    tools: dict[str, Tool]
    definitions: list[dict[str, Any]]
    stats: AgentStats = field(default_factory=AgentStats)


@dataclass(frozen=True)
class _Stop:
    """Why an agent stopped without a final answer."""

    status: str
    message: str
    info: ErrorInfo | None = None


# --------------------------------------------------------------------------------------
# The runtime


class Runtime:
    """Runs agents and their sub-agents against a :class:`~windowfit.agent.Model`.

    ``workspace``: the directory ``read_file`` and ``run_command`` work in (the default
    tools, when ``tools`` is not given).

    ``store``: where histories are saved: a :class:`~windowfit.agent.HistoryStore`, a file
    path, or ``":memory:"`` (nothing survives the process). By default it is the file
    :func:`~windowfit.agent.default_store_path` names (``$WINDOWFIT_HOME/history.sqlite3``,
    else ``$XDG_STATE_HOME/windowfit/history.sqlite3``, else
    ``~/.local/state/windowfit/history.sqlite3``), so that a crash loses nothing. A store
    the runtime opened itself is closed by :meth:`close`.

    ``tool_timeout``: seconds a tool call may take (default :data:`DEFAULT_TOOL_TIMEOUT`,
    ``None`` for no limit). A call still running then is abandoned and the model gets an
    error result saying so; the loop goes on. ``spawn_subagent`` is not timed: a
    sub-agent is bounded by ``max_steps`` and its own tools' timeouts instead. Keep it
    above ``run_command``'s own timeout, which stops the command cleanly first.

    ``budget``, ``settings``, ``estimator``, ``model_name``, ``learn``: how requests are
    fitted (:class:`FitShaper`; or pass a ``shaper``): counted with the model's family
    profile (``conservative`` without a model name), corrected by what the provider's
    counts taught about each conversation (``learn=False`` turns that off). When the
    provider still rejects a request as too long, it is shaped again to the corrected
    budget and sent once more, never the same request twice. ``max_depth``: how deep
    sub-agents may nest (1: the main agent may start
    sub-agents, they may not). ``max_parallel``: sub-agents running at once per level.
    ``retry``: attempts and backoff for retryable errors; ``should_retry`` decides which
    classified errors are retried (default: the kind's ``retryable``). ``on_alert(info,
    agent)`` is called for errors whose kind should wake someone, never for a context
    overflow. ``on_event(event)`` sees every :class:`AgentEvent`.

    ``safety_net=False`` and a custom ``should_retry`` exist to reproduce the old system
    (:mod:`windowfit.sim`'s *before* runs); do not use them otherwise.
    """

    def __init__(
        self,
        model: Model,
        *,
        workspace: str | Path | None = None,
        store: HistoryStore | str | Path | None = None,
        tools: Sequence[Tool] | None = None,
        budget: int = DEFAULT_BUDGET,
        settings: FitSettings | str | None = None,
        estimator: Estimator | None = None,
        shaper: Shaper | None = None,
        model_name: str | None = None,
        learn: bool | Learner = True,
        system: str = DEFAULT_SYSTEM,
        subagent_system: str = DEFAULT_SUBAGENT_SYSTEM,
        safety_net: bool = True,
        max_tokens: int = 4096,
        max_steps: int = 200,
        max_depth: int = 1,
        max_parallel: int = 8,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        retry: RetryPolicy | None = None,
        should_retry: Callable[[ErrorInfo], bool] | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_alert: Callable[[ErrorInfo, AgentInfo], object] | None = None,
        on_event: Callable[[AgentEvent], object] | None = None,
    ) -> None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise SettingsError(f"budget must be a positive whole number, not {budget!r}")
        for name, value in (
            ("max_steps", max_steps),
            ("max_parallel", max_parallel),
            ("max_tokens", max_tokens),
        ):
            if value < 1:
                raise SettingsError(f"{name} must be at least 1, not {value}")
        if max_depth < 0:
            raise SettingsError(f"max_depth must be 0 or more, not {max_depth}")
        if tool_timeout is not None and not tool_timeout > 0:
            raise SettingsError(f"tool_timeout must be positive or None, not {tool_timeout!r}")
        self.model = model
        if isinstance(store, HistoryStore):
            self.store, self._owns_store = store, False
        else:
            path = default_store_path() if store is None else store
            self.store, self._owns_store = HistoryStore(path), True
        if tools is None:
            tools = [ReadFile(workspace), RunCommand(workspace)] if workspace is not None else []
        self.tools: list[Tool] = list(tools)
        self.shaper: Shaper = shaper or FitShaper(
            budget, settings=settings, estimator=estimator, model=model_name, learn=learn
        )
        self.system = system
        self.subagent_system = subagent_system
        self.safety_net = safety_net
        self.max_tokens = max_tokens
        self.max_steps = max_steps
        self.max_depth = max_depth
        self.max_parallel = max_parallel
        self.tool_timeout = tool_timeout
        self.retry = retry or RetryPolicy()
        self.should_retry = should_retry or (lambda info: info.retryable)
        self.sleep = sleep
        self.on_alert = on_alert
        self.on_event = on_event
        #: Every agent run that ended, in the order they ended.
        self.results: list[AgentResult] = []
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self._children: dict[tuple[str, str], int] = {}
        self._shaping: dict[tuple[str, str], tuple[frozenset[str], int]] = {}

    # -- public -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the history store if this runtime opened it (a store passed in is the
        caller's to close)."""
        if self._owns_store:
            self.store.close()

    async def run(self, instruction: str, *, title: str = "", name: str = "main") -> AgentResult:
        """Start a new session whose main agent works on ``instruction``."""
        session = self.store.new_session(title or instruction[:80])
        info = AgentInfo(session, "main", name, 0, None)
        state = self._new_state(info, self._system(self.system))
        self.store.add_agent(session, info.id, name=name, system=state.system)
        self._append(state, {"role": "user", "content": instruction})
        return await self._run(state)

    async def resume(self, session: str, message: str | None = None) -> AgentResult:
        """Reopen a saved session and continue it.

        Work the session's main agent had not finished (a request not yet answered, tool
        calls without results, sub-agents still running when the process stopped) is
        carried on from the saved history: unfinished sub-agents continue where they were,
        finished ones give their saved answers. Then, if ``message`` is given, it is added
        as the person's next message and the main agent works on it.
        """
        roots = [a for a in self.store.agents(session) if a.parent is None]
        if not roots:
            raise HistoryError(f"session {session!r} has no main agent")
        record = roots[0]
        state = self._load_state(session, record.id)
        result = await self._run(state)
        if message is None or not result.finished:
            return result
        state.stats = AgentStats()  # a new run: the result above keeps its own figures
        self._append(state, {"role": "user", "content": message})
        return await self._run(state)

    # -- state --------------------------------------------------------------------------

    def _system(self, base: str) -> str:
        if not self.safety_net:
            return base
        text = add_safety_net(base)
        assert isinstance(text, str)
        return text

    def _new_state(self, info: AgentInfo, system: str) -> _State:
        tools = list(self.tools)
        if info.depth < self.max_depth:
            tools.append(SpawnSubagent())
        return _State(
            info=info,
            system=system,
            history=[],
            tools={t.name: t for t in tools},
            definitions=[_definition(t) for t in tools],
        )

    def _load_state(self, session: str, agent: str, instruction: str | None = None) -> _State:
        record = self.store.agent(session, agent)
        info = AgentInfo(session, record.id, record.name, record.depth, record.parent)
        state = self._new_state(info, record.system)
        state.history = self.store.messages(session, agent)
        if not state.history:
            if instruction is None:
                raise HistoryError(f"agent {agent!r} of session {session!r} has no saved messages")
            # Stopped between saving the agent and its first message: start it now.
            self._append(state, {"role": "user", "content": instruction})
        return state

    def _append(self, state: _State, message: dict[str, Any]) -> None:
        """Save first, then use: what the agent has seen is always on disk."""
        self.store.append(state.info.session, state.info.id, message)
        state.history.append(message)

    def _emit(self, kind: str, state: _State, **data: Any) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(AgentEvent(kind, state.info, data))
        except Exception:
            logger.exception("on_event hook failed")

    # -- the loop -----------------------------------------------------------------------

    async def _run(self, state: _State) -> AgentResult:
        self._emit("started", state)
        end = await self._steps(state)
        if isinstance(end, _Stop):
            result = AgentResult(state.info, end.status, None, end.message, state.stats, end.info)
        else:
            result = AgentResult(state.info, "finished", end, None, state.stats)
        self.store.set_status(
            state.info.session,
            state.info.id,
            result.status,
            answer=result.answer,
            user_message=result.user_message,
        )
        self.results.append(result)
        self._emit("ended", state, result=result)
        return result

    async def _steps(self, state: _State) -> str | _Stop:
        """Work until a final answer (returned) or a reason to stop."""
        steps = 0
        while True:
            last = state.history[-1]
            if last.get("role") == "assistant":
                calls = _tool_calls(last)
                if not calls:
                    return _text(last)
                await self._run_tools(state, calls)
                continue
            if steps >= self.max_steps:
                return _Stop("step_limit", _STEP_LIMIT_MESSAGE.format(steps=steps))
            steps += 1
            response = await self._ask(state)
            if isinstance(response, _Stop):
                return response
            state.stats.steps += 1
            state.stats.add_usage(response.usage)
            message = response.message()
            if not message["content"]:
                message["content"] = [{"type": "text", "text": "(no answer)"}]
            self._append(state, message)

    async def _ask(self, state: _State) -> ModelResponse | _Stop:
        """Fit the history and ask the model, retrying what may succeed."""
        try:
            shaped = self.shaper(state.history, state.system, state.definitions)
        except ContextOverflowError as exc:
            logger.info(
                "agent %s: the conversation no longer fits (%s; %s of %s tokens); stopped",
                state.info.id,
                exc.detail,
                exc.tokens,
                exc.limit,
            )
            return _Stop("overflow", str(exc))
        stats = state.stats
        stats.peak_estimate = max(stats.peak_estimate, shaped.estimate)
        cleared, dropped = self._shaping.get(state.info.key, (frozenset(), 0))
        if (shaped.cleared - cleared) or shaped.dropped != dropped:
            stats.clearing_events += 1
        self._shaping[state.info.key] = (shaped.cleared, shaped.dropped)
        stats.cleared, stats.dropped = len(shaped.cleared), shaped.dropped
        request = ModelRequest(
            state.info,
            state.system,
            state.definitions,
            shaped.messages,
            self.max_tokens,
            shaped.estimate,
        )
        self._emit("request", state, shaped=shaped)
        attempt = 1
        refitted = False
        while True:
            stats.requests += 1
            try:
                response = await self.model.respond(request)
            except Exception as exc:
                stats.rejected += 1
                info = classify_error(exc)
                again = None
                if info.kind is ErrorKind.CONTEXT_OVERFLOW and not refitted:
                    again = self._refit(state, shaped, info)
                retry = again is not None or (
                    self.should_retry(info) and attempt < self.retry.max_attempts
                )
                self._report(state, info, attempt, retry, exc)
                if again is not None:  # a smaller request, sent once
                    refitted, shaped = True, again
                    stats.peak_estimate = max(stats.peak_estimate, shaped.estimate)
                    stats.cleared, stats.dropped = len(shaped.cleared), shaped.dropped
                    self._shaping[state.info.key] = (shaped.cleared, shaped.dropped)
                    request = dataclasses.replace(
                        request, messages=shaped.messages, estimate=shaped.estimate
                    )
                    self._emit("request", state, shaped=shaped)
                    continue
                if not retry:
                    status = "overflow" if info.kind is ErrorKind.CONTEXT_OVERFLOW else "failed"
                    return _Stop(status, info.user_message, info)
                stats.retries += 1
                await self.sleep(self.retry.delay_for(attempt, info))
                attempt += 1
                continue
            if isinstance(self.shaper, FitShaper):
                self.shaper.learn(shaped, response.usage.input_tokens)
            self._emit("response", state, response=response)
            return response

    def _refit(self, state: _State, shaped: Shaped, info: ErrorInfo) -> Shaped | None:
        if not isinstance(self.shaper, FitShaper):
            return None
        return self.shaper.refit(state.history, state.system, state.definitions, shaped, info)

    def _report(
        self, state: _State, info: ErrorInfo, attempt: int, retry: bool, exc: Exception
    ) -> None:
        level = logging.ERROR if info.alert else LOG_LEVELS.get(info.kind, logging.WARNING)
        counts = ""
        if info.prompt_tokens is not None or info.limit is not None:
            counts = f" ({info.prompt_tokens} tokens, limit {info.limit})"
        logger.log(
            level,
            "agent %s: request failed: %s%s%s, attempt %d, %s: %s",
            state.info.id,
            info.kind.value,
            f" from {info.provider}" if info.provider else "",
            counts,
            attempt,
            "retrying" if retry else "not retried",
            info.message or exc,
            exc_info=exc if info.kind is ErrorKind.UNKNOWN else None,
        )
        if self.on_alert is not None and info.alert and info.kind is not ErrorKind.CONTEXT_OVERFLOW:
            try:
                self.on_alert(info, state.info)
            except Exception:
                logger.exception("on_alert hook failed")
        self._emit("error", state, info=info, attempt=attempt, retry=retry)

    # -- tools and sub-agents -----------------------------------------------------------

    async def _run_tools(self, state: _State, calls: list[ToolCall]) -> None:
        outputs = await asyncio.gather(*(self._run_tool(state, call) for call in calls))
        content = []
        for call, output in zip(calls, outputs, strict=True):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": output.content,
            }
            if output.is_error:
                block["is_error"] = True
            content.append(block)
        self._append(state, {"role": "user", "content": content})

    async def _run_tool(self, state: _State, call: ToolCall) -> ToolOutput:
        async def spawn(instruction: str, name: str | None, call_id: str) -> str:
            return await self._spawn(state, instruction, name, call_id)

        context = ToolContext(
            state.info, call.id, spawn if state.info.depth < self.max_depth else None
        )
        tool = state.tools.get(call.name)
        timeout = None if isinstance(tool, SpawnSubagent) else self.tool_timeout
        output = await _timed(run_tool(tool, call.name, call.input, context), timeout, call, state)
        state.stats.tool_calls += 1
        state.stats.tool_errors += output.is_error
        self._emit("tool", state, call=call, is_error=output.is_error)
        return output

    async def _spawn(self, parent: _State, instruction: str, name: str | None, call_id: str) -> str:
        session = parent.info.session
        record = self.store.child_for_call(session, parent.info.id, call_id)
        if record is not None:
            state = self._load_state(session, record.id, instruction)
        else:
            key = (session, parent.info.id)
            if key not in self._children:
                self._children[key] = sum(
                    1 for a in self.store.agents(session) if a.parent == parent.info.id
                )
            self._children[key] += 1
            number = self._children[key]
            agent_id = f"{parent.info.id}/{number}"
            info = AgentInfo(
                session,
                agent_id,
                name or f"sub-agent {number}",
                parent.info.depth + 1,
                parent.info.id,
            )
            state = self._new_state(info, self._system(self.subagent_system))
            self.store.add_agent(
                session,
                agent_id,
                name=info.name,
                system=state.system,
                depth=info.depth,
                parent=parent.info.id,
                parent_call_id=call_id,
            )
            self._append(state, {"role": "user", "content": instruction})
        loop = asyncio.get_running_loop()
        if self._slots_loop is not loop:  # a runtime may serve several asyncio.run calls
            self._slots, self._slots_loop = {}, loop
        slots = self._slots.setdefault(state.info.depth, asyncio.Semaphore(self.max_parallel))
        async with slots:
            result = await self._run(state)
        if result.finished:
            return result.answer or "(the sub-agent gave an empty answer)"
        raise ToolError(
            f"The sub-agent {state.info.name!r} stopped without finishing ({result.status}): "
            f"{result.user_message}"
        )


async def _timed(
    work: Coroutine[Any, Any, ToolOutput], timeout: float | None, call: ToolCall, state: _State
) -> ToolOutput:
    """Run a tool call, giving up on it after ``timeout`` seconds.

    ``asyncio.wait`` rather than ``wait_for``: ``wait_for`` waits for the cancelled call to
    finish, so a tool that ignores cancellation would hang the agent anyway. Here the call
    is cancelled and left behind; the model hears that it did not finish.
    """
    if timeout is None:
        return await work
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if task in done:
        return task.result()
    task.cancel()
    task.add_done_callback(_forget)
    logger.warning(
        "tool %s of agent %s did not finish within %g s; abandoned",
        call.name,
        state.info.id,
        timeout,
    )
    return ToolOutput(
        f"The tool {call.name} did not finish within {timeout:g} seconds and was stopped; "
        "its work may be incomplete.",
        is_error=True,
    )


def _forget(task: asyncio.Future[ToolOutput]) -> None:
    """Collect an abandoned call's end, so that asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _tool_calls(message: Mapping[str, Any]) -> list[ToolCall]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return ModelResponse(content).tool_calls


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return ModelResponse(content).text
