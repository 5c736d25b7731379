"""The live stream's frames as they travel: the wire format (below), its limits, and
:func:`decode_frame`, which trusts nothing it receives.

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
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zmq

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_MAX_FRAME_BYTES",
    "MAX_HEADER_BYTES",
    "STREAM_VERSION",
    "FrameError",
    "StreamFrame",
    "decode_frame",
    "latest_key",
    "part_buffer",
]

DEFAULT_ADDRESS = "tcp://127.0.0.1:5555"
STREAM_VERSION = 1
DEFAULT_MAX_FRAME_BYTES = 512 << 20
"""Largest frame a subscriber takes: 14 M points of the 37-byte point type (a dual-return VLS-128
scan is ~10 M)."""
_KINDS = ("scan", "sector", "camera")
MAX_HEADER_BYTES = 1 << 20
"""Largest JSON header a subscriber parses (a real one is ~2-10 KiB; a huge JSON array would take
tens of times its size as Python objects)."""


class FrameError(ValueError):
    """A received message that is not a valid stream frame (the subscriber counts and skips it)."""


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


def part_buffer(part: Any) -> memoryview:
    """The bytes of one received part (a ``zmq.Frame`` or a buffer), not copied."""
    return memoryview(part.buffer if isinstance(part, zmq.Frame) else part)


def _whole(header: dict[str, Any], key: str, low: int = 0) -> int:
    value = header.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise FrameError(f"header field '{key}' is {value!r:.40}, not a whole number >= {low}")
    return value


def _part(parts: list[Any], i: int, nbytes: int, what: str) -> memoryview:
    if len(parts) <= i:
        raise FrameError(f"{what}: part {i} is missing")
    view = part_buffer(parts[i])
    if view.nbytes < nbytes:
        raise FrameError(f"{what}: part {i} holds {view.nbytes} bytes, the header says {nbytes}")
    return view


def decode_frame(parts: list[Any]) -> StreamFrame:
    """Parse a received multipart message (``bytes`` or ``zmq.Frame`` parts) into a :class:`StreamFrame`.

    Raises :class:`FrameError` naming what is wrong when the message is not a valid frame.
    """
    if not parts:
        raise FrameError("an empty message")
    head = part_buffer(parts[0])
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


def latest_key(frame: StreamFrame) -> str:
    """Where a subscriber keeps ``frame`` as the newest: its kind, or ``scan/<sensor>`` for a scan of a
    rig's sensor (header ``sensor``), so that the newest scan of every sensor is kept."""
    sensor = frame.header.get("sensor")
    if frame.kind == "scan" and isinstance(sensor, str) and sensor:
        return f"scan/{sensor}"
    return frame.kind
