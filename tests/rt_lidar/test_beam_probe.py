"""``--beam full``'s probe (``rt_lidar.pipeline.beam_probe``): of two neighbours that straddle a depth
edge, the bundle goes to the pulse whose footprint the edge crosses, not to both; the marking pairs are
the same from the compiled choice and the NumPy code."""

from __future__ import annotations

import numpy as np
import pytest
from beam_setup import full_beam_source

from rt_lidar.backend.source_ops import CompiledSourceOps, NumpySourceOps
from rt_lidar.pipeline import beam_steps
from rt_lidar.pipeline.beam_full import (
    _SINGLE_RAY,
    bundle_pulses,
    central_rays,
    full_beam_hits,
    full_beam_plan,
)
from rt_lidar.pipeline.beam_probe import PROBE_SIDES, probe_pattern, probe_rows
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World

needs_compiled = pytest.mark.skipif(not beam_steps.available(), reason="_bundle_choice was not built")


def _wall_scene() -> Scene:
    """A wall 10 m ahead whose left half (y > 0) stands 4 m nearer: one vertical depth edge at azimuth 0."""
    names = list(Scene(objects=[]).material_names)
    concrete = names.index("concrete")

    def panel(name: str, x: float, y0: float, y1: float, seg: int) -> MeshObject:
        v = np.array([[x, y0, -5], [x, y1, -5], [x, y1, 5], [x, y0, 5]], np.float32)
        f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
        return MeshObject(name, v, f, np.full(2, concrete, np.int16), seg)

    objs = [panel("far", 10.0, -8.0, 0.0, 1), panel("near", 6.0, 0.0, 8.0, 2)]
    return Scene(objects=objs, ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity())


def test_the_bundle_goes_to_the_footprint_the_edge_crosses() -> None:
    """Beside a vertical depth edge, the pulses whose footprint (the bundle's largest horizontal offset)
    reaches across the edge get the bundle; their neighbours on the other side, which the neighbour test
    alone marks too, keep one ray."""
    preset = load_preset("HDL-64E")
    world = World(_wall_scene())
    source, plan = full_beam_source(preset, world)
    source.use_full_beam(plan)
    t1 = 100_000_000
    f = firings_between(preset, 0, t1)
    hits = full_beam_hits(source, f, 0, t1, plan, None)
    chosen = np.zeros(len(f), bool)
    assert hits.bundle is not None
    chosen[hits.bundle.pulses] = True
    marked, _ = bundle_pulses(f, source.beam_hits(f, 0, t1, _SINGLE_RAY, None), plan)

    rim = float(np.abs(probe_pattern(plan.pattern).offsets_rad[:2, 0]).max())
    facing = (np.abs(f.azimuth_deg) < 10) & (np.abs(f.elevation_deg) < 15)
    reach = np.abs(np.radians(f.azimuth_deg)) * np.cos(np.radians(f.elevation_deg))  # to the edge
    clear = np.abs(reach - rim) > 2e-4  # not within a hair of the rim
    crosses = facing & clear & (reach < rim)
    short = facing & clear & (reach > rim) & marked  # marked beside the edge, footprint short of it
    assert crosses.sum() > 20 and short.sum() > 20
    assert chosen[crosses].all()
    assert not chosen[short].any()
    assert chosen.sum() < marked.sum()


def test_each_marked_pulse_probes_toward_its_neighbour() -> None:
    """A pair along a ring probes horizontally (each toward the other), a pair across rings vertically."""
    preset = load_preset("HDL-64E")
    f = firings_between(preset, 0, 2_000_000)
    az, el = f.azimuth_deg, f.elevation_deg
    order = np.lexsort((az, f.ring))
    a, b = order[0], order[1]  # one ring, next in azimuth
    assert f.ring[a] == f.ring[b] and az[b] > az[a]
    up = np.flatnonzero((f.ring != f.ring[a]) & (np.abs(az - az[a]) < 0.05))
    c = up[np.argmin(np.where(el[up] > el[a], el[up] - el[a], np.inf))]  # the ring just above
    pulse, side = probe_rows(f, np.array([a, a], np.int64), np.array([b, c], np.int64))
    got = set(zip(pulse.tolist(), side.tolist(), strict=True))
    assert got == {(a, 1), (b, 0), (a, 3), (c, 2)}
    assert PROBE_SIDES == 4


@needs_compiled
@pytest.mark.parametrize(("preset", "frame"), [("HDL-64E", 1), ("VLP-16", 3)])
def test_the_marking_pairs_are_numpy_s(preset: str, frame: int) -> None:
    pipe = build_pipeline(preset, "street", seed=2).pipeline
    source = pipe.source
    assert isinstance(source, WorldSource)
    plan = full_beam_plan(pipe.preset, np.asarray(source.retro_gain), 19)
    t0, t1 = pipe.frame_interval(frame)
    f = firings_between(pipe.preset, t0, t1)
    central = central_rays(source.beam_hits(f, t0, t1, _SINGLE_RAY, None), plan)
    got = CompiledSourceOps().bundle_steps(f, central, plan)
    want = NumpySourceOps().bundle_steps(f, central, plan)
    assert got[1].size > 100
    for k in ("edge", "glass", "retro"):
        assert np.array_equal(got[0][k], want[0][k])
    assert np.array_equal(got[1], want[1]) and np.array_equal(got[2], want[2])


def test_a_probe_and_a_bundle_start_at_their_pulses_beam_origin() -> None:
    """``take_firings`` keeps each firing's beam origin (a preset with beam origins): the bundle and the
    probe rays start where the central ray does."""
    import dataclasses

    from rt_lidar.pipeline.beam_full import take_firings

    f = firings_between(load_preset("HDL-64E"), 0, 2_000_000)
    origin = np.random.default_rng(1).uniform(-0.1, 0.1, (len(f), 3)).astype(np.float32)
    f = dataclasses.replace(f, origin=origin)
    idx = np.arange(3, len(f), 7)
    got = take_firings(f, idx)
    assert got.origin is not None and got.origin.tobytes() == origin[idx].tobytes()
