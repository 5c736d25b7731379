"""glibc malloc settings for a frame loop that must keep real time.

Every frame allocates the same few megabyte-sized NumPy temporaries. glibc's malloc serves those
from fresh ``mmap`` pages and gives freed memory back to the system, so each frame pays page faults
for memory it had a moment ago (measured here: 10-15 % of an HDL-64E frame, and up to half of a
weather kernel's time). :func:`tune_allocator` keeps such blocks on the heap and freed memory in the
process, and :func:`prefault_heap` touches a thread's memory before its first frame, as real-time
programs pre-fault and keep their memory. The CLI applies the first at start; the frame loop's
:meth:`~rt_lidar.pipeline.frame_loop.Pipeline.start` the second.
"""

from __future__ import annotations

import ctypes
from typing import Any

from rt_lidar.clib import libc_function

__all__ = [
    "MMAP_THRESHOLD_BYTES",
    "PREFAULT_CHUNK_BYTES",
    "TOP_PAD_BYTES",
    "TRIM_THRESHOLD_BYTES",
    "allocator_tuned",
    "limit_malloc_arenas",
    "prefault_heap",
    "tune_allocator",
]

# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -2, -3, -8
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's maximum on 64-bit: blocks below it come from the heap
TRIM_THRESHOLD_BYTES = 2**31 - 1  # never give freed heap memory back
TOP_PAD_BYTES = 64 * 1024 * 1024  # grow the heap in big steps
PREFAULT_CHUNK_BYTES = 4 * 1024 * 1024  # well below the mmap threshold: the blocks come from the arena

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


def allocator_tuned() -> bool:
    """Whether :func:`tune_allocator` has applied in this process."""
    return bool(_applied)


def prefault_heap(nbytes: int) -> int:
    """Touch ``nbytes`` of the calling thread's malloc arena and give them back to it, so the frames
    that follow find that memory mapped instead of faulting it in page by page (on this project's CI
    VM a page's first touch costs ~7.5 us: an HDL-64E frame's first cast took ~3,600 faults).
    Allocates and frees in blocks below the mmap threshold, which the arena keeps only once
    :func:`tune_allocator` has applied (the CLI's runs); before that, elsewhere, and for ``nbytes`` <= 0
    it does nothing. Returns the bytes touched."""
    if not _applied or nbytes <= 0:
        return 0
    malloc = libc_function("malloc", [ctypes.c_size_t], ctypes.c_void_p)
    free = libc_function("free", [ctypes.c_void_p], None)
    if malloc is None or free is None:
        return 0
    blocks: list[int] = []
    try:
        for _ in range(-(-int(nbytes) // PREFAULT_CHUNK_BYTES)):
            block = malloc(PREFAULT_CHUNK_BYTES)
            if not block:
                break
            blocks.append(block)
            ctypes.memset(block, 0, PREFAULT_CHUNK_BYTES)
    finally:
        for block in reversed(blocks):
            free(block)
    return len(blocks) * PREFAULT_CHUNK_BYTES


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """At most ``arenas`` glibc malloc arenas in this process (``mallopt(M_ARENA_MAX)``); call it before
    threads start. A server with a thread per connection otherwise spreads freed buffers over up to
    8 x cores arenas, which :func:`tune_allocator` keeps: in a 60 s soak under attack ``serve``'s RSS
    rose to ~530 MiB without levelling off, and stayed at ~180-250 MiB with two arenas. Returns
    whether it applied (False off glibc)."""
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, int(arenas)) == 1)
