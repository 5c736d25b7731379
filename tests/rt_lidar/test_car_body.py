"""Issue 40, change 37: a car's body is curved as real bodies are (unreal_bridge.world.car_body): its side
bows in plan and in section, so the normal a beam meets turns along the side and up it, and a beam grazing
the side's rear quarter meets it less obliquely than the beam's own angle to the car's axis (the box's
flat side met every grazing beam at that one angle)."""

from __future__ import annotations

import numpy as np

from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory, World
from rt_lidar.unreal_bridge.world.car_body import (
    BODY_HALF_LENGTH_M,
    CORNER_RADIUS_M,
    PLAN_CAMBER_M,
    SECTION_RADIUS_M,
    SHOULDER_Z_M,
    body_half_width,
    plan_outline,
)
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_car

NAMES = list(Scene(objects=[]).material_names)
PAINT = NAMES.index("car_paint_white")


def _car_world() -> World:
    """A white car at the origin facing +x; the sensor's pose does not matter (rays are cast directly)."""
    b = MeshBuilder()
    add_car(b, "car_paint_white")
    car = b.build("car", 5, StaticTrajectory(Pose.identity()))
    scene = Scene(
        objects=[car],
        material_names=NAMES,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, 1.73),
    )
    return World(scene)


def _cast(world: World, org: np.ndarray, dirs: np.ndarray):  # type: ignore[no-untyped-def]
    dirs = dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
    return world.cast(org.astype(np.float32), dirs.astype(np.float32), 0.0, 50.0), dirs


def _expected_normal(x: float, z: float) -> np.ndarray:
    """The right side's (y < 0) outward normal at ``x`` along it and height ``z``, from the shape's
    definition: the plan's bow turns it by d(camber)/dx, the section's arc tilts it by (z - shoulder) / R."""
    x_joint = BODY_HALF_LENGTH_M - CORNER_RADIUS_M
    plan = np.array([2.0 * PLAN_CAMBER_M * x / x_joint**2, -1.0, 0.0])
    plan /= np.linalg.norm(plan)
    tilt = (z - SHOULDER_Z_M) / SECTION_RADIUS_M  # d(inset)/dz: up above the shoulder, down below it
    n = plan + np.array([0.0, 0.0, tilt])
    return n / np.linalg.norm(n)


def test_the_plan_outline_is_closed_convex_and_rounded() -> None:
    pts, nrm = plan_outline()
    x, y = pts[:, 0], pts[:, 1]
    area = 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y)
    assert 7.5 < area < 2 * BODY_HALF_LENGTH_M * 1.8  # counter-clockwise, corners cut off the 8.1 m^2 box
    assert np.all(np.sum(pts * nrm, axis=1) > 0.0)  # normals outwards
    turn = np.degrees(np.diff(np.unwrap(np.arctan2(nrm[:, 1], nrm[:, 0]))))
    assert np.all(turn >= -1e-9) and turn.max() < 16.0  # convex, turning in small steps round the corners
    assert np.isclose(body_half_width(0.0, SHOULDER_Z_M), 0.9)
    assert body_half_width(1.8, SHOULDER_Z_M) < 0.9 - 0.03  # the side bows in plan
    assert body_half_width(0.0, 0.35) < 0.9 - 0.05  # and tucks under towards the sill


def test_normals_turn_along_and_up_a_cars_side() -> None:
    """Beams square to the car's right side at the shoulder, from its rear quarter to its front quarter,
    meet normals that turn by more than 3 deg (the plan's bow); beams at one station from the sill to the
    beltline meet normals tilted from downwards to upwards (the section). A box's side is one normal."""
    world = _car_world()
    xs = np.linspace(-1.6, 1.6, 17)
    org = np.stack([xs, np.full_like(xs, -5.0), np.full_like(xs, SHOULDER_Z_M + 0.05)], 1)
    hits, _ = _cast(world, org, np.tile([[0.0, 1.0, 0.0]], (len(xs), 1)))
    assert np.all(hits.material == PAINT)
    yaw = np.degrees(np.arctan2(hits.normal[:, 0], -hits.normal[:, 1]))
    assert yaw.max() - yaw.min() > 3.0
    assert np.all(np.diff(yaw) > -0.01) and yaw[0] < 0.0 < yaw[-1]  # -x at the rear, +x ahead
    zs = np.array([0.35, 0.45, 0.55, 0.9])
    org = np.stack([np.zeros_like(zs), np.full_like(zs, -5.0), zs], 1)
    hits, _ = _cast(world, org, np.tile([[0.0, 1.0, 0.0]], (len(zs), 1)))
    assert np.all(hits.material == PAINT)
    assert hits.normal[0, 2] < -0.15 and hits.normal[-1, 2] > 0.05
    assert np.all(np.diff(hits.normal[:, 2]) > 0.0)


def test_a_grazing_beam_meets_the_rear_quarter_at_the_expected_cosine() -> None:
    """Beams 3 deg off the car's axis, from behind it and outside its right side, meeting the side's rear
    quarter (x = -1.6 .. -1.0 m) at the shoulder: the incidence cosine is the shape's (the beam against the
    bowed side's normal there, within a facet's step), above the 0.052 (sin 3 deg) a flat side gives
    every grazing beam, most at the rear."""
    world = _car_world()
    az = np.radians(3.0)
    d = np.array([np.cos(az), np.sin(az), 0.0])
    z = SHOULDER_Z_M + 0.06  # above the chrome strip
    cosines, expected = [], []
    for x_aim in (-1.6, -1.3, -1.0):
        y_aim = -body_half_width(x_aim, z)
        org = np.array([[x_aim - 20.0 * d[0], y_aim - 20.0 * d[1] - 0.002, z]])
        hits, dirs = _cast(world, org, d[None, :])
        assert hits.material[0] == PAINT
        hit = org[0] + hits.distance[0] * dirs[0]
        cosines.append(float(-dirs[0] @ hits.normal[0]))
        expected.append(float(-dirs[0] @ _expected_normal(float(hit[0]), z)))
    assert np.allclose(cosines, expected, atol=0.01)
    assert min(cosines) > np.sin(az) + 0.01
    assert cosines[0] > cosines[-1]  # the side turns towards the beam the further back it meets it
