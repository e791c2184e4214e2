"""Replay real agent runs: what each policy would have sent, and what it would cost.

:func:`replay` takes runs read from agent logs (:func:`read_logs`) and policies
(:func:`parse_policies`: windowfit's presets, sending everything, and peers written from
their documentation) and measures every model call under each policy: request sizes
against a budget and a hard limit counted with a real tokenizer, prompt-cache cost and
breaks, how much of the tool results stay intact, and invariant violations. The
``windowfit replay`` command and ``benchmarks/replay.py`` are built on it.
"""

from __future__ import annotations

from .conversation import Conversation, Observation
from .engine import (
    VIOLATION_KINDS,
    LogProblem,
    PolicyStats,
    ReplayConfig,
    ReplayReport,
    RunReport,
    check_request,
    count_requests,
    intact_tool_tokens,
    log_files,
    measure_request,
    read_logs,
    replay,
    replay_run,
    tokenizer_for,
)
from .policies import (
    Policy,
    RawPolicy,
    Refused,
    WindowfitPolicy,
    available_policies,
    make_policy,
    parse_policies,
)

__all__ = [
    "VIOLATION_KINDS",
    "Conversation",
    "LogProblem",
    "Observation",
    "Policy",
    "PolicyStats",
    "RawPolicy",
    "Refused",
    "ReplayConfig",
    "ReplayReport",
    "RunReport",
    "WindowfitPolicy",
    "available_policies",
    "check_request",
    "count_requests",
    "intact_tool_tokens",
    "log_files",
    "make_policy",
    "measure_request",
    "parse_policies",
    "read_logs",
    "replay",
    "replay_run",
    "tokenizer_for",
]
