"""The wet road on the device-resident frame (docs/gpu.md): the film's darker road echoes, the mirror
ghosts over it and the tyre spray's droplet echoes, on the frame's array module ``xp`` (CuPy on
``--device cuda``, NumPy on the CPU twin).

The source marks the wet road hits, casts their mirror rays off the film and clips each ray's segment
through the nearest spray plume where it casts the rays
(:class:`~rt_lidar.pipeline.device_frame.DeviceWorldSource`); here they become powers by the host's
equations (:mod:`rt_lidar.physics.wet_road`: :func:`wet_road_power`, :func:`mirror_factor`;
:func:`rt_lidar.physics.spray.spray_apply` with the spray kernel
:func:`~rt_lidar.kernels.spray.spray_echoes`, all of any array module), as
:meth:`SensorPhysics._single` and :func:`~rt_lidar.physics.returns.wet_echoes` use them on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.physics.spray import spray_apply
from rt_lidar.physics.wet_road import mirror_factor, wet_road_power
from rt_lidar.points import PointFlag

__all__ = ["spray_device", "wet_columns", "wet_road_device", "wetness_of"]


def wetness_of(physics: Any) -> float:
    """The road's wetness of ``physics``'s weather (0: dry)."""
    weather = physics.config.weather
    return 0.0 if weather is None else float(weather.road_wetness)


def _index(xp: Any, material: Any) -> Any:
    return xp.maximum(material, 0).astype(xp.int32)


def wet_road_device(physics: Any, hits: Any, wetness: float, power: Any) -> tuple[Any, Any, Any, Any] | None:
    """:func:`~rt_lidar.physics.wet_road.wet_road_apply` on the device: the road echoes in ``power``
    darkened by the film (in place), and every ray's mirror ghost ``(range m, power W, effective
    reflectance, segment)`` (power 0: none); None when the road is dry or the hits mark no road."""
    if wetness <= 0 or hits.wet is None:
        return None
    xp = physics.xp
    wet = xp.flatnonzero(hits.wet)
    if wet.shape[0]:
        albedo = physics.hemispherical_device()[_index(xp, hits.material[wet])]
        power[wet] *= wet_road_power(hits.cos_incidence[wet], albedo, wetness)
    n = len(hits)
    f32 = xp.float32
    g_r, g_p, g_s, g_seg = xp.full(n, np.inf, f32), xp.zeros(n, f32), xp.zeros(n, f32), xp.zeros(n, xp.uint32)
    if hits.mirror_range_m is None or hits.mirror_material is None or hits.mirror_cos is None:
        return g_r, g_p, g_s, g_seg
    gi = xp.flatnonzero(xp.isfinite(hits.mirror_range_m) & (hits.mirror_material >= 0))
    if gi.shape[0]:
        extra = mirror_factor(hits.cos_incidence[gi], wetness)
        if hits.window_transmission is not None:  # out through the sensor's window and back
            extra = extra * hits.window_transmission[gi]
        with np.errstate(invalid="ignore", over="ignore"):
            p, s = physics._power(
                hits.mirror_range_m[gi], hits.mirror_cos[gi], _index(xp, hits.mirror_material[gi]), extra
            )
        g_r[gi], g_p[gi], g_s[gi] = hits.mirror_range_m[gi], p, s
        if hits.mirror_segment is not None:
            g_seg[gi] = hits.mirror_segment[gi]
    return g_r, g_p, g_s, g_seg


def spray_device(
    physics: Any, hits: Any, wetness: float, power: Any, rng: np.random.Generator
) -> tuple[Any, Any] | None:
    """:func:`~rt_lidar.physics.spray.spray_apply` on the device (the same function, on the hits' array
    module): every ray's spray echo ``(range m, power W)`` (power 0: none)."""
    return spray_apply(physics.echo, hits, wetness, power, rng)


def wet_columns(physics: Any, hits: Any, rng: np.random.Generator, power: Any, w_ray: Any) -> list[list[Any]]:
    """:func:`~rt_lidar.physics.returns.wet_echoes` on the device: the road echoes in ``power`` darkened
    and attenuated through the spray (in place), and the echo columns (range, amplitude, reflectance,
    segment, flags; one a sub-ray) of each sub-ray's mirror ghost and of each pulse's spray echo (in its
    first sub-ray's column), attenuated two-way by the rain, fog and snow at their ranges."""
    xp = physics.xp
    f32 = xp.float32
    wetness = wetness_of(physics)
    weather = physics.config.weather
    a_w = np.float32(0.0 if weather is None else weather.extinction_per_m)
    n = len(hits)
    ghost = wet_road_device(physics, hits, wetness, power)
    spray = spray_device(physics, hits, wetness, power, rng)
    new: list[list[Any]] = []
    if ghost is not None:
        g_r, g_p, g_s, g_seg = ghost
        new.append([g_r, (g_p * w_ray).astype(f32), g_s, g_seg, xp.zeros(n, xp.uint8)])
    if spray is not None:
        s_r, s_p = spray
        if hits.subrays > 1:  # one spray echo a pulse: its first sub-ray's
            s_p = xp.where(xp.arange(n) % hits.subrays == 0, s_p, np.float32(0)).astype(f32)
        flag = xp.where(s_p > 0, np.uint8(PointFlag.RAIN_CLUTTER), np.uint8(0)).astype(xp.uint8)
        new.append([s_r, s_p, xp.zeros(n, f32), xp.zeros(n, xp.uint32), flag])
    if a_w > 0:
        for col in new:
            with np.errstate(invalid="ignore"):
                fade = xp.exp(np.float32(-2.0) * a_w * xp.where(xp.isfinite(col[0]), col[0], np.float32(0)))
            col[1] = (col[1] * fade).astype(f32)
    return new
