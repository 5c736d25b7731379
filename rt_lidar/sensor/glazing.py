"""How much light a glass pane lets through at an angle: Fresnel reflection at its two faces and the
absorption in its body, for the one-way transmission a material gives at normal incidence.

A pane of index ``n`` (1.52, soda-lime float and automotive glass) reflects ``R(theta)`` at each face,
the mean of the s and p Fresnel reflectances (the lidar's light is not polarised at the pane), and its
body passes ``A^(1 / cos theta_t)`` of what enters (the path grows as ``1 / cos`` of the refracted angle
``theta_t``). The material table's one-way transmission ``T0`` at normal incidence fixes
``A = T0 / (1 - R(0))^2``; at incidence ``theta`` the pane passes

``T(theta) = (1 - R(theta))^2 * A^(1 / cos theta_t)``.

Float glass of ``T0`` = 0.85 passes 0.82 at 45 deg, 0.70 at 65 deg, 0.34 at 80 deg; NIR-absorbing car
glazing of 0.5 passes 0.39 at 60 deg and 0.25 at 75 deg. A lidar meets a street's windows at grazing
incidence (facades along the street, the side windows of parked cars), so most of what it sends through
them comes back through four such passes or not at all: as in real scans, windows are holes. The
multiple reflections inside the pane (a few per mille) are left out.

:func:`glass_angle_table` tabulates ``T(theta) / T0`` per material on 1025 cosines; the caster
(:class:`rt_lidar.pipeline.sources.WorldSource`) looks it up at each crossing's ``|n . d|``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "GLASS_INDEX",
    "TABLE_STEPS",
    "glass_angle_table",
    "pane_mirror_reflectance",
    "pane_transmission",
    "table_lookup_ratio",
]

GLASS_INDEX = 1.52
TABLE_STEPS = 1024


def _reflectance(cos_i: Any, n: float, xp: Any = np) -> Any:
    """Unpolarised Fresnel reflectance of one face at incidence cosines ``cos_i`` (air to index n), on
    the array module ``xp`` (NumPy, or CuPy for the device frame)."""
    c = xp.clip(xp.asarray(cos_i, dtype=float), 0.0, 1.0)
    cos_t = xp.sqrt(1.0 - (1.0 - c * c) / (n * n))
    rs = ((c - n * cos_t) / (c + n * cos_t)) ** 2
    rp = ((cos_t - n * c) / (cos_t + n * c)) ** 2
    return 0.5 * (rs + rp), cos_t


def pane_transmission(t0: Any, cos_i: Any, n: float = GLASS_INDEX) -> np.ndarray:
    """One-way transmission of a pane whose transmission at normal incidence is ``t0``, at incidence
    cosines ``cos_i`` (module docstring); 0 where ``t0`` is 0."""
    t0 = np.asarray(t0, float)
    r0, _ = _reflectance(1.0, n)
    body = np.clip(t0 / (1.0 - r0) ** 2, 0.0, 1.0)
    r, cos_t = _reflectance(cos_i, n)
    with np.errstate(divide="ignore"):
        absorbed = np.where(body > 0, np.exp(np.log(np.maximum(body, 1e-300)) / cos_t), 0.0)
    return np.asarray((1.0 - r) ** 2 * absorbed)


def glass_angle_table(transmission: np.ndarray, n: float = GLASS_INDEX) -> np.ndarray:
    """(materials, TABLE_STEPS + 1) float32: ``T(theta) / T0`` of each material (1 where opaque) at
    ``cos theta = i / TABLE_STEPS``."""
    cos = np.arange(TABLE_STEPS + 1, dtype=float) / TABLE_STEPS
    t0 = np.asarray(transmission, float)[:, None]
    ratio = np.where(t0 > 0, pane_transmission(t0, cos[None, :], n) / np.maximum(t0, 1e-30), 1.0)
    return np.asarray(np.clip(ratio, 0.0, 1.0), np.float32)


def table_lookup_ratio(table: np.ndarray, material: np.ndarray, cos_i: np.ndarray) -> np.ndarray:
    """``T(theta) / T0`` of materials ``material`` (int) at float32 cosines ``cos_i``: the nearest entry."""
    idx = (np.clip(cos_i, np.float32(0), np.float32(1)) * np.float32(TABLE_STEPS) + np.float32(0.5)).astype(
        np.int32
    )
    return np.asarray(table[np.maximum(material, 0), idx], np.float32)


def pane_mirror_reflectance(r0: Any, cos_i: Any, n: float = GLASS_INDEX, xp: Any = np) -> Any:
    """Share of a beam a pane sends on as its mirror ray at incidence cosines ``cos_i``, for the mirror
    reflectance ``r0`` it has at normal incidence (uncoated glass: its faces' Fresnel few per cent; a
    silver-coated athermic windscreen: ~0.45 at 905 nm): ``r0`` plus the rise of the faces' Fresnel
    reflectance towards grazing incidence, ``R(theta) = r0 + (1 - r0) (F(theta) - F(0)) / (1 - F(0))``
    (F: unpolarised Fresnel at index ``n``; 1 at grazing incidence, as every pane becomes a mirror), on
    the array module ``xp`` (NumPy, or CuPy for the device frame)."""
    f0, _ = _reflectance(1.0, n)
    f, _ = _reflectance(cos_i, n, xp)
    r0 = xp.clip(xp.asarray(r0, dtype=float), 0.0, 1.0)
    return xp.asarray(xp.clip(r0 + (1.0 - r0) * (f - f0) / (1.0 - f0), 0.0, 1.0))
