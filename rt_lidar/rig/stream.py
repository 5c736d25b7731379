"""The live stream of a whole rig: one ZeroMQ publisher, every sensor's scans on it.

Each scan header carries ``sensor`` (the rig sensor's name, also its ``frame_id``), ``sensor_index``
(its place in the rig file, from 0), ``sensors`` (how many the rig has) and ``mount`` (``xyz`` in m
and ``rpy_deg``, vehicle frame, as in the rig file: a viewer places the sensor's points, which are
in the sensor's frame, on the vehicle with it) besides what the
``zmq`` sink's headers say (:mod:`rt_lidar.sinks.stream`); frames keep one ``seq`` per kind across
sensors, so a subscriber counts drops as it does for one sensor. The sensors' writer threads share
the socket through a lock (ZeroMQ sockets are not thread-safe).
"""

from __future__ import annotations

import threading
from typing import Any

from rt_lidar.rig.model import Rig
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.stream import StreamPublisher, ZmqStreamSink, scan_header_figures

__all__ = ["RigStream"]


class _SharedPublisher(StreamPublisher):
    def __init__(self, address: str, *, hwm: int, nodrop: bool) -> None:
        super().__init__(address, hwm=hwm, nodrop=nodrop)
        self._lock = threading.Lock()

    def publish(self, header: dict[str, Any], buffers: list[Any]) -> bool:
        with self._lock:
            return super().publish(header, buffers)


class RigStream:
    """One publisher for every sensor of ``rig``; :meth:`sink` gives each sensor its scan sink."""

    def __init__(self, address: str, rig: Rig, hwm: int | None = None, nodrop: bool = True) -> None:
        self.requested_address = address
        self.rig = rig
        self.hwm = hwm if hwm is not None else 2 * len(rig.sensors)
        self.nodrop = nodrop
        self.publisher: StreamPublisher | None = None

    @property
    def address(self) -> str:
        """The bound endpoint (after :meth:`open`)."""
        return self.publisher.address if self.publisher else self.requested_address

    def open(self) -> None:
        """Bind the socket (once: a stream opened beforehand, e.g. for a subscriber to join first,
        stays as it is)."""
        if self.publisher is not None:
            return
        self.publisher = _SharedPublisher(self.requested_address, hwm=self.hwm, nodrop=self.nodrop)

    def sink(self, name: str) -> ZmqStreamSink:
        """Sensor ``name``'s sink on the shared publisher."""
        return _RigStreamSink(self, name)

    def close(self) -> None:
        """Close the socket."""
        if self.publisher is not None:
            self.publisher.close()
            self.publisher = None


class _RigStreamSink(ZmqStreamSink):
    def __init__(self, stream: RigStream, name: str) -> None:
        super().__init__(stream.requested_address, hwm=stream.hwm, frame_id=name, nodrop=stream.nodrop)
        self._stream = stream
        self.sensor = name

    def open(self, context: SinkContext) -> None:
        if self._stream.publisher is None:
            raise RuntimeError("RigStream.open() before the sensors' sinks")
        self.publisher = self._stream.publisher
        self._context = context
        rig = self._stream.rig
        mount = rig.sensor(self.sensor).entry.mount
        self._static = {
            "frame_id": self.sensor,
            "sensor": self.sensor,
            "sensor_index": rig.names.index(self.sensor),
            "sensors": len(rig.sensors),
            "mount": {"xyz": [float(v) for v in mount.xyz], "rpy_deg": [float(v) for v in mount.rpy_deg]},
            "stamp_clock": context.stamp,
            **scan_header_figures(context.preset),
        }

    def close(self) -> None:
        self.publisher = None  # the rig's stream closes the shared socket
