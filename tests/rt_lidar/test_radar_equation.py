"""The radar equation's constant, the receiver noise model and detection as a probability (issue 14,
items 4 and 8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.kernels.intensity import SPEED_OF_LIGHT, received_power
from rt_lidar.kernels.waveform import pulse_sigma_ns
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import lambertian_return_w, list_presets, load_preset
from rt_lidar.validation.detection import detection_curve, range_at


def test_lambertian_extended_target_constant_is_one_quarter() -> None:
    """A Lambertian reflector sends rho P cos / pi per steradian; the aperture pi D^2 / 4 at R subtends
    pi D^2 / (4 R^2) sr of it: P_r = P rho D^2 / (4 R^2) (the code divided by 16)."""
    p_e, d, rho, r = 10.0, 0.05, 0.3, 20.0
    radiant_intensity = rho * p_e / math.pi  # W/sr, along the normal
    expected = radiant_intensity * (math.pi * d * d / 4.0) / (r * r)
    assert float(received_power(r, rho, 1.0, p_e, d, 1.0)) == pytest.approx(expected, rel=1e-12)
    assert lambertian_return_w(p_e, d, 1.0, r, rho, extinction_per_m=0.0) == pytest.approx(
        expected, rel=1e-12
    )


@pytest.mark.parametrize("name", list_presets())
def test_each_preset_detects_its_datasheet_target_at_the_published_range(name: str) -> None:
    """10 % Lambertian target head-on: the detection probability falls through 1/2 at the datasheet's
    range (within 2 %), and falls smoothly (no step at the threshold)."""
    p = load_preset(name)
    r_pub = p.range.range_10pct_m
    assert r_pub is not None
    curve = detection_curve(p, np.linspace(0.8 * r_pub, 1.2 * r_pub, 17), 0.1, pulses=2000, seed=1)
    assert range_at(curve, 0.5) == pytest.approx(r_pub, rel=0.02)
    between = (curve.p_detect > 0.05) & (curve.p_detect < 0.95)
    assert between.sum() >= 3, curve.p_detect


def _false_alarms(name: str, lux: float) -> float:
    p = load_preset(name)
    # a white wall in full sun beyond the range gate: every pulse's return is the noise's alone
    return float(
        detection_curve(p, [3.0 * p.range.max_m], 0.9, pulses=40_000, sun_lux=lux).false_per_pulse[0]
    )


@pytest.mark.parametrize("name", list_presets())
def test_sunlight_false_alarms_per_pulse_are_plausible(name: str) -> None:
    """Receiver model per preset: in full sun (100 klx) on a white sunlit wall a few false detections in
    10^4 pulses (APD) to ~10^-3 (SPAD); the night's floor no higher. Before: 58 % (VLP-16) and 0
    (HDL-64E) from one global noise scale."""
    day, night = _false_alarms(name, 100_000.0), _false_alarms(name, 0.0)
    assert 1e-5 <= day <= 1e-2, day
    assert night <= 1e-3 and night <= day * 1.5 + 1e-4, (night, day)


def test_range_noise_grows_as_one_over_sqrt_snr() -> None:
    p = load_preset("VLP-16")
    r_pub = p.range.range_10pct_m
    assert r_pub is not None
    curve = detection_curve(p, [0.2 * r_pub, r_pub], 0.1, pulses=20_000, seed=2)
    strong, weak = curve.range_sigma_m
    assert strong == pytest.approx(p.range.accuracy_m, rel=0.05)
    # at the threshold the power SNR is threshold_snr^2 (signal shot noise aside): jitter c/2 sigma_p / snr
    jitter = 0.5e-9 * SPEED_OF_LIGHT * pulse_sigma_ns(p.pulse.width_ns) / p.receiver.threshold_snr
    assert weak == pytest.approx(math.hypot(p.range.accuracy_m, jitter), rel=0.2)
    assert weak > 2.0 * strong


def test_waveform_and_single_ray_paths_detect_alike() -> None:
    p = load_preset("VLP-16")
    r_pub = p.range.range_10pct_m
    assert r_pub is not None
    ranges = [0.9 * r_pub, r_pub, 1.1 * r_pub]
    single = detection_curve(p, ranges, 0.1, pulses=8000, seed=3)
    wave = detection_curve(
        p,
        ranges,
        0.1,
        pulses=8000,
        seed=3,
        config=PhysicsConfig(beam=BeamConfig(sub_rays=1, return_mode="last")),
    )
    np.testing.assert_allclose(wave.p_detect, single.p_detect, atol=0.03)
    assert 0.35 < single.p_detect[1] < 0.65
