"""The proxy reads a body that begins with an earlier body's bytes from its new part only,
and what it reads is what parsing the whole body gives, for any body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowfit.formats import DIALECTS
from windowfit.proxy._config import ProxyConfig
from windowfit.proxy._fit import RequestFitter
from windowfit.proxy._json import loads
from windowfit.proxy._learning import ConversationLearning
from windowfit.proxy._reparse import BodyParser

from conversations import conversations

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = st.text(max_size=6).filter(lambda k: k != "messages")
_STYLES = st.sampled_from(
    [{}, {"separators": (",", ":")}, {"indent": 1}, {"indent": 0, "separators": (" ,", " : ")}]
)


def _body(head: dict[str, Any], messages: list[Any], tail: dict[str, Any]) -> dict[str, Any]:
    return {**head, "messages": messages, **{k: v for k, v in tail.items() if k not in head}}


@st.composite
def _growing(draw: st.DrawFn) -> list[bytes]:
    """Bodies of one conversation: each the one before with messages appended, now and
    then one of them changed (an edit, a moved cache breakpoint) or the tail changed."""
    head = draw(st.dictionaries(_KEYS, _VALUES, max_size=3))
    tail = draw(st.dictionaries(_KEYS, _VALUES, max_size=3))
    messages = draw(st.lists(_VALUES, max_size=4))
    style = draw(_STYLES)
    bodies = [json.dumps(_body(head, messages, tail), **style).encode()]
    for _ in range(draw(st.integers(1, 4))):
        messages = messages + draw(st.lists(_VALUES, max_size=3))
        if messages and draw(st.booleans()):
            at = draw(st.integers(0, len(messages) - 1))
            messages = [*messages[:at], draw(_VALUES), *messages[at + 1 :]]
        if draw(st.booleans()):
            tail = draw(st.dictionaries(_KEYS, _VALUES, max_size=3))
        bodies.append(json.dumps(_body(head, messages, tail), **style).encode())
    return bodies


def _same_reading(parser: BodyParser, raw: bytes) -> None:
    try:
        expected = loads(raw)
    except (ValueError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            parser.loads(raw, "messages")
        return
    value, finite = parser.loads(raw, "messages")
    assert repr(value) == repr(expected[0])  # types, key order, NaN alike
    assert finite is expected[1]


@settings(max_examples=200)
@given(bodies=_growing(), cut=st.integers(0, 40), junk=st.sampled_from([b"", b"x", b"]", b",1"]))
def test_a_body_read_from_an_earlier_ones_values_is_the_whole_parse(
    bodies: list[bytes], cut: int, junk: bytes
) -> None:
    parser = BodyParser(min_bytes=0)
    for raw in bodies:
        _same_reading(parser, raw)
    last = bodies[-1]
    _same_reading(parser, last[: max(0, len(last) - cut)] + junk)  # not JSON, mostly


def test_a_grown_body_is_parsed_from_its_new_bytes_only() -> None:
    parser = BodyParser(min_bytes=0)
    messages: list[Any] = [{"role": "user", "content": "task " * 100}]
    parser.loads(
        json.dumps({"model": "m", "messages": messages, "stream": True}).encode(), "messages"
    )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    grown = json.dumps({"model": "m", "messages": messages, "stream": True}).encode()
    value, finite = parser.loads(grown, "messages")
    assert value == json.loads(grown) and finite
    assert parser.reused == 1 and parser.reused_bytes > 500  # the task was not parsed again


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "messages": [{"a": 1}], "messages": [2]}',  # the array twice
        b'{"model": "m", "messages": "text"}',  # not an array
        b'[{"messages": []}]',  # not an object
        '{"messages": [{"text": "caf\u00e9"}]}'.encode(),  # raw UTF-8
        b'{"messages": [NaN]}',  # not finite
    ],
)
def test_bodies_of_other_shapes_are_parsed_whole_and_not_kept(raw: bytes) -> None:
    parser = BodyParser(min_bytes=0)
    for _ in range(2):
        assert repr(parser.loads(raw, "messages")) == repr(loads(raw))
    assert parser.reused == 0


def test_what_is_kept_is_bounded_by_bytes() -> None:
    parser = BodyParser(max_bytes=30_000, min_bytes=0)
    bodies = [json.dumps({"messages": [f"{k} " + "x" * 2000]}).encode() for k in range(10)]
    for raw in bodies:  # ten conversations of about 2 KB each
        parser.loads(raw, "messages")
    kept = [s.raw for s in parser._seen.values()]
    assert kept == bodies[-len(kept) :]  # the most recent ones
    assert 0 < parser._bytes <= 30_000 and len(kept) < 10
    parser.loads(json.dumps({"messages": ["y" * 20_000]}).encode(), "messages")  # too big
    assert all(len(raw) < 20_000 for raw in (s.raw for s in parser._seen.values()))


@settings(max_examples=25, deadline=None)
@given(conversation=conversations(), budget=st.integers(min_value=300, max_value=6_000))
def test_a_growing_conversation_is_fitted_as_each_request_alone_would_be(
    conversation: tuple[str, list[dict[str, Any]]], budget: int
) -> None:
    """One RequestFitter sees a conversation grow request by request (its bodies read
    from the previous one's values where they begin alike), a fresh one sees each
    request alone: the same bytes forwarded, the same report, the same refusal."""
    fmt, messages = conversation
    dialect = DIALECTS["anthropic" if fmt == "anthropic" else "openai"]
    model = "claude-sonnet-4-5" if fmt == "anthropic" else "gpt-4o"
    config = ProxyConfig(budget=budget)
    seen = RequestFitter(config, ConversationLearning())
    seen.bodies = BodyParser(min_bytes=0)
    for end in range(1, len(messages) + 1):
        body = {"model": model, "max_tokens": 50, "messages": messages[:end], "stream": True}
        raw = json.dumps(body).encode()
        got = seen.fit(dialect, raw)
        alone = RequestFitter(config, ConversationLearning()).fit(dialect, raw)
        assert got.body == alone.body and got.report == alone.report
        assert got.refusal == alone.refusal and got.skipped == alone.skipped
    assert len(messages) < 3 or seen.bodies.reused > 0
