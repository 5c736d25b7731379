"""``rt-lidar validate`` experiments of issue 14 (Fidelity II): report keys and their published checks."""

from __future__ import annotations

from pathlib import Path

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
