"""The one point type every cloud that leaves the pipeline uses.

Fields: ``x, y, z`` float32 metres in the sensor frame (x forward, y left, z up, as ROS),
``intensity`` float32 in the sensor's own output units (whole multiples of the preset's
``output.intensity_step``), ``reflectivity`` float32: the measured amplitude over a white Lambertian
target's filling the beam at that range (0..1 for diffuse surfaces, which glass, fog or a target only
partly in the beam lower; above 1 on specular and retro-reflective ones: clear coat near normal
incidence, and licence plates and signs up to ~600), ``ring`` uint16, ``t`` int64 nanoseconds from the
scan start, ``return_id`` uint8, ``flags`` uint8 (see :class:`PointFlag`), ``segment`` uint32
(segmentation id of the surface hit).
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["POINT_DTYPE", "POINT_FIELDS", "PointFlag", "concat_points", "empty_points"]

POINT_DTYPE = np.dtype(
    [
        ("x", np.float32),
        ("y", np.float32),
        ("z", np.float32),
        ("intensity", np.float32),
        ("reflectivity", np.float32),
        ("ring", np.uint16),
        ("t", np.int64),
        ("return_id", np.uint8),
        ("flags", np.uint8),
        ("segment", np.uint32),
    ]
)
"""Packed structured dtype, 36 bytes a point, field order fixed."""

POINT_FIELDS: tuple[str, ...] = tuple(POINT_DTYPE.names or ())


class PointFlag(enum.IntFlag):
    """Bits of the ``flags`` field."""

    NONE = 0
    RAIN_CLUTTER = 1
    FOG_CLUTTER = 2
    SNOW_CLUTTER = 4
    BLOOM = 8
    AMBIENT_NOISE = 16
    THROUGH_GLASS = 32
    SATURATED = 64
    CROSSTALK = 128
    """A false point from another lidar's pulse (a rig's mutual interference, :mod:`rt_lidar.rig`)."""


def empty_points(n: int = 0) -> np.ndarray:
    """A zeroed point array of ``n`` points."""
    return np.zeros(n, dtype=POINT_DTYPE)


def concat_points(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate point arrays through a byte view (NumPy copies structured records field by field,
    several times slower)."""
    if not parts:
        return empty_points()
    if len(parts) == 1:
        return parts[0]
    raw = np.concatenate([np.ascontiguousarray(p).view(np.uint8) for p in parts])
    return raw.view(POINT_DTYPE)
