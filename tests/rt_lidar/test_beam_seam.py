"""``--beam full`` at a sim frame's seam (``rt_lidar.pipeline.beam_probe.seam_keys``): a Velodyne's
lasers fire at the head's azimuth plus their own rotational correction, so at a frame's seam a pulse's
ring neighbour fired in the frame before or after; such a pulse probes toward that ring itself. With an
S2.1 unit's calibration (beam origins 0.19-0.21 m up) the retro-reflective panels' lower edge runs
along one ring's footprint at the seam in front of the sensor, where the pulses lacked that probe:
blooming 80 points a scan with ``--beam full`` against the dense bundle's 92 before the fix."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from rt_lidar.pipeline.beam_full import NEIGHBOUR_MAX_DEG, ring_ranks
from rt_lidar.pipeline.beam_probe import PROBE_SIDES, SEAM_STEPS, probe_rows, seam_keys
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns
from rt_lidar.validation.beam_full_check import TOLERANCES, compare_full_beam, within_tolerance

S21 = Path(__file__).resolve().parents[1] / "data" / "vendor" / "velodyne" / "64e_s2.1-sztaki.yaml"


def _s21() -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the vendor file's notes on what it lacks
        return load_preset(str(S21))


def test_only_pulses_whose_ring_neighbour_fired_beyond_the_seam_probe_unasked() -> None:
    preset = _s21()
    per = scan_period_ns(preset)
    f = firings_between(preset, per, per + per // 2)  # a 20 Hz frame: half a turn
    n = len(f)
    keys = seam_keys(f)
    pulse, side = keys % n, keys // n
    assert keys.size and set(np.unique(side).tolist()) <= {2, 3}  # vertical probes only
    rank, az = ring_ranks(f), f.azimuth_deg
    # every seam probe's pulse has no pulse of the ring on that side within SEAM_STEPS of its own steps
    step = np.median(np.abs(np.diff(az[f.ring == f.ring[0]])))
    for p, s in zip(pulse[::7], side[::7], strict=True):
        other = rank == rank[p] + (1 if s == 3 else -1)
        assert other.any()
        assert np.abs(az[other] - az[p]).min() > min(SEAM_STEPS * step * 0.99, NEIGHBOUR_MAX_DEG)
    # they lie at the frame's two ends (the rotational corrections span -8.8..+9.6 deg)
    seam_dist = np.minimum(
        np.abs(np.remainder(az[pulse] - az[0] + 180, 360) - 180),
        np.abs(np.remainder(az[pulse] - az[-1] + 180, 360) - 180),
    )
    assert seam_dist.max() < 20.0
    assert pulse.size < 0.1 * n
    # and a pulse of a marked pair keeps its own probe beside them (each (pulse, side) once)
    i, j = np.array([5000]), np.array([5001])
    assert probe_rows(f, i, j)[0].size == 2  # without the seam's, the pair's two probes
    got_p, got_s = probe_rows(f, i, j, keys)
    key = got_s * n + got_p
    assert np.unique(key).size == key.size and np.isin(keys, key).all() and key.size >= keys.size + 1
    assert (got_s < PROBE_SIDES).all()


def test_full_beam_blooms_as_dense_sampling_with_an_s2_units_beam_origins() -> None:
    preset = _s21()
    origins = preset.beam_origins_m
    assert origins is not None and np.abs(origins[:, 2]).min() > 0.1  # each laser fires from its own origin
    full, dense = compare_full_beam(preset, "targets", scans=1)  # type: ignore[arg-type]
    report = within_tolerance(full, dense)
    assert dense.bloom_points >= 60  # the panels' lower edge blooms along a ring
    bad = {k: v for k, v in report.items() if not v[2]}
    assert not bad, f"--beam full vs 19 sub-rays out of tolerance: {bad}"
    assert abs(full.bloom_points - dense.bloom_points) <= TOLERANCES["bloom_points"][0] * dense.bloom_points
