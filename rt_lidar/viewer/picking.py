"""Picking a point of the cloud on screen, and what the viewer says about it. No Qt here: the window
passes the camera's model-view-projection matrix and the click position in."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rt_lidar.points import PointFlag

__all__ = ["describe_point", "pick_point", "project_points"]


def project_points(positions: np.ndarray, mvp: np.ndarray, width: int, height: int) -> np.ndarray:
    """(N, 3) float32 screen x, y (pixels, origin top left) and clip-space w (> 0 in front of the camera)
    of ``positions`` (N, 3) under the 4x4 model-view-projection ``mvp``."""
    pos = np.asarray(positions, np.float32)
    m = np.asarray(mvp, np.float32)
    clip = pos @ m[:, :3].T + m[:, 3]  # (N, 4): M @ [x, y, z, 1]
    w = clip[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        sx = (clip[:, 0] / w + 1.0) * (0.5 * width)
        sy = (1.0 - clip[:, 1] / w) * (0.5 * height)
    return np.stack([sx, sy, w], axis=1)


def pick_point(
    positions: np.ndarray,
    mvp: np.ndarray,
    width: int,
    height: int,
    x: float,
    y: float,
    radius_px: float = 6.0,
) -> int | None:
    """Index of the point drawn under screen position (``x``, ``y``): of the points in front of the
    camera within ``radius_px`` of it, the nearest to the camera (the one a viewer sees); None if none."""
    if len(positions) == 0:
        return None
    screen = project_points(positions, mvp, width, height)
    d2 = (screen[:, 0] - x) ** 2 + (screen[:, 1] - y) ** 2
    near = np.nonzero((screen[:, 2] > 0) & (d2 <= radius_px * radius_px))[0]
    if near.size == 0:
        return None
    return int(near[np.argmin(screen[near, 2])])


def _flag_names(flags: int) -> str:
    names = [f.name.lower() for f in PointFlag if f.value and flags & f.value and f.name]
    return ", ".join(names) if names else "none"


def describe_point(point: Any, header: Mapping[str, Any]) -> str:
    """The fields of one point (a record of ``POINT_DTYPE``) as the viewer shows them."""
    x, y, z = float(point["x"]), float(point["y"]), float(point["z"])
    rng = math.sqrt(x * x + y * y + z * z)
    az = math.degrees(math.atan2(y, x))
    el = math.degrees(math.atan2(z, math.hypot(x, y)))
    imax = float(header.get("intensity_max", 255.0))
    intensity, refl = float(point["intensity"]), float(point["reflectivity"])
    t_ms, ring, ret = int(point["t"]) / 1e6, int(point["ring"]), int(point["return_id"])
    return "\n".join(
        [
            f"point    x {x:.3f}  y {y:.3f}  z {z:.3f} m",
            f"range    {rng:.3f} m   azimuth {az:+.2f} deg   elevation {el:+.2f} deg",
            f"intens.  {intensity:.1f} of {imax:g}   reflectivity {refl:.3f}",
            f"ring     {ring}   t {t_ms:.3f} ms   return {ret}",
            f"flags    {_flag_names(int(point['flags']))}   segment {int(point['segment'])}",
        ]
    )
