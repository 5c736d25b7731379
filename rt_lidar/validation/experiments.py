"""The weather validation experiments: each runs the model, returns ``{metric: value or list}`` and writes
one PNG plot into the output folder.

- ``rain_max_range`` / ``fog_max_range``: range at which a 10 % Lambertian target, head-on, is still
  detected in at least half of 400 beams (Monte Carlo through :class:`~rt_lidar.physics.weather.WeatherModel`,
  drops stealing returns included), beside the analytic range from the extinction alone.
- ``rain_range_bands``: one VLP-16 revolution in the seed's scene (:func:`rain_test_scene`) per rain
  rate, counted in the +-35 deg sector in front of the sensor where the scene stands (behind it there
  is only ground and sky, which gain rain clutter and lose nothing; ``points_total_all_around`` gives
  the whole revolution): points by range band, false (clutter) points and false negatives (rays that
  hit an object in
  range but report no point at all, the seed's "removed" points; ground truth: the same scan at a
  vanishing threshold; rays whose object is hidden behind a false point count as false points and
  are reported apart as ``hidden_by_clutter``).
- ``rain_threshold_sweep``: the same scene at 25 mm/h over detection thresholds.
- ``snow_clutter``: the same scene over snowfall rates: the share of a revolution's points that are
  snowflakes, how far out they lie, visibility and the 10 % target's max range.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.kernels.intensity import received_power
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig, WeatherModel
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.unreal_bridge.world import World
from rt_lidar.validation.plots import plot_series
from rt_lidar.validation.scenes import rain_test_scene

__all__ = ["EXPERIMENTS", "RAIN_RATES_MM_H", "Experiment", "max_detection_range"]

Experiment = Callable[[Path], dict[str, Any]]
RAIN_RATES_MM_H = [0.0, 5.0, 10.0, 25.0, 50.0]
FOG_VISIBILITIES_M = [200.0, 100.0, 50.0, 30.0]
SNOW_RATES_MM_H = [0.5, 1.0, 2.0, 5.0]
THRESHOLD_FACTORS = [0.25, 0.5, 1.0, 2.0, 4.0]
FRONT_SECTOR_DEG = 35.0  # the seed's scene stands in front of the sensor; counts are of this sector
PRESET = "VLP-16"
CLEAR_AIR = PhysicsConfig().extinction_per_m
CLUTTER = int(PointFlag.RAIN_CLUTTER | PointFlag.FOG_CLUTTER | PointFlag.SNOW_CLUTTER)


def _k(preset: SensorPreset) -> tuple[float, float, float]:
    return preset.pulse.peak_power_w, preset.optics.receiver_aperture_m, preset.optics.system_efficiency


def max_detection_range(
    preset: SensorPreset,
    weather: WeatherConfig | None,
    reflectivity: float = 0.1,
    beams: int = 400,
    seed: int = 0,
) -> tuple[float, float]:
    """(Monte Carlo, analytic) range in m at which a head-on Lambertian target is still detected."""
    thr = preset.pulse.detection_threshold_w
    a = CLEAR_AIR + (weather.extinction_per_m if weather else 0.0)
    lo, hi = 0.5, 1000.0  # analytic: P(R) = thr, P falls monotonically with R
    for _ in range(60):
        mid = (lo + hi) / 2
        p = received_power(mid, reflectivity, math.exp(-2 * a * mid), *_k(preset))
        lo, hi = (mid, hi) if p >= thr else (lo, mid)
    analytic = lo
    ranges = np.arange(1.0, 200.0, 0.25, dtype=np.float32)
    r = np.repeat(ranges, beams)
    power = received_power(r, reflectivity, np.exp(-2 * CLEAR_AIR * r), *_k(preset)).astype(np.float32)
    flags = np.zeros(r.size, np.uint8)
    if weather is not None:
        WeatherModel(weather).apply(
            r, power, flags, None, preset, thr, np.random.default_rng(seed), clear_air_per_m=CLEAR_AIR
        )
    detected = ((power >= thr) & (flags == 0)).reshape(ranges.size, beams).mean(axis=1)
    ok = np.nonzero(detected >= 0.5)[0]
    return (float(ranges[ok[-1]]) if ok.size else 0.0), analytic


def rain_max_range(out: Path) -> dict[str, Any]:
    """Max detection range of a 10 % target vs rain rate; rain extinction from Marshall-Palmer."""
    preset = load_preset(PRESET)
    mc, an, ext = [], [], []
    for rate in RAIN_RATES_MM_H:
        w = WeatherConfig(rain_mm_h=rate) if rate > 0 else None
        m, a = max_detection_range(preset, w)
        mc.append(m)
        an.append(round(a, 2))
        ext.append(WeatherConfig(rain_mm_h=rate).extinction_per_m)
    plot_series(
        out / "rain_max_range.png",
        f"{PRESET}: 10 % Lambertian target, head-on",
        "rain rate (mm/h)",
        "max detection range (m)",
        {"simulated (50 % of beams)": (RAIN_RATES_MM_H, mc), "extinction only": (RAIN_RATES_MM_H, an)},
    )
    return {
        "rates_mm_h": RAIN_RATES_MM_H,
        "max_range_m": mc,
        "max_range_analytic_m": an,
        "extinction_per_m": ext,
    }


def fog_max_range(out: Path) -> dict[str, Any]:
    """Max detection range of a 10 % target vs fog visibility (a = ln 20 / V)."""
    preset = load_preset(PRESET)
    mc, an, ext, soft = [], [], [], []
    for vis in FOG_VISIBILITIES_M:
        w = WeatherConfig(fog_visibility_m=vis)
        m, a = max_detection_range(preset, w)
        mc.append(m)
        an.append(round(a, 2))
        ext.append(w.extinction_per_m)
        fog = WeatherModel(w).params(preset, preset.pulse.detection_threshold_w, CLEAR_AIR).fog
        soft.append(round(fog.range_m, 2))
    plot_series(
        out / "fog_max_range.png",
        f"{PRESET}: 10 % Lambertian target in fog",
        "visibility (m)",
        "max detection range (m)",
        {"simulated (50 % of beams)": (FOG_VISIBILITIES_M, mc), "extinction only": (FOG_VISIBILITIES_M, an)},
        xscale="log",
    )
    return {
        "visibility_m": FOG_VISIBILITIES_M,
        "max_range_m": mc,
        "max_range_analytic_m": an,
        "extinction_per_m": ext,
        "soft_target_range_m": soft,
    }


def _scene_scan(world: World, preset: SensorPreset, weather: WeatherConfig | None, seed: int) -> np.ndarray:
    cfg = PhysicsConfig(weather=weather)
    return build_pipeline(preset, world, seed=seed, physics=cfg).pipeline.scans(1)[0].points


def _with_threshold(preset: SensorPreset, threshold_w: float) -> SensorPreset:
    return dataclasses.replace(
        preset, pulse=dataclasses.replace(preset.pulse, detection_threshold_w=threshold_w)
    )


def _keys(points: np.ndarray) -> np.ndarray:
    return points["t"].astype(np.int64) * 4096 + points["ring"].astype(np.int64)


def _front(points: np.ndarray) -> np.ndarray:
    """The points within +-FRONT_SECTOR_DEG of straight ahead, where the seed's scene stands."""
    az = np.degrees(np.arctan2(points["y"], points["x"]))
    return points[np.abs(az) <= FRONT_SECTOR_DEG]


def _counts(points: np.ndarray, truth: np.ndarray) -> dict[str, int]:
    """Band counts in the front sector (``mid_scene``: the mid band's points of the scene, without
    clutter); ``false`` = clutter points; ``fn`` = object rays (``truth``
    keys) with no point at all (the seed's removed points); ``hidden`` = object rays that report a
    clutter point instead; ``all`` = points of the whole revolution."""
    n_all = int(points.size)
    points = _front(points)
    r = np.sqrt(points["x"] ** 2 + points["y"] ** 2 + points["z"] ** 2)
    fake = (points["flags"] & CLUTTER) != 0
    keys = _keys(points)
    return {
        "near": int((r < 10).sum()),
        "mid": int(((r >= 10) & (r <= 50)).sum()),
        "mid_scene": int(((r >= 10) & (r <= 50) & ~fake).sum()),
        "far": int((r > 50).sum()),
        "false": int(fake.sum()),
        "fn": int((~np.isin(truth, keys)).sum()),
        "hidden": int(np.isin(keys[fake], truth).sum()),
        "all": n_all,
    }


def _truth(world: World, preset: SensorPreset) -> np.ndarray:
    """(ring, t) keys of every ray that hits an object within the sensor's range limits."""
    return _keys(_front(_scene_scan(world, _with_threshold(preset, 1e-15), None, 0)))


def rain_range_bands(out: Path) -> dict[str, Any]:
    """Points by range band in the seed's scene vs rain rate (one VLP-16 revolution each)."""
    preset = load_preset(PRESET)
    world = build_world(rain_test_scene())
    truth = _truth(world, preset)
    rows = [
        _counts(_scene_scan(world, preset, WeatherConfig(rain_mm_h=r) if r else None, 1), truth)
        for r in RAIN_RATES_MM_H
    ]
    res: dict[str, Any] = {"rates_mm_h": RAIN_RATES_MM_H}
    for key, name in (
        ("near", "points_near"),
        ("mid", "points_mid"),
        ("mid_scene", "scene_points_mid"),
        ("far", "points_far"),
        ("false", "false_points"),
        ("fn", "false_negatives"),
        ("hidden", "hidden_by_clutter"),
    ):
        res[name] = [row[key] for row in rows]
    res["points_total"] = [row["near"] + row["mid"] + row["far"] for row in rows]
    res["points_total_all_around"] = [row["all"] for row in rows]
    res["front_sector_deg"] = FRONT_SECTOR_DEG
    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    x = np.arange(len(RAIN_RATES_MM_H))
    for i, (name, label) in enumerate(
        (
            ("points_near", "near < 10 m"),
            ("points_mid", "mid 10-50 m"),
            ("points_far", "far > 50 m"),
            ("false_points", "false (rain)"),
        )
    ):
        ax.bar(x + (i - 1.5) * 0.2, res[name], 0.2, label=label)
    ax.set_xticks(x, [f"{r:g}" for r in RAIN_RATES_MM_H])
    ax.set(
        title=f"{PRESET} in the seed's scene (sedan, rock, building)",
        xlabel="rain rate (mm/h)",
        ylabel="points per revolution",
    )
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "rain_range_bands.png")
    plt.close(fig)
    return res


def rain_threshold_sweep(out: Path) -> dict[str, Any]:
    """False positives / negatives at 25 mm/h vs detection threshold (in the seed's scene)."""
    preset = load_preset(PRESET)
    world = build_world(rain_test_scene())
    truth = _truth(world, preset)
    dt = preset.pulse.detection_threshold_w
    thresholds = [dt * f for f in THRESHOLD_FACTORS]
    rows = [
        _counts(_scene_scan(world, _with_threshold(preset, t), WeatherConfig(rain_mm_h=25.0), 1), truth)
        for t in thresholds
    ]
    res: dict[str, Any] = {
        "rate_mm_h": 25.0,
        "thresholds": thresholds,
        "threshold_factors": THRESHOLD_FACTORS,
        "false_positives": [r["false"] for r in rows],
        "false_negatives": [r["fn"] for r in rows],
        "hidden_by_clutter": [r["hidden"] for r in rows],
    }
    plot_series(
        out / "rain_threshold_sweep.png",
        f"{PRESET} at 25 mm/h: detection threshold sweep",
        "detection threshold (W)",
        "count per revolution",
        {
            "false positives": (thresholds, res["false_positives"]),
            "false negatives": (thresholds, res["false_negatives"]),
        },
        xscale="log",
    )
    return res


def snow_clutter(out: Path) -> dict[str, Any]:
    """Snowflake clutter in the seed's scene vs snowfall rate (water equivalent), one revolution each."""
    preset = load_preset(PRESET)
    world = build_world(rain_test_scene())
    truth = _truth(world, preset)
    frac, p95, fn, mr, vis = [], [], [], [], []
    for rate in SNOW_RATES_MM_H:
        w = WeatherConfig(snow_mm_h=rate)
        pts = _scene_scan(world, preset, w, 1)
        snow = (pts["flags"] & int(PointFlag.SNOW_CLUTTER)) != 0
        r = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2)[snow]
        frac.append(round(float(snow.mean()), 4))
        p95.append(round(float(np.percentile(r, 95)), 2) if r.size else 0.0)
        fn.append(_counts(pts, truth)["fn"])
        mr.append(max_detection_range(preset, w)[0])
        vis.append(round(math.log(20.0) / w.extinction_per_m, 1))
    plot_series(
        out / "snow_clutter.png",
        f"{PRESET} in the seed's scene: snowfall",
        "snowfall (mm/h water)",
        "share of points that are snowflakes (%)",
        {"snow clutter": (SNOW_RATES_MM_H, [100 * f for f in frac])},
    )
    return {
        "rates_mm_h": SNOW_RATES_MM_H,
        "clutter_fraction": frac,
        "clutter_range_p95_m": p95,
        "false_negatives": fn,
        "max_range_m": mr,
        "visibility_m": vis,
    }


EXPERIMENTS: dict[str, Experiment] = {
    "rain_max_range": rain_max_range,
    "rain_range_bands": rain_range_bands,
    "rain_threshold_sweep": rain_threshold_sweep,
    "fog_max_range": fog_max_range,
    "snow_clutter": snow_clutter,
}

from rt_lidar.validation.beam_experiments import BEAM_EXPERIMENTS  # noqa: E402  (beam model, issue 5)

EXPERIMENTS.update(BEAM_EXPERIMENTS)

from rt_lidar.rig.experiment import crosstalk  # noqa: E402  (sensor rigs, issue 16)

EXPERIMENTS["crosstalk"] = crosstalk

from rt_lidar.validation.echo_experiments import ECHO_EXPERIMENTS  # noqa: E402  (issue 14)

EXPERIMENTS.update(ECHO_EXPERIMENTS)

from rt_lidar.validation.detection_experiments import DETECTION_EXPERIMENTS  # noqa: E402  (issue 14)

EXPERIMENTS.update(DETECTION_EXPERIMENTS)

from rt_lidar.validation.walk_experiments import WALK_EXPERIMENTS  # noqa: E402  (issue 14, item 8)

EXPERIMENTS.update(WALK_EXPERIMENTS)

from rt_lidar.validation.clutter_calibration import CLUTTER_CAL_EXPERIMENTS  # noqa: E402  (issue 14, item 10)

EXPERIMENTS.update(CLUTTER_CAL_EXPERIMENTS)
from rt_lidar.validation.wet_experiments import WET_EXPERIMENTS  # noqa: E402  (issue 14, item 11)

EXPERIMENTS.update(WET_EXPERIMENTS)

from rt_lidar.validation.fault_experiments import FAULT_EXPERIMENTS  # noqa: E402  (issue 42)

EXPERIMENTS.update(FAULT_EXPERIMENTS)
from rt_lidar.validation.realism_experiment import realism  # noqa: E402  (issue 40)

EXPERIMENTS["realism"] = realism
