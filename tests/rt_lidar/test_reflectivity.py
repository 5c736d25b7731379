"""Reported reflectivity is the measured one: received power over a white target's (issue 14, item 5)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.glazing import pane_transmission
from rt_lidar.unreal_bridge.world import Scene, wall_scene

WALL_M = 20.0
PANE_M = 6.0
GLASS_T2 = 0.85**4  # two-way through the table glass pane's two faces (a thin box)


def _glass_before_wall() -> Scene:
    wall = wall_scene(WALL_M, "building_plaster", width_m=30.0, height_m=20.0, ground=False)
    pane = wall_scene(PANE_M, "glass", width_m=3.0, height_m=3.0, thickness_m=0.01, ground=False)
    glass = [dataclasses.replace(o, name="pane", segment_id=99) for o in pane.objects]
    return dataclasses.replace(wall, objects=[*wall.objects, *glass])


def _points(scene: Scene, beam: BeamConfig | None, weather: WeatherConfig | None = None) -> np.ndarray:
    # an ideal receiver: since issue 40 the reported reflectivity carries the amplitude's receiver noise
    # (tests/rt_lidar/test_intensity_chain.py); these tests hold the radar equation's part of it
    cfg = PhysicsConfig(range_noise=False, receiver_noise=False, beam=beam, weather=weather)
    return build_pipeline("VLP-16", scene, seed=1, physics=cfg).pipeline.scans(1)[0].points


def _wall(pts: np.ndarray) -> np.ndarray:
    return pts[
        (np.abs(pts["x"] - WALL_M) < 0.5)
        & (pts["flags"] & int(PointFlag.RAIN_CLUTTER | PointFlag.FOG_CLUTTER) == 0)
    ]


def test_single_ray_reflectivity_drops_behind_glass_and_equals_the_waveform_path() -> None:
    single = _wall(_points(_glass_before_wall(), None))  # one ray, strongest: single-ray path
    wave = _wall(_points(_glass_before_wall(), BeamConfig(sub_rays=1, return_mode="last")))
    behind = (single["flags"] & int(PointFlag.THROUGH_GLASS)) != 0
    clear = ~behind
    assert behind.sum() > 20 and clear.sum() > 200
    # behind the pane the measured reflectivity carries the pane's two-way transmission
    bare = _wall(
        _points(wall_scene(WALL_M, "building_plaster", width_m=30.0, height_m=20.0, ground=False), None)
    )
    kb = bare["t"].astype(np.int64) * 64 + bare["ring"]
    ks = single["t"].astype(np.int64) * 64 + single["ring"]
    _, i_s, i_b = np.intersect1d(ks[behind], kb, return_indices=True)
    through = single[behind][i_s]
    ratio = through["reflectivity"] / bare["reflectivity"][i_b]
    assert i_s.size == behind.sum()
    # each face crossing passes T(theta) (Fresnel at both faces of the pane, its path inside: glazing.py);
    # the few rays that meet the pane at its edge cross its 1 cm thick side face at grazing incidence
    # and pass less (never more)
    cos_i = through["x"] / np.sqrt(through["x"] ** 2 + through["y"] ** 2 + through["z"] ** 2)
    slant = (pane_transmission(0.85, cos_i) / 0.85) ** 4
    assert slant.min() < 0.997  # the slant's loss is there, and larger than the tolerance below
    want = GLASS_T2 * slant
    face = np.abs(ratio / want - 1.0) <= 2e-3
    assert face.mean() > 0.99 and np.all(ratio[~face] < want[~face])
    key = lambda p: p["t"].astype(np.int64) * 64 + p["ring"]  # noqa: E731
    common, ia, ib = np.intersect1d(key(single), key(wave), return_indices=True)
    assert common.size == single.size
    np.testing.assert_allclose(single["reflectivity"][ia], wave["reflectivity"][ib], rtol=2e-3)


def test_reflectivity_through_fog_falls_with_the_two_way_extinction() -> None:
    scene = wall_scene(WALL_M, "building_plaster", width_m=30.0, height_m=20.0, ground=False)
    clear = _wall(_points(scene, None))
    w = WeatherConfig(fog_visibility_m=300.0)
    foggy = _wall(_points(scene, None, w))
    ratio = float(np.median(foggy["reflectivity"])) / float(np.median(clear["reflectivity"]))
    assert ratio == pytest.approx(math.exp(-2.0 * w.extinction_per_m * WALL_M), rel=0.05)
    wave = _wall(_points(scene, BeamConfig(sub_rays=1, return_mode="last"), w))
    assert float(np.median(wave["reflectivity"])) == pytest.approx(
        float(np.median(foggy["reflectivity"])), rel=0.01
    )
