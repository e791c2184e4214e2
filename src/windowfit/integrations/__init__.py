"""Adapters for the agent frameworks people already build in, one module per framework.

Each module imports its framework only when used, and is installed with the framework's
extra (``pip install 'windowfit[langchain]'``, ``[pydantic-ai]``, ``[litellm]``...). They
share one contract (:mod:`windowfit.integrations._shaper`): every model call is fitted
to the budget with the tool pairs intact and the first message kept, the framework's own
history is never changed (only what is sent), usage the framework reports teaches the
budget, and the safety-net text (:data:`windowfit.SAFETY_NET`) is there to add to the
agent's instructions.
"""

from __future__ import annotations

__all__: list[str] = []
