"""The Fitter as a long-running service: shared between threads and tasks, caches true to
content and bounded by memory, and every input either fitted or refused by windowfit's
own errors."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import pickle
import sys
import threading
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowfit
from windowfit import ContextOverflowError, ConversationError, Fitter, WindowfitError, fit
from windowfit.formats import get_format
from windowfit.logs import read_runs
from windowfit.sizing import Sizer

from conversations import conversations, provider_rejection, request_points


def _answer(result: windowfit.FitResult) -> str:
    return json.dumps([result.report.to_dict(), result.messages], sort_keys=True)


def _agent_run(tag: str, rounds: int = 40, size: int = 3000) -> list[dict[str, Any]]:
    """A sub-agent's run: one instruction, then tool rounds with large results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {tag}: read them all."}]
    for k in range(rounds):
        call = f"{tag}-{k}"
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "read", "input": {"n": k}}],
            }
        )
        body = f"chunk {k} of {tag} " + "lorem ipsum dolor " * (size // 18)
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": body}],
            }
        )
    return messages


# --------------------------------------------------------------------------------------
# The scanner and the neutral path agree


@given(conversations())
@settings(max_examples=40)
def test_scan_sizes_equal_the_neutral_sizes(case: tuple[str, list[dict[str, Any]]]) -> None:
    fmt, messages = case
    spec = get_format(fmt)
    sizer = Sizer(provider=fmt)
    for i, raw in enumerate(messages):
        facts = spec.scan(raw, i, sizer)
        size = sizer.size_of(spec.from_message(raw, i))
        assert facts.tokens == size.tokens
        assert facts.calls == size.calls
        assert facts.results == size.results


def test_scan_sizes_equal_the_neutral_sizes_on_real_runs(shared_data: Path) -> None:
    checked = 0
    for source in ("claude_code", "mini_swe_agent_deepseek", "swe_agent", "tau_bench"):
        for run in read_runs(shared_data / "trajectories" / source)[:12]:
            spec = get_format(run.format)
            sizer = Sizer(provider=run.format)
            for i, raw in enumerate(run.messages):
                facts = spec.scan(raw, i, sizer)
                size = sizer.size_of(spec.from_message(raw, i))
                assert (facts.tokens, facts.calls, facts.results) == (
                    size.tokens,
                    size.calls,
                    size.results,
                ), f"{run.name} message {i}"
                checked += 1
    assert checked > 1000


# --------------------------------------------------------------------------------------
# Threads and tasks


def _prefix_jobs(messages: list[dict[str, Any]], budget: int) -> list[tuple[int, int]]:
    return [(point, budget) for point in request_points(messages)]


@pytest.mark.parametrize("shared_fitter", [True, False], ids=["shared-Fitter", "windowfit.fit"])
@pytest.mark.parametrize("conversations_count", [1, 4], ids=["one-conversation", "four"])
def test_concurrent_threads_give_the_sequential_answers(
    shared_fitter: bool, conversations_count: int
) -> None:
    runs = [_agent_run(f"c{k}", rounds=30) for k in range(conversations_count)]
    budget = 25_000
    jobs = [(r, point) for r in range(len(runs)) for point, _ in _prefix_jobs(runs[r], budget)]
    # Sequential answers, each from a Fitter that has seen nothing: the pure function.
    expected = {}
    for r, point in jobs:
        try:
            expected[(r, point)] = _answer(Fitter().fit(runs[r][:point], budget=budget))
        except ContextOverflowError:
            expected[(r, point)] = "overflow"
    fitter = Fitter() if shared_fitter else None
    errors: list[BaseException] = []

    def work(job: tuple[int, int]) -> tuple[tuple[int, int], str]:
        r, point = job
        call = fitter.fit if fitter is not None else fit
        try:
            return job, _answer(call(runs[r][:point], budget=budget))
        except ContextOverflowError:
            return job, "overflow"

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            for _ in range(3):
                for job, answer in pool.map(work, jobs * 2):
                    assert answer == expected[job], f"job {job}"
    except BaseException as exc:  # pragma: no cover - reported below
        errors.append(exc)
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors


def test_concurrent_asyncio_tasks_give_the_sequential_answers() -> None:
    runs = [_agent_run(f"t{k}", rounds=20) for k in range(3)]
    budget = 20_000
    jobs = [(r, p) for r in range(3) for p in request_points(runs[r])]
    expected = {}
    for r, p in jobs:
        try:
            expected[(r, p)] = _answer(Fitter().fit(runs[r][:p], budget=budget))
        except ContextOverflowError:
            expected[(r, p)] = "overflow"
    fitter = Fitter()

    def one(r: int, p: int) -> str:
        try:
            return _answer(fitter.fit(runs[r][:p], budget=budget))
        except ContextOverflowError:
            return "overflow"

    async def main() -> list[str]:
        return await asyncio.gather(*(asyncio.to_thread(one, r, p) for r, p in jobs))

    answers = asyncio.run(main())
    assert answers == [expected[job] for job in jobs]


def test_threads_fitting_one_conversation_never_raise_on_valid_input() -> None:
    messages = _agent_run("same", rounds=60, size=2000)
    points = request_points(messages)
    failures: list[BaseException] = []
    fitter = Fitter()

    def hammer(offset: int) -> None:
        for point in points[offset::3]:
            try:
                fitter.fit(messages[:point], budget=30_000)
            except ContextOverflowError:
                pass
            except BaseException as exc:
                failures.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=hammer, args=(k % 3,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not failures, failures[:3]


# --------------------------------------------------------------------------------------
# Caches true to content


def test_editing_a_message_in_place_gives_the_answer_for_its_new_content() -> None:
    fitter = Fitter()
    m = [{"role": "user", "content": "hello"}]
    assert fitter.fit(m, budget=1000).report.tokens_after < 50
    m[0]["content"] = "word " * 24_000
    with pytest.raises(ContextOverflowError):
        fitter.fit(m, budget=1000)
    assert fit(m, budget=100_000).report.tokens_after > 25_000


def test_editing_a_tool_id_in_place_to_an_orphan_is_refused() -> None:
    fitter = Fitter()
    messages = _agent_run("edit", rounds=3)
    fitter.fit(messages, budget=100_000)
    messages[-1]["content"][0]["tool_use_id"] = "nobody"
    with pytest.raises(ConversationError, match="no matching tool call") as info:
        fitter.fit(messages, budget=100_000)
    assert info.value.index == len(messages) - 1
    assert info.value.field == "content[0].tool_use_id"


def test_editing_an_old_result_in_place_changes_what_is_sent() -> None:
    fitter = Fitter()
    messages = _agent_run("old", rounds=12)
    first = fitter.fit(messages, budget=10_000)
    messages[2]["content"][0]["content"] = "short now"
    second = fitter.fit(messages, budget=10_000)
    assert second.report.tokens_before < first.report.tokens_before
    assert second.messages[2] is messages[2] or "short now" not in json.dumps(first.messages)
    assert _answer(second) == _answer(Fitter().fit(messages, budget=10_000))


def test_a_fresh_copy_of_a_conversation_reuses_what_was_folded() -> None:
    fitter = Fitter()
    messages = _agent_run("copy", rounds=20)
    first = fitter.fit(messages, budget=15_000)
    again = fitter.fit(json.loads(json.dumps(messages)), budget=15_000)
    assert fitter.folds_reused == 1 and fitter.folds_built == 1
    assert json.dumps(again.messages) == json.dumps(first.messages)
    assert again.report == first.report


def test_the_output_holds_the_objects_of_this_call() -> None:
    fitter = Fitter()
    messages = _agent_run("objs", rounds=5)
    fitter.fit(messages, budget=100_000)
    copy_ = copy.deepcopy(messages)
    result = fitter.fit(copy_, budget=100_000)
    assert all(a is b for a, b in zip(result.messages, copy_, strict=True))


# --------------------------------------------------------------------------------------
# Memory


def _big_conversation(k: int, messages: int = 400, tokens: int = 1_000_000) -> list[dict[str, Any]]:
    body = "def handler(request):\n    return render(request, 'page.html')\n"
    per_result = tokens * 4 // (messages // 2)
    chunk = (body * (per_result // len(body) + 1))[:per_result]
    run: list[dict[str, Any]] = [{"role": "user", "content": f"Task {k}"}]
    for i in range(messages // 2 - 1):
        run.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "cat", "input": {"i": i}}],
            }
        )
        run.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": chunk + str(k)}
                ],
            }
        )
    return run


@pytest.mark.slow
def test_fitting_many_conversations_keeps_memory_bounded() -> None:
    import windowfit.fitting as fitting_module

    fitting_module._DEFAULT_FITTER = None  # as in a new process
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for k in range(100):
            messages = _big_conversation(k)
            fit(messages, budget=300_000)
            del messages
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
        fitting_module._DEFAULT_FITTER = None
    assert kept < 50 * 2**20, f"{kept / 2**20:.1f} MB kept"


@pytest.mark.parametrize("max_bytes", [0, 200_000, 2_000_000])
def test_what_a_fitter_keeps_stays_within_its_bound(max_bytes: int) -> None:
    fitter = Fitter(max_bytes=max_bytes)
    for k in range(30):
        fitter.fit(_agent_run(f"b{k}", rounds=15, size=400), budget=50_000)
        assert fitter.cached_bytes <= max_bytes


def test_a_fitter_kept_size_matches_what_tracemalloc_sees() -> None:
    """The byte accounting is an estimate; it must not be off by more than 2x."""
    messages = _agent_run("acct", rounds=300, size=50)
    fitter = Fitter()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fitter.fit(messages, budget=10**9)
        gc.collect()
        real = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert fitter.cached_bytes / 2 <= real <= fitter.cached_bytes * 2


def test_bad_max_bytes_is_a_settings_error() -> None:
    with pytest.raises(windowfit.SettingsError):
        Fitter(max_bytes=-1)


# --------------------------------------------------------------------------------------
# Strict validation


A = "anthropic"
OA = "openai"
CALL = {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "r", "input": {}}]}
RESULT = {"type": "tool_result", "tool_use_id": "c", "content": "ok"}

REJECTED: list[tuple[str, str, list[Any], dict[str, Any], int | None, str | None]] = [
    # (case, format, messages, extra kwargs, message index, field)
    (
        "result not first",
        A,
        [
            {"role": "user", "content": "go"},
            CALL,
            {"role": "user", "content": [{"type": "text", "text": "hi"}, RESULT]},
        ],
        {},
        2,
        "content[1]",
    ),
    (
        "result in assistant",
        A,
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": [RESULT]}],
        {},
        1,
        "content[0]",
    ),
    (
        "tool_use in user",
        A,
        [{"role": "user", "content": [CALL["content"][0]]}],
        {},
        0,
        "content[0]",
    ),
    (
        "opens with assistant",
        A,
        [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "go"}],
        {},
        0,
        "role",
    ),
    ("role is an object", A, [{"role": {"x": 1}, "content": "go"}], {}, 0, "role"),
    (
        "block type is an object",
        A,
        [{"role": "user", "content": [{"type": {"t": 1}}]}],
        {},
        0,
        "content[0].type",
    ),
    (
        "tool input a set",
        A,
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c", "name": "r", "input": {"s": {1, 2}}}],
            },
            {"role": "user", "content": [RESULT]},
        ],
        {},
        1,
        "content[0].input",
    ),
    (
        "tool input bytes",
        A,
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c", "name": "r", "input": {"b": b"x"}}],
            },
            {"role": "user", "content": [RESULT]},
        ],
        {},
        1,
        "content[0].input",
    ),
    (
        "tool input a list",
        A,
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c", "name": "r", "input": [1]}],
            },
            {"role": "user", "content": [RESULT]},
        ],
        {},
        1,
        "content[0].input",
    ),
    (
        "nested result",
        A,
        [
            {"role": "user", "content": "go"},
            CALL,
            {"role": "user", "content": [{**RESULT, "content": [RESULT]}]},
        ],
        {},
        2,
        "content[0].content[0]",
    ),
    (
        "huge int",
        A,
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c", "name": "r", "input": {"n": 10**5000}}],
            },
            {"role": "user", "content": [RESULT]},
        ],
        {},
        1,
        "content[0].input",
    ),
    (
        "NaN",
        A,
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c", "name": "r", "input": {"n": float("nan")}}
                ],
            },
            {"role": "user", "content": [RESULT]},
        ],
        {},
        1,
        "content[0].input",
    ),
    ("content null", A, [{"role": "user", "content": None}], {}, 0, "content"),
    (
        "openai tool_calls on user",
        OA,
        [{"role": "user", "content": "go", "tool_calls": []}],
        {},
        0,
        "tool_calls",
    ),
    (
        "openai tool first",
        OA,
        [{"role": "tool", "tool_call_id": "x", "content": "r"}],
        {},
        0,
        "tool_call_id",
    ),
    ("openai user content missing", OA, [{"role": "user"}], {}, 0, "content"),
    (
        "openai arguments not a string",
        OA,
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "r", "arguments": {"a": 1}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "x"},
        ],
        {},
        1,
        "tool_calls[0].function.arguments",
    ),
    ("system is a number", A, [{"role": "user", "content": "go"}], {"system": 5}, None, "system"),
    ("tools is a number", A, [{"role": "user", "content": "go"}], {"tools": 5}, None, "tools"),
    (
        "a tool is a string",
        A,
        [{"role": "user", "content": "go"}],
        {"tools": ["x"]},
        None,
        "tools[0]",
    ),
]


@pytest.mark.parametrize(
    ("fmt", "messages", "kwargs", "index", "field"),
    [case[1:] for case in REJECTED],
    ids=[case[0] for case in REJECTED],
)
def test_requests_the_provider_refuses_are_conversation_errors(
    fmt: str, messages: list[Any], kwargs: dict[str, Any], index: int | None, field: str | None
) -> None:
    with pytest.raises(ConversationError) as info:
        fit(messages, budget=10_000, format=fmt, **kwargs)
    assert info.value.index == index
    assert info.value.field == field


def test_deep_and_circular_structures_are_conversation_errors() -> None:
    deep: dict[str, Any] = {}
    for _ in range(1000):
        deep = {"d": deep}
    loop: list[Any] = []
    loop.append(loop)
    for value in (deep, {"loop": loop}):
        messages = [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c", "name": "r", "input": value}],
            },
            {"role": "user", "content": [RESULT]},
        ]
        with pytest.raises(ConversationError) as info:
            fit(messages, budget=10_000)
        assert info.value.index == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"settings": 5}, {"estimator": 5}, {"budget": "10"}, {"limit": -3}, {"format": 5}],
    ids=["settings", "estimator", "budget", "limit", "format"],
)
def test_bad_arguments_are_settings_errors(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"budget": 1000, **kwargs}
    with pytest.raises(windowfit.SettingsError):
        fit([{"role": "user", "content": "go"}], **args)


def test_consecutive_same_role_messages_are_accepted() -> None:
    messages = [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "three"},
    ]
    assert fit(messages, budget=1000).messages == messages


def _split_assistant_turns(rounds: int) -> list[dict[str, Any]]:
    """Anthropic conversations whose assistant turns come as two messages each: the tool
    call, then a text (or a second call) answered after both."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n in range(rounds):
        a, b = f"a{n}", f"b{n}"
        messages.append({"role": "assistant", "content": [_use(a)]})
        second = _use(b) if n % 2 else {"type": "text", "text": f"and step {n}"}
        messages.append({"role": "assistant", "content": [second]})
        results = [_result(a, "x" * 3000)] + ([_result(b, "y" * 1500)] if n % 2 else [])
        messages.append({"role": "user", "content": results})
    return messages


def _use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


@pytest.mark.parametrize("budget", [100_000, 6_000, 3_000, 1_800])
def test_anthropic_joins_consecutive_assistant_messages_so_fit_accepts_them(
    budget: int,
) -> None:
    """Anthropic combines consecutive same-role turns, so a call answered after the next
    assistant message is valid there; what fit sends is still valid."""
    messages = _split_assistant_turns(6)
    assert provider_rejection("anthropic", messages) is None
    result = fit(messages, budget=budget, format="anthropic")
    assert result.report.tokens_after <= budget
    assert provider_rejection("anthropic", result.messages) is None


def test_openai_does_not_join_assistant_messages_with_open_calls() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "assistant", "content": "and more"},
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ]
    assert provider_rejection("openai", messages) is not None
    with pytest.raises(windowfit.ConversationError, match="c1"):
        fit(messages, budget=10_000, format="openai")


def test_lone_surrogates_are_counted() -> None:
    result = fit([{"role": "user", "content": "a\ud800b" * 100}], budget=10_000)
    assert result.report.tokens_after > 100


# --------------------------------------------------------------------------------------
# User text beside tool results


def test_user_text_beside_tool_results_survives_stage_3() -> None:
    messages = _agent_run("mixed", rounds=30, size=2000)
    messages[-1]["content"].append({"type": "text", "text": "Also check the README, please."})
    for k in range(5):  # a few more rounds after the person spoke
        call = f"after-{k}"
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "r", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": "x" * 4000}],
            }
        )
    result = fit(messages, budget=6_000)
    assert result.report.stage >= 2
    sent = json.dumps(result.messages)
    assert "Also check the README, please." in sent
    assert provider_rejection("anthropic", result.messages) is None


# --------------------------------------------------------------------------------------
# Fuzz: malformed requests in both formats


_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.just(10**5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.just("\ud800"),
    st.binary(max_size=5),
    st.frozensets(st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just({"type": {"nested": 1}}),
    st.just({"type": "tool_result", "tool_use_id": "call_0", "content": "moved"}),
    st.just({"type": "tool_use", "id": "call_0", "name": "r", "input": {}}),
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if len(path) > 12:  # inside a structure made deep on purpose: no need to go further
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = root
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return root


@given(conversations(), st.data())
@settings(max_examples=150)
def test_fuzz_malformed_requests_fit_or_raise_windowfit_errors(
    case: tuple[str, list[dict[str, Any]]], data: st.DataObject
) -> None:
    fmt, messages = case
    messages = copy.deepcopy(messages)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(messages)
        path = data.draw(st.sampled_from(paths))
        action = data.draw(st.sampled_from(["replace", "delete", "deep", "swap"]))
        if action == "replace" or not path:
            messages = _set(messages, path, data.draw(_JUNK)) if path else messages
        elif action == "delete":
            parent = messages
            for key in path[:-1]:
                parent = parent[key]
            del parent[path[-1]]
        elif action == "deep":
            deep: Any = "leaf"
            for _ in range(data.draw(st.sampled_from([5, 600, 1500]))):
                deep = [deep]
            messages = _set(messages, path, deep)
        elif len(messages) > 1:
            i = data.draw(st.integers(0, len(messages) - 2))
            messages[i], messages[i + 1] = messages[i + 1], messages[i]
    try:
        frozen: bytes | None = pickle.dumps(messages)
    except RecursionError:
        frozen = None
    budget = data.draw(st.sampled_from([50, 2_000, 100_000]))
    fmt_arg = data.draw(st.sampled_from([None, fmt]))
    try:
        result = fit(messages, budget=budget, format=fmt_arg)
    except (ConversationError, ContextOverflowError):
        pass
    except WindowfitError as exc:  # pragma: no cover - only the two above are expected
        raise AssertionError(f"unexpected {type(exc).__name__}: {exc}") from exc
    else:
        if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
            used = result.report.format
            assert provider_rejection(used, result.messages) is None, result.messages
    if frozen is not None:
        assert pickle.dumps(messages) == frozen, "fit changed its input"
