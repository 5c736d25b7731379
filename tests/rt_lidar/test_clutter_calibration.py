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
