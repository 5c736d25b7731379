"""Raydrop by surface class and range band on real KITTI frames (docs/realism.md, change 54, a finding).

The model's raydrop was fitted to one frame, KITTI 000008 (changes 22-24, 30, 32). With the layout taken
out (:mod:`rt_lidar.validation.realism_holes`: the hole rate per class, not the share of holes), 000008
drops 21.7 % of the rays that meet objects within 10 m and 4.2 % of those on the road 10-20 m away; twelve
other HDL-64E frames drop 0-12.4 % (median 1.4 %) and 0.2-1.8 % (median 0.4 %). The vendored full turn
testing/000005, read in camera 2's view with 000008's calibration, is one of the three of the twelve whose
near objects drop most, and still drops about half of 000008's rate there."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from real_frames import REAL

from rt_lidar.validation.kitti_typical import CAMERA2_CALIB_000008, camera2_view
from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_grid import read_kitti_bin, read_kitti_calib
from rt_lidar.validation.realism_holes import hole_rates, near_share_on_layout

VENDORED = Path(__file__).parents[1] / "data" / "real" / "HDL-64E" / "kitti_testing_000005.bin"
"""A full KITTI turn (OpenPCDet PR #653's sample testing/000005, tests/data/real/README.md)."""

CALIB_000008 = CAMERA2_CALIB_000008
"""Camera 2's projection in KITTI frame 000008's calib.txt, so that another frame's full turn reads as the
same view (change 53)."""

RATES_000008 = {"object_0_10m": 0.217, "ground_10_20m": 0.042}
"""Frame 000008's hole rates in those two classes (change 54's table; checked against the frame itself
by the test below when ../shared/reference/real is present)."""


def _view_counts(bin_path: Path, tmp_path: Path) -> dict[str, tuple[int, int]]:
    """(returns, holes) per class of a full KITTI turn in camera 2's view (000008's calibration)."""
    shutil.copy(bin_path, tmp_path / bin_path.name)
    (tmp_path / "calib.txt").write_text(CALIB_000008)
    grid = read_kitti_bin(tmp_path / bin_path.name, tmp_path / "calib.txt")
    counts: dict[str, tuple[int, int]] = realism_statistics(grid)["hole_class_counts"]
    return counts


def test_a_typical_kitti_frame_drops_fewer_near_object_and_road_rays_than_000008(tmp_path: Path) -> None:
    counts = _view_counts(VENDORED, tmp_path)
    rates = hole_rates(counts)
    for k in ("object_0_10m", "ground_10_20m"):
        assert sum(counts[k]) > 2000, k  # thousands of rays: a rate, not chance
    near = rates["object_0_10m"]
    road = rates["ground_10_20m"]
    assert near is not None and road is not None
    assert 0.08 < near < 0.6 * RATES_000008["object_0_10m"]  # 0.123 (463 holes of 3,773 rays)
    assert road < 0.25 * RATES_000008["ground_10_20m"]  # 0.005 (16 of 3,101)
    # the excess is class by class, not the frame's: its objects 10-20 m drop more than 000008's (0.045)
    mid = rates["object_10_20m"]
    assert mid is not None and mid > 0.08  # 0.104
    # its own rates on its own layout give back the frame's near-object share of holes
    own = near_share_on_layout(rates, counts)
    assert own is not None and 0.6 < own < 0.85  # 0.731


@pytest.mark.skipif(REAL is None, reason="../shared/reference/real absent")
def test_frame_000008s_rates_are_the_ones_compared(tmp_path: Path) -> None:
    assert REAL is not None
    k = REAL / "kitti_000008"
    grid = read_kitti_bin(k / "velodyne_000008.bin", k / "calib.txt")
    rates = hole_rates(realism_statistics(grid)["hole_class_counts"])
    for name, value in RATES_000008.items():
        got = rates[name]
        assert got is not None and abs(got - value) < 0.0015, (name, got)


@pytest.mark.skipif(REAL is None, reason="../shared/reference/real absent")
def test_the_camera_view_is_frame_000008s_calibration() -> None:
    """``kitti_typical.camera2_view`` (what ``far_object_rays`` reads without ``../shared``) holds frame
    000008's own camera-2 matrices."""
    assert REAL is not None
    real = read_kitti_calib(REAL / "kitti_000008" / "calib.txt")
    view = camera2_view()
    for key in ("P2", "R0_rect", "Tr_velo_to_cam"):
        assert np.array_equal(view[key], real[key])
