"""The embedded server computes each lidar pose once while its ego follows its script (a frame's end
pose is the next frame's start pose and the answer's pose), and afresh while it is driven: the poses
it answers with are those computed afresh, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rt_lidar.pipeline.builder import build_world
from rt_lidar.rig import load_rig
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import CarControls, FluPose

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"


def _sim() -> EmbeddedSim:
    rig = load_rig(EXAMPLE)
    first, *more = rig.sensors
    return EmbeddedSim(
        build_world("street"),
        first.preset,
        lidar_name=first.name,
        mount=first.mount,
        paused=True,
        more_lidars=[(s.name, s.preset, s.mount) for s in more],
    )


def _fresh(sim: EmbeddedSim, name: str, t_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """The pose computed afresh (the world's trajectory at that time, the lidar's mount)."""
    source = sim._lidars[name].source
    pos, quat = sim.world.sensor_poses(np.array([t_ns * 1e-9]), source.mount)
    return pos[0], quat[0]


def _check_frame(sim: EmbeddedSim, names: list[str], memo: bool) -> list[tuple[float, ...]]:
    """Cast one read of every lidar as the server does (prepared, then run); its poses must be the
    fresh ones, and its source's memo on (``memo``) or off."""
    got: list[tuple[float, ...]] = []
    for name in names:
        cast = sim.prepare_lidar_hits(name, "")
        assert cast._source.pose_memo is memo
        hits, t0 = cast._hits()
        t1 = cast.t1
        for have, t in ((hits.pose_start, t0), (hits.pose_end, t1)):
            assert have is not None
            want = _fresh(sim, name, t)
            assert np.array_equal(have[0], want[0]) and np.array_equal(have[1], want[1])
        answer = cast._sensor_pose(t1)
        want_pos, want_quat = _fresh(sim, name, t1)
        assert answer.position == tuple(float(v) for v in want_pos)
        assert answer.orientation == tuple(float(v) for v in want_quat)
        got.append(answer.position)
    return got


def test_memoised_poses_equal_fresh_ones_scripted_and_driven() -> None:
    sim = _sim()
    names = list(sim._lidars)
    scripted = []
    for _ in range(3):
        sim.continue_for_time(0.05)
        scripted.append(_check_frame(sim, names, memo=True))
    _check_frame(sim, names, memo=True)  # no new firings: every pose remembered, still the same
    sim.set_car_controls(CarControls(throttle=1.0, steering=0.5), "")  # off its script
    for _ in range(3):
        sim.continue_for_time(0.05)
        _check_frame(sim, names, memo=False)
    # a teleport: the next answers follow the new pose, not a remembered one
    before = _fresh(sim, names[0], sim.now_ns())
    sim.set_vehicle_pose(FluPose((5.0, 5.0, 0.0), (1.0, 0.0, 0.0, 0.0)), False, "")
    moved = _check_frame(sim, names, memo=False)
    assert not np.allclose(moved[0], before[0])
    # back on its script (reset): the scripted poses again, from the same times
    sim.reset()
    again = []
    for _ in range(3):
        sim.continue_for_time(0.05)
        again.append(_check_frame(sim, names, memo=True))
    assert again == scripted
