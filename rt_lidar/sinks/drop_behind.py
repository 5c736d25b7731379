"""Files written, then let go of: the page cache a recording leaves behind, kept small.

A recording writes tens of megabytes a second that nothing reads back soon. Left to the kernel, each
new file takes fresh page-cache pages and keeps them (their data reaches the disk only later, after
the run), so the cache grows by every scan. On a virtual machine whose memory the host backs lazily,
as CI's and cloud VMs do, a fresh page costs the first touch on the host too: writing a 6.6 MB HDL-64E
scan took 13-14 ms of the VM's CPU that way, against 4.5-5 ms when the pages came back from files
written a moment before (``docs/performance-notes.md``).

So every file an :func:`~rt_lidar.sinks.atomic.atomic_write` finishes starts its write-back at once
(``sync_file_range``, which does not wait for it, called from a background thread so that a busy disk
never holds up a writer), and once the files written after it hold more
than :data:`KEEP_BYTES`, its pages are dropped from the cache (``posix_fadvise(DONTNEED)``, which
drops only pages already on disk; dirty ones stay until the kernel writes them). Those freed pages
take the next files. Nothing changes in what is written, and the files read back the same (from the
disk instead of the cache). Off with ``RT_LIDAR_KEEP_PAGE_CACHE=1`` in the environment, and where the
platform lacks either call.
"""

from __future__ import annotations

import collections
import ctypes
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rt_lidar.clib import libc_function

__all__ = ["KEEP_BYTES", "DropBehind", "drop_behind"]

KEEP_BYTES = 48 << 20
"""Bytes of recently written files left in the page cache (their write-back is still under way)."""

_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start write-out of the range's dirty pages, do not wait


def _sync_file_range() -> Any | None:
    if not hasattr(os, "posix_fadvise"):
        return None
    argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return libc_function("sync_file_range", argtypes, ctypes.c_int)


class DropBehind:
    """Files of this process written lately, handled by one background thread (so a busy disk never
    holds up a writer): each :meth:`written` file starts its write-back, and the oldest files beyond
    ``keep_bytes`` leave the cache. A backlog of more than ``max_backlog`` files (a disk far slower
    than the writers) is skipped: those files stay to the kernel, as without this."""

    def __init__(self, keep_bytes: int = KEEP_BYTES, enabled: bool = True, max_backlog: int = 64) -> None:
        self.keep_bytes = keep_bytes
        self._start_writeback = _sync_file_range() if enabled else None
        self._todo: queue.Queue[tuple[Path, int]] = queue.Queue(maxsize=max_backlog)
        self._files: collections.deque[tuple[Path, int]] = collections.deque()
        self._held = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.dropped = 0
        """Files whose cached pages were let go of."""
        self.skipped = 0
        """Files left to the kernel because the backlog was full."""

    @property
    def active(self) -> bool:
        """Whether files are written back early and dropped (Linux with both calls, not switched off)."""
        return self._start_writeback is not None

    def written(self, path: Path, size: int) -> None:
        """``path`` (``size`` bytes) was written and closed: start its write-back soon and let go of
        its pages once :attr:`keep_bytes` of newer files follow it. Never blocks."""
        if self._start_writeback is None or size <= 0:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rt-lidar-drop-behind", daemon=True)
                self._thread.start()
        try:
            self._todo.put_nowait((path, size))
        except queue.Full:
            self.skipped += 1

    def settle(self, timeout: float = 5.0) -> bool:
        """Wait until every file handed over so far is handled (tests); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._todo.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def _run(self) -> None:
        while True:
            path, size = self._todo.get()
            try:
                self._handle(path, size)
            finally:
                self._todo.task_done()

    def _handle(self, path: Path, size: int) -> None:
        start = self._start_writeback
        assert start is not None
        _on_file(path, lambda fd: start(fd, 0, 0, _SYNC_FILE_RANGE_WRITE))  # a failure: left to the kernel
        self._files.append((path, size))
        self._held += size
        while self._held > self.keep_bytes and len(self._files) > 1:
            old, n = self._files.popleft()
            self._held -= n
            if _on_file(old, lambda fd: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)):
                self.dropped += 1


def _on_file(path: Path, call: Callable[[int], object]) -> bool:
    """``call`` on a read-only descriptor of ``path``; False when the file is gone or refuses (replaced
    or removed since it was written: nothing of ours to act on)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        call(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


drop_behind = DropBehind(enabled=not os.environ.get("RT_LIDAR_KEEP_PAGE_CACHE"))
"""The process's one list (every sink's files share the cache)."""
