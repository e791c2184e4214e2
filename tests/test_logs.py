"""Tests for windowfit.logs: readers for real agent logs.

The real-data tests read /work/shared/data/trajectories (found next to the repository,
or through the WINDOWFIT_DATA environment variable) once per session and skip when it
is absent. The malformed-input tests write their own files to tmp_path.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from windowfit import FitSettings, fit
from windowfit.errors import LogFormatError, WindowfitError
from windowfit.logs import (
    MINI_SWE_AGENT_BASH_TOOL,
    SYNTHETIC_RESULT_TEXT,
    RecordedUsage,
    RequestPoint,
    Run,
    read_runs,
)

from conftest import NEEDS_DATA


def _data_dir() -> Path | None:
    candidates = [Path(__file__).resolve().parents[1].parent / "shared" / "data"]
    if os.environ.get("WINDOWFIT_DATA"):
        candidates.append(Path(os.environ["WINDOWFIT_DATA"]))
    for candidate in candidates:
        if (candidate / "trajectories").is_dir():
            return candidate / "trajectories"
    return None


TRAJECTORIES = _data_dir()
needs_data = pytest.mark.skipif(
    TRAJECTORIES is None,
    reason=NEEDS_DATA,
)


@functools.cache
def all_runs() -> tuple[Run, ...]:
    """Every run under the trajectories directory, read once per session."""
    assert TRAJECTORIES is not None
    return tuple(read_runs(TRAJECTORIES))


def runs_of(relative: str) -> list[Run]:
    assert TRAJECTORIES is not None
    path = str(TRAJECTORIES / relative)
    return [run for run in all_runs() if run.path == path]


@functools.cache
def sources_steps() -> dict[str, int]:
    """The ``steps`` column of SOURCES.md, by file name."""
    assert TRAJECTORIES is not None
    steps: dict[str, int] = {}
    for line in (TRAJECTORIES / "SOURCES.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.search(r"\.(jsonl|json|traj)$", cells[0]):
            steps[cells[0]] = int(cells[2].replace(",", ""))
    return steps


def blocks_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def tool_call_count(run: Run) -> int:
    if run.format == "anthropic":
        return sum(1 for m in run.messages for b in blocks_of(m) if b.get("type") == "tool_use")
    return sum(len(m.get("tool_calls") or []) for m in run.messages)


def problems(run: Run) -> list[str]:
    """Everything that would make a request built from ``run`` invalid."""
    found: list[str] = []
    messages = run.messages
    if run.format == "anthropic":
        pending: list[str] = []
        for i, message in enumerate(messages):
            if set(message) - {"role", "content"}:
                found.append(f"{i}: extra keys {set(message) - {'role', 'content'}}")
            blocks = blocks_of(message)
            if not blocks:
                found.append(f"{i}: empty content")
            for block in blocks:
                if block.get("type") == "text" and not block["text"].strip():
                    found.append(f"{i}: blank text block")
            if message["role"] == "user":
                kinds = [b.get("type") == "tool_result" for b in blocks]
                if kinds != sorted(kinds, reverse=True):
                    found.append(f"{i}: tool results not first")
                results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
                if sorted(results) != sorted(pending):
                    found.append(f"{i}: results {results} do not answer calls {pending}")
                pending = []
            elif message["role"] == "assistant":
                if pending:
                    found.append(f"{i}: calls {pending} unanswered")
                if i and messages[i - 1]["role"] == "assistant":
                    found.append(f"{i}: two assistant messages in a row")
                pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            else:
                found.append(f"{i}: role {message['role']!r}")
        if pending:
            found.append(f"end: calls {pending} unanswered")
        if messages and messages[0]["role"] != "user":
            found.append("the first message is not a user message")
    else:
        allowed = {
            "role",
            "content",
            "name",
            "tool_calls",
            "tool_call_id",
            "reasoning_content",
            "refusal",
            "function_call",
        }
        i = 0
        while i < len(messages):
            message = messages[i]
            if set(message) - allowed:
                found.append(f"{i}: extra keys {set(message) - allowed}")
            if message["role"] == "tool":
                found.append(f"{i}: tool message answering nothing")
                i += 1
                continue
            calls = [call["id"] for call in message.get("tool_calls") or []]
            i += 1
            answers = []
            while i < len(messages) and messages[i]["role"] == "tool":
                answers.append(messages[i]["tool_call_id"])
                i += 1
            if sorted(answers) != sorted(calls):
                found.append(f"{i}: answers {answers} do not match calls {calls}")
    if run.format == "anthropic":
        ids = [b["id"] for m in messages for b in blocks_of(m) if b.get("type") == "tool_use"]
    else:
        ids = [call["id"] for m in messages for call in m.get("tool_calls") or []]
    if len(ids) != len(set(ids)):
        found.append("tool call ids are not unique")
    indexes = [point.index for point in run.requests]
    if indexes != sorted(set(indexes)):
        found.append("request points are not strictly increasing")
    for point in run.requests:
        if not 0 < point.index < len(messages) or messages[point.index]["role"] != "assistant":
            found.append(f"request point {point.index} is not a model response")
    return found


def raw_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- every real run ------------------------------------------------------------------------


@needs_data
def test_every_real_run_is_a_valid_request_sequence() -> None:
    runs = all_runs()
    assert runs
    bad = {run.name: found[:3] for run in runs if (found := problems(run))}
    assert bad == {}


@needs_data
def test_every_real_run_passes_windowfit_validation() -> None:
    """fit() checks the providers' pairing rules; a huge budget changes nothing."""
    stateless = FitSettings(stateless=True)
    for run in all_runs():
        result = fit(
            run.messages,
            budget=10**9,
            format=run.format,
            system=run.system,
            tools=run.tools,
            settings=stateless,
        )
        assert result.messages == run.messages, run.name


@needs_data
def test_counts_per_source() -> None:
    kinds = Counter(run.kind for run in all_runs())
    # 4 main sessions (3 with one compaction each, so 2 runs) + 3 small ones;
    # 7 sub-agent transcripts; 35 + 25 single-run files; 200 tau-bench episodes.
    assert kinds == {
        "claude-code": 9,
        "claude-code-subagent": 7,
        "mini-swe-agent": 35,
        "swe-agent": 25,
        "tau-bench": 200,
    }
    for run in all_runs():
        assert run.format == ("anthropic" if run.kind.startswith("claude-code") else "openai")


@needs_data
def test_directory_reading_skips_sources_and_is_sorted() -> None:
    paths = [run.path for run in all_runs()]
    assert not any(p.endswith((".md", ".csv")) for p in paths)
    assert paths == sorted(paths)


# -- Claude Code ---------------------------------------------------------------------------

MAIN_SESSIONS = [
    "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
    "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "short.jsonl",
    "subagent.jsonl",
    "tool_heavy.jsonl",
]


@needs_data
@pytest.mark.parametrize("name", MAIN_SESSIONS)
def test_claude_code_tool_calls_match_sources(name: str) -> None:
    runs = runs_of(f"claude_code/{name}")
    assert runs and all(run.kind == "claude-code" for run in runs)
    assert sum(tool_call_count(run) for run in runs) == sources_steps()[name]


@needs_data
def test_claude_code_subagents_are_their_own_runs() -> None:
    assert TRAJECTORIES is not None
    files = sorted((TRAJECTORIES / "claude_code").glob("*__subagents__agent-*.jsonl"))
    assert len(files) == 7
    for file in files:
        (run,) = runs_of(f"claude_code/{file.name}")
        assert run.kind == "claude-code-subagent"
        assert tool_call_count(run) == sources_steps()[file.name]
        compaction_call = "agent-acompact-" in file.name
        continues_elsewhere = any("not in this file" in w for w in run.warnings)
        assert continues_elsewhere == compaction_call, run.warnings


@needs_data
@pytest.mark.parametrize(
    "name",
    [
        "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "4d5611e5-241a-462a-8d15-5122611a9569__subagents__agent-a2898e3.jsonl",
        "short.jsonl",
        "tool_heavy.jsonl",
    ],
)
def test_claude_code_merges_records_of_one_response(name: str) -> None:
    """One request per message.id, however many records the response was logged in."""
    assert TRAJECTORIES is not None
    records = raw_records(TRAJECTORIES / "claude_code" / name)
    assistant_records = [r for r in records if r["type"] == "assistant"]
    ids = [r["message"]["id"] for r in assistant_records]
    assert len(set(ids)) < len(assistant_records)  # responses really are split
    runs = runs_of(f"claude_code/{name}")
    assert sum(len(run.requests) for run in runs) == len(set(ids))
    assert sum(1 for run in runs for m in run.messages if m["role"] == "assistant") == len(set(ids))
    # Every request carries the usage the provider reported for it.
    assert all(point.usage is not None for run in runs for point in run.requests)


@needs_data
def test_claude_code_usage_is_the_last_record_of_the_response() -> None:
    assert TRAJECTORIES is not None
    name = "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    records = raw_records(TRAJECTORIES / "claude_code" / name)
    first_id = next(r["message"]["id"] for r in records if r["type"] == "assistant")
    chunks = [r for r in records if r["type"] == "assistant" and r["message"]["id"] == first_id]
    usage = chunks[-1]["message"]["usage"]
    run = runs_of(f"claude_code/{name}")[0]
    assert run.requests[0] == RequestPoint(
        1,
        RecordedUsage(
            input_tokens=usage["input_tokens"]
            + usage["cache_read_input_tokens"]
            + usage["cache_creation_input_tokens"],
            cache_read_tokens=usage["cache_read_input_tokens"],
            cache_write_tokens=usage["cache_creation_input_tokens"],
            output_tokens=usage["output_tokens"],
        ),
    )
    merged = run.messages[1]
    assert merged["role"] == "assistant"
    assert len(merged["content"]) > 1  # blocks from several records
    # No record metadata travels with the messages.
    assert all(set(m) == {"role", "content"} for m in run.messages)


@needs_data
def test_claude_code_compaction_starts_a_new_run() -> None:
    runs = runs_of("claude_code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    assert [run.name for run in runs] == [
        "4d5611e5-241a-462a-8d15-5122611a9569",
        "4d5611e5-241a-462a-8d15-5122611a9569~compact1",
    ]
    before, after = runs
    assert "after compaction 1" in after.source
    assert after.messages[0]["role"] == "user"
    assert "continued from a previous conversation" in after.messages[0]["content"]
    assert all(p.usage is not None for p in before.requests + after.requests)
    # The first request after the compaction is much smaller than the last one before it.
    last_before = before.requests[-1].usage
    first_after = after.requests[0].usage
    assert last_before is not None and first_after is not None
    assert first_after.input_tokens < last_before.input_tokens / 2
    assert before.model == after.model == "claude-opus-4-6"


@needs_data
def test_claude_code_keeps_thinking_signatures_and_drops_blank_text() -> None:
    runs = runs_of("claude_code/258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    thinking = [
        b for run in runs for m in run.messages for b in blocks_of(m) if b["type"] == "thinking"
    ]
    assert thinking and all(b.get("signature") for b in thinking)
    assert any("whitespace-only" in r for run in runs for r in run.repairs)


@needs_data
def test_claude_code_interrupted_turn_joins_the_tool_results() -> None:
    (run,) = runs_of("claude_code/short.jsonl")
    assert [m["role"] for m in run.messages] == ["user", "assistant", "user"]
    last = run.messages[-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert "interrupted" in last[-1]["text"]
    assert run.repairs == [
        "dropped 1 whitespace-only text block(s) "
        "(the API rejects text blocks without non-whitespace text)"
    ]


# -- mini-swe-agent ------------------------------------------------------------------------


@needs_data
def test_mini_swe_agent_counts_match_sources_and_usage() -> None:
    assert TRAJECTORIES is not None
    files = sorted((TRAJECTORIES / "mini_swe_agent_deepseek").glob("*.traj.json"))
    assert len(files) == 35
    steps = sources_steps()
    for file in files:
        (run,) = runs_of(f"mini_swe_agent_deepseek/{file.name}")
        assert run.kind == "mini-swe-agent"
        assert tool_call_count(run) == steps[file.name], file.name
        assert len(run.requests) == steps[file.name]
        assert all(p.usage is not None and p.usage.input_tokens > 0 for p in run.requests)
        assert all(m["role"] != "exit" for m in run.messages)
        assert run.messages[0]["role"] == "system" and run.system is None
        assert run.tools == [MINI_SWE_AGENT_BASH_TOOL]
        assert run.model in ("deepseek-chat", "deepseek-reasoner")


@needs_data
def test_mini_swe_agent_usage_and_the_unanswered_submit() -> None:
    assert TRAJECTORIES is not None
    name = "deepseek_chat_dev__marshmallow-code__marshmallow-1343.traj.json"
    raw = json.loads((TRAJECTORIES / "mini_swe_agent_deepseek" / name).read_text())
    first = next(m for m in raw["messages"] if m["role"] == "assistant")
    usage = first["extra"]["response"]["usage"]
    (run,) = runs_of(f"mini_swe_agent_deepseek/{name}")
    assert run.requests[0] == RequestPoint(
        2,
        RecordedUsage(
            usage["prompt_tokens"],
            usage["completion_tokens"],
            cache_read_tokens=usage["prompt_cache_hit_tokens"],
        ),
    )
    # The exit message is dropped; the submit call it replaced gets a synthetic result.
    assert len(run.messages) == len(raw["messages"])
    assert run.messages[-1] == {
        "role": "tool",
        "tool_call_id": raw["messages"][-2]["tool_calls"][0]["id"],
        "content": SYNTHETIC_RESULT_TEXT,
    }
    assert len(run.repairs) == 1 and "no result in the log" in run.repairs[0]
    assert "extra" not in run.messages[2] and "index" not in run.messages[2]["tool_calls"][0]


@needs_data
def test_mini_swe_agent_reasoner_keeps_reasoning_and_reports_the_failed_call() -> None:
    (run,) = runs_of(
        "mini_swe_agent_deepseek/deepseek_reasoner_dev__sqlfluff__sqlfluff-1733.traj.json"
    )
    assert run.model == "deepseek-reasoner"
    assert any("reasoning_content" in m for m in run.messages)
    assert run.repairs == []  # the last call was answered before the server error
    assert any("api_calls is 145" in w for w in run.warnings)


# -- SWE-agent -----------------------------------------------------------------------------


@needs_data
def test_swe_agent_histories() -> None:
    assert TRAJECTORIES is not None
    files = sorted((TRAJECTORIES / "swe_agent").glob("*.traj"))
    assert len(files) == 25
    for file in files:
        raw = json.loads(file.read_text())
        (run,) = runs_of(f"swe_agent/{file.name}")
        assert run.kind == "swe-agent"
        assert len(run.messages) == len(raw["history"])
        assert len(run.requests) == sum(1 for m in raw["history"] if m["role"] == "assistant")
        assert all(p.usage is None for p in run.requests)
        assert tool_call_count(run) == sum(len(m.get("tool_calls") or []) for m in raw["history"])
        for message in run.messages:
            assert not {"agent", "message_type", "thought", "action"} & set(message)


@needs_data
def test_swe_agent_function_calling_history() -> None:
    name = (
        "trajectories__demonstrations__replay__marshmallow-code__marshmallow-1867__"
        "function_calling__install-1__marshmallow-code__marshmallow-1867.traj"
    )
    (run,) = runs_of(f"swe_agent/{name}")
    assert tool_call_count(run) == 11
    tool_messages = [m for m in run.messages if m["role"] == "tool"]
    assert len(tool_messages) == 11 and all("tool_call_id" in m for m in tool_messages)
    assert run.model == "gpt-4o"
    # This replayed demonstration reuses call ids; the later uses are renamed.
    assert len(run.repairs) == 5 and all("was already used" in r for r in run.repairs)


# -- tau-bench -----------------------------------------------------------------------------


@needs_data
def test_tau_bench_episodes_are_runs() -> None:
    runs = runs_of("tau_bench/gpt-4o-airline.json")
    assert len(runs) == 200
    assert len({run.name for run in runs}) == 200
    assert runs[0].name == "gpt-4o-airline/task-0-trial-0"
    assert sum(len(run.messages) for run in runs) == 5308
    assert sum(tool_call_count(run) for run in runs) == sources_steps()["gpt-4o-airline.json"]
    assert sum(len(run.requests) for run in runs) == 2454
    # The logged call ids repeat (108 of 134 ids are used more than once): 73 later uses in
    # 49 episodes are renamed; nothing else needed repair.
    repairs = [repair for run in runs for repair in run.repairs]
    assert len(repairs) == 73 and all("was already used" in r for r in repairs)
    assert sum(1 for run in runs if run.repairs) == 49


# -- malformed and synthetic inputs --------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def cc_user(uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s",
        "isSidechain": False,
        "message": {"role": "user", "content": content},
        **extra,
    }


def cc_assistant(uuid: str, parent: str, msg_id: str, block: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s",
        "isSidechain": False,
        "message": {
            "id": msg_id,
            "model": "claude-test",
            "role": "assistant",
            "content": [block],
            "usage": {
                "input_tokens": 5,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
                "output_tokens": 7,
            },
        },
    }


def tool_use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}


def small_session() -> list[dict[str, Any]]:
    return [
        {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
        cc_user("u1", None, "list the files"),
        cc_assistant("a1", "u1", "m1", {"type": "text", "text": "\n\n"}),
        cc_assistant("a2", "a1", "m1", tool_use("t1")),
        {"type": "progress", "uuid": "p1", "parentUuid": "a2", "sessionId": "s", "data": {}},
        cc_assistant("a3", "p1", "m1", tool_use("t2")),
        cc_user("r1", "a2", [tool_result("t1")]),
        cc_user("r2", "a3", [tool_result("t2")]),
        cc_assistant("a4", "r2", "m2", {"type": "text", "text": "done"}),
    ]


def test_synthetic_claude_code_session(tmp_path: Path) -> None:
    (run,) = read_runs(write(tmp_path, "session.jsonl", jsonl(small_session())))
    assert run.kind == "claude-code" and run.name == "session" and run.model == "claude-test"
    assert run.messages == [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [tool_use("t1"), tool_use("t2")]},
        {"role": "user", "content": [tool_result("t1"), tool_result("t2")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    usage = RecordedUsage(125, 7, cache_read_tokens=100, cache_write_tokens=20)
    assert run.requests == [RequestPoint(1, usage), RequestPoint(3, usage)]
    assert run.warnings == []


def test_bad_jsonl_line_in_the_middle_is_skipped_and_reported(tmp_path: Path) -> None:
    lines = jsonl(small_session()).splitlines()
    lines.insert(3, '{"type": "assistant", "message": {"rol')
    (run,) = read_runs(write(tmp_path, "bad.jsonl", "\n".join(lines) + "\n"))
    assert len(run.messages) == 4 and len(run.requests) == 2
    assert len(run.warnings) == 1 and run.warnings[0].startswith("line 4: not valid JSON")


def test_truncated_jsonl_answers_the_lost_call_with_a_synthetic_result(tmp_path: Path) -> None:
    text = jsonl(small_session()[:7]) + json.dumps(small_session()[7])[:40]
    (run,) = read_runs(write(tmp_path, "cut.jsonl", text))
    assert run.messages[-1] == {
        "role": "user",
        "content": [
            tool_result("t1"),
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": SYNTHETIC_RESULT_TEXT,
                "is_error": True,
            },
        ],
    }
    assert any("t2 (Bash) has no result" in r for r in run.repairs)
    (warning,) = run.warnings
    assert warning.startswith("line 8: not valid JSON") and "truncated?" in warning


def test_compaction_boundary_and_rewind(tmp_path: Path) -> None:
    records = small_session()
    records += [
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "sessionId": "s",
        },
        cc_user("c1", "b1", "Summary of the earlier conversation.", isCompactSummary=True),
        cc_assistant("a5", "c1", "m3", {"type": "text", "text": "continuing"}),
        cc_user("c2", "a5", "go on"),
        cc_assistant("a6", "c2", "m4", {"type": "text", "text": "went on"}),
        cc_user("c3", "a5", "no, do something else"),  # continues from a5, not a6
    ]
    first, second = read_runs(write(tmp_path, "s.jsonl", jsonl(records)))
    assert (first.name, second.name) == ("s", "s~compact1")
    assert first.source == "lines 1-9" and second.source.startswith("lines 10-")
    assert second.messages[0]["content"] == "Summary of the earlier conversation."
    assert len(second.requests) == 2
    assert len(second.warnings) == 1 and "rewind" in second.warnings[0]


def test_orphan_tool_result_becomes_text(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        {"role": "user", "content": [tool_result("ghost"), {"type": "text", "text": "and?"}]},
        {"role": "assistant", "content": [tool_use("t9")]},
    ]
    document = {"system": "be brief", "model": "claude-x", "messages": messages}
    (run,) = read_runs(write(tmp_path, "plain.json", json.dumps(document)))
    assert (run.kind, run.format, run.system, run.model) == (
        "anthropic",
        "anthropic",
        "be brief",
        "claude-x",
    )
    assert run.messages[2]["content"][0]["type"] == "text"
    assert "ghost" in run.messages[2]["content"][0]["text"]
    assert run.messages[-1]["content"][0]["tool_use_id"] == "t9"
    assert len(run.repairs) == 2
    assert problems(run) == []
    assert [p.index for p in run.requests] == [1, 3]


def test_plain_openai_list_with_orphan_and_unanswered_calls(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "zz", "content": "stray"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "why no answer?"},
        {"role": "assistant", "content": "sorry"},
    ]
    (run,) = read_runs(write(tmp_path, "chat.json", json.dumps(messages)))
    assert (run.kind, run.format) == ("openai", "openai")
    assert [m["role"] for m in run.messages] == [
        "system",
        "user",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    assert run.messages[4] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": SYNTHETIC_RESULT_TEXT,
    }
    assert len(run.repairs) == 2 and problems(run) == []
    assert [p.index for p in run.requests] == [3, 6]


def test_mixed_formats_are_refused(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": [tool_use("t1")]},
    ]
    with pytest.raises(LogFormatError, match="mixes Anthropic content"):
        read_runs(write(tmp_path, "mixed.json", json.dumps(messages)))


def test_truncated_json_names_file_and_line(tmp_path: Path) -> None:
    document = json.dumps({"history": [{"role": "user", "content": "x" * 50}]}, indent=2)
    path = write(tmp_path, "cut.traj", document[:60])
    with pytest.raises(LogFormatError) as caught:
        read_runs(path)
    error = caught.value
    assert error.path == str(path) and error.line == 5
    assert "truncated" in str(error) and str(path) in str(error)
    assert isinstance(error, ValueError) and isinstance(error, WindowfitError)


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("", "the file is empty", None),
        ("\n   \n", "the file is empty", None),
        ("42", "top level is a JSON number", 1),
        ('"hello"', "top level is a JSON string", 1),
        ("[]", "empty JSON list", 1),
        ('{"foo": 1}', "neither 'messages' nor 'history'", 1),
        ('[{"role": "user", "content": "a"}, 3]', r"list\[1\]: not a message", None),
        ('{"messages": [{"role": "wizard", "content": "a"}]}', "unknown message role", None),
        ("not json\nat all\n", "not valid JSON", 1),
    ],
)
def test_unreadable_files_raise(tmp_path: Path, text: str, message: str, line: int | None) -> None:
    path = write(tmp_path, "log.json", text)
    with pytest.raises(LogFormatError, match=message) as caught:
        read_runs(path)
    assert caught.value.line == line and caught.value.path == str(path)


def test_jsonl_of_unknown_records_raises(tmp_path: Path) -> None:
    path = write(tmp_path, "x.jsonl", '{"a": 1}\n{"b": 2}\n')
    with pytest.raises(LogFormatError, match="neither Claude Code") as caught:
        read_runs(path)
    assert caught.value.line == 1


def test_directory_skips_notes_and_reads_logs_in_order(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "# notes")
    write(tmp_path, "SOURCES.md", "| file |")
    write(tmp_path, "stats.csv", "a,b\n1,2\n")
    write(tmp_path, ".hidden.json", "garbage")
    write(tmp_path, "b.json", json.dumps([{"role": "user", "content": "b"}]))
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "a.jsonl", jsonl(small_session()))
    runs = read_runs(tmp_path)
    assert [run.name for run in runs] == ["b", "a"]  # "b.json" sorts before "sub/"
    assert runs[0].requests == []  # a lone user message is no model call


def test_repeated_call_ids_are_renamed_in_call_and_result(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    openai_messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "first"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "second"},
    ]
    (run,) = read_runs(write(tmp_path, "o.json", json.dumps(openai_messages)))
    assert run.messages[3]["tool_calls"][0]["id"] == "c1_2"
    assert run.messages[4] == {"role": "tool", "tool_call_id": "c1_2", "content": "second"}
    assert len(run.repairs) == 1 and problems(run) == []

    anthropic_messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("t1")]},
        {"role": "user", "content": [tool_result("t1")]},
        {"role": "assistant", "content": [tool_use("t1"), tool_use("t1")]},
        {"role": "user", "content": [tool_result("t1"), tool_result("t1")]},
    ]
    (run,) = read_runs(write(tmp_path, "a.json", json.dumps(anthropic_messages)))
    assert [b["id"] for b in run.messages[3]["content"]] == ["t1_2", "t1_3"]
    assert [b["tool_use_id"] for b in run.messages[4]["content"]] == ["t1_2", "t1_3"]
    assert len(run.repairs) == 2 and problems(run) == []


@pytest.mark.parametrize(
    ("fmt", "messages", "problem"),
    [
        (
            "anthropic",
            [
                {"role": "user", "content": "go"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]},
            ],
            "no matching tool call",
        ),
        (
            "openai",
            [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
            ],
            "has no tool result",
        ),
    ],
)
def test_a_run_the_repairs_left_unpaired_is_a_log_format_error(
    fmt: str, messages: list[Any], problem: str
) -> None:
    """What the readers produce is judged by the one pairing rule fitting uses."""
    from windowfit.logs import Run, _check_pairing

    run = Run("r", "lines 1-2", "log.jsonl", fmt, None, None, messages, [], None, "agent")  # type: ignore[arg-type]
    with pytest.raises(LogFormatError, match=problem) as caught:
        _check_pairing(run)
    assert caught.value.path == "log.jsonl"
