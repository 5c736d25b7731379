"""Calibrated Velodynes (HDL-32E, VLP-32C, VLS-128) compute calibrated reflectivity on board from a coarser
raw reading through each laser's own table (docs/realism.md, change 41): a laser's diffuse values come
in whole raw steps, so its histogram combs; the lasers' steps differ, so a frame's histogram has no
empty value; the road's texture falls to the real frames' 0.42-0.43. The HDL-64E's byte and the Ouster's
counts have no such table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rt_lidar.errors import PresetError
from rt_lidar.kernels import raw_reading_lookup
from rt_lidar.physics.intensity_chain import detection_table_steps, laser_table_steps, measure
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.realism import _tolerance, fit_ground, realism_statistics
from rt_lidar.validation.realism_experiment import simulated_grids

CALIBRATED = ("HDL-32E", "VLP-32C", "VLS-128")


def test_a_diffuse_value_is_read_in_whole_raw_steps_and_retro_values_pass() -> None:
    v = np.array([0.0, 0.7, 0.9, 5.0, 12.3, 99.9, 100.0, 180.0])
    got = raw_reading_lookup(v, np.full(v.size, 1.6), 100.0)
    k = got[:7] / 1.6
    assert np.allclose(k, np.round(k))  # whole steps from a raw reading of 0
    assert np.all(np.abs(got[:7] - v[:7]) <= 0.8 + 1e-12)  # the nearest step
    assert got[1] == 0.0 and got[2] == 1.6
    assert got[7] == 180.0  # retro-reflectors' log scale is not the table's
    assert raw_reading_lookup(np.array([99.9]), np.array([1.7]), 100.0)[0] == 100.0  # 102 held at 100


def test_each_laser_has_its_own_step_the_same_in_every_run() -> None:
    a = laser_table_steps(1.6, 0.3, 32)
    assert np.array_equal(a, laser_table_steps(1.6, 0.3, 32))
    assert np.all((a >= 1.6 * 0.7 - 1e-12) & (a <= 1.6 * 1.3 + 1e-12))
    assert abs(a.mean() - 1.6) < 0.05 and np.unique(a).size == 32
    assert abs(a[0] - a[1]) > 0.1  # neighbouring lasers differ
    assert np.array_equal(laser_table_steps(1.6, 0.0, 4), np.full(4, 1.6))


@pytest.mark.parametrize("name", CALIBRATED)
def test_a_laser_combs_and_the_lasers_together_fill_every_value(name: str) -> None:
    p = load_preset(name)
    assert p.output.raw_step is not None and p.output.raw_step_spread > 0
    m = 64_000
    rng = np.random.default_rng(3)
    power = np.full(m, 50 * p.pulse.detection_threshold_w, np.float32)
    refl = rng.uniform(0.04, 0.16, m).astype(np.float32)  # the road's 4-16 of 0..100
    laser = (np.arange(m) % p.n_rings).astype(np.int64)
    args = (power, None, np.arange(m, dtype=np.int64), np.zeros(m), refl, np.full(m, 10.0, np.float32))
    _, inten, _ = measure(p, *args, np.zeros(m, np.uint8), laser)
    values = set(range(5, 16))
    combed = 0
    for k in range(p.n_rings):
        seen = set(np.unique(inten[laser == k]).astype(int).tolist())
        combed += len(values - seen) > 0  # a value this laser's table never gives
    assert combed >= p.n_rings // 2
    assert values <= set(np.unique(inten).astype(int).tolist())  # the frame: no empty value
    # without the lasers (None: every return on the mean step) the comb is the same everywhere
    _, one, _ = measure(p, *args, np.zeros(m, np.uint8))
    assert not values <= set(np.unique(one).astype(int).tolist())


def test_only_the_calibrated_velodynes_have_a_table() -> None:
    for name in ("HDL-64E", "OS1-64", "OS1-128"):
        p = load_preset(name)
        assert p.output.raw_step is None
        assert detection_table_steps(p, np.zeros(3, np.int64), 3) is None


def test_raw_step_belongs_to_calibrated_reflectivity(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "sensor_presets"
    s2 = (root / "hdl-64e.toml").read_text()
    s2 = s2.replace("raw_knee = 160.0", "raw_knee = 160.0\nraw_step = 1.6", 1)
    spread_alone = (root / "hdl-32e.toml").read_text().replace("raw_step = 1.6\n", "", 1)
    for text, field in ((s2, "raw_step"), (spread_alone, "raw_step_spread")):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(PresetError, match=rf"output\.{field}"):
            load_preset(bad)


def test_the_hdl_32e_road_has_the_real_texture_and_its_rings_comb() -> None:
    """One scan of the demo street: the road's texture at 5-15 m near nuScenes' 0.424 (0.52 with a
    continuous calibrated value), and the ground rings' histograms have empty values between their
    10th and 75th percentiles (none without the table)."""
    (grid,) = simulated_grids("HDL-32E", frames=1)
    st = realism_statistics(grid)
    assert 0.36 <= st["ground_texture_share"] <= 0.48
    ret = grid.returned & grid.in_view
    plane = fit_ground(grid.xyz[ret], 0)
    assert plane is not None
    with np.errstate(invalid="ignore"):
        ground = ret & (np.abs(plane.distance(np.nan_to_num(grid.xyz))) <= _tolerance(grid.range_m))
    near = ground & (grid.range_m >= 5) & (grid.range_m < 15)
    gaps = 0
    for k in range(grid.intensity.shape[0]):
        v = np.round(grid.intensity[k][near[k]]).astype(int)
        if v.size < 200:
            continue
        lo, hi = np.percentile(v, [10, 75]).astype(int)
        counts = np.bincount(v, minlength=hi + 1)[lo : hi + 1]
        gaps += int(np.count_nonzero(counts == 0))
    assert gaps >= 5  # a continuous calibrated value leaves none
