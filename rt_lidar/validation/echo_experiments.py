"""Validation experiments of weather echoes beside the target (issue 14, item 1).

- ``weather_dual_return``: a VLP-16 before a plaster wall 40 m ahead (no ground) in fog of 100 m
  visibility, rain of 25 mm/h and snow of 1 mm/h. The wall stays above the threshold after the
  weather's two-way extinction (``target_margin``: its received power over the threshold), so a real
  sensor's last return is the wall, and the drop, flake or fog echo is an extra echo in front of it.
  Per case, over the pulses that hit the wall in clear air: ``last_is_target_fraction`` (``last``
  mode reports the wall), ``strongest_is_target_fraction`` (``strongest`` mode reports the wall
  rather than the clutter) and ``dual_has_target_fraction`` (one of the ``dual`` returns is the wall).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import World, wall_scene

__all__ = ["ECHO_CHECKS", "ECHO_EXPERIMENTS", "WEATHER_CASES", "weather_dual_return"]

PRESET = "VLP-16"
WALL_M = 40.0
WALL_MATERIAL = "building_plaster"
WEATHER_CASES: dict[str, WeatherConfig] = {
    "fog_100m": WeatherConfig(fog_visibility_m=100.0),
    "rain_25mm_h": WeatherConfig(rain_mm_h=25.0),
    "snow_1mm_h": WeatherConfig(snow_mm_h=1.0),
}
CLUTTER = int(PointFlag.RAIN_CLUTTER | PointFlag.FOG_CLUTTER | PointFlag.SNOW_CLUTTER)


def _keys(points: np.ndarray) -> np.ndarray:
    return points["t"].astype(np.int64) * 4096 + points["ring"].astype(np.int64)


def _scan(world: World, weather: WeatherConfig | None, mode: str) -> np.ndarray:
    cfg = PhysicsConfig(weather=weather, beam=BeamConfig(return_mode=mode), range_noise=False)
    return build_pipeline(PRESET, world, seed=5, physics=cfg).pipeline.scans(1)[0].points


def _on_wall(points: np.ndarray) -> np.ndarray:
    """Points of the wall: at its range, not clutter."""
    return (np.abs(points["x"] - WALL_M) < 1.0) & ((points["flags"] & CLUTTER) == 0)


def weather_dual_return(out: Path) -> dict[str, Any]:
    """Which return is the target when weather adds echoes in front of it (module docstring)."""
    preset = load_preset(PRESET)
    world = build_world(wall_scene(WALL_M, WALL_MATERIAL, ground=False))
    clear = _scan(world, None, "strongest")
    truth = _keys(clear[_on_wall(clear)])
    phys = SensorPhysics.from_preset(preset, world.material_names, load_material_table())
    rho = float(phys.materials.diffuse[world.material_names.index(WALL_MATERIAL)])
    unit = float(phys.unit_power(np.array([WALL_M], np.float32))[0])
    res: dict[str, Any] = {
        "cases": list(WEATHER_CASES),
        "wall_range_m": WALL_M,
        "wall_pulses": int(truth.size),
    }
    per: dict[str, dict[str, float]] = {}
    for name, w in WEATHER_CASES.items():
        entry: dict[str, float] = {
            "target_margin": round(
                unit
                * rho
                * math.exp(-2.0 * w.extinction_per_m * WALL_M)
                / preset.pulse.detection_threshold_w,
                3,
            )
        }
        for mode in ("last", "strongest", "dual"):
            pts = _scan(world, w, mode)
            hit = np.isin(truth, _keys(pts[_on_wall(pts)]))
            key = "dual_has_target_fraction" if mode == "dual" else f"{mode}_is_target_fraction"
            entry[key] = round(float(hit.mean()) if truth.size else 0.0, 4)
            if mode == "dual":
                entry["dual_clutter_points"] = int(np.count_nonzero(pts["flags"] & CLUTTER))
        per[name] = entry
    res.update(per)
    for key in ("last_is_target_fraction", "strongest_is_target_fraction", "dual_has_target_fraction"):
        res[key] = [per[c][key] for c in WEATHER_CASES]
    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    x = np.arange(len(WEATHER_CASES))
    for i, (key, label) in enumerate(
        (
            ("last_is_target_fraction", "last"),
            ("strongest_is_target_fraction", "strongest"),
            ("dual_has_target_fraction", "dual (either)"),
        )
    ):
        ax.bar(x + (i - 1) * 0.25, res[key], 0.25, label=label)
    ax.set_xticks(x, list(WEATHER_CASES))
    ax.set(
        title=f"{PRESET}: plaster wall at {WALL_M:g} m behind weather echoes",
        ylabel="share of wall pulses reporting the wall",
        ylim=(0, 1.05),
    )
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "weather_dual_return.png")
    plt.close(fig)
    return res


ECHO_EXPERIMENTS: dict[str, Callable[[Path], dict[str, Any]]] = {"weather_dual_return": weather_dual_return}
ECHO_CHECKS: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool]]]] = {
    "weather_dual_return": [
        (
            "the target stays above threshold after extinction",
            lambda m: all(m[c]["target_margin"] > 1.0 for c in m["cases"]),
        ),
        (
            "last return is the target (>= 95 % of wall pulses)",
            lambda m: min(m["last_is_target_fraction"]) >= 0.95,
        ),
        ("dual keeps the target (>= 95 %)", lambda m: min(m["dual_has_target_fraction"]) >= 0.95),
    ],
}
