"""``windowfit replay``: the JSON shape, the tables, bad paths, logs and flags, the plot
extra, the progress bar, and real runs."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from windowfit.cli import main
from windowfit.replay import ReplayConfig, parse_policies, read_logs, replay
from windowfit.replay._progress import Progress
from windowfit.replay.plot import caption
from windowfit.replay.report import frontier

REQUIRED = {
    "requests",
    "over_budget",
    "rejected",
    "peak_tokens",
    "cost_cached",
    "cost_uncached",
    "cache_read_share",
    "breaks",
    "visible_tool_tokens_last",
    "visible_tool_tokens_mean",
    "violations",
    "refused",
    "mean_tokens",
    "resent_per_break",
}


def _messages(rounds: int = 6, size: int = 3000) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for k in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {k}.",
                "tool_calls": [
                    {
                        "id": f"call_{k}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls {k}"})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": "o" * size})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def _good(directory: Path, name: str = "good.json") -> Path:
    return _write(directory, name, json.dumps(_messages()))


def _run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["replay", *args])
    out, err = capsys.readouterr()
    return code, out, err


SEED = ("--tokenizer", "seed", "--fit-counts", "exact", "--no-progress")


# --------------------------------------------------------------------------------------
# Output


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _good(tmp_path)
    code, out, err = _run_cli(capsys, str(path), "--json", "--budget", "2000", *SEED)
    assert code == 0, err
    data = json.loads(out)
    assert {"totals", "runs", "config", "errors", "sources", "policies"} <= set(data)
    names = list(data["totals"])
    assert names[0] == "windowfit" and "raw" in names and "swe-agent-last-n" in names
    for figures in data["totals"].values():
        assert set(figures) >= REQUIRED
        assert figures["requests"] == 7
    (run,) = data["runs"]
    assert run["name"] == "good" and run["budget"] == 2000 and run["hard_limit"] == 4000
    assert list(run["policies"]) == names
    assert data["totals"]["windowfit"]["violations"] == 0
    assert data["totals"]["windowfit"]["over_budget"] == 0
    assert data["totals"]["raw"]["over_budget"] > 0
    assert data["config"]["cost_unit"] == "base-price input tokens"
    assert data["errors"] == []


def test_a_model_for_logs_that_name_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _good(tmp_path)
    args = (str(path), "--budget", "2000", "--no-progress", "--policies", "windowfit,raw")
    code, out, err = _run_cli(capsys, *args, "--model", "deepseek-chat", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["config"]["model"] == "deepseek-chat"
    assert (data["runs"][0]["model"], data["runs"][0]["tokenizer"]) == ("deepseek-chat", "deepseek")
    code, out, err = _run_cli(capsys, *args, "--model", "deepseek-chat")
    assert code == 0, err
    assert "(runs without a model: deepseek-chat)" in " ".join(out.split())


def test_text_tables_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _good(tmp_path)
    code, out, _ = _run_cli(
        capsys,
        str(path),
        "--budget-fraction",
        "0.4",
        "--policies",
        "windowfit,raw,swe-agent-last-n:polling=3",
        "--per-run",
        "--price",
        "3",
        *SEED,
    )
    assert code == 0
    assert "all runs:" in out and "per run" in out
    for label in ("windowfit", "raw", "swe-agent-last-n:polling=3"):
        assert label in out
    assert "$" in out  # costs in dollars with --price
    assert "budget 40% of each run's largest request, hard limit 2x the budget" in out


@pytest.mark.parametrize("per_run", [False, True])
def test_text_tables_fit_100_columns_unless_wide(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], per_run: bool
) -> None:
    path = _good(tmp_path)
    extra = ["--per-run"] if per_run else []
    code, out, _ = _run_cli(capsys, str(path), "--budget", "3000", *extra, *SEED)
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    flat = " ".join(out.split())
    assert "not shown: mean, uncached" in flat and "--wide shows every column" in flat
    code, wide, _ = _run_cli(capsys, str(path), "--budget", "3000", "--wide", *extra, *SEED)
    assert code == 0 and "not shown" not in wide
    assert max(len(line) for line in wide.splitlines()) > 100
    for header in ("requests", "mean", "uncached", "resent/break", "intact last", "peak"):
        assert f"  {header}  " in wide.splitlines()[4] + "  "


def test_prices_are_configurable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _good(tmp_path)
    args = (str(path), "--json", "--budget", "2000", "--policies", "raw", *SEED)
    _, out, _ = _run_cli(capsys, *args)
    default = json.loads(out)["totals"]["raw"]
    _, out, _ = _run_cli(capsys, *args, "--cache-read", "1", "--cache-write", "1")
    flat = json.loads(out)["totals"]["raw"]
    assert flat["cost_cached"] == flat["cost_uncached"] == default["cost_uncached"]
    assert default["cost_cached"] < default["cost_uncached"]


# --------------------------------------------------------------------------------------
# Bad paths, flags and logs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "10", "--budget-fraction", "0.5"], "not allowed with"),
        (["--budget-fraction", "0"], "must be in (0, 1]"),
        (["--budget-fraction", "half"], "not a number"),
        (["--budget", "-3"], "must be positive"),
        (["--hard-limit-factor", "0.5"], "at least 1"),
        (["--context-window", "10", "--hard-limit-factor", "2"], "not allowed with"),
        (["--budget", "100", "--context-window", "50"], "below the budget"),
        (["--policies", "nope"], "unknown policy 'nope'"),
        (["--policies", "swe-agent-last-n:n=x"], "cannot read 'x'"),
        (["--tokenizer", "nope"], "unknown tokenizer backend 'nope'"),
        (["--cache-read", "-1"], "must not be negative"),
    ],
)
def test_bad_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    path = _good(tmp_path)
    try:
        code = main(["replay", str(path), *args])
    except SystemExit as exc:  # argparse's own checks
        code = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 2 and message in err and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err


def test_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run_cli(capsys, str(tmp_path / "nope.json"), *SEED)
    assert code == 2 and out == ""
    assert err == f"windowfit: error: {tmp_path / 'nope.json'}: no such file or directory\n"


def test_bad_logs_are_named_and_the_rest_is_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _good(tmp_path, "a_good.json")
    text = json.dumps(_messages(), indent=1)
    _write(tmp_path, "b_truncated.json", text[: len(text) // 2])
    lines = [json.dumps(m) for m in _messages()]
    lines.insert(3, '{"role": "user", "content": "cut')
    _write(tmp_path, "c_bad_line.jsonl", "\n".join(lines) + "\n")
    _write(tmp_path, "README.md", "# not a log")
    code, out, err = _run_cli(capsys, str(tmp_path), "--json", "--budget", "3000", *SEED)
    assert code == 1
    truncated = str(tmp_path / "b_truncated.json")
    assert f"windowfit: error: {truncated}, line " in err and "truncated" in err
    assert f"{tmp_path / 'c_bad_line.jsonl'}, line 4: not valid JSON" in err
    data = json.loads(out)
    assert [run["name"] for run in data["runs"]] == ["a_good", "c_bad_line"]
    errors = {Path(e["path"]).name: e for e in data["errors"]}
    assert set(errors) == {"b_truncated.json", "c_bad_line.jsonl"}
    assert errors["c_bad_line.jsonl"]["line"] == 4
    assert isinstance(errors["b_truncated.json"]["line"], int)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the file is empty"),
        ('{"foo": 1}', "not a known agent log"),
        ('{"messages": [{"role": "wizard", "content": "a"}]}', "unknown message role"),
        ('[{"role": "user", "content": "a"', "truncated"),
    ],
)
def test_nothing_readable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    path = _write(tmp_path, "bad.json", text)
    code, out, err = _run_cli(capsys, str(path), *SEED)
    assert code == 2 and out == ""
    assert f"windowfit: error: {path}" in err and problem in err
    assert err.rstrip().endswith(f"no run could be read from {path}")
    assert err.count("\n") == 1  # one file, one problem: one line


def test_read_logs_reports_missing_paths(tmp_path: Path) -> None:
    runs, problems = read_logs([tmp_path / "nope", _good(tmp_path)])
    assert len(runs) == 1
    assert [(p.line, p.problem) for p in problems] == [(None, "no such file or directory")]


# --------------------------------------------------------------------------------------
# The plot extra and the progress bar


def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    path = _good(tmp_path)
    out_png = tmp_path / "plot.png"
    code, out, err = _run_cli(capsys, str(path), "--plot", str(out_png), *SEED)
    assert code == 2 and out == "" and not out_png.exists()
    assert "'matplotlib'" in err and "pip install 'windowfit[plot]'" in err


def test_plot_with_matplotlib(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    path = _good(tmp_path)
    out_png = tmp_path / "plot.png"
    code, out, _ = _run_cli(capsys, str(path), "--plot", str(out_png), "--budget", "3000", *SEED)
    assert code == 0 and out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {out_png} (every run)" in out


def test_progress_bar() -> None:
    stream = io.StringIO()
    bar = Progress(200, stream=stream, enabled=True, width=10)
    bar.advance(50, "run-a")
    bar.advance(150, "run-b")
    assert "[##########] 100%  200/200 model calls  run-b" in stream.getvalue()
    assert bar.line() == "replay [##########] 100%  200/200 model calls"
    bar.close()
    assert stream.getvalue().endswith("\r")
    quiet = io.StringIO()
    Progress(10, stream=quiet).advance(10)  # not a terminal: nothing drawn
    assert quiet.getvalue() == ""


def test_progress_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _good(tmp_path)
    code, _, err = _run_cli(capsys, str(path), "--tokenizer", "seed", "--progress")
    assert code == 0 and "model calls" in err and "\r" in err


# --------------------------------------------------------------------------------------
# Real runs


@pytest.fixture(scope="module")
def real_report(shared_data: Path) -> Any:
    root = shared_data / "trajectories"
    session = "4d5611e5-241a-462a-8d15-5122611a9569"
    files = [
        root / "mini_swe_agent_deepseek" / "deepseek_chat_dev__pvlib__pvlib-python-1707.traj.json",
        root / "claude_code" / f"{session}__subagents__agent-a2898e3.jsonl",
        root / "claude_code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
        root / "swe_agent" / "trajectories__demonstrations__function_calling_simple.traj",
        root / "tau_bench" / "gpt-4o-airline.json",
    ]
    runs, problems = read_logs(files)
    assert problems == []
    runs = [r for r in runs if r.kind != "tau-bench"] + [r for r in runs if r.kind == "tau-bench"][
        ::25
    ]
    policies = parse_policies(None)
    return replay(runs, policies, ReplayConfig(budget_fraction=0.3, tokenizer="seed"))


def test_real_runs_without_the_hard_limit_stay_in_budget(shared_data: Path) -> None:
    root = shared_data / "trajectories"
    runs, _ = read_logs([root / "tau_bench" / "gpt-4o-airline.json"])
    config = ReplayConfig(budget_fraction=0.5, tokenizer="seed", fit_limit=False)
    report = replay(runs[::20], parse_policies("windowfit,windowfit-lean"), config)
    for stats in report.totals().values():
        assert stats.over_budget == 0 and stats.rejected == 0 and stats.violations == 0
        assert stats.refused > 0  # tau-bench's system prompt alone is over many budgets


def test_real_runs_of_every_source(real_report: Any) -> None:
    report = real_report
    assert {r.kind for r in report.runs} == {
        "mini-swe-agent",
        "claude-code",
        "claude-code-subagent",
        "swe-agent",
        "tau-bench",
    }
    for run in report.runs:
        raw, wf = run.policies["raw"], run.policies["windowfit"]
        assert raw.requests == wf.requests == run.requests > 0
        assert raw.peak_tokens == run.largest
        assert raw.visible_mean in (None, 1.0) and raw.breaks == 0
        for name in ("windowfit", "windowfit-lean", "seed"):
            stats = run.policies[name]
            assert stats.violations == 0 and stats.rejected == 0 and stats.errors == 0
            if run.head > run.budget:  # even the task does not fit the budget
                assert stats.refused + stats.over_budget == stats.requests
        assert run.budget == int(0.3 * run.largest)
    totals = report.totals()
    pricing = report.config.pricing
    assert totals["windowfit"].cost(pricing) < totals["seed"].cost(pricing)
    assert totals["raw"].rejected > 0  # at 30% with a 2x limit, the largest requests fail
    assert "raw" not in frontier(totals, report)
    for name, stats in totals.items():
        d = stats.to_dict(pricing)
        assert 0 <= d["cache_read_share"] <= 1, name
        assert d["visible_tool_tokens_mean"] is None or 0 <= d["visible_tool_tokens_mean"] <= 1


class _FakeAxes:
    def __init__(self, calls: list[tuple[str, Any]]) -> None:
        self.calls = calls

    def plot(self, xs: list[int], ys: list[int], **kwargs: Any) -> None:
        self.calls.append(("plot", (kwargs["label"], list(xs), list(ys))))

    def axhline(self, y: int, **kwargs: Any) -> None:
        self.calls.append(("axhline", (kwargs["label"], y)))

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self.calls.append((name, args))


def test_plot_draws_each_policy_with_refusals_as_gaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in for matplotlib (a fake, not installed here) records what is drawn."""
    import types

    from windowfit.replay.plot import plot_report

    calls: list[tuple[str, Any]] = []
    figure = types.SimpleNamespace(
        suptitle=lambda text, **kw: calls.append(("suptitle", text)),
        tight_layout=lambda: None,
        savefig=lambda path, dpi: Path(path).write_bytes(b"fake png"),
    )
    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots = lambda n, m, **kw: (figure, [[_FakeAxes(calls)] for _ in range(n)])  # type: ignore[attr-defined]
    pyplot.close = lambda fig: calls.append(("close", fig))  # type: ignore[attr-defined]
    matplotlib = types.ModuleType("matplotlib")
    matplotlib.use = lambda backend: calls.append(("use", backend))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)

    runs, _ = read_logs([_good(tmp_path)])
    report = replay(
        runs, parse_policies("windowfit,raw"), ReplayConfig(budget=3000, tokenizer="seed")
    )
    out = tmp_path / "plot.png"
    assert plot_report(report, out) == 1
    assert out.read_bytes() == b"fake png" and ("use", "Agg") in calls
    lines = {args[0]: args for name, args in calls if name == "plot"}
    series = report.runs[0].series
    assert lines["raw"][2] == series["raw"]
    refused = [i for i, v in enumerate(series["windowfit"]) if v is None]
    assert lines["windowfit"][1] == [i for i in range(7) if i not in refused]
    assert ("axhline", ("budget", 3000)) in calls and ("axhline", ("hard limit", 6000)) in calls
    titles = [args for name, args in calls if name == "suptitle"]
    assert titles == [caption(report, report.runs)] and "every run (of 1)" in titles[0]


def test_the_plot_says_which_runs_it_draws_and_why(tmp_path: Path) -> None:
    from windowfit.replay.plot import _chosen

    short = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    runs, _ = read_logs([_good(tmp_path), _write(tmp_path, "short.json", json.dumps(short))])
    report = replay(
        runs, parse_policies("windowfit,raw"), ReplayConfig(budget=3000, tokenizer="seed")
    )
    chosen = _chosen(report, 1)
    assert chosen == [max(report.runs, key=lambda r: r.requests)]
    text = caption(report, chosen)
    assert "the 1 runs with the most model calls (of 2)" in text
    assert "one line style per policy" in text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "its default estimate (what a user gets without configuring anything)"),
        (("--fit-counts", "exact"), "the same tokenizer (exact counts)"),
        (("--fit-counts", "seed"), "the write-up's rule (seed)"),
    ],
)
def test_the_output_says_what_windowfit_counted_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], said: str
) -> None:
    path = _good(tmp_path)
    code, out, err = _run_cli(
        capsys, str(path), "--budget", "2000", "--tokenizer", "seed", "--no-progress", *args
    )
    assert code == 0, err
    assert said in " ".join(out.split())
