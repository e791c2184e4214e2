"""The saved history: every message of every agent and sub-agent, in full, in SQLite.

Only requests are shaped (fitting never changes what is saved here), so a conversation
that has become too long for the model keeps everything that was done: the person can
start a new chat and nothing is lost, and a session can be reopened and continued.

The database is a file in a directory of your choice (``HistoryStore.in_directory``) or
``":memory:"`` for tests. It uses write-ahead logging, and every message is committed on
its own as it is written, so a process killed mid-run loses nothing it had already written.
(``synchronous=NORMAL``, the default, survives a killed process; pass
``synchronous="FULL"`` to survive a power cut too, at the cost of an fsync per message.)

Tables: ``sessions`` (id, created, title), ``agents`` (one row per agent and sub-agent:
who started it, from which tool call, its system prompt, status and final answer) and
``messages`` (the agent's messages in order, each the exact JSON of an Anthropic message).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import HistoryError

__all__ = ["DEFAULT_FILENAME", "AgentRecord", "HistoryStore", "SessionRecord"]

#: The database's file name inside the directory given to :meth:`HistoryStore.in_directory`.
DEFAULT_FILENAME = "windowfit-history.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    title TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS agents (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    parent_id TEXT,
    parent_call_id TEXT,
    depth INTEGER NOT NULL,
    system TEXT NOT NULL,
    status TEXT NOT NULL,
    answer TEXT,
    user_message TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (session_id, agent_id, seq)
);
"""

_AGENT_COLUMNS = (
    "session_id, id, name, parent_id, parent_call_id, depth, system, status, answer, "
    "user_message, created, updated"
)


@dataclass(frozen=True)
class SessionRecord:
    id: str
    created: float
    title: str


@dataclass(frozen=True)
class AgentRecord:
    """One agent as saved: ``status`` is ``running`` until it ends (``finished``,
    ``overflow``, ``failed``, ``step_limit``)."""

    session: str
    id: str
    name: str
    parent: str | None
    parent_call_id: str | None
    depth: int
    system: str
    status: str
    answer: str | None
    user_message: str | None
    created: float
    updated: float


class HistoryStore:
    """Saved sessions, agents and messages (see the module docstring).

    One store is used from one thread (the agent loop's); open another ``HistoryStore``
    on the same file to read it from elsewhere.
    """

    def __init__(self, path: str | Path = ":memory:", *, synchronous: str = "NORMAL") -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: every statement commits at once (no implicit transaction).
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    @classmethod
    def in_directory(
        cls, directory: str | Path, filename: str = DEFAULT_FILENAME, **options: Any
    ) -> HistoryStore:
        """The store kept in ``directory`` (created if missing)."""
        return cls(Path(directory) / filename, **options)

    @property
    def journal_mode(self) -> str:
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions -----------------------------------------------------------------------

    def new_session(self, title: str = "") -> str:
        session = uuid.uuid4().hex
        self._db.execute(
            "INSERT INTO sessions (id, created, title) VALUES (?, ?, ?)",
            (session, time.time(), title),
        )
        return session

    def sessions(self) -> list[SessionRecord]:
        rows = self._db.execute("SELECT id, created, title FROM sessions ORDER BY created, rowid")
        return [SessionRecord(*row) for row in rows]

    def session(self, session: str) -> SessionRecord:
        row = self._db.execute(
            "SELECT id, created, title FROM sessions WHERE id = ?", (session,)
        ).fetchone()
        if row is None:
            raise HistoryError(f"no saved session {session!r} in {self.path}")
        return SessionRecord(*row)

    # -- agents -------------------------------------------------------------------------

    def add_agent(
        self,
        session: str,
        agent: str,
        *,
        name: str,
        system: str,
        depth: int = 0,
        parent: str | None = None,
        parent_call_id: str | None = None,
    ) -> None:
        self.session(session)
        now = time.time()
        row: list[object] = [session, agent, name, parent, parent_call_id, depth, system, "running"]
        row += [None, None, now, now]  # answer, user_message, created, updated
        self._db.execute(
            f"INSERT INTO agents ({_AGENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )

    def set_status(
        self,
        session: str,
        agent: str,
        status: str,
        *,
        answer: str | None = None,
        user_message: str | None = None,
    ) -> None:
        cursor = self._db.execute(
            "UPDATE agents SET status = ?, answer = ?, user_message = ?, updated = ? "
            "WHERE session_id = ? AND id = ?",
            (status, answer, user_message, time.time(), session, agent),
        )
        if cursor.rowcount == 0:
            raise HistoryError(f"no saved agent {agent!r} in session {session!r}")

    def agent(self, session: str, agent: str) -> AgentRecord:
        row = self._db.execute(
            f"SELECT {_AGENT_COLUMNS} FROM agents WHERE session_id = ? AND id = ?",
            (session, agent),
        ).fetchone()
        if row is None:
            raise HistoryError(f"no saved agent {agent!r} in session {session!r}")
        return AgentRecord(*row)

    def agents(self, session: str) -> list[AgentRecord]:
        rows = self._db.execute(
            f"SELECT {_AGENT_COLUMNS} FROM agents WHERE session_id = ? ORDER BY created, rowid",
            (session,),
        )
        return [AgentRecord(*row) for row in rows]

    def child_for_call(self, session: str, parent: str, call_id: str) -> AgentRecord | None:
        """The sub-agent that the tool call ``call_id`` of ``parent`` started, if any."""
        row = self._db.execute(
            f"SELECT {_AGENT_COLUMNS} FROM agents "
            "WHERE session_id = ? AND parent_id = ? AND parent_call_id = ?",
            (session, parent, call_id),
        ).fetchone()
        return AgentRecord(*row) if row is not None else None

    # -- messages -----------------------------------------------------------------------

    def append(self, session: str, agent: str, message: Mapping[str, Any]) -> int:
        """Save ``message`` as the agent's next message (committed at once); its index."""
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        role = str(message.get("role", ""))
        row = self._db.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE session_id = ? AND agent_id = ?",
            (session, agent),
        ).fetchone()
        seq = int(row[0])
        self._db.execute(
            "INSERT INTO messages (session_id, agent_id, seq, role, message, created) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (session, agent, seq, role, text, time.time()),
        )
        return seq

    def messages(self, session: str, agent: str) -> list[dict[str, Any]]:
        """The agent's saved messages, in order, exactly as they were written."""
        rows = self._db.execute(
            "SELECT message FROM messages WHERE session_id = ? AND agent_id = ? ORDER BY seq",
            (session, agent),
        )
        return [json.loads(text) for (text,) in rows]

    def count(self, session: str | None = None) -> int:
        """How many messages are saved (in one session, or in all)."""
        if session is None:
            row = self._db.execute("SELECT COUNT(*) FROM messages").fetchone()
        else:
            row = self._db.execute(
                "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session,)
            ).fetchone()
        return int(row[0])
