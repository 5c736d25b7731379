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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.sensor.glazing import pane_mirror_reflectance
from rt_lidar.sensor.materials import MaterialArrays, lobe_albedo

if TYPE_CHECKING:
    from rt_lidar.physics.echo import EchoModel
    from rt_lidar.pipeline.sources import Hits

__all__ = ["ghost_echoes", "ghost_rows", "glass_ghost_echoes", "glass_ghost_rows", "mirror_r0"]


def mirror_r0(materials: MaterialArrays) -> np.ndarray:
    """(materials,) float64 each material's mirror reflectance at normal incidence: its specular lobe's
    albedo (0 where it has none)."""
    g = materials.specular_gain.astype(np.float64)
    n = materials.specular_exponent.astype(np.float64)
    return np.array([lobe_albedo(float(a), float(b)) if a > 0 else 0.0 for a, b in zip(g, n, strict=True)])


Echoes = tuple[Any, Any, Any, Any]
GhostRows = tuple[Any, Any, Any, Any, Any]
"""``(rows, range m, power W, effective reflectance, segment)`` of the rays that have a ghost."""


def glass_ghost_echoes(echo: EchoModel, hits: Hits) -> Echoes | None:
    """Every ray's ghost echo over its first pane's mirror ``(range m, power W, effective reflectance,
    segment)`` (power 0: none); None when the hits carry no mirror rays of glass."""
    return ghost_echoes(np, hits, mirror_r0(echo.materials), echo.power)


def glass_ghost_rows(echo: EchoModel, hits: Hits) -> GhostRows | None:
    """:func:`glass_ghost_echoes` of the rays that have a ghost only: ``(rows, range m, power W,
    effective reflectance, segment)``, each of the rows' length (every other ray's ghost is power 0,
    range inf); None when the hits carry no mirror rays of glass. The same values without four arrays
    of every ray and their scatter, for a caller that compares the ghosts with the rays' own echoes."""
    return ghost_rows(np, hits, mirror_r0(echo.materials), echo.power)


def ghost_echoes(
    xp: Any,
    hits: Any,
    r0_table: Any,
    power: Callable[[Any, Any, Any, Any], tuple[Any, Any]],
    index: Callable[[Any], Any] = lambda m: m,
) -> Echoes | None:
    """:func:`glass_ghost_echoes` on array module ``xp`` (NumPy on the host, CuPy in the device frame):
    the panes' mirror reflectances at normal incidence ``r0_table`` (:func:`mirror_r0`, per material),
    the echo ``power(range, cos, material, extra transmission) -> (power W, effective reflectance)`` of
    what the mirror rays met, ``index`` turning material numbers into the array module's indices."""
    got = ghost_rows(xp, hits, r0_table, power, index)
    if got is None:
        return None
    n = len(hits)
    g_r = xp.full(n, np.inf, xp.float32)
    g_p = xp.zeros(n, xp.float32)
    g_s = xp.zeros(n, xp.float32)
    g_seg = xp.zeros(n, xp.uint32)
    gi, r_m, p, s, seg = got
    if gi.size:
        g_r[gi], g_p[gi], g_s[gi], g_seg[gi] = r_m, p, s, seg
    return g_r, g_p, g_s, g_seg


def ghost_rows(
    xp: Any,
    hits: Any,
    r0_table: Any,
    power: Callable[[Any, Any, Any, Any], tuple[Any, Any]],
    index: Callable[[Any], Any] = lambda m: m,
) -> GhostRows | None:
    """:func:`glass_ghost_rows` on array module ``xp`` (the arguments as :func:`ghost_echoes` takes
    them): the rays with a finite mirror path off a pane to a surface, and their ghosts as float32
    (range, power, reflectance) and uint32 segments (0 where the hits carry none)."""
    if hits.glass_mirror_range_m is None or hits.glass_mirror_material is None:
        return None
    if hits.glass_mirror_cos is None:
        return None
    gi = xp.flatnonzero(
        xp.isfinite(hits.glass_mirror_range_m)
        & (hits.glass_mirror_material >= 0)
        & (hits.glass_material >= 0)
    )
    if not gi.size:
        empty = xp.zeros(0, xp.float32)
        return gi, empty, empty, empty, xp.zeros(0, xp.uint32)
    r0 = r0_table[index(hits.glass_material[gi])]
    r = pane_mirror_reflectance(r0, hits.glass_cos[gi].astype(xp.float64), xp=xp)
    extra = (r * r).astype(xp.float32)
    if hits.glass_mirror_transmission is not None:  # a fault on the sensor's window (faults/optical.py)
        extra = extra * hits.glass_mirror_transmission[gi]
    r_m = hits.glass_mirror_range_m[gi]
    with np.errstate(invalid="ignore", over="ignore"):
        p, s = power(r_m, hits.glass_mirror_cos[gi], index(hits.glass_mirror_material[gi]), extra)
    seg = (
        xp.zeros(gi.size, xp.uint32)
        if hits.glass_mirror_segment is None
        else xp.asarray(hits.glass_mirror_segment[gi], xp.uint32)
    )
    # as the full-size float32 / uint32 arrays of ghost_echoes hold them
    f32 = xp.float32
    return gi, xp.asarray(r_m, f32), xp.asarray(p, f32), xp.asarray(s, f32), seg
