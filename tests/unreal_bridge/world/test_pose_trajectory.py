"""Pose math and trajectories against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.unreal_bridge.world import (
    ConstantVelocity,
    Pose,
    StaticTrajectory,
    WaypointTrajectory,
    WorldError,
)
from rt_lidar.unreal_bridge.world.pose import quat_from_yaw, quat_multiply, quat_rotate


def test_yaw_quarter_turn_maps_x_to_y() -> None:
    p = Pose.from_xyz_rpy(1.0, 2.0, 3.0, yaw=np.pi / 2)
    np.testing.assert_allclose(p.transform_points(np.array([[1.0, 0.0, 0.0]])), [[1.0, 3.0, 3.0]], atol=1e-12)
    np.testing.assert_allclose(p.rotate(np.array([[0.0, 1.0, 0.0]])), [[-1.0, 0.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(p.rotation, [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)], atol=1e-12)


def test_pitch_and_roll_signs() -> None:
    # positive pitch turns +x down (towards -z); positive roll turns +y up (towards +z)
    pitch = Pose.from_xyz_rpy(0, 0, 0, pitch=np.pi / 2)
    np.testing.assert_allclose(pitch.rotate([1.0, 0.0, 0.0]), [0.0, 0.0, -1.0], atol=1e-12)
    roll = Pose.from_xyz_rpy(0, 0, 0, roll=np.pi / 2)
    np.testing.assert_allclose(roll.rotate([0.0, 1.0, 0.0]), [0.0, 0.0, 1.0], atol=1e-12)


def test_compose_is_self_times_other() -> None:
    ego = Pose.from_xyz_rpy(10.0, 0.0, 0.0, yaw=np.pi / 2)
    mount = Pose.from_xyz_rpy(1.0, 0.0, 1.8)
    sensor = ego.compose(mount)
    # the mount's 1 m forward offset is along the ego's heading, world +y
    np.testing.assert_allclose(sensor.position, [10.0, 1.0, 1.8], atol=1e-12)
    np.testing.assert_allclose(sensor.matrix(), ego.matrix() @ mount.matrix(), atol=1e-12)


def test_inverse_round_trip_and_matrix() -> None:
    p = Pose.from_xyz_rpy(1.0, -2.0, 0.5, 0.1, -0.3, 2.0)
    pts = np.random.default_rng(0).normal(size=(20, 3))
    np.testing.assert_allclose(p.inverse().transform_points(p.transform_points(pts)), pts, atol=1e-12)
    np.testing.assert_allclose(p.inverse().matrix(), np.linalg.inv(p.matrix()), atol=1e-12)
    ident = p.compose(p.inverse())
    np.testing.assert_allclose(ident.position, 0.0, atol=1e-12)
    np.testing.assert_allclose(abs(ident.rotation[0]), 1.0, atol=1e-12)
    np.testing.assert_allclose(Pose.from_matrix(p.matrix()).matrix(), p.matrix(), atol=1e-12)
    np.testing.assert_allclose(p.rpy(), (0.1, -0.3, 2.0), atol=1e-12)


def test_bad_pose_raises() -> None:
    with pytest.raises(WorldError, match="rotation"):
        Pose(np.zeros(3), np.zeros(4))


def test_constant_velocity_straight_and_turning() -> None:
    cv = ConstantVelocity(Pose.from_xyz_rpy(1.0, 2.0, 0.0), (10.0, 0.0, 0.0))
    np.testing.assert_allclose(cv.pose_at(2.0).position, [21.0, 2.0, 0.0])
    # quarter circle of radius v / w = 10 m: from the origin heading +x to (10, 10) heading +y
    turn = ConstantVelocity(Pose.identity(), (10.0, 0.0, 0.0), yaw_rate=1.0)
    p = turn.pose_at(np.pi / 2)
    np.testing.assert_allclose(p.position, [10.0, 10.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(p.rpy()[2], np.pi / 2, atol=1e-9)
    pos, quat = turn.positions_rotations(np.array([0.0, np.pi / 2]))
    assert pos.shape == (2, 3) and quat.shape == (2, 4)


def test_waypoints_interpolate_head_and_hold() -> None:
    wp = WaypointTrajectory([0.0, 1.0, 3.0], [(0, 0, 0), (10, 0, 0), (10, 10, 0)])
    np.testing.assert_allclose(wp.pose_at(0.5).position, [5.0, 0.0, 0.0])
    np.testing.assert_allclose(wp.pose_at(2.0).position, [10.0, 5.0, 0.0])
    assert wp.pose_at(0.5).rpy()[2] == pytest.approx(0.0)
    assert wp.pose_at(2.0).rpy()[2] == pytest.approx(np.pi / 2)
    np.testing.assert_allclose(wp.pose_at(100.0).position, [10.0, 10.0, 0.0])  # holds the end
    assert wp.pose_at(100.0).rpy()[2] == pytest.approx(np.pi / 2)
    np.testing.assert_allclose(wp.pose_at(-5.0).position, [0.0, 0.0, 0.0])
    with pytest.raises(WorldError, match="increasing"):
        WaypointTrajectory([0.0, 0.0], [(0, 0, 0), (1, 0, 0)])


def test_static_trajectory_repeats_pose() -> None:
    pose = Pose.from_xyz_rpy(1, 2, 3)
    pos, quat = StaticTrajectory(pose).positions_rotations(np.zeros(4))
    np.testing.assert_array_equal(pos, np.tile([1.0, 2.0, 3.0], (4, 1)))
    np.testing.assert_array_equal(quat, np.tile([1.0, 0, 0, 0], (4, 1)))


def test_looping_replays_the_inner_trajectory() -> None:
    from rt_lidar.unreal_bridge.world import Looping, World, street_scene

    inner = ConstantVelocity(Pose.from_xyz_rpy(1.0, 2.0, 0.0), (10.0, 0.0, 0.0))
    loop = Looping(inner, 20.0)
    t = np.array([0.0, 5.0, 19.999, 20.0, 25.0, 45.0])
    p, _q = loop.positions_rotations(t)
    np.testing.assert_allclose(p[:, 0], [1.0, 51.0, 200.99, 1.0, 51.0, 51.0])
    assert loop.pose_at(65.0).position[0] == pytest.approx(51.0)
    with pytest.raises(WorldError, match="period_s"):
        Looping(inner, 0.0)
    # the street replays once the ego reaches its end: ego and moving cars alike, statics untouched
    scene = street_scene(0, length_m=100.0)
    world = World(scene)
    np.testing.assert_allclose(world.ego_pose(12.5).position, world.ego_pose(2.5).position)
    moving = [o.name for o in scene.objects if isinstance(o.trajectory, Looping)]
    assert len(moving) == 3
    np.testing.assert_allclose(
        world.object_pose(moving[0], 11.0).position, world.object_pose(moving[0], 1.0).position
    )
    assert not isinstance(street_scene(0, loop=False).ego, Looping)


def _rotate_with_np_cross(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The rotation as written with np.cross (what quat_rotate spells out component by component)."""
    qq, vv = np.asarray(q, np.float64), np.asarray(v, np.float64)
    t = 2.0 * np.cross(qq[..., 1:], vv)
    return vv + qq[..., :1] * t + np.cross(qq[..., 1:], t)


@pytest.mark.parametrize(
    "q_shape, v_shape", [((64, 4), (64, 3)), ((64, 4), (3,)), ((4,), (9, 3)), ((5, 1, 4), (7, 3))]
)
def test_quat_rotate_gives_the_bits_of_the_np_cross_formula(q_shape, v_shape) -> None:
    rng = np.random.default_rng(7)
    q, v = rng.normal(size=q_shape), rng.normal(size=v_shape) * 50.0
    q.reshape(-1)[::5] = -0.0  # signed zeros must come out as np.cross gives them
    v.reshape(-1)[::4] = 0.0
    got, want = quat_rotate(q, v), _rotate_with_np_cross(q, v)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("yaw_rate", [0.0, -0.0])
def test_a_zero_yaw_rate_gives_the_bits_of_the_general_formula(yaw_rate) -> None:
    rng = np.random.default_rng(3)
    for rotation in ([1.0, 0.0, -0.0, 0.0], [0.0, -0.0, 0.0, 1.0], rng.normal(size=4)):
        start = Pose(rng.normal(size=3), np.asarray(rotation) / np.linalg.norm(rotation))
        cv = ConstantVelocity(start, rng.normal(size=3), yaw_rate)
        t = np.concatenate([[0.0, -0.0, 1e-300, -2.5], rng.uniform(-100, 100, 40)])
        pos, quat = cv.positions_rotations(t)
        want = quat_multiply(quat_from_yaw(yaw_rate * t), start.rotation)
        assert quat.tobytes() == want.tobytes()
        assert pos.shape == (t.size, 3)
    _, nan_quat = cv.positions_rotations(np.array([np.nan, 1.0]))  # NaN times: the formula's NaNs
    assert np.isnan(nan_quat[0]).all() and not np.isnan(nan_quat[1]).any()


def test_a_new_start_pose_gives_its_own_rotation_at_a_zero_yaw_rate() -> None:
    cv = ConstantVelocity(Pose.from_xyz_rpy(0.0, 0.0, 0.0, yaw=0.3), (1.0, 0.0, 0.0))
    cv.positions_rotations(np.array([0.5]))
    cv.start = Pose.from_xyz_rpy(0.0, 0.0, 0.0, yaw=-1.2)
    _, quat = cv.positions_rotations(np.array([0.5, 2.0]))
    assert quat.tobytes() == quat_multiply(quat_from_yaw(np.zeros(2)), cv.start.rotation).tobytes()


def _periods_batches(rng: np.random.Generator):
    """(period, times) pairs: batches within one period (a frame's rays), across periods, at and next
    to the period boundaries, and the odd values (zeros of both signs, negative, NaN, inf)."""
    for period in (20.0, 7.3, 0.1, 1.0 / 3.0, 1e-3, 123.456, 2.0**-20, 3e5):
        for n in (0, 1, 2, 3, 7, 49, 1000, 123_457, 10**9):
            start = n * period
            width = rng.choice([1e-9, 0.05, 0.5, 1.0]) * period
            t = start + rng.random(257) * width
            yield period, t
            yield period, np.concatenate([t, [start, np.nextafter(start, np.inf)]])
            end = (n + 1) * period
            yield period, np.array([np.nextafter(end, -np.inf), start, 0.5 * (start + end)])
            yield period, np.array([end, start])  # two periods
            yield period, start + rng.random(64) * 3.0 * period  # several periods
        yield period, np.array([0.0, -0.0, 0.25 * period])
        yield period, np.array([-0.0])
        yield period, np.array([-1e-12, 0.1 * period])
        yield period, np.array([np.nan, 0.5 * period])
        yield period, np.array([np.inf, 0.5 * period])
        yield period, np.array([], np.float64)


def test_wrap_times_gives_np_mod_s_bits() -> None:
    from rt_lidar.unreal_bridge.world.trajectory import wrap_times

    rng = np.random.default_rng(3)
    cases = 0
    for period, t in _periods_batches(rng):
        t = np.asarray(t, np.float64)
        got, want = wrap_times(t, period), np.mod(t, period)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes(), (period, t[:4], got[:4], want[:4])
        cases += 1
    assert cases > 300


def test_looping_poses_are_the_inner_trajectory_s_at_np_mod_times() -> None:
    from rt_lidar.unreal_bridge.world import Looping

    rng = np.random.default_rng(4)
    inner = ConstantVelocity(Pose.from_xyz_rpy(1.0, 2.0, 0.0, yaw=0.3), (10.0, -1.0, 0.0), yaw_rate=0.05)
    loop = Looping(inner, 20.0)
    for start in (0.0, 3.0, 19.95, 40.0, 1234.5):
        t = start + rng.random(1000) * 0.05
        p, q = loop.positions_rotations(t)
        pi, qi = inner.positions_rotations(np.mod(t, 20.0))
        assert p.tobytes() == pi.tobytes() and q.tobytes() == qi.tobytes()


@pytest.mark.parametrize("yaw_rate", [0.0, -0.0])
def test_a_zero_yaw_rate_at_positive_times_gives_the_general_formula_s_bits(yaw_rate: float) -> None:
    """Every time > 0 (a frame's rays): one rotation repeated, and positions as the start broadcast over
    the steps gives them."""
    rng = np.random.default_rng(8)
    start = Pose(rng.normal(size=3), rng.normal(size=4))
    cv = ConstantVelocity(start, rng.normal(size=3), yaw_rate)
    for t in (rng.uniform(1e-3, 50.0, 777), np.array([2.5]), np.array([1e-300, 7.0])):
        pos, quat = cv.positions_rotations(t)
        want_q = quat_multiply(quat_from_yaw(yaw_rate * t), start.rotation)
        step = np.stack([cv.velocity[0] * t, cv.velocity[1] * t, cv.velocity[2] * t], axis=1)
        assert quat.tobytes() == want_q.tobytes()
        assert pos.tobytes() == (start.position + step).tobytes()


def _waypoint_reference(w: WaypointTrajectory, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The poses as np.interp and quat_from_yaw give them, column by column and ray by ray."""
    pos = np.stack([np.interp(t, w.times, w.positions[:, i]) for i in range(3)], axis=-1)
    assert w.segment_yaws is not None
    idx = np.clip(np.searchsorted(w.times, t, side="right") - 1, 0, len(w.segment_yaws) - 1)
    return pos, quat_from_yaw(w.segment_yaws[idx])


@pytest.mark.parametrize("compiled", [True, False])
def test_waypoint_poses_give_np_interp_s_bits(compiled: bool) -> None:
    """Positions through the compiled interpolation (where built) and without it, rotations from each
    segment's remembered quaternion: the bits of np.interp and quat_from_yaw at every time, in order or
    not, on the waypoints, before and after them, with a stop (a segment of no length)."""
    from rt_lidar.unreal_bridge.world import interp

    rng = np.random.default_rng(9)
    interp.enabled = compiled
    try:
        for trial in range(60):
            k = int(rng.integers(1, 8))
            times = np.cumsum(rng.uniform(0.05, 3.0, k)) - 1.0
            positions = rng.normal(0.0, 20.0, (k, 3))
            if k > 2 and trial % 3 == 0:
                positions[2] = positions[1]  # a stop: the previous heading is kept
            w = WaypointTrajectory(times, positions)
            t = np.sort(rng.uniform(times[0] - 1.0, times[-1] + 1.0, int(rng.integers(1, 3000))))
            if t.size > 10:
                t[rng.integers(0, t.size, 5)] = rng.choice(times, 5)
                t.sort()
            if trial % 4 == 1:
                t = rng.permutation(t)
            pos, quat = w.positions_rotations(t)
            want_p, want_q = _waypoint_reference(w, t)
            assert pos.tobytes() == want_p.tobytes(), trial
            assert quat.tobytes() == want_q.tobytes(), trial
    finally:
        interp.enabled = True


def test_a_straight_path_s_poses_are_the_same_bits_compiled_or_not() -> None:
    """A ConstantVelocity path at a zero yaw rate (the street's moving cars): the compiled twin
    (``_cast_steps.straight_poses``) gives the NumPy code's positions and rotations bit for bit, for
    times before and after the start, both zeros, large ones, and a batch with a NaN or infinite time
    (which the NumPy code decides); a non-zero yaw rate never takes it."""
    from rt_lidar.unreal_bridge.world import interp

    if interp.compiled() is None:
        pytest.skip("the compiled world steps were not built (no C compiler at install)")
    rng = np.random.default_rng(4)
    for trial in range(40):
        start = Pose(rng.normal(0.0, 50.0, 3), quat_from_yaw(np.array([rng.uniform(-3.0, 3.0)]))[0])
        rate = 0.0 if trial % 5 else 0.3
        path = ConstantVelocity(start, rng.normal(0.0, 15.0, 3), yaw_rate=rate)
        t = rng.uniform(-5.0, 1e4 if trial % 7 == 0 else 30.0, int(rng.integers(1, 2000)))
        t[: min(2, t.size)] = [0.0, -0.0][: min(2, t.size)]
        if trial % 9 == 4:
            t[-1] = [np.nan, np.inf, -np.inf][trial % 3]
        got = path.positions_rotations(t)
        interp.enabled = False
        try:
            want = path.positions_rotations(t)
        finally:
            interp.enabled = True
        for a, b in zip(got, want, strict=True):
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), trial
    with pytest.raises(ValueError, match="rows"):
        interp.compiled().straight_poses(
            np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(4), np.empty((3, 3)), np.empty((3, 4))
        )
