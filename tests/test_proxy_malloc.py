"""``windowfit proxy`` keeps freed memory, so that 1 MB bodies do not fault pages in anew."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from windowfit.proxy._malloc import keep_freed_memory
from windowfit.server import SimConfig, SimServer

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
needs_glibc = pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")

#: Allocates and frees what a proxied 1 MB request does (a few copies of the body),
#: 100 times, and prints the minor page faults per round.
_CHURN = textwrap.dedent(
    """
    import resource, sys
    from windowfit.proxy._malloc import keep_freed_memory
    if sys.argv[1] != "0":
        assert keep_freed_memory(int(sys.argv[1]))
    body = b"x" * (1 << 20)
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        b"".join([bytes(body) + b"y" for _ in range(4)])
    before = faults()
    for _ in range(100):
        b"".join([bytes(body) + b"y" for _ in range(4)])
    print((faults() - before) / 100)
    """
)


def _faults_per_round(keep: int) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _CHURN, str(keep)], capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip())


@needs_glibc
def test_kept_freed_memory_takes_the_page_faults_of_large_blocks_away() -> None:
    assert _faults_per_round(64 << 20) < 50  # 8 MB per round: 2,048 pages if faulted in


def test_nothing_is_changed_for_zero_bytes_or_without_glibc() -> None:
    assert keep_freed_memory(0) is False
    if not GLIBC:
        assert keep_freed_memory() is False


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


@needs_glibc
def test_the_proxy_command_serves_large_bodies_without_page_faults() -> None:
    """Through ``windowfit proxy`` (by default it keeps 64 MiB): 1 MB requests forwarded
    as sent cost the proxy process almost no page faults (without it: 250-660 each,
    benchmarks/RESULTS.md)."""
    text = " ".join(["tool output line"] * 60_000)  # about 1 MB, well within a 1M window
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": text}],
    }
    with SimServer(SimConfig(context_window=1_000_000)) as sim:
        command = [sys.executable, "-m", "windowfit.cli", "proxy", "--port", "0"]
        command += ["--anthropic-upstream", sim.url]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None
            found = re.search(r"http://127\.0\.0\.1:\d+", process.stdout.readline())
            assert found
            with httpx.Client(base_url=found.group(0), timeout=60) as client:
                before = 0
                for i in range(8):
                    if i == 3:  # after warming up: the heap has grown to what a request needs
                        before = _minor_faults(process.pid)
                    answer = client.post("/v1/messages", json=body)
                    assert answer.status_code == 200
                    assert answer.headers["x-windowfit-stage"] == "0"
                per_request = (_minor_faults(process.pid) - before) / 5
        finally:
            process.terminate()
            process.wait(timeout=15)
    assert per_request < 50, per_request
