"""The crosstalk false points a rig's sensors report, for the rig and fault tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.points import PointFlag


def crosstalk_false_points(loop: Any, frames: int) -> dict[str, np.ndarray]:
    """Step ``loop`` (a :class:`~rt_lidar.rig.loop.RigLoop`) ``frames`` times: each sensor's points
    flagged as crosstalk, sorted by pulse (time, then ring)."""
    got: dict[str, list] = {}
    for _ in range(frames):
        for name, scans in loop.step().items():
            got.setdefault(name, []).extend(s.points for s in scans)
    out = {}
    for name, parts in got.items():
        p = np.concatenate(parts)
        false = p[(p["flags"] & int(PointFlag.CROSSTALK)) != 0]
        out[name] = false[np.lexsort((false["ring"], false["t"]))]
    return out
