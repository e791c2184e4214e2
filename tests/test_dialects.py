"""The whole-API dialects: request parts, usage, stream usage, overflow error bodies."""

from __future__ import annotations

from typing import Any

import pytest

from windowfit.classify import ErrorKind, classify_error
from windowfit.errors import ConversationError
from windowfit.formats import DIALECTS, Usage

ANTHROPIC = DIALECTS["anthropic"]
OPENAI = DIALECTS["openai"]


def test_both_dialects_are_registered_with_their_formats() -> None:
    assert ANTHROPIC.format.name == "anthropic" and OPENAI.format.name == "openai"
    assert ANTHROPIC.output_limit_field == "max_tokens"
    assert OPENAI.output_limit_field == "max_completion_tokens"


def test_anthropic_request_parts_and_write_back() -> None:
    body = {
        "model": "claude-x",
        "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "t"}],
        "max_tokens": 50,
        "stream": True,
        "context_management": {"edits": []},
    }
    parts = ANTHROPIC.read_request(body)
    assert (parts.model, parts.system, parts.max_output_tokens, parts.stream) == (
        "claude-x",
        "be brief",
        50,
        True,
    )
    assert parts.tools == [{"name": "t"}] and parts.messages is body["messages"]
    new = [{"role": "user", "content": "short"}]
    out = ANTHROPIC.write_request(body, new, "be brief")
    assert out["messages"] == new and list(out) == list(body)
    assert out["context_management"] == {"edits": []} and body["messages"][0]["content"] == "hi"


@pytest.mark.parametrize(
    ("body", "limit"),
    [({"max_completion_tokens": 9, "max_tokens": 5}, 9), ({"max_tokens": 5}, 5), ({}, None)],
)
def test_openai_output_limit_and_system_messages(body: dict[str, Any], limit: int | None) -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    parts = OPENAI.read_request({"model": "gpt-4o", "messages": messages, **body})
    assert parts.max_output_tokens == limit
    assert parts.system is None and parts.messages == messages  # system travels inside


@pytest.mark.parametrize("dialect", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
@pytest.mark.parametrize("body", [[], {"messages": "x"}, {"messages": None}, {}])
def test_an_unreadable_body_is_a_conversation_error(dialect: Any, body: Any) -> None:
    with pytest.raises(ConversationError):
        dialect.read_request(body)


def test_usage_from_whole_answers() -> None:
    anthropic_usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
        "output_tokens": 3,
    }
    assert ANTHROPIC.usage({"usage": anthropic_usage}) == Usage(115, 3, 100, 5)
    openai_usage = {
        "prompt_tokens": 120,
        "completion_tokens": 4,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    assert OPENAI.usage({"usage": openai_usage}) == Usage(120, 4, 64, 0, 2)
    assert ANTHROPIC.usage({}) is None and OPENAI.usage({"usage": None}) is None


def test_usage_from_stream_events() -> None:
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 1}}}
    assert ANTHROPIC.stream_usage(start) == Usage(7, 1)
    delta = {"type": "message_delta", "usage": {"output_tokens": 30}}
    assert ANTHROPIC.stream_usage(delta) == Usage(0, 30)
    assert ANTHROPIC.stream_usage({"type": "content_block_delta"}) is None
    assert OPENAI.stream_usage({"choices": [], "usage": None}) is None
    last = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    assert OPENAI.stream_usage(last) == Usage(9, 2)


@pytest.mark.parametrize("dialect", list(DIALECTS.values()), ids=list(DIALECTS))
def test_overflow_bodies_are_recognised_and_classified(dialect: Any) -> None:
    status, body = dialect.overflow_error(215_000, 200_000)
    assert status == 400 and dialect.is_overflow(status, body)
    info = classify_error(status=status, body=body)
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    states_counts = "215" in str(body)  # Responses' real wording gives no numbers
    expected = (215_000, 200_000) if states_counts else (None, None)
    assert (info.prompt_tokens, info.limit) == expected
    assert not dialect.is_overflow(429, body)
    assert not dialect.is_overflow(400, {"error": {"message": "something else"}})


def test_a_max_tokens_refusal_is_not_an_input_overflow() -> None:
    from windowfit.formats import anthropic, openai_chat

    assert not ANTHROPIC.is_overflow(*anthropic.output_overflow_error(50_000, 20_000, 60_000))
    assert not OPENAI.is_overflow(*openai_chat.output_overflow_error(50_000, 20_000, 60_000))
