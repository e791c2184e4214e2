"""OpenAI Agents SDK: every model call fitted, the run's items left whole.

::

    from agents import Agent, RunConfig, Runner
    from windowfit.integrations.openai_agents import fit_model_input

    config = RunConfig(call_model_input_filter=fit_model_input(budget=100_000))
    result = Runner.run_sync(agent, task, run_config=config)

:func:`fit_model_input` returns a ``call_model_input_filter``: the SDK hands it the
Responses input items and instructions of each model call and sends what it returns;
the run's own items (``result.to_input_list()``) keep everything. Items are fitted with
windowfit's Responses format (``function_call`` / ``function_call_output`` pairs intact,
the first item kept), the instructions and the agent's tools counted against the budget.
``safety_net=True`` (default) appends :data:`windowfit.SAFETY_NET` to the instructions
sent. The SDK does not show the filter the answer's usage, so this adapter does not
learn from it. Install with ``pip install 'windowfit[openai-agents]'``.
"""

from __future__ import annotations

from typing import Any

from ..errors import MissingExtraError
from ..fitter import Fitter
from ..instructions import SAFETY_NET, add_safety_net
from ..settings import FitSettings
from ..tokens import Estimator
from ._shaper import Shaper

try:
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(
        "openai-agents", "openai-agents", "windowfit.integrations.openai_agents"
    ) from exc

__all__ = ["SAFETY_NET", "ModelInputFitter", "fit_model_input"]


def _tool_schemas(agent: Any) -> list[dict[str, Any]]:
    out = []
    for tool in getattr(agent, "tools", None) or ():
        schema = getattr(tool, "params_json_schema", None)
        out.append(
            {
                "type": "function",
                "name": str(getattr(tool, "name", "")),
                "description": str(getattr(tool, "description", "") or ""),
                "parameters": schema if isinstance(schema, dict) else {},
            }
        )
    return out


def _model_name(agent: Any) -> str | None:
    model = getattr(agent, "model", None)
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else None


def _max_tokens(agent: Any) -> int | None:
    value = getattr(getattr(agent, "model_settings", None), "max_tokens", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ModelInputFitter:
    """The ``call_model_input_filter`` :func:`fit_model_input` returns (module docstring).
    ``shaper.last_report`` is the last call's :class:`~windowfit.FitReport`."""

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

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items = list(data.model_data.input)
        instructions = data.model_data.instructions
        if self.safety_net:
            net = add_safety_net(instructions or None)
            instructions = net if isinstance(net, str) else instructions
        if not items:
            return ModelInputData(input=items, instructions=instructions)
        fitted = self.shaper.fit_format(
            items,
            format="openai-responses",
            system=instructions,
            model=_model_name(data.agent),
            tools=_tool_schemas(data.agent),
            max_tokens=_max_tokens(data.agent),
        )
        sent: list[Any] = list(fitted.messages)  # Responses input items, as the SDK's
        return ModelInputData(input=sent, instructions=instructions)


def fit_model_input(
    budget: int | None = None,
    model: str | None = None,
    settings: FitSettings | str | None = None,
    **options: Any,
) -> ModelInputFitter:
    """A ``call_model_input_filter`` for ``RunConfig`` that fits each model call
    (module docstring). ``budget``: tokens a call may take (default: the model's known
    window minus the agent's ``max_tokens``); ``model``: the name to look the window up
    by; ``settings``: :class:`~windowfit.FitSettings` or a preset name. Other keywords
    (``safety_net``, ``estimator``, ``fitter``, ``windows``, ``on_fit``) as for
    :func:`windowfit.wrap`."""
    return ModelInputFitter(budget, model, settings, **options)
