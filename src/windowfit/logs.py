"""Readers for real agent logs: every model call of a run, ready to replay.

:func:`read_runs` turns a log file (or a directory of them) into :class:`Run` objects. A
run holds provider-format ``messages`` that can be sent as they are, plus one
:class:`RequestPoint` per model call: the call at ``index`` was sent ``messages[:index]``
and produced ``messages[index]``. When the log kept the provider's token counts they
travel in :class:`~windowfit.formats.Usage` (``RecordedUsage``), the ground truth an
estimator can be checked against.

The format is found from the content, not the file name (``Run.kind`` in brackets):

* JSON lines whose records have a Claude Code ``type`` and ``uuid``/``sessionId``: a
  Claude Code session [``claude-code``], or a sub-agent transcript when every
  user/assistant record is a sidechain record [``claude-code-subagent``].
* An object with ``messages`` and ``trajectory_format: mini-swe-agent*`` (or an
  ``exit`` message): a mini-swe-agent trajectory [``mini-swe-agent``].
* An object with a ``history`` list: a SWE-agent ``.traj`` [``swe-agent``].
* A list of objects with a ``traj`` list: tau-bench results, one run per episode
  [``tau-bench``].
* JSON lines of ``{"type": ..., "payload": ...}`` records (``session_meta``,
  ``response_item``...): a Codex CLI session (``rollout-*.jsonl``) [``codex``], read as
  OpenAI Responses input items (see ``_codex_runs``).
* A list of messages, JSON lines of messages, or an object with ``messages`` (and
  optional ``system``, ``tools``, ``model``): plain provider messages [``anthropic`` or
  ``openai``].

Claude Code sessions (``format="anthropic"``)
    * Records that are not messages are skipped: ``progress``, ``file-history-snapshot``,
      ``queue-operation``, ``summary`` and ``system`` records (hook summaries, turn
      durations, local command echoes). Record metadata (uuid, cwd, timestamps,
      ``toolUseResult``...) is stripped; a message keeps only ``role`` and ``content``.
    * One API response is logged as several consecutive assistant records with the same
      ``message.id`` (one per content block), sometimes with the tool results of its
      first tool calls logged in between (the tools run while the response streams).
      Those records are merged into one assistant message, and the tool results into
      the one user message after it. Its usage is the last record's (the final
      ``output_tokens``). Consecutive user records become one user message, tool
      results first.
    * File order is the conversation order. The ``parentUuid`` links form a tree even in
      a linear session (each parallel tool result hangs off its own tool_use record), so
      they are only used to warn when a user turn continues from an earlier point than
      the last message (a rewind), which the logs read here never do.
    * A ``compact_boundary`` system record starts a new run: after a compaction the
      model no longer saw the earlier messages, only the summary (the
      ``isCompactSummary`` user record, which is kept). Later parts are named
      ``<file stem>~compact<k>``.
    * ``isMeta`` user records (skill bodies, ``<system-reminder>`` hook context, the
      local-command caveat) are kept: they were sent to the model. Records marked
      ``isVisibleInTranscriptOnly`` (other than the compaction summary) are skipped,
      and so are synthetic assistant records (model ``<synthetic>`` or
      ``isApiErrorMessage``), which no request produced; both with a warning.
    * Sidechain records inside a main session file (older Claude Code versions logged
      sub-agents there) are skipped with a warning. Sub-agent transcripts
      (``*__subagents__agent-*.jsonl``, every record a sidechain record) are runs of
      their own. A transcript whose first record continues a conversation that is not
      in the file (the ``agent-acompact-*`` compaction calls) gets a warning: its
      request also held that conversation, which the recorded usage counts.
    * Content blocks are kept as the API returned them: thinking blocks keep their
      signatures, tool_use blocks their ``caller`` field. Text blocks that are only
      whitespace (Claude Code logs ``"\\n\\n"`` before many responses) are dropped,
      since the API rejects blank text blocks; this is listed in ``repairs``.
    * Not in the log at all: the system prompt, the tool definitions, and context that
      hooks added (``SessionStart`` output, ``PostToolUse`` additional context; the
      latter shows up only in the compaction transcripts). ``system`` and ``tools`` are
      ``None``, so replayed requests are smaller than the recorded usage by roughly a
      constant.

OpenAI-format runs (mini-swe-agent, SWE-agent, tau-bench, plain OpenAI lists)
    * System messages stay first in ``messages`` (as they were sent); ``system`` is
      ``None``. A plain OpenAI object with a top-level ``system`` string gets it
      prepended as a system message.
    * A message keeps ``role``, ``content``, ``name``, ``tool_calls`` (``id``, ``type``,
      ``function{name, arguments}``), ``tool_call_id``, ``refusal``, ``function_call``
      and DeepSeek's ``reasoning_content`` (which mini-swe-agent sent back). Agent
      bookkeeping is dropped: mini-swe-agent's ``extra`` (raw API response, costs) and
      its null ``function_call``/``provider_specific_fields`` and the streaming
      ``index`` inside tool calls; SWE-agent's ``agent``, ``message_type``,
      ``thought``, ``action``, ``is_demo``.
    * mini-swe-agent's final ``exit`` message is not a message (it holds the submitted
      patch or the exception that ended the run) and is dropped. The bash tool that
      mini-swe-agent 2.x sends with every request (:data:`MINI_SWE_AGENT_BASH_TOOL`,
      copied from its source; the log does not store it) is put in ``tools`` when the
      run made tool calls. Usage comes from ``extra.response.usage`` of each assistant
      message.
    * SWE-agent tool messages carry a list ``tool_call_ids``; each id becomes one
      ``tool`` message with ``tool_call_id`` (SWE-agent sends the first id).
      Thought/action histories without tool calls are plain system/user/assistant
      messages. SWE-agent may have elided old observations before sending (history
      processors); the requests here are built from the full history. The
      ``demonstrations/`` files were written by people, so their "responses" did not
      come from a model. No per-call usage is logged.
    * tau-bench: each episode is a run named ``<file stem>/task-<task_id>-trial-<trial>``.
      No usage, model or tool definitions are logged.

Plain message lists
    The format is Anthropic when a message uses ``tool_use``/``tool_result``/
    ``thinking`` blocks or Anthropic image sources, or the object has a top-level
    ``system``; OpenAI when a message has ``tool_calls``, a ``tool``/``system``/
    ``developer`` role or OpenAI content parts; plain text chat is read as OpenAI. A
    list that mixes both is an error. A JSONL file of messages (one per line) is read
    the same way.

What is repaired, and how (``Run.repairs`` lists every change, none is silent)
    * A tool call with no result in the log (an interrupted run, or the last call of a
      run that ended) gets a synthetic error result, :data:`SYNTHETIC_RESULT_TEXT`,
      right where the API expects it.
    * A tool result that answers no call in the message right before it becomes text
      (Anthropic: a text block in the same user message; OpenAI: a user message),
      prefixed with ``[tool result for call <id>, which has no matching tool call in
      this log]`` so that its tokens are still there.
    * A tool call id used by an earlier call of the same run (tau-bench and SWE-agent
      replays reuse ids) is renamed ``<id>_2`` (``_3``...) in the call and in its
      result, since the APIs, and windowfit's own checks, want unique ids.
    * Anthropic: tool_result blocks are moved ahead of other blocks of their user
      message; blank text blocks are dropped (a message left empty is dropped, and a
      dropped model response is no longer a request point).

Errors
    A file that cannot be read at all (empty, truncated or invalid JSON, a top-level
    value that is no known log, a message of the wrong shape) raises
    :class:`~windowfit.errors.LogFormatError` naming the file and, where there is one,
    the line. In a JSON-lines file bad lines are skipped and listed in
    ``Run.warnings``; the rest is read.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from windowfit.errors import ConversationError, LogFormatError
from windowfit.formats import Usage, get_format
from windowfit.formats._rules import PairingRule
from windowfit.sizing import Sizer

__all__ = [
    "MINI_SWE_AGENT_BASH_TOOL",
    "SYNTHETIC_RESULT_TEXT",
    "LogFormat",
    "RecordedUsage",
    "RequestPoint",
    "Run",
    "read_runs",
]

LogFormat = Literal["anthropic", "openai", "openai-responses"]

#: Content of the result added for a tool call that the log never answered.
SYNTHETIC_RESULT_TEXT = (
    "[windowfit: this log holds no result for this tool call; the run was interrupted "
    "or the log ends here]"
)

#: The tool definition mini-swe-agent 2.x sends with every request (``BASH_TOOL`` in
#: ``minisweagent/models/utils/actions_toolcall.py``). Its trajectories do not store it.
MINI_SWE_AGENT_BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The bash command to execute",
                }
            },
            "required": ["command"],
        },
    },
}

_SKIPPED_NAMES = ("README", "SOURCES", "LICENSE")
_SKIPPED_SUFFIXES = (".md", ".markdown", ".csv", ".tsv")

_CLAUDE_CODE_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "summary",
        "attachment",
        "custom-title",
    }
)
_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_OPENAI_KEYS = ("role", "content", "name", "tool_call_id", "refusal", "function_call")
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"}
)
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_NOT_MODELS = frozenset({"replay", "human", "human_thought", "instant_empty_submit"})


#: Token counts the provider reported for one request: windowfit's one usage type
#: (:class:`windowfit.formats.Usage`; ``input_tokens`` is the whole input, cached parts
#: included). Logs read it as the providers report it: Anthropic
#: ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``,
#: OpenAI-compatible ``prompt_tokens`` with the cached part from DeepSeek's
#: ``prompt_cache_hit_tokens`` or OpenAI's ``prompt_tokens_details.cached_tokens``; an
#: output count the log does not hold is 0.
RecordedUsage = Usage


@dataclass(frozen=True)
class RequestPoint:
    """One model call: it was sent ``messages[:index]`` and answered ``messages[index]``."""

    index: int
    usage: Usage | None


@dataclass(frozen=True)
class Run:
    """One conversation read from a log, ready to replay call by call.

    ``name`` identifies the run (the file stem, plus ``~compact<k>`` for the part of a
    Claude Code session after its k-th compaction, or ``/task-<id>-trial-<n>`` for a
    tau-bench episode); ``source`` says where in the file it came from (a line range,
    an episode, ``messages`` or ``history``); ``path`` is the file. ``system`` and
    ``tools`` are what the requests carried besides the messages, when the log kept
    them. ``repairs`` lists every change made to turn the log into valid requests and
    ``warnings`` everything the reader skipped or could not represent.
    """

    name: str
    source: str
    path: str
    format: LogFormat
    system: str | list[dict[str, Any]] | None
    tools: list[dict[str, Any]] | None
    messages: list[dict[str, Any]]
    requests: list[RequestPoint]
    model: str | None
    kind: str
    repairs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


#: The largest log file read (``read_runs(max_bytes=...)`` changes it): a larger one, or
#: an endless one such as ``/dev/zero``, is refused once this much has been read.
MAX_LOG_BYTES = 256 * 1024 * 1024


def read_runs(path: str | os.PathLike[str], *, max_bytes: int = MAX_LOG_BYTES) -> list[Run]:
    """Read every run in the log at ``path``, or in every log under a directory.

    A directory is read recursively in sorted order, skipping hidden files, README,
    SOURCES and LICENSE files, and markdown and CSV files. Raises
    :class:`~windowfit.errors.LogFormatError` for a file that cannot be read as a log,
    or that is larger than ``max_bytes``.
    """
    root = Path(path)
    files = list(_log_files(root)) if root.is_dir() else [root]
    runs: list[Run] = []
    for file in files:
        for run in _read_file(file, max_bytes):
            _check_pairing(run)
            runs.append(run)
    return runs


def _check_pairing(run: Run) -> None:
    """Judge the repaired run by the one pairing rule fitting and the server use (the
    repairs above are what make a log satisfy it; this says they did)."""
    spec = get_format(run.format)
    rule = PairingRule.for_format(spec)
    sizer = Sizer(provider=run.format)
    try:
        for i, raw in enumerate(run.messages):
            problem = rule.add(i, spec.scan(raw, i, sizer))
            if problem is not None:
                break
        else:
            problem = rule.finish()
    except ConversationError as exc:
        raise LogFormatError(f"{run.source}: {exc}", path=run.path) from None
    if problem is not None:
        raise LogFormatError(
            f"{run.source}: message {problem.index}: {problem.text}", path=run.path
        )


# -- files -------------------------------------------------------------------------------


def _log_files(directory: Path) -> Iterator[Path]:
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        name = entry.name
        if name.startswith("."):
            continue
        if entry.is_dir():
            yield from _log_files(entry)
            continue
        if name.upper().startswith(_SKIPPED_NAMES) or name.lower().endswith(_SKIPPED_SUFFIXES):
            continue
        yield entry


@dataclass
class _Line:
    number: int
    value: Any = None
    error: str | None = None


def _read_file(file: Path, max_bytes: int = MAX_LOG_BYTES) -> list[Run]:
    where = str(file)
    with file.open("rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise LogFormatError(
            f"larger than the limit of {max_bytes:,} bytes (windowfit replay --max-input-bytes)",
            path=where,
        )
    if not data.strip():
        raise LogFormatError("the file is empty", path=where)
    first_error: LogFormatError
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        first_error = LogFormatError(f"not UTF-8 text ({exc.reason})", path=where, line=line)
    else:
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            detail = f"{exc.msg} (column {exc.colno})"
            if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
                problem = f"the JSON ends before it is complete (truncated?): {detail}"
            else:
                problem = f"not valid JSON: {detail}"
            first_error = LogFormatError(problem, path=where, line=exc.lineno)
        else:
            return _read_document(document, file)
    lines = _split_json_lines(data)
    good = sum(1 for line in lines if line.error is None)
    if good and good >= len(lines) - good:
        return _read_json_lines(lines, file)
    raise first_error


def _split_json_lines(data: bytes) -> list[_Line]:
    """Parse each non-blank line; only ``\\n`` ends a line (JSON text may hold U+2028)."""
    lines: list[_Line] = []
    chunks = data.split(b"\n")
    for number, raw in enumerate(chunks, start=1):
        if not raw.strip():
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            value = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            lines.append(_Line(number, error=f"not UTF-8 text ({exc.reason})"))
        except json.JSONDecodeError as exc:
            cut = number == len(chunks)  # no newline after it: the file ends mid-record
            note = "; the file ends inside this line (truncated?)" if cut else ""
            lines.append(
                _Line(number, error=f"not valid JSON ({exc.msg}, column {exc.colno}){note}")
            )
        else:
            if isinstance(value, dict):
                lines.append(_Line(number, value))
            else:
                lines.append(_Line(number, error=f"a JSON {_json_type(value)}, not an object"))
    return lines


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _is_claude_code_record(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") in _CLAUDE_CODE_TYPES
        and any(key in value for key in ("uuid", "sessionId", "messageId", "leafUuid"))
    )


def _read_json_lines(lines: list[_Line], file: Path) -> list[Run]:
    values = [line for line in lines if line.error is None]
    if any(_is_claude_code_record(line.value) for line in values):
        return _claude_code_runs(lines, file)
    if any(_is_codex_record(line.value) for line in values):
        return _codex_runs(lines, file)
    if all("role" in line.value for line in values):
        warnings = [f"line {line.number}: {line.error}; skipped" for line in lines if line.error]
        messages = [line.value for line in values]
        wheres = [f"line {line.number}" for line in values]
        return [_plain_run(messages, None, file, "lines", wheres=wheres, warnings=warnings)]
    first = values[0]
    raise LogFormatError(
        "JSON lines that are neither Claude Code session records nor messages",
        path=str(file),
        line=first.number,
    )


def _read_document(document: Any, file: Path) -> list[Run]:
    where = str(file)
    if isinstance(document, dict):
        if _is_claude_code_record(document):
            return _claude_code_runs([_Line(1, document)], file)
        messages = document.get("messages")
        if isinstance(messages, list) and _is_mini_swe_agent(document, messages):
            return [_mini_swe_agent_run(document, messages, file)]
        history = document.get("history")
        if isinstance(history, list):
            return [_swe_agent_run(document, history, file)]
        if isinstance(messages, list):
            return [_plain_run(messages, document, file, "messages")]
        raise LogFormatError(
            "a JSON object with neither 'messages' nor 'history': not a known agent log",
            path=where,
            line=1,
        )
    if isinstance(document, list):
        if not document:
            raise LogFormatError("an empty JSON list holds no conversation", path=where, line=1)
        if isinstance(document[0], dict) and "traj" in document[0]:
            return _tau_bench_runs(document, file)
        return [_plain_run(document, None, file, "list")]
    raise LogFormatError(
        f"the top level is a JSON {_json_type(document)}; a log is an object or a list",
        path=where,
        line=1,
    )


# -- shared helpers ------------------------------------------------------------------------


@dataclass
class _Msg:
    """A message being built, with what replay needs to know about it."""

    data: dict[str, Any]
    where: str
    response: bool = False
    usage: Usage | None = None
    msg_id: str | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _anthropic_usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    uncached = _int(usage.get("input_tokens"))
    if uncached is None:
        return None
    read = _int(usage.get("cache_read_input_tokens")) or 0
    write = _int(usage.get("cache_creation_input_tokens")) or 0
    output = _int(usage.get("output_tokens")) or 0
    return Usage(uncached + read + write, output, cache_read_tokens=read, cache_write_tokens=write)


def _openai_usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt = _int(usage.get("prompt_tokens"))
    if prompt is None:
        return None
    cached = _int(usage.get("prompt_cache_hit_tokens"))
    details = usage.get("prompt_tokens_details")
    if cached is None and isinstance(details, dict):
        cached = _int(details.get("cached_tokens"))
    output = _int(usage.get("completion_tokens")) or 0
    return Usage(prompt, output, cache_read_tokens=cached or 0)


def _request_points(messages: list[_Msg], warnings: list[str]) -> list[RequestPoint]:
    points: list[RequestPoint] = []
    for index, message in enumerate(messages):
        if not message.response:
            continue
        if index == 0:
            warnings.append(
                f"{message.where}: the first message is a model response with no prompt "
                "before it; it is not a request point"
            )
            continue
        points.append(RequestPoint(index, message.usage))
    return points


def _stem(file: Path) -> str:
    name = file.name
    for suffix in (".traj.json", ".jsonl", ".json", ".traj", ".ndjson"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return file.stem


def _most_common(models: Counter[str], warnings: list[str]) -> str | None:
    if not models:
        return None
    if len(models) > 1:
        warnings.append(
            "responses came from several models: "
            + ", ".join(f"{name} ({count})" for name, count in models.most_common())
        )
    return models.most_common(1)[0][0]


def _text_of(content: Any) -> str:
    """The text of a tool result's content, for turning an orphan result into text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                kind = part.get("type") if isinstance(part, dict) else None
                parts.append(f"[{kind or 'non-text'} content]")
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _orphan_text(call_id: Any, content: Any) -> str:
    return (
        f"[tool result for call {call_id}, which has no matching tool call in this log]\n"
        f"{_text_of(content)}"
    )


# -- Anthropic -----------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return list(content)
    return []


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _only_results(content: Any) -> bool:
    return isinstance(content, list) and bool(content) and all(_is_result(b) for b in content)


def _is_blank_text(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and not block["text"].strip()
    )


def _drop_blank_text(messages: list[_Msg], repairs: list[str]) -> list[_Msg]:
    """Drop whitespace-only text (the API rejects it), and messages left empty."""
    dropped_blocks = 0
    kept: list[_Msg] = []
    for message in messages:
        content = message.data.get("content")
        if isinstance(content, list):
            clean = [block for block in content if not _is_blank_text(block)]
            dropped_blocks += len(content) - len(clean)
            if clean:
                message.data["content"] = clean
                kept.append(message)
                continue
        elif isinstance(content, str) and content.strip():
            kept.append(message)
            continue
        what = "a model response" if message.response else f"a {message.data['role']} message"
        repairs.append(
            f"{message.where}: dropped {what} that held only blank text"
            + ("; its request is not a request point" if message.response else "")
        )
    if dropped_blocks:
        repairs.append(
            f"dropped {dropped_blocks} whitespace-only text block(s) "
            "(the API rejects text blocks without non-whitespace text)"
        )
    if len(kept) == len(messages):
        return kept
    merged: list[_Msg] = []
    for message in kept:
        if merged and message.data["role"] == "user" and merged[-1].data["role"] == "user":
            previous = merged[-1]
            previous.data["content"] = _results_first(
                _blocks(previous.data["content"]) + _blocks(message.data["content"]),
                message.where,
                repairs,
            )
            repairs.append(f"{message.where}: joined with the user message before it")
            continue
        merged.append(message)
    return merged


def _results_late(blocks: list[Any]) -> bool:
    """True when some tool_result block comes after a block of another kind."""
    seen_other = False
    for block in blocks:
        if not _is_result(block):
            seen_other = True
        elif seen_other:
            return True
    return False


def _results_first(blocks: list[Any], where: str, repairs: list[str]) -> list[Any]:
    if not _results_late(blocks):
        return blocks
    repairs.append(
        f"{where}: moved tool_result blocks ahead of the other blocks of their user "
        "message (the API wants results first)"
    )
    return [b for b in blocks if _is_result(b)] + [b for b in blocks if not _is_result(b)]


@dataclass
class _Call:
    """A tool call waiting for its result: its id in the log and the id it is sent with."""

    logged: str
    sent: str
    name: Any


def _unique_id(call_id: str, used: set[str]) -> str:
    if call_id not in used:
        return call_id
    number = 2
    while f"{call_id}_{number}" in used:
        number += 1
    return f"{call_id}_{number}"


def _renamed(call_id: str, sent: str, where: str, repairs: list[str]) -> None:
    repairs.append(
        f"{where}: tool call id {call_id} was already used by an earlier call; renamed it "
        f"{sent} here and in its result (tool call ids must be unique)"
    )


def _claim_anthropic_calls(message: _Msg, used: set[str], repairs: list[str]) -> list[_Call]:
    """The tool_use blocks of ``message``, renamed where their id was used before."""
    content = message.data.get("content")
    if message.data.get("role") != "assistant" or not isinstance(content, list):
        return []
    calls: list[_Call] = []
    for position, block in enumerate(content):
        if not (isinstance(block, dict) and block.get("type") == "tool_use"):
            continue
        logged = str(block.get("id"))
        sent = _unique_id(logged, used)
        if sent != logged:
            content[position] = {**block, "id": sent}
            _renamed(logged, sent, message.where, repairs)
        used.add(sent)
        calls.append(_Call(logged, sent, block.get("name")))
    return calls


def _take(calls: list[_Call], logged: Any) -> _Call | None:
    """Remove and return the first waiting call with the logged id ``logged``."""
    for position, call in enumerate(calls):
        if call.logged == logged:
            return calls.pop(position)
    return None


def _unanswered(calls: list[_Call], where: str, repairs: list[str]) -> None:
    for call in calls:
        repairs.append(
            f"{where}: tool call {call.logged} ({call.name}) has no result in the log; "
            "added a synthetic error result"
        )


def _synthetic_anthropic_results(
    calls: list[_Call], where: str, repairs: list[str]
) -> list[dict[str, Any]]:
    _unanswered(calls, where, repairs)
    return [
        {
            "type": "tool_result",
            "tool_use_id": call.sent,
            "content": SYNTHETIC_RESULT_TEXT,
            "is_error": True,
        }
        for call in calls
    ]


def _pair_anthropic(messages: list[_Msg], repairs: list[str]) -> list[_Msg]:
    """Answer every tool_use in the next user message; turn orphan results into text.

    Tool call ids are made unique over the run (a repeated id gets a ``_2`` suffix, in
    its call and in its result).
    """
    out: list[_Msg] = []
    used: set[str] = set()
    pending: list[_Call] = []
    pending_where = ""
    for message in messages:
        role = message.data.get("role")
        if role == "user":
            content = message.data.get("content")
            listed = content if isinstance(content, list) else None
            if not pending and not (listed and any(_is_result(b) for b in listed)):
                out.append(message)
                continue
            blocks = _blocks(content)
            matched: list[Any] = []
            texts: list[Any] = []
            others: list[Any] = []
            for block in blocks:
                if not _is_result(block):
                    others.append(block)
                    continue
                call = _take(pending, str(block.get("tool_use_id")))
                if call is not None:
                    matched.append(
                        block if call.sent == call.logged else {**block, "tool_use_id": call.sent}
                    )
                    continue
                call_id = block.get("tool_use_id")
                repairs.append(
                    f"{message.where}: tool result for {call_id} answers no tool call in the "
                    "message before it; kept its content as a text block"
                )
                texts.append({"type": "text", "text": _orphan_text(call_id, block.get("content"))})
            synthetic = _synthetic_anthropic_results(pending, pending_where, repairs)
            if matched and _results_late(blocks):
                repairs.append(
                    f"{message.where}: moved tool_result blocks ahead of the other blocks of "
                    "their user message (the API wants results first)"
                )
            message.data["content"] = matched + synthetic + texts + others
            out.append(message)
            pending = []
            continue
        if pending:
            results = _synthetic_anthropic_results(pending, pending_where, repairs)
            out.append(_Msg({"role": "user", "content": results}, pending_where))
        out.append(message)
        pending = _claim_anthropic_calls(message, used, repairs)
        pending_where = message.where
    if pending:
        results = _synthetic_anthropic_results(pending, pending_where, repairs)
        out.append(_Msg({"role": "user", "content": results}, pending_where))
    return out


# -- Claude Code ---------------------------------------------------------------------------


@dataclass
class _Segment:
    """The records between two compactions: one run."""

    first_line: int
    compaction: int = 0
    last_line: int = 0
    messages: list[_Msg] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    models: Counter[str] = field(default_factory=Counter)
    last_uuid: str | None = None
    parent_outside: str | None = None


def _claude_code_runs(lines: list[_Line], file: Path) -> list[Run]:
    records = [line for line in lines if line.error is None]
    conversation = [r for r in records if r.value.get("type") in ("user", "assistant")]
    subagent = bool(conversation) and all(r.value.get("isSidechain") is True for r in conversation)
    kind = "claude-code-subagent" if subagent else "claude-code"
    by_uuid: dict[str, dict[str, Any]] = {}
    for parsed in records:
        uuid = parsed.value.get("uuid")
        if isinstance(uuid, str):
            by_uuid[uuid] = parsed.value

    segments = [_Segment(first_line=lines[0].number if lines else 1)]
    skipped_sidechain: list[int] = []
    for line in lines:
        segment = segments[-1]
        if line.error is not None:
            segment.last_line = line.number
            segment.warnings.append(f"line {line.number}: {line.error}; skipped")
            continue
        record: dict[str, Any] = line.value
        kind_of_record = record.get("type")
        if kind_of_record == "system" and record.get("subtype") == "compact_boundary":
            segments.append(_Segment(first_line=line.number, compaction=segment.compaction + 1))
            segments[-1].last_line = line.number
            continue
        segment.last_line = line.number
        if kind_of_record not in ("user", "assistant"):
            continue
        if record.get("isSidechain") is True and not subagent:
            skipped_sidechain.append(line.number)
            continue
        if record.get("isVisibleInTranscriptOnly") and not record.get("isCompactSummary"):
            segment.warnings.append(
                f"line {line.number}: a record shown only in the transcript "
                "(isVisibleInTranscriptOnly), not sent to the model; skipped"
            )
            continue
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, (str, list)) or (
            isinstance(content, list)
            and not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in content)
        ):
            segment.warnings.append(
                f"line {line.number}: a {kind_of_record} record without a valid "
                "message.content; skipped"
            )
            continue
        assert isinstance(message, dict)
        if not segment.messages:
            parent = record.get("parentUuid")
            if isinstance(parent, str) and parent not in by_uuid:
                segment.parent_outside = parent
        if kind_of_record == "assistant":
            _claude_code_assistant(segment, line.number, record, message, content)
        else:
            _claude_code_user(segment, line.number, record, content, by_uuid)
        uuid = record.get("uuid")
        segment.last_uuid = uuid if isinstance(uuid, str) else None

    runs: list[Run] = []
    carried: list[str] = []
    stem = _stem(file)
    for segment in segments:
        if not segment.messages:
            carried.extend(segment.warnings)
            continue
        warnings = carried + segment.warnings
        carried = []
        if skipped_sidechain and not runs:
            warnings.append(
                f"skipped {len(skipped_sidechain)} sidechain (sub-agent) record(s) in a main "
                f"session file, first at line {skipped_sidechain[0]}"
            )
        if segment.parent_outside is not None:
            warnings.append(
                "the first record continues a conversation that is not in this file "
                f"(parentUuid {segment.parent_outside}): the requests also held those "
                "earlier messages, and the recorded usage counts them"
            )
        repairs = segment.repairs
        messages = _drop_blank_text(segment.messages, repairs)
        messages = _pair_anthropic(messages, repairs)
        model = _most_common(segment.models, warnings)
        requests = _request_points(messages, warnings)
        source = f"lines {segment.first_line}-{segment.last_line}"
        name = stem
        if segment.compaction:
            source += f" (after compaction {segment.compaction})"
            name = f"{stem}~compact{segment.compaction}"
        runs.append(
            Run(
                name=name,
                source=source,
                path=str(file),
                format="anthropic",
                system=None,
                tools=None,
                messages=[m.data for m in messages],
                requests=requests,
                model=model,
                kind=kind,
                repairs=repairs,
                warnings=warnings,
            )
        )
    if carried:
        if runs:
            runs[-1].warnings.extend(carried)
        else:
            raise LogFormatError(
                "no readable conversation records; " + "; ".join(carried[:3]),
                path=str(file),
                line=lines[0].number if lines else None,
            )
    return runs


def _claude_code_assistant(
    segment: _Segment,
    number: int,
    record: dict[str, Any],
    message: dict[str, Any],
    content: str | list[dict[str, Any]],
) -> None:
    model = message.get("model")
    if model == "<synthetic>" or record.get("isApiErrorMessage"):
        segment.warnings.append(
            f"line {number}: a synthetic assistant record (not produced by a request, e.g. "
            "an API error notice); skipped"
        )
        return
    if isinstance(model, str):
        segment.models[model] += 1
    message_id = message.get("id") if isinstance(message.get("id"), str) else None
    usage = _anthropic_usage(message.get("usage"))
    blocks = _blocks(content)
    messages = segment.messages
    target: _Msg | None = None
    if message_id is not None:
        if messages and messages[-1].response and messages[-1].msg_id == message_id:
            target = messages[-1]
        elif (
            len(messages) >= 2
            and messages[-1].data["role"] == "user"
            and _only_results(messages[-1].data["content"])
            and messages[-2].response
            and messages[-2].msg_id == message_id
        ):
            target = messages[-2]
    if target is not None:
        target.data["content"].extend(blocks)
        if usage is not None:
            target.usage = usage
        return
    if messages and messages[-1].data["role"] == "assistant":
        segment.warnings.append(
            f"line {number}: a model response follows another one with no user turn between; "
            "its request ends with an assistant message"
        )
    messages.append(
        _Msg(
            {"role": "assistant", "content": blocks},
            where=f"line {number}",
            response=True,
            usage=usage,
            msg_id=message_id,
        )
    )


def _claude_code_user(
    segment: _Segment,
    number: int,
    record: dict[str, Any],
    content: str | list[dict[str, Any]],
    by_uuid: dict[str, dict[str, Any]],
) -> None:
    if not _only_results(content) and segment.messages:
        ancestor = _message_ancestor(record, by_uuid)
        if ancestor is not None and ancestor != segment.last_uuid:
            segment.warnings.append(
                f"line {number}: this user turn continues from an earlier point of the "
                f"conversation (record {ancestor}), a rewind or a fork; read in file order"
            )
    messages = segment.messages
    if messages and messages[-1].data["role"] == "user":
        previous = messages[-1]
        previous.data["content"] = _results_first(
            _blocks(previous.data["content"]) + _blocks(content), f"line {number}", segment.repairs
        )
        return
    messages.append(_Msg({"role": "user", "content": content}, where=f"line {number}"))


def _message_ancestor(record: dict[str, Any], by_uuid: dict[str, dict[str, Any]]) -> str | None:
    """The nearest user/assistant record above ``record`` in the uuid tree."""
    parent = record.get("parentUuid")
    for _ in range(len(by_uuid) + 1):
        if not isinstance(parent, str) or parent not in by_uuid:
            return None
        above = by_uuid[parent]
        if above.get("type") in ("user", "assistant"):
            return parent
        parent = above.get("parentUuid")
    return None


# -- OpenAI --------------------------------------------------------------------------------


def _clean_openai(message: Any, where: str, file: Path) -> dict[str, Any]:
    """A provider-ready copy of an OpenAI chat message, checked for shape."""
    if not isinstance(message, dict):
        raise LogFormatError(
            f"{where}: a message must be a JSON object, not a {_json_type(message)}",
            path=str(file),
        )
    role = message.get("role")
    if role not in _OPENAI_ROLES:
        raise LogFormatError(f"{where}: unknown message role {role!r}", path=str(file))
    content = message.get("content")
    if not (isinstance(content, (str, list)) or (content is None and role == "assistant")):
        raise LogFormatError(
            f"{where}: content must be a string or a list of parts, not a {_json_type(content)}",
            path=str(file),
        )
    out: dict[str, Any] = {}
    for key in _OPENAI_KEYS:
        if key in message and (message[key] is not None or key == "content"):
            out[key] = message[key]
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        out["reasoning_content"] = reasoning
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise LogFormatError(f"{where}: tool_calls must be a list", path=str(file))
        clean_calls = []
        for position, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(call.get("id"), str):
                raise LogFormatError(
                    f"{where}: tool_calls[{position}] needs an 'id' and a 'function'",
                    path=str(file),
                )
            clean_calls.append(
                {
                    "id": call["id"],
                    "type": call.get("type") or "function",
                    "function": {
                        "name": function.get("name"),
                        "arguments": function.get("arguments", ""),
                    },
                }
            )
        out["tool_calls"] = clean_calls
    return out


def _pair_openai(messages: list[_Msg], repairs: list[str]) -> list[_Msg]:
    """Follow every assistant tool call with its tool message; orphans become user text.

    Tool call ids are made unique over the run, as for Anthropic.
    """
    out: list[_Msg] = []
    used: set[str] = set()

    def as_user(message: _Msg) -> _Msg:
        call_id = message.data.get("tool_call_id")
        repairs.append(
            f"{message.where}: tool message for call {call_id} answers no tool call before "
            "it; turned it into a user message"
        )
        text = _orphan_text(call_id, message.data.get("content"))
        return _Msg({"role": "user", "content": text}, message.where)

    position = 0
    while position < len(messages):
        message = messages[position]
        position += 1
        role = message.data.get("role")
        if role == "tool":
            out.append(as_user(message))
            continue
        out.append(message)
        calls = message.data.get("tool_calls") if role == "assistant" else None
        if not calls:
            continue
        pending: list[_Call] = []
        for call in calls:  # the cleaned copies: safe to rename in place
            sent = _unique_id(call["id"], used)
            if sent != call["id"]:
                _renamed(call["id"], sent, message.where, repairs)
            pending.append(_Call(call["id"], sent, call["function"].get("name")))
            call["id"] = sent
            used.add(sent)
        orphans: list[_Msg] = []
        while position < len(messages) and messages[position].data.get("role") == "tool":
            answer = messages[position]
            position += 1
            waiting = _take(pending, answer.data.get("tool_call_id"))
            if waiting is None:
                orphans.append(answer)
                continue
            answer.data["tool_call_id"] = waiting.sent
            out.append(answer)
        _unanswered(pending, message.where, repairs)
        for waiting in pending:
            synthetic = {
                "role": "tool",
                "tool_call_id": waiting.sent,
                "content": SYNTHETIC_RESULT_TEXT,
            }
            out.append(_Msg(synthetic, message.where))
        out.extend(as_user(orphan) for orphan in orphans)
    return out


def _openai_run(
    *,
    name: str,
    source: str,
    file: Path,
    messages: list[_Msg],
    tools: list[dict[str, Any]] | None,
    model: str | None,
    kind: str,
    warnings: list[str],
    repairs: list[str] | None = None,
) -> Run:
    repairs = list(repairs or [])
    paired = _pair_openai(messages, repairs)
    requests = _request_points(paired, warnings)
    return Run(
        name=name,
        source=source,
        path=str(file),
        format="openai",
        system=None,
        tools=tools,
        messages=[m.data for m in paired],
        requests=requests,
        model=model,
        kind=kind,
        repairs=repairs,
        warnings=warnings,
    )


def _is_mini_swe_agent(document: dict[str, Any], messages: list[Any]) -> bool:
    trajectory_format = document.get("trajectory_format")
    if isinstance(trajectory_format, str) and trajectory_format.startswith("mini-swe-agent"):
        return True
    return any(isinstance(m, dict) and m.get("role") == "exit" for m in messages)


def _mini_swe_agent_run(document: dict[str, Any], raw: list[Any], file: Path) -> Run:
    messages: list[_Msg] = []
    warnings: list[str] = []
    models: Counter[str] = Counter()
    for position, message in enumerate(raw):
        where = f"messages[{position}]"
        if isinstance(message, dict) and message.get("role") == "exit":
            continue
        clean = _clean_openai(message, where, file)
        response = clean["role"] == "assistant"
        usage = None
        extra = message.get("extra")
        api = extra.get("response") if isinstance(extra, dict) else None
        if response and isinstance(api, dict):
            usage = _openai_usage(api.get("usage"))
            if isinstance(api.get("model"), str):
                models[api["model"]] += 1
        messages.append(_Msg(clean, where, response=response, usage=usage))
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    assert isinstance(info, dict)
    stats = info.get("model_stats")
    calls = _int(stats.get("api_calls")) if isinstance(stats, dict) else None
    responses = sum(1 for m in messages if m.response)
    if calls is not None and calls != responses:
        status = info.get("exit_status")
        warnings.append(
            f"info.model_stats.api_calls is {calls} but the log holds {responses} model "
            f"responses (exit status {status!r}): a call that failed left no message"
        )
    model = _most_common(models, warnings)
    if model is None:
        config = info.get("config")
        model_config = config.get("model") if isinstance(config, dict) else None
        if isinstance(model_config, dict) and isinstance(model_config.get("model_name"), str):
            model = model_config["model_name"]
    uses_bash = any(m.data.get("tool_calls") for m in messages)
    return _openai_run(
        name=_stem(file),
        source="messages",
        file=file,
        messages=messages,
        tools=[json.loads(json.dumps(MINI_SWE_AGENT_BASH_TOOL))] if uses_bash else None,
        model=model,
        kind="mini-swe-agent",
        warnings=warnings,
    )


def _swe_agent_run(document: dict[str, Any], history: list[Any], file: Path) -> Run:
    messages: list[_Msg] = []
    repairs: list[str] = []
    for position, item in enumerate(history):
        where = f"history[{position}]"
        clean = _clean_openai(item, where, file)
        if clean["role"] == "tool" and "tool_call_id" not in clean:
            ids = item.get("tool_call_ids")
            if isinstance(ids, list) and ids:
                for call_id in ids:
                    messages.append(_Msg({**clean, "tool_call_id": call_id}, where))
                if len(ids) > 1:
                    repairs.append(
                        f"{where}: one observation answers {len(ids)} tool calls; "
                        "repeated it as one tool message per call"
                    )
                continue
        messages.append(_Msg(clean, where, response=clean["role"] == "assistant"))
    warnings: list[str] = []
    info = document.get("info")
    stats = info.get("model_stats") if isinstance(info, dict) else None
    calls = _int(stats.get("api_calls")) if isinstance(stats, dict) else None
    responses = sum(1 for m in messages if m.response)
    if calls is not None and calls not in (0, responses):
        warnings.append(
            f"info.model_stats.api_calls is {calls} but the history holds {responses} model "
            "responses (calls whose output was rejected or retried are not in the history)"
        )
    return _openai_run(
        name=_stem(file),
        source="history",
        file=file,
        messages=messages,
        tools=None,
        model=_swe_agent_model(document),
        kind="swe-agent",
        warnings=warnings,
        repairs=repairs,
    )


def _swe_agent_model(document: dict[str, Any]) -> str | None:
    config = document.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            return None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name not in _NOT_MODELS else None


def _tau_bench_runs(episodes: list[Any], file: Path) -> list[Run]:
    runs: list[Run] = []
    stem = _stem(file)
    for number, episode in enumerate(episodes):
        if not isinstance(episode, dict) or not isinstance(episode.get("traj"), list):
            raise LogFormatError(
                f"episode [{number}] has no 'traj' list of messages", path=str(file)
            )
        task_id, trial = episode.get("task_id"), episode.get("trial")
        label = f"task-{task_id}-trial-{trial}" if task_id is not None else f"episode-{number}"
        messages: list[_Msg] = []
        for position, message in enumerate(episode["traj"]):
            where = f"[{number}].traj[{position}]"
            clean = _clean_openai(message, where, file)
            messages.append(_Msg(clean, where, response=clean["role"] == "assistant"))
        runs.append(
            _openai_run(
                name=f"{stem}/{label}",
                source=f"episode {number} of {len(episodes)} (task_id {task_id}, trial {trial})",
                file=file,
                messages=messages,
                tools=None,
                model=None,
                kind="tau-bench",
                warnings=[],
            )
        )
    return runs


# -- plain message lists -------------------------------------------------------------------


def _format_signals(message: Any) -> tuple[bool, bool]:
    """Whether ``message`` can only be Anthropic, and whether it can only be OpenAI."""
    if not isinstance(message, dict):
        return False, False
    anthropic = False
    openai = message.get("role") in ("system", "developer", "tool", "function") or bool(
        message.get("tool_calls") or message.get("tool_call_id")
    )
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in _ANTHROPIC_BLOCKS or (kind in ("image", "document") and "source" in part):
                anthropic = True
            if kind in _OPENAI_PARTS:
                openai = True
    return anthropic, openai


def _plain_run(
    raw: list[Any],
    document: dict[str, Any] | None,
    file: Path,
    source: str,
    *,
    wheres: Sequence[str] | None = None,
    warnings: list[str] | None = None,
) -> Run:
    where_of = list(wheres) if wheres is not None else [f"{source}[{i}]" for i in range(len(raw))]
    warnings = list(warnings or [])
    anthropic_at: str | None = None
    openai_at: str | None = None
    for position, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise LogFormatError(
                f"{where_of[position]}: not a message (a JSON object with a 'role')",
                path=str(file),
            )
        anthropic, openai = _format_signals(message)
        if anthropic and anthropic_at is None:
            anthropic_at = where_of[position]
        if openai and openai_at is None:
            openai_at = where_of[position]
    if anthropic_at and openai_at:
        raise LogFormatError(
            f"mixes Anthropic content ({anthropic_at}) with OpenAI content ({openai_at})",
            path=str(file),
        )
    document = document or {}
    system = document.get("system")
    tools = document.get("tools") if isinstance(document.get("tools"), list) else None
    model = document.get("model") if isinstance(document.get("model"), str) else None
    tool_says_anthropic = bool(tools) and any(
        isinstance(t, dict) and "input_schema" in t for t in tools or []
    )
    if anthropic_at or (not openai_at and (system is not None or tool_says_anthropic)):
        return _plain_anthropic_run(raw, where_of, system, tools, model, file, source, warnings)
    messages: list[_Msg] = []
    if isinstance(system, str):
        messages.append(_Msg({"role": "system", "content": system}, "system"))
    for position, message in enumerate(raw):
        clean = _clean_openai(message, where_of[position], file)
        messages.append(_Msg(clean, where_of[position], response=clean["role"] == "assistant"))
    return _openai_run(
        name=_stem(file),
        source=source,
        file=file,
        messages=messages,
        tools=tools,
        model=model,
        kind="openai",
        warnings=warnings,
    )


def _plain_anthropic_run(
    raw: list[Any],
    where_of: list[str],
    system: Any,
    tools: list[dict[str, Any]] | None,
    model: str | None,
    file: Path,
    source: str,
    warnings: list[str],
) -> Run:
    if system is not None and not isinstance(system, (str, list)):
        raise LogFormatError(
            f"'system' must be a string or a list of blocks, not a {_json_type(system)}",
            path=str(file),
        )
    messages: list[_Msg] = []
    for position, message in enumerate(raw):
        where = where_of[position]
        role = message.get("role")
        content = message.get("content")
        if role not in ("user", "assistant"):
            raise LogFormatError(f"{where}: unknown Anthropic role {role!r}", path=str(file))
        if not isinstance(content, (str, list)) or (
            isinstance(content, list) and not all(isinstance(b, dict) for b in content)
        ):
            raise LogFormatError(
                f"{where}: content must be a string or a list of block objects",
                path=str(file),
            )
        copy = {key: value for key, value in message.items() if key in ("role", "content")}
        if isinstance(content, list):
            copy["content"] = list(content)
        messages.append(_Msg(copy, where, response=role == "assistant"))
    repairs: list[str] = []
    messages = _drop_blank_text(messages, repairs)
    messages = _pair_anthropic(messages, repairs)
    requests = _request_points(messages, warnings)
    return Run(
        name=_stem(file),
        source=source,
        path=str(file),
        format="anthropic",
        system=system,
        tools=tools,
        messages=[m.data for m in messages],
        requests=requests,
        model=model,
        kind="anthropic",
        repairs=repairs,
        warnings=warnings,
    )


# -- Codex CLI ------------------------------------------------------------------------------

#: Record types of a Codex CLI session log (``$CODEX_HOME/sessions/.../rollout-*.jsonl``).
_CODEX_TYPES = frozenset(
    {
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
        "compacted",
        "world_state",
        "token_usage_record",
    }
)
#: Codex's own bookkeeping on a logged item, which it does not send.
_CODEX_PRIVATE = ("internal_chat_message_metadata_passthrough",)


def _is_codex_record(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in _CODEX_TYPES and "payload" in value


def _is_model_item(item: dict[str, Any]) -> bool:
    """An output item of the model (a response's text, reasoning or calls)."""
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in ("reasoning", "compaction") or (isinstance(kind, str) and kind.endswith("_call"))


def _codex_usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict) or _int(usage.get("input_tokens")) is None:
        return None
    return Usage(
        usage["input_tokens"],
        _int(usage.get("output_tokens")) or 0,
        cache_read_tokens=_int(usage.get("cached_input_tokens")) or 0,
        cache_write_tokens=_int(usage.get("cache_write_input_tokens")) or 0,
        reasoning_tokens=_int(usage.get("reasoning_output_tokens")) or 0,
    )


def _codex_runs(lines: list[_Line], file: Path) -> list[Run]:
    """A Codex CLI session: the Responses input items it sent, call by call.

    * ``response_item`` records are the items, in the order sent (without Codex's
      ``internal_chat_message_metadata_passthrough``, which it does not send). The base
      instructions (``session_meta.base_instructions``) go first as the developer message
      Codex sends them in; what was sent may differ from the logged text (Codex 0.171
      left out sections for tools it did not offer: 17k of the 21k characters logged), so
      a warning says so, and the item's ``id`` is not logged.
    * A request point is the first item of each run of model items (assistant text,
      reasoning, calls); ``token_usage_record`` records give each call's usage, in order.
    * A ``compacted`` record starts a new run (``~compact<k>``) from its replacement
      history. A call the log never answers gets :data:`SYNTHETIC_RESULT_TEXT`.
    * Not in the log: the tool definitions (``tools`` is ``None``).
    """
    warnings = [f"line {line.number}: {line.error}; skipped" for line in lines if line.error]
    runs: list[Run] = []
    base: dict[str, Any] | None = None
    items: list[_Msg] = []
    usages: list[Usage | None] = []
    models: Counter[str] = Counter()
    first_line = 0

    def finish(last_line: int) -> None:
        if not items:
            return
        k = len(runs)
        name = _stem(file) + (f"~compact{k}" if k else "")
        runs.append(
            _codex_run(
                name, f"lines {first_line}-{last_line}", file, items, usages, models, warnings
            )
        )

    for line in lines:
        record = line.value
        if line.error is not None or not _is_codex_record(record):
            if line.error is None:
                warnings.append(f"line {line.number}: not a Codex session record; skipped")
            continue
        kind, payload = record["type"], record["payload"]
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            text = payload.get("base_instructions")
            text = text.get("text") if isinstance(text, dict) else text
            if isinstance(text, str) and text:
                base = {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": text}],
                }
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            models[payload["model"]] += 1
        elif kind == "response_item":
            if not items:
                first_line = line.number
                if base is not None:
                    items.append(_Msg(dict(base), "session_meta.base_instructions"))
                    warnings.append(
                        "the base instructions are the logged ones; Codex may have sent them "
                        "shortened"
                    )
            item = {k: v for k, v in payload.items() if k not in _CODEX_PRIVATE}
            items.append(_Msg(item, f"line {line.number}", response=_is_model_item(item)))
        elif kind == "token_usage_record":
            usages.append(_codex_usage(payload.get("usage")))
        elif kind == "compacted":
            finish(line.number - 1)
            items, usages = [], []
            history = payload.get("replacement_history")
            if isinstance(history, list):
                first_line = line.number
                for item in history:
                    if isinstance(item, dict):
                        items.append(_Msg(dict(item), f"line {line.number}"))
            else:
                warnings.append(f"line {line.number}: a compaction without its history")
    finish(lines[-1].number if lines else 0)
    if not runs:
        raise LogFormatError("a Codex session log with no response items", path=str(file))
    return runs


def _codex_run(
    name: str,
    source: str,
    file: Path,
    items: list[_Msg],
    usages: list[Usage | None],
    models: Counter[str],
    warnings: list[str],
) -> Run:
    repairs: list[str] = []
    answered = {
        m.data.get("call_id") for m in items if str(m.data.get("type", "")).endswith("_call_output")
    }
    out: list[_Msg] = []
    pending: list[_Msg] = []
    for message in items:
        if pending and not message.response:
            out.extend(pending)
            pending = []
        out.append(message)
        kind = message.data.get("type")
        call_id = message.data.get("call_id")
        if kind in ("function_call", "custom_tool_call") and call_id not in answered:
            repairs.append(f"{message.where}: call {call_id} has no output; a synthetic one added")
            pending.append(
                _Msg(
                    {"type": f"{kind}_output", "call_id": call_id, "output": SYNTHETIC_RESULT_TEXT},
                    message.where,
                )
            )
    out.extend(pending)
    starts = [i for i, m in enumerate(out) if m.response and (i == 0 or not out[i - 1].response)]
    if len(usages) == len(starts):
        for i, usage in zip(starts, usages, strict=True):
            out[i].usage = usage
    elif usages:
        warnings.append(
            f"{len(usages)} usage records for {len(starts)} model calls: usage left out"
        )
    requests = [RequestPoint(i, out[i].usage) for i in starts if i > 0]
    return Run(
        name=name,
        source=source,
        path=str(file),
        format="openai-responses",
        system=None,
        tools=None,
        messages=[m.data for m in out],
        requests=requests,
        model=_most_common(models, warnings),
        kind="codex",
        repairs=repairs,
        warnings=list(warnings),
    )
