"""windowfit.integrations.langchain: a real LangChain v1 agent (create_agent, ChatOpenAI
over HTTP) against the simulated provider, and the message mapping both ways."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import ContextEditingMiddleware
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import windowfit
from windowfit.errors import ContextOverflowError, ConversationError, SettingsError
from windowfit.integrations._langchain_messages import from_chat, restore, to_chat
from windowfit.integrations.langchain import (
    SAFETY_NET,
    WindowfitEdit,
    WindowfitMiddleware,
    token_counter,
)
from windowfit.server import SimServer
from windowfit.wrap import UsageRecord

from frameworks import (
    BUDGET,
    MAX_TOKENS,
    MODEL,
    REPLY,
    ROUNDS,
    TASK,
    assert_never_rejected,
    assert_rejected_too_long,
    chapter,
    sim_config,
)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(sim_config()) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(sim: SimServer) -> None:
    sim.reset()


@tool
def read_chapter(number: int) -> str:
    """Read one chapter of the book."""
    return chapter(number)


def _agent(sim: SimServer, middleware: list[Any]) -> Any:
    model = ChatOpenAI(
        model=MODEL,
        base_url=sim.openai_url,
        api_key="sk-langchain-test",
        max_retries=0,
        max_tokens=MAX_TOKENS,
    )
    return create_agent(
        model, [read_chapter], system_prompt="You read books.", middleware=middleware
    )


CONFIG = {"recursion_limit": 4 * ROUNDS}


def _check_finished(result: dict[str, Any]) -> None:
    messages = result["messages"]
    assert messages[-1].content == REPLY
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == ROUNDS
    # The agent's state keeps the full history: nothing cleared there.
    assert [m.content for m in results] == [chapter(n) for n in range(1, ROUNDS + 1)]


@pytest.mark.slow
def test_agent_finishes_inside_the_window(sim: SimServer) -> None:
    reports: list[windowfit.FitReport] = []
    usages: list[UsageRecord] = []
    middleware = WindowfitMiddleware(budget=BUDGET, on_fit=reports.append, on_usage=usages.append)
    result = _agent(sim, [middleware]).invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    _check_finished(result)
    assert_never_rejected(sim.stats())
    assert len(reports) == ROUNDS + 1
    assert max(r.stage for r in reports) >= 1  # fitting had work to do
    assert all(r.tokens_after <= r.budget <= BUDGET for r in reports)
    # Learned from usage_metadata: the calibrator saw the provider's counts.
    assert middleware.shaper.state.stats.last_usage is not None
    assert middleware.shaper.state.stats.last_usage.input_tokens > 0
    assert len(usages) == ROUNDS + 1 and all(u.input_tokens > 0 for u in usages)


@pytest.mark.slow
def test_agent_finishes_inside_the_window_async(sim: SimServer) -> None:
    agent = _agent(sim, [WindowfitMiddleware(budget=BUDGET)])
    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage(TASK)]}, CONFIG))
    _check_finished(result)
    assert_never_rejected(sim.stats())


@pytest.mark.slow
def test_without_windowfit_the_provider_refuses(sim: SimServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _agent(sim, []).invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    assert windowfit.is_context_overflow(caught.value)
    assert_rejected_too_long(sim.stats())


@pytest.mark.slow
def test_context_edit_keeps_the_agent_inside_the_window(sim: SimServer) -> None:
    # The edit does not see the system prompt or the tools: leave room for them.
    edit = WindowfitEdit(budget=BUDGET - 1_000)
    agent = _agent(sim, [ContextEditingMiddleware(edits=[edit])])
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    _check_finished(result)
    assert_never_rejected(sim.stats())


def test_safety_net_added_to_the_request_only(sim: SimServer) -> None:
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return AIMessage("ok")

    request = _request([HumanMessage("hi")], system=SystemMessage("Be brief."))
    WindowfitMiddleware(budget=BUDGET).wrap_model_call(request, handler)
    assert seen[0].system_message.content == f"Be brief.\n\n{SAFETY_NET}"
    assert request.system_message.content == "Be brief."
    seen.clear()
    WindowfitMiddleware(budget=BUDGET, safety_net=False).wrap_model_call(request, handler)
    assert seen[0].system_message.content == "Be brief."


def _request(messages: list[Any], system: Any = None) -> Any:
    from langchain.agents.middleware import ModelRequest

    model = ChatOpenAI(model=MODEL, api_key="sk-unused", base_url="http://127.0.0.1:9/v1")
    return ModelRequest(
        model=model,
        messages=messages,
        system_message=system,
        tool_choice=None,
        tools=[read_chapter],
        response_format=None,
        state={"messages": messages},
        runtime=None,
    )


def _long_history(rounds: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage(TASK)]
    for n in range(1, rounds + 1):
        call = {"id": f"call_{n}", "name": "read_chapter", "args": {"number": n}}
        out.append(AIMessage("", tool_calls=[call], response_metadata={"n": n}))
        out.append(ToolMessage(chapter(n), tool_call_id=f"call_{n}", artifact={"n": n}))
    return out


def test_fitting_never_mutates_the_frameworks_messages() -> None:
    history = _long_history(20)
    before = copy.deepcopy(history)
    seen: list[Any] = []
    middleware = WindowfitMiddleware(budget=16_000)  # stage 1: results cleared, none cut
    middleware.wrap_model_call(_request(history), lambda r: seen.append(r) or AIMessage("ok"))
    assert history == before
    sent = seen[0].messages
    assert sent[0] is history[0]  # the first message kept, as the object given
    cleared = [
        m
        for m in sent
        if isinstance(m, ToolMessage) and m.content != m.artifact and "cleared" in str(m.content)
    ]
    assert cleared, "the budget needs clearing"
    for message in cleared:
        original = next(
            h for h in history if getattr(h, "tool_call_id", None) == message.tool_call_id
        )
        assert message is not original
        assert message.artifact == original.artifact  # every other field kept
        assert message.content == windowfit.CLEARED_RESULT_NOTE
    # Pairs intact: every ToolMessage sent answers a call sent before it.
    calls = set()
    for message in sent:
        if isinstance(message, AIMessage):
            calls |= {c["id"] for c in message.tool_calls}
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in calls


def test_budget_or_known_model_is_needed() -> None:
    middleware = WindowfitMiddleware()
    with pytest.raises(SettingsError, match="no context window is known"):
        middleware.wrap_model_call(_request([HumanMessage("hi")]), lambda r: AIMessage("ok"))


def test_nothing_fits_is_a_context_overflow() -> None:
    history = [HumanMessage(chapter(1) * 3)]
    with pytest.raises(ContextOverflowError):
        WindowfitMiddleware(budget=1_000).wrap_model_call(
            _request(history), lambda r: AIMessage("ok")
        )


def test_unpaired_tool_message_is_a_conversation_error() -> None:
    history = [HumanMessage("hi"), ToolMessage("x", tool_call_id="nowhere")]
    with pytest.raises(ConversationError):
        WindowfitMiddleware(budget=BUDGET).wrap_model_call(
            _request(history), lambda r: AIMessage("ok")
        )


def test_token_counter_with_trim_messages() -> None:
    history = _long_history(6)
    assert token_counter(history) > sum(len(chapter(n)) for n in range(1, 7)) // 6
    kept = trim_messages(history, max_tokens=10_000, token_counter=token_counter, strategy="last")
    assert token_counter(kept) <= 10_000
    assert token_counter([]) == 0


# --------------------------------------------------------------------------- the mapping

_text = st.text(min_size=0, max_size=40)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_args = st.dictionaries(st.text(min_size=1, max_size=8), _json_values, max_size=4)
_image = st.builds(
    lambda url: {"type": "image_url", "image_url": {"url": url}},
    st.sampled_from(["https://example.org/a.png", "data:image/png;base64,iVBORw0KGgo="]),
)
_parts = st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, _text) | _image, min_size=1, max_size=4
)
_content = _text | _parts
_call = st.builds(
    lambda i, name, args: {"id": f"call_{i}", "name": name, "args": args, "type": "tool_call"},
    st.integers(0, 99),
    st.sampled_from(["read_chapter", "search"]),
    _args,
)
_messages = st.one_of(
    st.builds(HumanMessage, content=_content),
    st.builds(SystemMessage, content=_content),
    st.builds(
        lambda c, calls: AIMessage(content=c, tool_calls=calls), _text, st.lists(_call, max_size=3)
    ),
    st.builds(
        lambda c, i: ToolMessage(content=c, tool_call_id=f"call_{i}"), _content, st.integers(0, 99)
    ),
)


@given(_messages)
def test_chat_mapping_round_trips(message: BaseMessage) -> None:
    raw = to_chat(message)
    json.dumps(raw)  # plain JSON, as sent
    back = from_chat(raw)
    assert type(back) is type(message)
    assert back.content == message.content
    if isinstance(message, AIMessage):
        assert [(c["id"], c["name"], c["args"]) for c in back.tool_calls] == [
            (c["id"], c["name"], c["args"]) for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        assert back.tool_call_id == message.tool_call_id


STANDARD_IMAGES = [
    {"type": "image", "url": "https://example.org/cat.png"},
    {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
]


@pytest.mark.parametrize("image", STANDARD_IMAGES)
def test_standard_image_blocks_are_images_to_windowfit_and_come_back_as_given(
    image: dict[str, Any],
) -> None:
    message = HumanMessage(content=[{"type": "text", "text": "look"}, image])
    raw = to_chat(message)
    assert raw["content"][1]["type"] == "image_url"
    assert restore(raw, message, changed=False) is message
    # Changed (the trimmed note appended): the image block is the original one again.
    raw["content"].append({"type": "text", "text": windowfit.TRIMMED_CONVERSATION_NOTE})
    back = restore(raw, message, changed=True)
    assert back.content[:2] == message.content
    assert back.content[1] is message.content[1]
    assert message.content == [{"type": "text", "text": "look"}, image]


def test_unknown_message_kinds_are_conversation_errors() -> None:
    from langchain_core.messages import RemoveMessage

    with pytest.raises(ConversationError, match="RemoveMessage"):
        to_chat(RemoveMessage(id="x"), 3)
