"""Drop-behind writing: finished files start their write-back and leave the page cache once newer ones
follow, their bytes intact; a slow disk never holds up a writer; the environment switches it off."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.drop_behind import DropBehind, drop_behind

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def resident_pages(path: Path) -> int:
    """Pages of ``path`` in the page cache now (``mincore`` of a read-only mapping)."""
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            assert _libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
            return sum(v & 1 for v in vec)
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def _write(path: Path, nbytes: int, seed: int) -> bytes:
    data = np.random.default_rng(seed).integers(0, 255, nbytes, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    return data


def _drops_clean_pages_here(folder: Path) -> bool:
    """Whether this file system lets go of a file's clean cached pages (tmpfs keeps them: its pages
    are the file)."""
    probe = folder / "probe.bin"
    _write(probe, 1 << 20, 0)
    fd = os.open(probe, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return resident_pages(probe) == 0


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_older_files_leave_the_cache_and_read_back_whole(tmp_path: Path) -> None:
    if not _drops_clean_pages_here(tmp_path):
        pytest.skip(f"{tmp_path}'s file system keeps cached pages (tmpfs?): nothing to drop there")
    behind = DropBehind(keep_bytes=2 << 20)
    assert behind.active
    files = [tmp_path / f"{i}.bin" for i in range(4)]
    data = []
    behind.written(tmp_path / "gone.bin", 1 << 20)  # a file removed before its turn: passed over quietly
    for i, f in enumerate(files):
        data.append(_write(f, 1 << 20, i + 1))
        _fsync(f)  # on the disk already, as a file written a few scans ago is by its turn
        behind.written(f, 1 << 20)
        assert behind.settle()
    pages = (1 << 20) // mmap.PAGESIZE
    assert [resident_pages(f) for f in files] == [0, 0, pages, pages]  # beyond 2 MiB of newer files: gone
    assert behind.dropped == 2
    assert [f.read_bytes() for f in files] == data  # from the disk now, the same bytes


def test_a_busy_disk_never_holds_up_a_writer(tmp_path: Path) -> None:
    behind = DropBehind(max_backlog=2)
    release = threading.Event()
    handled: list[Path] = []

    def slow(path: Path, size: int) -> None:  # the write-back of a disk far slower than the writers
        release.wait(10)
        handled.append(path)

    behind._handle = slow  # type: ignore[method-assign]
    t = time.perf_counter()
    for i in range(6):
        behind.written(tmp_path / f"{i}.bin", 100)
    assert time.perf_counter() - t < 1.0
    assert not behind.settle(timeout=0.2)
    release.set()
    assert behind.settle()
    assert behind.skipped >= 3 and len(handled) + behind.skipped == 6


def test_atomic_write_hands_its_finished_file_over(tmp_path: Path) -> None:
    with atomic_write(tmp_path / "scan.bin") as fh:
        fh.write(b"x" * 5000)
    assert drop_behind.settle()
    assert (tmp_path / "scan.bin").read_bytes() == b"x" * 5000
    if drop_behind.active:  # the newest file of the process's one list
        assert drop_behind._files[-1] == (tmp_path / "scan.bin", 5000)


def test_the_environment_switches_it_off() -> None:
    code = "from rt_lidar.sinks.drop_behind import drop_behind; print(drop_behind.active)"
    env = {**os.environ, "RT_LIDAR_KEEP_PAGE_CACHE": "1"}
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    env.pop("RT_LIDAR_KEEP_PAGE_CACHE")
    on = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert (off.stdout.strip(), on.stdout.strip()) == ("False", "True")
