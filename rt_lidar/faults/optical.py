"""Faults that act on the echo power before detection: a covered or dirty window, dead and weak
channels, the receiver's gain. They scale each ray's two-way transmission in the radar equation
(``Hits.glass_transmission``, the factor every echo model multiplies its power by), so detection,
range noise, intensity and reflectivity follow as the physics computes them: dirt of one-way
transmission T takes T^2 off the echo, and a return is lost where that puts it below threshold.

Light from outside that enters the receiver once passes the window one way: the window alone (a
blockage 0, dirt T; not the channel or gain faults, which act on the sensor's own pulse and echo) gives
each ray ``Hits.window_one_way``, which dims the sunlight background and another sensor's pulse.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rt_lidar.faults.spec import Blockage, DeadChannel, Dirt, Fault, GainDrift, WeakChannel
from rt_lidar.kernels.xp import array_module
from rt_lidar.pipeline.sources import Hits

__all__ = [
    "POWER_KINDS",
    "in_azimuth",
    "in_elevation",
    "power_factor",
    "window_one_way_factor",
    "with_power_faults",
]

POWER_KINDS = (Blockage, Dirt, DeadChannel, WeakChannel, GainDrift)


def in_azimuth(az_deg: np.ndarray, span: tuple[float, float]) -> np.ndarray:
    """Which azimuths (deg, any turn) lie in ``span = [from, to]`` counter-clockwise (x forward, y left;
    ``from > to`` wraps through 0; a span of 360 deg or more is everything)."""
    lo, hi = span
    width = hi - lo
    if width >= 360.0:
        return np.ones(np.shape(az_deg), bool)
    width = width % 360.0
    return np.asarray(np.mod(np.asarray(az_deg, np.float64) - lo, 360.0) <= width)


def in_elevation(el_deg: np.ndarray, span: tuple[float, float] | None) -> np.ndarray:
    """Which elevations lie in ``span`` (None: all)."""
    if span is None:
        return np.ones(np.shape(el_deg), bool)
    el = np.asarray(el_deg, np.float64)
    return np.asarray((el >= span[0]) & (el <= span[1]))


def _active(fault: Fault, t_s: np.ndarray) -> np.ndarray:
    on = t_s >= fault.start_s
    if fault.end_s is not None:
        on &= t_s < fault.end_s
    return np.asarray(on)


def power_factor(
    faults: tuple[Fault, ...], ring: np.ndarray, t_ns: np.ndarray, az_deg: np.ndarray, el_deg: np.ndarray
) -> np.ndarray | None:
    """The factor on each pulse's echo power of the power faults among ``faults`` (None: all 1)."""
    factor: np.ndarray | None = None
    t_s = np.asarray(t_ns, np.int64) * 1e-9
    for f in faults:
        if not isinstance(f, POWER_KINDS):
            continue
        on = _active(f, t_s)
        if not on.any():
            continue
        if factor is None:
            factor = np.ones(t_s.shape, np.float64)
        if isinstance(f, (Blockage, Dirt)):
            sel = on & in_azimuth(az_deg, f.azimuth_deg) & in_elevation(el_deg, f.elevation_deg)
            factor[sel] *= 0.0 if isinstance(f, Blockage) else f.transmission**2
        elif isinstance(f, (DeadChannel, WeakChannel)):
            sel = on & np.isin(ring, np.asarray(f.rings))
            factor[sel] *= 0.0 if isinstance(f, DeadChannel) else f.power_scale
        else:
            gain = np.maximum(f.gain + f.gain_per_s * (t_s - f.start_s), 0.0)
            factor[on] *= gain[on]
    return factor


def window_one_way_factor(
    faults: tuple[Fault, ...], t_ns: np.ndarray, az_deg: np.ndarray, el_deg: np.ndarray
) -> np.ndarray | None:
    """The one-way transmission of the window faults among ``faults`` for each pulse's direction (a
    blockage 0, dirt ``T``: the square root of their part of :func:`power_factor`); None where no
    window fault acts."""
    factor: np.ndarray | None = None
    t_s = np.asarray(t_ns, np.int64) * 1e-9
    for f in faults:
        if not isinstance(f, (Blockage, Dirt)):
            continue
        sel = _active(f, t_s) & in_azimuth(az_deg, f.azimuth_deg) & in_elevation(el_deg, f.elevation_deg)
        if not sel.any():
            continue
        if factor is None:
            factor = np.ones(t_s.shape, np.float64)
        factor[sel] *= 0.0 if isinstance(f, Blockage) else f.transmission
    return factor


def with_power_faults(faults: tuple[Fault, ...], hits: Hits) -> Hits:
    """``hits`` with the power faults' factors on each ray's two-way transmission (the same object
    where none acts in its interval)."""
    f = hits.firings
    factor = power_factor(faults, f.ring, f.t_ns, f.azimuth_deg, f.elevation_deg)
    if factor is None:
        return hits
    per_ray = np.repeat(factor, hits.subrays) if hits.subrays > 1 else factor
    xp = array_module(hits.glass_transmission)  # a device frame's hits stay on the device (docs/gpu.md)
    per_ray = xp.asarray(per_ray)  # (one copy up on a device frame)
    trans = (hits.glass_transmission.astype(xp.float64) * per_ray).astype(xp.float32)
    bundle = hits.bundle
    if bundle is not None:  # --beam full: the pulses cast again as the bundle fade as their central rays
        bundle = dataclasses.replace(bundle, hits=with_power_faults(faults, bundle.hits))
    mirror = hits.glass_mirror_transmission
    if hits.glass_mirror_range_m is not None:  # a pane's mirror ghost leaves through the same window
        base = xp.ones(len(hits), xp.float64) if mirror is None else mirror.astype(xp.float64)
        mirror = (base * per_ray).astype(xp.float32)
    window = per_ray if hits.window_transmission is None else hits.window_transmission * per_ray
    one_way = hits.window_one_way
    inward = window_one_way_factor(faults, f.t_ns, f.azimuth_deg, f.elevation_deg)
    if inward is not None:  # sunlight and other sensors' pulses enter through the window once
        inward_ray = xp.asarray(np.repeat(inward, hits.subrays) if hits.subrays > 1 else inward)
        one_way = (inward_ray if one_way is None else one_way * inward_ray).astype(xp.float32)
    return dataclasses.replace(
        hits,
        glass_transmission=trans,
        bundle=bundle,
        glass_mirror_transmission=mirror,
        window_transmission=window.astype(xp.float32),
        window_one_way=one_way,
    )
