"""KITTI ``.bin`` files put back on their firing grid laser by laser (docs/realism.md, change 32).

KITTI stores each laser's sweep from its seam straight ahead: [0, +40] deg, then [-40, 0) in the
camera crop. Cutting rings where the azimuth jumps back joined one laser's right half to the next
laser's left half; in frame 000008 the lowest ring's left half then held no points, and its rays there
counted as 65 holes in the near road (3.7 % of the near road's rays instead of 0.8 %)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from real_frames import REAL
from road_sweeps import flat_road_lasers

from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_grid import kitti_laser_rings, read_kitti_bin

ELEV_DEG = np.linspace(-15.0, -8.0, 12)
"""Twelve lasers over a flat road, the lowest first meets it 6.6 m out from 1.73 m up."""


def _road_sweep(seam_at_zero: bool) -> tuple[np.ndarray, np.ndarray]:
    """(points, laser) of twelve lasers over a flat road 1.73 m down, cropped to +-40 deg, stored laser
    after laser: from the seam straight ahead ([0, 40] then [-40, 0)) or from -40 to 40."""
    az = np.arange(-40.0, 40.0, 0.17)
    if seam_at_zero:
        az = np.concatenate([az[az >= 0], az[az < 0]])
    return flat_road_lasers(ELEV_DEG, [az] * len(ELEV_DEG))


@pytest.mark.parametrize("seam_at_zero", [True, False])
def test_each_ring_is_one_laser_wherever_its_sweep_starts(seam_at_zero: bool) -> None:
    xyz, laser = _road_sweep(seam_at_zero)
    rings = kitti_laser_rings(xyz)
    assert rings.max() + 1 == len(ELEV_DEG)
    assert np.array_equal(rings, laser)


def test_a_road_stored_from_its_seam_has_no_holes(tmp_path: Path) -> None:
    xyz, _ = _road_sweep(seam_at_zero=True)
    path = tmp_path / "road.bin"
    np.concatenate([xyz, np.full((len(xyz), 1), 0.3)], 1).astype(np.float32).tofile(path)
    g = read_kitti_bin(path)
    assert g.range_m.shape[0] == len(ELEV_DEG)
    assert int(g.returned.sum()) == len(xyz)
    s = realism_statistics(g)
    assert s["holes"] == 0  # the old cut made the lowest ring's left half 235 empty rays
    assert s["hole_rate_by_class"]["ground_0_10m"] == 0.0


@pytest.mark.skipif(REAL is None, reason="../shared/reference/real absent")
def test_kittis_near_road_keeps_its_rays() -> None:
    assert REAL is not None
    k = REAL / "kitti_000008"
    g = read_kitti_bin(k / "velodyne_000008.bin", k / "calib.txt")
    assert g.range_m.shape[0] == 46  # the crop's 46 lasers (47 half-joined rings before)
    # across the seam straight ahead a ring's two returns meet at one elevation (one laser): 0.003 deg
    # in the median, against 0.37 deg (one laser spacing) with the rings joined across the seam
    steps = []
    for k in range(g.range_m.shape[0]):
        ok = g.returned[k] & np.isfinite(g.azimuth_deg[k])
        az, xyz = g.azimuth_deg[k][ok], g.xyz[k][ok]
        if (az < 0).any() and (az >= 0).any():
            el = np.degrees(np.arcsin(xyz[:, 2] / np.linalg.norm(xyz, axis=1)))
            steps.append(abs(el[az < 0][np.argmax(az[az < 0])] - el[az >= 0][np.argmin(az[az >= 0])]))
    assert len(steps) > 40
    assert np.median(steps) < 0.05
    rate = realism_statistics(g)["hole_rate_by_class"]["ground_0_10m"]
    assert rate < 0.015  # 0.037 with the rings joined across the seam
