"""Feeding several sinks from the frame loop without making it wait for disk.

:class:`SinkFanout` hands each finished scan to a writer thread through a bounded queue; the thread
calls every sink in turn. File writers mostly run outside the GIL (NumPy copies, ``write``), so the
next sim frame is computed while the last scan is being written. A full queue makes the loop wait
(recordings must not lose scans); sinks that must never block (streams, packets) drop on their own.
An exception in a sink is re-raised in the loop at the next call, naming the sink.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.errors import RtLidarError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sinks.base import ScanSink, SinkContext

__all__ = ["SinkError", "SinkFanout"]

_STOP = object()


@dataclass
class _Sector:
    points: np.ndarray
    t0_ns: int
    t1_ns: int


@dataclass
class _SensedItem:
    sensed: Any


class SinkError(RtLidarError):
    """A sink failed while writing a scan."""


class SinkFanout:
    """All of a run's sinks behind one ``open / write / close``, written from a background thread."""

    def __init__(self, sinks: Sequence[ScanSink], queue_size: int = 4, background: bool = True) -> None:
        self.sinks = list(sinks)
        self.background = background
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max(1, queue_size))
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.written = 0

    def open(self, context: SinkContext) -> None:
        """Open every sink, then start the writer thread. If one fails to open, the ones opened before
        it are closed again (so nothing is left half written) and the error is raised."""
        opened: list[ScanSink] = []
        try:
            for sink in self.sinks:
                sink.open(context)
                opened.append(sink)
        except BaseException:
            for sink in opened:
                with contextlib.suppress(Exception):
                    sink.close()
            raise
        if self.background:
            self._thread = threading.Thread(target=self._run, name="rt-lidar-sinks", daemon=True)
            self._thread.start()

    @property
    def wants_sectors(self) -> bool:
        """True when a sink also takes each sim frame's sector (``write_sector``)."""
        return any(getattr(s, "wants_sectors", False) for s in self.sinks)

    def write_sector(self, points: np.ndarray, t0_ns: int, t1_ns: int) -> None:
        """Queue one sim frame's points for the sinks that want sectors (a copy: the sweep goes on
        to reuse the array)."""
        self._raise_pending()
        item = _Sector(points.copy(), int(t0_ns), int(t1_ns))
        if self._thread is None:
            self._write_sector(item)
        else:
            self._queue.put(item)

    def _write_sector(self, item: _Sector) -> None:
        for sink in self.sinks:
            if getattr(sink, "wants_sectors", False):
                try:
                    sink.write_sector(item.points, item.t0_ns, item.t1_ns)  # type: ignore[attr-defined]
                except Exception as exc:
                    raise SinkError(f"sink {type(sink).__name__} failed on a sector: {exc}") from exc

    @property
    def wants_sensed(self) -> bool:
        """True when a sink also takes each sim frame's hits and physics (``write_sensed``)."""
        return any(getattr(s, "wants_sensed", False) for s in self.sinks)

    def attach(self, pipeline: Any) -> None:
        """Show the sinks that want each frame's hits the pipeline they come from (before its first
        frame: such a sink may ask its source for more, e.g. the surface normals)."""
        for sink in self.sinks:
            if getattr(sink, "wants_sensed", False):
                sink.attach(pipeline)  # type: ignore[attr-defined]

    def write_sensed(self, sensed: Any) -> None:
        """Queue one sim frame's hits and physics result for the sinks that want them (neither is
        changed after the frame is committed)."""
        self._raise_pending()
        if self._thread is None:
            self._write_sensed(sensed)
        else:
            self._queue.put(_SensedItem(sensed))

    def _write_sensed(self, sensed: Any) -> None:
        for sink in self.sinks:
            if getattr(sink, "wants_sensed", False):
                try:
                    sink.write_sensed(sensed)  # type: ignore[attr-defined]
                except Exception as exc:
                    raise SinkError(f"sink {type(sink).__name__} failed on a frame: {exc}") from exc

    def write(self, scan: Scan) -> None:
        """Queue ``scan`` for every sink (waits while the queue is full)."""
        self._raise_pending()
        if self._thread is None:
            self._write_all(scan)
        else:
            self._queue.put(scan)

    def close(self) -> None:
        """Write what is queued, stop the thread, close every sink (each one, even when another fails
        to close); re-raise a sink's error."""
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None
        failed: BaseException | None = None
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                failed = failed or SinkError(f"sink {type(sink).__name__} failed to close: {exc}")
                failed.__cause__ = failed.__cause__ or exc
        self._raise_pending()
        if failed is not None:
            raise failed

    def _write_all(self, scan: Scan) -> None:
        for sink in self.sinks:
            try:
                sink.write(scan)
            except Exception as exc:
                raise SinkError(f"sink {type(sink).__name__} failed on scan {scan.index}: {exc}") from exc
        self.written += 1

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self._error is not None:
                continue  # keep draining so the producer never blocks forever
            try:
                if isinstance(item, _Sector):
                    self._write_sector(item)
                    continue
                if isinstance(item, _SensedItem):
                    self._write_sensed(item.sensed)
                    continue
                assert isinstance(item, Scan)
                self._write_all(item)
            except BaseException as exc:
                self._error = exc

    def _raise_pending(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err
