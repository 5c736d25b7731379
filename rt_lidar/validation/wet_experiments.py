"""Validation experiments of the wet road and tyre spray (issue 14, item 11).

- ``road_wetness``: a VLP-16 1.8 m above an asphalt road with a plaster wall 40 m ahead, one revolution
  per road wetness (0, 0.25, 0.5, 1). Road returns per range band (the water film's Fresnel loss grows
  towards grazing incidence, so the wet road drops out with range: :mod:`rt_lidar.physics.wet_road`),
  and the mirror ghosts of the wall: points below the road (world z < -0.2 m), with how far they lie
  from the wall's mirror image (``ghost_mirror_error_m``: |x - wall| for ghosts; their height is the
  mirrored wall height).
- ``spray``: the same sensor (standing) behind a car driving away at 25 m/s from 8 m ahead on a wet
  road; spray points (flagged rain clutter) per revolution over the wetness, mean of 3 revolutions,
  and the car's own points above the road (attenuated two-way through its plume; its mirror ghosts
  below the road are not counted).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.points import PointFlag
from rt_lidar.unreal_bridge.world import ConstantVelocity, Pose, Scene, StaticTrajectory, wall_scene
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_car

__all__ = ["WET_CHECKS", "WET_EXPERIMENTS", "road_wetness", "spray", "spray_scene"]

PRESET = "VLP-16"
SENSOR_Z = 1.8
WALL_M = 40.0
WETNESS = [0.0, 0.25, 0.5, 1.0]
RANGE_BANDS_M = [(5.0, 10.0), (10.0, 13.0), (13.0, 17.0), (17.0, 25.0), (25.0, 40.0)]
"""Bands around the VLP-16's ground rings from 1.8 m (-15 .. -3 deg: 6.7, 7.8, 9.3, 11.4, 14.7, 20.6,
34.3 m)."""
SPRAY_WETNESS = [0.0, 0.25, 0.5, 0.75, 1.0]
SPRAY_SPEED_M_S = 25.0
SPRAY_SCANS = 3


def _scan(world: Any, wetness: float, scans: int = 1) -> list[np.ndarray]:
    weather = WeatherConfig(road_wetness=wetness) if wetness > 0 else None
    cfg = PhysicsConfig(weather=weather, range_noise=False)
    return [s.points for s in build_pipeline(PRESET, world, seed=3, physics=cfg).pipeline.scans(scans)]


def road_wetness(out: Path) -> dict[str, Any]:
    """Road returns by range and mirror ghosts over the road wetness (module docstring)."""
    world = build_world(wall_scene(WALL_M, "building_plaster", width_m=30.0, height_m=6.0))
    road_seg = world.segment_ids()["ground"]
    wall_seg = world.segment_ids()["wall"]
    res: dict[str, Any] = {"wetness": WETNESS, "range_bands_m": [list(b) for b in RANGE_BANDS_M]}
    counts, ghosts, errors = [], [], []
    for w in WETNESS:
        pts = _scan(world, w)[0]
        r = np.hypot(pts["x"], pts["y"])
        z_world = pts["z"] + SENSOR_Z
        road = (pts["segment"] == road_seg) & (np.abs(z_world) < 0.2)
        counts.append([int(np.count_nonzero(road & (r >= lo) & (r < hi))) for lo, hi in RANGE_BANDS_M])
        ghost = (z_world < -0.2) & (pts["segment"] == wall_seg)
        ghosts.append(int(np.count_nonzero(ghost)))
        errors.append(round(float(np.abs(pts["x"][ghost] - WALL_M).max()), 3) if ghost.any() else 0.0)
    res["road_points_by_band"] = counts
    res["road_points_total"] = [int(sum(c)) for c in counts]
    res["far_road_fraction_of_dry"] = [round(c[-1] / max(counts[0][-1], 1), 4) for c in counts]
    res["near_road_fraction_of_dry"] = [round(c[0] / max(counts[0][0], 1), 4) for c in counts]
    res["ghost_points"] = ghosts
    res["ghost_mirror_error_m"] = errors
    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    centres = [0.5 * (lo + hi) for lo, hi in RANGE_BANDS_M]
    for w, c in zip(WETNESS, counts, strict=True):
        ax.plot(centres, c, marker="o", label=f"wetness {w:g}")
    ax.set(
        title=f"{PRESET} 1.8 m over asphalt: road returns per revolution",
        xlabel="ground range band centre (m)",
        ylabel="road points in band",
    )
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "road_wetness.png")
    plt.close(fig)
    return res


def spray_scene(distance_m: float = 8.0, speed_m_s: float = SPRAY_SPEED_M_S) -> Scene:
    """An asphalt road with one car ahead of a standing sensor (1.8 m up), driving away at ``speed_m_s``
    from ``distance_m`` (its centre), named ``car_ahead`` (segment 2; the road is segment 1)."""
    road = MeshBuilder()
    road.grid(-20.0, 120.0, -15.0, 15.0, 0.0, 5.0, "asphalt")
    car = MeshBuilder()
    add_car(car, "car_paint_white")
    objects = [
        road.build("road", 1, StaticTrajectory(Pose.identity())),
        car.build(
            "car_ahead", 2, ConstantVelocity(Pose.from_xyz_rpy(distance_m, 0.0, 0.0), (speed_m_s, 0.0, 0.0))
        ),
    ]
    return Scene(objects=objects, sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, SENSOR_Z))


def spray(out: Path) -> dict[str, Any]:
    """Spray points behind a car over the road wetness (module docstring)."""
    world = build_world(spray_scene())
    clutter = int(PointFlag.RAIN_CLUTTER)
    pts_spray, pts_car, max_r = [], [], []
    for w in SPRAY_WETNESS:
        scans = _scan(world, w, SPRAY_SCANS)
        sp = [s[(s["flags"] & clutter) != 0] for s in scans]
        pts_spray.append(round(float(np.mean([len(s) for s in sp])), 2))
        on_car = [np.count_nonzero((s["segment"] == 2) & (s["z"] > -SENSOR_Z)) for s in scans]  # no ghosts
        pts_car.append(round(float(np.mean(on_car)), 2))
        r = [float(np.hypot(s["x"], s["y"]).max()) for s in sp if len(s)]
        max_r.append(round(max(r), 2) if r else 0.0)
    res: dict[str, Any] = {
        "wetness": SPRAY_WETNESS,
        "car_speed_m_s": SPRAY_SPEED_M_S,
        "spray_points_per_scan": pts_spray,
        "car_points_per_scan": pts_car,
        "spray_max_range_m": max_r,
    }
    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    ax.plot(SPRAY_WETNESS, pts_spray, marker="o", label="spray points (rain-clutter flag)")
    ax.plot(SPRAY_WETNESS, pts_car, marker="s", label="points on the car")
    ax.set(
        title=f"{PRESET} behind a car at {SPRAY_SPEED_M_S:g} m/s: tyre spray",
        xlabel="road wetness",
        ylabel=f"points per revolution (mean of {SPRAY_SCANS})",
    )
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "spray.png")
    plt.close(fig)
    return res


WET_EXPERIMENTS: dict[str, Callable[[Path], dict[str, Any]]] = {"road_wetness": road_wetness, "spray": spray}


def _falling(values: list[float]) -> bool:
    return all(a >= b for a, b in itertools.pairwise(values))


WET_CHECKS: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool]]]] = {
    "road_wetness": [
        (
            "far road returns fall with wetness (to < 50 % of dry)",
            lambda m: m["far_road_fraction_of_dry"][-1] < 0.5 and _falling(m["far_road_fraction_of_dry"]),
        ),
        ("near road stays (>= 80 % of dry at 5-10 m)", lambda m: min(m["near_road_fraction_of_dry"]) >= 0.8),
        (
            "no ghosts when dry, ghosts when wet",
            lambda m: m["ghost_points"][0] == 0 and m["ghost_points"][-1] > 0,
        ),
        ("ghosts lie at the wall's mirror image (< 0.5 m)", lambda m: max(m["ghost_mirror_error_m"]) < 0.5),
    ],
    "spray": [
        ("no spray on a dry road", lambda m: m["spray_points_per_scan"][0] == 0),
        (
            "spray grows with wetness",
            lambda m: m["spray_points_per_scan"][-1] > m["spray_points_per_scan"][1] > 0,
        ),
    ],
}
