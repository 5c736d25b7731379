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
    assert "dirt_detection_range" in EXPERIMENTS
    res = dirt_detection_range(tmp_path, pulses=600)
    rows = res["rows"]
    assert [r["transmission"] for r in rows] == [1.0, 0.8, 0.6, 0.4]
    r50 = [r["r50_m"] for r in rows]
    assert all(a > b for a, b in itertools.pairwise(r50))
    for r in rows:
        assert r["r50_m"] == pytest.approx(r["predicted_m"], rel=0.03)
    assert rows[-1]["r50_m"] == pytest.approx(0.4 * rows[0]["r50_m"], rel=0.05)
