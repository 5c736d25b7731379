"""WaypointTrajectory.segment_index: the segment whose heading a time takes, by one search of the inner
waypoint times, equal to the search-and-clip it replaced (a speed-up: the same integers, so the same
rotations and scans)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.unreal_bridge.world.trajectory import WaypointTrajectory


def _clipped(times: np.ndarray, n_segments: int, t: np.ndarray) -> np.ndarray:
    """The old formula: the last waypoint at or before t, clipped to the segments."""
    return np.clip(np.searchsorted(times, t, side="right") - 1, 0, n_segments - 1)


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_segment_index_equals_search_and_clip(k: int) -> None:
    rng = np.random.default_rng(k)
    times = np.cumsum(rng.uniform(0.1, 2.0, k))
    positions = np.column_stack([np.cumsum(rng.normal(size=k)), rng.normal(size=k), np.zeros(k)])
    traj = WaypointTrajectory(times, positions)
    assert traj.segment_yaws is not None
    special = [times[0] - 5, times[-1] + 5, np.nan, np.inf, -np.inf, -0.0, 0.0]
    t = np.concatenate([times, np.nextafter(times, -np.inf), np.nextafter(times, np.inf), special])
    t = np.concatenate([t, rng.uniform(times[0] - 1, times[-1] + 1, 500)])
    got = traj.segment_index(t)
    want = _clipped(times, len(traj.segment_yaws), t)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert got.min() >= 0 and got.max() <= len(traj.segment_yaws) - 1


def test_rotations_follow_the_segments() -> None:
    """A path east then north: a time on the second leg takes the north heading, before it east."""
    traj = WaypointTrajectory([0.0, 1.0, 2.0], [[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    _, q = traj.positions_rotations(np.array([-1.0, 0.5, 0.999, 1.0, 1.5, 9.0]))
    yaw = 2 * np.arctan2(q[:, 3], q[:, 0])
    np.testing.assert_allclose(yaw, [0, 0, 0, np.pi / 2, np.pi / 2, np.pi / 2], atol=1e-12)


def test_times_of_a_float64_vector_are_its_own() -> None:
    """``_times`` hands a 1-D float64 array on as itself (the per-ray times of a cast), and makes every
    other input the 1-D float64 array it made before."""
    from rt_lidar.unreal_bridge.world.trajectory import _times

    t = np.array([0.5, -0.0, np.nan])
    assert _times(t) is t
    strided = np.arange(10.0)[::3]
    assert _times(strided) is strided
    for other in (2.5, [1, 2], np.arange(3, dtype=np.float32), np.ones((2, 2))):
        want = np.atleast_1d(np.asarray(other, dtype=np.float64)).reshape(-1)
        got = _times(other)
        assert got.dtype == np.float64 and got.ndim == 1
        np.testing.assert_array_equal(got, want)
