"""Process-wide settings for a frame loop that must keep real time: the allocator's
(:mod:`rt_lidar.allocator`, re-exported here) and the priority of the processes beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from rt_lidar.allocator import (
    MMAP_THRESHOLD_BYTES,
    TOP_PAD_BYTES,
    TRIM_THRESHOLD_BYTES,
    limit_malloc_arenas,
    prefault_heap,
    tune_allocator,
)

__all__ = [
    "MMAP_THRESHOLD_BYTES",
    "PRIORITIES",
    "TOP_PAD_BYTES",
    "TRIM_THRESHOLD_BYTES",
    "limit_malloc_arenas",
    "lower_priority",
    "prefault_heap",
    "tune_allocator",
]


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
