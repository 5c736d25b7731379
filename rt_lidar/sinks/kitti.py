"""KITTI velodyne ``.bin`` files: float32 x, y, z, reflectance per point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sinks.atomic import atomic_write

__all__ = ["read_kitti_bin", "to_kitti_array", "write_kitti_bin"]


def to_kitti_array(points: np.ndarray, intensity_max: float) -> np.ndarray:
    """(N, 4) float32: x, y, z and the sensor's intensity scaled to KITTI's [0, 1] reflectance."""
    out = np.empty((points.size, 4), np.float32)
    reflectance = out[:, 3]  # computed in place: no temporaries of the scan's size
    names = points.dtype.names or ()
    fields: dict[str, Any] = dict(points.dtype.fields or {})
    if names[:4] == ("x", "y", "z", "intensity") and all(
        fields[n][:2] == (np.dtype("<f4"), 4 * k) for k, n in enumerate(names[:4])
    ):  # x, y, z, intensity lead each record as a KITTI row does: 16 bytes a point in one copy
        records = np.ascontiguousarray(points)
        out.view("V16").reshape(-1)[:] = np.ndarray(
            (points.size,), "V16", buffer=records, strides=(points.dtype.itemsize,)
        )
        np.divide(reflectance, np.float32(intensity_max), out=reflectance)
    else:
        out[:, 0], out[:, 1], out[:, 2] = points["x"], points["y"], points["z"]
        np.divide(points["intensity"], np.float32(intensity_max), out=reflectance)
    np.clip(reflectance, 0.0, 1.0, out=reflectance)
    return out


def write_kitti_bin(path: str | Path, points: np.ndarray, intensity_max: float) -> Path:
    """Write ``points`` as a KITTI ``.bin``; returns the path."""
    rows = to_kitti_array(points, intensity_max).astype("<f4", copy=False)
    with atomic_write(path, size_hint=rows.nbytes) as fh:
        fh.write(rows.reshape(-1).view(np.uint8).data)  # the array's own bytes, not a copy
    return Path(path)


def read_kitti_bin(path: str | Path) -> np.ndarray:
    """(N, 4) float32 array of a KITTI ``.bin`` file."""
    raw = np.fromfile(path, dtype="<f4")
    if raw.size % 4:
        raise ConfigError(f"{path}: size is not a multiple of 16 bytes, not a KITTI .bin")
    return raw.reshape(-1, 4)
