"""``--sink las:DIR``: one LAS 1.4 file (point format 6) per scan, with extra dimensions for the fields
LAS has no slot for (reflectivity, ring, t, return_id, flags, segment). Written atomically. The header's
creation day is the scan's stamp's on the run's stamp clock (``--stamp``: the sim clock's day, 1970-01-01
from sim time 0, or the wall clock's), so a run repeats byte for byte on any day."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink, target_dir

__all__ = ["EXTRA_DIMS", "LasFolderSink", "read_las_points", "write_las"]

EXTRA_DIMS = (
    ("reflectivity", "f4"),
    ("ring", "u2"),
    ("t", "i8"),
    ("return_id", "u1"),
    ("flags", "<u2"),
    ("segment", "u4"),
)
SCALE_M = 1e-4


def write_las(
    path: str | Path, points: np.ndarray, intensity_max: int = 255, creation_date: date | None = None
) -> None:
    """Write ``points`` (POINT_DTYPE) as LAS 1.4; intensity is scaled to uint16 by ``intensity_max``;
    ``creation_date`` is the header's creation day (None: today, laspy's default)."""
    import laspy

    header = laspy.LasHeader(point_format=6, version="1.4")
    header.creation_date = creation_date
    header.scales = np.array([SCALE_M] * 3)
    header.offsets = np.zeros(3)
    for name, kind in EXTRA_DIMS:
        header.add_extra_dim(laspy.ExtraBytesParams(name=name, type=np.dtype(kind)))
    las = laspy.LasData(header)
    las.x, las.y, las.z = points["x"], points["y"], points["z"]
    scale = 65535.0 / max(intensity_max, 1)
    las.intensity = np.clip(np.round(points["intensity"] * scale), 0, 65535).astype(np.uint16)
    las.return_number = np.minimum(points["return_id"].astype(np.uint8) + 1, 15)
    las.number_of_returns = np.maximum(las.return_number, 1)
    for name, _ in EXTRA_DIMS:
        las[name] = points[name]
    with atomic_write(path) as fh:
        las.write(fh)


def read_las_points(path: str | Path) -> np.ndarray:
    """The points of a LAS file :func:`write_las` wrote (POINT_DTYPE); ``intensity`` is LAS's 16-bit
    value (0..65535 over the sensor's range: :func:`write_las` scaled it by ``intensity_max``)."""
    import laspy

    from rt_lidar.points import empty_points

    las = laspy.read(str(path))
    pts = empty_points(len(las.points))
    pts["x"], pts["y"], pts["z"] = las.x, las.y, las.z
    pts["intensity"] = np.asarray(las.intensity, np.float32)
    names = set(las.point_format.extra_dimension_names)
    for name, _ in EXTRA_DIMS:
        if name in names:
            pts[name] = las[name]
    return pts


@register_sink("las")
class LasFolderSink:
    """One ``NNNNNN.las`` per scan in ``DIR``, with the resolved config beside them."""

    def __init__(self, target: str, options: dict[str, str]) -> None:
        SinkOptions("las", options)  # takes none
        self.folder = target_dir(target)
        self.count = 0
        self.intensity_max = 255
        self.context: SinkContext | None = None

    def open(self, context: SinkContext) -> None:
        """Write the resolved preset and scenario."""
        from rt_lidar.sinks.files import write_resolved_config

        self.intensity_max = context.preset.output.intensity_max
        self.context = context
        write_resolved_config(self.folder, context)

    def write(self, scan: Scan) -> None:
        """Write one scan."""
        day = None
        if self.context is not None:  # the scan's stamp's day, on the run's stamp clock
            stamp_ns = int(scan.start_ns) + self.context.stamp_offset_ns(scan)
            day = datetime.fromtimestamp(stamp_ns // 10**9, UTC).date()
        write_las(self.folder / f"{self.count:06d}.las", scan.points, self.intensity_max, day)
        self.count += 1

    def close(self) -> None:
        """Nothing is held open."""
