"""Full 360-degree KITTI ``.bin`` frames (``velodyne/``, not the camera-cropped ``velodyne_reduced``)
read on their firing grid (docs/realism.md, change 53).

Twelve full frames of OpenPCDet's sample data were misread two ways: a step back of a hundredth of a
degree inside one laser's sweep started a new ring (65-88 rings instead of 64 in seven of them, each
split laser's halves counting the other half as raydrop), and with a ``calib.txt`` beside the file every
return of the whole turn stayed "in view", so the raydrop in camera 2's view was divided by six times
too many rays (0.014 instead of 0.08 on testing/000001)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from road_sweeps import flat_road_lasers

from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_grid import kitti_laser_rings, read_kitti_bin

ELEV_DEG = np.linspace(-14.0, -6.0, 12)
"""Twelve lasers over a flat road 1.73 m down, all inside the test camera's image rows."""
AZ_STEP_DEG = 0.17

CALIB = """P2: 700 0 621 0 0 700 187.5 0 0 0 1 0
R0_rect: 1 0 0 0 1 0 0 0 1
Tr_velo_to_cam: 0 -1 0 0 0 0 -1 0 1 0 0 0
"""
"""A camera looking straight ahead from the lidar's origin, 1242x375 pixels: +-41.6 deg of azimuth."""


def _full_turn(jitter: bool) -> tuple[np.ndarray, np.ndarray]:
    """(points, laser) of a full turn over a flat road stored as KITTI does (each laser from 0 to +180
    deg, then -180 to 0); laser 4 drops its returns at 10-12 deg (in view); with ``jitter`` one point of
    laser 7 lies 0.01 deg behind the one before it (as at an object's edge in a real frame)."""
    az = np.arange(0.0, 360.0, AZ_STEP_DEG)
    az = np.where(az >= 180.0, az - 360.0, az)
    lasers = []
    for k in range(len(ELEV_DEG)):
        a = az.copy()
        if k == 4:
            a = a[(a < 10.0) | (a > 12.0)]
        if jitter and k == 7:
            a[300] = a[299] - 0.01
        lasers.append(a)
    return flat_road_lasers(ELEV_DEG, lasers)


def _write(path: Path, xyz: np.ndarray) -> Path:
    np.concatenate([xyz, np.full((len(xyz), 1), 0.3)], 1).astype(np.float32).tofile(path)
    return path


def test_a_step_back_of_a_hundredth_of_a_degree_stays_in_its_laser() -> None:
    xyz, laser = _full_turn(jitter=True)
    rings = kitti_laser_rings(xyz)
    assert rings.max() + 1 == len(ELEV_DEG)  # the old reader began a 13th ring at the step back
    assert np.array_equal(rings, laser)


def test_a_full_turn_and_its_camera_crop_read_the_same_view(tmp_path: Path) -> None:
    xyz, _ = _full_turn(jitter=False)
    (tmp_path / "full").mkdir()
    (tmp_path / "crop").mkdir()
    for d in ("full", "crop"):
        (tmp_path / d / "calib.txt").write_text(CALIB)
    az = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]))
    ahead = np.where(xyz[:, 0] > 0, xyz[:, 0], np.nan)
    u, v = 621 + 700 * (-xyz[:, 1] / ahead), 187.5 + 700 * (-xyz[:, 2] / ahead)
    with np.errstate(invalid="ignore"):
        in_image = (xyz[:, 0] > 0) & (u >= 0) & (u < 1242) & (v >= 0) & (v < 375)
    assert 0.18 < in_image.mean() < 0.25 and np.abs(az[in_image]).max() < 42
    full = read_kitti_bin(_write(tmp_path / "full" / "f.bin", xyz), tmp_path / "full" / "calib.txt")
    crop = read_kitti_bin(_write(tmp_path / "crop" / "f.bin", xyz[in_image]), tmp_path / "crop" / "calib.txt")
    for g in (full, crop):
        assert g.range_m.shape[0] == len(ELEV_DEG)
        assert int((g.returned & g.in_view).sum()) == int(in_image.sum())  # old: the full turn's 25,404
    drops_full = int((full.in_view & ~full.returned).sum())
    drops_crop = int((crop.in_view & ~crop.returned).sum())
    assert drops_full == drops_crop == round(2.0 / AZ_STEP_DEG)  # laser 4's gap at 10-12 deg
    sf, sc = realism_statistics(full), realism_statistics(crop)
    assert sf["drop_share"] == sc["drop_share"] > 0.002


VENDORED = Path(__file__).parents[1] / "data" / "real" / "HDL-64E" / "kitti_testing_000005.bin"
"""A full KITTI turn (OpenPCDet PR #653's sample testing/000005, tests/data/real/README.md)."""


def test_a_real_full_turn_reads_one_ring_a_laser() -> None:
    """KITTI's testing frame 000005 holds ten steps back of under 1 deg inside its lasers' sweeps: the
    old reader made 74 rings of its 64 lasers."""
    a = np.fromfile(VENDORED, np.float32).reshape(-1, 4)
    assert len(a) == 109_773
    rings = kitti_laser_rings(a[:, :3])
    assert rings.max() + 1 == 64
    el = np.degrees(np.arctan2(a[:, 2], np.hypot(a[:, 0], a[:, 1])))
    medians = np.array([np.median(el[rings == k]) for k in range(64)])
    assert medians[0] > 1.5 and medians[-1] < -23.0  # the upper block's top laser to the lower's last
    g = read_kitti_bin(VENDORED)
    assert g.range_m.shape[0] == 64
    assert int(g.returned.sum()) == len(a)
    s = realism_statistics(g)
    assert 0.1 < s["hole_share"] < 0.4  # the whole turn's (0.33); its view's is change 53's table
