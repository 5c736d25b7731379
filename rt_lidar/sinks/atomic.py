"""Writing files so that a reader never sees half of one: write to a temporary name, then rename."""

from __future__ import annotations

import ctypes
import functools
import os
import secrets
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


def _create_beside(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target`` (``.NAME.XXXXXXXX.part``), opened for writing, with the
    mode a plain ``open`` would give (0666 less the umask: 0644 under 022), not mkstemp's 0600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    while True:
        tmp = str(target.parent / f".{target.name}.{secrets.token_hex(4)}.part")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # a name another writer holds: draw again
            continue


@contextmanager
def atomic_write(path: str | Path, size_hint: int | None = None) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path`` for binary writing; on success it replaces ``path``.

    The file gets the mode ``open`` would give it (0666 less the umask). On an exception the temporary
    file is removed and ``path`` is left as it was. The rename makes the
    file appear whole to other processes and after a crash of ours; there is no fsync (a recording
    writes tens of files a second, and power loss is not what this guards against). The file's
    write-back starts at once and its pages leave the cache a little later (:mod:`.drop_behind`).
    ``size_hint``, the bytes the caller will write, reserves their blocks first (:func:`reserve_blocks`);
    blocks reserved beyond what was written are given back.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(target)
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
