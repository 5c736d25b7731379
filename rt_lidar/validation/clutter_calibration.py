"""Clutter against published measurements (issue 14, item 10): ``validate --only clutter_calibration``.

Each entry of :data:`PUBLISHED` is one figure from the literature: the source, how much of it we could
read (full text or abstract only), the sensor and condition, the figure, and the model quantity it is
compared with. :func:`clutter_calibration` computes those quantities with the project's weather model
on a VLP-16 (the seed's rain scene, a plaster wall, the 10 % datasheet target), states each residual,
and fits a free parameter only where a figure is quantitative and constrains one. Where no measured
number was reachable it says so (docs/clutter-calibration.md) instead of inventing one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.kernels.intensity import received_power
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.weather import (
    RHO_RAIN_DROP,
    WeatherConfig,
    receiver_geometry,
    weather_model,
)
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import SensorPreset, list_presets, load_preset
from rt_lidar.validation.detection import TARGET_SEGMENT, datasheet_physics, target_hits
from rt_lidar.validation.experiments import max_detection_range
from rt_lidar.validation.rain_drop_sizes import detected_drops_by_size
from rt_lidar.validation.scenes import rain_test_scene

__all__ = [
    "CLUTTER_CAL_CHECKS",
    "CLUTTER_CAL_EXPERIMENTS",
    "LINNHOFF_RAIN_P95_M",
    "LINNHOFF_RAIN_P_PER_MM_H",
    "LINNHOFF_RAIN_QUANTILES_M",
    "PUBLISHED",
    "clutter_calibration",
    "linnhoff_rain_points_per_beam",
    "open_sky_rain_rate",
    "open_sky_rain_ratios",
    "open_sky_snow_rate",
    "rain_clutter_expectation",
    "rain_extinction_scale_for",
    "rain_pulses_for",
]

PRESET = "VLP-16"
RAIN_RATES_MM_H = [5.0, 10.0, 25.0, 50.0]
SNOW_RATES_MM_H = [1.0, 5.0]
CLEAR_AIR = PhysicsConfig().extinction_per_m
WALL_RHO = 0.6  # a plaster-like wall (building_plaster is ~0.6 at 905 nm)
FAR_TARGET_M = 85.0  # the 10 % target near the VLP-16's 100 m datasheet range, where rain costs points
CLUTTER = int(PointFlag.RAIN_CLUTTER | PointFlag.FOG_CLUTTER | PointFlag.SNOW_CLUTTER)

LINNHOFF_SOURCE = (
    "Linnhoff et al.: Measuring the Influence of Environmental Conditions on Automotive Lidar Sensors. "
    "Sensors 22(14) 5266 (2022); their VLP-16 calibration as published in openMSL's "
    "sl-1-2-reflection-based-lidar-object-model (src/model/strategies/lidar-environmental-effects-"
    "strategy/profile_VLP16.hpp.in), 'calibrated ... based on measurements published by Linnhoff et al.'"
)
LINNHOFF_RAIN_P_PER_MM_H = 1.69e-4
"""Probability per beam and per mm/h that a VLP-16 beam reports a rain point (``rain_det_prob_factor``)."""
LINNHOFF_SNOW_P_PER_MM_H = 0.01569
"""Their ``snow_det_prob_factor``: snow points per VLP-16 beam per unit of snowfall rate (the unit is not
stated; read as mm/h water equivalent, the unit of their rain rate and of ours)."""
LINNHOFF_RAIN_LOGNORMAL = (1.362, 0.784)
"""(mu, sigma) of the lognormal range (m) of those rain points."""
LINNHOFF_RAIN_QUANTILES_M = tuple(
    round(math.exp(LINNHOFF_RAIN_LOGNORMAL[0] + z * LINNHOFF_RAIN_LOGNORMAL[1]), 2)
    for z in (-1.2816, 0.0, 1.2816)
)
"""10 / 50 / 90 % of their rain points' lognormal range: 1.43 / 3.90 / 10.7 m."""
LINNHOFF_RAIN_P95_M = round(math.exp(LINNHOFF_RAIN_LOGNORMAL[0] + 1.6449 * LINNHOFF_RAIN_LOGNORMAL[1]), 1)
"""95 % of their rain points lie within 14.2 m: what "near the sensor" means for a VLP-16 (the Hokuyo
note's qualitative figure, read as 10 m before change 44, which Linnhoff's own calibration fails)."""
LINNHOFF_RAIN_ALPHA_PER_MM_H = 7.677e-5
"""Rain extinction per metre and per mm/h (``rain_attenuation_factor`` 7.677 x 1e-5)."""
FIT_RAIN_MM_H = (1.0, 2.5, 5.0, 10.0, 15.0, 25.0)
"""Rain rates compared with Linnhoff et al.'s calibration (issue 40: 1-25 mm/h)."""
QUANTILES = (0.1, 0.5, 0.9)
RAIN_POINTS_PER_MEASUREMENT = 600
"""Open-sky beams per measured rate are enough for this many expected rain points at Linnhoff's rate
(Poisson error ~4 %): at 1 mm/h 3.6 million beams. With 100,000 beams (~17 points) one seed's HDL-64E
read 1.54x at 1 mm/h and ten seeds 0.65-1.72x (docs/realism.md change 61)."""

PUBLISHED: list[dict[str, Any]] = [
    {
        "id": "filgueira2017_range",
        "kind": "bound",
        "source": "Quantifying the influence of rain in LiDAR performance. Measurement (2017); "
        "commonly cited as Filgueira et al., vol. 95, 143-148",
        "access": "abstract only (journal and year seen, not the authors)",
        "sensor": "a lidar the abstract does not name (cited elsewhere as a VLP-16), rain",
        "figure": "range of surfaces in rain: 'variations are always lower than 20 cm'",
        "published": 0.20,
        "model_key": "wall_range_shift_max_m",
        "unit": "m",
    },
    {
        "id": "filgueira2017_points",
        "kind": "qualitative",
        "source": "Filgueira et al. 2017 (as above)",
        "access": "abstract only",
        "sensor": "as above",
        "figure": "'detected intensity and the sampled points attenuate with the increasing of rain "
        "intensity'",
        "published": "falls with rain rate",
        "model_key": "far_target_points",
        "unit": "points of 2000",
    },
    {
        "id": "filgueira2017_pavement",
        "kind": "qualitative",
        "source": "Filgueira et al. 2017 (as above)",
        "access": "abstract only (ranges of the six areas unknown)",
        "sensor": "as above, six areas of different materials",
        "figure": "'The highest decrease in the number of points appears for pavement'",
        "published": "pavement loses the most points",
        "model_key": "points_lost_by_surface_50mm_h",
        "unit": "points per revolution",
    },
    {
        "id": "lidarstar_rain_max_range",
        "kind": "range",
        "source": "lidarstar.com, 'LiDAR in Adverse Weather: Mastering Point Cloud Filtering' (vendor "
        "article, "
        "attributing it to a Nature Communications paper it does not name)",
        "access": "secondary, full text of the article",
        "sensor": "a 905 nm lidar",
        "figure": "30 mm/h rain reduces the maximum detection range by 30-40 %",
        "published": [0.30, 0.40],
        "model_key": "max_range_loss_30mm_h",
        "unit": "fraction",
    },
    {
        "id": "hokuyo_rain_near",
        "kind": "qualitative",
        "source": "Hokuyo Automatic, 'About the influence of rain on LiDAR' (product note, hokuyo-aut.jp)",
        "access": "full text",
        "sensor": "Hokuyo scanners (multi-echo)",
        "figure": "rain is measured at short distance; multi-echo separates rain from an object only >= 3 m "
        "apart",
        "published": "clutter near the sensor",
        "model_key": "rain_clutter_range_p95_m",
        "unit": "m",
    },
    {
        "id": "haider2023_fog_vs_rain",
        "kind": "qualitative",
        "source": "Haider et al.: A Methodology to Model the Rain and Fog Effect on the Performance of "
        "Automotive LiDAR Sensors. Sensors 23(15) 6891 (2023)",
        "access": "abstract only (chamber conditions not in it)",
        "sensor": "an automotive lidar",
        "figure": "'performance degrades more under the influence of fog droplets than in rain'",
        "published": "fog worse than rain",
        "model_key": "max_range_fog100_vs_rain50_m",
        "unit": "m",
    },
    {
        "id": "kurup2021_snow",
        "kind": "qualitative",
        "source": "Kurup & Bos: DSOR: A Scalable Statistical Filter for Removing Falling Snow from "
        "LiDAR Point "
        "Clouds in Severe Winter Weather (WADS dataset), 2021",
        "access": "abstract and introduction (awesomepapers.org conversion)",
        "sensor": "WADS lidar, Michigan snow belt",
        "figure": "falling snow adds false points (labelled 'active falling snow') near the sensor",
        "published": "near false points",
        "model_key": "snow_clutter_range_p95_m",
        "unit": "m",
    },
    {
        "id": "linnhoff2022_rain_points_per_beam",
        "kind": "fit",
        "source": LINNHOFF_SOURCE,
        "access": "the calibrated parameters (code of the authors' group); the paper's abstract",
        "sensor": "VLP-16 on a stationary long-term outdoor rig, measured rain",
        "figure": "a beam reports a rain point with probability 1.69e-4 per mm/h (compared at 1-25 mm/h)",
        "published": [LINNHOFF_RAIN_P_PER_MM_H * r for r in FIT_RAIN_MM_H],
        "model_key": "rain_points_per_beam_measured",
        "unit": "per beam",
    },
    {
        "id": "linnhoff2022_rain_point_range",
        "kind": "quantiles",
        "source": LINNHOFF_SOURCE,
        "access": "as above",
        "sensor": "as above",
        "figure": "rain points' range lognormal (mu 1.362, sigma 0.784): 10/50/90 % within 1.43/3.90/10.7 m",
        "published": [
            round(math.exp(LINNHOFF_RAIN_LOGNORMAL[0] + z * LINNHOFF_RAIN_LOGNORMAL[1]), 2)
            for z in (-1.2816, 0.0, 1.2816)
        ],
        "model_key": "rain_point_range_quantiles_10mm_h_m",
        "unit": "m",
    },
    {
        "id": "linnhoff2022_snow_points_per_beam",
        "kind": "fit",
        "source": LINNHOFF_SOURCE,
        "access": "as above (the unit of their snow factor is not stated: read as mm/h water equivalent)",
        "sensor": "as above, measured snowfall",
        "figure": "a beam reports a snow point with probability 0.01569 per unit of snowfall rate",
        "published": [LINNHOFF_SNOW_P_PER_MM_H * s for s in SNOW_RATES_MM_H],
        "model_key": "snow_points_per_beam_measured",
        "unit": "per beam",
    },
    {
        "id": "linnhoff2022_rain_extinction",
        "kind": "ratio",
        "source": LINNHOFF_SOURCE,
        "access": "as above",
        "sensor": "as above",
        "figure": "rain extinction 7.677e-5 per m per mm/h (two-way on every return)",
        "published": [LINNHOFF_RAIN_ALPHA_PER_MM_H * r for r in FIT_RAIN_MM_H],
        "model_key": "rain_extinction_fit_rates_per_m",
        "unit": "1/m",
    },
]


def _wall_stats(
    preset: SensorPreset, rain: float | None, range_m: float, pulses: int, seed: int, rho: float = WALL_RHO
) -> tuple[int, float, float]:
    """(wall points, mean range error m, std m) of ``pulses`` head-on pulses at a Lambertian wall of
    reflectivity ``rho`` (plaster-like by default)."""
    cfg = PhysicsConfig(weather=WeatherConfig(rain_mm_h=rain) if rain else None)
    phys: SensorPhysics = datasheet_physics(preset, rho, cfg)
    hits = target_hits(preset, np.full(pulses, range_m, np.float32))
    pts = phys.apply(hits, np.random.default_rng(seed)).points
    wall = (pts["segment"] == TARGET_SEGMENT) & ((pts["flags"] & CLUTTER) == 0)
    r = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2)[wall].astype(np.float64) - range_m
    if r.size < 3:
        return int(r.size), float("nan"), float("nan")
    return int(r.size), float(r.mean()), float(r.std())


SCENE_SURFACES = {1: "asphalt ground", 2: "red sedan", 3: "rock", 4: "brick facade 51-73 m"}
"""Segments of :func:`~rt_lidar.validation.scenes.rain_test_scene` (0 = clutter)."""


def _scene_scan(preset: SensorPreset, weather: WeatherConfig | None) -> np.ndarray:
    """One revolution of ``preset`` in the seed's scene (seed 1)."""
    from rt_lidar.pipeline.builder import build_pipeline, build_world

    world = build_world(rain_test_scene())
    cfg = PhysicsConfig(weather=weather)
    return build_pipeline(preset, world, seed=1, physics=cfg).pipeline.scans(1)[0].points


def _scene_clutter(pts: np.ndarray) -> tuple[int, float, float]:
    """(clutter points, median and 95th-percentile clutter range m) of one revolution."""
    fake = (pts["flags"] & CLUTTER) != 0
    r = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2)[fake]
    if r.size == 0:
        return 0, 0.0, 0.0
    return int(r.size), float(np.median(r)), float(np.percentile(r, 95))


def _by_surface(pts: np.ndarray) -> dict[str, int]:
    seg = pts["segment"][(pts["flags"] & CLUTTER) == 0]
    return {name: int(np.count_nonzero(seg == k)) for k, name in SCENE_SURFACES.items()}


def rain_extinction_scale_for(
    preset: SensorPreset, loss: float, rain_mm_h: float, reflectivity: float = 0.1
) -> float:
    """The factor on the model's rain extinction that makes a head-on ``reflectivity`` target lose
    ``loss`` of its clear-air maximum range at ``rain_mm_h`` (extinction only, analytic)."""
    k = (preset.pulse.peak_power_w, preset.optics.receiver_aperture_m, preset.optics.system_efficiency)
    thr = preset.pulse.detection_threshold_w

    def range_for(a: float) -> float:
        lo, hi = 0.5, 2000.0
        for _ in range(80):
            mid = (lo + hi) / 2
            ok = received_power(mid, reflectivity, math.exp(-2 * a * mid), *k) >= thr
            lo, hi = (mid, hi) if ok else (lo, mid)
        return lo

    target = (1.0 - loss) * range_for(CLEAR_AIR)
    a_rain = WeatherConfig(rain_mm_h=rain_mm_h).extinction_per_m
    # the range falls monotonically with the scale: bisect it
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if range_for(CLEAR_AIR + mid * a_rain) > target else (lo, mid)
    return (lo + hi) / 2


def rain_clutter_expectation(preset: SensorPreset, rain_mm_h: float) -> tuple[float, list[float]]:
    """(probability that an open-sky beam holds a detectable drop, the 10/50/90 % quantiles of their
    range in m), from the weather kernels' own table of detectable drops (the size-dependent drop
    backscatter and the receiver's overlap, :mod:`rt_lidar.physics.rain_receiver`): no Monte Carlo."""
    threshold = preset.pulse.detection_threshold_w
    prm = weather_model(WeatherConfig(rain_mm_h=rain_mm_h)).params(preset, threshold)
    sp = prm.species[0]
    cum = np.asarray(sp.cum)
    mu = float(cum[-1])
    if mu <= 0.0:
        return 0.0, [math.nan] * len(QUANTILES)
    z = sp.z0 + sp.dz * np.arange(cum.shape[0])
    return 1.0 - math.exp(-mu), [float(np.interp(q, cum / mu, z)) for q in QUANTILES]


def open_sky_rain_rate(
    preset: SensorPreset, rain_mm_h: float, pulses: int = 400_000, seed: int = 5, mode: str = "strongest"
) -> float:
    """Rain points per open-sky beam, measured: ``pulses`` beams that meet nothing, through the whole
    physics stage in return mode ``mode`` (the receiver's noise and detection included)."""
    beam = None if mode == "strongest" else BeamConfig(return_mode=mode)
    cfg = PhysicsConfig(weather=WeatherConfig(rain_mm_h=rain_mm_h), beam=beam)
    phys: SensorPhysics = datasheet_physics(preset, 0.1, cfg)
    hits = target_hits(preset, np.full(pulses, np.inf, np.float32))
    hits.material[:] = -1
    hits.segment[:] = 0
    pts = phys.apply(hits, np.random.default_rng(seed)).points
    return float(np.count_nonzero(pts["flags"] & int(PointFlag.RAIN_CLUTTER))) / pulses


def rain_pulses_for(rain_mm_h: float, points: int = RAIN_POINTS_PER_MEASUREMENT) -> int:
    """Open-sky beams that hold ``points`` rain points at Linnhoff et al.'s rate for ``rain_mm_h``
    (at least 400,000)."""
    return max(400_000, math.ceil(points / linnhoff_rain_points_per_beam(rain_mm_h)))


def open_sky_rain_ratios(
    preset: SensorPreset, rates: tuple[float, ...] = FIT_RAIN_MM_H, points: int = RAIN_POINTS_PER_MEASUREMENT
) -> list[float]:
    """``preset``'s measured rain points per open-sky beam in strongest mode over Linnhoff et al.'s
    calibrated VLP-16 rate at each of ``rates`` (:func:`open_sky_rain_rate` with
    :func:`rain_pulses_for` beams)."""
    return [
        open_sky_rain_rate(preset, r, rain_pulses_for(r, points)) / linnhoff_rain_points_per_beam(r)
        for r in rates
    ]


def open_sky_snow_rate(preset: SensorPreset, snow_mm_h: float, pulses: int = 200_000, seed: int = 5) -> float:
    """Snow points per open-sky beam in strongest mode, measured as :func:`open_sky_rain_rate` does."""
    phys: SensorPhysics = datasheet_physics(
        preset, 0.1, PhysicsConfig(weather=WeatherConfig(snow_mm_h=snow_mm_h))
    )
    hits = target_hits(preset, np.full(pulses, np.inf, np.float32))
    hits.material[:] = -1
    hits.segment[:] = 0
    pts = phys.apply(hits, np.random.default_rng(seed)).points
    return float(np.count_nonzero(pts["flags"] & int(PointFlag.SNOW_CLUTTER))) / pulses


def linnhoff_rain_points_per_beam(rain_mm_h: float) -> float:
    """Linnhoff et al.'s share of VLP-16 beams that report a rain point at ``rain_mm_h``."""
    return LINNHOFF_RAIN_P_PER_MM_H * rain_mm_h


def _linnhoff_compare(preset: SensorPreset) -> dict[str, Any]:
    """Rain points per open-sky beam (expected and measured), their range, the extinction, against
    Linnhoff et al.'s calibration; the receiver geometry in use and the drop reflectance it implies."""
    res: dict[str, Any] = {
        "fit_rain_mm_h": list(FIT_RAIN_MM_H),
        "receiver_baseline_m": round(receiver_geometry(preset)[0], 5),
        "receiver_fov_mrad": round(receiver_geometry(preset)[1] * 1e3, 3),
        "rain_drop_rho_before": RHO_RAIN_DROP,
    }
    per_beam, ratio, measured, m_ratio, rho, ranges, glory = [], [], [], [], [], [], []
    for rate in FIT_RAIN_MM_H:
        p, q = rain_clutter_expectation(preset, rate)
        per_beam.append(p)
        ranges.append([round(x, 2) for x in q])
        glory.append(round(detected_drops_by_size(preset, rate)[0]["share"], 3))
        ratio.append(round(p / linnhoff_rain_points_per_beam(rate), 3))
        m = open_sky_rain_rate(preset, rate, rain_pulses_for(rate))
        measured.append(m)
        m_ratio.append(round(m / linnhoff_rain_points_per_beam(rate), 3))
        prm = weather_model(WeatherConfig(rain_mm_h=rate)).params(preset, preset.pulse.detection_threshold_w)
        rho.append(round(prm.species[0].rho, 4))
    res["rain_points_per_beam_fit_rates"] = [round(p, 6) for p in per_beam]
    res["rain_points_per_beam_ratio_to_linnhoff"] = ratio
    res["rain_points_per_beam_measured"] = [round(p, 6) for p in measured]
    res["rain_points_per_beam_measured_ratio_to_linnhoff"] = m_ratio
    res["rain_growth_exponent"] = round(
        math.log(measured[-1] / max(measured[0], 1e-12)) / math.log(FIT_RAIN_MM_H[-1] / FIT_RAIN_MM_H[0]), 2
    )
    res["rain_drop_rho_equivalent"] = rho
    # the residual of change 49: the range grows with the rate as the glory drops' share falls
    res["rain_point_range_quantiles_by_rate_m"] = ranges
    res["rain_points_share_under_0_5mm"] = glory
    snow = [open_sky_snow_rate(preset, s) for s in SNOW_RATES_MM_H]
    res["snow_points_per_beam_measured"] = [round(x, 5) for x in snow]
    res["snow_points_per_beam_ratio_to_linnhoff_if_mm_h"] = [
        round(x / (LINNHOFF_SNOW_P_PER_MM_H * s), 3) for x, s in zip(snow, SNOW_RATES_MM_H, strict=True)
    ]
    res["rain_point_range_quantiles_10mm_h_m"] = [
        round(q, 2) for q in rain_clutter_expectation(preset, 10.0)[1]
    ]
    res["rain_extinction_fit_rates_per_m"] = [
        float(f"{WeatherConfig(rain_mm_h=r).extinction_per_m:.3g}") for r in FIT_RAIN_MM_H
    ]
    return res


def clutter_calibration(out: Path) -> dict[str, Any]:
    """The model's counterpart of every published figure, the residuals and the one fit (module docstring)."""
    preset = load_preset(PRESET)
    res: dict[str, Any] = {"preset": PRESET, "rain_mm_h": RAIN_RATES_MM_H}
    # wall at 20 m: range stability in rain (Filgueira's < 20 cm); wall at 60 m: points lost to rain
    clear20 = _wall_stats(preset, None, 20.0, 2000, 3)
    shifts, sds, pts60 = [], [], []
    for rate in RAIN_RATES_MM_H:
        _, mean, sd = _wall_stats(preset, rate, 20.0, 2000, 3)
        shifts.append(round(abs(mean - clear20[1]) + max(sd - clear20[2], 0.0), 4))
        sds.append(round(sd, 4))
        pts60.append(_wall_stats(preset, rate, FAR_TARGET_M, 2000, 4, 0.1)[0])
    res["wall_range_sd_20m_m"] = sds
    res["wall_range_shift_m"] = shifts
    res["wall_range_shift_max_m"] = max(shifts)
    res["far_target_points"] = [_wall_stats(preset, None, FAR_TARGET_M, 2000, 4, 0.1)[0], *pts60]
    # max range of the 10 % target at 30 mm/h (the 30-40 % figure), fog 100 m vs rain 50 mm/h
    clear_mr = max_detection_range(preset, None)[0]
    r30 = max_detection_range(preset, WeatherConfig(rain_mm_h=30.0))[0]
    res["max_range_clear_m"] = clear_mr
    res["max_range_30mm_h_m"] = r30
    res["max_range_loss_30mm_h"] = round(1.0 - r30 / clear_mr, 3)
    fog = max_detection_range(preset, WeatherConfig(fog_visibility_m=100.0))[0]
    rain50 = max_detection_range(preset, WeatherConfig(rain_mm_h=50.0))[0]
    res["max_range_fog100_m"], res["max_range_rain50_m"] = fog, rain50
    res["max_range_fog100_vs_rain50_m"] = round(fog - rain50, 2)
    # the fit the secondary figure would imply (reported, not applied: docs/clutter-calibration.md)
    res["fit_rain_extinction_scale_for_35pct"] = round(rain_extinction_scale_for(preset, 0.35, 30.0), 3)
    # clutter in the seed's scene: counts and how near
    counts, p50, p95 = [], [], []
    clear_surfaces = _by_surface(_scene_scan(preset, None))
    for rate in RAIN_RATES_MM_H:
        pts = _scene_scan(preset, WeatherConfig(rain_mm_h=rate))
        n, m50, m95 = _scene_clutter(pts)
        counts.append(n)
        p50.append(round(m50, 2))
        p95.append(round(m95, 2))
    wet = _by_surface(pts)  # the heaviest rate
    lost = {k: clear_surfaces[k] - wet[k] for k in SCENE_SURFACES.values()}
    res["points_lost_by_surface_50mm_h"] = lost
    res["points_lost_share_by_surface_50mm_h"] = {
        k: round(lost[k] / max(clear_surfaces[k], 1), 3) for k in lost
    }
    res["rain_clutter_per_scan"] = counts
    res["rain_clutter_range_p50_m"] = p50
    res["rain_clutter_range_p95_m"] = max(p95)
    res["rain_clutter_range_p95_by_rate_m"] = p95
    snow = [_scene_clutter(_scene_scan(preset, WeatherConfig(snow_mm_h=s))) for s in SNOW_RATES_MM_H]
    res["snow_mm_h"] = SNOW_RATES_MM_H
    res["snow_clutter_per_scan"] = [s[0] for s in snow]
    res["snow_clutter_range_p95_m"] = round(max(s[2] for s in snow), 2)
    res.update(_linnhoff_compare(preset))
    # issue 40 item 4: every preset's measured open-sky rain over Linnhoff's rate (change 61)
    res["rain_ratio_to_linnhoff_by_preset"] = {
        name: [round(x, 3) for x in open_sky_rain_ratios(load_preset(name))] for name in list_presets()
    }
    res["comparisons"] = [_compare(p, res) for p in PUBLISHED]
    _plot(out / "clutter_calibration.png", res)
    return res


def _compare(pub: dict[str, Any], m: dict[str, Any]) -> str:
    """One line: id, the published figure, the model's, the residual (or the qualitative verdict)."""
    got = m[pub["model_key"]]
    want = pub["published"]
    if pub["kind"] == "bound":
        return f"{pub['id']}: published < {want} {pub['unit']}, model {got:.3g} (margin {want - got:+.3g})"
    if pub["kind"] == "range":
        lo, hi = want
        resid = 0.0 if lo <= got <= hi else (got - lo if got < lo else got - hi)
        return f"{pub['id']}: published {lo:g}-{hi:g}, model {got:.3g} (residual {resid:+.3g} {pub['unit']})"
    if pub["kind"] in ("fit", "quantiles", "ratio"):
        ratios = ", ".join(f"{g / w:.2f}" for g, w in zip(got, want, strict=True))
        return (
            f"{pub['id']}: published {[float(f'{w:.3g}') for w in want]}, model "
            f"{[float(f'{g:.3g}') for g in got]} {pub['unit']} (model / published {ratios})"
        )
    return f"{pub['id']}: published '{want}', model {got}"


def _plot(path: Path, m: dict[str, Any]) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15.0, 4.0), dpi=110)
    ax = axes[0]
    ax.plot(
        m["rain_mm_h"], [100 * s for s in m["wall_range_shift_m"]], marker="o", label="model: wall at 20 m"
    )
    ax.axhline(20.0, ls="--", color="k", lw=0.8, label="Filgueira 2017: < 20 cm")
    ax.set(title="range stability in rain", xlabel="rain rate (mm/h)", ylabel="range shift + extra sd (cm)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    ax = axes[1]
    ax.plot(m["rain_mm_h"], m["rain_clutter_per_scan"], marker="o", label="rain clutter per scan")
    ax.plot(m["rain_mm_h"], m["rain_clutter_range_p95_by_rate_m"], marker="s", label="95 % of it within (m)")
    ax.set(title=f"{m['preset']} in the seed's scene", xlabel="rain rate (mm/h)", ylabel="count / m")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    ax = axes[2]
    rates = m["fit_rain_mm_h"]
    linnhoff = [linnhoff_rain_points_per_beam(r) for r in rates]
    ax.loglog(rates, linnhoff, "k--", label="Linnhoff 2022 (VLP-16)")
    ax.loglog(rates, m["rain_points_per_beam_fit_rates"], marker="s", label="model, expected")
    ax.loglog(rates, m["rain_points_per_beam_measured"], marker="o", label="model, measured (strongest)")
    ax.fill_between(rates, [x / 1.5 for x in linnhoff], [x * 1.5 for x in linnhoff], color="k", alpha=0.1)
    ax.set(title="rain points per open-sky beam", xlabel="rain rate (mm/h)", ylabel="probability per beam")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _up(x: list[float]) -> bool:
    return all(b >= a for a, b in itertools.pairwise(x)) and x[-1] > x[0]


def _down(x: list[float]) -> bool:
    return all(b <= a for a, b in itertools.pairwise(x)) and x[-1] < x[0]


CLUTTER_CAL_EXPERIMENTS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "clutter_calibration": clutter_calibration
}
CLUTTER_CAL_CHECKS: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool]]]] = {
    "clutter_calibration": [
        ("Filgueira 2017: range in rain varies < 20 cm", lambda m: m["wall_range_shift_max_m"] < 0.20),
        ("Filgueira 2017: fewer surface points with heavier rain", lambda m: _down(m["far_target_points"])),
        (
            "Hokuyo: rain clutter near the sensor (95 % within Linnhoff's 95 %, 14.2 m)",
            lambda m: m["rain_clutter_range_p95_m"] < LINNHOFF_RAIN_P95_M,
        ),
        (
            "Haider 2023: fog (100 m) degrades more than rain (50 mm/h)",
            lambda m: m["max_range_fog100_vs_rain50_m"] < 0,
        ),
        (
            "WADS: snow clutter near the sensor (95 % within 15 m)",
            lambda m: m["snow_clutter_range_p95_m"] < 15.0,
        ),
        (
            "Linnhoff 2022: rain points per open-sky beam within 1.5x of theirs at 2.5-10 mm/h",
            lambda m: all(
                1 / 1.5 < r < 1.5
                for rate, r in zip(
                    m["fit_rain_mm_h"], m["rain_points_per_beam_measured_ratio_to_linnhoff"], strict=True
                )
                if 2.5 <= rate <= 10.0
            ),
        ),
        (
            "Linnhoff 2022: rain points per open-sky beam within 1.5x of theirs at 1-25 mm/h",
            lambda m: all(1 / 1.5 < r < 1.5 for r in m["rain_points_per_beam_measured_ratio_to_linnhoff"]),
        ),
        (
            "Linnhoff 2022: every preset's rain points per open-sky beam within 1.5x of theirs at 1-25 mm/h, "
            "growing with the rate",
            lambda m: all(
                all(1 / 1.5 < r < 1.5 for r in ratios)
                and _up([r * rate for r, rate in zip(ratios, m["fit_rain_mm_h"], strict=True)])
                for ratios in m["rain_ratio_to_linnhoff_by_preset"].values()
            ),
        ),
        (
            "Linnhoff 2022: rain points grow with the rain rate, as R^0.8 to R^1.2 (theirs: R^1)",
            lambda m: _up(m["rain_points_per_beam_measured"]) and 0.8 < m["rain_growth_exponent"] < 1.2,
        ),
        (
            "Linnhoff 2022: rain points' 10/50/90 % ranges at 10 mm/h within 1.7x/1.3x/1.5x of theirs",
            lambda m: all(
                1 / t < q / w < t
                for q, w, t in zip(
                    m["rain_point_range_quantiles_10mm_h_m"],
                    LINNHOFF_RAIN_QUANTILES_M,
                    (1.7, 1.3, 1.5),
                    strict=True,
                )
            ),
        ),
        (
            "Linnhoff 2022: snow points per open-sky beam within 1.5x of theirs (per mm/h water equivalent)",
            lambda m: all(1 / 1.5 < r < 1.5 for r in m["snow_points_per_beam_ratio_to_linnhoff_if_mm_h"]),
        ),
        # the secondary 30-40 % max-range loss at 30 mm/h is not a check: its residual is reported
        # (``comparisons``) and docs/clutter-calibration.md says why the model does not chase it
    ],
}
