"""Mutual interference: another lidar's pulses seen by this one's receiver.

A receiver listens after each of its own pulses for the time light needs to go to ``range.max_m`` and
back (its listening window), along its beam, through a band-pass filter around its wavelength. A
pulse of another sensor B gives sensor A a false point when all of this holds:

* B's wavelength lies in A's pass band: ``|lambda_A - lambda_B| <= optics.filter_bandwidth_nm / 2``
  (905 and 903 nm lidars interfere; 865 nm and 905 nm ones do not);
* its light reaches A's aperture from where A looks, inside A's listening window, by one of two paths:

  - **scattered**: B's spot S (where B's pulse hit a surface) lies in A's receiver cone (half-angle:
    A's half beam divergence, widened by B's footprint radius seen from A) and is not hidden from A
    (A's own ray reaches S's distance); the light arrives at ``t_B + (|S - o_B| + |o_A - S|) / c``
    with the power of a Lambertian echo of B's pulse off S's material (A's laser radar equation:
    B's peak power, A's aperture and efficiency, the distance S -> A, A's incidence on S);
  - **direct**: A's aperture lies in B's beam (B's half divergence plus A's aperture radius) and B
    lies in A's receiver cone, with nothing in between; it arrives at ``t_B + |o_A - o_B| / c``;

* the received power reaches A's detection threshold.

A then reports a point along its beam at the range its timing implies, ``c * (t_arrival - t_A) / 2``,
when that range is within its limits. The point is flagged :attr:`PointFlag.CROSSTALK`; it is an extra
return of that pulse (``return_id`` = the pulse's true returns, so 0 when it had none), and a pulse
keeps only its strongest false echo. Pairs of pulses are found within one sim frame: a pulse in the
last listening window of a frame (< 1 us of 50 ms) misses aggressors fired in the next frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rt_lidar.errors import RtLidarError
from rt_lidar.kernels.xp import array_module, to_numpy
from rt_lidar.physics.intensity_chain import detection_table_steps, reported_intensity
from rt_lidar.physics.model import SensorPhysics
from rt_lidar.pipeline.frame_loop import Sensed
from rt_lidar.pipeline.sources import Hits, interpolate_pose_samples
from rt_lidar.points import POINT_DTYPE, PointFlag, empty_points
from rt_lidar.sensor.presets import SensorPreset

__all__ = [
    "C_M_PER_NS",
    "CrosstalkSensor",
    "echoes",
    "false_points",
    "firing_poses",
    "in_band",
    "twin_arguments",
    "world_directions",
]

C_M_PER_NS = 0.299792458
"""Speed of light, metres per nanosecond."""
_HIDDEN_TOL_M = 0.05
"""How far in front of B's spot A's own ray may end and still count as seeing it (surface noise)."""


def in_band(victim: SensorPreset, aggressor: SensorPreset) -> bool:
    """True when ``aggressor``'s wavelength passes ``victim``'s receiver filter."""
    o = victim.optics
    return abs(o.wavelength_nm - aggressor.optics.wavelength_nm) <= o.filter_bandwidth_nm / 2.0


@dataclass(frozen=True)
class CrosstalkSensor:
    """What the interference model needs of one rig sensor: its preset and physics. Each pulse's world
    pose comes with its hits (:attr:`~rt_lidar.pipeline.sources.Hits.pose_samples`: in-process from the
    cast, over the bridge from the server's answer), so both paths give the same false points."""

    name: str
    preset: SensorPreset
    physics: SensorPhysics
    receiver_fov_mrad: float | None = None
    """Full angle of the receiver's field of view; None = the beam's divergence (matched optics)."""

    @property
    def receiver_half_angle_rad(self) -> float:
        """Half-angle of the receiver cone."""
        if self.receiver_fov_mrad is None:
            return _half_angle_rad(self.preset)
        return 0.5e-3 * self.receiver_fov_mrad


@dataclass
class _Pulses:
    """Every pulse of one sensor in one frame, world frame."""

    t_ns: np.ndarray  # (N,) int64
    ring: np.ndarray  # (N,) uint16
    origin: np.ndarray  # (N, 3) float64
    direction: np.ndarray  # (N, 3) float64 unit, world
    d_sensor: np.ndarray  # (N, 3) float32 unit, sensor frame
    range_m: np.ndarray  # (N,) float64, inf = nothing hit
    cos_inc: np.ndarray  # (N,) float64
    material: np.ndarray  # (N,) int64, -1 = miss
    window: Any = None
    """(N,) float64 one-way transmission of the sensor's window along each pulse (a window fault:
    ``Hits.window_one_way``), which its outgoing pulse and any light entering it pass; None = 1."""
    _order: np.ndarray | None = field(default=None, init=False, repr=False)
    in_time_order: bool = field(default=False, init=False, repr=False)
    """``t_ns`` never decreases (known once :meth:`time_order` ran): B's times in time order are ``t_ns``."""

    def time_order(self) -> np.ndarray:
        """The pulses in time order (a stable argsort of ``t_ns``), found once for every sensor that
        pairs with them: ``arange`` when they already are (a sensor fires in time order), which is what
        the argsort gives then."""
        if self._order is None:
            t = self.t_ns
            xp = array_module(t)
            self.in_time_order = t.size < 2 or bool(xp.all(t[1:] >= t[:-1]))
            self._order = xp.arange(t.size) if self.in_time_order else xp.argsort(t, kind="stable")
        return self._order


def _half_angle_rad(preset: SensorPreset) -> float:
    o = preset.optics
    return 0.5e-3 * max(o.beam_divergence_h_mrad, o.beam_divergence_v_mrad)


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate (N, 3) vectors by (N, 4) wxyz unit quaternions."""
    w, r = q[:, :1], q[:, 1:]
    t = 2.0 * np.cross(r, v)
    return np.asarray(v + w * t + np.cross(r, t), np.float64)


def world_directions(quat: np.ndarray, d_sensor: np.ndarray) -> np.ndarray:
    """(N, 3) float64 unit world directions of sensor-frame directions ``d_sensor`` (N, 3) rotated by wxyz
    quaternions ``quat`` (N, 4) float64."""
    d_world = _rotate(quat, d_sensor.astype(np.float64))
    d_world /= np.linalg.norm(d_world, axis=1)[:, None]
    return d_world


def _pulses(sensor: CrosstalkSensor, sensed: Sensed) -> _Pulses:
    hits = sensed.hits
    f = hits.firings
    n, k = hits.pulses, hits.subrays
    xp = array_module(hits.range_m)  # CuPy where the hits are on the device (docs/gpu.md)
    rows: Any = slice(None)  # one ray a pulse: its own
    if k > 1:  # the nearest sub-ray's surface stands for the pulse's spot
        rows = xp.arange(n) * k + xp.argmin(hits.range_m.reshape(n, k), axis=1)
    if hits.pose_samples is None and n:
        raise RtLidarError(
            f"crosstalk: sensor '{sensor.name}': its hits carry no pose samples (a server older than "
            "info.pose_samples, or stock AirSim, cannot give each pulse's world pose)"
        )
    pos, quat = firing_poses(hits)
    d_sensor = f.directions()
    d_world = sensor.physics.backend.world_directions(np.asarray(quat, np.float64), d_sensor)
    return _Pulses(
        f.t_ns,
        f.ring,
        np.asarray(pos, np.float64),
        d_world,
        d_sensor,
        hits.range_m[rows].astype(xp.float64),
        hits.cos_incidence[rows].astype(xp.float64),
        hits.material[rows].astype(xp.int64),
        None if hits.window_one_way is None else hits.window_one_way[rows].astype(xp.float64),
    )


def firing_poses(hits: Hits) -> tuple[np.ndarray, np.ndarray]:
    """Each firing's world position (N, 3) and wxyz rotation (N, 4) of ``hits``: those the cast kept
    (:attr:`Hits.firing_poses`, found for these very firing times), else interpolated here from its
    pose samples, as the cast interpolates them."""
    kept = hits.firing_poses
    if kept is not None and kept[0] is hits.firings.t_ns:
        return kept[1], kept[2]
    return interpolate_pose_samples(hits.firings.t_ns, hits.pose_samples)


def _on_device(sensor: CrosstalkSensor, p: _Pulses) -> _Pulses:
    """``p`` with every array :func:`echoes` reads where its surfaces are: where those are on a device
    (the device-resident frame), the pulses' times, origins and world directions go up there in one
    block (counted by the physics' :class:`~rt_lidar.backend.device_arrays.TransferCounter`)."""
    xp = array_module(p.range_m)
    if xp is np:
        return p
    t_bits = np.ascontiguousarray(p.t_ns, np.int64).view(np.float64)  # (the times' bits, not values)
    block = xp.asarray(np.column_stack([t_bits, p.origin, p.direction]))
    counter = getattr(getattr(sensor.physics, "pinned", None), "counter", None)
    if counter is not None:
        counter.up()
    t_ns = xp.ascontiguousarray(block[:, 0]).view(xp.int64)
    return _Pulses(
        t_ns, p.ring, block[:, 1:4], block[:, 4:7], p.d_sensor, p.range_m, p.cos_inc, p.material, p.window
    )


def _pairs(
    t_a: np.ndarray, t_b: np.ndarray, before_ns: float, after_ns: float
) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with ``t_a[i] - before <= t_b[j] <= t_a[i] + after`` (``t_b`` sorted), of
    ``t_a``'s array module. Each pair's ``i`` is found by a search over the counts' running ends, not by
    ``repeat`` with an array of counts, which CuPy before 14 refuses (``cupy-cuda12x>=13`` is allowed)."""
    xp = array_module(t_a)
    lo = xp.searchsorted(t_b, t_a - before_ns, "left")
    hi = xp.searchsorted(t_b, t_a + after_ns, "right")
    counts = hi - lo
    ends = xp.cumsum(counts)
    total = int(ends[-1]) if ends.shape[0] else 0
    k = xp.arange(total)
    i = xp.searchsorted(ends, k, "right")  # pair k belongs to the first i whose running end passes k
    j = lo[i] + (k - (ends[i] - counts[i]))
    return i, j


def _echoes(
    a: CrosstalkSensor, pa: _Pulses, b: CrosstalkSensor, pb: _Pulses
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`echoes` on A's physics backend (:meth:`rt_lidar.backend.PhysicsBackend.crosstalk_echoes`:
    the NumPy code, or its compiled twin); on the device (the device-resident frame's pulses), the same
    code on its array module."""
    if getattr(a.physics, "pinned", None) is not None:  # the device-resident frame's physics
        return echoes(a, pa, b, pb)
    return a.physics.backend.crosstalk_echoes(a, pa, b, pb)


def _through_windows(
    a: CrosstalkSensor, pa: _Pulses, b: CrosstalkSensor, pb: _Pulses
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_echoes` through the sensors' windows (a window fault, ``_Pulses.window``): B's pulse
    leaves through B's window and enters A's, one way each, so its power on A's detector is scaled by
    both transmissions; a blocked pulse of B sends nothing. Without a window fault, :func:`_echoes` as
    it is. B's pulses are taken by their transmission (a few values: 1, each dirt's T, 0), so the
    echo kernels (NumPy, compiled, device) stay the ones without a window."""
    if pb.window is None:
        found = _echoes(a, pa, b, pb)
    else:
        xp = array_module(pb.window)
        parts = []
        for value in (float(v) for v in to_numpy(xp.unique(pb.window))):
            if value <= 0.0:
                continue  # a blockage: B's pulse never leaves
            rows = xp.flatnonzero(pb.window == value)
            sub = _Pulses(*(_take(getattr(pb, n), rows) for n in _PULSE_ARRAYS))
            i, r, p = _echoes(a, pa, b, sub)
            parts.append((i, r, p * value))
        if not parts:
            z = xp.zeros(0)
            return z.astype(xp.int64), z, z
        found = tuple(xp.concatenate([part[k] for part in parts]) for k in range(3))
    if pa.window is None:
        return found
    i, r, p = found
    return i, r, p * pa.window[i]


_PULSE_ARRAYS = ("t_ns", "ring", "origin", "direction", "d_sensor", "range_m", "cos_inc", "material")


def _take(values: Any, rows: Any) -> Any:
    """``values[rows]`` where ``rows`` may be on the device and ``values`` on the host (a device frame's
    rings and sensor-frame directions stay on the host)."""
    return values[rows] if array_module(values) is array_module(rows) else values[to_numpy(rows)]


def _windows(a: CrosstalkSensor, b: CrosstalkSensor, pb: _Pulses) -> tuple[float, float, np.ndarray]:
    """(A's listening window ns, B's lead ns, B's pulses in time order)."""
    window_ns = 2.0 * a.preset.range.max_m / C_M_PER_NS
    lead_ns = 2.0 * b.preset.range.max_m / C_M_PER_NS
    return window_ns, lead_ns, pb.time_order()


def twin_arguments(
    a: CrosstalkSensor, pa: _Pulses, b: CrosstalkSensor, pb: _Pulses
) -> tuple[np.ndarray, float, float, np.ndarray, tuple[float, ...]]:
    """The arguments after the pulses of :func:`rt_lidar.rig.crosstalk_fused.echoes`, the compiled twin
    of :func:`echoes`: (B's time order, B's lead ns, A's window ns, A's materials' hemispherical
    reflectance, the constants of the equations below)."""
    pre_b = b.preset
    window_ns, lead_ns, order = _windows(a, b, pb)
    th_a, th_b = a.receiver_half_angle_rad, _half_angle_rad(pre_b)
    oa = a.preset.optics
    rho_table = np.asarray(a.physics.materials.hemispherical(), np.float64)
    consts = (
        th_a,
        th_b,
        float(np.cos(th_a)),
        _HIDDEN_TOL_M,
        C_M_PER_NS,
        0.5 * C_M_PER_NS,
        -a.physics.config.extinction_per_m,
        pre_b.pulse.peak_power_w * oa.receiver_aperture_m**2 * oa.system_efficiency,
        0.5 * oa.receiver_aperture_m,
        np.pi * oa.receiver_aperture_m**2 / 4.0,
        pre_b.pulse.peak_power_w * oa.system_efficiency,
    )
    return order, lead_ns, window_ns, rho_table, consts


def echoes(
    a: CrosstalkSensor, pa: _Pulses, b: CrosstalkSensor, pb: _Pulses
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A pulse index, false range m, received power W) of every echo of B's pulses in A's windows; of
    the pulses' array module (NumPy, or CuPy on the device-resident frame)."""
    xp = array_module(pa.range_m)
    pre_b = b.preset
    window_ns, lead_ns, order = _windows(a, b, pb)
    th_a, th_b = a.receiver_half_angle_rad, _half_angle_rad(pre_b)
    oa = a.preset.optics
    i, jj = _pairs(pa.t_ns, pb.t_ns[order], lead_ns, window_ns)
    j = order[jj]
    d_a = pa.direction[i]
    out_i, out_r, out_p = [], [], []
    # scattered: B's spot inside A's receiver cone, visible from A
    hit = xp.isfinite(pb.range_m[j])
    i_s, j_s, d_s = i[hit], j[hit], d_a[hit]
    if i_s.size:
        r_b = pb.range_m[j_s]
        spot = pb.origin[j_s] + pb.direction[j_s] * r_b[:, None]
        v = spot - pa.origin[i_s]
        dist = xp.linalg.norm(v, axis=1)
        cos_ang = xp.einsum("ij,ij->i", v, d_s) / xp.maximum(dist, 1e-9)
        limit = th_a + th_b * r_b / xp.maximum(dist, 1e-9)
        seen = (cos_ang >= xp.cos(limit)) & (pa.range_m[i_s] >= dist - _HIDDEN_TOL_M)
        i_s, j_s, dist, r_b = i_s[seen], j_s[seen], dist[seen], r_b[seen]
        arrival = pb.t_ns[j_s] + (r_b + dist) / C_M_PER_NS
        rho_table = xp.asarray(a.physics.materials.hemispherical())
        rho = rho_table[xp.maximum(pb.material[j_s], 0)].astype(xp.float64)
        cos_out = xp.maximum(pa.cos_inc[i_s], 0.0)
        ext = xp.exp(-a.physics.config.extinction_per_m * (r_b + dist))
        power = (
            pre_b.pulse.peak_power_w
            * oa.receiver_aperture_m**2
            * oa.system_efficiency
            * rho
            * cos_out
            * ext
            / (16.0 * xp.maximum(dist, 1e-3) ** 2)
        )
        out_i.append(i_s)
        out_r.append(0.5 * C_M_PER_NS * (arrival - pa.t_ns[i_s]))
        out_p.append(power)
    # direct: A's aperture in B's beam and B in A's receiver cone, nothing in between
    ab = pa.origin[i] - pb.origin[j]
    length = xp.maximum(xp.linalg.norm(ab, axis=1), 1e-6)
    u = ab / length[:, None]
    beam_ok = xp.einsum("ij,ij->i", u, pb.direction[j]) >= xp.cos(
        th_b + 0.5 * oa.receiver_aperture_m / length
    )
    look_ok = xp.einsum("ij,ij->i", -u, d_a) >= np.cos(th_a)
    clear = (pb.range_m[j] >= length - _HIDDEN_TOL_M) & (pa.range_m[i] >= length - _HIDDEN_TOL_M)
    direct = beam_ok & look_ok & clear
    if direct.any():
        i_d, j_d, ld = i[direct], j[direct], length[direct]
        spot_area = np.pi * xp.maximum(ld * th_b, 1e-6) ** 2
        frac = xp.minimum(np.pi * oa.receiver_aperture_m**2 / 4.0 / spot_area, 1.0)
        out_i.append(i_d)
        out_r.append(0.5 * C_M_PER_NS * (pb.t_ns[j_d] + ld / C_M_PER_NS - pa.t_ns[i_d]))
        out_p.append(pre_b.pulse.peak_power_w * oa.system_efficiency * frac)
    if not out_i:
        z = xp.zeros(0)
        return z.astype(xp.int64), z, z
    return xp.concatenate(out_i), xp.concatenate(out_r), xp.concatenate(out_p)


def false_points(sensors: Sequence[CrosstalkSensor], sensed: Mapping[str, Sensed]) -> dict[str, np.ndarray]:
    """Each sensor's false points of one sim frame (:data:`POINT_DTYPE`, ``t`` absolute ns), from the
    pulses every other in-band sensor fired in that frame."""
    pulses = {s.name: _pulses(s, sensed[s.name]) for s in sensors}
    where = {s.name: _on_device(s, pulses[s.name]) for s in sensors}  # the pulses where the hits are
    out: dict[str, np.ndarray] = {}
    for a in sensors:
        pa, pre = pulses[a.name], a.preset
        found = [
            _through_windows(a, where[a.name], b, where[b.name])
            for b in sensors
            if b.name != a.name and in_band(pre, b.preset)
        ]
        if not found:
            out[a.name] = empty_points()
            continue
        xp = array_module(found[0][0])
        idx = xp.concatenate([f[0] for f in found])
        rng_m = xp.concatenate([f[1] for f in found])
        power = xp.concatenate([f[2] for f in found])
        keep = (
            (power >= pre.pulse.detection_threshold_w)
            & (rng_m >= pre.range.min_m)
            & (rng_m <= pre.range.max_m)
        )
        idx, rng_m, power = idx[keep], rng_m[keep], power[keep]
        # one false echo per pulse: the strongest
        order = (
            np.lexsort((-power, idx)) if xp is np else xp.lexsort(xp.stack([-power, idx.astype(xp.float64)]))
        )
        idx, rng_m, power = idx[order], rng_m[order], power[order]
        first = xp.ones(idx.size, bool)
        first[1:] = idx[1:] != idx[:-1]
        idx, rng_m, power = idx[first], rng_m[first], power[first]
        if xp is not np:  # down: the false echoes (a few a frame) of the device-resident frame
            idx, rng_m, power = (np.asarray(v.get()) for v in (idx, rng_m, power))
            counter = getattr(getattr(a.physics, "pinned", None), "counter", None)
            if counter is not None:
                counter.down(idx.nbytes + rng_m.nbytes + power.nbytes)
        out[a.name] = _as_points(a, pa, sensed[a.name], idx, rng_m, power)
    return out


def _as_points(
    a: CrosstalkSensor, pa: _Pulses, sensed: Sensed, idx: np.ndarray, rng_m: np.ndarray, power: np.ndarray
) -> np.ndarray:
    pts = np.zeros(idx.size, POINT_DTYPE)
    if not idx.size:
        return pts
    r32 = rng_m.astype(np.float32)
    d = pa.d_sensor[idx]
    for k, axis in enumerate("xyz"):
        pts[axis] = d[:, k] * r32
    pre = a.preset
    refl = (power / np.maximum(a.physics.unit_power(r32).astype(np.float64), 1e-30)).astype(np.float32)
    steps = detection_table_steps(pre, pa.ring[idx], idx.size)  # each laser's raw reading (change 41)
    # read as the sensor reports its own returns: its units, reporting step and weak zeros
    pts["intensity"] = reported_intensity(pre, power, refl, r32, steps)
    pts["reflectivity"] = refl
    pts["ring"] = pa.ring[idx]
    pts["t"] = pa.t_ns[idx]
    # an extra return of its pulse: numbered after the pulse's true returns
    true_pts = sensed.result.points
    key_true = true_pts["t"].astype(np.int64) * 4096 + true_pts["ring"].astype(np.int64)
    key = pa.t_ns[idx].astype(np.int64) * 4096 + pa.ring[idx].astype(np.int64)
    uk, counts = np.unique(key_true, return_counts=True)
    n_true = np.zeros(idx.size, np.int64)
    if uk.size:
        pos = np.minimum(np.searchsorted(uk, key), uk.size - 1)
        n_true = np.where(uk[pos] == key, counts[pos], 0)
    pts["return_id"] = np.minimum(n_true, 255).astype(np.uint8)
    pts["flags"] = np.uint8(PointFlag.CROSSTALK)
    return pts
