"""The surface texture from the compiled step (``rt_lidar.physics._texture``) is the NumPy code's bytes: on
a street frame's hits (posed, and in the sensor frame without a pose; each pulse's footprint from the
preset's beam, or a point), with and without the patches, and a whole frame's points are the same with
the step on and off."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rt_lidar.backend import CompiledBackend
from rt_lidar.physics import texture_fused
from rt_lidar.physics.texture import footprint_beam, texture_apply
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.scan_pattern import firings_between

needs_compiled = pytest.mark.skipif(not texture_fused.available(), reason="_texture was not built")


def _frame(preset: str) -> tuple[object, object]:
    pipe = build_pipeline(preset, "street", seed=5).pipeline
    t0, t1 = pipe.frame_interval(2)
    return pipe, pipe.source.hits(firings_between(pipe.preset, t0, t1), t0, t1)


@needs_compiled
@pytest.mark.parametrize("preset", ["HDL-64E", "OS1-64"])
@pytest.mark.parametrize("posed", [True, False])
@pytest.mark.parametrize("footprint", [True, False])
@pytest.mark.parametrize("patches", [True, False])
def test_texture_is_numpy_s(preset: str, posed: bool, footprint: bool, patches: bool) -> None:
    pipe, hits = _frame(preset)
    if not posed:
        hits = dataclasses.replace(hits, pose_start=None)
    rng = np.random.default_rng(0)
    n = hits.range_m.shape[0]
    power0 = rng.uniform(0, 1e-6, n).astype(np.float32)
    refl0 = rng.uniform(0, 2, n).astype(np.float32)
    materials = pipe.physics.materials
    assert materials.texture_patch_sigma is not None  # the shipped asphalt has patches
    if not patches:
        materials = dataclasses.replace(materials, texture_patch_sigma=None)
    beam = footprint_beam(pipe.preset) if footprint else None
    got = [power0.copy(), refl0.copy()]
    CompiledBackend().texture_apply(materials, hits, *got, beam)  # the twin
    want = [power0.copy(), refl0.copy()]
    texture_apply(materials, hits, *want, beam)  # the NumPy code
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    assert np.count_nonzero(got[0] != power0) > n // 10  # the road and the walls are textured


@needs_compiled
def test_a_frame_is_the_same_with_the_step_off() -> None:
    def points() -> bytes:
        pipe = build_pipeline("VLP-16", "street", seed=6).pipeline
        pipe.step()
        return pipe.sense().result.points.tobytes()

    fast = points()
    texture_fused.enabled = False
    try:
        assert points() == fast
    finally:
        texture_fused.enabled = True
