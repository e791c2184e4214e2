"""``windowfit.wrap`` for ``google-genai`` clients (``pip install windowfit[gemini]``).

::

    client = windowfit.wrap(genai.Client(api_key=...))
    reply = client.models.generate_content(model="gemini-2.5-flash", contents=history)

``models.generate_content`` and ``models.generate_content_stream``, and the same two of
``client.aio.models``, are fitted, retried and measured as :func:`windowfit.wrap` says
for the other SDKs; everything else is the client's own. The budget is the model's
input limit (:mod:`windowfit.models`, ``models/`` and other resource prefixes left out)
minus ``config.max_output_tokens`` (else the model's largest answer).

``contents`` may be anything the SDK takes (a string, parts, ``Content`` objects, dicts).
Fitting works on their JSON: a list of JSON content dicts is used as it is (whatever
spelling it has); anything else goes through the SDK's own conversion
(``t_contents``) and ``model_dump(mode="json", by_alias=True, exclude_none=True)``.
Nothing the caller gave is changed: contents fitting leaves alone are sent as the
caller's own objects, and the ones it changes (a cleared response, the trimmed
conversation note) as new ``types.Content`` made from their JSON. The system instruction
and the tools are counted in the budget (Python functions given as tools by the
declarations the SDK makes of them).

The SDK retries nothing unless ``HttpOptions(retry_options=...)`` asks it to; with such
options both would retry, so leave them out of a wrapped client. Automatic function
calling (Python functions as tools) sends follow-up requests from inside one call that
windowfit does not see: only the first is fitted. ``client.chats`` sessions are the
SDK's own (they call the unwrapped models), unfitted. Streams are retried until their first
chunk arrives (that is when the SDK sends the request); usage is read from the chunks as
they pass, the last one holding the final counts.

The calls go through the same path as the other SDKs' (:meth:`WrapState.send
<windowfit.wrap.WrapState.send>`): each answer's usage teaches the conversation's
correction (learning, on by default), and when the provider still rejects a request as
too long, the count it states is learned, the contents are fitted again to the
corrected budget and the smaller request is sent once (a hopeless request costs at most
two HTTP requests).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from .calibration import Correction
from .errors import MissingExtraError
from .formats import gemini
from .wrap import WrapState, _Api, _Passthrough, _Prepared

__all__ = ["is_gemini_client", "wrap_client"]

_MEMO_LIMIT = 100_000


def is_gemini_client(client: Any) -> bool:
    """Whether ``client`` is a ``google.genai.Client``."""
    return type(client).__module__.startswith("google.genai") and hasattr(client, "models")


def _types() -> Any:
    try:
        from google.genai import _transformers, types
    except ImportError as exc:  # pragma: no cover - only without the extra
        raise MissingExtraError("google-genai", "gemini", "wrapping a Gemini client") from exc
    return types, _transformers


def model_name(model: Any) -> str:
    """The model's own name in a resource name (``models/gemini-2.5-flash``,
    ``publishers/google/models/gemini-2.5-pro``, ``google/gemini-2.5-pro``)."""
    if not isinstance(model, str):
        return ""
    return model.rsplit("/", 1)[-1]


def _is_json(value: Any) -> bool:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    return False


def _dump(value: Any) -> Any:
    """An SDK object as the JSON the SDK sends (camelCase, bytes in base64)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_none=True)
    return value


class _Contents:
    """The JSON of the caller's contents, SDK objects converted once each (a reply's
    ``candidates[0].content`` appended to the history is not converted again)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, Any]] = {}

    def plain(self, item: Any) -> Any:
        try:
            if isinstance(item, dict) and _is_json(item):
                return item
        except RecursionError:  # too deep to send: fitting says so, naming the field
            return item
        hit = self._memo.get(id(item))
        if hit is not None and hit[0] is item:
            return hit[1]
        types, _ = _types()
        content = item if isinstance(item, types.Content) else types.Content.model_validate(item)
        plain = _dump(content)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[id(item)] = (item, plain)
        return plain

    def items(self, contents: Any) -> list[Any] | None:
        """The contents as a list of content items (the caller's own when it gave a list
        of contents, else the SDK's conversion); ``None`` when the SDK must say what is
        wrong."""
        types, transformers = _types()
        if (
            isinstance(contents, list)
            and contents
            and all(
                isinstance(c, types.Content)
                or (isinstance(c, dict) and ("parts" in c or "role" in c))
                for c in contents
            )
        ):
            return contents
        try:
            return list(transformers.t_contents(contents))
        except (ValueError, TypeError):
            return None


def _setting(config: Any, camel: str, snake: str) -> Any:
    """One field of a ``GenerateContentConfig`` or of a dict in either spelling (read
    field by field: a config holding Python functions as tools has no JSON form)."""
    if config is None:
        return None
    if isinstance(config, Mapping):
        return config[camel] if camel in config else config.get(snake)
    return getattr(config, snake, None)


def _system_json(system: Any) -> Any:
    """The system instruction's parts (or string) as fitting counts them."""
    if system is None or isinstance(system, str):
        return system
    _, transformers = _types()
    content = transformers.t_content(system) if not isinstance(system, Mapping) else system
    return gemini.system_parts(_dump(content) if not isinstance(content, Mapping) else content)


def _tools_json(tools: Any) -> list[Any] | None:
    if not isinstance(tools, list) or not tools:
        return None
    types, _ = _types()
    out = []
    for tool in tools:
        if callable(tool) and not hasattr(tool, "model_dump"):
            try:  # the declaration the SDK makes of a Python function (and sends)
                declaration = types.FunctionDeclaration.from_callable_with_api_option(
                    callable=tool, use_json_schema=True
                )
            except Exception:  # a function the SDK cannot describe: it says so when sending
                continue
            out.append({"functionDeclarations": [_dump(declaration)]})
        elif isinstance(tool, Mapping):
            out.append(dict(tool) if _is_json(tool) else _dump(types.Tool.model_validate(tool)))
        else:
            out.append(_dump(tool))
    return out


class _Fitting:
    """Fits one client's calls and sends them through its :class:`WrapState` (shared by
    the sync and async resources)."""

    def __init__(self, state: WrapState) -> None:
        self.state = state
        self.contents = _Contents()
        self.api: _Api = state.api_for(gemini.DIALECT, self.prepare)
        state.api = self.api  # the client's one API: what ``state.call`` sends by default

    def prepare(
        self, kwargs: dict[str, Any], *, shrink: Correction | None = None, again: bool = False
    ) -> _Prepared:
        """As :meth:`WrapState.prepare <windowfit.wrap.WrapState.prepare>`, for
        ``contents`` and a ``config`` (``shrink``/``again``: the re-fit after an overflow)."""
        state = self.state
        state.stats.calls += not again
        model = model_name(kwargs.get("model"))
        items = self.contents.items(kwargs.get("contents"))
        if items is None:
            return _Prepared(kwargs, model, 0, 0)  # the SDK says what is wrong
        messages = [self.contents.plain(item) for item in items]
        config = kwargs.get("config")
        limit_value = _setting(config, "maxOutputTokens", "max_output_tokens")
        max_tokens = limit_value if isinstance(limit_value, int) else None
        system = _system_json(_setting(config, "systemInstruction", "system_instruction"))
        tools = _tools_json(_setting(config, "tools", "tools"))
        key, budget, limit = state.conversation_limits(
            gemini.DIALECT.name, model, system, tools, messages, max_tokens, shrink
        )
        result = state.fit_recorded(
            messages,
            again=again,
            budget=budget,
            limit=limit,
            system=system,
            tools=tools,
            format=gemini.SPEC.name,
            estimator=state.estimator,
            model=model or None,
        )
        report = result.report
        out = self._send_form(result.messages, messages, items)
        return _Prepared({**kwargs, "contents": out}, model, budget, report.tokens_after, key)

    @staticmethod
    def _send_form(fitted: list[Any], plain: list[Any], items: list[Any]) -> list[Any]:
        """The fitted contents to send: the caller's own item for each content fitting
        left alone, a new ``types.Content`` (bytes decoded from their base64) for each it
        changed."""
        types, _ = _types()
        where = {id(p): k for k, p in enumerate(plain)}
        out = []
        for message in fitted:
            k = where.get(id(message))
            if k is not None and plain[k] is message:
                out.append(items[k])
            else:
                out.append(types.Content.model_validate_json(json.dumps(message)))
        return out

    # -- sending ----------------------------------------------------------------------

    def call(self, send: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        prepared, response = self.state.send(kwargs, lambda kw: send(**kw), self.api)
        self.api.observe_response(prepared, response)
        return response

    async def call_async(self, send: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        async def sent(kw: dict[str, Any]) -> Any:
            return await send(**kw)

        prepared, response = await self.state.send_async(kwargs, sent, self.api)
        self.api.observe_response(prepared, response)
        return response

    def stream(self, send: Callable[..., Iterator[Any]], kwargs: dict[str, Any]) -> Iterator[Any]:
        def opened(kw: dict[str, Any]) -> tuple[Any, Iterator[Any]]:
            chunks = iter(send(**kw))  # the SDK sends the request for the first chunk
            return next(chunks, _END), chunks

        prepared, (first, rest) = self.state.send(kwargs, opened, self.api)
        return self._observed(prepared, first, rest)

    def _observed(self, prepared: _Prepared, first: Any, rest: Iterator[Any]) -> Iterator[Any]:
        pending: dict[str, Any] = {}
        try:
            if first is not _END:
                self.api.observe_event(prepared, first, pending)
                yield first
            for chunk in rest:
                self.api.observe_event(prepared, chunk, pending)
                yield chunk
        finally:
            self.api.observe_end(prepared, pending)

    async def stream_async(
        self, send: Callable[..., Any], kwargs: dict[str, Any]
    ) -> AsyncIterator[Any]:
        async def opened(kw: dict[str, Any]) -> tuple[Any, AsyncIterator[Any]]:
            chunks = (await send(**kw)).__aiter__()
            try:
                return await chunks.__anext__(), chunks
            except StopAsyncIteration:
                return _END, chunks

        prepared, (first, rest) = await self.state.send_async(kwargs, opened, self.api)
        return self._observed_async(prepared, first, rest)

    async def _observed_async(
        self, prepared: _Prepared, first: Any, rest: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        pending: dict[str, Any] = {}
        try:
            if first is not _END:
                self.api.observe_event(prepared, first, pending)
                yield first
            async for chunk in rest:
                self.api.observe_event(prepared, chunk, pending)
                yield chunk
        finally:
            self.api.observe_end(prepared, pending)


_END = object()  # a stream that ended before its first chunk


class _Models(_Passthrough):
    """``client.models``: the two generate calls fitted, the rest the SDK's own."""

    def __init__(self, fitting: _Fitting, original: Any) -> None:
        self._fitting = fitting
        self._original = original

    def generate_content(self, **kwargs: Any) -> Any:
        return self._fitting.call(self._original.generate_content, kwargs)

    def generate_content_stream(self, **kwargs: Any) -> Iterator[Any]:
        return self._fitting.stream(self._original.generate_content_stream, kwargs)


class _AsyncModels(_Passthrough):
    """``client.aio.models``: as :class:`_Models`, awaited."""

    def __init__(self, fitting: _Fitting, original: Any) -> None:
        self._fitting = fitting
        self._original = original

    async def generate_content(self, **kwargs: Any) -> Any:
        return await self._fitting.call_async(self._original.generate_content, kwargs)

    async def generate_content_stream(self, **kwargs: Any) -> AsyncIterator[Any]:
        return await self._fitting.stream_async(self._original.generate_content_stream, kwargs)


class _Aio(_Passthrough):
    def __init__(self, fitting: _Fitting, original: Any) -> None:
        self._original = original
        self.models = _AsyncModels(fitting, original.models)


class _Client(_Passthrough):
    """The wrapped ``google.genai.Client`` (see the module docstring)."""

    def __init__(self, client: Any, state: WrapState) -> None:
        self._original = client
        self.windowfit = state
        fitting = _Fitting(state)
        self.models = _Models(fitting, client.models)
        self.aio = _Aio(fitting, client.aio)

    def __enter__(self) -> _Client:
        self._original.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._original.__exit__(*exc)

    def __repr__(self) -> str:
        return f"<windowfit.wrap of {self._original!r}>"


def wrap_client(client: Any, state: WrapState) -> Any:
    """``client`` (a ``google.genai.Client``) with its generate calls fitted."""
    return _Client(client, state)
