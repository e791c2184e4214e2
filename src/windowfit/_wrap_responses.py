"""``client.responses`` of a wrapped ``openai`` client: the Responses API, fitted.

``responses.create`` (``stream=True`` included) and ``responses.stream`` are fitted,
retried and measured like Chat Completions (see :mod:`windowfit.wrap`): the ``input``
items are fitted with the ``openai-responses`` format (a string ``input`` is one user
message), ``instructions`` count as the system prompt and ``tools`` as tools, and the
output reserve is ``max_output_tokens``. Usage (``input_tokens``, of them
``input_tokens_details.cached_tokens``) comes from the response, from the
``response.completed`` event of a stream, or from the ``.stream()`` helper's final
response, and goes to the same stats, calibrator and ``on_usage`` as Chat's.

A request with ``previous_response_id`` continues a conversation the provider stores:
only the items it sends are fitted. Its leading output items answer the stored
response's calls, so they are sent as they are (and counted); the items after them are
fitted to what remains of the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .calibration import Correction
from .errors import ContextOverflowError
from .formats import openai_responses as fmt
from .profiles import default_estimator
from .sizing import Sizer
from .wrap import WrapState, _given, _Prepared, _to_plain

__all__ = ["prepare_for"]

_NAME = fmt.DIALECT.name


def prepare_for(state: WrapState) -> Callable[..., _Prepared]:
    """How ``client.responses`` requests are fitted on a wrapped client's ``state`` (see
    :meth:`windowfit.wrap.WrapState.api_for`; usage is read by the Responses dialect)."""
    return _ResponsesApi(state).prepare


def _max_output(kwargs: Mapping[str, Any]) -> int | None:
    value = kwargs.get("max_output_tokens")
    if _given(value) and isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _leading_outputs(items: list[Any]) -> int:
    """How many items at the start answer calls of a stored response."""
    n = 0
    while n < len(items) and isinstance(items[n], Mapping):
        if items[n].get("type") not in fmt.OUTPUT_TYPES:
            break
        n += 1
    return n


class _ResponsesApi:
    """Fitting for the Responses API, on a wrapped client's :class:`WrapState`."""

    def __init__(self, state: WrapState) -> None:
        self.state = state

    def prepare(
        self, kwargs: dict[str, Any], *, shrink: Correction | None = None, again: bool = False
    ) -> _Prepared:
        """As :meth:`WrapState.prepare`, for Responses ``input`` items."""
        state = self.state
        state.stats.calls += not again
        raw: Any = kwargs.get("input")
        model = kwargs.get("model")
        model_name = model if isinstance(model, str) else ""
        if not _given(raw) or not isinstance(raw, (str, list, tuple)):
            return _Prepared(kwargs, model_name, 0, 0)  # the SDK says what is wrong
        if isinstance(raw, str):
            items: list[Any] = [{"role": "user", "content": raw}]
        else:
            items = [state._plain(m) for m in raw]
        instructions = kwargs.get("instructions")
        system = instructions if isinstance(instructions, str) else None
        tools: Any = kwargs.get("tools")
        tools = _to_plain(list(tools)) if _given(tools) else None
        key, budget, limit = state.conversation_limits(
            _NAME, model_name, system, tools, items, _max_output(kwargs), shrink
        )
        estimator = default_estimator(state.estimator, model_name)
        lead: list[Any] = []
        lead_tokens = 0
        if _given(kwargs.get("previous_response_id")):
            n = _leading_outputs(items)
            lead, items = items[:n], items[n:]
            sizer = Sizer(estimator, _NAME)
            lead_tokens = sum(fmt.SPEC.scan(m, i, sizer).tokens for i, m in enumerate(lead))
            if not items:
                total = lead_tokens + sizer.system(system) + sizer.tools(tools)
                ceiling = limit if limit is not None else budget
                if total > ceiling:
                    state.stats.overflows += 1
                    raise ContextOverflowError(
                        "the tool outputs sent after previous_response_id do not fit the budget",
                        tokens=total,
                        limit=ceiling,
                    )
                return _Prepared(kwargs, model_name, budget, total, key)
        if lead_tokens >= budget:
            state.stats.overflows += 1
            raise ContextOverflowError(
                "the tool outputs sent after previous_response_id do not fit the budget",
                tokens=lead_tokens,
                limit=budget,
            )
        result = state.fit_recorded(
            items,
            again=again,
            budget=budget - lead_tokens,
            limit=limit - lead_tokens if limit is not None and limit > lead_tokens else None,
            system=system,
            tools=tools,
            format=_NAME,
            estimator=estimator,
        )
        report = result.report
        body = fmt.DIALECT.write_request(kwargs, [*lead, *result.messages], instructions)
        return _Prepared(body, model_name, budget, report.tokens_after + lead_tokens, key)
