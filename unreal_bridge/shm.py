"""The same-host fast path of the extension call: per-ray fields through shared-memory segments.

When client and server share a host, the bulk of an ``rtLidarGetHits`` answer (the per-ray fields, ~87
bytes a ray) need not go through msgpack and the loopback socket. The client owns a ring of segments,
files in ``/dev/shm`` named ``rtlidar-shm-<pid>-<16 hex>``, and offers one in the ``beam`` argument of
``rtLidarGetBeamHits`` (``"transport": {"shm": name, "token": hex, "size": bytes}``; a beam with only
that entry asks for the plain one-ray-a-pulse cast of ``rtLidarGetHits``). A server that can open the
segment, finds the offer's random token in its header and has room writes every field's bytes into it
and answers with ``{"dtype", "shape", "shm": [offset, nbytes]}`` in place of ``"data"``; otherwise it
answers inline over TCP and says why in ``shm_refused`` (``shm_needed``: the size that would fit). A
remote server cannot see the segment, so the token check keeps TCP wherever the hosts differ. The
bytes are the ones the TCP answer carries, so the decoded arrays are identical either way.

The ring: every request in flight offers a segment of its own, lent from the client's ring until its
answer has been decoded (decoding copies the fields out), so a controller that asks frames ahead has
one segment a frame in flight (at most :data:`MAX_RING_SEGMENTS`) and the server writes several
answers of one connection at once, each into its own segment. A segment whose request was lost with
its connection is never offered again (the server may still be writing it); a server refuses a
segment an answer of its is still writing (:meth:`ShmAttachments.attach`).

No segment outlives its owner: the client holds an exclusive ``flock`` on each segment for as long as
it lives and unlinks it on :meth:`ShmSegment.close` (and at exit); the kernel drops the lock when the
process dies, however it dies. :func:`cleanup_stale` unlinks every segment of ours whose lock is free:
clients run it before creating a segment and the server whenever a connection closes, so a killed
client's segments go as soon as the server sees its socket close. The server never creates segments,
so killing it leaks nothing; it maps a client's segment only while the file exists (one it is writing
stays mapped until that answer is written).

The server writes into the client's file; it opens only names of this exact form in ``/dev/shm``, owned
by its own user, of the size offered, and never beyond it. It keeps at most :data:`MAX_RING_SEGMENTS`
segments of one owner and :data:`MAX_MAPPED_SEGMENTS` in all mapped (least recently used dropped).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import re
import secrets
import stat
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.platform != "win32":  # POSIX only; elsewhere shm_available() is False and TCP carries everything
    import fcntl

__all__ = [
    "HEADER_BYTES",
    "MAX_MAPPED_SEGMENTS",
    "MAX_RING_SEGMENTS",
    "MAX_SEGMENT_BYTES",
    "SHM_DIR",
    "SHM_PREFIX",
    "ShmAttachments",
    "ShmRefused",
    "ShmSegment",
    "ShmTarget",
    "cleanup_stale",
    "list_segments",
    "needed_bytes",
    "shm_available",
]

SHM_DIR = Path("/dev/shm")
"""Where segments live (POSIX shared memory on Linux)."""
SHM_PREFIX = "rtlidar-shm-"
"""Every segment's name starts so: ``rtlidar-shm-<owner pid>-<16 hex>``."""
_NAME = re.compile(r"rtlidar-shm-(\d{1,10})-([0-9a-f]{16})")
_MAGIC = b"RTLSHM01"
HEADER_BYTES = 64
"""The segment's header: magic (8 bytes), the offer's token (16 bytes), reserved; fields start here."""
_ALIGN = 64
MIN_SEGMENT_BYTES = 1 << 20
MAX_SEGMENT_BYTES = 1 << 31
"""Largest segment a client creates or a server maps (2 GiB)."""
MAX_RING_SEGMENTS = 9
"""Most segments one client's ring lends at once (a frame being read and up to 8 asked ahead); a
server keeps as many of one owner mapped."""
MAX_MAPPED_SEGMENTS = 32
"""Most client segments a server keeps mapped in all (those it is writing stay until written)."""
RECHECK_S = 0.5
"""After a connection closes, the server looks for stale segments now and again this much later."""


class ShmRefused(Exception):
    """A server cannot use an offered segment (the reason is sent back as ``shm_refused``)."""


def shm_available(directory: Path = SHM_DIR) -> bool:
    """True when ``directory`` exists and this process may create files in it (POSIX only)."""
    return sys.platform != "win32" and directory.is_dir() and os.access(directory, os.W_OK | os.X_OK)


def list_segments(directory: Path = SHM_DIR, pid: int | None = None) -> list[str]:
    """Names of our segments in ``directory`` (only those of owner ``pid`` when given)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in names:
        m = _NAME.fullmatch(name)
        if m and (pid is None or int(m.group(1)) == pid):
            found.append(name)
    return sorted(found)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale(directory: Path = SHM_DIR) -> list[str]:
    """Unlink our segments whose owner is gone; return their names.

    A segment is stale when nobody holds its lock (the kernel released the owner's when the owner's
    process ended) and it is not being created right now: its size is set (the owner locks before it
    sizes the file), or its owner pid no longer exists.
    """
    removed = []
    for name in list_segments(directory):
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its owner holds it: alive
            m = _NAME.fullmatch(name)
            owner = int(m.group(1)) if m else 0
            if os.fstat(fd).st_size == 0 and _pid_alive(owner):
                continue  # being created: locked and sized in a moment
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(name)
        finally:
            os.close(fd)
    return removed


def _finalize(path: Path, mm: mmap.mmap, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(BufferError, ValueError):
        mm.close()
    with contextlib.suppress(OSError):
        os.close(fd)


class ShmSegment:
    """The client's segment: created, locked and owned by this process, unlinked by :meth:`close`."""

    def __init__(self, size: int, directory: Path = SHM_DIR) -> None:
        size = max(MIN_SEGMENT_BYTES, min(int(size), MAX_SEGMENT_BYTES))
        cleanup_stale(directory)
        self.name = f"{SHM_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
        self.path = directory / self.name
        self.size = size
        self.token = secrets.token_bytes(16)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until this process closes it or dies
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(fd)
            raise
        mm[: len(_MAGIC) + 16] = _MAGIC + self.token
        self._mm = mm
        self._fd = fd
        self._finalizer = weakref.finalize(self, _finalize, self.path, mm, fd)

    def offer(self) -> dict[str, Any]:
        """The ``transport`` entry of a request offering this segment."""
        return {"shm": self.name, "token": self.token.hex(), "size": self.size}

    def read(self, offset: int, nbytes: int) -> bytes:
        """A copy of ``nbytes`` at ``offset`` (checked to lie within the data area)."""
        if not (isinstance(offset, int) and isinstance(nbytes, int)):
            raise ValueError("shm field offsets must be integers")
        if offset < HEADER_BYTES or nbytes < 0 or offset + nbytes > self.size:
            raise ValueError(f"shm field [{offset}, +{nbytes}) outside the segment's {self.size} bytes")
        return self._mm[offset : offset + nbytes]

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Unlink the segment and unmap it."""
        self._finalizer()


class ShmTarget:
    """Where a server writes one answer's fields: a mapped client segment, from its data area on.

    Each answer has its own target (its own write position); :meth:`release` says the answer is
    written, so the mapping may be dropped or the segment offered to another answer."""

    def __init__(self, name: str, mm: mmap.mmap, on_release: Callable[[], None] | None = None) -> None:
        self.name = name
        self._mm = mm
        self._used = HEADER_BYTES
        self._on_release = on_release

    @property
    def capacity(self) -> int:
        """Bytes of the data area."""
        return len(self._mm) - HEADER_BYTES

    def reset(self) -> None:
        """Start a new answer at the start of the data area."""
        self._used = HEADER_BYTES

    def write(self, data: Any) -> list[int]:
        """Copy a C-contiguous buffer in (64-byte aligned); return its ``[offset, nbytes]``."""
        view = memoryview(data)
        offset = self._used
        if view.nbytes == 0:
            return [offset, 0]
        view = view.cast("B")
        end = offset + view.nbytes
        if end > len(self._mm):
            raise ShmRefused(f"segment of {len(self._mm)} bytes too small")
        self._mm[offset:end] = view
        self._used = -(-end // _ALIGN) * _ALIGN
        return [offset, view.nbytes]

    def release(self) -> None:
        """The answer is written (or given up): done with the segment (a second call does nothing)."""
        on_release, self._on_release = self._on_release, None
        if on_release is not None:
            on_release()


def needed_bytes(sizes: list[int]) -> int:
    """Segment size that holds fields of ``sizes`` bytes as :meth:`ShmTarget.write` lays them out."""
    used = HEADER_BYTES
    for n in sizes:
        used = -(-(used + n) // _ALIGN) * _ALIGN
    return used


@dataclass(eq=False)
class _Mapped:
    """A mapped client segment: its file's inode, the mapping, the answers writing it now."""

    ino: int
    mm: mmap.mmap
    name: str = ""
    users: int = 0
    dropped: bool = False
    """Out of the table: unmapped once the last answer writing it is done."""


def _owner(name: str) -> str:
    return name[len(SHM_PREFIX) :].split("-", 1)[0]


class ShmAttachments:
    """The server's mapped client segments: at most ``max_per_owner`` of one owner process and
    ``max_segments`` in all, least recently used dropped (one that an answer is writing is unmapped
    once it is written). Thread-safe: answers of one or several connections attach at once, each
    writing its own segment."""

    def __init__(
        self,
        directory: Path = SHM_DIR,
        max_segments: int = MAX_MAPPED_SEGMENTS,
        max_per_owner: int = MAX_RING_SEGMENTS,
    ) -> None:
        self.directory = directory
        self.max_segments = max_segments
        self.max_per_owner = max_per_owner
        self._maps: dict[str, _Mapped] = {}  # name -> mapping, least recently used first
        self._writing: list[_Mapped] = []  # dropped from the table while an answer writes them
        self._lock = threading.Lock()

    def attach(self, offer: Any) -> ShmTarget:
        """The target an offer names, to :meth:`ShmTarget.release` once the answer is written; raises
        :class:`ShmRefused` saying why it cannot be used (also while another answer writes it)."""
        name, token, size = _checked_offer(offer)
        path = self.directory / name
        with self._lock:
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                self._drop(name)
                raise ShmRefused("no such segment on this host") from None
            entry = self._maps.get(name)
            if entry is not None and entry.ino != st.st_ino:
                self._drop(name)
                entry = None
            if entry is None:
                if any(w.name == name and w.ino == st.st_ino for w in self._writing):
                    raise ShmRefused("segment in use by another answer")  # dropped while written
                entry = self._add(name, path, st, size)
            else:
                self._maps[name] = self._maps.pop(name)  # most recently used last
            if len(entry.mm) != size or entry.mm[: len(_MAGIC) + 16] != _MAGIC + bytes.fromhex(token):
                raise ShmRefused("token mismatch (not this host's segment)")
            if entry.users:
                raise ShmRefused("segment in use by another answer")
            entry.users += 1
            return ShmTarget(name, entry.mm, lambda: self._release(entry))

    def _add(self, name: str, path: Path, st: os.stat_result, size: int) -> _Mapped:
        """Map a segment not in the table, after dropping the mappings of files gone and making room."""
        mm = self._map(path, st, size)
        self._drop_gone()
        entry = self._maps[name] = _Mapped(st.st_ino, mm, name)
        owner = _owner(name)
        mine = [n for n in self._maps if _owner(n) == owner]
        for old in mine[: max(0, len(mine) - self.max_per_owner)]:
            self._drop(old)
        while len(self._maps) > self.max_segments:
            self._drop(next(iter(self._maps)))
        return entry

    def _release(self, entry: _Mapped) -> None:
        with self._lock:
            entry.users -= 1
            if entry.dropped and not entry.users and entry in self._writing:  # (not after close)
                self._writing.remove(entry)
                _unmap(entry.mm)

    def _map(self, path: Path, st: os.stat_result, size: int) -> mmap.mmap:
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ShmRefused("not a regular file of this user")
        if st.st_size != size:
            raise ShmRefused(f"segment is {st.st_size} bytes, offered {size}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise ShmRefused(f"cannot open: {errno.errorcode.get(exc.errno or 0, exc)}") from None
        try:
            return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError) as exc:
            raise ShmRefused(f"cannot map: {exc}") from None
        finally:
            os.close(fd)

    def _drop(self, name: str) -> None:
        """Take ``name`` out of the table; unmap it now, or once the answers writing it are done."""
        entry = self._maps.pop(name, None)
        if entry is None:
            return
        if entry.users:
            entry.dropped = True
            self._writing.append(entry)
        else:
            _unmap(entry.mm)

    def _drop_gone(self) -> None:
        """Drop the mappings whose file is gone or replaced (called under the lock)."""
        for name, entry in list(self._maps.items()):
            try:
                alive = os.stat(self.directory / name, follow_symlinks=False).st_ino == entry.ino
            except OSError:
                alive = False
            if not alive:
                self._drop(name)

    def on_disconnect(self) -> None:
        """A connection closed: :meth:`forget_gone` now and once more a moment later (a killed client's
        socket may close a little before the kernel drops the lock on its segment)."""
        self.forget_gone()
        timer = threading.Timer(RECHECK_S, self.forget_gone)
        timer.daemon = True
        timer.start()

    def forget_gone(self) -> None:
        """Unlink stale segments and unmap those whose file is gone."""
        cleanup_stale(self.directory)
        with self._lock:
            self._drop_gone()

    @property
    def mapped(self) -> int:
        """Segments mapped now (those in the table and those dropped while an answer writes them)."""
        with self._lock:
            return len(self._maps) + len(self._writing)

    def close(self) -> None:
        """Unmap every segment (the server is closing: an answer still writing one fails)."""
        with self._lock:
            entries = [*self._maps.values(), *self._writing]
            self._maps.clear()
            self._writing.clear()
        for entry in entries:
            _unmap(entry.mm)


def _unmap(mm: mmap.mmap) -> None:
    with contextlib.suppress(BufferError, ValueError):
        mm.close()


def _checked_offer(offer: Any) -> tuple[str, str, int]:
    """An offer's ``(name, token, size)``; :class:`ShmRefused` when it is not well formed."""
    if not isinstance(offer, Mapping):
        raise ShmRefused("transport must be a map")
    name, token, size = offer.get("shm"), offer.get("token"), offer.get("size")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ShmRefused("not a segment name of ours")
    if not isinstance(token, str) or not re.fullmatch(r"[0-9a-f]{32}", token):
        raise ShmRefused("bad token")
    if not isinstance(size, int) or not HEADER_BYTES < size <= MAX_SEGMENT_BYTES:
        raise ShmRefused("bad size")
    return name, token, size
