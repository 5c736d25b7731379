"""The ground horizon on each scan's own road (change 64): the road profile per azimuth sector, each ray
along its ring's own line, the detection probability by range and grazing angle."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.validation.realism import fit_ground, realism_statistics
from rt_lidar.validation.realism_grid import ScanGrid, grid_from_points
from rt_lidar.validation.realism_road import local_ground_rays, ring_lines, road_profile

RINGS = 48


def _directions() -> np.ndarray:
    """(48, 1000, 3) unit directions: 48 rings from -25 to -0.5 deg, 1,000 columns."""
    el = np.radians(np.r_[np.linspace(-25, -4, 24), np.linspace(-3.8, -0.5, 24)])
    az = np.radians(np.arange(1000) * 0.36)
    return np.stack(
        np.broadcast_arrays(
            np.cos(el)[:, None] * np.cos(az), np.cos(el)[:, None] * np.sin(az), np.sin(el)[:, None]
        ),
        -1,
    )


def _road(
    height: float,
    rise_from_m: float,
    grade: float,
    answers_to_m: float,
    origin_z: float = 0.0,
    wall_columns: int = 0,
) -> ScanGrid:
    """A sensor ``height`` over a road level to ``rise_from_m`` and rising at ``grade`` beyond it (along
    the ground, all round); lasers fire from ``origin_z`` above the sensor's origin; rays meeting the
    road farther than ``answers_to_m`` along it return nothing; the first ``wall_columns`` columns face a
    wall 10 m out."""
    d = _directions()
    tan_d = -d[..., 2] / np.hypot(d[..., 0], d[..., 1])  # the ray's fall per metre along the ground
    beam = height + origin_z
    rho = np.where(beam / tan_d <= rise_from_m, beam / tan_d, (beam + grade * rise_from_m) / (tan_d + grade))
    keep = rho < answers_to_m
    wall = (np.arange(d.shape[1]) < wall_columns)[None, :] & (rho > 10.0)
    rho = np.where(wall, 10.0, rho)
    keep |= wall
    flat_dir = d / np.hypot(d[..., 0], d[..., 1])[..., None]
    xyz = flat_dir * rho[..., None]
    xyz[..., 2] = origin_z - tan_d * rho
    ring = np.broadcast_to(np.arange(RINGS)[:, None], rho.shape)
    return grid_from_points("road", xyz[keep], np.full(int(keep.sum()), 30.0), ring[keep], 1.0, "counts")


def test_a_rising_road_is_met_where_it_rises_and_its_level_horizon_is_the_level_part() -> None:
    # level to 40 m (the near plane's ground), then rising 4 %, answering to 60 m along it: the plane meets
    # the ring that answers at 58 m 97 m out, the local surface where it answered
    s = realism_statistics(_road(1.8, 40.0, 0.04, 60.0))
    assert s["sensor_height_m"] == pytest.approx(1.8, abs=0.02)
    assert s["ground_horizon_returned_m"] < 50.0  # the near plane takes the risen road for objects on it
    assert 54.0 < s["ground_horizon_local_m"] < 61.0  # the road's own surface: where it answered
    assert s["grazing_at_local_horizon_deg"] > 3.0  # 1 deg of fall plus 2.3 deg of rise
    assert s["road_rise_50m"] == pytest.approx(0.04 * 10.0, abs=0.1)
    assert s["road_rise_70m"] is None  # the road is seen to 60 m
    assert 35.0 < s["ground_horizon_level_m"] < 41.0  # the level part's farthest ring
    cells = s["ground_pd_by_range_grazing"]
    assert any(r[0] == 50.0 and r[2] >= 3.0 and r[5] == 1.0 for r in cells)  # 50-60 m at 3 deg and more


def test_a_level_road_gives_the_same_horizon_on_the_plane_and_on_its_own_surface() -> None:
    s = realism_statistics(_road(1.8, 1e9, 0.0, 40.0))
    assert s["ground_horizon_local_m"] == pytest.approx(s["ground_horizon_m"], rel=0.03)
    assert s["ground_horizon_level_m"] == pytest.approx(s["ground_horizon_m"], rel=0.03)
    assert s["road_rise_50m"] is None and s["ground_horizon_local_m"] < 40.0


def test_lasers_firing_above_the_origin_are_met_along_their_own_line() -> None:
    # KITTI's S2: lasers 0.16-0.21 m above the frame's origin. A ray's elevation seen from the origin
    # changes with range, so the ring's median elevation puts a ray without a return too far out.
    g = _road(1.6, 1e9, 0.0, 40.0, origin_z=0.2, wall_columns=550)  # most of each ring at 10 m
    z0, _ = ring_lines(g)
    spans = np.array([np.ptp(r[r > 0]) if (r > 0).any() else 0.0 for r in g.range_m])
    assert (spans >= 2.0).sum() >= 10  # rings that see the wall and the road
    assert np.allclose(z0[spans >= 2.0], 0.2, atol=1e-6)  # their own line: 0.2 m above the origin
    plane = fit_ground(g.xyz[g.returned])
    assert plane is not None
    local = local_ground_rays(g, road_profile(g, plane))
    hit = g.returned & local.unblocked
    hit[:, :600] = False  # the sectors without the wall (whose foot the profile takes for a kerb)
    hit &= g.range_m > 12.5  # rings whose returns span 2 m or more (nearer ones keep their direction)
    assert np.allclose(local.range_m[hit], g.range_m[hit], rtol=0.01)  # each return where its ray meets
    s = realism_statistics(g)
    assert s["ground_horizon_m"] > 50.0  # the plane, the median elevation: past the last return
    assert 35.0 < s["ground_horizon_local_m"] < 40.5  # the lasers' own lines: where the road answered
