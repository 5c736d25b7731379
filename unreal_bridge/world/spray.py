"""Tyre spray plumes of the world's moving cars: where each lidar ray crosses one (issue 14, item 11).

A car moving over a wet road throws a plume of droplets from its wheels, beside and behind it. Here a
plume is a box in the car's frame (x forward, y left, z up; the car's body spans x in +-CAR_HALF_LENGTH):
from the front wheels (x = +1.6 m) to ``plume_length(v)`` behind the rear bumper, 0.3 m wider than the
car each side, from the road to :data:`PLUME_HEIGHT_M`. Its relative density is
``speed_factor(v) * exp(-x_behind / decay)``: 1 at the reference speed close to the wheels, thinning
behind the car. These shapes are assumed, not fitted: field studies describe plumes that grow denser
and longer with speed and water depth (Tang & Flintsch, "Field assessment of splash & spray",
Virginia Tech Transportation Institute, report VT-2012-01, 2015) and lidar clutter from a cutting
car's spray for seconds (Linnhoff et al., "A benchmark for spray from nearby cutting vehicles",
IEEE ITSC 2021, arXiv:2108.10800), without a plume geometry we could take over. The droplet optics are
``rt_lidar.physics.spray``'s.

:func:`spray_segments` gives every ray's entry and exit distance through the nearest plume, each
against the cars posed at the ray's own firing time (as the cast is), and the plume's relative density
there. Moving objects whose name holds ``car`` throw spray; the road's wetness scales the density in
the physics, not here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .pose import quat_conjugate, quat_rotate
from .trajectory import Trajectory

__all__ = [
    "PLUME_HEIGHT_M",
    "SPRAY_MIN_SPEED_M_S",
    "SPRAY_REF_SPEED_M_S",
    "PlumeRays",
    "plume_length",
    "plume_rays",
    "plume_segments",
    "speed_factor",
    "spray_segments",
]

F32 = NDArray[np.float32]
F64 = NDArray[np.float64]

SPRAY_MIN_SPEED_M_S = 3.0
"""Below this speed a tyre throws no spray (assumed; the plume grows from here)."""
SPRAY_REF_SPEED_M_S = 25.0
"""Speed (90 km/h) at which the plume density factor is 1; it grows linearly to 1.5x above."""
PLUME_HEIGHT_M = 1.5
PLUME_SIDE_M = 0.3
"""How far the plume reaches out beside the body."""
CAR_HALF_LENGTH_M, CAR_HALF_WIDTH_M = 2.25, 0.9
FRONT_WHEEL_X_M = 1.6
_VELOCITY_DT_S = 0.05
_SPAN_SAMPLES = 9


def speed_factor(speed_m_s: F64) -> F64:
    """Relative spray density of a car at ``speed_m_s``: 0 below :data:`SPRAY_MIN_SPEED_M_S`, 1 at the
    reference speed, at most 1.5."""
    v = np.asarray(speed_m_s, np.float64)
    f = (v - SPRAY_MIN_SPEED_M_S) / (SPRAY_REF_SPEED_M_S - SPRAY_MIN_SPEED_M_S)
    return np.asarray(np.clip(f, 0.0, 1.5))


def plume_length(speed_m_s: F64) -> F64:
    """Plume length (m) behind the rear bumper: 0.4 s of travel, 2..12 m."""
    return np.asarray(np.clip(0.4 * np.asarray(speed_m_s, np.float64), 2.0, 12.0))


class PlumeRays(NamedTuple):
    """The rays that may cross a car's plume, in that car's frame at each ray's time: one row a (ray,
    car) pair, the cars' rows one car after another (:func:`plume_rays`). Arrays of any module."""

    ray: Any
    """(K,) int64 the ray each row is."""
    origin: Any
    """(K, 3) float64 the ray's start in the car's frame."""
    direction: Any
    """(K, 3) float64 the ray's direction in the car's frame."""
    length: Any
    """(K,) float64 the plume's length behind the rear bumper (:func:`plume_length` of the car's speed)."""
    density: Any
    """(K,) float64 the plume's density factor (:func:`speed_factor` of the car's speed)."""


def spray_segments(
    objects: Sequence[tuple[str, Trajectory]],
    origins: F32,
    dirs: F32,
    t_ray: F64,
    max_range: F32,
) -> tuple[F32, F32, F32]:
    """(entry m, exit m, relative density) of every ray through the nearest spray plume, up to its
    ``max_range`` (N,) (the surface it hit); entry inf and density 0 where it meets none.

    ``objects`` are ``(name, trajectory)`` of the world's moving objects (trajectories with
    ``positions_rotations(t)``); each ray meets them posed at its time ``t_ray``.
    """
    lim = np.where(np.isfinite(max_range), max_range, np.float32(1e6)).astype(np.float64)
    return plume_segments(plume_rays(objects, origins, dirs, t_ray, lim), max_range)


def plume_rays(
    objects: Sequence[tuple[str, Trajectory]], origins: F32, dirs: F32, t_ray: F64, lim: F64 | None = None
) -> PlumeRays:
    """The rays (world ``origins``, ``dirs`` at times ``t_ray``) that may cross a spray plume, each in
    the frame of the car posed at its time (:class:`PlumeRays`); ``lim`` (N,) how far each ray reaches
    (None: as far as it goes: a superset of the rays, for a caller that knows the ranges later)."""
    n = origins.shape[0]
    o64, d64 = origins.astype(np.float64), dirs.astype(np.float64)
    reach = np.full(n, np.inf) if lim is None else lim
    parts: list[tuple[np.ndarray, ...]] = []
    for name, traj in objects if n else ():
        if "car" not in name.lower():
            continue
        cand = _candidates(traj, o64, d64, t_ray, reach)
        if cand.size == 0:
            continue
        pos, quat = traj.positions_rotations(t_ray[cand])
        pos2, _ = traj.positions_rotations(t_ray[cand] + _VELOCITY_DT_S)
        speed = np.linalg.norm(pos2 - pos, axis=1) / _VELOCITY_DT_S
        sf = speed_factor(speed)
        keep = sf > 0
        live, pos, quat, speed, sf = cand[keep], pos[keep], quat[keep], speed[keep], sf[keep]
        if live.size == 0:
            continue
        qi = quat_conjugate(quat)
        o = quat_rotate(qi, o64[live] - pos)
        d = quat_rotate(qi, d64[live])
        parts.append((live.astype(np.int64), o, d, plume_length(speed), sf))
    if not parts:
        return PlumeRays(np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0))
    cols = [np.concatenate([part[k] for part in parts]) for k in range(5)]
    return PlumeRays(*cols)


def plume_segments(plumes: PlumeRays, max_range: Any) -> tuple[Any, Any, Any]:
    """(entry m, exit m, relative density) (N,) float32 of every one of the N rays of ``max_range``
    (the surface each hit, inf: none) through the nearest plume of ``plumes`` that it reaches (the one
    it enters first; of equal entries, the first car's): the slab test of each row's box, on the array
    module of ``max_range`` (NumPy, or CuPy on the device frame)."""
    xp = array_module(max_range)
    n = max_range.shape[0]
    t_in = xp.full(n, np.inf, np.float32)
    t_out = xp.full(n, np.inf, np.float32)
    dens = xp.zeros(n, np.float32)
    k = plumes.ray.shape[0]
    if n == 0 or k == 0:
        return t_in, t_out, dens
    lim = xp.where(xp.isfinite(max_range), max_range, np.float32(1e6)).astype(xp.float64)
    o, d, length = plumes.origin, plumes.direction, plumes.length
    lo = xp.stack(
        [-CAR_HALF_LENGTH_M - length, xp.full(k, -CAR_HALF_WIDTH_M - PLUME_SIDE_M), xp.zeros(k)], axis=1
    )
    hi = xp.stack(
        [
            xp.full(k, FRONT_WHEEL_X_M),
            xp.full(k, CAR_HALF_WIDTH_M + PLUME_SIDE_M),
            xp.full(k, PLUME_HEIGHT_M),
        ],
        axis=1,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d
        a = (lo - o) * inv
        b = (hi - o) * inv
        near = xp.nanmax(xp.minimum(a, b), axis=1)
        far = xp.nanmin(xp.maximum(a, b), axis=1)
    near = xp.maximum(near, 0.0)
    far = xp.minimum(far, lim[plumes.ray])
    ok = xp.flatnonzero(xp.isfinite(near) & xp.isfinite(far) & (far > near))
    if ok.shape[0] == 0:
        return t_in, t_out, dens
    # of each ray's plumes the nearest entry (the first car's where two are entered at once)
    order = xp.lexsort(xp.stack([ok.astype(xp.float64), near[ok], plumes.ray[ok].astype(xp.float64)]))
    rows = ok[order]
    ray = plumes.ray[rows]
    first = xp.ones(rows.shape[0], bool)
    first[1:] = ray[1:] != ray[:-1]
    win, idx = rows[first], ray[first]
    mid = o[win] + d[win] * (0.5 * (near[win] + far[win]))[:, None]
    behind = xp.maximum(-CAR_HALF_LENGTH_M - mid[:, 0], 0.0)
    decay = 0.5 * length[win]
    t_in[idx] = near[win]
    t_out[idx] = far[win]
    dens[idx] = plumes.density[win] * xp.exp(-behind / decay)
    return t_in, t_out, dens


def array_module(a: Any) -> Any:
    """``cupy`` for a CuPy array, else ``numpy`` (CuPy imported only when it is given one)."""
    if type(a).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def _candidates(traj: Trajectory, o: F64, d: F64, t_ray: F64, lim: F64) -> NDArray[np.intp]:
    """Rays that may meet the car's plume: those passing within a sphere that holds the car and its
    longest plume over the batch's time span (sampled at :data:`_SPAN_SAMPLES` times); none when the
    car throws no spray at any of them. Only these get the car posed at their own times."""
    ts = np.linspace(float(t_ray.min()), float(t_ray.max()), _SPAN_SAMPLES)
    p_s, _ = traj.positions_rotations(ts)
    p2, _ = traj.positions_rotations(ts + _VELOCITY_DT_S)
    v = np.linalg.norm(p2 - p_s, axis=1) / _VELOCITY_DT_S
    if not np.any(speed_factor(v) > 0):
        return np.zeros(0, np.intp)
    length = float(plume_length(v).max())
    reach = CAR_HALF_LENGTH_M + length + 1.0  # the slowest car's plume too, and a metre to spare
    centre = 0.5 * (p_s.min(axis=0) + p_s.max(axis=0))
    radius = math.hypot(reach, CAR_HALF_WIDTH_M + PLUME_SIDE_M, PLUME_HEIGHT_M)
    radius += 0.5 * float(np.linalg.norm(p_s.max(axis=0) - p_s.min(axis=0)))
    oc = centre - o
    s = np.clip(np.einsum("ij,ij->i", oc, d), 0.0, lim)
    gap = oc - d * s[:, None]
    return np.nonzero(np.einsum("ij,ij->i", gap, gap) <= radius * radius)[0]
