"""One rosbag2 for a whole rig: a ``sensor_msgs/PointCloud2`` topic per sensor (``/<name>/points``,
``frame_id`` = the sensor's name) and ``/tf_static`` holding every mount (``base_link`` -> name),
written once at the start with transient-local durability as ``robot_state_publisher`` offers it.

The sensors' scans arrive from their own writer threads; a run that says which scans each sim frame
hands out (:meth:`RigBag.expect`, :meth:`RigBag.end_frame`, as ``drive_rig`` does) gets them written
frame by frame, by stamp and then the sensor's place in the rig (:mod:`rt_lidar.rig.bag_order`), so the
same run writes the same file, byte for byte, however the threads were timed.

Clouds use the layout of the ``rosbag2`` sink (:data:`rt_lidar.sinks.rosbag.CLOUD_DTYPE_ALL`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.rig.bag_order import FrameOrder
from rt_lidar.rig.model import Rig
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.rosbag import CLOUD_DTYPE_ALL, POINTFIELD_DTYPES, cloud_bytes, fill_cloud

__all__ = ["RigBag", "points_topic"]

_PF_TYPE = {np.dtype(v).str: k for k, v in POINTFIELD_DTYPES.items()}


def cloud_message(empty: memoryview | bytes, scan: Scan, layout: np.dtype) -> bytearray:
    """The CDR bytes of a PointCloud2 whose serialization without data is ``empty`` (its data, a
    ``uint8[]``, is the last field but the one-byte ``is_dense``), with ``scan``'s points packed as
    ``layout`` straight into the message (:func:`~rt_lidar.sinks.rosbag.fill_cloud`): what rosbags'
    ``serialize_cdr`` gives with the data in place, without a copy of the cloud."""
    head = bytes(empty)
    n = scan.points.size
    out = bytearray(len(head) + n * layout.itemsize)  # zeros: the layout's padding bytes
    out[: len(head) - 5] = head[:-5]
    out[len(head) - 5 : len(head) - 1] = (n * layout.itemsize).to_bytes(4, "little")
    out[-1:] = head[-1:]
    cloud = np.frombuffer(out, layout, count=n, offset=len(head) - 1)
    fill_cloud(cloud, scan.points, scan.extras.get("ambient_w"))  # as cloud_bytes fills its array
    return out


def points_topic(name: str) -> str:
    """The PointCloud2 topic of sensor ``name``."""
    return f"/{name}/points"


def _static_qos() -> Any:
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    zero = QosTime(0, 0)
    return Qos(
        QosHistory.KEEP_LAST,
        1,
        QosReliability.RELIABLE,
        QosDurability.TRANSIENT_LOCAL,
        zero,
        zero,
        QosLiveliness.AUTOMATIC,
        zero,
        False,
    )


class RigBag:
    """The rig's bag; :meth:`sink` gives each sensor a scan sink writing its topic (thread-safe)."""

    def __init__(self, path: Path, rig: Rig, storage: str = "mcap", vehicle_frame: str = "base_link") -> None:
        if storage not in ("mcap", "sqlite3"):
            raise ConfigError(f"rig rosbag2 storage '{storage}': expected mcap or sqlite3")
        self.path = Path(path)
        self.rig = rig
        self.storage = storage
        self.vehicle_frame = vehicle_frame
        self._lock = threading.Lock()
        self._writer: Any = None
        self._topics: dict[str, Any] = {}
        self._order: FrameOrder[tuple[str, int, bytes | bytearray | memoryview]] = FrameOrder()
        self._place = {s.name: i for i, s in enumerate(rig.sensors)}
        self.held_most = 0
        """The most messages the reorder buffer held at once, a frame's last one included (its high-water
        mark; timing-dependent, so in no output file)."""

    def open(self, stamp_ns: int = 0) -> None:
        """Create the bag (the folder must not exist) and write every mount to ``/tf_static``."""
        from rosbags.rosbag2 import StoragePlugin
        from rosbags.typesys import Stores, get_typestore

        from rt_lidar.rig.bag_writer import LeanWriter

        if self.path.exists():
            raise ConfigError(f"rig rosbag2: {self.path} exists already; give a new folder name")
        self._ts = get_typestore(Stores.ROS2_HUMBLE)
        plugin = StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3
        writer = LeanWriter(self.path, version=8, storage_plugin=plugin)  # rosbags' file, fewer copies
        writer.open()
        self._writer = writer
        tf = writer.add_connection(
            "/tf_static", "tf2_msgs/msg/TFMessage", typestore=self._ts, offered_qos_profiles=[_static_qos()]
        )
        for s in self.rig.sensors:
            self._topics[s.name] = writer.add_connection(
                points_topic(s.name), "sensor_msgs/msg/PointCloud2", typestore=self._ts
            )
        types = self._ts.types
        stamp = types["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
        transforms = []
        for s in self.rig.sensors:
            p, q = s.mount.position, s.mount.rotation
            transforms.append(
                types["geometry_msgs/msg/TransformStamped"](
                    header=types["std_msgs/msg/Header"](stamp=stamp, frame_id=self.vehicle_frame),
                    child_frame_id=s.name,
                    transform=types["geometry_msgs/msg/Transform"](
                        translation=types["geometry_msgs/msg/Vector3"](x=p[0], y=p[1], z=p[2]),
                        rotation=types["geometry_msgs/msg/Quaternion"](x=q[1], y=q[2], z=q[3], w=q[0]),
                    ),
                )
            )
        msg = types["tf2_msgs/msg/TFMessage"](transforms=transforms)
        writer.write(tf, stamp_ns, self._ts.serialize_cdr(msg, msg.__msgtype__))

    def expect(self, name: str, scan: Scan) -> None:
        """The frame loop hands ``scan`` of sensor ``name`` to its sinks (call it before it does): the
        bag writes it with the rest of the frame, in the frame's order (:meth:`end_frame`)."""
        with self._lock:
            self._order.expect((name, int(scan.start_ns)), (int(scan.start_ns), self._place[name]))

    def end_frame(self) -> None:
        """Every scan of the sim frame was handed out (:meth:`expect`)."""
        with self._lock:
            self._write_due(self._order.end_frame())

    def write(self, name: str, scan: Scan) -> None:
        """Append one scan of sensor ``name`` to its topic: with its frame, in order, when it was
        expected (:meth:`expect`), else at once."""
        data = self.message(name, scan)
        stamp = int(scan.start_ns)
        with self._lock:
            due = self._order.put((name, stamp), (name, stamp, data))
            if due is None:
                self._writer.write(self._topics[name], stamp, data)
                return
            self.held_most = max(self.held_most, self._order.held + len(due))
            self._write_due(due)

    def _write_due(self, due: list[tuple[str, int, bytes | bytearray | memoryview]]) -> None:
        for name, stamp, data in due:
            self._writer.write(self._topics[name], stamp, data)

    def message(self, name: str, scan: Scan, in_place: bool = True) -> bytes | bytearray | memoryview:
        """The CDR bytes of ``scan``'s PointCloud2 (``frame_id`` = ``name``): with ``in_place``, the cloud
        packed straight into the message (:func:`cloud_message`), else by rosbags' ``serialize_cdr``
        with the cloud as its data (the same bytes)."""
        types = self._ts.types
        stamp_ns = int(scan.start_ns)
        stamp = types["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
        pf = types["sensor_msgs/msg/PointField"]
        layout = CLOUD_DTYPE_ALL
        ambient = scan.extras.get("ambient_w")
        fields = [
            pf(name=n, offset=spec[1], datatype=_PF_TYPE[spec[0].str], count=1)
            for n, spec in (layout.fields or {}).items()
        ]
        msg = types["sensor_msgs/msg/PointCloud2"](
            header=types["std_msgs/msg/Header"](stamp=stamp, frame_id=name),
            height=1,
            width=scan.points.size,
            fields=fields,
            is_bigendian=False,
            point_step=layout.itemsize,
            row_step=layout.itemsize * scan.points.size,
            data=np.empty(0, np.uint8) if in_place else cloud_bytes(scan.points, layout, ambient),
            is_dense=True,
        )
        got = self._ts.serialize_cdr(msg, msg.__msgtype__)
        little = bytes(got[:2]) == b"\x00\x01"  # CDR little-endian, as the layout's fields
        if not in_place or not little:
            return got if not in_place else self.message(name, scan, in_place=False)
        return cloud_message(got, scan, layout)

    def close(self) -> None:
        """Finish the bag."""
        with self._lock:
            if self._writer is not None:
                rest, _missing = self._order.drain()  # a frame left open by a failed run: what came
                self._write_due(rest)
                self._writer.close()
                self._writer = None

    def sink(self, name: str) -> _BagSensorSink:
        """A scan sink writing sensor ``name``'s scans into this bag (the bag opens and closes itself)."""
        return _BagSensorSink(self, name)


class _BagSensorSink:
    def __init__(self, bag: RigBag, name: str) -> None:
        self.bag, self.name = bag, name

    def open(self, context: SinkContext) -> None:
        del context

    def write(self, scan: Scan) -> None:
        self.bag.write(self.name, scan)

    def close(self) -> None:
        pass
