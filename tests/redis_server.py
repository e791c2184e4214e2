"""A real redis-server for tests: started on a free loopback port with a temp dir, stopped
after. ``make setup`` installs the Debian package where apt-get runs; elsewhere tests skip
with :data:`NEEDS_REDIS`."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REDIS = shutil.which("redis-server")
NEEDS_REDIS = "needs redis-server (make setup installs the Debian package where apt-get runs)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server on a free loopback port, keeping nothing on disk; its URL."""
    assert REDIS is not None
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(
            [
                *(REDIS, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)),
                *("--save", "", "--appendonly", "no", "--protected-mode", "yes"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return proc, f"redis://127.0.0.1:{port}/0"
            except OSError:
                time.sleep(0.05)
        proc.kill()
        proc.wait()
    raise RuntimeError("redis-server did not start on a free port in 5 attempts")


def stop_redis(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running_redis(directory: Path) -> Iterator[str]:
    """The URL of a redis-server running until the block ends (skips the test where
    redis-server or the ``redis`` package is missing)."""
    if REDIS is None:
        pytest.skip(NEEDS_REDIS)
    pytest.importorskip("redis", reason="needs the 'redis' package: pip install 'windowfit[proxy]'")
    proc, url = start_redis(directory)
    try:
        yield url
    finally:
        stop_redis(proc)
