"""A rough road's monostatic echo brightening at grazing incidence (the grazing backscatter lobe).

Seen and lit from the same direction, the macrotexture of a road's surface course (chips standing
0.5-1.5 mm proud of the binder every 8-16 mm) hides its own shadows, and at grazing angles ``g`` of a few
degrees the beam meets only the chips' faces turned towards it: the echo per unit of mean-plane reflectance
grows as the grazing angle falls (the shadow-hiding opposition effect of the macrotexture, which Hapke's
roughness correction, :func:`rt_lidar.sensor.hapke.rough_cosine`, holds only down to a few degrees).
The material's ``grazing_lobe_deg`` ``g0`` and ``grazing_lobe_exponent`` ``n`` scale the echo (its power
and its effective reflectance) by

    G(g) = max(1, (g0 / max(g, GRAZING_FLOOR_DEG))^n),   g = asin(cos i) (90 deg - incidence),

1 above ``g0``. Both are fitted to real frames (docs/realism.md change 73), not measured: no published
monostatic reflectance of asphalt below ~5 deg grazing was found.
"""

from __future__ import annotations

from typing import Any

from rt_lidar.kernels.xp import array_module

__all__ = ["GRAZING_FLOOR_DEG", "grazing_apply", "grazing_gain", "material_grazing_gain"]

GRAZING_FLOOR_DEG = 0.25
"""Smallest grazing angle the gain takes (deg): the road at 0.25 deg lies ~400 m from a sensor 1.8 m up,
past every preset's range; it bounds the gain at ``(g0 / 0.25)^n``."""


def grazing_gain(cos_incidence: Any, g0_deg: Any, exponent: Any) -> Any:
    """``max(1, (g0 / max(g, GRAZING_FLOOR_DEG))^n)`` (float32) at each incidence cosine, ``g`` the grazing
    angle ``asin(cos i)`` in degrees; 1 where ``g0`` is 0."""
    xp = array_module(cos_incidence)
    c = xp.clip(cos_incidence.astype(xp.float64), 0.0, 1.0)
    g = xp.maximum(xp.degrees(xp.arcsin(c)), GRAZING_FLOOR_DEG)
    ratio = xp.maximum(xp.asarray(g0_deg, xp.float64) / g, 1.0)
    return (ratio ** xp.asarray(exponent, xp.float64)).astype(xp.float32)


def grazing_apply(materials: Any, material: Any, cos_incidence: Any, power: Any, refl: Any) -> None:
    """Scale ``power`` and ``refl`` (one per ray, in place) by :func:`grazing_gain` of each ray's material
    (``material`` >= 0; the :class:`~rt_lidar.sensor.materials.MaterialArrays` ``materials``' lobe); the
    same code on the host's NumPy arrays and the device's CuPy ones."""
    g0, n = materials.grazing_lobe_deg, materials.grazing_lobe_exponent
    if g0 is None or n is None:
        return
    xp = array_module(power)
    g0_t, n_t = xp.asarray(g0), xp.asarray(n)
    mat = material.astype(xp.int64)
    sel = xp.flatnonzero((mat >= 0) & (g0_t[xp.maximum(mat, 0)] > 0) & xp.isfinite(cos_incidence))
    if sel.size == 0:
        return
    m = mat[sel]
    f = grazing_gain(cos_incidence[sel], g0_t[m], n_t[m])
    power[sel] *= f
    refl[sel] *= f


def material_grazing_gain(materials: Any, index: int, cos_incidence: Any) -> Any:
    """:func:`grazing_gain` of material ``index``'s lobe at incidence cosines ``cos_incidence`` (float32;
    1 where no material of ``materials`` has a lobe)."""
    g0, n = materials.grazing_lobe_deg, materials.grazing_lobe_exponent
    if g0 is None or n is None:
        xp = array_module(cos_incidence)
        return xp.ones(cos_incidence.shape, xp.float32)
    return grazing_gain(cos_incidence, g0[index], n[index])
