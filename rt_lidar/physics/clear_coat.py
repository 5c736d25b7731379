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
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rt_lidar.sensor.glazing import TABLE_STEPS
from rt_lidar.sensor.materials import MaterialArrays

__all__ = ["coat_apply", "coat_factor", "coat_lookup", "coat_table"]


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


@functools.lru_cache(maxsize=16)
def _table(key: bytes) -> np.ndarray:
    index = np.frombuffer(key, np.float32)
    cos = np.arange(TABLE_STEPS + 1, dtype=np.float64) / TABLE_STEPS
    return np.stack([coat_factor(cos, float(n)) for n in index]).astype(np.float32)


def coat_table(coat_index: np.ndarray) -> np.ndarray:
    """(materials, TABLE_STEPS + 1) float32: each material's :func:`coat_factor` at ``cos = i /
    TABLE_STEPS`` (remembered for the few tables a run uses)."""
    return _table(np.ascontiguousarray(coat_index, np.float32).tobytes())


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
    coat's factor (new arrays; the same ones where no material has a coat)."""
    if materials.coat_index is None or material.size == 0:
        return power, refl
    f = coat_lookup(np, coat_table(materials.coat_index), material, cos_i)
    return (power * f).astype(np.float32, copy=False), (refl * f).astype(np.float32, copy=False)
