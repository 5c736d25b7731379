"""A bundle's sub-rays from the compiled step (``rt_lidar.pipeline._beam_steps``) are the NumPy code's
bytes: directions (beams level, steep and straight up), start points across the exit aperture rotated
by the pose, and the repeated poses; and a whole ``--beam full`` frame's hits are the same with the
step on and off."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.pipeline import beam_steps
from rt_lidar.sensor.beam import (
    SubRayPattern,
    exit_m_per_rad,
    exit_offsets,
    subray_directions,
    subray_pattern,
)
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world.pose import quat_rotate

needs_compiled = pytest.mark.skipif(not beam_steps.available(), reason="_beam_steps was not built")


def _numpy(d: np.ndarray, pattern: SubRayPattern, m: tuple[float, float], pos: np.ndarray, quat: np.ndarray):
    """WorldSource.beam_hits' NumPy lines."""
    n = len(pattern)
    d_sensor = subray_directions(d, pattern)
    pos, quat = np.repeat(pos, n, axis=0), np.repeat(quat, n, axis=0)
    if any(m):
        pos = pos + quat_rotate(quat, exit_offsets(d, pattern, m))
    return d_sensor, pos, quat


def _beams(p: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((p, 3))
    d[: p // 10, :2] = 0.0  # straight up and down: the vertical reference
    d[p // 10 : p // 5, :2] *= 1e-12  # almost vertical
    d /= np.linalg.norm(d, axis=1)[:, None]
    q = rng.standard_normal((p, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    return d.astype(np.float32), rng.uniform(-50, 50, (p, 3)), q


@needs_compiled
@pytest.mark.parametrize("preset", ["HDL-64E", "VLP-16", "OS1-64"])
@pytest.mark.parametrize("n", [2, 7, 19, 37])
def test_sub_rays_are_numpy_s(preset: str, n: int) -> None:
    sensor = load_preset(preset)
    pattern = subray_pattern(sensor, n)
    d, pos, quat = _beams(2_000, n)
    for m in (exit_m_per_rad(sensor), (0.0, 0.0), (3.5, 0.0)):
        got = beam_steps.bundle_rays(d, pattern, m, pos, quat)
        assert got is not None
        for g, w in zip(got, _numpy(d, pattern, m, pos, quat), strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


@needs_compiled
def test_a_pattern_without_a_nominal_ray_is_numpy_s() -> None:
    offsets = np.array([[1e-3, 0.0], [-1e-3, 2e-3], [0.0, -2e-3]])
    pattern = SubRayPattern(offsets, np.full(3, 1 / 3, np.float32), np.ones(3))
    d, pos, quat = _beams(500, 1)
    got = beam_steps.bundle_rays(d, pattern, (2.0, 1.0), pos, quat)
    assert got is not None
    for g, w in zip(got, _numpy(d, pattern, (2.0, 1.0), pos, quat), strict=True):
        assert g.tobytes() == w.tobytes()


def test_one_ray_and_foreign_arrays_run_numpy() -> None:
    sensor = load_preset("VLP-16")
    d, pos, quat = _beams(10, 2)
    assert beam_steps.bundle_rays(d, subray_pattern(sensor, 1), (1.0, 1.0), pos, quat) is None
    pattern = subray_pattern(sensor, 7)
    assert beam_steps.bundle_rays(d.astype(np.float64), pattern, (1.0, 1.0), pos, quat) is None
    assert beam_steps.bundle_rays(d, pattern, (1.0, 1.0), pos.astype(np.float32), quat) is None


@needs_compiled
def test_a_full_beam_frame_is_the_same_with_the_step_off() -> None:
    from rt_lidar.physics.model import PhysicsConfig
    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.sensor.beam import BeamConfig
    from rt_lidar.sensor.scan_pattern import firings_between

    beam = BeamConfig(return_mode="dual", full=True)
    built = build_pipeline("VLP-16", "street", seed=2, physics=PhysicsConfig(beam=beam))
    pipe = built.pipeline
    t0, t1 = pipe.frame_interval(1)
    firings = firings_between(pipe.preset, t0, t1)
    on = pipe.source.hits(firings, t0, t1)
    beam_steps.enabled = False
    try:
        off = pipe.source.hits(firings, t0, t1)
    finally:
        beam_steps.enabled = True
    assert on.bundle is not None and off.bundle is not None and on.bundle.pulses.size > 0
    for name in ("direction", "range_m", "segment", "glass_range_m"):
        assert getattr(on.bundle.hits, name).tobytes() == getattr(off.bundle.hits, name).tobytes()
        assert getattr(on, name).tobytes() == getattr(off, name).tobytes()


@needs_compiled
@pytest.mark.parametrize(("preset", "frame"), [("HDL-64E", 1), ("VLP-16", 3), ("VLS-128", 2)])
def test_the_chosen_pulses_are_numpy_s(preset: str, frame: int) -> None:
    """Every frame's central rays marked by each reason, the step on and off (a frame's seam included)."""
    from rt_lidar.pipeline.beam_full import _SINGLE_RAY, bundle_pulses, full_beam_plan
    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.sensor.scan_pattern import firings_between

    pipe = build_pipeline(preset, "street", seed=2).pipeline
    plan = full_beam_plan(pipe.preset, np.asarray(pipe.source.retro_gain), 19, volume=pipe.source.volume)
    t0, t1 = pipe.frame_interval(frame)
    firings = firings_between(pipe.preset, t0, t1)
    central = pipe.source.beam_hits(firings, t0, t1, _SINGLE_RAY, None)
    got = bundle_pulses(firings, central, plan)
    beam_steps.enabled = False
    try:
        want = bundle_pulses(firings, central, plan)
    finally:
        beam_steps.enabled = True
    assert np.array_equal(got[0], want[0]) and got[1] == want[1]
    assert all(v > 0 for v in got[1].values())
