"""The agent loop: sub-agents, tool errors, fitting before every request, error handling."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from windowfit.agent import (
    DEFAULT_TOOL_TIMEOUT,
    AgentEvent,
    AgentInfo,
    ModelRequest,
    ModelResponse,
    ReadFile,
    RunCommand,
    Runtime,
    ToolContext,
    ToolOutput,
    Usage,
)
from windowfit.classify import ErrorInfo, ErrorKind
from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE, SettingsError
from windowfit.instructions import CLEARED_RESULT_NOTE, SAFETY_NET
from windowfit.retry import RetryPolicy
from windowfit.sim import (
    Coordinator,
    Reader,
    SimulatedProvider,
    Team,
    coordinator_instruction,
    prompt_too_long,
    reader_instruction,
)
from windowfit.tokens import SeedEstimator

Step = Callable[[ModelRequest], list[dict[str, Any]]]


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


class Script:
    """A model that answers with the given steps in turn and records every request."""

    def __init__(self, *steps: list[dict[str, Any]] | Exception) -> None:
        self.steps = list(steps)
        self.requests: list[ModelRequest] = []

    async def respond(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        step = self.steps.pop(0) if self.steps else [text("done")]
        if isinstance(step, Exception):
            raise step
        return ModelResponse(step, Usage(input_tokens=1))


class StatusError(Exception):
    """Shaped like the SDKs' status errors."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(f"Error code: {status}")
        self.status_code = status
        self.body = {"type": "error", "error": {"type": kind, "message": message}}


def results_of(history: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        block
        for message in history
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "docs").mkdir(parents=True)
    for k in range(1, 7):
        (root / "docs" / f"f{k}.txt").write_text(f"File {k}\n" + "word " * 300, encoding="utf-8")
    (tmp_path / "secret.txt").write_text("not for the agent", encoding="utf-8")
    return root


# --------------------------------------------------------------------------------------
# Sub-agents


class InFlight:
    """Wraps a model; records how many requests were in flight at once."""

    def __init__(self, inner: SimulatedProvider) -> None:
        self.inner = inner
        self.now = 0
        self.most = 0

    async def respond(self, request: ModelRequest) -> ModelResponse:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.005)
            return await self.inner.respond(request)
        finally:
            self.now -= 1


@pytest.mark.parametrize("subagents", [1, 3])
def test_subagents_run_concurrently_and_answer_their_parent(
    workspace: Path, subagents: int
) -> None:
    files = [f"docs/f{k}.txt" for k in range(1, 7)]
    model = InFlight(SimulatedProvider(Team(Coordinator(), Reader()), tokenizer=SeedEstimator()))
    runtime = Runtime(model, workspace=workspace)
    result = run(runtime.run(coordinator_instruction(files, subagents)))

    assert result.finished
    assert result.answer.startswith(f"{subagents} of {subagents} sub-agents finished.")
    assert model.most == subagents  # every sub-agent had a request in flight at once
    children = [r for r in runtime.results if r.agent.depth == 1]
    assert len(children) == subagents
    assert all(c.finished for c in children)
    # Each sub-agent's final answer is the result of the parent's spawn call.
    parent_history = runtime.store.messages(result.session, "main")
    answers = {r["content"] for r in results_of(parent_history)}
    assert answers == {c.answer for c in children}
    read = [a for c in children for a in c.answer.splitlines() if a.startswith("Noted ")]
    assert sorted(line.split(":")[0][6:] for line in read) == sorted(files)


def test_safety_net_is_in_every_agents_system_prompt(workspace: Path) -> None:
    model = SimulatedProvider(Team(Coordinator(), Reader()), tokenizer=SeedEstimator())
    seen: list[ModelRequest] = []
    inner = model.respond

    async def spy(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return await inner(request)

    model.respond = spy  # type: ignore[method-assign]
    runtime = Runtime(model, workspace=workspace, system="Lead the work.")
    run(runtime.run(coordinator_instruction(["docs/f1.txt", "docs/f2.txt"], 2)))
    depths = {r.agent.depth for r in seen}
    assert depths == {0, 1}
    assert all(SAFETY_NET in r.system for r in seen)
    assert all(r.system.startswith("Lead the work.") for r in seen if r.agent.depth == 0)
    # The saved system prompt is the one that was sent.
    session = seen[0].agent.session
    assert all(SAFETY_NET in a.system for a in runtime.store.agents(session))


def test_subagent_tool_only_below_max_depth(workspace: Path) -> None:
    model = Script([text("hi")])
    run(Runtime(model, workspace=workspace, max_depth=0).run("go"))
    assert [t["name"] for t in model.requests[0].tools] == ["read_file", "run_command"]
    model = Script([text("hi")])
    run(Runtime(model, workspace=workspace).run("go"))
    assert [t["name"] for t in model.requests[0].tools][-1] == "spawn_subagent"


def test_a_subagent_that_overflows_returns_an_error_result_to_its_parent(workspace: Path) -> None:
    files = ["docs/f1.txt", "docs/f2.txt", "docs/f3.txt"]
    model = SimulatedProvider(
        Team(Coordinator(), Reader()), tokenizer=SeedEstimator(), hard_limit=1200
    )
    runtime = Runtime(model, workspace=workspace, budget=100_000)  # the budget is not the limit
    result = run(runtime.run(coordinator_instruction(files, 1)))
    assert result.finished  # the parent goes on
    child = next(r for r in runtime.results if r.agent.depth == 1)
    assert child.status == "overflow"
    assert child.user_message == CONTEXT_OVERFLOW_MESSAGE
    spawned = results_of(runtime.store.messages(result.session, "main"))
    assert spawned[0]["is_error"] is True
    assert CONTEXT_OVERFLOW_MESSAGE in spawned[0]["content"]
    assert result.answer.startswith("0 of 1 sub-agents finished.")


# --------------------------------------------------------------------------------------
# Tool errors never crash the loop


class Exploding:
    name = "explode"
    description = "always fails"
    input_schema: Mapping[str, Any] = {"type": "object", "properties": {}}

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("tool_call", "expected"),
    [
        (call("t1", "read_file", path="docs/missing.txt"), "no such file"),
        (call("t1", "read_file", path="docs"), "is a directory"),
        (call("t1", "read_file"), "needs 'path'"),
        (call("t1", "no_such_tool"), "no tool named 'no_such_tool'"),
        (call("t1", "run_command", command="exit 3"), "exit code 3"),
        (call("t1", "explode"), "RuntimeError: boom"),
        (call("t1", "spawn_subagent", instruction=""), "needs 'instruction'"),
    ],
)
def test_tool_errors_go_back_as_error_results(
    workspace: Path, tool_call: dict[str, Any], expected: str
) -> None:
    model = Script([tool_call], [text("recovered")])
    tools = [ReadFile(workspace), RunCommand(workspace), Exploding()]
    runtime = Runtime(model, workspace=workspace, tools=tools)
    result = run(runtime.run("try it"))
    assert result.finished and result.answer == "recovered"
    (block,) = results_of(runtime.store.messages(result.session, "main"))
    assert block["tool_use_id"] == "t1"
    assert block["is_error"] is True
    assert expected in block["content"]
    assert result.stats.tool_errors == 1


class Hanging:
    """A tool that never finishes: it waits for ever, or also ignores being cancelled."""

    description = "hangs"
    input_schema: Mapping[str, Any] = {"type": "object", "properties": {}}

    def __init__(self, stubborn: bool) -> None:
        self.name = "hang"
        self.stubborn = stubborn

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        if not self.stubborn:
            await asyncio.Event().wait()
        end = asyncio.get_running_loop().time() + 2
        while asyncio.get_running_loop().time() < end:  # swallows cancellation, then ends
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue
        return ToolOutput("too late")


@pytest.mark.parametrize("stubborn", [False, True], ids=["waits", "ignores cancellation"])
def test_a_hanging_tool_gives_an_error_result_and_the_loop_goes_on(
    workspace: Path, stubborn: bool
) -> None:
    model = Script(
        [call("h", "hang"), call("r", "read_file", path="docs/f1.txt")], [text("went on")]
    )
    tools = [ReadFile(workspace), Hanging(stubborn)]
    runtime = Runtime(model, workspace=workspace, tools=tools, tool_timeout=0.2)

    async def timed() -> tuple[Any, float]:
        began = time.monotonic()
        return await runtime.run("try it"), time.monotonic() - began

    result, took = run(timed())  # (asyncio.run then waits for the stubborn tool to end)
    assert result.finished and result.answer == "went on"
    assert took < 1.5
    hang, read = results_of(runtime.store.messages(result.session, "main"))
    assert hang["is_error"] is True
    assert "did not finish within 0.2 seconds" in hang["content"]
    assert "is_error" not in read and read["content"].startswith("File 1")
    assert result.stats.tool_errors == 1


def test_the_tool_timeout_has_a_documented_default(workspace: Path) -> None:
    assert Runtime(Script(), workspace=workspace).tool_timeout == DEFAULT_TOOL_TIMEOUT == 120.0
    assert Runtime(Script(), workspace=workspace, tool_timeout=None).tool_timeout is None


def test_tool_calls_of_one_message_all_get_results_in_order(workspace: Path) -> None:
    model = Script(
        [
            call("a", "read_file", path="docs/f1.txt"),
            call("b", "read_file", path="../secret.txt"),
            call("c", "run_command", command="echo hello"),
        ],
        [text("ok")],
    )
    runtime = Runtime(model, workspace=workspace)
    result = run(runtime.run("three at once"))
    blocks = results_of(runtime.store.messages(result.session, "main"))
    assert [b["tool_use_id"] for b in blocks] == ["a", "b", "c"]
    assert [b.get("is_error", False) for b in blocks] == [False, True, False]
    assert blocks[0]["content"].startswith("File 1")
    assert blocks[2]["content"] == "exit code 0\nhello\n"


# --------------------------------------------------------------------------------------
# Fitting before every request; the saved history stays whole


def test_requests_are_fitted_and_the_saved_history_is_not(workspace: Path) -> None:
    files = [f"docs/f{k}.txt" for k in range(1, 7)]
    model = SimulatedProvider(Reader(), tokenizer=SeedEstimator())
    seen: list[ModelRequest] = []
    inner = model.respond

    async def spy(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return await inner(request)

    model.respond = spy  # type: ignore[method-assign]
    budget = 2_000
    seed = SeedEstimator()  # the provider's own count: the clearing below is exact
    runtime = Runtime(model, workspace=workspace, budget=budget, max_depth=0, estimator=seed)
    result = run(runtime.run(reader_instruction(files)))
    assert result.finished and result.answer.startswith("I went through 6 of the 6 files.")
    assert all(r.estimate is not None and r.estimate <= budget for r in seen)
    sent = [b["content"] for r in seen for b in results_of(r.messages)]
    assert CLEARED_RESULT_NOTE in sent  # some requests carried cleared results
    saved = results_of(runtime.store.messages(result.session, "main"))
    assert len(saved) == 6 and all(b["content"].startswith("File ") for b in saved)
    assert result.stats.cleared > 0 and result.stats.clearing_events > 0
    assert result.stats.dropped == 0  # clearing was enough: every note is still in view
    assert len([n for n in result.answer.splitlines() if n.startswith("Noted ")]) == 6


def test_nothing_fits_stops_the_agent_without_a_request(workspace: Path) -> None:
    model = Script([text("never")])
    runtime = Runtime(model, workspace=workspace, budget=50)
    result = run(runtime.run("x " * 400))
    assert result.status == "overflow"
    assert result.user_message == CONTEXT_OVERFLOW_MESSAGE
    assert model.requests == []
    assert runtime.store.agent(result.session, "main").status == "overflow"


def test_step_limit(workspace: Path) -> None:
    steps = [[call(f"t{k}", "run_command", command="true")] for k in range(5)]
    runtime = Runtime(Script(*steps), workspace=workspace, max_steps=3)
    result = run(runtime.run("loop"))
    assert result.status == "step_limit"
    assert "3 steps" in (result.user_message or "")


# --------------------------------------------------------------------------------------
# Errors: classified, logged, retried only when that can help, alerts only where due


def overflow() -> Exception:
    return prompt_too_long(1_234_567, 1_000_000)


ERRORS: list[tuple[Callable[[], Exception], ErrorKind, str, int, bool]] = [
    # (error, kind, final status, calls made with 3 attempts allowed, alert)
    (overflow, ErrorKind.CONTEXT_OVERFLOW, "overflow", 1, False),
    (
        lambda: StatusError(400, "invalid_request_error", "messages: roles must alternate"),
        ErrorKind.INVALID_REQUEST,
        "failed",
        1,
        False,
    ),
    (
        lambda: StatusError(401, "authentication_error", "invalid x-api-key"),
        ErrorKind.AUTHENTICATION,
        "failed",
        1,
        True,
    ),
    (
        lambda: StatusError(529, "overloaded_error", "Overloaded"),
        ErrorKind.OVERLOADED,
        "failed",
        3,
        False,
    ),
    (
        lambda: StatusError(500, "api_error", "Internal server error"),
        ErrorKind.SERVER,
        "failed",
        3,
        True,
    ),
]


@pytest.mark.parametrize(("make", "kind", "status", "calls", "alert"), ERRORS)
def test_errors_are_retried_only_when_that_can_help(
    workspace: Path,
    make: Callable[[], Exception],
    kind: ErrorKind,
    status: str,
    calls: int,
    alert: bool,
) -> None:
    model = Script(*(make() for _ in range(5)))
    alerts: list[tuple[ErrorInfo, AgentInfo]] = []
    events: list[AgentEvent] = []
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    runtime = Runtime(
        model,
        workspace=workspace,
        retry=RetryPolicy(max_attempts=3, base_delay=0.01, jitter=False),
        sleep=sleep,
        on_alert=lambda info, agent: alerts.append((info, agent)),
        on_event=events.append,
    )
    result = run(runtime.run("hello"))
    assert len(model.requests) == calls
    assert len(delays) == calls - 1
    assert result.status == status
    assert result.error is not None and result.error.kind is kind
    assert result.stats.rejected == calls
    assert len(alerts) == (calls if alert else 0)
    assert all(info.kind is not ErrorKind.CONTEXT_OVERFLOW for info, _ in alerts)
    errors = [e for e in events if e.kind == "error"]
    assert [e.data["retry"] for e in errors] == [True] * (calls - 1) + [False]


def test_context_overflow_from_the_provider_is_never_retried_nor_alerted(workspace: Path) -> None:
    model = Script(overflow(), [text("unreachable")])
    alerts: list[ErrorInfo] = []
    runtime = Runtime(
        model,
        workspace=workspace,
        retry=RetryPolicy(max_attempts=5, base_delay=0, jitter=False),
        on_alert=lambda info, agent: alerts.append(info),
    )
    result = run(runtime.run("hello"))
    assert len(model.requests) == 1
    assert alerts == []
    assert result.status == "overflow"
    assert result.user_message == CONTEXT_OVERFLOW_MESSAGE
    assert result.error is not None
    assert (result.error.prompt_tokens, result.error.limit) == (1_234_567, 1_000_000)


def test_a_retryable_error_then_success(workspace: Path) -> None:
    model = Script(StatusError(529, "overloaded_error", "Overloaded"), [text("fine")])

    async def sleep(seconds: float) -> None:
        return None

    runtime = Runtime(model, workspace=workspace, sleep=sleep)
    result = run(runtime.run("hello"))
    assert result.finished and result.answer == "fine"
    assert len(model.requests) == 2
    assert model.requests[0].messages == model.requests[1].messages  # the same request again
    assert result.stats.retries == 1


@pytest.mark.parametrize(
    ("make", "level"),
    [
        (overflow, logging.INFO),
        (lambda: StatusError(400, "invalid_request_error", "bad"), logging.WARNING),
        (lambda: StatusError(401, "authentication_error", "bad key"), logging.ERROR),
    ],
)
def test_classified_errors_are_logged_at_their_kinds_level(
    workspace: Path, caplog: pytest.LogCaptureFixture, make: Callable[[], Exception], level: int
) -> None:
    caplog.set_level(logging.DEBUG, logger="windowfit.agent")
    run(Runtime(Script(make()), workspace=workspace).run("hello"))
    records = [r for r in caplog.records if "request failed" in r.getMessage()]
    assert [r.levelno for r in records] == [level]


def test_a_failing_alert_hook_does_not_stop_the_loop(workspace: Path) -> None:
    def hook(info: ErrorInfo, agent: AgentInfo) -> None:
        raise ValueError("pager down")

    model = Script(StatusError(401, "authentication_error", "bad key"))
    result = run(Runtime(model, workspace=workspace, on_alert=hook).run("hello"))
    assert result.status == "failed"


@pytest.mark.parametrize(
    "options",
    [
        {"budget": 0},
        {"budget": -5},
        {"max_steps": 0},
        {"max_parallel": 0},
        {"max_depth": -1},
        {"tool_timeout": 0},
    ],
)
def test_bad_settings_are_refused(options: dict[str, int]) -> None:
    with pytest.raises(SettingsError):
        Runtime(Script(), **options)  # type: ignore[arg-type]


def test_a_runtime_serves_several_event_loops(workspace: Path) -> None:
    files = ["docs/f1.txt", "docs/f2.txt"]
    model = SimulatedProvider(Team(Coordinator(), Reader()), tokenizer=SeedEstimator())
    runtime = Runtime(model, workspace=workspace, max_parallel=1)
    first = run(runtime.run(coordinator_instruction(files, 2)))
    second = run(runtime.run(coordinator_instruction(files, 2)))
    assert first.finished and second.finished and first.session != second.session
    assert [s.id for s in runtime.store.sessions()] == [first.session, second.session]


def test_a_failing_event_hook_does_not_stop_the_loop(workspace: Path) -> None:
    def hook(event: AgentEvent) -> None:
        raise RuntimeError("display gone")

    result = run(Runtime(Script([text("fine")]), workspace=workspace, on_event=hook).run("hi"))
    assert result.finished and result.answer == "fine"


# --------------------------------------------------------------------------------------
# Learning and recovery from the provider's overflow


class _Undercount(SeedEstimator):
    """The seed rule times 0.6: an estimate that errs low, so the provider has the last
    word (the simulated provider counts with the seed rule itself)."""

    name = "undercount"

    def estimate(self, text: str) -> int:
        return int(super().estimate(text) * 0.6)


@pytest.mark.parametrize("learn", [True, False], ids=["learning", "learning-off"])
def test_an_overflowing_request_is_fitted_again_and_sent_once(workspace: Path, learn: bool) -> None:
    files = [f"docs/f{k}.txt" for k in range(1, 7)]
    model = SimulatedProvider(Reader(), tokenizer=SeedEstimator(), hard_limit=2_000)
    runtime = Runtime(
        model,
        workspace=workspace,
        budget=2_000,
        max_depth=0,
        estimator=_Undercount(),
        learn=learn,
    )
    result = run(runtime.run(reader_instruction(files)))
    assert result.finished
    log = model.total().log
    rejected = [i for i, r in enumerate(log) if r.rejected]
    # The estimate errs low: without learning the provider refuses (learning from the
    # first answers' usage prevents that).
    assert bool(rejected) is not learn
    for i in rejected:  # ... and each refusal was followed by one smaller, accepted request
        assert not log[i + 1].rejected and log[i + 1].tokens < log[i].tokens
    assert result.stats.rejected == len(rejected) and result.stats.requests == len(log)
    learner = getattr(runtime.shaper, "learner", None)
    assert (learner is not None and learner.observations > 0) is learn
