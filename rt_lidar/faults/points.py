"""Faults that act on a finished scan's points: false points (dirt's near-range scatter, blinding,
noise bursts), lost points (blinding), ranges (range bias), firing times (rotation wobble) and the
frame the points are in (mount drift). Each takes the scan's points and per-point ``extras`` and a
random stream of its own, and returns them changed with the touched points' fault bits gathered
(:class:`~rt_lidar.points.PointFlag`'s ``FAULT_*`` bits, which the plan ORs into ``flags``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rt_lidar.faults.optical import in_azimuth, in_elevation
from rt_lidar.faults.spec import Blinding, Dirt, MountDrift, NoiseBurst, RangeBias, RotationWobble
from rt_lidar.physics.source_fields import extra_fill
from rt_lidar.points import POINT_DTYPE, PointFlag
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import azimuth_span_deg, firings_per_scan

__all__ = [
    "Cloud",
    "add_blinding",
    "add_dirt_scatter",
    "add_noise_burst",
    "apply_mount_drift",
    "apply_range_bias",
    "apply_wobble",
    "copy_points",
]


@dataclass
class Cloud:
    """A scan's points being faulted: points, aligned extras, their fault bits and the scan's times."""

    points: np.ndarray
    extras: dict[str, np.ndarray]
    bits: np.ndarray
    start_ns: int
    period_ns: int
    preset: SensorPreset
    added: int = 0
    """False points the faults added to this scan so far."""
    removed: int = 0
    """Points the faults removed from it so far."""

    def take(self, keep: np.ndarray) -> None:
        """Keep only the points ``keep`` selects (a mask, or indices in the new order)."""
        self.points = _records(self.points)[keep].view(self.points.dtype)
        self.bits = self.bits[keep]
        self.extras = {k: v[keep] for k, v in self.extras.items()}

    def add(self, new: np.ndarray, bit: int) -> None:
        """Insert false points ``new`` (sorted by ``t``; their extras :func:`extra_fill`'s), flagged
        ``bit``, keeping the scan in time order (a new point goes after the scan's points of the same
        time)."""
        if new.size == 0:
            return
        t = self.points["t"]
        n, m = t.size, new.size
        if n > 1 and not bool(np.all(t[1:] >= t[:-1])):  # not in time order: sort it first
            self.take(np.argsort(t, kind="stable"))
            t = self.points["t"]
        at = np.searchsorted(t, new["t"], side="right") + np.arange(m)  # where each new one lands
        old = np.ones(n + m, bool)
        old[at] = False
        pts = np.empty(n + m, self.points.dtype)
        _records(pts)[old] = _records(self.points)
        _records(pts)[at] = _records(new)
        bits = np.empty(n + m, np.uint16)
        bits[old], bits[at] = self.bits, bit
        extras = {}
        for k, v in self.extras.items():
            e = extra_fill(k, n + m, v.dtype)
            e[old] = v
            extras[k] = e
        self.points, self.bits, self.extras = pts, bits, extras

    def count(self, kind: str, n: int) -> None:
        """Record ``n`` points added (or removed, negative) by fault ``kind``."""
        if n > 0:
            self.added += int(n)
        else:
            self.removed -= int(n)


def _records(points: np.ndarray) -> np.ndarray:
    """The points as whole records (one opaque item each): NumPy copies those at memory speed, where it
    copies structured records field by field."""
    return points.view(np.dtype((np.void, points.dtype.itemsize)))


def copy_points(points: np.ndarray) -> np.ndarray:
    """A copy of a point array, made record by record (:func:`_records`)."""
    return _records(points).copy().view(points.dtype)


def _azimuth(points: np.ndarray) -> np.ndarray:
    return np.degrees(np.arctan2(points["y"].astype(np.float64), points["x"].astype(np.float64)))


def _elevation(points: np.ndarray) -> np.ndarray:
    xy = np.hypot(points["x"].astype(np.float64), points["y"].astype(np.float64))
    return np.degrees(np.arctan2(points["z"].astype(np.float64), xy))


def _ring_times(
    preset: SensorPreset, cloud: Cloud, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """``n`` random (ring, t from the scan start, azimuth, elevation) firings of the scan: the azimuth
    a rotating sensor points at time t (a solid-state one: anywhere in its field ahead), the ring's
    elevation."""
    ring = rng.integers(0, preset.n_rings, n)
    t = np.sort(rng.integers(0, cloud.period_ns, n))
    s = preset.scan
    if s.pattern == "rotating":
        sign = -1.0 if s.rotation_direction == "cw" else 1.0
        az = s.scan_start_azimuth_deg + sign * 360.0 * t / cloud.period_ns
    else:
        half = 0.5 * azimuth_span_deg(preset)
        az = rng.uniform(-half, half, n)
    az = az + np.asarray(preset.azimuth_offsets_deg)[ring]
    el = np.asarray(preset.elevations_deg, np.float64)[ring]
    return ring, t, az, el


def _false_points(
    ring: np.ndarray, t: np.ndarray, az: np.ndarray, el: np.ndarray, r: np.ndarray, intensity: np.ndarray
) -> np.ndarray:
    out = np.zeros(ring.size, POINT_DTYPE)
    a, e = np.radians(az), np.radians(el)
    out["x"] = r * np.cos(e) * np.cos(a)
    out["y"] = r * np.cos(e) * np.sin(a)
    out["z"] = r * np.sin(e)
    out["intensity"] = intensity
    out["ring"] = ring
    out["t"] = t
    return out


def _pulses_in(cloud: Cloud, az_span: tuple[float, float], el_span: tuple[float, float] | None) -> float:
    """How many of the scan's pulses fire into the sector (rings in ``el_span`` x azimuth share)."""
    p = cloud.preset
    lo, hi = az_span
    share = 1.0 if hi - lo >= 360.0 else ((hi - lo) % 360.0) / 360.0
    share = min(1.0, share * 360.0 / azimuth_span_deg(p))  # a solid-state sensor fires into its field only
    rings = int(np.count_nonzero(in_elevation(np.asarray(p.elevations_deg), el_span)))
    return firings_per_scan(p) * share * rings / max(p.n_rings, 1)


def _sector_points(
    cloud: Cloud,
    rng: np.random.Generator,
    expected: float,
    az_span: tuple[float, float],
    el_span: tuple[float, float] | None,
) -> tuple[np.ndarray, ...]:
    """Random firings of the scan inside a sector, Poisson(``expected``) of them."""
    n = int(rng.poisson(max(expected, 0.0)))
    if n == 0:
        return tuple(np.empty(0) for _ in range(4))
    # draw more than needed over the whole turn and keep those in the sector
    share = max(_pulses_in(cloud, az_span, el_span) / max(_pulses_in(cloud, (0.0, 360.0), None), 1.0), 1e-3)
    ring, t, az, el = _ring_times(cloud.preset, cloud, int(n / share * 1.5) + 16, rng)
    sel = np.flatnonzero(in_azimuth(az, az_span) & in_elevation(el, el_span))[:n]
    return ring[sel], t[sel], az[sel], el[sel]


def add_dirt_scatter(cloud: Cloud, fault: Dirt, rng: np.random.Generator) -> None:
    """Near-range points scattered by the contamination on the window: a share of the dirty sector's
    pulses (``scatter_rate``, by default 5 % of the light the dirt takes, 0.05 * (1 - T)) report an
    echo within a metre beyond the minimum range, weak, as droplets or mud on a cover do."""
    rate = fault.scatter_rate if fault.scatter_rate is not None else 0.05 * (1.0 - fault.transmission)
    expected = rate * _pulses_in(cloud, fault.azimuth_deg, fault.elevation_deg)
    ring, t, az, el = _sector_points(cloud, rng, expected, fault.azimuth_deg, fault.elevation_deg)
    if ring.size == 0:
        return
    p = cloud.preset
    lo, hi = fault.scatter_range_m or (p.range.min_m, p.range.min_m + 1.0)
    r = rng.uniform(lo, hi, ring.size)
    inten = rng.uniform(0.0, 0.1, ring.size) * p.output.intensity_max
    cloud.add(_false_points(ring, t, az, el, r, inten), int(PointFlag.FAULT_DIRT))
    cloud.count("dirt", ring.size)


def add_blinding(cloud: Cloud, fault: Blinding, rng: np.random.Generator) -> None:
    """A bright source in the sector: its returns lost (share ``drop``), and saturated false detections
    at random ranges from a share ``false_rate`` of its pulses."""
    pts = cloud.points
    inside = in_azimuth(_azimuth(pts), fault.azimuth_deg) & in_elevation(_elevation(pts), fault.elevation_deg)
    lost = inside & (rng.random(pts.size) < fault.drop)
    if lost.any():
        cloud.take(~lost)
        cloud.count("blinding", -int(lost.sum()))
    expected = fault.false_rate * _pulses_in(cloud, fault.azimuth_deg, fault.elevation_deg)
    ring, t, az, el = _sector_points(cloud, rng, expected, fault.azimuth_deg, fault.elevation_deg)
    if ring.size:
        p = cloud.preset
        r = rng.uniform(p.range.min_m, p.range.max_m, ring.size)
        inten = np.full(ring.size, p.output.intensity_max)
        new = _false_points(ring, t, az, el, r, inten)
        new["flags"] = int(PointFlag.SATURATED)
        cloud.add(new, int(PointFlag.FAULT_BLINDING))
        cloud.count("blinding", ring.size)


def add_noise_burst(cloud: Cloud, fault: NoiseBurst, rng: np.random.Generator, active_s: float) -> None:
    """False detections at ``rate_hz`` over the ``active_s`` seconds of the scan the burst covers."""
    expected = fault.rate_hz * active_s
    ring, t, az, el = _sector_points(cloud, rng, expected, fault.azimuth_deg, None)
    if ring.size == 0:
        return
    p = cloud.preset
    lo, hi = fault.range_m or (p.range.min_m, p.range.max_m)
    r = rng.uniform(lo, hi, ring.size)
    inten = rng.uniform(0.0, 0.2, ring.size) * p.output.intensity_max
    new = _false_points(ring, t, az, el, r, inten)
    new["flags"] = int(PointFlag.AMBIENT_NOISE)
    cloud.add(new, int(PointFlag.FAULT_NOISE))
    cloud.count("noise_burst", ring.size)


def _elapsed_s(cloud: Cloud, start_s: float) -> np.ndarray:
    return (cloud.start_ns + cloud.points["t"].astype(np.int64)) * 1e-9 - start_s


def apply_range_bias(cloud: Cloud, fault: RangeBias, on: np.ndarray) -> None:
    """Ranges of the points ``on`` read ``r * scale(t) + offset(t)`` (along each point's ray)."""
    pts = cloud.points
    whole = bool(on.all())
    sel = slice(None) if whole else on
    xyz = [np.asarray(pts[a][sel], np.float64) for a in "xyz"]
    r = np.sqrt(xyz[0] * xyz[0] + xyz[1] * xyz[1] + xyz[2] * xyz[2])
    offset, scale = fault.offset_m, fault.scale
    if fault.scale_drift_per_s or fault.offset_drift_m_per_s:
        dt = _elapsed_s(cloud, fault.start_s)[sel]
        biased = r * (scale + fault.scale_drift_per_s * dt) + (offset + fault.offset_drift_m_per_s * dt)
    else:
        biased = r * scale + offset
    ratio = np.divide(np.maximum(biased, 0.0), r, out=np.zeros_like(r), where=r > 0)
    for k, axis in enumerate("xyz"):
        pts[axis][sel] = (xyz[k] * ratio).astype(np.float32)
    cloud.bits[sel] |= int(PointFlag.FAULT_RANGE)


def apply_wobble(cloud: Cloud, fault: RotationWobble, on: np.ndarray) -> None:
    """The rotor's phase leads the nominal by ``amplitude_deg * sin(2 pi t / period_s)``: the firing
    that looked at a point's azimuth happened that much earlier (later where it lags), and the sensor,
    whose encoder follows the nominal phase, reports the point at the azimuth its schedule has at that
    time: the point turns about z by the lead, against the rotation (the world is not cast again for
    the shift: the sensor's motion over it is left out)."""
    p = cloud.preset
    hz = p.scan.rotation_hz
    if p.scan.pattern != "rotating" or not hz or not on.any():
        return
    deg_per_ns = 360.0 * hz * 1e-9
    t_abs = cloud.start_ns + cloud.points["t"].astype(np.int64)
    lead = fault.amplitude_deg * np.sin(2.0 * math.pi * (t_abs * 1e-9 - fault.start_s) / fault.period_s)
    shift = np.round(lead / deg_per_ns).astype(np.int64)
    t = cloud.points["t"].astype(np.int64)
    t[on] -= shift[on]
    cloud.points["t"] = t
    # the nominal azimuth moves by sign * deg_per_ns * dt over dt = -shift (sign -1: a clockwise head)
    sign = -1.0 if p.scan.rotation_direction == "cw" else 1.0
    turn = np.radians(-sign * deg_per_ns * shift[on].astype(np.float64))
    pts = cloud.points
    x, y = pts["x"][on].astype(np.float64), pts["y"][on].astype(np.float64)
    c, s = np.cos(turn), np.sin(turn)
    pts["x"][on] = (c * x - s * y).astype(np.float32)
    pts["y"][on] = (s * x + c * y).astype(np.float32)
    cloud.bits[on] |= int(PointFlag.FAULT_TIMING)
    order = np.argsort(cloud.points["t"], kind="stable")
    if not np.array_equal(order, np.arange(order.size)):
        cloud.take(order)


def _rotation(rpy_deg: np.ndarray) -> np.ndarray:
    r, p, y = np.radians(rpy_deg)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def apply_mount_drift(cloud: Cloud, fault: MountDrift, dt_s: float) -> None:
    """The sensor turned by ``rpy_deg_per_s * dt`` and moved by ``xyz_m_per_s * dt`` on its mount: a
    point p of the calibrated sensor frame is seen at R^T (p - d) (the rays' samples of the world are
    taken as unchanged, a small-drift approximation)."""
    if dt_s <= 0 or cloud.points.size == 0:
        return
    rot = _rotation(np.asarray(fault.rpy_deg_per_s) * dt_s)
    d = np.asarray(fault.xyz_m_per_s) * dt_s
    pts = cloud.points
    xyz = np.stack([pts["x"], pts["y"], pts["z"]], axis=1).astype(np.float64)
    moved = (xyz - d) @ rot  # rows: R^T (p - d)
    for k, axis in enumerate("xyz"):
        pts[axis] = moved[:, k].astype(np.float32)
    cloud.bits |= int(PointFlag.FAULT_MOUNT)
