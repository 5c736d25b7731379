"""``--sink rosbag2:DIR[,storage=mcap|sqlite3][,topic=/points][,frame=lidar][,fields=all|velodyne]``: a
rosbag2 recording of ``sensor_msgs/msg/PointCloud2`` and the sensor pose on ``/tf`` (world -> frame),
written with rosbags. The resolved preset and scenario go beside it.

A cloud holds the fields the ROS Velodyne driver publishes (x, y, z, intensity float32, ring uint16,
time float32 s from the scan start), then by default the rest of our point type: reflectivity float32,
return_id and flags uint8, segment uint32, so a recording shows in the viewer as the live stream does.
``fields=velodyne`` writes the driver's fields alone.

The layouts live here once: :func:`cloud_layout` also gives ouster-ros's (the ``ros2`` sink picks the
driver by preset), :func:`cloud_fields` the PointField list of a layout, :func:`cloud_bytes` the data.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from ruamel.yaml import YAML

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.field_copy import copy_same_fields, seconds_compiled
from rt_lidar.sinks.ouster_meta import nir_counts

__all__ = [
    "CLOUD_DTYPE",
    "CLOUD_DTYPE_ALL",
    "OUSTER_DTYPE",
    "OUSTER_DTYPE_ALL",
    "POINTFIELD_DTYPES",
    "RosbagSink",
    "cloud_bytes",
    "cloud_fields",
    "cloud_layout",
]

CLOUD_DTYPE = np.dtype(
    [("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("intensity", "<f4"), ("ring", "<u2"), ("time", "<f4")]
)
"""The PointCloud2 point layout of ``fields=velodyne`` (packed, 22 bytes, as velodyne_pointcloud)."""
_ALL_PACKED = np.dtype(
    [
        *((n, CLOUD_DTYPE[n]) for n in CLOUD_DTYPE.names or ()),
        ("reflectivity", "<f4"),
        ("return_id", "u1"),
        ("flags", "<u2"),
        ("segment", "<u4"),
    ]
)
_ALL_SPEC: Any = {
    "names": list(_ALL_PACKED.names or ()),
    "formats": [_ALL_PACKED.fields[n][0] for n in _ALL_PACKED.names or ()],  # type: ignore[index]
    "offsets": [_ALL_PACKED.fields[n][1] for n in _ALL_PACKED.names or ()],  # type: ignore[index]
    "itemsize": 36,
}
CLOUD_DTYPE_ALL = np.dtype(_ALL_SPEC)
"""The default layout: the Velodyne driver's fields, then the rest of our point type (33 bytes of fields,
``flags`` uint16; padded to 36 so a point is whole 4-byte words)."""
_OUSTER = [
    ("x", "<f4", 0),
    ("y", "<f4", 4),
    ("z", "<f4", 8),
    ("intensity", "<f4", 16),
    ("t", "<u4", 20),
    ("reflectivity", "<u2", 24),
    ("ring", "<u2", 26),
    ("ambient", "<u2", 28),
    ("range", "<u4", 32),
]
_OURS_IN_PAD = [("return_id", "u1", 36), ("flags", "<u2", 38), ("segment", "<u4", 40)]


def _padded(fields: list[tuple[str, str, int]], itemsize: int) -> np.dtype:
    names, formats, offsets = zip(*fields, strict=True)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


OUSTER_DTYPE = _padded(_OUSTER, 48)
"""ouster-ros's point (``ouster_ros::Point``, EIGEN_ALIGN16, 48 bytes): x, y, z (+4 pad), intensity
float32, t uint32 ns from the scan start, reflectivity uint16 (0..100 Lambertian, above: retro),
ring uint16, ambient uint16 (near-IR counts of the sunlight, 0 at night), range uint32 mm."""
OUSTER_DTYPE_ALL = _padded(_OUSTER + _OURS_IN_PAD, 48)
"""ouster-ros's point with the rest of our point type in its padding: return_id uint8 at 36, flags
uint16 at 38, segment uint32 at 40 (still 48 bytes, so ouster-ros consumers read it unchanged)."""
LAYOUTS = {"all": CLOUD_DTYPE_ALL, "velodyne": CLOUD_DTYPE}
DRIVER_LAYOUTS = {
    "velodyne": {"all": CLOUD_DTYPE_ALL, "driver": CLOUD_DTYPE},
    "ouster": {"all": OUSTER_DTYPE_ALL, "driver": OUSTER_DTYPE},
}
"""Per ROS driver: ``all`` (its fields, then ours) or ``driver`` (its fields alone)."""
POINTFIELD_DTYPES = {1: "i1", 2: "u1", 3: "<i2", 4: "<u2", 5: "<i4", 6: "<u4", 7: "<f4", 8: "<f8"}
"""sensor_msgs/PointField datatype (INT8 .. FLOAT64) -> NumPy dtype; readers of clouds use it too."""
_PF_TYPE = {np.dtype(v).str: k for k, v in POINTFIELD_DTYPES.items()}


def cloud_layout(preset: SensorPreset, fields: str = "all") -> np.dtype:
    """The PointCloud2 layout the preset's ROS driver publishes: ouster-ros's for Ouster sensors, the
    Velodyne driver's (x, y, z, intensity, ring, time: what most drivers publish) for the rest;
    ``fields`` ``all`` appends our fields, ``driver`` gives the driver's alone."""
    driver = "ouster" if preset.packet_format.startswith("ouster") else "velodyne"
    if fields not in DRIVER_LAYOUTS[driver]:
        raise ConfigError(f"cloud fields={fields}: expected {' or '.join(DRIVER_LAYOUTS[driver])}")
    return DRIVER_LAYOUTS[driver][fields]


def cloud_fields(layout: np.dtype) -> list[tuple[str, int, int]]:
    """``(name, offset, PointField datatype)`` of each field of ``layout`` (count is always 1)."""
    return [(name, int(spec[1]), _PF_TYPE[spec[0].str]) for name, spec in (layout.fields or {}).items()]


def cloud_bytes(
    points: np.ndarray, layout: np.dtype = CLOUD_DTYPE, ambient_w: np.ndarray | None = None
) -> np.ndarray:
    """Our points -> the PointCloud2 ``data`` bytes (uint8) of ``layout`` (padding bytes are zero);
    ouster-ros's ``ambient`` is the near-IR counts of each point's ``ambient_w`` (``Scan.extras``; 0
    without one: night)."""
    padded = layout.itemsize > sum(f[0].itemsize for f in (layout.fields or {}).values())
    out = np.zeros(points.size, layout) if padded else np.empty(points.size, layout)
    fill_cloud(out, points, ambient_w)
    return out.view(np.uint8)


def fill_cloud(out: np.ndarray, points: np.ndarray, ambient_w: np.ndarray | None = None) -> None:
    """Write our ``points`` into ``out``, an array of a PointCloud2 layout (:func:`cloud_bytes`' values;
    its padding bytes are left as they are)."""
    layout = out.dtype
    converted = ("time", "t", "range", "ambient")
    same = [
        n
        for n in layout.names or ()
        if n not in converted
        and not (n == "reflectivity" and layout[n].kind == "u")
        and n in (points.dtype.names or ())
        and layout[n] == points.dtype[n]
    ]
    copy_same_fields(out, points, same)
    for name in layout.names or ():
        kind = layout[name]
        if name in same:
            continue
        if name == "time":  # the Velodyne driver's: float32 s from the scan start
            if not seconds_compiled(out, name, points, "t"):  # the same bits in one pass, where built
                out[name] = points["t"].astype(np.float64) * 1e-9
        elif name == "t":  # ouster-ros's: uint32 ns from the scan start
            out[name] = np.clip(points["t"], 0, 2**32 - 1)
        elif name == "reflectivity" and kind.kind == "u":  # ouster's calibrated 0..255 (100 = Lambertian 1)
            out[name] = np.clip(np.round(points["reflectivity"] * 100.0), 0, 255)
        elif name == "range":  # ouster-ros's: mm
            xyz = [points[c].astype(np.float64) for c in ("x", "y", "z")]
            out[name] = np.round(np.sqrt(xyz[0] ** 2 + xyz[1] ** 2 + xyz[2] ** 2) * 1000.0)
        elif name == "ambient":
            out[name] = 0 if ambient_w is None else nir_counts(ambient_w)
        else:
            out[name] = points[name]


class RosbagSink:
    """Writes one PointCloud2 and one TF message per scan, as a bag split into segments.

    Every ``segment`` scans (option ``segment=N``, default 10) the current storage file is finished
    and moved into the bag, and ``metadata.yaml`` is rewritten to list every finished file (rosbag2's
    split-bag layout, which rosbags and ``ros2 bag`` read as one bag). A recording killed at any moment
    therefore stays readable up to its last finished segment; ``segment=1`` makes that every scan.
    """

    def __init__(self, target: str, options: dict[str, str]) -> None:
        opts = SinkOptions("rosbag2", options, {"storage", "topic", "frame", "world", "segment", "fields"})
        self.path = Path(target)
        self.storage = opts.choice("storage", "mcap", ("mcap", "sqlite3"))
        self.segment_scans = opts.integer("segment", 10, 1, 100_000)
        self.layout = LAYOUTS[opts.choice("fields", "all", tuple(LAYOUTS))]
        self.topic = opts.text("topic", "/points")
        self.frame = opts.text("frame", "lidar")
        self.world = opts.text("world", "map")
        self._writer: object | None = None
        self._in_segment = 0
        self._segments: list[dict[str, Any]] = []
        self._context: SinkContext | None = None

    def open(self, context: SinkContext) -> None:
        """Create the bag folder (it must not exist yet: recordings are never overwritten)."""
        from rosbags.typesys import Stores, get_typestore

        from rt_lidar.sinks.files import write_resolved_config

        if self.path.exists():
            raise ConfigError(f"rosbag2 sink: {self.path} exists already; give a new folder name")
        self._ts = get_typestore(Stores.ROS2_HUMBLE)
        self._context = context
        self.path.mkdir(parents=True)
        write_resolved_config(self.path.parent / f"{self.path.name}_config", context)

    def _start_segment(self) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        plugin = StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3
        self._seg_dir = self.path / f".segment_{len(self._segments)}.part"
        writer = Writer(self._seg_dir, version=8, storage_plugin=plugin)
        writer.open()
        self._cloud = writer.add_connection(self.topic, "sensor_msgs/msg/PointCloud2", typestore=self._ts)
        self._tf = writer.add_connection("/tf", "tf2_msgs/msg/TFMessage", typestore=self._ts)
        self._writer = writer
        self._in_segment = 0

    def _finish_segment(self) -> None:
        """Close the current storage file, move it into the bag and rewrite metadata.yaml."""
        from rosbags.rosbag2 import Writer

        writer = self._writer
        if not isinstance(writer, Writer):
            return
        writer.close()
        self._writer = None
        yaml = YAML(typ="safe")
        info = yaml.load((self._seg_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        (src,) = info["relative_file_paths"]
        name = f"{self.path.name}_{len(self._segments)}{Path(src).suffix}"
        os.replace(self._seg_dir / src, self.path / name)
        shutil.rmtree(self._seg_dir)
        info["relative_file_paths"] = [name]
        info["files"][0]["path"] = name
        self._segments.append(info)
        self._write_metadata()

    def _write_metadata(self) -> None:
        segs = self._segments
        merged = dict(segs[0])
        merged["relative_file_paths"] = [s["relative_file_paths"][0] for s in segs]
        merged["files"] = [s["files"][0] for s in segs]
        start = min(s["starting_time"]["nanoseconds_since_epoch"] for s in segs)
        end = max(s["starting_time"]["nanoseconds_since_epoch"] + s["duration"]["nanoseconds"] for s in segs)
        merged["starting_time"] = {"nanoseconds_since_epoch": start}
        merged["duration"] = {"nanoseconds": end - start}
        merged["message_count"] = sum(s["message_count"] for s in segs)
        topics = []
        for i, t in enumerate(segs[0]["topics_with_message_count"]):
            count = sum(s["topics_with_message_count"][i]["message_count"] for s in segs)
            topics.append({**t, "message_count": count})
        merged["topics_with_message_count"] = topics
        buf = io.StringIO()
        yaml = YAML(typ="safe")
        yaml.default_flow_style = False
        yaml.dump({"rosbag2_bagfile_information": merged}, buf)
        with atomic_write(self.path / "metadata.yaml") as fh:
            fh.write(buf.getvalue().encode())

    def write(self, scan: Scan) -> None:
        """Serialize and append the scan's cloud and pose; finish the segment when it is full."""
        from rosbags.rosbag2 import Writer

        if self._writer is None:
            self._start_segment()
        ts = self._ts
        types = ts.types
        writer = self._writer
        assert isinstance(writer, Writer), "open() first"
        assert self._context is not None, "open() first"
        stamp_ns = int(scan.start_ns) + self._context.stamp_offset_ns(scan)  # sim time, or the wall clock
        stamp = types["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
        header = types["std_msgs/msg/Header"](stamp=stamp, frame_id=self.frame)
        pf = types["sensor_msgs/msg/PointField"]
        layout = self.layout
        fields = [pf(name=n, offset=o, datatype=d, count=1) for n, o, d in cloud_fields(layout)]
        data = cloud_bytes(scan.points, layout, scan.extras.get("ambient_w"))
        msg = types["sensor_msgs/msg/PointCloud2"](
            header=header,
            height=1,
            width=scan.points.size,
            fields=fields,
            is_bigendian=False,
            point_step=layout.itemsize,
            row_step=layout.itemsize * scan.points.size,
            data=data,
            is_dense=True,
        )
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
        self._in_segment += 1
        if self._in_segment >= self.segment_scans:
            self._finish_segment()

    def close(self) -> None:
        """Finish the last segment (the bag is then complete; a run with no scan leaves an empty bag)."""
        if self._writer is None and not self._segments:
            self._start_segment()
        self._finish_segment()


@register_sink("rosbag2")
def rosbag_sink(target: str, options: dict[str, str]) -> RosbagSink:
    """Factory for ``--sink rosbag2:DIR``."""
    return RosbagSink(target, options)
