"""The simulated provider's core, shared by its two doors (standard library only).

:class:`SimCore` counts a request with a real tokenizer, checks it against the window,
consults the prefix cache, lets the scripted model answer and reports usage; faults wait
in its queue. The ASGI server (:mod:`windowfit.server`, ``windowfit serve-sim``) and the
in-process model (:class:`windowfit.sim.SimulatedProvider`) are its doors: each reads
requests and writes answers in its API's shape, and asks the core for everything else.
"""

from ._cache import (
    DEFAULT_CACHE_BYTES,
    CacheUse,
    MemoEstimator,
    PrefixCache,
    Segment,
    canonical,
    memo_tokenizer,
    strip_cache_control,
)
from ._core import SimCore, WindowRule
from ._faults import ROUTES, Fault, FaultQueue, fault_from_json, parse_fault
from ._script import (
    DEFAULT_REPLY,
    Answer,
    ScriptedModel,
    ScriptedTool,
    ToolOffer,
    decide,
    parse_scripted_tool,
    stable_id,
)

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_REPLY",
    "ROUTES",
    "Answer",
    "CacheUse",
    "Fault",
    "FaultQueue",
    "MemoEstimator",
    "PrefixCache",
    "ScriptedModel",
    "ScriptedTool",
    "Segment",
    "SimCore",
    "ToolOffer",
    "WindowRule",
    "canonical",
    "decide",
    "fault_from_json",
    "memo_tokenizer",
    "parse_fault",
    "parse_scripted_tool",
    "stable_id",
    "strip_cache_control",
]
