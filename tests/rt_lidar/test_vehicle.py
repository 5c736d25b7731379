"""The kinematic bicycle model of the ego car, alone and as the embedded world's ego trajectory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.server.vehicle import BicycleModel, VehicleControls, VehicleLimits
from rt_lidar.unreal_bridge.world import Pose, Trajectory, World, plane_scene


def _drive(model: BicycleModel, seconds: float, controls: VehicleControls, dt: float = 0.01) -> None:
    model.set_controls(controls)
    model.advance_to(model.t + seconds, max_dt=dt)


def test_straight_acceleration_and_speed_limit() -> None:
    lim = VehicleLimits(max_accel_mps2=3.0, max_speed_mps=10.0, drag_per_s=0.0)
    car = BicycleModel(limits=lim)
    _drive(car, 2.0, VehicleControls(throttle=1.0))
    assert car.speed == pytest.approx(6.0, abs=1e-6)
    assert car.x == pytest.approx(0.5 * 3.0 * 2.0**2, rel=1e-3) and car.y == pytest.approx(0.0, abs=1e-9)
    _drive(car, 10.0, VehicleControls(throttle=1.0))
    assert car.speed == pytest.approx(10.0)  # clipped at the limit


def test_steering_right_turns_clockwise_on_the_kinematic_radius() -> None:
    lim = VehicleLimits(wheelbase_m=2.5, max_steer_rad=0.4, max_speed_mps=5.0, drag_per_s=0.0)
    car = BicycleModel(limits=lim)
    _drive(car, 4.0, VehicleControls(throttle=1.0, steering=1.0))  # AirSim: positive steering = right
    assert car.y < -1.0 and car.yaw < 0.0
    assert car.steer == pytest.approx(-0.4)
    # at constant speed and full lock the yaw rate is v / L * tan(delta)
    assert car.yaw_rate == pytest.approx(-5.0 / 2.5 * math.tan(0.4), rel=1e-6)
    y0 = car.yaw
    _drive(car, 1.0, VehicleControls(throttle=0.0, steering=1.0, brake=0.0))
    assert car.yaw < y0


def test_brake_stops_and_reverse_is_limited() -> None:
    car = BicycleModel(limits=VehicleLimits(max_reverse_mps=3.0))
    _drive(car, 3.0, VehicleControls(throttle=1.0))
    _drive(car, 3.0, VehicleControls(brake=1.0))
    assert car.speed == 0.0
    x_stop = car.x
    _drive(car, 5.0, VehicleControls(throttle=-1.0))
    assert car.speed == pytest.approx(-3.0) and car.x < x_stop
    with pytest.raises(ValueError):
        car.step(-0.1)
    with pytest.raises(ValueError):
        VehicleLimits(max_speed_mps=-1.0)


def test_trajectory_adapter_follows_history_and_extrapolates() -> None:
    start = Pose.from_xyz_rpy(5.0, -2.0, 0.0, yaw=math.pi / 2)
    car = BicycleModel(start=start, limits=VehicleLimits(drag_per_s=0.0))
    assert isinstance(car, Trajectory)
    assert car.pose_at(-1.0).position.tolist() == pytest.approx([5.0, -2.0, 0.0])
    _drive(car, 2.0, VehicleControls(throttle=0.5))
    states = []
    for _ in range(5):
        states.append(car.step(0.1))
    times = np.array([s.t for s in states])
    pos, quat = car.positions_rotations(times)
    np.testing.assert_allclose(pos[:, 0], [s.x for s in states], atol=1e-9)
    np.testing.assert_allclose(pos[:, 1], [s.y for s in states], atol=1e-9)
    assert pos[-1, 1] > -2.0 + 1.0  # heading +y (yaw 90 deg) it moved left
    yaw = 2 * np.arctan2(quat[:, 3], quat[:, 0])
    np.testing.assert_allclose(yaw, [s.yaw for s in states], atol=1e-9)
    ahead = car.pose_at(car.t + 0.5).position
    assert ahead[1] == pytest.approx(car.y + 0.5 * car.speed, rel=1e-6)


def test_world_ego_follows_the_model() -> None:
    scene = plane_scene()
    car = BicycleModel(limits=VehicleLimits(drag_per_s=0.0))
    scene.ego = car
    world = World(scene, caster="numpy") if "numpy" in _casters() else World(scene)
    _drive(car, 1.0, VehicleControls(throttle=1.0))
    p0 = world.sensor_pose(0.0).position
    p1 = world.sensor_pose(1.0).position
    assert p1[0] - p0[0] == pytest.approx(car.x, rel=1e-6)
    assert p1[2] == pytest.approx(p0[2])  # the mount height stays


def _casters() -> set[str]:
    from rt_lidar.unreal_bridge.world import RAY_CASTERS

    return set(RAY_CASTERS)
