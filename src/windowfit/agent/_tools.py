"""The agent's tools: read a file, run a command, start a sub-agent.

A tool is an object with ``name``, ``description``, ``input_schema`` (JSON Schema of its
input, as Anthropic's tool definitions take it) and an async ``run(arguments, context)``
returning a :class:`ToolOutput` (or a plain string). A tool that cannot do what was asked
raises :class:`~windowfit.errors.ToolError` with a message for the model; the loop sends it
back as an error result (``is_error``) and goes on. Any other exception is turned into an
error result too, and logged: a tool never stops the loop.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import logging
import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import ToolError
from ._model import AgentInfo

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_ENV_ALLOWLIST",
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_MAX_READ",
    "ReadFile",
    "RunCommand",
    "SpawnSubagent",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "run_tool",
    "tool_definition",
]

logger = logging.getLogger("windowfit.agent")

#: read_file returns at most this many bytes of a file (the rest is cut, with a note).
DEFAULT_MAX_READ = 500_000
#: run_command stops a command after this many seconds.
DEFAULT_COMMAND_TIMEOUT = 30.0
#: run_command keeps at most this many bytes of output (head and tail, with a note).
DEFAULT_MAX_OUTPUT = 32_000
#: The variables of the agent's environment that run_command passes on to a command
#: (``LC_*``: every name that starts with ``LC_``). Everything else, the host's API keys
#: and tokens included, is left out unless named in ``pass_env`` or set in ``env``.
DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TMPDIR",
    "TZ",
)


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returned: the text for the model, and whether it is an error."""

    content: str
    is_error: bool = False


#: Starts a sub-agent: (instruction, name, call id) -> its final answer. Raises ToolError
#: when the sub-agent stops without an answer.
Spawner = Callable[[str, "str | None", str], Awaitable[str]]


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the call: which agent made it, the call's id, and how
    to start a sub-agent (``spawn`` is ``None`` where sub-agents may not be started)."""

    agent: AgentInfo
    call_id: str
    spawn: Spawner | None = None


class Tool(Protocol):
    """A tool the agent can call (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def input_schema(self) -> Mapping[str, Any]: ...

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput | str:
        """Do the work, or raise ToolError with a message for the model."""
        ...


def tool_definition(tool: Tool) -> dict[str, Any]:
    """The tool as an Anthropic tool definition."""
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": dict(tool.input_schema),
    }


async def run_tool(
    tool: Tool | None, name: str, arguments: Mapping[str, Any], context: ToolContext
) -> ToolOutput:
    """Run a tool call to completion; every failure becomes an error result."""
    if tool is None:
        return ToolOutput(f"There is no tool named {name!r}.", is_error=True)
    try:
        output = await tool.run(arguments, context)
    except ToolError as exc:
        return ToolOutput(str(exc), is_error=True)
    except Exception as exc:  # a tool's bug must not stop the agent
        logger.warning("tool %s of agent %s failed: %s", name, context.agent.id, exc, exc_info=True)
        return ToolOutput(f"The tool {name} failed: {type(exc).__name__}: {exc}", is_error=True)
    return ToolOutput(output) if isinstance(output, str) else output


def _string_argument(arguments: Mapping[str, Any], key: str, tool: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{tool} needs {key!r}: a non-empty string.")
    return value


# --------------------------------------------------------------------------------------
# read_file


class ReadFile:
    """Read a UTF-8 text file inside the workspace root.

    Paths are taken relative to the root (an absolute path must also lie inside it); a
    path that leads outside it, by ``..`` or through a symbolic link, is refused. Files
    longer than ``max_bytes`` are cut, with a note saying how much was left out.

    The path is walked one component at a time from a file descriptor of the root, each
    directory opened with ``O_NOFOLLOW`` relative to the one before, and the file itself
    opened with ``O_NOFOLLOW`` too: what is checked is what is opened, so swapping a link
    between a check and the open cannot lead outside (resolving the path first and opening
    it afterwards could: 449 of 3,000 reads did, with a link swapped in a loop). A
    symbolic link is followed only by this walk, and only while it stays inside the root
    (an absolute target must name a place under the root; ``..`` may not climb above it);
    a chain of more than :data:`_MAX_LINKS` links (a loop) is refused. Only regular files
    are read: a FIFO, socket, device or directory is refused after ``fstat`` on the opened
    descriptor (the open uses ``O_NONBLOCK``, so a FIFO with no writer does not block).

    Not covered: a hard link inside the workspace to a file outside it is a file of the
    workspace (the file system does not tell them apart), and a directory moved out of
    the workspace by someone else while a read walks through it.
    """

    name = "read_file"
    description = (
        "Read a text file from the workspace. Give the path relative to the workspace "
        "root. Long files are cut at the size limit, with a note."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "the file's path"}},
        "required": ["path"],
    }

    def __init__(self, root: str | Path, *, max_bytes: int = DEFAULT_MAX_READ) -> None:
        self.given = Path(os.path.abspath(root))
        self.root = Path(root).resolve()
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, not {max_bytes}")
        self.max_bytes = max_bytes

    def resolve(self, path: str) -> Path:
        """Where ``path`` leads inside the root (links inside followed), or ToolError.

        For display and tests: :meth:`run` never opens this path, it walks again.
        """
        fd, where = self._open(path)
        os.close(fd)
        return where

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        path = _string_argument(arguments, "path", self.name)
        return await asyncio.to_thread(self._read, path)

    # -- walking --------------------------------------------------------------------------

    def _relative(self, path: str, shown: str) -> list[str]:
        """The components of ``path`` under the root; an absolute path must lie under it."""
        if not os.path.isabs(path):
            return path.split("/")
        normal = os.path.normpath(path)
        for root in (str(self.root), str(self.given)):
            if normal == root:
                return []
            if normal.startswith(root.rstrip("/") + "/"):
                return normal[len(root.rstrip("/")) + 1 :].split("/")
        raise _outside(shown)

    def _open(self, path: str) -> tuple[int, Path]:
        """Open ``path`` without following any link the walk has not checked.

        Returns the descriptor (the caller closes it) and the path inside the root.
        """
        if "\x00" in path:
            raise ToolError(f"{path!r}: not a valid path.")
        todo = self._relative(path, path)
        todo.reverse()  # a stack: the next component last
        try:
            root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ToolError(f"the workspace cannot be opened ({exc.strerror}).") from None
        fds = [root_fd]  # the directories walked so far, the root first
        names: list[str] = []
        links = 0
        try:
            while todo:
                name = todo.pop()
                if name in ("", "."):
                    continue
                if name == "..":
                    if not names:
                        raise _outside(path)
                    names.pop()
                    os.close(fds.pop())
                    continue
                last = not any(part not in ("", ".") for part in todo)
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
                flags |= (os.O_NONBLOCK | os.O_NOCTTY) if last else os.O_DIRECTORY
                try:
                    fd = os.open(name, flags, dir_fd=fds[-1])
                except OSError as exc:
                    target = self._link(name, fds[-1], exc, path)
                    if target is None:  # it changed under us: look at it again
                        todo.append(name)
                        links += 1
                    else:
                        links += 1
                        if os.path.isabs(target):
                            rest = self._relative(target, path)
                            names.clear()
                            for extra in fds[1:]:
                                os.close(extra)
                            del fds[1:]
                        else:
                            rest = target.split("/")
                        todo.extend(reversed(rest))
                    if links > _MAX_LINKS:
                        raise ToolError(
                            f"{path}: too many levels of symbolic links (a loop?)."
                        ) from None
                    continue
                if last:
                    return fd, self.root.joinpath(*names, name)
                fds.append(fd)
                names.append(name)
            # Only directories on the way (the path names the root or a directory).
            raise ToolError(f"{path}: is a directory, not a file.")
        finally:
            for fd in fds:
                os.close(fd)

    @staticmethod
    def _link(name: str, dir_fd: int, exc: OSError, path: str) -> str | None:
        """The target of the link ``name`` whose open failed with ``exc``; None when it is
        no longer a link (swapped meanwhile); ToolError for any other failure."""
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise ToolError(f"{path}: no such file in the workspace.") from None
            except OSError as inner:
                raise ToolError(f"{path}: cannot be read ({inner.strerror}).") from None
            if stat.S_ISLNK(info.st_mode):
                try:
                    return os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    return None
            if exc.errno == errno.ENOTDIR and not stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{path}: {name} is not a directory.") from None
            return None
        if exc.errno == errno.ENOENT:
            raise ToolError(f"{path}: no such file in the workspace.") from None
        if exc.errno == errno.ENXIO:  # a socket, or a device with nothing behind it
            raise ToolError(f"{path}: not a regular file (a socket or device).") from None
        raise ToolError(f"{path}: cannot be read ({exc.strerror}).") from None

    def _read(self, path: str) -> ToolOutput:
        fd, _ = self._open(path)
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{path}: is a directory, not a file.")
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(
                    f"{path}: not a regular file ({_kind(info.st_mode)}); only files are read."
                )
            size = info.st_size
            chunks: list[bytes] = []
            wanted = self.max_bytes + 1
            while wanted > 0:
                try:
                    chunk = os.read(fd, min(wanted, 1 << 20))
                except OSError as exc:
                    raise ToolError(f"{path}: cannot be read ({exc.strerror}).") from None
                if not chunk:
                    break
                chunks.append(chunk)
                wanted -= len(chunk)
            data = b"".join(chunks)
        finally:
            os.close(fd)
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path}: a binary file, not text.")
        if len(data) <= self.max_bytes:
            return ToolOutput(data.decode("utf-8", errors="replace"))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(data[: self.max_bytes], final=False)
        shown = len(text.encode("utf-8", errors="replace"))
        return ToolOutput(
            f"{text}\n\n[The file is {max(size, len(data)):,} bytes; only the first {shown:,} "
            "are shown.]"
        )


#: How many symbolic links one read may follow (the kernel's own limit is 40).
_MAX_LINKS = 40


def _outside(path: str) -> ToolError:
    return ToolError(
        f"{path}: outside the workspace. Only files under the workspace root can be read."
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a plain file"


# --------------------------------------------------------------------------------------
# run_command


class _Capture:
    """Keeps the first and the last ``limit // 2`` bytes of a stream, and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", errors="replace")
        if omitted <= 0:
            return head + tail
        return f"{head}\n[... {omitted:,} bytes of output left out ...]\n{tail}"


class RunCommand:
    """Run a shell command in the workspace, with a time limit and an output cap.

    **This is not a sandbox.** The command runs as the agent's own user, with that user's
    rights on files and on the network; the workspace is only its working directory.
    Run the agent in a container or a virtual machine when the commands it may run are
    not trusted. What this tool does do:

    * *An environment allowlist.* The command sees only the variables named in
      :data:`DEFAULT_ENV_ALLOWLIST` (``PATH``, ``HOME``, ``USER``, ``LOGNAME``, ``SHELL``,
      ``LANG``, ``LANGUAGE``, ``LC_*``, ``TERM``, ``TMPDIR``, ``TZ``), plus those named in
      ``pass_env`` (names, or prefixes ending in ``*``), plus ``env`` (values set for the
      command), so that the host's API keys and tokens are not handed to whatever the
      model writes. ``PATH`` is the standard one when the host has none.
    * *Nothing left running.* A small supervisor process (this Python, ``-I -S``) starts
      the shell in a new session and, on Linux, makes itself a *child subreaper*
      (``prctl(PR_SET_CHILD_SUBREAPER)``): every process the command starts stays its
      descendant, even one that double-forks, calls ``setsid`` or is put in the
      background (orphans are reparented to the subreaper instead of init). When the
      shell exits, or the time limit passes, the supervisor kills, by scanning ``/proc``,
      every descendant and every process of the session that is still alive, and reaps
      them; the result says what was stopped ("stopped 2 background processes left
      running: 2 x sleep"). The supervisor also gets ``SIGTERM`` if the agent's process
      dies (``PR_SET_PDEATHSIG``), and cleans up the same way.

      What still escapes: processes started on the command's behalf by another service
      (``systemd-run``, ``at``, a container runtime, ``ssh`` to another host), and those
      the agent's user may not signal (a setuid program: the result says it could not
      stop them). If the supervisor itself is killed with ``SIGKILL``, its descendants
      are left behind. Without ``/proc`` and ``prctl`` (not Linux), only the command's
      process group is killed.

    The supervisor costs about 0.1 s per command (an interpreter start); the time limit
    counts from the shell's start.

    Standard output and standard error are merged. A command still running after
    ``timeout`` seconds is stopped and reported as an error with the output it had
    written. A non-zero exit code is an error result.
    """

    name = "run_command"
    description = (
        "Run a shell command in the workspace and return its exit code and output "
        "(standard output and standard error together; long output is cut in the middle). "
        "Background processes are stopped when the command ends."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "the shell command"}},
        "required": ["command"],
    }

    def __init__(
        self,
        cwd: str | Path,
        *,
        timeout: float = DEFAULT_COMMAND_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
        env: Mapping[str, str] | None = None,
        pass_env: Iterable[str] = (),
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        if max_output <= 1:
            raise ValueError(f"max_output must be more than 1 byte, not {max_output}")
        self.cwd = Path(cwd)
        self.timeout = timeout
        self.max_output = max_output
        self.env = dict(env or {})
        self.pass_env = (*DEFAULT_ENV_ALLOWLIST, *pass_env)

    def environment(self) -> dict[str, str]:
        """The environment the command gets (see the class docstring), as of now."""
        chosen = {
            name: value
            for name, value in os.environ.items()
            if any(
                name.startswith(rule[:-1]) if rule.endswith("*") else name == rule
                for rule in self.pass_env
            )
        }
        chosen.setdefault("PATH", os.defpath)
        chosen.update(self.env)
        return chosen

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        command = _string_argument(arguments, "command", self.name)
        if not sys.executable:
            raise ToolError("run_command cannot start its supervisor (no Python interpreter).")
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                "-c",
                _SUPERVISOR,
                command,
                str(os.getpid()),
                cwd=self.cwd,
                env=self.environment(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(f"the command could not be started ({exc.strerror}).") from None
        assert process.stdout is not None and process.stderr is not None
        capture = _Capture(self.max_output)
        output = asyncio.ensure_future(_drain(process.stdout, capture))
        lines: list[str] = []
        started = asyncio.Event()
        status = asyncio.ensure_future(_status(process.stderr, lines, started))
        try:
            # The time limit is the command's: it starts when the shell does, not when the
            # supervisor's interpreter does (which takes a moment, more on a busy machine).
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(started.wait(), _SUPERVISOR_GRACE)
            done, _ = await asyncio.wait({status}, timeout=self.timeout)
            timed_out = not done
            if timed_out:
                await _stop(process, status, lines)
            await status
            report = _Report.parse("".join(lines))
            # Output still held open by a process that could not be stopped is left.
            await asyncio.wait({output}, timeout=1.0)
            await process.wait()
        except BaseException:  # cancelled: do not leave the command running
            await _stop(process, status, lines)  # the supervisor cleans up and exits
            await process.wait()
            raise
        finally:
            output.cancel()
            status.cancel()
        if timed_out:
            text = capture.text()
            raise ToolError(
                f"The command did not finish within {self.timeout:g} seconds and was stopped"
                f"{report.others()}." + (f" Output so far:\n{text}" if text else "")
            )
        if report.code is None:
            raise ToolError(f"The command could not be run: {report.problem or 'unknown'}")
        note = report.note()
        return ToolOutput(
            f"exit code {report.code}\n{capture.text()}" + (f"\n[{note}]" if note else ""),
            is_error=report.code != 0,
        )


async def _drain(stream: asyncio.StreamReader, capture: _Capture) -> None:
    while chunk := await stream.read(65536):
        capture.add(chunk)


async def _status(stream: asyncio.StreamReader, lines: list[str], started: asyncio.Event) -> None:
    """Collect the supervisor's report; ``started`` is set once the shell runs."""
    while line := await stream.readline():
        text = line.decode("utf-8", errors="replace")
        lines.append(text)
        if text.startswith("shell "):
            started.set()
    started.set()


async def _stop(
    process: asyncio.subprocess.Process, status: asyncio.Future[None], lines: list[str]
) -> None:
    """Ask the supervisor to stop the command (it kills and reaps everything, then
    reports); if it does not answer in time, kill its process group ourselves."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(process.pid, signal.SIGTERM)
    done, _ = await asyncio.wait({status}, timeout=_SUPERVISOR_GRACE)
    if not done:
        groups = [process.pid] + [
            int(line.split()[1]) for line in lines if line.startswith("shell ")
        ]
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


#: Seconds the supervisor has to stop a timed-out command before it is killed itself.
_SUPERVISOR_GRACE = 5.0


@dataclass
class _Report:
    """What the supervisor said: the shell's exit code and what it had to stop."""

    code: int | None = None
    stopped: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    problem: str = ""

    @classmethod
    def parse(cls, text: str) -> _Report:
        report = cls()
        other = []
        for line in text.splitlines():
            word, _, rest = line.partition(" ")
            if word == "code":
                report.code = int(rest)
            elif word == "stopped":
                report.stopped.append(rest.partition(" ")[2])
            elif word == "denied":
                report.denied.append(rest.partition(" ")[2])
            elif word not in ("shell", "timeout"):
                other.append(line)
        report.problem = " ".join(other)[-500:]
        return report

    def note(self) -> str:
        parts = []
        if self.stopped:
            n = len(self.stopped)
            parts.append(
                f"stopped {n} background process{'es' if n != 1 else ''} left running: "
                f"{_names(self.stopped)}"
            )
        if self.denied:
            parts.append(
                f"could not stop {len(self.denied)} (not permitted): {_names(self.denied)}"
            )
        return "; ".join(parts)

    def others(self) -> str:
        if not self.stopped and not self.denied:
            return ""
        n = len(self.stopped)
        text = f" (with {n} other process{'es' if n != 1 else ''}: {_names(self.stopped)})"
        if self.denied:
            text += f"; could not stop {len(self.denied)}: {_names(self.denied)}"
        return text


def _names(names: list[str]) -> str:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{k} x {v}" if k > 1 else v for v, k in sorted(counts.items()))


#: The supervisor: ``python -I -S -c _SUPERVISOR command parent_pid``. It reports on its
#: standard error, one line each: ``shell PID``, then ``stopped PID NAME`` and ``denied
#: PID NAME`` for what it killed or could not, ``timeout`` or ``code N``.
_SUPERVISOR = r"""
import os, signal, sys, time

class Stop(Exception):
    pass

def on_term(signum, frame):
    raise Stop

def say(line):
    try:
        os.write(2, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass  # the agent is gone (a broken pipe): clean up all the same

def scan():
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        end = data.rfind(b")")
        fields = data[end + 2 :].split()
        comm = data[data.find(b"(") + 1 : end].decode("utf-8", "replace")
        found[int(name)] = (fields[0].decode(), int(fields[1]), int(fields[3]), comm)
    return found

def family(procs, me, session):
    children = {}
    for pid, (_, ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [me]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.update(pid for pid, p in procs.items() if p[2] == session)
    found.discard(me)
    return found

def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return

def sweep(me, shell, tracked):
    if not tracked:
        try:
            os.killpg(shell, signal.SIGKILL)
        except OSError:
            pass
        reap()
        return
    # Members of the session count only when it is the supervisor's own: never sweep
    # the session of whoever started it.
    session = me if os.getsid(0) == me else -1
    seen, denied = set(), set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        procs = scan()
        live = [
            pid for pid in family(procs, me, session)
            if procs[pid][0] not in "ZXx" and pid not in denied
        ]
        if not live:
            break
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            except PermissionError:
                denied.add(pid)
                say("denied %d %s" % (pid, procs[pid][3]))
                continue
            if pid not in seen and pid != shell:
                seen.add(pid)
                say("stopped %d %s" % (pid, procs[pid][3]))
        time.sleep(0.002)
        reap()
    reap()

def main():
    me = os.getpid()
    try:
        os.setsid()  # its own session, whoever started it (run_command already does)
    except OSError:
        pass
    tracked = os.path.isdir("/proc")
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        tracked = tracked and libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        tracked = False
    if os.getppid() != int(sys.argv[2]):
        return  # the agent is gone already
    shell = os.fork()
    if shell == 0:
        try:
            os.dup2(1, 2)
            os.setpgid(0, 0)  # a group of its own: what is killed where /proc is missing
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.execv("/bin/sh", ["/bin/sh", "-c", sys.argv[1]])
        finally:
            os._exit(127)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # only the command holds the output open
    os.close(null)
    say("shell %d" % shell)
    code = None
    try:
        _, status = os.waitpid(shell, 0)
        code = os.waitstatus_to_exitcode(status)
    except Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sweep(me, shell, tracked)
    say("timeout" if code is None else "code %d" % code)

signal.signal(signal.SIGTERM, on_term)
try:
    main()
except Stop:
    pass
"""


# --------------------------------------------------------------------------------------
# spawn_subagent


class SpawnSubagent:
    """Start a sub-agent with one instruction; its final answer is this tool's result.

    Several calls in one assistant message run at the same time.
    """

    name = "spawn_subagent"
    description = (
        "Start a sub-agent that works alone on one instruction with the same tools, and "
        "return its final answer. Several sub-agents started in one message run at once."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "instruction": {"type": "string", "description": "the sub-agent's task, in full"},
            "name": {"type": "string", "description": "a short name for the sub-agent"},
        },
        "required": ["instruction"],
    }

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        instruction = _string_argument(arguments, "instruction", self.name)
        name = arguments.get("name")
        if context.spawn is None:
            raise ToolError("Sub-agents cannot start further sub-agents here.")
        answer = await context.spawn(
            instruction, name if isinstance(name, str) else None, context.call_id
        )
        return ToolOutput(answer)
