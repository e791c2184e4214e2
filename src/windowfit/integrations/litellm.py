"""LiteLLM proxy: every chat request fitted before the proxy sends it on.

Put a file beside the proxy's ``config.yaml``, say ``windowfit_hook.py``::

    from windowfit.integrations.litellm import WindowfitHook

    hook = WindowfitHook(budget=100_000)

and name it in the config::

    litellm_settings:
      callbacks: windowfit_hook.hook

:class:`WindowfitHook` is a LiteLLM ``CustomLogger``. Its ``async_pre_call_hook`` fits
the ``messages`` of each chat completion (OpenAI Chat format, the proxy's own) to the
budget and leaves the rest of the request as it was; ``async_post_call_success_hook``
learns from the answer's usage. ``models=`` limits it to some of the proxy's model
names. A request that cannot be made to fit gets the provider's answer to a prompt that
is too long (400, ``context_length_exceeded``) without being sent. The client keeps its
history; the proxy holds none. Install with ``pip install 'windowfit[litellm]'``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from ..errors import ContextOverflowError, MissingExtraError
from ..fitter import Fitter
from ..formats import openai_chat
from ..settings import FitSettings
from ..tokens import Estimator
from ._shaper import Fitted, Shaper

try:
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("litellm", "litellm", "windowfit.integrations.litellm") from exc

__all__ = ["WindowfitHook"]

_PENDING_LIMIT = 1_024  # requests awaiting their answer's usage, at most
_CHAT_CALLS = {"completion", "acompletion", "text_completion"}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _overflow_detail(exc: ContextOverflowError) -> dict[str, Any]:
    """The OpenAI Chat error for a prompt that is too long, as the proxy's clients expect
    it (``context_length_exceeded``; classified as an overflow by
    :func:`windowfit.classify_error`), with windowfit's numbers. (The OpenAI Chat dialect's
    own overflow body should replace this once it is in ``formats/openai_chat.py``.)"""
    return {
        "message": (
            f"{exc} (windowfit: the request needs about {exc.tokens} tokens; the budget "
            f"is {exc.limit}; {exc.detail})"
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }


class WindowfitHook(CustomLogger):
    """Fits the chat requests a LiteLLM proxy forwards (module docstring).

    ``budget``: tokens a request may take (default: the window windowfit knows for the
    request's model, minus its ``max_tokens``); ``model``: the model name to look the
    window up by (default: the request's); ``settings``: :class:`~windowfit.FitSettings`
    or a preset name; ``models``: the proxy model names to fit (default: all).
    """

    def __init__(
        self,
        budget: int | None = None,
        model: str | None = None,
        settings: FitSettings | str | None = None,
        *,
        models: Iterable[str] | None = None,
        estimator: Estimator | None = None,
        fitter: Fitter | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        self.shaper = Shaper(budget, model, settings, estimator=estimator, fitter=fitter, **options)
        self.models = frozenset(models) if models is not None else None
        self._pending: OrderedDict[str, Fitted] = OrderedDict()

    def fit_request(self, data: dict[str, Any]) -> dict[str, Any]:
        """The request body with its messages fitted (a new dict; ``data`` is unchanged)."""
        messages = data.get("messages")
        model = data.get("model")
        if not isinstance(messages, list) or not messages:
            return data
        if self.models is not None and model not in self.models:
            return data
        max_tokens = _int(data.get("max_completion_tokens")) or _int(data.get("max_tokens"))
        tools = data.get("tools")
        fitted = self.shaper.fit(
            messages,
            model=model if isinstance(model, str) else None,
            tools=tools if isinstance(tools, list) else None,
            max_tokens=max_tokens,
        )
        call_id = data.get("litellm_call_id")
        if isinstance(call_id, str):
            self._pending[call_id] = fitted
            while len(self._pending) > _PENDING_LIMIT:
                self._pending.popitem(last=False)
        return {**data, "messages": fitted.messages}

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        """LiteLLM's hook: fit a chat request before it is sent on."""
        if call_type not in _CHAT_CALLS:
            return data
        try:
            return self.fit_request(data)
        except ContextOverflowError as exc:
            from fastapi import HTTPException

            raise HTTPException(status_code=400, detail=_overflow_detail(exc)) from exc

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """LiteLLM's hook: learn from the answer's usage."""
        call_id = data.get("litellm_call_id")
        fitted = self._pending.pop(call_id, None) if isinstance(call_id, str) else None
        usage = getattr(response, "usage", None)
        if fitted is not None and usage is not None:
            dump = getattr(usage, "model_dump", None)
            plain = dump(mode="json") if callable(dump) else usage
            self.shaper.observe(fitted, openai_chat.DIALECT.usage({"usage": plain}))
        return response
