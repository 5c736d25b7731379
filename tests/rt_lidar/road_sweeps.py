"""Lidar points over a flat road, laser by laser, as KITTI's tests lay them out (the reader's ring and
view tests share them)."""

from __future__ import annotations

import numpy as np


def flat_road_lasers(
    elev_deg: np.ndarray, azimuths_deg: list[np.ndarray], height_m: float = 1.73
) -> tuple[np.ndarray, np.ndarray]:
    """(points, laser) of lasers at elevations ``elev_deg`` (below the horizon) over a flat road
    ``height_m`` down: laser k's returns at ``azimuths_deg[k]`` in the order given, the lasers one after
    another."""
    pts, laser = [], []
    for k, (el, az) in enumerate(zip(np.radians(elev_deg), azimuths_deg, strict=True)):
        r = height_m / np.sin(-el)
        a = np.radians(az)
        pts.append(
            np.stack([r * np.cos(el) * np.cos(a), r * np.cos(el) * np.sin(a), np.full(a.size, -height_m)], -1)
        )
        laser.append(np.full(a.size, k))
    return np.concatenate(pts), np.concatenate(laser)
