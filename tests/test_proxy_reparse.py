"""The proxy reads a body that begins with an earlier body's bytes from its new part only,
and what it reads is what parsing the whole body gives, for any body."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowfit.fitter import Fitter
from windowfit.formats import DIALECTS
from windowfit.proxy import _fit
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


# --------------------------------------------------------------------------- the scan reused


def _edited(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` whose first text (under ``content`` or ``text``) is changed."""
    copy = json.loads(json.dumps(message))

    def change(node: Any) -> bool:
        if isinstance(node, dict):
            for key in ("content", "text"):
                if isinstance(node.get(key), str):
                    node[key] += " (edited)"
                    return True
            return any(change(v) for v in node.values())
        if isinstance(node, list):
            return any(change(v) for v in node)
        return False

    change(copy)
    return copy


_STEPS = st.lists(
    st.tuples(st.sampled_from(["grow", "grow", "edit", "shrink"]), st.integers(0, 10**6)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None)
@given(
    conversation=conversations(),
    budget=st.integers(min_value=300, max_value=6_000),
    steps=_STEPS,
)
def test_a_conversation_grown_or_edited_is_fitted_as_the_fitter_fits_it_alone(
    conversation: tuple[str, list[dict[str, Any]]], budget: int, steps: list[tuple[str, int]]
) -> None:
    """The proxy's Fitter reuses the scan of the messages a body shares, as objects, with
    the body before (``Fitter._fit_scanned``); whatever the conversation does between
    requests (grows, has a message edited, shrinks), what it forwards is what a fresh
    ``Fitter().fit`` of the same request gives, and what a fresh proxy gives."""
    fmt, messages = conversation
    dialect = DIALECTS["anthropic" if fmt == "anthropic" else "openai"]
    model = "claude-sonnet-4-5" if fmt == "anthropic" else "gpt-4o"
    config = ProxyConfig(budget=budget)
    with patch.object(_fit, "KEPT_MIN_BYTES", 0):  # every body through the keeping Fitter
        proxy = RequestFitter(config, ConversationLearning())
        proxy.bodies = BodyParser(min_bytes=0)
        end = max(1, len(messages) // 2)
        current = messages[:end]
        for step, at in [("grow", 0), *steps]:
            if step == "grow":
                end = min(len(messages), end + 1 + at % 3)
                current = current + messages[len(current) : end]
            elif step == "edit":
                i = at % len(current)
                current = [*current[:i], _edited(current[i]), *current[i + 1 :]]
            else:
                current = current[: max(1, len(current) - 1 - at % 3)]
            body = {"model": model, "max_tokens": 50, "messages": current, "stream": True}
            raw = json.dumps(body).encode()
            got = proxy.fit(dialect, raw)
            alone = RequestFitter(config, ConversationLearning()).fit(dialect, raw)
            assert got.body == alone.body and got.report == alone.report
            assert got.refusal == alone.refusal and got.skipped == alone.skipped
            if got.report is not None and got.parts is not None:
                limits = proxy.limits(got.parts)
                assert limits is not None
                fresh = Fitter().fit(
                    json.loads(raw)["messages"],
                    budget=limits[0],
                    limit=limits[1],
                    format=dialect.format.name,
                    estimator=_fit._estimator(model),
                )
                assert fresh.report == got.report
                forwarded = json.loads(got.body)["messages"]
                assert json.loads(json.dumps(fresh.messages)) == forwarded


def _anthropic_turns(n: int, tag: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": f"task {tag} " + "word " * 300}]
    for k in range(n):
        call = f"toolu_{tag}_{k}"
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "Bash", "input": {"k": k}}],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": f"{tag} " * 400}
                ],
            }
        )
    return out


def test_the_proxy_scans_only_the_messages_a_body_adds() -> None:
    """A 1 MB-class conversation growing by one tool round per request: after the first,
    each request's fit takes the facts of every message it shares with the body before
    from that body's scan (counted by the Fitter), and scans only the new ones."""
    dialect = DIALECTS["anthropic"]
    proxy = RequestFitter(ProxyConfig(), ConversationLearning())
    proxy.bodies = BodyParser(min_bytes=0)
    messages = _anthropic_turns(40, "a")
    lengths = [61, 63, 65, 67]
    for end in lengths:
        raw = json.dumps({"model": "claude-sonnet-4-6", "messages": messages[:end]}).encode()
        with patch.object(_fit, "KEPT_MIN_BYTES", 0):
            assert proxy.fit(dialect, raw).report is not None
    # each body shares all of the one before's messages, as objects: 61, then 63, then 65
    assert proxy.fitter.facts_reused == sum(lengths[:-1])


def test_a_scan_is_reused_only_for_the_very_objects_and_sizer_it_came_from() -> None:
    """What ``_fit_scanned`` is given cannot make an answer wrong: facts are taken only
    for leading messages that are the objects scanned, by the same Sizer; another
    conversation's record, an equal copy of the messages, another estimator, or a record
    whose messages differ from some point on are used up to that point at most."""
    from windowfit.profiles import estimator_for

    fitter = Fitter()
    first = _anthropic_turns(6, "b")
    _, scanned = fitter._fit_scanned(None, first, budget=100_000)
    assert fitter.facts_reused == 0

    def check(messages: list[dict[str, Any]], reused: int, **kwargs: Any) -> None:
        before = fitter.facts_reused
        got, _ = fitter._fit_scanned(scanned, messages, budget=100_000, **kwargs)
        assert fitter.facts_reused - before == reused
        alone = Fitter().fit(messages, budget=100_000, **kwargs)
        assert got.report == alone.report and got.messages == alone.messages

    check(first + _anthropic_turns(1, "c")[1:], len(first))  # grown: all of the first
    check(json.loads(json.dumps(first)), 0)  # an equal copy: other objects
    check(_anthropic_turns(6, "d"), 0)  # another conversation of the same shape
    check([first[0], _edited(first[1]), *first[2:]], 1)  # edited at 1: only message 0
    check(first, 0, estimator=estimator_for(model="gpt-4o"))  # another estimator's Sizer
    check(first[:3], 3)  # shorter: what it holds
