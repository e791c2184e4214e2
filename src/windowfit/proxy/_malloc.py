"""Keeping freed memory in the proxy process, so that large bodies do not fault it in again.

A 200k-token request crosses the proxy as about 1 MB, and that megabyte is copied a few
times on its way (received, joined, parsed, sent on, relayed). glibc's ``malloc`` takes
blocks of that size from the top of its heap and, once they are freed, gives the top
back to the kernel as soon as more than its trim threshold is free there (by default
twice the largest block seen so far: a few MB). The next request then touches the same
memory as fresh pages, each one a page fault and a page the kernel zeroes: 500-660
minor faults per request in ``benchmarks/proxy.py``, about 2.5-3 ms of the proxy's CPU
per request, and about as much for a minimal pass-through proxy on the same stack
(``benchmarks/RESULTS.md``, "The floor").

:func:`keep_freed_memory` raises the two thresholds with ``mallopt``: blocks up to
32 MiB come from the heap, and up to ``max_bytes`` of freed memory at its top is kept
for the next request instead of being returned. The price: after a burst of large
requests the process's RSS stays up to ``max_bytes`` higher than it would, until the
heap is needed again. Called by ``windowfit proxy`` only (a process of its own); a
proxy started inside another program (``ProxyServer``) leaves that program's allocator
alone. Elsewhere than glibc (musl, macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import platform

__all__ = ["KEEP_FREED_BYTES", "keep_freed_memory"]

#: Freed memory ``windowfit proxy`` keeps by default: room for the copies of twenty 1 MB
#: requests in flight at once (concurrency 20 in the benchmark) and what parsing them makes.
KEEP_FREED_BYTES = 64 * 1024 * 1024

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc refuses an mmap threshold above half its largest heap (64 MiB on 64-bit).
_MAX_MMAP_THRESHOLD = 32 * 1024 * 1024


def keep_freed_memory(max_bytes: int = KEEP_FREED_BYTES) -> bool:
    """Keep up to ``max_bytes`` of freed memory in this process (module docstring);
    whether it was done (``False`` without glibc, or for ``max_bytes`` of 0)."""
    if max_bytes <= 0 or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    threshold = min(_MAX_MMAP_THRESHOLD, max(128 * 1024, max_bytes // 2))
    trim = min(max_bytes, 2**31 - 1)
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))
