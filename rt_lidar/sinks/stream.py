"""The live stream: scans (and camera frames) on a ZeroMQ PUB socket that never blocks the simulation.

This module is the publishing end (:class:`StreamPublisher`, the ``zmq`` sink :class:`ZmqStreamSink`).
The wire format, its limits and the decoder of a received frame are in
:mod:`rt_lidar.sinks.stream_frames`, the subscriber in :mod:`rt_lidar.sinks.stream_subscriber`; both are
importable from here too.

The publisher sends with ``NOBLOCK`` on an XPUB socket with a small high-water mark: a slow or absent
subscriber loses frames, the simulation never waits. Both sides count the drops: the publisher the
frames its subscriber's full queue made it drop (``XPUB_NODROP``, while there is one subscriber), the
subscriber the same frames as gaps in ``seq``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import azimuth_span_deg, firings_per_scan
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.stream_frames import (
    DEFAULT_ADDRESS,
    DEFAULT_MAX_FRAME_BYTES,
    MAX_HEADER_BYTES,
    STREAM_VERSION,
    FrameError,
    StreamFrame,
    decode_frame,
    latest_key,
)
from rt_lidar.sinks.stream_subscriber import StreamSubscriber, SubscriberStats

__all__ = [
    "CLOSE_LINGER_MS",
    "DEFAULT_ADDRESS",
    "DEFAULT_MAX_FRAME_BYTES",
    "MAX_HEADER_BYTES",
    "STREAM_VERSION",
    "FrameError",
    "PublisherStats",
    "StreamFrame",
    "StreamPublisher",
    "StreamSubscriber",
    "SubscriberStats",
    "ZmqStreamSink",
    "decode_frame",
    "latest_key",
    "scan_header_figures",
]


@dataclass
class PublisherStats:
    """What the publisher did: frames handed to ZeroMQ, frames it had to drop because a subscriber's
    queue was full, frames published while nobody subscribed, and time spent sending."""

    sent: int = 0
    dropped: int = 0
    unheard: int = 0
    """Frames sent while no subscriber was connected (counted in :attr:`sent` too)."""
    publish_s_total: float = 0.0
    publish_s_max: float = 0.0

    @property
    def publish_ms_mean(self) -> float:
        """Mean wall time of one publish call, ms."""
        n = self.sent + self.dropped
        return 1e3 * self.publish_s_total / n if n else 0.0


CLOSE_LINGER_MS = 250
"""How long closing a publisher waits, at most, for its queued frames to reach their subscribers."""


class StreamPublisher:
    """A bound XPUB socket that publishes numbered frames without ever blocking.

    With one subscriber (a viewer: the usual case), a frame its queue (``hwm`` frames, then the TCP
    buffers) cannot take is dropped by the publisher and counted (``XPUB_NODROP``): the subscriber sees
    it as a gap in ``seq``, so both sides count the same drops. With several, each loses frames on its
    own (a plain PUB socket's way), so none can hold up the others, and only the subscribers can count;
    ``nodrop=False`` always does so. The subscriptions that arrive on the socket tell the publisher how
    many subscribers it has.

    ``address`` may end in ``:*`` (or ``:0``) to bind a free port; :attr:`address` is then the real one.
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        hwm: int = 2,
        nodrop: bool = True,
        context: zmq.Context | None = None,
    ):
        if hwm < 1:
            raise ValueError(f"stream hwm must be >= 1, got {hwm}")
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.XPUB)
        self._sock.setsockopt(zmq.SNDHWM, hwm)
        self._sock.setsockopt(zmq.LINGER, 0)
        self.nodrop = nodrop
        self._nodrop_on = False  # XPUB_NODROP as set on the socket now (see _pace)
        self._sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # every subscription reaches us, so we can count them
        self._sock.setsockopt(zmq.XPUB_VERBOSER, 1)  # and every unsubscription (a subscriber going away)
        if address.endswith(":0"):
            address = address[:-2] + ":*"
        try:
            self._sock.bind(address)
        except zmq.ZMQError as exc:
            self._sock.close(linger=0)
            why = f"{exc} (in use by another program?)"
            raise ConfigError(f"{address}: the stream cannot bind there: {why}") from None
        self.address: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._seq: dict[str, int] = {}
        self.session = uuid.uuid4().hex[:12]
        """Identifies this publisher: a subscriber seeing a new one resets its counting (no false drops)."""
        self.subscribers = 0
        """Subscribers connected now (as their subscriptions say)."""
        self.stats = PublisherStats()

    def _read_subscriptions(self) -> None:
        while True:
            try:
                msg = self._sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if msg[:1] == b"\x01":
                self.subscribers += 1
            elif msg[:1] == b"\x00":
                self.subscribers = max(0, self.subscribers - 1)

    def _pace(self) -> None:
        """``XPUB_NODROP`` only while there is exactly one subscriber: then a frame it cannot take is
        dropped here and counted; with several, each one loses frames on its own (a subscriber that
        stopped reading must not hold up the others, and a stopped process may never be cut off)."""
        want = self.nodrop and self.subscribers == 1
        if want != self._nodrop_on:
            self._sock.setsockopt(zmq.XPUB_NODROP, int(want))
            self._nodrop_on = want

    def publish(self, header: dict[str, Any], buffers: list[Any]) -> bool:
        """Send ``header`` (``seq``, ``v`` and ``wall_time_ns`` are filled in) and the raw ``buffers``
        zero-copy; returns False when the subscriber could not take it and the frame was dropped."""
        t0 = time.perf_counter()
        self._read_subscriptions()
        self._pace()
        kind = str(header.get("kind", "scan"))
        seq = self._seq.get(kind, 0)
        self._seq[kind] = seq + 1
        header = {"v": STREAM_VERSION, "seq": seq, "session": self.session, **header}
        header["wall_time_ns"] = time.time_ns()
        parts: list[Any] = [json.dumps(header, separators=(",", ":")).encode(), *buffers]
        try:
            self._sock.send_multipart(parts, flags=zmq.NOBLOCK, copy=False)
            ok = True
            self.stats.sent += 1
            self.stats.unheard += self.subscribers == 0
        except zmq.Again:
            ok = False
            self.stats.dropped += 1
        self._read_subscriptions()  # a departure is noticed during the send: count it now
        dt = time.perf_counter() - t0
        self.stats.publish_s_total += dt
        self.stats.publish_s_max = max(self.stats.publish_s_max, dt)
        return ok

    def close(self) -> None:
        """Close the socket, giving the frames still queued for connected subscribers up to
        :data:`CLOSE_LINGER_MS` to go out (the last scans of a run that ends right after publishing
        them), then discarding the rest: a subscriber that stopped reading never holds up the exit."""
        self._sock.close(linger=CLOSE_LINGER_MS)


def scan_header_figures(preset: SensorPreset) -> dict[str, Any]:
    """What a scan header says of its sensor: the preset's name, beam elevations, range-image columns
    and the horizontal field they span (a rosette's image is an elevation x azimuth grid over its
    field instead), intensity scale and maximum range (the viewer's colour scales and range panel
    follow them)."""
    scan = preset.scan
    figures: dict[str, Any] = {
        "preset": preset.name,
        "elevations_deg": [round(float(e), 4) for e in preset.elevations_deg],
        "columns": max(64, min(4096, firings_per_scan(preset) // max(1, preset.n_rings))),
        "azimuth_span_deg": azimuth_span_deg(preset),
        "intensity_max": float(preset.output.intensity_max),
        "range_max_m": float(preset.range.max_m),
    }
    if scan.pattern == "rosette":  # one "ring" sweeping a circle: a square angle grid, ~1 point a pixel
        figures["elevation_span_deg"] = float(scan.fov_deg or 38.4)
        figures["columns"] = max(32, min(256, int(np.sqrt(firings_per_scan(preset)))))
    return figures


def _raw(arr: np.ndarray) -> memoryview:
    """A byte view of ``arr`` (made contiguous only when it is not)."""
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8).data


class ZmqStreamSink:
    """The ``zmq`` sink: every scan on a PUB socket (``--sink zmq:tcp://127.0.0.1:5555,hwm=2``)."""

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        hwm: int = 2,
        frame_id: str = "lidar",
        sectors: bool = False,
        camera_every: int = 1,
        nodrop: bool = True,
    ) -> None:
        if camera_every < 0:
            raise ValueError(f"zmq sink: camera_every must be >= 0, got {camera_every}")
        self.requested_address = address or DEFAULT_ADDRESS
        self.wants_sectors = sectors
        """Also publish every sim frame's sector (header kind ``"sector"``) as it is computed."""
        self.camera_every = camera_every
        """Publish the camera image and mask a scan carries (the RINet stage's) with every k-th scan."""
        self.nodrop = nodrop
        """Drop a frame for all when a subscriber is full, and count it (see :class:`StreamPublisher`)."""
        self._scans = 0
        self.hwm = hwm
        self.frame_id = frame_id
        self.publisher: StreamPublisher | None = None
        self._static: dict[str, Any] = {}
        self._context: SinkContext | None = None

    @property
    def address(self) -> str:
        """The bound endpoint (after :meth:`open`)."""
        return self.publisher.address if self.publisher else self.requested_address

    @property
    def stats(self) -> PublisherStats:
        """The publisher's counters."""
        return self.publisher.stats if self.publisher else PublisherStats()

    def open(self, context: SinkContext) -> None:
        """Bind the socket; the preset's beam table and limits go into every header."""
        preset = context.preset
        self.publisher = StreamPublisher(self.requested_address, hwm=self.hwm, nodrop=self.nodrop)
        self._context = context
        self._static = {
            "frame_id": self.frame_id,
            "stamp_clock": context.stamp,
            **scan_header_figures(preset),
        }

    def write(self, scan: Scan) -> None:
        """Publish one scan; never blocks (a frame the socket cannot take is counted and dropped)."""
        if self.publisher is None or self._context is None:
            raise RuntimeError("ZmqStreamSink.write before open")
        pts = scan.points
        header = {
            "kind": "scan",
            "sim_time_ns": int(scan.start_ns),
            "scan_index": int(scan.index),
            "fields": pts.dtype.descr,
            "n": int(pts.size),
            "fired": int(scan.fired),
            "dropped": int(scan.dropped),
            "sim_wall_ns": scan.sim_wall_ns,
            "stamp_ns": int(scan.start_ns) + self._context.stamp_offset_ns(scan),
            "position": [float(v) for v in scan.sensor_position],
            "rotation": [float(v) for v in scan.sensor_rotation],
            **self._static,
        }
        live = self._context.live_figures()
        if live:
            header["live"] = live
        self.publisher.publish(header, [_raw(pts)])
        if scan.camera is not None and self.camera_every > 0 and self._scans % self.camera_every == 0:
            self.write_camera(scan.camera.rgb, scan.camera.mask, scan.camera.time_ns)
        self._scans += 1

    def write_sector(self, points: np.ndarray, t0_ns: int, t1_ns: int) -> None:
        """Publish one sim frame's points (``t`` absolute ns) as soon as they exist; never blocks."""
        if self.publisher is None:
            raise RuntimeError("ZmqStreamSink.write_sector before open")
        header = {
            "kind": "sector",
            "sim_time_ns": int(t0_ns),
            "t1_ns": int(t1_ns),
            "fields": points.dtype.descr,
            "n": int(points.size),
            **self._static,
        }
        self.publisher.publish(header, [_raw(points)])

    def write_camera(self, rgb: np.ndarray, mask: np.ndarray | None, sim_time_ns: int) -> None:
        """Publish a camera image (H, W, 3) uint8 and, when given, its intensity mask (h, w) float32 (the
        model's own resolution: it need not be the image's)."""
        if self.publisher is None:
            raise RuntimeError("ZmqStreamSink.write_camera before open")
        h, w = rgb.shape[:2]
        header: dict[str, Any] = {
            "kind": "camera",
            "sim_time_ns": int(sim_time_ns),
            "width": int(w),
            "height": int(h),
            "mask": mask is not None,
            "mask_shape": list(np.shape(mask)) if mask is not None else None,
            "preset": self._static.get("preset", ""),
            "frame_id": "camera",
        }
        bufs = [_raw(np.asarray(rgb, np.uint8))]
        if mask is not None:
            bufs.append(_raw(np.asarray(mask, np.float32)))
        self.publisher.publish(header, bufs)

    def close(self) -> None:
        """Close the socket."""
        if self.publisher is not None:
            self.publisher.close()
            self.publisher = None


@register_sink("zmq")
def _make_zmq_sink(target: str, options: dict[str, str]) -> ZmqStreamSink:
    """``--sink zmq:ADDRESS[,hwm=2][,frame_id=lidar][,sectors=0][,camera_every=1][,nodrop=1]``."""
    opts = SinkOptions("zmq", options, {"hwm", "frame_id", "sectors", "camera_every", "nodrop"})
    return ZmqStreamSink(
        target,
        hwm=opts.integer("hwm", 2, 1, 1_000_000),
        frame_id=opts.text("frame_id", "lidar"),
        sectors=opts.flag("sectors", False),
        camera_every=opts.integer("camera_every", 1, 0, 1_000_000),
        nodrop=opts.flag("nodrop", True),
    )
