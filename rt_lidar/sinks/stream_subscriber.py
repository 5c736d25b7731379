"""The live stream's receiving end: a SUB socket that keeps the newest frame of each kind, counts what
it missed, reconnects after silence and survives any message (:mod:`rt_lidar.sinks.stream_frames`)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import zmq

from rt_lidar.sinks.stream_frames import (
    DEFAULT_ADDRESS,
    DEFAULT_MAX_FRAME_BYTES,
    FrameError,
    StreamFrame,
    decode_frame,
    latest_key,
    part_buffer,
)

__all__ = ["StreamSubscriber", "SubscriberStats"]

_MAX_DRAIN = 512  # messages one poll reads at most, so a fast publisher cannot starve the GUI
_log = logging.getLogger(__name__)


@dataclass
class SubscriberStats:
    """What the subscriber saw: frames received, lost on the way (gaps in ``seq``), skipped (a newer
    frame of the same kind arrived in the same poll), publisher restarts and reconnects."""

    received: int = 0
    gaps: int = 0
    skipped: int = 0
    restarts: int = 0
    reconnects: int = 0
    bad: int = 0
    """Messages that were not valid frames, or over the size cap: counted and skipped."""
    last_bad: str = ""
    """Why the latest bad message was refused."""

    @property
    def dropped(self) -> int:
        """Frames the publisher numbered that were never shown: lost plus skipped."""
        return self.gaps + self.skipped


class StreamSubscriber:
    """A SUB socket that keeps only the newest frame of each kind (no CONFLATE: multipart frames and
    sequence numbers stay intact) and counts what it missed.

    ``background=True`` drains the socket in a reader thread, so a slow caller (a viewer busy drawing)
    still gets the newest frame instead of one that sat in the queues. With ``reconnect_after_s`` of
    silence the socket is closed and made anew, so a publisher that was restarted (or a stale TCP
    connection) is picked up again; a new ``session`` or a ``seq`` that goes backwards is taken as a
    publisher restart and not counted as a drop. A message that is not a valid frame, or larger than
    ``max_frame_bytes`` (``MAXMSGSIZE`` refuses a bigger part before it is buffered; a check of the
    whole message follows), is counted in ``stats.bad`` and skipped.
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        rcvhwm: int = 2,
        reconnect_after_s: float = 3.0,
        background: bool = False,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        context: zmq.Context | None = None,
    ) -> None:
        self.address = address
        self.max_frame_bytes = max_frame_bytes
        self.rcvhwm = rcvhwm
        self.reconnect_after_s = reconnect_after_s
        self._ctx = context or zmq.Context.instance()
        self._last_seq: dict[str, int] = {}
        self._session: str | None = None
        self.stats = SubscriberStats()
        self.last_frame_wall: float = time.monotonic()
        self._last_connect_wall: float = self.last_frame_wall
        self._latest: dict[str, StreamFrame] = {}
        self._lock = threading.Lock()
        self._want_reconnect = False
        self._stop = threading.Event()
        self._sock: zmq.Socket = self._connect()
        self._thread: threading.Thread | None = None
        if background:
            # a reader thread drains the socket all the time, so what poll() hands out is the newest
            # frame (not one that waited in the queues while the caller was busy drawing)
            self._thread = threading.Thread(target=self._run, name="stream-subscriber", daemon=True)
            self._thread.start()

    def _connect(self) -> zmq.Socket:
        sock = self._ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.RCVHWM, self.rcvhwm)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RECONNECT_IVL, 100)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 250)  # a publisher that comes (back) up: joined in 0.25 s
        sock.setsockopt(zmq.HEARTBEAT_IVL, 1000)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3000)
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_frame_bytes)  # per part: refused before it is buffered
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.connect(self.address)
        return sock

    def reconnect(self) -> None:
        """Drop the socket and connect a new one (the next reconnect waits another ``reconnect_after_s``)."""
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._want_reconnect = True
            return
        self._sock.close(linger=0)
        self._sock = self._connect()
        self.stats.reconnects += 1
        self._last_connect_wall = time.monotonic()

    @property
    def silent_s(self) -> float:
        """Seconds since the last frame arrived (a reconnect does not reset it: the stream is still
        silent, which is what a viewer shows as "waiting")."""
        return time.monotonic() - self.last_frame_wall

    @property
    def _since_activity_s(self) -> float:
        """Seconds since the last frame or the last (re)connect, whichever came later."""
        return time.monotonic() - max(self.last_frame_wall, self._last_connect_wall)

    def _account(self, frame: StreamFrame) -> None:
        kind, seq = frame.kind, frame.seq
        session = frame.header.get("session")
        if session != self._session:
            if self._session is not None:
                self.stats.restarts += 1
            self._session = session
            self._last_seq.clear()
        last = self._last_seq.get(kind)
        if last is not None:
            if seq > last:
                self.stats.gaps += seq - last - 1
            else:
                self.stats.restarts += 1
        self._last_seq[kind] = seq

    def _drain(self, timeout_ms: int) -> None:
        if self._want_reconnect:
            self._want_reconnect = False
            self.reconnect()
        got = False
        if self._sock.poll(timeout_ms, zmq.POLLIN):
            for _ in range(_MAX_DRAIN):
                try:
                    parts = self._sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                try:
                    frame = self._checked(parts)
                except FrameError as exc:  # counted and skipped; not activity of a working stream
                    with self._lock:
                        self.stats.bad += 1
                        self.stats.last_bad = str(exc)
                    continue
                got = True
                with self._lock:
                    self.stats.received += 1
                    self._account(frame)
                    key = latest_key(frame)
                    if key in self._latest:
                        self.stats.skipped += 1
                    self._latest[key] = frame
                    if key != frame.kind:  # a rig's scan: also the newest of its kind, not a skip
                        self._latest[frame.kind] = frame
        if got:
            self.last_frame_wall = time.monotonic()
        elif self.reconnect_after_s > 0 and self._since_activity_s > self.reconnect_after_s:
            self.reconnect()

    def _checked(self, parts: list[Any]) -> StreamFrame:
        size = sum(part_buffer(p).nbytes for p in parts)
        if size > self.max_frame_bytes:
            raise FrameError(f"a message of {size} bytes; the cap is {self.max_frame_bytes}")
        return decode_frame(parts)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._drain(50)
            except zmq.ContextTerminated:
                return
            except Exception as exc:  # the reader must outlive anything a peer can send
                _log.exception("stream reader: unexpected error, reconnecting")
                with self._lock:
                    self.stats.bad += 1
                    self.stats.last_bad = f"reader error: {exc!s:.80}"
                self._want_reconnect = True
                self._stop.wait(0.1)

    def poll(self, timeout_ms: int = 0) -> dict[str, StreamFrame]:
        """The newest frame of each kind that came since the last call (``{}`` when none), and for a
        rig's stream the newest scan of each sensor under ``scan/<sensor>`` (``"scan"`` is then the
        newest of any sensor; a sensor's older scan counts as skipped only when a newer one of the same
        sensor replaced it); without the
        reader thread, reads everything waiting first (waiting up to ``timeout_ms`` for a message)."""
        if self._thread is None:
            self._drain(timeout_ms)
        elif timeout_ms > 0 and not self._latest:
            self._stop.wait(timeout_ms / 1000.0)
        with self._lock:
            latest, self._latest = self._latest, {}
        return latest

    def close(self) -> None:
        """Stop the reader thread and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._sock.close(linger=0)

    def __enter__(self) -> StreamSubscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
