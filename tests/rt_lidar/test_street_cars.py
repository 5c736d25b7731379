"""Issue 40: cars as real streets have them (black paint as measured at 905 nm, coated windscreens, privacy
glass), the canopy hot spot, and the ghost a pane's mirror sends back (rt_lidar.physics.glass_ghost)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scenes import panel

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.glazing import pane_mirror_reflectance
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import Firings
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory, World, street_scene
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_car
from rt_lidar.unreal_bridge.world.street import IR_WINDSCREEN_SHARE, PAINT_SHARES, PAINTS, PRIVACY_GLASS_SHARE

MOUNT_Z = 1.73  # KITTI's HDL-64E


def _car_points(paint: str, pose: Pose, windscreen: str = "car_glass", threshold_w: float | None = None):
    """One HDL-64E scan of one car at ``pose`` (its points only)."""
    names = list(Scene(objects=[]).material_names)
    b = MeshBuilder()
    add_car(b, paint, windscreen)
    scene = Scene(
        objects=[b.build("car", 5, StaticTrajectory(pose))],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, MOUNT_Z),
    )
    preset = load_preset("HDL-64E")
    if threshold_w is not None:
        preset = dataclasses.replace(
            preset, pulse=dataclasses.replace(preset.pulse, detection_threshold_w=threshold_w)
        )
    pts = build_pipeline(preset, scene, seed=2).pipeline.scans(1)[0].points
    return pts[pts["segment"] == 5]


def test_black_paint_returns_six_per_cent_of_a_white_cars_echo() -> None:
    """PPG's test: a black car returns 6 % of a white car's near-infrared signal. A black car parked 3 m
    aside, 8-12 m ahead (seen off its panels' normals) reads a twentieth of the white car's measured
    reflectivity (the S2's byte clips the white car at 255, change 36)."""
    arrays = load_material_table().arrays(["car_paint_white", "car_paint_black"], 905.0)
    assert arrays.diffuse[1] / arrays.diffuse[0] == pytest.approx(0.06, abs=0.003)
    pose = Pose.from_xyz_rpy(10.0, -3.0, 0.0)
    body = {}
    for paint in ("car_paint_white", "car_paint_black"):
        p = _car_points(paint, pose)
        z = p["z"] + MOUNT_Z
        body[paint] = p[(z > 0.35) & (z < 0.9)]
    white, black = (np.median(body[k]["reflectivity"]) for k in ("car_paint_white", "car_paint_black"))
    assert len(body["car_paint_black"]) > 500
    assert 0.03 < black / white < 0.1


def test_a_coated_windscreen_passes_what_its_transmission_says_against_plain_glazing() -> None:
    """A car coming head-on 9 m ahead: through the silver-coated windscreen (one-way 0.25 at 905 nm, a
    mirror that sends the raked screen's rays to the sky) the dashboard and seats read (0.25 / 0.7)^2 =
    0.13 of what they read through plain car glazing (one-way 0.7, change 55; 0.5 before: a quarter),
    two ways."""
    pose = Pose.from_xyz_rpy(9.0, 0.0, 0.0, yaw=math.pi)

    def cabin(p: np.ndarray) -> np.ndarray:
        z = p["z"] + MOUNT_Z
        sel = (z > 0.97) & (z < 1.3) & (p["x"] > 7.0) & (p["x"] < 8.2) & (np.abs(p["y"]) < 0.7)
        return p["reflectivity"][sel]

    # a receiver 8x more sensitive sees the cabin through either glazing, so the ratio measures the
    # glazing alone
    threshold = load_preset("HDL-64E").pulse.detection_threshold_w / 8
    plain = cabin(_car_points("car_paint_white", pose, "car_glass", threshold))
    coated = cabin(_car_points("car_paint_white", pose, "car_glass_ir", threshold))
    assert len(plain) > 30 and len(coated) > 10
    glass = load_material_table().materials
    expected = (glass["car_glass_ir"]["transmission"] / glass["car_glass"]["transmission"]) ** 2
    assert 0.08 < expected < 0.2
    assert 0.6 * expected < np.median(coated) / np.median(plain) < 1.5 * expected


def test_the_streets_cars_wear_paints_and_glazing_at_their_shares_the_same_for_a_seed() -> None:
    names = list(Scene(objects=[]).material_names)

    def wearing(scene: Scene) -> list[set[str]]:
        return [
            {names[i] for i in np.unique(o.face_material)} for o in scene.objects if o.name.startswith("car_")
        ]

    def body_paint(scene: Scene) -> list[str]:  # the paint of most faces (wheels are silver, change 48)
        out = []
        for o in scene.objects:
            if o.name.startswith("car_"):
                counts = {p: int(np.count_nonzero(o.face_material == names.index(p))) for p in PAINTS}
                out.append(max(counts, key=lambda p: counts[p]))
        return out

    cars = [c for seed in range(4) for c in wearing(street_scene(seed))]
    paints = [p for seed in range(4) for p in body_paint(street_scene(seed))]
    assert len(cars) > 150
    for paint, share in zip(PAINTS, PAINT_SHARES, strict=True):
        assert np.mean([p == paint for p in paints]) == pytest.approx(share, abs=0.08)
    assert np.mean(["car_glass_ir" in c for c in cars]) == pytest.approx(IR_WINDSCREEN_SHARE, abs=0.08)
    assert np.mean(["car_glass_privacy" in c for c in cars]) == pytest.approx(PRIVACY_GLASS_SHARE, abs=0.1)
    assert all("car_glass" in c for c in cars)  # the front side windows stay plain
    assert wearing(street_scene(3)) == wearing(street_scene(3))


def test_the_canopy_hot_spot_lifts_leaves_above_their_lambertian_echo() -> None:
    """Seen from where it is lit, a canopy returns more than a Lambertian leaf of its albedo would (the
    hot spot): +36 % at 905 nm, relatively more at 1550 nm where leaves absorb."""
    table = load_material_table()
    for nm, lo, hi in ((905.0, 0.3, 0.45), (1550.0, 0.6, 1.0)):
        a = table.arrays(["vegetation"], nm)
        gain = (a.diffuse[0] + a.retro_gain[0]) / a.hemispherical()[0] - 1.0
        assert lo < gain < hi


def test_a_panes_mirror_reflectance_rises_from_its_own_to_one_at_grazing() -> None:
    cos = np.cos(np.radians([0.0, 40.0, 70.0, 85.0, 90.0]))
    for r0 in (0.02, 0.45):
        r = pane_mirror_reflectance(r0, cos)
        assert r[0] == pytest.approx(r0) and r[-1] == pytest.approx(1.0)
        assert np.all(np.diff(r) > 0)


def _mirror_scene(wall_material: str) -> Scene:
    """A float-glass pane 5 m ahead turned 45 deg (its mirror sends a level ray along +y), a wall 4 m to the
    side of it facing the pane; nothing behind the pane."""
    names = list(Scene(objects=[]).material_names)
    s = math.sqrt(0.5)
    pane = panel("pane", "glass", names, (5.0, 0.0, 0.0), (s, s, 0.0), (0, 0, 1.0), 3)
    wall = panel("wall", wall_material, names, (5.0, 4.0, 0.0), (3.0, 0, 0), (0, 0, 3.0), 7)
    return Scene(
        objects=[pane, wall],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.identity(),
    )


def test_a_panes_mirror_traces_the_ghost_at_the_unfolded_range() -> None:
    """The caster's mirror ray off the pane meets the wall 4 m aside: path 9 m. The physics puts a
    ghost there, along the beam, behind the glass, at R^2 of the wall's echo (R: the pane's reflectance
    at 45 deg); with a black wall it is weaker by the paints' ratio."""
    scene = _mirror_scene("sign_sheeting")
    names = list(scene.material_names)
    trans = load_material_table().arrays(names, 905.0).transmission
    firings = Firings(
        ring=np.zeros(3, np.uint16),
        t_ns=np.arange(3, dtype=np.int64) * 1000,
        azimuth_deg=np.array([0.0, 0.5, -0.5]),
        elevation_deg=np.zeros(3),
        column=np.arange(3, dtype=np.int64),
    )
    hits = WorldSource(World(scene), 100.0, trans).hits(firings, 0, 3000)
    assert hits.glass_mirror_range_m is not None and hits.glass_mirror_material is not None
    assert hits.glass_mirror_range_m[0] == pytest.approx(9.0, abs=1e-3)
    assert np.all(hits.glass_mirror_material == names.index("sign_sheeting"))
    assert not np.isfinite(hits.range_m).any()  # nothing behind the glass: the direct path is empty

    preset = load_preset("VLP-16")
    pts = build_pipeline(preset, scene, seed=1).pipeline.scans(1)[0].points
    # the points along the beams through the pane (within 6 deg of +x; the wall itself lies 27-63 deg
    # aside) are the wall's ghosts, behind the glass at the unfolded range
    through = pts[(np.abs(np.degrees(np.arctan2(pts["y"], pts["x"]))) < 6.0) & (pts["x"] > 0)]
    ghost = through[through["segment"] == 7]
    assert len(ghost) > 20 and len(ghost) == len(through)
    rng = np.sqrt(ghost["x"] ** 2 + ghost["y"] ** 2 + ghost["z"] ** 2)
    assert np.all(np.abs(rng - 9.0) < 1.5)
    assert np.all(ghost["x"] > 5.5)

    dark = build_pipeline(preset, _mirror_scene("car_paint_black"), seed=1).pipeline.scans(1)[0].points
    dark_through = dark[(np.abs(np.degrees(np.arctan2(dark["y"], dark["x"]))) < 6.0) & (dark["x"] > 0)]
    assert (dark_through["segment"] == 7).sum() < len(ghost)


def test_rays_that_meet_no_glass_carry_no_mirror_fields() -> None:
    names = list(Scene(objects=[]).material_names)
    wall = panel("wall", "concrete", names, (8.0, 0.0, 0.0), (0, 50.0, 0), (0, 0, 20.0), 7)
    scene = Scene(
        objects=[wall],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.identity(),
    )
    trans = load_material_table().arrays(names, 905.0).transmission
    firings = Firings(
        ring=np.zeros(2, np.uint16),
        t_ns=np.arange(2, dtype=np.int64),
        azimuth_deg=np.array([0.0, 10.0]),
        elevation_deg=np.zeros(2),
        column=np.arange(2, dtype=np.int64),
    )
    hits = WorldSource(World(scene), 100.0, trans).hits(firings, 0, 2)
    assert hits.glass_mirror_range_m is None


def test_a_paints_base_answers_through_its_clear_coat_less_at_a_slant() -> None:
    """The base's echo crosses the lacquer twice: ((1 - F) / (1 - F0))^2 of the Lambertian echo, 0.90 at
    60 deg and 0.61 at 75 deg (n = 1.5); head-on the paints keep their measured reflectance (and their
    clear coat's specular lobe), and surfaces without a coat are Lambertian still."""
    from rt_lidar.physics.clear_coat import coat_factor
    from rt_lidar.physics.model import SensorPhysics

    assert coat_factor(1.0, 1.5) == pytest.approx(1.0)
    assert coat_factor(0.5, 1.5) == pytest.approx(0.900, abs=0.002)
    assert coat_factor(math.cos(math.radians(75.0)), 1.5) == pytest.approx(0.605, abs=0.003)
    names = list(Scene(objects=[]).material_names)
    echo = SensorPhysics.from_preset(load_preset("HDL-64E"), names).echo
    m = echo.materials
    for name, coated in (("car_paint_white", True), ("car_paint_black", True), ("interior", False)):
        i = names.index(name)
        cos = np.array([1.0, 0.5, math.cos(math.radians(75.0))], np.float32)
        _p, s = echo.power(np.full(3, 10.0, np.float32), cos, np.full(3, i, np.int16), np.ones(3, np.float32))
        lambert = m.diffuse[i] * cos
        want = coat_factor(cos, 1.5) if coated else np.ones(3)
        np.testing.assert_allclose(s[1:] / lambert[1:], want[1:], rtol=2e-3)
        assert s[0] >= m.diffuse[i]  # head-on: the measured reflectance (and the lacquer's own lobe)
