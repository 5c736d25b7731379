"""Point colours for the viewer's colour modes, and the (N, 3) positions GL wants: NumPy only, no Qt.

Continuous modes go through a 256-entry table of the project's colormap; categorical ones (return id,
flags) through small fixed palettes. Every function returns contiguous float32 arrays, as
``GLScatterPlotItem.setData`` wants them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rt_lidar.points import PointFlag
from rt_lidar.sinks.range_image import colormap

__all__ = [
    "COLOR_MODES",
    "FLAG_COLORS",
    "RETURN_COLORS",
    "ColorScales",
    "point_colors",
    "point_positions",
    "range_image_rgb",
]

F32 = NDArray[np.float32]

COLOR_MODES: tuple[str, ...] = ("intensity", "reflectivity", "ring", "range", "return_id", "flags")
"""Colour modes, in the order of the keys 1..6."""

_LUT = np.concatenate([colormap(np.linspace(0.0, 1.0, 256)).astype(np.float32) / 255.0, np.ones((256, 1))], 1)
_LUT = np.ascontiguousarray(_LUT, dtype=np.float32)

RETURN_COLORS = np.array(
    [[0.30, 0.65, 1.00, 1.0], [1.00, 0.55, 0.10, 1.0], [0.35, 0.90, 0.35, 1.0], [0.90, 0.30, 0.90, 1.0]],
    np.float32,
)
"""Return 0 (first/strongest) blue, 1 orange, 2 green, 3+ magenta."""

FLAG_COLORS: tuple[tuple[PointFlag, tuple[float, float, float, float]], ...] = (
    (PointFlag.SATURATED, (1.00, 0.15, 0.15, 1.0)),
    (PointFlag.BLOOM, (1.00, 0.20, 0.90, 1.0)),
    (PointFlag.RAIN_CLUTTER, (0.10, 0.90, 1.00, 1.0)),
    (PointFlag.SNOW_CLUTTER, (1.00, 1.00, 1.00, 1.0)),
    (PointFlag.FOG_CLUTTER, (0.70, 0.75, 0.95, 1.0)),
    (PointFlag.AMBIENT_NOISE, (1.00, 0.90, 0.10, 1.0)),
    (PointFlag.THROUGH_GLASS, (0.30, 1.00, 0.40, 1.0)),
)
"""Colour of each flag, highest priority first; unflagged points are dim grey."""
_UNFLAGGED = np.array([0.45, 0.45, 0.45, 1.0], np.float32)


@dataclass(frozen=True)
class ColorScales:
    """What maps values to 0..1: the sensor's intensity full scale, the range shown, the ring count."""

    intensity_max: float = 255.0
    range_max_m: float = 80.0
    n_rings: int = 64


def _lut(values: np.ndarray) -> F32:
    idx = np.clip(np.nan_to_num(values, nan=0.0) * 255.0, 0.0, 255.0).astype(np.uint8)
    return _LUT[idx]


def _ranges(points: np.ndarray) -> F32:
    x, y, z = points["x"], points["y"], points["z"]
    return np.sqrt(x * x + y * y + z * z)


def point_colors(points: np.ndarray, mode: str, scales: ColorScales | None = None) -> F32:
    """(N, 4) RGBA float32 colours of structured ``points`` in colour ``mode`` (one of COLOR_MODES)."""
    s = scales or ColorScales()
    n = points.shape[0]
    if mode == "intensity":
        # square root: returns span orders of magnitude, the dark end would swallow most of them
        return _lut(np.sqrt(np.maximum(points["intensity"], 0.0) / max(s.intensity_max, 1e-12)))
    if mode == "reflectivity":
        return _lut(points["reflectivity"])
    if mode == "ring":
        return _lut(points["ring"].astype(np.float32) / max(s.n_rings - 1, 1))
    if mode == "range":
        return _lut(_ranges(points) / max(s.range_max_m, 1e-6))
    if mode == "return_id":
        return RETURN_COLORS[np.minimum(points["return_id"], len(RETURN_COLORS) - 1)]
    if mode == "flags":
        out = np.empty((n, 4), np.float32)
        out[:] = _UNFLAGGED
        flags = points["flags"]
        for bit, rgba in reversed(FLAG_COLORS):  # lowest priority first, so the highest ends on top
            out[(flags & int(bit)) != 0] = rgba
        return out
    raise ValueError(f"unknown colour mode '{mode}'; known: {', '.join(COLOR_MODES)}")


def point_positions(points: np.ndarray) -> F32:
    """(N, 3) contiguous float32 x, y, z of structured ``points`` (one strided copy)."""
    if points.size == 0:
        return np.zeros((0, 3), np.float32)
    fields: Mapping[str, Any] = points.dtype.fields or {}
    offsets = [fields[f][1] for f in ("x", "y", "z")]
    packed = all(fields[f][0] == np.float32 for f in ("x", "y", "z"))
    if packed and offsets == [offsets[0], offsets[0] + 4, offsets[0] + 8]:
        base = np.lib.stride_tricks.as_strided(
            points["x"], shape=(points.shape[0], 3), strides=(points.strides[0], 4), writeable=False
        )
        return np.ascontiguousarray(base)
    return np.stack([points["x"], points["y"], points["z"]], axis=-1).astype(np.float32)


def range_image_rgb(image: np.ndarray, vmax: float) -> NDArray[np.uint8]:
    """(rings, columns, 3) uint8 RGB of a range image (NaN = no return, black)."""
    return colormap(image / max(float(vmax), 1e-12))
