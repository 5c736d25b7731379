"""The crosstalk takes each pulse's world pose from the cast (``Hits.firing_poses``) instead of
interpolating it again: the same values, bit for bit, so the same false points; hits whose firings are
not the ones the cast found them for are interpolated afresh."""

from __future__ import annotations

import dataclasses

import numpy as np

from rt_lidar.pipeline.frame_loop import Sensed
from rt_lidar.pipeline.sources import Hits, WorldSource, interpolate_pose_samples
from rt_lidar.rig import crosstalk
from rt_lidar.rig.experiment import _ground, facing_pair
from rt_lidar.rig.loop import RigLoop
from rt_lidar.sensor.beam import subray_pattern


def _sensed_frames(frames: int) -> tuple[RigLoop, list[dict[str, Sensed]]]:
    """The facing pair of VLP-16s over a ground plane (false points every few frames), sensed frame
    by frame on this thread."""
    loop = RigLoop(facing_pair("VLP-16"), _ground(), seed=3, crosstalk=True)
    got = []
    for _ in range(frames):
        sensed = {n: u.pipeline.sense() for n, u in loop.units.items()}
        for n, u in loop.units.items():
            u.pipeline.commit(sensed[n])
        got.append(sensed)
    return loop, got


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_the_cast_keeps_the_poses_interpolation_gives() -> None:
    _loop, frames = _sensed_frames(2)
    for sensed in frames:
        for s in sensed.values():
            hits = s.hits
            assert hits.firing_poses is not None
            t_ns, pos, quat = hits.firing_poses
            assert t_ns is hits.firings.t_ns
            want_pos, want_quat = interpolate_pose_samples(hits.firings.t_ns, hits.pose_samples)
            assert _same(pos, want_pos)
            assert _same(np.ascontiguousarray(quat), np.ascontiguousarray(want_quat))


def test_a_sub_ray_bundle_keeps_each_pulse_s_pose() -> None:
    loop, frames = _sensed_frames(1)
    unit = next(iter(loop.units.values()))
    source, hits = unit.pipeline.source, frames[0][unit.sensor.name].hits
    assert isinstance(source, WorldSource)
    t0, t1 = unit.pipeline.frame_interval(0)
    pattern = subray_pattern(unit.sensor.preset, 7)
    bundled = source.beam_hits(hits.firings, t0, t1, pattern)
    assert bundled.subrays == 7 and bundled.firing_poses is not None
    want = interpolate_pose_samples(hits.firings.t_ns, bundled.pose_samples)
    assert bundled.firing_poses[1].shape == (hits.firings.t_ns.size, 3)
    assert _same(bundled.firing_poses[1], want[0])
    assert _same(np.ascontiguousarray(bundled.firing_poses[2]), np.ascontiguousarray(want[1]))


def test_other_firings_are_interpolated_afresh() -> None:
    _loop, frames = _sensed_frames(1)
    hits = next(iter(frames[0].values())).hits
    t_ns = hits.firings.t_ns
    n = t_ns.size
    # poses kept for another array of times (equal values, not the same array): not taken
    stale = dataclasses.replace(hits, firing_poses=(t_ns.copy(), np.zeros((n, 3)), np.zeros((n, 4))))
    pos, quat = crosstalk.firing_poses(stale)
    want_pos, want_quat = interpolate_pose_samples(t_ns, hits.pose_samples)
    assert _same(pos, want_pos) and _same(np.ascontiguousarray(quat), np.ascontiguousarray(want_quat))
    assert np.any(want_pos != 0.0)
    # kept for these very times: taken as they are
    own = dataclasses.replace(hits, firing_poses=(t_ns, np.zeros((n, 3)), np.zeros((n, 4))))
    assert not np.any(crosstalk.firing_poses(own)[0])


def test_false_points_are_the_same_with_the_kept_poses() -> None:
    loop, sensed = _sensed_frames(8)
    sensors = [u.sensor for u in loop.units.values()]
    found = 0
    for frame in sensed:
        kept = crosstalk.false_points(sensors, frame)
        fresh = {n: dataclasses.replace(s, hits=_without_poses(s.hits)) for n, s in frame.items()}
        again = crosstalk.false_points(sensors, fresh)
        assert kept.keys() == again.keys()
        for name in kept:
            assert kept[name].tobytes() == again[name].tobytes(), name
            found += kept[name].size
    assert found > 0  # false points were compared


def _without_poses(hits: Hits) -> Hits:
    return dataclasses.replace(hits, firing_poses=None)
