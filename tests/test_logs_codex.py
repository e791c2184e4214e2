"""Reading Codex CLI session logs (``rollout-*.jsonl``) without Codex: the record shapes
of Codex 0.171's logs, written out by hand (tests/test_codex.py checks real ones)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from windowfit import fit
from windowfit.logs import SYNTHETIC_RESULT_TEXT, read_runs


def _record(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-12-01T13:42:03.180Z", "type": kind, "payload": payload}


def _item(payload: dict[str, Any]) -> dict[str, Any]:
    return _record(
        "response_item",
        {**payload, "internal_chat_message_metadata_passthrough": {"turn_id": "t"}},
    )


def _usage(n: int, cached: int) -> dict[str, Any]:
    usage = {"input_tokens": n, "cached_input_tokens": cached, "output_tokens": 9}
    return _record("token_usage_record", {"response_id": "r", "usage": usage})


def _write(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "rollout-2026-12-01T13-42-02-abc.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


CALL = {"type": "function_call", "name": "exec_command", "arguments": '{"cmd":"ls"}'}
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}


def test_a_session_is_its_items_with_usage_per_call(tmp_path: Path) -> None:
    records = [
        _record("session_meta", {"id": "s", "base_instructions": {"text": "You are Codex."}}),
        _record("turn_context", {"model": "gpt-5-codex"}),
        _item(USER),
        _item({**CALL, "call_id": "c1"}),
        _usage(100, 0),
        _record("event_msg", {"type": "token_count"}),
        _item({"type": "function_call_output", "call_id": "c1", "output": "a.txt"}),
        _item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        ),
        _usage(130, 64),
    ]
    (run,) = read_runs(_write(tmp_path, records))
    assert run.kind == "codex" and run.format == "openai-responses" and run.model == "gpt-5-codex"
    assert run.messages[0]["content"][0]["text"] == "You are Codex."
    assert run.messages[1] == USER
    assert all("internal_chat_message_metadata_passthrough" not in m for m in run.messages)
    assert [(p.index, p.usage and p.usage.input_tokens) for p in run.requests] == [
        (2, 100),
        (4, 130),
    ]
    assert run.requests[1].usage is not None and run.requests[1].usage.cache_read_tokens == 64
    fit(run.messages[: run.requests[-1].index], budget=10_000, format=run.format)


def test_an_unanswered_call_gets_a_synthetic_output_and_compaction_starts_a_run(
    tmp_path: Path,
) -> None:
    records = [
        _item(USER),
        _item({**CALL, "call_id": "c1"}),
        _record("compacted", {"message": "summary", "replacement_history": [USER]}),
        _item({**CALL, "call_id": "c2"}),
        _item({"type": "function_call_output", "call_id": "c2", "output": "b"}),
    ]
    first, second = read_runs(_write(tmp_path, records))
    assert first.messages[-1] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": SYNTHETIC_RESULT_TEXT,
    }
    assert first.repairs and second.name.endswith("~compact1")
    assert second.messages[0] == USER and second.messages[1]["call_id"] == "c2"
    assert [p.index for p in second.requests] == [1]
