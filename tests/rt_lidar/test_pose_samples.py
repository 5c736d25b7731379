"""interp_columns gives np.interp's bits, column by column, on every kind of input (the pose of each
firing, and so every scan, depends on them)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.pipeline.pose_samples import interp_columns, interpolate_pose_samples, sensor_pose_samples
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import interp, street_scene
from rt_lidar.unreal_bridge.world.world import World


def _reference(t: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    return np.stack([np.interp(t, xp, fp[:, c]) for c in range(fp.shape[1])], axis=1)


def _case(rng: np.random.Generator, trial: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = int(rng.integers(1, 60))
    if trial % 3 == 0:  # the pipeline's grid: whole milliseconds
        xp = (np.arange(k) + int(rng.integers(0, 10_000))) * 1e-3
    else:
        xp = np.cumsum(rng.uniform(1e-6, 2e-3, k)) + rng.uniform(-1.0, 5.0)
    fp = rng.normal(0.0, 50.0, (k, 4))
    if trial % 5 == 0:
        fp[rng.integers(0, k)] = -0.0  # signed zeros must come out as np.interp gives them
    if trial % 7 == 0:
        fp[:, 1] = fp[0, 1]  # a constant column
    n = int(rng.integers(0, 3000))
    if trial % 4 == 0:  # firing times as the pipeline makes them: integer ns * 1e-9
        ns = np.sort(rng.integers(int(xp[0] * 1e9) - 2_000_000, int(xp[-1] * 1e9) + 2_000_000, n))
        t = ns.astype(np.float64) * 1e-9
    else:
        t = np.sort(rng.uniform(xp[0] - 2e-3, xp[-1] + 2e-3, n))
    if n > 10:  # times exactly on samples, and repeated times
        t[rng.integers(0, n, 6)] = rng.choice(xp, 6)
        t[rng.integers(1, n, 4)] = t[0]
        t.sort()
    if trial % 11 == 0 and n > 1:
        t = rng.permutation(t)  # out of order: the np.interp fallback
    return t, xp, fp


@pytest.mark.parametrize("compiled", [True, False])
def test_interp_columns_is_np_interp_bit_for_bit(compiled: bool) -> None:
    """With the compiled step (where built) and with the NumPy one."""
    rng = np.random.default_rng(7)
    interp.enabled = compiled
    try:
        for trial in range(1500):
            t, xp, fp = _case(rng, trial)
            got = interp_columns(t, xp, fp)
            assert got.shape == (t.size, fp.shape[1])
            assert got.tobytes() == _reference(t, xp, fp).tobytes(), f"trial {trial}"
    finally:
        interp.enabled = True


@pytest.mark.skipif(interp._c is None, reason="the _cast_steps extension was not built")
def test_the_compiled_step_refuses_times_out_of_order() -> None:
    """It checks the order in its pass (interp_columns then takes np.interp), and the two agree on a
    frame's worth of firing times with some exactly on the samples."""
    rng = np.random.default_rng(6)
    xp = (np.arange(52) + 1234) * 1e-3
    fp = rng.normal(0.0, 30.0, (52, 4))
    fp[3] = -0.0
    t = np.sort(rng.integers(1_233_000_000, 1_287_000_000, 60_000)).astype(np.float64) * 1e-9
    t[100:110] = xp[3]
    t.sort()
    got = interp_columns(t, xp, fp)
    interp.enabled = False
    try:
        want = interp_columns(t, xp, fp)
    finally:
        interp.enabled = True
    assert got.tobytes() == want.tobytes() == _reference(t, xp, fp).tobytes()
    out = np.empty((t.size, 4))
    with pytest.raises(ValueError, match=r"t\[1\] is out of order"):
        interp._c.interp_sorted(t[::-1].copy(), xp, fp, interp.table_slopes(xp, fp), out, 4)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_interp_columns_non_finite_values_follow_np_interp(bad: float) -> None:
    xp = np.arange(20) * 1e-3
    fp = np.linspace(0.0, 1.0, 40).reshape(20, 2)
    fp[7, 1] = bad
    t = np.linspace(-1e-3, 0.021, 500)
    assert interp_columns(t, xp, fp).tobytes() == _reference(t, xp, fp).tobytes()


def test_firing_poses_on_a_street_are_np_interp_s() -> None:
    """A whole HDL-64E frame on the turning street: positions and rotations as np.interp gave them."""
    world = World(street_scene(seed=0))
    preset = load_preset("HDL-64E")
    for t0 in (0, 1_234_567_891):
        firings = firings_between(preset, t0, t0 + 50_000_000)
        samples = sensor_pose_samples(world, firings.t_ns)
        assert samples is not None
        ts, p_s, q_s = samples
        pos, quat = interpolate_pose_samples(firings.t_ns, samples)
        t = firings.t_ns.astype(np.float64) * 1e-9
        assert pos.tobytes() == _reference(t, ts, p_s).tobytes()
        if not np.all(q_s == q_s[0]):
            want = _reference(t, ts, q_s)
            want /= np.sqrt(np.einsum("ij,ij->i", want, want))[:, None]
            assert np.ascontiguousarray(quat).tobytes() == want.tobytes()


def test_turning_poses_are_np_interp_s() -> None:
    """A sensor turning at 0.6 rad/s: the rotations come from the same interpolation, normalised."""
    from rt_lidar.unreal_bridge.world.pose import quat_from_yaw

    ts = (np.arange(52) + 4_321) * 1e-3
    p_s = np.cumsum(np.full((52, 3), 0.013), axis=0)
    q_s = quat_from_yaw(0.6 * ts)
    t_ns = np.sort(np.random.default_rng(3).integers(4_321_000_000, 4_372_000_000, 60_000))
    pos, quat = interpolate_pose_samples(t_ns, (ts, p_s, q_s))
    t = t_ns.astype(np.float64) * 1e-9
    want = _reference(t, ts, q_s)
    want /= np.sqrt(np.einsum("ij,ij->i", want, want))[:, None]
    assert pos.tobytes() == _reference(t, ts, p_s).tobytes()
    assert quat.tobytes() == want.tobytes()
