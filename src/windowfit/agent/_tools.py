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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import ToolError
from ._model import AgentInfo

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
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

    Standard output and standard error are merged. A command still running after
    ``timeout`` seconds is stopped (its whole process group) and reported as an error
    with the output it had written. A non-zero exit code is an error result.
    """

    name = "run_command"
    description = (
        "Run a shell command in the workspace and return its exit code and output "
        "(standard output and standard error together; long output is cut in the middle)."
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
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        if max_output <= 1:
            raise ValueError(f"max_output must be more than 1 byte, not {max_output}")
        self.cwd = Path(cwd)
        self.timeout = timeout
        self.max_output = max_output

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        command = _string_argument(arguments, "command", self.name)
        try:
            process = await asyncio.create_subprocess_shell(
                command,
                cwd=self.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(f"the command could not be started ({exc.strerror}).") from None
        capture = _Capture(self.max_output)
        try:
            await asyncio.wait_for(self._finish(process, capture), self.timeout)
        except asyncio.TimeoutError:
            await _stop(process)
            output = capture.text()
            raise ToolError(
                f"The command did not finish within {self.timeout:g} seconds and was stopped."
                + (f" Output so far:\n{output}" if output else "")
            ) from None
        except BaseException:  # cancelled: do not leave the process running
            await _stop(process)
            raise
        code = process.returncode
        output = capture.text()
        return ToolOutput(f"exit code {code}\n{output}", is_error=code != 0)

    @staticmethod
    async def _finish(process: asyncio.subprocess.Process, capture: _Capture) -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            capture.add(chunk)
        await process.wait()


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    await process.wait()


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
