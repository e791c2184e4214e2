"""``windowfit.wrap``: the official SDK clients, with every request fitted first.

::

    client = windowfit.wrap(anthropic.Anthropic())
    reply = client.messages.create(model=..., max_tokens=1024, messages=history)

The wrapped client has the interface of the client it wraps (``anthropic.Anthropic``,
``anthropic.AsyncAnthropic``, ``openai.OpenAI``, ``openai.AsyncOpenAI``, and
``google.genai.Client`` as :mod:`windowfit._wrap_gemini` says; the Azure,
Bedrock and Vertex clients of the same packages are recognised too, untested here). These
calls are changed, and only in what they send:

* ``messages.create`` and ``messages.stream`` (Anthropic), ``chat.completions.create`` and
  ``chat.completions.stream`` (OpenAI), ``stream=True`` included:

  1. **fit**: the messages are shaped with :func:`windowfit.fit` to the budget: by
     default the model's known context window (:mod:`windowfit.models`) minus the
     request's ``max_tokens`` (OpenAI: ``max_completion_tokens`` / ``max_tokens``, else
     the model's largest answer). A ``budget=`` given to :func:`wrap` is a further,
     lower limit; a request that cannot be fitted to it is fitted to the window instead
     (``FitReport.over_budget``) rather than refused. The caller's list is never
     changed: the history keeps everything. SDK objects in it (``reply.content``,
     ``choices[0].message``) are read as the JSON the SDK would send.
     When nothing can be made to fit, :class:`~windowfit.ContextOverflowError` is raised
     and nothing is sent.
  2. **send**, retrying what is worth retrying (:mod:`windowfit.retry`): rate limits,
     overload (Anthropic 529), server errors, timeouts and dropped connections, with
     backoff that honours ``retry-after``. The SDK's own retries are switched off
     (``with_options(max_retries=0)``), so the two never multiply. Other refusals
     (400, 401, ...) are raised as the SDK raised them, at once.
  3. **recover** from the provider's context overflow: the same request is never sent
     again. What the error states (the provider's count; else its limit; else a safe
     margin) is learned, the messages are fitted again to the corrected budget, and the
     smaller request is sent once. When nothing smaller fits, or that one is rejected
     too, :class:`~windowfit.ContextOverflowError` is raised (``str()`` is the
     person-facing message; ``provider_message``, ``tokens`` and ``limit`` say what the
     provider said). So a hopeless request costs at most two HTTP requests.
  4. **learn**: each answer's usage (input tokens including cache reads and writes) is
     compared with the estimate: a :class:`~windowfit.learning.Learner` keeps a
     correction per conversation (on by default, bounded, only ever tightening; off with
     ``learn=False``), and a ``calibrator`` and ``on_usage`` given see it too.

* With ``cache_control=True`` (Anthropic), ``cache_control`` breakpoints are placed at
  the end of the stable prefix (``FitReport.prefix_end``) and at the end of the request,
  within the API's limit of four, so that the next requests read the prefix from the
  provider's cache.

Everything else (``models``, ``messages.count_tokens``, ``beta``, ``with_raw_response``,
``chat.completions.parse``, ...) is the wrapped client's own, unchanged. A mid-stream
error is raised as the SDK raises it: a partly read stream cannot be sent again
transparently. Usage from an OpenAI stream is seen only when it is asked for
(``stream_options={"include_usage": True}``).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
import time
import types
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, TypeVar, cast

from .calibration import Correction
from .classify import ErrorInfo, ErrorKind
from .errors import ContextOverflowError, ConversationError, SettingsError
from .fitter import Fitter
from .fitting import FitReport, FitResult
from .formats import DIALECTS, Dialect, Usage
from .learning import Learner, MemoryStore, conversation_key, overflow_correction
from .models import ModelLimits, model_limits
from .retry import RetryPolicy, retry_call, retry_call_async
from .settings import FitSettings
from .tokens import Estimator

__all__ = ["Calibrator", "UsageRecord", "WrapState", "WrapStats", "place_breakpoints", "wrap"]

T = TypeVar("T")

_MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}
_MEMO_LIMIT = 100_000
#: APIs whose requests need more than their dialect's messages to be fitted: the module
#: (in this package) with their own ``prepare_for(state)`` (Responses: the items sent
#: after ``previous_response_id``).
_OWN_FITTING = {"openai-responses": "._wrap_responses"}


class Calibrator(Protocol):
    """Learns from usage how far estimates are from what the provider counted.

    ``observe`` gets the estimate of a request and the provider's count of it;
    ``budget_for`` turns a budget into the one to fit to, given what was learned.
    """

    def observe(self, estimated: int, provider_tokens: int) -> object: ...

    def budget_for(self, budget: int) -> int: ...


@dataclass(frozen=True)
class UsageRecord:
    """One answered request: the estimate fitting made, the budget it fitted to, and the
    provider's :class:`~windowfit.formats.Usage` (the one usage type, as the API's
    dialect read it). ``provider`` names the API that answered (its dialect's name).

    ``input_tokens``, ``cache_read_tokens``, ``cache_write_tokens`` and
    ``output_tokens`` are ``usage``'s, kept here as shorthands.
    """

    provider: str
    model: str
    estimated: int
    budget: int
    usage: Usage

    @property
    def input_tokens(self) -> int:
        """The whole input the provider counted, cached parts included."""
        return self.usage.input_tokens

    @property
    def cache_read_tokens(self) -> int:
        return self.usage.cache_read_tokens

    @property
    def cache_write_tokens(self) -> int:
        return self.usage.cache_write_tokens

    @property
    def output_tokens(self) -> int:
        return self.usage.output_tokens

    @property
    def ratio(self) -> float:
        """Provider count over estimate (below 1 when the estimate erred high)."""
        return self.usage.input_tokens / self.estimated if self.estimated else 0.0


@dataclass
class WrapStats:
    """What a wrapped client has done: calls made, HTTP attempts, retries, overflows."""

    calls: int = 0
    attempts: int = 0
    retries: int = 0
    overflows: int = 0
    fitted: int = 0
    refits: int = 0  # requests fitted again, smaller, after the provider's overflow
    counted: int = 0  # the provider's token count asked (verify="count_tokens")
    count_refits: int = 0  # requests fitted again because that count was over the budget
    count_failures: int = 0  # counts that failed (the request was sent as fitted)
    last_report: FitReport | None = None
    last_usage: UsageRecord | None = None
    errors: list[ErrorInfo] = field(default_factory=list)


# --------------------------------------------------------------------------- plain data


def _given(value: Any) -> bool:
    """False for ``None`` and the SDKs' "not given" sentinels (``NOT_GIVEN``, ``omit``)."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def _is_plain(value: Any) -> bool:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_plain(v) for v in value)
    return False


def _to_plain(value: Any) -> Any:
    """SDK objects (pydantic models such as ``response.content``) as the JSON they stand
    for, the way the SDKs serialise them; tuples as lists; mappings as dicts."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_plain(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _to_plain(to_dict(mode="json"))
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _to_plain(dump(mode="json", exclude_unset=True, by_alias=True))
    return value


class _PlainMemo:
    """Plain versions of SDK message objects (a reply's content blocks appended to the
    history), made once per object: converting them at every request costs more than
    fitting. Plain dicts are returned as they are and not remembered, so an edit in place
    is always seen and nothing of them is kept."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, Any]] = {}

    def __call__(self, message: Any) -> Any:
        try:
            if _is_plain(message):
                return message
        except RecursionError:  # too deep to send: fitting says so, naming the field
            return message
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        plain = _to_plain(message)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[id(message)] = (message, plain)
        return plain


# --------------------------------------------------------------------------- breakpoints


def _has_cache_control(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("cache_control") is not None


def _count_breakpoints(kwargs: Mapping[str, Any], messages: Sequence[Any]) -> int:
    count = 1 if _given(kwargs.get("cache_control")) else 0
    for part in ("system", "tools"):
        value = kwargs.get(part)
        if _given(value) and isinstance(value, list):
            count += sum(1 for item in value if _has_cache_control(item))
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            for block in content:
                count += _has_cache_control(block)
                inner = block.get("content") if isinstance(block, Mapping) else None
                if isinstance(inner, list):
                    count += sum(1 for part in inner if _has_cache_control(part))
    return count


def _with_breakpoint(message: Any) -> Any:
    """A copy of ``message`` whose last content block carries ``cache_control``."""
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return message
        blocks: list[Any] = [{"type": "text", "text": content, "cache_control": _EPHEMERAL}]
    elif isinstance(content, list) and content:
        last = content[-1]
        if not isinstance(last, Mapping) or last.get("type") in ("thinking", "redacted_thinking"):
            return message
        if last.get("cache_control") is not None:
            return message
        blocks = [*content[:-1], {**last, "cache_control": _EPHEMERAL}]
    else:
        return message
    return {**message, "content": blocks}


def place_breakpoints(messages: list[Any], prefix_end: int, existing: int) -> list[Any]:
    """Breakpoints at the end of the request and, when fitting changed the request after
    its first ``prefix_end`` messages, at the end of that unchanged prefix too: the part
    that stays cached when the next clearing changes the request again."""
    room = _MAX_BREAKPOINTS - existing
    if room <= 0 or not messages:
        return messages
    targets = [len(messages) - 1]
    if room >= 2 and 0 < prefix_end < len(messages):
        targets.insert(0, prefix_end - 1)
    out = list(messages)
    for i in targets:
        out[i] = _with_breakpoint(out[i])
    return out


# --------------------------------------------------------------------------- usage


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _merged(seen: Usage | None, usage: Usage) -> Usage:
    """Two readings of one streamed answer's usage as one: every count the provider
    reports while streaming only grows (Anthropic's ``message_start`` holds the input,
    its ``message_delta`` the output; other APIs repeat or send one final reading)."""
    if seen is None:
        return usage
    return Usage(
        max(seen.input_tokens, usage.input_tokens),
        max(seen.output_tokens, usage.output_tokens),
        max(seen.cache_read_tokens, usage.cache_read_tokens),
        max(seen.cache_write_tokens, usage.cache_write_tokens),
        max(seen.reasoning_tokens, usage.reasoning_tokens),
    )


def _resource(client: Any, path: str) -> Any:
    """The object at ``path`` (``"chat.completions"``) on ``client``, ``None`` if absent."""
    found = client
    for name in path.split("."):
        found = getattr(found, name, None)
        if found is None:
            return None
    return found


# --------------------------------------------------------------------------- the state


@dataclass
class _Prepared:
    kwargs: dict[str, Any]
    model: str
    budget: int
    estimated: int
    key: str | None = None  # the conversation, for learning
    overflow: ErrorInfo | None = None  # the provider's overflow error, when it said so


@dataclass(frozen=True)
class _Api:
    """How one API's calls are fitted and measured (:meth:`WrapState.api_for`): fitting
    by the :class:`WrapState`'s ``prepare`` (or the API's own, ``_OWN_FITTING``), usage
    read by the API's dialect."""

    dialect: Dialect
    #: Fit a request: ``prepare(kwargs, shrink=None, again=False)`` (see
    #: :meth:`WrapState.prepare`; ``shrink``/``again``: the re-fit after an overflow).
    prepare: Callable[..., _Prepared]
    #: Usage of a whole response.
    observe_response: Callable[[_Prepared, Any], None]
    #: Usage as it passes by in a stream (event, state kept between events).
    observe_event: Callable[[_Prepared, Any, dict[str, Any]], None]
    #: The stream ended (or was closed): its usage is recorded.
    observe_end: Callable[[_Prepared, dict[str, Any]], None]
    #: Usage of a ``.stream()`` helper's stream when its block ends.
    observe_closed: Callable[[_Prepared, Any], None]


class WrapState:
    """The settings and counters of a wrapped client, at ``client.windowfit``."""

    def __init__(
        self,
        provider: str,
        *,
        budget: int | None,
        settings: FitSettings | str | None,
        windows: Mapping[str, ModelLimits | int | tuple[int, int]] | None,
        estimator: Estimator | None,
        retry: RetryPolicy | None,
        cache_control: bool,
        calibrator: Calibrator | None,
        on_usage: Callable[[UsageRecord], object] | None,
        on_fit: Callable[[FitReport], object] | None,
        sleep: Callable[[float], Any] | None,
        fitter: Fitter | None = None,
        learn: bool | Learner = True,
        verify: str | None = None,
        verify_band: float = 0.1,
    ) -> None:
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0
        ):
            raise SettingsError(f"budget must be a positive whole number of tokens, not {budget!r}")
        #: The API's dialect (``provider`` is its name: ``DIALECTS[provider]``).
        self.dialect: Dialect = DIALECTS[provider]
        if verify not in (None, "count_tokens"):
            raise SettingsError(f"verify must be None or 'count_tokens', not {verify!r}")
        if verify is not None and not self.dialect.count_method:
            raise SettingsError(
                f"verify='count_tokens' needs an API with a token-counting endpoint; "
                f"{provider} has none (Anthropic Messages has one)"
            )
        if isinstance(verify_band, bool) or not isinstance(verify_band, (int, float)):
            raise SettingsError(f"verify_band must be a number, not {verify_band!r}")
        if not 0 < verify_band < 1:
            raise SettingsError(f"verify_band must be between 0 and 1, not {verify_band!r}")
        #: Ask the provider's free token count when an estimate lands within
        #: ``verify_band`` (a fraction) below the budget, and fit to its answer.
        self.verify = verify
        self.verify_band = float(verify_band)
        self.provider = provider
        self.budget = budget
        self.settings = FitSettings.preset(settings) if isinstance(settings, str) else settings
        self.windows = dict(windows or {})
        self.estimator = estimator
        self.retry = retry or RetryPolicy()
        self.cache_control = cache_control
        self.calibrator = calibrator
        #: Learns a correction per conversation from usage and overflow errors (``None``
        #: with ``learn=False``).
        self.learner: Learner | None = (
            learn if isinstance(learn, Learner) else Learner() if learn else None
        )
        self.on_usage = on_usage
        self.on_fit = on_fit
        self.sleep = sleep
        #: Fits every request of this client (and owns what fitting keeps between them).
        self.fitter = fitter if fitter is not None else Fitter()
        self.stats = WrapStats()
        self._plain = _PlainMemo()
        self._apis: dict[str, _Api] = {}
        self.api = self.api_for(self.dialect, self.prepare)

    def api_for(self, dialect: Dialect, prepare: Callable[..., _Prepared] | None = None) -> _Api:
        """How requests of ``dialect``'s API are fitted (``prepare``; default: this
        state's own, or the API's own module's when it has one) and their usage read
        (by the dialect: whole responses, streamed events, a stream helper's snapshot)."""
        if prepare is None and dialect.name in self._apis:
            return self._apis[dialect.name]
        if prepare is None:
            if dialect is self.dialect:
                prepare = self.prepare
            elif dialect.name in _OWN_FITTING:
                own = importlib.import_module(_OWN_FITTING[dialect.name], __package__)
                prepare = own.prepare_for(self)
            else:
                prepare = self._prepare_as(dialect)

        def observe_response(prepared: _Prepared, response: Any) -> None:
            self.observe_usage(prepared, dialect.usage(_to_plain(response)), dialect)

        def observe_event(prepared: _Prepared, event: Any, pending: dict[str, Any]) -> None:
            usage = dialect.stream_usage(_to_plain(event))
            if usage is not None:
                pending["usage"] = _merged(pending.get("usage"), usage)

        def observe_end(prepared: _Prepared, pending: dict[str, Any]) -> None:
            self.observe_usage(prepared, pending.pop("usage", None), dialect)

        def observe_closed(prepared: _Prepared, stream: Any) -> None:
            snapshot = _snapshot(stream)
            if snapshot is not None:
                observe_response(prepared, snapshot)

        api = _Api(dialect, prepare, observe_response, observe_event, observe_end, observe_closed)
        self._apis.setdefault(dialect.name, api)
        return api

    def _prepare_as(self, dialect: Dialect) -> Callable[..., _Prepared]:
        def prepare(
            kwargs: dict[str, Any], *, shrink: Correction | None = None, again: bool = False
        ) -> _Prepared:
            return self.prepare(kwargs, shrink=shrink, again=again, dialect=dialect)

        return prepare

    # -- budget and fitting -----------------------------------------------------------

    def budget_for(self, model: str | None, max_tokens: int | None = None) -> int:
        """The budget a request for ``model`` asking for ``max_tokens`` is fitted to."""
        return self.limits_for(model, max_tokens)[0]

    def limits_for(
        self,
        model: str | None,
        max_tokens: int | None = None,
        key: str | None = None,
        shrink: Correction | None = None,
    ) -> tuple[int, int | None]:
        """``(budget, hard_limit)`` for a request: the budget fitting aims at, and the
        model's window minus the output reserve when that is higher (a request that cannot
        be fitted to the budget is then fitted to the window rather than refused). Both
        are corrected by what was learned of conversation ``key``, by the calibrator, and
        by ``shrink`` (a re-fit after an overflow)."""
        limits = model_limits(model, self.windows) if isinstance(model, str) else None
        if limits is None and self.budget is None:
            raise SettingsError(
                f"no context window is known for model {model!r}: pass budget= to "
                f"windowfit.wrap, or windows={{{model!r}: <tokens>}}"
            )
        hard: int | None = None
        if limits is not None:
            reserve = max_tokens if max_tokens is not None else limits.max_output
            hard = limits.context_window - reserve
            if hard <= 0:
                raise SettingsError(
                    f"max_tokens={reserve} leaves no room for input in {model}'s context "
                    f"window of {limits.context_window} tokens"
                )
        if self.budget is None:
            assert hard is not None
            budget = hard
        else:
            budget = self.budget if hard is None else min(self.budget, hard)
        corrections: list[Callable[[int], int]] = []
        if self.learner is not None and key is not None:
            learner = self.learner
            corrections.append(lambda n: learner.budget_for(key, n))
        if self.calibrator is not None:
            corrections.append(self.calibrator.budget_for)
        if shrink is not None:
            corrections.append(lambda n: min(n, shrink.budget_for(n)))
        for correct in corrections:
            budget = max(1, int(correct(budget)))
            if hard is not None:
                hard = max(1, int(correct(hard)))
        return budget, (hard if hard is not None and hard > budget else None)

    def prepare(
        self,
        kwargs: dict[str, Any],
        *,
        shrink: Correction | None = None,
        again: bool = False,
        dialect: Dialect | None = None,
    ) -> _Prepared:
        """Fit the request's messages; raises ContextOverflowError when nothing fits.
        ``shrink`` and ``again``: a re-fit after the provider's overflow (see :meth:`refit`).
        The request is read and written back by ``dialect`` (default: this client's):
        where its messages, system prompt, tools and output limit are."""
        dialect = dialect or self.dialect
        self.stats.calls += not again
        model = kwargs.get("model")
        model_name = model if isinstance(model, str) else ""
        given = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items() if _given(v)}
        try:
            parts = dialect.read_request(given)
        except ConversationError:
            return _Prepared(kwargs, model_name, 0, 0)  # the SDK says what is wrong
        messages = [self._plain(m) for m in parts.messages]
        system = _to_plain(parts.system) if parts.system is not None else None
        tools = _to_plain(list(parts.tools)) if _given(parts.tools) else None
        key, budget, limit = self.conversation_limits(
            dialect.name, model_name, system, tools, messages, parts.max_output_tokens, shrink
        )
        result = self.fit_recorded(
            messages,
            again=again,
            budget=budget,
            limit=limit,
            system=system,
            tools=tools,
            format=dialect.format.name,
            estimator=self.estimator,
            model=model_name or None,
        )
        report = result.report
        out = result.messages
        if self.cache_control and dialect.cache_breakpoints:
            out = place_breakpoints(out, report.prefix_end, _count_breakpoints(kwargs, out))
        body = dialect.write_request(kwargs, out, None)
        return _Prepared(body, model_name, budget, report.tokens_after, key)

    def conversation_limits(
        self,
        name: str,
        model: str,
        system: Any,
        tools: Any,
        messages: list[Any],
        max_output_tokens: int | None,
        shrink: Correction | None,
    ) -> tuple[str | None, int, int | None]:
        """The request's conversation key (``None`` without learning) and its budget and
        limit (:meth:`limits_for`, the conversation's learned correction applied)."""
        key = None
        if self.learner is not None:
            key = conversation_key(name, model, system, tools, messages)
        budget, limit = self.limits_for(model or None, max_output_tokens, key=key, shrink=shrink)
        return key, budget, limit

    def fit_recorded(
        self,
        messages: list[Any],
        *,
        again: bool,
        budget: int,
        limit: int | None,
        system: Any,
        tools: Any,
        format: str,
        estimator: Estimator | None,
        model: str | None = None,
    ) -> FitResult:
        """Fit with this client's Fitter and settings, and record what was done (the
        report in :attr:`stats`, ``on_fit``); an overflow is counted once per call
        (``again``: the re-fit of a call already counted)."""
        try:
            result = self.fitter.fit(
                messages,
                budget=budget,
                system=system,
                tools=tools,
                settings=self.settings,
                format=format,
                estimator=estimator,
                limit=limit,
                model=model,
            )
        except ContextOverflowError:
            self.stats.overflows += not again
            raise
        report = result.report
        self.stats.last_report = report
        self.stats.fitted += report.stage > 0
        if self.on_fit is not None:
            self.on_fit(report)
        return result

    def refit(
        self,
        kwargs: dict[str, Any],
        prepared: _Prepared,
        error: ContextOverflowError,
        api: _Api | None = None,
    ) -> _Prepared:
        """After the provider rejected ``prepared`` as too long: the request fitted again
        to the budget corrected by what the error taught (learned already, or, with
        learning off, applied to this re-fit alone). Raises ``error`` when that request
        would not be smaller, or nothing fits any more: the same request is never sent
        twice."""
        info = prepared.overflow
        if info is None or prepared.estimated <= 0:
            raise error
        shrink = None
        if self.learner is None or prepared.key is None:
            shrink = overflow_correction(prepared.estimated, info, prepared.budget)
        try:
            again = (api or self.api).prepare(kwargs, shrink=shrink, again=True)
        except ContextOverflowError:
            raise error from error.__cause__
        if again.estimated >= prepared.estimated:
            raise error
        self.stats.refits += 1
        return again

    # -- errors and usage -------------------------------------------------------------

    def on_error(self, prepared: _Prepared) -> Callable[[ErrorInfo, int], None]:
        def seen(info: ErrorInfo, attempt: int) -> None:
            self.stats.errors.append(info)
            del self.stats.errors[:-20]
            if info.kind is ErrorKind.CONTEXT_OVERFLOW:
                self.stats.overflows += 1
                prepared.overflow = info
                if self.learner is not None and prepared.key is not None:
                    self.learner.observe_overflow(
                        prepared.key, prepared.estimated, info, prepared.budget
                    )
                if (
                    self.calibrator is not None
                    and prepared.estimated > 0
                    and info.prompt_tokens is not None
                    and info.prompt_tokens > 0
                ):
                    self.calibrator.observe(prepared.estimated, info.prompt_tokens)
            elif info.retryable and attempt < self.retry.max_attempts:
                self.stats.retries += 1

        return seen

    def observe_usage(
        self, prepared: _Prepared, usage: Usage | None, dialect: Dialect | None = None
    ) -> None:
        """Record one answer's :class:`~windowfit.formats.Usage` (read by ``dialect``, the
        API that answered; default: this client's) and give it to the learner, the
        calibrator and ``on_usage``."""
        if usage is None or prepared.estimated <= 0:
            return
        name = (dialect or self.dialect).name
        record = UsageRecord(name, prepared.model, prepared.estimated, prepared.budget, usage)
        self.stats.last_usage = record
        total = usage.input_tokens
        if self.calibrator is not None and total > 0:
            self.calibrator.observe(prepared.estimated, total)
        if self.learner is not None and prepared.key is not None and total > 0:
            self.learner.observe(prepared.key, prepared.estimated, total)
        if self.on_usage is not None:
            self.on_usage(record)

    # -- the provider's own count (verify="count_tokens") ------------------------------

    def counter(self, resource: Any, api: _Api) -> Callable[..., Any] | None:
        """``resource``'s token-counting method when this client verifies, else None."""
        if self.verify is None or not api.dialect.count_method:
            return None
        method = getattr(resource, api.dialect.count_method, None)
        return method if callable(method) else None

    def _worth_counting(self, prepared: _Prepared) -> bool:
        """Whether the estimate lands in the band just below the budget, where an
        estimate that errs low would put the request over it."""
        budget = prepared.budget
        low = budget * (1 - self.verify_band)
        return prepared.estimated > 0 and low <= prepared.estimated <= budget

    def _count_fields(self, prepared: _Prepared, api: _Api) -> dict[str, Any]:
        return {k: v for k, v in prepared.kwargs.items() if k in api.dialect.count_fields}

    def _fit_to_count(
        self, kwargs: dict[str, Any], prepared: _Prepared, api: _Api, answer: Any
    ) -> _Prepared:
        """Learn from the provider's count and, if it is over the budget, fit again to
        the budget it corrects (once). A re-fit that cannot fit leaves the request as
        fitted: the provider, whose window is above the budget, judges it."""
        self.stats.counted += 1
        tokens = _field(answer, "input_tokens")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
            return prepared
        shrink: Correction | None = None
        if self.learner is not None and prepared.key is not None:
            self.learner.observe(prepared.key, prepared.estimated, tokens)
        else:
            shrink = Learner(MemoryStore(1)).observe("count", prepared.estimated, tokens)
        if tokens <= prepared.budget:
            return prepared
        try:
            again = api.prepare(kwargs, shrink=shrink, again=True)
        except ContextOverflowError:
            return prepared
        self.stats.count_refits += 1
        return again

    def verified(
        self,
        kwargs: dict[str, Any],
        prepared: _Prepared,
        api: _Api,
        count: Callable[..., Any] | None,
    ) -> _Prepared:
        """``prepared``, or, when its estimate is near the budget, the request fitted to
        the provider's own count (``count``: the SDK's counting method)."""
        if count is None or not self._worth_counting(prepared):
            return prepared
        try:
            answer = count(**self._count_fields(prepared, api))
        except Exception:  # a failed count must not fail the request
            self.stats.count_failures += 1
            return prepared
        return self._fit_to_count(kwargs, prepared, api, answer)

    async def verified_async(
        self,
        kwargs: dict[str, Any],
        prepared: _Prepared,
        api: _Api,
        count: Callable[..., Awaitable[Any]] | None,
    ) -> _Prepared:
        """:meth:`verified`, awaited."""
        if count is None or not self._worth_counting(prepared):
            return prepared
        try:
            answer = await count(**self._count_fields(prepared, api))
        except Exception:  # a failed count must not fail the request
            self.stats.count_failures += 1
            return prepared
        return self._fit_to_count(kwargs, prepared, api, answer)

    # -- sending ----------------------------------------------------------------------

    def _attempt(self, send: Callable[[dict[str, Any]], T], prepared: _Prepared) -> Callable[[], T]:
        def attempt() -> T:
            self.stats.attempts += 1
            return send(prepared.kwargs)

        return attempt

    def send(
        self,
        kwargs: dict[str, Any],
        send: Callable[[dict[str, Any]], Any],
        api: _Api | None = None,
        count: Callable[..., Any] | None = None,
    ) -> tuple[_Prepared, Any]:
        """Fit ``kwargs`` and ``send`` them, retrying what is worth retrying; after the
        provider's overflow, fit again smaller and send once more (:meth:`refit`).
        ``count``: the provider's token count, asked near the budget (:meth:`verified`).
        Returns the request that was answered and the answer."""
        api = api or self.api
        prepared = self.verified(kwargs, api.prepare(kwargs), api, count)
        sleep = self.sleep or time.sleep
        try:
            response = retry_call(
                self._attempt(send, prepared),
                policy=self.retry,
                on_error=self.on_error(prepared),
                sleep=sleep,
            )
        except ContextOverflowError as error:  # the provider counted more: re-fit once
            prepared = self.refit(kwargs, prepared, error, api)
            response = retry_call(
                self._attempt(send, prepared),
                policy=self.retry,
                on_error=self.on_error(prepared),
                sleep=sleep,
            )
        return prepared, response

    async def send_async(
        self,
        kwargs: dict[str, Any],
        send: Callable[[dict[str, Any]], Awaitable[Any]],
        api: _Api | None = None,
        count: Callable[..., Awaitable[Any]] | None = None,
    ) -> tuple[_Prepared, Any]:
        """:meth:`send`, awaited."""
        api = api or self.api
        prepared = await self.verified_async(kwargs, api.prepare(kwargs), api, count)
        sleep = self.sleep or asyncio.sleep
        try:
            response = await retry_call_async(
                self._attempt(send, prepared),
                policy=self.retry,
                on_error=self.on_error(prepared),
                sleep=sleep,
            )
        except ContextOverflowError as error:  # the provider counted more: re-fit once
            prepared = self.refit(kwargs, prepared, error, api)
            response = await retry_call_async(
                self._attempt(send, prepared),
                policy=self.retry,
                on_error=self.on_error(prepared),
                sleep=sleep,
            )
        return prepared, response

    def call(
        self,
        kwargs: dict[str, Any],
        send: Callable[[dict[str, Any]], Any],
        api: _Api | None = None,
        count: Callable[..., Any] | None = None,
    ) -> Any:
        """:meth:`send`, with the answer's usage observed (a stream's as it passes)."""
        api = api or self.api
        prepared, response = self.send(kwargs, send, api, count)
        if kwargs.get("stream") is True:
            return _ObservedStream(response, api, prepared)
        api.observe_response(prepared, response)
        return response

    async def call_async(
        self,
        kwargs: dict[str, Any],
        send: Callable[[dict[str, Any]], Awaitable[Any]],
        api: _Api | None = None,
        count: Callable[..., Awaitable[Any]] | None = None,
    ) -> Any:
        """:meth:`call`, awaited."""
        api = api or self.api
        prepared, response = await self.send_async(kwargs, send, api, count)
        if kwargs.get("stream") is True:
            return _AsyncObservedStream(response, api, prepared)
        api.observe_response(prepared, response)
        return response


# --------------------------------------------------------------------------- streams


class _ObservedStream:
    """The SDK's stream, unchanged, with its usage noted as the events pass."""

    def __init__(self, stream: Any, api: _Api, prepared: _Prepared) -> None:
        self._stream = stream
        self._observe = api.observe_event
        self._end = api.observe_end
        self._prepared = prepared
        self._pending: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __iter__(self) -> Iterator[Any]:
        try:
            for event in self._stream:
                self._observe(self._prepared, event, self._pending)
                yield event
        finally:
            self._end(self._prepared, self._pending)

    def __next__(self) -> Any:
        try:
            event = next(self._stream)
        except StopIteration:
            self._end(self._prepared, self._pending)
            raise
        self._observe(self._prepared, event, self._pending)
        return event

    def __enter__(self) -> _ObservedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._stream.close()
        finally:
            self._end(self._prepared, self._pending)


class _AsyncObservedStream:
    """The SDK's async stream, unchanged, with its usage noted as the events pass."""

    def __init__(self, stream: Any, api: _Api, prepared: _Prepared) -> None:
        self._stream = stream
        self._observe = api.observe_event
        self._end = api.observe_end
        self._prepared = prepared
        self._pending: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def _events(self) -> Any:
        try:
            async for event in self._stream:
                self._observe(self._prepared, event, self._pending)
                yield event
        finally:
            self._end(self._prepared, self._pending)

    def __aiter__(self) -> Any:
        return self._events()

    async def __anext__(self) -> Any:
        try:
            event = await self._stream.__anext__()
        except StopAsyncIteration:
            self._end(self._prepared, self._pending)
            raise
        self._observe(self._prepared, event, self._pending)
        return event

    async def __aenter__(self) -> _AsyncObservedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._stream.close()
        finally:
            self._end(self._prepared, self._pending)


def _snapshot(stream: Any) -> Any:
    """The answer a ``.stream()`` helper built from the events it read (Messages' and
    Chat's snapshots, Responses' completed response), ``None`` before any."""
    for name in ("current_message_snapshot", "current_completion_snapshot"):
        try:
            snapshot = getattr(stream, name)
        except Exception:  # the SDK asserts when no event was read yet
            continue
        if snapshot is not None:
            return snapshot
    return getattr(getattr(stream, "_state", None), "_completed_response", None)


class _StreamManager:
    """``with client.messages.stream(...) as stream``: fitted, opened with retries."""

    def __init__(
        self,
        state: WrapState,
        kwargs: dict[str, Any],
        open_: Callable[..., Any],
        api: _Api | None = None,
    ):
        self._state = state
        self._api = api or state.api
        self._kwargs = kwargs
        self._open = open_
        self._manager: Any = None
        self._stream: Any = None
        self._prepared: _Prepared | None = None

    def __enter__(self) -> Any:
        state = self._state
        prepared = self._prepared = self._api.prepare(self._kwargs)

        def opened(prepared: _Prepared) -> tuple[Any, Any]:
            def attempt() -> tuple[Any, Any]:
                state.stats.attempts += 1
                manager = self._open(**prepared.kwargs)
                return manager, manager.__enter__()

            return retry_call(
                attempt,
                policy=state.retry,
                on_error=state.on_error(prepared),
                sleep=state.sleep or time.sleep,
            )

        try:
            self._manager, self._stream = opened(prepared)
        except ContextOverflowError as error:  # the provider counted more: re-fit once
            prepared = self._prepared = state.refit(self._kwargs, prepared, error, self._api)
            self._manager, self._stream = opened(prepared)
        return self._stream

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._manager is not None:
                self._manager.__exit__(exc_type, exc, tb)
        finally:
            if self._prepared is not None and self._stream is not None:
                self._api.observe_closed(self._prepared, self._stream)


class _AsyncStreamManager:
    """``async with client.messages.stream(...) as stream``: fitted, opened with retries."""

    def __init__(
        self,
        state: WrapState,
        kwargs: dict[str, Any],
        open_: Callable[..., Any],
        api: _Api | None = None,
    ):
        self._state = state
        self._api = api or state.api
        self._kwargs = kwargs
        self._open = open_
        self._manager: Any = None
        self._stream: Any = None
        self._prepared: _Prepared | None = None

    async def __aenter__(self) -> Any:
        state = self._state
        prepared = self._prepared = self._api.prepare(self._kwargs)

        async def opened(prepared: _Prepared) -> tuple[Any, Any]:
            async def attempt() -> tuple[Any, Any]:
                state.stats.attempts += 1
                manager = self._open(**prepared.kwargs)
                return manager, await manager.__aenter__()

            return await retry_call_async(
                attempt,
                policy=state.retry,
                on_error=state.on_error(prepared),
                sleep=state.sleep or asyncio.sleep,
            )

        try:
            self._manager, self._stream = await opened(prepared)
        except ContextOverflowError as error:  # the provider counted more: re-fit once
            prepared = self._prepared = state.refit(self._kwargs, prepared, error, self._api)
            self._manager, self._stream = await opened(prepared)
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._manager is not None:
                await self._manager.__aexit__(exc_type, exc, tb)
        finally:
            if self._prepared is not None and self._stream is not None:
                self._api.observe_closed(self._prepared, self._stream)


# --------------------------------------------------------------------------- resources


class _Passthrough:
    """Attributes not handled here are the wrapped object's own."""

    _original: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class _Resource(_Passthrough):
    """One API's resource (``messages``, ``chat.completions``, ``responses``): ``create``
    (``stream=True`` included) and ``stream`` fitted, retried and measured."""

    def __init__(
        self, state: WrapState, inner: Any, original: Any, is_async: bool, api: _Api
    ) -> None:
        self._state = state
        self._inner = inner
        self._original = original
        self._async = is_async
        self._api = api

    def create(self, **kwargs: Any) -> Any:
        count = self._state.counter(self._inner, self._api)
        if self._async:
            return self._state.call_async(
                kwargs, lambda kw: self._inner.create(**kw), self._api, count
            )
        return self._state.call(kwargs, lambda kw: self._inner.create(**kw), self._api, count)

    def stream(self, **kwargs: Any) -> Any:
        if self._async:
            return _AsyncStreamManager(self._state, kwargs, self._inner.stream, self._api)
        return _StreamManager(self._state, kwargs, self._inner.stream, self._api)


class _Namespace(_Passthrough):
    """A client attribute on the way to a resource (``chat`` of ``chat.completions``)."""

    def __init__(self, original: Any) -> None:
        self._original = original


class _Client(_Passthrough):
    """The wrapped client (see :func:`wrap`): each API of the client's SDK
    (:func:`_dialects_of`) at its resource's place."""

    def __init__(
        self, client: Any, state: WrapState, is_async: bool, dialects: Sequence[Dialect]
    ) -> None:
        self._original = client
        self._inner = client.with_options(max_retries=0)
        self._async = is_async
        self._dialects = tuple(dialects)
        self.windowfit = state
        for dialect in self._dialects:
            *path, last = dialect.sdk_resource.split(".")
            holder: Any = self
            inner, original = self._inner, client
            for name in path:
                inner, original = getattr(inner, name), getattr(original, name)
                if not isinstance(holder.__dict__.get(name), _Namespace):
                    setattr(holder, name, _Namespace(original))
                holder = getattr(holder, name)
            api = state.api_for(dialect)
            resource = _Resource(
                state, getattr(inner, last), getattr(original, last), is_async, api
            )
            setattr(holder, last, resource)

    def with_options(self, **options: Any) -> Any:
        """The wrapped client's ``with_options``, wrapped again (same settings and
        counters; the SDK's retries stay off)."""
        return _Client(
            self._original.with_options(**options), self.windowfit, self._async, self._dialects
        )

    copy = with_options

    def __repr__(self) -> str:
        return f"<windowfit.wrap of {self._original!r}>"


def _dialects_of(client: Any) -> list[Dialect]:
    """The APIs ``client`` speaks: the dialects whose official SDK made its type and
    whose resource it has (``openai.OpenAI``: Chat Completions, then Responses)."""
    module = type(client).__module__
    found = [
        dialect
        for dialect in DIALECTS.values()
        if dialect.sdk_package
        and (module == dialect.sdk_package or module.startswith(dialect.sdk_package + "."))
        and _resource(client, dialect.sdk_resource) is not None
    ]
    if not found:
        raise TypeError(
            "windowfit.wrap takes an anthropic or openai client (anthropic.Anthropic, "
            "anthropic.AsyncAnthropic, openai.OpenAI, openai.AsyncOpenAI) or a "
            f"google.genai.Client, not {type(client)!r}"
        )
    return found


def _is_async(client: Any) -> bool:
    close = getattr(type(client), "close", None)
    return inspect.iscoroutinefunction(close)


def wrap(
    client: T,
    *,
    budget: int | None = None,
    settings: FitSettings | str | None = None,
    windows: Mapping[str, ModelLimits | int | tuple[int, int]] | None = None,
    estimator: Estimator | None = None,
    retry: RetryPolicy | None = None,
    cache_control: bool = False,
    calibrator: Calibrator | None = None,
    on_usage: Callable[[UsageRecord], object] | None = None,
    on_fit: Callable[[FitReport], object] | None = None,
    sleep: Callable[[float], Any] | None = None,
    fitter: Fitter | None = None,
    learn: bool | Learner = True,
    verify: str | None = None,
    verify_band: float = 0.1,
) -> T:
    """``client`` with every request fitted, retried and measured (module docstring).

    ``budget``: a per-request limit in tokens below the model's window (default: the
    window minus ``max_tokens``). ``settings``: :class:`~windowfit.FitSettings` or a preset
    name. ``windows``: context windows for models the table does not know (or knows
    differently): ``{"my-model": 32_000}`` or ``{"my-model": ModelLimits(...)}``.
    ``estimator``: how fitting counts (default: the calibrated profile of the request's
    model family, ``conservative`` for a model windowfit does not know; the rule of
    :func:`windowfit.default_estimator`).
    ``retry``: the :class:`~windowfit.RetryPolicy` (``sleep`` replaces the pause between
    attempts: a function for sync clients, a coroutine function for async ones).
    ``cache_control``: place Anthropic prompt-cache breakpoints. ``learn``: learn a
    correction per conversation from usage and overflow errors (default ``True``;
    ``False`` turns it off; a :class:`~windowfit.learning.Learner` to share or to keep
    its state elsewhere). ``calibrator``: also gets each answer's estimate and provider
    count (:class:`Calibrator`) and adjusts budgets.
    ``on_usage(record)`` sees each answer's :class:`UsageRecord`, ``on_fit(report)`` each
    request's :class:`~windowfit.FitReport`. ``fitter``: the :class:`~windowfit.Fitter`
    that fits the requests (default: a new one, owned by the wrapped client; pass one to
    share what it keeps between clients). ``verify="count_tokens"`` (Anthropic): when a
    fitted request's estimate lands within ``verify_band`` (a fraction, default 0.1)
    below the budget, ask the API's free token count first and, if it is over the
    budget, fit to it once (``stats.counted``, ``stats.count_refits``); a count that
    fails leaves the request as fitted. The settings and counters are at
    ``wrapped.windowfit`` (a :class:`WrapState`).
    """
    from . import _wrap_gemini

    dialects = _dialects_of(client)
    state = WrapState(
        dialects[0].name,
        budget=budget,
        settings=settings,
        windows=windows,
        estimator=estimator,
        retry=retry,
        cache_control=cache_control,
        calibrator=calibrator,
        on_usage=on_usage,
        on_fit=on_fit,
        sleep=sleep,
        fitter=fitter,
        learn=learn,
        verify=verify,
        verify_band=verify_band,
    )
    if _wrap_gemini.is_gemini_client(client):  # its own client shape (``models``, ``aio``)
        return cast(T, _wrap_gemini.wrap_client(client, state))
    return cast(T, _Client(client, state, _is_async(client), dialects))


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`wrap`.

    ``windowfit.wrap`` is the function (loaded lazily by the package), but importing this
    submodule first (``from windowfit.wrap import WrapStats``) makes Python bind the
    package's ``wrap`` attribute to the module; calling the module then still wraps."""

    def __call__(self, client: T, **options: Any) -> T:
        return wrap(client, **options)


sys.modules[__name__].__class__ = _CallableModule
