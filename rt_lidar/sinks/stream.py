"""The live stream: scans (and camera frames) on a ZeroMQ PUB socket that never blocks the simulation.

Wire format, one multipart message a frame:

- part 0: a small JSON header (UTF-8) with ``v`` (format version), ``kind`` (``"scan"`` or
  ``"camera"``), ``seq`` (counts up by one per frame of that kind, from 0 when the publisher starts),
  ``session`` (a random id of the publisher, new at every start),
  ``sim_time_ns``, ``wall_time_ns`` (``time.time_ns()`` when published), ``preset``, ``frame_id`` and,
  for a scan, ``fields`` (the NumPy dtype ``descr`` of the points), ``n``, ``sim_wall_ns`` (when the
  pipeline had the sim's last sector of it, or null), ``stamp_ns`` (the scan start on the run's stamp
  clock, ``stamp_clock``: ``sim`` or ``wall``, as every sink stamps it) and the scan's figures;
- part 1 (and 2): the raw buffers, sent zero-copy: the point array of a scan, or the RGB image and the
  float32 intensity mask of a camera frame (shapes in the header). A scan that carries the RINet
  stage's camera image and mask (``Scan.camera``) is followed by that camera frame.

The publisher sends with ``NOBLOCK`` on an XPUB socket with a small high-water mark: a slow or absent
subscriber loses frames, the simulation never waits. Both sides count the drops: the publisher the
frames its subscriber's full queue made it drop (``XPUB_NODROP``, while there is one subscriber), the
subscriber the same frames as gaps in ``seq``, and the frames it received but skipped because a newer
one had arrived.

The subscriber trusts nothing it receives: a message that does not parse as a frame (bad JSON, a
header without its fields, buffers shorter than the header says) or that is larger than
``max_frame_bytes`` is counted in :attr:`SubscriberStats.bad` and skipped; its reader thread never
dies of one. ZeroMQ's ``MAXMSGSIZE`` refuses a part over the cap before it is buffered (the sending
peer is disconnected and reconnects).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zmq

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import azimuth_span_deg, firings_per_scan
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink

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

DEFAULT_ADDRESS = "tcp://127.0.0.1:5555"
STREAM_VERSION = 1
_MAX_DRAIN = 512  # messages one poll reads at most, so a fast publisher cannot starve the GUI
DEFAULT_MAX_FRAME_BYTES = 512 << 20
"""Largest frame a subscriber takes: 14 M points of the 36-byte point type (a dual-return VLS-128
scan is ~10 M)."""
_KINDS = ("scan", "sector", "camera")
MAX_HEADER_BYTES = 1 << 20
"""Largest JSON header a subscriber parses (a real one is ~2-10 KiB; a huge JSON array would take
tens of times its size as Python objects)."""
_log = logging.getLogger(__name__)


class FrameError(ValueError):
    """A received message that is not a valid stream frame (the subscriber counts and skips it)."""


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
        self._sock.bind(address)
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


@dataclass
class StreamFrame:
    """One received frame: its header, its arrays (views of the received message) and when it came."""

    header: dict[str, Any]
    points: np.ndarray | None = None
    rgb: np.ndarray | None = None
    mask: np.ndarray | None = None
    received_ns: int = field(default_factory=time.time_ns)

    @property
    def kind(self) -> str:
        """``"scan"``, ``"sector"`` or ``"camera"``."""
        return str(self.header.get("kind", "scan"))

    @property
    def seq(self) -> int:
        """The publisher's sequence number of this frame (per kind)."""
        return int(self.header.get("seq", -1))


def _buf(part: Any) -> memoryview:
    return memoryview(part.buffer if isinstance(part, zmq.Frame) else part)


def _whole(header: dict[str, Any], key: str, low: int = 0) -> int:
    value = header.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise FrameError(f"header field '{key}' is {value!r:.40}, not a whole number >= {low}")
    return value


def _part(parts: list[Any], i: int, nbytes: int, what: str) -> memoryview:
    if len(parts) <= i:
        raise FrameError(f"{what}: part {i} is missing")
    view = _buf(parts[i])
    if view.nbytes < nbytes:
        raise FrameError(f"{what}: part {i} holds {view.nbytes} bytes, the header says {nbytes}")
    return view


def decode_frame(parts: list[Any]) -> StreamFrame:
    """Parse a received multipart message (``bytes`` or ``zmq.Frame`` parts) into a :class:`StreamFrame`.

    Raises :class:`FrameError` naming what is wrong when the message is not a valid frame.
    """
    if not parts:
        raise FrameError("an empty message")
    head = _buf(parts[0])
    if head.nbytes > MAX_HEADER_BYTES:
        raise FrameError(f"a header of {head.nbytes} bytes; at most {MAX_HEADER_BYTES}")
    try:
        header = json.loads(bytes(head))
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"the header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FrameError(f"the header is a JSON {type(header).__name__}, not an object")
    frame = StreamFrame(header)
    kind = header.get("kind", "scan")
    if kind not in _KINDS:
        raise FrameError(f"unknown frame kind {kind!r:.40}")
    if "seq" in header:
        _whole(header, "seq")
    if kind in ("scan", "sector"):
        fields = header.get("fields")
        try:
            if not isinstance(fields, list) or not fields:
                raise TypeError("not a non-empty list")
            dtype = np.lib.format.descr_to_dtype([tuple(f) for f in fields])
            if dtype.hasobject or dtype.itemsize == 0:
                raise TypeError("an object or empty dtype")
        except (TypeError, ValueError, KeyError, RecursionError) as exc:
            raise FrameError(f"header field 'fields' is not a point dtype: {exc!s:.80}") from None
        n = _whole(header, "n")
        data = _part(parts, 1, n * dtype.itemsize, "points")
        frame.points = np.frombuffer(data, dtype=dtype, count=n)
    else:
        h, w = _whole(header, "height"), _whole(header, "width")
        frame.rgb = np.frombuffer(_part(parts, 1, h * w * 3, "image"), np.uint8, count=h * w * 3)
        frame.rgb = frame.rgb.reshape(h, w, 3)
        if header.get("mask") and len(parts) > 2:
            shape = header.get("mask_shape") or [h, w]
            if not (isinstance(shape, list) and len(shape) == 2):
                raise FrameError(f"header field 'mask_shape' is {shape!r:.40}, not [rows, columns]")
            mh, mw = (_whole({"mask_shape": v}, "mask_shape") for v in shape)
            mask = np.frombuffer(_part(parts, 2, 4 * mh * mw, "mask"), np.float32, count=mh * mw)
            frame.mask = mask.reshape(mh, mw)
    return frame


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


def latest_key(frame: StreamFrame) -> str:
    """Where a subscriber keeps ``frame`` as the newest: its kind, or ``scan/<sensor>`` for a scan of a
    rig's sensor (header ``sensor``), so that the newest scan of every sensor is kept."""
    sensor = frame.header.get("sensor")
    if frame.kind == "scan" and isinstance(sensor, str) and sensor:
        return f"scan/{sensor}"
    return frame.kind


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
        size = sum(_buf(p).nbytes for p in parts)
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
