"""Replay every model call of real agent runs through several policies, and measure.

For each run read from a log (:func:`windowfit.logs.read_runs`), each request point
``messages[:index]`` is shaped by every policy, and the request the policy would send is
measured:

* **size**, counted with a real tokenizer (``tokenizer``; ``auto`` picks one from the
  run's model), with windowfit's message overheads (:class:`windowfit.Sizer`);
* **over budget** when the size is over the run's budget, **rejected** when it is over
  the hard limit (the provider would refuse it as too long), **refused** when the policy
  would not send it at all (:func:`windowfit.fit` raised the context-overflow error: the
  agent would have to stop or ask the person);
* **cost** under prompt caching (:class:`windowfit.cache.PrefixCacheMeter`: the longest
  prefix shared with the previous request sent is read at 0.1x the input price, the rest
  written at 1.25x), and without caching; **breaks** are requests that do not start with
  the whole previous request, and **resent per break** what such requests write;
* the **share of tool-result tokens still intact** (the tokens of the results the
  conversation holds at that point that are sent unchanged), at the last request sent
  and averaged over the requests sent;
* **violations**: requests that a provider would reject as malformed: a tool result
  whose call is not in the assistant message before it (``orphan_results``), a tool call
  without its result before the next message (``unanswered_calls``), or the
  conversation's first message gone (``first_message_missing``).

Every request sent is billed, including rejected ones (counted as if accepted): a policy
should not look cheap for being rejected, and rejections have their own column. Refused
requests are not sent, so they cost nothing and do not touch the cache.

Budgets: either one budget for every run, or a fraction of each run's largest request
(sent as it is, counted with the tokenizer). The hard limit is a fixed context window or
a multiple of the budget.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache import CachePricing, PrefixCacheMeter
from ..errors import MissingExtraError, SettingsError, TokenizerError, WindowfitError
from ..formats._rules import PairingRule
from ..logs import Run, read_runs
from ..models import model_info
from ..profiles import default_estimator, estimator_for
from ..sizing import Sizer, default_sizer
from ..tokens import Estimator, SeedEstimator
from ._progress import Progress
from .conversation import Conversation
from .policies import Policy, Refused, WindowfitPolicy

__all__ = [
    "FIT_COUNTS",
    "VIOLATION_KINDS",
    "LogProblem",
    "PolicyStats",
    "ReplayConfig",
    "ReplayReport",
    "RunReport",
    "check_request",
    "intact_tool_tokens",
    "log_files",
    "measure_request",
    "read_logs",
    "replay",
    "replay_run",
    "tokenizer_for",
]

#: What the windowfit presets may count with (``ReplayConfig.fit_counts``).
FIT_COUNTS = ("default", "exact", "seed")

VIOLATION_KINDS = ("orphan_results", "unanswered_calls", "first_message_missing")
_VIOLATION_OF = {
    "orphan_result": "orphan_results",
    "unanswered_call": "unanswered_calls",
    "duplicate_call": "orphan_results",
    "bad_opening": "first_message_missing",
}


# --------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class ReplayConfig:
    """How budgets, limits, counting and prices are set for a replay.

    ``budget`` (tokens, every run) or ``budget_fraction`` (of each run's largest request)
    sets the budget; ``context_window`` (tokens) or ``hard_limit_factor`` (times the
    budget) the hard limit. ``tokenizer`` counts every request: a name that
    :func:`windowfit.tokenizers.load_backend` knows, ``seed`` (windowfit's estimate, no
    tokenizer), or ``auto`` (by the run's model's family in the model table: DeepSeek
    models ``deepseek``, Claude ``claude-legacy``, GPT-4 and GPT-3.5 ``cl100k``, Mistral
    ``tekken``, anything else ``o200k``; ``seed`` with a warning when the tokenizer is
    not installed). ``fit_counts`` is what the
    windowfit presets count with when deciding: ``default`` (what a user gets without
    configuring anything: :func:`windowfit.default_estimator` for the run's model, its
    family's profile, ``conservative`` when the model is unknown), ``exact`` (the same
    tokenizer that measures) or ``seed`` (the write-up's rule). Over budget and over the
    hard limit are always measured with ``tokenizer``.
    ``model`` is the model of runs whose log does not record one (tau-bench's episodes,
    SWE-agent's demonstrations): every request a provider sees names its model, so a
    replay told the model counts as the real request would be counted, both the judge
    (``auto``) and windowfit's default estimate. Without it such runs are measured with
    ``o200k`` (``claude-legacy`` for Claude Code logs) and windowfit, not knowing the
    model, counts with ``conservative``.
    ``fit_limit`` tells the windowfit presets the hard limit as the model's window (so
    they send over the budget rather than refuse when only the window can hold the
    request); without it they know the budget alone. Costs are
    in base-price input tokens, or in dollars when ``price_per_mtok`` (dollars per
    million base-price input tokens) is given.
    """

    budget: int | None = None
    budget_fraction: float | None = 0.5
    context_window: int | None = None
    hard_limit_factor: float = 2.0
    tokenizer: str = "auto"
    fit_counts: str = "default"
    fit_limit: bool = True
    model: str | None = None
    pricing: CachePricing = field(default_factory=CachePricing)
    price_per_mtok: float | None = None

    def __post_init__(self) -> None:
        if self.budget is not None and (isinstance(self.budget, bool) or self.budget <= 0):
            raise SettingsError(f"budget must be a positive number of tokens, not {self.budget}")
        if self.budget is None:
            fraction = self.budget_fraction
            if fraction is None or not 0 < fraction <= 1:
                raise SettingsError(f"budget fraction must be in (0, 1], not {fraction}")
        if self.context_window is not None and self.context_window <= 0:
            raise SettingsError(f"context window must be positive, not {self.context_window}")
        if self.hard_limit_factor < 1:
            raise SettingsError(
                f"hard-limit factor must be at least 1, not {self.hard_limit_factor}"
            )
        if self.fit_counts not in FIT_COUNTS:
            raise SettingsError(
                f"fit_counts must be one of {', '.join(FIT_COUNTS)}, not {self.fit_counts!r}"
            )
        if (
            self.budget is not None
            and self.context_window is not None
            and self.context_window < self.budget
        ):
            raise SettingsError(
                f"the context window ({self.context_window:,}) is below the budget "
                f"({self.budget:,})"
            )
        for name in ("read", "write", "uncached"):
            if getattr(self.pricing, name) < 0:
                raise SettingsError(f"cache {name} price must not be negative")
        if self.price_per_mtok is not None and self.price_per_mtok < 0:
            raise SettingsError("the price must not be negative")
        if self.model is not None and (not isinstance(self.model, str) or not self.model):
            raise SettingsError(f"model must be a non-empty name, not {self.model!r}")

    def limits(self, largest: int) -> tuple[int, int]:
        """(budget, hard limit) for a run whose largest request is ``largest`` tokens."""
        if self.budget is not None:
            budget = self.budget
            scaled = self.hard_limit_factor * budget
        else:
            assert self.budget_fraction is not None
            budget = max(1, int(self.budget_fraction * largest + 1e-9))
            # From the fraction, not the rounded budget: at 50% and 2x, the hard limit is
            # the largest request itself, not one token below it.
            scaled = self.hard_limit_factor * self.budget_fraction * largest
        if self.context_window is not None:
            return budget, self.context_window
        return budget, max(budget, int(scaled + 1e-9))

    def describe(self) -> str:
        if self.budget is not None:
            budget = f"budget {self.budget:,} tokens"
        else:
            budget = f"budget {self.budget_fraction:.0%} of each run's largest request"
        if self.context_window is not None:
            limit = f"hard limit {self.context_window:,} tokens"
        else:
            limit = f"hard limit {self.hard_limit_factor:g}x the budget"
        fitted = {
            "default": "windowfit counting with its default estimate (what a user gets "
            "without configuring anything)",
            "exact": "windowfit counting with the same tokenizer (exact counts)",
            "seed": "windowfit counting with the write-up's rule (seed)",
        }[self.fit_counts]
        given = f" (runs without a model: {self.model})" if self.model else ""
        return f"{budget}, {limit}, measured with {self.tokenizer}{given}; {fitted}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "budget_fraction": None if self.budget is not None else self.budget_fraction,
            "context_window": self.context_window,
            "hard_limit_factor": (
                None if self.context_window is not None else self.hard_limit_factor
            ),
            "tokenizer": self.tokenizer,
            "fit_counts": self.fit_counts,
            "fit_limit": self.fit_limit,
            "model": self.model,
            "pricing": dataclasses.asdict(self.pricing),
            "price_per_mtok": self.price_per_mtok,
            "cost_unit": "USD" if self.price_per_mtok is not None else "base-price input tokens",
        }


# --------------------------------------------------------------------------------------
# Results


@dataclass
class PolicyStats:
    """What one policy did over one run, or summed over several (:meth:`merge`)."""

    requests: int = 0
    refused: int = 0
    errors: int = 0
    over_budget: int = 0
    #: Requests over the budget among those a fit exists for (head plus latest round
    #: within the budget by the measuring count): what counting, not the run, decided.
    over_budget_fittable: int = 0
    #: The largest size / budget among those requests (0.0 when none was sent).
    worst_fittable: float = 0.0
    rejected: int = 0
    peak_tokens: int = 0
    sent_tokens: int = 0
    read_tokens: int = 0
    write_tokens: int = 0
    breaks: int = 0
    resent_tokens: int = 0
    violations: int = 0
    violation_kinds: Counter[str] = field(default_factory=Counter)
    visible_share_sum: float = 0.0
    visible_requests: int = 0
    visible_last_sum: float = 0.0
    visible_last_runs: int = 0
    runs: int = 0

    @property
    def sent(self) -> int:
        return self.requests - self.refused

    def cost(self, pricing: CachePricing, price_per_mtok: float | None = None) -> float:
        """Input cost with prompt caching."""
        tokens = self.read_tokens * pricing.read + self.write_tokens * pricing.write
        return tokens * price_per_mtok / 1e6 if price_per_mtok is not None else tokens

    def cost_uncached(self, pricing: CachePricing, price_per_mtok: float | None = None) -> float:
        tokens = (self.read_tokens + self.write_tokens) * pricing.uncached
        return tokens * price_per_mtok / 1e6 if price_per_mtok is not None else tokens

    @property
    def visible_mean(self) -> float | None:
        return self.visible_share_sum / self.visible_requests if self.visible_requests else None

    @property
    def visible_last(self) -> float | None:
        return self.visible_last_sum / self.visible_last_runs if self.visible_last_runs else None

    def merge(self, other: PolicyStats) -> None:
        for f in dataclasses.fields(self):
            if f.name == "peak_tokens":
                self.peak_tokens = max(self.peak_tokens, other.peak_tokens)
            elif f.name == "worst_fittable":
                self.worst_fittable = max(self.worst_fittable, other.worst_fittable)
            elif f.name == "violation_kinds":
                self.violation_kinds.update(other.violation_kinds)
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(
        self, pricing: CachePricing | None = None, price_per_mtok: float | None = None
    ) -> dict[str, Any]:
        pricing = pricing or CachePricing()
        written = self.read_tokens + self.write_tokens
        last = self.visible_last
        mean = self.visible_mean
        return {
            "requests": self.requests,
            "refused": self.refused,
            "over_budget": self.over_budget,
            "over_budget_fittable": self.over_budget_fittable,
            "worst_fittable": round(self.worst_fittable, 4),
            "rejected": self.rejected,
            "peak_tokens": self.peak_tokens,
            "mean_tokens": round(self.sent_tokens / self.sent, 1) if self.sent else 0.0,
            "cost_cached": round(self.cost(pricing, price_per_mtok), 6),
            "cost_uncached": round(self.cost_uncached(pricing, price_per_mtok), 6),
            "cache_read_share": round(self.read_tokens / written, 6) if written else 0.0,
            "breaks": self.breaks,
            "resent_per_break": round(self.resent_tokens / self.breaks, 1) if self.breaks else 0.0,
            "visible_tool_tokens_last": None if last is None else round(last, 6),
            "visible_tool_tokens_mean": None if mean is None else round(mean, 6),
            "violations": self.violations,
            "violation_kinds": {k: self.violation_kinds.get(k, 0) for k in VIOLATION_KINDS},
            "errors": self.errors,
        }


@dataclass
class RunReport:
    """One run replayed: its limits and each policy's figures (by policy label).

    ``head`` is the size of what no policy here drops: the system prompt and tools, the
    leading system messages and the first message. ``unfittable`` counts the requests
    whose head plus latest tool round sent intact (the assistant message that made the
    last calls, and their results) is over the budget: a policy that keeps the task and
    the latest results cannot send them within the budget.

    ``intact_ceiling`` (with ``intact_points``, the requests with tool results) sums, per
    request, the largest share of its tool-result tokens that any request within the
    budget that keeps the head can send unchanged: ``min(1, (budget - head) / results)``.
    A policy that holds the budget cannot keep more intact on average than
    ``intact_ceiling / intact_points``; a peer above it does so by exceeding the budget.

    ``series`` holds, per policy, the size of every request sent (``None`` where the
    policy refused), for plots.
    """

    name: str
    path: str
    kind: str
    format: str
    model: str | None
    tokenizer: str
    budget: int
    hard_limit: int
    largest: int
    requests: int
    head: int = 0
    unfittable: int = 0
    #: The request points (message counts) that ``unfittable`` counts.
    unfittable_points: frozenset[int] = frozenset()
    intact_ceiling: float = 0.0
    intact_points: int = 0
    policies: dict[str, PolicyStats] = field(default_factory=dict)
    series: dict[str, list[int | None]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(
        self, pricing: CachePricing | None = None, price_per_mtok: float | None = None
    ) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "kind": self.kind,
            "format": self.format,
            "model": self.model,
            "tokenizer": self.tokenizer,
            "budget": self.budget,
            "hard_limit": self.hard_limit,
            "largest_request": self.largest,
            "head_tokens": self.head,
            "unfittable": self.unfittable,
            "intact_ceiling": (
                round(self.intact_ceiling / self.intact_points, 6) if self.intact_points else None
            ),
            "requests": self.requests,
            "policies": {k: v.to_dict(pricing, price_per_mtok) for k, v in self.policies.items()},
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class LogProblem:
    """A log file, or a part of one, that could not be read."""

    path: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        where = f"{self.path}, line {self.line}" if self.line is not None else self.path
        return f"{where}: {self.problem}"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "problem": self.problem}


@dataclass
class ReplayReport:
    """Everything a replay measured: per run, in total, and per source (run kind)."""

    config: ReplayConfig
    policies: list[str]
    runs: list[RunReport]
    problems: list[LogProblem] = field(default_factory=list)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)

    def totals(self, runs: Iterable[RunReport] | None = None) -> dict[str, PolicyStats]:
        out = {label: PolicyStats() for label in self.policies}
        for run in self.runs if runs is None else runs:
            for label, stats in run.policies.items():
                out[label].merge(stats)
        return out

    def by_source(self) -> dict[str, dict[str, PolicyStats]]:
        kinds: dict[str, list[RunReport]] = {}
        for run in self.runs:
            kinds.setdefault(run.kind, []).append(run)
        return {kind: self.totals(runs) for kind, runs in kinds.items()}

    def to_dict(self) -> dict[str, Any]:
        pricing, price = self.config.pricing, self.config.price_per_mtok
        return {
            "config": self.config.to_dict(),
            "policies": {label: self.settings.get(label, {}) for label in self.policies},
            "totals": {k: v.to_dict(pricing, price) for k, v in self.totals().items()},
            "sources": {
                kind: {k: v.to_dict(pricing, price) for k, v in totals.items()}
                for kind, totals in self.by_source().items()
            },
            "runs": [run.to_dict(pricing, price) for run in self.runs],
            "errors": [p.to_dict() for p in self.problems],
        }


# --------------------------------------------------------------------------------------
# Reading logs


_SKIPPED_NAMES = ("README", "SOURCES", "LICENSE")
_SKIPPED_SUFFIXES = (".md", ".markdown", ".csv", ".tsv", ".png", ".txt")


def log_files(directory: Path) -> list[Path]:
    """The log files :func:`read_logs` reads under ``directory``, in its order."""
    files: list[Path] = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        name = entry.name
        if name.startswith("."):
            continue
        if entry.is_dir():
            files.extend(log_files(entry))
        elif not (
            name.upper().startswith(_SKIPPED_NAMES) or name.lower().endswith(_SKIPPED_SUFFIXES)
        ):
            files.append(entry)
    return files


def read_logs(
    paths: Sequence[str | os.PathLike[str]], *, max_bytes: int | None = None
) -> tuple[list[Run], list[LogProblem]]:
    """Every run in the given files and directories, and every file that could not be read.

    A directory means every log in it (recursively, sorted; hidden files, README/SOURCES/
    LICENSE and markdown, CSV, text and PNG files are skipped). A bad file does not stop
    the others; its problem names the file and, where known, the line. Lines a JSON-lines
    reader skipped are reported too (the rest of that file is replayed).
    """
    runs: list[Run] = []
    problems: list[LogProblem] = []
    for path in paths:
        root = Path(path)
        if not root.exists():
            problems.append(LogProblem(str(root), None, "no such file or directory"))
            continue
        files = log_files(root) if root.is_dir() else [root]
        for file in files:
            try:
                found = (
                    read_runs(file) if max_bytes is None else read_runs(file, max_bytes=max_bytes)
                )
            except WindowfitError as exc:
                line = getattr(exc, "line", None)
                problem = getattr(exc, "problem", str(exc))
                problems.append(LogProblem(str(file), line, problem))
                continue
            except OSError as exc:
                problems.append(LogProblem(str(file), None, f"cannot read ({exc.strerror})"))
                continue
            except RecursionError:
                problems.append(LogProblem(str(file), None, "JSON nested too deeply"))
                continue
            for run in found:
                for warning in run.warnings:
                    if warning.startswith("line ") and warning.endswith("skipped"):
                        number, _, rest = warning[5:].partition(": ")
                        line = int(number) if number.isdigit() else None
                        problems.append(LogProblem(run.path, line, rest))
            runs.extend(found)
    return runs, problems


# --------------------------------------------------------------------------------------
# Tokenizers


def tokenizer_for(run: Run, choice: str) -> str:
    """The tokenizer name to count ``run`` with (see :class:`ReplayConfig`): for ``auto``,
    the backend of the run's model's family in the one model table
    (:func:`windowfit.models.model_info`), ``claude-legacy`` for Claude Code logs without
    a model, else ``o200k``."""
    if choice != "auto":
        return choice
    from ..tokenizers import BACKEND_OF_FAMILY  # (the family's real tokenizer)

    info = model_info(run.model) if run.model else None
    if info is not None and info.family in BACKEND_OF_FAMILY:
        return BACKEND_OF_FAMILY[info.family]
    if run.kind.startswith("claude-code"):
        return "claude-legacy"
    return "o200k"


class _Estimators:
    """Loads each tokenizer once; ``auto`` falls back to the seed estimate (with a
    warning) when a tokenizer is not installed."""

    def __init__(self, choice: str) -> None:
        self.choice = choice
        self.seed = SeedEstimator()
        self._loaded: dict[str, Estimator] = {}
        self._failed: dict[str, str] = {}

    def get(self, name: str) -> tuple[Estimator, str, str | None]:
        """(estimator, the name actually used, a warning or None)."""
        if name == "seed":
            return self.seed, "seed", None
        if name in self._loaded:
            return self._loaded[name], name, None
        if name not in self._failed:
            from ..tokenizers import load_backend

            try:
                self._loaded[name] = load_backend(name)
                return self._loaded[name], name, None
            except (MissingExtraError, TokenizerError) as exc:
                if self.choice != "auto":
                    raise
                self._failed[name] = str(exc)
        warning = f"tokenizer {name!r} is not available ({self._failed[name]}); counted with seed"
        return self.seed, "seed", warning


# --------------------------------------------------------------------------------------
# Per request: what is intact, what is malformed


def measure_request(
    conv: Conversation, out: Sequence[Any], upto: int
) -> tuple[list[int], int, set[str]]:
    """For a shaped request of ``messages[:upto]``: the size of each message, the tokens
    of the tool results sent unchanged (a logged message sent as the very object counts
    whole; a rebuilt one by comparing each result with the logged one), and the kinds of
    invariant violations (empty when the request is valid)."""
    sizes: list[int] = []
    intact = 0
    kinds: set[str] = set()
    system_roles = conv.spec.system_roles
    first = conv.first
    looking_for_first = first >= 0
    # The rule fitting uses, counted instead of raised (the first message checked above).
    rule = PairingRule(system_roles, None, conv.spec.item_rounds)
    result_tokens = conv.result_tokens
    for position, message in enumerate(out):
        index, tokens, carrier, results, calls, role, neutral = conv.describe(message)
        sizes.append(tokens)
        if looking_for_first and role not in system_roles:
            looking_for_first = False
            if index != first and (index >= 0 or not _keeps(conv.neutral[first], neutral)):
                kinds.add("first_message_missing")
        problem = rule.check(position, role, calls, results, carrier)
        while problem is not None:
            kinds.add(_VIOLATION_OF[problem.kind])
            # Go on past the problem (the rest of the message, without the results already
            # looked at), so that every kind in the request is seen.
            again = problem.kind != "duplicate_call"
            problem = rule.check(position, role, calls, [], carrier) if again else None
        if index >= 0:
            intact += result_tokens[index + 1] - result_tokens[index]
        elif results:
            for result in neutral.tool_results:
                for where, original, size in conv.result_at.get(result.call_id, ()):
                    if where < upto and original.content == result.content:
                        intact += size
                        break
    if looking_for_first:
        kinds.add("first_message_missing")
    if rule.finish() is not None:
        kinds.add("unanswered_calls")
    return sizes, intact, kinds


def check_request(conv: Conversation, out: Sequence[Any]) -> set[str]:
    """The kinds of invariant violations in a shaped request (empty when valid)."""
    return measure_request(conv, out, len(conv.messages))[2]


def intact_tool_tokens(conv: Conversation, out: Sequence[Any], upto: int) -> tuple[int, int]:
    """(tokens of the tool results sent unchanged, tokens of every tool result in
    ``messages[:upto]``)."""
    return measure_request(conv, out, upto)[1], conv.result_tokens[upto]


def _keeps(original: Any, sent: Any) -> bool:
    """Whether ``sent`` still is the first message ``original`` (unchanged, or with a
    note appended, as windowfit's trimmed-conversation note may be)."""
    if sent is original or sent == original:
        return True
    if sent.role != original.role:
        return False
    if sent.blocks[: len(original.blocks)] == original.blocks:
        return True
    text = original.text()
    return bool(text) and sent.text().startswith(text)


# --------------------------------------------------------------------------------------
# Replaying


def replay_run(
    run: Run,
    policies: Sequence[Policy],
    config: ReplayConfig,
    estimators: _Estimators | None = None,
    on_request: Callable[[int], None] | None = None,
) -> RunReport:
    """Replay every model call of ``run`` through each policy."""
    if run.model is None and config.model is not None:
        run = dataclasses.replace(run, model=config.model)
    estimators = estimators or _Estimators(config.tokenizer)
    estimator, used, warning = estimators.get(tokenizer_for(run, config.tokenizer))
    sizer: Sizer = default_sizer(estimator, run.format)
    conv = Conversation(run, sizer)
    points = [p.index for p in run.requests if 0 < p.index <= len(run.messages)]
    largest = max((conv.request_tokens(i) for i in points), default=0)
    budget, hard_limit = config.limits(largest)
    conv.budget, conv.hard_limit = budget, hard_limit
    head_end = conv.first + 1 if conv.first >= 0 else len(run.messages)
    head = conv.fixed + conv.prefix[head_end]
    unfittable: set[int] = set()
    last_assistant = -1
    point_set = set(points)
    ceiling, with_results = 0.0, 0
    for i in range(len(run.messages) + 1):
        if i in point_set:
            start = max(last_assistant, head_end)
            floor = head + (conv.prefix[i] - conv.prefix[start] if i > start else 0)
            if floor > budget:
                unfittable.add(i)
            results = conv.result_tokens[i]
            if results:
                ceiling += min(1.0, max(0, budget - head) / results)
                with_results += 1
        if i < len(run.messages) and conv.neutral[i].role == "assistant":
            last_assistant = i
    report = RunReport(
        name=run.name,
        path=run.path,
        kind=run.kind,
        format=run.format,
        model=run.model,
        tokenizer=used,
        budget=budget,
        hard_limit=hard_limit,
        largest=largest,
        requests=len(points),
        head=head,
        unfittable=sum(p in unfittable for p in points),
        unfittable_points=frozenset(unfittable),
        intact_ceiling=ceiling,
        intact_points=with_results,
        warnings=list(run.warnings) + ([warning] if warning else []),
    )
    for policy in policies:
        if isinstance(policy, WindowfitPolicy):
            policy.estimator = _fit_estimator(config.fit_counts, estimator, run)
            policy.limit = hard_limit if config.fit_limit else None
        stats = _replay_policy(conv, policy, points, report, on_request)
        stats.runs = 1
        report.policies[policy.label] = stats
    return report


def _fit_estimator(choice: str, measuring: Estimator, run: Run) -> Estimator:
    """What the windowfit presets count with (see :class:`ReplayConfig`)."""
    if choice == "exact":
        return measuring
    if choice == "seed":
        return estimator_for(family="seed")
    return default_estimator(model=run.model)


def _replay_policy(
    conv: Conversation,
    policy: Policy,
    points: Sequence[int],
    report: RunReport,
    on_request: Callable[[int], None] | None,
) -> PolicyStats:
    stats = PolicyStats()
    meter = PrefixCacheMeter()
    series: list[int | None] = []
    last_share: float | None = None
    policy.begin(conv)
    for upto in points:
        stats.requests += 1
        try:
            out = policy.shape(conv, upto)
        except Refused:
            stats.refused += 1
            series.append(None)
            continue
        except WindowfitError as exc:
            stats.refused += 1
            stats.errors += 1
            series.append(None)
            if stats.errors == 1:
                report.warnings.append(f"{policy.label}: request {upto}: {exc}")
            continue
        sizes, intact, kinds = measure_request(conv, out, upto)
        size = conv.fixed + sum(sizes)
        meter.observe(out, sizes, conv.fixed)
        series.append(size)
        stats.sent_tokens += size
        stats.peak_tokens = max(stats.peak_tokens, size)
        stats.over_budget += size > conv.budget
        if upto not in report.unfittable_points:
            stats.over_budget_fittable += size > conv.budget
            if conv.budget:
                stats.worst_fittable = max(stats.worst_fittable, size / conv.budget)
        stats.rejected += size > conv.hard_limit
        total = conv.result_tokens[upto]
        if total:
            last_share = intact / total
            stats.visible_share_sum += last_share
            stats.visible_requests += 1
        if kinds:
            stats.violations += 1
            stats.violation_kinds.update(kinds)
    if on_request is not None:
        on_request(len(points))
    stats.read_tokens = meter.read_tokens
    stats.write_tokens = meter.write_tokens
    stats.breaks = meter.breaks
    stats.resent_tokens = meter.resent_on_break
    if last_share is not None:
        stats.visible_last_sum = last_share
        stats.visible_last_runs = 1
    report.series[policy.label] = series
    return stats


def replay(
    runs: Sequence[Run],
    policies: Sequence[Policy],
    config: ReplayConfig | None = None,
    *,
    problems: Sequence[LogProblem] = (),
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay ``runs`` through ``policies`` (see the module docstring)."""
    config = config or ReplayConfig()
    estimators = _Estimators(config.tokenizer)
    reports: list[RunReport] = []
    for run in runs:
        note = run.name

        def advance(count: int, note: str = note) -> None:
            if progress is not None:
                progress.advance(count, note)

        reports.append(replay_run(run, policies, config, estimators, advance))
    if progress is not None:
        progress.close()
    return ReplayReport(
        config=config,
        policies=[p.label for p in policies],
        runs=reports,
        problems=list(problems),
        settings={p.label: {"describe": p.describe(), **p.settings()} for p in policies},
    )


def count_requests(runs: Iterable[Run]) -> int:
    """How many model calls ``runs`` hold (for a progress bar)."""
    return sum(1 for run in runs for p in run.requests if 0 < p.index <= len(run.messages))
