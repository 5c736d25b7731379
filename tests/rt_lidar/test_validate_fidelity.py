"""``rt-lidar validate`` experiments of issue 14 (Fidelity II): report keys and their published checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from rt_lidar.validation.report import run_validation, trend_checks


def test_weather_dual_return_report(tmp_path: Path) -> None:
    rep = run_validation(tmp_path, ["weather_dual_return"])
    m = rep["weather_dual_return"]
    assert {"fog_100m", "rain_25mm_h", "snow_1mm_h"} <= set(m["cases"])
    for case in m["cases"]:
        entry = m[case]
        assert entry["target_margin"] > 1.0
        assert entry["last_is_target_fraction"] >= 0.95
        assert 0.0 <= entry["strongest_is_target_fraction"] <= 1.0
    assert (tmp_path / "weather_dual_return.png").stat().st_size > 5_000
    assert all(ok for _, ok in trend_checks(rep)["weather_dual_return"])


def test_detection_probability_vs_range_reproduces_the_os1_datasheet(tmp_path: Path) -> None:
    rep = run_validation(tmp_path, ["detection_probability_vs_range"])
    m = rep["detection_probability_vs_range"]
    pd = m["p_detect_10pct"]
    assert len(pd) == len(m["range_m_10pct"]) and pd[0] > 0.99 and pd[-1] < 0.05
    assert sum(0.05 < p < 0.95 for p in pd) >= 4  # a curve, not a step
    assert abs(m["range_pd50_10pct_m"] - m["published_range_10pct_m"]) < 2.0
    assert m["range_sigma_at_snr12_m"] == pytest.approx(m["published_sigma_at_snr12_m"], rel=0.2)
    assert m["range_sigma_at_snr100_m"] == pytest.approx(m["published_sigma_at_snr100_m"], rel=0.3)
    assert (tmp_path / "detection_probability_vs_range.png").stat().st_size > 5_000
    assert all(ok for _, ok in trend_checks(rep)["detection_probability_vs_range"])


def test_wet_road_and_spray_reports(tmp_path: Path) -> None:
    rep = run_validation(tmp_path, ["road_wetness", "spray"])
    road, spray = rep["road_wetness"], rep["spray"]
    assert road["far_road_fraction_of_dry"][0] == 1.0 and road["far_road_fraction_of_dry"][-1] < 0.5
    assert road["ghost_points"][0] == 0 and road["ghost_points"][-1] > 0
    assert spray["spray_points_per_scan"][0] == 0 and spray["spray_points_per_scan"][-1] > 0
    for name in ("road_wetness", "spray"):
        assert (tmp_path / f"{name}.png").stat().st_size > 5_000
        assert all(ok for _, ok in trend_checks(rep)[name])
