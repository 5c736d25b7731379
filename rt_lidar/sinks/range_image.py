"""Range images: the scan unrolled as rings x azimuth, written as a coloured PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from rt_lidar.sinks.atomic import atomic_write

__all__ = ["colormap", "range_image", "write_range_image_png"]

# Anchor colours of a perceptually ordered dark-blue -> green -> yellow map (positions 0, .25, .5, .75, 1).
_ANCHORS = np.array(
    [[0.19, 0.07, 0.23], [0.16, 0.47, 0.93], [0.14, 0.85, 0.60], [0.87, 0.86, 0.21], [0.98, 0.40, 0.10]]
)


def colormap(values: np.ndarray) -> np.ndarray:
    """RGB uint8 colours of values in [0, 1] (NaN -> black)."""
    v = np.clip(np.nan_to_num(values, nan=-1.0), -1.0, 1.0)
    pos = np.linspace(0.0, 1.0, len(_ANCHORS))
    rgb = np.stack([np.interp(np.clip(v, 0, 1), pos, _ANCHORS[:, c]) for c in range(3)], axis=-1)
    rgb[v < 0] = 0.0
    return (rgb * 255.0 + 0.5).astype(np.uint8)


def range_image(
    points: np.ndarray,
    elevations_deg: np.ndarray,
    columns: int,
    field: str = "intensity",
    azimuth_span_deg: float = 360.0,
) -> np.ndarray:
    """(rings, columns) float32 image of ``field`` (NaN where no return); row 0 is the highest beam.

    The columns span ``azimuth_span_deg`` centred straight ahead: for a full turn column 0 is azimuth
    +180 deg (behind), as a viewer expects; for a sensor that looks ahead, its field (points outside it
    are left out).
    """
    order = np.argsort(-np.asarray(elevations_deg))
    row_of_ring = np.empty_like(order)
    row_of_ring[order] = np.arange(order.size)
    img = np.full((order.size, columns), np.nan, np.float32)
    if points.size == 0:
        return img
    az = np.degrees(np.arctan2(points["y"], points["x"]))
    col_f = (azimuth_span_deg / 2.0 - az) / azimuth_span_deg * columns
    if azimuth_span_deg < 360.0:
        inside = (col_f >= 0) & (col_f < columns)
        points, col_f = points[inside], col_f[inside]
    col = col_f.astype(np.int64) % columns
    rows = row_of_ring[points["ring"].astype(np.int64)]
    img[rows, col] = points[field]
    return img


def write_range_image_png(path: str | Path, image: np.ndarray, vmax: float, row_scale: int = 4) -> Path:
    """Write a range image coloured by value / ``vmax``, each row repeated ``row_scale`` times."""
    rgb = colormap(image / float(vmax))
    rgb = np.repeat(rgb, max(1, row_scale), axis=0)
    with atomic_write(path) as fh:
        Image.fromarray(rgb, "RGB").save(fh, format="PNG")
    return Path(path)
