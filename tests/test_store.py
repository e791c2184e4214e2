"""The saved history: in full, in SQLite, reopened and continued, nothing lost on a kill."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from windowfit.agent import HistoryStore, Runtime
from windowfit.errors import HistoryError
from windowfit.sim import (
    Coordinator,
    Reader,
    SimulatedProvider,
    Team,
    coordinator_instruction,
    reader_instruction,
)
from windowfit.tokens import SeedEstimator

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Прочитай главы 1–3, 読んで 🙂"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.txt"}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * 50_000}],
    },
]


def workspace(root: Path, files: int, words: int = 200) -> list[str]:
    (root / "docs").mkdir(parents=True, exist_ok=True)
    names = []
    for k in range(1, files + 1):
        name = f"docs/part-{k:02d}.txt"
        (root / name).write_text(f"Part {k}\n" + "lorem ipsum " * words, encoding="utf-8")
        names.append(name)
    return names


@pytest.mark.parametrize("where", ["memory", "file"])
def test_messages_are_saved_exactly(tmp_path: Path, where: str) -> None:
    path = ":memory:" if where == "memory" else tmp_path / "h.sqlite3"
    with HistoryStore(path) as store:
        session = store.new_session("t")
        store.add_agent(session, "main", name="main", system="sys")
        for message in MESSAGES:
            store.append(session, "main", message)
        assert store.messages(session, "main") == MESSAGES
        assert store.count(session) == 3
        assert store.journal_mode == ("memory" if where == "memory" else "wal")


def test_in_directory_creates_the_directory(tmp_path: Path) -> None:
    with HistoryStore.in_directory(tmp_path / "a" / "b") as store:
        store.new_session()
    assert (tmp_path / "a" / "b" / "windowfit-history.sqlite3").is_file()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.session("nope"),
        lambda s: s.agent("nope", "main"),
        lambda s: s.add_agent("nope", "main", name="m", system=""),
        lambda s: s.set_status("nope", "main", "finished"),
    ],
)
def test_unknown_sessions_and_agents(call: Any) -> None:
    with HistoryStore() as store, pytest.raises(HistoryError):
        call(store)


def test_a_session_is_reopened_and_continued(tmp_path: Path) -> None:
    root = tmp_path / "work"
    files = workspace(root, 4)
    db = tmp_path / "history.sqlite3"

    def runtime(store: HistoryStore) -> Runtime:
        model = SimulatedProvider(Reader(), tokenizer=SeedEstimator())
        return Runtime(model, workspace=root, store=store, max_depth=0)

    with HistoryStore(db) as store:
        first = asyncio.run(runtime(store).run(reader_instruction(files[:2])))
        assert first.finished
        saved = store.messages(first.session, "main")

    with HistoryStore(db) as store:  # a new process would do the same
        assert [s.id for s in store.sessions()] == [first.session]
        result = asyncio.run(runtime(store).resume(first.session, reader_instruction(files[2:])))
        assert result.finished
        assert result.answer.startswith("I went through 2 of the 2 files.")
        history = store.messages(first.session, "main")
        assert history[: len(saved)] == saved  # nothing done before is lost
        assert history[len(saved)]["content"] == reader_instruction(files[2:])
        assert store.agent(first.session, "main").status == "finished"

    with HistoryStore(db) as store:  # resuming a finished session without a message
        again = asyncio.run(runtime(store).resume(first.session))
        assert again.finished and again.stats.requests == 0


def test_resume_continues_an_interrupted_subagent_where_it_was(tmp_path: Path) -> None:
    root = tmp_path / "work"
    files = workspace(root, 4)
    store = HistoryStore()
    session = store.new_session()
    # The parent had started one sub-agent, which had read one file, when the process died.
    store.add_agent(session, "main", name="main", system="lead")
    store.append(session, "main", {"role": "user", "content": coordinator_instruction(files, 1)})
    spawn = {"instruction": reader_instruction(files), "name": "reader 1"}
    store.append(
        session,
        "main",
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "s1", "name": "spawn_subagent", "input": spawn}],
        },
    )
    store.add_agent(
        session, "main/1", name="reader 1", system="r", depth=1, parent="main", parent_call_id="s1"
    )
    store.append(session, "main/1", {"role": "user", "content": spawn["instruction"]})
    read = {"type": "tool_use", "id": "r1", "name": "read_file", "input": {"path": files[0]}}
    store.append(session, "main/1", {"role": "assistant", "content": [read]})

    model = SimulatedProvider(Team(Coordinator(), Reader()), tokenizer=SeedEstimator())
    runtime = Runtime(model, workspace=root, store=store)
    result = asyncio.run(runtime.resume(session))

    assert result.finished and result.answer.startswith("1 of 1 sub-agents finished.")
    assert [a.id for a in store.agents(session)] == ["main", "main/1"]  # not started again
    child = store.messages(session, "main/1")
    assert child[2]["content"][0]["tool_use_id"] == "r1"  # the interrupted call ran
    paths = [
        b["input"]["path"]
        for m in child
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert paths == files  # each file read once: the sub-agent went on where it was


def test_resume_of_an_unknown_session() -> None:
    runtime = Runtime(SimulatedProvider(Reader(), tokenizer=SeedEstimator()))
    with pytest.raises(HistoryError):
        asyncio.run(runtime.resume("nope"))


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from windowfit.agent import HistoryStore, Runtime
    from windowfit.sim import Coordinator, Reader, SimulatedProvider, Team
    from windowfit.sim import coordinator_instruction
    from windowfit.tokens import SeedEstimator

    class Loud(HistoryStore):
        def append(self, session, agent, message):
            seq = super().append(session, agent, message)
            print(session, agent, seq, flush=True)  # only after the commit
            return seq

    db, root, *files = sys.argv[1:]
    model = SimulatedProvider(
        Team(Coordinator(), Reader()), tokenizer=SeedEstimator(), latency=0.02
    )
    runtime = Runtime(model, workspace=root, store=Loud(db))
    asyncio.run(runtime.run(coordinator_instruction(files, 2)))
    print("FINISHED", flush=True)
    """
)


def test_a_process_killed_mid_run_loses_nothing_it_had_written(tmp_path: Path) -> None:
    root = tmp_path / "work"
    files = workspace(root, 40)
    db = tmp_path / "history.sqlite3"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(root), *files],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    written: list[tuple[str, str, int]] = []
    deadline = time.monotonic() + 30
    while len(written) < 12 and time.monotonic() < deadline:
        line = child.stdout.readline()
        assert line and line.strip() != "FINISHED", "the run ended before it was killed"
        session, agent, seq = line.split()
        written.append((session, agent, int(seq)))
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    for line in child.stdout:  # what it printed before it died: all committed first
        session, agent, seq = line.split()
        written.append((session, agent, int(seq)))
    assert child.returncode == -signal.SIGKILL
    assert len(written) >= 12

    (session,) = {w[0] for w in written}
    with HistoryStore(db) as store:
        for agent in {w[1] for w in written}:
            saved = store.messages(session, agent)
            seqs = sorted(seq for _, a, seq in written if a == agent)
            assert len(saved) >= len(seqs) and seqs == list(range(len(seqs)))
            assert all(isinstance(m, dict) and m["role"] in ("user", "assistant") for m in saved)
        assert store.agent(session, "main").status == "running"

        # Reopened, the session is carried on to the end.
        model = SimulatedProvider(Team(Coordinator(), Reader()), tokenizer=SeedEstimator())
        result = asyncio.run(Runtime(model, workspace=root, store=store).resume(session))
        assert result.finished and result.answer.startswith("2 of 2 sub-agents finished.")
        read = [
            b["input"]["path"]
            for agent in ("main/1", "main/2")
            for m in store.messages(session, agent)
            if m["role"] == "assistant"
            for b in m["content"]
            if b["type"] == "tool_use"
        ]
        assert sorted(set(read)) == sorted(files)
        assert len(read) <= len(files) + 2  # at most the interrupted call of each runs again
        assert json.loads(json.dumps(store.messages(session, "main")))
