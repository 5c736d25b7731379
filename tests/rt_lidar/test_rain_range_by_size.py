"""Issue 40, item 4 (docs/rain.md change 49): why the VLP-16's rain points lie farther out in heavier
rain. Each drop size sits at the same ranges at every rate; what the rate changes is how many drops of
each size there are, and the small spherical drops near the sensor give way to big oblate ones farther
out. Neither the receiver's noise nor several drops in one pulse volume is what moves them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.clutter_calibration import rain_clutter_expectation
from rt_lidar.validation.detection import datasheet_physics, target_hits
from rt_lidar.validation.rain_drop_sizes import detected_drops_by_size


def test_each_drop_size_sits_at_the_same_ranges_at_every_rate_and_the_mix_moves_the_median() -> None:
    """At 1 and 25 mm/h each size band's 10 / 50 / 90 % ranges agree within 10 % (the detection of a
    drop of a given size at a given range does not depend on the rate; half-millimetre bands, so that the
    mix inside a band hardly moves), while the rain points' median
    range grows over 2x: the drops under 0.5 mm (spheres with their glory, at 0.9-2.7 m) are over 80 %
    of the rain points at 1 mm/h and under 15 % at 25 mm/h, where drops over 2 mm (out to ~10 m) are the
    rest. The 0.5-2.5 mm drops (oblate, rho ~ 0.03) are detected almost nowhere."""
    preset = load_preset("VLP-16")
    light, heavy = detected_drops_by_size(preset, 1.0), detected_drops_by_size(preset, 25.0)
    assert [b["d_mm"][0] for b in light] == [0.1, 0.5, 2.5, 3.0, 3.5, 4.0]
    for a, b in zip(light, heavy, strict=True):
        if a["share"] > 0.01 and b["share"] > 0.01:
            assert np.allclose(a["quantiles_m"], b["quantiles_m"], rtol=0.10), (a, b)
    assert light[0]["share"] > 0.8 and heavy[0]["share"] < 0.15
    assert light[1]["share"] < 0.01 and heavy[1]["share"] < 0.01
    assert light[0]["quantiles_m"][2] < 3.0 < heavy[2]["quantiles_m"][1]  # glory drops near, big far
    medians = [b["quantiles_m"][1] for b in heavy[2:]]
    assert medians == sorted(medians)  # the bigger, the farther
    assert sum(b["share"] for b in heavy) == pytest.approx(1.0)
    med_light = rain_clutter_expectation(preset, 1.0)[1][1]
    med_heavy = rain_clutter_expectation(preset, 25.0)[1][1]
    assert med_heavy > 2.0 * med_light
    # the pooled median lies between its bands' medians, nearest the band that holds most drops
    assert light[0]["quantiles_m"][1] <= med_light < light[2]["quantiles_m"][1]
    assert heavy[2]["quantiles_m"][1] < med_heavy <= heavy[-1]["quantiles_m"][1]


def test_the_receivers_noise_leaves_the_rain_points_where_the_table_puts_them() -> None:
    """The rain points measured through the whole physics stage (the threshold's noise included) lie
    where the noise-free table puts them: their median within 15 % of the table's at 10 and 25 mm/h, so
    the growth of the median with the rate is not the threshold's noise."""
    preset = load_preset("VLP-16")
    medians = []
    for rate in (10.0, 25.0):
        phys = datasheet_physics(preset, 0.1, PhysicsConfig(weather=WeatherConfig(rain_mm_h=rate)))
        hits = target_hits(preset, np.full(150_000, np.inf, np.float32))
        hits.material[:] = -1
        hits.segment[:] = 0
        pts = phys.apply(hits, np.random.default_rng(5)).points
        rain = (pts["flags"] & int(PointFlag.RAIN_CLUTTER)) != 0
        r = np.sqrt(pts["x"][rain] ** 2 + pts["y"][rain] ** 2 + pts["z"][rain] ** 2)
        assert r.size > 200
        table = rain_clutter_expectation(preset, rate)[1][1]
        medians.append(float(np.median(r)))
        assert math.isclose(medians[-1], table, rel_tol=0.15), (rate, medians[-1], table)
    assert medians[1] > medians[0]
