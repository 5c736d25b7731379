"""One receiver for hard targets and rain on the Velodynes focused at infinity (docs/realism.md change 63):
a near hard target's echo reaches the detector through the preset's rain receiver (its field, baseline
and aperture), so it loses the biaxial head's near-field share; datasheet-visible targets stay visible."""

from __future__ import annotations

import dataclasses
import importlib
import math

import numpy as np
import pytest

from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics import path_factor_fused
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.receiver_focus import focus_gain, focus_parameters, receiver_focus_gain
from rt_lidar.physics.weather import receiver_optics
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.detection import detection_curve

NEAR_FIELD_PRESETS = ["HDL-32E", "VLP-16", "VLP-32C", "VLS-128"]


def _traced_share(preset_name: str, z: float, n_spot: int = 3000, n_aperture: int = 3000) -> float:
    """The share of a hard target's echo at range ``z`` by tracing rays of a receiver focused at
    infinity: points of the Gaussian spot (1/e^2 widths ``d0 + theta z``, the wide one along the
    baseline, cut at 1.6 of its radii as the tables' beam) a baseline off the receiver's axis, each to
    points of the aperture; the detector keeps the rays within half its field of the axis."""
    rx = receiver_optics(load_preset(preset_name))
    assert rx.filled_exit_m is None
    rng = np.random.default_rng(7)
    wh = (rx.exit_diameter_m + max(rx.divergence_h_rad, rx.divergence_v_rad) * z) / 2.0
    wv = (rx.exit_diameter_m + min(rx.divergence_h_rad, rx.divergence_v_rad) * z) / 2.0
    sx, sy = rng.normal(0.0, 1.0, (2, n_spot * 3)) / 2.0  # in 1/e^2 radii
    keep = np.hypot(sx, sy) <= 1.6
    sx, sy = sx[keep][:n_spot] * wh + rx.baseline_m, sy[keep][:n_spot] * wv
    rad = rx.aperture_m / 2.0 * np.sqrt(rng.uniform(0.0, 1.0, n_aperture))
    ang = rng.uniform(0.0, 2.0 * math.pi, n_aperture)
    ax, ay = rad * np.cos(ang), rad * np.sin(ang)
    off = np.hypot(ax[None, :] - sx[:, None], ay[None, :] - sy[:, None]) / z  # each ray's angle to the axis
    return float(np.mean(off <= rx.fov_rad / 2.0))


@pytest.mark.parametrize("z", [3.0, 5.0, 8.0, 12.0, 20.0])
def test_a_vlp32c_hard_target_loses_what_traced_rays_through_its_rain_receiver_lose(z: float) -> None:
    """The VLP-32C's share (its rain-fitted 3.77 mrad field, 20.5 mm baseline, 30 mm aperture): over the
    share at its 10 % range (150 m; the field never takes the Gaussian's outer wing, and the datasheet
    range holds the threshold). On the code before change 63 the preset had no share at all (None)."""
    p = load_preset("VLP-32C")
    eta = receiver_focus_gain(p, np.array([z, p.range.range_10pct_m or 0.0], np.float32))
    assert eta is not None and eta[1] == 1.0
    far = _traced_share("VLP-32C", float(p.range.range_10pct_m or 0.0))
    assert 0.9 < far < 1.0
    assert float(eta[0]) == pytest.approx(_traced_share("VLP-32C", z) / far, abs=0.02)


def test_the_velodynes_lose_near_echoes_and_the_others_keep_theirs() -> None:
    """Every Velodyne with a near field loses most of a 3 m echo and little at 30 m; the presets without
    one (the Ouster's and the Hesais' receivers are not modelled for hard targets) keep eta = 1."""
    r = np.array([3.0, 10.0, 30.0, 60.0], np.float32)
    for name in NEAR_FIELD_PRESETS:
        eta = receiver_focus_gain(load_preset(name), r)
        assert eta is not None, name
        assert eta[0] < 0.2 and eta[0] < eta[1] < eta[2] <= eta[3] <= 1.0 and eta[3] > 0.95, (name, eta)
    for name in ["OS1-64", "OS1-128", "AT128", "Pandar64"]:
        assert receiver_focus_gain(load_preset(name), r) is None, name


def test_a_dark_near_target_keeps_its_calibrated_reading_and_loses_echo_by_the_share() -> None:
    """Black paint at 2 / 4 / 8 m before a VLP-32C: the echo is the share of the one without a near
    field (detection sees it), calibrated reflectivity divides it out again."""
    p = load_preset("VLP-32C")
    without = dataclasses.replace(p, optics=dataclasses.replace(p.optics, receiver_near_field=False))
    arrays = load_material_table().arrays(["car_paint_black"], 905.0)
    r = np.array([2.0, 4.0, 8.0], np.float32)
    cos, mat, t = np.ones(3, np.float32), np.zeros(3, np.int16), np.ones(3, np.float32)
    p_n, _ = EchoModel(p, arrays).power(r, cos, mat, t)
    p_w, _ = EchoModel(without, arrays).power(r, cos, mat, t)
    eta = receiver_focus_gain(p, r)
    assert eta is not None
    np.testing.assert_allclose(p_n / p_w, eta, rtol=2e-3)
    assert np.all(p_n / p_w < 0.3)
    np.testing.assert_allclose(
        EchoModel(p, arrays).measured_reflectivity(p_n, r),
        EchoModel(without, arrays).measured_reflectivity(p_w, r),
        rtol=1e-5,
    )


def test_a_target_darker_than_the_share_allows_is_lost_at_3_m() -> None:
    """At 3 m a Lambertian target is detected half the time at ``rho_50 = 0.1 (3 / R10)^2 / eta(3 m)``
    (the 10 % target at the preset's datasheet range sets the threshold): four times darker it is lost,
    four times brighter kept; without the near field both are kept."""
    p = load_preset("VLP-32C")
    r10 = p.range.range_10pct_m
    assert r10 is not None
    eta = receiver_focus_gain(p, np.array([3.0], np.float32))
    assert eta is not None
    rho_50 = 0.1 * (3.0 / r10) ** 2 / float(eta[0])
    without = dataclasses.replace(p, optics=dataclasses.replace(p.optics, receiver_near_field=False))
    dark = detection_curve(p, [3.0], rho_50 / 4.0, pulses=400).p_detect[0]
    bright = detection_curve(p, [3.0], rho_50 * 4.0, pulses=400).p_detect[0]
    dark_without = detection_curve(without, [3.0], rho_50 / 4.0, pulses=400).p_detect[0]
    assert dark < 0.05 and bright > 0.95 and dark_without > 0.95


@pytest.mark.parametrize("name", NEAR_FIELD_PRESETS)
def test_datasheet_targets_stay_visible_from_the_minimum_range_to_the_10pct_range(name: str) -> None:
    """A 10 % target at the preset's minimum range and 1.5 x it, a 2 % target at 2 m: detected as
    before; the 10 % target's 50 % range stays the preset's datasheet/fitted figure within 1 %."""
    p = load_preset(name)
    r10 = p.range.range_10pct_m
    assert r10 is not None
    near = detection_curve(p, [p.range.min_m * 1.001, p.range.min_m * 1.5], 0.1, pulses=300).p_detect
    assert np.all(near > 0.99), near
    assert detection_curve(p, [2.0], 0.02, pulses=300).p_detect[0] > 0.99
    far = detection_curve(p, [0.99 * r10, 1.01 * r10], 0.1, pulses=1500).p_detect
    assert far[0] > 0.5 > far[1], far


BACKENDS = ["numpy"] + (["cupy"] if cupy_available() else [])


@pytest.mark.parametrize("xp_name", BACKENDS)
def test_every_backend_reads_the_near_field_table_to_the_same_bits(xp_name: str) -> None:
    """NumPy, CuPy (where a GPU is) and the compiled path factor read the VLP-32C's table alike."""
    xp = importlib.import_module(xp_name)
    p = load_preset("VLP-32C")
    params = focus_parameters(p)
    assert params is not None
    rng = np.random.default_rng(3)
    r = np.concatenate([rng.uniform(0.0, 300.0, 5000), [0.0, -1.0, np.inf, np.nan, 1e30]]).astype(np.float32)
    host = np.asarray(focus_gain(np, r, params), np.float32)
    dev = focus_gain(xp, xp.asarray(r), params, xp.asarray(params.table)).astype(xp.float32)
    assert np.asarray(dev.get() if xp is not np else dev).tobytes() == host.tobytes()
    finite = r[np.isfinite(r)]
    twin = path_factor_fused.path_factor(p, finite, 0.0)
    if twin is not None:  # no extinction and 1/R^2: the path factor is the share alone
        expected = np.asarray(focus_gain(np, finite, params), np.float32)
        assert twin.tobytes() == expected.tobytes()


def test_rain_passes_the_same_receiver_with_or_without_the_hard_targets_near_field() -> None:
    """The flag gives hard targets the rain receiver; the rain tables' receiver itself is unchanged."""
    p = load_preset("VLP-32C")
    without = dataclasses.replace(p, optics=dataclasses.replace(p.optics, receiver_near_field=False))
    assert receiver_optics(p) == receiver_optics(without)
    assert receiver_optics(p).focus_m is None
