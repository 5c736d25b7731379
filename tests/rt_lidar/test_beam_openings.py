"""``--beam full``'s unasked probes toward an opening between two rings
(``rt_lidar.pipeline.beam_openings``): a window whose sill lies in a VLP-16 pulse's footprint while the
ring above meets the wall over the window's head. No neighbour pair marks the pulse (both ring
neighbours and both azimuth neighbours end on the wall at its range), so before these probes it kept one
ray where dense sampling's upper sub-rays pass the glass and answer from the room behind
(docs/realism.md changes 43, 66 and 69)."""

from __future__ import annotations

import math

import numpy as np
from beam_setup import full_beam_source

from rt_lidar.pipeline.beam_full import _SINGLE_RAY, bundle_pulses, full_beam_hits
from rt_lidar.pipeline.beam_openings import OPENING_MIN_M, opening_keys, ring_gaps
from rt_lidar.pipeline.beam_probe import probe_pattern
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World

WALL_M = 40.0
ROOM_M = 3.0
RING_DEG = 1.0  # the VLP-16 ring whose footprint the sill crosses (the next one up fires at 3 deg)


def _window_scene(sill: float, head: float) -> Scene:
    """A concrete wall ``WALL_M`` ahead (x = WALL_M) with a glass band from ``sill`` to ``head`` (m up)
    across it, and the room's back wall ``ROOM_M`` behind it."""
    names = list(Scene(objects=[]).material_names)

    def quad(name: str, x: float, z0: float, z1: float, material: str, seg: int) -> MeshObject:
        v = np.array([[x, -30, z0], [x, 30, z0], [x, 30, z1], [x, -30, z1]], np.float32)
        f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
        return MeshObject(name, v, f, np.full(2, names.index(material), np.int16), seg)

    objs = [
        quad("below", WALL_M, -12.0, sill, "concrete", 1),
        quad("pane", WALL_M, sill, head, "glass", 1),
        quad("above", WALL_M, head, 30.0, "concrete", 1),
        quad("room", WALL_M + ROOM_M, -12.0, 30.0, "interior", 2),
    ]
    return Scene(objects=objs, ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity())


def test_a_window_between_two_rings_gets_the_bundle() -> None:
    preset = load_preset("VLP-16")
    t1 = scan_period_ns(preset)
    # the sill a third of the footprint's upper rim above the 1 deg ring's central ray, the head below
    # the 3 deg ring's footprint
    _, plan0 = full_beam_source(preset, World(_window_scene(0.0, 1.0)), exit_aperture=True)
    probe_up = float(probe_pattern(plan0.pattern).offsets_rad[3, 1])
    assert probe_up > 0
    sill = WALL_M * math.tan(math.radians(RING_DEG) + probe_up / 3)
    head = WALL_M * math.tan(math.radians(RING_DEG + 2.0) - 2 * probe_up)
    assert head - sill > OPENING_MIN_M * 0.5  # a real opening, shorter than the rings' spacing there
    world = World(_window_scene(sill, head))
    source, plan = full_beam_source(preset, world, exit_aperture=True)
    source.use_full_beam(plan)
    f = firings_between(preset, 0, t1)
    facing = np.abs(np.remainder(f.azimuth_deg + 180, 360) - 180) < 3  # the wall flat enough
    sill_ring = facing & (np.abs(f.elevation_deg - RING_DEG) < 0.1)
    others = facing & ~sill_ring
    assert sill_ring.sum() > 20

    central = source.beam_hits(f, 0, t1, _SINGLE_RAY, None)
    # every central ray facing the wall ends on the wall, none on the glass: the pairs see no step
    assert np.isfinite(central.range_m[facing]).all() and (central.glass_material[facing] < 0).all()
    marked, _ = bundle_pulses(f, central, plan)
    assert not marked[sill_ring].any()  # what the code before these probes bundled: none of them

    hits = full_beam_hits(source, f, 0, t1, plan, None)
    chosen = np.zeros(len(f), bool)
    if hits.bundle is not None:
        chosen[hits.bundle.pulses] = True
    assert chosen[sill_ring].all()  # the upward probe passes the glass
    assert hits.bundle_counts is not None and hits.bundle_counts.by_reason["glass"] >= sill_ring.sum()
    assert chosen[others].mean() < 0.05  # the rest of the wall keeps one ray
    # the bundle sees the room through the glass: some of its sub-rays pass the pane
    assert hits.bundle is not None
    assert (hits.bundle.hits.glass_material >= 0).any()


def test_only_pulses_whose_ring_gap_could_hide_an_opening_probe_unasked() -> None:
    """The unasked probes go to pulses whose ring gap at their range exceeds OPENING_MIN_M, on that side
    only: none for a pulse that missed, none on the side without a ring, none for an HDL-64E's 0.4 deg
    rings at 40 m (0.28 m apart)."""
    for name, expect in (("VLP-16", True), ("HDL-64E", False)):
        preset = load_preset(name)
        f = firings_between(preset, 0, 5_000_000)
        n = len(f)
        below, above = ring_gaps(f)
        assert (below >= 0).all() and (above >= 0).all()
        assert (below == 0).sum() > 0 and (above == 0).sum() > 0  # the lowest and the highest ring
        rng = np.full(n, WALL_M, np.float32)
        rng[::5] = np.inf  # misses probe nowhere
        keys = opening_keys(np, rng, below, above)
        pulse, side = keys % n, keys // n
        assert bool(keys.size) == expect
        if expect:
            assert set(np.unique(side).tolist()) == {2, 3}
            assert np.isfinite(rng[pulse]).all()
            gap = np.where(side == 3, above[pulse], below[pulse])
            assert (gap * WALL_M > OPENING_MIN_M).all()
            assert abs(float(np.median(above[above > 0])) - math.radians(2.0)) < 1e-3
