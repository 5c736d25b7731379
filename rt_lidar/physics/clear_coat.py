"""The clear coat over a car's paint: the base's echo passes the coat twice.

Automotive paint is a pigmented base coat under a clear lacquer (refractive index ~1.5). The lacquer's
own mirror reflection is the paints' narrow specular lobe (4 % head-on); the light that reaches the base
enters through the lacquer and leaves through it again, each time losing the interface's Fresnel
reflectance ``F(theta)`` (unpolarised; the layered models of Hanrahan & Krueger 1993, SIGGRAPH, and
Weidlich & Wilkie 2007, "Arbitrarily layered micro-facet surfaces", GRAPHITE). Seen and lit from one
direction, the base's echo is ``((1 - F(theta)) / (1 - F(0)))^2`` of a Lambertian one normalised
head-on, where the paint's measured lidar reflectance (the table's spectrum) is: 0.90 at 60 deg, 0.61 at
75 deg, 0.16 at 85 deg. A car seen along the street, its sides at grazing incidence, returns less than
a matt surface of its colour would.

:func:`coat_table` tabulates the factor per material on 1025 cosines; :func:`coat_apply` looks it up at
each echo's incidence cosine, after the echo steps (the same NumPy code behind the compiled and NumPy
backends, so both agree bit for bit), on the whole echo: the specular lobe answers only within a few
degrees of the normal, where the factor is 1.

**Metallic paints** (``flake_share`` > 0): under the coat, aluminium flakes lie nearly parallel to the
surface, tilted by a few degrees to a few tens (Ershov, Kolchin & Myszkowski 2001, Eurographics, and
Guenther, Chen, Goesele, Ivrissimtzis & Seidel 2005, "Efficient acquisition and realistic rendering of
car paint", VMV: a diffuse base plus Cook-Torrance flake lobes fitted to measured car paints). A flake
returns the beam to the sensor where its normal lies along the beam *refracted into the coat*
(``sin theta_t = sin theta / n``: 0-42 deg for n = 1.5), so the flakes' monostatic echo follows their
tilt distribution at ``theta_t``. For a Beckmann distribution of RMS slope ``m`` the microfacet lobe seen
and lit from one direction, through the coat both ways, is
``S_f(theta) / S_f(0) = T(theta)^2 / T(0)^2 * exp(-tan^2 theta_t / m^2) * cos(theta) / cos^6(theta_t)``
(``D / (4 cos^2 theta_t)`` inside the coat, radiance through the interface, ``S = pi f cos theta``);
with a share ``k`` of the head-on echo from the flakes, the paint's echo is
``coat(theta) * ((1 - k) + k * exp(-tan^2 theta_t / m^2) / cos^6(theta_t))`` of the Lambertian one
normalised head-on (:func:`paint_factor`). A metallic paint is brighter than a solid one near normal
incidence and darker beyond ~25 deg (the "flop" of metallic paints, which lidar intensity of silver cars
shows as a bright patch where a panel faces the sensor).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rt_lidar.sensor.glazing import TABLE_STEPS
from rt_lidar.sensor.materials import MaterialArrays

__all__ = ["coat_apply", "coat_factor", "coat_lookup", "coat_table", "paint_factor", "paint_params"]


def _fresnel(cos_i: np.ndarray, n: float) -> np.ndarray:
    c = np.clip(cos_i, 0.0, 1.0)
    ct = np.sqrt(1.0 - (1.0 - c * c) / (n * n))
    rs = ((c - n * ct) / (c + n * ct)) ** 2
    rp = ((ct - n * c) / (ct + n * c)) ** 2
    return np.asarray(0.5 * (rs + rp))


def coat_factor(cos_i: np.ndarray | float, n: float) -> np.ndarray:
    """``((1 - F(theta)) / (1 - F(0)))^2`` at incidence cosines ``cos_i`` for a coat of index ``n``
    (float64; 1 where ``n`` is 0: no coat)."""
    c = np.asarray(cos_i, np.float64)
    if n <= 0:
        return np.ones_like(c)
    f0 = _fresnel(np.array(1.0), n)
    return np.asarray(((1.0 - _fresnel(c, n)) / (1.0 - f0)) ** 2)


def paint_factor(
    cos_i: np.ndarray | float, n: float, flake_share: float = 0.0, flake_slope_rms: float = 0.25
) -> np.ndarray:
    """A paint's echo over the Lambertian one normalised head-on, at incidence cosines ``cos_i``: its
    clear coat's :func:`coat_factor` times the diffuse base's and the metallic flakes' shares (float64;
    ``flake_share`` 0: the coat alone). With no coat (``n`` 0) the flakes see the beam unrefracted."""
    coat = coat_factor(cos_i, n)
    if flake_share <= 0:
        return coat
    c = np.clip(np.asarray(cos_i, np.float64), 0.0, 1.0)
    sin_t = np.sqrt(1.0 - c * c) / (n if n > 0 else 1.0)
    cos_t = np.maximum(np.sqrt(1.0 - sin_t * sin_t), 1e-3)  # (grazing, uncoated: no flake faces it)
    tan2 = (sin_t / cos_t) ** 2
    flakes = np.exp(-tan2 / (flake_slope_rms * flake_slope_rms)) / cos_t**6
    return np.asarray(coat * ((1.0 - flake_share) + flake_share * flakes))


def paint_params(materials: MaterialArrays) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(coat index, flake share, flake RMS slope) per material, as :func:`coat_table` takes them."""
    assert materials.coat_index is not None
    return materials.coat_index, materials.flake_share, materials.flake_slope_rms


@functools.lru_cache(maxsize=16)
def _table(key: bytes) -> np.ndarray:
    rows = np.frombuffer(key, np.float32).reshape(3, -1)
    cos = np.arange(TABLE_STEPS + 1, dtype=np.float64) / TABLE_STEPS
    return np.stack([paint_factor(cos, float(n), float(k), float(m)) for n, k, m in rows.T]).astype(
        np.float32
    )


def coat_table(
    coat_index: np.ndarray, flake_share: np.ndarray | None = None, flake_slope_rms: np.ndarray | None = None
) -> np.ndarray:
    """(materials, TABLE_STEPS + 1) float32: each material's :func:`paint_factor` at ``cos = i /
    TABLE_STEPS`` (remembered for the few tables a run uses); no flakes where ``flake_share`` is None."""
    n = np.ascontiguousarray(coat_index, np.float32)
    k = np.zeros_like(n) if flake_share is None else np.ascontiguousarray(flake_share, np.float32)
    m = (
        np.full_like(n, 0.25)
        if flake_slope_rms is None
        else np.ascontiguousarray(flake_slope_rms, np.float32)
    )
    return _table(np.concatenate([n, k, m]).tobytes())


def coat_lookup(xp: Any, table: Any, material: Any, cos_i: Any) -> Any:
    """The clear coat's factor of echoes off ``material`` (int, -1 = none: any entry) at incidence cosines
    ``cos_i``, from a :func:`coat_table` already on ``xp`` (NumPy, or CuPy for the device frame): the
    nearest entry, float32 (:func:`rt_lidar.sensor.glazing.table_lookup_ratio`, written for either)."""
    c = xp.asarray(cos_i, dtype=xp.float32)
    c = xp.where(xp.isnan(c), np.float32(0), c)  # (a NaN cosine's echo is NaN already: any entry will do)
    idx = (xp.clip(c, np.float32(0), np.float32(1)) * np.float32(TABLE_STEPS) + np.float32(0.5)).astype(
        xp.int32
    )
    return xp.asarray(table[xp.maximum(material, 0), idx], dtype=xp.float32)


def coat_apply(
    materials: MaterialArrays, cos_i: np.ndarray, material: np.ndarray, power: np.ndarray, refl: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``power`` and ``refl`` of echoes off ``material`` at incidence cosines ``cos_i``, times the clear
    coat's (and metallic flakes') factor (new arrays; the same ones where no material has a coat)."""
    if materials.coat_index is None or material.size == 0:
        return power, refl
    f = coat_lookup(np, coat_table(*paint_params(materials)), material, cos_i)
    return (power * f).astype(np.float32, copy=False), (refl * f).astype(np.float32, copy=False)
