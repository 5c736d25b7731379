"""The receiver lens's focus and the biaxial head's near field: what share of a hard target's echo reaches
its detector, range by range, through the same receiver the rain and snow tables use.

A multi-beam lidar images each laser's spot through one receiver lens onto that laser's detector. The lens
is focused at a finite distance F (Velodyne's HDL-64E calibrations give it per laser as ``focal_distance``:
10.5-24 m for the upper block of the S3 unit in ``../shared/reference/calibrations/64e_s3-xiesc.yaml``,
median 15 m; 9-13.5 m for most of the lower block), and Velodyne's drivers add ``focal_slope x |256 (1 -
F / 131 m)^2 - 256 (1 - R / 131 m)^2|`` to the raw intensity away from it (ros-drivers
``velodyne_pointcloud/rawdata.cc``; the same in tier4's nebula).

The receiver is the one :mod:`rt_lidar.physics.particle_receiver` models for rain (docs/realism.md change
57): an aperture ``D_r`` (``optics.receiver_aperture_m``) a baseline ``b`` beside the transmitter
(``optics.receiver_baseline_m``), a detector whose field is ``theta_r`` (``optics.receiver_fov_mrad``),
the lens focused at F. A point of the lit spot at range R, ``s`` from the receiver's axis, reaches the
detector through the part of the aperture :func:`~rt_lidar.physics.particle_receiver.collected_fraction`
gives (the defocus blur and the parallax together); a hard target's share ``eta(R)`` is that averaged over
the beam's spot (its irradiance, the preset's profile: the spot convolved with the blur, integrated).
It is tabulated once per focus distance on a uniform grid of ranges (:data:`TABLE_POINTS` ranges out to
where every point of the spot is collected whole, 1 beyond) and read by linear interpolation with the
same float64 steps on every backend (NumPy here and on CuPy, ``_path_factor.c``'s twin): the table is a
host input, so every backend reads the same bits. For the HDL-64E (D_r 0.05 m, b 30.5 mm, theta_r 11.79
mrad, F 15 m): 0.21 at 4 m, 0.63 at 6 m, 0.96 at 8 m, 0.9997 at 10 m, 1 from 10.9 m on (the former
detector sized to the 2 mrad spot gave 0.045 / 0.14 / 0.32 there and 0.59 at 10 m).

It multiplies the receiver's range law (:mod:`rt_lidar.physics.receiver_range`), so detection sees it and
calibrated reflectivity divides it out again, as the drivers' focal compensation does. A preset with
``optics.receiver_near_field`` and no focus (the Velodynes focused at infinity, docs/realism.md change 63)
takes the same share with ``F`` infinite: only the parallax and the field's reach, ``theta_r R / 2``
against the baseline, make it (for the VLP-32C: 0.02 at 3 m, 0.36 at 10 m, 0.79 at 20 m of its share at
its 10 % range; its field is narrower than the Gaussian's wing, so the table is over the share there, the
datasheet figure holding the threshold, as a calibration's near focus below is over its peak). Other
presets without ``optics.receiver_focus_m`` keep eta = 1 (their bytes unchanged).

Each laser may have its own focus (``Beam.receiver_focus_m``: a calibration's ``focal_distance``, e.g.
the S3's lower block at ~11 m). The preset-wide ``optics.receiver_focus_m`` stays in the receiver's path
factor (what every echo and the white reference target see); a beam with its own F changes its object
and glass echoes by :func:`beam_focus_ratio`, ``eta(R, F_beam) / eta(R, F_preset)`` (tabulated per ring),
and calibrated reflectivity divides that ratio out again
(:meth:`rt_lidar.physics.echo.EchoModel.beam_focus`), so a laser's reading is focus-compensated with its
own F as Velodyne's drivers compensate each laser's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rt_lidar.sensor.presets import SensorPreset

__all__ = [
    "TABLE_POINTS",
    "FocusTable",
    "beam_focus_ratio",
    "beam_focus_table",
    "beam_inverse_focus",
    "focus_gain",
    "focus_parameters",
    "hard_target_share",
    "prepare_focus",
    "receiver_focus_gain",
]

TABLE_POINTS = 1025
"""Ranges in each focus table (a uniform grid from 0 to where the whole spot is collected)."""
SPOT_POINTS = 1024
"""Points of the beam's spot each table range averages the receiver's share over."""
ETA_FLOOR = 1e-6
"""The least share a table holds (a laser's ratio divides by the preset-wide one)."""
FAR_SHARE_TOLERANCE = 1e-3
"""A receiver focused at infinity whose field never takes the whole spot (its Gaussian wing) nears its
far share only slowly: its table ends where the share is within this part of its farthest probe's."""


@dataclass(frozen=True)
class FocusTable:
    """A hard target's share ``eta`` at ranges ``0, dr, 2 dr, ...`` (``table``, float64, read-only, 1 at
    its end and beyond); ``inv_dr`` = 1 / dr."""

    inv_dr: float
    table: np.ndarray = field(compare=False, repr=False)


def hard_target_share(preset: SensorPreset, focus_m: float, range_m: np.ndarray) -> np.ndarray:
    """The share of a hard target's echo at ``range_m`` (float64) that reaches the detector of
    ``preset``'s receiver (:func:`rt_lidar.physics.weather.receiver_optics`, the rain tables' receiver)
    with its lens focused at ``focus_m``: :func:`~rt_lidar.physics.particle_receiver.collected_fraction`
    averaged over the beam's spot, weighted by its irradiance."""
    from rt_lidar.physics import particle_receiver as pr  # (weather imports receiver_range, which imports us)
    from rt_lidar.physics.weather import receiver_optics

    rx = dataclasses.replace(receiver_optics(preset), focus_m=float(focus_m))
    z_all = np.asarray(range_m, float).ravel()
    out = np.zeros(z_all.shape)
    if rx.filled_exit_m is not None:  # a beam filling its exit: its own spot sampling, range by range
        for i, z in enumerate(z_all):
            if z > 0.0:
                s, _, weight = pr._beam_points(float(z), rx, SPOT_POINTS)
                f = pr.collected_fraction(s, float(z), rx.aperture_m, rx.fov_rad, rx.focus_m)
                out[i] = float(np.sum(f * weight) / np.sum(weight))
        return out.reshape(np.shape(range_m))
    live = np.flatnonzero(z_all > 0.0)
    for start in range(0, live.size, 64):  # a block of ranges at once: the same bits as one at a time
        idx = live[start : start + 64]
        z = z_all[idx][:, None]
        s, _, weight = pr._beam_points(z, rx, SPOT_POINTS)
        f = pr.collected_fraction(s, z, rx.aperture_m, rx.fov_rad, rx.focus_m)
        out[idx] = np.sum(f * weight, axis=1) / np.sum(weight)
    return out.reshape(np.shape(range_m))


@functools.lru_cache(maxsize=32)
def _share_table(preset: SensorPreset, focus_m: float) -> tuple[float, np.ndarray, float]:
    """``(range where the spot is collected whole, share at TABLE_POINTS ranges from 0 to it, 1.0)``; for a
    focus so near that the receiver never collects the whole spot (a calibration's focal distance of a
    few metres: its ``focal_distance`` is where the laser's intensity peaks), the share over its peak, to
    the range of that peak (:func:`_peak_table`)."""
    probe = np.geomspace(0.05, 400.0, 400)
    end = 0.05
    for top in range(probe.size, 0, -64):  # from the far end: the first probe short of 1 ends the table
        share = hard_target_share(preset, focus_m, probe[max(top - 64, 0) : top])
        short = np.flatnonzero(share < 1.0 - 1e-12)
        if short.size:
            last = max(top - 64, 0) + int(short[-1])
            if last == probe.size - 1:  # short of 1 at the farthest probe: never collected whole
                if math.isinf(focus_m):
                    return _far_table(preset, probe)
                return _peak_table(preset, focus_m, probe)
            end = float(probe[last + 1])
            break
    grid = np.linspace(0.0, end, TABLE_POINTS)
    table = np.maximum(hard_target_share(preset, focus_m, grid), ETA_FLOOR)
    table[-1] = 1.0
    table.flags.writeable = False
    return end, table, 1.0


def _peak_table(preset: SensorPreset, focus_m: float, probe: np.ndarray) -> tuple[float, np.ndarray, float]:
    """:func:`_share_table` for a receiver that never collects the whole spot: its share over the peak
    share, ending at the peak's range (1 beyond), so that such a laser loses echoes only nearer than where
    its intensity peaks, as the drivers' focal compensation presumes, not at every range."""
    share = hard_target_share(preset, focus_m, probe)
    k = int(np.argmax(share))
    return _table_over(preset, focus_m, float(probe[k]), float(share[k]))


def _far_table(preset: SensorPreset, probe: np.ndarray) -> tuple[float, np.ndarray, float]:
    """:func:`_share_table` for a receiver focused at infinity whose field never takes the whole spot:
    the share grows with range toward its far value (the wing outside the field), so the table is over
    the share at the preset's 10 % range (the datasheet figure the threshold is set at: that loss is in
    the figure; the farthest probe where none is given) and ends there, or sooner where the share comes
    within :data:`FAR_SHARE_TOLERANCE` of it (1 beyond)."""
    r10 = preset.range.range_10pct_m
    ref = float(r10) if r10 is not None else float(probe[-1])
    far = float(hard_target_share(preset, math.inf, np.array([ref]))[0])
    share = hard_target_share(preset, math.inf, probe)
    near_far = share >= far * (1.0 - FAR_SHARE_TOLERANCE)
    end = min(ref, float(probe[int(np.argmax(near_far))])) if near_far.any() else ref
    return _table_over(preset, math.inf, end, far)


def _table_over(
    preset: SensorPreset, focus_m: float, end: float, ref: float
) -> tuple[float, np.ndarray, float]:
    """``(end, the share over ref at TABLE_POINTS ranges from 0 to end, ref)``: the table of a receiver
    whose share never reaches 1, held to ``ref`` (its peak, or its share at the 10 % range) and 1 from
    ``end`` on (:func:`_peak_table`, :func:`_far_table`)."""
    grid = np.linspace(0.0, end, TABLE_POINTS)
    table = np.clip(hard_target_share(preset, focus_m, grid) / ref, ETA_FLOOR, 1.0)
    table[-1] = 1.0
    table.flags.writeable = False
    return end, table, ref


def _preset_focus(preset: SensorPreset) -> float | None:
    """The preset-wide focus the hard targets' share takes: ``optics.receiver_focus_m``, infinity for a
    preset with ``optics.receiver_near_field`` and no focus, None (no share: eta = 1) otherwise."""
    f = preset.optics.receiver_focus_m
    if f is not None:
        return float(f)
    return math.inf if preset.optics.receiver_near_field else None


def _grid_end(preset: SensorPreset, foci: list[float]) -> float:
    """One grid's end for every focus of ``preset`` (the farthest any needs)."""
    return max(_share_table(preset, f)[0] for f in foci)


@functools.lru_cache(maxsize=32)
def _table_on(preset: SensorPreset, focus_m: float, end: float) -> np.ndarray:
    """The share at ``focus_m`` on the grid ``0 .. end`` (:data:`TABLE_POINTS` ranges; read-only)."""
    own_end, own, peak = _share_table(preset, focus_m)
    if own_end == end:
        return own
    grid = np.linspace(0.0, end, TABLE_POINTS)
    out = np.ones(TABLE_POINTS)
    short = grid < own_end  # beyond its own end the whole spot is collected (or its peak share reached)
    share = hard_target_share(preset, focus_m, grid[short])
    out[short] = np.maximum(share, ETA_FLOOR) if peak == 1.0 else np.clip(share / peak, ETA_FLOOR, 1.0)
    out.flags.writeable = False
    return out


def _foci(preset: SensorPreset) -> list[float]:
    """Every focus distance ``preset`` uses (preset-wide and per beam)."""
    out = {float(b.receiver_focus_m) for b in preset.beams if b.receiver_focus_m is not None}
    f = _preset_focus(preset)
    if f is not None:
        out.add(f)
    return sorted(out)


@functools.lru_cache(maxsize=32)
def focus_parameters(preset: SensorPreset) -> FocusTable | None:
    """The preset-wide focus's :class:`FocusTable`, or None when hard targets lose no near-field share (no
    ``optics.receiver_focus_m`` and no ``optics.receiver_near_field``)."""
    f = _preset_focus(preset)
    if f is None:
        return None
    end = _grid_end(preset, _foci(preset))
    return FocusTable((TABLE_POINTS - 1) / end, _table_on(preset, float(f), end))


def _interpolate(xp: Any, table: Any, row_start: Any, n: int, inv_dr: float, range_m: Any) -> Any:
    """Linear interpolation in ``table`` (flat, rows of ``n`` ranges, ``row_start`` the first index of
    each value's row) at ``range_m``: ``x = fmin(fmax(R inv_dr, 0), n - 1)``, ``i = fmin(floor(x), n -
    2)``, ``a + (x - i) (b - a)`` (float64; NaN reads as 0, +inf as the last range)."""
    r = xp.asarray(range_m, dtype=xp.float64)
    x = xp.fmin(xp.fmax(r * inv_dr, 0.0), float(n - 1))
    i = xp.fmin(xp.floor(x), float(n - 2))
    t = x - i
    k = i.astype(xp.int64) + row_start
    a = xp.take(table, k)
    b = xp.take(table, k + 1)
    return a + t * (b - a)


def focus_gain(xp: Any, range_m: Any, params: FocusTable, table: Any = None) -> Any:
    """``eta(R)`` (float64 array of ``xp``, NumPy or CuPy) at ``range_m`` for ``focus_parameters``'s
    ``params`` (``table``: its table already on ``xp``): the share of an echo that reaches its detector."""
    tab = params.table if table is None else table
    return _interpolate(xp, tab, 0, int(tab.shape[0]), params.inv_dr, range_m)


def receiver_focus_gain(preset: SensorPreset, range_m: np.ndarray) -> np.ndarray | None:
    """:func:`focus_gain` on the host (float32), or None where the preset's receiver has no focus set."""
    params = focus_parameters(preset)
    if params is None:
        return None
    return np.asarray(focus_gain(np, range_m, params), np.float32)


def beam_inverse_focus(preset: SensorPreset) -> np.ndarray | None:
    """Each ring's ``1 / F`` (1/m, float64, indexed by ring) where any beam sets its own
    ``receiver_focus_m`` (the others take ``optics.receiver_focus_m``, 0 for infinity where the preset has
    ``optics.receiver_near_field``; +inf where a beam has no focus at all: no loss at any range); None
    when no beam does (the preset-wide focus alone applies)."""
    if all(b.receiver_focus_m is None for b in preset.beams):
        return None
    default = _preset_focus(preset)
    inv = np.full(max(b.ring for b in preset.beams) + 1, np.inf)
    for b in preset.beams:
        focus = b.receiver_focus_m if b.receiver_focus_m is not None else default
        if focus is not None:
            inv[b.ring] = 1.0 / focus
    return inv


@functools.lru_cache(maxsize=32)
def beam_focus_table(preset: SensorPreset) -> FocusTable | None:
    """Each ring's ``eta(R, F_beam) / eta(R, F_preset)`` (a :class:`FocusTable` whose table holds one row
    of :data:`TABLE_POINTS` ranges per ring, flattened; 1 where a ring has the preset's focus, ``1 /
    eta(R, F_preset)`` where it has none), or None when no beam sets its own focus."""
    inv = beam_inverse_focus(preset)
    if inv is None:
        return None
    foci = _foci(preset)
    end = _grid_end(preset, foci)
    ones = np.ones(TABLE_POINTS)
    f0 = _preset_focus(preset)
    base = ones if f0 is None else _table_on(preset, f0, end)
    rows = np.empty((inv.size, TABLE_POINTS))
    for ring, v in enumerate(inv):  # 1 / F = 0: a ring focused at infinity where the preset has a near field
        own = ones if not np.isfinite(v) else _table_on(preset, 1.0 / float(v) if v > 0 else math.inf, end)
        rows[ring] = own / base
    table = rows.ravel()
    table.flags.writeable = False
    return FocusTable((TABLE_POINTS - 1) / end, table)


def beam_focus_ratio(xp: Any, preset: SensorPreset, table: Any, ring: Any, range_m: Any) -> Any:
    """``eta(R, F_beam) / eta(R, F_preset)`` (float64 array of ``xp``) of echoes at ``range_m`` fired by
    rings ``ring``, read from :func:`beam_focus_table`'s table (``table``, on ``xp``): what a beam's own
    focus changes against the preset-wide one that the path factor applies (1 where they agree)."""
    params = beam_focus_table(preset)
    assert params is not None
    start = xp.asarray(ring, dtype=xp.int64) * TABLE_POINTS
    return _interpolate(xp, table, start, TABLE_POINTS, params.inv_dr, range_m)


def prepare_focus(preset: SensorPreset) -> None:
    """Build ``preset``'s focus tables now (cached per preset), so the first frame does not."""
    focus_parameters(preset)
    beam_focus_table(preset)
