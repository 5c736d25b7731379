"""What the crosstalk finds once per sensor instead of once per pair of sensors gives the same echoes:
each sensor's pulses in time order (``_Pulses.time_order``: ``arange`` for pulses fired in order, the
stable argsort otherwise, times repeated included) and a sensor that does not turn rotated by its one
quaternion, read in place (``world_directions`` of a broadcast row): the compiled step's echoes are
the NumPy code's, bit for bit, for pulses in time order and shuffled."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from crosstalk_twins import echoes_both_ways

from rt_lidar.rig import crosstalk, crosstalk_fused
from rt_lidar.rig.experiment import _ground, facing_pair
from rt_lidar.rig.loop import RigLoop

needs_compiled = pytest.mark.skipif(not crosstalk_fused.available(), reason="_crosstalk was not built")


def _pulses(rng: np.random.Generator, n: int, shuffled: bool) -> crosstalk._Pulses:
    d = rng.standard_normal((n, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    t = np.sort(rng.integers(0, 600, n)).astype(np.int64)
    t[10:20] = t[10]  # pulses fired at the same time keep their order (a stable sort)
    if shuffled:
        t = rng.permutation(t)
    r = rng.choice([0.5, 3.0, 30.0], n) * rng.random(n)
    r[rng.random(n) < 0.1] = np.inf
    return crosstalk._Pulses(
        t,
        np.zeros(n, np.uint16),
        rng.uniform(-2.0, 2.0, (n, 3)),
        d,
        d.astype(np.float32),
        r,
        rng.uniform(0.0, 1.0, n),
        rng.integers(0, 3, n).astype(np.int64),
    )


@pytest.mark.parametrize("shuffled", [False, True], ids=["in-order", "shuffled"])
def test_the_time_order_is_the_stable_argsort(shuffled: bool) -> None:
    p = _pulses(np.random.default_rng(1), 500, shuffled)
    order = p.time_order()
    assert np.array_equal(order, np.argsort(p.t_ns, kind="stable"))
    assert p.in_time_order is not shuffled
    assert p.time_order() is order  # found once


@needs_compiled
@pytest.mark.parametrize("seed", [8, 9])
@pytest.mark.parametrize("shuffled", [False, True], ids=["in-order", "shuffled"])
def test_echoes_of_pulses_in_any_order_are_numpy_s(seed: int, shuffled: bool) -> None:
    rng = np.random.default_rng(seed)
    loop = RigLoop(facing_pair("VLP-16"), _ground(), sim_hz=20.0, crosstalk=True)
    a, b = (u.sensor for u in loop.units.values())
    a = dataclasses.replace(a, receiver_fov_mrad=200.0)
    pa, pb = _pulses(rng, 700, shuffled), _pulses(rng, 700, shuffled)
    want = echoes_both_ways(a, pa, b, pb, fresh=True)
    assert want[0].size > 0


@needs_compiled
def test_one_orientation_for_every_pulse_rotates_as_one_per_pulse() -> None:
    rng = np.random.default_rng(3)
    d = rng.standard_normal((10_000, 3)).astype(np.float32)
    d /= np.linalg.norm(d, axis=1)[:, None]
    q = np.array([[0.9, 0.1, -0.3, 0.2]])
    q /= np.linalg.norm(q)
    broadcast = np.broadcast_to(q, (d.shape[0], 4))  # what interpolate_pose_samples gives on a straight road
    got = crosstalk_fused.world_directions(broadcast, d)
    rows = crosstalk_fused.world_directions(np.ascontiguousarray(broadcast), d)
    want = crosstalk._rotate(np.ascontiguousarray(broadcast), d.astype(np.float64))
    want /= np.linalg.norm(want, axis=1)[:, None]
    assert got is not None and rows is not None
    assert got.tobytes() == rows.tobytes() == want.tobytes()
    assert crosstalk_fused.world_directions(broadcast[:0], d[:0]) is not None  # no pulses
