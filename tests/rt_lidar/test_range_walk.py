"""Range walk of strong returns: a leading-edge discriminator reports strong echoes early (issue 14,
item 8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.errors import PresetError
from rt_lidar.kernels.intensity import (
    SPEED_OF_LIGHT,
    leading_edge_advance_ns,
    leading_edge_walk_m,
    sensor_constant,
)
from rt_lidar.kernels.waveform import pulse_sigma_ns
from rt_lidar.physics.ambient_threshold import preset_at_ambient
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.receiver_range import receiver_range_gain
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SATURATION_OVER_THRESHOLD, load_preset, preset_from_dict, preset_to_dict
from rt_lidar.validation.walk_experiments import target_materials, walk_errors

QUIET = PhysicsConfig(range_noise=False, receiver_noise=False)


def test_leading_edge_advance_is_where_a_gaussian_crosses_the_threshold() -> None:
    """P exp(-d^2 / (2 s^2)) = T on the rising edge at d = s sqrt(2 ln(P / T)): 0 at the threshold."""
    s, thr = 2.0, 1e-8
    p = np.array([0.5e-8, 1e-8, 2e-8, 1e-6, 1e-3])
    d = leading_edge_advance_ns(p, thr, s)
    assert d[0] == 0.0 and d[1] == 0.0
    for pw, dd in zip(p[2:], d[2:], strict=True):
        assert pw * math.exp(-(dd**2) / (2 * s * s)) == pytest.approx(thr, rel=1e-9)
    assert np.all(np.diff(d) >= 0)


def test_walk_is_zero_up_to_saturation_and_grows_beyond() -> None:
    s, thr, sat = 2.0, 1e-8, 1e-5
    p = np.logspace(-8, -2, 61)
    w = leading_edge_walk_m(p, thr, s, sat)
    assert np.all(w[p <= sat] == 0.0)
    assert np.all(w[p > sat] < 0.0)
    assert np.all(np.diff(w) <= 0.0)  # monotone: the stronger, the closer
    # 1000x above saturation: (c/2) s (sqrt(2 ln(1e6)) - sqrt(2 ln(1e3)))
    expected = -0.5e-9 * SPEED_OF_LIGHT * s * (math.sqrt(2 * math.log(1e6)) - math.sqrt(2 * math.log(1e3)))
    assert float(leading_edge_walk_m(np.float64(1e-2), thr, s, sat)) == pytest.approx(expected, rel=1e-9)


def _expected_walk(name: str, reflectance: float, range_m: float) -> float:
    p = load_preset(name)
    k = sensor_constant(p.pulse.peak_power_w, p.optics.receiver_aperture_m, p.optics.system_efficiency)
    power = k * reflectance * math.exp(-2 * PhysicsConfig().extinction_per_m * range_m) / range_m**2
    gain = receiver_range_gain(p, np.array([range_m], np.float32))  # the receiver's range law (issue 40)
    power *= 1.0 if gain is None else float(gain[0])
    thr = p.pulse.detection_threshold_w
    sat = SATURATION_OVER_THRESHOLD * thr  # absolute: a photon counter's night threshold (below) keeps it
    thr = preset_at_ambient(p, PhysicsConfig().sun_illuminance_lux).pulse.detection_threshold_w
    if power <= sat:
        return 0.0
    s = pulse_sigma_ns(p.pulse.width_ns)
    return (
        -0.5e-9
        * SPEED_OF_LIGHT
        * s
        * (math.sqrt(2 * math.log(power / thr)) - math.sqrt(2 * math.log(sat / thr)))
    )


@pytest.mark.parametrize("name", ["OS1-64", "VLP-16"])
def test_retro_reflector_at_20m_reads_closer_than_a_10pct_target(name: str) -> None:
    preset = load_preset(name)
    sign = load_material_table().arrays(["sign_sheeting"], preset.optics.wavelength_nm)
    s_sign = float(sign.diffuse[0] + sign.retro_gain[0])
    e_sign = float(walk_errors(preset, sign, 20.0, QUIET)[0])
    e_ten = float(walk_errors(preset, target_materials([0.1]), 20.0, QUIET)[0])
    assert e_ten == pytest.approx(0.0, abs=1e-4)
    assert e_sign - e_ten == pytest.approx(_expected_walk(name, s_sign, 20.0), abs=2e-3)
    assert e_sign - e_ten < -0.05  # several cm closer
    if name == "OS1-64":  # its datasheet: +-10 cm on retro-reflectors (docs/range-walk.md)
        assert -0.15 < e_sign - e_ten < -0.05


def test_waveform_path_walks_like_the_single_ray_path() -> None:
    preset = load_preset("VLP-16")
    mats = target_materials([0.1, 1.0, 30.0, 300.0, 1000.0])
    single = walk_errors(preset, mats, 20.0, QUIET)
    wave = walk_errors(
        preset,
        mats,
        20.0,
        PhysicsConfig(range_noise=False, receiver_noise=False, beam=BeamConfig(return_mode="last")),
    )
    np.testing.assert_allclose(wave, single, atol=1e-3)
    assert wave[-1] < wave[2] < 0.0


def test_range_walk_off() -> None:
    preset = load_preset("VLP-16")
    mats = target_materials([0.1, 1000.0])
    off = walk_errors(
        preset, mats, 20.0, PhysicsConfig(range_noise=False, receiver_noise=False, range_walk=False)
    )
    np.testing.assert_allclose(off, 0.0, atol=1e-5)


def test_preset_saturation_field() -> None:
    preset = load_preset("OS1-64")
    thr = preset.pulse.detection_threshold_w
    assert preset.receiver.saturation_w is None
    assert preset.receiver.saturation(thr) == pytest.approx(SATURATION_OVER_THRESHOLD * thr)
    d = preset_to_dict(preset)
    d["receiver"]["saturation_w"] = 1e-2
    assert preset_from_dict(d).receiver.saturation(thr) == 1e-2
    assert walk_errors(preset_from_dict(d), target_materials([600.0]), 20.0, QUIET)[0] == pytest.approx(
        0.0, abs=1e-5
    )
    d["receiver"]["saturation_w"] = -1.0
    with pytest.raises(PresetError):
        preset_from_dict(d)


def test_validate_range_walk_vs_strength(tmp_path) -> None:
    from rt_lidar.validation.report import run_validation, trend_checks

    rep = run_validation(tmp_path, ["range_walk_vs_strength"])
    assert (tmp_path / "range_walk_vs_strength.png").stat().st_size > 5_000
    assert all(ok for _, ok in trend_checks(rep)["range_walk_vs_strength"])
