"""Beams that start off the sensor axis: where their points are, and the range along each beam.

A vendor's decoder places a return at ``origin + range * direction``: the beam's origin
(:attr:`~rt_lidar.sensor.presets.SensorPreset.beam_origins_m`, turned with the head to the firing's
column: :func:`~rt_lidar.sensor.scan_pattern.beam_origins`) plus the range along the beam. The pipeline
casts each ray from that origin, so a point is where its echo came from; a packet writer needs the range
back from the point, which :func:`ranges_along_beams` gives from per-ring constants alone (origin and
direction turn together with the head, so their dot product and lengths are the same in every column).
Presets without origins never come here: their points stay ``range * direction`` bit for bit.

Velodyne's two-point distance corrections (``dist_correction_x`` / ``_y``: the HDL-64E's) go further:
velodyne_decoder adds to the distance of the point's x and of its y and z a correction that depends on
how far out the point lies along x and y (:func:`two_point_shift`), so the decoded point leaves the
beam's line by up to a few centimetres; :func:`place_as_decoded` puts our point there too, and the
packet writer inverts it (:func:`ranges_from_decoded`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import beam_origins, scan_period_ns

__all__ = [
    "add_beam_origins",
    "beam_origin_constants",
    "firing_geometry",
    "place_as_decoded",
    "ranges_along_beams",
    "ranges_from_decoded",
    "two_point_corrections",
    "two_point_shift",
]


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


@functools.lru_cache(maxsize=16)
def two_point_corrections(preset: SensorPreset) -> np.ndarray | None:
    """(n_rings, 3) float64 ``dist_correction``, ``_x``, ``_y`` per ring, or None when no beam has
    two-point corrections (both ``_x`` and ``_y`` non-zero; a beam without them gets its
    ``dist_correction`` for all three: no shift)."""
    if not any(b.dist_correction_x_m and b.dist_correction_y_m for b in preset.beams):
        return None
    out = np.zeros((preset.n_rings, 3))
    for b in preset.beams:
        dc = b.dist_correction_m or 0.0
        two = bool(b.dist_correction_x_m and b.dist_correction_y_m)  # velodyne_decoder's condition
        out[b.ring] = (
            (dc, b.dist_correction_x_m or 0.0, b.dist_correction_y_m or 0.0) if two else (dc, dc, dc)
        )
    out.flags.writeable = False
    return out


TWO_POINT_FAR_M = 25.04
HDL64E_DISTANCE_STEP_M = 0.002
"""The HDL-64E packets' distance step: the only Velodyne whose files carry two-point corrections."""
"""The two-point calibration's far point: packet distances (less ``dist_correction``) from there on get
``dist_correction`` alone (velodyne_decoder 3.1, after the HDL-64E S3 manual)."""


def two_point_shift(table: Any, ring: Any, s: Any, d: Any, xp: Any = np) -> Any:
    """(N, 3) float64 shift velodyne_decoder 3.1 gives points at distance ``s`` (with
    ``dist_correction``) along unit directions ``d`` (our frame) of ``ring`` beyond ``s * d`` and the
    beam's offsets. Its x distance correction is interpolated between ``dist_correction_x`` at 2.4 m and
    ``dist_correction`` at 25.04 m of the point's |Velodyne x| (our |y|), its y one between
    ``dist_correction_y`` at 1.93 m and 25.04 m of |Velodyne y| (our |x|), its z one is their mean;
    each moves the point along that axis's component of the beam. On array module ``xp`` (NumPy, or CuPy
    in the device frame with ``table`` there too)."""
    dc, dcx, dcy = (table[ring, k] for k in range(3))
    u_x = (xp.abs(s * d[:, 1]) - 2.4) / (TWO_POINT_FAR_M - 2.4)
    u_y = (xp.abs(s * d[:, 0]) - 1.93) / (TWO_POINT_FAR_M - 1.93)
    # the decoder compares the packet's distance (whole steps of the HDL-64E's 2 mm), not the exact one:
    # a point within a step of the far point lands on the side its packet puts it
    near = xp.around((s - dc) / HDL64E_DISTANCE_STEP_M) * HDL64E_DISTANCE_STEP_M < TWO_POINT_FAR_M
    corr_x = xp.where(near, (1.0 - u_x) * (dcx - dc), 0.0)
    corr_y = xp.where(near, (1.0 - u_y) * (dcy - dc), 0.0)
    return xp.stack([corr_y * d[:, 0], corr_x * d[:, 1], 0.5 * (corr_x + corr_y) * d[:, 2]], axis=1)


def place_as_decoded(
    preset: SensorPreset, points: np.ndarray, origins: np.ndarray, d: np.ndarray, ranges: np.ndarray
) -> None:
    """Move structured ``points`` (``ranges`` * ``d`` so far) to where the vendor's decoder puts them:
    by their (N, 3) beam ``origins``, and by the two-point corrections where the preset has them."""
    add_beam_origins(points, origins)
    table = two_point_corrections(preset)
    if table is None:
        return
    on_line = origins.astype(np.float64) + d.astype(np.float64) * ranges.astype(np.float64)[:, None]
    ring = points["ring"].astype(np.int64)
    shift = two_point_shift(table, ring, ranges.astype(np.float64), d.astype(np.float64))
    for k, axis in enumerate("xyz"):
        points[axis] = (on_line[:, k] + shift[:, k]).astype(np.float32)


def ranges_from_decoded(
    preset: SensorPreset, points: np.ndarray, origins: np.ndarray, d: np.ndarray, iterations: int = 4
) -> np.ndarray:
    """(N,) float64 distance along each beam that :func:`place_as_decoded` turned into ``points``
    (given each point's beam origin and unit direction ``d``, float64 (N, 3)): solved by a few Newton
    steps along the beam (the shift changes by under 1 mm a metre of range)."""
    table = two_point_corrections(preset)
    xyz = np.column_stack([points[a].astype(np.float64) for a in "xyz"])
    s = np.einsum("ij,ij->i", xyz - origins, d)
    if table is None:
        return s
    ring = points["ring"].astype(np.int64)
    s = _newton_along_beam(table, ring, xyz, origins, d, s, iterations)
    # Near the calibration's far point the shift jumps to 0: a point placed just inside it (shifted)
    # projects to a range just outside it, where the unshifted line is a false fixed point. Such rows
    # start again from inside, and keep whichever range rebuilds the point.
    miss = _rebuild_error(table, ring, xyz, origins, d, s) > 1e-4
    if np.any(miss):
        inside = table[ring[miss], 0] + TWO_POINT_FAR_M - 2.0 * HDL64E_DISTANCE_STEP_M
        s_in = np.minimum(s[miss], inside)
        args = (table, ring[miss], xyz[miss], origins[miss], d[miss])
        s_in = _newton_along_beam(*args, s_in, iterations)
        better = _rebuild_error(*args, s_in) < _rebuild_error(*args, s[miss])
        s[np.flatnonzero(miss)[better]] = s_in[better]
    return s


def _newton_along_beam(
    table: np.ndarray,
    ring: np.ndarray,
    xyz: np.ndarray,
    origins: np.ndarray,
    d: np.ndarray,
    s: np.ndarray,
    n: int,
) -> np.ndarray:
    for _ in range(n):
        on_line = origins + d * s[:, None]
        s = s + np.einsum("ij,ij->i", xyz - on_line - two_point_shift(table, ring, s, d), d)
    return s


def _rebuild_error(
    table: np.ndarray, ring: np.ndarray, xyz: np.ndarray, origins: np.ndarray, d: np.ndarray, s: np.ndarray
) -> np.ndarray:
    rebuilt = origins + d * s[:, None] + two_point_shift(table, ring, s, d)
    return np.linalg.norm(rebuilt - xyz, axis=1)


def firing_geometry(
    preset: SensorPreset, t_ns: np.ndarray, ring: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) float64 unit directions and beam origins of the firings of ``ring`` at times ``t_ns`` (ns
    since sensor start) of a rotating preset, as :mod:`~rt_lidar.sensor.scan_pattern` fires them."""
    s = preset.scan
    period = scan_period_ns(preset)
    phase = np.mod(np.asarray(t_ns, np.int64), period).astype(np.float64) / period
    sign = -1.0 if s.rotation_direction == "cw" else 1.0
    r = np.asarray(ring, np.int64)
    az = np.mod(
        s.scan_start_azimuth_deg + sign * 360.0 * phase + preset.azimuth_offsets_deg[r] + 180.0, 360.0
    )
    az -= 180.0
    el = np.radians(preset.elevations_deg[r])
    a = np.radians(az)
    d = np.stack([np.cos(el) * np.cos(a), np.cos(el) * np.sin(a), np.sin(el)], axis=1)
    o = beam_origins(preset, r, az)
    return d, (np.zeros_like(d) if o is None else o.astype(np.float64))
