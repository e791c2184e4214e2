"""The write-up's three failures as scenarios, each run before (the old system) and after.

* ``subagents``: a parent starts N sub-agents at once (default 8); each is asked to read
  long files whose total is beyond the model's hard limit. Before, trimming cannot cut a
  sub-agent's history (it has one user message), so every request grows until the provider
  rejects it, and the rejected request is retried and rejected again. After, the oldest
  results are cleared and every sub-agent finishes.
* ``chapters``: one sub-agent is asked to read 40 long Russian chapters within the budget.
  Before, its reader does not know that old results would be cleared for it, and stops
  early "to save space" (:class:`~windowfit.sim.Reader` with ``caution``). After, the
  safety net is in its instructions: it reads all 40, no request goes above the hard limit,
  and the table says how many results were cleared and in how many clearing events (each
  one a prompt-cache break).
* ``russian``: a person asks an agent to read Russian chapters, a few per turn. The old
  system trims whole user turns by a chars/4 estimate; the real tokenizer says how large
  the requests it believed within budget really were. windowfit's script-aware estimate
  is set beside it.

Each run is one :class:`~windowfit.agent.Runtime` on a :class:`SimulatedProvider` with a
scripted policy; the figures are the provider's (real tokens, rejections, cache) and the
runtime's (clearing, files read). Only the sub-agents are counted in ``subagents`` and
``chapters`` (the parent's few short requests are reported on their own line).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..agent import AgentEvent, AgentResult, HistoryStore, ReadFile, Runtime
from ..profiles import estimator_for
from ..tokens import Estimator, estimate_tokens
from ._legacy import LEGACY_RETRY, LegacyShaper, chars4, legacy_should_retry
from ._provider import DEFAULT_HARD_LIMIT, DEFAULT_TOKENIZER, SimulatedProvider, cached_tokenizer
from ._scripted import Coordinator, Reader, Team, coordinator_instruction, reader_instruction
from ._texts import GeneratedTexts, TextSource

__all__ = [
    "FIGURE_KEYS",
    "MODES",
    "SCENARIOS",
    "Figures",
    "ScenarioConfig",
    "Scenarios",
]

SCENARIOS = ("subagents", "chapters", "russian")
MODES = ("before", "after")

#: Called with (scenario, mode, event) for every agent event of a run.
EventHook = Callable[[str, str, AgentEvent], object]


@dataclass(frozen=True)
class ScenarioConfig:
    """Sizes of the scenarios. The defaults are the write-up's; tests use smaller ones."""

    budget: int = 400_000
    hard_limit: int = DEFAULT_HARD_LIMIT
    tokenizer: str = DEFAULT_TOKENIZER
    subagents: int = 8
    files_per_subagent: int = 26
    file_chars: int = 200_000
    file_language: str = "en"
    chapters: int = 40
    chapter_chars: int = 100_000
    russian_turns: int = 6
    chapters_per_turn: int = 4
    caution: float = 0.25

    def __post_init__(self) -> None:
        for name in ("budget", "hard_limit", "subagents", "files_per_subagent", "chapters"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.budget > self.hard_limit:
            raise ValueError("the budget must not be above the hard limit")


#: What each figure of a run means.
FIGURE_KEYS: dict[str, str] = {
    "agents": "agents counted (the sub-agents; the main agent in `russian`)",
    "finished": "agents that ended with a final answer",
    "rejected_agents": "agents with at least one request rejected by the provider",
    "requests": "requests the provider received (retries included)",
    "rejected_requests": "requests the provider rejected as too long",
    "peak_tokens": "the largest request, in real tokens (rejected ones included)",
    "peak_estimate": "the largest request as the shaper estimated it",
    "budget": "the per-request budget, in estimated tokens",
    "hard_limit": "the model's window: larger requests are rejected",
    "over_budget_requests": "requests whose real size was above the budget",
    "largest_within_budget": "real size of the largest request estimated within budget",
    "cleared": "tool results cleared in the agents' latest requests",
    "clearing_events": "requests at which shaping cleared or dropped more than before",
    "cache_breaks": "requests that did not start with the agent's previous request",
    "cache_read_share": "share of input tokens read from the prompt cache",
    "cost": "input cost in base-price tokens (cache reads 0.1x, writes 1.25x)",
    "files_total": "files the agents were asked to read",
    "files_read": "distinct files the agents read",
    "estimator": "how the shaper estimated tokens",
    "lead": "the main agent's answer, first line (team scenarios)",
    "answer": "the first counted agent's final answer (or why it stopped), first line",
    "seconds": "wall time of the run",
    "statuses": "how the agents' runs ended",
}


@dataclass
class Figures:
    """What one run did (:data:`FIGURE_KEYS` says what each figure means)."""

    agents: int = 0
    finished: int = 0
    rejected_agents: int = 0
    requests: int = 0
    rejected_requests: int = 0
    peak_tokens: int = 0
    peak_estimate: int = 0
    budget: int = 0
    hard_limit: int = 0
    over_budget_requests: int = 0
    largest_within_budget: int | None = None
    cleared: int = 0
    clearing_events: int = 0
    cache_breaks: int = 0
    cache_read_share: float = 0.0
    cost: float = 0.0
    files_total: int = 0
    files_read: int = 0
    estimator: str = ""
    lead: str | None = None
    answer: str | None = None
    seconds: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cache_read_share"] = round(self.cache_read_share, 4)
        out["cost"] = round(self.cost, 1)
        out["seconds"] = round(self.seconds, 2)
        return out


async def _no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


class Scenarios:
    """Runs the scenarios in one workspace directory (the files are written there once).

    ``texts`` gives the files' contents (default: generated). ``history``: a directory
    where each run's saved history is kept (``<scenario>-<mode>.sqlite3``, replaced at
    each run); by default histories are kept in memory. ``on_event`` sees every agent
    event, for progress displays.
    """

    def __init__(
        self,
        workspace: str | Path,
        config: ScenarioConfig | None = None,
        *,
        texts: TextSource | None = None,
        history: str | Path | None = None,
        on_event: EventHook | None = None,
    ) -> None:
        self.workspace = Path(workspace)
        self.history = Path(history) if history is not None else None
        self._stores: list[HistoryStore] = []
        self.config = config or ScenarioConfig()
        self.texts = texts or GeneratedTexts()
        self.on_event = on_event
        self.tokenizer: Estimator = cached_tokenizer(self.config.tokenizer)
        #: What windowfit counts with, after: ``conservative``, windowfit's default for a
        #: model it does not know (checked by every family's vocabulary where they are
        #: installed), which never counts under any tokenizer family on the real texts.
        #: (A family's own profile is fitted on real text; the generated prose here has
        #: other statistics: cl100k's profile counts the generated English 5% under, so it
        #: would let requests a little over the budget.)
        self.profile: Estimator = estimator_for(family="conservative")
        self._files: dict[str, list[str]] = {}

    # -- files --------------------------------------------------------------------------

    def files(self, group: str) -> list[str]:
        """The workspace paths of a group of files (``library``: the sub-agents' reading,
        ``chapters``: the Russian chapters), written on first use."""
        if group in self._files:
            return self._files[group]
        c = self.config
        if group == "library":
            count, language, chars = (
                c.subagents * c.files_per_subagent,
                c.file_language,
                c.file_chars,
            )
            names = [f"library/book-{k:03d}.txt" for k in range(1, count + 1)]
        elif group == "chapters":
            count = max(c.chapters, c.russian_turns * c.chapters_per_turn)
            language, chars = "ru", c.chapter_chars
            names = [f"chapters/chapter-{k:02d}.txt" for k in range(1, count + 1)]
        else:
            raise ValueError(f"unknown group of files {group!r}")
        (self.workspace / group).mkdir(parents=True, exist_ok=True)
        for name in names:
            text = self.texts.text(language, name, chars)
            (self.workspace / name).write_text(text, encoding="utf-8")
        self._files[group] = names
        return names

    def text(self, path: str) -> str:
        return (self.workspace / path).read_text(encoding="utf-8")

    # -- runs ---------------------------------------------------------------------------

    def _runtime(self, scenario: str, mode: str, model: SimulatedProvider, steps: int) -> Runtime:
        c = self.config

        def forward(event: AgentEvent) -> None:
            if self.on_event is not None:
                self.on_event(scenario, mode, event)

        common: dict[str, Any] = {
            "store": self._store(scenario, mode),
            "tools": [ReadFile(self.workspace, max_bytes=max(4 * c.file_chars, 500_000))],
            "max_steps": steps,
            "max_parallel": c.subagents,
            "sleep": _no_sleep,
            "on_event": forward,
        }
        if mode == "before":
            return Runtime(
                model,
                shaper=LegacyShaper(c.budget),
                safety_net=False,
                retry=LEGACY_RETRY,
                should_retry=legacy_should_retry,
                **common,
            )
        if mode == "after":
            return Runtime(model, budget=c.budget, estimator=self.profile, **common)
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")

    def _store(self, scenario: str, mode: str) -> HistoryStore:
        if self.history is None:
            store = HistoryStore()
        else:
            path = self.history / f"{scenario}-{mode}.sqlite3"
            for old in (
                path,
                path.with_name(path.name + "-wal"),
                path.with_name(path.name + "-shm"),
            ):
                old.unlink(missing_ok=True)
            store = HistoryStore(path)
        self._stores.append(store)
        return store

    def run(self, scenario: str, mode: str) -> Figures:
        """Run one scenario in one mode and return its figures."""
        runner = {
            "subagents": self._subagents,
            "chapters": self._chapters,
            "russian": self._russian,
        }.get(scenario)
        if runner is None:
            raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        started = time.perf_counter()
        try:
            figures = asyncio.run(runner(mode))
        finally:
            while self._stores:
                self._stores.pop().close()
        figures.seconds = time.perf_counter() - started
        return figures

    async def _team(self, scenario: str, mode: str, files: Sequence[str], members: int) -> Figures:
        c = self.config
        cautious = scenario == "chapters"
        reader = Reader(caution=c.caution, budget=c.budget) if cautious else Reader()
        model = SimulatedProvider(
            Team(Coordinator(), reader), hard_limit=c.hard_limit, tokenizer=self.tokenizer
        )
        runtime = self._runtime(scenario, mode, model, steps=len(files) + 10)
        read: set[str] = set()
        self._watch(runtime, read, depth=1)
        lead = await runtime.run(coordinator_instruction(files, members), title=scenario)
        figures = self._figures(runtime, model, mode, depth=1, files=len(files), read=read)
        figures.lead = _first_line(lead)
        return figures

    async def _subagents(self, mode: str) -> Figures:
        return await self._team("subagents", mode, self.files("library"), self.config.subagents)

    async def _chapters(self, mode: str) -> Figures:
        chapters = self.files("chapters")[: self.config.chapters]
        return await self._team("chapters", mode, chapters, 1)

    async def _russian(self, mode: str) -> Figures:
        c = self.config
        chapters = self.files("chapters")
        turns = [
            chapters[k * c.chapters_per_turn : (k + 1) * c.chapters_per_turn]
            for k in range(c.russian_turns)
        ]
        model = SimulatedProvider(Reader(), hard_limit=c.hard_limit, tokenizer=self.tokenizer)
        runtime = self._runtime("russian", mode, model, steps=c.chapters_per_turn + 10)
        read: set[str] = set()
        self._watch(runtime, read, depth=0)
        result = await runtime.run(reader_instruction(turns[0]), title="russian")
        for turn in turns[1:]:
            if not result.finished:
                break
            result = await runtime.resume(result.session, reader_instruction(turn))
        return self._figures(
            runtime, model, mode, depth=0, files=sum(len(t) for t in turns), read=read
        )

    def russian_chapter(self) -> dict[str, Any]:
        """One Russian chapter counted three ways: the real tokenizer, chars/4 and the
        script-aware rule (the write-up's figures were 44,600, 25,023 and 43,423)."""
        path = self.files("chapters")[0]
        text = self.text(path)
        return {
            "chapter": path,
            "chars": len(text),
            "real_tokens": self.tokenizer.estimate(text),
            "tokenizer": self.tokenizer.name,
            "estimate_chars4": chars4(text),
            "estimate_script": estimate_tokens(text),
            "estimate_profile": self.profile.estimate(text),
            "profile": self.profile.family,
        }

    # -- figures ------------------------------------------------------------------------

    @staticmethod
    def _watch(runtime: Runtime, read: set[str], depth: int) -> None:
        forward = runtime.on_event

        def watch(event: AgentEvent) -> None:
            if (
                event.kind == "tool"
                and event.agent.depth == depth
                and event.data["call"].name == "read_file"
                and not event.data["is_error"]
            ):
                path = event.data["call"].input.get("path")
                if isinstance(path, str):
                    read.add(path)
            if forward is not None:
                forward(event)

        runtime.on_event = watch

    def _figures(
        self,
        runtime: Runtime,
        model: SimulatedProvider,
        mode: str,
        *,
        depth: int,
        files: int,
        read: set[str],
    ) -> Figures:
        c = self.config
        last: dict[tuple[str, str], AgentResult] = {}
        events: dict[tuple[str, str], int] = {}
        for result in runtime.results:
            if result.agent.depth != depth:
                continue
            key = result.agent.key
            last[key] = result
            events[key] = events.get(key, 0) + result.stats.clearing_events
        usage = model.total(list(last))
        statuses: dict[str, int] = {}
        for result in last.values():
            statuses[result.status] = statuses.get(result.status, 0) + 1
        within = [r.tokens for r in usage.log if r.estimate is not None and r.estimate <= c.budget]
        return Figures(
            agents=len(last),
            finished=sum(r.finished for r in last.values()),
            rejected_agents=sum(1 for k in last if model.usage.get(k) and model.usage[k].rejected),
            requests=usage.requests,
            rejected_requests=usage.rejected,
            peak_tokens=usage.peak_tokens,
            peak_estimate=max(
                (r.stats.peak_estimate for r in runtime.results if r.agent.depth == depth),
                default=0,
            ),
            budget=c.budget,
            hard_limit=c.hard_limit,
            over_budget_requests=sum(1 for r in usage.log if r.tokens > c.budget),
            largest_within_budget=max(within) if within else None,
            cleared=sum(r.stats.cleared for r in last.values()),
            clearing_events=sum(events.values()),
            cache_breaks=usage.breaks,
            cache_read_share=usage.read_share,
            cost=usage.cost,
            files_total=files,
            files_read=len(read),
            estimator="chars/4" if mode == "before" else f"{self.profile.family} estimate",
            answer=_first_line(next(iter(last.values()), None)),
            statuses=statuses,
        )


def _first_line(result: AgentResult | None) -> str | None:
    if result is None:
        return None
    text = result.answer or result.user_message or result.status
    return text.strip().splitlines()[0] if text.strip() else result.status
