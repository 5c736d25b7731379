"""Issue 40 item 1: a photon-counting receiver's threshold follows the scene's ambient light (constant
false-alarm rate; rt_lidar.physics.ambient_threshold). The OS1-64's datasheet ranges hold in the
datasheet's 100 klx of sunlight; at night the same receiver reaches further, as the street's horizon
of real OS1-64 scans asks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rt_lidar.errors import PresetError
from rt_lidar.physics.ambient_threshold import (
    background_counts_at_datasheet,
    preset_at_ambient,
    threshold_ratio,
)
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.receiver_range import range_exponent
from rt_lidar.sensor.presets import list_presets, load_preset, preset_from_dict, preset_to_dict
from rt_lidar.validation.detection import datasheet_physics, detection_curve, range_at, target_hits

DAY = 100_000.0


def test_the_datasheet_threshold_is_the_one_at_the_datasheets_ambient() -> None:
    p = load_preset("OS1-64")
    assert p.receiver.datasheet_ambient_lux == DAY and p.receiver.photon_floor_counts is not None
    assert preset_at_ambient(p, DAY) is p  # the datasheet's own condition: nothing changes
    b_ds = background_counts_at_datasheet(p)
    assert b_ds is not None and b_ds > 0
    night = preset_at_ambient(p, 0.0)
    k = threshold_ratio(p, 0.0)
    # at night the threshold is threshold_snr x the floor (counts), against counts_at_threshold by day
    assert night.output.counts_at_threshold == pytest.approx(
        p.receiver.threshold_snr * p.receiver.photon_floor_counts
    )
    assert night.pulse.detection_threshold_w == pytest.approx(k * p.pulse.detection_threshold_w)
    assert 0.1 < k < 0.5
    # counts stay photons: counts per watt of echo do not change with the threshold
    per_watt_day = p.output.counts_at_threshold / p.pulse.detection_threshold_w
    per_watt_night = night.output.counts_at_threshold / night.pulse.detection_threshold_w
    assert per_watt_night == pytest.approx(per_watt_day, rel=1e-12)
    assert night.receiver.saturation_w == pytest.approx(p.receiver.saturation(p.pulse.detection_threshold_w))
    # the threshold grows with the light, monotonically, and beyond the datasheet's in brighter light
    lux = np.array([0.0, 1e3, 1e4, 5e4, DAY, 150_000.0])
    ratios = [threshold_ratio(p, x) for x in lux]
    assert np.all(np.diff(ratios) > 0) and ratios[4] == 1.0 and ratios[5] > 1.0


@pytest.mark.parametrize("name", [n for n in list_presets() if n != "OS1-64"])
def test_fixed_threshold_receivers_keep_their_preset(name: str) -> None:
    p = load_preset(name)
    if p.receiver.photon_floor_counts is not None:
        pytest.skip("a photon-counting receiver")
    for lux in (0.0, DAY):
        assert preset_at_ambient(p, lux) is p  # so their scans keep their bytes


def test_datasheet_ranges_hold_at_100_klx_and_grow_at_night() -> None:
    p = load_preset("OS1-64")
    r10, r80 = p.range.range_10pct_m, p.range.range_80pct_m
    assert r10 is not None and r80 is not None
    ungated = dataclasses.replace(p, range=dataclasses.replace(p.range, max_m=400.0))
    day = detection_curve(ungated, np.linspace(0.85 * r10, 1.15 * r10, 31), 0.1, 1500, sun_lux=DAY, seed=4)
    assert range_at(day, 0.5) == pytest.approx(r10, rel=0.03)
    # night: the threshold falls by k, so under the receiver's range law P ~ R^-n the 10 % target reaches
    # r10 k^(-1/n) (clear air's exp(-2 a R) aside: < 1 % here)
    expected = r10 * threshold_ratio(p, 0.0) ** (-1.0 / range_exponent(p))
    ranges = np.linspace(0.8 * expected, 1.2 * expected, 31)
    night = detection_curve(ungated, ranges, 0.1, 1500, sun_lux=0.0, seed=4)
    assert range_at(night, 0.5) == pytest.approx(expected, rel=0.03)
    assert range_at(night, 0.5) > 2.0 * r10


def test_the_lower_threshold_at_night_does_not_raise_the_false_alarms() -> None:
    # the threshold falls with the noise it is set over (threshold_snr x the floor): at night the
    # floor's own false alarms stay where they were (~1e-5 a pulse), where a threshold 5x lower over
    # the same noise would fire on nearly every pulse; by day the sunlit wall's shot noise adds some
    p = load_preset("OS1-64")
    far = 3.0 * p.range.max_m  # beyond the range gate: only the noise returns
    night, day = (
        float(detection_curve(p, [far], 0.9, pulses=n, sun_lux=lux, seed=5).false_per_pulse[0])
        for lux, n in ((0.0, 200_000), (DAY, 60_000))
    )
    assert 2e-5 <= day <= 5e-4  # the datasheet's "false positive rate of 1/10,000"
    assert night <= 5e-5 and night <= day


def test_an_echo_reads_the_same_counts_by_day_and_by_night() -> None:
    p = load_preset("OS1-64")
    n = 4000
    counts = []
    for lux in (0.0, DAY):
        phys = datasheet_physics(p, 0.1, PhysicsConfig(sun_illuminance_lux=lux, range_noise=False))
        hits = target_hits(p, np.full(n, 15.0, np.float32), 1.0 if lux > 0 else None)
        pts = phys.apply(hits, np.random.default_rng(6)).points
        assert len(pts) > 0.99 * n
        counts.append(float(np.mean(pts["intensity"])))
    assert counts[0] == pytest.approx(counts[1], rel=0.01)


def test_a_floor_above_the_datasheet_threshold_is_refused() -> None:
    d = preset_to_dict(load_preset("OS1-64"))
    d["receiver"]["photon_floor_counts"] = 10.0  # 5.3 x 10 counts > counts_at_threshold 35.5
    with pytest.raises(PresetError, match="counts_at_threshold"):
        preset_from_dict(d, "os1.toml")
    d["receiver"]["photon_floor_counts"] = 1.0
    d["receiver"]["datasheet_ambient_lux"] = 0.0
    with pytest.raises(PresetError, match="datasheet_ambient_lux"):
        preset_from_dict(d, "os1.toml")
