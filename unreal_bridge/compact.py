"""Compact hits answers (the ``compact`` option of the hits calls; docs/extension-call.md).

A compact answer sends each narrow integer field in its own width (``<i2``, ``<u4``, where a plain answer
widens them to ``<i4`` / ``<i8``), and what a ray passed through (the ``glass_*`` fields) only at the rows
where a ray passed something (and the mirror ray off its first pane, ``glass_mirror_*``, when sent):
``glass_rows`` (``<u4``, increasing) names those rows, and every glass
field holds one value per named row. Every other row reads the field's absent value. The client
spreads them back, bit for bit the plain answer's arrays. A HDL-64E frame of the street goes from 41 to
about 18 bytes a ray.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["GLASS_FIELDS", "GLASS_ROWS", "NARROW_DTYPES", "glass_rows", "spread_glass"]

GLASS_ROWS = "glass_rows"
"""The field naming the rows a compact answer's glass fields are sent for."""

GLASS_FIELDS: Mapping[str, float] = {
    "glass_range": np.inf,
    "glass_cos": 0.0,
    "glass_material": -1,
    "glass_segment": 0,
    "glass_transmission": 1.0,
    "glass_mirror_range": np.inf,
    "glass_mirror_cos": 0.0,
    "glass_mirror_material": -1,
    "glass_mirror_segment": 0,
}
"""The fields of the transmissive surface a ray crossed (and of the mirror ray off it, sent only when
some ray met glass), and each one's value for a ray that crossed none."""

_GLASS_REQUIRED = ("glass_range", "glass_cos", "glass_material", "glass_segment", "glass_transmission")

NARROW_DTYPES = {np.dtype(np.int16): "<i2", np.dtype(np.uint32): "<u4"}
"""Wire dtypes of the integer fields a compact answer sends in their own width."""


def _bits(a: np.ndarray) -> np.ndarray:
    """The raw bits of each element (so -0.0 differs from 0.0 and NaNs compare by payload)."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind in "fiu" else a


def glass_rows(extras: Mapping[str, np.ndarray], count: int) -> np.ndarray | None:
    """The rows (uint32, increasing) where any glass field differs, bit for bit, from its absent value;
    None when the extras do not hold every glass field (the mirror ray's ones where sent) as ``count``
    numbers."""
    names = [n for n in GLASS_FIELDS if n in _GLASS_REQUIRED or n in extras]
    arrays = [np.asarray(extras.get(name, np.zeros(0))) for name in names]
    if any(a.shape != (count,) or a.dtype.kind not in "fiu" for a in arrays):
        return None
    present, differs = np.zeros(count, bool), np.empty(count, bool)
    for a, absent in zip(arrays, (GLASS_FIELDS[n] for n in names), strict=True):
        np.not_equal(_bits(a), _bits(np.array([absent], a.dtype))[0], out=differs)
        present |= differs
    return np.flatnonzero(present).astype(np.uint32)


def spread_glass(name: str, values: np.ndarray, rows: np.ndarray, count: int) -> np.ndarray:
    """A glass field of ``count`` rows: ``values`` at ``rows``, its absent value everywhere else."""
    out = np.full(count, GLASS_FIELDS[name], values.dtype)
    out[rows] = values
    return out
