"""The one point type every cloud that leaves the pipeline uses.

Fields: ``x, y, z`` float32 metres in the sensor frame (x forward, y left, z up, as ROS),
``intensity`` float32 in the sensor's own output units (whole multiples of the preset's
``output.intensity_step``, 0..``intensity_max``), ``reflectivity`` float32: the measured amplitude over
a white Lambertian target's filling the beam at that range (0..1 for diffuse surfaces, which glass, fog
or a target only partly in the beam lower; above 1 on specular and retro-reflective ones: clear coat
near normal incidence, and licence plates and signs up to ~600), ``ring`` uint16, ``t`` int64
nanoseconds from the scan start, ``return_id`` uint8, ``flags`` uint16 (see :class:`PointFlag`: bits
0-7 what the physics made of the point, bits 8-15 what an injected fault did to it, docs/faults.md),
``segment`` uint32 (segmentation id of the surface hit).
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
        ("flags", np.uint16),
        ("segment", np.uint32),
    ]
)
"""Packed structured dtype, 37 bytes a point, field order fixed (``flags`` widened to uint16 for the
fault bits 8-15, issue 42: it was uint8 and 36 bytes)."""

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
    # Bits 8-15: what an injected fault did to the point (:mod:`rt_lidar.faults`, docs/faults.md).
    FAULT_DIRT = 256
    """Seen through a dirty window (power T^2), or a near-range scatter point of the dirt itself."""
    FAULT_BLINDING = 512
    """A saturated false detection of a blinding source."""
    FAULT_POWER = 1024
    """Its echo power was scaled by a weak channel or the receiver's gain drift."""
    FAULT_NOISE = 2048
    """A false detection of a noise burst."""
    FAULT_RANGE = 4096
    """Its range is biased (range_bias)."""
    FAULT_TIMING = 8192
    """Its time or stamp is off (rotation_wobble, clock_offset, clock_drift)."""
    FAULT_MOUNT = 16384
    """Its sensor drifted on its mount (mount_drift)."""
    FAULT_FROZEN = 32768
    """A repeat of an earlier scan (frozen)."""


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
