"""Google ADK agents: every model call's ``llm_request.contents`` fitted, the session's
events left whole.

::

    from google.adk.agents import LlmAgent
    from windowfit.integrations.google_adk import before_model_callback

    fitter = before_model_callback(budget=100_000)
    agent = LlmAgent(..., instruction=f"... {windowfit.SAFETY_NET}",
                     before_model_callback=fitter, after_model_callback=fitter.after)

or, for every agent of a runner, the plugin form:
``Runner(..., plugins=[WindowfitPlugin(budget=100_000)])``.

The callback replaces ``llm_request.contents`` (the request ADK built for this one call
from the session) with a fitted list; the session's events keep everything, and no
``Content`` object is changed (a cleared turn is a new one). Contents are fitted with
windowfit's Gemini format (function calls and responses paired turn by turn, the first
turn kept); the system instruction and tools are counted against the budget. The
``after`` callback learns from ``usage_metadata.prompt_token_count``. Install with
``pip install 'windowfit[google-adk]'``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..errors import MissingExtraError
from ..fitter import Fitter
from ..formats import gemini
from ..instructions import SAFETY_NET
from ..settings import FitSettings
from ..tokens import Estimator
from ._shaper import Fitted, Shaper

try:
    from google.adk.plugins.base_plugin import BasePlugin
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(
        "google-adk", "google-adk", "windowfit.integrations.google_adk"
    ) from exc

__all__ = ["SAFETY_NET", "ContentsFitter", "WindowfitPlugin", "before_model_callback"]

_PENDING_LIMIT = 256


def _system_text(config: Any) -> str | None:
    instruction = getattr(config, "system_instruction", None)
    if instruction is None or isinstance(instruction, str):
        return instruction
    parts = getattr(instruction, "parts", None) or ()
    return "\n".join(p.text for p in parts if getattr(p, "text", None)) or None


def _max_tokens(config: Any) -> int | None:
    value = getattr(config, "max_output_tokens", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ContentsFitter:
    """The callbacks :func:`before_model_callback` returns (module docstring): call it
    as ``before_model_callback``; :meth:`after` is the ``after_model_callback``."""

    def __init__(
        self,
        budget: int | None = None,
        model: str | None = None,
        settings: FitSettings | str | None = None,
        *,
        estimator: Estimator | None = None,
        fitter: Fitter | None = None,
        **options: Any,
    ) -> None:
        self.shaper = Shaper(budget, model, settings, estimator=estimator, fitter=fitter, **options)
        self._pending: OrderedDict[object, Fitted] = OrderedDict()

    def fit(self, llm_request: Any, key: object = None) -> None:
        """Replace ``llm_request.contents`` by the fitted list (the request's own list is
        replaced, never edited; the Content objects are never changed)."""
        contents = list(llm_request.contents or ())
        if not contents:
            return
        raw = [c.model_dump(mode="json", exclude_none=True) for c in contents]
        config = llm_request.config
        tools = [t.model_dump(mode="json", exclude_none=True) for t in (config.tools or ())]
        fitted = self.shaper.fit_format(
            raw,
            format="gemini",
            system=_system_text(config),
            model=llm_request.model,
            tools=tools,
            max_tokens=_max_tokens(config),
        )
        out = []
        for item, src, changed in zip(fitted.messages, fitted.sources, fitted.changed, strict=True):
            if src is not None and not changed:
                out.append(contents[src])
            else:
                out.append(types.Content.model_validate(item))
        llm_request.contents = out
        if key is not None:
            self._pending[key] = fitted
            while len(self._pending) > _PENDING_LIMIT:
                self._pending.popitem(last=False)

    def learn(self, llm_response: Any, key: object) -> None:
        """Learn from a response's usage how far the estimate was."""
        fitted = self._pending.pop(key, None)
        usage = getattr(llm_response, "usage_metadata", None)
        if fitted is not None and usage is not None:
            dump = getattr(usage, "model_dump", None)
            metadata = dump(mode="json", by_alias=True) if callable(dump) else usage
            self.shaper.observe(fitted, gemini.DIALECT.usage({"usageMetadata": metadata}))

    def __call__(self, callback_context: Any, llm_request: Any) -> None:
        self.fit(llm_request, getattr(callback_context, "invocation_id", None))
        return None

    def after(self, callback_context: Any, llm_response: Any) -> None:
        self.learn(llm_response, getattr(callback_context, "invocation_id", None))
        return None


class WindowfitPlugin(BasePlugin):
    """The plugin form: fits the model calls of every agent a ``Runner`` runs."""

    def __init__(
        self,
        budget: int | None = None,
        model: str | None = None,
        settings: FitSettings | str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(name="windowfit")
        self.fitter = ContentsFitter(budget, model, settings, **options)

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        self.fitter(callback_context, llm_request)
        return None

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> None:
        self.fitter.after(callback_context, llm_response)
        return None


def before_model_callback(
    budget: int | None = None,
    model: str | None = None,
    settings: FitSettings | str | None = None,
    **options: Any,
) -> ContentsFitter:
    """An ADK ``before_model_callback`` that fits ``llm_request.contents`` (module
    docstring); its ``.after`` is the matching ``after_model_callback``."""
    return ContentsFitter(budget, model, settings, **options)
