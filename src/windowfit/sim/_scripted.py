"""Scripted models that behave like a diligent agent.

A policy decides from the request alone, as a real model does: what it was asked (the
instruction, i.e. the latest user message with text), what it already did (its own tool
calls, which fitting never removes when it clears results) and what it noted while doing
it (the text of its own messages). It has no memory of its own between requests.

* :class:`Reader` reads the files its instruction lists, one per step, in order; after
  each read it notes what the file was (its heading and length) in its next message; when
  every file has been read it answers with its notes. With ``caution`` set it behaves as
  the write-up's sub-agent did when nobody had told it that old results would be cleared
  for it: when its system prompt lacks :data:`windowfit.instructions.SAFETY_NET`, it stops
  "to save space" once the next file would take its context past ``caution`` of its
  budget. With the safety net in its prompt it reads on.
* :class:`Coordinator` splits the files its instruction lists across N sub-agents, starts
  them all in one message (so they run at the same time) and gathers their answers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..instructions import SAFETY_NET
from ._provider import Policy, PolicyView

__all__ = [
    "Coordinator",
    "Reader",
    "Team",
    "coordinator_instruction",
    "files_in",
    "reader_instruction",
]

_FILE_LINE = re.compile(r"^- (\S.*)$", re.MULTILINE)
_AMONG = re.compile(r"among (\d+) sub-agents")


def reader_instruction(files: Sequence[str]) -> str:
    """An instruction a :class:`Reader` follows: read ``files`` in full, in order."""
    listing = "\n".join(f"- {f}" for f in files)
    return (
        f"Read each of these {len(files)} files in full, one at a time, in this order, and "
        "report what each one contains. Do not skip any.\n"
        f"Files:\n{listing}"
    )


def coordinator_instruction(files: Sequence[str], subagents: int) -> str:
    """An instruction a :class:`Coordinator` follows."""
    listing = "\n".join(f"- {f}" for f in files)
    return (
        f"Split the reading of the {len(files)} files below among {subagents} sub-agents, "
        "started at the same time, so that every file is read in full; then gather what "
        f"they report.\nFiles:\n{listing}"
    )


def files_in(instruction: str) -> list[str]:
    """The file paths an instruction lists (its ``- path`` lines)."""
    return [m.group(1).strip() for m in _FILE_LINE.finditer(instruction)]


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def _current_turn(messages: Sequence[Mapping[str, Any]]) -> tuple[int, str]:
    """The index and text of the latest user message that carries text (the task)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") != "user":
            continue
        texts = [str(b.get("text", "")) for b in _blocks(message) if b.get("type") == "text"]
        if texts and not any(b.get("type") == "tool_result" for b in _blocks(message)):
            return i, "\n".join(texts)
    return 0, ""


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""


def _call_id(view: PolicyView, n: int) -> str:
    """A deterministic id for a tool call, unique within a conversation and always of the
    same length (so that runs repeat to the token)."""
    agent = view.request.agent
    seed = f"{agent.id}|{len(view.request.messages)}|{view.calls_before}|{n}"
    return "toolu_" + hashlib.sha256(seed.encode()).hexdigest()[:24]


def _results(messages: Sequence[Mapping[str, Any]], start: int) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for message in messages[start:]:
        for block in _blocks(message):
            if block.get("type") == "tool_result":
                out[str(block.get("tool_use_id"))] = block
    return out


class Reader:
    """Reads the listed files one per step, then answers (see the module docstring)."""

    def __init__(self, *, caution: float | None = None, budget: int | None = None) -> None:
        if (caution is None) != (budget is None):
            raise ValueError("caution and budget go together")
        self.caution = caution
        self.budget = budget

    def respond(self, view: PolicyView) -> list[dict[str, Any]]:
        messages = view.request.messages
        start, instruction = _current_turn(messages)
        files = files_in(instruction)
        results = _results(messages, start)
        notes: list[str] = []
        last_path: str | None = None
        last_id: str | None = None
        read = 0
        for message in messages[start + 1 :]:
            if message.get("role") != "assistant":
                continue
            for block in _blocks(message):
                if block.get("type") == "text":
                    notes.extend(
                        line
                        for line in str(block.get("text", "")).splitlines()
                        if line[:6] == "Noted "
                    )
                elif block.get("type") == "tool_use" and block.get("name") == "read_file":
                    raw = block.get("input")
                    path = raw.get("path") if isinstance(raw, Mapping) else None
                    if isinstance(path, str):
                        last_path, last_id = path, str(block.get("id"))
                        read += 1
        text: list[str] = []
        if last_path is not None and last_id is not None:
            note = self._note(last_path, results.get(last_id))
            notes.append(note)
            text.append(note)
        done = files.index(last_path) + 1 if last_path in files else 0
        if done >= len(files):
            return [{"type": "text", "text": self._answer(files, done, notes, stopped=False)}]
        if self._worried(view, read):
            return [{"type": "text", "text": self._answer(files, done, notes, stopped=True)}]
        path = files[done]
        text.append(f"Reading {path} ({done + 1} of {len(files)}).")
        return [
            {"type": "text", "text": "\n".join(text)},
            {
                "type": "tool_use",
                "id": _call_id(view, 0),
                "name": "read_file",
                "input": {"path": path},
            },
        ]

    def _worried(self, view: PolicyView, read: int) -> bool:
        """Without the safety net, a cautious reader plans for a context that is never
        cleared: it stops when the next file would take it past ``caution`` of its budget."""
        if self.caution is None or self.budget is None or read == 0:
            return False
        if SAFETY_NET in view.request.system:
            return False
        per_file = view.tokens / read
        return view.tokens + per_file > self.caution * self.budget

    @staticmethod
    def _note(path: str, result: Mapping[str, Any] | None) -> str:
        if result is None:
            return f"Noted {path}: read; its result is no longer in view."
        body = _result_text(result)
        if result.get("is_error"):
            return f"Noted {path}: could not be read: {body.splitlines()[0] if body else ''}"
        if body.startswith("[This tool result was cleared"):
            return f"Noted {path}: read; its result has since been cleared."
        heading = next((line.strip() for line in body.splitlines() if line.strip()), "")
        return f"Noted {path}: {heading[:60]!r}, {len(body.split()):,} words."

    @staticmethod
    def _answer(files: Sequence[str], done: int, notes: Sequence[str], *, stopped: bool) -> str:
        """The files it went through (by its position in the list, which its latest call
        shows even when older messages were left out of the request) and its notes."""
        head = f"I went through {done} of the {len(files)} files."
        if stopped:
            head += (
                " I stopped here to save space: my context is filling up, and reading more "
                "would leave no room to work."
            )
        return "\n".join([head, *notes])


class Coordinator:
    """Splits the listed files among N sub-agents and gathers their answers."""

    def respond(self, view: PolicyView) -> list[dict[str, Any]]:
        messages = view.request.messages
        start, instruction = _current_turn(messages)
        files = files_in(instruction)
        match = _AMONG.search(instruction)
        count = max(1, min(int(match.group(1)) if match else 1, max(1, len(files))))
        spawned: list[tuple[str, str]] = []
        for message in messages[start + 1 :]:
            if message.get("role") != "assistant":
                continue
            for block in _blocks(message):
                if block.get("type") == "tool_use" and block.get("name") == "spawn_subagent":
                    raw = block.get("input")
                    name = raw.get("name") if isinstance(raw, Mapping) else None
                    spawned.append((str(block.get("id")), str(name)))
        if not spawned:
            shares = [files[k::count] for k in range(count)]
            blocks: list[dict[str, Any]] = [
                {"type": "text", "text": f"Starting {count} sub-agents to read {len(files)} files."}
            ]
            for k, share in enumerate(shares):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": _call_id(view, k),
                        "name": "spawn_subagent",
                        "input": {
                            "instruction": reader_instruction(share),
                            "name": f"reader {k + 1}",
                        },
                    }
                )
            return blocks
        results = _results(messages, start)
        lines = []
        finished = 0
        for call_id, name in spawned:
            result = results.get(call_id)
            body = _result_text(result) if result is not None else ""
            first = body.splitlines()[0] if body else "(no answer)"
            if result is not None and not result.get("is_error"):
                finished += 1
                lines.append(f"{name}: {first}")
            else:
                lines.append(f"{name} did not finish: {first}")
        summary = f"{finished} of {len(spawned)} sub-agents finished."
        return [{"type": "text", "text": "\n".join([summary, *lines])}]


class Team:
    """Routes each request by the asking agent's depth: the main agent (depth 0) is the
    ``lead``, its sub-agents the ``member``."""

    def __init__(self, lead: Policy, member: Policy) -> None:
        self.lead = lead
        self.member = member

    def respond(self, view: PolicyView) -> list[dict[str, Any]]:
        policy = self.lead if view.request.agent.depth == 0 else self.member
        return policy.respond(view)
