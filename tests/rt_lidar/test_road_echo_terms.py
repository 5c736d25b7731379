"""The road's echo over the threshold term by term, and as each laser's zeros read it back (docs/realism.md,
change 52): the model's HDL-64E road falls as R^-3.6 between 35 and 55 m, steeper than 1/R^2 times the
cos law through the footprint's broadening and the receiver's range law; KITTI's S2 road, read through the
same receiver, falls as R^-0.3 from 28 to 55 m, flatter than 1/R^2 alone. The readers hold at any weak-return
level (change 70: the S2's rule is nearly a step at it, so a laser's zeros read its echo only about it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.laser_gain import ring_gains
from rt_lidar.physics.pulse_spread import peak_factor
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.validation import realism_experiment
from rt_lidar.validation.real_frames import parse_real_option, read_frame, vendored_frames
from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_experiment import _shared_real, real_grids, simulated_grids
from rt_lidar.validation.road_echo_terms import (
    READ_SPAN,
    SPREAD_MAX,
    TERMS,
    ZERO_SHARE_BODY,
    ZERO_SHARE_READ,
    echo_and_spread,
    echo_for_return_rate,
    echo_for_zero_share,
    echo_slope,
    gain_asked_at_r10,
    laser_echo_spreads,
    laser_echoes,
    read_lasers,
    return_rate,
    road_echo_slopes,
    road_echo_terms,
    road_material,
    road_reach,
    spread_echo_slope,
    spread_rates,
    zero_share,
)

PRESETS = ("HDL-64E", "HDL-32E", "VLP-32C", "VLS-128", "OS1-64")
S21_FILE = "velodyne/64e_s2.1-sztaki.yaml"
"""An S2.1 unit's calibration with its lasers' vertical and horizontal offsets (vendored)."""
LEVELS = (2.1, 3.3, 4.2)
"""Weak-return levels the readers are held at: change 26's, change 70's and one above KITTI's median."""


def at_level(preset: SensorPreset, level: float) -> SensorPreset:
    """``preset`` reporting 0 under ``level`` thresholds (``output.weak_zero_snr``)."""
    return dataclasses.replace(preset, output=dataclasses.replace(preset.output, weak_zero_snr=level))


@pytest.mark.parametrize("name", PRESETS)
def test_the_terms_multiply_to_the_models_road_echo(name: str) -> None:
    preset = load_preset(name)
    road = road_material(preset)
    r = np.array([20.0, 35.0, 50.0, 70.0])
    t = road_echo_terms(preset, road, r)
    cos = (1.8 / r).astype(np.float32)
    power, _ = EchoModel(preset, road).power(
        r.astype(np.float32), cos, np.zeros(r.size, np.int16), np.ones(r.size, np.float32)
    )
    model = power * peak_factor(preset, r.astype(np.float32), cos) / preset.pulse.detection_threshold_w
    np.testing.assert_allclose(t["echo_over_threshold"], model, rtol=2e-5)
    np.testing.assert_allclose(np.prod([t[k] for k in TERMS], axis=0), model, rtol=2e-5)
    # the radar equation's own term is exactly 1 / R^2
    np.testing.assert_allclose(t["inverse_square"] * r**2, t["inverse_square"][0] * r[0] ** 2, rtol=1e-5)


def test_the_broadening_and_range_law_make_the_hdl64es_road_fall_faster_than_the_cos_law() -> None:
    preset = load_preset("HDL-64E")
    s = road_echo_slopes(preset, road_material(preset), 35.0, 55.0)
    assert s["inverse_square"] == pytest.approx(-2.0, abs=1e-4)
    assert s["lambert"] == pytest.approx(-1.0, abs=0.01)  # cos(i) = h / R on a flat road
    assert -0.1 < s["reflectance"] < 0.0  # Hapke's asphalt keeps its echo at grazing incidence
    assert s["range_law"] == pytest.approx(-0.36, abs=0.01)  # n = 2.36, the datasheet's two figures
    assert s["focus"] == 0.0 and -0.02 < s["atmosphere"] < 0.0
    assert -1.3 < s["broadening"] < -1.0  # the footprint's depth: the steepest term after 1 / R^2
    assert s["total"] == pytest.approx(sum(s[k] for k in TERMS), abs=1e-6)
    assert -3.7 < s["total"] < -3.4
    assert -0.7 < s["steeper_than_cos_law"] < -0.45
    # the VLP-32C (1.5 mrad, 6 ns, no range law), whose road reaches Argoverse 2's 72 m, falls as the cos law
    vlp = load_preset("VLP-32C")
    assert abs(road_echo_slopes(vlp, road_material(vlp))["steeper_than_cos_law"]) < 0.15


@pytest.mark.parametrize("level", LEVELS)
def test_zero_share_and_return_rate_read_back_their_echo(level: float) -> None:
    # change 70: the receiver's noise is a fifth of the threshold, so at any level the zero share steps
    # from all to none over about +-0.4 thresholds about it; echoes about the level read back
    preset = at_level(load_preset("HDL-64E"), level)
    for echo in (level - 0.25, level, level + 0.25):
        z = zero_share(preset, echo)
        assert ZERO_SHARE_READ[0] < z < ZERO_SHARE_READ[1]
        assert echo_for_zero_share(preset, z) == pytest.approx(echo, rel=1e-3)
    assert zero_share(preset, level - 1.0) > 0.999 and zero_share(preset, level + 1.0) < 0.001
    for echo in (0.9, 1.1, 1.3):
        assert echo_for_return_rate(preset, return_rate(preset, echo)) == pytest.approx(echo, rel=1e-3)
    assert zero_share(load_preset("VLP-32C"), 1.5) == 0.0  # a calibrated Velodyne reports no zeros


def test_the_zeros_do_not_read_a_spread_roads_fall_back() -> None:
    # change 52's amendment: on the model's own scan, whose road echo spreads with change 46's texture
    # patches, the zeros read back (receiver noise alone, no spread) fall far flatter than the echo the
    # model gives those lasers: a flat read-back, KITTI's included, does not show a flat road echo
    preset = load_preset("HDL-64E")
    rows = laser_echoes(preset, realism_statistics(simulated_grids("HDL-64E", frames=1)[0])["horizon_lasers"])
    read = [r for r in rows if r[4] is not None and r[1] <= 60.0]
    assert len(read) >= 3
    for _ring, where, _p, _z, _from_zeros, _at_least, model in read:
        direct = road_echo_terms(preset, road_material(preset), np.array([where]))["echo_over_threshold"][0]
        assert model == pytest.approx(direct, rel=1e-3)  # the row's model column: the street's flat road
    x = np.log([r[1] for r in read])
    model_slope = float(np.polyfit(x, np.log([r[6] for r in read]), 1)[0])
    read_slope = echo_slope(rows)
    assert model_slope < -2.5  # the model's echo over these lasers (-3.0 on this scan)
    assert read_slope is not None and read_slope > model_slope + 1.5  # read back: -0.35


def test_kittis_road_echo_reads_flatter_than_inverse_square_from_28_to_55_m() -> None:
    if _shared_real() is None:
        pytest.skip("../shared/reference/real not found: KITTI's frame is not here")
    preset = load_preset("HDL-64E")
    rows = laser_echoes(preset, realism_statistics(real_grids()["HDL-64E"])["horizon_lasers"])
    read = {round(r[1]): r for r in rows if r[4] is not None}
    assert min(read) < 30 and max(read) > 54  # six lasers answering at 28-55 m
    slope = echo_slope(rows)
    assert slope is not None and -1.0 < slope < 0.0  # KITTI: -0.29; 1 / R^2 alone is -2
    far = read[max(read)]
    assert far[4] > 1.8 and far[5] > 1.2  # its 54.8 m laser: ~1.9x the threshold, at least 1.2x
    assert far[6] < 0.4  # the model's flat road there, its plane's 1.84 m down


def test_nebulas_vls128_road_answers_where_the_models_road_echo_is_a_quarter_of_the_threshold() -> None:
    # a second sensor, a calibrated Velodyne without zeros: only the return rate reads its echo
    frames = [f for f in vendored_frames() if f.preset == "VLS-128"]
    if not frames:
        pytest.skip("tests/data/real/VLS-128 not found")
    grid = read_frame(frames[0])
    st = realism_statistics(grid)
    rows = laser_echoes(load_preset("VLS-128"), st["horizon_lasers"], st["sensor_height_m"])
    far = [r for r in rows if r[1] > 70.0]
    assert len(far) >= 5
    for _ring, _where, p, zeros, from_zeros, at_least, model in far:
        assert p > 0.6 and zeros < 0.05 and from_zeros is None
        assert at_least > 1.0  # returning 0.65-0.89 of the time asks at least the threshold ...
        assert model < 0.32  # ... where the model's flat road echoes 0.16-0.29 of it


@pytest.mark.parametrize("level", LEVELS)
def test_the_joint_reading_reads_back_a_known_mean_and_spread(level: float) -> None:
    preset = at_level(load_preset("HDL-64E"), level)
    for echo in (1.3, level):
        p0, z0 = spread_rates(preset, echo, 0.0)  # no spread: the receiver's own noise
        assert float(p0) == pytest.approx(return_rate(preset, echo), abs=1e-6)
        assert float(z0) == pytest.approx(zero_share(preset, echo), abs=1e-6)
    # echoes about the level (its zeros in the echo's body), spread enough to miss the threshold at times
    for share, spread in ((0.75, 0.6), (1.0, 0.7), (0.8, 0.8)):
        echo = share * level
        p, z = (float(v) for v in spread_rates(preset, echo, spread))
        assert ZERO_SHARE_BODY[0] < z < ZERO_SHARE_BODY[1]
        e = echo_and_spread(preset, p, z)
        assert e.reading == "joint"
        assert e.mean == pytest.approx(echo, rel=0.01) and e.spread == pytest.approx(spread, abs=0.01)
    # the zeros alone, read without a spread, miss it: over 20 % for a spread echo under the level
    p, z = (float(v) for v in spread_rates(preset, 0.75 * level, 0.6))
    assert abs(echo_for_zero_share(preset, z) / (0.75 * level) - 1.0) > 0.2
    # a return rate near 1 only bounds the spread; the mean lies between the zeros' means at 0 and the bound
    for share, spread in ((0.9, 0.2), (1.0, 0.1)):
        echo = share * level
        p, z = (float(v) for v in spread_rates(preset, echo, spread))
        assert p > 0.98
        e = echo_and_spread(preset, p, z)
        assert e.reading == "spread at most" and e.spread is not None and spread < e.spread < 0.7
        assert e.high is not None and e.low <= echo <= e.high <= READ_SPAN * e.low
    # zeros the share no longer reads: the rate alone, a lower bound; all zeros bound it by the level
    e = echo_and_spread(preset, 0.5, 0.0)
    assert e.reading == "rate only" and e.spread is None and e.high is None
    assert e.mean == pytest.approx(echo_for_return_rate(preset, 0.5), rel=1e-6)
    e = echo_and_spread(preset, 0.5, 1.0)
    assert e.reading == "rate only" and e.mean == pytest.approx(echo_for_return_rate(preset, 0.5), rel=1e-6)
    assert e.high is not None and level - 0.6 < e.high < level  # every detection under the level


def _street_lasers(level: float, monkeypatch: pytest.MonkeyPatch) -> list[list[object]]:
    """The simulated street's first scan's road lasers with the HDL-64E reporting 0 under ``level``."""
    with monkeypatch.context() as m:
        m.setattr(realism_experiment, "load_preset", lambda name: at_level(load_preset(name), level))
        grid = simulated_grids("HDL-64E", frames=1)[0]
    return realism_statistics(grid)["horizon_lasers"]


def test_the_joint_reading_recovers_the_simulated_roads_echo_where_the_zeros_alone_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # change 52's second amendment, change 70: on the model's own scan, whose road echo spreads (change
    # 46's patches), P and the zeros read together give each laser's echo (the model's flat road x the
    # laser's gain) within 13 % where its zeros lie in the echo's body, at whatever level the S2 reports 0;
    # the lasers those levels read together give the fall over range, which the zeros alone read flat
    preset = load_preset("HDL-64E")
    gains = ring_gains(preset)
    assert gains is not None  # the shipped unit's lasers differ (change 42)
    shipped = preset.output.weak_zero_snr
    pooled: dict[int, list[object]] = {}
    tails = 0
    for level in sorted({2.1, shipped}):
        lasers = _street_lasers(level, monkeypatch)
        reach = road_reach(lasers)
        # rays that meet cars and kerbs, not the road: 0.96 before change 55, 0.984 with its brighter
        # cabins, 0.989 with change 57 (the road at 10-15 m keeps its whole echo); no level moves it
        assert reach is not None and 0.8 < reach < 0.995
        rows = laser_echo_spreads(at_level(preset, level), lasers)
        read = read_lasers(rows)
        assert read, level  # at 2.1 rings 46/47/49 (27-38 m), at 3.3 ring 48 (33.5 m, gain 1.55)
        for r in read:
            # within 15 % (was 13 %): one scan's draws move a laser's reading by about that much. The rooms
            # behind building windows at 0.5 (change 76) shift the scan's noise draws, and the same road
            # reads ring 46 1.004x -> 1.138x, ring 47 1.12x -> 0.994x at 2.1; with the rooms at 0.08 seed
            # 5 read ring 46 1.132x, seed 2 1.093x (the rooms at 0.5: 0.970x, 1.023x)
            assert r[5] == pytest.approx(r[10] * gains[r[0]], rel=0.15), (level, r)
            assert r[8] is not None and 0.15 < r[8] <= SPREAD_MAX  # a spread is seen (the texture: 0.2-0.25)
            pooled.setdefault(r[0], r)
        # lasers whose zeros read the echo's tail (every detection but a few under the level) are left out:
        # read anyway they miss by more (at 3.3 rings 46/47, echo ~2.4, zeros 0.93-0.99: 0.52-0.83x)
        for r in rows:
            joint = r[9] == "joint" and r[1] <= 60.0 and r[4] > ZERO_SHARE_BODY[1]
            if joint and abs(r[5] / (r[10] * gains[r[0]]) - 1.0) > 0.13:
                tails += 1
        if level == 2.1:
            alone_slope = echo_slope(laser_echoes(at_level(preset, level), lasers))
    if shipped >= 3.0:
        assert tails >= 1
    assert len(pooled) >= 3
    rows = sorted(pooled.values(), key=lambda r: r[1])
    x = np.log([r[1] for r in rows])
    truth = np.log([r[10] * gains[r[0]] for r in rows])
    true_slope = float(np.polyfit(x, truth, 1)[0])
    joint = float(np.polyfit(x, np.log([r[5] for r in rows]), 1)[0])
    # -1.79 against -1.70 (27-38 m) with the rooms at 0.08; -2.00 against -1.69 at 0.5 (change 76), ring 46
    # read 1.138x above (the draws, see there): within 0.35 (was 0.3); the zeros alone miss by over 1.0
    assert joint == pytest.approx(true_slope, abs=0.35), (joint, true_slope)
    assert alone_slope is not None and alone_slope > true_slope + 1.0  # the zeros alone at 2.1: -0.32


@pytest.mark.parametrize("level", LEVELS)
def test_kittis_far_road_echo_read_jointly_stays_just_under_the_level(level: float) -> None:
    # with P near 1 its far lasers' echo cannot spread much, so their zeros (0.74-0.79) read their mean:
    # 0.8-0.95 of the level at 47-55 m (1.8-2.0 thresholds at 2.1, 2.6-3.2 at 3.3), 3x and more the model's
    # flat road, with a log spread of at most ~0.2 (2.1) to ~0.45 (4.2); their fall over 34-55 m does not
    # depend on the level (change 70)
    if _shared_real() is None:
        pytest.skip("../shared/reference/real not found: KITTI's frame is not here")
    preset = at_level(load_preset("HDL-64E"), level)
    lasers = realism_statistics(real_grids()["HDL-64E"])["horizon_lasers"]
    rows = laser_echo_spreads(preset, lasers)
    far = [r for r in rows if 45.0 < r[1] < 60.0]
    assert len(far) == 2
    for _ring, _where, p, _on_road, zeros, mean, low, high, spread, reading, model in far:
        assert reading == "spread at most" and spread is not None and spread < 0.15 * level
        assert 0.75 * level < low <= mean <= high < level and mean > 2.9 * model
        raw = echo_and_spread(preset, p, zeros)  # P as measured, no reach taken out: still over 0.7x
        assert raw.mean > 0.7 * level and raw.spread is not None and raw.spread < 0.2 * level
    if level > 3.3:  # its 34 and 55 m lasers' spread bound widens past READ_SPAN: 38 and 47.5 m left
        assert len(read_lasers(rows)) >= 2
        return
    assert len(read_lasers(rows)) >= 3
    slope = spread_echo_slope(rows)
    assert slope is not None and -0.5 < slope < -0.2  # -0.34 over 34-55 m at 2.1 and 3.3; the model: R^-3.6


@pytest.mark.parametrize("name", PRESETS)
def test_the_datasheet_figures_fix_the_receivers_range_terms_where_they_are_quoted(name: str) -> None:
    # change 56: a white target's echo over the threshold times every range-only receiver term (the range
    # law, the lens's focus, clear air) is 1 / 0.10 at the 10 % range and 1 / 0.80 at the 80 % range: the
    # datasheet fixes the receiver's gain there, so a time-programmed gain or threshold that keeps the
    # figures cannot lift what any surface returns at those ranges
    preset = load_preset(name)
    r10, r80 = preset.range.range_10pct_m, preset.range.range_80pct_m
    assert r10 is not None
    ranges, targets = [r10], [0.10]
    if r80 is not None:
        ranges, targets = [r10, r80], [0.10, 0.80]
    t = road_echo_terms(preset, road_material(preset), np.array(ranges))
    white = t["inverse_square"] * t["range_law"] * t["focus"] * t["atmosphere"]
    np.testing.assert_allclose(white * np.array(targets), 1.0, rtol=2e-4)


def test_kittis_road_at_the_10pct_range_asks_a_gain_no_range_only_receiver_term_gives() -> None:
    # change 56: the HDL-64E's road at 50 m is 0.50 of the threshold whatever the receiver does with range
    # (asphalt's S 0.092 over the 10 % target, the broadening's peak 0.54); KITTI's lasers answering at
    # 45-55 m read 2.2-4.2x the model's road there (twelve open-road frames in camera 2's view), where the
    # model's own scan, read back the same way, reads ~1.4 on a laser whose gain is 0.93
    preset = load_preset("HDL-64E")
    t = road_echo_terms(preset, road_material(preset), np.array([50.0]))
    pinned = t["reflectance"][0] * t["broadening"][0] / 0.10
    assert t["echo_over_threshold"][0] == pytest.approx(pinned, rel=2e-3)
    assert 0.45 < t["echo_over_threshold"][0] < 0.55
    gains = ring_gains(preset)
    assert gains is not None
    lasers = realism_statistics(simulated_grids("HDL-64E", frames=1)[0])["horizon_lasers"]
    rows = laser_echo_spreads(preset, lasers)
    sim = gain_asked_at_r10(preset, rows)
    near_r10 = [gains[r[0]] for r in rows if 45.0 <= r[1] <= 55.0]
    assert sim is not None and near_r10
    assert 0.6 < sim / float(np.median(near_r10)) < 1.6 and sim < 1.6
    vendored = Path(__file__).parent.parent / "data" / "real" / "HDL-64E" / "kitti_testing_000005.bin"
    grid = parse_real_option(f"HDL-64E={vendored}").grid  # a full turn (no calib.txt beside it)
    assert grid is not None
    st = realism_statistics(grid)
    real = gain_asked_at_r10(preset, laser_echo_spreads(preset, st["horizon_lasers"], st["sensor_height_m"]))
    assert real is not None and real > 3.0  # 3.76 at the level 2.1, 5.97 at 3.3 (change 70)
    if _shared_real() is not None:
        st = realism_statistics(real_grids()["HDL-64E"])
        rows = laser_echo_spreads(preset, st["horizon_lasers"], st["sensor_height_m"])
        kitti = gain_asked_at_r10(preset, rows)
        assert kitti is not None and kitti > 3.5  # its 47.5 and 54.8 m lasers: 4.19 at 2.1, 6.45 at 3.3


def test_each_laser_meets_the_road_from_its_own_beam_origin() -> None:
    """A laser of an S2.1 unit fires from 0.19-0.21 m (upper block) or 0.10-0.12 m (lower) above the
    sensor's origin: its road lies ``(h + u) / sin(d)`` away, met at incidence cosine ``sin(d)``, where the
    grid's range of that point (from the sensor's origin) is shorter and steeper-looking. The model's echo
    of each laser is read there, not at the grid's range with the sensor's height."""
    import warnings

    from rt_lidar.validation.road_echo_terms import laser_road

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s21 = load_preset(str(Path(__file__).resolve().parents[1] / "data" / "vendor" / S21_FILE))
    origins = s21.beam_origins_m
    assert origins is not None
    road = road_material(s21)
    h = 1.78
    rows, want = [], {}
    for ring in range(64):
        beam, up = s21.beams[ring], float(origins[ring][2])
        d = -np.radians(beam.elevation_deg)
        if not 0.02 < d < 0.08:
            continue
        r_laser = (h + up) / np.sin(d)
        across = r_laser * np.cos(d)
        where = float(np.hypot(across, h))  # the point's range from the sensor's origin
        if not 25.0 <= where <= 90.0:  # ECHO_RANGE_M
            continue
        rows.append([ring, float(beam.elevation_deg), where, 0.5, 500, where, None])
        want[ring] = road_echo_terms(s21, road, np.array([r_laser]), h + up)["echo_over_threshold"][0]
        got_r, got_h = laser_road(s21, ring, where, h)
        assert got_r == pytest.approx(r_laser, rel=1e-9) and got_h == pytest.approx(h + up, rel=1e-12)
    got = laser_echoes(s21, rows, h)
    assert len(got) >= 4 and len(got) == len(rows)
    off = []
    for ring, _where, _p, _z, _from_zeros, _at_least, model in got:
        assert model == pytest.approx(want[ring], rel=2e-3)  # rounded to 3 decimals
        # the sensor's origin's height and the grid's range would read another echo (the old reading)
        row = next(r for r in rows if r[0] == ring)
        at_origin = road_echo_terms(s21, road, np.array([row[5]]), h)["echo_over_threshold"][0]
        off.append(abs(at_origin / want[ring] - 1.0))
    assert min(off) > 0.01 and max(off) > 0.05, off
    # a laser at the origin (the shipped HDL-64E, every offset 0) reads at the grid's range, as before
    shipped = load_preset("HDL-64E")
    assert shipped.beam_origins_m is None or not np.any(shipped.beam_origins_m)
    assert laser_road(shipped, 40, 45.0, h) == (45.0, h) and laser_road(shipped, 40, 1.0, h) == (h, h)


def test_the_joint_slope_reads_only_lasers_in_their_bodys_zeros_spanning_a_range() -> None:
    # change 70: a laser counts where its joint mean is fixed and its zeros lie in the echo's body; the
    # slope needs three such lasers spanning x1.3 in range (over the street's 27-34 m at 3.3, x1.22, a tenth
    # off one laser's mean moves it by ~0.5)
    def row(where: float, mean: float, zeros: float = 0.5) -> list[object]:
        return [0, where, 0.9, 0.9, zeros, mean, mean, mean, 0.3, "joint", 1.0]

    falling = [row(34.0, 2.0), row(40.0, 2.0 * (34 / 40) ** 2), row(50.0, 2.0 * (34 / 50) ** 2)]
    assert spread_echo_slope(falling) == pytest.approx(-2.0, abs=1e-3)
    assert spread_echo_slope([row(27.5, 2.4), row(30.0, 2.4), row(33.5, 3.1)]) is None  # x1.22
    tail = [*falling[:2], row(50.0, 9.0, zeros=0.95)]  # its zeros in the tail: left out, two remain
    assert len(read_lasers(tail)) == 2 and spread_echo_slope(tail) is None
