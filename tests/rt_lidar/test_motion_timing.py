"""Moving objects are cast at each ray's own firing time (issue 14, item 3)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import ConstantVelocity, Pose, Scene, StaticTrajectory, World
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder

CAR_X = 12.0  # centre of the car, m ahead
CAR_SIZE = (2.0, 4.5, 1.5)  # x (depth as seen), y (along its motion), z
SPEED = 30.0  # m/s along +y (crossing from right to left)
Y0 = -8.0  # y of its centre at t = 0
SEG = 9


def _scene(ego_speed: float = 0.0) -> Scene:
    car = MeshBuilder()
    car.box((0.0, 0.0, 0.0), CAR_SIZE, "car_paint_red")
    traj = ConstantVelocity(Pose.from_xyz_rpy(CAR_X, Y0, 0.0), [0.0, SPEED, 0.0])
    ego = ConstantVelocity(Pose.identity(), [ego_speed, 0.0, 0.0]) if ego_speed else StaticTrajectory()
    return Scene(objects=[car.build("car", SEG, traj)], ego=ego, sensor_mount=Pose.identity())


def _scans(sim_hz: float, ego_speed: float = 0.0, count: int = 3):
    world = World(_scene(ego_speed))
    cfg = PhysicsConfig(range_noise=False, receiver_noise=False)
    return build_pipeline(load_preset("HDL-64E"), world, sim_hz=sim_hz, physics=cfg).pipeline.scans(count)


def test_car_points_lie_on_the_car_posed_at_their_firing_times() -> None:
    """A car crossing at 30 m/s, sim at 20 Hz: every point of it lies on its box at its own firing time
    (frozen at the frame start, points were up to 1.5 m off)."""
    hx, hy, hz = (s / 2 for s in CAR_SIZE)
    n_car = 0
    for scan in _scans(20.0):
        pts = scan.points[scan.points["segment"] == SEG]
        n_car += pts.size
        if not pts.size:
            continue
        t_s = (scan.start_ns + pts["t"].astype(np.int64)) * 1e-9
        cx, cy = CAR_X, Y0 + SPEED * t_s
        dx, dy, dz = pts["x"] - cx, pts["y"] - cy, pts["z"]
        sdf = np.maximum.reduce([np.abs(dx) - hx, np.abs(dy) - hy, np.abs(dz) - hz])
        assert np.abs(sdf).max() < 0.01, float(np.abs(sdf).max())
    assert n_car > 500


@pytest.mark.parametrize("ego_speed", [0.0, 10.0])
def test_scans_do_not_depend_on_the_sim_rate(ego_speed: float) -> None:
    a = _scans(10.0, ego_speed)
    b = _scans(200.0, ego_speed)
    for sa, sb in zip(a, b, strict=True):
        assert sa.start_ns == sb.start_ns
        assert np.count_nonzero(sa.points["segment"] == SEG) > 0 or sa.index == 0
        np.testing.assert_array_equal(sa.points.view(np.uint8), sb.points.view(np.uint8))


def test_the_crossing_car_over_the_bridge_is_the_in_process_car() -> None:
    """The embedded server casts with the same per-ray times: bridged scans equal in-process ones."""
    from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
    from rt_lidar.server.embedded_sim import EmbeddedSim
    from rt_lidar.unreal_bridge import AirSimClient, AirSimServer

    preset = load_preset("HDL-64E")
    server = AirSimServer(EmbeddedSim(World(_scene()), preset, paused=True), port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, 20.0, seed=3)
            try:
                bridged = pipe.scans(3)
            finally:
                pipe.close()
    finally:
        server.close()
    direct = build_pipeline(preset, World(_scene()), sim_hz=20.0, seed=3).pipeline.scans(3)
    assert sum(int(np.count_nonzero(s.points["segment"] == SEG)) for s in direct) > 500
    for b, d in zip(bridged, direct, strict=True):
        assert b.points.tobytes() == d.points.tobytes()
