"""Clutter against published measurements (issue 14, item 10): the validate experiment's report."""

from __future__ import annotations

from pathlib import Path

import pytest

from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.clutter_calibration import PUBLISHED, rain_extinction_scale_for
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
    assert m["rain_clutter_range_p95_m"] < 10.0


def test_extinction_scale_fit_reproduces_the_model_at_scale_one() -> None:
    """The fit's inverse: asking for the loss the model itself gives returns a scale of 1."""
    preset = load_preset("VLP-16")
    s = rain_extinction_scale_for(preset, 0.2148, 30.0)  # the analytic loss at 30 mm/h (docs)
    assert s == pytest.approx(1.0, abs=0.02)
    assert rain_extinction_scale_for(preset, 0.35, 30.0) > 1.5


def test_the_drop_reflectance_fit_recovers_a_known_reflectance_and_is_the_one_in_use() -> None:
    """The fit's inverse: rain points per beam made by the model itself at a known drop reflectance give
    that reflectance back; and the constant the weather model uses is what the fit to Linnhoff's VLP-16
    calibration gives."""
    import rt_lidar.validation.clutter_calibration as cc
    from rt_lidar.physics.weather import RHO_RAIN_DROP

    preset = load_preset("VLP-16")
    rho_fit, loss = cc.fit_rain_drop_rho(preset)
    assert rho_fit == pytest.approx(RHO_RAIN_DROP, rel=0.03) and loss > 0.0
    # made-up measurements: the model's own points per beam at rho = 0.05 (not rate-linear as
    # Linnhoff's); the fit must return 0.05 with a loss of (nearly) zero
    synthetic = {r: cc.rain_clutter_expectation(preset, r, 0.05)[0] for r in cc.FIT_RAIN_MM_H}
    rho, loss = cc.fit_rain_drop_rho(preset, synthetic.__getitem__)
    assert rho == pytest.approx(0.05, rel=1e-3) and loss < 1e-8
    # the expectation itself: more rain, more drops; a brighter drop is seen farther
    p5, q5 = cc.rain_clutter_expectation(preset, 5.0)
    p20, _ = cc.rain_clutter_expectation(preset, 20.0)
    _, q_bright = cc.rain_clutter_expectation(preset, 5.0, 0.2)
    assert 0.0 < p5 < p20 < 1.0 and q5 == sorted(q5) and q_bright[2] > q5[2]
