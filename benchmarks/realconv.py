"""A long conversation built from the real agent runs in ../shared/data, for timing.

Real runs are a few hundred messages at most; a proxy or a long-lived agent sees
conversations of thousands. :func:`real_conversation` strings whole runs of one source
together (their first messages joined as user turns, tool-call ids made unique per run)
until it has ``n_messages`` messages, so that sizes, block mixes and scripts are those of
real traffic. ``None`` when the data is not there.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

SOURCES = {"anthropic": "claude_code", "openai": "mini_swe_agent_deepseek"}


def _rename_ids(messages: list[dict[str, Any]], tag: str) -> None:
    """Make every tool-call id unique to its run (in place, on a deep copy)."""
    for m in messages:
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                call["id"] = f"{tag}{call['id']}"
        if isinstance(m.get("tool_call_id"), str):
            m["tool_call_id"] = f"{tag}{m['tool_call_id']}"
        content = m.get("content")
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    block["id"] = f"{tag}{block['id']}"
                if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    block["tool_use_id"] = f"{tag}{block['tool_use_id']}"


def real_conversation(
    fmt: str, n_messages: int = 2000, data: Path = DATA
) -> tuple[list[dict[str, Any]], Any, Any] | None:
    """(messages, system, tools) of about ``n_messages`` messages in format ``fmt``."""
    root = data / "trajectories" / SOURCES[fmt]
    if not root.is_dir():
        return None
    from windowfit.logs import read_runs

    runs = [r for r in read_runs(root) if r.format == fmt and len(r.messages) > 4]
    if not runs:
        return None
    out: list[dict[str, Any]] = []
    system = runs[0].system
    tools = runs[0].tools
    k = 0
    while len(out) < n_messages:
        run = runs[k % len(runs)]
        body = copy.deepcopy(run.messages)
        _rename_ids(body, f"r{k}_")
        if out:  # later runs: drop their system messages, and keep roles alternating
            body = [m for m in body if m.get("role") not in ("system", "developer")]
            if out[-1]["role"] != "assistant" and body and body[0]["role"] == "user":
                out.append({"role": "assistant", "content": "Done. What next?"})
        out.extend(body)
        k += 1
    out = out[:n_messages]
    while out and out[-1]["role"] == "assistant":
        out.pop()
    return out, system, tools
