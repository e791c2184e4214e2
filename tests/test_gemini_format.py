"""The Gemini generateContent format: lossless conversion, strict scanning, the pairing
rule, the fitting contract as properties (as tests/test_fitting_properties.py checks for
the other formats), and the dialect around the contents."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemini_conversations import (
    gemini_conversations,
    gemini_rejection,
    is_cleared,
    png,
    request_points,
    responses_of,
)
from windowfit import (
    CLEARED_RESULT_NOTE,
    TRIMMED_CONVERSATION_NOTE,
    ContextOverflowError,
    ConversationError,
    FitResult,
    default_estimator,
    detect_format,
    fit,
)
from windowfit.classify import ErrorKind, classify_error
from windowfit.formats import DIALECTS, get_format
from windowfit.formats._dialect import Usage
from windowfit.messages import Image, Thinking, ToolCall, ToolResult
from windowfit.sizing import Sizer

SPEC = get_format("gemini")
DIALECT = DIALECTS["gemini"]
PRESETS = ["windowfit", "seed", "windowfit-lean"]
NOTE_RESPONSE = {"result": CLEARED_RESULT_NOTE}


def size(contents: list[dict[str, Any]]) -> int:
    return fit(contents, budget=10**12, format="gemini").report.tokens_before


# ------------------------------------------------------------------------- conversion


@given(contents=gemini_conversations())
def test_roundtrip_is_lossless(contents: list[dict[str, Any]]) -> None:
    for i, content in enumerate(contents):
        assert SPEC.to_message(SPEC.from_message(content, i)) == content


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    extra=st.dictionaries(st.sampled_from(["x_vendor", "metadata"]), json_values, max_size=2),
    part_extra=st.dictionaries(
        st.sampled_from(["videoMetadata", "partMetadata", "mediaResolution"]),
        json_values,
        max_size=2,
    ),
    text=st.text(),
)
def test_unknown_fields_and_parts_survive(
    extra: dict[str, Any], part_extra: dict[str, Any], text: str
) -> None:
    content = {
        "role": "user",
        "parts": [
            {"text": text, **part_extra},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/x.pdf"}},
            {"executableCode": {"language": "PYTHON", "code": text}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": text}},
            {"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}, **part_extra},
            {"someFuturePart": {"value": text}},
        ],
        **extra,
    }
    assert SPEC.to_message(SPEC.from_message(content, 0)) == content


def test_neutral_blocks_are_what_they_say() -> None:
    model = {
        "role": "model",
        "parts": [
            {"text": "plan", "thought": True, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": "read", "args": {"p": 1}, "id": "c1"}},
        ],
    }
    user = {
        "parts": [
            {"function_response": {"name": "read", "response": {"out": "x"}}},
            {"inline_data": {"mime_type": "image/png", "data": png(10, 10)}},
        ]
    }
    thought, call = SPEC.from_message(model, 3).blocks
    assert isinstance(thought, Thinking) and thought.text == "plan"
    assert isinstance(call, ToolCall) and call.name == "read" and call.id == "read#0@3"
    assert json.loads(call.arguments) == {"p": 1}
    message = SPEC.from_message(user, 4)
    assert message.role == "user"
    result, image = message.blocks
    assert isinstance(result, ToolResult) and result.call_id == "read#0@3"
    assert isinstance(image, Image)
    assert SPEC.to_message(message) == user  # no role added to a turn that had none


@given(contents=gemini_conversations())
def test_scan_sizes_are_the_neutral_sizes(contents: list[dict[str, Any]]) -> None:
    sizer = Sizer(default_estimator(), provider="gemini")
    for i, content in enumerate(contents):
        facts = SPEC.scan(content, i, sizer)
        neutral = sizer.size_of(SPEC.from_message(content, i))
        assert facts.tokens == neutral.tokens
        assert facts.calls == neutral.calls
        assert [r[:2] for r in facts.results] == [r[:2] for r in neutral.results]


def test_detect_format_tells_gemini_contents() -> None:
    assert detect_format([{"role": "user", "parts": [{"text": "hi"}]}]) == "gemini"
    assert detect_format([{"role": "model", "parts": []}]) == "gemini"
    assert detect_format([{"role": "user", "content": "hi"}]) == "anthropic"


def test_images_are_sized_by_gemini_rule() -> None:
    sizer = Sizer(default_estimator(), provider="gemini")
    small = {"parts": [{"inlineData": {"mimeType": "image/png", "data": png(300, 300)}}]}
    large = {"parts": [{"inlineData": {"mimeType": "image/png", "data": png(3000, 3000)}}]}
    assert SPEC.scan(small, 0, sizer).tokens < SPEC.scan(large, 0, sizer).tokens
    assert SPEC.scan(large, 0, sizer).tokens >= 258 * 16  # 4 x 4 tiles of 768 px


# ------------------------------------------------------------------------- strictness

CALL = {"functionCall": {"name": "read", "args": {}}}
RESPONSE = {"functionResponse": {"name": "read", "response": {"out": "x"}}}


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ({"role": "assistant", "parts": [{"text": "x"}]}, "role"),
        ({"role": 3, "parts": [{"text": "x"}]}, "role"),
        ({"role": "user"}, "parts"),
        ({"role": "user", "parts": []}, "parts"),
        ({"role": "user", "parts": "hi"}, "parts"),
        ({"role": "user", "parts": ["hi"]}, "parts[0]"),
        ({"role": "user", "parts": [{"text": 5}]}, "parts[0].text"),
        ({"role": "user", "parts": [{"text": "a", "inlineData": {}}]}, "parts[0]"),
        ({"role": "user", "parts": [CALL]}, "parts[0].functionCall"),
        ({"role": "model", "parts": [RESPONSE]}, "parts[0].functionResponse"),
        (
            {"role": "model", "parts": [{"functionCall": {"args": {}}}]},
            "parts[0].functionCall.name",
        ),
        (
            {"role": "model", "parts": [{"functionCall": {"name": "r", "args": []}}]},
            "parts[0].functionCall.args",
        ),
        (
            {"role": "user", "parts": [{"functionResponse": {"name": "r"}}]},
            "parts[0].functionResponse.response",
        ),
        (
            {"role": "user", "parts": [{"functionResponse": {"name": "r", "response": "x"}}]},
            "parts[0].functionResponse.response",
        ),
        (
            {"role": "user", "parts": [{"inlineData": {"data": "AA=="}}]},
            "parts[0].inlineData.mimeType",
        ),
        ({"role": "user", "parts": [{"text": "a", "thought": "yes"}]}, "parts[0].thought"),
        (
            {"role": "model", "parts": [{"text": "a", "thoughtSignature": 1}]},
            "parts[0].thoughtSignature",
        ),
    ],
)
def test_bad_contents_say_where(content: Any, where: str) -> None:
    contents = [{"role": "user", "parts": [{"text": "start"}]}, content]
    with pytest.raises(ConversationError) as caught:
        fit(contents, budget=10_000, format="gemini")
    assert caught.value.index == 1
    assert caught.value.field == where


def _round(*names: str, answers: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    calls = [{"functionCall": {"name": n, "args": {}}} for n in names]
    replies = [
        {"functionResponse": {"name": n, "response": {"out": n}}}
        for n in (names if answers is None else answers)
    ]
    return [{"role": "model", "parts": calls}, {"role": "user", "parts": replies}]


START = [{"role": "user", "parts": [{"text": "go"}]}]


@pytest.mark.parametrize(
    ("contents", "index"),
    [
        # fewer responses than calls: "the number of function response parts is equal..."
        ([*START, *_round("a", "b", answers=("a",))], 1),
        # a response to a call the turn before did not make
        ([*START, *_round("a", answers=("b",))], 2),
        ([*START, *_round("a", answers=("a", "a"))], 2),
        # a response turn that does not follow its call turn
        ([*START, *_round("a"), {"role": "user", "parts": [RESPONSE]}], 3),
        (
            [
                *START,
                _round("read")[0],
                {"role": "user", "parts": [{"text": "?"}]},
                _round("read")[1],
            ],
            1,
        ),
        # a call turn never answered
        ([*START, _round("a")[0]], 1),
    ],
)
def test_pairing_is_the_apis_rule(contents: list[dict[str, Any]], index: int) -> None:
    assert gemini_rejection(contents) is not None
    with pytest.raises(ConversationError) as caught:
        fit(contents, budget=10_000, format="gemini")
    assert caught.value.index == index


def test_pairing_by_name_and_order_takes_any_order_and_ids() -> None:
    model = {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "a", "args": {}, "id": "1"}},
            {"functionCall": {"name": "b", "args": {}}},
        ],
    }
    user = {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "b", "response": {}}},
            {"functionResponse": {"name": "a", "response": {}}},  # no id: matched by name
        ],
    }
    contents = [*START, model, user]
    assert gemini_rejection(contents) is None
    assert fit(contents, budget=10_000, format="gemini").messages == contents


# ------------------------------------------------------------------------- fitting contract


def _results(contents: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    sizer = Sizer(default_estimator(), provider="gemini")
    return [r for i, c in enumerate(contents) for r in SPEC.scan(c, i, sizer).results]


def _clearable(results: list[tuple[str, int, int]], budget: int, preset: str) -> set[str]:
    """Results outside the protected tail and at least twice the size of the note (see
    tests/test_fitting_properties.py)."""
    protected = total = 0
    for _, tokens, _ in reversed(results):
        if preset == "windowfit-lean":
            if protected == 3:
                break
        elif protected and total + tokens > budget / 4:
            break
        total += tokens
        protected += 1
    return {r[0] for r in results[: len(results) - protected] if r[1] >= 2 * r[2]}


def _check_one(contents: list[dict[str, Any]], budget: int, preset: str) -> FitResult | None:
    before = copy.deepcopy(contents)
    try:
        result = fit(contents, budget=budget, settings=preset, format="gemini")
    except ContextOverflowError:
        assert contents == before, "fit changed its input"
        return None
    out, report = result.messages, result.report
    assert contents == before, "fit changed its input"
    assert report.tokens_after <= budget
    assert size(out) == report.tokens_after
    assert gemini_rejection(out) is None, gemini_rejection(out)
    assert (
        out[0] is contents[0]
        or out[0]["parts"][: len(contents[0]["parts"])] == contents[0]["parts"]
    )
    if report.tokens_before <= budget:
        assert report.stage == 0
        assert all(a is b for a, b in zip(out, contents, strict=True))
    # Model turns (their thoughts and signatures) are sent as given, never rewritten; the
    # only other model turn is the trimmed-conversation note.
    given_ids = {id(c) for c in contents}
    for sent in out:
        if sent.get("role") == "model" and id(sent) not in given_ids:
            assert sent["parts"] == [{"text": TRIMMED_CONVERSATION_NOTE}]
    results = _results(contents)
    cleared = set(report.cleared)
    assert all(k in {r[0] for r in results} for k in cleared)
    if results:
        assert results[-1][0] not in cleared, "the newest result was cleared"
    assert cleared <= _clearable(results, budget, preset), (
        "a protected or too-small result was cleared"
    )
    cleared_sent = sum(is_cleared(r) for c in out for r in responses_of(c))
    kept_keys = cleared - _dropped_keys(contents, report.dropped)
    assert cleared_sent == len(kept_keys)
    return result


def _dropped_keys(contents: list[dict[str, Any]], dropped: tuple[int, ...]) -> set[str]:
    sizer = Sizer(default_estimator(), provider="gemini")
    return {r[0] for i in dropped for r in SPEC.scan(contents[i], i, sizer).results}


@settings(max_examples=60)
@given(
    contents=gemini_conversations(), fraction=st.floats(0.05, 1.2), preset=st.sampled_from(PRESETS)
)
def test_single_request_contract(
    contents: list[dict[str, Any]], fraction: float, preset: str
) -> None:
    budget = max(1, int(size(contents) * fraction))
    _check_one(contents, budget, preset)


@settings(max_examples=40)
@given(
    contents=gemini_conversations(), fraction=st.floats(0.1, 0.9), preset=st.sampled_from(PRESETS)
)
def test_growing_conversation_is_cache_stable(
    contents: list[dict[str, Any]], fraction: float, preset: str
) -> None:
    """The cleared set only grows, the cut only moves forward, and while neither changes
    each request starts with the previous one."""
    budget = max(1, int(size(contents) * fraction))
    previous: FitResult | None = None
    for point in request_points(contents):
        prefix = contents[:point]
        result = _check_one(prefix, budget, preset)
        if result is None:
            previous = None
            continue
        if previous is not None and preset != "seed":
            old, now = previous.report, result.report
            assert set(old.cleared) <= set(now.cleared) | _dropped_keys(prefix, now.dropped)
            if old.dropped:
                assert now.dropped and max(now.dropped) >= max(old.dropped), (
                    "the cut moved backward"
                )
            if set(old.cleared) == set(now.cleared) and old.dropped == now.dropped:
                n = len(previous.messages)
                assert result.messages[:n] == previous.messages, "prefix broke without a change"
        previous = result


@settings(max_examples=30)
@given(contents=gemini_conversations(), fraction=st.floats(0.1, 0.9))
def test_cache_never_changes_an_answer(contents: list[dict[str, Any]], fraction: float) -> None:
    budget = max(1, int(size(contents) * fraction))
    warm: list[Any] = []
    for point in request_points(contents):
        try:
            warm.append(fit(contents[:point], budget=budget, format="gemini").messages)
        except ContextOverflowError:
            warm.append(None)
    for point, expected in zip(request_points(contents), warm, strict=True):
        fresh = json.loads(json.dumps(contents[:point]))
        with contextlib.suppress(ContextOverflowError):
            assert fit(fresh, budget=budget, format="gemini").messages == expected


def test_clearing_keeps_name_id_and_signature() -> None:
    big = "lorem ipsum " * 800
    contents: list[dict[str, Any]] = [*START]
    for k in range(6):
        contents.append(
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "read", "args": {"n": k}, "id": f"c{k}"},
                        "thoughtSignature": "c2ln",
                    }
                ],
            }
        )
        contents.append(
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "read", "id": f"c{k}", "response": {"out": big}}}
                ],
            }
        )
    result = fit(contents, budget=size(contents) // 2, format="gemini")
    assert result.report.stage == 1 and result.report.cleared
    first = result.messages[2]["parts"][0]["functionResponse"]
    assert first == {"name": "read", "id": "c0", "response": NOTE_RESPONSE}
    assert all(
        m is c for m, c in zip(result.messages, contents, strict=True) if m["role"] == "model"
    )


# ------------------------------------------------------------------------- the dialect


def test_read_and_write_request_keep_every_field() -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "tools": [{"functionDeclarations": [{"name": "read"}]}],
        "generationConfig": {"maxOutputTokens": 256, "temperature": 0.2},
        "safetySettings": [],
    }
    parts = DIALECT.read_request(body)
    assert parts.messages is body["contents"]
    assert parts.max_output_tokens == 256
    assert parts.tools == body["tools"]
    assert parts.system == body["systemInstruction"]
    new = [{"role": "user", "parts": [{"text": "bye"}]}]
    out = DIALECT.write_request(body, new, None)
    assert out == {**body, "contents": new} and body["contents"][0]["parts"][0]["text"] == "hi"
    snake = {"contents": [], "generation_config": {"max_output_tokens": 9}}
    assert DIALECT.read_request(snake).max_output_tokens == 9
    with pytest.raises(ConversationError) as caught:
        DIALECT.read_request({"generationConfig": {"maxOutputTokens": "9"}, "contents": []})
    assert caught.value.field == "generationConfig.maxOutputTokens"
    assert DIALECT.output_limit_field == "generationConfig.maxOutputTokens"


def test_usage_reads_usage_metadata() -> None:
    response = {
        "candidates": [],
        "usageMetadata": {
            "promptTokenCount": 1000,
            "candidatesTokenCount": 40,
            "cachedContentTokenCount": 768,
            "thoughtsTokenCount": 60,
            "totalTokenCount": 1100,
        },
    }
    assert DIALECT.usage(response) == Usage(1000, 100, 768, 0, 60)
    assert DIALECT.stream_usage({"candidates": []}) is None
    assert DIALECT.stream_usage(response) == Usage(1000, 100, 768, 0, 60)


def test_overflow_body_is_geminis_and_is_recognised() -> None:
    status, body = DIALECT.overflow_error(1_200_293, 1_048_576)
    assert status == 400
    assert body == {
        "error": {
            "code": 400,
            "message": "The input token count (1200293) exceeds the maximum number of tokens "
            "allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    }
    assert DIALECT.is_overflow(status, body)
    assert not DIALECT.is_overflow(400, {"error": {"message": "API key not valid."}})
    info = classify_error(status=status, body=body)
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert (info.prompt_tokens, info.limit) == (1_200_293, 1_048_576)
