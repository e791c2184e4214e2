"""pydantic-ai agents: every model request fitted, the run's history left whole.

::

    from pydantic_ai import Agent
    from windowfit.integrations.pydantic_ai import fit_history

    agent = Agent(model, tools=[...], capabilities=[fit_history(budget=100_000)])

:func:`fit_history` returns a :class:`WindowfitHistory` capability. Its
``before_model_request`` fits the messages of that one request and leaves the run's
history (``result.all_messages()``) as it was: a tool result cleared for one request is
still whole in the history, and the next request is fitted from the whole history
again, cache-stably. It also adds the safety-net paragraph to the agent's instructions
(``safety_net=False`` to leave it out) and learns from each response's usage.

pydantic-ai's own history-processing hook (``history_processors=[...]``, the
``ProcessHistory`` capability) replaces the run's stored history with what the processor
returns, which would make windowfit's clearing permanent. For that hook, if it is what
you want, use ``fit_history(...).process`` (sync) or ``.aprocess`` (async): they fit the
history given and return the fitted one. Install with ``pip install
'windowfit[pydantic-ai]'``.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..errors import MissingExtraError
from ..fitter import Fitter
from ..instructions import SAFETY_NET
from ..settings import FitSettings
from ..tokens import Estimator
from ._pydantic_ai_messages import Chat, restore, to_chat
from ._shaper import Fitted, Shaper

try:
    from pydantic_ai import messages as pm
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(
        "pydantic-ai-slim", "pydantic-ai", "windowfit.integrations.pydantic_ai"
    ) from exc

__all__ = ["SAFETY_NET", "WindowfitHistory", "fit_history"]

_PENDING_LIMIT = 256  # requests awaiting their response's usage, at most


@dataclasses.dataclass(init=False)
class WindowfitHistory(AbstractCapability[Any]):
    """The capability :func:`fit_history` returns (module docstring)."""

    shaper: Shaper
    safety_net: bool

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
        self.shaper = Shaper(budget, model, settings, estimator=estimator, fitter=fitter, **options)
        self.safety_net = safety_net
        self._pending: OrderedDict[object, Fitted] = OrderedDict()

    def get_instructions(self) -> Any:
        return SAFETY_NET if self.safety_net else None

    # -- the request-only form -----------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Fit this request's messages; the run's history is not touched."""
        params = request_context.model_request_parameters
        instructions = "\n\n".join(
            part.content for part in params.instruction_parts or () if part.content
        )
        tools = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": tool.parameters_json_schema,
                },
            }
            for tool in [*params.function_tools, *params.output_tools]
        ]
        settings = request_context.model_settings or {}
        max_tokens = settings.get("max_tokens")
        messages, fitted = self._fit(
            request_context.messages,
            instructions,
            model=request_context.model.model_name,
            tools=tools,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        )
        self._pending[_run_key(ctx)] = fitted
        while len(self._pending) > _PENDING_LIMIT:
            self._pending.popitem(last=False)
        return dataclasses.replace(request_context, messages=messages)

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: pm.ModelResponse,
    ) -> pm.ModelResponse:
        """Learn from the response's usage how far the estimate was."""
        fitted = self._pending.pop(_run_key(ctx), None)
        if fitted is not None:
            usage = response.usage
            self.shaper.observe(fitted, usage.input_tokens, usage.output_tokens)
        return response

    # -- the history-processor form ----------------------------------------------------

    def process(self, messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        """Fit a history and return the fitted one (for ``history_processors``; note that
        pydantic-ai then keeps the fitted history as the run's)."""
        return self._fit(messages, "")[0]

    async def aprocess(self, messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        """:meth:`process`, for hooks that await their processor."""
        return self.process(messages)

    # -- shared --------------------------------------------------------------------------

    def _fit(
        self,
        messages: Sequence[pm.ModelMessage],
        instructions: str,
        *,
        model: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> tuple[list[pm.ModelMessage], Fitted]:
        chat = to_chat(messages)
        if instructions:
            chat = Chat(
                [{"role": "system", "content": instructions}, *chat.messages],
                [(-1, -1), *chat.origins],
            )
        fitted = self.shaper.fit(chat.messages, model=model, tools=tools, max_tokens=max_tokens)
        out = restore(messages, chat, fitted.messages, fitted.sources, fitted.changed)
        return out, fitted


def _run_key(ctx: RunContext[Any]) -> object:
    """Which run a request belongs to: a run's requests are made one after another, and
    its hooks may see different context objects, but one run id."""
    return ctx.run_id if ctx.run_id is not None else id(ctx)


def fit_history(
    budget: int | None = None,
    model: str | None = None,
    settings: FitSettings | str | None = None,
    **options: Any,
) -> WindowfitHistory:
    """A capability that fits every model request of a pydantic-ai agent (module
    docstring). ``budget``: tokens a request may take (default: the model's known window
    minus its ``max_tokens``); ``model``: the name to look the window up by (default: the
    agent's model name); ``settings``: :class:`~windowfit.FitSettings` or a preset name.
    Other keywords (``safety_net``, ``estimator``, ``fitter``, ``calibrator``,
    ``windows``, ``on_fit``, ``on_usage``) as for :func:`windowfit.wrap`."""
    return WindowfitHistory(budget, model, settings, **options)
