"""How much of the HDL-64E's road horizon the echo's broadening costs (docs/realism.md, change 40).

The footprint's depth on the grazing road (change 12, through the matched filter of change 20) lowers the
peak the S2 thresholds. Taken away entirely (a receiver that thresholds the echo's energy, or a beam of no
vertical divergence), the road ahead still ends one ring further out, well short of where KITTI's S2
sees its road: the rest of the gap is the receiver's sensitivity (or the road's echo), not the broadening.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.physics import pulse_spread
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.pulse_spread import peak_factor
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.validation import realism_experiment
from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_experiment import simulated_grids

ROOT = Path(__file__).resolve().parents[2]
SENSOR_HEIGHT_M = 1.8
"""The demo street's lidar above its road."""
KITTI_ROAD_M, KITTI_GRAZING_DEG = 54.7, 1.9
"""Where KITTI frame 000008's ring aimed 67 m out answers from its road (87 % of its rays), and how far
from grazing it meets it there (docs/realism.md, changes 20 and 31)."""


def _echo_over_threshold(range_m: np.ndarray, grazing_deg: np.ndarray) -> np.ndarray:
    """The HDL-64E's mean echo off the table's asphalt over its threshold, without the footprint's depth."""
    preset = load_preset("HDL-64E")
    table = load_material_table(ROOT / "sensor_presets" / "materials.toml").arrays(["asphalt"], 905.0)
    n = range_m.size
    cos = np.sin(np.radians(grazing_deg)).astype(np.float32)
    power, _ = EchoModel(preset, table).power(
        range_m.astype(np.float32), cos, np.zeros(n, np.int16), np.ones(n, np.float32)
    )
    return np.asarray(power / preset.pulse.detection_threshold_w, np.float64)


def test_the_footprints_depth_costs_the_s2_one_ring_of_its_road_not_kittis_horizon() -> None:
    # the demo street's rings ahead meet its flat road at 37.5 / 43 / 49.8 m; KITTI's road answers at 54.7 m
    r = np.array([37.5, 43.0, 49.8, KITTI_ROAD_M])
    grazing = np.degrees(np.arctan(SENSOR_HEIGHT_M / r))
    grazing[-1] = KITTI_GRAZING_DEG
    energy = _echo_over_threshold(r, grazing)
    preset = load_preset("HDL-64E")
    peak = energy * peak_factor(preset, r, np.sin(np.radians(grazing)))
    # with the preset's 2 mrad beam and 5 ns pulse the 43 m ring's echo is under the threshold ...
    assert peak[0] > 1.0 > peak[1]
    # ... without any broadening it is over it, and the 50 m ring and KITTI's road stay under it
    assert energy[1] > 1.0 > energy[2]
    assert 0.65 < energy[3] < 0.85  # KITTI's 87 % asks for ~1.4x the threshold (change 31)


def test_the_narrowest_vertical_beam_quoted_for_a_velodyne_keeps_most_of_the_peak() -> None:
    # HELIOS++ (data/scanners_tls.xml, velodyne_hdl-64e) and MAVS (hdl64e.cpp) give 0.7 mrad, the VLS-128's
    # manual 1.5 mrad vertical: at KITTI's road they keep 0.84 / 0.59 of the peak, the preset's 2 mrad 0.48
    preset = load_preset("HDL-64E")
    cos = np.sin(np.radians([KITTI_GRAZING_DEG]))
    kept = {}
    for v in (2.0, 1.5, 0.7):
        optics = dataclasses.replace(preset.optics, beam_divergence_v_mrad=v)
        beam = dataclasses.replace(preset, optics=optics)
        kept[v] = float(peak_factor(beam, np.array([KITTI_ROAD_M]), cos)[0])
    assert kept[2.0] == pytest.approx(0.48, abs=0.02)
    assert kept[1.5] == pytest.approx(0.59, abs=0.02)
    assert kept[0.7] == pytest.approx(0.84, abs=0.02)
    # even the 0.7 mrad beam's echo at KITTI's road stays under two thirds of the threshold
    energy = _echo_over_threshold(np.array([KITTI_ROAD_M]), np.array([KITTI_GRAZING_DEG]))[0]
    assert energy * kept[0.7] < 0.67


def test_scans_without_the_broadening_see_the_road_one_ring_further(monkeypatch: pytest.MonkeyPatch) -> None:
    def horizon() -> float:
        h = realism_statistics(simulated_grids("HDL-64E", frames=1)[0])["ground_horizon_returned_m"]
        assert h is not None
        return float(h)

    def every_laser_alike(name: str) -> SensorPreset:  # the broadening alone, without change 42's unit
        preset = load_preset(name)
        receiver = dataclasses.replace(preset.receiver, laser_gain_spread=0.0)
        return dataclasses.replace(preset, receiver=receiver)

    monkeypatch.setattr(realism_experiment, "load_preset", every_laser_alike)
    kept = horizon()
    monkeypatch.setattr(pulse_spread, "beam_sigma_rad", lambda preset: 0.0)  # no footprint's depth
    without = horizon()
    assert 35.0 < kept < 40.0  # the 37.5 m ring
    # the 43 m ring, the 50 m ring returning about a third of the time; since change 46 (the texture
    # averaged over each footprint, with 1 m patches of spread 0.25) the 50 m ring returns half the time
    assert 41.0 < without < 52.0
    assert without < KITTI_ROAD_M - 4.0


def test_the_hdl_64e_names_where_its_beam_and_pulse_come_from() -> None:
    prov = load_preset("HDL-64E").provenance or {}
    assert "HELIOS" in prov["optics.beam_divergence_v_mrad"]
    assert "change 40" in prov["optics.beam_divergence_v_mrad"]
    assert "BlenSor" in prov["pulse.width_ns"]
