"""Writing files so that a reader never sees half of one: write to a temporary name, then rename."""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from rt_lidar.clib import libc_function
from rt_lidar.sinks.drop_behind import drop_behind

__all__ = ["atomic_write", "reserve_blocks"]


_FALLOC_FL_KEEP_SIZE = 1  # <linux/falloc.h>: allocate the blocks, leave the file's size as it is


@functools.cache
def _fallocate() -> Any | None:
    argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return libc_function("fallocate", argtypes, ctypes.c_int)


def reserve_blocks(fd: int, size: int) -> bool:
    """Allocate the disk blocks of a file about to get ``size`` bytes, its size left as it is
    (``fallocate(FALLOC_FL_KEEP_SIZE)``); returns whether the platform and filesystem did. Buffered writes
    into reserved blocks skip ext4's per-page delayed allocation: a 4.6 MB scan cost the CI VM ~15 %
    less CPU, write-back included (``docs/performance-notes.md``). Without it nothing changes."""
    fallocate = _fallocate()
    return fallocate is not None and size > 0 and fallocate(fd, _FALLOC_FL_KEEP_SIZE, 0, size) == 0


@contextmanager
def atomic_write(path: str | Path, size_hint: int | None = None) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path`` for binary writing; on success it replaces ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was. The rename makes the
    file appear whole to other processes and after a crash of ours; there is no fsync (a recording
    writes tens of files a second, and power loss is not what this guards against). The file's
    write-back starts at once and its pages leave the cache a little later (:mod:`.drop_behind`).
    ``size_hint``, the bytes the caller will write, reserves their blocks first (:func:`reserve_blocks`);
    blocks reserved beyond what was written are given back.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            reserved = size_hint is not None and reserve_blocks(fh.fileno(), size_hint)
            yield fh
            size = fh.tell()
            if reserved and size_hint is not None and size < size_hint:
                fh.flush()
                os.ftruncate(fh.fileno(), size)  # the reserved blocks past the end go back
        os.replace(tmp, target)
        drop_behind.written(target, size)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
