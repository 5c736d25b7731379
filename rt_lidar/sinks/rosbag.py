"""``--sink rosbag2:DIR[,storage=mcap|sqlite3][,topic=/points][,frame=lidar]``: a rosbag2 recording of
``sensor_msgs/msg/PointCloud2`` (the fields the ROS Velodyne driver publishes: x, y, z, intensity
float32, ring uint16, time float32 s from the scan start) and the sensor pose on ``/tf`` (world ->
frame), written with rosbags. The resolved preset and scenario go beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sinks.base import SinkContext, register_sink
from rt_lidar.sweep import Scan

__all__ = ["CLOUD_DTYPE", "RosbagSink", "cloud_bytes"]

CLOUD_DTYPE = np.dtype(
    [("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("intensity", "<f4"), ("ring", "<u2"), ("time", "<f4")]
)
"""The PointCloud2 point layout (packed, 22 bytes, as velodyne_pointcloud)."""
_PF_TYPE = {"<f4": 7, "<u2": 4}  # sensor_msgs/PointField FLOAT32, UINT16
_LAYOUT = [(n, CLOUD_DTYPE[n], CLOUD_DTYPE.fields[n][1]) for n in CLOUD_DTYPE.names or ()]  # type: ignore[index]


def cloud_bytes(points: np.ndarray) -> np.ndarray:
    """Our points -> the PointCloud2 ``data`` bytes (uint8)."""
    out = np.empty(points.size, CLOUD_DTYPE)
    for name in ("x", "y", "z", "intensity", "ring"):
        out[name] = points[name]
    out["time"] = points["t"].astype(np.float64) * 1e-9
    return out.view(np.uint8)


class RosbagSink:
    """Writes one PointCloud2 and one TF message per scan."""

    def __init__(self, target: str, options: dict[str, str]) -> None:
        unknown = set(options) - {"storage", "topic", "frame", "world"}
        if unknown:
            raise ConfigError(f"rosbag2 sink: unknown options {sorted(unknown)}")
        self.path = Path(target)
        self.storage = options.get("storage", "mcap")
        if self.storage not in ("mcap", "sqlite3"):
            raise ConfigError(f"rosbag2 storage '{self.storage}': expected mcap or sqlite3")
        self.topic = options.get("topic", "/points")
        self.frame = options.get("frame", "lidar")
        self.world = options.get("world", "map")
        self._writer: object | None = None

    def open(self, context: SinkContext) -> None:
        """Create the bag (the folder must not exist yet; rosbag2 refuses to overwrite)."""
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        from rt_lidar.sinks.files import write_resolved_config

        if self.path.exists():
            raise ConfigError(f"rosbag2 sink: {self.path} exists already; give a new folder name")
        self._ts = get_typestore(Stores.ROS2_HUMBLE)
        plugin = StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3
        writer = Writer(self.path, version=8, storage_plugin=plugin)
        writer.open()
        self._cloud = writer.add_connection(self.topic, "sensor_msgs/msg/PointCloud2", typestore=self._ts)
        self._tf = writer.add_connection("/tf", "tf2_msgs/msg/TFMessage", typestore=self._ts)
        self._writer = writer
        write_resolved_config(self.path.parent / f"{self.path.name}_config", context)

    def write(self, scan: Scan) -> None:
        """Serialize and append the scan's cloud and pose."""
        from rosbags.rosbag2 import Writer

        ts = self._ts
        types = ts.types
        writer = self._writer
        assert isinstance(writer, Writer), "open() first"
        stamp_ns = int(scan.start_ns)
        stamp = types["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
        header = types["std_msgs/msg/Header"](stamp=stamp, frame_id=self.frame)
        pf = types["sensor_msgs/msg/PointField"]
        fields = [pf(name=n, offset=off, datatype=_PF_TYPE[k.str], count=1) for n, k, off in _LAYOUT]
        data = cloud_bytes(scan.points)
        msg = types["sensor_msgs/msg/PointCloud2"](
            header=header, height=1, width=scan.points.size, fields=fields, is_bigendian=False,
            point_step=CLOUD_DTYPE.itemsize, row_step=CLOUD_DTYPE.itemsize * scan.points.size,
            data=data, is_dense=True,
        )  # fmt: skip
        writer.write(self._cloud, stamp_ns, ts.serialize_cdr(msg, msg.__msgtype__))
        p, q = np.asarray(scan.sensor_position, float), np.asarray(scan.sensor_rotation, float)
        vec = types["geometry_msgs/msg/Vector3"](x=p[0], y=p[1], z=p[2])
        quat = types["geometry_msgs/msg/Quaternion"](x=q[1], y=q[2], z=q[3], w=q[0])
        tf = types["geometry_msgs/msg/TransformStamped"](
            header=types["std_msgs/msg/Header"](stamp=stamp, frame_id=self.world),
            child_frame_id=self.frame,
            transform=types["geometry_msgs/msg/Transform"](translation=vec, rotation=quat),
        )
        tfm = types["tf2_msgs/msg/TFMessage"](transforms=[tf])
        writer.write(self._tf, stamp_ns, ts.serialize_cdr(tfm, tfm.__msgtype__))

    def close(self) -> None:
        """Finish the bag (writes its metadata.yaml)."""
        from rosbags.rosbag2 import Writer

        if isinstance(self._writer, Writer):
            self._writer.close()
            self._writer = None


@register_sink("rosbag2")
def rosbag_sink(target: str, options: dict[str, str]) -> RosbagSink:
    """Factory for ``--sink rosbag2:DIR``."""
    return RosbagSink(target, options)
