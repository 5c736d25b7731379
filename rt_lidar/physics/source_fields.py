"""Per-point fields a hit source computed itself, carried from its rays to the points they made.

Cosys-AirSim's GPU lidar answers its own intensity per cell (:attr:`Hits.source_intensity`); a point
keeps it (``Scan.extras['source_intensity']``) when the point is the echo of the surface that ray hit.
A point that is not (weather clutter, a receiver false alarm, a wet road's mirror ghost, a fault's or
another lidar's false point) has no source value: NaN.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import PointFlag

__all__ = ["EXTRA_FILL", "extra_fill", "source_intensity_of_points"]

_NOT_THE_RAYS_SURFACE = int(
    PointFlag.RAIN_CLUTTER
    | PointFlag.FOG_CLUTTER
    | PointFlag.SNOW_CLUTTER
    | PointFlag.AMBIENT_NOISE
    | PointFlag.CROSSTALK
)

EXTRA_FILL: dict[str, float] = {"source_intensity": float("nan")}
"""The value of a per-point extra on a point that did not get one (others: 0)."""


def extra_fill(name: str, length: int, dtype: np.dtype) -> np.ndarray:
    """``length`` values of extra ``name`` for points added without it (false points, crosstalk)."""
    return np.full(length, EXTRA_FILL.get(name, 0), dtype)


def source_intensity_of_points(
    hits: Hits, pulse: np.ndarray, segment: np.ndarray, flags: np.ndarray
) -> np.ndarray | None:
    """The source's intensity of each detected point (``pulse``: its firing, ``segment`` and ``flags``
    as the physics reported it), NaN where the point is not its ray's surface; None when the source
    gave none. The sources that compute one cast a pulse as one ray; under a sub-ray bundle no
    point is one ray's, and every value is NaN."""
    own = hits.source_intensity
    if own is None:
        return None
    ray = np.asarray(pulse, np.int64)
    out = np.full(ray.shape[0], np.nan, np.float32)
    if ray.size == 0 or hits.subrays != 1:
        return out
    same = (
        (hits.material[ray] >= 0)
        & (np.asarray(segment) == hits.segment[ray])
        & ((np.asarray(flags).astype(np.int64) & _NOT_THE_RAYS_SURFACE) == 0)
    )
    out[same] = own[ray[same]]
    return out
