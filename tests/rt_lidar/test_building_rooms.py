"""The rooms behind building windows (docs/realism.md, change 43): a beam that passes a facade's glass
meets a back wall 5 m inside (twice the window head's 2.5 m), light painted (0.5 at 905 nm), or a blind
just behind the glass; upper storeys have floors; 56 % of the windows are double glazed. Before, a dark
plane (0.08) stood 3 m inside and most rays into windows 20 m and more off returned nothing."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_building
from rt_lidar.unreal_bridge.world.rooms import (
    BLIND_GAP_M,
    DOUBLE_GLAZED_SHARE,
    ROOM_DEPTH_M,
    blind_shares,
    double_glazed,
)

FACADE_X, WALL_T, WIDTH = 30.0, 0.3, 20.8  # 8 windows on the 2.6 m pitch


def _room_points() -> np.ndarray:
    """One HDL-64E scan (1.73 m up) of a two-storey brick building whose facade faces the sensor 30 m
    ahead: the building's points."""
    names = list(Scene(objects=[]).material_names)
    b = MeshBuilder()
    add_building(b, WIDTH, 12.0, 2, "brick")
    # the facade's frame: y = 0 on the facade, +y into the building; turned so that +y runs along +x
    pose = Pose.from_xyz_rpy(FACADE_X, WIDTH / 2, 0.0, yaw=-np.pi / 2)
    scene = Scene(
        objects=[b.build("building", 7, StaticTrajectory(pose))],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, 1.73),
    )
    pts = build_pipeline(load_preset("HDL-64E"), scene, seed=2).pipeline.scans(1)[0].points
    return pts[pts["segment"] == 7]


@pytest.fixture(scope="module")
def room_points() -> np.ndarray:
    return _room_points()


def test_rays_through_windows_return_from_the_back_wall_five_metres_in(room_points: np.ndarray) -> None:
    x = room_points["x"]
    back = FACADE_X + WALL_T + ROOM_DEPTH_M
    on_back = np.abs(x - back) < 0.15
    old_back = np.abs(x - (FACADE_X + WALL_T + 3.0)) < 0.15  # the dark plane's depth before change 43
    assert on_back.sum() > 150, on_back.sum()  # 364 (none before)
    assert old_back.sum() < 10  # 904 before
    # the blinds hang just behind the glass
    assert (np.abs(x - (FACADE_X + WALL_T + BLIND_GAP_M)) < 0.1).sum() > 50


def test_the_back_wall_reads_a_light_paint_seen_through_the_glass(room_points: np.ndarray) -> None:
    """The back wall's calibrated reflectivity is its paint's 0.5 times the panes' two-way transmission
    (0.72 for one pane, 0.52 for two, at normal incidence): 0.26-0.36 (the dark plane read <= 0.06)."""
    x = room_points["x"]
    on_back = np.abs(x - (FACADE_X + WALL_T + ROOM_DEPTH_M)) < 0.15
    level = float(np.median(room_points["reflectivity"][on_back]))
    assert 0.2 < level < 0.45, level
    # nothing returns from beyond the back wall: the rooms end there
    assert np.all(x < FACADE_X + WALL_T + ROOM_DEPTH_M + 0.3)


def test_rooms_material_is_a_light_paint_at_905nm() -> None:
    rho = load_material_table().reflectance("interior", 905.0)
    assert rho == pytest.approx(0.5)


def test_blinds_and_double_glazing_take_their_surveyed_shares() -> None:
    s = blind_shares(4000)
    assert s.min() >= 0.18 and s.max() <= 1.0
    assert s.mean() == pytest.approx(0.59, abs=0.005)
    assert double_glazed(4000).mean() == pytest.approx(DOUBLE_GLAZED_SHARE, abs=0.005)
    names = list(Scene(objects=[]).material_names)
    b = MeshBuilder(names)
    add_building(b, WIDTH, 12.0, 2, "brick")
    mesh = b.build("building", 1)
    glass = names.index("glass")
    panes = int(np.count_nonzero(mesh.face_material == glass)) // 2  # two triangles a pane
    windows = 16
    assert panes == windows + int(double_glazed(windows).sum())
