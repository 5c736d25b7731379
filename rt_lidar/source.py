"""Hit sources: where the laser hits of a batch of firings come from.

A :class:`HitSource` answers, for the firings of one sim frame, each ray's range (or miss), incidence
angle, material, segmentation id and any glass it passed on the way. :class:`WorldSource` casts the
rays into the embedded world in-process, each from the sensor pose at the ray's own firing time, so
ego motion distorts the sweep exactly as on a rotating sensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rt_lidar.scan_pattern import Firings
from unreal_bridge.world import World
from unreal_bridge.world.pose import quat_rotate

__all__ = ["GLASS_MAX_CROSSINGS", "HitSource", "Hits", "WorldSource"]

GLASS_MAX_CROSSINGS = 4
"""Transmissive surfaces a ray may pass before the cast gives up (a car has two windscreens)."""

_EPS_M = 1e-3


@dataclass
class Hits:
    """What each fired ray found, in firing order. All arrays have one row per firing."""

    firings: Firings
    direction: np.ndarray  # (N,3) float32, sensor frame at the firing time
    range_m: np.ndarray  # (N,) float32, np.inf = nothing within range
    cos_incidence: np.ndarray  # (N,) float32, 0 for misses
    material: np.ndarray  # (N,) int16, index into the source's material_names, -1 = miss
    segment: np.ndarray  # (N,) uint32
    glass_range_m: np.ndarray  # (N,) float32 range of the first transmissive surface, inf = none
    glass_cos: np.ndarray  # (N,) float32 incidence cosine there
    glass_material: np.ndarray  # (N,) int16 material of that surface, -1 = none
    glass_segment: np.ndarray  # (N,) uint32
    glass_transmission: np.ndarray  # (N,) float32 two-way transmission of every surface passed (1 = none)

    def __len__(self) -> int:
        return int(self.range_m.shape[0])


class HitSource(Protocol):
    """Anything that can say what a batch of firings hit."""

    @property
    def material_names(self) -> list[str]:
        """Names of the materials that ``Hits.material`` indexes."""
        ...

    def hits(self, firings: Firings, frame_time_s: float) -> Hits:
        """Cast ``firings``; the scene's moving objects are posed at ``frame_time_s``."""
        ...


class WorldSource:
    """Casts firings into an embedded :class:`~unreal_bridge.world.World` in-process.

    ``transmission`` gives the one-way transmission of each world material (0 = opaque); rays that hit a
    transmissive surface are continued behind it, and the surface is remembered for its own echo.
    """

    def __init__(self, world: World, max_range_m: float, transmission: np.ndarray) -> None:
        if transmission.shape != (len(world.material_names),):
            raise ValueError("transmission must have one entry per world material")
        self.world = world
        self.max_range_m = float(max_range_m)
        self._transmission = transmission.astype(np.float32)

    @property
    def material_names(self) -> list[str]:
        """The world's material names."""
        return list(self.world.material_names)

    def hits(self, firings: Firings, frame_time_s: float) -> Hits:
        """Cast every firing from the sensor pose at its own firing time."""
        n = len(firings)
        d_sensor = firings.directions()
        pos, quat = self.world.sensor_poses(firings.t_ns.astype(np.float64) * 1e-9)
        origins = pos.astype(np.float32)
        dirs = quat_rotate(quat, d_sensor).astype(np.float32)

        range_m = np.full(n, np.inf, np.float32)
        cos_inc = np.zeros(n, np.float32)
        material = np.full(n, -1, np.int16)
        segment = np.zeros(n, np.uint32)
        g_range = np.full(n, np.inf, np.float32)
        g_cos = np.zeros(n, np.float32)
        g_mat = np.full(n, -1, np.int16)
        g_seg = np.zeros(n, np.uint32)
        g_trans = np.ones(n, np.float32)

        active = np.arange(n)
        travelled = np.zeros(n, np.float32)
        for _ in range(GLASS_MAX_CROSSINGS + 1):
            if active.size == 0:
                break
            rh = self.world.cast(
                origins[active], dirs[active], frame_time_s, self.max_range_m - float(travelled[active].min())
            )
            dist = rh.distance + travelled[active]
            hit = np.isfinite(rh.distance) & (dist <= self.max_range_m)
            mat = np.where(hit, rh.material, -1).astype(np.int16)
            cosi = np.abs(np.einsum("ij,ij->i", rh.normal, dirs[active])).astype(np.float32)
            trans = np.where(mat >= 0, self._transmission[np.maximum(mat, 0)], 0.0)
            passes = hit & (trans > 0)
            opaque = hit & ~passes

            idx = active[opaque]
            range_m[idx] = dist[opaque]
            cos_inc[idx] = cosi[opaque]
            material[idx] = mat[opaque]
            segment[idx] = rh.segment[opaque]

            first = passes & ~np.isfinite(g_range[active])
            fidx = active[first]
            g_range[fidx] = dist[first]
            g_cos[fidx] = cosi[first]
            g_mat[fidx] = mat[first]
            g_seg[fidx] = rh.segment[first]

            pidx = active[passes]
            g_trans[pidx] *= trans[passes] ** 2
            step = rh.distance[passes] + _EPS_M
            origins[pidx] += dirs[pidx] * step[:, None]
            travelled[pidx] += step
            active = pidx

        return Hits(
            firings=firings,
            direction=d_sensor,
            range_m=range_m,
            cos_incidence=cos_inc,
            material=material,
            segment=segment,
            glass_range_m=g_range,
            glass_cos=g_cos,
            glass_material=g_mat,
            glass_segment=g_seg,
            glass_transmission=g_trans,
        )
