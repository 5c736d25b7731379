"""Ghosts behind glass: the echo that comes back over a pane's mirror.

A pulse that meets a window sends most of its light through it and a share ``R(theta)`` on as the
mirror ray (:func:`rt_lidar.sensor.glazing.pane_mirror_reflectance`: the faces' Fresnel reflection, or a
silver-coated windscreen's). What the mirror ray lights scatters back along the same path, off the pane
again, to the sensor: an echo of the mirrored object at the whole path's length, ``R(theta)^2`` of what
the object would give there. The sensor puts it along the beam, behind the glass, at the unfolded range:
the ghost points behind shop windows and car glazing of real scans. The caster
(:class:`rt_lidar.pipeline.sources.WorldSource`) traces the mirror ray of each ray's first pane into
``Hits.glass_mirror_*``; :func:`glass_ghost_echoes` gives the echo, which competes with the ray's other
echoes (the strongest in single-return mode, one more echo of the pulse in multi-return modes).

A pane's mirror reflectance at normal incidence is its specular lobe's albedo in the material table
(:func:`rt_lidar.sensor.materials.lobe_albedo`: float glass 0.02, ``car_glass_ir`` 0.45).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rt_lidar.sensor.glazing import pane_mirror_reflectance
from rt_lidar.sensor.materials import MaterialArrays, lobe_albedo

if TYPE_CHECKING:
    from rt_lidar.physics.echo import EchoModel
    from rt_lidar.pipeline.sources import Hits

__all__ = ["glass_ghost_echoes", "mirror_r0"]


def mirror_r0(materials: MaterialArrays) -> np.ndarray:
    """(materials,) float64 each material's mirror reflectance at normal incidence: its specular lobe's
    albedo (0 where it has none)."""
    g = materials.specular_gain.astype(np.float64)
    n = materials.specular_exponent.astype(np.float64)
    return np.array([lobe_albedo(float(a), float(b)) if a > 0 else 0.0 for a, b in zip(g, n, strict=True)])


def glass_ghost_echoes(
    echo: EchoModel, hits: Hits
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Every ray's ghost echo over its first pane's mirror ``(range m, power W, effective reflectance,
    segment)`` (power 0: none); None when the hits carry no mirror rays of glass."""
    if hits.glass_mirror_range_m is None or hits.glass_mirror_material is None:
        return None
    if hits.glass_mirror_cos is None:
        return None
    n = len(hits)
    g_r = np.full(n, np.inf, np.float32)
    g_p = np.zeros(n, np.float32)
    g_s = np.zeros(n, np.float32)
    g_seg = np.zeros(n, np.uint32)
    gi = np.flatnonzero(
        np.isfinite(hits.glass_mirror_range_m)
        & (hits.glass_mirror_material >= 0)
        & (hits.glass_material >= 0)
    )
    if gi.size:
        r0 = mirror_r0(echo.materials)[hits.glass_material[gi]]
        r = pane_mirror_reflectance(r0, hits.glass_cos[gi].astype(np.float64))
        extra = (r * r).astype(np.float32)
        if hits.glass_mirror_transmission is not None:
            extra = extra * hits.glass_mirror_transmission[gi]
        p, s = echo.power(
            hits.glass_mirror_range_m[gi], hits.glass_mirror_cos[gi], hits.glass_mirror_material[gi], extra
        )
        g_r[gi], g_p[gi], g_s[gi] = hits.glass_mirror_range_m[gi], p, s
        if hits.glass_mirror_segment is not None:
            g_seg[gi] = hits.glass_mirror_segment[gi]
    return g_r, g_p, g_s, g_seg
