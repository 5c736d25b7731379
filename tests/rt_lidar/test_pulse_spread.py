"""Pulse broadening on an oblique surface (rt_lidar/physics/pulse_spread.py): the single-ray echo's peak
against the footprint's spread in range, the dense sub-ray waveform it stands for, and the road it
shapes."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.kernels.waveform import single_echo_epw_ns, waveform_returns
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.pulse_spread import C_M_PER_NS, echo_width_ns, footprint_range_sigma_m, peak_factor
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.beam import BeamConfig, subray_pattern
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import Firings

HEIGHT_M = 1.8  # the demo street's lidar above its road


def _road(range_m: float) -> tuple[np.ndarray, np.ndarray]:
    r = np.array([range_m])
    return r, HEIGHT_M / r  # a flat road: cos(incidence) = sin(grazing) = h / R


def test_the_peak_falls_with_the_footprints_depth_and_is_whole_square_on() -> None:
    p = load_preset("HDL-64E")  # 2 mrad (1/e^2), 5 ns
    assert peak_factor(p, np.array([5.0, 60.0]), np.array([1.0, 1.0])) == pytest.approx([1.0, 1.0])
    assert peak_factor(p, np.array([np.inf]), np.array([0.0]))[0] == 0.0  # a miss has no echo
    # the road at 61 m: sigma_R = 61 m x 0.5 mrad x tan(88.3 deg) ~ 1.1 m against the pulse's 0.32 m
    r, c = _road(61.0)
    assert footprint_range_sigma_m(p, r, c)[0] == pytest.approx(1.03, rel=0.05)
    assert peak_factor(p, r, c, filtered=False)[0] == pytest.approx(0.30, abs=0.02)
    ranges = np.array([5.0, 15.0, 25.0, 40.0, 61.0])
    f = peak_factor(p, ranges, HEIGHT_M / ranges, filtered=False)
    assert np.all(np.diff(f) < 0) and f[0] > 0.99 and f[2] == pytest.approx(0.88, abs=0.02)
    # the echo keeps its energy: its width grows as its peak falls
    assert echo_width_ns(p, r, c)[0] * peak_factor(p, r, c, filtered=False)[0] == pytest.approx(
        p.pulse.width_ns
    )
    # the HDL-64E thresholds a filter matched to its pulse (pulse.receiver_response_ns = 5 ns): the
    # filtered echo keeps sqrt(2 s_p^2 / (2 s_p^2 + s_t^2)) of its peak, more than the optical peak does
    sp, st = 5.0 / 2.3548, 2.0 * footprint_range_sigma_m(p, r, c)[0] / C_M_PER_NS
    assert peak_factor(p, r, c)[0] == pytest.approx(np.sqrt(2 * sp**2 / (2 * sp**2 + st**2)), rel=1e-3)
    assert peak_factor(p, r, c)[0] == pytest.approx(0.40, abs=0.02)
    assert peak_factor(p, np.array([60.0]), np.array([1.0]))[0] == pytest.approx(1.0)  # square on: whole


def test_the_loss_is_the_sensors_own() -> None:
    r, c = _road(50.0)
    keep = {
        n: float(peak_factor(load_preset(n), r, c, filtered=False)[0])
        for n in ("VLS-128", "HDL-64E", "OS1-64")
    }
    # vertical divergence 1.5 / 2.0 / 3.9 mrad: the narrower the beam across the road, the more it keeps
    assert keep["VLS-128"] > keep["HDL-64E"] > keep["OS1-64"]
    vlp = load_preset("VLP-32C")  # 1.5 mrad as the VLS-128, but a 6 ns pulse: a longer pulse loses less
    assert float(peak_factor(vlp, r, c)[0]) > keep["VLS-128"]


def _dense_peak(preset_name: str, n_sub: int, range_m: float) -> float:
    """Peak of the sub-ray waveform of a pulse on the flat road, over the full-beam echo's."""
    p = load_preset(preset_name)
    pat = subray_pattern(p, n_sub)
    grazing = np.arcsin(HEIGHT_M / range_m) + pat.offsets_rad[:, 1]
    r = HEIGHT_M / np.sin(grazing)
    amp = (pat.weights.astype(np.float64) * (range_m / r) ** 2).astype(np.float32)
    ret = waveform_returns(
        (2.0 * r / C_M_PER_NS)[None, :], amp[None, :], p.pulse.width_ns, 1e-6, "strongest", 10.0
    )
    return float(ret.amp[0])


@pytest.mark.parametrize("name", ["HDL-64E", "OS1-64", "VLS-128"])
def test_dense_sub_rays_converge_on_the_single_rays_peak(name: str) -> None:
    p = load_preset(name)
    shallow = 0
    for range_m in (10.0, 25.0, 40.0):  # footprints up to ~1.5 pulse lengths deep: 19 sub-rays agree
        f = float(peak_factor(p, *_road(range_m), filtered=False)[0])  # the optical echo's peak
        if f < 0.55:
            continue
        shallow += 1
        assert _dense_peak(name, 19, range_m) == pytest.approx(f, rel=0.1)
        assert _dense_peak(name, 61, range_m) == pytest.approx(f, rel=0.08)
    assert shallow >= 2
    # deeper footprints: a few sub-rays are a few separate echoes, each taller than the smooth sum;
    # denser bundles close in on the analytic peak
    far = float(peak_factor(p, *_road(60.0), filtered=False)[0])
    errs = [_dense_peak(name, n, 60.0) - far for n in (19, 37, 61)]
    assert errs[0] > errs[1] > errs[2] > 0


def _road_hits(preset_name: str, ranges: np.ndarray, subrays: int) -> Hits:
    n = ranges.size
    el = -np.degrees(np.arcsin(HEIGHT_M / ranges))
    firings = Firings(
        ring=np.zeros(n // subrays, np.uint16),
        t_ns=np.arange(n // subrays, dtype=np.int64),
        azimuth_deg=np.zeros(n // subrays),
        elevation_deg=el[::subrays],
        column=np.arange(n // subrays, dtype=np.int64),
    )
    cos = (HEIGHT_M / ranges).astype(np.float32)
    dirs = np.stack([np.cos(np.radians(el)), np.zeros(n), np.sin(np.radians(el))], 1).astype(np.float32)
    return Hits(
        firings=firings,
        direction=dirs,
        range_m=ranges.astype(np.float32),
        cos_incidence=cos,
        material=np.zeros(n, np.int16),
        segment=np.ones(n, np.uint32),
        glass_range_m=np.full(n, np.inf, np.float32),
        glass_cos=np.zeros(n, np.float32),
        glass_material=np.full(n, -1, np.int16),
        glass_segment=np.zeros(n, np.uint32),
        glass_transmission=np.ones(n, np.float32),
        subrays=subrays,
    )


def test_single_rays_carry_the_loss_and_bundles_sample_it() -> None:
    p = load_preset("HDL-64E")
    table = load_material_table()
    model = EchoModel(p, table.arrays(["building_plaster"], p.optics.wavelength_nm))
    ranges = np.array([5.0, 25.0, 50.0, 61.0, 5.0, 25.0, 50.0, 61.0])
    single = model.object_echoes(_road_hits("HDL-64E", ranges, 1))[0]
    bundle = model.object_echoes(_road_hits("HDL-64E", ranges, 2))[0]  # two "sub-rays" a pulse
    f = peak_factor(p, ranges, HEIGHT_M / ranges)
    assert single == pytest.approx(bundle * f, rel=1e-5)
    # the HDL-64E thresholds its matched filter's output (pulse.receiver_response_ns): at 61 m the filtered
    # peak keeps sqrt(2 s_p^2 / (2 s_p^2 + s_t^2)) ~ 0.40 of the full-beam echo, the optical peak 0.30
    assert np.all(bundle >= single) and 0.35 < single[3] / bundle[3] < 0.45


def test_the_echo_pulse_width_of_a_single_ray_grows_on_the_grazing_road() -> None:
    p = load_preset("HDL-64E")
    physics = SensorPhysics.from_preset(
        p,
        ["asphalt"],
        config=PhysicsConfig(receiver_noise=False, range_noise=False, beam=BeamConfig(epw=True)),
    )
    ranges = np.array([8.0, 8.0, 30.0, 30.0])
    hits = _road_hits("HDL-64E", ranges, 1)
    hits.cos_incidence[[1, 3]] = 1.0  # the same ranges square on
    res = physics.apply(hits, np.random.default_rng(0))
    assert res.epw_ns is not None and len(res.epw_ns) == 4
    # each echo is as wide as a Gaussian of its height and of its broadened width: on the road at 30 m
    # wider by 1 / peak_factor than an echo of the same height square on; square on, the pulse's own
    off, thr = p.pulse.epw_offset_ns, p.pulse.detection_threshold_w
    plain = single_echo_epw_ns(res.power_w, thr, p.pulse.width_ns, off)
    f = peak_factor(p, ranges, hits.cos_incidence, filtered=False)  # the optical echo's width
    assert f[2] < 0.85
    assert (res.epw_ns - off) == pytest.approx((plain - off) / f, rel=1e-4)
    assert res.epw_ns[1] == pytest.approx(plain[1], rel=1e-5) and res.epw_ns[2] > 1.1 * plain[2]


def test_the_waveform_of_one_ray_reports_the_same_broadened_width() -> None:
    p = load_preset("HDL-64E")
    ranges = np.array([8.0, 8.0, 30.0, 30.0])
    out = {}
    for mode in ("strongest", "dual"):
        cfg = PhysicsConfig(
            receiver_noise=False, range_noise=False, beam=BeamConfig(epw=True, return_mode=mode)
        )
        physics = SensorPhysics.from_preset(p, ["asphalt"], config=cfg)
        hits = _road_hits("HDL-64E", ranges, 1)
        hits.cos_incidence[[1, 3]] = 1.0
        out[mode] = physics.apply(hits, np.random.default_rng(0))
    single, dual = out["strongest"], out["dual"]
    assert dual.epw_ns is not None and single.epw_ns is not None
    # the waveform path (one echo a pulse here) and the single-ray path: the same peaks and widths
    assert dual.power_w == pytest.approx(single.power_w, rel=1e-3)
    assert dual.epw_ns == pytest.approx(single.epw_ns, rel=0.02)
