"""``--beam full``'s probe on one oblique plane (``rt_lidar.pipeline.beam_probe.on_one_plane``): a round
footprint on one slanted plane keeps one ray (the single-ray model broadens its echo, docs/realism.md
change 12) while its slant spans up to two pulse lengths; a steeper slant, a step onto another face and
an oval beam keep the bundle."""

from __future__ import annotations

import numpy as np
from beam_setup import full_beam_source

from rt_lidar.pipeline.beam_full import _SINGLE_RAY, bundle_pulses, full_beam_hits, full_beam_plan
from rt_lidar.pipeline.beam_probe import (
    PLANE_TOLERANCE_M,
    on_one_plane,
    plane_tolerance_m,
    probe_pattern,
)
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World


def _ground_scene(height_m: float) -> Scene:
    """One flat concrete floor ``height_m`` below the sensor, 400 m across: every downward ray meets
    one plane."""
    names = list(Scene(objects=[]).material_names)
    concrete = names.index("concrete")
    z = -height_m
    v = np.array([[-200, -200, z], [200, -200, z], [200, 200, z], [-200, 200, z]], np.float32)
    f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    floor = MeshObject("floor", v, f, np.full(2, concrete, np.int16), 1)
    return Scene(objects=[floor], ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity())


def _floor_bands(preset_name: str, height_m: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(gentle, steep, marked by the neighbour test, bundled) of every pulse of 0.1 s of ``preset_name``
    over the floor ``height_m`` below: gentle where the vertical probe's rim lies 0.45-0.65 m farther
    than the footprint's centre (beyond half a pulse length: 0.375 m), steep where 1.7-4 m (beyond two)."""
    preset = load_preset(preset_name)
    world = World(_ground_scene(height_m))
    source, plan = full_beam_source(preset, world, exit_aperture=True)
    source.use_full_beam(plan)
    t1 = 100_000_000
    f = firings_between(preset, 0, t1)
    hits = full_beam_hits(source, f, 0, t1, plan, None)
    chosen = np.zeros(len(f), bool)
    if hits.bundle is not None:
        chosen[hits.bundle.pulses] = True
    marked, _ = bundle_pulses(f, source.beam_hits(f, 0, t1, _SINGLE_RAY, None), plan)
    rim = float(np.abs(probe_pattern(plan.pattern).offsets_rad[:, 1]).max())
    el = np.radians(f.elevation_deg)
    with np.errstate(divide="ignore"):  # the probe's range step on a floor h below: h rim cos / sin^2
        step = height_m * rim * np.cos(el) / (np.sin(el) ** 2)
    gentle = (el < 0) & (step > 0.45) & (step < 0.65)
    steep = (el < 0) & (step > 1.7) & (step < 4.0)
    return gentle, steep, marked, chosen


def test_a_round_footprint_on_one_slanted_plane_keeps_one_ray() -> None:
    """HDL-64E (2 x 2 mrad) over a floor: where the footprint's rim lies 0.45-0.65 m farther than its
    centre the neighbour test marks the pulses and the probe, on the same plane, lets them go; where the
    rim lies more than two pulse lengths (1.5 m) away, they keep the bundle."""
    gentle, steep, marked, chosen = _floor_bands("HDL-64E", 2.0)
    assert marked[gentle].sum() > 50 and marked[steep].sum() > 50
    assert not chosen[gentle].any()
    assert chosen[steep & marked].mean() > 0.9


def test_an_oval_footprint_keeps_the_bundle_on_a_slant() -> None:
    """A VLP-16's beam is twice as wide as tall: the single-ray model's broadening (by the vertical
    divergence) would be too narrow on a wall met at a slant, so its slanted footprints keep the bundle."""
    pattern = full_beam_plan(load_preset("VLP-16"), np.zeros(1)).pattern
    assert plane_tolerance_m((5.5, 5.5), probe_pattern(pattern)) is None
    gentle, _, marked, chosen = _floor_bands("VLP-16", 1.5)
    assert marked[gentle].sum() > 20
    assert chosen[gentle & marked].mean() > 0.9


def test_on_one_plane_is_the_plane_s_distance() -> None:
    """On one plane ``range * cos(incidence)`` is the plane's distance from the ray's start; another face
    or another object is not the plane, nor is the same plane seen from starts farther apart than the
    tolerance."""
    c_rng = np.array([10.0, 10.0, 10.0, 10.0], np.float32)
    c_cos = np.full(4, 0.2, np.float32)
    q_cos = np.array([0.25, 0.25, 0.6, 0.25], np.float32)
    q_rng = np.float32(2.0) / q_cos  # the plane 2 m away: the first, third and fourth probes
    q_rng[1] += 0.5  # 0.5 m beyond it
    q_rng[2] = 8.0  # another face: 4.8 m
    same = np.array([True, True, True, False])
    got = on_one_plane(c_rng, c_cos, q_rng, q_cos, same, PLANE_TOLERANCE_M)
    assert got.tolist() == [True, False, False, False]
    hdl = probe_pattern(full_beam_plan(load_preset("HDL-64E"), np.zeros(1)).pattern)
    tol = plane_tolerance_m((5.5, 5.5), hdl)
    assert tol is not None and abs(tol - (5.5 * 1.4489e-3 + PLANE_TOLERANCE_M)) < 1e-4
