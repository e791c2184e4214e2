"""Replay: each policy on small hand-made conversations, and the replay's figures on tiny
runs computed by hand (sizes read from the sizer, costs and breaks worked out here)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from windowfit import PRESETS, SettingsError
from windowfit.cache import CachePricing, PrefixCacheMeter
from windowfit.logs import RequestPoint, Run
from windowfit.profiles import ProfileEstimator
from windowfit.replay import (
    Conversation,
    Policy,
    Refused,
    ReplayConfig,
    available_policies,
    check_request,
    make_policy,
    parse_policies,
    replay,
    replay_run,
)
from windowfit.replay.peers import (
    AnthropicClearToolUses,
    OpenHandsObservationMasking,
    SweAgentLastNObservations,
)
from windowfit.sizing import default_sizer
from windowfit.vocabulary import CheckedEstimator, LargestEstimator

# --------------------------------------------------------------------------------------
# Builders


def _call(fmt: str, ids: list[str], names: list[str] | None = None) -> dict[str, Any]:
    names = names or ["bash"] * len(ids)
    if fmt == "openai":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": n, "arguments": json.dumps({"cmd": i})},
                }
                for i, n in zip(ids, names, strict=True)
            ],
        }
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": i, "name": n, "input": {"cmd": i}}
            for i, n in zip(ids, names, strict=True)
        ],
    }


def _results(fmt: str, contents: dict[str, str]) -> list[dict[str, Any]]:
    if fmt == "openai":
        return [{"role": "tool", "tool_call_id": i, "content": c} for i, c in contents.items()]
    return [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": i, "content": c} for i, c in contents.items()
            ],
        }
    ]


def _agent(
    fmt: str,
    sizes: list[int],
    *,
    names: list[str] | None = None,
    lines: int = 1,
    final: bool = True,
) -> list[dict[str, Any]]:
    """One instruction, then one tool round per size (result of ``size`` characters,
    ``lines`` lines), then a final answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for k, size in enumerate(sizes):
        name = names[k] if names else "bash"
        messages.append(_call(fmt, [f"c{k}"], [name]))
        body = "\n".join(["y" * max(1, size // lines)] * lines)
        messages += _results(fmt, {f"c{k}": body})
    if final:
        messages.append({"role": "assistant", "content": "Done."})
    return messages


def _run(
    messages: list[dict[str, Any]],
    fmt: str,
    *,
    system: Any = None,
    tools: Any = None,
    kind: str | None = None,
) -> Run:
    points = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
    return Run(
        name="hand-made",
        source="test",
        path="hand-made.json",
        format=fmt,  # type: ignore[arg-type]
        system=system,
        tools=tools,
        messages=messages,
        requests=[RequestPoint(i, None) for i in points],
        model=None,
        kind=kind or fmt,
    )


def _conv(run: Run, budget: int = 10**9, hard_limit: int | None = None) -> Conversation:
    return Conversation(run, default_sizer(None, run.format), budget, hard_limit or 2 * budget)


def _content(message: dict[str, Any], fmt: str, k: int = 0) -> Any:
    if fmt == "openai":
        return message["content"]
    return message["content"][k]["content"]


def _result_index(fmt: str, k: int) -> int:
    """Index of the message carrying round ``k``'s result in :func:`_agent`."""
    return 2 + 2 * k


FORMATS = ["openai", "anthropic"]


# --------------------------------------------------------------------------------------
# The prefix cache meter


def test_cache_meter_by_hand() -> None:
    a, b, c = {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"x": 1}
    meter = PrefixCacheMeter()
    first = meter.observe([a], [10], fixed=5)
    assert (first.read, first.write, first.broke) == (0, 15, False)
    second = meter.observe([a, b], [10, 3], fixed=5)  # starts with the whole previous one
    assert (second.read, second.write, second.broke) == (15, 3, False)
    third = meter.observe([dict(a), c], [10, 4], fixed=5)  # equal copy, then a change
    assert (third.read, third.write, third.broke) == (15, 4, True)
    fourth = meter.observe([a, c], [10, 4], fixed=6)  # the system part changed: all new
    assert (fourth.read, fourth.write, fourth.broke) == (0, 20, True)
    assert meter.breaks == 2 and meter.resent_on_break == 4 + 20
    assert meter.resent_per_break == 12
    assert meter.cost == pytest.approx(0.1 * 30 + 1.25 * 42)
    assert meter.cost_uncached == 72
    assert meter.read_share == pytest.approx(30 / 72)


# --------------------------------------------------------------------------------------
# Replay figures on a tiny run, by hand


def _tiny(fmt: str = "openai") -> Run:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    return _run(_agent(fmt, [400, 800]), fmt, tools=tools if fmt == "openai" else None)


def test_raw_replay_figures_by_hand() -> None:
    run = _tiny()
    conv = _conv(run)
    s = [size.tokens for size in conv.sizes]  # m0 user, m1 call, m2 result, m3, m4, m5
    f = conv.fixed
    assert f > 0 and len(s) == 6
    requests = [s[0], s[0] + s[1] + s[2], sum(s[:5])]  # messages[:1], [:3], [:5]
    config = ReplayConfig(
        budget=f + requests[1], context_window=f + requests[2] - 1, tokenizer="seed"
    )
    report = replay_run(run, [make_policy("raw")], config)
    stats = report.policies["raw"]
    read = (f + s[0]) + (f + s[0] + s[1] + s[2])  # requests 2 and 3 read all of the one before
    write = (f + s[0]) + (s[1] + s[2]) + (s[3] + s[4])
    assert (stats.read_tokens, stats.write_tokens, stats.breaks) == (read, write, 0)
    d = stats.to_dict()
    assert d["requests"] == 3 and d["refused"] == 0
    assert d["cost_cached"] == pytest.approx(0.1 * read + 1.25 * write)
    assert d["cost_uncached"] == pytest.approx(3 * f + sum(requests))
    assert d["cache_read_share"] == pytest.approx(read / (read + write), abs=1e-6)
    assert d["peak_tokens"] == f + requests[2]
    assert d["mean_tokens"] == pytest.approx(f + sum(requests) / 3, abs=0.1)
    assert (d["over_budget"], d["rejected"]) == (1, 1)  # only the last request
    assert d["visible_tool_tokens_mean"] == 1.0 and d["visible_tool_tokens_last"] == 1.0
    assert d["violations"] == 0 and d["breaks"] == 0 and d["resent_per_break"] == 0
    assert report.series["raw"] == [f + r for r in requests]


class _ClearFirstAtLast(Policy):
    """Test double: at the third request, clear round 0's result; refuse the second."""

    name = "test-double"

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        if upto == 3:
            raise Refused
        out = conv.messages[:upto]
        if upto == 5:
            out[2] = conv.replaced(2, {"c0": "gone"}, tag=self.name)
        return out


def test_breaks_refusals_and_intact_share_by_hand() -> None:
    run = _tiny()
    conv = _conv(run)
    s = [size.tokens for size in conv.sizes]
    f = conv.fixed
    report = replay_run(
        run, [_ClearFirstAtLast()], ReplayConfig(budget=10**6, tokenizer="seed", fit_counts="exact")
    )
    stats = report.policies["test-double"]
    cleared = conv.size_of(conv.replaced(2, {"c0": "gone"}, tag="test-double"))
    # Request 1 writes everything; request 2 is refused (not sent, the cache untouched);
    # request 3 starts with the whole of request 1 ([m0]), so it is no break: it reads
    # m0 and writes the rest, with round 0's result cleared.
    assert stats.refused == 1 and stats.requests == 3
    assert stats.breaks == 0
    assert stats.read_tokens == f + s[0]
    assert stats.write_tokens == (f + s[0]) + (s[1] + cleared + s[3] + s[4])
    r0, r1 = conv.sizes[2].results[0][1], conv.sizes[4].results[0][1]
    d = stats.to_dict()
    assert d["visible_tool_tokens_last"] == pytest.approx(r1 / (r0 + r1), abs=1e-6)
    assert d["visible_tool_tokens_mean"] == pytest.approx(r1 / (r0 + r1), abs=1e-6)
    assert report.series["test-double"] == [f + s[0], None, f + s[0] + s[1] + cleared + s[3] + s[4]]


class _Changes(Policy):
    """Test double: sends the raw request, but from the third one on with round 0's
    result cleared (a break near the start at request 3 only)."""

    name = "changes"

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        out = conv.messages[:upto]
        if upto >= 5:
            out[2] = conv.replaced(2, {"c0": "gone"}, tag=self.name)
        return out


def test_a_change_near_the_start_resends_the_rest() -> None:
    run = _run(_agent("openai", [400, 800, 1200]), "openai")
    conv = _conv(run)
    s = [size.tokens for size in conv.sizes]
    cleared = conv.size_of(conv.replaced(2, {"c0": "gone"}, tag="changes"))
    config = ReplayConfig(budget=10**6, tokenizer="seed", fit_counts="exact")
    stats = replay_run(run, [_Changes()], config).policies["changes"]
    assert stats.breaks == 1  # request 3; request 4 starts with the whole of request 3
    assert stats.resent_tokens == cleared + s[3] + s[4]
    assert stats.to_dict()["resent_per_break"] == cleared + s[3] + s[4]


@pytest.mark.parametrize(
    ("drop", "kind"),
    [(0, "first_message_missing"), (1, "orphan_results"), (2, "unanswered_calls")],
)
@pytest.mark.parametrize("fmt", FORMATS)
def test_invariant_violations(fmt: str, drop: int, kind: str) -> None:
    run = _run(_agent(fmt, [400, 800]), fmt)
    conv = _conv(run)
    out = conv.messages[:5]
    assert check_request(conv, out) == set()
    del out[drop]
    assert kind in check_request(conv, out)


def test_unanswered_call_at_the_end_and_empty_request() -> None:
    run = _run(_agent("openai", [400]), "openai")
    conv = _conv(run)
    assert check_request(conv, conv.messages[:2]) == {"unanswered_calls"}
    assert check_request(conv, []) == {"first_message_missing"}


# --------------------------------------------------------------------------------------
# Configuration


def test_limits_from_a_fraction_and_fixed_numbers() -> None:
    config = ReplayConfig(budget_fraction=0.5, hard_limit_factor=2)
    assert config.limits(1001) == (500, 1001)  # the hard limit is the largest request itself
    assert ReplayConfig(budget_fraction=0.3).limits(1000) == (300, 600)
    assert ReplayConfig(budget=700, context_window=900).limits(5) == (700, 900)
    assert ReplayConfig(budget=700, hard_limit_factor=1.5).limits(5) == (700, 1050)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget": 0},
        {"budget": None, "budget_fraction": 0.0},
        {"budget": None, "budget_fraction": 1.5},
        {"budget": 100, "context_window": 50},
        {"hard_limit_factor": 0.5},
        {"fit_counts": "guess"},
        {"pricing": CachePricing(read=-0.1)},
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(SettingsError):
        ReplayConfig(**kwargs)


@pytest.mark.parametrize(
    ("logged", "given", "model", "judge", "profile"),
    [
        (None, None, None, "o200k", "conservative"),
        (None, "gpt-4o", "gpt-4o", "o200k", "o200k"),
        (None, "deepseek-chat", "deepseek-chat", "deepseek", "deepseek"),
        ("deepseek-chat", "gpt-4o", "deepseek-chat", "deepseek", "deepseek"),
    ],
)
def test_a_model_given_to_the_replay_counts_runs_whose_log_names_none_as_that_model(
    logged: str | None, given: str | None, model: str | None, judge: str, profile: str
) -> None:
    run = replace(_run(_agent("openai", [40, 60]), "openai"), model=logged)
    policy = make_policy("windowfit")
    report = replay_run(run, [policy], ReplayConfig(budget=10**6, model=given))
    assert report.model == model
    assert report.tokenizer == judge
    estimator = policy.estimator  # type: ignore[attr-defined]
    assert estimator.family == profile
    assert isinstance(estimator, (ProfileEstimator, CheckedEstimator, LargestEstimator))


@pytest.mark.parametrize("model", ["", 4])
def test_a_model_given_to_the_replay_must_be_a_name(model: Any) -> None:
    with pytest.raises(SettingsError, match="model must be a non-empty name"):
        ReplayConfig(model=model)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("budget", [400, 700, 1000])
def test_no_policy_within_the_budget_keeps_more_intact_than_the_ceiling(
    fmt: str, budget: int
) -> None:
    run = _run(_agent(fmt, [1200, 300, 900, 2000, 150, 700, 1600, 400]), fmt)
    config = ReplayConfig(budget=budget, tokenizer="seed", fit_counts="exact")
    report = replay_run(run, parse_policies(None), config)
    conv = _conv(run, budget)
    head = conv.fixed + conv.prefix[conv.first + 1]
    points = [p.index for p in run.requests if conv.result_tokens[p.index]]
    by_hand = [min(1.0, max(0, budget - head) / conv.result_tokens[i]) for i in points]
    assert report.intact_points == len(points)
    assert report.intact_ceiling == pytest.approx(sum(by_hand))
    ceiling = report.intact_ceiling / report.intact_points
    assert ceiling < 1.0  # the run outgrows every budget here
    for label, stats in report.policies.items():
        if stats.over_budget == 0 and stats.refused == 0 and not stats.violations:
            assert (stats.visible_mean or 0.0) <= ceiling + 1e-9, label
    assert (report.policies["raw"].visible_mean or 0.0) > ceiling


# --------------------------------------------------------------------------------------
# The registry


def test_registry_takes_presets_dynamically(monkeypatch: pytest.MonkeyPatch) -> None:
    names = available_policies()
    assert names[0] == "windowfit"
    for name in PRESETS:
        assert name in names
    for name in (
        "raw",
        "anthropic-clear-tool-uses",
        "openhands-masking",
        "swe-agent-last-n",
    ):
        assert name in names
    monkeypatch.setitem(PRESETS, "windowfit-test", replace(PRESETS["windowfit"], name="x"))
    assert "windowfit-test" in available_policies()
    assert make_policy("windowfit-test").label == "windowfit-test"


def test_policy_settings_from_text() -> None:
    peer = make_policy("swe-agent-last-n:polling=10:n=3")
    assert isinstance(peer, SweAgentLastNObservations)
    assert (peer.n, peer.polling, peer.label) == (3, 10, "swe-agent-last-n:polling=10:n=3")
    clear = make_policy("anthropic-clear-tool-uses:exclude_tools=memory|todo:trigger=none")
    assert isinstance(clear, AnthropicClearToolUses)
    assert clear.exclude_tools == ("memory", "todo") and clear.trigger is None
    tuned = make_policy("windowfit:low_water=0.6:keep_results=3")
    assert tuned.settings()["low_water"] == 0.6 and tuned.settings()["keep_results"] == 3
    both = parse_policies("raw, windowfit")
    assert [p.label for p in both] == ["raw", "windowfit"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nonsense", "unknown policy 'nonsense'"),
        ("swe-agent-last-n:size=3", "unknown setting 'size'"),
        ("swe-agent-last-n:n=zero", "cannot read 'zero'"),
        ("swe-agent-last-n:n=0", "n must be a positive integer"),
        ("windowfit:low_water=2", "low_water"),
        ("openhands-masking:attention_window", "expected KEY=VALUE"),
        ("raw,raw", "policy given twice"),
        ("raw:keep=1", "policy 'raw': unknown setting 'keep'; known: none"),
        ("", "no policy given"),
    ],
)
def test_bad_policy_specs(spec: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        parse_policies(spec)


# --------------------------------------------------------------------------------------
# Each policy on hand-made conversations


@pytest.mark.parametrize("fmt", FORMATS)
def test_raw_sends_the_logged_objects(fmt: str) -> None:
    conv = _conv(_run(_agent(fmt, [400, 800]), fmt))
    out = make_policy("raw").shape(conv, 5)
    assert all(a is b for a, b in zip(out, conv.messages[:5], strict=True)) and len(out) == 5


@pytest.mark.parametrize("fmt", FORMATS)
def test_anthropic_clear_tool_uses_keeps_the_last_three(fmt: str) -> None:
    run = _run(_agent(fmt, [2000] * 5), fmt)
    upto = 11  # instruction + five rounds
    over = _conv(run, budget=100)  # the trigger defaults to the budget: far over it
    out = AnthropicClearToolUses().shape(over, upto)
    for k in range(5):
        i = _result_index(fmt, k)
        if k < 2:
            assert _content(out[i], fmt) == "[cleared]"
        else:
            assert out[i] is run.messages[i]
    assert check_request(over, out) == set()
    under = _conv(run, budget=10**6)
    same = AnthropicClearToolUses().shape(under, upto)
    assert all(a is b for a, b in zip(same, run.messages[:upto], strict=True))
    assert AnthropicClearToolUses(trigger=10**6).shape(over, upto)[2] is run.messages[2]


@pytest.mark.parametrize("fmt", FORMATS)
def test_anthropic_clear_tool_uses_options(fmt: str) -> None:
    run = _run(_agent(fmt, [2000] * 5, names=["memory", "bash", "bash", "bash", "bash"]), fmt)
    conv = _conv(run, budget=100)
    kept = AnthropicClearToolUses(exclude_tools=("memory",)).shape(conv, 11)
    assert kept[2] is run.messages[2]  # memory's result is never cleared
    assert _content(kept[4], fmt) == "[cleared]"
    unchanged = AnthropicClearToolUses(clear_at_least=10**6).shape(conv, 11)
    assert all(a is b for a, b in zip(unchanged, run.messages[:11], strict=True))
    inputs = AnthropicClearToolUses(clear_tool_inputs=True).shape(conv, 11)
    if fmt == "openai":
        assert inputs[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    else:
        assert inputs[1]["content"][0]["input"] == {}
    assert inputs[7] is run.messages[7]  # a call in the keep-window keeps its input
    assert AnthropicClearToolUses(keep=0).shape(conv, 11)[10] is not run.messages[10]


@pytest.mark.parametrize("fmt", FORMATS)
def test_openhands_masks_outside_the_attention_window(fmt: str) -> None:
    run = _run(_agent(fmt, [300] * 5), fmt)
    conv = _conv(run)
    # Events: the instruction (0), then per round a call and its result: results are
    # events 2, 4, 6, 8, 10 of 11. A window of 4 masks the results before event 7.
    out = OpenHandsObservationMasking(attention_window=4).shape(conv, 11)
    for k in range(5):
        i = _result_index(fmt, k)
        if k < 3:
            assert _content(out[i], fmt) == "<MASKED>"
        else:
            assert out[i] is run.messages[i]
    assert out[0] is run.messages[0]  # a user message is not an observation
    wide = OpenHandsObservationMasking(attention_window=100).shape(conv, 11)  # nothing masked
    assert all(a is b for a, b in zip(wide, run.messages[:11], strict=True))
    default = OpenHandsObservationMasking().shape(conv, 11)  # 5 events: results 6, 8, 10 kept
    assert [_content(default[_result_index(fmt, k)], fmt) == "<MASKED>" for k in range(5)] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_openhands_counts_one_action_per_parallel_call() -> None:
    messages = [{"role": "user", "content": "go"}, _call("openai", ["a", "b", "c"])]
    messages += _results("openai", {"a": "1", "b": "2", "c": "3"})
    messages += [_call("openai", ["d"]), *_results("openai", {"d": "4"})]
    conv = _conv(_run(messages, "openai"))
    assert conv.events[len(messages)] == 1 + 3 + 3 + 1 + 1
    # Results are events 4, 5, 6 and 8 of 9; a window of 4 masks those before event 5.
    out = OpenHandsObservationMasking(attention_window=4).shape(conv, len(messages))
    assert out[2]["content"] == "<MASKED>" and out[3] is messages[3]


@pytest.mark.parametrize("fmt", FORMATS)
def test_swe_agent_elides_all_but_the_last_n(fmt: str) -> None:
    run = _run(_agent(fmt, [300] * 5, lines=3), fmt)
    conv = _conv(run)
    out = SweAgentLastNObservations(n=2).shape(conv, 11)
    for k in range(5):
        i = _result_index(fmt, k)
        if k < 3:
            assert _content(out[i], fmt) == "Old environment output: (3 lines omitted)"
        else:
            assert out[i] is run.messages[i]
    # polling=4: six observations (the task counts as the first), so the elided range is
    # fixed at multiples of 4: (6 // 4) * 4 - 2 = 2, eliding only the first result.
    polled = SweAgentLastNObservations(n=2, polling=4).shape(conv, 11)
    assert _content(polled[2], fmt).startswith("Old environment output")
    assert polled[4] is run.messages[4]
    # With polling, the request is unchanged between updates: rounds 4 and 5 agree.
    assert SweAgentLastNObservations(n=2, polling=4).shape(conv, 9)[4] is run.messages[4]


def test_swe_agent_never_elides_the_task_in_a_history_without_tools() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    messages.append({"role": "user", "content": "TASK\nline two"})
    for k in range(4):
        messages.append({"role": "assistant", "content": f"ls {k}"})
        messages.append({"role": "user", "content": f"output {k}\nmore"})
    conv = _conv(_run(messages, "openai"))
    out = SweAgentLastNObservations(n=1).shape(conv, len(messages))
    assert out[1] is messages[1]
    assert [m["content"] for m in out[3:8:2]] == ["Old environment output: (2 lines omitted)"] * 3
    assert out[9] is messages[9]


def test_windowfit_refuses_when_nothing_fits() -> None:
    run = _run(
        [
            {"role": "user", "content": "x" * 40_000},
            {"role": "assistant", "content": "ok"},
        ],
        "openai",
    )
    with pytest.raises(Refused):
        make_policy("windowfit").shape(_conv(run, budget=100), 1)
    fits = make_policy("windowfit").shape(_conv(run, budget=10**6), 1)
    assert fits[0] is run.messages[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_langchain_trim_keeps_the_tail_that_starts_on_a_human_message(fmt: str) -> None:
    pytest.importorskip("langchain_core")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "First task."}]
    messages.append(_call(fmt, ["c0"]))
    if fmt == "anthropic":
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c0", "content": "z" * 40_000},
                    {"type": "text", "text": "Thanks. Now the second task."},
                ],
            }
        )
    else:
        messages += _results(fmt, {"c0": "z" * 40_000})
        messages.append({"role": "user", "content": "Thanks. Now the second task."})
    messages.append(_call(fmt, ["c1"]))
    messages += _results(fmt, {"c1": "short"})
    messages.append({"role": "assistant", "content": "Done."})
    upto = len(messages) - 1
    conv = _conv(_run(messages, fmt), budget=1000)
    out = make_policy("langchain-trim").shape(conv, upto)
    if fmt == "anthropic":  # the user message lost its tool result, kept its text
        assert out[0] == {
            "role": "user",
            "content": [{"type": "text", "text": "Thanks. Now the second task."}],
        }
        assert out[1:] == messages[3:upto]
    else:
        assert out == messages[3:upto]
        assert all(a is b for a, b in zip(out, messages[3:upto], strict=True))
    assert check_request(conv, out) == {"first_message_missing"}
    everything = make_policy("langchain-trim").shape(_conv(_run(messages, fmt)), upto)
    assert all(a is b for a, b in zip(everything, messages[:upto], strict=True))


def test_langchain_trim_of_a_sub_agent_leaves_only_the_system_prompt() -> None:
    pytest.importorskip("langchain_core")
    messages = [
        {"role": "system", "content": "You are a sub-agent."},
        *_agent("openai", [4000] * 4),
    ]
    conv = _conv(_run(messages, "openai"), budget=500)
    out = make_policy("langchain-trim").shape(conv, len(messages) - 1)
    assert out == [messages[0]]
    assert check_request(conv, out) == {"first_message_missing"}


# --------------------------------------------------------------------------------------
# Purity: a request's answer does not depend on what comes after it


def _purity_messages(fmt: str) -> list[dict[str, Any]]:
    messages = _agent(fmt, [300, 6000, 50, 3000, 9000, 200, 4000], final=False)
    messages.append({"role": "assistant", "content": "Anything else?"})
    messages.append({"role": "user", "content": "Yes: now the docs."})
    for k in range(7, 11):
        messages.append(_call(fmt, [f"c{k}"]))
        messages += _results(fmt, {f"c{k}": "w" * (1500 * (k % 3 + 1))})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", available_policies())
def test_policies_are_pure_functions_of_the_request(fmt: str, name: str) -> None:
    messages = _purity_messages(fmt)
    run = _run(messages, fmt)
    budget = 5000
    full = _conv(run, budget=budget)
    policy = make_policy(name)
    policy.begin(full)
    answers = {}
    for point in run.requests:
        try:
            answers[point.index] = json.dumps(policy.shape(full, point.index), sort_keys=True)
        except Refused:
            answers[point.index] = "refused"
    for point in run.requests[::3]:
        cut = _run(messages[: point.index], fmt)
        alone = _conv(cut, budget=budget)
        fresh = make_policy(name)
        fresh.begin(alone)
        try:
            got = json.dumps(fresh.shape(alone, point.index), sort_keys=True)
        except Refused:
            got = "refused"
        assert got == answers[point.index], f"{name} at request {point.index}"


def test_replay_of_every_policy_keeps_windowfit_valid() -> None:
    runs = [_run(_purity_messages(fmt), fmt, kind=f"hand-{fmt}") for fmt in FORMATS]
    report = replay(
        runs, parse_policies(None), ReplayConfig(budget=5000, tokenizer="seed", fit_counts="exact")
    )
    totals = report.totals()
    for name in PRESETS:
        assert totals[name].violations == 0 and totals[name].rejected == 0
        assert totals[name].over_budget == 0
    assert totals["raw"].over_budget > 0
    assert set(report.by_source()) == {"hand-openai", "hand-anthropic"}
    shape = report.to_dict()
    assert set(shape) >= {"totals", "runs", "config", "errors"}
    assert shape["runs"][0]["tokenizer"] == "seed"


def test_unfittable_requests_and_runs_without_calls() -> None:
    messages = _agent("openai", [400, 40_000, 400])  # round 1 alone is over the budget
    run = _run(messages, "openai")
    conv = _conv(run)
    head = conv.fixed + conv.prefix[1]
    budget = head + conv.prefix[5] - conv.prefix[3] - 1  # round 1 plus the head: 1 over
    policies = parse_policies("windowfit,raw")
    report = replay_run(
        run, policies, ReplayConfig(budget=budget, tokenizer="seed", fit_counts="exact")
    )
    assert report.head == head
    assert report.unfittable == 1  # the request that ends with round 1's result
    told = report.policies["windowfit"]  # it knows the hard limit: sent over the budget
    assert (told.refused, told.over_budget, told.rejected) == (0, 1, 0)
    # ... but only where no fit exists: where one does, it is within the budget.
    assert len(report.unfittable_points) == 1
    assert told.over_budget_fittable == 0 and 0 < told.worst_fittable <= 1
    assert report.policies["raw"].over_budget_fittable >= 1
    alone = ReplayConfig(budget=budget, tokenizer="seed", fit_limit=False, fit_counts="exact")
    refused = replay_run(run, policies, alone).policies["windowfit"]
    assert (refused.refused, refused.over_budget) == (1, 0)
    assert report.policies["raw"].refused == 0
    empty = _run([{"role": "user", "content": "hello"}], "openai")
    nothing = replay_run(
        empty, parse_policies("windowfit"), ReplayConfig(tokenizer="seed", fit_counts="exact")
    )
    assert nothing.requests == 0 and nothing.policies["windowfit"].to_dict()["requests"] == 0
    assert nothing.policies["windowfit"].visible_mean is None
