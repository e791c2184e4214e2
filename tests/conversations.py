"""Test helpers: generated conversations in both formats and an independent checker of
what a provider accepts. Written without looking at windowfit's internals, so that the
properties test the contract, not the implementation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from windowfit import CLEARED_RESULT_NOTE, TRIMMED_CONVERSATION_NOTE

SCRIPTS = {
    "ascii": "lorem ipsum dolor sit amet ",
    "cyrillic": "съешь же ещё этих мягких французских булок ",
    "han": "天地玄黄宇宙洪荒日月盈昃辰宿列张",
    "mixed": "def f(x): return x  # 注释 коммент ",
}


def _text(script: str, length: int) -> str:
    base = SCRIPTS[script]
    return (base * (length // len(base) + 1))[:length]


@st.composite
def conversations(draw: st.DrawFn, fmt: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """A conversation that ends at a request point (its last message is user input or
    tool results), with user turns, text-only assistant replies, and tool rounds of one
    to three calls whose results range from tiny to large."""
    fmt = fmt or draw(st.sampled_from(["anthropic", "openai"]))
    script = draw(st.sampled_from(sorted(SCRIPTS)))
    messages: list[dict[str, Any]] = []
    if fmt == "openai" and draw(st.booleans()):
        messages.append({"role": "system", "content": "You are an agent."})
    call_no = 0
    n_turns = draw(st.integers(1, 4))
    for turn in range(n_turns):
        messages.append(
            {"role": "user", "content": _text(script, draw(st.integers(1, 400))) + f" #{turn}"}
        )
        n_rounds = draw(st.integers(0, 10))
        for _ in range(n_rounds):
            n_calls = draw(st.integers(1, 3))
            ids = [f"call_{call_no + k}" for k in range(n_calls)]
            call_no += n_calls
            sizes = [draw(st.sampled_from([5, 40, 300, 1500, 6000])) for _ in ids]
            thought = _text(script, draw(st.integers(0, 200)))
            if fmt == "anthropic":
                content: list[dict[str, Any]] = []
                if thought:
                    content.append({"type": "text", "text": thought})
                content += [
                    {"type": "tool_use", "id": i, "name": "read", "input": {"path": i}} for i in ids
                ]
                messages.append({"role": "assistant", "content": content})
                results: list[dict[str, Any]] = []
                for i, size in zip(ids, sizes, strict=True):
                    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": i}
                    if draw(st.booleans()):
                        block["content"] = _text(script, size)
                    else:
                        block["content"] = [{"type": "text", "text": _text(script, size)}]
                    results.append(block)
                messages.append({"role": "user", "content": results})
            else:
                messages.append(
                    {
                        "role": "assistant",
                        "content": thought or None,
                        "tool_calls": [
                            {
                                "id": i,
                                "type": "function",
                                "function": {"name": "read", "arguments": json.dumps({"p": i})},
                            }
                            for i in ids
                        ],
                    }
                )
                for i, size in zip(ids, sizes, strict=True):
                    messages.append(
                        {"role": "tool", "tool_call_id": i, "content": _text(script, size)}
                    )
        if turn < n_turns - 1:
            messages.append({"role": "assistant", "content": _text(script, 50)})
    return fmt, messages


def request_points(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Lengths of the prefixes that were requests: before each assistant message, and all."""
    points = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    return [*points, len(messages)]


def check_valid_request(fmt: str, messages: Sequence[dict[str, Any]]) -> None:
    """Raise AssertionError unless the provider would accept the messages' structure."""
    i = 0
    seen_results: set[str] = set()
    while i < len(messages):
        m = messages[i]
        if fmt == "anthropic":
            assert m["role"] in ("user", "assistant"), m
            if i > 0:
                assert m["role"] != messages[i - 1]["role"], f"roles do not alternate at {i}"
            content = m.get("content")
            blocks = content if isinstance(content, list) else []
            calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if results:
                prev = messages[i - 1]
                prev_calls = [
                    b["id"] for b in prev.get("content") or [] if b.get("type") == "tool_use"
                ]
                assert sorted(results) == sorted(prev_calls), f"results at {i} do not match"
                kinds = [b.get("type") for b in blocks]
                assert kinds[: len(results)] == ["tool_result"] * len(results), "results first"
                seen_results.update(results)
            if calls:
                assert i + 1 < len(messages), f"unanswered calls at {i}"
            i += 1
        else:
            if m["role"] == "tool":
                raise AssertionError(f"tool message at {i} does not follow its call")
            calls = [c["id"] for c in m.get("tool_calls") or []]
            i += 1
            answered = []
            while i < len(messages) and messages[i]["role"] == "tool":
                answered.append(messages[i]["tool_call_id"])
                i += 1
            assert sorted(answered) == sorted(calls), f"calls and results differ before {i}"
            seen_results.update(answered)


def is_cleared(block_or_message: Any) -> bool:
    content = block_or_message.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return content[0].get("text") == CLEARED_RESULT_NOTE
    return content == CLEARED_RESULT_NOTE


def is_note(message: dict[str, Any]) -> bool:
    return TRIMMED_CONVERSATION_NOTE in json.dumps(message, ensure_ascii=False)


def raw_size(messages: Sequence[dict[str, Any]]) -> int:
    from windowfit import fit

    return fit(messages, budget=10**12).report.tokens_before


_RESULT_PARTS = {"text", "image", "document", "search_result"}


def provider_rejection(fmt: str, messages: Sequence[Any]) -> str | None:
    """Why the provider would answer 400 to these messages (``None`` if it would accept
    them), from its documented rules and written apart from windowfit: Anthropic merges
    consecutive same-role messages, then wants user first, tool_use only from the
    assistant, tool_result only from the user and before other content, and every
    tool_use answered in the next message; OpenAI wants tool messages right after the
    assistant message whose tool_calls they answer, every call answered."""
    try:
        json.dumps(list(messages), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"not JSON: {exc}"
    if not messages:
        return "no messages"
    if fmt == "anthropic":
        merged: list[tuple[str, list[Any]]] = []
        for m in messages:
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                return f"bad message {m!r:.80}"
            content = m.get("content")
            if isinstance(content, str):
                blocks: list[Any] = [{"type": "text", "text": content}]
            elif isinstance(content, list):
                blocks = content
            else:
                return "content is neither a string nor a list"
            if merged and merged[-1][0] == m["role"]:
                merged[-1][1].extend(blocks)
            else:
                merged.append((m["role"], list(blocks)))
        if merged[0][0] != "user":
            return "first message is not the user's"
        for k, (role, blocks) in enumerate(merged):
            if any(not isinstance(b, dict) or not isinstance(b.get("type"), str) for b in blocks):
                return "a block is not an object with a type"
            kinds = [b["type"] for b in blocks]
            if role == "user" and "tool_use" in kinds:
                return "tool_use in a user turn"
            if role == "assistant" and "tool_result" in kinds:
                return "tool_result in an assistant turn"
            results = [b for b in blocks if b["type"] == "tool_result"]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                return "tool_result after other content"
            for r in results:
                inner = r.get("content")
                if isinstance(inner, list) and any(
                    not isinstance(p, dict) or p.get("type") not in _RESULT_PARTS for p in inner
                ):
                    return "a block that may not be inside a tool_result"
            calls = [b.get("id") for b in blocks if b["type"] == "tool_use"]
            previous = merged[k - 1][1] if k else []
            asked = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            if any(r.get("tool_use_id") not in asked for r in results):
                return "a tool_result without its tool_use just before"
            if calls:
                following = merged[k + 1][1] if k + 1 < len(merged) else []
                answered = {
                    b.get("tool_use_id") for b in following if b.get("type") == "tool_result"
                }
                if not set(calls) <= answered:
                    return "a tool_use without its tool_result in the next message"
        return None
    open_calls: set[Any] = set()
    for m in messages:
        if not isinstance(m, dict):
            return "a message is not an object"
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in open_calls:
                return "a tool message that answers no open call"
            open_calls.discard(m.get("tool_call_id"))
            continue
        if open_calls:
            return "a tool call without its tool message"
        if role not in ("system", "developer", "user", "assistant", "function"):
            return f"role {role!r}"
        if m.get("tool_calls") and role != "assistant":
            return "tool_calls on a message that is not the assistant's"
        open_calls = {c.get("id") for c in m.get("tool_calls") or [] if isinstance(c, dict)}
    return "a tool call without its tool message" if open_calls else None
