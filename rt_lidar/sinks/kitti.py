"""KITTI velodyne ``.bin`` files: float32 x, y, z, reflectance per point."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sinks.atomic import atomic_write

__all__ = ["read_kitti_bin", "to_kitti_array", "write_kitti_bin"]


def to_kitti_array(points: np.ndarray, intensity_max: float) -> np.ndarray:
    """(N, 4) float32: x, y, z and the sensor's intensity scaled to KITTI's [0, 1] reflectance."""
    out = np.empty((points.size, 4), np.float32)
    out[:, 0], out[:, 1], out[:, 2] = points["x"], points["y"], points["z"]
    reflectance = out[:, 3]  # computed in place: no temporaries of the scan's size
    np.divide(points["intensity"], np.float32(intensity_max), out=reflectance)
    np.clip(reflectance, 0.0, 1.0, out=reflectance)
    return out


def write_kitti_bin(path: str | Path, points: np.ndarray, intensity_max: float) -> Path:
    """Write ``points`` as a KITTI ``.bin``; returns the path."""
    with atomic_write(path) as fh:
        rows = to_kitti_array(points, intensity_max).astype("<f4", copy=False)
        fh.write(rows.reshape(-1).view(np.uint8).data)  # the array's own bytes, not a copy
    return Path(path)


def read_kitti_bin(path: str | Path) -> np.ndarray:
    """(N, 4) float32 array of a KITTI ``.bin`` file."""
    raw = np.fromfile(path, dtype="<f4")
    if raw.size % 4:
        raise ConfigError(f"{path}: size is not a multiple of 16 bytes, not a KITTI .bin")
    return raw.reshape(-1, 4)
