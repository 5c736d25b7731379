"""A wet road as the lidar sees it: a water film over asphalt (issue 14, item 11).

``road_wetness`` w (0..1, :class:`~rt_lidar.physics.weather.WeatherConfig`, AirSim's ``Roadwetness``)
is the share of the beam footprint on the road that lies under a smooth water film; the rest stays
dry. The source marks the rays whose first surface is the road (``Hits.wet``: asphalt or lane paint
facing up, :data:`ROAD_MATERIALS`) and casts each one's mirror ray off the film
(``Hits.mirror_*``); this module turns that into powers.

Physics (water n = 1.33 at 905 nm; unpolarised Fresnel reflectance R(theta)):

- **Darkening of the diffuse return.** Light enters the film with 1 - R(theta_i), is reflected by the
  asphalt (albedo A), and of the light scattered back up only 1 - r_i leaves the water: the rest is
  reflected back down (total internal reflection beyond 48.8 deg) and meets the asphalt again. This is
  Lekner & Dorf, "Why some things are darker when wet", Applied Optics 27(7), 1278-1280 (1988): the
  wet albedo is ``A (1 - r_i) / (1 - A r_i)`` with the internal diffuse reflectance
  ``r_i = 1 - (1 - r_e) / n^2`` (r_e: the film's external diffuse reflectance). For a lidar the
  radiance that leaves towards the sensor at theta also pays the Fresnel loss and the n^2 radiance
  compression at the exit, so the backscatter of the film is the dry one times
  ``M(theta) = (1 - R(theta))^2 / (n^2 (1 - A r_i))`` (:func:`wet_diffuse_factor`; r_i = 0.47): for
  asphalt (A = 0.27) 0.62 head-on, 0.28 at 80 deg, 0.11 at 85 deg, 0.025 at 88 deg. A sensor 1.8 m
  up sees the road at 80 deg from 10 m and at 88 deg from 50 m, so the wet road drops out with range
  while the near road stays.
  Mixed with the dry share: ``(1 - w) + w M``.
- **Mirror ghosts.** The specular share w R(theta) goes on as the mirror ray; its echo off an object
  comes back the same way, off the film again, so it carries ``w R(theta)^2`` of that object's echo at
  the whole path length (road + mirror leg). The sensor places it along the original ray: below the
  road, at the object's mirror image (:func:`ghost_echoes`). A ghost keeps the mirrored object's
  segment and has no flag (a real sensor cannot tell it apart).

What is not modelled: the film's own specular echo straight back (only at normal incidence, under the
car), puddle edges, film thickness, and waves; the film's reflectance is that of a flat interface.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rt_lidar.kernels.xp import array_module
from rt_lidar.physics.echo import EchoModel
from rt_lidar.pipeline.sources import Hits

__all__ = [
    "ROAD_MATERIALS",
    "WATER_N",
    "fresnel_reflectance",
    "ghost_echoes",
    "internal_diffuse_reflectance",
    "mirror_factor",
    "wet_diffuse_factor",
    "wet_road_apply",
    "wet_road_power",
]

WATER_N = 1.33
"""Refractive index of water in the near infrared (Hale & Querry 1973: 1.328 at 905 nm)."""
ROAD_MATERIALS = ("asphalt", "lane_paint")
"""Materials that carry the water film (the road); with their surface facing up (see the sources)."""


def fresnel_reflectance(cos_i: np.ndarray | float, n: float = WATER_N) -> np.ndarray:
    """Unpolarised Fresnel reflectance of an air -> medium (index ``n``) interface at incidence cosine
    ``cos_i`` (float64 array, of ``cos_i``'s array module): the mean of the s and p reflectances."""
    xp = array_module(cos_i)
    c = xp.clip(xp.asarray(cos_i, xp.float64), 0.0, 1.0)
    s2 = 1.0 - c * c
    ct = xp.sqrt(xp.maximum(1.0 - s2 / (n * n), 0.0))  # cos of the refracted angle
    rs = ((c - n * ct) / xp.maximum(c + n * ct, 1e-300)) ** 2
    rp = ((ct - n * c) / xp.maximum(ct + n * c, 1e-300)) ** 2
    return xp.asarray(0.5 * (rs + rp))


@functools.lru_cache(maxsize=8)
def internal_diffuse_reflectance(n: float = WATER_N) -> float:
    """r_i: the share of diffuse (Lambertian) light inside the film that the water surface sends back
    down, ``1 - (1 - r_e) / n^2`` with r_e = integral R(theta) 2 sin cos dtheta (Lekner & Dorf 1988);
    0.47 for water."""
    theta = np.linspace(0.0, math.pi / 2, 20001)
    f = fresnel_reflectance(np.cos(theta), n) * 2.0 * np.sin(theta) * np.cos(theta)
    r_e = float(np.sum((f[1:] + f[:-1]) / 2 * np.diff(theta)))
    return 1.0 - (1.0 - r_e) / (n * n)


def wet_diffuse_factor(cos_i: np.ndarray, albedo: np.ndarray, n: float = WATER_N) -> np.ndarray:
    """M(theta): backscatter of a surface of albedo ``albedo`` under a water film over its dry
    backscatter, at incidence cosine ``cos_i`` (module docstring; float64)."""
    xp = array_module(cos_i)
    r = fresnel_reflectance(cos_i, n)
    a = xp.clip(xp.asarray(albedo, xp.float64), 0.0, 1.0)
    return xp.asarray((1.0 - r) ** 2 / (n * n * (1.0 - a * internal_diffuse_reflectance(n))))


def wet_road_power(cos_i: np.ndarray, albedo: np.ndarray, wetness: float) -> np.ndarray:
    """Factor on the road's echo power at ``wetness`` w: ``(1 - w) + w M(theta)`` (float32)."""
    m = wet_diffuse_factor(cos_i, albedo)
    return array_module(cos_i).asarray((1.0 - wetness) + wetness * m, np.float32)


def mirror_factor(cos_i: np.ndarray, wetness: float) -> np.ndarray:
    """Share of an object's echo that returns over the film mirror: ``w R(theta)^2`` (float32)."""
    return array_module(cos_i).asarray(wetness * fresnel_reflectance(cos_i) ** 2, np.float32)


def wet_road_apply(
    echo: EchoModel, hits: Hits, wetness: float, power: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Darken the road echoes of ``hits`` in ``power`` (in place) and return the ghost echoes
    ``(range, power, reflectance, segment)`` of every ray (power 0: none); None when the road is dry
    or the source marked no road (then nothing changes)."""
    if wetness <= 0 or hits.wet is None:
        return None
    wet = np.asarray(hits.wet, bool)
    if wet.any():
        mat = np.maximum(hits.material[wet], 0)
        power[wet] *= wet_road_power(hits.cos_incidence[wet], echo.materials.hemispherical()[mat], wetness)
    return ghost_echoes(echo, hits, wetness)


def ghost_echoes(
    echo: EchoModel, hits: Hits, wetness: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every ray's mirror-ghost echo ``(range m, power W, effective reflectance, segment)``: the object
    its mirror ray met, at the whole path length, with :func:`mirror_factor` of its echo, through the
    sensor's window as every echo (``Hits.window_transmission``, a power fault: 1 without one)."""
    n = len(hits)
    g_r = np.full(n, np.inf, np.float32)
    g_p = np.zeros(n, np.float32)
    g_s = np.zeros(n, np.float32)
    g_seg = np.zeros(n, np.uint32)
    if hits.mirror_range_m is None or hits.mirror_material is None or hits.mirror_cos is None:
        return g_r, g_p, g_s, g_seg
    gi = np.nonzero(np.isfinite(hits.mirror_range_m) & (hits.mirror_material >= 0))[0]
    if gi.size:
        extra = mirror_factor(hits.cos_incidence[gi], wetness)
        if hits.window_transmission is not None:  # out through the sensor's window and back
            extra = extra * hits.window_transmission[gi]
        p, s = echo.power(hits.mirror_range_m[gi], hits.mirror_cos[gi], hits.mirror_material[gi], extra)
        g_r[gi], g_p[gi], g_s[gi] = hits.mirror_range_m[gi], p, s
        if hits.mirror_segment is not None:
            g_seg[gi] = hits.mirror_segment[gi]
    return g_r, g_p, g_s, g_seg
