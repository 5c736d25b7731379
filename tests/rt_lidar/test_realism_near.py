"""Near-object holes against the returns around them (docs/realism.md, change 59): each near-object ray,
hole or return, read with range, brightness, edge, incidence, run and elevation from the returns around
it, the same rule on real and simulated scans. Checked on a synthetic street laid out as the real frames
are (rings x firings, a wall 4 m ahead before a farther one, holes placed on it) and on the vendored
nuScenes frame against the raydrop statistics' own near-object counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rt_lidar.validation.real_formats import read_real_scan
from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_grid import ScanGrid
from rt_lidar.validation.realism_near import NearRays, _runs, near_hole_rates, near_object_rays

NUSCENES = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "real"
    / "HDL-32E"
    / ("nuscenes_LIDAR_TOP_1532402927647951.pcd.bin")
)
H = 1.8
EL_DEG = np.arange(-15.0, 11.0, 1.0)
AZ_DEG = np.arange(1000) * 0.36
RING_0 = int(np.flatnonzero(EL_DEG == 0.0)[0])
RING_UP = int(np.flatnonzero(EL_DEG == 3.0)[0])
COL_AHEAD = 0
COLS_20 = [round(a / 0.36) for a in (19.8, 20.16, 20.52)]
WALL_HALF_DEG = 40.0


def _street() -> tuple[ScanGrid, dict[str, list[tuple[int, int]]]]:
    """A road, a wall 4 m ahead (|azimuth| < 40 deg, up to 1.5 m) before a wall 12 m ahead; on the near
    wall one empty ray straight ahead, a run of three at 20 deg and one at its silhouette's edge."""
    el, az = np.radians(EL_DEG)[:, None], np.radians(AZ_DEG)[None, :]
    d = np.stack(np.broadcast_arrays(np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)), -1)
    azd = np.degrees(np.arctan2(d[..., 1], d[..., 0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        road = np.where(d[..., 2] < 0, H / -d[..., 2], np.inf)
        near = np.where((d[..., 0] > 0) & (np.abs(azd) < WALL_HALF_DEG), 4.0 / d[..., 0], np.inf)
        near = np.where(near * d[..., 2] < 1.5, near, np.inf)
        far = np.where((d[..., 0] > 0) & (np.abs(azd) < 80.0), 12.0 / d[..., 0], np.inf)
        far = np.where(far * d[..., 2] < 4.0, far, np.inf)
    r = np.minimum(np.minimum(road, near), far)
    edge_col = int(np.flatnonzero(AZ_DEG < WALL_HALF_DEG)[-1])
    placed = {
        "single": [(RING_0, COL_AHEAD)],
        "run3": [(RING_0, c) for c in COLS_20],
        "edge": [(RING_UP, edge_col)],
    }
    drop = ~np.isfinite(r)
    for cells in placed.values():
        for k, c in cells:
            drop[k, c] = True
    rng_m = np.where(drop, 0.0, r)
    xyz = np.where(drop[..., None], np.nan, d * rng_m[..., None])
    grid = ScanGrid("street", xyz, rng_m, np.where(drop, 0.0, 40.0), d, np.ones(r.shape, bool), 1.0, "counts")
    return grid, placed


def _at(rays: NearRays, cells: list[tuple[int, int]]) -> np.ndarray:
    index = {(int(k), int(c)): i for i, (k, c) in enumerate(zip(rays.ring, rays.column, strict=True))}
    return np.array([index[cell] for cell in cells])


def test_the_placed_holes_are_read_with_their_run_edge_and_incidence() -> None:
    grid, placed = _street()
    rays = near_object_rays(grid)
    assert rays is not None
    assert int(rays.hole.sum()) == 5  # every placed hole, nothing else
    single, run3, edge = (_at(rays, placed[name]) for name in ("single", "run3", "edge"))
    assert rays.hole[np.r_[single, run3, edge]].all()
    assert rays.run[single].tolist() == [1] and rays.run[run3].tolist() == [3, 3, 3]
    assert rays.run[edge].tolist() == [1]
    assert not rays.edge[single].any() and not rays.edge[run3].any()  # inside the smooth wall
    assert rays.edge[edge].all()  # beside the 12 m wall behind the silhouette
    assert rays.incidence_deg[single][0] == pytest.approx(0.0, abs=3.0)  # the wall faces the ray
    assert rays.incidence_deg[run3] == pytest.approx(np.full(3, 20.2), abs=3.0)
    assert rays.range_m[single][0] == pytest.approx(4.0, abs=0.1)
    # a return on the wall at 30 deg and 5 deg down: its own angle to the wall's normal
    col_30 = round(30.0 / 0.36)
    ring_down = int(np.flatnonzero(EL_DEG == -5.0)[0])
    at30 = _at(rays, [(ring_down, col_30)])
    expected = np.degrees(np.arccos(np.cos(np.radians(5.0)) * np.cos(np.radians(col_30 * 0.36))))
    assert not rays.hole[at30].any()
    assert rays.incidence_deg[at30][0] == pytest.approx(expected, abs=2.0)
    rates = near_hole_rates([rays])
    n = int(rays.hole.size)
    assert rates["all"] == (pytest.approx(5 / n), 5, n)
    assert rates["run_1"][:2] == (pytest.approx(0.4), 2) and rates["run_2_3"][:2] == (pytest.approx(0.6), 3)
    assert rates["edge"][1] == 1 and rates["interior"][1] == 4
    # the edge hole lies at 4 m / cos(39.6 deg) = 5.2 m
    assert rates["range_2_5m"][1] == 4 and rates["range_5_10m"][1] == 1


def test_the_near_rays_are_the_raydrop_statistics_near_object_class() -> None:
    grid, _ = _street()
    rays = near_object_rays(grid)
    assert rays is not None
    returns, holes = realism_statistics(grid)["hole_class_counts"]["object_0_10m"]
    assert (int((~rays.hole).sum()), int(rays.hole.sum())) == (returns, holes)


def test_runs_wrap_round_the_ring() -> None:
    missing = np.zeros((2, 10), bool)
    missing[0, [8, 9, 0, 1]] = True  # one run of four across column 0
    missing[1, 4] = True
    k = np.array([0, 0, 0, 1])
    c = np.array([9, 0, 1, 4])
    assert _runs(missing, k, c).tolist() == [4, 4, 4, 1]


@pytest.mark.skipif(not NUSCENES.exists(), reason="vendored nuScenes frame missing")
def test_nuscenes_near_rays_match_the_statistics_and_split_into_classes() -> None:
    grid = read_real_scan(NUSCENES, "HDL-32E")
    rays = near_object_rays(grid)
    assert rays is not None
    returns, holes = realism_statistics(grid)["hole_class_counts"]["object_0_10m"]
    assert (int((~rays.hole).sum()), int(rays.hole.sum())) == (returns, holes)
    assert rays.range_m.min() >= 2.0  # the ego zone (its roof at 0.5-1.5 m) stays out
    rates = near_hole_rates([rays])
    assert rates["dark"][1] + rates["bright"][1] == holes
    assert rates["edge"][1] + rates["interior"][1] == holes
    assert sum(rates[f"run_{s}"][1] for s in ("1", "2_3", "4_10", "11_up")) == holes
    # change 59's reading of this frame: half its near holes are single empty rays
    single_share = rates["run_1"][0]
    assert single_share is not None and 0.3 < single_share < 0.7
