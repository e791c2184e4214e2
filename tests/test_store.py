"""The saved history: in full, in SQLite, reopened and continued, nothing lost on a kill."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from windowfit.agent import APPLICATION_ID, HistoryStore, Runtime, default_store_path
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
    from windowfit.agent import APPLICATION_ID, HistoryStore, Runtime, default_store_path
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


# --------------------------------------------------------------------------------------
# Concurrent writers

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from windowfit.agent import HistoryStore

    db, session, writer, count, go = sys.argv[1:]
    with HistoryStore(db) as store:
        while not Path(go).exists():  # start together, so that the writers overlap
            time.sleep(0.001)
        for i in range(int(count)):
            store.append(session, "main", {"role": "user", "content": f"{writer}:{i}"})
    """
)


def check_history(store: HistoryStore, session: str, writers: dict[str, int]) -> None:
    """Every writer's messages are all there, each writer's in its own order."""
    saved = [m["content"] for m in store.messages(session, "main")]
    assert len(saved) == sum(writers.values())
    for writer, count in writers.items():
        mine = [int(c.split(":")[1]) for c in saved if c.split(":")[0] == writer]
        assert mine == list(range(count)), f"writer {writer} lost or reordered messages"


def test_two_processes_appending_to_one_agent_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    go = tmp_path / "go"
    count = 20_000
    with HistoryStore(db) as store:
        session = store.new_session()
        store.add_agent(session, "main", name="main", system="")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), session, name, str(count), str(go)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    time.sleep(0.3)  # both have opened the store
    started = time.monotonic()
    go.touch()
    for writer in writers:
        _, errors = writer.communicate(timeout=120)
        assert writer.returncode == 0, errors
    elapsed = time.monotonic() - started
    with HistoryStore(db) as store:
        assert store.count(session) == 2 * count
        check_history(store, session, {"a": count, "b": count})
    print(f"2 x {count:,} appends from two processes: {elapsed:.1f} s")


@pytest.mark.parametrize("shared", [True, False], ids=["one shared store", "a store each"])
def test_threads_appending_to_one_agent_lose_nothing(tmp_path: Path, shared: bool) -> None:
    import threading

    db = tmp_path / "history.sqlite3"
    count, threads = 1_000, 4
    store = HistoryStore(db)
    session = store.new_session()
    store.add_agent(session, "main", name="main", system="")
    barrier = threading.Barrier(threads)

    def write(writer: str) -> None:
        mine = store if shared else HistoryStore(db)
        barrier.wait()
        for i in range(count):
            mine.append(session, "main", {"role": "user", "content": f"{writer}:{i}"})
        if not shared:
            mine.close()

    workers = [threading.Thread(target=write, args=(str(k),)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    check_history(store, session, {str(k): count for k in range(threads)})
    store.close()


# --------------------------------------------------------------------------------------
# Files that are not a store


def a_store(path: Path, messages: int = 300) -> bytes:
    with HistoryStore(path) as store:
        session = store.new_session("t")
        store.add_agent(session, "main", name="main", system="")
        for _ in range(messages):
            store.append(session, "main", {"role": "user", "content": "x" * 1000})
    return path.read_bytes()


def foreign(path: Path, application_id: int = 0) -> bytes:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    db.execute("INSERT INTO notes (text) VALUES ('mine')")
    if application_id:
        db.execute(f"PRAGMA application_id={application_id}")
    db.commit()
    db.close()
    return path.read_bytes()


def partial_store(path: Path) -> bytes:
    db = sqlite3.connect(path)  # the right table names, other columns
    for table in ("sessions", "agents", "messages"):
        db.execute(f"CREATE TABLE {table} (x)")
    db.commit()
    db.close()
    return path.read_bytes()


BAD_FILES: dict[str, tuple[Callable[[Path], bytes], str]] = {
    "random bytes": (lambda p: os.urandom(8192), "not a SQLite database"),
    "a text file": (lambda p: "Прочитай главы 1–3\n".encode() * 200, "not a SQLite database"),
    "a truncated store": (lambda p: a_store(p)[:150_000], "truncated"),
    "a store cut inside its header": (lambda p: a_store(p)[:60], "truncated"),
    "an overwritten header": (lambda p: os.urandom(100) + a_store(p)[100:], "not a SQLite"),
    "an overwritten first page": (
        lambda p: (lambda d: d[:100] + os.urandom(3996) + d[4096:])(a_store(p)),
        "damaged",
    ),
    "another program's database": (foreign, "not a windowfit history store"),
    "another program's marked database": (
        lambda p: foreign(p, application_id=0x1234),
        "another program",
    ),
    "the right tables with other columns": (partial_store, "not a windowfit history store"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_store_file_gives_history_error_and_is_left_unchanged(
    tmp_path: Path, case: str
) -> None:
    make, problem = BAD_FILES[case]
    path = tmp_path / "history.sqlite3"
    data = make(path)
    for side in ("-wal", "-shm"):  # what making it left behind: only the main file counts
        Path(f"{path}{side}").unlink(missing_ok=True)
    path.write_bytes(data)
    with pytest.raises(HistoryError, match=problem) as caught:
        HistoryStore(path).close()
    assert str(path) in str(caught.value)
    assert path.read_bytes() == data


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="is a directory") as caught:
        HistoryStore(tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_damage_found_later_is_a_history_error(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with HistoryStore(path) as store:
        session = store.new_session("t")
        store.add_agent(session, "main", name="main", system="")
        for _ in range(300):
            store.append(session, "main", {"role": "user", "content": "x" * 1000})
    with open(path, "r+b") as handle:  # damage the data, not the schema
        handle.seek(40_960)
        handle.write(os.urandom(200_000))
    # Found on opening or on reading: either way a HistoryError naming the file.
    with pytest.raises(HistoryError, match=str(path)), HistoryStore(path) as store:
        store.messages(session, "main")


@pytest.mark.parametrize("kind", ["an empty file", "an empty SQLite database"])
def test_an_empty_file_becomes_a_store(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "history.sqlite3"
    if kind == "an empty file":
        path.touch()
    else:
        sqlite3.connect(path).execute("VACUUM").connection.close()
    with HistoryStore(path) as store:
        store.new_session()
    with HistoryStore(path) as store:  # and opens again as one
        assert len(store.sessions()) == 1
        assert store._db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


# --------------------------------------------------------------------------------------
# Where a runtime keeps its history by default


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WINDOWFIT_HOME": "{tmp}/wh", "XDG_STATE_HOME": "{tmp}/xdg"}, "{tmp}/wh/history.sqlite3"),
        ({"XDG_STATE_HOME": "{tmp}/xdg"}, "{tmp}/xdg/windowfit/history.sqlite3"),
        ({"XDG_STATE_HOME": "relative"}, "{tmp}/home/.local/state/windowfit/history.sqlite3"),
        ({}, "{tmp}/home/.local/state/windowfit/history.sqlite3"),
    ],
)
def test_default_store_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for name in ("WINDOWFIT_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    assert default_store_path() == Path(expected.format(tmp=tmp_path))


def test_a_runtime_without_a_store_keeps_its_history_in_a_file(tmp_path: Path) -> None:
    home = Path(os.environ["WINDOWFIT_HOME"])  # set for every test by conftest
    root = tmp_path / "work"
    files = workspace(root, 1)
    model = SimulatedProvider(Reader(), tokenizer=SeedEstimator())
    runtime = Runtime(model, workspace=root, max_depth=0)
    result = asyncio.run(runtime.run(reader_instruction(files)))
    runtime.close()
    assert runtime.store.path == str(home / "history.sqlite3")
    with HistoryStore(home / "history.sqlite3") as store:  # it survives the runtime
        assert store.messages(result.session, "main")[0]["content"] == reader_instruction(files)


@pytest.mark.parametrize("store", [":memory:", "file"])
def test_a_runtime_takes_a_store_path_or_memory(tmp_path: Path, store: str) -> None:
    home = Path(os.environ["WINDOWFIT_HOME"])
    path = ":memory:" if store == ":memory:" else str(tmp_path / "mine.sqlite3")
    runtime = Runtime(SimulatedProvider(Reader(), tokenizer=SeedEstimator()), store=path)
    asyncio.run(runtime.run("hello"))
    runtime.close()
    assert runtime.store.path == path
    assert not (home / "history.sqlite3").exists()
    assert (path == ":memory:") is not Path(path).is_file()
