"""``validate``'s dirt experiment: a dirty window shortens the detection range as the radar equation says."""

from __future__ import annotations

import itertools

import pytest

from rt_lidar.validation import EXPERIMENTS
from rt_lidar.validation.fault_experiments import dirt_detection_range, predicted_range_m


def test_prediction_is_t_times_range_without_extinction():
    assert predicted_range_m(80.0, 0.5, 0.0) == pytest.approx(40.0, rel=1e-9)
    assert predicted_range_m(80.0, 0.5, 1e-3) > 40.0  # the shorter path loses less to the air


def test_dirt_shortens_the_detection_range_as_the_radar_equation_says(tmp_path):
    from rt_lidar.validation.report import trend_checks

    assert "dirt_detection_range" in EXPERIMENTS
    res = dirt_detection_range(tmp_path, pulses=600)
    assert res["transmission"] == [1.0, 0.8, 0.6, 0.4]
    r50 = res["r50_m"]
    assert all(a > b for a, b in itertools.pairwise(r50))
    for got, want in zip(r50, res["predicted_m"], strict=True):
        assert got == pytest.approx(want, rel=0.03)
    assert r50[-1] == pytest.approx(0.4 * r50[0], rel=0.05)
    assert all(ok for _what, ok in trend_checks({"dirt_detection_range": res})["dirt_detection_range"])
    assert (tmp_path / "dirt_detection_range.png").stat().st_size > 1000
