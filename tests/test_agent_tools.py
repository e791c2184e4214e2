"""The agent's tools: read_file stays in its workspace, run_command has limits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from windowfit.agent import (
    DEFAULT_ENV_ALLOWLIST,
    AgentInfo,
    ReadFile,
    RunCommand,
    ToolContext,
    ToolOutput,
    run_tool,
)
from windowfit.errors import ToolError

CONTEXT = ToolContext(AgentInfo("s", "main", "main"), "call-1")


def use(tool: Any, **arguments: Any) -> ToolOutput:
    return asyncio.run(run_tool(tool, tool.name, arguments, CONTEXT))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "a.txt").write_text("inside", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("SECRET", encoding="utf-8")
    os.symlink(tmp_path / "outside.txt", work / "link-out.txt")
    os.symlink(work / "sub" / "a.txt", work / "link-in.txt")
    return work


@pytest.mark.parametrize(
    "path",
    ["sub/a.txt", "./sub/../sub/a.txt", "link-in.txt", "{root}/sub/a.txt"],
)
def test_read_file_inside_the_workspace(root: Path, path: str) -> None:
    output = use(ReadFile(root), path=path.format(root=root))
    assert output == ToolOutput("inside")


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "sub/../../outside.txt", "link-out.txt", "{outside}", "/etc/passwd", ".."],
)
def test_read_file_refuses_paths_that_escape(root: Path, path: str) -> None:
    output = use(ReadFile(root), path=path.format(outside=root.parent / "outside.txt"))
    assert output.is_error
    assert "outside the workspace" in output.content
    assert "SECRET" not in output.content


def test_resolve_raises_tool_error(root: Path) -> None:
    with pytest.raises(ToolError):
        ReadFile(root).resolve("../outside.txt")
    with pytest.raises(ToolError):
        ReadFile(root).resolve("bad\x00name")


@pytest.mark.parametrize(
    ("text", "cap", "shown"),
    [
        ("abcdefghij", 4, "abcd"),
        ("абвгд", 5, "аб"),  # 2 bytes a letter: a cut letter is left out, not mangled
        ("short", 100, "short"),
    ],
)
def test_read_file_is_size_capped(root: Path, text: str, cap: int, shown: str) -> None:
    (root / "big.txt").write_text(text, encoding="utf-8")
    output = use(ReadFile(root, max_bytes=cap), path="big.txt")
    assert not output.is_error
    assert output.content.startswith(shown)
    size = len(text.encode())
    if size > cap:
        assert output.content[len(shown) :].startswith("\n\n[The file is ")
        assert f"{size:,} bytes" in output.content
        assert f"only the first {len(shown.encode()):,} are shown" in output.content
    else:
        assert output.content == text


def test_read_file_refuses_binary(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    output = use(ReadFile(root), path="blob.bin")
    assert output.is_error and "binary" in output.content


@pytest.mark.parametrize(
    ("command", "expected", "is_error"),
    [
        ("echo out; echo err >&2", "exit code 0\nout\nerr\n", False),
        ("printf x; exit 7", "exit code 7\nx", True),
        ("pwd", None, False),
    ],
)
def test_run_command(root: Path, command: str, expected: str | None, is_error: bool) -> None:
    output = use(RunCommand(root), command=command)
    assert output.is_error is is_error
    if expected is None:
        assert output.content == f"exit code 0\n{root}\n"
    else:
        assert output.content == expected


@pytest.mark.parametrize(
    "command", ["sleep 30", "sleep 30 & sleep 30; wait", "echo early; sleep 30"]
)
def test_run_command_times_out_and_stops_the_command(root: Path, command: str) -> None:
    started = time.monotonic()
    output = use(RunCommand(root, timeout=0.3), command=command)
    assert time.monotonic() - started < 5
    assert output.is_error
    assert "did not finish within 0.3 seconds" in output.content
    if "early" in command:
        # What the command printed first is kept (the shell may add "Killed" after it,
        # when it outlives the sleep it ran for a moment).
        assert "Output so far:\nearly\n" in output.content


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_run_command_timeout_kills_the_process_group(root: Path) -> None:
    # A background child that would outlive its shell by half a minute: no race with the
    # machine's load, only whether the stop reached it.
    pidfile = root / "child.pid"
    command = f"sh -c 'echo $$ > {pidfile}; exec sleep 30' & wait"
    output = use(RunCommand(root, timeout=0.5), command=command)
    assert output.is_error and "did not finish" in output.content
    child = int(pidfile.read_text(encoding="ascii"))
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.parametrize(("size", "cap"), [(100, 1000), (50_000, 1000), (50_000, 10)])
def test_run_command_output_is_capped(root: Path, size: int, cap: int) -> None:
    output = use(RunCommand(root, max_output=cap), command=f"head -c {size} /dev/zero | tr '\\0' a")
    body = output.content.removeprefix("exit code 0\n")
    if size <= cap:
        assert body == "a" * size
    else:
        half = cap // 2
        assert body.startswith("a" * half + "\n[... ")
        assert body.endswith(" ...]\n" + "a" * half)
        assert f"{size - 2 * half:,} bytes of output left out" in body


@pytest.mark.parametrize(
    ("options", "message"),
    [({"timeout": 0}, "timeout"), ({"max_output": 1}, "max_output")],
)
def test_run_command_settings(root: Path, options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunCommand(root, **options)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# read_file: links swapped under it, loops, files that are not files


SWAPPER = """
import os, sys
what, root, inside, outside = sys.argv[1:]
os.chdir(root)
while True:
    if what == "link":  # one link, pointed inside and outside in turn
        for target in (inside, outside):
            os.symlink(target, "next")
            os.replace("next", "f.txt")
    elif what == "file":  # a plain file, and a link to the outside file, in turn
        os.link(inside, "next")
        os.replace("next", "f.txt")
        os.symlink(outside, "next")
        os.replace("next", "f.txt")
    else:  # a directory, and a link to the outside directory, in turn
        os.rename("d", "d.kept")
        os.symlink(outside, "d")
        os.rename("d", "d.link")
        os.rename("d.kept", "d")
        os.unlink("d.link")
"""


@pytest.mark.parametrize("what", ["link", "file", "directory"])
def test_a_link_swapped_during_reads_never_leads_outside(tmp_path: Path, what: str) -> None:
    """Another process swaps, as fast as it can, what a path names between something inside
    the workspace and a link to the outside; thousands of reads never see the outside.

    ``link``: a link retargeted; ``file``: a plain file replaced by a link (the case that
    let a check-then-open read escape); ``directory``: the same for a directory on the way.
    The swapper is a process, not a thread, so that it swaps while reads run (a thread
    mostly waits for the interpreter lock, and swaps between reads, not during them).
    """
    root = tmp_path / "work"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("inside", encoding="utf-8")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f.txt").write_text("SECRET", encoding="utf-8")
    inside, outside = root / "d" / "f.txt", tmp_path / "out" / "f.txt"
    if what == "directory":
        inside, outside, path = root / "d", tmp_path / "out", "d/f.txt"
    else:
        os.symlink(inside, root / "f.txt")
        path = "f.txt"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, what, str(root), str(inside), str(outside)]
    )
    reads = 3_000
    tool = ReadFile(root)

    async def read_many() -> list[ToolOutput]:
        return [await run_tool(tool, tool.name, {"path": path}, CONTEXT) for _ in range(reads)]

    try:
        time.sleep(0.2)  # it has started
        outputs = asyncio.run(read_many())
        assert swapper.poll() is None, "the swapper stopped: the reads did not race it"
    finally:
        swapper.kill()
        swapper.wait()
    leaked = sum("SECRET" in o.content for o in outputs)
    inside = sum(o.content == "inside" for o in outputs)
    refused = sum(o.is_error for o in outputs)
    print(f"{what}: {reads:,} reads: {inside} inside, {refused} refused, {leaked} outside")
    assert leaked == 0
    assert inside + refused == reads
    assert inside > 0


def test_a_fifo_is_refused_at_once(root: Path) -> None:
    os.mkfifo(root / "pipe")
    started = time.monotonic()
    output = use(ReadFile(root), path="pipe")
    assert time.monotonic() - started < 2
    assert output.is_error and "not a regular file (a FIFO)" in output.content


def test_a_socket_is_refused(root: Path) -> None:
    import socket

    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "sock"))
        output = use(ReadFile(root), path="sock")
    finally:
        server.close()
    assert output.is_error and "not a regular file" in output.content


@pytest.mark.parametrize(
    ("links", "path"),
    [
        ({"a": "b", "b": "a"}, "a"),
        ({"self": "self"}, "self"),
        ({"d": "d/x"}, "d/x"),
        ({"up": "sub/../up"}, "up"),
    ],
)
def test_a_link_loop_is_a_tool_error(
    root: Path, links: dict[str, str], path: str, caplog: pytest.LogCaptureFixture
) -> None:
    for name, target in links.items():
        os.symlink(target, root / name)
    output = use(ReadFile(root), path=path)
    assert output.is_error and "too many levels of symbolic links" in output.content
    assert not caplog.records  # an expected refusal, not a logged failure


@pytest.mark.parametrize(
    ("link", "path", "expected"),
    [
        ("sub", "dir-link/a.txt", "inside"),  # relative, inside
        ("./sub/../sub/a.txt", "rel-link", "inside"),
        ("../outside.txt", "rel-out", "outside the workspace"),
        ("sub/../../outside.txt", "rel-out2", "outside the workspace"),
        ("/etc", "abs-out/passwd", "outside the workspace"),
        ("missing.txt", "dangling", "no such file"),
        ("sub/a.txt/x", "through-a-file", "not a directory"),
    ],
)
def test_links_are_followed_only_inside(root: Path, link: str, path: str, expected: str) -> None:
    os.symlink(link, root / path.split("/")[0])
    output = use(ReadFile(root), path=path)
    if expected == "inside":
        assert output == ToolOutput("inside")
    else:
        assert output.is_error and expected in output.content
        assert "SECRET" not in output.content


@pytest.mark.parametrize("path", [".", "sub", "sub/", ""])
def test_a_directory_is_not_a_file(root: Path, path: str) -> None:
    output = use(ReadFile(root), path=path)
    assert output.is_error
    assert "is a directory" in output.content or "non-empty string" in output.content


# --------------------------------------------------------------------------------------
# run_command: the environment, and nothing left running


def test_a_secret_of_the_agent_is_not_visible_to_the_command(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-do-not-leak")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("PROJECT_FLAG", "on")
    tool = RunCommand(root, env={"GIVEN": "yes"}, pass_env=["PROJECT_*"])
    output = use(tool, command="env")
    assert not output.is_error
    names = dict(line.split("=", 1) for line in output.content.splitlines()[1:] if "=" in line)
    assert "do-not-leak" not in output.content
    assert "SOME_API_KEY" not in names and "ANTHROPIC_API_KEY" not in names
    assert names["PATH"] == os.environ["PATH"]
    assert names["LC_TIME"] == "C"  # LC_* is allowed
    assert names["PROJECT_FLAG"] == "on" and names["GIVEN"] == "yes"  # the caller's additions
    allowed = {n for n in names if any(n == r or n.startswith(r[:-1]) for r in ALLOWED)}
    assert set(names) - allowed <= {"PWD", "SHLVL", "_", "OLDPWD"}  # set by the shell


ALLOWED = (*DEFAULT_ENV_ALLOWLIST, "PROJECT_*", "GIVEN")


def test_the_environment_has_a_path_even_when_the_agent_has_none(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PATH")
    assert RunCommand(root).environment()["PATH"] == os.defpath


def running(marker: str) -> list[int]:
    """The ``sleep MARKER`` processes that are alive (a zombie has no command line)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", marker.encode()]:
                found.append(int(name))
    return found


def marker() -> str:
    """A sleep duration no other test uses, to find its process by."""
    return f"41.{uuid.uuid4().int % 10**8:08d}"


DAEMON = (  # the classic double fork: the first child waited for, the second set free
    "import os, sys; pid = os.fork(); pid and (os.waitpid(pid, 0), os._exit(0)); "
    "os.setsid(); os.fork() and os._exit(0); os.execvp('sleep', ['sleep', sys.argv[1]])"
)

LEFT_RUNNING = {
    "background": ("sleep {m} &", 1),
    "in a subshell": ("( sleep {m} & )", 1),
    "nohup": ("nohup sleep {m} >/dev/null 2>&1 &", 1),
    "setsid -f": ("setsid -f sleep {m}", 1),
    "a double-forking daemon": (f'{sys.executable} -c "{DAEMON}" {{m}}', 1),
    "two, one of them setsid": ("sleep {m} & setsid sleep {m} & echo started", 2),
}


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("case", list(LEFT_RUNNING))
def test_processes_left_running_are_stopped_and_reported(root: Path, case: str) -> None:
    command, count = LEFT_RUNNING[case]
    m = marker()
    started = time.monotonic()
    output = use(RunCommand(root, timeout=10), command=command.format(m=m))
    assert time.monotonic() - started < 5  # the command's end, not the timeout
    assert running(m) == []
    assert not output.is_error
    plural = "es" if count > 1 else ""
    assert f"[stopped {count} background process{plural} left running: " in output.content


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize(
    "command",
    ["setsid sleep {m}", "sleep {m} & setsid sleep {m}", "( setsid sleep {m} & ); sleep {m}"],
)
def test_a_timeout_stops_everything_the_command_started(root: Path, command: str) -> None:
    m = marker()
    output = use(RunCommand(root, timeout=0.5), command=command.format(m=m))
    assert output.is_error and "did not finish within 0.5 seconds" in output.content
    assert running(m) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_cancelled_command_is_stopped(root: Path) -> None:
    m = marker()

    async def cancel() -> None:
        tool = RunCommand(root, timeout=30)
        task = asyncio.ensure_future(
            run_tool(tool, tool.name, {"command": f"setsid sleep {m} & sleep {m}"}, CONTEXT)
        )
        await asyncio.sleep(0.5)
        assert running(m)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    deadline = time.monotonic() + 5  # the supervisor cleans up after the cancellation
    while running(m) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(m) == []


AGENT = """
import asyncio, sys
from windowfit.agent import AgentInfo, RunCommand, ToolContext, run_tool
tool = RunCommand(".", timeout=60)
context = ToolContext(AgentInfo("s", "main", "main"), "c")
asyncio.run(run_tool(tool, tool.name, {"command": sys.argv[1]}, context))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_commands_of_a_killed_agent_are_stopped(root: Path) -> None:
    m = marker()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, f"setsid sleep {m} & sleep {m}"], cwd=root, env=env
    )
    deadline = time.monotonic() + 10
    while len(running(m)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(running(m)) == 2
    agent.kill()
    agent.wait()
    deadline = time.monotonic() + 5
    while running(m) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(m) == []
