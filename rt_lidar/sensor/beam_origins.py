"""Beams that start off the sensor axis: where their points are, and the range along each beam.

A vendor's decoder places a return at ``origin + range * direction``: the beam's origin
(:attr:`~rt_lidar.sensor.presets.SensorPreset.beam_origins_m`, turned with the head to the firing's
column: :func:`~rt_lidar.sensor.scan_pattern.beam_origins`) plus the range along the beam. The pipeline
casts each ray from that origin, so a point is where its echo came from; a packet writer needs the range
back from the point, which :func:`ranges_along_beams` gives from per-ring constants alone (origin and
direction turn together with the head, so their dot product and lengths are the same in every column).
Presets without origins never come here: their points stay ``range * direction`` bit for bit.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.sensor.presets import SensorPreset

__all__ = ["add_beam_origins", "beam_origin_constants", "ranges_along_beams"]


def add_beam_origins(points: np.ndarray, origins: np.ndarray) -> None:
    """Move structured ``points`` (x, y, z) by their (N, 3) sensor-frame beam ``origins``, in place."""
    for k, axis in enumerate("xyz"):
        points[axis] += origins[:, k].astype(np.float32, copy=False)


def beam_origin_constants(preset: SensorPreset) -> tuple[np.ndarray, np.ndarray]:
    """Per ring: the dot product of the beam's origin and its direction, and the origin's squared
    length (both float64; zeros for a preset without origins)."""
    n = preset.n_rings
    o = preset.beam_origins_m
    if o is None:
        return np.zeros(n), np.zeros(n)
    el = np.radians(preset.elevations_deg)
    az = np.radians(preset.azimuth_offsets_deg)  # the direction in the head frame of its column
    d = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
    return np.einsum("ij,ij->i", o, d), np.einsum("ij,ij->i", o, o)


def ranges_along_beams(preset: SensorPreset, points: np.ndarray) -> np.ndarray:
    """(N,) float64 range of each point along its beam, from the beam's origin: the ``s`` of
    ``xyz = origin + s * direction`` (the point's norm for a preset without origins)."""
    x, y, z = (points[a].astype(np.float64) for a in "xyz")
    r2 = x * x + y * y + z * z
    if preset.beam_origins_m is None:
        return np.sqrt(r2)
    dot, o2 = beam_origin_constants(preset)
    ring = points["ring"].astype(np.int64)
    k = dot[ring]
    return -k + np.sqrt(np.maximum(k * k + r2 - o2[ring], 0.0))
