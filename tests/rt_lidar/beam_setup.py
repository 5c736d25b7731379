"""The set-up the `--beam full` tests share: a preset's material arrays and caster source over a world,
and the full beam's plan for them."""

from __future__ import annotations

from rt_lidar.pipeline.beam_full import FullBeamPlan, full_beam_plan
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.beam import exit_m_per_rad
from rt_lidar.sensor.materials import MaterialArrays, load_material_table
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.unreal_bridge.world import World


def world_arrays(preset: SensorPreset, world: World) -> MaterialArrays:
    """The material arrays of ``world``'s materials at the preset's wavelength."""
    return load_material_table().arrays(world.material_names, preset.optics.wavelength_nm)


def world_source(preset: SensorPreset, world: World, *, exit_aperture: bool = False) -> WorldSource:
    """A source casting ``world`` for the preset, with the beam's exit aperture (its sub-rays' starts)
    when ``exit_aperture``."""
    transmission = world_arrays(preset, world).transmission
    if exit_aperture:
        return WorldSource(world, preset.range.max_m, transmission, exit_m_per_rad=exit_m_per_rad(preset))
    return WorldSource(world, preset.range.max_m, transmission)


def full_beam_source(
    preset: SensorPreset, world: World, *, exit_aperture: bool = False
) -> tuple[WorldSource, FullBeamPlan]:
    """:func:`world_source` and the `--beam full` plan of the preset over ``world``'s materials."""
    plan = full_beam_plan(preset, world_arrays(preset, world).retro_gain)
    return world_source(preset, world, exit_aperture=exit_aperture), plan
