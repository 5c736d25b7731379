"""Issue 40, docs/realism.md change 48: a car's wheels are a painted alloy wheel inside the tyre's
sidewall, and the tyre's rubber reads SICK's published remission."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.sensor.materials import load_material_table
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory, World
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import TYRE_RADIUS_M, WHEEL_FACE_RADIUS_M, WHEEL_MATERIAL, add_car

WHEEL_X = (-1.4, 1.4)  # the car's axles (object frame)
HUB_Z = 0.33


def _one_car_world() -> World:
    names = list(Scene(objects=[]).material_names)
    b = MeshBuilder()
    add_car(b, "car_paint_red")
    scene = Scene(
        objects=[b.build("car", 5, StaticTrajectory(Pose.identity()))],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
    )
    return World(scene)


def _first_material(world: World, origins: np.ndarray, directions: np.ndarray) -> list[str]:
    hits = world.cast(origins.astype(np.float32), directions.astype(np.float32), 0.0)
    return [world.material_names[m] if m >= 0 else "miss" for m in hits.material]


def test_tyre_rubber_reads_sicks_two_per_cent_remission() -> None:
    """SICK's table of typical remissions (100 % = a perfectly diffuse white) gives vulcanized black
    rubber tyres 2 %: the rubber's diffuse reflectance at 905 nm is 0.02 (was 0.04, set by hand)."""
    rubber = load_material_table().arrays(["rubber"], 905.0)
    assert float(rubber.diffuse[0]) == pytest.approx(0.02, abs=1e-4)


def test_a_wheel_seen_from_the_side_shows_its_painted_face_inside_the_sidewall() -> None:
    """Beams level with the axles, from 5 m off the car's side, meet the wheel's painted face within the
    rim's radius and the tyre's rubber between it and the tread; the face's paint is a bright metallic
    (before change 48 the whole wheel was rubber)."""
    world = _one_car_world()
    for side in (-1.0, 1.0):
        for xw in WHEEL_X:
            offsets = np.array([0.0, 0.1, 0.18, 0.25, 0.3])  # up from the hub (m)
            o = np.stack([np.full(5, xw), np.full(5, side * 5.0), HUB_Z + offsets], -1)
            d = np.tile([0.0, -side, 0.0], (5, 1))
            got = _first_material(world, o, d)
            face = offsets < WHEEL_FACE_RADIUS_M
            sidewall = (offsets > WHEEL_FACE_RADIUS_M) & (offsets < TYRE_RADIUS_M)
            assert all(m == WHEEL_MATERIAL for m, f in zip(got, face, strict=True) if f), got
            assert all(m == "rubber" for m, s in zip(got, sidewall, strict=True) if s), got
    arrays = load_material_table().arrays([WHEEL_MATERIAL, "rubber"], 905.0)
    assert arrays.diffuse[0] > 10 * arrays.diffuse[1]


def test_the_wheel_face_stands_within_a_centimetre_of_the_tyres_outer_side() -> None:
    """The face lies on the tyre's outer side (5 mm proud of its cap), not inside the body: a beam along
    the car's side 2 cm outside the tyre meets nothing of the wheel."""
    world = _one_car_world()
    hits = world.cast(
        np.array([[5.0, 0.91 + 0.02, HUB_Z]], np.float32), np.array([[-1.0, 0.0, 0.0]], np.float32), 0.0
    )
    assert not np.isfinite(hits.distance[0]) or world.material_names[hits.material[0]] not in (
        WHEEL_MATERIAL,
        "rubber",
    )
    inside = world.cast(
        np.array([[5.0, 0.91 + 0.002, HUB_Z]], np.float32), np.array([[-1.0, 0.0, 0.0]], np.float32), 0.0
    )
    assert world.material_names[inside.material[0]] == WHEEL_MATERIAL
