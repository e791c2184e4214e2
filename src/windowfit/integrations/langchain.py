"""LangChain v1 agents: every model call fitted, the agent's state left whole.

::

    from langchain.agents import create_agent
    from windowfit.integrations.langchain import WindowfitMiddleware

    agent = create_agent(model, tools, middleware=[WindowfitMiddleware(budget=100_000)])

:class:`WindowfitMiddleware` fits the messages of each model call (``wrap_model_call`` /
``awrap_model_call``) and hands the fitted request on; the agent's state keeps the full
history, so a result cleared for one call is still there for the next. It adds the
safety-net paragraph (:data:`windowfit.SAFETY_NET`) to the request's system message
(``safety_net=False`` to leave it out), and learns from each answer's
``usage_metadata`` how far its estimates are from the provider's counts.

:class:`WindowfitEdit` is the same fitting as a ``ContextEdit`` for LangChain's
``ContextEditingMiddleware``, and :func:`token_counter` windowfit's script-aware count
for anything that takes a ``token_counter`` (``trim_messages``, summarisation).
Install with ``pip install 'windowfit[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..errors import MissingExtraError
from ..fitter import Fitter
from ..formats import get_format
from ..instructions import SAFETY_NET, add_safety_net
from ..settings import FitSettings
from ..sizing import default_sizer
from ..tokens import Estimator
from ._langchain_messages import restore, to_chat, to_chat_all
from ._shaper import Fitted, Shaper

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("langchain", "langchain", "windowfit.integrations.langchain") from exc

__all__ = ["SAFETY_NET", "WindowfitEdit", "WindowfitMiddleware", "token_counter"]


def token_counter(messages: Sequence[BaseMessage]) -> int:
    """windowfit's estimate of ``messages`` in tokens (its script-aware seed rule, images
    by their size), for any LangChain ``token_counter=``. Works on any slice of a
    conversation: no pairing is checked."""
    spec = get_format("openai")
    sizer = default_sizer(None, "openai")
    return sizer.messages(to_chat_all(list(messages)), spec)


def _tool_schemas(tools: Sequence[Any]) -> list[dict[str, Any]]:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    out = []
    for tool in tools:
        try:
            out.append(convert_to_openai_tool(tool))
        except Exception:  # a provider's built-in tool: counted as the JSON it is
            out.append(tool if isinstance(tool, dict) else {"name": str(tool)})
    return out


def _model_name(model: Any) -> str | None:
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _max_tokens(request: ModelRequest[Any]) -> int | None:
    for source in (
        request.model_settings,
        vars(request.model) if hasattr(request.model, "__dict__") else {},
    ):
        for key in ("max_completion_tokens", "max_tokens"):
            value = source.get(key) if isinstance(source, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _restored(fitted: Fitted, originals: Sequence[Any], skip: int) -> list[Any]:
    """The fitted request as LangChain messages; the first ``skip`` fitted dicts stood
    for messages sent apart (the system message) and are left out."""
    out = []
    for raw, src, changed in zip(fitted.messages, fitted.sources, fitted.changed, strict=True):
        if src is None:
            out.append(restore(raw, None, True))
        elif src >= skip:
            out.append(restore(raw, originals[src - skip], changed))
    return out


class WindowfitMiddleware(AgentMiddleware[Any, Any, Any]):
    """Fits every model call of a LangChain agent (module docstring).

    ``budget``: tokens a call may take (default: the model's window minus its
    ``max_tokens``, when windowfit knows the model). ``model``: the model name to look the
    window up by (default: the chat model's ``model_name``). ``settings``:
    :class:`~windowfit.FitSettings` or a preset name. Keyword-only: ``safety_net``,
    ``estimator``, ``fitter``, ``calibrator``, ``windows``, ``on_fit`` and ``on_usage``
    as for :func:`windowfit.wrap`. ``shaper.last_report`` is the last call's report.
    """

    def __init__(
        self,
        budget: int | None = None,
        model: str | None = None,
        settings: FitSettings | str | None = None,
        *,
        safety_net: bool = True,
        estimator: Estimator | None = None,
        fitter: Fitter | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        self.shaper = Shaper(budget, model, settings, estimator=estimator, fitter=fitter, **options)
        self.safety_net = safety_net

    def _system(self, system: SystemMessage | None) -> SystemMessage | None:
        """The request's system message with the safety net added (a new message)."""
        if not self.safety_net:
            return system
        if system is None:
            return SystemMessage(content=SAFETY_NET)
        text = system.content
        if isinstance(text, str):
            return system.model_copy(update={"content": add_safety_net(text or None)})
        if any(isinstance(b, dict) and b.get("text") == SAFETY_NET for b in text):
            return system
        return system.model_copy(update={"content": [*text, {"type": "text", "text": SAFETY_NET}]})

    def _prepare(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], Fitted | None]:
        system = self._system(request.system_message)
        if not request.messages:
            return request.override(system_message=system), None
        head = [to_chat(system, -1)] if system is not None else []
        chat = [*head, *to_chat_all(request.messages)]
        fitted = self.shaper.fit(
            chat,
            model=_model_name(request.model),
            tools=_tool_schemas(request.tools),
            max_tokens=_max_tokens(request),
        )
        messages = _restored(fitted, request.messages, len(head))
        return request.override(messages=messages, system_message=system), fitted

    def _learn(self, fitted: Fitted | None, response: Any) -> None:
        if fitted is None:
            return
        results = response.result if isinstance(response, ModelResponse) else [response]
        for message in reversed(results):
            usage = (
                getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
            )
            if usage:
                self.shaper.observe(
                    fitted, usage.get("input_tokens"), usage.get("output_tokens", 0)
                )
                return

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Fit the request, call the model, learn from its usage."""
        shaped, fitted = self._prepare(request)
        response = handler(shaped)
        self._learn(fitted, response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """Fit the request, call the model, learn from its usage."""
        shaped, fitted = self._prepare(request)
        response = await handler(shaped)
        self._learn(fitted, response)
        return response


class WindowfitEdit:
    """windowfit's fitting as a ``ContextEdit`` for ``ContextEditingMiddleware``::

        ContextEditingMiddleware(edits=[WindowfitEdit(budget=100_000)])

    ``apply`` fits the list it is given in place (the middleware hands it a copy of the
    request's messages, so the agent's state is untouched). windowfit counts with its own
    estimator, not the ``count_tokens`` the middleware passes; system prompt and tools
    are not visible to an edit, so leave room for them in ``budget``.
    """

    def __init__(
        self,
        budget: int,
        settings: FitSettings | str | None = None,
        *,
        estimator: Estimator | None = None,
        fitter: Fitter | None = None,
    ) -> None:
        self.shaper = Shaper(budget, None, settings, estimator=estimator, fitter=fitter)

    def apply(self, messages: list[Any], *, count_tokens: Callable[..., int]) -> None:
        """Fit ``messages`` in place (LangChain's ``ContextEdit`` protocol)."""
        if not messages:
            return
        fitted = self.shaper.fit(to_chat_all(messages))
        messages[:] = _restored(fitted, messages, 0)
