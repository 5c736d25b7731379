"""The intensity chain from the compiled step (``rt_lidar.physics._intensity_chain``) is the NumPy code's
bytes for every preset (calibrated reflectivity with retro-reflectors above the diffuse scale, read in
each laser's raw steps, and KITTI's weak zeros; Ouster's photon counts with the near field and the
SPAD's dead time), with receiver noise and without; and a whole frame's points are the same with it on
and off."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rt_lidar.physics import intensity_fused
from rt_lidar.physics.intensity_chain import measure
from rt_lidar.sensor.presets import list_presets, load_preset

needs_compiled = pytest.mark.skipif(not intensity_fused.available(), reason="_intensity_chain was not built")


@pytest.fixture
def numpy_only() -> Iterator[None]:
    intensity_fused.enabled = False
    try:
        yield
    finally:
        intensity_fused.enabled = True


def _detections(preset_name: str, m: int, seed: int) -> tuple[np.ndarray, ...]:
    p = load_preset(preset_name)
    thr = p.pulse.detection_threshold_w
    rng = np.random.default_rng(seed)
    power = (thr * np.exp(rng.uniform(-1, 9, m))).astype(np.float32)
    power[rng.random(m) < 0.02] = 0.0
    refl = rng.uniform(0, 1.3, m).astype(np.float32)
    refl[rng.random(m) < 0.05] = rng.uniform(2, 3000, 1).astype(np.float32)  # retro-reflective sheeting
    range_m = rng.uniform(0.3, 200, m).astype(np.float32)
    pulses = 3 * m // 2
    sigma = thr * rng.uniform(0.01, 0.6, pulses)
    pulse = np.sort(rng.integers(0, pulses, m)).astype(np.int64)
    z = rng.standard_normal(m)
    flags = rng.integers(0, 4, m).astype(np.uint8)
    return power, sigma, pulse, z, refl, range_m, flags


@needs_compiled
@pytest.mark.parametrize("preset", list_presets())
@pytest.mark.parametrize("noisy", [True, False])
@pytest.mark.parametrize("per_laser", [True, False])
def test_chain_is_numpy_s(preset: str, noisy: bool, per_laser: bool) -> None:
    power, sigma, pulse, z, refl, range_m, flags = _detections(preset, 5_000, len(preset))
    sig = sigma if noisy else None
    p = load_preset(preset)
    # each laser's raw-reading table (calibrated Velodynes, change 41): the rings of the detections
    rings = np.random.default_rng(7).integers(0, p.n_rings, len(power)).astype(np.int64)
    laser = rings if per_laser else None
    got = intensity_fused.chain(p, power, sig, pulse, z, refl, range_m, flags, laser)
    assert got is not None
    intensity_fused.enabled = False
    try:
        want = measure(p, power, sig, pulse, z, refl, range_m, flags, laser)
    finally:
        intensity_fused.enabled = True
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()
    assert np.any(got[2] != flags) or p.receiver.saturation(p.pulse.detection_threshold_w) > power.max()


def test_foreign_arrays_run_numpy() -> None:
    power, sigma, pulse, z, refl, range_m, flags = _detections("HDL-64E", 20, 1)
    p = load_preset("HDL-64E")
    assert intensity_fused.chain(p, power.astype(np.float64), sigma, pulse, z, refl, range_m, flags) is None
    assert intensity_fused.chain(p, power, sigma, pulse.astype(np.int32), z, refl, range_m, flags) is None
    assert intensity_fused.chain(p, power, sigma, pulse, z.astype(np.float32), refl, range_m, flags) is None


@needs_compiled
@pytest.mark.parametrize("preset", ["HDL-64E", "OS1-64", "HDL-32E"])
def test_a_frame_is_the_same_with_the_chain_off(preset: str, numpy_only: None) -> None:
    from rt_lidar.pipeline.builder import build_pipeline

    def frame() -> bytes:
        pipe = build_pipeline(preset, "street", seed=4).pipeline
        pipe.step()
        sensed = pipe.sense()
        return sensed.result.points.tobytes()

    off = frame()
    intensity_fused.enabled = True
    assert frame() == off
