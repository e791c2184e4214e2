"""The OpenAI Responses format (``openai-responses``): lossless round trip, strict checks,
sizes, detection, the Dialect, and the fitting contract as properties over generated
input-item conversations (the invariants tests/test_fitting_properties.py checks for the
other formats). The checker of what the API accepts is written here, apart from windowfit.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowfit import (
    CLEARED_RESULT_NOTE,
    TRIMMED_CONVERSATION_NOTE,
    ContextOverflowError,
    ConversationError,
    FitResult,
    detect_format,
    fit,
)
from windowfit.classify import is_context_overflow
from windowfit.formats import DIALECTS, get_format
from windowfit.sizing import Sizer

from conversations import SCRIPTS

FMT = "openai-responses"
SPEC = get_format(FMT)
DIALECT = DIALECTS[FMT]
PRESETS = ["windowfit", "seed", "windowfit-lean"]
VERBATIM = {"reasoning", "compaction"}
OUTPUTS = {"function_call_output", "custom_tool_call_output"}
CALLS = {"function_call", "custom_tool_call"}


def _text(script: str, length: int) -> str:
    base = SCRIPTS[script]
    return (base * (length // len(base) + 1))[:length]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Input items ending at a request point: user turns; rounds of an optional reasoning
    item (with encrypted_content), optional assistant text and one to three calls
    (function or custom), answered by output items (string or parts) of sizes from tiny
    to large; text replies between turns; sometimes a developer item first and a
    compaction item after the first user message."""
    script = draw(st.sampled_from(sorted(SCRIPTS)))
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"type": "message", "role": "developer", "content": "You are an agent."})
    call_no = 0
    n_turns = draw(st.integers(1, 4))
    for turn in range(n_turns):
        text = _text(script, draw(st.integers(1, 400))) + f" #{turn}"
        if draw(st.booleans()):
            items.append({"role": "user", "content": text})
        else:
            items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": text}],
                }
            )
        if turn == 0 and draw(st.booleans()):
            items.append({"type": "compaction", "id": "cmp_1", "encrypted_content": "Z" * 300})
        for _ in range(draw(st.integers(0, 8))):
            if draw(st.booleans()):
                items.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{call_no}",
                        "summary": [{"type": "summary_text", "text": _text(script, 40)}],
                        "encrypted_content": "gAAAAB" * draw(st.integers(1, 40)),
                    }
                )
            thought = _text(script, draw(st.integers(0, 120)))
            if thought:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": thought, "annotations": []}],
                    }
                )
            ids = [f"call_{call_no + k}" for k in range(draw(st.integers(1, 3)))]
            call_no += len(ids)
            kinds = [draw(st.sampled_from(["function_call", "custom_tool_call"])) for _ in ids]
            for i, kind in zip(ids, kinds, strict=True):
                if kind == "function_call":
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": i,
                            "name": "read",
                            "arguments": json.dumps({"p": i}),
                        }
                    )
                else:
                    items.append(
                        {"type": "custom_tool_call", "call_id": i, "name": "patch", "input": i}
                    )
            for i, kind in zip(ids, kinds, strict=True):
                size = draw(st.sampled_from([5, 40, 300, 1500, 6000]))
                body: Any = _text(script, size)
                if draw(st.booleans()):
                    body = [{"type": "input_text", "text": body}]
                items.append({"type": f"{kind}_output", "call_id": i, "output": body})
        if turn < n_turns - 1:
            items.append(
                {"type": "message", "role": "assistant", "content": _text(script, 50), "id": "m"}
            )
    return items


def request_points(items: Sequence[dict[str, Any]]) -> list[int]:
    """Prefix lengths that were requests: before each round's first item, and all."""

    def model_side(item: dict[str, Any]) -> bool:
        return item.get("role") == "assistant" or item.get("type") in CALLS | VERBATIM

    points = [
        i for i in range(1, len(items)) if model_side(items[i]) and not model_side(items[i - 1])
    ]
    return [*points, len(items)]


def api_rejection(items: Sequence[Any]) -> str | None:
    """Why the Responses API (with windowfit's placement: a round's calls answered right
    after it) would refuse these items; ``None`` if it would take them."""
    try:
        json.dumps(list(items), allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"not JSON: {exc}"
    if not items:
        return "no items"
    open_calls: set[str] = set()
    answering = False
    for k, item in enumerate(items):
        kind = item.get("type", "message")
        if kind in OUTPUTS:
            if item.get("call_id") not in open_calls:
                return f"output at {k} answers no open call"
            open_calls.discard(item["call_id"])
            answering = True
            continue
        model_side = kind in CALLS | VERBATIM or item.get("role") == "assistant"
        if open_calls and (answering or not model_side):
            return f"calls {sorted(open_calls)} unanswered before item {k}"
        answering = False
        if kind in CALLS:
            open_calls.add(item["call_id"])
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                return f"role {role!r} at {k}"
            if not isinstance(item.get("content"), (str, list)):
                return f"content at {k}"
    return f"calls {sorted(open_calls)} unanswered" if open_calls else None


def raw_size(items: list[dict[str, Any]]) -> int:
    return fit(items, budget=10**12, format=FMT).report.tokens_before


def _results(items: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    sizer = Sizer(provider=FMT)
    out = []
    for i, m in enumerate(items):
        out.extend(sizer.measure(m, SPEC, i)[1].results)
    return out


def _is_cleared(item: dict[str, Any]) -> bool:
    output = item.get("output")
    if isinstance(output, list):
        return output == [{"type": "input_text", "text": CLEARED_RESULT_NOTE}]
    return output == CLEARED_RESULT_NOTE


def _first_index(items: list[dict[str, Any]]) -> int:
    return next(i for i, m in enumerate(items) if m.get("role") not in ("system", "developer"))


def _check_one(items: list[dict[str, Any]], budget: int, preset: str) -> FitResult | None:
    before = copy.deepcopy(items)
    try:
        result = fit(items, budget=budget, settings=preset, format=FMT)
    except ContextOverflowError:
        assert items == before
        return None
    out, report = result.messages, result.report
    assert items == before, "fit changed its input"
    assert report.tokens_after <= budget
    assert raw_size(out) == report.tokens_after
    assert api_rejection(out) is None, api_rejection(out)
    first = _first_index(items)
    assert out[first] is items[first], "the first message was not kept as it was"
    if report.tokens_before <= budget:
        assert report.stage == 0 and all(a is b for a, b in zip(out, items, strict=True))
    # Reasoning and compaction items travel verbatim or not at all.
    originals = [json.dumps(m) for m in items if m.get("type") in VERBATIM]
    for m in out:
        if m.get("type") in VERBATIM:
            assert json.dumps(m) in originals
    cleared = {m["call_id"] for m in out if m.get("type") in OUTPUTS and _is_cleared(m)}
    assert cleared == set(report.cleared)
    results = _results(items)
    if results:
        assert results[-1][0] not in cleared, "the newest result was cleared"
    if report.stage >= 2:
        assert sum(TRIMMED_CONVERSATION_NOTE in json.dumps(m) for m in out) == 1
    return result


# --------------------------------------------------------------------------- round trip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@given(
    items=conversations(),
    extra=st.dictionaries(st.sampled_from(["id", "status", "x_vendor"]), json_values, max_size=2),
    seed=st.randoms(),
)
def test_items_roundtrip_exactly_key_order_included(
    items: list[dict[str, Any]], extra: dict[str, Any], seed: Any
) -> None:
    for i, item in enumerate(items):
        keys = list({**item, **extra})
        seed.shuffle(keys)
        shuffled = {k: {**item, **extra}[k] for k in keys}
        for raw in (item, shuffled):
            back = SPEC.to_message(SPEC.from_message(raw, i))
            assert json.dumps(back) == json.dumps(raw)


@given(items=conversations())
def test_scan_sizes_are_the_neutral_sizes(items: list[dict[str, Any]]) -> None:
    sizer = Sizer(provider=FMT)
    for i, item in enumerate(items):
        facts = SPEC.scan(item, i, sizer)
        size = sizer.size_of(SPEC.from_message(item, i))
        assert (facts.tokens, facts.results) == (size.tokens, size.results)


def test_unknown_items_and_parts_are_kept_and_sized_by_their_json() -> None:
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
                {"type": "input_file", "file_id": "file_1"},
            ],
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}},
        {"type": "item_reference", "id": "msg_9"},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    ]
    sizer = Sizer(provider=FMT)
    for i, item in enumerate(items):
        assert SPEC.to_message(SPEC.from_message(item, i)) == item
    assert SPEC.scan(items[0], 0, sizer).tokens < 200  # the low-detail image costs 85
    web = SPEC.scan(items[1], 1, sizer)
    assert web.role == "assistant" and web.tokens > sizer.text(json.dumps(items[1])) // 2


# --------------------------------------------------------------------------- checks


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ("text", None),
        ({"type": 3}, "type"),
        ({"type": "message", "role": "robot", "content": "x"}, "role"),
        ({"type": "message", "role": "user"}, "content"),
        ({"type": "message", "role": "user", "content": 5}, "content"),
        ({"type": "message", "role": "user", "content": ["x"]}, "content[0]"),
        (
            {"type": "message", "role": "user", "content": [{"type": "input_text"}]},
            "content[0].text",
        ),
        (
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "input_text", "text": "x"}],
            },
            "content[0].type",
        ),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "call_id"),
        ({"type": "function_call", "call_id": "c", "arguments": "{}"}, "name"),
        ({"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}, "arguments"),
        ({"type": "custom_tool_call", "call_id": "c", "name": "f"}, "input"),
        ({"type": "function_call_output", "call_id": "c"}, "output"),
        ({"type": "function_call_output", "call_id": "c", "output": 7}, "output"),
        ({"type": "function_call_output", "output": "x"}, "call_id"),
        ({"type": "reasoning", "encrypted_content": float("nan")}, "item"),
    ],
)
def test_bad_items_say_where(item: Any, field: str | None) -> None:
    with pytest.raises(ConversationError) as caught:
        fit([{"role": "user", "content": "hi"}, item], budget=1000, format=FMT)
    assert caught.value.index == 1 and caught.value.field == field


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        (
            [
                {"role": "user", "content": "x"},
                {"type": "function_call_output", "call_id": "a", "output": "o"},
            ],
            "no matching tool call",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            ],
            "has no tool result",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                {"role": "user", "content": "y"},
                {"type": "function_call_output", "call_id": "a", "output": "o"},
            ],
            "has no tool result",
        ),
    ],
)
def test_unpaired_items_are_refused(items: list[Any], problem: str) -> None:
    with pytest.raises(ConversationError, match=problem):
        fit(items, budget=1000, format=FMT)


def test_parallel_calls_in_one_round_pair_with_outputs_after_it() -> None:
    items = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "e"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
    ]
    assert fit(items, budget=1000, format=FMT).messages == items


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"}], FMT),
        ([{"type": "message", "role": "user", "content": "x"}], FMT),
        ([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}], FMT),
        ([{"type": "reasoning", "summary": []}], FMT),
        ([{"role": "user", "content": "plain"}], "anthropic"),
        ([{"role": "tool", "tool_call_id": "a", "content": "x"}], "openai"),
        (
            [
                {
                    "type": "message",
                    "role": "assistant",
                    "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": "x"}],
                }
            ],
            "anthropic",
        ),
    ],
)
def test_detect_format(items: list[Any], expected: str) -> None:
    assert detect_format(items) == expected


# --------------------------------------------------------------------------- dialect


def test_dialect_reads_and_writes_a_request() -> None:
    body = {
        "model": "m",
        "input": "hello",
        "instructions": "be brief",
        "max_output_tokens": 64,
        "stream": True,
        "store": False,
    }
    parts = DIALECT.read_request(body)
    assert parts.messages == [{"role": "user", "content": "hello"}]
    assert (parts.system, parts.model, parts.max_output_tokens, parts.stream) == (
        "be brief",
        "m",
        64,
        True,
    )
    assert DIALECT.write_request(body, parts.messages, "be brief") == body  # string kept
    items = [{"type": "message", "role": "user", "content": "x"}]
    written = DIALECT.write_request(body, items, "shorter")
    assert (
        list(written) == list(body)
        and written["input"] == items
        and written["instructions"] == "shorter"
    )
    assert DIALECT.output_limit_field == "max_output_tokens"
    with pytest.raises(ConversationError) as caught:
        DIALECT.read_request({"input": 3})
    assert caught.value.field == "input"


def test_dialect_usage_whole_and_streamed() -> None:
    usage = {
        "input_tokens": 1200,
        "input_tokens_details": {"cached_tokens": 1024},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 200},
        "total_tokens": 1500,
    }
    got = DIALECT.usage({"id": "resp_1", "usage": usage})
    assert got is not None
    assert (got.input_tokens, got.cache_read_tokens, got.output_tokens, got.reasoning_tokens) == (
        1200,
        1024,
        300,
        200,
    )
    assert got.uncached_input_tokens == 176
    assert (
        DIALECT.stream_usage(
            {"type": "response.completed", "sequence_number": 9, "response": {"usage": usage}}
        )
        == got
    )
    assert DIALECT.stream_usage({"type": "response.output_text.delta", "delta": "x"}) is None
    assert DIALECT.usage({"id": "resp_1", "usage": None}) is None


def test_overflow_error_is_the_apis_and_is_recognised() -> None:
    status, body = DIALECT.overflow_error(300_000, 272_000)
    assert status == 400
    assert body["error"]["code"] == "context_length_exceeded" and body["error"]["param"] == "input"
    assert body["error"]["message"].startswith(
        "Your input exceeds the context window of this model."
    )
    assert DIALECT.is_overflow(status, body) and is_context_overflow(status=status, body=body)
    event = {"type": "error", "sequence_number": 2, "error": body["error"]}
    assert DIALECT.is_overflow(200, event) and is_context_overflow(body=event)
    other = {"error": {"message": "Invalid 'input'", "type": "invalid_request_error", "code": None}}
    assert not DIALECT.is_overflow(400, other)


# --------------------------------------------------------------------------- fitting


@given(items=conversations(), fraction=st.floats(0.05, 1.2), preset=st.sampled_from(PRESETS))
def test_single_request_contract(items: list[dict[str, Any]], fraction: float, preset: str) -> None:
    budget = max(1, int(raw_size(items) * fraction))
    _check_one(items, budget, preset)


@given(items=conversations(), fraction=st.floats(0.1, 0.9), preset=st.sampled_from(PRESETS))
def test_growing_conversation_is_cache_stable(
    items: list[dict[str, Any]], fraction: float, preset: str
) -> None:
    """The cleared set only grows (but for what a cut drops), the cut only moves forward,
    and while neither changes each request starts with the previous one."""
    budget = max(1, int(raw_size(items) * fraction))
    previous: FitResult | None = None
    for point in request_points(items):
        prefix = items[:point]
        result = _check_one(prefix, budget, preset)
        if result is None:
            previous = None
            continue
        report = result.report
        if previous is not None and preset != "seed":
            old = previous.report
            dropped = {prefix[i].get("call_id") for i in report.dropped}
            assert set(old.cleared) <= set(report.cleared) | dropped
            if old.dropped:
                assert report.dropped and max(report.dropped) >= max(old.dropped)
            if set(old.cleared) == set(report.cleared) and old.dropped == report.dropped:
                n = len(previous.messages)
                assert result.messages[:n] == previous.messages
        previous = result


@given(items=conversations(), fraction=st.floats(0.1, 0.9))
def test_cache_never_changes_an_answer(items: list[dict[str, Any]], fraction: float) -> None:
    budget = max(1, int(raw_size(items) * fraction))
    warm = []
    for point in request_points(items):
        try:
            warm.append(fit(items[:point], budget=budget, format=FMT).messages)
        except ContextOverflowError:
            warm.append(None)
    for point, expected in zip(request_points(items), warm, strict=True):
        fresh = json.loads(json.dumps(items[:point]))
        try:
            got = fit(fresh, budget=budget, format=FMT).messages
        except ContextOverflowError:
            got = None
        assert got == expected


def test_clearing_replaces_the_output_and_keeps_the_call_id() -> None:
    big = "lorem ipsum dolor sit amet " * 400
    items: list[dict[str, Any]] = [{"role": "user", "content": "read"}]
    for k in range(6):
        items.append({"type": "function_call", "call_id": f"c{k}", "name": "f", "arguments": "{}"})
        output: Any = big if k % 2 else [{"type": "input_text", "text": big}]
        items.append(
            {"type": "function_call_output", "call_id": f"c{k}", "output": output, "id": f"o{k}"}
        )
    result = fit(items, budget=raw_size(items) // 2, format=FMT, system="be brief")
    assert result.report.stage == 1 and result.report.cleared
    for m in result.messages:
        if m.get("call_id") in result.report.cleared and m["type"] == "function_call_output":
            assert _is_cleared(m) and list(m) == ["type", "call_id", "output", "id"]


def test_the_cli_fits_a_responses_body_and_writes_it_back(tmp_path: Path) -> None:
    from windowfit.cli import main

    big = "lorem ipsum dolor sit amet " * 150
    items: list[dict[str, Any]] = [{"role": "user", "content": "read"}]
    for k in range(6):
        items.append({"type": "function_call", "call_id": f"c{k}", "name": "f", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"c{k}", "output": big})
    body = {"model": "m", "instructions": "Be brief.", "input": items, "store": False}
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["fit", str(path), "--budget", "3000", "--output", str(out)]) == 0
    shaped = json.loads(out.read_text(encoding="utf-8"))
    assert list(shaped) == list(body) and shaped["instructions"] == "Be brief."
    assert api_rejection(shaped["input"]) is None and len(shaped["input"]) < len(items)
    assert fit(shaped["input"], budget=3000, system="Be brief.", format=FMT).report.stage == 0
