"""Clutter against published measurements (issue 14, item 10): the validate experiment's report."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.clutter_calibration import LINNHOFF_RAIN_P95_M, PUBLISHED, rain_extinction_scale_for
from rt_lidar.validation.report import run_validation, trend_checks


def test_every_published_figure_has_a_source_an_access_level_and_a_model_value(tmp_path: Path) -> None:
    rep = run_validation(tmp_path, ["clutter_calibration"])
    m = rep["clutter_calibration"]
    assert (tmp_path / "clutter_calibration.png").stat().st_size > 5_000
    assert len(m["comparisons"]) == len(PUBLISHED)
    for pub, line in zip(PUBLISHED, m["comparisons"], strict=True):
        assert pub["source"] and pub["access"] and pub["figure"]
        assert pub["model_key"] in m and line.startswith(pub["id"])
    assert all(ok for _, ok in trend_checks(rep)["clutter_calibration"])
    # rain clutter grows with the rate and stays near the sensor
    assert m["rain_clutter_per_scan"] == sorted(m["rain_clutter_per_scan"])
    assert m["rain_clutter_range_p95_m"] < LINNHOFF_RAIN_P95_M  # 14.2 m (was 10 m, change 44)
    # change 49: the rain points' median grows with the rate as the small glory drops' share falls
    share = m["rain_points_share_under_0_5mm"]
    assert share == sorted(share, reverse=True) and share[0] > 0.8 and share[-1] < 0.15
    medians = [q[1] for q in m["rain_point_range_quantiles_by_rate_m"]]
    assert medians == sorted(medians) and len(medians) == len(m["fit_rain_mm_h"])


def test_extinction_scale_fit_reproduces_the_model_at_scale_one() -> None:
    """The fit's inverse: asking for the loss the model itself gives returns a scale of 1."""
    preset = load_preset("VLP-16")
    s = rain_extinction_scale_for(preset, 0.2148, 30.0)  # the analytic loss at 30 mm/h (docs)
    assert s == pytest.approx(1.0, abs=0.02)
    assert rain_extinction_scale_for(preset, 0.35, 30.0) > 1.5


def test_rain_points_per_open_sky_beam_follow_linnhoff_within_1_5x() -> None:
    """Issue 40: per open-sky VLP-16 beam in strongest mode, the measured rain-point rate (the whole
    physics stage, noise included) is within 1.5x of Linnhoff et al.'s calibrated 1.69e-4 x R at every
    rate from 1 to 25 mm/h and grows about linearly (it grew as R^1.35 with Marshall-Palmer drops and
    the 0.5 mm cut, 0.62x at 1 mm/h and 1.94x at 25 mm/h); the expectation from the kernels' own table
    agrees with the measurement."""
    import rt_lidar.validation.clutter_calibration as cc

    preset = load_preset("VLP-16")
    rates = (1.0, 2.5, 5.0, 10.0, 15.0, 25.0)
    measured = {r: cc.open_sky_rain_rate(preset, r) for r in rates}
    ratio = {r: m / cc.linnhoff_rain_points_per_beam(r) for r, m in measured.items()}
    assert all(1 / 1.5 < x < 1.5 for x in ratio.values()), ratio
    slope = math.log(measured[25.0] / measured[1.0]) / math.log(25.0)
    assert 0.8 < slope < 1.2, slope
    p10, q10 = cc.rain_clutter_expectation(preset, 10.0)
    assert p10 == pytest.approx(measured[10.0], rel=0.35) and q10 == sorted(q10)
    # Linnhoff's median rain point lies at 3.9 m; the receiver's near field puts it at ~3.6 m (was 6.3 m
    # with the binary overlap; the quantiles' own test: test_particle_receiver.py)
    assert 3.0 < q10[1] < 4.9


def test_dual_mode_reports_the_drops_that_strongest_mode_hides_behind_a_wall() -> None:
    """Issue 40, why dual mode shows ~9x strongest mode's rain in the street: a drop's echo is weak, so in
    strongest mode it is reported only where nothing stronger answers (open sky); a Velodyne in dual
    mode (strongest + last, the second strongest where they coincide) also reports the drop in front
    of a wall. Beams into open sky show the same rain in both modes."""
    import numpy as np

    import rt_lidar.validation.clutter_calibration as cc
    from rt_lidar.physics.model import PhysicsConfig
    from rt_lidar.physics.weather import WeatherConfig
    from rt_lidar.points import PointFlag
    from rt_lidar.sensor.beam import BeamConfig
    from rt_lidar.validation.detection import datasheet_physics, target_hits

    preset = load_preset("VLP-16")
    rain = {}
    for mode in ("strongest", "dual"):
        beam = None if mode == "strongest" else BeamConfig(return_mode=mode)
        phys = datasheet_physics(preset, 0.6, PhysicsConfig(weather=WeatherConfig(rain_mm_h=25.0), beam=beam))
        pts = phys.apply(
            target_hits(preset, np.full(100_000, 20.0, np.float32)), np.random.default_rng(5)
        ).points
        wall = (pts["flags"] & int(PointFlag.RAIN_CLUTTER)) == 0
        assert wall.sum() == 100_000  # every pulse still reports the wall
        rain[mode] = np.count_nonzero(~wall) / 100_000
    sky = {m: cc.open_sky_rain_rate(preset, 25.0, 100_000, mode=m) for m in ("strongest", "dual")}
    assert rain["strongest"] == 0.0
    assert rain["dual"] == pytest.approx(sky["dual"], rel=0.25) and rain["dual"] > 0.004
    assert sky["dual"] == pytest.approx(sky["strongest"], rel=0.15)
