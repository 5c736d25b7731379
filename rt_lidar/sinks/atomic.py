"""Writing files so that a reader never sees half of one: write to a temporary name, then rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from rt_lidar.sinks.drop_behind import drop_behind

__all__ = ["atomic_write"]


@contextmanager
def atomic_write(path: str | Path) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path`` for binary writing; on success it replaces ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was. The rename makes the
    file appear whole to other processes and after a crash of ours; there is no fsync (a recording
    writes tens of files a second, and power loss is not what this guards against). The file's
    write-back starts at once and its pages leave the cache a little later (:mod:`.drop_behind`).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            size = fh.tell()
        os.replace(tmp, target)
        drop_behind.written(target, size)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
