"""Answers worked out after the call: a handler's :class:`Later`, and a connection's :class:`Outbox`.

A lockstep client that asks a frame ahead sends ``simContinueForTime`` and ``rtLidarGetHits`` for
frame k+1 while frame k's cast is still owed. Run one request at a time, the server would cast k+1
only after k's answer was out, and its serving thread alone would carry the interpreter's share of
every cast. A handler that returns :class:`Later` has done, under the call lock, what the call's
place in the request order decides (the embedded sim's ``prepare_lidar_hits``: the interval, the
frozen world); the rest (the cast and its encoding) runs on a worker thread while the connection
reads and runs its next requests. The answers still go out in the order of the requests
(msgpack-RPC over one connection, as rpclib does it): the :class:`Outbox` holds the answers owed, and
sends each as soon as those before it have gone.

Bounds: a connection has at most :data:`CONNECTION_DEPTH` answers worked on at once and holds at
most :data:`CONNECTION_HELD` answers not yet sent (it runs no further request until the oldest is
out), and the whole server works on at most :data:`SERVER_DEPTH` at once; beyond that a
:class:`Later` runs in the connection's own thread, as a call always did. So a client that floods
requests costs no more threads, and no more memory than a few answers, than before. A client that
stops sending still gets every answer it is owed.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .rpc import Packed

__all__ = ["CONNECTION_DEPTH", "CONNECTION_HELD", "SERVER_DEPTH", "Later", "Outbox", "Workers"]

CONNECTION_DEPTH = 2
"""Answers of one connection worked on at once while it reads its next requests."""
CONNECTION_HELD = 4
"""Answers one connection may hold unsent (worked on, or ready behind one that is)."""
SERVER_DEPTH = 4
"""Answers the whole server works on outside the connections' own threads."""


class Later:
    """A handler's answer still to be worked out: ``work()`` gives the result (or raises, as the
    handler would have). The server runs it on a worker thread when it may, else at once."""

    __slots__ = ("work",)

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work


class Workers:
    """The server's worker threads for :class:`Later` answers, at most :data:`SERVER_DEPTH` busy."""

    def __init__(self, depth: int = SERVER_DEPTH) -> None:
        self._slots = threading.BoundedSemaphore(depth)
        self._depth = depth
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def try_submit(self, fn: Callable[[], Packed]) -> Future[Packed] | None:
        """``fn`` on a worker thread, or None when every slot is taken (the caller runs it itself)."""
        if not self._slots.acquire(blocking=False):
            return None
        with self._lock:
            if self._closed:
                self._slots.release()
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._depth, thread_name_prefix="rpc-later")
            pool = self._pool

        def run() -> Packed:
            try:
                return fn()
            finally:
                self._slots.release()

        try:
            return pool.submit(run)
        except RuntimeError:  # shut down meanwhile
            self._slots.release()
            return None

    def close(self) -> None:
        """Stop the threads: answers not started are dropped, those being worked on finish on their
        own (the server is closing: nobody waits for them)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


class Outbox:
    """One connection's answers in the order of its requests: packed ones, and ones being worked on
    (futures whose result is the packed answer; they never raise)."""

    def __init__(self) -> None:
        self._items: deque[Packed | Future[Packed]] = deque()
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._closed = False
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, answer: Packed | Future[Packed]) -> None:
        """Owe ``answer`` after every answer added before it."""
        if isinstance(answer, Future):
            answer.add_done_callback(self._ring)
        self._items.append(answer)

    def owed(self) -> int:
        """Answers still being worked on."""
        return sum(1 for a in self._items if isinstance(a, Future) and not a.done())

    def ready(self) -> list[Packed]:
        """The answers at the head that are ready, taken out in order."""
        out: list[Packed] = []
        items = self._items
        while items:
            head = items[0]
            if isinstance(head, Future):
                if not head.done():
                    break
                out.append(head.result())
            else:
                out.append(head)
            items.popleft()
        return out

    def wait_oldest(self) -> None:
        """Block until the oldest answer being worked on is ready."""
        for a in self._items:
            if isinstance(a, Future) and not a.done():
                a.result()
                return

    def wait(self, conn: socket.socket, timeout_s: float) -> bool:
        """Block until ``conn`` has input (True) or an answer being worked on is ready, or
        ``timeout_s`` passed (False)."""
        wake = self._wake_pair()
        if wake is None:  # no descriptors left for the wake-up pair: wait for the oldest answer
            self.wait_oldest()
            return False
        if self._head_ready():  # (done before the pair was there to ring)
            return False
        poller = select.poll()  # (select.select cannot take descriptors past FD_SETSIZE)
        poller.register(conn, select.POLLIN)
        poller.register(wake[0], select.POLLIN)
        ready = {fd for fd, _event in poller.poll(max(0.0, timeout_s) * 1000.0)}
        if wake[0].fileno() in ready:
            with contextlib.suppress(OSError):
                wake[0].recv(4096)
        return conn.fileno() in ready  # input, or the peer gone (the read then says so)

    def _head_ready(self) -> bool:
        head = self._items[0] if self._items else None
        return head is not None and (not isinstance(head, Future) or head.done())

    def close(self) -> None:
        """Forget the answers still owed (the connection is gone) and free the wake-up pair."""
        with self._lock:
            self._closed = True
            wake, self._wake = self._wake, None
        self._items.clear()
        if wake is not None:
            for s in wake:
                s.close()

    def _wake_pair(self) -> tuple[socket.socket, socket.socket] | None:
        with self._lock:
            if self._wake is None and not self._closed:
                try:
                    r, w = socket.socketpair()
                except OSError:
                    return None
                r.setblocking(False)
                w.setblocking(False)
                self._wake = (r, w)
            return self._wake

    def _ring(self, _done: Future[Packed]) -> None:
        with self._lock:
            wake = self._wake
            if wake is None:
                return
            with contextlib.suppress(OSError):  # a full pair already rings; a closed one is gone
                wake[1].send(b"x")
