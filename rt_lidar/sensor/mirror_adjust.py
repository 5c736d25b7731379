"""The AT128's per-azimuth adjustments, applied to the beam geometry as Hesai's decoders apply them.

Hesai's AT128 decoders (its SDK's and nebula's ``getAzimuthAdjustV3`` / ``getElevationAdjustV3``) place
channel ``c`` of a block at mirror-encoder angle ``A`` (in the mirror field ``f`` whose range holds it)
at

- azimuth ``2 (A - start[f]) - azimuth[c] + adjA(c, A)`` (clockwise; 90 deg is the field's centre,
  our forward),
- elevation ``elevation[c] + adjE(c, A)``,

where ``adj(c, A)`` interpolates the file's table of channel ``c`` (one entry every 2 deg of encoder
from 0) linearly between the entries around ``A`` and rounds to whole 0.01 deg (half away from
zero). A column of our mirror pattern at math azimuth ``col`` (counter-clockwise, before the beam's
offset) is the encoder angle ``A = start[f] + (90 - col) / 2``; scan ``n`` uses field ``n mod F``.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.sensor.presets import SensorPreset

__all__ = ["ADJUST_STEP_DEG", "field_count", "has_adjust", "mirror_adjust_deg"]

ADJUST_STEP_DEG = 2.0
"""Encoder angle between two entries of an adjust table."""


def has_adjust(preset: SensorPreset) -> bool:
    """Whether ``preset`` has the AT128's adjust tables and mirror fields."""
    return preset.scan.mirror_fields_deg is not None and preset.beams[0].azimuth_adjust_deg is not None


def field_count(preset: SensorPreset) -> int:
    """How many scans the geometry takes to repeat: the mirror fields of a preset with adjust tables,
    else 1."""
    fields = preset.scan.mirror_fields_deg
    return len(fields) if fields is not None and has_adjust(preset) else 1


def _tables(preset: SensorPreset) -> tuple[np.ndarray, np.ndarray]:
    az = np.array([b.azimuth_adjust_deg for b in preset.beams], np.float64)
    el = np.array([b.elevation_adjust_deg for b in preset.beams], np.float64)
    return az, el


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def mirror_adjust_deg(
    preset: SensorPreset, ring: np.ndarray, col_az_deg: np.ndarray, field: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per firing: the azimuth adjustment (clockwise, deg: subtract it from a math azimuth) and the
    elevation adjustment (deg) of ``ring`` at column azimuth ``col_az_deg`` in mirror field ``field``."""
    fields = preset.scan.mirror_fields_deg
    assert fields is not None
    az_t, el_t = _tables(preset)
    n = az_t.shape[1]
    enc = np.mod(np.asarray(fields, np.float64)[field] + (90.0 - col_az_deg) / 2.0, 360.0)
    pos = enc / ADJUST_STEP_DEG
    i = np.minimum(np.floor(pos).astype(np.int64), n - 1)
    k = pos - i
    j = (i + 1) % n
    r = np.asarray(ring, np.int64)
    out = []
    for t in (az_t, el_t):
        hundredths = (1.0 - k) * t[r, i] * 100.0 + k * t[r, j] * 100.0
        out.append(_round_half_away(np.round(hundredths, 6)) / 100.0)
    return out[0], out[1]
