"""Issue 40's physics: rough-road backscatter, ground texture and the measured intensity chain, each held to
the realism statistic it was made for (it moves the right way) and to determinism."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.errors import ConfigError
from rt_lidar.kernels.texture import texture_factor
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.intensity_chain import measured_amplitude, reported_intensity
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.pulse_spread import peak_factor
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.points import PointFlag
from rt_lidar.sensor.hapke import monostatic_reflectance, single_scattering_albedo
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import wall_scene
from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_experiment import simulated_grids


@pytest.fixture(scope="module")
def hdl64() -> list[dict]:
    return [realism_statistics(g) for g in simulated_grids("HDL-64E")]


def test_asphalt_keeps_its_backscatter_at_grazing_incidence() -> None:
    table = load_material_table()
    m = table.arrays(["asphalt", "interior"], 905.0)  # render is rough too (change 32)
    rho = table.reflectance("asphalt", 905.0)
    assert m.hemispherical()[0] == pytest.approx(rho)  # sunlight and wet roads keep the albedo
    echo = EchoModel(load_preset("HDL-64E"), m)
    cos = np.array([1.0, 0.35, 0.07, 0.027], np.float32)  # 1.75 m up: normal, 5 m, 25 m, 64 m
    _, s = echo.power(np.full(4, 10.0, np.float32), cos, np.zeros(4, np.int16), np.ones(4, np.float32))
    # Hapke's monostatic reflectance of a rough particulate surface (rt_lidar.sensor.hapke), within the
    # two-lobe fit's error at the incidences a road presents
    b0 = table.materials["asphalt"]["opposition_b0"]
    hapke = monostatic_reflectance(cos[1:].astype(np.float64), single_scattering_albedo(rho), b0)
    assert s[1:] == pytest.approx(hapke, rel=0.05)
    assert s[2] / s[1] > 0.7  # Lambertian: 0.07 / 0.35 = 0.2
    assert s[3] > 0.25 * rho  # single scattering (w / 8) H^2 ~ 0.3 rho with B0 = 0; Lambertian: 0.027 rho
    _, smooth = echo.power(np.full(4, 10.0, np.float32), cos, np.ones(4, np.int16), np.ones(4, np.float32))
    assert smooth[2] / smooth[1] == pytest.approx(0.2, rel=1e-5)  # smooth materials stay Lambertian


def test_a_material_cannot_have_both_lobes(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "sensor_presets" / "materials.toml"
    text = src.read_text().replace("opposition_b0 = 0.5\n", "opposition_b0 = 0.5\nretro_gain = 1.0\n", 1)
    bad = tmp_path / "m.toml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match="rough-surface backscatter and retro_gain"):
        load_material_table(bad)
    both = src.read_text().replace(
        "opposition_b0 = 0.5\n", "opposition_b0 = 0.5\nbackscatter_fraction = 0.2\n", 1
    )
    bad.write_text(both)
    with pytest.raises(ConfigError, match="backscatter_fraction and opposition_b0"):
        load_material_table(bad)


def test_texture_is_fixed_in_the_world_and_has_its_spread() -> None:
    rng = np.random.default_rng(0)
    pts = rng.uniform(-50, 50, (20_000, 3))
    seed = np.full(len(pts), 7, np.uint64)
    cell = np.full(len(pts), 0.1)
    sigma = np.full(len(pts), 0.12, np.float32)
    f = texture_factor(pts, seed, cell, sigma)
    assert f.dtype == np.float32
    assert np.array_equal(f, texture_factor(pts.copy(), seed, cell, sigma))  # same spot, same factor
    assert float(np.mean(f)) == pytest.approx(1.0, abs=0.01)
    assert float(np.std(np.log(f))) == pytest.approx(0.12, rel=0.05)
    other = texture_factor(pts, seed + np.uint64(1), cell, sigma)
    assert abs(float(np.corrcoef(np.log(f), np.log(other))[0, 1])) < 0.05  # another material, another pattern
    nudged = texture_factor(pts + 1e-3, seed, cell, sigma)
    assert 0.95 < (nudged == f).mean() < 1.0  # a cube reads one value; a step of 1 mm leaves 3 % of them
    road = np.c_[pts[:, :2], np.zeros(len(pts))]  # a flat road at z = 0 lies mid-cube, not on a face
    assert np.array_equal(
        texture_factor(road, seed, cell, sigma), texture_factor(road - [0, 0, 1e-9], seed, cell, sigma)
    )


def test_the_road_of_the_demo_street_looks_real_on_an_hdl64e(hdl64: list[dict]) -> None:
    falloff = np.mean([s["ground_falloff_20_30_over_0_10"] for s in hdl64])
    horizon = np.mean([s["ground_horizon_m"] for s in hdl64])
    texture = np.mean([s["ground_texture_share"] for s in hdl64])
    zeros = np.mean([s["zero_share_beyond_40m"] for s in hdl64])
    # real: 0.45-0.76 on calibrated Velodynes, 0.83 on KITTI's own frame; before issue 40: 0.22
    assert 0.45 <= falloff <= 0.76
    # Hapke's road, the two-figure receiver and the echo's broadening on the grazing road, thresholded
    # after the S2's filter matched to its pulse (change 20): ~43; before: 23, 37, 50 without broadening,
    # 39 with it on the optical peak (real: KITTI's road answers to ~55 m: docs/realism.md's residuals);
    # the ~43 was the ground's concrete behind the start of the drive: on asphalt all round (change 35)
    # the whole turn reads what the road ahead reads, its ring at 37.5 m (the next, 42.8 m, returns
    # under half the time); with change 42's shipped unit (unit seed 1, spread 0.38) the laser of that
    # next ring has a gain above 1 and it answers: 42.8 (every laser alike: 37.5)
    assert 36.0 < horizon < 46.0
    returned = np.mean([s["ground_horizon_returned_m"] for s in hdl64])
    assert returned == pytest.approx(horizon, rel=0.03)  # the demo street's road is flat
    # asphalt's texture in 3 cm cells (change 21): ~0.51 at calibrated reflectivity's step; before:
    # 0.004, then 0.22 in 10 cm cells that neighbours 1-2 cm apart along a ring shared; the S2's byte in
    # KITTI's hundredths (change 36): ~0.65 (KITTI's frame 0.70)
    assert 0.55 <= texture <= 0.80
    assert 0.4 <= zeros <= 0.75  # the S2's zeros beyond 40 m (KITTI's frame: 0.70); before: none
    again = [realism_statistics(g) for g in simulated_grids("HDL-64E")]
    assert again == hdl64  # deterministic


def test_intensity_is_measured_with_the_detections_noise() -> None:
    scene = wall_scene(20.0, "building_plaster", width_m=30.0, height_m=20.0, ground=False)

    def wall(noisy: bool) -> np.ndarray:
        cfg = PhysicsConfig(range_noise=False, receiver_noise=noisy)
        pts = build_pipeline("VLP-16", scene, seed=1, physics=cfg).pipeline.scans(1)[0].points
        return pts[np.abs(pts["x"] - 20.0) < 0.5]

    ideal, noisy = wall(False), wall(True)
    assert np.array_equal(noisy["intensity"], np.round(noisy["intensity"]))  # 8-bit steps
    key = lambda p: p["t"].astype(np.int64) * 64 + p["ring"]  # noqa: E731
    _, i_n, i_i = np.intersect1d(key(noisy), key(ideal), return_indices=True)
    ratio = noisy["reflectivity"][i_n] / ideal["reflectivity"][i_i]
    assert abs(float(np.mean(ratio)) - 1.0) < 0.01  # unbiased
    assert float(np.std(ratio)) > 1e-3  # a plastered wall no longer reads one flat value


def test_weak_returns_saturation_and_spad_compression() -> None:
    p = load_preset("OS1-64")
    thr = p.pulse.detection_threshold_w
    amp = np.array([thr, 10 * thr, 1e3 * thr, 1e6 * thr, 1e9 * thr])
    counts = reported_intensity(p, amp, np.ones(5, np.float32), np.full(5, 30.0))
    assert np.all(np.diff(counts) >= 0) and counts.max() <= p.output.saturation_counts  # no 65,535 clip
    near = reported_intensity(p, amp, np.ones(5, np.float32), np.full(5, 3.0))
    assert np.all(near <= counts)  # the near field's overlap
    assert measured_amplitude(p, np.array([0.5 * thr]), np.array([thr]), np.array([-3.0]))[0] == thr
    s2 = load_preset("HDL-64E")
    level = s2.output.weak_zero_snr  # 3.3 thresholds, fitted to KITTI's zeros beyond 40 m (change 70)
    weak = reported_intensity(
        s2, np.array([0.85, 1.25]) * level * s2.pulse.detection_threshold_w, np.full(2, 0.2), np.full(2, 50.0)
    )
    assert weak[0] == 0 and weak[1] == round(0.2 * (s2.output.raw_gain or 0))  # the S2's byte (change 36)
    vls = load_preset("VLS-128")
    faint = reported_intensity(
        vls, np.array([1.5 * vls.pulse.detection_threshold_w]), np.full(1, 1e-3), np.full(1, 90.0)
    )
    assert faint[0] == 1  # a calibrated Velodyne never reports a return as 0
    v = dataclasses.replace(s2, output=dataclasses.replace(s2.output, weak_zero_snr=0.0))
    assert reported_intensity(v, np.array([2.0]) * thr, np.full(1, 0.2), np.full(1, 50.0))[0] == weak[1]


def test_saturated_is_set_on_retro_reflectors() -> None:
    pts = build_pipeline("VLP-16", "street", seed=1).pipeline.scans(1)[0].points
    sat = (pts["flags"] & int(PointFlag.SATURATED)) != 0
    assert sat.any()
    sheeting = pts["reflectivity"] > 50.0  # plates and signs
    assert sheeting.any() and np.all(sat[sheeting])
    # the diffuse surfaces that saturate are those within a few metres (a parked car beside the sensor)
    r = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2)
    assert np.all(r[sat & (pts["reflectivity"] <= 1.0)] < 5.0)


def test_legacy_packets_of_firmware_2_0_carry_signal_times_range_squared() -> None:
    from rt_lidar.sinks.ouster import OusterPacketizer, legacy_reflectivity_is_signal_r2, metadata_for

    preset = load_preset("OS1-64")
    meta = metadata_for(preset, None, "LEGACY")
    assert legacy_reflectivity_is_signal_r2(meta)  # our metadata says firmware v2.0.0
    pz = OusterPacketizer(preset, meta)
    img = pz.image(build_pipeline("OS1-64", "street", seed=1).pipeline.scans(1)[0])
    got = img["range"] > 0
    r_m = img["range"][got] / 1000.0
    want = np.clip(np.round(img["signal"][got] * r_m * r_m), 0, 65535)
    assert np.abs(img["reflectivity"][got] - want).max() <= 1 + 0.002 * want.max()  # range rounded to mm
    newer = dict(meta, sensor_info=dict(meta["sensor_info"], build_rev="v2.1.0"))
    assert not legacy_reflectivity_is_signal_r2(newer)  # 2.1+: calibrated reflectivity


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [("HDL-32E", 35.1, 42.9), ("VLP-32C", 67.0, 120.0), ("VLS-128", 48.6, 59.4), ("OS1-64", 44.0, 55.0)],
)
def test_the_road_horizon_follows_from_the_broadened_echo_and_the_receivers(
    name: str, low: float, high: float
) -> None:
    # HDL-32E: real ~39 m (its next ring meets the road at 77 m, where the broadened echo keeps 0.14 of
    # its peak; 77 m without broadening); VLP-32C: real >= 67 m (77 m); VLS-128: real ~54 m (56 m, its
    # 10 % range a fit to it); OS1-64: real ~50 m, 45 m (its ring there; 27 m under the datasheet's
    # 100 klx threshold): the demo street is at night, where its photon-counting receiver's threshold
    # is 6.7x lower (docs/realism.md changes 14 and 67). All four within the real figure's tolerance.
    horizon = np.mean([realism_statistics(g)["ground_horizon_m"] for g in simulated_grids(name)])
    assert low <= horizon <= high


@pytest.mark.parametrize(("name", "low", "high"), [("HDL-32E", 0.42, 0.58), ("VLS-128", 0.37, 0.47)])
def test_the_road_has_the_texture_of_real_roads(name: str, low: float, high: float) -> None:
    # real calibrated Velodynes: 0.42-0.43 (nuScenes' HDL-32E, Argoverse 2's VLP-32C, nebula's VLS-128);
    # asphalt's 3 cm cells of spread 0.10 at each ray's centre gave 0.47-0.49 (changes 21 and 41; 0.22
    # and 0.33 before them); averaged over each pulse's footprint with 1 m patches (change 46): 0.51
    # (the HDL-32E at nuScenes' 20 Hz; 0.35 at 10 Hz, its neighbouring shots twice as close) and 0.43
    texture = np.mean([realism_statistics(g)["ground_texture_share"] for g in simulated_grids(name, 1)])
    assert low <= texture <= high


def test_the_hdl_32e_turns_at_its_real_frame_s_rate() -> None:
    # the texture compares neighbouring shots: nuScenes' frame holds 1084 firings a turn (20 Hz), the
    # preset's default 10 Hz 2170 (docs/realism.md change 46)
    from rt_lidar.validation.real_frames import read_frame
    from rt_lidar.validation.realism_experiment import real_frames

    (frame,) = [f for f in real_frames() if f.preset == "HDL-32E"]
    real_columns = read_frame(frame).range_m.shape[1]
    (grid,) = simulated_grids("HDL-32E", 1)
    assert load_preset("HDL-32E").scan.rotation_hz == 10.0  # the preset itself keeps its default
    assert grid.range_m.shape[1] == pytest.approx(real_columns, rel=0.02)


def test_the_hdl64es_matched_filter_keeps_more_of_the_grazing_road() -> None:
    # the same road echo thresholded after a filter matched to the pulse (change 20) keeps more of its
    # peak where the footprint is deep (far road), and all of it square on
    p = load_preset("HDL-64E")
    assert p.pulse.receiver_response_ns == pytest.approx(p.pulse.width_ns)
    plain = dataclasses.replace(p, pulse=dataclasses.replace(p.pulse, receiver_response_ns=0.0))
    ranges = np.array([10.0, 25.0, 50.0, 61.0])
    cos = (1.8 / ranges).astype(np.float32)
    filt, opt = peak_factor(p, ranges, cos), peak_factor(plain, ranges, cos)
    assert np.all(filt >= opt) and filt[2] / opt[2] > 1.3 and filt[0] / opt[0] < 1.02
    assert peak_factor(p, np.array([50.0]), np.array([1.0]))[0] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("name", "falloff", "near"),
    [
        ("HDL-32E", (0.45, 0.76), (5.0, 14.0)),
        ("VLP-32C", (0.45, 0.76), (5.0, 14.0)),
        ("VLS-128", (0.45, 0.76), (5.0, 14.0)),
        # ~0.26 (validate's band 0.21-0.31), inside it with margin since change 67's fit of the near-field
        # factor (0.262 over seeds 1-3; 0.210 before, at the band's edge): its 20-30 m band's few rings
        # cross the road on a few dozen 1 m patches (change 46), so a seed's median moves by ~0.01
        ("OS1-64", (0.235, 0.29), (180.0, 240.0)),
        # the same OS1 receiver's near field (change 72: 14 m, the OS1-64's; 12 m read 0.192, under the
        # OS1-64's band) with its near road kept at ~209 counts: 0.235 over seeds 1-3 (0.226-0.244), lower
        # than the OS1-64's as its rings reach the road nearer (from 4.7 m; the OS1-64's from 6.0 m); no
        # OS1-128 signal frame is public, so the band is the OS1-64's
        ("OS1-128", (0.21, 0.29), (180.0, 240.0)),
    ],
)
def test_the_road_fades_as_real_roads_do(name: str, falloff: tuple, near: tuple) -> None:
    # real: fall-off 0.45-0.76 and the near road at 5-14 on calibrated Velodynes, ~0.26 on an OS1-64's
    # signal (its near road ~210 counts); with B0 = 0.5 before the echo's broadening: 0.78-0.85 and 16-17
    stats = [realism_statistics(g) for g in simulated_grids(name)]
    f = np.mean([s["ground_falloff_20_30_over_0_10"] for s in stats])
    level = np.mean([s["ground_intensity_by_band"][0] for s in stats])
    assert falloff[0] <= f <= falloff[1]
    assert near[0] <= level <= near[1]


def _asphalt_echo_over_threshold(
    tmp_path: Path, b0: float, range_m: np.ndarray, cos: np.ndarray
) -> np.ndarray:
    """The HDL-64E's mean echo off asphalt of opposition amplitude ``b0`` (peak through its matched
    filter, footprint's depth included) over its detection threshold: above 1 an echo is detected more
    often than not."""
    src = Path(__file__).resolve().parents[2] / "sensor_presets" / "materials.toml"
    text = src.read_text()
    assert "opposition_b0 = 0.0\n" in text  # asphalt's
    path = tmp_path / f"b0_{b0}.toml"
    path.write_text(text.replace("opposition_b0 = 0.0\n", f"opposition_b0 = {b0}\n", 1))
    preset = load_preset("HDL-64E")
    echo = EchoModel(preset, load_material_table(path).arrays(["asphalt"], 905.0))
    n = range_m.size
    power, _ = echo.power(
        range_m.astype(np.float32), cos.astype(np.float32), np.zeros(n, np.int16), np.ones(n, np.float32)
    )
    power = power * peak_factor(preset, range_m, cos)
    return np.asarray(power / preset.pulse.detection_threshold_w, np.float64)


def test_no_asphalt_of_hapkes_range_answers_where_kittis_road_does(tmp_path: Path) -> None:
    # KITTI's frame 000008: the ring aimed at its plane 67 m out answers from the road 54.7 m away, 87 %
    # of its unblocked rays, meeting it ~1.9 deg from grazing (1.56 deg down, the road rising 0.3 deg).
    # The simulated road ahead (KITTI's camera view) answers to 37.6 m (docs/realism.md, change 31).
    kitti, ours = 54.7, 38.0
    r = np.array([kitti, ours])
    cos = np.sin(np.radians([1.9, np.degrees(np.arctan(1.8 / ours))]))
    dark = _asphalt_echo_over_threshold(tmp_path, 0.0, r, cos)
    surge = _asphalt_echo_over_threshold(tmp_path, 1.0, r, cos)
    assert dark[1] > 1.0  # the table's asphalt (B0 = 0) answers at the simulated view's horizon
    assert 0.3 < dark[0] < 0.45  # ... and at KITTI's 54.7 m reaches a third of the threshold
    # Hapke's largest opposition surge doubles the grazing echo and still leaves KITTI's road below the
    # threshold: no rough diffuse asphalt makes the S2's datasheet receiver see it half the time there
    assert surge[0] == pytest.approx(1.92 * dark[0], rel=0.05)
    assert surge[0] < 0.8
