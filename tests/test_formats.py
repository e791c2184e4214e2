"""Lossless conversion between provider formats and the neutral model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowfit import ConversationError, detect_format
from windowfit.formats import get_format
from windowfit.messages import Thinking, ToolCall, ToolResult

from conversations import conversations

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
extras = st.dictionaries(
    st.sampled_from(["cache_control", "name", "citations", "x_vendor", "metadata"]),
    json_values,
    max_size=2,
)
block_extras = st.dictionaries(
    st.sampled_from(["cache_control", "citations", "x_vendor"]), json_values, max_size=2
)


def _roundtrip(fmt: str, messages: list[dict[str, Any]]) -> None:
    spec = get_format(fmt)
    for i, message in enumerate(messages):
        assert spec.to_message(spec.from_message(message, i)) == message


@given(case=conversations())
def test_generated_conversations_roundtrip(case: tuple[str, list[dict[str, Any]]]) -> None:
    _roundtrip(*case)


@given(extra=extras, block_extra=block_extras, text=st.text())
def test_anthropic_unknown_fields_survive(
    extra: dict[str, Any], block_extra: dict[str, Any], text: str
) -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": text, **block_extra},
            {"type": "document", "source": {"type": "text", "data": text}},
            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}, **block_extra},
        ],
        **extra,
    }
    _roundtrip("anthropic", [message])
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": text, "signature": "sig=="},
            {"type": "redacted_thinking", "data": "b64"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"q": text}, **block_extra},
        ],
    }
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, **block_extra},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "text", "text": text}],
            },
        ],
    }
    _roundtrip("anthropic", [assistant, result])


@given(extra=extras, text=st.text())
def test_openai_unknown_fields_survive(extra: dict[str, Any], text: str) -> None:
    messages = [
        {"role": "developer", "content": text, **extra},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,AA", "detail": "low"},
                },
                {"type": "input_audio", "input_audio": {"data": "..", "format": "wav"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": text,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
            **extra,
        },
        {"role": "tool", "tool_call_id": "c1", "content": text, "name": "f"},
        {"role": "assistant", "content": text, "refusal": None},
    ]
    _roundtrip("openai", messages)


def test_neutral_blocks_are_what_they_say() -> None:
    spec = get_format("openai")
    msg = spec.from_message(
        {
            "role": "assistant",
            "content": "hi",
            "reasoning_content": "thinking",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        0,
    )
    assert isinstance(msg.blocks[0], Thinking)
    assert isinstance(msg.blocks[-1], ToolCall) and msg.blocks[-1].arguments == "{}"
    tool = spec.from_message({"role": "tool", "tool_call_id": "c", "content": "out"}, 1)
    assert tool.blocks == (ToolResult("c", "out", None, {}),)


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "user", "content": "hi"}], "anthropic"),
        ([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "openai"),
        ([{"role": "tool", "tool_call_id": "x", "content": ""}], "openai"),
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}], "anthropic"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            "openai",
        ),
    ],
)
def test_detect_format(messages: list[dict[str, Any]], expected: str) -> None:
    assert detect_format(messages) == expected


@pytest.mark.parametrize(
    ("fmt", "message", "where"),
    [
        ("anthropic", {"content": "x"}, "message 3, field 'role'"),
        ("anthropic", {"role": "tool", "content": "x"}, "message 3, field 'role'"),
        ("anthropic", {"role": "user", "content": 5}, "field 'content'"),
        ("anthropic", {"role": "user", "content": [{"type": "text"}]}, "field 'content[0].text'"),
        ("anthropic", "not a message", "message 3"),
        ("openai", {"role": "tool", "content": "x"}, "field 'tool_call_id'"),
        (
            "openai",
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {}}}],
            },
            "tool_calls[0].function.arguments",
        ),
    ],
)
def test_bad_messages_say_where(fmt: str, message: Any, where: str) -> None:
    with pytest.raises(ConversationError) as info:
        get_format(fmt).from_message(message, 3)
    assert where in str(info.value)


def test_real_trajectories_roundtrip(shared_data: Path) -> None:
    """Every message of a real mini-swe-agent run and of a Claude Code session converts
    back to exactly what it was."""
    traj = next((shared_data / "trajectories" / "mini_swe_agent_deepseek").glob("*.json"))
    messages = [m for m in json.loads(traj.read_text())["messages"] if m["role"] != "exit"]
    _roundtrip("openai", messages)
    session = next((shared_data / "trajectories" / "claude_code").glob("*subagents*.jsonl"))
    records = [json.loads(line) for line in session.read_text().splitlines() if line.strip()]
    anthropic_messages = [
        r["message"]
        for r in records
        if isinstance(r.get("message"), dict) and "role" in r["message"]
    ]
    assert anthropic_messages
    _roundtrip("anthropic", anthropic_messages)
