"""The saved history: every message of every agent and sub-agent, in full, in SQLite.

Only requests are shaped (fitting never changes what is saved here), so a conversation
that has become too long for the model keeps everything that was done: the person can
start a new chat and nothing is lost, and a session can be reopened and continued.

The database is a file: by default the one :func:`default_store_path` names
(``$WINDOWFIT_HOME/history.sqlite3``, else ``$XDG_STATE_HOME/windowfit/history.sqlite3``,
else ``~/.local/state/windowfit/history.sqlite3``), or one in a directory of your choice
(``HistoryStore.in_directory``), or ``":memory:"`` when nothing should outlive the process.
It uses write-ahead logging, and every message is committed on its own as it is written,
so a process killed mid-run loses nothing it had already written. (``synchronous=NORMAL``,
the default, survives a killed process; pass ``synchronous="FULL"`` to survive a power cut
too, at the cost of an fsync per message.)

Several writers may share one file (threads, each with its own store or one shared store,
and separate processes): a message's sequence number is allocated inside the write
transaction that inserts it, so no message is lost or reordered, and a writer that finds
the file locked waits (``busy_timeout``, 30 s) instead of failing.

A file that is not a windowfit store is never changed: before anything is written, the
file's header and schema are checked, and a file that is not SQLite, a damaged database,
or a SQLite database of another program raises :class:`~windowfit.errors.HistoryError`
naming the file and what is wrong. (An empty file, or a SQLite database with no tables at
all and no other program's ``application_id``, becomes a new store.)

Tables: ``sessions`` (id, created, title), ``agents`` (one row per agent and sub-agent:
who started it, from which tool call, its system prompt, status and final answer) and
``messages`` (the agent's messages in order, each the exact JSON of an Anthropic message).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import HistoryError

__all__ = [
    "APPLICATION_ID",
    "DEFAULT_FILENAME",
    "AgentRecord",
    "HistoryStore",
    "SessionRecord",
    "default_store_path",
]

#: The database's file name inside the directory given to :meth:`HistoryStore.in_directory`.
DEFAULT_FILENAME = "windowfit-history.sqlite3"

#: Written in the SQLite header of every store windowfit creates ("wfh1"), so that a store
#: is told from another program's database by more than its table names.
APPLICATION_ID = 0x77666831

#: How long a writer waits for another writer's lock, in milliseconds.
_BUSY_TIMEOUT_MS = 30_000

_SQLITE_HEADER = b"SQLite format 3\x00"

_TABLES = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    title TEXT NOT NULL DEFAULT ''
);
CREATE TABLE agents (
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
CREATE TABLE messages (
    session_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (session_id, agent_id, seq)
);
"""

#: The columns each table of a store must have (more are tolerated, for later versions).
_EXPECTED: Mapping[str, frozenset[str]] = {
    "sessions": frozenset({"id", "created", "title"}),
    "agents": frozenset(
        {
            "session_id",
            "id",
            "name",
            "parent_id",
            "parent_call_id",
            "depth",
            "system",
            "status",
            "answer",
            "user_message",
            "created",
            "updated",
        }
    ),
    "messages": frozenset({"session_id", "agent_id", "seq", "role", "message", "created"}),
}


def default_store_path() -> Path:
    """Where :class:`~windowfit.agent.Runtime` keeps its history when given no store.

    ``$WINDOWFIT_HOME/history.sqlite3`` when ``WINDOWFIT_HOME`` is set; else
    ``$XDG_STATE_HOME/windowfit/history.sqlite3`` when ``XDG_STATE_HOME`` is an absolute
    path (the XDG base directory rule: history is state, not configuration or cache); else
    ``~/.local/state/windowfit/history.sqlite3``. A file, because the promise is that
    nothing done is lost: a history in memory would not survive a crash.
    """
    home = os.environ.get("WINDOWFIT_HOME")
    if home:
        return Path(home).expanduser() / "history.sqlite3"
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "windowfit" / "history.sqlite3"


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

    ``path``: the database file, or ``":memory:"``. A store may be shared by threads (its
    calls are serialised by a lock); other processes open their own store on the same
    file. Every problem with the file (not a store, damaged, locked for too long, not
    writable) is a :class:`~windowfit.errors.HistoryError` that names it.
    """

    def __init__(self, path: str | Path = ":memory:", *, synchronous: str = "NORMAL") -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = str(path)
        self._lock = threading.RLock()
        memory = self.path == ":memory:"
        if not memory:
            _check_file(self.path)
        try:
            # isolation_level=None: no implicit transactions; each write below either
            # commits on its own or runs inside an explicit BEGIN IMMEDIATE.
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except sqlite3.Error as exc:
            raise HistoryError(f"{self.path}: the history store cannot be opened ({exc})") from None
        try:
            self._db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            self._prepare()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        except HistoryError:
            self._db.close()
            raise
        except sqlite3.Error as exc:
            self._db.close()
            raise HistoryError(_problem(self.path, exc)) from None

    def _prepare(self) -> None:
        """Check the schema before writing anything; create the tables in an empty file.

        The check and the creation run in one write transaction, so two processes opening
        a new file at once do not both create the tables, and nothing is created in a
        database that turns out to belong to another program.
        """
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            tables = {
                name: sql
                for name, sql in db.execute(
                    "SELECT name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
                )
            }
            application = int(db.execute("PRAGMA application_id").fetchone()[0])
            if application not in (0, APPLICATION_ID):
                raise HistoryError(
                    f"{self.path}: a SQLite database of another program "
                    f"(application_id {application:#x}), not a windowfit history store; "
                    "it was left unchanged"
                )
            if not tables:
                for statement in _TABLES.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                db.execute("PRAGMA user_version=1")
            else:
                self._check_tables(tables)
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise

    def _check_tables(self, tables: Mapping[str, str]) -> None:
        missing = sorted(set(_EXPECTED) - set(tables))
        if missing:
            shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "")
            raise HistoryError(
                f"{self.path}: a SQLite database that is not a windowfit history store "
                f"(its tables: {shown}; missing: {', '.join(missing)}); it was left unchanged"
            )
        for table, columns in _EXPECTED.items():
            found = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if not columns <= found:
                raise HistoryError(
                    f"{self.path}: the table {table!r} lacks the columns "
                    f"{', '.join(sorted(columns - found))}: not a windowfit history store "
                    "(or one from an incompatible version); it was left unchanged"
                )

    @contextlib.contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        """Serialise use of the connection, and turn SQLite's errors into HistoryError."""
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise HistoryError(_problem(self.path, exc)) from None

    @classmethod
    def in_directory(
        cls, directory: str | Path, filename: str = DEFAULT_FILENAME, **options: Any
    ) -> HistoryStore:
        """The store kept in ``directory`` (created if missing)."""
        return cls(Path(directory) / filename, **options)

    @classmethod
    def default(cls, **options: Any) -> HistoryStore:
        """The store at :func:`default_store_path` (its directory is created if missing)."""
        return cls(default_store_path(), **options)

    @property
    def journal_mode(self) -> str:
        with self._guard() as db:
            return str(db.execute("PRAGMA journal_mode").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions -----------------------------------------------------------------------

    def new_session(self, title: str = "") -> str:
        session = uuid.uuid4().hex
        with self._guard() as db:
            db.execute(
                "INSERT INTO sessions (id, created, title) VALUES (?, ?, ?)",
                (session, time.time(), title),
            )
        return session

    def sessions(self) -> list[SessionRecord]:
        with self._guard() as db:
            rows = db.execute(
                "SELECT id, created, title FROM sessions ORDER BY created, rowid"
            ).fetchall()
        return [SessionRecord(*row) for row in rows]

    def session(self, session: str) -> SessionRecord:
        with self._guard() as db:
            row = db.execute(
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
        with self._guard() as db:
            db.execute(
                f"INSERT INTO agents ({_AGENT_COLUMNS}) VALUES ({', '.join('?' * len(row))})",
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
        with self._guard() as db:
            cursor = db.execute(
                "UPDATE agents SET status = ?, answer = ?, user_message = ?, updated = ? "
                "WHERE session_id = ? AND id = ?",
                (status, answer, user_message, time.time(), session, agent),
            )
        if cursor.rowcount == 0:
            raise HistoryError(f"no saved agent {agent!r} in session {session!r}")

    def agent(self, session: str, agent: str) -> AgentRecord:
        with self._guard() as db:
            row = db.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE session_id = ? AND id = ?",
                (session, agent),
            ).fetchone()
        if row is None:
            raise HistoryError(f"no saved agent {agent!r} in session {session!r}")
        return AgentRecord(*row)

    def agents(self, session: str) -> list[AgentRecord]:
        with self._guard() as db:
            rows = db.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE session_id = ? ORDER BY created, rowid",
                (session,),
            ).fetchall()
        return [AgentRecord(*row) for row in rows]

    def child_for_call(self, session: str, parent: str, call_id: str) -> AgentRecord | None:
        """The sub-agent that the tool call ``call_id`` of ``parent`` started, if any."""
        with self._guard() as db:
            row = db.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents "
                "WHERE session_id = ? AND parent_id = ? AND parent_call_id = ?",
                (session, parent, call_id),
            ).fetchone()
        return AgentRecord(*row) if row is not None else None

    # -- messages -----------------------------------------------------------------------

    def append(self, session: str, agent: str, message: Mapping[str, Any]) -> int:
        """Save ``message`` as the agent's next message (committed at once); its index.

        The index is allocated by the same statement that inserts the row, inside a
        ``BEGIN IMMEDIATE`` transaction (which takes the database's write lock first):
        reading the last index and inserting the next one separately let two writers pick
        the same index, and one of them lost its message.
        """
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        role = str(message.get("role", ""))
        with self._guard() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages "
                    "WHERE session_id = ? AND agent_id = ?",
                    (session, agent),
                ).fetchone()
                seq = int(row[0])
                db.execute(
                    "INSERT INTO messages (session_id, agent_id, seq, role, message, created) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (session, agent, seq, role, text, time.time()),
                )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        return seq

    def messages(self, session: str, agent: str) -> list[dict[str, Any]]:
        """The agent's saved messages, in order, exactly as they were written."""
        with self._guard() as db:
            rows = db.execute(
                "SELECT message FROM messages WHERE session_id = ? AND agent_id = ? ORDER BY seq",
                (session, agent),
            ).fetchall()
        try:
            return [json.loads(text) for (text,) in rows]
        except (TypeError, ValueError) as exc:  # damage SQLite did not notice
            raise HistoryError(
                f"{self.path}: a saved message of agent {agent!r} is damaged ({exc})"
            ) from None

    def count(self, session: str | None = None) -> int:
        """How many messages are saved (in one session, or in all)."""
        with self._guard() as db:
            if session is None:
                row = db.execute("SELECT COUNT(*) FROM messages").fetchone()
            else:
                row = db.execute(
                    "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session,)
                ).fetchone()
        return int(row[0])


def _check_file(path: str) -> None:
    """Refuse, before SQLite touches it, a path that cannot be a store.

    SQLite opens a file that is not a database without complaint and fails only at the
    first statement, with an error that does not name the file; and it would happily turn
    an empty directory entry into a new database. Reading the header first gives a
    message a person can act on, and leaves a foreign file exactly as it was.
    """
    target = Path(path)
    try:
        info = target.stat()
    except FileNotFoundError:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(
                f"{path}: the directory for the history store cannot be created "
                f"({exc.strerror or exc})"
            ) from None
        return
    except OSError as exc:
        raise HistoryError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise HistoryError(f"{path}: is a directory, not a history store file")
    if not stat.S_ISREG(info.st_mode):
        raise HistoryError(f"{path}: not a regular file, so not a history store")
    if info.st_size == 0:
        return  # an empty file: SQLite makes it a new database
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise HistoryError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not header.startswith(_SQLITE_HEADER):
        raise HistoryError(
            f"{path}: not a SQLite database (it starts with {header[:16]!r}), so not a "
            "windowfit history store; it was left unchanged"
        )
    if len(header) < 100:
        raise HistoryError(f"{path}: a truncated SQLite database ({info.st_size} bytes)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid_for = header[24:28] == header[92:96]
    if page_size < 512 or page_size & (page_size - 1):
        raise HistoryError(
            f"{path}: a damaged SQLite database (its header gives a page size of {page_size})"
        )
    # (With a write-ahead log beside it, a checkpoint may have been cut short: SQLite
    # finishes it from the log, so the size is not held against the file then.)
    wal = Path(f"{path}-wal").exists()
    if valid_for and pages and info.st_size < pages * page_size and not wal:
        raise HistoryError(
            f"{path}: a truncated SQLite database ({info.st_size:,} bytes where its header "
            f"promises {pages:,} pages of {page_size:,} bytes)"
        )


def _problem(path: str, exc: sqlite3.Error) -> str:
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return f"{path}: a damaged database, or not a database at all ({text})"
    if "locked" in text or "busy" in text:
        return f"{path}: the history store stayed locked by another writer ({text})"
    if "readonly" in text or "unable to open" in text:
        return f"{path}: the history store cannot be written ({text})"
    return f"{path}: the history store failed ({type(exc).__name__}: {text})"
