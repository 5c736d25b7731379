"""Cloud recordings read lazily: a folder of PCD scans, a folder of KITTI ``.bin`` scans (ours, or a
KITTI sequence's ``velodyne/`` with its ``times.txt``), or a rosbag2 bag of ``sensor_msgs/PointCloud2``.

Opening a recording reads only its index (file names, or the bag's message stamps); a scan's points
are read when asked for, so a recording of any length opens in bounded memory and can be played,
seeked and replayed scan by scan. The replay command and the viewer's player both read through here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.bridge.recover import nearest_ring
from rt_lidar.errors import ConfigError, RtLidarError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import POINT_DTYPE
from rt_lidar.sensor.presets import SensorPreset, load_preset, preset_from_dict
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.kitti import read_kitti_bin
from rt_lidar.sinks.pcd import read_pcd_points
from rt_lidar.sinks.rosbag import POINTFIELD_DTYPES

__all__ = ["DEFAULT_SCAN_PERIOD_NS", "CloudRecording", "cloud_points", "cloud_table", "kitti_points"]

DEFAULT_SCAN_PERIOD_NS = 100_000_000
"""The scan period assumed for a PCD folder whose sensor is unknown (10 Hz)."""

_CLOUD_TYPE = "sensor_msgs/msg/PointCloud2"
_COPIED_FIELDS = ("x", "y", "z", "intensity", "reflectivity", "ring", "return_id", "flags", "segment")


def cloud_table(msg: Any) -> np.ndarray:
    """A deserialised PointCloud2 message's points as they are: a structured array of its fields, in the
    byte order the message declares (``is_bigendian``)."""
    try:
        formats = [POINTFIELD_DTYPES[f.datatype] for f in msg.fields]
    except KeyError as exc:
        raise ConfigError(f"PointCloud2: unknown PointField datatype {exc.args[0]} (allowed 1-8)") from None
    layout: Any = np.dtype(
        {
            "names": [f.name for f in msg.fields],
            "formats": formats,
            "offsets": [f.offset for f in msg.fields],
            "itemsize": msg.point_step,
        }
    )
    n = int(msg.width) * int(msg.height)
    if len(msg.data) < n * msg.point_step:
        raise ConfigError(f"PointCloud2: {len(msg.data)} data bytes for {n} points of {msg.point_step} bytes")
    if bool(getattr(msg, "is_bigendian", False)):
        layout = layout.newbyteorder(">")
    return np.frombuffer(msg.data, dtype=layout, count=n)


def cloud_points(msg: Any) -> np.ndarray:
    """A deserialised PointCloud2 message as :data:`POINT_DTYPE` points.

    The fields it shares with our point type are copied; a ``time`` field (seconds from the scan
    start, as the ROS drivers write it) becomes ``t``; the rest stay zero.
    """
    cloud: Any = cloud_table(msg)
    layout = cloud.dtype
    n = cloud.shape[0]
    pts = np.zeros(n, POINT_DTYPE)
    for name in _COPIED_FIELDS:
        if name in layout.names:
            pts[name] = cloud[name]
    if "time" in layout.names:
        pts["t"] = np.round(cloud["time"].astype(np.float64) * 1e9).astype(np.int64)
    elif "t" in layout.names:
        pts["t"] = cloud["t"]
    return pts


def kitti_points(kitti: np.ndarray, preset: SensorPreset) -> np.ndarray:
    """A KITTI ``(N, 4)`` array (x, y, z, reflectance in [0, 1]) as :data:`POINT_DTYPE` points of
    ``preset``: ``reflectivity`` the reflectance, ``intensity`` it times the sensor's scale, ``ring`` the
    beam whose elevation is nearest the point's (the format keeps no ring)."""
    pts = np.zeros(kitti.shape[0], POINT_DTYPE)
    pts["x"], pts["y"], pts["z"] = kitti[:, 0], kitti[:, 1], kitti[:, 2]
    pts["reflectivity"] = kitti[:, 3]
    pts["intensity"] = kitti[:, 3] * np.float32(preset.output.intensity_max)
    elev = np.degrees(np.arctan2(kitti[:, 2], np.hypot(kitti[:, 0], kitti[:, 1])))
    pts["ring"] = nearest_ring(elev, np.asarray(preset.elevations_deg, np.float64))
    return pts


def _kitti_times(path: Path, count: int, fallback: np.ndarray) -> np.ndarray:
    """A KITTI sequence's ``times.txt`` (one time in seconds a line) as ns, when it has ``count``
    lines; else ``fallback``."""
    if not path.is_file():
        return fallback
    try:
        seconds = np.loadtxt(path, dtype=np.float64, ndmin=1)
    except ValueError as exc:
        raise ConfigError(f"{path}: not a KITTI times.txt (one time in seconds a line): {exc}") from None
    if seconds.size != count:
        return fallback
    if np.any(np.diff(seconds) < 0):
        raise ConfigError(f"{path}: times go backwards")
    return np.round(seconds * 1e9).astype(np.int64)


def _config_preset(*candidates: Path) -> SensorPreset | None:
    """The sensor of the first config file among ``candidates`` that names one (None when none does).

    ``rt_lidar_config.json`` is ours: a broken one is an error naming it. A ``config.json`` (as
    ``rt-lidar demo`` writes beside its scans) may be another tool's: one that does not hold a valid
    preset is passed over."""
    for cfg in candidates:
        if not cfg.is_file():
            continue
        ours = cfg.name == "rt_lidar_config.json"
        try:
            doc = json.loads(cfg.read_text())
            if isinstance(doc, dict) and isinstance(doc.get("preset"), dict):
                return preset_from_dict(doc["preset"], source=str(cfg))
        except (ValueError, KeyError, TypeError, RtLidarError) as exc:  # not JSON, or not a valid preset
            if ours:
                raise ConfigError(f"{cfg}: not a valid rt-lidar config ({exc})") from None
    return None


class CloudRecording:
    """The scans of a recording, opened lazily: ``len()``, ``stamps_ns``, ``points(i)``, iteration.

    ``preset`` is the sensor (from the recording's ``rt_lidar_config.json``, the ``config.json`` that
    ``rt-lidar demo`` writes beside its scans, or the argument); None when the recording does not say.
    A PCD folder's scans are one scan period apart; a bag's carry their message stamps (clouds that
    share a stamp are told apart by their order in the bag, as its storage returns them).
    """

    def __init__(self, path: str | Path, preset: SensorPreset | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise ConfigError(f"{self.path}: not a folder of PCD or KITTI scans or a rosbag2 recording")
        self._reader: Any = None
        self._conn: Any = None
        self._stamp_rank: np.ndarray = np.zeros(0, np.int64)
        if (self.path / "metadata.yaml").is_file():
            self.kind = "rosbag2"
            self.preset = preset or _config_preset(
                self.path.parent / f"{self.path.name}_config" / "rt_lidar_config.json"
            )
            self.files: list[Path] = []
            self.stamps_ns = self._open_bag()
        else:
            self.files = sorted(self.path.glob("*.pcd"))
            self.kind = "pcd"
            if not self.files:
                self.files, self.kind = sorted(self.path.glob("*.bin")), "kitti"
            if not self.files:
                raise ConfigError(
                    f"{self.path}: no .pcd or KITTI .bin files and no metadata.yaml (not a recording)"
                )
            configs = ("rt_lidar_config.json", "config.json", "../config.json")
            self.preset = preset or _config_preset(*(self.path / c for c in configs))
            if self.kind == "kitti" and self.preset is None:
                self.preset = load_preset("HDL-64E")  # the KITTI datasets' sensor
            period = scan_period_ns(self.preset) if self.preset is not None else DEFAULT_SCAN_PERIOD_NS
            self.stamps_ns = np.arange(len(self.files), dtype=np.int64) * period
            if self.kind == "kitti":
                self.stamps_ns = _kitti_times(self.path.parent / "times.txt", len(self.files), self.stamps_ns)

    def _open_bag(self) -> np.ndarray:
        from rosbags.highlevel import AnyReader

        try:
            reader = AnyReader([self.path])
            reader.open()
        except Exception as exc:  # rosbags raises its own error types for every kind of bad bag
            raise ConfigError(f"{self.path}: not a readable rosbag2 recording ({exc})") from None
        conns = [c for c in reader.connections if c.msgtype == _CLOUD_TYPE]
        if not conns:
            reader.close()
            raise ConfigError(f"{self.path}: no {_CLOUD_TYPE} topic in the bag")
        self._reader, self._conn = reader, conns[0]
        # the index: every cloud's stamp (the message bodies are read and let go, one at a time)
        messages = reader.messages(connections=[self._conn])
        stamps = np.fromiter((stamp for _conn, stamp, _raw in messages), np.int64)
        if stamps.size == 0:
            self.close()
            raise ConfigError(f"{self.path}: the topic {self._conn.topic} holds no clouds")
        # messages that share a stamp are told apart by their rank among them
        first = np.searchsorted(stamps, stamps, side="left")
        self._stamp_rank = np.arange(stamps.size) - first
        return stamps

    def __len__(self) -> int:
        return int(self.stamps_ns.size)

    def name(self, index: int) -> str:
        """A short name of scan ``index`` (its file name, or its number in the bag)."""
        return self.files[index].name if self.kind != "rosbag2" else f"{self._conn.topic}#{index}"

    def points(self, index: int) -> np.ndarray:
        """The points of scan ``index`` (read now)."""
        if not 0 <= index < len(self):
            raise IndexError(f"scan {index} of a recording of {len(self)}")
        if self.kind == "pcd":
            return read_pcd_points(self.files[index])
        if self.kind == "kitti":
            assert self.preset is not None
            return kitti_points(read_kitti_bin(self.files[index]), self.preset)
        stamp = int(self.stamps_ns[index])
        rank = int(self._stamp_rank[index])
        for i, (conn, _stamp, raw) in enumerate(
            self._reader.messages(connections=[self._conn], start=stamp, stop=stamp + 1)
        ):
            if i == rank:
                return cloud_points(self._reader.deserialize(raw, conn.msgtype))
        raise ConfigError(f"{self.path}: the cloud stamped {stamp} ns is gone from the bag")

    def scan(self, index: int) -> Scan:
        """Scan ``index`` with its recorded start time."""
        return Scan(index, int(self.stamps_ns[index]), self.points(index), 0, 0)

    def __iter__(self) -> Iterator[tuple[int, Scan]]:
        """``(stamp_ns, scan)`` in recorded order, reading one scan at a time."""
        if self.kind != "rosbag2":
            for i in range(len(self)):
                yield int(self.stamps_ns[i]), self.scan(i)
            return
        for i, (conn, stamp, raw) in enumerate(self._reader.messages(connections=[self._conn])):
            pts = cloud_points(self._reader.deserialize(raw, conn.msgtype))
            yield int(stamp), Scan(i, int(stamp), pts, 0, 0)

    def __getitem__(self, index: int) -> tuple[int, Scan]:
        index = index + len(self) if index < 0 else index
        return int(self.stamps_ns[index]), self.scan(index)

    def close(self) -> None:
        """Close the bag (nothing to do for a PCD folder)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> CloudRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
