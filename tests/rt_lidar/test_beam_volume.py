"""``--beam full`` inside tree crowns: a pulse whose central ray ends on a volume material (a material
with ``volume = true``: the leaves of a crown) gets the bundle, counted as the reason ``volume``."""

from __future__ import annotations

import numpy as np
from beam_street import street_full_beam

from rt_lidar.pipeline.beam_full import (
    REASONS,
    bundle_pulses,
    full_beam_hits,
    full_beam_plan,
    volume_marks,
)
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.materials import MaterialTable, load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World


def test_volume_is_a_property_of_the_material_table() -> None:
    """The packaged table flags the crowns' leaves; a table that flags another material makes that one a
    volume (nothing keyed on a name)."""
    table = load_material_table()
    arrays = table.arrays(table.names, 905.0)
    assert arrays.volume is not None and arrays.volume.dtype == np.bool_
    flagged = {n for n, v in zip(arrays.names, arrays.volume, strict=True) if v}
    assert "vegetation" in flagged and "concrete" not in flagged and "glass" not in flagged
    materials = {n: dict(m) for n, m in table.materials.items()}
    materials["concrete"]["volume"] = True
    materials["vegetation"]["volume"] = False
    other = MaterialTable(table.source, table.wavelengths_nm, materials).arrays(table.names, 905.0)
    assert other.volume is not None
    assert other.volume[table.names.index("concrete")] and not other.volume[table.names.index("vegetation")]


def test_volume_marks_take_the_hits_that_end_on_a_volume() -> None:
    flags = np.array([False, True, False])
    rng = np.array([5.0, 7.0, np.inf, 9.0, 3.0], np.float32)
    mat = np.array([1, 1, 1, 0, -1], np.int16)
    assert volume_marks(np, flags, rng, mat).tolist() == [True, True, False, False, False]
    assert not volume_marks(np, np.zeros(0, bool), rng, mat).any()  # no flags: no volume


def _wall_scene() -> Scene:
    """A flat concrete wall 10 m ahead, square on: no edge for the neighbour test inside it."""
    concrete = list(Scene(objects=[]).material_names).index("concrete")
    v = np.array([[10, -8, -5], [10, 8, -5], [10, 8, 5], [10, -8, 5]], np.float32)
    f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    wall = MeshObject("wall", v, f, np.full(2, concrete, np.int16), 1)
    return Scene(objects=[wall], ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity())


def test_a_wall_flagged_as_a_volume_gets_the_bundle_on_every_pulse() -> None:
    preset = load_preset("VLP-16")
    world = World(_wall_scene())
    arrays = load_material_table().arrays(world.material_names, preset.optics.wavelength_nm)
    source = WorldSource(world, preset.range.max_m, arrays.transmission)
    f = firings_between(preset, 0, 100_000_000)
    central = source.hits(f, 0, 100_000_000)
    inside = (np.abs(f.azimuth_deg) < 20) & (np.abs(f.elevation_deg) < 15) & np.isfinite(central.range_m)
    assert inside.sum() > 100
    solid = full_beam_plan(preset, arrays.retro_gain, volume=arrays.volume)
    chosen, reasons = bundle_pulses(f, central, solid)
    assert not chosen[inside].any() and reasons["volume"] == 0
    flags = np.asarray(arrays.volume).copy()
    flags[world.material_names.index("concrete")] = True
    as_volume = full_beam_plan(preset, arrays.retro_gain, volume=flags)
    chosen, reasons = bundle_pulses(f, central, as_volume)
    wall = np.isfinite(central.range_m)
    assert chosen[wall].all() and reasons["volume"] == int(wall.sum())
    # the cast with the probe: the same pulses, each cast as the bundle, counted as volume
    hits = full_beam_hits(source, f, 0, 100_000_000, as_volume, None)
    assert hits.bundle is not None and set(np.flatnonzero(wall)) <= set(hits.bundle.pulses.tolist())
    assert hits.bundle_counts is not None and hits.bundle_counts.by_reason["volume"] == int(wall.sum())


def test_on_the_street_every_pulse_ending_in_a_crown_is_bundled() -> None:
    """HDL-64E on the street, in-process: the pulses whose central ray ends on the crowns' leaves are
    among the bundled ones, and summary.json's reasons count them beside edge, glass and retro."""
    materials, sensed, summary = street_full_beam()
    leaves = materials.index("vegetation")
    in_crown = 0
    for s in sensed:
        hits = s.hits
        crown = np.flatnonzero(np.isfinite(hits.range_m) & (hits.material == leaves))
        in_crown += crown.size
        bundled = set() if hits.bundle is None else set(hits.bundle.pulses.tolist())
        assert set(crown.tolist()) <= bundled
    assert set(summary["bundled_by_reason"]) == set(REASONS)
    assert summary["bundled_by_reason"]["volume"] == in_crown > 0
