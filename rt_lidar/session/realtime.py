"""Process-wide settings for a frame loop that must keep real time.

Every frame allocates the same few megabyte-sized NumPy temporaries. glibc's malloc serves those
from fresh ``mmap`` pages and gives freed memory back to the system, so each frame pays page faults
for memory it had a moment ago (measured here: 10-15 % of an HDL-64E frame, and up to half of a
weather kernel's time). :func:`tune_allocator` keeps such blocks on the heap and freed memory in the
process, as real-time programs pre-fault and keep their memory. The CLI applies it at start.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

from rt_lidar.clib import libc_function

__all__ = [
    "MMAP_THRESHOLD_BYTES",
    "PRIORITIES",
    "TOP_PAD_BYTES",
    "TRIM_THRESHOLD_BYTES",
    "limit_malloc_arenas",
    "lower_priority",
    "tune_allocator",
]

# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -2, -3, -8
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's maximum on 64-bit: blocks below it come from the heap
TRIM_THRESHOLD_BYTES = 2**31 - 1  # never give freed heap memory back
TOP_PAD_BYTES = 64 * 1024 * 1024  # grow the heap in big steps

_applied: bool | None = None


def _mallopt() -> Any | None:
    return libc_function("mallopt", [ctypes.c_int, ctypes.c_int], ctypes.c_int)


def tune_allocator() -> bool:
    """Keep frame-sized temporaries on the heap and freed memory in the process (glibc ``mallopt``);
    returns whether it applied (False on other C libraries and platforms, where nothing changes).
    Idempotent."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    mallopt = _mallopt()
    if mallopt is None:
        return False
    done = [
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        mallopt(_M_TOP_PAD, TOP_PAD_BYTES),
    ]
    _applied = all(r == 1 for r in done)
    return _applied


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """At most ``arenas`` glibc malloc arenas in this process (``mallopt(M_ARENA_MAX)``); call it before
    threads start. A server with a thread per connection otherwise spreads freed buffers over up to
    8 x cores arenas, which :func:`tune_allocator` keeps: in a 60 s soak under attack ``serve``'s RSS
    rose to ~530 MiB without levelling off, and stayed at ~180-250 MiB with two arenas. Returns
    whether it applied (False off glibc)."""
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, int(arenas)) == 1)


PRIORITIES = ("idle", "nice", "normal")
"""How a process or thread yields the CPU to the frame loop: ``idle`` (Linux SCHED_IDLE: it runs only
on CPU time nothing else wants; elsewhere it falls back to ``nice``), ``nice`` (niceness + ``nice``),
or ``normal``. On two cores a nice-19 CPU hog still cost a 10 Hz HDL-64E publisher 20 % of its real-time
factor (the pipeline's threads lose the CPU at every wake-up); an idle-class one cost it little."""


def lower_priority(priority: str = "idle", nice: int = 10, pid: int | None = None) -> str:
    """Make every thread of process ``pid`` (None: this one) yield the CPU (:data:`PRIORITIES`); threads
    started later inherit it. Returns what was applied (``"idle"``, ``"nice+N"`` or ``"normal"``);
    where the OS refuses or lacks a class, nothing changes."""
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    if priority == "normal":
        return "normal"
    threads = _threads(pid)
    if priority == "idle" and hasattr(os, "SCHED_IDLE"):
        try:
            for tid in threads:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            return "idle"
        except OSError:
            pass
    if nice <= 0 or not hasattr(os, "setpriority"):
        return "normal"
    try:
        for tid in threads:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:
        return "normal"
    return f"nice+{nice}"


def _threads(pid: int | None) -> list[int]:
    """Thread ids of ``pid`` (Linux: the scheduler's calls act per thread), or just the process."""
    task = Path(f"/proc/{pid if pid is not None else 'self'}/task")
    try:
        return sorted(int(t.name) for t in task.iterdir())
    except OSError:
        return [pid if pid is not None else 0]
